// CudaOps: RankOps on one GPU. Every op is enqueued on the rank's own stream; memory is
// cudaMalloc'd; kernels are kernels.h's; GEMMs go through the rank's cuBLASLt handle; the
// all-reduce is the group's DeviceAllReduce; Capture records a CUDA graph per key (thread-local
// capture mode, so the ranks of one process capture at once, each in its thread) and Replay
// launches it. Create loads every kernel's code on the device (kernel_loading.h). With
// `programmatic_edges` on a GPU that runs them (sm_90 and later), a captured graph's edges into
// kernels that wait for their predecessor become programmatic (programmatic_edges.h). The decode
// GEMVs and the attention are LaunchDecodeGemv's and LaunchDecodeAttention's choices (kernels.h),
// given the candidates asked for.
//
// Built only with nvcc (TEMPER_HAVE_CUDA). Thread safety: as RankOps. Each call makes the rank's
// device current on the calling thread (ranks run in a WorkerGroup whose worker 0 is whichever
// thread drives the backend).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>

#include "engine/cuda/all_reduce.h"
#include "engine/cuda/gemm_bf16.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/programmatic_edges.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {

class CudaOps final : public RankOps {
 public:
  struct Options {
    bool programmatic_edges = true;  // where the GPU runs them (CudaBackendOptions says what they are)
  };
  // Rank `rank` on device `device`; `all_reduce` (shared by the group's ranks) is null for tp 1.
  // Errors name the device and the failing call.
  static Result<std::unique_ptr<CudaOps>> Create(int device, int rank, std::shared_ptr<DeviceAllReduce> all_reduce,
                                                 const Options& options);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  Result<void*> Alloc(size_t bytes) override;
  void Free(void* p) override;
  Status CopyToDevice(void* dst, const void* host, size_t bytes) override;
  Status CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) override;
  Status CopyToHost(void* host, const void* src, size_t bytes) override;
  Status CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) override;
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  Status Synchronize() override;

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

  int device() const { return device_; }
  // Whether captured graphs get programmatic edges (asked for, and the GPU runs them).
  bool programmatic_edges() const { return programmatic_edges_; }
  // The edges of the graphs captured so far with programmatic edges on, and how many of them are.
  const EdgeCount& captured_edges() const { return captured_edges_; }

 private:
  CudaOps(int device, int rank, std::shared_ptr<DeviceAllReduce> all_reduce)
      : device_(device), rank_(rank), all_reduce_(std::move(all_reduce)) {}
  Status Bind() const;

  const int device_;
  const int rank_;
  std::shared_ptr<DeviceAllReduce> all_reduce_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmBf16> gemm_;
  std::map<int, cudaGraphExec_t> graphs_;
  int sm_count_ = 0;          // multiprocessors: how many attention splits keep them busy
  AwaitingKernels awaiting_;  // every kernel Create loaded: all begin with AwaitPriorGrid
  bool programmatic_edges_ = false;
  EdgeCount captured_edges_;
};

}  // namespace temper::engine::cuda
