#include "stig/fix_replay.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <variant>

#include <fmt/format.h>

#include "common/md5.h"
#include "stig/line_merge.h"
#include "stig/package_install.h"
#include "stig/shell_quote.h"

namespace temper::stig {
namespace {

// A command's text stays under the kernel's limit for one argument (MAX_ARG_STRLEN, 128 KiB): a
// rootfs target hands it to `sh -c`, an SSH host to ssh's command line.
constexpr std::size_t kMaxCommandBytes = 64 * 1024;

SandboxLimits ReplayLimits() {
  SandboxLimits limits;
  limits.timeout = std::chrono::minutes(10);
  limits.max_output_bytes = 16 << 20;
  return limits;
}

// What a path is on the target now.
struct Current {
  bool exists = false;
  FileState state;
  std::string content;  // a regular file's bytes, when its size is one the bundle could match
  std::string sha256;
};

// Prints, per path, one line "F mode uid gid size", "D mode uid gid", "L mode uid gid" followed by
// the link's target and a NUL, "O" (something else) or "N" (nothing). `stat -c %a` keeps the
// setuid, setgid and sticky bits; `[ -L ]` is tested first, so no link is followed.
constexpr std::string_view kStatFunction =
    "s() { if [ -L \"$1\" ]; then printf 'L %s\\n' \"$(stat -c '%a %u %g' -- \"$1\")\"; readlink -n -- \"$1\"; "
    "printf '\\000'; elif [ -d \"$1\" ]; then printf 'D %s\\n' \"$(stat -c '%a %u %g' -- \"$1\")\"; "
    "elif [ -f \"$1\" ]; then printf 'F %s\\n' \"$(stat -c '%a %u %g %s' -- \"$1\")\"; "
    "elif [ -e \"$1\" ]; then echo O; else echo N; fi; }; ";

Status CommandFailed(const Target& target, const std::string& command, const ProcessResult& r) {
  return Status::Internal(fmt::format("replaying a fix on {}: `{}` failed ({}): {}", target.name(), command,
                                      r.Describe(), r.err.substr(0, 2000)));
}

Result<ProcessResult> RunChecked(Target& target, const std::string& command) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, target.Run(command, ReplayLimits()));
  if (!r.Succeeded()) return CommandFailed(target, command, r);
  return r;
}

// The states of `paths` on the target, read in as few commands as fit.
Result<std::vector<Current>> ReadStates(Target& target, const std::vector<const BundleFile*>& files) {
  std::vector<Current> out;
  std::size_t next = 0;
  while (next < files.size()) {
    std::string command(kStatFunction);
    std::size_t first = next;
    while (next < files.size() && (next == first || command.size() + files[next]->path.size() < kMaxCommandBytes)) {
      command += "s " + ShellQuote(files[next]->path) + "; ";
      ++next;
    }
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunChecked(target, command));
    std::string_view text = r.out;
    for (std::size_t i = first; i < next; ++i) {
      std::size_t end = text.find('\n');
      if (end == std::string_view::npos) {
        return Status::Internal(
            fmt::format("replaying a fix on {}: the state of {} did not come back", target.name(), files[i]->path));
      }
      std::string line(text.substr(0, end));
      text.remove_prefix(end + 1);
      Current c;
      char kind = line.empty() ? '?' : line[0];
      unsigned mode = 0, uid = 0, gid = 0;
      unsigned long long size = 0;
      if (kind == 'F' || kind == 'D' || kind == 'L') {
        int want = kind == 'F' ? 4 : 3;
        if (std::sscanf(line.c_str() + 1, " %o %u %u %llu", &mode, &uid, &gid, &size) < want) {
          return Status::Internal(fmt::format("replaying a fix on {}: unreadable state of {}: \"{}\"", target.name(),
                                              files[i]->path, line));
        }
        c.exists = true;
        c.state = FileState{.type = kind == 'F'   ? FileType::kFile
                                    : kind == 'D' ? FileType::kDir
                                                  : FileType::kSymlink,
                            .mode = mode & 07777,
                            .uid = uid,
                            .gid = gid,
                            .size = kind == 'F' ? size : 0};
        if (kind == 'L') {
          std::size_t nul = text.find('\0');
          if (nul == std::string_view::npos) return Status::Internal("replaying a fix: a link's target was cut short");
          c.state.link = std::string(text.substr(0, nul));
          c.state.size = c.state.link.size();
          text.remove_prefix(nul + 1);
        }
      } else if (kind == 'O') {
        c.exists = true;
        c.state.type = FileType::kOther;
      } else if (kind != 'N') {
        return Status::Internal(
            fmt::format("replaying a fix on {}: unreadable state of {}: \"{}\"", target.name(), files[i]->path, line));
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

// Reads a regular file's bytes when its size matches one the bundle names: only then can they
// match, and only then (or for a merge) are they needed.
Status ReadContent(Target& target, const BundleFile& f, Current& c) {
  if (!c.exists || c.state.type != FileType::kFile) return Status::OK();
  bool wanted = false;
  for (const std::optional<FileImage>* image : {&f.before, &f.after}) {
    if (*image && (*image)->state.type == FileType::kFile) wanted = true;
  }
  if (!wanted || c.state.size > kMaxBundleFileBytes) return Status::OK();
  Result<std::string> content = target.ReadFile(f.path, kMaxBundleFileBytes);
  if (!content.ok()) return content.status().WithContext("replaying a fix: reading " + f.path);
  c.content = std::move(*content);
  c.state.size = c.content.size();
  c.sha256 = ContentSha256(c.content);
  return Status::OK();
}

bool Matches(const Current& c, const std::optional<FileImage>& image) {
  if (!image) return !c.exists;
  if (!c.exists || c.state.type != image->state.type) return false;
  if (c.state.uid != image->state.uid || c.state.gid != image->state.gid) return false;
  switch (image->state.type) {
    case FileType::kFile:
      return c.state.mode == image->state.mode && c.sha256 == image->sha256;
    case FileType::kSymlink:
      return c.state.link == image->state.link;  // a link's own mode means nothing
    case FileType::kDir:
      return c.state.mode == image->state.mode;
    case FileType::kOther:
      return false;
  }
  return false;
}

bool IsText(std::string_view s) { return s.find('\0') == std::string_view::npos && s.size() <= kMaxMergeBytes; }

// One path's part of the replay, decided before anything changes.
struct Plan {
  const BundleFile* file = nullptr;
  Current current;
  ReplayAction action = ReplayAction::kWritten;
  std::string content;  // what to write for a regular file: the fix's after, or the merge
};

// Judges one path against the bundle: the plan, or a conflict's reason.
std::variant<Plan, std::string> Judge(const BundleFile& f, Current current) {
  Plan plan{.file = &f, .current = std::move(current)};
  const Current& c = plan.current;
  if (Matches(c, f.after)) {
    plan.action = ReplayAction::kAlreadyThere;
    return plan;
  }
  if (!f.package.empty()) {
    // A package's file: as the package ships it (its md5), or the fix's after.
    if (c.exists && c.state.type == FileType::kFile && Md5Hex(c.content) == f.package_md5) {
      plan.content = f.after->content;
      return plan;
    }
    return std::string(
        fmt::format("drifted: the target's copy is neither the one package {} ships nor the fix's", f.package));
  }
  if (Matches(c, f.before)) {
    plan.action = f.after ? ReplayAction::kWritten : ReplayAction::kDeleted;
    if (f.after && f.after->state.type == FileType::kFile) plan.content = f.after->content;
    return plan;
  }
  if (!c.exists) return std::string("drifted: the target has nothing at this path, and the fix found something");
  if (!f.after) return std::string("drifted: the fix deleted this path, and the target's copy is not what it deleted");
  bool all_files = f.before && f.before->state.type == FileType::kFile && f.after->state.type == FileType::kFile &&
                   c.state.type == FileType::kFile;
  if (!all_files) {
    return std::string(fmt::format("drifted: the target holds a {} that is neither the fix's before nor after",
                                   FileTypeName(c.state.type)));
  }
  if (c.content.size() != c.state.size || !IsText(c.content) || !IsText(f.before->content) ||
      !IsText(f.after->content)) {
    return std::string(
        "drifted: the target's content is neither the fix's before nor after, and a binary or large "
        "file is not merged");
  }
  std::optional<std::string> merged = MergeLines(f.before->content, f.after->content, c.content);
  if (!merged) {
    return std::string(
        "drifted: the target's content is neither the fix's before nor after, and lines both changed "
        "differ");
  }
  plan.action = ReplayAction::kMerged;
  plan.content = std::move(*merged);
  return plan;
}

std::string Octal(std::uint32_t mode) { return fmt::format("{:04o}", mode); }

class Replay {
 public:
  Replay(Target& target, const FixBundle& bundle) : target_(target), bundle_(bundle) {}

  Result<ReplayResult> Run() {
    std::vector<const BundleFile*> own, packaged;
    for (const BundleFile& f : bundle_.files) (f.package.empty() ? own : packaged).push_back(&f);
    TEMPER_ASSIGN_OR_RETURN(std::vector<Plan> plans, JudgeAll(own));
    if (!result_.ok()) return std::move(result_);
    TEMPER_RETURN_IF_ERROR(Packages());
    // A package's file exists only once its package is installed, so it is judged after.
    TEMPER_ASSIGN_OR_RETURN(std::vector<Plan> package_plans, JudgeAll(packaged));
    if (!result_.ok()) return std::move(result_);
    plans.insert(plans.end(), std::make_move_iterator(package_plans.begin()),
                 std::make_move_iterator(package_plans.end()));
    std::sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) { return a.file->path < b.file->path; });
    // Deletions first, deepest first, so that a path whose type the fix changed (a directory made
    // a file) is empty when it is written; then the rest in path order, directories before what
    // they hold.
    for (auto it = plans.rbegin(); it != plans.rend(); ++it) {
      if (it->action == ReplayAction::kDeleted) TEMPER_RETURN_IF_ERROR(Delete(*it));
    }
    for (Plan& plan : plans) {
      if (plan.action == ReplayAction::kAlreadyThere) {
        result_.steps.push_back({ReplayAction::kAlreadyThere, plan.file->path, ""});
      } else if (plan.action != ReplayAction::kDeleted) {
        TEMPER_RETURN_IF_ERROR(Write(plan));
      }
    }
    TEMPER_RETURN_IF_ERROR(Services());
    return std::move(result_);
  }

 private:
  Result<std::vector<Plan>> JudgeAll(const std::vector<const BundleFile*>& files) {
    std::vector<Plan> plans;
    TEMPER_ASSIGN_OR_RETURN(std::vector<Current> states, ReadStates(target_, files));
    for (std::size_t i = 0; i < files.size(); ++i) {
      TEMPER_RETURN_IF_ERROR(ReadContent(target_, *files[i], states[i]));
      std::variant<Plan, std::string> judged = Judge(*files[i], std::move(states[i]));
      if (auto* why = std::get_if<std::string>(&judged)) {
        result_.conflicts.push_back({files[i]->path, std::move(*why)});
      } else {
        plans.push_back(std::move(std::get<Plan>(judged)));
      }
    }
    return plans;
  }

  // The packages the fix installed, upgraded or removed, where the target does not have them so.
  Status Packages() {
    std::vector<PackageVersion> install;
    for (const std::vector<std::string>* list : {&bundle_.packages.installed, &bundle_.packages.upgraded}) {
      for (const std::string& entry : *list) {
        // "name version" or "name old -> new": the name, and the last word.
        install.push_back({entry.substr(0, entry.find(' ')), entry.substr(entry.rfind(' ') + 1)});
      }
    }
    std::vector<std::string> remove;
    for (const std::string& entry : bundle_.packages.removed) remove.push_back(entry.substr(0, entry.find(' ')));
    if (install.empty() && remove.empty()) return Status::OK();
    using Versions = std::map<std::string, std::string>;
    TEMPER_ASSIGN_OR_RETURN(Versions have, Installed(install, remove));
    std::erase_if(install, [&](const PackageVersion& p) {
      auto it = have.find(p.name);
      return it != have.end() && it->second == p.version;
    });
    std::erase_if(remove, [&](const std::string& name) { return !have.contains(name); });
    if (install.empty() && remove.empty()) return Status::OK();  // the target has them so already
    std::vector<std::string> done;
    if (!install.empty()) {
      Result<PackageChange> r = InstallPackageVersions(target_, install, ReplayLimits());
      if (!r.ok()) {
        return Status::FailedPrecondition(r.status().message()).WithContext("replaying a fix on " + target_.name());
      }
      for (const PackageVersion& p : install) done.push_back(fmt::format("install {}={}", p.name, p.version));
    }
    if (!remove.empty()) {
      Result<PackageChange> r = RemovePackages(target_, remove, /*purge=*/false, ReplayLimits());
      if (!r.ok()) return r.status().WithContext("replaying a fix on " + target_.name());
      for (const std::string& name : remove) done.push_back("remove " + name);
    }
    result_.steps.push_back({ReplayAction::kPackages, "", fmt::format("apt-get {}", fmt::join(done, ", "))});
    return Status::OK();
  }

  // Installed versions of the packages named, from dpkg on the target.
  Result<std::map<std::string, std::string>> Installed(const std::vector<PackageVersion>& install,
                                                       const std::vector<std::string>& remove) {
    std::string command = "dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\\n'";
    for (const PackageVersion& p : install) command += " " + ShellQuote(p.name);
    for (const std::string& name : remove) command += " " + ShellQuote(name);
    // dpkg-query exits 1 when a name is unknown to it: that is an answer (not installed), not a failure.
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r, target_.Run(command + " 2>/dev/null; true", ReplayLimits()));
    std::map<std::string, std::string> out;
    std::size_t at = 0;
    while (at < r.out.size()) {
      std::size_t end = r.out.find('\n', at);
      if (end == std::string::npos) end = r.out.size();
      std::string line = r.out.substr(at, end - at);
      at = end + 1;
      std::size_t a = line.find(' '), b = line.rfind(' ');
      if (a == std::string::npos || a == b || line.substr(b + 1) != "installed") continue;
      std::string name = line.substr(0, a);
      out[name.substr(0, name.find(':'))] = line.substr(a + 1, b - a - 1);
    }
    return out;
  }

  Status Delete(const Plan& plan) {
    const std::string path = ShellQuote(plan.file->path);
    // A directory's contents were deleted before it (deepest first); one that still holds something
    // the fix never saw is not emptied here: rmdir fails and names it. One already gone (a package
    // removal or upgrade the replay ran took it) is not an error.
    std::string command = plan.current.state.type == FileType::kDir
                              ? fmt::format("if [ -d {0} ] && [ ! -L {0} ]; then rmdir -- {0}; fi", path)
                              : "rm -f -- " + path;
    TEMPER_RETURN_IF_ERROR(RunChecked(target_, command).status());
    result_.steps.push_back({ReplayAction::kDeleted, plan.file->path, command});
    return Status::OK();
  }

  Status Write(const Plan& plan) {
    const BundleFile& f = *plan.file;
    const FileImage& after = *f.after;
    const std::string path = ShellQuote(f.path);
    std::vector<std::string> commands;
    // What is there and is not of the fix's type goes first: a file is never written through a
    // link, and a link never made inside a directory that stands at its path.
    if (plan.current.exists && plan.current.state.type != after.state.type) {
      commands.push_back(plan.current.state.type == FileType::kDir ? "rmdir -- " + path : "rm -f -- " + path);
    }
    std::string owner = fmt::format("{}:{}", after.state.uid, after.state.gid);
    switch (after.state.type) {
      case FileType::kDir:
        if (!plan.current.exists || plan.current.state.type != FileType::kDir) commands.push_back("mkdir -- " + path);
        commands.push_back(fmt::format("chown {} -- {} && chmod {} -- {}", owner, path, Octal(after.state.mode), path));
        break;
      case FileType::kSymlink:
        commands.push_back(
            fmt::format("ln -sfn -- {} {} && chown -h {} -- {}", ShellQuote(after.state.link), path, owner, path));
        break;
      case FileType::kFile:
        break;
      case FileType::kOther:
        return Status::InvalidArgument(f.path + ": a bundle cannot make a FIFO, socket or device");
    }
    if (after.state.type == FileType::kFile) {
      if (!commands.empty()) TEMPER_RETURN_IF_ERROR(RunChecked(target_, commands.front()).status());
      Status written = target_.WriteFile(f.path, plan.content, after.state.mode);
      if (!written.ok()) return written.WithContext("replaying a fix on " + target_.name());
      // chown clears the setuid and setgid bits, so the mode is set after it.
      commands.push_back(fmt::format("chown {} -- {} && chmod {} -- {}", owner, path, Octal(after.state.mode), path));
      TEMPER_RETURN_IF_ERROR(RunChecked(target_, commands.back()).status());
    } else {
      std::string joined = fmt::format("{}", fmt::join(commands, " && "));
      TEMPER_RETURN_IF_ERROR(RunChecked(target_, joined).status());
      commands = {joined};
    }
    std::string what = after.state.type == FileType::kFile
                           ? fmt::format("write {} bytes (sha256 {}); {}", plan.content.size(),
                                         ContentSha256(plan.content).substr(0, 12), commands.back())
                           : commands.back();
    result_.steps.push_back({plan.action, f.path, what});
    return Status::OK();
  }

  // Starts and stops what the fix enabled, disabled, masked or unmasked, on a host whose services
  // run; the enablement itself is the unit links, which are files of the bundle.
  Status Services() {
    const ServiceChanges& s = bundle_.services;
    if (s == ServiceChanges{} || target_.ChangesAreFilesOnly()) return Status::OK();
    TEMPER_ASSIGN_OR_RETURN(ProcessResult systemd, target_.Run("test -d /run/systemd/system", ReplayLimits()));
    if (!systemd.Succeeded()) return Status::OK();
    std::vector<std::string> start, stop;
    for (const auto* list : {&s.enabled, &s.unmasked}) start.insert(start.end(), list->begin(), list->end());
    for (const auto* list : {&s.disabled, &s.masked}) stop.insert(stop.end(), list->begin(), list->end());
    std::string command = "systemctl daemon-reload";
    auto quoted = [](const std::vector<std::string>& units) {
      std::string out;
      for (const std::string& u : units) out += " " + ShellQuote(u);
      return out;
    };
    if (!start.empty()) command += " && systemctl start --" + quoted(start);
    if (!stop.empty()) command += " && systemctl stop --" + quoted(stop);
    TEMPER_RETURN_IF_ERROR(RunChecked(target_, command).status());
    result_.steps.push_back({ReplayAction::kServices, "", command});
    return Status::OK();
  }

  Target& target_;
  const FixBundle& bundle_;
  ReplayResult result_;
};

}  // namespace

std::string_view ReplayActionName(ReplayAction a) {
  switch (a) {
    case ReplayAction::kAlreadyThere:
      return "already_there";
    case ReplayAction::kWritten:
      return "written";
    case ReplayAction::kMerged:
      return "merged";
    case ReplayAction::kDeleted:
      return "deleted";
    case ReplayAction::kPackages:
      return "packages";
    case ReplayAction::kServices:
      return "services";
  }
  return "written";
}

std::string ReplayResult::Summary() const {
  if (!conflicts.empty()) {
    std::vector<std::string> parts;
    for (const ReplayConflict& c : conflicts) parts.push_back(fmt::format("{}: {}", c.path, c.why));
    return fmt::format("{} conflict{}: {}", conflicts.size(), conflicts.size() == 1 ? "" : "s", fmt::join(parts, "; "));
  }
  std::map<ReplayAction, std::size_t> counts;
  for (const ReplayStep& s : steps) ++counts[s.action];
  std::vector<std::string> files;
  for (auto [action, word] :
       {std::pair{ReplayAction::kWritten, "written"}, std::pair{ReplayAction::kMerged, "merged"},
        std::pair{ReplayAction::kDeleted, "deleted"}, std::pair{ReplayAction::kAlreadyThere, "already there"}}) {
    if (counts[action] > 0) files.push_back(fmt::format("{} {}", counts[action], word));
  }
  std::vector<std::string> parts;
  if (!files.empty()) parts.push_back(fmt::format("{}", fmt::join(files, ", ")));
  if (counts[ReplayAction::kPackages] > 0) parts.push_back("packages installed or removed");
  if (counts[ReplayAction::kServices] > 0) parts.push_back("services started or stopped");
  return parts.empty() ? "nothing to replay" : fmt::format("{}", fmt::join(parts, "; "));
}

Result<ReplayResult> ReplayFix(Target& target, const FixBundle& bundle) { return Replay(target, bundle).Run(); }

}  // namespace temper::stig
