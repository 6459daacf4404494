#include "platform/sandbox_caps.h"

#include <cctype>

#include <fmt/format.h>

namespace temper {
namespace {

struct Unit {
  std::string_view name;
  unsigned shift;
};
// Largest first, for FormatBytes.
constexpr Unit kUnits[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};

constexpr std::uint32_t kMinPids = 16;
constexpr std::uint64_t kMinMemory = 64 * kMiB;
constexpr std::uint64_t kMinDisk = 64 * kMiB;
constexpr std::uint32_t kMaxCpuWeight = 10000;  // cgroup v2's range for cpu.weight

}  // namespace

Status SandboxCaps::Validate() const {
  if (pids < kMinPids)
    return Status::InvalidArgument(fmt::format("sandbox pids cap {} is under the minimum {}", pids, kMinPids));
  if (memory_bytes < kMinMemory) {
    return Status::InvalidArgument(fmt::format("sandbox memory cap {} is under the minimum {}",
                                               FormatBytes(memory_bytes), FormatBytes(kMinMemory)));
  }
  if (cpu_weight < 1 || cpu_weight > kMaxCpuWeight) {
    return Status::InvalidArgument(fmt::format("sandbox cpu_weight {} is outside 1..{}", cpu_weight, kMaxCpuWeight));
  }
  if (disk_bytes < kMinDisk) {
    return Status::InvalidArgument(
        fmt::format("sandbox disk cap {} is under the minimum {}", FormatBytes(disk_bytes), FormatBytes(kMinDisk)));
  }
  return Status::OK();
}

std::string CapHitMessage(CapKind kind, const SandboxCaps& caps) {
  switch (kind) {
    case CapKind::kPids:
      return fmt::format("the command hit the sandbox's pids cap of {}", caps.pids);
    case CapKind::kMemory:
      return fmt::format("the command hit the sandbox's memory cap of {}", FormatBytes(caps.memory_bytes));
    case CapKind::kDisk:
      return fmt::format("the target's writable layer is full (cap {})", FormatBytes(caps.disk_bytes));
  }
  return "";
}

std::string FormatBytes(std::uint64_t bytes) {
  for (const Unit& u : kUnits) {
    const std::uint64_t one = std::uint64_t{1} << u.shift;
    if (bytes < one) continue;
    if (bytes % one == 0) return fmt::format("{} {}", bytes >> u.shift, u.name);
    return fmt::format("{:.1f} {}", static_cast<double>(bytes) / static_cast<double>(one), u.name);
  }
  return fmt::format("{} bytes", bytes);
}

Result<std::uint64_t> ParseBytes(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a size (write it as 8GiB, 512MiB, 64KiB or a number of bytes)", text));
  };
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (value > (UINT64_MAX - 9) / 10) return bad();
    value = value * 10 + static_cast<std::uint64_t>(text[i++] - '0');
  }
  if (i == 0) return bad();
  while (i < text.size() && text[i] == ' ') ++i;
  std::string_view unit = text.substr(i);
  unsigned shift = 0;
  if (!unit.empty()) {
    bool known = false;
    for (const Unit& u : kUnits) {
      if (unit == u.name) {
        shift = u.shift;
        known = true;
      }
    }
    if (!known) return bad();
  }
  if (value > (std::uint64_t{1} << (63 - shift))) return bad();
  return value << shift;
}

}  // namespace temper
