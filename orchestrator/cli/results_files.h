// OpenSCAP's results files of a batch, copied out of the daemon's results directory for
// `temper report --results-to DIR`. The CLI normally runs on the daemon's host, so the files are
// read where temperd wrote them; reading them is this process's job, not the daemon's.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::cli {

// The files a results directory holds: XCCDF results and the ARF report.
inline constexpr std::array<std::string_view, 2> kResultsFiles = {"results.xml", "arf.xml"};

// Copies each of kResultsFiles from `results_dir` into `dest_dir` (created if missing; existing
// files of the same name are replaced) and returns the paths written. Errors name the path:
// NotFound when a file is missing, PermissionDenied or IOError when it cannot be read or written.
// Nothing is copied unless every source file is readable.
Result<std::vector<std::string>> CopyResultsFiles(const std::string& results_dir, const std::string& dest_dir);

}  // namespace temper::cli
