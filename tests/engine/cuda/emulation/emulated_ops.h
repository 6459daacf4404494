// EmulatedOps: a RankOps whose kernels are the CUDA backend's own (engine/cuda/*.cu, built as C++
// for the SIMT emulator, simt.h), run on host memory. Memory, the GEMM (cuBLASLt's, not ours), the
// all-reduce and captured steps are ReferenceOps'. So the kernel twin cases and the whole device
// backend against the golden fixture run our kernels' code on any machine; a GPU adds what the
// emulator cannot show (timing, the memory model, the all-reduce and GEMM kernels).
//
// Attention splits are chosen as CudaOps chooses them, for a GPU of kEmulatedSmCount
// multiprocessors (an L4's).
//
// Thread safety: as RankOps; emulated kernels run one grid at a time in the process.
#pragma once

#include <memory>

#include "engine/cuda/rank_ops.h"
#include "engine/cuda/reference_ops.h"

namespace temper::engine::cuda {

constexpr int kEmulatedSmCount = 58;

class EmulatedOps final : public RankOps {
 public:
  EmulatedOps(Communicator& comm, int rank, size_t memory_limit) : host_(comm, rank, memory_limit) {}

  Result<void*> Alloc(size_t bytes) override { return host_.Alloc(bytes); }
  void Free(void* p) override { host_.Free(p); }
  Status CopyToDevice(void* dst, const void* host, size_t bytes) override {
    return host_.CopyToDevice(dst, host, bytes);
  }
  Status CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) override {
    return host_.CopyRowsToDevice(dst, host, host_pitch, row_bytes, rows);
  }
  Status CopyToHost(void* host, const void* src, size_t bytes) override { return host_.CopyToHost(host, src, bytes); }
  Status CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) override {
    return host_.CopyRowsToHost(host, host_pitch, src, row_bytes, rows);
  }
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override { return host_.CopyOnDevice(dst, src, bytes); }
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
              int out) override {
    return host_.Gemm(x, ldx, w, ldw, y, ldy, rows, in, out);
  }
  Status GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) override;
  Status Softcap(float* y, int64_t ld, int rows, int n, float cap) override;
  Status KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) override;
  Status Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                   const RowTables& t, const HeadRange& heads, int splits, float* partials) override;
  Status TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                       const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max, float* out_mass,
                       void* scratch) override;
  Status AllReduceSum(float* data, size_t n) override { return host_.AllReduceSum(data, n); }
  Status Capture(int key, const std::function<Status()>& step) override { return host_.Capture(key, step); }
  Status Replay(int key) override { return host_.Replay(key); }

 private:
  ReferenceOps host_;
};

}  // namespace temper::engine::cuda
