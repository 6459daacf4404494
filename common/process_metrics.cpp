#include "common/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace temper {

namespace {

Result<std::string> ReadProcFile(const char* path) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, fmt::format("cannot read {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<uint64_t> Field(const std::vector<std::string_view>& fields, size_t index, std::string_view name) {
  uint64_t value = 0;
  if (index >= fields.size() ||
      std::from_chars(fields[index].data(), fields[index].data() + fields[index].size(), value).ec != std::errc()) {
    return Status::IOError(fmt::format("/proc/self/stat: field {} ({}) is not a number", index + 3, name));
  }
  return value;
}

// Seconds since the epoch at which the system booted: /proc/stat's btime line.
Result<uint64_t> BootTime() {
  TEMPER_ASSIGN_OR_RETURN(std::string stat, ReadProcFile("/proc/stat"));
  const size_t at = stat.find("\nbtime ");
  if (at == std::string::npos) return Status::IOError("/proc/stat has no btime line");
  const char* begin = stat.data() + at + 7;
  uint64_t btime = 0;
  if (std::from_chars(begin, stat.data() + stat.size(), btime).ec != std::errc()) {
    return Status::IOError("/proc/stat: btime is not a number");
  }
  return btime;
}

}  // namespace

Result<ProcessStats> ReadProcessStats() {
  TEMPER_ASSIGN_OR_RETURN(std::string stat, ReadProcFile("/proc/self/stat"));
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields start after
  // the last ')'. fields[0] is field 3 (state) in proc(5)'s numbering.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return Status::IOError("/proc/self/stat has no (comm) field");
  std::vector<std::string_view> fields;
  std::string_view rest(stat);
  rest.remove_prefix(close + 1);
  while (!rest.empty()) {
    const size_t start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    fields.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  // proc(5): utime (14), stime (15) and starttime (22) in clock ticks; vsize (23) in bytes; rss (24)
  // in pages.
  TEMPER_ASSIGN_OR_RETURN(uint64_t utime, Field(fields, 14 - 3, "utime"));
  TEMPER_ASSIGN_OR_RETURN(uint64_t stime, Field(fields, 15 - 3, "stime"));
  TEMPER_ASSIGN_OR_RETURN(uint64_t start_ticks, Field(fields, 22 - 3, "starttime"));
  TEMPER_ASSIGN_OR_RETURN(uint64_t vsize, Field(fields, 23 - 3, "vsize"));
  TEMPER_ASSIGN_OR_RETURN(uint64_t rss_pages, Field(fields, 24 - 3, "rss"));
  TEMPER_ASSIGN_OR_RETURN(uint64_t boot_time, BootTime());
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));

  ProcessStats s;
  s.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  s.resident_bytes = rss_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  s.virtual_bytes = vsize;
  s.start_time_seconds = static_cast<double>(boot_time) + static_cast<double>(start_ticks) / ticks;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    ++s.open_fds;
  }
  if (ec) return Status::IOError(fmt::format("cannot list /proc/self/fd: {}", ec.message()));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::FromErrno(errno, "getrlimit(RLIMIT_NOFILE)");
  s.max_fds = static_cast<uint64_t>(limit.rlim_cur);
  return s;
}

void AppendProcessMetrics(PrometheusText& out) {
  if (Result<ProcessStats> s = ReadProcessStats(); s.ok()) {
    auto metric = [&](const char* name, const char* type, const char* help, double value) {
      out.Family(name, type, help);
      out.Sample({}, value);
    };
    metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
           s->cpu_seconds);
    metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           static_cast<double>(s->resident_bytes));
    metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
           static_cast<double>(s->virtual_bytes));
    metric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
           s->start_time_seconds);
    metric("process_open_fds", "gauge", "Number of open file descriptors.", static_cast<double>(s->open_fds));
    metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", static_cast<double>(s->max_fds));
  }
  out.Family("temper_build_info", "gauge", "temper's build: always 1, its version as a label.");
  out.Sample({{"version", TEMPER_VERSION}}, 1);
}

}  // namespace temper
