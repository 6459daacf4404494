#include "orchestrator/config/parallel_attempts.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace temper {

namespace {

// The cgroup's cpu quota in CPUs, when one is set: v2's "QUOTA PERIOD" (or "max PERIOD") in
// cpu.max, else v1's cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us. Read at the mount points
// as seen from temperd (a container's own cgroup there).
std::optional<double> CgroupCpuQuota() {
  std::ifstream v2("/sys/fs/cgroup/cpu.max");
  std::string quota;
  int64_t period = 0;
  if (v2 >> quota >> period) {
    if (quota == "max" || period <= 0) return std::nullopt;
    try {
      return std::stod(quota) / static_cast<double>(period);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  int64_t quota_us = -1, period_us = 0;
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (!(q >> quota_us) || !(p >> period_us) || quota_us <= 0 || period_us <= 0) return std::nullopt;
  return static_cast<double>(quota_us) / static_cast<double>(period_us);
}

}  // namespace

MachineCpus CpusAvailable() {
  uint32_t cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = static_cast<uint32_t>(CPU_COUNT(&set));
  if (cpus == 0) cpus = std::thread::hardware_concurrency();
  cpus = std::max<uint32_t>(cpus, 1);
  MachineCpus out{cpus, fmt::format("{} CPUs", cpus)};
  if (std::optional<double> quota = CgroupCpuQuota(); quota && *quota < cpus) {
    out.count = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(*quota)));
    out.source = fmt::format("{} CPUs (cgroup quota {:g} of {})", out.count, *quota, cpus);
  }
  return out;
}

ParallelChoice AutoParallelAttempts(bool forks, const EndpointCapacity& endpoint, const MachineCpus& machine,
                                    uint32_t per_batch_limit) {
  if (!forks) return {1, "auto: 1 (the target cannot fork: an SSH host runs one attempt at a time)"};
  const uint32_t sequences = endpoint.max_seqs.value_or(kDefaultEndpointSequences);
  const std::string name = endpoint.endpoint.empty() ? "endpoint" : fmt::format("endpoint '{}'", endpoint.endpoint);
  const std::string endpoint_part =
      endpoint.max_seqs ? fmt::format("{}: max_seqs {}", name, *endpoint.max_seqs)
                        : fmt::format("{}: max_seqs not stated, counted as {}", name, kDefaultEndpointSequences);
  const uint32_t n = std::max<uint32_t>(1, std::min({sequences, machine.count, per_batch_limit}));
  return {n, fmt::format("auto: {} (machine: {}; {}; limits.parallel_attempts_per_batch: {})", n, machine.source,
                         endpoint_part, per_batch_limit)};
}

std::string ParallelAttemptsWhy(uint32_t attempts, bool forks, std::optional<uint32_t> configured,
                                const ParallelChoice& sized) {
  if (!forks) return "1: the target cannot fork (an SSH host runs one attempt at a time)";
  if (configured && *configured == attempts) return fmt::format("loop.parallel_attempts: {}", attempts);
  if (!configured && sized.attempts == attempts) return sized.why;
  return fmt::format("requested: {} ({})", attempts,
                     configured ? fmt::format("loop.parallel_attempts: {}", *configured) : sized.why);
}

}  // namespace temper
