// The process's own metrics, as every Prometheus client library exports them, and temper's build:
// one implementation for both /metrics bodies (temperd's and `temper-lm serve`'s).
//
//   process_cpu_seconds_total        user + system CPU time
//   process_resident_memory_bytes    resident set size
//   process_virtual_memory_bytes     virtual memory size
//   process_start_time_seconds       since the Unix epoch
//   process_open_fds, process_max_fds
//   temper_build_info{version}       1 (version: CMake's PROJECT_VERSION)
//
// Read from /proc/self as the Go and Python clients read them (procfs: stat's utime, stime, vsize,
// rss and starttime; the boot time from /proc/stat; the entries of /proc/self/fd; the soft
// RLIMIT_NOFILE). No git revision label: one read at configure time goes stale with every commit
// built without a reconfigure, and a wrong revision misleads more than none.
//
// Thread safety: pure functions of the process's state; callable from any thread.
#pragma once

#include <cstdint>

#include "common/prometheus_text.h"
#include "common/status.h"

namespace temper {

struct ProcessStats {
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  double start_time_seconds = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;
};

// IOError naming the file that could not be read, or the field that did not parse.
Result<ProcessStats> ReadProcessStats();

// The families above. When /proc cannot be read (not Linux), the process_* families are left
// out, as the client libraries leave them out, and temper_build_info stays.
void AppendProcessMetrics(PrometheusText& out);

}  // namespace temper
