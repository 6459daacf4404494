#include "orchestrator/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "leftovers.h"
#include "scratch_space.h"

namespace temper::testing {

TempDir::TempDir() {
  std::string pattern = TestTempDir() + "/test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  path_ = pattern;
}

// A temperd that was killed (every test's daemon is, at the latest by its harness) leaves its
// targets' overlays and disk images mounted here: they are detached, deepest first, so that removing
// the directory does not reach into them and no mount or loop device outlives the test.
TempDir::~TempDir() { (void)RemoveWithMounts(path_); }

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
