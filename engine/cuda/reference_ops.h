// ReferenceOps: RankOps on the CPU. "Device memory" is host memory; every kernel is a plain loop
// that computes what rank_ops.h specifies, with the device's storage precisions (bf16 KV cache,
// bf16 GEMM operands, fp32 elsewhere), one element after another in the simplest order. It is
// the twin every CUDA kernel is tested against, and it lets the device backend's host side run on
// any machine (tests/engine/cuda/device_backend_test.cpp). Speed is not a goal.
//
// Thread safety: as RankOps; the ranks of one group share a Communicator for AllReduceSum.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "engine/cuda/rank_ops.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::cuda {

class ReferenceOps final : public RankOps {
 public:
  // Rank `rank` of `comm`'s group; `memory_limit` bytes may be allocated in all (the "device").
  ReferenceOps(Communicator& comm, int rank, size_t memory_limit);
  ~ReferenceOps() override;

  Result<void*> Alloc(size_t bytes) override;
  void Free(void* p) override;
  Status CopyToDevice(void* dst, const void* host, size_t bytes) override;
  Status CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) override;
  Status CopyToHost(void* host, const void* src, size_t bytes) override;
  Status CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) override;
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  Status Synchronize() override { return Status::OK(); }

  Status FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) override;
  Status Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end, int hidden,
               float scale, float* x) override;
  Status RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                 float weight_offset) override;
  Status QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows, int q_heads,
                 float eps, const RowTables& t, bool write_kv) override;
  Status NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                      const uint16_t* next_w, float* next_out, float weight_offset) override;
  Status Geglu(float* gate, const float* up, int64_t n) override;
  Status Gemv(const float* x, const GemvParts& parts, int rows, int in) override;
  Status GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                   int out) override;
  Status ToBf16(const float* x, uint16_t* y, int64_t n) override;
  Status Gemm(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows, int in,
              int out) override;
  Status GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) override;
  Status Softcap(float* y, int64_t ld, int rows, int n, float cap) override;
  Status KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) override;
  Status Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                   const RowTables& t, const HeadRange& heads, int splits, float* partials) override;
  Status TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                       const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max, float* out_mass,
                       void* scratch) override;
  Status AllReduceSum(float* data, size_t n) override;
  Status Capture(int key, const std::function<Status()>& step) override;
  Status Replay(int key) override;

  // Every GEMM shape this rank has run, in order of first use (tests check that passes run only
  // shapes that the start-up warm-up ran).
  const std::vector<GemmShape>& gemm_shapes() const { return gemm_shapes_; }

 private:
  Communicator& comm_;
  const int rank_;
  const size_t memory_limit_;
  size_t allocated_ = 0;
  std::map<void*, size_t> blocks_;
  std::map<int, std::function<Status()>> captured_;
  std::vector<GemmShape> gemm_shapes_;
};

// The reference of TopCandidates (top_candidates_reference.cpp), shared by ReferenceOps and the
// GPU kernel's test.
void ReferenceTopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                            const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                            float* out_mass);

}  // namespace temper::engine::cuda
