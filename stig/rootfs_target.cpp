#include "stig/rootfs_target.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "stig/overlay_changes.h"

namespace temper::stig {
namespace {

// Opens `path` as if `root` were "/": absolute symlinks and ".." stay inside the root.
Result<int> OpenInRoot(const std::string& root, const std::string& path, int flags, mode_t mode) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("target path must be absolute: \"" + path + "\"");
  int dir = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::FromErrno(errno, "opening target root " + root);
  struct open_how how = {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  std::string rel = path.substr(1).empty() ? "." : path.substr(1);
  int fd = static_cast<int>(::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how));
  int e = errno;
  ::close(dir);
  if (fd < 0) {
    if (e == ENOENT) return Status::NotFound(path + " does not exist in the target");
    return Status::FromErrno(e, "opening " + path + " in the target");
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<RootfsTarget>> RootfsTarget::Open(std::string name, const std::string& dir,
                                                         const std::string& base, PackageCacheOptions packages) {
  std::optional<PackageCache> cache;
  if (!packages.dir.empty()) {
    TEMPER_ASSIGN_OR_RETURN(PackageCache opened, PackageCache::Open(std::move(packages)));
    cache.emplace(std::move(opened));
  }
  TEMPER_ASSIGN_OR_RETURN(auto layers, OverlaySnapshots::Open(dir, base));
  return std::unique_ptr<RootfsTarget>(new RootfsTarget(std::move(name), std::move(layers), std::move(cache)));
}

Result<std::unique_ptr<RootfsTarget>> RootfsTarget::CreateInDir(std::string name, const std::string& dir,
                                                                const RootfsSpec& spec, const Logger& log) {
  TEMPER_ASSIGN_OR_RETURN(RootfsBuild built, EnsureRootfs(dir, spec, log));
  return Open(std::move(name), dir + "/state", built.root);
}

Result<SnapshotId> RootfsTarget::Snapshot() { return layers_->Snapshot(); }

Status RootfsTarget::Revert(SnapshotId id) { return layers_->Revert(id); }

Result<std::vector<SnapshotOverlap>> RootfsTarget::OverlapsAbove(SnapshotId id) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<LayerOverlap> layers, layers_->OverlapsAbove(id));
  std::vector<SnapshotOverlap> out;
  for (LayerOverlap& l : layers) out.push_back({l.layer, std::move(l.paths)});
  return out;
}

Result<ChangeSet> RootfsTarget::ChangesSinceSnapshot() {
  Result<ChangeSet> changes = OverlayChanges(layers_->layers());
  if (!changes.ok()) return changes.status().WithContext("target " + name_ + ": listing its changes");
  return changes;
}

Result<ProcessResult> RootfsTarget::Run(const std::string& command, const SandboxLimits& limits) {
  return RunInSandbox(root(), command, limits);
}

Result<const PackageCache*> RootfsTarget::Packages() const {
  if (!packages_) {
    return Status::FailedPrecondition(fmt::format(
        "target {} has no package cache, so it cannot install packages (configure package_cache for temperd)", name_));
  }
  return &*packages_;
}

Result<ResolvedPackages> RootfsTarget::PreparePackages(const std::vector<std::string>& packages) {
  TEMPER_ASSIGN_OR_RETURN(const PackageCache* cache, Packages());
  // Read through the target's own resolution rules: a symlink planted there stays inside it.
  Result<std::string> status = ReadFile("/var/lib/dpkg/status", std::size_t{256} << 20);
  if (!status.ok()) return status.status().WithContext("target " + name_ + ": reading its dpkg status");
  Result<ResolvedPackages> resolved = cache->Fetch(*status, packages);
  if (!resolved.ok()) return resolved.status().WithContext("target " + name_);
  return resolved;
}

Result<ProcessResult> RootfsTarget::RunWithPackages(const std::string& command, const SandboxLimits& limits,
                                                    const ResolvedPackages& prepared) {
  TEMPER_ASSIGN_OR_RETURN(const PackageCache* cache, Packages());
  // The cache is mounted over it; a missing one would be made in the tree (and apt is not there).
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(root() + "/var/cache/apt", ec))) {
    return Status::FailedPrecondition(
        fmt::format("target {} has no directory /var/cache/apt, so its apt cannot install from the package cache", name_));
  }
  TEMPER_ASSIGN_OR_RETURN(SandboxExtras extras, cache->SandboxFor(prepared));
  return RunInSandbox(root(), command, limits, extras);
}

Result<std::string> RootfsTarget::ReadFile(const std::string& path, std::size_t max_bytes) {
  TEMPER_ASSIGN_OR_RETURN(int fd, OpenInRoot(root(), path, O_RDONLY, 0));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a regular file in the target");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::OutOfRange(fmt::format("{} is {} bytes, more than the {} allowed", path, st.st_size, max_bytes));
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::read(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(off);
  return out;
}

Status RootfsTarget::WriteFile(const std::string& path, std::string_view content, mode_t mode) {
  TEMPER_ASSIGN_OR_RETURN(int fd, OpenInRoot(root(), path, O_WRONLY | O_CREAT | O_TRUNC, mode));
  std::size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "writing " + path + " in the target");
    }
    off += static_cast<std::size_t>(n);
  }
  // O_CREAT applies the umask and keeps the mode of an existing file; the caller asked for `mode`.
  if (::fchmod(fd, mode) != 0 || ::fchown(fd, 0, 0) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "setting mode and owner of " + path + " in the target");
  }
  if (::close(fd) != 0) return Status::FromErrno(errno, "closing " + path + " in the target");
  return Status::OK();
}

Result<Evaluation> RootfsTarget::Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) {
  // OpenSCAP writes into the tree it evaluates (its package probe rebuilds a stale apt cache), so
  // it reads a throwaway view: a verdict never changes the target, nor what a revert restores.
  Result<Evaluation> out = Status::Internal("the scratch view ran no evaluation");
  TEMPER_RETURN_IF_ERROR(layers_->WithScratchView([&](const std::string& view) {
    out = evaluator.Evaluate(view, request);
    return Status::OK();
  }));
  return out;
}

}  // namespace temper::stig
