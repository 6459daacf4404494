// FixBundle pieces for the export tests: a file, a directory, a symlink, as FileImage values with
// their sizes and checksums filled in the way a captured bundle has them.
#pragma once

#include <string>

#include "common/sha256.h"
#include "stig/fix_bundle.h"

namespace temper::testing {

inline stig::FileImage FileWith(const std::string& content, uint32_t mode = 0644, uint32_t uid = 0, uint32_t gid = 0) {
  stig::FileImage image;
  image.state.type = stig::FileType::kFile;
  image.state.mode = mode;
  image.state.uid = uid;
  image.state.gid = gid;
  image.state.size = content.size();
  image.content = content;
  image.sha256 = Sha256Hex(content);
  return image;
}

inline stig::FileImage DirWith(uint32_t mode = 0755, uint32_t uid = 0, uint32_t gid = 0) {
  stig::FileImage image;
  image.state.type = stig::FileType::kDir;
  image.state.mode = mode;
  image.state.uid = uid;
  image.state.gid = gid;
  return image;
}

inline stig::FileImage LinkTo(const std::string& target) {
  stig::FileImage image;
  image.state.type = stig::FileType::kSymlink;
  image.state.mode = 0777;
  image.state.size = target.size();
  image.state.link = target;
  return image;
}

inline stig::BundleFile Changed(const std::string& path, std::optional<stig::FileImage> before,
                                std::optional<stig::FileImage> after) {
  stig::BundleFile f;
  f.path = path;
  f.before = std::move(before);
  f.after = std::move(after);
  return f;
}

}  // namespace temper::testing
