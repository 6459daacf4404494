#include "common/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include "promtool.h"

namespace temper {
namespace {

TEST_CASE("the process's own metrics are read from /proc/self as Prometheus's clients read them") {
  Result<ProcessStats> before = ReadProcessStats();
  REQUIRE(before.ok());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(before->start_time_seconds <= now + 1);  // clock ticks round; the boot time is whole seconds
  CHECK(before->start_time_seconds > now - 3600);
  CHECK(before->resident_bytes > 0);
  CHECK(before->virtual_bytes >= before->resident_bytes);
  CHECK(before->max_fds >= before->open_fds);
  CHECK(before->cpu_seconds >= 0);

  // One more descriptor open is one more counted.
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  Result<ProcessStats> after = ReadProcessStats();
  close(fd);
  REQUIRE(after.ok());
  CHECK(after->open_fds == before->open_fds + 1);
}

TEST_CASE("the process's metrics and temper's build info pass promtool check metrics") {
  TEMPER_REQUIRE_PROMTOOL();
  PrometheusText out;
  AppendProcessMetrics(out);
  const std::string body = out.Take();
  const testing::PromtoolResult lint = testing::PromtoolCheckMetrics(body);
  INFO(lint.output << "\n" << body);
  CHECK(lint.exit_code == 0);
  CHECK(lint.output.empty());
  for (const char* family : {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
                             "process_virtual_memory_bytes gauge", "process_start_time_seconds gauge",
                             "process_open_fds gauge", "process_max_fds gauge", "temper_build_info gauge"}) {
    CHECK_THAT(body, Catch::Contains(std::string("# TYPE ") + family + "\n"));
  }
  CHECK(std::regex_search(body, std::regex("\ntemper_build_info\\{version=\"[0-9]+\\.[0-9]+\\.[0-9]+\"\\} 1\n")));
}

}  // namespace
}  // namespace temper
