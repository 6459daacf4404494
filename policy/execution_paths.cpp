#include "policy/execution_paths.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "policy/command_rules.h"

namespace temper {

namespace {

bool Under(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() + 1 && path.starts_with(dir) && path[dir.size()] == '/';
}

bool UnderAny(std::string_view path, std::initializer_list<std::string_view> dirs) {
  return std::any_of(dirs.begin(), dirs.end(), [&](std::string_view d) { return Under(path, d); });
}

bool IsAny(std::string_view path, std::initializer_list<std::string_view> files) {
  return std::find(files.begin(), files.end(), path) != files.end();
}

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The file's lines, with backslash-newline continuations joined, numbered from 1 (a joined line
// keeps its first line's number).
std::vector<std::pair<size_t, std::string>> Lines(std::string_view content, bool join_continuations) {
  std::vector<std::pair<size_t, std::string>> out;
  size_t number = 0, start_number = 0;
  std::string pending;
  size_t i = 0;
  while (i <= content.size()) {
    size_t nl = content.find('\n', i);
    std::string_view line = content.substr(i, nl == std::string_view::npos ? std::string_view::npos : nl - i);
    ++number;
    if (pending.empty()) start_number = number;
    if (join_continuations && !line.empty() && line.back() == '\\') {
      pending.append(line.substr(0, line.size() - 1));
      pending.push_back(' ');
    } else {
      pending.append(line);
      out.emplace_back(start_number, std::move(pending));
      pending.clear();
    }
    if (nl == std::string_view::npos) break;
    i = nl + 1;
  }
  if (!pending.empty()) out.emplace_back(start_number, std::move(pending));
  return out;
}

std::vector<std::string> Fields(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// The rest of `line` after its first `n` whitespace-separated fields.
std::string_view AfterFields(std::string_view line, size_t n) {
  size_t i = 0;
  for (size_t f = 0; f < n; ++f) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  }
  return Trim(line.substr(std::min(i, line.size())));
}

Status Denied(std::string_view path, size_t line, std::string_view why) {
  return Status::PermissionDenied(fmt::format("{} line {}: {}", path, line, why));
}

// A line the policy cannot read as its file's format.
Status Malformed(std::string_view path, size_t line, std::string_view why) {
  return Status::InvalidArgument(fmt::format("{} line {}: {}", path, line, why));
}

bool IsShellInterpreter(std::string_view program) {
  return program == "sh" || program == "bash" || program == "dash" || program == "zsh" || program == "ksh" ||
         program == "mksh" || program == "ash";
}

bool IsStandardShell(std::string_view path) {
  return IsAny(path, {"/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/sh", "/usr/bin/bash", "/usr/bin/dash"});
}

// The whole file runs as a program: a shell script (with a shell's #! line, or none) is judged as
// one; anything else (another language, a binary) cannot be.
Result<std::vector<LaterCommand>> ProgramFile(std::string_view path, std::string_view content) {
  if (content.starts_with("#!")) {
    std::vector<std::string> words = Fields(content.substr(2, content.find('\n') - 2));
    std::string interpreter = words.empty() ? "" : std::string(Basename(words[0]));
    if (interpreter == "env" && words.size() > 1) interpreter = std::string(Basename(words[words.size() - 1]));
    if (!IsShellInterpreter(interpreter)) {
      return Denied(path, 1,
                    fmt::format("it would be a program run by '{}', which the policy cannot judge (it judges "
                                "shell scripts only)",
                                words.empty() ? "" : words[0]));
    }
  } else if (content.starts_with("\x7f"
                                 "ELF") ||
             content.find('\0') != std::string_view::npos) {
    return Denied(path, 1, "it would be a binary program, which the policy cannot judge");
  }
  return std::vector<LaterCommand>{{std::string(content), "content"}};
}

// Cron runs the text up to the first unescaped % (the rest is its input).
std::string CronCommand(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '%') {
      out.push_back('%');
      ++i;
    } else if (text[i] == '%') {
      break;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> CronTable(std::string_view path, std::string_view content,
                                            size_t fields_before_command) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, false)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    const std::vector<std::string> f = Fields(line);
    if (eq != std::string_view::npos && !f.empty() && f[0].find('=') != std::string::npos && line[0] != '@' &&
        !std::isdigit(static_cast<unsigned char>(line[0])) && line[0] != '*') {
      // NAME=value: the environment of the table's commands.
      std::string name(Trim(line.substr(0, eq)));
      std::string value(Trim(line.substr(eq + 1)));
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
        value = value.substr(1, value.size() - 2);
      }
      if (name == "SHELL" && !IsStandardShell(value))
        return Denied(path, number, fmt::format("SHELL={} runs every command of the table with that program", value));
      if (name == "BASH_ENV" || name == "ENV")
        return Denied(path, number, fmt::format("{} makes the shell run another file first", name));
      continue;
    }
    // @reboot/@daily/... take one schedule field, the rest five.
    const size_t schedule = line[0] == '@' ? 1 : 5;
    const size_t skip = schedule + fields_before_command;
    if (f.size() <= skip) return Malformed(path, number, "a schedule line without a command");
    out.push_back({CronCommand(AfterFields(line, skip)), fmt::format("line {}", number)});
  }
  return out;
}

Result<std::vector<LaterCommand>> Anacrontab(std::string_view path, std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, false)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = Fields(line);
    if (!f.empty() && f[0].find('=') != std::string::npos) {
      if (f[0].starts_with("SHELL=") && !IsStandardShell(f[0].substr(6)))
        return Denied(path, number, "SHELL= names a program that would run every job");
      continue;
    }
    if (f.size() <= 3) return Malformed(path, number, "a job line without a command");
    out.push_back({std::string(AfterFields(line, 3)), fmt::format("line {}", number)});
  }
  return out;
}

Result<std::vector<LaterCommand>> SystemdUnit(std::string_view path, std::string_view content) {
  static constexpr std::string_view kExec[] = {"ExecStart",    "ExecStartPre", "ExecStartPost", "ExecStop",
                                               "ExecStopPost", "ExecReload",   "ExecCondition"};
  static constexpr std::string_view kDependencies[] = {
      "OnFailure", "OnSuccess", "Wants",     "Requires",         "Requisite",          "BindsTo",
      "PartOf",    "Upholds",   "Conflicts", "PropagatesStopTo", "StopPropagatedFrom", "Unit"};
  static constexpr std::string_view kActions[] = {"SuccessAction",           "FailureAction",
                                                  "StartLimitAction",        "JobTimeoutAction",
                                                  "JobRunningTimeoutAction", "CtrlAltDelBurstAction"};
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, true)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string key(Trim(line.substr(0, eq)));
    std::string_view value = Trim(line.substr(eq + 1));
    if (std::find(std::begin(kExec), std::end(kExec), key) != std::end(kExec)) {
      while (!value.empty() && std::string_view("@-:+!|").find(value.front()) != std::string_view::npos)
        value.remove_prefix(1);
      if (!value.empty()) out.push_back({std::string(value), fmt::format("line {} ({})", number, key)});
      continue;
    }
    if (std::find(std::begin(kDependencies), std::end(kDependencies), key) != std::end(kDependencies)) {
      for (const std::string& unit : Fields(value)) {
        if (IsStateUnit(unit) || IsSshUnit(unit)) {
          return Denied(path, number,
                        fmt::format("{}={} would start or stop {}, which takes the host down or cuts off "
                                    "access",
                                    key, unit, unit));
        }
      }
      continue;
    }
    if (std::find(std::begin(kActions), std::end(kActions), key) != std::end(kActions)) {
      const std::string v = Lower(value);
      if (v.starts_with("reboot") || v.starts_with("poweroff") || v.starts_with("halt") || v.starts_with("kexec") ||
          v.starts_with("exit") || v.starts_with("soft-reboot")) {
        return Denied(path, number, fmt::format("{}={} takes the host down", key, value));
      }
      continue;
    }
    if (key == "Environment" &&
        (value.find("LD_PRELOAD") != std::string_view::npos || value.find("LD_AUDIT") != std::string_view::npos ||
         value.find("BASH_ENV") != std::string_view::npos)) {
      return Denied(path, number, "the environment it sets makes programs load or run other files");
    }
  }
  return out;
}

// A PAM module loaded from outside the system's library directories runs code the policy never
// saw, as root, at every login.
bool IsSystemLibrary(std::string_view module) {
  if (module.find('/') == std::string_view::npos) return true;  // found in the system's module directory
  return Under(module, "/lib") || Under(module, "/usr/lib") || Under(module, "/lib64") || Under(module, "/usr/lib64");
}

Result<std::vector<LaterCommand>> PamFile(std::string_view path, std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, true)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    const std::vector<std::string> f = Fields(line);
    for (size_t k = 0; k < f.size(); ++k) {
      if (!f[k].ends_with(".so") && f[k].find(".so") == std::string::npos) continue;
      if (f[k].find('$') != std::string::npos) {
        return Denied(path, number,
                      fmt::format("the module '{}' is computed, so the policy cannot tell what it loads", f[k]));
      }
      if (!IsSystemLibrary(f[k])) {
        return Denied(path, number,
                      fmt::format("it loads the module {}, which is not in the system's library directories", f[k]));
      }
      if (!Basename(f[k]).starts_with("pam_exec")) break;
      // pam_exec.so [options] command [args]: options are key=value or the flags below.
      size_t c = k + 1;
      static constexpr std::string_view kFlags[] = {"debug", "expose_authtok", "seteuid",
                                                    "quiet", "quiet_log",      "stdout"};
      while (c < f.size() && (f[c].find('=') != std::string::npos ||
                              std::find(std::begin(kFlags), std::end(kFlags), f[c]) != std::end(kFlags))) {
        ++c;
      }
      std::string command;
      for (size_t a = c; a < f.size(); ++a) command += (command.empty() ? "" : " ") + f[a];
      if (command.empty()) return Malformed(path, number, "pam_exec.so without a command");
      out.push_back({command, fmt::format("line {} (pam_exec)", number)});
      break;
    }
  }
  return out;
}

// udev: KEY{attr}OP"value" pairs separated by commas; RUN and PROGRAM (and IMPORT{program}) run
// their value.
Result<std::vector<LaterCommand>> UdevRules(std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, true)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ',' || std::isspace(static_cast<unsigned char>(line[i])))) ++i;
      size_t key_start = i;
      while (i < line.size() && line[i] != '=' && line[i] != '+' && line[i] != '!' && line[i] != ':' &&
             line[i] != '-' && line[i] != '"') {
        ++i;
      }
      std::string key(line.substr(key_start, i - key_start));
      while (i < line.size() && line[i] != '"') ++i;
      if (i >= line.size()) break;
      size_t end = i + 1;
      while (end < line.size() && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
      std::string value(line.substr(i + 1, std::min(end, line.size()) - i - 1));
      i = end + 1;
      const bool runs = (key.starts_with("RUN") && !key.starts_with("RUN{builtin}")) || key == "PROGRAM" ||
                        key.starts_with("IMPORT{program}");
      if (runs) out.push_back({value, fmt::format("line {} ({})", number, key)});
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> Sudoers(std::string_view path, std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, true)) {
    std::string_view line = Trim(raw);
    if (line.starts_with("#include") || line.starts_with("@include")) {
      const std::vector<std::string> f = Fields(line);
      const bool dir = f[0].ends_with("includedir");
      const std::string target = f.size() > 1 ? f[1] : "";
      if (!(dir ? target == "/etc/sudoers.d" : Under(target, "/etc/sudoers.d") || target == "/etc/sudoers")) {
        return Denied(path, number, fmt::format("it includes {}, which the policy did not judge", target));
      }
      continue;
    }
    if (line.empty() || line[0] == '#' || !line.starts_with("Defaults")) continue;
    // Defaults[:scope] option[=value], option+=value, ...
    std::string_view options = AfterFields(line, 1);
    size_t i = 0;
    while (i <= options.size()) {
      size_t comma = options.find(',', i);
      std::string_view option =
          Trim(options.substr(i, comma == std::string_view::npos ? std::string_view::npos : comma - i));
      const size_t eq = option.find('=');
      std::string name(Trim(option.substr(0, eq)));
      if (!name.empty() && (name.back() == '+' || name.back() == '-')) name.pop_back();
      std::string value(eq == std::string_view::npos ? "" : Trim(option.substr(eq + 1)));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      if (name == "mailerpath") out.push_back({value, fmt::format("line {} (mailerpath)", number)});
      if (name == "secure_path") {
        size_t s = 0;
        while (s <= value.size()) {
          size_t colon = value.find(':', s);
          std::string dir = value.substr(s, colon == std::string::npos ? std::string::npos : colon - s);
          if (!dir.empty() && !IsSystemProgramDirectory(dir)) {
            return Denied(path, number, fmt::format("secure_path puts {} before the system's programs", dir));
          }
          if (colon == std::string::npos) break;
          s = colon + 1;
        }
      }
      if (comma == std::string_view::npos) break;
      i = comma + 1;
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> Modprobe(std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, true)) {
    std::string_view line = Trim(raw);
    const std::vector<std::string> f = Fields(line);
    if (f.size() >= 3 && (f[0] == "install" || f[0] == "remove")) {
      out.push_back({std::string(AfterFields(line, 2)), fmt::format("line {} ({} {})", number, f[0], f[1])});
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> Sysctl(std::string_view path, std::string_view content) {
  for (const auto& [number, raw] : Lines(content, false)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '-') line.remove_prefix(1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(Trim(line.substr(0, eq)));
    std::replace(key.begin(), key.end(), '/', '.');
    const std::string value(Trim(line.substr(eq + 1)));
    if (key == "kernel.core_pattern" && value.starts_with("|")) {
      return Denied(path, number, "kernel.core_pattern=|… runs a program as root on every crash");
    }
    if ((key == "kernel.modprobe" || key == "kernel.hotplug" || key == "kernel.poweroff_cmd") &&
        !IsAny(value, {"", "/sbin/modprobe", "/usr/sbin/modprobe", "/sbin/poweroff", "/usr/sbin/poweroff"})) {
      return Denied(path, number, fmt::format("{} names a program the kernel runs as root", key));
    }
    if (key == "kernel.sysrq" && value != "0") {
      return Denied(path, number,
                    "kernel.sysrq other than 0 lets a write to /proc/sysrq-trigger reboot or halt the host");
    }
  }
  return std::vector<LaterCommand>{};
}

// apt.conf: the strings of the Pre-Invoke, Post-Invoke(-Success) and Pre-Install-Pkgs hooks
// (`DPkg::Pre-Invoke {"cmd";};`, or the same key in nested scopes); Dir::Bin names the programs
// apt runs.
Result<std::vector<LaterCommand>> AptConf(std::string_view path, std::string_view content) {
  std::vector<LaterCommand> out;
  const std::string lower = Lower(content);
  auto line_of = [&](size_t at) {
    return static_cast<size_t>(std::count(lower.begin(), lower.begin() + static_cast<std::ptrdiff_t>(at), '\n')) + 1;
  };
  if (size_t at = lower.find("bin::"); at != std::string::npos || (at = lower.find("dir::bin")) != std::string::npos) {
    return Denied(path, line_of(at), "Dir::Bin names the programs apt runs");
  }
  for (std::string_view hook : {"pre-invoke", "post-invoke", "pre-install-pkgs"}) {
    for (size_t at = lower.find(hook); at != std::string::npos; at = lower.find(hook, at + 1)) {
      size_t i = at + hook.size();
      while (i < content.size() && content[i] != '{' && content[i] != '"' && content[i] != ';') ++i;
      if (i >= content.size() || content[i] == ';') continue;
      // One string, or the strings of a { … } block.
      const bool block = content[i] == '{';
      for (int depth = 0; i < content.size(); ++i) {
        if (content[i] == '{') ++depth;
        if (content[i] == '}' && --depth <= 0) break;
        if (content[i] != '"') continue;
        const size_t end = content.find('"', i + 1);
        if (end == std::string_view::npos) return Malformed(path, line_of(i), "an unterminated string");
        out.push_back({std::string(content.substr(i + 1, end - i - 1)), fmt::format("line {} ({})", line_of(i), hook)});
        i = end;
        if (!block) break;
      }
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> DpkgConf(std::string_view content) {
  std::vector<LaterCommand> out;
  for (const auto& [number, raw] : Lines(content, false)) {
    std::string_view line = Trim(raw);
    for (std::string_view key : {"pre-invoke", "post-invoke"}) {
      if (!line.starts_with(key)) continue;
      std::string_view rest = Trim(line.substr(key.size()));
      if (!rest.empty() && rest[0] == '=') rest = Trim(rest.substr(1));
      out.push_back({std::string(rest), fmt::format("line {} ({})", number, key)});
    }
  }
  return out;
}

Result<std::vector<LaterCommand>> Logrotate(std::string_view content) {
  std::vector<LaterCommand> out;
  std::string script;
  std::string opened;
  size_t opened_line = 0;
  for (const auto& [number, raw] : Lines(content, false)) {
    std::string_view line = Trim(raw);
    if (!opened.empty()) {
      if (line == "endscript") {
        out.push_back({script, fmt::format("line {} ({})", opened_line, opened)});
        opened.clear();
        script.clear();
      } else {
        script += raw + "\n";
      }
      continue;
    }
    for (std::string_view key : {"prerotate", "postrotate", "firstaction", "lastaction", "preremove"}) {
      if (line == key) {
        opened = std::string(key);
        opened_line = number;
      }
    }
  }
  if (!opened.empty()) out.push_back({script, fmt::format("line {} ({})", opened_line, opened)});
  return out;
}

// A login shell's start-up and log-out files in a home directory (or /etc/skel).
bool IsShellStartupFile(std::string_view name) {
  return IsAny(name, {".bashrc", ".profile", ".bash_profile", ".bash_login", ".bash_logout", ".zshrc", ".zprofile",
                      ".zlogin", ".zlogout", ".zshenv", ".kshrc", ".mkshrc", ".xprofile", ".xsession", ".xinitrc"});
}

// "/root", "/etc/skel" or "/home/NAME", when `path` is under one; "" otherwise.
std::string_view HomeOf(std::string_view path) {
  for (std::string_view home : {"/root", "/etc/skel"}) {
    if (Under(path, home)) return home;
  }
  if (Under(path, "/home")) {
    size_t end = path.find('/', 6);
    if (end != std::string_view::npos) return path.substr(0, end);
  }
  return {};
}

}  // namespace

bool IsSystemProgramDirectory(std::string_view dir) {
  return IsAny(dir, {"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/snap/bin"});
}

ExecutionPath ClassifyPath(std::string_view p) {
  using K = FileKind;
  const std::string_view name = Basename(p);
  const std::string_view dir = p.substr(0, p.size() - name.size() - (p.size() > name.size() ? 1 : 0));
  if (p == "/etc/ld.so.preload") return {K::kLdPreload, "the list of libraries every program loads"};
  if (p == "/etc/crontab" || Under(p, "/etc/cron.d")) return {K::kCronTable, "a cron table"};
  if (p == "/etc/anacrontab") return {K::kAnacrontab, "anacron's table"};
  if (Under(p, "/var/spool/cron/atjobs") || Under(p, "/var/spool/cron/atspool")) return {K::kShellScript, "an at job"};
  if (Under(p, "/var/spool/cron")) return {K::kUserCronTable, "a user's cron table"};
  if (UnderAny(p,
               {"/etc/cron.hourly", "/etc/cron.daily", "/etc/cron.weekly", "/etc/cron.monthly", "/etc/cron.yearly"})) {
    return {K::kProgram, "a periodic cron job"};
  }
  if (p == "/etc/profile" || Under(p, "/etc/profile.d") ||
      IsAny(p, {"/etc/bash.bashrc", "/etc/bashrc", "/etc/bash.bash_logout"}) || Under(p, "/etc/zsh") ||
      p == "/etc/ssh/sshrc" || Under(p, "/etc/X11/Xsession.d")) {
    return {K::kShellScript, "a file every login shell runs"};
  }
  if (p == "/etc/rc.local" || p == "/etc/rc.d/rc.local") return {K::kShellScript, "the script run at boot"};
  if (const std::string_view home = HomeOf(p); !home.empty()) {
    const std::string_view rest = p.substr(home.size() + 1);
    if (IsShellStartupFile(rest) || rest == ".ssh/rc") return {K::kShellScript, "a file a login shell runs"};
    if (rest.starts_with(".config/systemd/")) return {K::kSystemdUnit, "a systemd user unit"};
    return {};
  }
  for (std::string_view unit_dir :
       {"/etc/systemd/system", "/etc/systemd/user", "/run/systemd/system", "/run/systemd/user", "/lib/systemd/system",
        "/usr/lib/systemd/system", "/lib/systemd/user", "/usr/lib/systemd/user", "/usr/local/lib/systemd/system",
        "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient"}) {
    if (Under(p, unit_dir)) return {K::kSystemdUnit, "a systemd unit"};
  }
  if (UnderAny(p, {"/lib/systemd", "/usr/lib/systemd", "/etc/systemd/system-generators", "/etc/systemd/user-generators",
                   "/usr/local/lib/systemd"})) {
    return {K::kProgram, "a program systemd runs"};
  }
  if (Under(p, "/etc/pam.d") || Under(p, "/usr/share/pam-configs") || p == "/etc/pam.conf")
    return {K::kPam, "a PAM configuration"};
  if (UnderAny(p, {"/etc/udev/rules.d", "/lib/udev/rules.d", "/usr/lib/udev/rules.d", "/run/udev/rules.d"})) {
    return {K::kUdevRules, "a udev rules file"};
  }
  if (p == "/etc/sudoers" || Under(p, "/etc/sudoers.d")) return {K::kSudoers, "a sudoers file"};
  if (p == "/etc/modprobe.conf" ||
      UnderAny(p, {"/etc/modprobe.d", "/lib/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d"})) {
    return {K::kModprobe, "a modprobe configuration"};
  }
  if (p == "/etc/sysctl.conf" || UnderAny(p, {"/etc/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d", "/run/sysctl.d",
                                              "/usr/local/lib/sysctl.d"})) {
    return {K::kSysctl, "a sysctl configuration"};
  }
  if (p == "/etc/apt/apt.conf" || Under(p, "/etc/apt/apt.conf.d")) return {K::kAptConf, "an apt configuration"};
  if (p == "/etc/dpkg/dpkg.cfg" || Under(p, "/etc/dpkg/dpkg.cfg.d")) return {K::kDpkgConf, "a dpkg configuration"};
  if (p == "/etc/logrotate.conf" || Under(p, "/etc/logrotate.d")) return {K::kLogrotate, "a logrotate configuration"};
  if (UnderAny(
          p, {"/etc/init.d", "/etc/rc0.d", "/etc/rc1.d", "/etc/rc2.d", "/etc/rc3.d", "/etc/rc4.d", "/etc/rc5.d",
              "/etc/rc6.d", "/etc/rcS.d", "/etc/network/if-up.d", "/etc/network/if-down.d", "/etc/network/if-pre-up.d",
              "/etc/network/if-post-down.d", "/etc/NetworkManager/dispatcher.d", "/etc/update-motd.d", "/etc/kernel",
              "/etc/initramfs-tools/hooks", "/etc/initramfs-tools/scripts"})) {
    return {K::kProgram, "a program the system runs"};
  }
  if (IsSystemProgramDirectory(dir)) return {K::kProgram, "a program in the system's program directories"};
  return {};
}

Result<std::vector<LaterCommand>> CommandsInFile(FileKind kind, std::string_view path, std::string_view content) {
  switch (kind) {
    case FileKind::kData:
      return std::vector<LaterCommand>{};
    case FileKind::kShellScript:
      return std::vector<LaterCommand>{{std::string(content), "content"}};
    case FileKind::kProgram:
      return ProgramFile(path, content);
    case FileKind::kCronTable:
      return CronTable(path, content, 1);
    case FileKind::kUserCronTable:
      return CronTable(path, content, 0);
    case FileKind::kAnacrontab:
      return Anacrontab(path, content);
    case FileKind::kSystemdUnit:
      return SystemdUnit(path, content);
    case FileKind::kPam:
      return PamFile(path, content);
    case FileKind::kUdevRules:
      return UdevRules(content);
    case FileKind::kSudoers:
      return Sudoers(path, content);
    case FileKind::kModprobe:
      return Modprobe(content);
    case FileKind::kSysctl:
      return Sysctl(path, content);
    case FileKind::kAptConf:
      return AptConf(path, content);
    case FileKind::kDpkgConf:
      return DpkgConf(content);
    case FileKind::kLogrotate:
      return Logrotate(content);
    case FileKind::kLdPreload:
      return Status::PermissionDenied(fmt::format("{} makes every program load the libraries it names", path));
  }
  return std::vector<LaterCommand>{};
}

}  // namespace temper
