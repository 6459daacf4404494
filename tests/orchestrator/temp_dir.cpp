#include "orchestrator/temp_dir.h"

#include <stdlib.h>
#include <sys/mount.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace temper::testing {

TempDir::TempDir() {
  char pattern[] = "/tmp/temper-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  // A temperd that was killed (every test's daemon is, at the latest by its harness) leaves its
  // targets' overlays and disk images mounted here: detach them, deepest first, so that removing
  // the directory does not reach into them and no mount or loop device outlives the test.
  std::ifstream info("/proc/self/mountinfo");
  std::vector<std::string> points;
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point.rfind(path_ + "/", 0) == 0) points.push_back(point);
  }
  std::sort(points.begin(), points.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& p : points) ::umount2(p.c_str(), MNT_DETACH);
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  std::filesystem::path p = std::filesystem::path(path_) / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace temper::testing
