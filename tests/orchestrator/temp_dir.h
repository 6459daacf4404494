// TempDir: a fresh directory in the test process's temporary directory (scratch_space.h) for one
// test, removed with everything in it afterwards, mounts left in it (by a killed temperd) detached
// first. Short paths on purpose: unix socket paths must fit in 107 bytes.
#pragma once

#include <string>

namespace temper::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to path()/name (creating parent directories) and returns the full path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

std::string ReadFileOrEmpty(const std::string& path);

}  // namespace temper::testing
