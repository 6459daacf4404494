#include "engine/model/tensor_parallel.h"

#include <fmt/format.h>

namespace temper::engine {

Range EvenSplit(int n, int parts, int index) {
  const int64_t b = int64_t{n} * index / parts, e = int64_t{n} * (index + 1) / parts;
  return {static_cast<int>(b), static_cast<int>(e)};
}

Result<std::vector<RankShard>> PlanShards(const ModelConfig& c, int tp) {
  if (tp < 1) return Status::InvalidArgument(fmt::format("tensor parallelism must be >= 1, got {}", tp));
  if (c.num_heads % tp != 0) {
    return Status::InvalidArgument(fmt::format("tp {} does not divide num_attention_heads {}", tp, c.num_heads));
  }
  if (tp > c.vocab_size || tp > c.intermediate_size) {
    return Status::InvalidArgument(fmt::format("tp {} exceeds the vocabulary or the FFN width", tp));
  }
  std::vector<RankShard> shards(tp);
  const int heads_per_rank = c.num_heads / tp;
  for (int r = 0; r < tp; ++r) {
    RankShard& s = shards[r];
    s.rank = r;
    s.tp = tp;
    s.ffn = EvenSplit(c.intermediate_size, tp, r);
    s.vocab = EvenSplit(c.vocab_size, tp, r);
    for (int l = 0; l < c.num_layers; ++l) {
      const int n_kv = c.layers[l].num_kv_heads;
      LayerShard ls;
      ls.q_heads = {r * heads_per_rank, (r + 1) * heads_per_rank};
      if (n_kv >= tp) {
        if (n_kv % tp != 0) {
          return Status::InvalidArgument(fmt::format("layer {}: tp {} does not divide its {} KV heads", l, tp, n_kv));
        }
        ls.kv_heads = {r * n_kv / tp, (r + 1) * n_kv / tp};
      } else {
        if (tp % n_kv != 0) {
          return Status::InvalidArgument(
              fmt::format("layer {}: {} KV heads cannot be replicated evenly over tp {}", l, n_kv, tp));
        }
        const int kv = r / (tp / n_kv);
        ls.kv_heads = {kv, kv + 1};
      }
      s.layers.push_back(ls);
    }
  }
  return shards;
}

Communicator::Communicator(int ranks) : ranks_(ranks), barrier_(ranks), published_(ranks, nullptr), scratch_(ranks) {}

void Communicator::AllReduceSum(int rank, float* data, size_t n) {
  if (ranks_ == 1) return;
  published_[rank] = data;
  barrier_.arrive_and_wait();  // every rank's partial sum is published
  std::vector<float>& sum = scratch_[rank];
  sum.assign(published_[0], published_[0] + n);
  for (int r = 1; r < ranks_; ++r) {
    const float* p = published_[r];
    for (size_t i = 0; i < n; ++i) sum[i] += p[i];
  }
  barrier_.arrive_and_wait();  // nobody overwrites its partial while another rank still reads it
  std::copy(sum.begin(), sum.end(), data);
}

void Communicator::Barrier() {
  if (ranks_ > 1) barrier_.arrive_and_wait();
}

}  // namespace temper::engine
