#include "bench/gpu_timing.h"

namespace temper::bench {

Result<double> DeviceCopyBandwidth(int device, size_t bytes, int reps) {
  TEMPER_CUDA_TRY(cudaSetDevice(device));
  void *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<double> gbs;
  auto run = [&]() -> Status {
    TEMPER_CUDA_TRY(cudaMalloc(&src, bytes));
    TEMPER_CUDA_TRY(cudaMalloc(&dst, bytes));
    // Not zeros (METHOD.md: zeros can run faster than real data).
    TEMPER_CUDA_TRY(cudaMemset(src, 0x5a, bytes));
    TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TEMPER_CUDA_TRY(cudaEventCreate(&start));
    TEMPER_CUDA_TRY(cudaEventCreate(&stop));
    for (int r = 0; r <= reps; ++r) {
      TEMPER_CUDA_TRY(cudaEventRecord(start, stream));
      TEMPER_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      TEMPER_CUDA_TRY(cudaEventRecord(stop, stream));
      TEMPER_CUDA_TRY(cudaEventSynchronize(stop));
      float ms = 0;
      TEMPER_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
      if (r > 0) gbs.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);  // r = 0 warms up
    }
    return Status::OK();
  };
  const Status s = run();
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (stream) cudaStreamDestroy(stream);
  cudaFree(src);
  cudaFree(dst);
  if (!s.ok()) return s.WithContext("copy bandwidth on GPU " + std::to_string(device));
  return Median(std::move(gbs));
}

}  // namespace temper::bench
