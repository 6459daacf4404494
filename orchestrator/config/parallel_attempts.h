// loop.parallel_attempts: auto, sized when a batch is submitted. Attempts in flight at once, each on
// a fork of a rootfs target (orchestrator/loop/batch_loop.h), are bounded by two things:
//   - the Worker role's endpoint: it decodes max_seqs requests at once (an inprocess endpoint's
//     scheduler, roles/inprocess_client.h; a remote vLLM's --max-num-seqs, which an operator may
//     state as the openai endpoint's `max_seqs` in models.yaml); more attempts than that only wait
//     in its queue. An endpoint that does not say counts as kDefaultEndpointSequences;
//   - the machine: every attempt is verified by OpenSCAP and runs its commands in sandboxes, work
//     for a CPU each; more attempts than the CPUs temperd may use (its affinity mask, narrowed by
//     the cgroup's cpu quota) only take turns on them;
// and never more than limits.parallel_attempts_per_batch, which a submit may not exceed either.
// auto = min(endpoint, CPUs, limit), at least 1. SSH hosts stay serial: auto on one is 1 (their
// running state cannot be forked), while an explicit N > 1 there is refused (batch_request.h).
//
// Thread safety: plain functions; CpusAvailable reads /proc and /sys each call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace temper {

// Attempts at once an endpoint is counted for when it states no max_seqs (models.yaml's openai
// endpoints without the key): a small vLLM or llama.cpp server batches at least this many.
inline constexpr uint32_t kDefaultEndpointSequences = 4;

// What the Worker role's endpoint decodes at once, as models.yaml and the client say.
struct EndpointCapacity {
  std::string endpoint;              // its name in models.yaml; empty: temperd has no models
  std::optional<uint32_t> max_seqs;  // nullopt: it does not say
};

// The CPUs temperd may use: its affinity mask's, narrowed by the cgroup's cpu quota (cgroup v2
// cpu.max, else v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up); at least 1.
struct MachineCpus {
  uint32_t count = 1;
  std::string source;  // "2 CPUs", or "2 CPUs (cgroup quota 1.5 of 4)"
};
MachineCpus CpusAvailable();

struct ParallelChoice {
  uint32_t attempts = 1;
  // For the journal and `temper status`: "auto: 2 (machine: 2 CPUs; endpoint 'remote': max_seqs 8;
  // limits.parallel_attempts_per_batch: 4)".
  std::string why;
};

// auto's N for a batch on a target that can fork (`forks`: a rootfs target) or cannot (an SSH host:
// 1). `per_batch_limit` is limits.parallel_attempts_per_batch.
ParallelChoice AutoParallelAttempts(bool forks, const EndpointCapacity& endpoint, const MachineCpus& machine,
                                    uint32_t per_batch_limit);

// Why a batch runs `attempts` at once, for its batch.started event: the loop.parallel_attempts
// number (`configured`), auto's `sized` choice with its reasons (configured nullopt), or the
// request's own number when it is neither; "serial" on a target that cannot fork. A request that
// asked for exactly what temperd would have chosen reads as temperd's choice: the store keeps the
// number, not who chose it.
std::string ParallelAttemptsWhy(uint32_t attempts, bool forks, std::optional<uint32_t> configured,
                                const ParallelChoice& sized);

}  // namespace temper
