#include "orchestrator/cli/results_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

namespace temper::cli {

namespace fs = std::filesystem;

namespace {

// The error for a source file that cannot be opened, with a hint where the usual cause is known.
Status OpenError(int err, const std::string& path) {
  if (err == ENOENT)
    return Status::NotFound(fmt::format("{}: no such file (results are read on temperd's host)", path));
  if (err == EACCES || err == EPERM) {
    return Status::PermissionDenied(fmt::format(
        "{}: permission denied (run as root or as a member of the group that may read temperd's state)", path));
  }
  return Status::FromErrno(err, fmt::format("opening {}", path));
}

}  // namespace

Result<std::vector<std::string>> CopyResultsFiles(const std::string& results_dir, const std::string& dest_dir) {
  // Check every source first, so a missing arf.xml does not leave a lone results.xml behind.
  for (std::string_view name : kResultsFiles) {
    std::string from = (fs::path(results_dir) / name).string();
    int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(errno, from);
    ::close(fd);
  }
  std::error_code ec;
  fs::create_directories(dest_dir, ec);
  if (ec) return Status::IOError(fmt::format("creating {}: {}", dest_dir, ec.message()));
  std::vector<std::string> written;
  for (std::string_view name : kResultsFiles) {
    std::string from = (fs::path(results_dir) / name).string();
    std::string to = (fs::path(dest_dir) / name).string();
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError(fmt::format("copying {} to {}: {}", from, to, ec.message()));
    written.push_back(to);
  }
  return written;
}

}  // namespace temper::cli
