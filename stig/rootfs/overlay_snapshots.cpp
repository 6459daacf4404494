#include "stig/rootfs/overlay_snapshots.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/host_disk.h"
#include "platform/process.h"
#include "stig/line_merge.h"
#include "stig/rootfs/layer_diff.h"
#include "stig/target_file.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

constexpr const char* kImage = "layers.img";
// The ext4 root reserve (1%) goes to an owner no sandbox maps (its id map covers 0..65535): only
// a process with CAP_SYS_RESOURCE on the host, the daemon, can write into it.
constexpr const char* kReserveOwner = "65536";
// Below this much room the sandbox cannot write a file of any use: the layer counts as full.
constexpr std::uint64_t kFullBelowBytes = 4 * kMiB;
constexpr auto kMountOptions = "loop,nosuid,nodev,noatime,noinit_itable,resuid={0},resgid={0}";

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

Result<ProcessResult> Run(std::vector<std::string> argv, const std::string& cwd = "",
                          std::chrono::seconds timeout = std::chrono::seconds(60)) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.cwd = cwd;
  spec.timeout = timeout;
  return RunProcess(spec);
}

// The directory is root's alone, whatever an earlier owner or an operator left it as.
Status MakeRootOnly(const fs::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "reading the mode of " + dir.string());
  if (st.st_uid != 0 || st.st_gid != 0) {
    if (::chown(dir.c_str(), 0, 0) != 0) return Status::FromErrno(errno, "making root the owner of " + dir.string());
  }
  if ((st.st_mode & 07777) != 0700) {
    if (::chmod(dir.c_str(), 0700) != 0)
      return Status::FromErrno(errno, "making " + dir.string() + " root-only (0700)");
  }
  return Status::OK();
}

// Bytes in use under `dir` on its file system.
std::uint64_t UsedBytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

// overlayfs's lowerdir option for `layers` (ascending) over `base`: relative to the disk, topmost
// first, which keeps the option string short (mount(2) takes one page).
std::string LowerDirs(const std::vector<std::uint32_t>& layers, const std::string& base) {
  std::string lower;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) lower += fmt::format("layers/{}:", *it);
  return lower + base;
}

// Unmounts `path`, waiting a bounded while for a sandbox's killed processes that still hold it.
Status UnmountTree(const std::string& path) {
  int e = 0;
  for (int wait = 0; ::umount2(path.c_str(), 0) != 0; ++wait) {
    e = errno;
    if (e != EBUSY || wait == 40) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    e = 0;
  }
  if (e == EBUSY) return Status::FailedPrecondition("the target at " + path + " is busy: a process still uses it");
  if (e != 0) return Status::FromErrno(e, "unmounting " + path);
  return Status::OK();
}

// Mounts a stack of the disk's layers at `at`: `lower` from LowerDirs, `upper` and `work` relative
// to the disk. Relative layer paths keep the option string short (mount(2) takes one page); mount(8)
// runs with the disk as its working directory so they resolve, without changing ours. No directory
// redirects: a renamed directory is copied up whole, so each layer holds whole directories and what
// changed is readable from the layers alone (overlay_changes.h). nosuid, nodev: with the sandbox's
// identity id map, a setuid-root file or a device node made in there is one on the host; through
// this mount neither takes effect.
Status MountStack(const std::string& disk, const std::string& lower, std::string_view upper, std::string_view work,
                  const std::string& at) {
  TEMPER_ASSIGN_OR_RETURN(
      ProcessResult r,
      Run({"/bin/mount", "-t", "overlay", "overlay", "-o",
           fmt::format("nosuid,nodev,lowerdir={},upperdir={},workdir={},redirect_dir=off", lower, upper, work), at},
          disk, std::chrono::seconds(30)));
  if (!r.Succeeded()) {
    return Status::IOError(fmt::format("mounting the overlay at {} ({}): {}", at, r.Describe(), r.err));
  }
  return Status::OK();
}

// Mounts a throwaway writable view of `tree` at `scratch`/merged, runs fn there, and hands the
// scratch directory to `discard`. A view a dead owner left there is taken down first.
Status ScratchView(const std::string& tree, const fs::path& scratch,
                   const std::function<Status(const std::string&)>& discard,
                   const std::function<Status(const std::string& root)>& fn) {
  std::error_code ec;
  if (fs::exists(scratch, ec)) {
    ::umount2((scratch / "merged").c_str(), MNT_DETACH);
    TEMPER_RETURN_IF_ERROR(discard(scratch.string()));
  }
  for (const char* sub : {"upper", "work", "merged"}) TEMPER_RETURN_IF_ERROR(EnsureDir(scratch / sub));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r,
                          Run({"/bin/mount", "-t", "overlay", "overlay", "-o",
                               fmt::format("nosuid,nodev,lowerdir={},upperdir=upper,workdir=work", tree), "merged"},
                              scratch.string(), std::chrono::seconds(30)));
  if (!r.Succeeded()) {
    return Status::IOError(fmt::format("mounting a scratch view of {} ({}): {}", tree, r.Describe(), r.err));
  }
  Status ran = fn((scratch / "merged").string());
  // Seen busy for a moment with evaluation servers, which are handed the tree as a descriptor: most
  // likely another thread forked while it was open, and its child holds a copy until it execs.
  Status unmounted = UnmountTree((scratch / "merged").string());
  if (!unmounted.ok()) {
    unmounted = unmounted.WithContext("unmounting the scratch view");
    ::umount2((scratch / "merged").c_str(), MNT_DETACH);
  }
  Status discarded = discard(scratch.string());
  if (!ran.ok()) return ran;
  return unmounted.ok() ? discarded : unmounted;
}

// The paths under `upper` (an overlay's upper layer), absolute in the target, sorted.
Result<std::vector<std::string>> UpperPaths(const fs::path& upper) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(upper, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    out.push_back("/" + it->path().lexically_relative(upper).string());
  }
  if (ec) return Status::IOError("listing " + upper.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// The disk images this process holds open, by owner: each one's unwritten part is host space
// already promised (host_disk.h). Checked and registered under one lock, so two targets opening at
// once cannot both be promised the same free space.
struct OpenImages {
  struct Image {
    dev_t device = 0;
    std::string path;  // its final name (a fresh image is made under another one first)
    std::uint64_t bytes = 0;
  };
  std::mutex mu;
  std::map<const OverlaySnapshots*, Image> images;

  // What the other open images on `device` may still take from it: their sizes less the blocks
  // they already hold.
  std::uint64_t PromisedOn(dev_t device, const OverlaySnapshots* except) const {
    std::uint64_t promised = 0;
    for (const auto& [owner, image] : images) {
      if (owner == except || image.device != device) continue;
      const std::uint64_t used = AllocatedBytes(image.path);
      if (image.bytes > used) promised += image.bytes - used;
    }
    return promised;
  }
};

OpenImages& OpenDiskImages() {
  static OpenImages open;
  return open;
}

}  // namespace

OverlaySnapshots::OverlaySnapshots(std::string dir, std::string base)
    : dir_(std::move(dir)), base_(std::move(base)), disk_(dir_ + "/disk"), merged_(dir_ + "/merged") {}

OverlaySnapshots::~OverlaySnapshots() {
  (void)Close();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  std::lock_guard lock(OpenDiskImages().mu);
  OpenDiskImages().images.erase(this);
}

Status OverlaySnapshots::PromiseHostSpace(const std::string& image, std::uint64_t bytes) {
  // The image's directory exists (Open made it), so the file system it will be on is measured.
  TEMPER_ASSIGN_OR_RETURN(HostDiskSpace space, HostDiskSpaceOf(fs::path(image).parent_path().string()));
  OpenImages& open = OpenDiskImages();
  std::lock_guard lock(open.mu);
  const std::uint64_t used = AllocatedBytes(image);
  const std::uint64_t unwritten = bytes > used ? bytes - used : 0;
  TEMPER_RETURN_IF_ERROR(CheckRoomFor(
      space, fmt::format("the target's disk image {} of {} (sandbox.disk in temperd.yaml)", image, FormatBytes(bytes)),
      unwritten, open.PromisedOn(space.device, this), "the disk images of other targets open in this process"));
  open.images[this] = {space.device, image, bytes};
  return Status::OK();
}

std::string OverlaySnapshots::LayerDir(std::uint32_t id) const { return fmt::format("{}/layers/{}", disk_, id); }

Status OverlaySnapshots::Discard(const std::string& path) {
  // The trash of the path's own file system: the disk's for layers, the host's for scratch views.
  const std::string trash = path.rfind(disk_ + "/", 0) == 0 ? disk_ + "/trash" : dir_ + "/trash";
  // Unique across owners too: trash left by an earlier process may still be there.
  fs::path to =
      fs::path(trash) /
      fmt::format("{}-{}-{}", ::getpid(), std::chrono::system_clock::now().time_since_epoch().count(), trash_seq_++);
  std::error_code ec;
  fs::rename(path, to, ec);
  if (ec) return Status::IOError("moving " + path + " to the trash: " + ec.message());
  return Status::OK();
}

void OverlaySnapshots::StartReaper() {
  std::lock_guard<std::mutex> lock(reaper_mu_);
  if (reaping_.load()) return;
  if (reaper_.joinable()) reaper_.join();
  reaping_ = true;
  reaper_ = std::thread([trashes = std::vector<fs::path>{fs::path(disk_) / "trash", fs::path(dir_) / "trash"}, this] {
    std::error_code ec;
    for (const fs::path& trash : trashes) {
      for (bool found = true; found;) {
        found = false;
        for (const auto& e : fs::directory_iterator(trash, ec)) {
          found = true;
          fs::remove_all(e.path(), ec);
        }
        if (ec) break;
      }
    }
    reaping_ = false;
  });
}

void OverlaySnapshots::ReapNow() {
  std::lock_guard<std::mutex> lock(reaper_mu_);
  if (reaper_.joinable()) reaper_.join();
  reaping_ = true;
  std::error_code ec;
  for (const fs::path& trash : {fs::path(disk_) / "trash", fs::path(dir_) / "trash"}) {
    for (const auto& e : fs::directory_iterator(trash, ec)) fs::remove_all(e.path(), ec);
  }
  reaping_ = false;
}

Result<std::unique_ptr<OverlaySnapshots>> OverlaySnapshots::Open(const std::string& dir, const std::string& base,
                                                                 std::uint64_t disk_bytes) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return Status::NotFound("snapshot base " + base + " is not a directory");
  fs::path d = fs::absolute(dir, ec);
  TEMPER_RETURN_IF_ERROR(EnsureDir(d));
  TEMPER_RETURN_IF_ERROR(MakeRootOnly(d));
  auto s = std::unique_ptr<OverlaySnapshots>(new OverlaySnapshots(d.string(), fs::absolute(base, ec).string()));
  s->lock_fd_ = ::open((d / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lock_fd_ < 0) return Status::FromErrno(errno, "opening " + (d / "lock").string());
  if (::flock(s->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Unavailable(fmt::format("target directory {} is in use by another process", d.string()));
  }
  // A previous owner that died leaves its mounts behind; take them down before mounting ours.
  for (const auto& e : fs::directory_iterator(d / "forks", ec)) {
    ::umount2((e.path() / "scratch" / "merged").c_str(), MNT_DETACH);
    ::umount2((e.path() / "merged").c_str(), MNT_DETACH);
  }
  ec.clear();
  ::umount2((d / "scratch" / "merged").c_str(), MNT_DETACH);
  ::umount2(s->merged_.c_str(), MNT_DETACH);
  ::umount2(s->disk_.c_str(), MNT_DETACH);
  for (const char* sub : {"merged", "trash", "disk"}) TEMPER_RETURN_IF_ERROR(EnsureDir(d / sub));
  TEMPER_RETURN_IF_ERROR(s->OpenDisk(disk_bytes));
  TEMPER_RETURN_IF_ERROR(s->LoadStack());
  s->DiscardStaleForks();
  TEMPER_RETURN_IF_ERROR(s->Mount());
  s->StartReaper();  // whatever an earlier owner left in the trash
  return s;
}

Status OverlaySnapshots::OpenDisk(std::uint64_t bytes) {
  const fs::path image = fs::path(dir_) / kImage;
  std::error_code ec;
  // The layout before disk images kept the stack right in dir_.
  const bool old_layout =
      fs::is_directory(fs::path(dir_) / "layers", ec) || fs::is_directory(fs::path(dir_) / "upper", ec);
  if (fs::exists(image, ec)) {
    // A move into the image that completed, and crashed before the old directories went.
    if (old_layout) {
      for (const char* sub : {"layers", "upper", "work", "last_layer"}) {
        if (fs::exists(fs::path(dir_) / sub, ec)) TEMPER_RETURN_IF_ERROR(Discard((fs::path(dir_) / sub).string()));
      }
    }
    const std::uint64_t size = fs::file_size(image, ec);
    if (ec) return Status::IOError("reading the size of " + image.string() + ": " + ec.message());
    if (size < bytes) {
      TEMPER_RETURN_IF_ERROR(PromiseHostSpace(image.string(), bytes));
      // Offline, before it is mounted: an online resize takes CAP_SYS_RESOURCE, and resize2fs wants
      // a freshly checked file system (e2fsck exits 1 when it fixed something, still fine).
      if (::truncate(image.c_str(), static_cast<off_t>(bytes)) != 0) {
        return Status::FromErrno(errno, fmt::format("growing {} to {}", image.string(), FormatBytes(bytes)));
      }
      TEMPER_ASSIGN_OR_RETURN(ProcessResult checked,
                              Run({"e2fsck", "-f", "-p", image.string()}, "", std::chrono::minutes(10)));
      if (checked.timed_out || checked.term_signal != 0 || checked.exit_code > 1) {
        return Status::IOError(fmt::format("checking {} before growing it ({}): {}{}", image.string(),
                                           checked.Describe(), checked.out, checked.err));
      }
      TEMPER_ASSIGN_OR_RETURN(ProcessResult grown, Run({"resize2fs", image.string()}, "", std::chrono::minutes(10)));
      if (!grown.Succeeded()) {
        return Status::IOError(fmt::format("growing the file system of {} to {} ({}): {}", image.string(),
                                           FormatBytes(bytes), grown.Describe(), grown.err));
      }
    }
    disk_bytes_ = std::max(size, bytes);
    // An image kept at its size was promised when it was made: reopening it is not refused, but
    // what it may still take counts against the promises made to other images from here on.
    if (struct stat st{}; ::stat(image.c_str(), &st) == 0) {
      std::lock_guard lock(OpenDiskImages().mu);
      OpenDiskImages().images[this] = {st.st_dev, image.string(), disk_bytes_};
    }
    return MountDisk(image.string());
  }
  // A new image, made under a temporary name and renamed once whole: a crash leaves none or all.
  const fs::path fresh = fs::path(dir_) / (std::string(kImage) + ".new");
  fs::remove(fresh, ec);
  {
    int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "creating " + fresh.string());
    if (Status room = PromiseHostSpace(image.string(), bytes); !room.ok()) {
      ::close(fd);
      fs::remove(fresh, ec);
      return room;
    }
    bool sized = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    int e = errno;
    ::close(fd);
    if (!sized) return Status::FromErrno(e, fmt::format("sizing {} to {}", fresh.string(), FormatBytes(bytes)));
  }
  // Lazy init: a sparse image costs no writes up front (the kernel skips zeroing, see noinit_itable).
  TEMPER_ASSIGN_OR_RETURN(ProcessResult made,
                          Run({"mkfs.ext4", "-q", "-F", "-m", "1", "-L", "temper-layers", "-E",
                               "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0", fresh.string()}));
  if (!made.Succeeded()) {
    fs::remove(fresh, ec);
    return Status::IOError(
        fmt::format("making the file system of {} ({}): {}", fresh.string(), made.Describe(), made.err));
  }
  disk_bytes_ = bytes;
  if (old_layout) {
    // Copy the older layout's stack in (cp -a keeps owners, modes, links, xattrs such as
    // trusted.overlay.opaque and whiteout devices), then swap: the old directories stay until the
    // image holding their copy has its final name.
    TEMPER_RETURN_IF_ERROR(MountDisk(fresh.string()));
    Status copied;
    for (const char* sub : {"layers", "upper", "last_layer"}) {
      const fs::path from = fs::path(dir_) / sub;
      if (!fs::exists(from, ec)) continue;
      // A directory's contents into the one MountDisk made; the file next to them.
      std::vector<std::string> argv = {"/bin/cp", "-a"};
      if (fs::is_directory(from, ec)) {
        argv.insert(argv.end(), {(from / ".").string(), disk_ + "/" + sub});
      } else {
        argv.insert(argv.end(), {from.string(), disk_ + "/"});
      }
      Result<ProcessResult> cp = Run(argv, "", std::chrono::minutes(30));
      if (!cp.ok()) {
        copied = cp.status();
      } else if (!cp->Succeeded()) {
        std::uint64_t used = UsedBytes(fs::path(dir_) / "layers") + UsedBytes(fs::path(dir_) / "upper");
        copied = cp->err.find("No space left on device") != std::string::npos
                     ? Status::ResourceExhausted(fmt::format(
                           "the snapshots in {} take {}, more than its disk cap of {} holds; raise sandbox.disk in "
                           "temperd.yaml",
                           dir_, FormatBytes(used), FormatBytes(bytes)))
                     : Status::IOError(fmt::format("copying {}/{} into its disk image ({}): {}", dir_, sub,
                                                   cp->Describe(), cp->err));
      }
      if (!copied.ok()) break;
    }
    Status unmounted = UnmountDisk();
    if (!copied.ok() || !unmounted.ok()) {
      fs::remove(fresh, ec);
      return (copied.ok() ? unmounted : copied).WithContext("moving the target's snapshots into a disk image");
    }
    fs::rename(fresh, image, ec);
    if (ec) return Status::IOError("naming " + image.string() + ": " + ec.message());
    for (const char* sub : {"layers", "upper", "work", "last_layer"}) {
      if (fs::exists(fs::path(dir_) / sub, ec)) TEMPER_RETURN_IF_ERROR(Discard((fs::path(dir_) / sub).string()));
    }
    return MountDisk(image.string());
  }
  fs::rename(fresh, image, ec);
  if (ec) return Status::IOError("naming " + image.string() + ": " + ec.message());
  return MountDisk(image.string());
}

Status OverlaySnapshots::MountDisk(const std::string& image) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Run({"/bin/mount", "-t", "ext4", "-o",
                                                fmt::format(kMountOptions, kReserveOwner), image, disk_}));
  if (!r.Succeeded()) {
    return Status::IOError(fmt::format("mounting the disk image {} at {} ({}): {}", image, disk_, r.Describe(), r.err));
  }
  disk_mounted_ = true;
  TEMPER_RETURN_IF_ERROR(MakeRootOnly(disk_));
  for (const char* sub : {"layers", "upper", "work", "trash"}) TEMPER_RETURN_IF_ERROR(EnsureDir(fs::path(disk_) / sub));
  return Status::OK();
}

Status OverlaySnapshots::UnmountDisk() {
  if (!disk_mounted_) return Status::OK();
  if (::umount2(disk_.c_str(), 0) != 0) {
    int e = errno;
    if (e != EBUSY) return Status::FromErrno(e, "unmounting the disk image at " + disk_);
    // Busy: a process outside our control (an operator's shell) still has a file open there. The
    // mount goes when it lets go; the lock is released, so the next owner mounts it afresh.
    ::umount2(disk_.c_str(), MNT_DETACH);
  }
  disk_mounted_ = false;
  return Status::OK();
}

Status OverlaySnapshots::LoadStack() {
  const fs::path data(disk_);
  std::error_code ec;
  // The stack is whatever layers/<id> exist: a crash mid-revert or mid-drop leaves each layer
  // either here or in the trash, and the ids above a dropped one never change.
  layers_.clear();
  for (const auto& e : fs::directory_iterator(data / "layers", ec)) {
    Result<std::uint32_t> id = ParseId(e.path().filename().string());
    if (id.ok() && *id > 0 && e.is_directory(ec)) layers_.push_back(*id);
  }
  if (ec) return Status::IOError(fmt::format("listing {}: {}", (data / "layers").string(), ec.message()));
  std::sort(layers_.begin(), layers_.end());
  last_id_ = layers_.empty() ? 0 : layers_.back();
  std::string recorded = ReadSmallFile(data / "last_layer");
  if (!recorded.empty()) {
    Result<std::uint32_t> id = ParseId(recorded);
    if (!id.ok()) {
      return Status::DataLoss(fmt::format("{}: '{}' is not a layer id", (data / "last_layer").string(), recorded));
    }
    last_id_ = std::max(last_id_, *id);
  }
  return Status::OK();
}

std::uint64_t OverlaySnapshots::FreeBytes() const {
  struct statvfs s;
  if (::statvfs(disk_.c_str(), &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

bool OverlaySnapshots::DiskFull() const {
  struct statvfs s;
  if (::statvfs(disk_.c_str(), &s) != 0) return false;
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize < kFullBelowBytes || s.f_favail == 0;
}

Status OverlaySnapshots::Mount() {
  TEMPER_RETURN_IF_ERROR(Step("mount"));
  TEMPER_RETURN_IF_ERROR(MountStack(disk_, LowerDirs(layers_, base_), "upper", "work", merged_));
  mounted_ = true;
  return Status::OK();
}

Status OverlaySnapshots::Unmount() {
  if (!mounted_) return Status::OK();
  TEMPER_RETURN_IF_ERROR(Step("unmount"));
  // A sandbox's killed processes may still be exiting, holding the tree as their root for a moment.
  TEMPER_RETURN_IF_ERROR(UnmountTree(merged_));
  mounted_ = false;
  return Status::OK();
}

Status OverlaySnapshots::Close() {
  // Forks read the disk's layers: their trees go first (they are spent from here on).
  for (OverlayFork* fork : forks_) {
    fork->Discard();
    fork->spent_ = true;
    fork->stack_ = nullptr;
  }
  forks_.clear();
  Status s = Unmount();
  if (reaper_.joinable()) reaper_.join();
  if (s.ok()) s = UnmountDisk();
  if (s.ok() && lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  return s;
}

Status OverlaySnapshots::RecordLastId(std::uint32_t id) {
  TEMPER_RETURN_IF_ERROR(Step("record-id"));
  fs::path file = fs::path(disk_) / "last_layer";
  fs::path temp = fs::path(disk_) / "last_layer.new";
  auto write = [&]() -> Status {
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "creating " + temp.string());
    std::string text = std::to_string(id) + "\n";
    bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    int e = errno;
    ::close(fd);
    if (!written) return Status::FromErrno(e, "writing " + temp.string());
    return Status::OK();
  };
  Status written = write();
  if (!written.ok() && DiskFull()) {
    ReapNow();  // the trash may hold what the sandbox filled the disk with
    written = write();
  }
  if (!written.ok()) {
    if (DiskFull()) {
      return Status::ResourceExhausted(
          fmt::format("the target's writable layer is full (cap {}): {}", FormatBytes(disk_bytes_), written.message()));
    }
    return written;
  }
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
    fs::path p = fs::path(disk_) / sub;
    std::error_code ec;
    if (fs::exists(p, ec)) TEMPER_RETURN_IF_ERROR(Discard(p.string()));
  }
  // A command that filled the disk left what it wrote in the layers just discarded: the new upper
  // layer and overlayfs's work directory (made at mount) need room, so give it back first.
  if (DiskFull()) ReapNow();
  auto make_and_mount = [&]() -> Status {
    for (const char* sub : {"upper", "work"}) TEMPER_RETURN_IF_ERROR(EnsureDir(fs::path(disk_) / sub));
    return Mount();
  };
  Status mounted = make_and_mount();
  // The blocks of a deleted file come back only when the last process holding it open is gone, and
  // the sandbox's killed processes may still be exiting: wait for them, a bounded while.
  for (int wait = 0; !mounted.ok() && DiskFull() && wait < 40; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ReapNow();
    mounted = make_and_mount();
  }
  TEMPER_RETURN_IF_ERROR(mounted);
  // The next command should find the space a revert gave back, not wait for the reaper.
  if (DiskFull()) {
    ReapNow();
  } else {
    StartReaper();
  }
  return Status::OK();
}

Result<std::uint32_t> OverlaySnapshots::Snapshot() {
  if (depth() >= kMaxLayers) {
    return Status::ResourceExhausted(
        fmt::format("{} snapshots at {}: overlayfs stacks at most {} here", depth(), dir_, kMaxLayers));
  }
  const std::uint32_t id = last_id_ + 1;
  // Recorded before the layer exists: a crash in between costs an unused id, never a reused one.
  TEMPER_RETURN_IF_ERROR(RecordLastId(id));
  TEMPER_RETURN_IF_ERROR(Unmount());
  TEMPER_RETURN_IF_ERROR(Step("freeze-upper"));
  std::error_code ec;
  fs::rename(fs::path(disk_) / "upper", LayerDir(id), ec);
  if (ec) {
    (void)Mount();
    return Status::IOError("freezing " + disk_ + "/upper: " + ec.message());
  }
  layers_.push_back(id);
  TEMPER_RETURN_IF_ERROR(ResetUpperAndMount());
  return id;
}

Status OverlaySnapshots::Revert(std::uint32_t id) {
  if (id > last_id_) {
    return Status::OutOfRange(fmt::format("no snapshot {} at {} (the latest taken is {})", id, dir_, last_id_));
  }
  std::vector<std::uint32_t> removed;
  for (std::uint32_t layer : layers_) {
    if (layer > id) removed.push_back(layer);
  }
  TEMPER_RETURN_IF_ERROR(NoForkReads(removed, fmt::format("reverting to snapshot {}", id)));
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
  TEMPER_RETURN_IF_ERROR(NoForkReads({id}, fmt::format("dropping snapshot {}", id)));
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
  return OverlapsAfter(changed, id);
}

Result<std::vector<LayerOverlap>> OverlaySnapshots::OverlapsAfter(const std::vector<std::string>& changed,
                                                                  std::uint32_t after) const {
  std::vector<LayerOverlap> out;
  for (std::uint32_t above : layers_) {
    if (above <= after) continue;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> held, LayerEntries(LayerDir(above)));
    LayerOverlap overlap{above, {}};
    std::set_intersection(changed.begin(), changed.end(), held.begin(), held.end(), std::back_inserter(overlap.paths));
    if (!overlap.paths.empty()) out.push_back(std::move(overlap));
  }
  return out;
}

Status OverlaySnapshots::WithScratchView(const std::function<Status(const std::string& root)>& fn) {
  if (!mounted_) return Status::FailedPrecondition("the target at " + merged_ + " is not mounted");
  Status s = ScratchView(
      merged_, fs::path(dir_) / "scratch", [this](const std::string& p) { return Discard(p); }, fn);
  StartReaper();
  return s;
}

OverlayLayers OverlaySnapshots::layers() const {
  OverlayLayers out{.upper = disk_ + "/upper", .lowers = {}, .merged = merged_};
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) out.lowers.push_back(LayerDir(*it));
  out.lowers.push_back(base_);
  return out;
}

Result<std::vector<std::string>> OverlaySnapshots::ChangedPaths() const {
  return UpperPaths(fs::path(disk_) / "upper");
}

// ---- forks ----

Status OverlaySnapshots::NoForkReads(const std::vector<std::uint32_t>& removed, std::string_view what) const {
  for (const OverlayFork* fork : forks_) {
    for (std::uint32_t layer : removed) {
      if (std::find(fork->lowers_.begin(), fork->lowers_.end(), layer) == fork->lowers_.end()) continue;
      return Status::FailedPrecondition(
          fmt::format("{} at {}: fork {} still reads snapshot {}", what, merged_, fork->number_, layer));
    }
  }
  return Status::OK();
}

void OverlaySnapshots::DiscardStaleForks() {
  // Their mounts went at Open; what is left is directories: the upper layers on the disk, the mount
  // points and scratch views on the host. Discarded whole, so a crash here only repeats it.
  for (const fs::path& forks : {fs::path(disk_) / "forks", fs::path(dir_) / "forks"}) {
    std::error_code ec;
    if (fs::exists(forks, ec)) (void)Discard(forks.string());
  }
}

Result<std::unique_ptr<OverlayFork>> OverlaySnapshots::Fork() {
  if (!mounted_) return Status::FailedPrecondition("the target at " + merged_ + " is not mounted");
  std::unique_ptr<OverlayFork> fork(new OverlayFork(*this, next_fork_++, layers_));
  for (const std::string& d : {fork->upper_, fork->work_, fork->merged_}) TEMPER_RETURN_IF_ERROR(EnsureDir(d));
  const Status mounted = MountStack(disk_, LowerDirs(layers_, base_), fmt::format("forks/{}/upper", fork->number_),
                                    fmt::format("forks/{}/work", fork->number_), fork->merged_);
  if (!mounted.ok()) return mounted.WithContext(fmt::format("fork {}", fork->number_));
  fork->mounted_ = true;
  forks_.insert(fork.get());
  return fork;
}

Result<std::uint32_t> OverlaySnapshots::CommitFork(OverlayFork& fork) {
  if (fork.stack_ != this || !forks_.count(&fork)) {
    return Status::InvalidArgument(fmt::format("fork {} is not a fork of the target at {}", fork.number_, merged_));
  }
  if (fork.spent_) {
    return Status::InvalidArgument(
        fmt::format("fork {} of the target at {} was committed or refused already", fork.number_, merged_));
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> unsnapshotted, ChangedPaths());
  if (!unsnapshotted.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "the target at {} has {} changed path(s) since its last snapshot (first {}): a fork's layer would bury them",
        merged_, unsnapshotted.size(), unsnapshotted.front()));
  }
  if (depth() >= kMaxLayers) {
    return Status::ResourceExhausted(
        fmt::format("{} snapshots at {}: overlayfs stacks at most {} here", depth(), dir_, kMaxLayers));
  }
  // From here on the fork is spent: its tree goes, whatever the outcome.
  fork.spent_ = true;
  Status unmounted = fork.Unmount();
  if (!unmounted.ok()) {
    fork.Discard();
    return unmounted.WithContext(fmt::format("committing fork {}", fork.number_));
  }
  // What the fork changed over the layers it was made on, against what each later layer holds.
  std::vector<std::string> lower;
  for (auto it = fork.lowers_.rbegin(); it != fork.lowers_.rend(); ++it) lower.push_back(LayerDir(*it));
  lower.push_back(base_);
  Result<std::vector<std::string>> changed = stig::LayerChanges(fork.upper_, lower);
  Result<std::vector<LayerOverlap>> overlaps =
      changed.ok() ? OverlapsAfter(*changed, fork.forked_from()) : Result<std::vector<LayerOverlap>>(changed.status());
  if (!overlaps.ok()) {
    fork.Discard();
    return overlaps.status().WithContext(fmt::format("committing fork {}", fork.number_));
  }
  if (!overlaps->empty()) {
    std::set<std::string> both;
    for (const LayerOverlap& o : *overlaps) both.insert(o.paths.begin(), o.paths.end());
    if (Status merged = MergeIntoFork(fork, {both.begin(), both.end()}); !merged.ok()) {
      fork.Discard();
      return merged;
    }
  }
  const std::uint32_t id = last_id_ + 1;
  // Recorded before the layer exists: a crash in between costs an unused id, never a reused one.
  Status recorded = RecordLastId(id);
  if (recorded.ok()) recorded = Unmount();
  if (recorded.ok()) recorded = Step("commit-fork");
  if (!recorded.ok()) {
    fork.Discard();
    return recorded;
  }
  std::error_code ec;
  fs::rename(fork.upper_, LayerDir(id), ec);
  fork.Discard();
  if (ec) {
    (void)Mount();
    return Status::IOError(fmt::format("freezing fork {} ({}): {}", fork.number_, fork.upper_, ec.message()));
  }
  layers_.push_back(id);
  TEMPER_RETURN_IF_ERROR(ResetUpperAndMount());
  return id;
}

Status OverlaySnapshots::MergeIntoFork(OverlayFork& fork, const std::vector<std::string>& paths) const {
  // The stack as the fork saw it, and as it is now: top first, the base root last.
  std::vector<std::string> then, now;
  for (auto it = fork.lowers_.rbegin(); it != fork.lowers_.rend(); ++it) then.push_back(LayerDir(*it));
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) now.push_back(LayerDir(*it));
  then.push_back(base_);
  now.push_back(base_);
  // A regular file's text as `layers` show it: "" when they hold nothing there, nullopt when what
  // they hold is not a regular file of at most kMaxMergeBytes.
  auto text = [](const std::vector<std::string>& layers, const std::string& path) -> std::optional<std::string> {
    std::optional<std::string> layer = LayerShowing(layers, path);
    if (!layer) return std::string();
    Result<UniqueFd> fd = OpenLayerFile(*layer, path);
    if (!fd.ok()) return std::nullopt;
    Result<std::string> read = ReadUpTo(fd->get(), kMaxMergeBytes + 1, path);
    if (!read.ok() || read->size() > kMaxMergeBytes) return std::nullopt;
    return *read;
  };
  std::vector<std::string> refused;
  std::vector<std::pair<std::string, std::string>> merged;
  for (const std::string& path : paths) {
    // A directory both made (rules.d for two audit fixes): the layers' entries show side by side.
    std::optional<std::string> shown = LayerShowing(now, path);
    if (shown && DirectoriesStack(fork.upper_ + path, *shown + path)) continue;
    std::optional<std::string> base = text(then, path), theirs = text(now, path), ours = text({fork.upper_}, path);
    std::optional<std::string> result;
    // The fork's own entry must be a regular file (not a whiteout: a deletion is not merged).
    if (base && theirs && ours && LayerShowing({fork.upper_}, path)) result = MergeLines(*base, *ours, *theirs);
    if (result) {
      merged.emplace_back(path, std::move(*result));
    } else {
      refused.push_back(path);
    }
  }
  if (!refused.empty()) {
    return Status::Aborted(
        fmt::format("fork {} changed what a snapshot taken since it was made also changed, and cannot be merged: {}",
                    fork.number_, fmt::join(refused, ", ")));
  }
  for (const auto& [path, content] : merged) {
    TEMPER_ASSIGN_OR_RETURN(UniqueFd fd, OpenLayerFile(fork.upper_, path, O_WRONLY | O_TRUNC));
    for (size_t off = 0; off < content.size();) {
      const ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno(errno, fmt::format("merging {} into fork {}", path, fork.number_));
      off += static_cast<size_t>(n);
    }
  }
  return Status::OK();
}

OverlayFork::OverlayFork(OverlaySnapshots& stack, int number, std::vector<std::uint32_t> lowers)
    : stack_(&stack),
      number_(number),
      lowers_(std::move(lowers)),
      upper_(fmt::format("{}/forks/{}/upper", stack.disk_, number)),
      work_(fmt::format("{}/forks/{}/work", stack.disk_, number)),
      dir_(fmt::format("{}/forks/{}", stack.dir_, number)),
      merged_(dir_ + "/merged") {}

OverlayFork::~OverlayFork() {
  if (!stack_) return;  // the stack closed first and took the tree down
  Discard();
  stack_->forks_.erase(this);
}

Status OverlayFork::Unmount() {
  if (!mounted_) return Status::OK();
  TEMPER_RETURN_IF_ERROR(UnmountTree(merged_));
  mounted_ = false;
  return Status::OK();
}

void OverlayFork::Discard() {
  if (mounted_ && !Unmount().ok()) {
    ::umount2(merged_.c_str(), MNT_DETACH);
    mounted_ = false;
  }
  std::error_code ec;
  for (const std::string& d : {fmt::format("{}/forks/{}", stack_->disk_, number_), dir_}) {
    if (fs::exists(d, ec)) (void)stack_->Discard(d);
  }
  stack_->StartReaper();
}

Result<std::vector<std::string>> OverlayFork::ChangedPaths() const {
  if (spent_) return Status::FailedPrecondition(fmt::format("fork {} is spent", number_));
  return UpperPaths(upper_);
}

OverlayLayers OverlayFork::layers() const {
  OverlayLayers out{.upper = upper_, .lowers = {}, .merged = merged_};
  for (auto it = lowers_.rbegin(); it != lowers_.rend(); ++it) out.lowers.push_back(stack_->LayerDir(*it));
  out.lowers.push_back(stack_->base_);
  return out;
}

Status OverlayFork::WithScratchView(const std::function<Status(const std::string& root)>& fn) {
  if (spent_ || !mounted_) return Status::FailedPrecondition(fmt::format("fork {} is spent", number_));
  OverlaySnapshots* stack = stack_;
  Status s = ScratchView(
      merged_, fs::path(dir_) / "scratch", [stack](const std::string& p) { return stack->Discard(p); }, fn);
  stack->StartReaper();
  return s;
}

}  // namespace temper::stig
