#include "roles/command_policy.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "roles/shell_split.h"

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

// "/etc/", "/etc/." and "//etc" all name /etc.
std::string NormalizePath(std::string_view p) {
  std::string out;
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    std::string_view part = p.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
    if (part == "..") { if (!parts.empty()) parts.pop_back(); }
    else if (!part.empty() && part != ".") parts.emplace_back(part);
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  if (p.empty() || p[0] != '/') {
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
    return out;
  }
  for (const std::string& part : parts) out += "/" + part;
  return out.empty() ? "/" : out;
}

// Directories whose recursive removal or re-ownership wrecks the host.
bool IsSystemDir(std::string_view raw) {
  std::string p = NormalizePath(raw);
  if (p == "/" || p == "/*") return true;
  static constexpr std::string_view kDirs[] = {
      "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
      "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/usr/bin", "/usr/sbin", "/usr/lib",
      "/usr/lib64", "/usr/local", "/usr/share", "/var/lib", "/var/log", "/etc/ssh", "/etc/pam.d",
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
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool IsBlockDevice(std::string_view raw) {
  std::string p = NormalizePath(raw);
  if (!StartsWith(p, "/dev/")) return false;
  static constexpr std::string_view kSafe[] = {"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr",
                                               "/dev/stdin", "/dev/tty", "/dev/urandom", "/dev/random",
                                               "/dev/fd/", "/dev/shm/", "/dev/pts/"};
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

bool IsSshUnit(std::string_view raw) {
  std::string u = Lower(raw);
  for (std::string_view suffix : {".service", ".socket"}) {
    if (u.size() > suffix.size() && u.ends_with(suffix)) u.resize(u.size() - suffix.size());
  }
  return u == "sshd" || u == "ssh" || u == "openssh-server" || u == "sshd@*";
}

bool IsNetworkUnit(std::string_view raw) {
  std::string u = Lower(raw);
  if (u.ends_with(".service")) u.resize(u.size() - 8);
  return u == "network" || u == "networking" || u == "networkmanager" || u == "systemd-networkd" ||
         u == "wicked" || u == "firewalld";
}

// Packages whose removal cuts off logins or remote access, takes the network down, or leaves the
// host unable to boot or to install packages again.
bool IsProtectedPackage(std::string_view raw) {
  std::string n = Lower(raw);
  if (size_t colon = n.find(':'); colon != std::string::npos) n.resize(colon);  // libpam0g:amd64
  static constexpr std::string_view kNames[] = {
      "openssh-server", "openssh-sftp-server", "sudo", "systemd", "systemd-sysv", "init", "sysvinit-core",
      "libpam-modules", "libpam-modules-bin", "libpam-runtime", "libpam0g", "login", "passwd", "apt", "dpkg",
      "ifupdown", "netplan.io", "network-manager", "iproute2", "systemd-resolved", "initramfs-tools"};
  for (std::string_view p : kNames) {
    if (n == p) return true;
  }
  return StartsWith(n, "linux-image") || StartsWith(n, "grub");
}

struct Refusal {
  std::string why;
  std::string instead;
};

std::optional<Refusal> JudgeRemoval(const std::vector<std::string>& names, const PolicyContext& ctx) {
  if (!ctx.allow_package_removal && !names.empty()) {
    return Refusal{fmt::format("removing packages ({}) is a disruptive change and this batch does not allow disruptive "
                               "changes", fmt::join(names, ", ")),
                   "change nothing and finish, saying the rule needs a batch submitted with --allow-disruptive"};
  }
  for (const std::string& n : names) {
    if (IsProtectedPackage(n)) {
      return Refusal{fmt::format("removing the package {} would cut off access to the host or leave it unable to "
                                 "boot, log in or install packages", n),
                     "keep it and change its configuration; STIG rules never require removing it"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> Judge(const SimpleCommand& c, const PolicyContext& ctx) {
  const std::string& p = c.program;
  const std::vector<std::string>& a = c.args;
  const std::string instead_reboot =
      "changes that need a reboot are reported as pending reboot by the evaluator; make the change "
      "persistent (config files) and finish";
  for (const Redirect& r : c.redirects) {
    if (r.op.find('>') == std::string::npos) continue;
    if (IsBlockDevice(r.target)) return Refusal{fmt::format("it writes to the device {}", r.target), "never write to block devices"};
    if (!ctx.bootloader_rule && IsBootloaderPath(r.target)) {
      return Refusal{fmt::format("it writes the bootloader file {} and this rule is not a bootloader rule", r.target),
                     "leave the bootloader alone"};
    }
  }
  if (p.empty()) return std::nullopt;
  if (p == "reboot" || p == "shutdown" || p == "halt" || p == "poweroff" || p == "kexec") {
    return Refusal{fmt::format("'{}' would take the host down", p), instead_reboot};
  }
  if ((p == "init" || p == "telinit") && !a.empty() && (a[0] == "0" || a[0] == "6" || a[0] == "1" || Lower(a[0]) == "s")) {
    return Refusal{fmt::format("'{} {}' changes the runlevel and takes the host down", p, a[0]), instead_reboot};
  }
  if (p == "systemctl" || p == "service") {
    // systemctl VERB UNIT...; service UNIT VERB.
    std::vector<std::string> words;
    for (const std::string& w : a) if (!StartsWith(w, "-")) words.push_back(w);
    if (words.empty()) return std::nullopt;
    std::string verb = p == "systemctl" ? words[0] : (words.size() > 1 ? words[1] : "");
    std::vector<std::string> units;
    if (p == "systemctl") units.assign(words.begin() + 1, words.end());
    else units.push_back(words[0]);
    if (verb == "reboot" || verb == "poweroff" || verb == "halt" || verb == "kexec" || verb == "rescue" ||
        verb == "emergency" || verb == "soft-reboot" || verb == "suspend" || verb == "hibernate" ||
        (verb == "isolate" && !units.empty() && Lower(units[0]) != "default.target" && Lower(units[0]) != "multi-user.target" && Lower(units[0]) != "graphical.target")) {
      return Refusal{fmt::format("'{} {}' would take the host down", p, verb), instead_reboot};
    }
    if (verb == "stop" || verb == "disable" || verb == "mask" || verb == "kill") {
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
      }
    }
    return std::nullopt;
  }
  if (p == "apt-get" || p == "apt" || p == "aptitude") {
    // apt-get [options] remove|purge NAME...
    std::vector<std::string> words;
    for (const std::string& w : a) if (!StartsWith(w, "-")) words.push_back(w);
    if (!words.empty() && (words[0] == "remove" || words[0] == "purge")) {
      return JudgeRemoval(std::vector<std::string>(words.begin() + 1, words.end()), ctx);
    }
    return std::nullopt;
  }
  if (p == "dpkg") {
    bool removing = false;
    for (const std::string& w : a) {
      removing = removing || w == "-r" || w == "-P" || w == "--remove" || w == "--purge";
    }
    if (!removing) return std::nullopt;
    std::vector<std::string> names;
    for (const std::string& w : a) if (!StartsWith(w, "-")) names.push_back(w);
    return JudgeRemoval(names, ctx);
  }
  if (p == "kill" || p == "pkill" || p == "killall" || p == "skill") {
    for (const std::string& w : a) {
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
  if (p == "rm" || p == "shred") {
    bool recursive = p == "shred";
    for (const std::string& w : a) {
      if (w == "--recursive" || (w.size() > 1 && w[0] == '-' && w[1] != '-' && (w.find('r') != std::string::npos || w.find('R') != std::string::npos))) recursive = true;
      if (w == "--no-preserve-root") return Refusal{"it asks rm not to preserve /", "never remove /"};
    }
    for (const std::string& w : a) {
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
  if (StartsWith(p, "mkfs") || p == "mke2fs" || p == "mkswap" || p == "wipefs" || p == "fdisk" ||
      p == "sfdisk" || p == "gdisk" || p == "sgdisk" || p == "parted" || p == "blkdiscard" || p == "pvremove" ||
      p == "vgremove" || p == "lvremove" || p == "cryptsetup") {
    return Refusal{fmt::format("'{}' rewrites disks or partitions", p), "STIG fixes never repartition; skip such rules"};
  }
  if (p == "dd") {
    for (const std::string& w : a) {
      if (StartsWith(w, "of=") && IsBlockDevice(w.substr(3))) {
        return Refusal{fmt::format("'{}' writes raw data to the device {}", c.text, w.substr(3)), "never write to block devices"};
      }
    }
    return std::nullopt;
  }
  if ((p == "chmod" || p == "chown" || p == "chgrp" || p == "setfacl" || p == "chattr") ) {
    bool recursive = false;
    for (const std::string& w : a) {
      if (w == "--recursive" || w == "-R" || (w.size() > 1 && w[0] == '-' && w[1] != '-' && w.find('R') != std::string::npos)) recursive = true;
    }
    for (const std::string& w : a) {
      if (StartsWith(w, "-")) continue;
      if (NormalizePath(w) == "/" || (recursive && IsSystemDir(w))) {
        return Refusal{fmt::format("'{}' changes ownership or permissions of a whole system tree", c.text),
                       "change only the files the rule names (find ... -exec is fine for a narrow match)"};
      }
    }
    return std::nullopt;
  }
  if (p == "grub-mkconfig" || p == "grub2-mkconfig" || p == "update-grub" || p == "update-grub2" || p == "grubby" ||
      p == "grub2-editenv" || p == "grub-editenv" || p == "grub-install" || p == "grub2-install" || p == "efibootmgr" ||
      p == "kernelstub" || p == "bootctl") {
    if (ctx.bootloader_rule) return std::nullopt;
    return Refusal{fmt::format("'{}' changes the bootloader and this rule is not a bootloader rule", p),
                   "leave the bootloader alone"};
  }
  if (p == "sed" || p == "perl" || p == "tee" || p == "cp" || p == "mv" || p == "install" || p == "ln" ||
      p == "truncate" || p == "touch" || p == "patch" || p == "augtool") {
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
    }
    return std::nullopt;
  }
  if (p == "ifdown" || (p == "ifconfig" && Contains(a, "down"))) {
    return Refusal{fmt::format("'{}' takes a network interface down", c.text), "configure, don't disconnect"};
  }
  if (p == "ip" && Contains(a, "link") && Contains(a, "down")) {
    return Refusal{fmt::format("'{}' takes a network interface down", c.text), "configure, don't disconnect"};
  }
  if (p == "nmcli") {
    std::string joined;
    for (const std::string& w : a) joined += " " + Lower(w);
    if (joined.find("networking off") != std::string::npos || joined.find(" down") != std::string::npos ||
        joined.find("radio all off") != std::string::npos || joined.find(" disconnect") != std::string::npos) {
      return Refusal{fmt::format("'{}' disconnects the host", c.text), "configure, don't disconnect"};
    }
    return std::nullopt;
  }
  if ((p == "iptables" || p == "ip6tables") && (Contains(a, "-F") || Contains(a, "--flush"))) {
    return Refusal{fmt::format("'{}' flushes the firewall", c.text), "add or change specific rules"};
  }
  if ((p == "iptables" || p == "ip6tables") && (Contains(a, "-P") || Contains(a, "--policy")) && Contains(a, "DROP") &&
      (Contains(a, "INPUT") || Contains(a, "OUTPUT"))) {
    return Refusal{fmt::format("'{}' drops all traffic, ssh included", c.text), "use firewalld zones and allow ssh first"};
  }
  if (p == "nft" && Contains(a, "flush") && Contains(a, "ruleset")) {
    return Refusal{fmt::format("'{}' flushes the firewall", c.text), "add or change specific rules"};
  }
  const bool shell = p == "sh" || p == "bash" || p == "dash" || p == "zsh" || p == "ksh";
  if (shell && c.stdin_from_pipe) {
    bool has_script = false;
    for (const std::string& w : a) has_script = has_script || w == "-c" || !StartsWith(w, "-");
    if (!has_script) {
      return Refusal{fmt::format("'{}' runs a script piped in, which the policy cannot inspect", c.text),
                     "write the commands themselves, or write a script with write_file and run it"};
    }
  }
  // `bash <(curl …)`, `source <(…)`: a script another command produces, like `curl … | bash`.
  if ((shell && !Contains(a, "-c")) || p == "source" || p == ".") {
    for (const std::string& w : a) {
      if (StartsWith(w, "<(")) {
        return Refusal{fmt::format("'{}' runs a script another command produces, which the policy cannot inspect", c.text),
                       "write the commands themselves, or write a script with write_file and run it"};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

bool IsBootloaderRule(std::string_view rule_id, std::string_view title) {
  std::string id = Lower(rule_id), t = Lower(title);
  return id.find("grub") != std::string::npos || id.find("bootloader") != std::string::npos ||
         id.find("boot_loader") != std::string::npos || id.find("kernel_cmdline") != std::string::npos ||
         t.find("grub") != std::string::npos || t.find("boot loader") != std::string::npos ||
         t.find("bootloader") != std::string::npos;
}

Status CheckCommand(std::string_view command_line, const PolicyContext& context) {
  auto commands = SplitShellCommand(command_line);
  if (!commands.ok()) {
    return Status::PermissionDenied(fmt::format(
        "refused by policy: {}; a command the policy cannot parse is not run", commands.status().message()));
  }
  std::string lower = Lower(command_line);
  // A fork bomb has no program to judge; it has a shape.
  std::string squeezed;
  for (char ch : lower) if (ch != ' ' && ch != '\t') squeezed.push_back(ch);
  if (squeezed.find(":(){:|:&};:") != std::string::npos) {
    return Status::PermissionDenied("refused by policy: this is a fork bomb");
  }
  for (const SimpleCommand& c : *commands) {
    if (auto r = Judge(c, context)) {
      return Status::PermissionDenied(fmt::format("refused by policy: {}. Instead: {}. Nothing was run.", r->why, r->instead));
    }
  }
  return Status::OK();
}

Status CheckPackageRemoval(const std::vector<std::string>& names, const PolicyContext& context) {
  if (auto r = JudgeRemoval(names, context)) {
    return Status::PermissionDenied(fmt::format("refused by policy: {}. Instead: {}. Nothing was removed.", r->why, r->instead));
  }
  return Status::OK();
}

Status CheckWritePath(std::string_view path, const PolicyContext& context) {
  std::string p = NormalizePath(path);
  if (IsBlockDevice(p)) {
    return Status::PermissionDenied(fmt::format("refused by policy: {} is a device; never write to block devices", path));
  }
  if (StartsWith(p, "/proc/") || StartsWith(p, "/sys/")) {
    return Status::PermissionDenied(fmt::format(
        "refused by policy: {} is a kernel interface; write persistent settings (e.g. /etc/sysctl.d/) instead", path));
  }
  if (!context.bootloader_rule && IsBootloaderPath(p)) {
    return Status::PermissionDenied(fmt::format(
        "refused by policy: {} is a bootloader file and this rule is not a bootloader rule", path));
  }
  return Status::OK();
}

}  // namespace temper
