#include "stig/target_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace temper::stig {
namespace {

// openat2 may answer EAGAIN when a rename elsewhere in the tree raced with the resolution of
// "..": the kernel asks the caller to try again. A few tries are plenty.
constexpr int kResolveTries = 8;

Result<std::string> Relative(const std::string& path) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("target path must be absolute: \"" + path + "\"");
  std::string rel = path.substr(1);
  return rel.empty() ? std::string(".") : rel;
}

Result<UniqueFd> OpenDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "opening the target tree " + dir);
  return fd;
}

// openat2, retried on EAGAIN; -1 with errno set on failure.
int OpenAt2(int dir, const std::string& rel, std::uint64_t flags, mode_t mode, std::uint64_t resolve) {
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = resolve;
  for (int i = 0;; ++i) {
    int fd = static_cast<int>(::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how));
    if (fd >= 0 || errno != EAGAIN || i + 1 == kResolveTries) return fd;
  }
}

Status NotRegular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument(fmt::format("{} is {} in the target, not a regular file", path, FileTypeName(mode)));
}

// The regular file behind the O_PATH handle `handle`, opened with `flags`; the type is checked on
// the handle before anything is opened.
Result<UniqueFd> Reopen(const UniqueFd& handle, const std::string& path, int flags) {
  struct stat st;
  if (::fstat(handle.get(), &st) != 0)
    return Status::FromErrno(errno, "reading the type of " + path + " in the target");
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  std::string proc = fmt::format("/proc/self/fd/{}", handle.get());
  UniqueFd fd(::open(proc.c_str(), flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "opening " + path + " in the target");
  return fd;
}

}  // namespace

std::string_view FileTypeName(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFLNK:
      return "a symlink";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "a file of unknown type";
  }
}

Result<UniqueFd> OpenTargetFileForRead(const std::string& root, const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(std::string rel, Relative(path));
  TEMPER_ASSIGN_OR_RETURN(UniqueFd dir, OpenDir(root));
  UniqueFd handle(OpenAt2(dir.get(), rel, O_PATH, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS));
  if (!handle.valid()) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist in the target");
    return Status::FromErrno(errno, "opening " + path + " in the target");
  }
  return Reopen(handle, path, O_RDONLY);
}

Result<UniqueFd> OpenTargetFileForWrite(const std::string& root, const std::string& path, mode_t mode) {
  TEMPER_ASSIGN_OR_RETURN(std::string rel, Relative(path));
  TEMPER_ASSIGN_OR_RETURN(UniqueFd dir, OpenDir(root));
  constexpr std::uint64_t kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  // Something may appear between "nothing is there" and the exclusive create; look again then.
  for (int i = 0; i < kResolveTries; ++i) {
    UniqueFd handle(OpenAt2(dir.get(), rel, O_PATH, 0, kInRoot));
    if (handle.valid()) return Reopen(handle, path, O_WRONLY | O_TRUNC);
    if (errno != ENOENT) return Status::FromErrno(errno, "opening " + path + " in the target");
    // Nothing at the end of the links: a dangling final symlink, or no file at all.
    UniqueFd last(OpenAt2(dir.get(), rel, O_PATH | O_NOFOLLOW, 0, kInRoot));
    if (last.valid()) {
      char to[4096];
      ssize_t n = ::readlinkat(last.get(), "", to, sizeof to - 1);
      std::string target = n > 0 ? std::string(to, static_cast<std::size_t>(n)) : "?";
      return Status::InvalidArgument(
          fmt::format("{} is a symlink to {}, which does not exist in the target; files are not created through links "
                      "(remove the link or write to its target's path)",
                      path, target));
    }
    if (errno != ENOENT) return Status::FromErrno(errno, "opening " + path + " in the target");
    // O_EXCL: a name that appeared meanwhile, a symlink included, fails with EEXIST, never followed.
    UniqueFd created(
        OpenAt2(dir.get(), rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode, kInRoot));
    if (created.valid()) return created;
    if (errno == ENOENT) return Status::NotFound(fmt::format("the directory of {} does not exist in the target", path));
    if (errno != EEXIST) return Status::FromErrno(errno, "creating " + path + " in the target");
  }
  return Status::Aborted(fmt::format("{} kept changing while it was opened in the target", path));
}

Result<UniqueFd> OpenLayerFile(const std::string& tree, const std::string& path, int access) {
  TEMPER_ASSIGN_OR_RETURN(std::string rel, Relative(path));
  TEMPER_ASSIGN_OR_RETURN(UniqueFd dir, OpenDir(tree));
  UniqueFd handle(OpenAt2(dir.get(), rel, O_PATH | O_NOFOLLOW, 0,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV));
  if (!handle.valid()) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} does not exist in {}", path, tree));
    return Status::FromErrno(errno, fmt::format("opening {} in {}", path, tree));
  }
  return Reopen(handle, path, access);
}

Result<struct stat> StatInTarget(const std::string& root, const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(std::string rel, Relative(path));
  TEMPER_ASSIGN_OR_RETURN(UniqueFd dir, OpenDir(root));
  UniqueFd handle(OpenAt2(dir.get(), rel, O_PATH | O_NOFOLLOW, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS));
  if (!handle.valid()) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist in the target");
    return Status::FromErrno(errno, "looking up " + path + " in the target");
  }
  struct stat st;
  if (::fstat(handle.get(), &st) != 0)
    return Status::FromErrno(errno, "reading the type of " + path + " in the target");
  return st;
}

Result<std::string> ReadUpTo(int fd, std::size_t max_bytes, std::string_view what) {
  std::string out(max_bytes, '\0');
  std::size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::read(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, fmt::format("reading {}", what));
    if (n == 0) break;
    off += static_cast<std::size_t>(n);
  }
  out.resize(off);
  return out;
}

}  // namespace temper::stig
