// Splitting command lines into the programs they run: separators, substitutions, shells' -c
// scripts, wrappers peeled off, redirections and here-documents.
#include "roles/shell_split.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

std::vector<std::string> Programs(std::string_view line) {
  auto cmds = SplitShellCommand(line);
  REQUIRE(cmds.ok());
  std::vector<std::string> out;
  for (const SimpleCommand& c : *cmds) out.push_back(c.program);
  return out;
}

}  // namespace

TEST_CASE("separators, pipes and groups each start a command") {
  CHECK(Programs("a; b && c || d | e & f\ng") == std::vector<std::string>{"a", "b", "c", "d", "e", "f", "g"});
  CHECK(Programs("(cd /etc && ls) ; { echo x; }") == std::vector<std::string>{"cd", "ls", "echo"});
  auto cmds = SplitShellCommand("cat /etc/passwd | grep root");
  REQUIRE(cmds.ok());
  CHECK_FALSE((*cmds)[0].stdin_from_pipe);
  CHECK((*cmds)[1].stdin_from_pipe);
  CHECK((*cmds)[1].args == std::vector<std::string>{"root"});
}

TEST_CASE("substitutions and scripts given to shells are parsed too") {
  CHECK(Programs("echo $(pidof sshd)") == std::vector<std::string>{"pidof", "echo"});
  CHECK(Programs("echo \"now `date`\"") == std::vector<std::string>{"date", "echo"});
  CHECK(Programs("bash -c 'systemctl stop sshd; true'") == std::vector<std::string>{"bash", "systemctl", "true"});
  CHECK(Programs("su -c \"halt\" root") == std::vector<std::string>{"su", "halt"});
  CHECK(Programs("eval reboot now") == std::vector<std::string>{"eval", "reboot"});
  CHECK(Programs("echo $((1 + 2))") == std::vector<std::string>{"echo"});
  CHECK(Programs("echo '$(reboot)'") == std::vector<std::string>{"echo"});  // single quotes: literal
}

TEST_CASE("wrappers are peeled to find the program that runs") {
  auto cmds = SplitShellCommand("sudo -u root -E env LANG=C nohup nice -n 5 timeout -s KILL 10 /usr/sbin/reboot -f");
  REQUIRE(cmds.ok());
  REQUIRE(cmds->size() == 1);
  CHECK((*cmds)[0].program == "reboot");
  CHECK((*cmds)[0].args == std::vector<std::string>{"-f"});
  CHECK((*cmds)[0].prefixes == std::vector<std::string>{"sudo", "env", "nohup", "nice", "timeout"});
  CHECK(Programs("FOO=1 BAR=2 command systemctl status") == std::vector<std::string>{"systemctl"});
  CHECK(Programs("command -v reboot") == std::vector<std::string>{"command"});  // a lookup, not a run
  CHECK(Programs("find /etc -name '*.conf' | xargs -0 -I{} grep -l x {}") == std::vector<std::string>{"find", "grep"});
}

TEST_CASE("quotes, escapes, redirections and here-documents") {
  auto cmds = SplitShellCommand("echo \"a b\" 'c d' e\\ f > /etc/issue 2>&1");
  REQUIRE(cmds.ok());
  REQUIRE(cmds->size() == 1);
  CHECK((*cmds)[0].args == std::vector<std::string>{"a b", "c d", "e f"});
  REQUIRE((*cmds)[0].redirects.size() == 2);
  CHECK((*cmds)[0].redirects[0].op == ">");
  CHECK((*cmds)[0].redirects[0].target == "/etc/issue");
  CHECK((*cmds)[0].redirects[1].op == "2>&");
  CHECK((*cmds)[0].redirects[1].target == "1");

  // The body of a here-document is data: "reboot" inside it is not a command.
  auto h = SplitShellCommand("cat > /etc/motd <<'EOF'\nreboot\nshutdown now\nEOF\nls");
  REQUIRE(h.ok());
  REQUIRE(h->size() == 2);
  CHECK((*h)[0].program == "cat");
  CHECK((*h)[1].program == "ls");

  auto only = SplitShellCommand("> /dev/sda");
  REQUIRE(only.ok());
  REQUIRE(only->size() == 1);
  CHECK((*only)[0].program.empty());
  CHECK((*only)[0].redirects[0].target == "/dev/sda");
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
