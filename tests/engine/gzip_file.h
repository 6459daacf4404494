// Test helper: reads a gzip-compressed fixture (kept compressed in tests/data to keep the clone small).
#pragma once

#include <string>

#include "common/status.h"

namespace temper::engine::testing {

// The whole uncompressed content of `path` (a plain file is returned as is, as gzread does).
Result<std::string> ReadGzipFile(const std::string& path);

}  // namespace temper::engine::testing
