// The scheduler's policy, apart from the work: what runs in the next forward pass, who is admitted,
// and who is preempted. Every function here is pure: it reads a plain snapshot of the scheduler's
// state and returns a decision, so the policy can be tested without a backend (Scheduler in
// scheduler.h carries the decisions out: it admits, executes the plan, samples and emits).
//
// One step, as Scheduler::RunBatch takes it (the split of vLLM's scheduler: schedule, execute,
// update):
//   1. DraftRowCapacity: how many rows this pass can spare for speculation drafts. Each decoding
//      sequence proposes at most that many (PromptLookup, OutputHistory or the MTP drafter).
//   2. PlanStep: the batch. Decode first: every running sequence with one token left to feed gets
//      its token, plus as many of its proposed drafts as the rows left allow, in admission order.
//      Decode priority keeps every started reply streaming while long prompts arrive. Then
//      prefill chunks in admission order (so the oldest request reaches its first token first):
//      each chunk ends at the sequence's next checkpoint (a message boundary, where its state is
//      pinned in the prefix cache) or where max_batch_tokens runs out, whichever is first. Every
//      token fed, drafts included, counts against max_batch_tokens.
//   3. When the backend runs out of KV pages for the planned pass, the pass is retried with less:
//      first without drafts (DropDrafts: they only ever save time), then with one cached prefix
//      fewer (the scheduler's PrefixCache::EvictOne), then without the most recently admitted
//      sequence, which is preempted (ChoosePreemptionVictim: it has the least work done to lose,
//      and the oldest requests finish first). A sequence alone in the batch is never preempted:
//      nothing would free room for it, so the pass fails instead.
//
// Admission (DecideAdmission) is head-of-line in arrival order, a preempted sequence going back
// to the queue's front: a request is admitted while the KV pool has room for the part of its prompt
// the prefix cache does not hold, after the blocks promised to running sequences still
// prefilling. When it does not fit, cached prefixes are freed first; when none are left it waits
// for running sequences to finish (which frees their blocks), or, alone, goes ahead and lets
// step 3 sort it out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace temper::engine {

// One running sequence as the planner sees it.
struct PlanSequence {
  int64_t tokens = 0;                    // prompt plus generated tokens so far
  int64_t fed = 0;                       // of which are in the sequence's KV cache
  std::span<const int64_t> checkpoints;  // prompt positions to pin, sorted, ending with the prompt's end
  int64_t proposed_drafts = 0;           // drafts it could verify this step (decoding sequences only)

  // Tokens still to feed: 1 for a decoding sequence, more while it prefills.
  int64_t remaining() const { return tokens - fed; }
};

struct ScheduleInput {
  int64_t max_batch_tokens = 0;       // tokens per forward pass, drafts included; at least 1
  int64_t max_decode_rows = 0;        // rows a pass may have at a decode step's cost (Backend); 0: no limit
  std::vector<PlanSequence> running;  // in admission order
};

// What one sequence feeds in the planned pass.
struct PlannedItem {
  size_t sequence = 0;  // index into ScheduleInput::running
  int64_t tokens = 0;   // fed: a prefill chunk, or 1 + drafts for a decode
  int64_t drafts = 0;   // of the sequence's proposed drafts, how many are verified
  bool decode = false;  // its last token (with drafts: and the drafts); else a prefill chunk
};

// The batch of one forward pass: decodes first, then prefill chunks, each group in admission order.
// A sequence appears at most once; one that does not appear waits for a later step.
struct StepPlan {
  std::vector<PlannedItem> items;
  int64_t tokens() const;
};

// Rows left for drafts once every decoding sequence has its one: within max_batch_tokens and
// within max_decode_rows.
int64_t DraftRowCapacity(const ScheduleInput& input);

// The next pass's batch (steps 1-2 above).
StepPlan PlanStep(const ScheduleInput& input);

// Out of KV pages, first resort: verifies no drafts this pass. False when the plan had none.
bool DropDrafts(StepPlan& plan);

// Out of KV pages, last resort: the index (into `admission_orders`, the live running sequences'
// admission counters) of the sequence to preempt, the most recently admitted; nullopt when fewer
// than two are running.
std::optional<size_t> ChoosePreemptionVictim(std::span<const uint64_t> admission_orders);

// The KV pool and the sequences holding it, as admission sees them (once the backend has a sequence
// slot free: without one the request waits whatever the pool holds).
struct AdmissionInput {
  int block_tokens = 1;
  int64_t free_blocks = 0;
  std::vector<int64_t> running_remaining;  // tokens each running sequence has still to feed
  int64_t request_tokens = 0;              // the waiting request's prompt (and output, when preempted)
  int64_t cached_tokens = 0;               // of which the prefix cache holds
  bool can_free_cache = false;             // a cached prefix may still be evicted for room
};

enum class AdmissionVerdict {
  kAdmit,             // fits, or is alone and goes ahead
  kFreeCachedPrefix,  // evict one cached prefix and decide again
  kWait,              // stays at the queue's head until a running sequence frees room
};

AdmissionVerdict DecideAdmission(const AdmissionInput& input);

}  // namespace temper::engine
