// CountingOps: a RankOps that counts the kernels and collectives it is asked for and passes every
// call on to the RankOps it wraps. Each kernel op of rank_ops.h is one launch function of
// kernels.h, which launches one kernel, but for Attention (a split kernel and the merge) and
// TopCandidates (per-chunk top-k and the row mass: at least two); an all-reduce is one kernel at
// tp > 1 and none at tp 1. OpCounts::Launches() adds it up: what a decode step costs a rank. Over ReferenceOps it
// counts on any machine, from the same host logic the GPU runs; over CudaOps a captured step counts while it is
// captured (a graph's nodes) and a replay adds nothing.
//
// Thread safety: as RankOps (one rank's thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {

enum class OpKind {
  kEmbed,
  kRmsNorm,
  kQkvNorm,
  kNormResidual,
  kGeglu,
  kGemv,
  kGemvGeglu,
  kToBf16,
  kGemm,
  kGatherRows,
  kSoftcap,
  kKvWrite,
  kAttention,
  kTopCandidates,
  kAllReduce,
  kCount
};
// "Embed", "RmsNorm", ...: the RankOps method's name.
const char* OpKindName(OpKind kind);

struct OpCounts {
  std::array<int64_t, static_cast<size_t>(OpKind::kCount)> n{};
  int64_t operator[](OpKind k) const { return n[static_cast<size_t>(k)]; }
  int64_t Total() const;         // ops
  int64_t Launches() const;      // kernels those ops launch on a GPU (see above)
  std::string Describe() const;  // the ops counted, by kind: "Embed 1, RmsNorm 2, ..."
};

class CountingOps final : public RankOps {
 public:
  // `tp`: the ranks of the group; at 1 an all-reduce is no work and is not counted.
  CountingOps(std::unique_ptr<RankOps> inner, int tp) : inner_(std::move(inner)), tp_(tp) {}

  const OpCounts& counts() const { return counts_; }
  void ResetCounts() { counts_ = {}; }

  Result<void*> Alloc(size_t bytes) override { return inner_->Alloc(bytes); }
  void Free(void* p) override { inner_->Free(p); }
  Status CopyToDevice(void* dst, const void* host, size_t bytes) override {
    return inner_->CopyToDevice(dst, host, bytes);
  }
  Status CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) override {
    return inner_->CopyRowsToDevice(dst, host, host_pitch, row_bytes, rows);
  }
  Status CopyToHost(void* host, const void* src, size_t bytes) override { return inner_->CopyToHost(host, src, bytes); }
  Status CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) override {
    return inner_->CopyRowsToHost(host, host_pitch, src, row_bytes, rows);
  }
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    return inner_->CopyOnDevice(dst, src, bytes);
  }
  Status Synchronize() override { return inner_->Synchronize(); }

  Status FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) override {
    return inner_->FillSynthetic(dst, n, seed, mean, halfwidth);
  }
  Status Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end, int hidden,
               float scale, float* x) override {
    Count(OpKind::kEmbed);
    return inner_->Embed(tokens, rows, table, vocab_begin, vocab_end, hidden, scale, x);
  }
  Status RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                 float weight_offset) override {
    Count(OpKind::kRmsNorm);
    return inner_->RmsNorm(x, out, w, rows, n, eps, weight_offset);
  }
  Status QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows, int q_heads,
                 float eps, const RowTables& t, bool write_kv) override {
    Count(OpKind::kQkvNorm);
    return inner_->QkvNorm(kv, q, k, v, q_norm, rows, q_heads, eps, t, write_kv);
  }
  Status NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                      const uint16_t* next_w, float* next_out, float weight_offset) override {
    Count(OpKind::kNormResidual);
    return inner_->NormResidual(x, branch, w, rows, n, eps, scale, next_w, next_out, weight_offset);
  }
  Status Geglu(float* gate, const float* up, int64_t n) override {
    Count(OpKind::kGeglu);
    return inner_->Geglu(gate, up, n);
  }
  Status Gemv(const float* x, const GemvParts& parts, int rows, int in) override {
    Count(OpKind::kGemv);
    return inner_->Gemv(x, parts, rows, in);
  }
  Status GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                   int out) override {
    Count(OpKind::kGemvGeglu);
    return inner_->GemvGeglu(x, gate, up, y, rows, in, out);
  }
  Status ToBf16(const float* x, uint16_t* y, int64_t n) override {
    Count(OpKind::kToBf16);
    return inner_->ToBf16(x, y, n);
  }
  Status Gemm(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows, int in,
              int out) override {
    Count(OpKind::kGemm);
    return inner_->Gemm(x, ldx, w, ldw, y, ldy, rows, in, out);
  }
  Status GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) override {
    Count(OpKind::kGatherRows);
    return inner_->GatherRows(x, width, index, n, out);
  }
  Status Softcap(float* y, int64_t ld, int rows, int n, float cap) override {
    Count(OpKind::kSoftcap);
    return inner_->Softcap(y, ld, rows, n, cap);
  }
  Status KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) override {
    Count(OpKind::kKvWrite);
    return inner_->KvWrite(kv, k, v, rows, t);
  }
  Status Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                   const RowTables& t, const HeadRange& heads, int splits, float* partials) override {
    Count(OpKind::kAttention);
    return inner_->Attention(kv, q, k, v, out, rows, t, heads, splits, partials);
  }
  Status TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                       const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max, float* out_mass,
                       void* scratch) override {
    Count(OpKind::kTopCandidates);
    return inner_->TopCandidates(logits, ld, rows, n, k, index_offset, temperatures, out_vals, out_ids, out_max,
                                 out_mass, scratch);
  }
  Status AllReduceSum(float* data, size_t n) override {
    if (tp_ > 1) Count(OpKind::kAllReduce);
    return inner_->AllReduceSum(data, n);
  }
  Status Capture(int key, const std::function<Status()>& step) override { return inner_->Capture(key, step); }
  Status Replay(int key) override { return inner_->Replay(key); }

 private:
  void Count(OpKind k) { ++counts_.n[static_cast<size_t>(k)]; }

  std::unique_ptr<RankOps> inner_;
  const int tp_;
  OpCounts counts_;
};

}  // namespace temper::engine::cuda
