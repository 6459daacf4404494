// Tensor parallelism: how the weights are split over `tp` ranks, and the in-process collectives
// the CPU backend's rank threads use. The CUDA backend shards exactly the same way, so the CPU
// backend is a working, testable model of the multi-GPU layout.
//
// Split (Megatron style, as vLLM does for Gemma 4):
//  * q_proj, k_proj, v_proj, gate_proj, up_proj: column-parallel (each rank owns a range of output
//    rows of the [out, in] weight), so each rank computes whole heads / whole FFN channels;
//  * o_proj, down_proj: row-parallel (each rank owns the matching range of input columns) and the
//    partial sums meet in one all-reduce after attention and one after the MLP;
//  * embedding and (tied) LM head: vocab-parallel. For the embedding, the rank owning a token's
//    row writes it and the others write zeros, then an all-reduce; for the head, each rank
//    computes the logits of its vocabulary range.
//  * Norm weights and layer_scalar are replicated.
// KV heads: when a layer has at least `tp` KV heads they are split like the query heads (tp must
// divide their count). When it has fewer (the tiny fixture's full layers have 1, the 31B model's
// have 4 for tp up to 4), each KV head is replicated on the tp / n_kv ranks whose query heads read
// it, as vLLM does; `tp` must then be a multiple of n_kv. Query heads must divide evenly.
// FFN channels and vocabulary rows are split as evenly as possible (ranges may differ by one).
//
// Thread safety: a ShardPlan is a value. A Communicator is shared by the rank threads of one
// forward pass; every rank must make the same sequence of collective calls.
#pragma once

#include <barrier>
#include <cstddef>
#include <vector>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace temper::engine {

struct Range {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// Part `index` of [0, n) split into `parts` contiguous ranges whose sizes differ by at most one.
Range EvenSplit(int n, int parts, int index);

struct LayerShard {
  Range q_heads;   // query heads this rank computes
  Range kv_heads;  // KV heads it holds (replicated ranges overlap between ranks)
};

struct RankShard {
  int rank = 0;
  int tp = 1;
  std::vector<LayerShard> layers;
  Range ffn;    // intermediate channels
  Range vocab;  // embedding / LM-head rows
};

// One RankShard per rank. InvalidArgument (naming the layer and the counts) when `tp` < 1 or the
// heads cannot be split as described above.
Result<std::vector<RankShard>> PlanShards(const ModelConfig& config, int tp);

// In-process collectives among `ranks` threads. The sum is taken in rank order 0, 1, ..., tp-1 on
// every rank, so all ranks end with bitwise identical results (the replicas of the residual stream
// never drift apart).
class Communicator {
 public:
  explicit Communicator(int ranks);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int ranks() const { return ranks_; }
  // Called by every rank with its own `data` of the same length `n`; returns when every rank's
  // `data` holds the element-wise sum.
  void AllReduceSum(int rank, float* data, size_t n);
  // Returns when every rank has arrived.
  void Barrier();

 private:
  const int ranks_;
  std::barrier<> barrier_;
  std::vector<float*> published_;
  std::vector<std::vector<float>> scratch_;
};

}  // namespace temper::engine
