// Backend: runs the Gemma 4 decoder over a batch of sequences, keeping each sequence's KV cache.
//
// The CPU backend (cpu_backend.h) is the reference; the CUDA backend implements the same
// interface. A forward call appends tokens to sequences: each item's tokens take positions
// Length(seq), Length(seq)+1, ... So prefill (one long item, or several chunks in successive
// calls) and decode (one token per item) are the same call, and both must give the logits a full
// recompute would.
//
// For the prefix cache a backend also keeps snapshots: a snapshot pins a sequence's KV state at its
// current length (full-layer pages shared by reference count, the sliding layers' last `window`
// tokens copied), and a fork starts a new sequence from it, as if that prefix had been prefilled.
// On a GPU the same operations are page-table edits plus device-to-device copies of the window.
//
// Thread safety: a Backend is driven by one thread at a time (the scheduler); it may use threads
// of its own inside Forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace temper::engine {

using SequenceId = int32_t;
using SnapshotId = int32_t;

// Speculative decoding appends a sequence's next token and up to kMaxDraftTokens guesses after it
// in one pass, then keeps only the guesses the model agreed with (Backend::Truncate). The sliding
// rings hold this many slots beyond the window, so the rows such a pass overwrote are rows no
// later query can see, and dropping the pass's tail restores the state exactly.
inline constexpr int kMaxDraftTokens = 8;

// The KV memory a backend holds, for admission control, metrics and capacity reports.
struct KvUsage {
  int block_tokens = 0;
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;  // not held by any sequence or snapshot
  int live_sequences = 0;
  int max_sequences = 0;
  int live_snapshots = 0;
  int max_snapshots = 0;
  uint64_t block_bytes = 0;   // one block of full-layer KV, all ranks together
  uint64_t window_bytes = 0;  // one sequence's (or snapshot's) sliding-window state, all ranks
};

struct ForwardItem {
  SequenceId seq = -1;
  std::span<const int32_t> tokens;  // at least one; appended at the sequence's current length
  bool all_logits = false;          // logits for every token (teacher forcing), else only the last
  float temperature = 1;            // the sampling temperature of its row, for candidates' tail mass
};

// The logit rows an item gets back: one per token with all_logits, else its last token's.
inline int64_t LogitRows(const ForwardItem& item) {
  return item.all_logits ? static_cast<int64_t>(item.tokens.size()) : 1;
}

struct ForwardOptions {
  // Also return the hidden states in Hugging Face's `output_hidden_states` convention.
  bool capture_hidden = false;
  // Sampling candidates instead of full rows, where the backend can (sample_candidates() > 0) and
  // keeps every output row on its devices (decode steps, drafts included; see the backend);
  // otherwise full rows.
  bool candidates = false;
};

// The largest logits of one row, enough to sample from it without the whole row (Sampler).
struct LogitCandidates {
  // After the softcap, descending; ties in id order. At most the backend's sample_candidates().
  std::vector<float> logits;
  std::vector<int32_t> ids;
  // Σ exp((l − logits[0]) / T) over the vocabulary entries NOT among the candidates, at the item's
  // temperature T (1 when it is 0).
  double tail_mass = 0;
  int32_t vocab_size = 0;
};

struct ForwardResult {
  // Rows in batch order: every token of an item with all_logits, else its last token only.
  // [rows][vocab_size], after the final softcap. Empty when `candidates` holds the rows.
  std::vector<float> logits;
  std::vector<LogitCandidates> candidates;  // one per row, when asked for and given
  int64_t rows = 0;
  // With capture_hidden: [num_layers + 1][batch tokens][hidden_size], batch tokens in item order.
  // [0] is the scaled embedding, [i] the output of layer i-1 (after layer_scalar), and the last
  // entry is the final-norm output (HF replaces the last layer's raw output with it).
  std::vector<float> hidden;
};

// One sequence's request for drafts from Gemma 4's MTP drafter (Backend::Draft).
struct DraftRequest {
  SequenceId seq = -1;
  // The token sampled for position SequenceLength(seq), not yet fed.
  int32_t token = 0;
  // The logit row of the most recent Forward that sampled `token`: the target's final-norm hidden
  // state there (position SequenceLength(seq) - 1) is the drafter's first input.
  int64_t hidden_row = 0;
  int count = 0;  // drafts wanted, in [1, kMaxDraftTokens]
};

struct DraftOptions {
  bool keep_logits = false;  // also return the drafter's logits (tests)
};

struct DraftResult {
  // Per request, in order: its greedy drafts, `count` of them; none for a sequence already at the
  // context limit (no verification pass could take them).
  std::vector<std::vector<int32_t>> tokens;
  // With keep_logits: [requests][max count][vocab_size], no softcap; rows past a request's drafts
  // are zeros.
  std::vector<float> logits;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelConfig& config() const = 0;

  // Starts an empty sequence. ResourceExhausted when no slot or memory is left.
  virtual Result<SequenceId> AddSequence() = 0;
  // Frees a sequence and its cache. NotFound if it is not live.
  virtual Status ReleaseSequence(SequenceId seq) = 0;
  // Tokens cached so far. NotFound if it is not live.
  virtual Result<int64_t> SequenceLength(SequenceId seq) const = 0;
  // The longest a sequence may grow.
  virtual int64_t context_limit() const = 0;
  virtual KvUsage kv_usage() const = 0;

  // Drops `seq`'s tokens from `length` on, as if they had never been appended. Allowed down to the
  // length before its last Forward when that pass appended at most kMaxDraftTokens + 1 tokens to
  // it (else down to its current length), and never below a snapshot taken of it. NotFound if it
  // is not live; FailedPrecondition (nothing changed) for a length outside that range.
  virtual Status Truncate(SequenceId seq, int64_t length) = 0;

  // Pins `seq`'s state at its current length. NotFound if it is not live; ResourceExhausted when
  // no snapshot slot or memory is left.
  virtual Result<SnapshotId> TakeSnapshot(SequenceId seq) = 0;
  // A new sequence whose cache equals the snapshot's; the snapshot stays. NotFound for a dead
  // snapshot; ResourceExhausted (nothing taken) when no sequence slot or block is free.
  virtual Result<SequenceId> ForkSnapshot(SnapshotId snap) = 0;
  // Unpins; pages still used by forks stay with them. NotFound if it is not live.
  virtual Status ReleaseSnapshot(SnapshotId snap) = 0;

  // Runs one forward pass over `batch` (each sequence at most once). Errors (before any state
  // changes): NotFound for a dead sequence, InvalidArgument for an empty item, a repeated
  // sequence or a token id outside the vocabulary, OutOfRange past the backend's context limit,
  // ResourceExhausted when the KV cache is full.
  virtual Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) = 0;

  // Whether an MTP drafter is attached (Draft works).
  virtual bool has_drafter() const { return false; }
  // Greedy drafts from the MTP drafter for each request, every request's steps run together.
  // Reads the target's cache and the hidden states the last Forward left; changes no state.
  // Errors (nothing drafted): FailedPrecondition without a drafter, or when a request's
  // hidden_row is not its sequence's last position in the last Forward or that row's hidden state
  // is no longer held (a device backend holds as many rows as its logits buffer); NotFound for a dead
  // sequence; InvalidArgument for a repeated sequence, a token outside the vocabulary or a count
  // outside [1, kMaxDraftTokens].
  virtual Result<DraftResult> Draft(std::span<const DraftRequest> /*requests*/, const DraftOptions& /*options*/) {
    return Status::FailedPrecondition("this backend has no MTP drafter");
  }

  // The most rows a decode pass (each sequence's next token, and its drafts) may have and still
  // cost about one decode step; 0: no such limit. The scheduler spends draft tokens within it.
  virtual int64_t max_decode_rows() const { return 0; }

  // How many sampling candidates a row can come back as (ForwardOptions::candidates); 0: full
  // rows only.
  virtual int sample_candidates() const { return 0; }
  // The full logits of row `row` of the last Forward that returned candidates (a sampler whose
  // draw falls beyond them finishes on the row). FailedPrecondition when the row is not held.
  virtual Result<std::vector<float>> LogitsRow(int64_t /*row*/) const {
    return Status::FailedPrecondition("this backend returns full logit rows and keeps none of its own");
  }
};

}  // namespace temper::engine
