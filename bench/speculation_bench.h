// Speculative decoding's numbers (engine/serve/prompt_lookup.h, the scheduler's verification):
//
// * Acceptance, independent of any weights: the roles' real requests and the replies a model
//   would write, from a transcript that temper-scripted-model --transcript wrote during a loop run
//   (bench/loop_bench.sh). Each request is rendered by Gemma 4's chat format and each reply
//   decoded teacher-forced: at every step PromptLookup drafts from the prompt and the reply so far,
//   the drafts that equal the reply's next tokens are accepted, and the pass yields one token more.
//   Printed per role: tokens per pass (accepted + 1) at a fixed k of 1, 2, 4 and 8 drafts, and
//   with the scheduler's adaptive k (DraftLength, at most kMaxDraftTokens).
//
//   Gemma 4's tokenizer is not among the fixtures; Gemma 3's 262,144-entry vocabulary
//   (tests/data/tokenizer/gemma3-tokenizer.json.gz, unpacked) stands in for it, with Gemma 4's
//   control tokens put in place of its first unused tokens.
//
//     temper-bench --lookup-transcript T.jsonl --lookup-tokenizer gemma3-tokenizer.json
//
// * Cost: a verification pass of 1 + k tokens (all rows' logits, then truncated back) against a
//   one-token decode step at the same context, on the CPU backend, k = 1, 2, 4, 8.
//
//     temper-bench --verify-cost --synthetic bench/configs/gemma4-1b-synthetic.json [--threads N]
//
//   With an MTP drafter (--drafter-synthetic bench/configs/gemma4-1b-assistant-synthetic.json, seeded
//   weights), also one Backend::Draft call of k = 1, 2, 4, 8 steps against the same decode step.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "engine/loaded_model.h"

namespace temper::engine::bench {

Status RunLookupAcceptance(const std::string& transcript, const std::string& tokenizer);

struct VerifyCostOptions {
  int threads = 0;
  int context = 512;  // tokens before the timed passes
  int reps = 9;       // timed passes per k (median)
};
// With model.drafter set, also times its draft steps.
Status RunVerifyCost(const LoadedModel& model, const VerifyCostOptions& options);

}  // namespace temper::engine::bench
