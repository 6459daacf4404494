#include "policy/command_policy.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "policy/command_rules.h"
#include "policy/execution_paths.h"
#include "policy/sed_script.h"
#include "policy/shell_split.h"
#include "policy/shell_variables.h"

namespace temper {

namespace {

// Scripts that run scripts (a fix script sourcing a helper): deeper is not a fix anyone writes.
constexpr int kMaxScriptDepth = 4;
// Words of a variable's value a program may stand for, and the value lists judged per command.
constexpr size_t kMaxCandidates = 16;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool IsShell(const std::string& p) {
  return p == "sh" || p == "bash" || p == "dash" || p == "zsh" || p == "ksh" || p == "mksh" || p == "ash";
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsWriteRedirect(const Redirect& r) {
  return r.op.find('>') != std::string::npos && !r.op.ends_with(">&") && r.op != "<>";
}

// Programs that only read the files they name, or change only their metadata or existence: a
// file that runs later named among their arguments is not written with new content.
bool LeavesContentAlone(const std::string& p) {
  static constexpr std::string_view kPrograms[] = {"cat",
                                                   "grep",
                                                   "egrep",
                                                   "fgrep",
                                                   "zgrep",
                                                   "head",
                                                   "tail",
                                                   "less",
                                                   "more",
                                                   "wc",
                                                   "stat",
                                                   "ls",
                                                   "test",
                                                   "[",
                                                   "[[",
                                                   "file",
                                                   "diff",
                                                   "cmp",
                                                   "md5sum",
                                                   "sha1sum",
                                                   "sha256sum",
                                                   "sha512sum",
                                                   "cksum",
                                                   "readlink",
                                                   "realpath",
                                                   "dirname",
                                                   "basename",
                                                   "lsattr",
                                                   "getfacl",
                                                   "visudo",
                                                   "systemd-analyze",
                                                   "sshd",
                                                   "echo",
                                                   "printf",
                                                   "sort",
                                                   "uniq",
                                                   "cut",
                                                   "tr",
                                                   "awk",
                                                   "gawk",
                                                   "mawk",
                                                   "sed",
                                                   "find",
                                                   "chmod",
                                                   "chown",
                                                   "chgrp",
                                                   "chattr",
                                                   "setfacl",
                                                   "touch",
                                                   "rm",
                                                   "rmdir",
                                                   "unlink",
                                                   "mkdir",
                                                   "truncate",
                                                   "run-parts",
                                                   "systemctl",
                                                   "service",
                                                   "update-rc.d",
                                                   "dpkg",
                                                   "dpkg-query",
                                                   "apt",
                                                   "apt-get",
                                                   "apt-cache",
                                                   "id",
                                                   "getent",
                                                   "restorecon",
                                                   "chcon",
                                                   "source",
                                                   ".",
                                                   "true",
                                                   "false",
                                                   ":",
                                                   "sh",
                                                   "bash",
                                                   "dash",
                                                   "which",
                                                   "type",
                                                   "command",
                                                   "hash",
                                                   "xargs",
                                                   "tee",
                                                   "cp",
                                                   "mv",
                                                   "install",
                                                   "ln",
                                                   "dd",
                                                   "sysctl",
                                                   "augenrules",
                                                   "auditctl",
                                                   "update-grub",
                                                   "grub-mkconfig",
                                                   "grub2-mkconfig",
                                                   "modprobe",
                                                   "lsmod",
                                                   "pam-auth-update",
                                                   "gsettings",
                                                   "dconf",
                                                   "ufw",
                                                   "aide",
                                                   "aideinit",
                                                   "chage",
                                                   "usermod",
                                                   "useradd",
                                                   "passwd",
                                                   "pwck",
                                                   "grpck",
                                                   "locale",
                                                   "timedatectl",
                                                   "hostnamectl",
                                                   "update-alternatives",
                                                   "dpkg-statoverride",
                                                   "dpkg-divert",
                                                   "chronyc",
                                                   "fold",
                                                   "od",
                                                   "strings",
                                                   "xxd",
                                                   "base64",
                                                   "jq",
                                                   "yq",
                                                   "bc",
                                                   "expr",
                                                   "seq",
                                                   "date",
                                                   "sleep",
                                                   "wait",
                                                   "kill",
                                                   "pkill",
                                                   "pgrep",
                                                   "pidof",
                                                   "ps",
                                                   "mount",
                                                   "umount",
                                                   "findmnt",
                                                   "df",
                                                   "du",
                                                   "free",
                                                   "uname",
                                                   "hostname",
                                                   "whoami",
                                                   "groups",
                                                   "getconf",
                                                   "nproc",
                                                   "lsblk",
                                                   "blkid",
                                                   "ip",
                                                   "ss",
                                                   "netstat",
                                                   "iptables",
                                                   "ip6tables",
                                                   "nft",
                                                   "firewall-cmd",
                                                   "readarray",
                                                   "mapfile",
                                                   "read",
                                                   "shopt",
                                                   "set",
                                                   "unset",
                                                   "export",
                                                   "declare",
                                                   "local",
                                                   "readonly",
                                                   "typeset",
                                                   "return",
                                                   "exit",
                                                   "break",
                                                   "continue",
                                                   "shift",
                                                   "eval",
                                                   "exec",
                                                   "trap",
                                                   "alias",
                                                   "cd",
                                                   "pushd",
                                                   "popd",
                                                   "dirs",
                                                   "umask",
                                                   "ulimit",
                                                   "getopts",
                                                   "let",
                                                   "((",
                                                   "ldd",
                                                   "getcap",
                                                   "setcap",
                                                   "readelf",
                                                   "objdump",
                                                   "nm",
                                                   "lsof",
                                                   "fuser",
                                                   "debsums",
                                                   "namei",
                                                   "chsh",
                                                   "groupadd",
                                                   "groupmod",
                                                   "userdel",
                                                   "gpasswd",
                                                   "journalctl",
                                                   "systemd-escape",
                                                   "apparmor_parser",
                                                   "aa-enforce",
                                                   "aa-complain",
                                                   "aa-status",
                                                   "tree",
                                                   "mountpoint",
                                                   "faillock",
                                                   "pam_tally2",
                                                   "last",
                                                   "lastlog",
                                                   "who",
                                                   "w",
                                                   "ssh-keygen",
                                                   "dpkg-reconfigure",
                                                   "update-initramfs",
                                                   "needrestart"};
  return std::find(std::begin(kPrograms), std::end(kPrograms), p) != std::end(kPrograms);
}

// C-like backslash escapes, as echo -e and printf's format read them.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'f':
        out.push_back('\f');
        break;
      default:
        out.push_back('\\');
        out.push_back(e);
    }
  }
  return out;
}

// printf FORMAT ARGS...: the format applied, reusing it while arguments remain.
std::string Printf(const std::vector<std::string>& a) {
  if (a.empty()) return "";
  const std::string format = Unescape(a[0]);
  std::string out;
  size_t next = 1;
  do {
    for (size_t i = 0; i < format.size(); ++i) {
      if (format[i] != '%' || i + 1 >= format.size()) {
        out.push_back(format[i]);
        continue;
      }
      size_t j = i + 1;
      while (j < format.size() && std::string_view("-+ #0123456789.").find(format[j]) != std::string_view::npos) ++j;
      if (j >= format.size()) break;
      const char conversion = format[j];
      if (conversion == '%') {
        out.push_back('%');
      } else {
        const std::string arg = next < a.size() ? a[next++] : "";
        out += conversion == 'b' ? Unescape(arg) : arg;
      }
      i = j;
    }
  } while (next < a.size() && next > 1);
  return out;
}

class CommandJudge {
 public:
  CommandJudge(const PolicyContext& context, const TargetFileReader& read) : ctx_(context), read_(read) {}

  // A command line or script.
  std::optional<Refusal> Script(std::string_view text, int depth) {
    Result<ParsedShell> parsed = SplitShellCommand(text);
    if (!parsed.ok()) {
      return Refusal{fmt::format("{}; a command the policy cannot parse is not run", parsed.status().message()),
                     "write it in plain bash"};
    }
    if (auto r = ForkBomb(*parsed)) return r;
    Walk walk{*parsed, ShellVariables(parsed->assignments), depth};
    for (const ShellAssignment& a : parsed->assignments) {
      if (auto r = Assignment(a)) return r;
    }
    CollectWrites(walk);
    walk.cwd.reset();
    for (const SimpleCommand& c : parsed->commands) {
      if (auto r = Command(c, walk, 0)) return r;
    }
    return std::nullopt;
  }

  // A file written to `path`, whose content runs later as `where` says. `fragment`: the content is
  // part of a line (a sed replacement), so text that is not of the file's format is judged as the
  // command it may complete.
  std::optional<Refusal> LaterFile(const ExecutionPath& where, const std::string& path, std::string_view content,
                                   int depth, bool fragment = false) {
    Result<std::vector<LaterCommand>> commands = CommandsInFile(where.kind, path, content);
    if (!commands.ok() && fragment && commands.status().code() == StatusCode::kInvalidArgument) {
      commands = std::vector<LaterCommand>{{std::string(content), "edited text"}};
    }
    if (!commands.ok()) {
      return Refusal{fmt::format("it writes {}, {} whose content runs later, and {}", path, where.what,
                                 commands.status().message()),
                     "write only what the rule needs, with plain commands the policy can judge"};
    }
    for (const LaterCommand& later : *commands) {
      if (depth + 1 > kMaxScriptDepth) return Refusal{"files that run scripts nest too deeply", "write it plainly"};
      if (auto r = Script(later.command, depth + 1)) {
        return Refusal{fmt::format("it writes {}, {} whose {} would run later, and there {}", path, where.what,
                                   later.where, r->why),
                       r->instead};
      }
    }
    return std::nullopt;
  }

 private:
  struct Walk {
    const ParsedShell& parsed;
    ShellVariables vars;
    int depth = 0;
    std::optional<std::string> cwd;  // the directory relative paths start from, when known
    std::set<std::string> written;   // paths the script writes (where it says so)
    std::string opaque_writer;       // a command that writes files the policy cannot name
  };

  // A function that calls itself (or through others) in a pipeline or in the background forks
  // without end: `:(){ :|:& };:`.
  static std::optional<Refusal> ForkBomb(const ParsedShell& parsed) {
    std::set<std::string> functions;
    for (const SimpleCommand& c : parsed.commands) {
      if (!c.function.empty()) functions.insert(c.function);
    }
    std::map<std::string, std::set<std::string>> calls;
    for (const SimpleCommand& c : parsed.commands) {
      if (!c.function.empty() && functions.count(c.program)) calls[c.function].insert(c.program);
    }
    auto reaches = [&](const std::string& from, const std::string& to) {
      std::set<std::string> seen;
      std::vector<std::string> todo{from};
      while (!todo.empty()) {
        std::string f = todo.back();
        todo.pop_back();
        if (f == to) return true;
        if (!seen.insert(f).second) continue;
        for (const std::string& g : calls[f]) todo.push_back(g);
      }
      return false;
    };
    for (const SimpleCommand& c : parsed.commands) {
      if (c.function.empty() || !c.async || !functions.count(c.program)) continue;
      if (reaches(c.program, c.function)) {
        return Refusal{fmt::format("the function {} calls itself{} in a pipeline or in the background: a fork bomb",
                                   c.function, c.program == c.function ? "" : " through " + c.program),
                       "never start processes without bound"};
      }
    }
    return std::nullopt;
  }

  // NAME=value for the shell or a command's environment.
  static std::optional<Refusal> Assignment(const ShellAssignment& a) {
    const std::string& n = a.name;
    auto joined = [&] {
      std::string v;
      for (const std::string& x : a.values) v += (v.empty() ? "" : " ") + x;
      return v;
    };
    if (n == "LD_PRELOAD" || n == "LD_AUDIT" || n == "LD_LIBRARY_PATH") {
      return Refusal{fmt::format("setting {} makes programs load libraries the policy cannot judge", n),
                     "leave the dynamic loader's variables alone"};
    }
    if (n == "BASH_ENV" || n == "ENV") {
      return Refusal{fmt::format("setting {} makes every shell run that file first", n), "leave it unset"};
    }
    if (n == "PROMPT_COMMAND" || n == "EDITOR" || n == "VISUAL" || n == "SUDO_EDITOR" || n == "SYSTEMD_EDITOR" ||
        n == "PAGER" || n == "MANPAGER" || n == "SYSTEMD_PAGER" || n == "LESSOPEN" || n == "LESSCLOSE" ||
        ((n == "PS4" || n == "PS1" || n == "PS0") &&
         (joined().find("$(") != std::string::npos || joined().find('`') != std::string::npos))) {
      return Refusal{fmt::format("setting {} names a command that other programs run", n), "leave it as it is"};
    }
    if (n == "PATH") {
      for (const std::string& value : a.values) {
        size_t i = 0;
        while (i <= value.size()) {
          size_t colon = value.find(':', i);
          std::string dir = NormalizePath(value.substr(i, colon == std::string::npos ? std::string::npos : colon - i));
          if (!dir.empty() && dir != "$PATH" && dir != "${PATH}" && !IsSystemProgramDirectory(dir)) {
            return Refusal{fmt::format("PATH={} puts {} among the system's programs, so a program's name could run a "
                                       "file the policy never judged",
                                       value, dir),
                           "run such a program by its full path"};
          }
          if (colon == std::string::npos) break;
          i = colon + 1;
        }
      }
    }
    return std::nullopt;
  }

  // `word` as an absolute, normalized path: relative ones from the known working directory,
  // a whole variable reference with one known value. nullopt when it cannot be told.
  std::optional<std::string> PathOf(const std::string& word, bool expanded, const Walk& w) const {
    std::string text = word;
    if (expanded) {
      auto values = w.vars.Resolve(word);
      if (!values || values->size() != 1 || (*values)[0].size() != 1) return std::nullopt;
      text = (*values)[0][0];
    }
    if (text.empty()) return std::nullopt;
    // ~ is the home of whoever runs the command (root, or the SSH login through sudo): judged as
    // root's, since every home's start-up files are judged alike.
    if (text == "~" || text.starts_with("~/")) text = "/root" + text.substr(1);
    else if (text[0] == '~') text = "/home/" + text.substr(1);
    if (text[0] != '/') {
      if (!w.cwd) return std::nullopt;
      text = *w.cwd + "/" + text;
    }
    return NormalizePath(text);
  }

  void UpdateCwd(const SimpleCommand& c, Walk& w) const {
    if (c.program != "cd" && c.program != "pushd") return;
    std::vector<size_t> operands;
    for (size_t k = 0; k < c.args.size(); ++k) {
      if (!StartsWith(c.args[k], "-") || c.args[k] == "-") operands.push_back(k);
    }
    if (operands.empty()) {
      w.cwd.reset();
      return;
    }
    w.cwd = PathOf(c.args[operands[0]], c.args_expanded[operands[0]], w);
  }

  // Files a command writes new content into, as written (not resolved), with the source of the
  // content where the program takes it from a file (cp SRC DEST).
  struct Write {
    std::string target;
    bool target_expanded = false;
    enum Source { kOutput, kInput, kFile, kSedEdit, kUnknown } source = kUnknown;
    std::string file;  // kFile: the file whose content is copied (or linked)
    bool file_expanded = false;
    bool symlink = false;  // ln -s: `file` is relative to the link's directory
  };

  static std::vector<Write> WritesOf(const SimpleCommand& c) {
    std::vector<Write> out;
    for (const Redirect& r : c.redirects) {
      if (IsWriteRedirect(r))
        out.push_back({r.target, r.target_expanded, r.op.starts_with("2") ? Write::kUnknown : Write::kOutput});
    }
    const std::string& p = c.program;
    std::vector<size_t> operands;
    std::string target_dir;
    bool target_dir_expanded = false;
    for (size_t k = 0; k < c.args.size(); ++k) {
      const std::string& a = c.args[k];
      if ((p == "cp" || p == "mv" || p == "install" || p == "ln") && (a == "-t" || a == "--target-directory") &&
          k + 1 < c.args.size()) {
        target_dir = c.args[++k];
        target_dir_expanded = c.args_expanded[k];
        continue;
      }
      if ((p == "cp" || p == "mv" || p == "install" || p == "ln") && StartsWith(a, "--target-directory=")) {
        target_dir = a.substr(19);
        target_dir_expanded = c.args_expanded[k];
        continue;
      }
      if (p == "install" &&
          (a == "-m" || a == "-o" || a == "-g" || a == "--mode" || a == "--owner" || a == "--group")) {
        ++k;
        continue;
      }
      if (!StartsWith(a, "-") || a == "-") operands.push_back(k);
    }
    if (p == "tee") {
      for (size_t k : operands) out.push_back({c.args[k], c.args_expanded[k], Write::kInput});
    } else if (p == "cp" || p == "mv" || p == "install" || p == "ln") {
      const bool symlink = p == "ln" && std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
                             return a == "-s" || a == "--symbolic" ||
                                    (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('s') != std::string::npos);
                           });
      const bool recursive = std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
        return a == "-r" || a == "-R" || a == "-a" || a == "--recursive" || a == "--archive" ||
               (a.size() > 1 && a[0] == '-' && a[1] != '-' &&
                (a.find('r') != std::string::npos || a.find('R') != std::string::npos ||
                 a.find('a') != std::string::npos));
      });
      std::vector<size_t> sources = operands;
      std::string dest = target_dir;
      bool dest_expanded = target_dir_expanded;
      if (dest.empty() && !sources.empty()) {
        dest = c.args[sources.back()];
        dest_expanded = c.args_expanded[sources.back()];
        sources.pop_back();
      }
      if (p == "install" && std::any_of(c.args.begin(), c.args.end(),
                                        [](const std::string& a) { return a == "-d" || a == "--directory"; })) {
        return out;  // install -d makes directories
      }
      for (size_t s : sources) {
        // The destination is the file itself, or a directory the file lands in.
        const std::string name = Basename(c.args[s]);
        for (const std::string& target : {dest, dest + "/" + name}) {
          Write wr{target,    dest_expanded,      recursive ? Write::kUnknown : Write::kFile,
                   c.args[s], c.args_expanded[s], symlink};
          out.push_back(wr);
        }
      }
    } else if (p == "sed") {
      const bool in_place = std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
        return StartsWith(a, "-i") || StartsWith(a, "--in-place") ||
               (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('i') != std::string::npos &&
                a.find('e') == std::string::npos);
      });
      if (in_place) {
        bool script_given = std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
          return a == "-e" || StartsWith(a, "--expression") || a == "-f" || StartsWith(a, "--file");
        });
        bool skipped_script = script_given;
        for (size_t k = 0; k < c.args.size(); ++k) {
          const std::string& a = c.args[k];
          if (a == "-e" || a == "-f" || a == "--expression" || a == "--file" || a == "-l") {
            ++k;
            continue;
          }
          if (StartsWith(a, "-")) continue;
          if (!skipped_script) {
            skipped_script = true;
            continue;
          }
          out.push_back({a, c.args_expanded[k], Write::kSedEdit});
        }
      }
    } else if (p == "dd") {
      std::string input;
      bool input_expanded = false;
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (StartsWith(c.args[k], "if=")) {
          input = c.args[k].substr(3);
          input_expanded = c.args_expanded[k];
        }
      }
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (!StartsWith(c.args[k], "of=")) continue;
        Write wr{c.args[k].substr(3),
                 c.args_expanded[k],
                 input.empty() ? Write::kUnknown : Write::kFile,
                 input,
                 input_expanded,
                 false};
        out.push_back(wr);
      }
    } else if (!c.program.empty() && !LeavesContentAlone(c.program)) {
      // Any other program may write any file it names.
      for (size_t k = 0; k < c.args.size(); ++k) {
        const std::string& a = c.args[k];
        const size_t eq = a.find('=');
        const std::string named = StartsWith(a, "-") && eq != std::string::npos ? a.substr(eq + 1) : a;
        if (!named.empty() && (named[0] == '/' || !StartsWith(a, "-")))
          out.push_back({named, c.args_expanded[k], Write::kUnknown});
      }
    }
    return out;
  }

  // Programs that write files they do not name one by one (archives, downloads, version control).
  static bool WritesUnnamedFiles(const std::string& p) {
    static constexpr std::string_view kPrograms[] = {"tar",    "unzip", "cpio",       "rsync",      "scp",
                                                     "curl",   "wget",  "git",        "patch",      "7z",
                                                     "bsdtar", "ar",    "unsquashfs", "debootstrap"};
    return std::find(std::begin(kPrograms), std::end(kPrograms), p) != std::end(kPrograms);
  }

  // First pass: what the script writes, so that a script or file it runs or copies is not judged
  // by the content it had before the command changed it.
  void CollectWrites(Walk& w) const {
    for (const SimpleCommand& c : w.parsed.commands) {
      UpdateCwd(c, w);
      for (const Write& wr : WritesOf(c)) {
        if (std::optional<std::string> p = PathOf(wr.target, wr.target_expanded, w)) w.written.insert(*p);
      }
      if (WritesUnnamedFiles(c.program) && w.opaque_writer.empty()) w.opaque_writer = c.text;
    }
  }

  // A path the script changes before it may run or copy it: the path, or a directory above it.
  std::optional<Refusal> Stale(const std::string& path, const Walk& w, const SimpleCommand& c) const {
    for (const std::string& written : w.written) {
      if (written == path || StartsWith(path, written + "/")) {
        return Refusal{fmt::format("'{}' uses {}, which this command line also writes, so the policy cannot judge what "
                                   "it will hold",
                                   c.text, path),
                       "write the file first (write_file, or a command of its own), then use it in the next command"};
      }
    }
    if (!w.opaque_writer.empty()) {
      return Refusal{fmt::format("'{}' uses {}, and '{}' in the same command line writes files the policy cannot name",
                                 c.text, path, w.opaque_writer),
                     "unpack or download first, then run the next command on its own"};
    }
    return std::nullopt;
  }

  // Reads a file the command runs or copies; a refusal when it cannot be read whole.
  Result<std::string> ReadForJudging(const std::string& path) const {
    Result<std::string> content = read_(path, kMaxJudgedFileBytes + 1);
    if (!content.ok()) return content.status();
    if (content->size() > kMaxJudgedFileBytes) {
      return Status::OutOfRange(
          fmt::format("{} is larger than the {} bytes the policy reads", path, kMaxJudgedFileBytes));
    }
    return content;
  }

  // A script file that `c` runs: as a shell script (`bash FILE`, `. FILE`) or as a program by its
  // path (then a #! line other than a shell's, or a binary, is refused).
  std::optional<Refusal> ScriptFile(const std::string& path, bool as_program, const SimpleCommand& c, const Walk& w) {
    if (auto r = Stale(path, w, c)) return r;
    if (w.depth + 1 > kMaxScriptDepth)
      return Refusal{fmt::format("'{}': scripts run scripts too deeply", c.text), "run them one by one"};
    if (judging_.count(path)) {
      return Refusal{fmt::format("the script {} runs itself", path), "never start processes without bound"};
    }
    Result<std::string> content = ReadForJudging(path);
    if (!content.ok()) {
      return Refusal{fmt::format("'{}' runs {}, which the policy cannot read to judge ({})", c.text, path,
                                 content.status().message()),
                     "write the script with write_file first, then run it by its absolute path"};
    }
    std::string text = *content;
    if (as_program) {
      Result<std::vector<LaterCommand>> program = CommandsInFile(FileKind::kProgram, path, text);
      if (!program.ok()) {
        return Refusal{fmt::format("'{}' runs {}: {}", c.text, path, program.status().message()), kInsteadShellScript};
      }
    }
    judging_.insert(path);
    std::optional<Refusal> r = Script(text, w.depth + 1);
    judging_.erase(path);
    if (r) return Refusal{fmt::format("{} (in the script {}, which '{}' runs)", r->why, path, c.text), r->instead};
    return std::nullopt;
  }

  // What `c` writes to its standard output, when the policy can see it.
  Result<std::string> Output(const SimpleCommand& c, const Walk& w) const {
    auto arg = [&](size_t k) { return c.args_expanded[k] ? w.vars.Substitute(c.args[k]) : c.args[k]; };
    if (c.program.empty() || c.program == "true" || c.program == ":") return std::string();
    if (c.program == "echo") {
      size_t k = 0;
      bool newline = true, escapes = false;
      for (; k < c.args.size() && c.args[k].size() > 1 && c.args[k][0] == '-' &&
             c.args[k].find_first_not_of("neE", 1) == std::string::npos;
           ++k) {
        newline = newline && c.args[k].find('n') == std::string::npos;
        escapes = escapes || c.args[k].find('e') != std::string::npos;
      }
      std::string out;
      for (size_t j = k; j < c.args.size(); ++j) out += (j > k ? " " : "") + arg(j);
      if (escapes) out = Unescape(out);
      return newline ? out + "\n" : out;
    }
    if (c.program == "printf") {
      std::vector<std::string> args;
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (k == 0 && c.args[k] == "--") continue;
        args.push_back(arg(k));
      }
      return Printf(args);
    }
    if (c.program == "cat") {
      std::string out;
      bool any_file = false;
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (StartsWith(c.args[k], "-") && c.args[k] != "-") continue;
        any_file = true;
        std::optional<std::string> path = PathOf(c.args[k], c.args_expanded[k], w);
        if (!path) return Status::InvalidArgument(fmt::format("'{}' reads a file whose name is not known", c.text));
        TEMPER_ASSIGN_OR_RETURN(std::string content, ReadForJudging(*path));
        out += content;
      }
      if (any_file) return out;
      return Input(c, w);
    }
    return Status::InvalidArgument(fmt::format("the output of '{}'", c.text));
  }

  // What `c` reads on its standard input, when the policy can see it: a here-document, a
  // here-string, or the output of the one command piped into it.
  Result<std::string> Input(const SimpleCommand& c, const Walk& w) const {
    for (const Redirect& r : c.redirects) {
      if (r.op.ends_with("<<") || r.op.ends_with("<<-") || r.op.ends_with("<<<")) {
        std::string body = r.body_expanded ? w.vars.Substitute(r.body) : r.body;
        if (r.op.ends_with("<<<")) body += "\n";
        return body;
      }
    }
    if (c.piped_from && *c.piped_from < w.parsed.commands.size()) return Output(w.parsed.commands[*c.piped_from], w);
    return Status::InvalidArgument(fmt::format("the input of '{}'", c.text));
  }

  // A write of new content into a file that runs later.
  std::optional<Refusal> WriteToLaterFile(const Write& wr, const std::string& path, const ExecutionPath& where,
                                          const SimpleCommand& c, const Walk& w) {
    const std::string instead = "write the file with write_file, whose content the policy judges";
    auto invisible = [&](const std::string& what) {
      return Refusal{fmt::format("'{}' writes {} into {}, {} whose content runs later, and the policy cannot see what "
                                 "it writes",
                                 c.text, what, path, where.what),
                     instead};
    };
    auto judge = [&](std::string_view content, bool fragment = false) -> std::optional<Refusal> {
      if (auto r = LaterFile(where, path, content, w.depth, fragment)) {
        return Refusal{fmt::format("'{}': {}", c.text, r->why), r->instead};
      }
      return std::nullopt;
    };
    switch (wr.source) {
      case Write::kOutput: {
        Result<std::string> out = Output(c, w);
        if (!out.ok()) return invisible(out.status().message());
        return judge(*out);
      }
      case Write::kInput: {
        Result<std::string> in = Input(c, w);
        if (!in.ok()) return invisible(in.status().message());
        return judge(*in);
      }
      case Write::kFile: {
        std::optional<std::string> source =
            wr.symlink && !wr.file.empty() && wr.file[0] != '/'
                ? std::optional<std::string>(NormalizePath(Dirname(path) + "/" + wr.file))
                : PathOf(wr.file, wr.file_expanded, w);
        if (!source) return invisible(fmt::format("'{}', whose name is not known,", wr.file));
        if (auto r = Stale(*source, w, c)) return r;
        Result<std::string> content = ReadForJudging(*source);
        if (!content.ok()) {
          return Refusal{fmt::format("'{}' puts {} into {}, {} whose content runs later, and the policy cannot read it "
                                     "to judge ({})",
                                     c.text, *source, path, where.what, content.status().message()),
                         "if an earlier step of this command makes that file, run that step first, then copy it"};
        }
        return judge(*content);
      }
      case Write::kSedEdit: {
        std::vector<std::string> scripts;
        for (size_t k = 0; k < c.args.size(); ++k) {
          if ((c.args[k] == "-e" || c.args[k] == "--expression") && k + 1 < c.args.size()) {
            scripts.push_back(c.args_expanded[k + 1] ? w.vars.Substitute(c.args[k + 1]) : c.args[k + 1]);
          }
        }
        if (scripts.empty()) {
          for (size_t k = 0; k < c.args.size(); ++k) {
            if (!StartsWith(c.args[k], "-")) {
              scripts.push_back(c.args_expanded[k] ? w.vars.Substitute(c.args[k]) : c.args[k]);
              break;
            }
          }
        }
        for (const std::string& script : scripts) {
          Result<SedEffects> effects = ReadSedScript(script);
          if (!effects.ok()) return invisible("an edit");
          for (const std::string& text : effects->inserted) {
            if (auto r = judge(text, true)) return r;
          }
        }
        return std::nullopt;
      }
      case Write::kUnknown:
        return invisible(c.program.empty() ? "output" : "what '" + c.program + "' writes");
    }
    return std::nullopt;
  }

  std::optional<Refusal> Command(const SimpleCommand& c, Walk& w, int respelled) {
    if (!c.unjudgeable.empty()) {
      return Refusal{fmt::format("'{}': {}, so the policy cannot see what it runs", c.text, c.unjudgeable),
                     "name the command itself"};
    }
    UpdateCwd(c, w);
    for (const ShellAssignment& a : c.environment) {
      if (auto r = Assignment(a)) return r;
    }
    if (c.program_computed) return ComputedProgram(c, w, respelled);
    if (auto r = JudgeSimpleCommand(c, ctx_)) return r;
    if (auto r = Runs(c, w)) return r;
    for (const Write& wr : WritesOf(c)) {
      std::optional<std::string> path = PathOf(wr.target, wr.target_expanded, w);
      if (!path) continue;  // where it writes is not visible: not judged
      const ExecutionPath where = ClassifyPath(*path);
      if (where.kind == FileKind::kData) continue;
      if (auto r = WriteToLaterFile(wr, *path, where, c, w)) return r;
    }
    return std::nullopt;
  }

  // A program named by an expansion: each value the script gives it, or a refusal.
  std::optional<Refusal> ComputedProgram(const SimpleCommand& c, Walk& w, int respelled) {
    std::optional<std::vector<std::vector<std::string>>> values = w.vars.Resolve(c.program_word);
    if (!values || values->size() > kMaxCandidates || respelled > 2) {
      return Refusal{fmt::format("'{}' runs a program named by '{}', which is computed when it runs, so the policy "
                                 "cannot see what runs",
                                 c.text, c.program_word),
                     "name the program itself, or give the variable a literal value in the same script"};
    }
    for (const std::vector<std::string>& words : *values) {
      Result<ParsedShell> respelt = Respell(c, words);
      if (!respelt.ok()) {
        return Refusal{fmt::format("'{}': {}", c.text, respelt.status().message()), "write it in plain bash"};
      }
      for (const SimpleCommand& inner : respelt->commands) {
        if (auto r = Command(inner, w, respelled + 1)) return r;
      }
    }
    return std::nullopt;
  }

  // What `c` runs besides its own program: a script file, the script on its input, a program
  // outside the system's program directories, a unit or sysctl file it loads.
  std::optional<Refusal> Runs(const SimpleCommand& c, Walk& w) {
    const std::string& p = c.program;
    const std::string another = "write the commands themselves, or write a script with write_file and run it";
    const bool inline_script = IsShell(p) && std::any_of(c.args.begin(), c.args.end(), [](const std::string& a) {
                                 return a == "-c" || (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.back() == 'c');
                               });
    // `bash <(curl …)`, `source <(…)`: a script another command produces, like `curl … | bash`.
    if ((IsShell(p) && !inline_script) || p == "source" || p == ".") {
      for (const std::string& a : c.args) {
        if (StartsWith(a, "<(")) {
          return Refusal{
              fmt::format("'{}' runs a script another command produces, which the policy cannot inspect", c.text),
              another};
        }
      }
    }
    if (IsShell(p)) {
      if (inline_script) return std::nullopt;  // parsed with the command line
      if (std::optional<std::string> file = ShellScriptFile(c)) {
        size_t k = std::find(c.args.begin(), c.args.end(), *file) - c.args.begin();
        std::optional<std::string> path = PathOf(*file, k < c.args.size() && c.args_expanded[k], w);
        if (!path) {
          return Refusal{fmt::format("'{}' runs the script '{}', whose path is not known (computed, or relative to an "
                                     "unknown directory)",
                                     c.text, *file),
                         "run the script by its absolute path"};
        }
        return ScriptFile(*path, false, c, w);
      }
      // It reads its script from standard input: here-documents were parsed as its script.
      if (c.stdin_from_pipe) {
        return Refusal{fmt::format("'{}' runs a script piped in, which the policy cannot inspect", c.text), another};
      }
      for (const Redirect& r : c.redirects) {
        if (r.op != "<" && r.op != "0<") continue;
        std::optional<std::string> path = PathOf(r.target, r.target_expanded, w);
        if (!path)
          return Refusal{fmt::format("'{}' runs a script from '{}', whose path is not known", c.text, r.target),
                         another};
        return ScriptFile(*path, false, c, w);
      }
      return std::nullopt;
    }
    if (p == "source" || p == ".") {
      if (c.args.empty()) return std::nullopt;
      const std::string& file = c.args[0];
      if (StartsWith(file, "/dev/") || StartsWith(file, "/proc/")) {
        return Refusal{fmt::format("'{}' runs a script from its input, which the policy cannot inspect", c.text),
                       another};
      }
      std::optional<std::string> path = PathOf(file, c.args_expanded[0], w);
      if (!path) {
        return Refusal{fmt::format("'{}' runs the script '{}', whose path is not known (computed, or relative to an "
                                   "unknown directory)",
                                   c.text, file),
                       "source the script by its absolute path"};
      }
      return ScriptFile(*path, false, c, w);
    }
    if (c.program_word.find('/') != std::string::npos) {
      std::optional<std::string> path = PathOf(c.program_word, false, w);
      if (!path) {
        return Refusal{fmt::format("'{}' runs '{}' by a path relative to a directory the policy does not know", c.text,
                                   c.program_word),
                       "run it by its absolute path"};
      }
      if (!IsSystemProgramDirectory(Dirname(*path))) return ScriptFile(*path, true, c, w);
    }
    if (p == "enable" && std::find(c.args.begin(), c.args.end(), "-f") != c.args.end()) {
      return Refusal{fmt::format("'{}' loads a shared library into the shell", c.text), kInsteadShellScript};
    }
    if (p == "hash" && std::find(c.args.begin(), c.args.end(), "-p") != c.args.end()) {
      return Refusal{fmt::format("'{}' makes a program's name run another file", c.text),
                     "run programs by their names"};
    }
    // sysctl -p FILE loads the file's settings now. A file in sysctl's own directories is judged
    // whenever it is written (this command line's writes included), so only others are read.
    if (p == "sysctl") {
      for (size_t k = 0; k + 1 < c.args.size(); ++k) {
        if (c.args[k] != "-p" && c.args[k] != "--load") continue;
        std::optional<std::string> path = PathOf(c.args[k + 1], c.args_expanded[k + 1], w);
        if (!path)
          return Refusal{fmt::format("'{}' loads settings from a file whose path is not known", c.text),
                         "name the file"};
        if (ClassifyPath(*path).kind == FileKind::kSysctl) continue;
        if (auto r = Stale(*path, w, c)) return r;
        Result<std::string> content = ReadForJudging(*path);
        if (!content.ok())
          return Refusal{fmt::format("'{}' loads {}, which the policy cannot read ({})", c.text, *path,
                                     content.status().message()),
                         "write the settings with write_file first"};
        if (auto r = LaterFile({FileKind::kSysctl, "a sysctl configuration"}, *path, *content, w.depth)) return r;
      }
    }
    // systemctl link PATH / enable PATH: a unit file outside the unit directories (those inside
    // are judged whenever they are written).
    if (p == "systemctl") {
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (c.args[k].find('/') == std::string::npos || StartsWith(c.args[k], "-")) continue;
        std::optional<std::string> path = PathOf(c.args[k], c.args_expanded[k], w);
        if (!path)
          return Refusal{fmt::format("'{}' names a unit file whose path is not known", c.text), "name the unit"};
        if (ClassifyPath(*path).kind == FileKind::kSystemdUnit) continue;
        if (auto r = Stale(*path, w, c)) return r;
        Result<std::string> content = ReadForJudging(*path);
        if (!content.ok())
          return Refusal{fmt::format("'{}' uses the unit file {}, which the policy cannot read ({})", c.text, *path,
                                     content.status().message()),
                         "write the unit with write_file first"};
        if (auto r = LaterFile({FileKind::kSystemdUnit, "a systemd unit"}, *path, *content, w.depth)) return r;
      }
    }
    return std::nullopt;
  }

  static inline const std::string kInsteadShellScript =
      "do it with shell commands in run_command, or in a shell script written with write_file";

  const PolicyContext& ctx_;
  const TargetFileReader& read_;
  std::set<std::string> judging_;  // the script files being judged, outermost first
};

Status Refused(const Refusal& r, std::string_view nothing) {
  return Status::PermissionDenied(
      fmt::format("refused by policy: {}. Instead: {}. Nothing was {}.", r.why, r.instead, nothing));
}

}  // namespace

bool IsBootloaderRule(std::string_view rule_id, std::string_view title) {
  std::string id = Lower(rule_id), t = Lower(title);
  return id.find("grub") != std::string::npos || id.find("bootloader") != std::string::npos ||
         id.find("boot_loader") != std::string::npos || id.find("kernel_cmdline") != std::string::npos ||
         t.find("grub") != std::string::npos || t.find("boot loader") != std::string::npos ||
         t.find("bootloader") != std::string::npos;
}

Status CheckCommand(std::string_view command_line, const PolicyContext& context, const TargetFileReader& read) {
  CommandJudge judge(context, read);
  if (auto r = judge.Script(command_line, 0)) return Refused(*r, "run");
  return Status::OK();
}

Status CheckPackageRemoval(const std::vector<std::string>& names, const PolicyContext& context) {
  if (auto r = JudgeRemoval(names, context)) return Refused(*r, "removed");
  return Status::OK();
}

Status CheckWrite(std::string_view path, std::string_view content, const PolicyContext& context,
                  const TargetFileReader& read) {
  const std::string p = NormalizePath(path);
  if (IsBlockDevice(p)) {
    return Status::PermissionDenied(
        fmt::format("refused by policy: {} is a device; never write to block devices", path));
  }
  if (StartsWith(p, "/proc/") || StartsWith(p, "/sys/")) {
    return Status::PermissionDenied(fmt::format(
        "refused by policy: {} is a kernel interface; write persistent settings (e.g. /etc/sysctl.d/) instead", path));
  }
  if (!context.bootloader_rule && IsBootloaderPath(p)) {
    return Status::PermissionDenied(
        fmt::format("refused by policy: {} is a bootloader file and this rule is not a bootloader rule", path));
  }
  const ExecutionPath where = ClassifyPath(p);
  if (where.kind == FileKind::kData) return Status::OK();
  CommandJudge judge(context, read);
  if (auto r = judge.LaterFile(where, p, content, 0)) return Refused(*r, "written");
  return Status::OK();
}

}  // namespace temper
