// temper-bench --gpus's driving of the device backend the way the scheduler drives it: sequences
// prefilled and then decoded one token per step, with sampling candidates (ForwardOptions
// .candidates, as engine/serve/scheduler.cpp asks whenever the backend offers them), greedy = the first
// candidate. Also the checks that make a fast run trustworthy: every graph bucket captured and
// replayed before anything is timed, timed steps that really ran as graphs, greedy tokens from
// candidates equal to greedy tokens from the full logits, and no NaN or inf anywhere.
//
// Thread safety: as DeviceBackend (one driving thread).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/cuda/device_backend.h"

namespace temper::engine::bench {

// `n` token ids in [0, vocab), a fixed function of `seed`.
std::vector<int32_t> SyntheticPrompt(uint64_t seed, int n, int vocab);

struct DecodeRun {
  // Greedy tokens: [0] from the prompts' prefill, then one row per decode step; [step][sequence].
  std::vector<std::vector<int32_t>> tokens;
  // Top-1 logit of each token above (the first candidate's, or the row's maximum).
  std::vector<std::vector<float>> top_logits;
  double prefill_s = 0;        // the prompts, one forward pass each, before the first step
  std::vector<double> step_s;  // wall time of each decode step (Forward call, candidates included)
};

// `batch` fresh sequences, prompt s = SyntheticPrompt(seed + s, context), each prefilled in its own
// Forward, then `steps` decode steps of the whole batch, feeding back the greedy tokens. With
// `candidates` every Forward asks for candidates, else for full rows. Releases its sequences.
// Errors: the backend's; Internal when a row holds NaN or inf (naming step, row and where), and
// FailedPrecondition when a decode step did not run as a captured graph (graphs are on and the
// batch fits a bucket), so a timing of the eager path cannot pass for the graph one.
Result<DecodeRun> RunDecode(cuda::DeviceBackend& backend, int batch, int context, int steps, bool candidates,
                            uint64_t seed);

// Captures and replays the candidates graph of every bucket (1, 2, 4, ... max_batch): per bucket,
// that many fresh sequences, two decode steps. Returns the bucket sizes warmed.
Result<std::vector<int>> WarmGraphBuckets(cuda::DeviceBackend& backend, int max_batch);

struct CandidatesCheck {
  int tokens_compared = 0;
  double max_top_logit_diff = 0;  // |first candidate − row maximum| over the compared tokens
};

// Greedy decoding of the same prompts on fresh sequences, once from full logits and once from
// candidates, at each batch in `batches`: the tokens must be equal. Internal naming the batch,
// step, sequence and both tokens when they differ.
Result<CandidatesCheck> CheckCandidatesMatchLogits(cuda::DeviceBackend& backend, const std::vector<int>& batches,
                                                   int context, int steps);

}  // namespace temper::engine::bench
