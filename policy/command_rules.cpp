#include "policy/command_rules.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/lexical_path.h"
#include "policy/execution_paths.h"
#include "policy/sed_script.h"

namespace temper {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool Contains(const std::vector<std::string>& v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool Under(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() && StartsWith(path, dir) && path[dir.size()] == '/';
}

// Directories whose recursive removal or re-ownership wrecks the host.
bool IsSystemDir(std::string_view raw) {
  std::string p = NormalizePath(raw);
  if (p == "/" || p == "/*") return true;
  static constexpr std::string_view kDirs[] = {
      "/bin",          "/boot",        "/dev",           "/etc",         "/home",       "/lib",      "/lib32",
      "/lib64",        "/libx32",      "/opt",           "/proc",        "/root",       "/run",      "/sbin",
      "/srv",          "/sys",         "/usr",           "/var",         "/usr/bin",    "/usr/sbin", "/usr/lib",
      "/usr/lib64",    "/usr/local",   "/usr/share",     "/var/lib",     "/var/log",    "/etc/ssh",  "/etc/pam.d",
      "/etc/security", "/etc/systemd", "/etc/sudoers.d", "/etc/selinux", "/etc/default"};
  for (std::string_view d : kDirs) {
    if (p == d || p == std::string(d) + "/*") return true;
  }
  return false;
}

// An unset variable turns `rm -rf "$DIR"/` into `rm -rf /`.
bool IsBareVariable(std::string_view raw) {
  std::string p(raw);
  while (!p.empty() && (p.back() == '/' || p.back() == '*')) p.pop_back();
  if (p.size() < 2 || p[0] != '$') return false;
  std::string_view name(p);
  name.remove_prefix(1);
  if (!name.empty() && name.front() == '{' && name.back() == '}') name = name.substr(1, name.size() - 2);
  return !name.empty() && std::all_of(name.begin(), name.end(),
                                      [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool IsNetworkUnit(std::string_view raw) {
  std::string u = Lower(raw);
  if (u.ends_with(".service")) u.resize(u.size() - 8);
  return u == "network" || u == "networking" || u == "networkmanager" || u == "systemd-networkd" || u == "wicked" ||
         u == "firewalld";
}

// Units the host cannot lose while it runs: stopping them stops everything, or systemctl itself.
bool IsCoreUnit(std::string_view raw) {
  std::string u = Lower(raw);
  return u == "init.scope" || u == "-.slice" || u == "system.slice" || u == "user.slice" || u == "dbus" ||
         u == "dbus.service" || u == "dbus.socket" || u == "systemd-journald" || u == "systemd-journald.service";
}

// Packages whose removal cuts off logins or remote access, takes the network down, or leaves the
// host unable to boot or to install packages again.
bool IsProtectedPackage(std::string_view raw) {
  std::string n = Lower(raw);
  if (size_t colon = n.find(':'); colon != std::string::npos) n.resize(colon);  // libpam0g:amd64
  static constexpr std::string_view kNames[] = {"openssh-server",
                                                "openssh-sftp-server",
                                                "sudo",
                                                "systemd",
                                                "systemd-sysv",
                                                "init",
                                                "sysvinit-core",
                                                "libpam-modules",
                                                "libpam-modules-bin",
                                                "libpam-runtime",
                                                "libpam0g",
                                                "login",
                                                "passwd",
                                                "apt",
                                                "dpkg",
                                                "ifupdown",
                                                "netplan.io",
                                                "network-manager",
                                                "iproute2",
                                                "systemd-resolved",
                                                "initramfs-tools"};
  for (std::string_view p : kNames) {
    if (n == p) return true;
  }
  return StartsWith(n, "linux-image") || StartsWith(n, "grub");
}

const std::string kInsteadReboot =
    "changes that need a reboot are reported as pending reboot by the evaluator; make the change persistent "
    "(config files) and finish";
const std::string kInsteadLater =
    "run the command itself now, in this attempt, where the policy can judge it; never schedule commands";
const std::string kInsteadShell =
    "do it with shell commands (sed, grep, printf, tee) that the policy can judge, in run_command or a shell script";

std::optional<Refusal> JudgeSystemctl(const SimpleCommand& c, const PolicyContext&) {
  const std::string& p = c.program;
  const std::vector<std::string>& a = c.args;
  // systemctl VERB UNIT...; service UNIT VERB.
  std::vector<std::string> words;
  for (const std::string& w : a) {
    if (!StartsWith(w, "-")) words.push_back(w);
  }
  if (words.empty()) return std::nullopt;
  const std::string verb = p == "systemctl" ? words[0] : (words.size() > 1 ? words[1] : "");
  std::vector<std::string> units;
  if (p == "systemctl") units.assign(words.begin() + 1, words.end());
  else units.push_back(words[0]);
  static constexpr std::string_view kPowerVerbs[] = {"reboot",
                                                     "poweroff",
                                                     "halt",
                                                     "kexec",
                                                     "rescue",
                                                     "emergency",
                                                     "soft-reboot",
                                                     "suspend",
                                                     "hibernate",
                                                     "hybrid-sleep",
                                                     "suspend-then-hibernate",
                                                     "sleep",
                                                     "default",
                                                     "exit",
                                                     "switch-root",
                                                     "isolate"};
  if (std::find(std::begin(kPowerVerbs), std::end(kPowerVerbs), verb) != std::end(kPowerVerbs)) {
    return Refusal{
        fmt::format("'{} {}' switches the system's state and would take the host down or cut it off", p, verb),
        kInsteadReboot};
  }
  if (verb == "set-default" && !units.empty() && Lower(units[0]) != "multi-user.target" &&
      Lower(units[0]) != "graphical.target") {
    return Refusal{fmt::format("'{}' would boot the host into {} next time", c.text, units[0]),
                   "leave the default target alone (multi-user.target or graphical.target)"};
  }
  if (verb == "edit" || verb == "set-environment" || verb == "import-environment") {
    return Refusal{fmt::format("'{} {}' runs an editor or changes the environment of every service", p, verb),
                   "write unit drop-ins with write_file instead"};
  }
  static constexpr std::string_view kStarts[] = {
      "start",        "restart",      "try-restart", "reload-or-restart", "try-reload-or-restart",
      "condrestart",  "force-reload", "enable",      "reenable",          "add-wants",
      "add-requires", "link",         "preset"};
  if (std::find(std::begin(kStarts), std::end(kStarts), verb) != std::end(kStarts)) {
    for (const std::string& u : units) {
      if (IsStateUnit(u)) {
        return Refusal{fmt::format("'{} {} {}' switches the system's state and would take the host down or cut it off",
                                   p, verb, u),
                       kInsteadReboot};
      }
    }
  }
  if (verb == "stop" || verb == "disable" || verb == "mask" || verb == "kill" || verb == "freeze") {
    if (Contains(c.prefixes, "xargs")) {
      return Refusal{fmt::format("'{}' {}s units named by xargs's input, which the policy cannot see", c.text, verb),
                     "name the units in the command"};
    }
    for (const std::string& u : units) {
      if (IsSshUnit(u)) {
        return Refusal{fmt::format("'{} {} {}' would cut off remote access to the host", p, verb, u),
                       "to apply sshd settings, edit /etc/ssh/sshd_config (or a drop-in), validate with "
                       "'sshd -t', and use 'systemctl reload sshd'"};
      }
      if (IsNetworkUnit(u)) {
        return Refusal{fmt::format("'{} {} {}' would take the network or firewall down", p, verb, u),
                       "change the configuration and reload the service instead"};
      }
      if (IsCoreUnit(u)) {
        return Refusal{fmt::format("'{} {} {}' would stop what the whole host runs on", p, verb, u),
                       "leave systemd's own units alone"};
      }
    }
  }
  return std::nullopt;
}

// sysctl -w KEY=VALUE and sysctl KEY=VALUE: the same keys as a sysctl.d file.
std::optional<Refusal> JudgeSysctl(const SimpleCommand& c, const PolicyContext&) {
  std::string settings;
  for (const std::string& w : c.args) {
    if (!StartsWith(w, "-") && w.find('=') != std::string::npos) settings += w + "\n";
  }
  Result<std::vector<LaterCommand>> judged = CommandsInFile(FileKind::kSysctl, "sysctl", settings);
  if (!judged.ok()) {
    return Refusal{fmt::format("'{}' sets a kernel parameter that can take the host down or hand it to a program ({})",
                               c.text, judged.status().message()),
                   "leave these kernel parameters as they are"};
  }
  return std::nullopt;
}

bool IsForeignInterpreter(const std::string& p) {
  static constexpr std::string_view kPrefixes[] = {"python", "perl", "ruby", "php", "lua", "tclsh", "pypy"};
  static constexpr std::string_view kNames[] = {"node", "nodejs", "luajit", "wish",  "expect", "gdb", "Rscript", "pwsh",
                                                "java", "jshell", "jjs",    "guile", "julia",  "irb", "racket"};
  if (std::find(std::begin(kNames), std::end(kNames), p) != std::end(kNames)) return true;
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view x) { return StartsWith(p, x); }) &&
         p.find("-config") == std::string::npos && p.find("doc") == std::string::npos;
}

// An awk program that runs commands (system(), pipes) or writes files (print > "file").
std::optional<Refusal> JudgeAwk(const SimpleCommand& c, const PolicyContext&) {
  std::string program;
  bool from_file = false;
  for (size_t k = 0; k < c.args.size(); ++k) {
    const std::string& a = c.args[k];
    if (a == "-f" || StartsWith(a, "--file") || (StartsWith(a, "-f") && a.size() > 2)) from_file = true;
    if (a == "-F" || a == "-v" || a == "-f" || a == "-i" || a == "-l" || a == "-E") {
      ++k;
      continue;
    }
    if (StartsWith(a, "-")) continue;
    if (!from_file) program = a;
    break;
  }
  const std::string why_prefix = fmt::format("'{}' ", c.text);
  if (from_file)
    return Refusal{why_prefix + "runs an awk program from a file, which the policy does not judge", kInsteadShell};
  if (program.find("system") != std::string::npos && program.find('(', program.find("system")) != std::string::npos) {
    return Refusal{why_prefix + "runs commands through awk's system()", kInsteadShell};
  }
  for (size_t k = 0; k < program.size(); ++k) {
    if (program[k] != '|') continue;
    if ((k + 1 < program.size() && program[k + 1] == '|') || (k > 0 && program[k - 1] == '|')) continue;
    return Refusal{why_prefix + "pipes to or from commands inside awk", kInsteadShell};
  }
  if (program.find("@load") != std::string::npos) return Refusal{why_prefix + "loads an awk extension", kInsteadShell};
  // print and printf with > or >> write a file.
  for (size_t at = program.find("print"); at != std::string::npos; at = program.find("print", at + 1)) {
    size_t end = program.find_first_of(";}\n", at);
    std::string_view statement =
        std::string_view(program).substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (statement.find('>') != std::string_view::npos) {
      return Refusal{why_prefix + "writes files from inside awk, which the policy cannot follow",
                     "print to standard output and redirect it in the shell"};
    }
  }
  return std::nullopt;
}

// sed's e command and s///e run commands; w and s///w write files.
std::optional<Refusal> JudgeSed(const SimpleCommand& c) {
  std::vector<std::string> scripts;
  bool explicit_script = false;
  for (size_t k = 0; k < c.args.size(); ++k) {
    const std::string& a = c.args[k];
    if (a == "-e" || a == "--expression") {
      if (k + 1 < c.args.size()) scripts.push_back(c.args[++k]);
      explicit_script = true;
    } else if (StartsWith(a, "--expression=")) {
      scripts.push_back(a.substr(13));
      explicit_script = true;
    } else if (a == "-f" || StartsWith(a, "--file")) {
      return Refusal{fmt::format("'{}' runs a sed script from a file, which the policy does not judge", c.text),
                     "give the sed commands with -e"};
    } else if (a == "-l" || a == "--line-length") {
      ++k;
    } else if (!StartsWith(a, "-") && !explicit_script) {
      scripts.push_back(a);
      break;
    }
  }
  for (const std::string& script : scripts) {
    Result<SedEffects> effects = ReadSedScript(script);
    if (!effects.ok()) {
      return Refusal{
          fmt::format("'{}': {}, so the policy cannot tell what it runs", c.text, effects.status().message()),
          "write the sed script plainly"};
    }
    if (!effects->runs.empty()) {
      return Refusal{fmt::format("'{}' runs commands through sed's e command", c.text), kInsteadShell};
    }
    for (const std::string& file : effects->writes) {
      const std::string p = NormalizePath(file);
      if (p == "/dev/stdout" || p == "/dev/stderr") continue;
      if (ClassifyPath(p).kind != FileKind::kData || !HostKillingKnob(p).empty() || IsBlockDevice(p)) {
        return Refusal{fmt::format("'{}' writes {} with sed's w command", c.text, file),
                       "write such files with write_file, whose content the policy judges"};
      }
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// One judge per kind of program; JudgeFor picks it by the program's name.

using ProgramJudge = std::optional<Refusal> (*)(const SimpleCommand& c, const PolicyContext& ctx);

// Writes through redirections, whatever the program: devices, kernel knobs, the bootloader.
std::optional<Refusal> JudgeRedirects(const SimpleCommand& c, const PolicyContext& ctx) {
  for (const Redirect& r : c.redirects) {
    if (r.op.find('>') == std::string::npos) continue;
    if (IsBlockDevice(r.target))
      return Refusal{fmt::format("it writes to the device {}", r.target), "never write to block devices"};
    if (std::string knob = HostKillingKnob(r.target); !knob.empty()) {
      return Refusal{fmt::format("it writes to {}: {}", r.target, knob), "never write to these kernel interfaces"};
    }
    if (!ctx.bootloader_rule && IsBootloaderPath(r.target)) {
      return Refusal{fmt::format("it writes the bootloader file {} and this rule is not a bootloader rule", r.target),
                     "leave the bootloader alone"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgePowerOff(const SimpleCommand& c, const PolicyContext&) {
  return Refusal{fmt::format("'{}' would take the host down", c.program), kInsteadReboot};
}

std::optional<Refusal> JudgeRunlevel(const SimpleCommand& c, const PolicyContext&) {
  const std::vector<std::string>& a = c.args;
  if (!a.empty() && (a[0] == "0" || a[0] == "6" || a[0] == "1" || Lower(a[0]) == "s")) {
    return Refusal{fmt::format("'{} {}' changes the runlevel and takes the host down", c.program, a[0]),
                   kInsteadReboot};
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeScheduler(const SimpleCommand& c, const PolicyContext&) {
  // at -l/-r/-d/-c list, remove or show jobs (as atq and atrm do): nothing is scheduled.
  const bool at_query = c.program == "at" && std::any_of(c.args.begin(), c.args.end(), [](const std::string& w) {
                          return w == "-l" || w == "-r" || w == "-d" || w == "-c";
                        });
  if (at_query) return std::nullopt;
  return Refusal{fmt::format("'{}' schedules a command to run later, outside the command the policy judges", c.program),
                 kInsteadLater};
}

std::optional<Refusal> JudgeCrontab(const SimpleCommand& c, const PolicyContext&) {
  if (Contains(c.args, "-l")) return std::nullopt;
  return Refusal{fmt::format("'{}' installs a cron table, whose commands would run later unjudged", c.text),
                 "write cron files with write_file (the policy judges their commands), or run the command now"};
}

std::optional<Refusal> JudgeLoginctl(const SimpleCommand& c, const PolicyContext&) {
  for (const std::string& w : c.args) {
    if (StartsWith(w, "terminate-") || StartsWith(w, "kill-")) {
      return Refusal{fmt::format("'{}' ends login sessions, temper's own among them", c.text), "leave sessions alone"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeDbus(const SimpleCommand& c, const PolicyContext&) {
  for (const std::string& w : c.args) {
    if (w.find("login1") != std::string::npos || w.find("systemd1") != std::string::npos) {
      return Refusal{fmt::format("'{}' calls systemd or logind over D-Bus, where it can stop units or power the host "
                                 "off unjudged",
                                 c.program),
                     "use systemctl, which the policy judges"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeApt(const SimpleCommand& c, const PolicyContext& ctx) {
  const std::vector<std::string>& a = c.args;
  for (size_t k = 0; k < a.size(); ++k) {
    const std::string option = Lower(a[k] == "-o" && k + 1 < a.size() ? a[k + 1] : a[k]);
    if ((StartsWith(option, "-o") || a[k] == "-o" || StartsWith(option, "--option")) &&
        (option.find("invoke") != std::string::npos || option.find("pre-install-pkgs") != std::string::npos ||
         option.find("dir::bin") != std::string::npos)) {
      return Refusal{fmt::format("'{}' gives apt a hook or a program to run", c.text), "install without hooks"};
    }
    if (a[k] == "-c" || StartsWith(a[k], "--config-file")) {
      return Refusal{fmt::format("'{}' reads an apt configuration the policy did not judge", c.text),
                     "use the system's apt configuration"};
    }
  }
  // apt-get [options] remove|purge NAME...; install of a package file runs its maintainer scripts.
  std::vector<std::string> words;
  for (const std::string& w : a) {
    if (!StartsWith(w, "-")) words.push_back(w);
  }
  if (!words.empty() && (words[0] == "remove" || words[0] == "purge")) {
    return JudgeRemoval(std::vector<std::string>(words.begin() + 1, words.end()), ctx);
  }
  if (!words.empty() && (words[0] == "install" || words[0] == "reinstall")) {
    for (size_t k = 1; k < words.size(); ++k) {
      if (words[k].find('/') != std::string::npos || words[k].ends_with(".deb")) {
        return Refusal{
            fmt::format("'{}' installs the package file {}, whose maintainer scripts the policy cannot judge", c.text,
                        words[k]),
            "install packages from the archive with install_package"};
      }
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeDpkg(const SimpleCommand& c, const PolicyContext& ctx) {
  bool removing = false;
  for (const std::string& w : c.args) {
    removing = removing || w == "-r" || w == "-P" || w == "--remove" || w == "--purge";
    if (w == "-i" || w == "--install" || w == "--unpack" || StartsWith(w, "--pre-invoke") ||
        StartsWith(w, "--post-invoke") || w == "--force-script-chrootless") {
      return Refusal{
          fmt::format("'{}' installs a package file or adds hooks, whose scripts the policy cannot judge", c.text),
          "install packages from the archive with install_package"};
    }
  }
  if (!removing) return std::nullopt;
  std::vector<std::string> names;
  for (const std::string& w : c.args) {
    if (!StartsWith(w, "-")) names.push_back(w);
  }
  return JudgeRemoval(names, ctx);
}

std::optional<Refusal> JudgeKill(const SimpleCommand& c, const PolicyContext&) {
  const std::string& p = c.program;
  if (Contains(c.prefixes, "xargs")) {
    return Refusal{fmt::format("'{}' signals processes named by xargs's input, which the policy cannot see", c.text),
                   "name the processes in the command"};
  }
  for (const std::string& w : c.args) {
    if (Lower(w).find("sshd") != std::string::npos || (p != "kill" && (w == "ssh" || w == "systemd" || w == "init"))) {
      return Refusal{fmt::format("'{}' would kill {} and cut off access", c.text, w),
                     "reload services with systemctl reload instead of killing them"};
    }
    if (p == "kill" && (w == "1" || w == "-1")) {
      return Refusal{fmt::format("'{}' would kill init or every process", c.text), "never signal pid 1 or -1"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeRemove(const SimpleCommand& c, const PolicyContext& ctx) {
  bool recursive = c.program == "shred";
  for (const std::string& w : c.args) {
    if (w == "--recursive" || (w.size() > 1 && w[0] == '-' && w[1] != '-' &&
                               (w.find('r') != std::string::npos || w.find('R') != std::string::npos)))
      recursive = true;
    if (w == "--no-preserve-root") return Refusal{"it asks rm not to preserve /", "never remove /"};
  }
  for (const std::string& w : c.args) {
    if (StartsWith(w, "-")) continue;
    if (recursive && IsSystemDir(w)) {
      return Refusal{fmt::format("'{}' would delete the system directory {}", c.text, w),
                     "remove only the specific files the rule names"};
    }
    if (recursive && IsBareVariable(w)) {
      return Refusal{fmt::format("'{}' deletes '{}'; if that variable is empty this removes /", c.text, w),
                     "spell out the path to remove"};
    }
    if (!ctx.bootloader_rule && IsBootloaderPath(w)) {
      return Refusal{fmt::format("'{}' removes the bootloader file {}", c.text, w), "leave the bootloader alone"};
    }
  }
  return std::nullopt;
}

bool IsDiskTool(const std::string& p) {
  static constexpr std::string_view kNames[] = {"mke2fs",   "mkswap",   "wipefs",    "fdisk",      "sfdisk",
                                                "gdisk",    "sgdisk",   "parted",    "blkdiscard", "pvremove",
                                                "vgremove", "lvremove", "cryptsetup"};
  return StartsWith(p, "mkfs") || std::find(std::begin(kNames), std::end(kNames), p) != std::end(kNames);
}

std::optional<Refusal> JudgeDiskTool(const SimpleCommand& c, const PolicyContext&) {
  return Refusal{fmt::format("'{}' rewrites disks or partitions", c.program),
                 "STIG fixes never repartition; skip such rules"};
}

std::optional<Refusal> JudgeDd(const SimpleCommand& c, const PolicyContext&) {
  for (const std::string& w : c.args) {
    if (!StartsWith(w, "of=")) continue;
    const std::string target = w.substr(3);
    if (IsBlockDevice(target)) {
      return Refusal{fmt::format("'{}' writes raw data to the device {}", c.text, target),
                     "never write to block devices"};
    }
    if (std::string knob = HostKillingKnob(target); !knob.empty()) {
      return Refusal{fmt::format("'{}' writes to {}: {}", c.text, target, knob),
                     "never write to these kernel interfaces"};
    }
  }
  return std::nullopt;
}

// Why a command may not change its own namespaces or limits: on a rootfs target it runs as the
// host's uid 0 in a cgroup with the target's caps, and a namespace or a cgroup file system of its
// own would let it write those caps away (issue 46). The sandbox refuses it itself
// (platform/sandbox_seccomp.h); the policy says so before the command runs, and on an SSH host no fix
// needs it either.
const std::string kSandboxForbids = "the sandbox forbids a command to change its own namespaces or limits";
const std::string kInsteadNamespaces =
    "run the command itself, in the namespaces and cgroup it was given; no fix needs others";

// Programs that put the command they run (or a shell) in other namespaces, or that make or move
// processes into other cgroups. unshare, nsenter, firejail and cgexec are runners
// (policy/command_runners.h): what they run is judged too, and they are judged as its prefixes.
bool ChangesNamespacesOrCgroups(std::string_view program) {
  static constexpr std::string_view kPrograms[] = {"unshare", "nsenter",    "firejail", "bwrap", "systemd-nspawn",
                                                   "cgexec",  "cgclassify", "cgcreate", "cgset", "cgdelete"};
  return std::find(std::begin(kPrograms), std::end(kPrograms), program) != std::end(kPrograms);
}

// The command itself, or a runner in front of it (`sudo unshare -U sh`, `nice nsenter -t 1 -m`,
// `ip netns exec NAME cmd`), enters or makes namespaces or cgroups.
std::optional<Refusal> JudgeNamespaceChange(const SimpleCommand& c) {
  auto refuse = [&](const std::string& program) {
    return Refusal{fmt::format("'{}' runs in namespaces or a cgroup other than its own ({}): {}", c.text, program,
                               kSandboxForbids),
                   kInsteadNamespaces};
  };
  for (const std::string& runner : c.prefixes) {
    // `ip` is a runner only as `ip netns exec` and `ip vrf exec`: another network namespace, or a
    // cgroup with a BPF program attached.
    if (ChangesNamespacesOrCgroups(runner) || runner == "ip") return refuse(runner);
  }
  if (ChangesNamespacesOrCgroups(c.program)) return refuse(c.program);
  return std::nullopt;
}

// The file system types `mount` is given (-t TYPE, -tTYPE, a cluster ending in t, --types TYPE,
// --types=TYPE; a comma-separated list each), with whether the word held an expansion.
std::vector<std::pair<std::string, bool>> MountTypes(const SimpleCommand& c) {
  // mount's short options that take a value (util-linux mount(8)).
  constexpr std::string_view kShortWithValue = "toOLUNT";
  std::vector<std::pair<std::string, bool>> words;
  for (size_t k = 0; k < c.args.size(); ++k) {
    const std::string& a = c.args[k];
    const bool expanded = c.args_expanded[k];
    if (a == "--types" && k + 1 < c.args.size()) {
      words.push_back({c.args[k + 1], c.args_expanded[k + 1]});
      ++k;
    } else if (StartsWith(a, "--types=")) {
      words.push_back({a.substr(8), expanded});
    } else if (a.size() > 1 && a[0] == '-' && a[1] != '-') {
      for (size_t i = 1; i < a.size(); ++i) {
        if (kShortWithValue.find(a[i]) == std::string_view::npos) continue;
        if (a[i] == 't') {
          if (i + 1 < a.size()) words.push_back({a.substr(i + 1), expanded});
          else if (k + 1 < c.args.size()) words.push_back({c.args[k + 1], c.args_expanded[k + 1]});
        }
        if (i + 1 >= a.size()) ++k;  // the value is the next word
        break;
      }
    }
  }
  std::vector<std::pair<std::string, bool>> types;
  for (const auto& [word, expanded] : words) {
    size_t start = 0;
    while (start <= word.size()) {
      const size_t comma = word.find(',', start);
      types.push_back(
          {Lower(word.substr(start, comma == std::string::npos ? std::string::npos : comma - start)), expanded});
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return types;
}

// Kernel file systems through which a command could reach its own limits: its cgroup's files
// (cgroup, cgroup2), other processes and kernel knobs (proc, sysfs), cgroup BPF programs (bpf).
bool IsKernelControlFs(std::string type) {
  if (StartsWith(type, "no")) type = type.substr(2);  // -t noproc: every type but proc, for -a
  return type == "cgroup" || type == "cgroup2" || type == "proc" || type == "sysfs" || type == "bpf";
}

std::optional<Refusal> JudgeMount(const SimpleCommand& c, const PolicyContext&) {
  for (const auto& [type, expanded] : MountTypes(c)) {
    if (expanded) {
      return Refusal{
          fmt::format("'{}' mounts a file system whose type is computed when it runs, so it may be a cgroup, "
                      "proc, sysfs or bpf file system: {}",
                      c.text, kSandboxForbids),
          kInsteadNamespaces};
    }
    if (IsKernelControlFs(type)) {
      return Refusal{fmt::format("'{}' mounts a {} file system: {}", c.text, type, kSandboxForbids),
                     kInsteadNamespaces};
    }
  }
  if (std::find(c.prefixes.begin(), c.prefixes.end(), "xargs") != c.prefixes.end()) {
    return Refusal{fmt::format("'{}' mounts what xargs's input names, which the policy cannot see", c.text),
                   "name what to mount"};
  }
  for (const std::string& w : c.args) {
    const std::string l = Lower(w);
    if (w == "--bind" || w == "-B" || w == "--rbind" || w == "-R" || w == "--move" || w == "-M" ||
        l.find("bind") != std::string::npos || l == "overlay" || l.find("move") != std::string::npos) {
      return Refusal{fmt::format("'{}' replaces what a directory holds with files the policy never judged", c.text),
                     "change the files themselves"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeOwnership(const SimpleCommand& c, const PolicyContext&) {
  bool recursive = false;
  for (const std::string& w : c.args) {
    if (w == "--recursive" || w == "-R" ||
        (w.size() > 1 && w[0] == '-' && w[1] != '-' && w.find('R') != std::string::npos))
      recursive = true;
  }
  for (const std::string& w : c.args) {
    if (StartsWith(w, "-")) continue;
    if (NormalizePath(w) == "/" || (recursive && IsSystemDir(w))) {
      return Refusal{fmt::format("'{}' changes ownership or permissions of a whole system tree", c.text),
                     "change only the files the rule names (find ... -exec is fine for a narrow match)"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeBootloaderTool(const SimpleCommand& c, const PolicyContext& ctx) {
  if (ctx.bootloader_rule) return std::nullopt;
  return Refusal{fmt::format("'{}' changes the bootloader and this rule is not a bootloader rule", c.program),
                 "leave the bootloader alone"};
}

// Programs that edit or write the files they name: the bootloader's only for a bootloader rule,
// devices and kernel knobs never.
std::optional<Refusal> JudgeFileEdit(const SimpleCommand& c, const PolicyContext& ctx) {
  const std::string& p = c.program;
  const std::vector<std::string>& a = c.args;
  bool in_place = p != "sed" && p != "perl";
  for (const std::string& w : a) in_place = in_place || StartsWith(w, "-i") || w == "--in-place";
  if (in_place && !ctx.bootloader_rule) {
    for (const std::string& w : a) {
      if (!StartsWith(w, "-") && IsBootloaderPath(w)) {
        return Refusal{fmt::format("'{}' edits the bootloader file {} and this rule is not a bootloader rule", p, w),
                       "leave the bootloader alone"};
      }
    }
  }
  for (const std::string& w : a) {
    if ((p == "tee" || p == "cp" || p == "mv" || p == "install") && IsBlockDevice(w)) {
      return Refusal{fmt::format("'{}' writes to the device {}", p, w), "never write to block devices"};
    }
    if ((p == "tee" || p == "cp" || p == "mv" || p == "install" || p == "ln" || p == "truncate") &&
        !StartsWith(w, "-")) {
      if (std::string knob = HostKillingKnob(w); !knob.empty()) {
        return Refusal{fmt::format("'{}' writes to {}: {}", c.text, w, knob), "never write to these kernel interfaces"};
      }
    }
  }
  return std::nullopt;
}

// sed: its own commands (e, w), then as any file editor.
std::optional<Refusal> JudgeSedCommand(const SimpleCommand& c, const PolicyContext& ctx) {
  if (auto r = JudgeSed(c)) return r;
  return JudgeFileEdit(c, ctx);
}

std::optional<Refusal> JudgeForeignCode(const SimpleCommand& c, const PolicyContext&) {
  const std::vector<std::string>& a = c.args;
  const bool only_asks = !a.empty() && std::all_of(a.begin(), a.end(), [](const std::string& w) {
    return w == "-V" || w == "--version" || w == "-v" || w == "-h" || w == "--help";
  });
  if (only_asks) return std::nullopt;
  return Refusal{fmt::format("'{}' runs {} code, which the policy cannot judge (it judges shell commands only)", c.text,
                             c.program),
                 kInsteadShell};
}

// perl: a file editor (perl -i) and an interpreter.
std::optional<Refusal> JudgePerl(const SimpleCommand& c, const PolicyContext& ctx) {
  if (auto r = JudgeFileEdit(c, ctx)) return r;
  return JudgeForeignCode(c, ctx);
}

std::optional<Refusal> JudgeInterfaceDown(const SimpleCommand& c, const PolicyContext&) {
  if (c.program == "ifconfig" && !Contains(c.args, "down")) return std::nullopt;
  return Refusal{fmt::format("'{}' takes a network interface down", c.text), "configure, don't disconnect"};
}

std::optional<Refusal> JudgeIp(const SimpleCommand& c, const PolicyContext&) {
  const std::vector<std::string>& a = c.args;
  if (Contains(a, "link") && Contains(a, "down")) {
    return Refusal{fmt::format("'{}' takes a network interface down", c.text), "configure, don't disconnect"};
  }
  if (!a.empty() &&
      (Contains(a, "flush") || (Contains(a, "del") && (Contains(a, "default") || a[0].starts_with("a"))))) {
    return Refusal{fmt::format("'{}' removes the host's addresses or routes", c.text), "configure, don't disconnect"};
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeNmcli(const SimpleCommand& c, const PolicyContext&) {
  std::string joined;
  for (const std::string& w : c.args) joined += " " + Lower(w);
  if (joined.find("networking off") != std::string::npos || joined.find(" down") != std::string::npos ||
      joined.find("radio all off") != std::string::npos || joined.find(" disconnect") != std::string::npos) {
    return Refusal{fmt::format("'{}' disconnects the host", c.text), "configure, don't disconnect"};
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeIptables(const SimpleCommand& c, const PolicyContext&) {
  const std::vector<std::string>& a = c.args;
  if (Contains(a, "-F") || Contains(a, "--flush")) {
    return Refusal{fmt::format("'{}' flushes the firewall", c.text), "add or change specific rules"};
  }
  if ((Contains(a, "-P") || Contains(a, "--policy")) && Contains(a, "DROP") &&
      (Contains(a, "INPUT") || Contains(a, "OUTPUT"))) {
    return Refusal{fmt::format("'{}' drops all traffic, ssh included", c.text),
                   "use firewalld zones and allow ssh first"};
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeNft(const SimpleCommand& c, const PolicyContext&) {
  if (Contains(c.args, "flush") && Contains(c.args, "ruleset")) {
    return Refusal{fmt::format("'{}' flushes the firewall", c.text), "add or change specific rules"};
  }
  return std::nullopt;
}

// Programs judged by name: each name in one row.
struct NamedJudge {
  std::string_view programs;  // space-separated
  ProgramJudge judge;
};
constexpr NamedJudge kNamedJudges[] = {
    {"reboot shutdown halt poweroff kexec", JudgePowerOff},
    {"init telinit", JudgeRunlevel},
    {"systemctl service", JudgeSystemctl},
    {"systemd-run at batch atrun", JudgeScheduler},
    {"crontab", JudgeCrontab},
    {"loginctl", JudgeLoginctl},
    {"busctl dbus-send gdbus", JudgeDbus},
    {"sysctl", JudgeSysctl},
    {"apt-get apt aptitude", JudgeApt},
    {"dpkg", JudgeDpkg},
    {"kill pkill killall skill", JudgeKill},
    {"rm shred", JudgeRemove},
    {"dd", JudgeDd},
    {"mount", JudgeMount},
    {"chmod chown chgrp setfacl chattr", JudgeOwnership},
    {"grub-mkconfig grub2-mkconfig update-grub update-grub2 grubby grub2-editenv grub-editenv grub-install "
     "grub2-install efibootmgr kernelstub bootctl",
     JudgeBootloaderTool},
    {"sed", JudgeSedCommand},
    {"tee cp mv install ln truncate touch patch augtool", JudgeFileEdit},
    {"perl", JudgePerl},
    {"awk gawk mawk nawk", JudgeAwk},
    {"ifdown ifconfig", JudgeInterfaceDown},
    {"ip", JudgeIp},
    {"nmcli", JudgeNmcli},
    {"iptables ip6tables", JudgeIptables},
    {"nft", JudgeNft},
};

// Families of programs no name list can hold; tried after the names (perl is named above).
struct FamilyJudge {
  bool (*matches)(const std::string& program);
  ProgramJudge judge;
};
constexpr FamilyJudge kFamilyJudges[] = {
    {IsDiskTool, JudgeDiskTool},
    {IsForeignInterpreter, JudgeForeignCode},
};

bool Names(std::string_view list, std::string_view program) {
  while (!list.empty()) {
    const size_t space = list.find(' ');
    if (list.substr(0, space) == program) return true;
    if (space == std::string_view::npos) break;
    list.remove_prefix(space + 1);
  }
  return false;
}

// The judge of `program`; nullptr for programs the policy lets run as they are.
ProgramJudge JudgeFor(const std::string& program) {
  for (const NamedJudge& row : kNamedJudges) {
    if (Names(row.programs, program)) return row.judge;
  }
  for (const FamilyJudge& row : kFamilyJudges) {
    if (row.matches(program)) return row.judge;
  }
  return nullptr;
}

}  // namespace

bool IsSshUnit(std::string_view raw) {
  std::string u = Lower(raw);
  for (std::string_view suffix : {".service", ".socket"}) {
    if (u.size() > suffix.size() && u.ends_with(suffix)) u.resize(u.size() - suffix.size());
  }
  return u == "sshd" || u == "ssh" || u == "openssh-server" || u == "sshd@*";
}

bool IsStateUnit(std::string_view raw) {
  std::string u = Lower(raw);
  if (u.find('.') == std::string::npos) u += ".service";
  static constexpr std::string_view kUnits[] = {"reboot.target",
                                                "poweroff.target",
                                                "halt.target",
                                                "kexec.target",
                                                "soft-reboot.target",
                                                "ctrl-alt-del.target",
                                                "rescue.target",
                                                "emergency.target",
                                                "shutdown.target",
                                                "final.target",
                                                "exit.target",
                                                "sleep.target",
                                                "suspend.target",
                                                "hibernate.target",
                                                "hybrid-sleep.target",
                                                "suspend-then-hibernate.target",
                                                "systemd-reboot.service",
                                                "systemd-poweroff.service",
                                                "systemd-halt.service",
                                                "systemd-kexec.service",
                                                "systemd-soft-reboot.service",
                                                "systemd-suspend.service",
                                                "systemd-hibernate.service",
                                                "systemd-hybrid-sleep.service",
                                                "systemd-suspend-then-hibernate.service",
                                                "rescue.service",
                                                "emergency.service",
                                                "systemd-exit.service"};
  return std::find(std::begin(kUnits), std::end(kUnits), u) != std::end(kUnits);
}

bool IsBlockDevice(std::string_view raw) {
  std::string p = NormalizePath(raw);
  if (!StartsWith(p, "/dev/")) return false;
  static constexpr std::string_view kSafe[] = {"/dev/null",  "/dev/zero", "/dev/stdout",  "/dev/stderr",
                                               "/dev/stdin", "/dev/tty",  "/dev/urandom", "/dev/random",
                                               "/dev/fd/",   "/dev/shm/", "/dev/pts/"};
  for (std::string_view s : kSafe) {
    if (p == s || (s.back() == '/' && StartsWith(p, s))) return false;
  }
  return true;
}

bool IsBootloaderPath(std::string_view raw) {
  std::string p = NormalizePath(raw);
  return StartsWith(p, "/boot/") || p == "/boot" || p == "/etc/default/grub" || StartsWith(p, "/etc/default/grub.d") ||
         StartsWith(p, "/etc/grub.d") || StartsWith(p, "/etc/grub2") || p == "/etc/grub.conf" ||
         StartsWith(p, "/etc/kernel/cmdline");
}

std::string HostKillingKnob(std::string_view raw) {
  const std::string p = NormalizePath(raw);
  if (p == "/proc/sysrq-trigger") return "it makes the kernel reboot, halt or crash the host at once";
  if (Under(p, "/sys/power")) return "it suspends, hibernates or powers off the host";
  static constexpr std::string_view kKernelHelpers[] = {"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                                                        "/proc/sys/kernel/hotplug", "/proc/sys/kernel/poweroff_cmd",
                                                        "/sys/kernel/uevent_helper"};
  if (std::find(std::begin(kKernelHelpers), std::end(kKernelHelpers), p) != std::end(kKernelHelpers)) {
    return "it names a program the kernel runs as root";
  }
  if (p == "/proc/sys/kernel/sysrq") return "it enables /proc/sysrq-trigger, which reboots or halts the host";
  static constexpr std::string_view kPanics[] = {"/proc/sys/kernel/panic",    "/proc/sys/kernel/panic_on_oops",
                                                 "/proc/sys/vm/panic_on_oom", "/proc/sys/kernel/ctrl-alt-del",
                                                 "/proc/sys/kernel/cad_pid",  "/proc/sys/kernel/hung_task_panic"};
  if (std::find(std::begin(kPanics), std::end(kPanics), p) != std::end(kPanics)) {
    return "it changes when the kernel panics or reboots the host";
  }
  if (Under(p, "/proc/sys/fs/binfmt_misc")) return "it registers a program the kernel runs for other files";
  if (Under(p, "/sys/firmware")) return "it changes the firmware's variables, which can leave the host unbootable";
  if (Under(p, "/sys/bus") || Under(p, "/sys/block") || Under(p, "/sys/devices") || Under(p, "/sys/class")) {
    return "it removes, unbinds or switches off devices (disks, network cards, CPUs)";
  }
  return "";
}

std::optional<Refusal> JudgeRemoval(const std::vector<std::string>& names, const PolicyContext& ctx) {
  if (!ctx.allow_package_removal && !names.empty()) {
    return Refusal{fmt::format("removing packages ({}) is a disruptive change and this batch does not allow disruptive "
                               "changes",
                               fmt::join(names, ", ")),
                   "change nothing and finish, saying the rule needs a batch submitted with --allow-disruptive"};
  }
  for (const std::string& n : names) {
    if (IsProtectedPackage(n)) {
      return Refusal{fmt::format("removing the package {} would cut off access to the host or leave it unable to "
                                 "boot, log in or install packages",
                                 n),
                     "keep it and change its configuration; STIG rules never require removing it"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> JudgeSimpleCommand(const SimpleCommand& c, const PolicyContext& ctx) {
  if (auto r = JudgeRedirects(c, ctx)) return r;
  if (auto r = JudgeNamespaceChange(c)) return r;
  if (c.program.empty()) return std::nullopt;
  const ProgramJudge judge = JudgeFor(c.program);
  return judge ? judge(c, ctx) : std::nullopt;
}

}  // namespace temper
