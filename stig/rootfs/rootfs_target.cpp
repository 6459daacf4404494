#include "stig/rootfs/rootfs_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "platform/sandbox.h"
#include "stig/rootfs/overlay_changes.h"
#include "stig/rootfs/overlay_fix_capture.h"
#include "stig/target_file.h"

namespace temper::stig {
namespace {

// strerror(ENOSPC) as the sandbox's programs print it (LC_ALL=C there).
constexpr std::string_view kNoSpace = "No space left on device";

}  // namespace

Result<std::unique_ptr<RootfsTarget>> RootfsTarget::Open(std::string name, const std::string& dir,
                                                         const std::string& base, PackageCacheOptions packages,
                                                         SandboxCaps caps) {
  TEMPER_RETURN_IF_ERROR(caps.Validate());
  std::shared_ptr<const PackageCache> cache;
  if (!packages.dir.empty()) {
    TEMPER_ASSIGN_OR_RETURN(PackageCache opened, PackageCache::Open(std::move(packages)));
    cache = std::make_shared<const PackageCache>(std::move(opened));
  }
  // One tree for the target and its forks: parallel attempts share the caps (sandbox_caps.h).
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<CgroupTree> cgroups, CgroupTree::Open(caps));
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<OverlaySnapshots> layers, OverlaySnapshots::Open(dir, base, caps.disk_bytes));
  caps.disk_bytes = layers->disk_bytes();
  return std::unique_ptr<RootfsTarget>(
      new RootfsTarget(std::move(name), std::move(layers), nullptr, std::move(cache), caps, std::move(cgroups)));
}

Result<std::unique_ptr<RootfsTarget>> RootfsTarget::CreateInDir(std::string name, const std::string& dir,
                                                                const RootfsSpec& spec, const Logger& log) {
  TEMPER_ASSIGN_OR_RETURN(RootfsBuild built, EnsureRootfs(dir, spec, log));
  if (::chmod(dir.c_str(), 0700) != 0) return Status::FromErrno(errno, "making " + dir + " root-only (0700)");
  return Open(std::move(name), dir + "/state", built.root);
}

Status RootfsTarget::NotOnFork(std::string_view what) const {
  if (!fork_) return Status::OK();
  return Status::FailedPrecondition(
      fmt::format("{} is a fork: it cannot {} (a fork is committed or dropped whole)", name_, what));
}

Result<SnapshotId> RootfsTarget::Snapshot() {
  TEMPER_RETURN_IF_ERROR(NotOnFork("take a snapshot"));
  return layers_->Snapshot();
}

Status RootfsTarget::Revert(SnapshotId id) {
  TEMPER_RETURN_IF_ERROR(NotOnFork("revert"));
  return layers_->Revert(id);
}

Result<std::vector<SnapshotId>> RootfsTarget::Snapshots() {
  TEMPER_RETURN_IF_ERROR(NotOnFork("list snapshots"));
  return layers_->layer_ids();
}

Result<std::vector<std::string>> RootfsTarget::UnsnapshottedPaths() {
  return fork_ ? fork_->ChangedPaths() : layers_->ChangedPaths();
}

Result<std::vector<std::string>> RootfsTarget::SnapshotChanges(SnapshotId id) {
  TEMPER_RETURN_IF_ERROR(NotOnFork("list a snapshot's changes"));
  return layers_->LayerChanges(id);
}

Status RootfsTarget::DropSnapshot(SnapshotId id) {
  TEMPER_RETURN_IF_ERROR(NotOnFork("drop a snapshot"));
  return layers_->DropLayer(id);
}

Result<std::vector<SnapshotOverlap>> RootfsTarget::OverlapsAbove(SnapshotId id) {
  TEMPER_RETURN_IF_ERROR(NotOnFork("compare snapshots"));
  TEMPER_ASSIGN_OR_RETURN(std::vector<LayerOverlap> layers, layers_->OverlapsAbove(id));
  std::vector<SnapshotOverlap> out;
  for (LayerOverlap& l : layers) out.push_back({l.layer, std::move(l.paths)});
  return out;
}

Result<std::unique_ptr<Target>> RootfsTarget::Fork() {
  TEMPER_RETURN_IF_ERROR(NotOnFork("fork"));
  Result<std::unique_ptr<OverlayFork>> fork = layers_->Fork();
  if (!fork.ok()) return fork.status().WithContext("target " + name_);
  std::string name = fmt::format("{}/fork-{}", name_, (*fork)->number());
  return std::unique_ptr<Target>(
      new RootfsTarget(std::move(name), layers_, std::move(*fork), packages_, caps_, cgroups_));
}

Result<SnapshotId> RootfsTarget::CommitFork(Target& fork) {
  TEMPER_RETURN_IF_ERROR(NotOnFork("commit a fork"));
  auto* f = dynamic_cast<RootfsTarget*>(&fork);
  if (!f || !f->fork_ || f->layers_ != layers_) {
    return Status::InvalidArgument(fmt::format("{} is not a fork of target {}", fork.name(), name_));
  }
  Result<SnapshotId> id = layers_->CommitFork(*f->fork_);
  if (!id.ok()) return id.status().WithContext("target " + name_ + ", " + f->name_);
  return id;
}

Result<ChangeSet> RootfsTarget::ChangesSinceSnapshot() {
  Result<ChangeSet> changes = OverlayChanges(fork_ ? fork_->layers() : layers_->layers());
  if (!changes.ok()) return changes.status().WithContext("target " + name_ + ": listing its changes");
  return changes;
}

Result<FixBundle> RootfsTarget::FixSinceSnapshot() {
  Result<FixBundle> bundle = OverlayFixBundle(fork_ ? fork_->layers() : layers_->layers());
  if (!bundle.ok()) return bundle.status().WithContext("target " + name_ + ": capturing its fix");
  return bundle;
}

Result<ProcessResult> RootfsTarget::Sandboxed(const std::string& command, const SandboxLimits& limits,
                                              const SandboxExtras& extras) {
  const bool full_before = layers_->DiskFull();
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunInSandbox(root(), command, limits, *cgroups_, caps_, extras));
  NoteDiskCap(r, full_before);
  return r;
}

void RootfsTarget::NoteDiskCap(ProcessResult& r, bool full_before) const {
  if (!r.cap_hit.empty()) return;
  const bool no_space = r.err.find(kNoSpace) != std::string::npos || r.out.find(kNoSpace) != std::string::npos;
  // A layer that was full already is this command's business only when it tried to write.
  if (layers_->DiskFull() && (!full_before || no_space)) {
    r.cap_hit = CapHitMessage(CapKind::kDisk, caps_);
  } else if (no_space) {
    // A request larger than what is left (fallocate, a big download) fails whole and leaves room.
    r.cap_hit =
        fmt::format("the command asked for more room than the target's writable layer has left (cap {}): {} free",
                    FormatBytes(caps_.disk_bytes), FormatBytes(layers_->FreeBytes()));
  }
}

Result<ProcessResult> RootfsTarget::Run(const std::string& command, const SandboxLimits& limits) {
  return Sandboxed(command, limits, {});
}

Result<const PackageCache*> RootfsTarget::Packages() const {
  if (!packages_) {
    return Status::FailedPrecondition(fmt::format(
        "target {} has no package cache, so it cannot install packages (configure package_cache for temperd)", name_));
  }
  return packages_.get();
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
  Result<struct stat> apt_cache = StatInTarget(root(), "/var/cache/apt");
  if (!apt_cache.ok() || !S_ISDIR(apt_cache->st_mode)) {
    return Status::FailedPrecondition(fmt::format(
        "target {} has no directory /var/cache/apt, so its apt cannot install from the package cache", name_));
  }
  TEMPER_ASSIGN_OR_RETURN(SandboxExtras extras, cache->SandboxFor(prepared));
  return Sandboxed(command, limits, extras);
}

Result<std::string> RootfsTarget::ReadFile(const std::string& path, std::size_t max_bytes) {
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fd, OpenTargetFileForRead(root(), path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "reading the size of " + path + " in the target");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Status::OutOfRange(fmt::format("{} is {} bytes, more than the {} allowed", path, st.st_size, max_bytes));
  }
  return ReadUpTo(fd.get(), static_cast<std::size_t>(st.st_size), path + " in the target");
}

Status RootfsTarget::WriteFile(const std::string& path, std::string_view content, mode_t mode) {
  auto full = [&](int e, std::string_view what) {
    if (e == ENOSPC || e == EDQUOT) {
      return Status::FailedPrecondition(fmt::format("{} {}: {}", what, path, CapHitMessage(CapKind::kDisk, caps_)));
    }
    return Status::FromErrno(e, fmt::format("{} {} in the target", what, path));
  };
  Result<UniqueFd> opened = OpenTargetFileForWrite(root(), path, mode);
  if (!opened.ok()) {
    // A new file needs an inode and a directory entry: a full layer fails the create itself.
    if (opened.status().code() == StatusCode::kIOError && layers_->DiskFull()) return full(ENOSPC, "creating");
    return opened.status();
  }
  const int fd = opened->get();
  std::size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return full(n < 0 ? errno : EIO, "writing");
    off += static_cast<std::size_t>(n);
  }
  // O_CREAT applies the umask and keeps the mode of an existing file; the caller asked for `mode`.
  if (::fchmod(fd, mode) != 0 || ::fchown(fd, 0, 0) != 0) {
    return Status::FromErrno(errno, "setting mode and owner of " + path + " in the target");
  }
  UniqueFd owned = std::move(*opened);
  if (::close(owned.Release()) != 0) return full(errno, "closing");
  return Status::OK();
}

Result<std::vector<AccessCheck>> RootfsTarget::CheckAccess() {
  AccessCheck room{
      .name = "writable-layer-room",
      .method = fmt::format("free space on the target's disk image (cap {})", FormatBytes(caps_.disk_bytes)),
      .ok = !layers_->DiskFull(),
      .detail = ""};
  if (!room.ok)
    room.detail = fmt::format("{}: {} free", CapHitMessage(CapKind::kDisk, caps_), FormatBytes(layers_->FreeBytes()));
  return std::vector<AccessCheck>{room};
}

Result<Evaluation> RootfsTarget::Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) {
  // OpenSCAP writes into the tree it evaluates (its package probe rebuilds a stale apt cache), so
  // it reads a throwaway view: a verdict never changes the target, nor what a revert restores.
  Result<Evaluation> out = Status::Internal("the scratch view ran no evaluation");
  EvaluationRequest named = request;
  if (named.target_name.empty()) named.target_name = name_;
  auto evaluate = [&](const std::string& view) {
    out = evaluator.Evaluate(view, named);
    return Status::OK();
  };
  TEMPER_RETURN_IF_ERROR(fork_ ? fork_->WithScratchView(evaluate) : layers_->WithScratchView(evaluate));
  return out;
}

}  // namespace temper::stig
