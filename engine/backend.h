// Backend: runs the Gemma 4 decoder over a batch of sequences, keeping each sequence's KV cache.
//
// The CPU backend (cpu_backend.h) is the reference; the CUDA backend implements the same
// interface. A forward call appends tokens to sequences: each item's tokens take positions
// Length(seq), Length(seq)+1, ... So prefill (one long item, or several chunks in successive
// calls) and decode (one token per item) are the same call, and both must give the logits a full
// recompute would.
//
// Thread safety: a Backend is driven by one thread at a time (the scheduler); it may use threads
// of its own inside Forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"

namespace temper::engine {

using SequenceId = int32_t;

struct ForwardItem {
  SequenceId seq = -1;
  std::span<const int32_t> tokens;  // at least one; appended at the sequence's current length
  bool all_logits = false;          // logits for every token (teacher forcing), else only the last
};

struct ForwardOptions {
  // Also return the hidden states in Hugging Face's `output_hidden_states` convention.
  bool capture_hidden = false;
};

struct ForwardResult {
  // Rows in batch order: every token of an item with all_logits, else its last token only.
  // [rows][vocab_size], after the final softcap.
  std::vector<float> logits;
  int64_t rows = 0;
  // With capture_hidden: [num_layers + 1][batch tokens][hidden_size], batch tokens in item order.
  // [0] is the scaled embedding, [i] the output of layer i-1 (after layer_scalar), and the last
  // entry is the final-norm output (HF replaces the last layer's raw output with it).
  std::vector<float> hidden;
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

  // Runs one forward pass over `batch` (each sequence at most once). Errors (before any state
  // changes): NotFound for a dead sequence, InvalidArgument for an empty item, a repeated
  // sequence or a token id outside the vocabulary, OutOfRange past the backend's context limit,
  // ResourceExhausted when the KV cache is full.
  virtual Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) = 0;
};

}  // namespace temper::engine
