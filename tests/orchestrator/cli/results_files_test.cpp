// `temper report --results-to`: copying OpenSCAP's files out of a results directory.
#include "orchestrator/cli/results_files.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper::cli {
namespace {

using testing::ReadFileOrEmpty;
using testing::TempDir;

TEST_CASE("results.xml and arf.xml are copied into a new directory") {
  TempDir dir;
  dir.Write("after/results.xml", "<TestResult/>");
  dir.Write("after/arf.xml", "<arf:asset-report-collection/>");
  dir.Write("out/results.xml", "old");
  Result<std::vector<std::string>> copied = CopyResultsFiles(dir / "after", dir / "out/nested");
  REQUIRE(copied.ok());
  CHECK(*copied == std::vector<std::string>{dir / "out/nested/results.xml", dir / "out/nested/arf.xml"});
  CHECK(ReadFileOrEmpty(dir / "out/nested/results.xml") == "<TestResult/>");
  CHECK(ReadFileOrEmpty(dir / "out/nested/arf.xml") == "<arf:asset-report-collection/>");
  // Copying again replaces what is there.
  REQUIRE(CopyResultsFiles(dir / "after", dir / "out").ok());
  CHECK(ReadFileOrEmpty(dir / "out/results.xml") == "<TestResult/>");
}

TEST_CASE("a missing results file is an error naming its path, and nothing is copied") {
  TempDir dir;
  dir.Write("after/results.xml", "<TestResult/>");
  Result<std::vector<std::string>> copied = CopyResultsFiles(dir / "after", dir / "out");
  REQUIRE_FALSE(copied.ok());
  CHECK(copied.status().code() == StatusCode::kNotFound);
  CHECK(copied.status().message() == dir / "after/arf.xml" + ": no such file (results are read on temperd's host)");
  CHECK_FALSE(std::filesystem::exists(dir / "out/results.xml"));
}

TEST_CASE("a destination that cannot be created is an error naming it") {
  TempDir dir;
  dir.Write("after/results.xml", "x");
  dir.Write("after/arf.xml", "y");
  dir.Write("file", "not a directory");
  Result<std::vector<std::string>> copied = CopyResultsFiles(dir / "after", dir / "file/out");
  REQUIRE_FALSE(copied.ok());
  CHECK(copied.status().message().rfind("creating " + dir / "file/out" + ": ", 0) == 0);
}

}  // namespace
}  // namespace temper::cli
