// Budgets: how much work the loop may spend on one rule, and the ranges a request may ask for.
// The same ranges bound temperd.yaml's defaults and each SubmitBatch, so a batch can never ask for
// what the daemon would refuse in its own config.
#pragma once

#include <chrono>
#include <cstdint>

namespace temper {

struct Budgets {
  uint32_t max_attempts = 5;
  std::chrono::seconds wall_time{20 * 60};  // per rule
  uint64_t max_tokens = 400'000;            // per rule, all roles together
};

struct BudgetRanges {
  static constexpr uint32_t kMinAttempts = 1;
  static constexpr uint32_t kMaxAttempts = 50;
  static constexpr std::chrono::seconds kMinWallTime{10};
  static constexpr std::chrono::seconds kMaxWallTime{24 * 3600};
  static constexpr uint64_t kMinTokens = 1'000;
  static constexpr uint64_t kMaxTokens = 100'000'000;
};

// Passes a batch runs at most by default (temperd.yaml loop.fixpoint_passes; orchestrator/loop/
// fixpoint.h), and the range allowed.
inline constexpr uint32_t kDefaultFixpointPasses = 3;
inline constexpr uint32_t kMaxFixpointPasses = 10;
// loop.parallel_attempts: beyond this, forks only wait for the evaluator and the serialized commit.
inline constexpr uint32_t kMaxParallelAttempts = 16;

}  // namespace temper
