// TreeListing: everything about a directory tree that a snapshot/revert must restore exactly:
// per path its type, mode, owner, group, size, a digest of its content, its symlink target,
// its hard-link count and its extended attributes. Two listings compare equal only when the
// trees are the same in all of these.
#pragma once

#include <sys/stat.h>
#include <sys/xattr.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

namespace temper::stig::testing {

inline std::string ContentDigest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::uint64_t h = 0xcbf29ce484222325ull;
  char buf[65536];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    for (std::streamsize i = 0; i < f.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 0x100000001b3ull;
    }
  }
  return fmt::format("{:016x}", h);
}

inline std::string Xattrs(const std::string& path) {
  char names[4096];
  ssize_t n = ::llistxattr(path.c_str(), names, sizeof names);
  std::string out;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(std::strlen(names + i)) + 1) {
    char value[4096];
    ssize_t v = ::lgetxattr(path.c_str(), names + i, value, sizeof value);
    out += fmt::format("{}={};", names + i, v > 0 ? std::string(value, static_cast<std::size_t>(v)) : "");
  }
  return out;
}

// Path (relative) -> description. `hash_content` off skips reading file data (much faster).
inline std::map<std::string, std::string> TreeListing(const std::string& root, bool hash_content = true) {
  std::map<std::string, std::string> out;
  namespace fs = std::filesystem;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string p = it->path().string();
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::string extra;
    if (S_ISLNK(st.st_mode)) extra = fs::read_symlink(p).string();
    else if (S_ISREG(st.st_mode) && hash_content) extra = ContentDigest(p);
    out[it->path().lexically_relative(root).string()] =
        fmt::format("mode={:o} uid={} gid={} size={} nlink={} {} xattr={}", st.st_mode, st.st_uid, st.st_gid,
                    S_ISDIR(st.st_mode) ? 0 : st.st_size, S_ISDIR(st.st_mode) ? 0 : st.st_nlink, extra, Xattrs(p));
  }
  return out;
}

}  // namespace temper::stig::testing
