#include "stig/ssh/host_paths.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "common/lexical_path.h"
#include "policy/shell_split.h"
#include "policy/shell_variables.h"
#include "stig/ssh/login_guard.h"

namespace temper::stig {

namespace {

bool HasFlag(const SimpleCommand& c, char letter, std::string_view long_name) {
  return std::any_of(c.args.begin(), c.args.end(), [&](const std::string& a) {
    if (a == long_name) return true;
    return a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find(letter) != std::string::npos;
  });
}

// Programs that, run by find -exec, change or remove what they are given.
bool Destroys(const std::string& program) {
  return program == "rm" || program == "mv" || program == "shred" || program == "truncate" || program == "unlink" ||
         program == "rmdir" || program == "cp" || program == "dd" || program == "tee" || program == "ln" ||
         program == "sed";
}

// The command changes what lies under the paths it names, not only the paths themselves.
bool Recursive(const SimpleCommand& c) {
  const std::string& p = c.program;
  if (p == "rm") return HasFlag(c, 'r', "--recursive") || HasFlag(c, 'R', "--recursive");
  if (p == "mv" || p == "rsync" || p == "tar" || p == "cpio" || p == "unzip") return true;
  if (p == "cp")
    return HasFlag(c, 'r', "--recursive") || HasFlag(c, 'R', "--recursive") || HasFlag(c, 'a', "--archive");
  if (p == "find") {
    for (size_t k = 0; k < c.args.size(); ++k) {
      const std::string& a = c.args[k];
      if (a == "-delete") return true;
      if ((a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir") && k + 1 < c.args.size()) {
        const std::string& program = c.args[k + 1];
        if (Destroys(program.substr(program.rfind('/') + 1))) return true;
      }
    }
  }
  return false;
}

}  // namespace

Result<std::vector<NamedPath>> PathsNamedBy(std::string_view command) {
  TEMPER_ASSIGN_OR_RETURN(ParsedShell parsed, SplitShellCommand(command));
  const ShellVariables vars(parsed.assignments);
  std::optional<std::string> cwd;
  std::vector<NamedPath> out;
  // `word` as a normalized absolute path, or nullopt.
  auto path_of = [&](const std::string& raw, bool expanded) -> std::optional<std::string> {
    std::string text = raw;
    if (expanded) {
      auto values = vars.Resolve(raw);
      text = values && values->size() == 1 && (*values)[0].size() == 1 ? (*values)[0][0] : vars.Substitute(raw);
    }
    if (text.starts_with("-")) {
      const size_t eq = text.find('=');
      if (eq == std::string::npos) return std::nullopt;
      text = text.substr(eq + 1);
    }
    if (text.empty() || text.find('$') != std::string::npos || text.find('`') != std::string::npos) return std::nullopt;
    if (text[0] == '~') return std::nullopt;
    if (text[0] != '/') {
      if (!cwd) return std::nullopt;
      text = *cwd + "/" + text;
    }
    return NormalizePath(text);
  };
  for (size_t index = 0; index < parsed.commands.size(); ++index) {
    const SimpleCommand& c = parsed.commands[index];
    const bool changes = !OnlyReads(c);
    const bool recursive = changes && Recursive(c);
    for (const Redirect& r : c.redirects) {
      if (r.op.ends_with("<<") || r.op.ends_with("<<-") || r.op.ends_with("<<<") || r.op.ends_with(">&") ||
          r.op.ends_with("<&"))
        continue;
      if (std::optional<std::string> p = path_of(r.target, r.target_expanded)) {
        out.push_back({*p, r.op.find('>') != std::string::npos, false, c.text});
      }
    }
    for (size_t k = 0; k < c.args.size(); ++k) {
      if (std::optional<std::string> p = path_of(c.args[k], c.args_expanded[k]))
        out.push_back({*p, changes, recursive, c.text});
    }
    if (c.program == "cd" || c.program == "pushd") {
      cwd.reset();
      for (size_t k = 0; k < c.args.size(); ++k) {
        if (!c.args[k].starts_with("-")) {
          cwd = path_of(c.args[k], c.args_expanded[k]);
          break;
        }
      }
    }
  }
  return out;
}

std::string HostDirRisk(const NamedPath& named, std::string_view dir) {
  if (!named.changes) return "";
  const std::string d = NormalizePath(dir);
  if (PathWithin(named.path, d)) {
    return fmt::format(
        "'{}' changes {}, in temper's own directory on this host ({}), which holds the undo journal "
        "that reverts it",
        named.command, named.path, d);
  }
  if (named.recursive && PathWithin(d, named.path)) {
    return fmt::format(
        "'{}' changes everything under {}, temper's own directory on this host ({}) among it, which "
        "holds the undo journal that reverts it",
        named.command, named.path, d);
  }
  return "";
}

}  // namespace temper::stig
