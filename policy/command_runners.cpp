#include "policy/command_runners.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>

namespace temper {

namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A word quoted so that a shell reads it back as that one word.
std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Join(const std::vector<ShellWord>& words, size_t from, bool quoted) {
  std::string out;
  for (size_t k = from; k < words.size(); ++k) {
    if (!out.empty()) out += ' ';
    out += quoted ? Quote(words[k].text) : words[k].text;
  }
  return out;
}

bool IsShellProgram(const std::string& program) {
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"};
  return std::find(std::begin(kShells), std::end(kShells), program) != std::end(kShells);
}

// How one runner spells its options: the short ones that take a value (attached, -n5, or the next
// word) and the long ones that do (--name=value or --name value; getopt also takes an unambiguous
// prefix, --split for --split-string). Every other option is a flag.
struct OptionSpelling {
  std::string_view short_with_value;
  std::vector<std::string_view> long_with_value;
  // -N (a number) is an option, as in `nice -10 cmd`.
  bool numeric_option = false;
  // Long flags that a value-taking option's name starts with (--start beside --startas): an exact
  // name is that flag, not an abbreviation.
  std::vector<std::string_view> long_flags = {};
};

struct ParsedOptions {
  size_t next = 0;                          // the first word after the options (and a "--")
  std::map<std::string, std::string> seen;  // "-n" / "--adjustment" → value ("" for a flag)
  bool Has(std::string_view a, std::string_view b = {}) const {
    return seen.count(std::string(a)) || (!b.empty() && seen.count(std::string(b)));
  }
  std::string Value(std::string_view a, std::string_view b = {}) const {
    auto it = seen.find(std::string(a));
    if (it == seen.end() && !b.empty()) it = seen.find(std::string(b));
    return it == seen.end() ? "" : it->second;
  }
};

// Options from words[from], up to the first word that is not one (or just after "--").
ParsedOptions ParseOptions(const std::vector<ShellWord>& w, size_t from, const OptionSpelling& spelling) {
  ParsedOptions p;
  size_t i = from;
  while (i < w.size()) {
    const std::string& word = w[i].text;
    if (word == "--") {
      ++i;
      break;
    }
    if (word.size() < 2 || word[0] != '-') break;
    if (word[1] == '-') {
      const size_t eq = word.find('=');
      std::string name = word.substr(0, eq);
      std::string full = name;
      bool takes = false;
      const bool flag = std::any_of(spelling.long_flags.begin(), spelling.long_flags.end(),
                                    [&](std::string_view f) { return name == "--" + std::string(f); });
      for (std::string_view l : flag ? std::vector<std::string_view>{} : spelling.long_with_value) {
        const std::string candidate = "--" + std::string(l);
        if (name.size() > 3 && candidate.starts_with(name)) {
          full = candidate;
          takes = true;
          break;
        }
      }
      if (eq != std::string::npos) {
        p.seen[full] = word.substr(eq + 1);
      } else if (takes && i + 1 < w.size()) {
        p.seen[full] = w[++i].text;
      } else {
        p.seen[full] = "";
      }
      ++i;
      continue;
    }
    if (spelling.numeric_option &&
        std::all_of(word.begin() + 1, word.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      p.seen["-#"] = word.substr(1);
      ++i;
      continue;
    }
    // A cluster of short options: the first that takes a value takes the rest of the word, or
    // the next word.
    for (size_t k = 1; k < word.size(); ++k) {
      const std::string key = std::string("-") + word[k];
      if (spelling.short_with_value.find(word[k]) == std::string_view::npos) {
        p.seen[key] = "";
        continue;
      }
      if (k + 1 < word.size()) {
        p.seen[key] = word.substr(k + 1);
      } else if (i + 1 < w.size()) {
        p.seen[key] = w[++i].text;
      } else {
        p.seen[key] = "";
      }
      break;
    }
    ++i;
  }
  p.next = i;
  return p;
}

std::vector<ShellWord> From(const std::vector<ShellWord>& w, size_t k) {
  return k >= w.size() ? std::vector<ShellWord>{}
                       : std::vector<ShellWord>(w.begin() + static_cast<std::ptrdiff_t>(k), w.end());
}

RunnerStep Command(std::vector<ShellWord> rest) {
  RunnerStep s;
  s.kind = rest.empty() ? RunnerStep::Kind::kNothing : RunnerStep::Kind::kCommand;
  s.rest = std::move(rest);
  return s;
}

RunnerStep Script(std::string script) {
  RunnerStep s;
  s.kind = RunnerStep::Kind::kScript;
  s.script = std::move(script);
  return s;
}

RunnerStep Of(RunnerStep::Kind kind, std::string why = {}) {
  RunnerStep s;
  s.kind = kind;
  s.why = std::move(why);
  return s;
}

// Runners that take options, then `operands` words of their own, then the command.
RunnerStep Simple(const std::vector<ShellWord>& w, const OptionSpelling& spelling, size_t operands = 0) {
  ParsedOptions o = ParseOptions(w, 1, spelling);
  return Command(From(w, o.next + operands));
}

// sudo and doas: -s/-i run a shell, with the rest as its command line.
RunnerStep Sudo(const std::vector<ShellWord>& w, bool doas) {
  ParsedOptions o = doas ? ParseOptions(w, 1, {"uC", {}})
                         : ParseOptions(w, 1,
                                        {"CDgprtTUuR",
                                         {"user", "group", "prompt", "close-from", "chdir", "host", "role", "type",
                                          "other-user", "command-timeout", "chroot"}});
  if (o.Has("-s", "--shell") || o.Has("-i", "--login")) {
    if (o.next >= w.size()) return Of(RunnerStep::Kind::kStdinShell);
    return Script(Join(w, o.next, false));
  }
  return Command(From(w, o.next));
}

// env [OPTION]... [-] [NAME=VALUE]... [COMMAND [ARG]...]; -S STRING is split into words that
// take its place (assignments and the command among them).
RunnerStep Env(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1, {"uCS", {"unset", "chdir", "split-string"}});
  size_t next = o.next;
  if (next < w.size() && w[next].text == "-") ++next;
  if (o.Has("-S", "--split-string")) {
    std::string script = o.Value("-S", "--split-string");
    const std::string rest = Join(w, next, true);
    return Script(rest.empty() ? script : script + " " + rest);
  }
  return Command(From(w, next));
}

// su and runuser: -c hands a command line to the login shell (or -s SHELL); runuser -u USER runs
// the command itself; otherwise the words after the user are the shell's arguments.
RunnerStep Su(const std::vector<ShellWord>& w, bool runuser) {
  ParsedOptions o =
      ParseOptions(w, 1,
                   {runuser ? "cgGsuw" : "cgGsw",
                    {"command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"}});
  size_t next = o.next;
  if (runuser && o.Has("-u", "--user")) return Command(From(w, next));
  while (next < w.size() && (w[next].text == "-" || w[next].text == "-l")) ++next;
  const std::string shell = o.Has("-s", "--shell") ? o.Value("-s", "--shell") : "sh";
  if (next < w.size()) ++next;  // the user
  std::vector<ShellWord> rest{{shell, false}};
  if (o.Has("-c", "--command") || o.Has("--session-command")) {
    rest.push_back({"-c", false});
    rest.push_back({o.Has("-c", "--command") ? o.Value("-c", "--command") : o.Value("--session-command"), false});
  }
  for (size_t k = next; k < w.size(); ++k) rest.push_back(w[k]);
  return Command(std::move(rest));
}

// flock [options] FILE COMMAND..., flock [options] FILE -c STRING, flock [options] FD.
RunnerStep Flock(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1, {"wE", {"timeout", "wait", "conflict-exit-code"}});
  size_t next = o.next + 1;  // the lock file
  if (next < w.size() && (w[next].text == "-c" || w[next].text == "--command")) {
    return next + 1 < w.size() ? Script(w[next + 1].text) : Of(RunnerStep::Kind::kNothing);
  }
  return Command(From(w, next));
}

// watch runs its words joined by spaces through `sh -c` (with -x, as a command).
RunnerStep Watch(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1, {"nq", {"interval", "equexit"}});
  if (o.next >= w.size()) return Of(RunnerStep::Kind::kNothing);
  if (o.Has("-x", "--exec")) return Command(From(w, o.next));
  return Script(Join(w, o.next, false));
}

// chrt [options] PRIORITY COMMAND, taskset [options] MASK COMMAND; with -p they change a
// running process and run nothing.
RunnerStep PriorityRunner(const std::vector<ShellWord>& w, const OptionSpelling& spelling) {
  ParsedOptions o = ParseOptions(w, 1, spelling);
  if (o.Has("-p", "--pid") || o.Has("-m", "--max")) return Of(RunnerStep::Kind::kNothing);
  return Command(From(w, o.next + 1));
}

// xargs runs its command with words read from its input appended: when that command is a runner
// that would take them as its command, or a shell that would take them as a script, or the
// -I replacement names the program, the command is the input's.
RunnerStep Xargs(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1,
                                 {"aIEdLnPs",
                                  {"arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs",
                                   "max-chars", "process-slot-var"}});
  std::vector<ShellWord> rest = From(w, o.next);
  if (rest.empty()) return Command({{"echo", false}});
  std::string replace;
  if (o.Has("-I")) replace = o.Value("-I");
  else if (o.Has("--replace")) replace = o.Value("--replace").empty() ? "{}" : o.Value("--replace");
  else if (o.Has("-i")) replace = o.Value("-i").empty() ? "{}" : o.Value("-i");
  const std::string why = "xargs builds the command it runs from its input";
  std::vector<ShellWord> inner = rest;
  for (int depth = 0; depth < 8; ++depth) {
    if (inner.empty()) return Of(RunnerStep::Kind::kUnjudgeable, why);
    const std::string program = Basename(inner[0].text);
    if (!replace.empty() && inner[0].text.find(replace) != std::string::npos)
      return Of(RunnerStep::Kind::kUnjudgeable, why);
    if (program == "eval") return Of(RunnerStep::Kind::kUnjudgeable, why);
    if (IsShellProgram(program)) {
      bool has_c = false;
      for (size_t k = 1; k < inner.size(); ++k) {
        const std::string& a = inner[k].text;
        if (a == "-c" || (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.back() == 'c')) {
          has_c = true;
          if (!replace.empty() && k + 1 < inner.size() && inner[k + 1].text.find(replace) != std::string::npos) {
            return Of(RunnerStep::Kind::kUnjudgeable, why);
          }
        }
      }
      if (!has_c) return Of(RunnerStep::Kind::kUnjudgeable, why);  // the script file is named by the input
      break;
    }
    std::optional<RunnerStep> step = PeelRunner(inner);
    if (!step) break;
    if (step->kind == RunnerStep::Kind::kNothing || step->kind == RunnerStep::Kind::kStdinShell) {
      return Of(RunnerStep::Kind::kUnjudgeable, why);
    }
    if (step->kind != RunnerStep::Kind::kCommand) break;
    inner = step->rest;
  }
  return Command(std::move(rest));
}

// ssh [options] DESTINATION [COMMAND...]: the remote shell runs the words joined by spaces.
RunnerStep Ssh(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1, {"BbcDEeFIiJLlmOoPpQRSWw", {}});
  if (o.Has("-O") || o.Has("-N")) return Of(RunnerStep::Kind::kNothing);
  if (o.next + 1 >= w.size()) return Of(RunnerStep::Kind::kStdinShell);
  return Script(Join(w, o.next + 1, false));
}

// start-stop-daemon --start runs --startas (or --exec) with the words after "--".
RunnerStep StartStopDaemon(const std::vector<ShellWord>& w) {
  ParsedOptions o = ParseOptions(w, 1,
                                 {"xaunpgcrNPIkdsR",
                                  {"exec", "startas", "name", "pidfile", "user", "group", "chuid", "chroot", "chdir",
                                   "nicelevel", "procsched", "iosched", "umask", "signal", "retry", "output"},
                                  false,
                                  {"start", "stop", "status", "test"}});
  if (!o.Has("-S", "--start")) return Of(RunnerStep::Kind::kNothing);
  std::string program = o.Has("-a", "--startas") ? o.Value("-a", "--startas") : o.Value("-x", "--exec");
  if (program.empty()) return Of(RunnerStep::Kind::kNothing);
  std::vector<ShellWord> rest{{program, false}};
  for (size_t k = o.next; k < w.size(); ++k) rest.push_back(w[k]);
  return Command(std::move(rest));
}

}  // namespace

std::optional<RunnerStep> PeelRunner(const std::vector<ShellWord>& w) {
  if (w.empty()) return std::nullopt;
  const std::string p = Basename(w[0].text);
  using K = RunnerStep::Kind;
  if (p == "sudo") return Sudo(w, false);
  if (p == "doas") return Sudo(w, true);
  if (p == "env") return Env(w);
  if (p == "su") return Su(w, false);
  if (p == "runuser") return Su(w, true);
  if (p == "nohup" || p == "builtin" || p == "unbuffer" || p == "catchsegv") return Command(From(w, 1));
  if (p == "setsid") return Simple(w, {});
  if (p == "exec") return Simple(w, {"a", {}});
  if (p == "time") return Simple(w, {"fo", {"format", "output"}});
  if (p == "nice") return Simple(w, {"n", {"adjustment"}, true});
  if (p == "stdbuf") return Simple(w, {"ioe", {"input", "output", "error"}});
  if (p == "timeout") return Simple(w, {"sk", {"signal", "kill-after"}}, 1);
  if (p == "pkexec") return Simple(w, {"", {"user"}});
  if (p == "fakeroot") return Simple(w, {"lsib", {"lib", "faked"}});
  if (p == "cgexec") return Simple(w, {"g", {}});
  if (p == "systemd-cat")
    return Simple(w, {"tp", {"identifier", "priority", "stderr-priority", "level-prefix", "namespace"}});
  if (p == "systemd-inhibit") return Simple(w, {"", {"what", "who", "why", "mode"}});
  if (p == "faketime") return Simple(w, {"fm", {}}, 1);
  if (p == "valgrind" || p == "firejail") return Simple(w, {});
  if (p == "strace" || p == "ltrace") {
    ParsedOptions o =
        ParseOptions(w, 1, {"abeEIOoPpSsUuXAnLw", {"output", "expr", "attach", "string-limit", "user", "env"}});
    return Command(From(w, o.next));
  }
  if (p == "command") {
    if (w.size() > 1 && (w[1].text == "-v" || w[1].text == "-V")) return std::nullopt;  // a lookup, not a run
    return Simple(w, {});
  }
  if (p == "ionice") {
    ParsedOptions o = ParseOptions(w, 1, {"cnpPu", {"class", "classdata", "pid", "pgid", "uid"}});
    if (o.Has("-p", "--pid") || o.Has("-P", "--pgid") || o.Has("-u", "--uid")) return Of(K::kNothing);
    return Command(From(w, o.next));
  }
  if (p == "chrt") return PriorityRunner(w, {"TPD", {"sched-runtime", "sched-period", "sched-deadline"}});
  if (p == "taskset") return PriorityRunner(w, {"", {}});
  if (p == "chroot") {
    ParsedOptions o = ParseOptions(w, 1, {"", {"userspec", "groups"}});
    if (o.next + 1 >= w.size()) return Of(K::kStdinShell);
    return Command(From(w, o.next + 1));
  }
  if (p == "unshare" || p == "nsenter") {
    ParsedOptions o = p == "unshare" ? ParseOptions(w, 1,
                                                    {"SGRw",
                                                     {"setuid", "setgid", "root", "wd", "propagation", "setgroups",
                                                      "map-user", "map-group", "map-users", "map-groups"}})
                                     : ParseOptions(w, 1, {"tSG", {"target", "setuid", "setgid", "user-parent"}});
    if (o.next >= w.size()) return Of(K::kStdinShell);
    return Command(From(w, o.next));
  }
  if (p == "setpriv") {
    ParsedOptions o = ParseOptions(w, 1,
                                   {"",
                                    {"reuid", "regid", "ruid", "rgid", "euid", "egid", "groups", "inh-caps",
                                     "ambient-caps", "bounding-set", "securebits", "pdeathsig", "selinux-label",
                                     "apparmor-profile", "landlock-access", "landlock-rule", "rlimit", "ptracer"}});
    return Command(From(w, o.next));
  }
  if (p == "prlimit") {
    ParsedOptions o = ParseOptions(w, 1, {"p", {"pid"}});
    if (o.Has("-p", "--pid")) return Of(K::kNothing);
    return Command(From(w, o.next));
  }
  if (p == "flock") return Flock(w);
  if (p == "watch") return Watch(w);
  if (p == "xargs") return Xargs(w);
  if (p == "ssh") return Ssh(w);
  if (p == "start-stop-daemon") return StartStopDaemon(w);
  if (p == "sg") {
    if (w.size() < 3) return Of(K::kNothing);
    size_t k = 2;
    if (w[k].text == "-c") ++k;
    return k < w.size() ? Script(Join(w, k, false)) : Of(K::kNothing);
  }
  if (p == "script") {
    ParsedOptions o = ParseOptions(
        w, 1, {"cEIOBTm", {"command", "echo", "log-in", "log-out", "log-io", "log-timing", "logging-format"}});
    if (o.Has("-c", "--command")) return Script(o.Value("-c", "--command"));
    return Of(K::kStdinShell);
  }
  if (p == "busybox" || p == "toybox") {
    if (w.size() < 2 || w[1].text.starts_with("-")) return Of(K::kNothing);
    return Command(From(w, 1));
  }
  if (p == "ip") {
    // ip [options] netns exec NAME COMMAND, ip vrf exec NAME COMMAND.
    ParsedOptions o = ParseOptions(w, 1, {"nfb", {"netns", "family", "batch"}});
    size_t k = o.next;
    if (k + 2 < w.size() && (w[k].text == "netns" || w[k].text == "vrf") && w[k + 1].text == "exec") {
      return Command(From(w, k + 3));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace temper
