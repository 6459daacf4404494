// Test helpers for the GGUF suites: where tools/reference/make_gguf_fixtures.py's files are, and
// opening and reading them with a failure that names the file.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "engine/model/gguf_file.h"

namespace temper::engine::testing {

inline const std::string& GgufFixtureDir() {
  static const std::string dir = std::string(TEMPER_TEST_DATA_DIR) + "/gguf";
  return dir;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline GgufFile OpenGguf(const std::string& path) {
  Result<GgufFile> f = GgufFile::Open(path);
  if (!f.ok()) FAIL(f.status().ToString());
  return std::move(f).value();
}

}  // namespace temper::engine::testing
