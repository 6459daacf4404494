// The sandbox caps' sizes and messages (platform/sandbox_caps.h): what temperd.yaml accepts and what a
// command that hits a cap is told.
#include "platform/sandbox_caps.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("sizes are written and read in binary units", "[stig][sandbox_caps]") {
  CHECK(FormatBytes(8 * kGiB) == "8 GiB");
  CHECK(FormatBytes(512 * kMiB) == "512 MiB");
  CHECK(FormatBytes(3 * kGiB / 2) == "1.5 GiB");
  CHECK(FormatBytes(4096) == "4 KiB");
  CHECK(FormatBytes(1000) == "1000 bytes");
  CHECK(*ParseBytes("8GiB") == 8 * kGiB);
  CHECK(*ParseBytes("8 GiB") == 8 * kGiB);
  CHECK(*ParseBytes("512MiB") == 512 * kMiB);
  CHECK(*ParseBytes("64KiB") == 64 * 1024);
  CHECK(*ParseBytes("1TiB") == std::uint64_t{1} << 40);
  CHECK(*ParseBytes("123456") == 123456);
  for (const char* bad : {"8GB", "8 gib", "", "GiB", "-1GiB", "1.5GiB", "9999999999TiB", "99999999999999999999"}) {
    INFO(bad);
    auto r = ParseBytes(bad);
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() ==
          fmt::format("'{}' is not a size (write it as 8GiB, 512MiB, 64KiB or a number of bytes)", bad));
  }
}

TEST_CASE("a cap that cannot work is refused, naming it", "[stig][sandbox_caps]") {
  CHECK(SandboxCaps{}.Validate().ok());
  SandboxCaps c;
  c.pids = 8;
  CHECK(c.Validate().message() == "sandbox pids cap 8 is under the minimum 16");
  c = {};
  c.memory_bytes = kMiB;
  CHECK(c.Validate().message() == "sandbox memory cap 1 MiB is under the minimum 64 MiB");
  c = {};
  c.cpu_weight = 0;
  CHECK(c.Validate().message() == "sandbox cpu_weight 0 is outside 1..10000");
  c = {};
  c.disk_bytes = 32 * kMiB;
  CHECK(c.Validate().message() == "sandbox disk cap 32 MiB is under the minimum 64 MiB");
}

TEST_CASE("each cap is named with its size when a command hits it", "[stig][sandbox_caps]") {
  SandboxCaps c;
  CHECK(CapHitMessage(CapKind::kPids, c) == "the command hit the sandbox's pids cap of 512");
  CHECK(CapHitMessage(CapKind::kMemory, c) == "the command hit the sandbox's memory cap of 2 GiB");
  CHECK(CapHitMessage(CapKind::kDisk, c) == "the target's writable layer is full (cap 8 GiB)");
}

}  // namespace
}  // namespace temper
