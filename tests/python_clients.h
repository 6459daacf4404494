// The Python clients temper's users script with (the OpenAI SDK, grpcio with reflection,
// schemathesis), run by the tests from tests/python/ in the test venv that deploy/setup.sh makes in
// the build tree from tests/python/requirements.txt (pinned, hashed).
//
// A case that needs them calls TEMPER_REQUIRE_PYTHON_CLIENTS() first: without the venv (a build
// made without deploy/setup.sh) it reports itself skipped, naming what is missing.
#pragma once

#include <filesystem>
#include <string>

#include "skip.h"

namespace temper::testing {

inline const std::string kTestPython = std::string(TEMPER_BINARY_DIR) + "/test-venv/bin/python";

// tests/python/<name>, a client script.
inline std::string PythonClientScript(const std::string& name) {
  return std::string(TEMPER_SOURCE_DIR) + "/tests/python/" + name;
}

}  // namespace temper::testing

#define TEMPER_REQUIRE_PYTHON_CLIENTS()                                                                 \
  do {                                                                                                  \
    if (!std::filesystem::exists(::temper::testing::kTestPython))                                       \
      TEMPER_SKIP(::temper::testing::kTestPython + " is missing (deploy/setup.sh makes the test venv)"); \
  } while (0)
