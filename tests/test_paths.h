// Where the tests find the build tree, the sources and their data, and where they may write
// (scratch_space.h). Every test source sees this header (forced in by tests/CMakeLists.txt), and the
// paths live in one source that the build generates (test_paths.cpp.in), not in the compile
// commands: a checkout built in another folder (CI's clone) then compiles each test source to the
// same command and reuses its compiler-cache entry.
#pragma once

namespace temper::testing {

const char* TestBinaryDir();   // the build tree
const char* TestSourceDir();   // the checkout
const char* TestDataDir();     // the checkout's tests/data
const char* TestTmpRoot();     // /tmp/temper-<8 hex of the build tree's path>

}  // namespace temper::testing

#define TEMPER_BINARY_DIR (::temper::testing::TestBinaryDir())
#define TEMPER_SOURCE_DIR (::temper::testing::TestSourceDir())
#define TEMPER_TEST_DATA_DIR (::temper::testing::TestDataDir())
#define TEMPER_TEST_TMP_ROOT (::temper::testing::TestTmpRoot())
