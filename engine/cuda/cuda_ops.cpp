#include "engine/cuda/cuda_ops.h"

#include <string>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/memory_plan.h"

namespace temper::engine::cuda {

Result<std::unique_ptr<CudaOps>> CudaOps::Create(int device, int rank, std::shared_ptr<DeviceAllReduce> all_reduce,
                                                 const Options& options) {
  std::unique_ptr<CudaOps> ops(new CudaOps(device, rank, std::move(all_reduce)));
  TEMPER_RETURN_IF_ERROR(ops->Bind());
  TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&ops->stream_, cudaStreamNonBlocking));
  TEMPER_CUDA_TRY(cudaDeviceGetAttribute(&ops->sm_count_, cudaDevAttrMultiProcessorCount, device));
  TEMPER_ASSIGN_OR_RETURN(const bool supported, ProgrammaticLaunchSupported(device));
  ops->programmatic_edges_ = options.programmatic_edges && supported;
  TEMPER_ASSIGN_OR_RETURN(ops->gemm_, GemmBf16::Create(kGemmWorkspaceBytes));
  // Every kernel's code on this device before any all-reduce can spin here (kernel_loading.h).
  Status loaded = LoadAllKernels(&ops->awaiting_);
  if (!loaded.ok()) return loaded.WithContext("CUDA device " + std::to_string(device));
  if (ops->all_reduce_) {
    Status ready = PrepareAllReduceStream(ops->stream_);
    if (!ready.ok()) return ready.WithContext("CUDA device " + std::to_string(device));
  }
  return ops;
}

CudaOps::~CudaOps() {
  if (!Bind().ok()) return;
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  gemm_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaOps::Bind() const {
  // Only when needed: a captured step calls every op, and the capture is already on this device.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device_) return Status::OK();
  const cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) {
    return CudaStatus(e, "cudaSetDevice", __FILE__, __LINE__).WithContext("CUDA device " + std::to_string(device_));
  }
  return Status::OK();
}

Result<void*> CudaOps::Alloc(size_t bytes) {
  TEMPER_RETURN_IF_ERROR(Bind());
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // cudaMalloc's failure is not sticky; clear it
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return Status::ResourceExhausted("CUDA device " + std::to_string(device_) + ": cannot allocate " +
                                     std::to_string(bytes) + " B (" + std::to_string(free) + " B free of " +
                                     std::to_string(total) + "): " + cudaGetErrorString(e));
  }
  return p;
}

void CudaOps::Free(void* p) {
  if (Bind().ok()) cudaFree(p);
}

Status CudaOps::CopyToDevice(void* dst, const void* host, size_t bytes) {
  TEMPER_RETURN_IF_ERROR(Bind());
  TEMPER_CUDA_TRY(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
  return Status::OK();
}

Status CudaOps::CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) {
  TEMPER_RETURN_IF_ERROR(Bind());
  TEMPER_CUDA_TRY(
      cudaMemcpy2DAsync(dst, row_bytes, host, host_pitch, row_bytes, rows, cudaMemcpyHostToDevice, stream_));
  return Status::OK();
}

Status CudaOps::CopyToHost(void* host, const void* src, size_t bytes) {
  TEMPER_RETURN_IF_ERROR(Bind());
  TEMPER_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
  return Status::OK();
}

Status CudaOps::CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) {
  TEMPER_RETURN_IF_ERROR(Bind());
  TEMPER_CUDA_TRY(
      cudaMemcpy2DAsync(host, host_pitch, src, row_bytes, row_bytes, rows, cudaMemcpyDeviceToHost, stream_));
  return Status::OK();
}

Status CudaOps::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  TEMPER_RETURN_IF_ERROR(Bind());
  TEMPER_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  return Status::OK();
}

Status CudaOps::Synchronize() {
  TEMPER_RETURN_IF_ERROR(Bind());
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e == cudaSuccess) return Status::OK();
  // A trapped all-reduce kills the context; its record says which rank waited for whom.
  const std::string stall = all_reduce_ ? all_reduce_->StallReport() : "";
  const Status failed = CudaStatus(e, "cudaStreamSynchronize", __FILE__, __LINE__);
  return stall.empty() ? failed : failed.WithContext(stall);
}

Status CudaOps::FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchFillSynthetic(dst, n, seed, mean, halfwidth, stream_);
}

Status CudaOps::Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end,
                      int hidden, float scale, float* x) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchEmbed(tokens, rows, table, vocab_begin, vocab_end, hidden, scale, x, stream_);
}

Status CudaOps::RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                        float weight_offset) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchRmsNorm(x, out, w, rows, n, eps, weight_offset, stream_);
}

Status CudaOps::QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows,
                        int q_heads, float eps, const RowTables& t, bool write_kv) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchQkvNorm(kv, q, k, v, q_norm, rows, q_heads, eps, t, write_kv, stream_);
}

Status CudaOps::NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                             const uint16_t* next_w, float* next_out, float weight_offset) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchNormResidual(x, branch, w, rows, n, eps, scale, next_w, next_out, weight_offset, stream_);
}

Status CudaOps::Geglu(float* gate, const float* up, int64_t n) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchGeglu(gate, up, n, stream_);
}

Status CudaOps::Gemv(const float* x, const GemvParts& parts, int rows, int in) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchGemvBf16(x, parts, rows, in, stream_);
}

Status CudaOps::GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                          int out) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchGemvGeglu(x, gate, up, y, rows, in, out, stream_);
}

Status CudaOps::ToBf16(const float* x, uint16_t* y, int64_t n) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchToBf16(x, y, n, stream_);
}

Status CudaOps::Gemm(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows,
                     int in, int out) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return gemm_->Run(x, ldx, w, ldw, y, ldy, rows, in, out, stream_);
}

Status CudaOps::GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchGatherRows(x, width, index, n, out, stream_);
}

Status CudaOps::Softcap(float* y, int64_t ld, int rows, int n, float cap) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchSoftcap(y, ld, rows, n, cap, stream_);
}

Status CudaOps::KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchKvWrite(kv, k, v, rows, t, stream_);
}

Status CudaOps::Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                          const RowTables& t, const HeadRange& heads, int splits, float* partials) {
  TEMPER_RETURN_IF_ERROR(Bind());
  // `splits` is the pass's most (the partials hold that many); fewer fill this GPU for one row.
  const int used = AttentionSplits(sm_count_, kv.kv_heads, heads.group, splits);
  return LaunchAttention(kv, q, k, v, out, rows, t, heads, used, partials, stream_);
}

Status CudaOps::TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                              const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                              float* out_mass, void* scratch) {
  TEMPER_RETURN_IF_ERROR(Bind());
  return LaunchTopCandidates(logits, ld, rows, n, k, index_offset, temperatures, out_vals, out_ids, out_max, out_mass,
                             scratch, stream_);
}

Status CudaOps::AllReduceSum(float* data, size_t n) {
  if (!all_reduce_) return Status::OK();  // tp 1
  TEMPER_RETURN_IF_ERROR(Bind());
  return all_reduce_->AllReduceSum(rank_, data, n, stream_);
}

Status CudaOps::Capture(int key, const std::function<Status()>& step) {
  TEMPER_RETURN_IF_ERROR(Bind());
  if (graphs_.count(key)) return Status::AlreadyExists("graph " + std::to_string(key) + " is already captured");
  TEMPER_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const Status recorded = step();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (!recorded.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return recorded.WithContext("capturing graph " + std::to_string(key));
  }
  TEMPER_CUDA_TRY(ended);
  if (programmatic_edges_) {
    Result<EdgeCount> edges = MakeEdgesProgrammatic(graph, awaiting_);
    if (!edges.ok()) {
      cudaGraphDestroy(graph);
      return edges.status().WithContext("capturing graph " + std::to_string(key));
    }
    captured_edges_.programmatic += edges->programmatic;
    captured_edges_.edges += edges->edges;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess && programmatic_edges_) {
    return CudaStatus(made, "cudaGraphInstantiate", __FILE__, __LINE__)
        .WithContext("graph " + std::to_string(key) +
                     " with programmatic edges (CudaBackendOptions::programmatic_edges off, temper-bench "
                     "--gpu-ordinary-edges, captures without them)");
  }
  TEMPER_CUDA_TRY(made);
  // Uploaded now, so the first replay does no set-up work of its own while peers' replays spin.
  const cudaError_t uploaded = cudaGraphUpload(exec, stream_);
  if (uploaded != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    TEMPER_CUDA_TRY(uploaded);
  }
  graphs_.emplace(key, exec);
  return Status::OK();
}

Status CudaOps::Replay(int key) {
  TEMPER_RETURN_IF_ERROR(Bind());
  auto it = graphs_.find(key);
  if (it == graphs_.end()) return Status::NotFound("graph " + std::to_string(key) + " was never captured");
  TEMPER_CUDA_TRY(cudaGraphLaunch(it->second, stream_));
  return Status::OK();
}

}  // namespace temper::engine::cuda
