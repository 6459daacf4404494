#include "stig/overlay_snapshots.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "stig/process.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

Status EnsureDir(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) return Status::IOError("creating " + p.string() + ": " + ec.message());
  return Status::OK();
}

}  // namespace

OverlaySnapshots::OverlaySnapshots(std::string dir, std::string base, std::uint32_t depth)
    : dir_(std::move(dir)), base_(std::move(base)), merged_(dir_ + "/merged"), depth_(depth) {}

OverlaySnapshots::~OverlaySnapshots() {
  (void)Close();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status OverlaySnapshots::Discard(const std::string& path) {
  // Unique across owners too: trash left by an earlier process may still be there.
  fs::path to = fs::path(dir_) / "trash" /
                fmt::format("{}-{}-{}", ::getpid(), std::chrono::system_clock::now().time_since_epoch().count(), trash_seq_++);
  std::error_code ec;
  fs::rename(path, to, ec);
  if (ec) return Status::IOError("moving " + path + " to the trash: " + ec.message());
  return Status::OK();
}

void OverlaySnapshots::StartReaper() {
  if (reaping_.load()) return;
  if (reaper_.joinable()) reaper_.join();
  reaping_ = true;
  reaper_ = std::thread([trash = fs::path(dir_) / "trash", this] {
    std::error_code ec;
    for (bool found = true; found;) {
      found = false;
      for (const auto& e : fs::directory_iterator(trash, ec)) {
        found = true;
        fs::remove_all(e.path(), ec);
      }
      if (ec) break;
    }
    reaping_ = false;
  });
}

Result<std::unique_ptr<OverlaySnapshots>> OverlaySnapshots::Open(const std::string& dir, const std::string& base) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return Status::NotFound("snapshot base " + base + " is not a directory");
  fs::path d = fs::absolute(dir, ec);
  for (const char* sub : {"layers", "upper", "work", "merged", "trash"}) TEMPER_RETURN_IF_ERROR(EnsureDir(d / sub));
  // Layers are numbered 1..N without gaps; a gap means a crash mid-revert, after which the layers
  // above it were already being dropped.
  std::uint32_t depth = 0;
  while (fs::is_directory(d / "layers" / std::to_string(depth + 1), ec)) ++depth;
  auto s = std::unique_ptr<OverlaySnapshots>(
      new OverlaySnapshots(d.string(), fs::absolute(base, ec).string(), depth));
  s->lock_fd_ = ::open((d / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lock_fd_ < 0) return Status::FromErrno(errno, "opening " + (d / "lock").string());
  if (::flock(s->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Unavailable(fmt::format("target directory {} is in use by another process", d.string()));
  }
  // A previous owner that died leaves its mount behind; take it down before mounting ours.
  ::umount2(s->merged_.c_str(), MNT_DETACH);
  TEMPER_RETURN_IF_ERROR(s->Mount());
  s->StartReaper();  // whatever an earlier owner left in the trash
  return s;
}

Status OverlaySnapshots::Mount() {
  // Relative layer paths keep the option string short (mount(2) takes one page); mount(8) runs
  // with `dir_` as its working directory so they resolve, without changing ours.
  std::string lower;
  for (std::uint32_t i = depth_; i >= 1; --i) lower += fmt::format("layers/{}:", i);
  lower += base_;
  // No directory redirects: a renamed directory is copied up whole, so each layer holds whole
  // directories and what changed is readable from the layers alone (overlay_changes.h).
  ProcessSpec spec;
  spec.argv = {"/bin/mount", "-t", "overlay", "overlay", "-o",
               fmt::format("lowerdir={},upperdir=upper,workdir=work,redirect_dir=off", lower), "merged"};
  spec.cwd = dir_;
  spec.timeout = std::chrono::seconds(30);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  if (!r.Succeeded()) {
    return Status::IOError(fmt::format("mounting the overlay at {} ({}): {}", merged_, r.Describe(), r.err));
  }
  mounted_ = true;
  return Status::OK();
}

Status OverlaySnapshots::Unmount() {
  if (!mounted_) return Status::OK();
  if (::umount2(merged_.c_str(), 0) != 0) {
    if (errno == EBUSY) {
      return Status::FailedPrecondition("the target at " + merged_ + " is busy: a process still uses it");
    }
    return Status::FromErrno(errno, "unmounting " + merged_);
  }
  mounted_ = false;
  return Status::OK();
}

Status OverlaySnapshots::Close() {
  Status s = Unmount();
  if (reaper_.joinable()) reaper_.join();
  if (s.ok() && lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  return s;
}

Result<std::uint32_t> OverlaySnapshots::Snapshot() {
  if (depth_ >= kMaxLayers) {
    return Status::ResourceExhausted(fmt::format("{} snapshots at {}: overlayfs stacks at most {} here", depth_,
                                                 dir_, kMaxLayers));
  }
  TEMPER_RETURN_IF_ERROR(Unmount());
  fs::path layer = fs::path(dir_) / "layers" / std::to_string(depth_ + 1);
  std::error_code ec;
  fs::rename(fs::path(dir_) / "upper", layer, ec);
  if (ec) {
    (void)Mount();
    return Status::IOError("freezing " + dir_ + "/upper: " + ec.message());
  }
  ++depth_;
  // The work directory belongs to the old upper layer; overlayfs wants an empty one for the new.
  TEMPER_RETURN_IF_ERROR(Discard((fs::path(dir_) / "work").string()));
  TEMPER_RETURN_IF_ERROR(EnsureDir(fs::path(dir_) / "work"));
  TEMPER_RETURN_IF_ERROR(EnsureDir(fs::path(dir_) / "upper"));
  TEMPER_RETURN_IF_ERROR(Mount());
  StartReaper();
  return depth_;
}

Status OverlaySnapshots::Revert(std::uint32_t id) {
  if (id > depth_) return Status::OutOfRange(fmt::format("no snapshot {} at {} (latest is {})", id, dir_, depth_));
  TEMPER_RETURN_IF_ERROR(Unmount());
  // Drop from the top down, so a crash leaves a gap-free prefix that Open() recovers.
  for (std::uint32_t i = depth_; i > id; --i) {
    TEMPER_RETURN_IF_ERROR(Discard((fs::path(dir_) / "layers" / std::to_string(i)).string()));
    depth_ = i - 1;
  }
  for (const char* sub : {"upper", "work"}) {
    TEMPER_RETURN_IF_ERROR(Discard((fs::path(dir_) / sub).string()));
    TEMPER_RETURN_IF_ERROR(EnsureDir(fs::path(dir_) / sub));
  }
  TEMPER_RETURN_IF_ERROR(Mount());
  StartReaper();
  return Status::OK();
}

OverlayLayers OverlaySnapshots::layers() const {
  OverlayLayers out{.upper = dir_ + "/upper", .lowers = {}, .merged = merged_};
  for (std::uint32_t i = depth_; i >= 1; --i) out.lowers.push_back(fmt::format("{}/layers/{}", dir_, i));
  out.lowers.push_back(base_);
  return out;
}

Result<std::vector<std::string>> OverlaySnapshots::ChangedPaths() const {
  std::vector<std::string> out;
  fs::path upper = fs::path(dir_) / "upper";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(upper, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    out.push_back("/" + it->path().lexically_relative(upper).string());
  }
  if (ec) return Status::IOError("listing " + upper.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace temper::stig
