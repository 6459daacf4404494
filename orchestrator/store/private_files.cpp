#include "orchestrator/store/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

namespace temper {

namespace fs = std::filesystem;

Result<bool> MakePrivate(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    return Status::FromErrno(errno, "reading the mode of " + path);
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return false;
  if ((st.st_mode & 077) == 0) return false;
  const mode_t mode = st.st_mode & 0700;
  if (::fchmodat(AT_FDCWD, path.c_str(), mode, 0) != 0) {
    return Status::FromErrno(errno, fmt::format("making {} private (mode {:o})", path, mode));
  }
  return true;
}

Status MakeTreePrivate(const std::string& dir, std::vector<std::string>& changed) {
  struct stat top {};
  if (::lstat(dir.c_str(), &top) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Status::FromErrno(errno, "reading the mode of " + dir);
  }
  if (!S_ISDIR(top.st_mode)) return Status::OK();
  TEMPER_ASSIGN_OR_RETURN(bool made, MakePrivate(dir));
  if (made) changed.push_back(dir);
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return Status::IOError(fmt::format("listing {}: {}", dir, ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IOError(fmt::format("listing {}: {}", dir, ec.message()));
    const std::string path = it->path().string();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    if (st.st_dev != top.st_dev) {
      if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();
      continue;
    }
    TEMPER_ASSIGN_OR_RETURN(bool made_entry, MakePrivate(path));
    if (made_entry) changed.push_back(path);
  }
  if (ec) return Status::IOError(fmt::format("listing {}: {}", dir, ec.message()));
  return Status::OK();
}

}  // namespace temper
