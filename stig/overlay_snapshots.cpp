#include "stig/overlay_snapshots.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "stig/layer_diff.h"
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

// A layer id: decimal digits only, within 32 bits (trailing newline allowed, as last_layer has).
Result<std::uint32_t> ParseId(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty() || text.size() > 10) return Status::InvalidArgument("not a layer id");
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return Status::InvalidArgument("not a layer id");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return Status::InvalidArgument("not a layer id");
  return static_cast<std::uint32_t>(v);
}

// The file's text, or "" when it does not exist.
std::string ReadSmallFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

OverlaySnapshots::OverlaySnapshots(std::string dir, std::string base, std::vector<std::uint32_t> layers,
                                   std::uint32_t last_id)
    : dir_(std::move(dir)), base_(std::move(base)), merged_(dir_ + "/merged"), layers_(std::move(layers)),
      last_id_(last_id) {}

OverlaySnapshots::~OverlaySnapshots() {
  (void)Close();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string OverlaySnapshots::LayerDir(std::uint32_t id) const { return fmt::format("{}/layers/{}", dir_, id); }

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
  // The stack is whatever layers/<id> exist: a crash mid-revert or mid-drop leaves each layer
  // either here or in the trash, and the ids above a dropped one never change.
  std::vector<std::uint32_t> layers;
  for (const auto& e : fs::directory_iterator(d / "layers", ec)) {
    Result<std::uint32_t> id = ParseId(e.path().filename().string());
    if (id.ok() && *id > 0 && e.is_directory(ec)) layers.push_back(*id);
  }
  if (ec) return Status::IOError(fmt::format("listing {}: {}", (d / "layers").string(), ec.message()));
  std::sort(layers.begin(), layers.end());
  std::uint32_t last_id = layers.empty() ? 0 : layers.back();
  std::string recorded = ReadSmallFile(d / "last_layer");
  if (!recorded.empty()) {
    Result<std::uint32_t> id = ParseId(recorded);
    if (!id.ok()) {
      return Status::DataLoss(fmt::format("{}: '{}' is not a layer id", (d / "last_layer").string(), recorded));
    }
    last_id = std::max(last_id, *id);
  }
  auto s = std::unique_ptr<OverlaySnapshots>(
      new OverlaySnapshots(d.string(), fs::absolute(base, ec).string(), std::move(layers), last_id));
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
  TEMPER_RETURN_IF_ERROR(Step("mount"));
  // Relative layer paths keep the option string short (mount(2) takes one page); mount(8) runs
  // with `dir_` as its working directory so they resolve, without changing ours.
  std::string lower;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) lower += fmt::format("layers/{}:", *it);
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
  TEMPER_RETURN_IF_ERROR(Step("unmount"));
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

Status OverlaySnapshots::RecordLastId(std::uint32_t id) {
  TEMPER_RETURN_IF_ERROR(Step("record-id"));
  fs::path file = fs::path(dir_) / "last_layer";
  fs::path temp = fs::path(dir_) / "last_layer.new";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "creating " + temp.string());
  std::string text = std::to_string(id) + "\n";
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!written) return Status::FromErrno(e, "writing " + temp.string());
  std::error_code ec;
  fs::rename(temp, file, ec);
  if (ec) return Status::IOError("replacing " + file.string() + ": " + ec.message());
  last_id_ = id;
  return Status::OK();
}

Status OverlaySnapshots::ResetUpperAndMount() {
  TEMPER_RETURN_IF_ERROR(Step("reset-upper"));
  // The work directory belongs to the old upper layer; overlayfs wants an empty one for the new.
  for (const char* sub : {"upper", "work"}) {
    fs::path p = fs::path(dir_) / sub;
    std::error_code ec;
    if (fs::exists(p, ec)) TEMPER_RETURN_IF_ERROR(Discard(p.string()));
    TEMPER_RETURN_IF_ERROR(EnsureDir(p));
  }
  TEMPER_RETURN_IF_ERROR(Mount());
  StartReaper();
  return Status::OK();
}

Result<std::uint32_t> OverlaySnapshots::Snapshot() {
  if (depth() >= kMaxLayers) {
    return Status::ResourceExhausted(fmt::format("{} snapshots at {}: overlayfs stacks at most {} here", depth(),
                                                 dir_, kMaxLayers));
  }
  const std::uint32_t id = last_id_ + 1;
  // Recorded before the layer exists: a crash in between costs an unused id, never a reused one.
  TEMPER_RETURN_IF_ERROR(RecordLastId(id));
  TEMPER_RETURN_IF_ERROR(Unmount());
  TEMPER_RETURN_IF_ERROR(Step("freeze-upper"));
  std::error_code ec;
  fs::rename(fs::path(dir_) / "upper", LayerDir(id), ec);
  if (ec) {
    (void)Mount();
    return Status::IOError("freezing " + dir_ + "/upper: " + ec.message());
  }
  layers_.push_back(id);
  TEMPER_RETURN_IF_ERROR(ResetUpperAndMount());
  return id;
}

Status OverlaySnapshots::Revert(std::uint32_t id) {
  if (id > last_id_) {
    return Status::OutOfRange(fmt::format("no snapshot {} at {} (the latest taken is {})", id, dir_, last_id_));
  }
  TEMPER_RETURN_IF_ERROR(Unmount());
  // Drop from the top down, so a crash leaves a stack that is a prefix of this one.
  while (!layers_.empty() && layers_.back() > id) {
    TEMPER_RETURN_IF_ERROR(Step("discard-layer"));
    TEMPER_RETURN_IF_ERROR(Discard(LayerDir(layers_.back())));
    layers_.pop_back();
  }
  return ResetUpperAndMount();
}

Status OverlaySnapshots::DropLayer(std::uint32_t id) {
  auto it = std::find(layers_.begin(), layers_.end(), id);
  if (it == layers_.end()) return Status::NotFound(fmt::format("no layer {} in the stack at {}", id, dir_));
  TEMPER_RETURN_IF_ERROR(Unmount());
  // The one step that changes the stack: a rename, so a crash leaves the layer in or out, whole.
  TEMPER_RETURN_IF_ERROR(Step("discard-layer"));
  TEMPER_RETURN_IF_ERROR(Discard(LayerDir(id)));
  layers_.erase(it);
  return ResetUpperAndMount();
}

Result<std::vector<std::string>> OverlaySnapshots::LayerChanges(std::uint32_t id) const {
  auto it = std::find(layers_.begin(), layers_.end(), id);
  if (it == layers_.end()) return Status::NotFound(fmt::format("no layer {} in the stack at {}", id, dir_));
  std::vector<std::string> lower;
  for (auto below = std::make_reverse_iterator(it); below != layers_.rend(); ++below) lower.push_back(LayerDir(*below));
  lower.push_back(base_);
  return stig::LayerChanges(LayerDir(id), lower);
}

Result<std::vector<LayerOverlap>> OverlaySnapshots::OverlapsAbove(std::uint32_t id) const {
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changed, LayerChanges(id));
  std::vector<LayerOverlap> out;
  for (std::uint32_t above : layers_) {
    if (above <= id) continue;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> held, LayerEntries(LayerDir(above)));
    LayerOverlap overlap{above, {}};
    std::set_intersection(changed.begin(), changed.end(), held.begin(), held.end(), std::back_inserter(overlap.paths));
    if (!overlap.paths.empty()) out.push_back(std::move(overlap));
  }
  return out;
}

Status OverlaySnapshots::WithScratchView(const std::function<Status(const std::string& root)>& fn) {
  if (!mounted_) return Status::FailedPrecondition("the target at " + merged_ + " is not mounted");
  fs::path scratch = fs::path(dir_) / "scratch";
  std::error_code ec;
  if (fs::exists(scratch, ec)) {  // left by an owner that died with a view mounted
    ::umount2((scratch / "merged").c_str(), MNT_DETACH);
    TEMPER_RETURN_IF_ERROR(Discard(scratch.string()));
  }
  for (const char* sub : {"upper", "work", "merged"}) TEMPER_RETURN_IF_ERROR(EnsureDir(scratch / sub));
  ProcessSpec spec;
  spec.argv = {"/bin/mount", "-t", "overlay", "overlay", "-o",
               fmt::format("lowerdir={},upperdir=upper,workdir=work", merged_), "merged"};
  spec.cwd = scratch.string();
  spec.timeout = std::chrono::seconds(30);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  if (!r.Succeeded()) {
    return Status::IOError(fmt::format("mounting a scratch view of {} ({}): {}", merged_, r.Describe(), r.err));
  }
  Status ran = fn((scratch / "merged").string());
  Status unmounted;
  if (::umount2((scratch / "merged").c_str(), 0) != 0) {
    unmounted = Status::FromErrno(errno, "unmounting the scratch view " + (scratch / "merged").string());
    ::umount2((scratch / "merged").c_str(), MNT_DETACH);
  }
  Status discarded = Discard(scratch.string());
  StartReaper();
  if (!ran.ok()) return ran;
  return unmounted.ok() ? discarded : unmounted;
}

OverlayLayers OverlaySnapshots::layers() const {
  OverlayLayers out{.upper = dir_ + "/upper", .lowers = {}, .merged = merged_};
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) out.lowers.push_back(LayerDir(*it));
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
