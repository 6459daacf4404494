// Splitting command lines into the programs they run: separators, substitutions, shells' -c
// scripts, wrappers peeled off, redirections and here-documents.
#include "policy/shell_split.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

std::vector<std::string> Programs(std::string_view line) {
  auto cmds = SplitShellCommand(line);
  INFO(line);
  if (!cmds.ok()) FAIL(cmds.status().message());
  std::vector<std::string> out;
  for (const SimpleCommand& c : cmds->commands) out.push_back(c.program);
  return out;
}

// The one command named `program` in `line`.
SimpleCommand Command(std::string_view line, std::string_view program) {
  auto cmds = SplitShellCommand(line);
  INFO(line);
  if (!cmds.ok()) FAIL(cmds.status().message());
  const SimpleCommand* found = nullptr;
  for (const SimpleCommand& c : cmds->commands) {
    if (c.program != program) continue;
    REQUIRE(found == nullptr);
    found = &c;
  }
  REQUIRE(found != nullptr);
  return *found;
}

std::string ErrorOf(std::string_view line) {
  auto cmds = SplitShellCommand(line);
  INFO(line);
  REQUIRE_FALSE(cmds.ok());
  CHECK(cmds.status().code() == StatusCode::kInvalidArgument);
  return cmds.status().message();
}

using Words = std::vector<std::string>;

}  // namespace

TEST_CASE("separators, pipes and groups each start a command") {
  CHECK(Programs("a; b && c || d | e & f\ng") == std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g"});
  CHECK(Programs("(cd /etc && ls) ; { echo x; }") == std::vector<std::string>{"cd", "ls", "echo"});
  auto cmds = SplitShellCommand("cat /etc/passwd | grep root");
  REQUIRE(cmds.ok());
  CHECK_FALSE(cmds->commands[0].stdin_from_pipe);
  CHECK(cmds->commands[1].stdin_from_pipe);
  CHECK(cmds->commands[1].args == std::vector<std::string>{"root"});
}

TEST_CASE("substitutions and scripts given to shells are parsed too") {
  CHECK(Programs("echo $(pidof sshd)") == std::vector<std::string>{"pidof", "echo"});
  CHECK(Programs("echo \"now `date`\"") == std::vector<std::string>{"date", "echo"});
  CHECK(Programs("bash -c 'systemctl stop sshd; true'") == std::vector<std::string>{"bash", "systemctl", "true"});
  // su hands -c's command line to the login shell.
  CHECK(Programs("su -c \"halt\" root") == std::vector<std::string>{"sh", "halt"});
  CHECK(Programs("eval reboot now") == std::vector<std::string>{"eval", "reboot"});
  CHECK(Programs("echo $((1 + 2))") == std::vector<std::string>{"echo"});
  CHECK(Programs("echo '$(reboot)'") == std::vector<std::string>{"echo"});  // single quotes: literal
}

TEST_CASE("wrappers are peeled to find the program that runs") {
  auto cmds = SplitShellCommand("sudo -u root -E env LANG=C nohup nice -n 5 timeout -s KILL 10 /usr/sbin/reboot -f");
  REQUIRE(cmds.ok());
  REQUIRE(cmds->commands.size() == 1);
  CHECK(cmds->commands[0].program == "reboot");
  CHECK(cmds->commands[0].args == std::vector<std::string>{"-f"});
  CHECK(cmds->commands[0].prefixes == std::vector<std::string>{"sudo", "env", "nohup", "nice", "timeout"});
  CHECK(Programs("FOO=1 BAR=2 command systemctl status") == std::vector<std::string>{"systemctl"});
  CHECK(Programs("command -v reboot") == std::vector<std::string>{"command"});  // a lookup, not a run
  CHECK(Programs("find /etc -name '*.conf' | xargs -0 -I{} grep -l x {}") == std::vector<std::string>{"find", "grep"});
}

TEST_CASE("quotes, escapes, redirections and here-documents") {
  auto cmds = SplitShellCommand("echo \"a b\" 'c d' e\\ f > /etc/issue 2>&1");
  REQUIRE(cmds.ok());
  REQUIRE(cmds->commands.size() == 1);
  CHECK(cmds->commands[0].args == std::vector<std::string>{"a b", "c d", "e f"});
  REQUIRE(cmds->commands[0].redirects.size() == 2);
  CHECK(cmds->commands[0].redirects[0].op == ">");
  CHECK(cmds->commands[0].redirects[0].target == "/etc/issue");
  CHECK(cmds->commands[0].redirects[1].op == "2>&");
  CHECK(cmds->commands[0].redirects[1].target == "1");

  // The body of a here-document is data: "reboot" inside it is not a command.
  auto h = SplitShellCommand("cat > /etc/motd <<'EOF'\nreboot\nshutdown now\nEOF\nls");
  REQUIRE(h.ok());
  REQUIRE(h->commands.size() == 2);
  CHECK(h->commands[0].program == "cat");
  CHECK(h->commands[1].program == "ls");

  auto only = SplitShellCommand("> /dev/sda");
  REQUIRE(only.ok());
  REQUIRE(only->commands.size() == 1);
  CHECK(only->commands[0].program.empty());
  CHECK(only->commands[0].redirects[0].target == "/dev/sda");
  CHECK(Programs("ls # ; reboot") == std::vector<std::string>{"ls"});
}

TEST_CASE("what a shell would reject is an error with the column") {
  auto a = SplitShellCommand("echo 'unterminated");
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.status().message(), Catch::Contains("unterminated ' quote at column 6"));
  auto b = SplitShellCommand("echo $(ls");
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.status().message(), Catch::Contains("unterminated $("));
  auto c = SplitShellCommand("echo `ls");
  REQUIRE_FALSE(c.ok());
  auto d = SplitShellCommand("cat >");
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Catch::Contains("without a target"));
  std::string deep = "echo ";
  for (int i = 0; i < 20; ++i) deep += "$(";
  deep += std::string(20, ')');
  auto e = SplitShellCommand(deep);
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.status().message(), Catch::Contains("nest too deeply"));
}

TEST_CASE("process substitutions are parsed like $(…) and keep their text") {
  CHECK(Programs("readarray -t a < <(sed -n p /etc/x)") == Words{"sed", "readarray"});
  SimpleCommand r = Command("readarray -t a < <(sed -n p /etc/x)", "readarray");
  REQUIRE(r.redirects.size() == 1);
  CHECK(r.redirects[0].op == "<");
  CHECK(r.redirects[0].target == "<(sed -n p /etc/x)");
  CHECK(r.stdin_from_pipe);  // < <(…) feeds another command's output, as | does
  CHECK(Programs("diff <(ls /a) >(tee /b)") == Words{"ls", "tee", "diff"});
  CHECK(Command("diff <(ls /a) >(tee /b)", "diff").args == Words{"<(ls /a)", ">(tee /b)"});
  CHECK(Programs("cat <(grep x <(reboot))") == Words{"reboot", "grep", "cat"});
  CHECK(Command("echo a<(true)", "echo").args == Words{"a<(true)"});  // bash substitutes mid-word too
  // SSG's dconf fixes: a pipeline continued over lines inside <(…).
  CHECK(Programs("readarray -t F < <(grep -r \"x\" \"/etc/dconf/db/\" \\\n | grep -v 'distro' | cut -d: -f1)") ==
        Words{"grep", "grep", "cut", "readarray"});
  CHECK_THAT(ErrorOf("cat <(ls"), Catch::Contains("an unterminated <( at column 5"));
}

TEST_CASE("double brackets ([[ ]]) hold regexes, < and > as data and still run their substitutions") {
  CHECK(Programs("[[ $x =~ ^(a|b)[0-9]+$ ]] && echo y") == Words{"[[", "echo"});
  CHECK(Command("[[ $x =~ ^(a|b)[0-9]+$ ]] && echo y", "[[").args == Words{"$x", "=~", "^(a|b)[0-9]+$"});
  CHECK(Programs("[[ $a < $b || -n $(pidof sshd) ]]; reboot") == Words{"pidof", "[[", "reboot"});
  CHECK(Programs("if [[ \"$x\" == ']]' ]]; then ls; fi") == Words{"[[", "ls"});
  CHECK(Programs("x=$([[ $A ]] && echo \" $A\") || /bin/true") == Words{"[[", "echo", "true"});
  CHECK(Programs("[[ -f a &&\n -f b ]]") == Words{"[["});
  CHECK_THAT(ErrorOf("[[ -n x"), Catch::Contains("an unterminated '[[' at column 1"));
  CHECK_THAT(ErrorOf("echo; [[ -n x]]"), Catch::Contains("an unterminated '[[' at column 7"));
}

TEST_CASE("arithmetic is data, but $(…) inside it runs") {
  CHECK(Programs("echo $(( 1 + (2 * 3) ))") == Words{"echo"});
  CHECK(Command("echo $(( 1 + (2 * 3) ))", "echo").args == Words{"$(( 1 + (2 * 3) ))"});
  CHECK(Programs("(( n++ )) && ls") == Words{"((", "ls"});
  CHECK(Programs("echo $(( $(reboot) + 1 ))") == Words{"reboot", "echo"});
  CHECK(Programs("(( $(halt) ))") == Words{"halt", "(("});
  CHECK(Programs("for ((i = 0; i < 3; i++)); do reboot; done") == Words{"reboot"});
  // "$((" that does not close with "))" is a command substitution holding a subshell, as in bash.
  CHECK(Programs("echo $((cd /tmp; ls) )") == Words{"cd", "ls", "echo"});
  CHECK(Programs("((cd /tmp; ls) )") == Words{"cd", "ls"});
  CHECK_THAT(ErrorOf("for ((i = 0; i < 3; i++); do ls; done"), Catch::Contains("without '))'"));
}

TEST_CASE("parameter expansions keep }, ) and quotes inside them") {
  const std::string line = "echo ${x//\\//_} ${y:-)} \"${z:-\"a b\"}\" ${w// /} \"${v:-'}'}\"";
  CHECK(Command(line, "echo").args == Words{"${x//\\//_}", "${y:-)}", "${z:-\"a b\"}", "${w// /}", "${v:-'}'}"});
  CHECK(Programs("echo ${w:-$(reboot)} \"${#a[@]}\"") == Words{"reboot", "echo"});
  CHECK(Programs("echo \"${x:-`halt`}\"") == Words{"halt", "echo"});
  CHECK_THAT(ErrorOf("echo ${x:-a"), Catch::Contains("an unterminated ${ at column 6"));
}

TEST_CASE("here-document bodies and here-strings are data") {
  // An audit rule that names /sbin/reboot is written, not run.
  auto audit = SplitShellCommand(
      "cat >> /etc/audit/rules.d/stig.rules <<EOF\n-w /sbin/reboot -p x -k power\nshutdown now\nEOF\naugenrules "
      "--load");
  REQUIRE(audit.ok());
  REQUIRE(audit->commands.size() == 2);
  CHECK(audit->commands[0].program == "cat");
  CHECK(audit->commands[1].program == "augenrules");
  CHECK(Programs("cat <<-'EOF'\n\treboot\n\tEOF\nls") == Words{"cat", "ls"});
  CHECK(Programs("cat <<A <<B\nreboot\nA\nhalt\nB\nls") == Words{"cat", "ls"});
  CHECK(Programs("grep -q reboot <<< \"$x\"; read -a a <<< $y") == Words{"grep", "read"});
  CHECK(Command("grep -q reboot <<< \"$x\"", "grep").redirects[0].op == "<<<");
  // A heredoc inside $(…), with a ) and a quote in its body.
  CHECK(Programs("x=$(cat <<EOF\nreboot ) don't\nEOF\n)\nls") == Words{"cat", "ls"});
  // Started inside $(…) on one line: bash reads the body after that line.
  CHECK(Programs("echo $(cat <<EOF) x\nreboot\nEOF\nls") == Words{"cat", "echo", "ls"});
  // An unquoted delimiter's body expands: its substitutions run; a quoted one's do not.
  CHECK(Programs("cat <<EOF\nkeep $(reboot) and `halt` but \\$(not)\nEOF") == Words{"cat", "reboot", "halt"});
  CHECK(Programs("cat <<'EOF'\n$(reboot)\nEOF") == Words{"cat"});
  CHECK(Programs("cat <<\\EOF\n$(reboot)\nEOF") == Words{"cat"});
}

TEST_CASE("a here-document or here-string given to a shell is its script") {
  CHECK(Programs("bash <<'EOF'\necho hi\nsystemctl stop sshd\nEOF\nls") == Words{"bash", "echo", "systemctl", "ls"});
  CHECK(Programs("sudo bash -s <<< 'reboot'") == Words{"bash", "reboot"});
  CHECK(Programs("bash -o pipefail <<EOF\nhalt\nEOF") == Words{"bash", "halt"});
  CHECK(Programs("su - root <<EOF\npoweroff\nEOF") == Words{"sh", "poweroff"});
  // A shell that runs a named script reads the heredoc as that script's input: data.
  CHECK(Programs("bash /tmp/fix.sh <<EOF\nreboot\nEOF") == Words{"bash"});
  CHECK_THAT(ErrorOf("bash <<EOF\necho 'x\nEOF"),
             Catch::Contains("an unterminated ' quote at column 6 of the here-document at column 12"));
}

TEST_CASE("case items run their commands, patterns are data") {
  CHECK(Programs("case \"$1\" in start|stop) systemctl $1 x;; *) reboot;; esac") == Words{"systemctl", "reboot"});
  CHECK(Programs("case x in\n  (a) ls ;&\n  b) pwd ;;&\n  reboot) echo no\nesac; date") ==
        Words{"ls", "pwd", "echo", "date"});
  CHECK(Programs("echo $(case a in a) hostname;; esac)") == Words{"hostname", "echo"});
  CHECK(Programs("case $(uname) in Linux) ;; esac") == Words{"uname"});
  CHECK_THAT(ErrorOf("case x in a ls;; esac"), Catch::Contains("a case pattern without ')' at column 13"));
  CHECK_THAT(ErrorOf("case x in a) ls;;"), Catch::Contains("a 'case' without 'esac' at column 1"));
  CHECK_THAT(ErrorOf("case x a) ls;; esac"), Catch::Contains("a 'case' without 'in' at column 8"));
  CHECK_THAT(ErrorOf("ls;; pwd"), Catch::Contains("';;' outside a case statement at column 3"));
}

TEST_CASE("function bodies and if/while/until/for bodies are commands") {
  CHECK(Programs("f() { reboot; }; f") == Words{"reboot", "f"});
  CHECK(Programs("replace_or_append() {\n  sed -i s/a/b/ \"$1\"\n}\n") == Words{"sed"});
  CHECK(Programs("function g { halt; }") == Words{"halt"});
  CHECK(Programs("function h() (poweroff)") == Words{"poweroff"});
  CHECK(Programs("if true; then reboot; elif false; then halt; else poweroff; fi") ==
        Words{"true", "reboot", "false", "halt", "poweroff"});
  CHECK(Programs("if ! grep -q x /etc/y; then echo x >> /etc/y; fi") == Words{"grep", "echo"});
  CHECK(Programs("while read -r l; do echo \"$l\"; done < /etc/x") == Words{"read", "echo", ""});
  CHECK(Programs("until false; do :; done") == Words{"false", ":"});
  CHECK(Programs("for f in /etc/*.conf; do chmod 0600 \"$f\"; done") == Words{"chmod"});
  CHECK(Programs("for x in $(reboot); do :; done") == Words{"reboot", ":"});
  CHECK(Programs("select x in a b; do break; done") == Words{"break"});
  CHECK(Programs("{ time -p { reboot; }; } 2>/dev/null") == Words{"reboot", ""});
  CHECK(Programs("coproc NAME { halt; }") == Words{"halt"});
  CHECK(Programs("coproc reboot") == Words{"reboot"});
  CHECK(Programs("'if' x") == Words{"if"});  // quoted: a program named if, not the keyword
  CHECK(Programs("echo if then fi done") == Words{"echo"});
  CHECK_THAT(ErrorOf("if true; then ls"), Catch::Contains("an 'if' without 'fi' at column 1"));
  CHECK_THAT(ErrorOf("ls; fi"), Catch::Contains("'fi' without a matching 'if' at column 5"));
  CHECK_THAT(ErrorOf("while true; do ls"), Catch::Contains("a loop without 'done' at column 1"));
  CHECK_THAT(ErrorOf("ls; done"), Catch::Contains("'done' without a matching loop at column 5"));
  CHECK_THAT(ErrorOf("then ls"), Catch::Contains("'then' outside an 'if' at column 1"));
  CHECK_THAT(ErrorOf("{ ls;"), Catch::Contains("a '{' without '}' at column 1"));
  CHECK_THAT(ErrorOf("(ls"), Catch::Contains("a '(' without ')' at column 1"));
  CHECK_THAT(ErrorOf("echo )"), Catch::Contains("a ')' without a matching '(' at column 6"));
  CHECK_THAT(ErrorOf("echo (x)"), Catch::Contains("an unexpected '(' at column 6"));
  CHECK_THAT(ErrorOf("echo $(if true; then ls)"), Catch::Contains("an 'if' without 'fi' at column 8"));
}

TEST_CASE("comments, continuations, arrays, ANSI-C quotes and find -exec") {
  CHECK(Command("echo a#b # reboot", "echo").args == Words{"a#b"});
  CHECK(Programs("ls; # reboot\nhalt #") == Words{"ls", "halt"});
  CHECK(Programs("sys\\\ntemctl stop sshd") == Words{"systemctl"});
  CHECK(Command("echo a \\\n  b", "echo").args == Words{"a", "b"});
  CHECK(Programs("a=(x \"$(reboot)\" y); a+=(z)\nb=(\n  1 # one\n  2\n)") == Words{"reboot"});
  CHECK(Programs("$'\\x72eboot' now; $'\\162\\145boot'; $'\\u0068alt'") == Words{"reboot", "reboot", "halt"});
  CHECK(Programs("find /etc -type f -exec chmod 0600 {} + -exec reboot \\;") == Words{"find", "chmod", "reboot"});
  CHECK(Programs("find / -xdev -perm -4000 -type f") == Words{"find"});
  auto fd = SplitShellCommand("exec 3>&- {lock}>/run/x.lock");
  REQUIRE(fd.ok());
  REQUIRE(fd->commands.size() == 1);
  REQUIRE(fd->commands[0].redirects.size() == 2);
  CHECK(fd->commands[0].redirects[0].op == "3>&");
  CHECK(fd->commands[0].redirects[0].target == "-");
  CHECK(fd->commands[0].redirects[1].op == "{lock}>");
  CHECK(fd->commands[0].redirects[1].target == "/run/x.lock");
  CHECK_THAT(ErrorOf("echo $'abc"), Catch::Contains("an unterminated $' quote at column 6"));
  CHECK_THAT(ErrorOf("a=(x; y)"), Catch::Contains("an unexpected ';' in an array at column 5"));
  CHECK_THAT(ErrorOf("echo `ls '`"), Catch::Contains("an unterminated ' quote at column 4 of the `…` at column 6"));
  CHECK_THAT(ErrorOf("bash -c 'if x; then y'"),
             Catch::Contains("an 'if' without 'fi' at column 1 of the script given to bash"));
}

TEST_CASE("runners are peeled, and the command lines they hand to a shell are parsed") {
  CHECK(Programs("env -S 'systemctl stop ssh'") == Words{"env", "systemctl"});
  CHECK(Programs("flock /run/x -c 'reboot'") == Words{"flock", "reboot"});
  CHECK(Programs("watch -n 1 busybox reboot") == Words{"watch", "reboot"});
  CHECK(Programs("unshare -m setsid -f chrt -f 1 taskset -c 0 reboot") == Words{"reboot"});
  CHECK(Command("unshare -m setsid -f chrt -f 1 taskset -c 0 reboot", "reboot").prefixes ==
        Words{"unshare", "setsid", "chrt", "taskset"});
  CHECK(Command("env -i X=1 /sbin/reboot", "reboot").program_word == "/sbin/reboot");
  CHECK(Command("env -i X=1 /sbin/reboot", "reboot").environment[0].name == "X");
  CHECK_THAT(Command("echo x | xargs sudo", "xargs").unjudgeable, Catch::Contains("from its input"));
  CHECK_THAT(Command("find / -exec {} \\;", "{}").unjudgeable, Catch::Contains("runs the files it finds"));
  CHECK(Programs("trap 'reboot' EXIT; alias ll='halt'") == Words{"trap", "reboot", "alias", "halt"});
}

TEST_CASE("assignments are listed, with their values and whether they are computed") {
  auto parsed = SplitShellCommand(
      "A=/usr/bin/x; B=(sed -i); B+=(-E); C=$(date); for f in a b; do :; done; "
      "read -r D; export E=1; X=1 ls");
  REQUIRE(parsed.ok());
  const auto& a = parsed->assignments;
  REQUIRE(a.size() == 7);
  CHECK((a[0].name == "A" && a[0].values == Words{"/usr/bin/x"} && !a[0].computed));
  CHECK((a[1].name == "B" && a[1].values == Words{"sed", "-i"}));
  CHECK((a[2].name == "B" && a[2].append && a[2].values == Words{"-E"}));
  CHECK((a[3].name == "C" && a[3].computed));
  CHECK((a[4].name == "f" && a[4].alternatives && a[4].values == Words{"a", "b"}));
  CHECK((a[5].name == "D" && a[5].computed));
  CHECK((a[6].name == "E" && a[6].values == Words{"1"}));
  // X=1 belongs to ls's environment, not to the shell.
  CHECK(Command("X=1 ls", "ls").environment.size() == 1);
}

TEST_CASE("computed words, async commands, function bodies and pipes are marked") {
  SimpleCommand c = Command("\"$X\" stop ssh", "$X");
  CHECK(c.program_computed);
  CHECK(Command("'$X' stop", "$X").program_computed == false);  // single quotes: a literal name
  CHECK(Command("echo a \"$b\" 'c'", "echo").args_expanded == std::vector<bool>{false, true, false});
  auto bomb = SplitShellCommand("f(){ f | f & }; f");
  REQUIRE(bomb.ok());
  REQUIRE(bomb->commands.size() == 3);
  CHECK((bomb->commands[0].function == "f" && bomb->commands[0].async));
  CHECK((bomb->commands[1].function == "f" && bomb->commands[1].async));
  CHECK((bomb->commands[2].function.empty() && !bomb->commands[2].async));
  auto group = SplitShellCommand("g() { { g; } & }; function h { (h) | cat; }");
  REQUIRE(group.ok());
  CHECK((group->commands[0].program == "g" && group->commands[0].function == "g" && group->commands[0].async));
  CHECK((group->commands[1].program == "h" && group->commands[1].function == "h" && group->commands[1].async));
  auto pipe = SplitShellCommand("echo x | tee /etc/y; { echo a; } | tee /etc/z");
  REQUIRE(pipe.ok());
  CHECK(pipe->commands[1].piped_from == std::optional<size_t>(0));
  CHECK_FALSE(pipe->commands[3].piped_from.has_value());  // a group's output: not one command's
}

TEST_CASE("here-document and here-string bodies stay with their redirection") {
  SimpleCommand c = Command("cat > /etc/cron.d/x <<-'EOF'\n\t* * * * * root ls\nEOF\n", "cat");
  REQUIRE(c.redirects.size() == 2);
  CHECK(c.redirects[1].body == "* * * * * root ls\n");
  CHECK_FALSE(c.redirects[1].body_expanded);
  SimpleCommand e = Command("cat <<EOF\n$x\nEOF", "cat");
  CHECK(e.redirects[0].body_expanded);
  SimpleCommand s = Command("tee /etc/x <<< \"$y\"", "tee");
  CHECK(s.redirects[0].body == "$y");
  CHECK(s.redirects[0].body_expanded);
  CHECK(Command("echo > \"$F\"", "echo").redirects[0].target_expanded);
}

TEST_CASE("a shell's script file, and a program named by a variable respelled") {
  CHECK(ShellScriptFile(Command("bash -e -o pipefail /tmp/x a", "bash")) == std::optional<std::string>("/tmp/x"));
  CHECK(ShellScriptFile(Command("sh -- x", "sh")) == std::optional<std::string>("x"));
  CHECK_FALSE(ShellScriptFile(Command("bash -s x", "bash")).has_value());
  CHECK_FALSE(ShellScriptFile(Command("bash -c 'ls'", "bash")).has_value());
  CHECK_FALSE(ShellScriptFile(Command("ls /tmp/x", "ls")).has_value());
  auto respelt = Respell(Command("\"$S\" reboot", "$S"), {"sudo", "-u", "root"});
  REQUIRE(respelt.ok());
  REQUIRE(respelt->commands.size() == 1);
  CHECK(respelt->commands[0].program == "reboot");
  CHECK(respelt->commands[0].prefixes == Words{"sudo"});
}
