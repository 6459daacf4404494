#include "stig/scap/content_trust.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "common/closest_match.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

std::string DirList(const std::vector<std::string>& dirs) {
  std::string out;
  for (const std::string& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return "content_dirs: " + (out.empty() ? std::string("none") : out);
}

std::optional<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

bool Inside(const std::string& path, const std::string& dir) {
  return dir == "/" ? path.size() > 1 && path[0] == '/' : path.starts_with(dir + "/");
}

// Close datastream names in the content directories, for "did you mean".
std::vector<std::string> DatastreamNames(const std::vector<std::string>& dirs) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const std::string& dir : dirs) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string file = entry.path().filename().string();
      if (file.ends_with("-ds.xml")) names.push_back(file);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// The first POSIX ACL entry of `path` that lets a user or group other than root write, as
// "user 1000" / "group 50"; "" when there is none (or no ACL). The xattr is the kernel's
// little-endian posix_acl_xattr layout: a u32 version (2), then {u16 tag, u16 perm, u32 id}.
std::string AclWriter(const std::string& path) {
  constexpr std::uint16_t kUser = 0x02, kGroup = 0x08, kMask = 0x10, kWrite = 0x02;
  unsigned char buf[4096];
  ssize_t n = ::getxattr(path.c_str(), "system.posix_acl_access", buf, sizeof buf);
  if (n < 4) return "";
  auto u16 = [&](std::size_t at) { return static_cast<std::uint16_t>(buf[at] | buf[at + 1] << 8); };
  auto u32 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16 |
                                      static_cast<std::uint32_t>(buf[at + 3]) << 24);
  };
  bool mask_allows_write = true;
  for (std::size_t at = 4; at + 8 <= static_cast<std::size_t>(n); at += 8) {
    if (u16(at) == kMask) mask_allows_write = (u16(at + 2) & kWrite) != 0;
  }
  if (!mask_allows_write) return "";
  for (std::size_t at = 4; at + 8 <= static_cast<std::size_t>(n); at += 8) {
    std::uint16_t tag = u16(at);
    if ((tag != kUser && tag != kGroup) || !(u16(at + 2) & kWrite) || u32(at + 4) == 0) continue;
    return fmt::format("{} {}", tag == kUser ? "user" : "group", u32(at + 4));
  }
  return "";
}

// Why someone other than root could change `path` (with status `st`), or "" when only root can.
// `mode_only` is set when the sole reason is the group/other write bits of the mode.
std::string NonRootWriter(const std::string& path, const struct stat& st, bool* mode_only) {
  *mode_only = false;
  if (st.st_uid != 0) return fmt::format("is owned by uid {}", st.st_uid);
  if (std::string acl = AclWriter(path); !acl.empty()) return "has a POSIX ACL letting " + acl + " write it";
  *mode_only = true;
  if (st.st_mode & S_IWOTH) return "is writable by everyone";
  if (st.st_mode & S_IWGRP) return fmt::format("is writable by group {}", st.st_gid);
  *mode_only = false;
  return "";
}

// Every file and directory from "/" down to `real` (a resolved path) must be changeable by root
// only; a sticky directory owned by root is safe for an entry root owns (only they may replace it).
Status CheckOwnership(const std::string& real) {
  std::vector<std::string> chain = {"/"};
  for (const auto& part : fs::path(real).relative_path()) chain.push_back((fs::path(chain.back()) / part).string());
  std::vector<struct stat> st(chain.size());
  for (std::size_t i = 0; i < chain.size(); ++i) {
    if (::lstat(chain[i].c_str(), &st[i]) != 0) return Status::FromErrno(errno, "checking " + chain[i]);
  }
  for (std::size_t i = 0; i < chain.size(); ++i) {
    bool mode_only = false;
    std::string why = NonRootWriter(chain[i], st[i], &mode_only);
    if (why.empty()) continue;
    const bool last = i + 1 == chain.size();
    if (!last && mode_only && (st[i].st_mode & S_ISVTX) && st[i + 1].st_uid == 0) continue;
    return Status::PermissionDenied(
        fmt::format("datastream {}: {} {} {}, so a user other than root could replace what temperd evaluates; content "
                    "directories and datastreams must be root's and writable only by root",
                    real, last ? "the file" : "the directory", chain[i], why));
  }
  return Status::OK();
}

}  // namespace

Result<std::string> ResolveTrustedDatastream(std::string_view name, const std::vector<std::string>& content_dirs) {
  if (name.empty()) return Status::InvalidArgument("datastream: empty name");
  std::string candidate(name);
  if (name.front() != '/') {
    if (name.find('/') != std::string_view::npos || name == "." || name == "..") {
      return Status::InvalidArgument(
          fmt::format("datastream: '{}' must be a file name in a content directory or an absolute path ({})", name,
                      DirList(content_dirs)));
    }
    candidate.clear();
    for (const std::string& dir : content_dirs) {
      struct stat st;
      std::string p = (fs::path(dir) / name).string();
      if (::lstat(p.c_str(), &st) == 0) {
        candidate = p;
        break;
      }
    }
    if (candidate.empty()) {
      return Status::NotFound(fmt::format("datastream '{}' is in no content directory ({}){}", name,
                                          DirList(content_dirs), DidYouMean(name, DatastreamNames(content_dirs))));
    }
  }

  std::vector<std::string> real_dirs;
  for (const std::string& dir : content_dirs) {
    if (std::optional<std::string> r = RealPath(dir)) real_dirs.push_back(*r);
  }
  // The client's path is judged by its text before temperd (root) touches the file system for it:
  // what root could resolve (whether a file in a private directory exists, where a symlink or
  // /proc/PID/fd/N points) must not reach a client through the answer.
  const std::string lexical = fs::path(candidate).lexically_normal().string();
  bool inside = false;
  for (const std::string& dir : content_dirs) inside |= Inside(lexical, fs::path(dir).lexically_normal().string());
  for (const std::string& dir : real_dirs) inside |= Inside(lexical, dir);
  if (!inside) {
    return Status::PermissionDenied(
        fmt::format("datastream {} is not inside a content directory ({}): temperd loads datastreams only from there",
                    candidate, DirList(content_dirs)));
  }
  std::optional<std::string> real = RealPath(candidate);
  if (!real) {
    if (errno == ENOENT) {
      return Status::NotFound(fmt::format("datastream {} does not exist{}", candidate,
                                          DidYouMean(fs::path(candidate).filename().string(),
                                                     DatastreamNames({fs::path(candidate).parent_path().string()}))));
    }
    return Status::FromErrno(errno, "resolving datastream " + candidate);
  }
  // A symlink in a content directory that leads out of them: where it leads is not said.
  if (std::none_of(real_dirs.begin(), real_dirs.end(), [&](const std::string& d) { return Inside(*real, d); })) {
    return Status::PermissionDenied(fmt::format(
        "datastream {} leads out of the content directories ({}) through a symlink: temperd loads datastreams only "
        "from there",
        candidate, DirList(content_dirs)));
  }
  struct stat st;
  if (::stat(real->c_str(), &st) != 0) return Status::FromErrno(errno, "reading datastream " + *real);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("datastream {} is not a regular file", *real));
  }
  TEMPER_RETURN_IF_ERROR(CheckOwnership(*real));
  return *real;
}

}  // namespace temper::stig
