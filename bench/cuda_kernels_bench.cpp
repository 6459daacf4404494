// temper-kernel-bench: each decode kernel of the CUDA backend alone, at the shapes of a config
// (by default the Gemma 4 31B shape), against the device's copy bandwidth measured in the same run.
// Where temper-bench --gpus gives a whole step, this says which stage falls short and by how much
// (bytes each stage must move, over its time), the way calm accounts for every stage.
//
//   temper-kernel-bench [--config tests/data/gemma4-31b-shape/config.json] [--device 0] [--tp 1,4]
//
// Weights rotate over enough copies that L2 (50 MB on an H100, 48 MB on an L4) cannot serve a
// repeat; inputs are random, never zeros; each figure is the median of 20 timed launches after a
// warm-up, timed with CUDA events. Built only with nvcc; results go in bench/RESULTS.md.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_timing.h"
#include "engine/bf16.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemm_bf16.h"
#include "engine/cuda/kernels.h"
#include "engine/model_config.h"
#include "engine/tensor_parallel.h"

namespace temper::engine::cuda {
namespace {

constexpr uint64_t kL2Defeat = 256ull << 20;  // bytes of weight copies to rotate over

Result<void*> Device(size_t bytes) {
  void* p = nullptr;
  TEMPER_CUDA_TRY(cudaMalloc(&p, bytes));
  return p;
}

// Random bf16 (or fp32) values on the device.
Result<void*> RandomDevice(size_t elems, bool bf16, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  TEMPER_ASSIGN_OR_RETURN(void* p, Device(elems * (bf16 ? 2 : 4)));
  if (bf16) {
    std::vector<uint16_t> h(elems);
    for (auto& v : h) v = FloatToBf16(d(rng));
    TEMPER_CUDA_TRY(cudaMemcpy(p, h.data(), elems * 2, cudaMemcpyHostToDevice));
  } else {
    std::vector<float> h(elems);
    for (auto& v : h) v = d(rng);
    TEMPER_CUDA_TRY(cudaMemcpy(p, h.data(), elems * 4, cudaMemcpyHostToDevice));
  }
  return p;
}

// Median milliseconds of `launch(i)` over 20 timed runs (i counts the runs, for rotation).
template <typename Launch>
Result<double> TimeMs(Launch launch) {
  cudaEvent_t a, b;
  TEMPER_CUDA_TRY(cudaEventCreate(&a));
  TEMPER_CUDA_TRY(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) TEMPER_RETURN_IF_ERROR(launch(i));
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    TEMPER_CUDA_TRY(cudaEventRecord(a));
    TEMPER_RETURN_IF_ERROR(launch(i));
    TEMPER_CUDA_TRY(cudaEventRecord(b));
    TEMPER_CUDA_TRY(cudaEventSynchronize(b));
    float t = 0;
    TEMPER_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ::temper::bench::Median(std::move(ms));
}

struct Shape {
  const char* name;
  int out, in;
};

Status Run(const std::string& config_path, int device, const std::vector<int>& tps) {
  TEMPER_CUDA_TRY(cudaSetDevice(device));
  cudaDeviceProp props{};
  TEMPER_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  TEMPER_ASSIGN_OR_RETURN(ModelConfig c, LoadModelConfig(config_path));
  std::printf("%s, %d SMs, %.0f MB L2; %s\n", props.name, props.multiProcessorCount, props.l2CacheSize / 1e6,
              config_path.c_str());

  // Copy bandwidth: 1 GiB device to device, read + written.
  const size_t copy_bytes = size_t{1} << 30;
  TEMPER_ASSIGN_OR_RETURN(void* src, Device(copy_bytes));
  TEMPER_ASSIGN_OR_RETURN(void* dst, Device(copy_bytes));
  TEMPER_CUDA_TRY(cudaMemset(src, 1, copy_bytes));
  TEMPER_ASSIGN_OR_RETURN(double copy_ms, TimeMs([&](int) -> Status {
    TEMPER_CUDA_TRY(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice));
    return Status::OK();
  }));
  cudaFree(src);
  cudaFree(dst);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("copy bandwidth (read + write): %.0f GB/s\n\n", copy_gbs);

  std::printf("%-28s %4s %5s %9s %9s %8s\n", "GEMV (out x in)", "tp", "rows", "us", "GB/s", "% copy");
  for (int tp : tps) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(c, tp));
    const RankShard& s = shards[0];
    const int H = c.hidden_size, ffn = s.ffn.size();
    const int hd_s = c.head_dim, hd_g = c.global_head_dim;
    const int sl = 0, gl = c.num_layers - 1;  // a sliding and a full layer
    const std::vector<Shape> shapes = {
        {"q sliding", s.layers[sl].q_heads.size() * hd_s, H},
        {"k/v sliding", s.layers[sl].kv_heads.size() * hd_s, H},
        {"o sliding", H, s.layers[sl].q_heads.size() * hd_s},
        {"q full", s.layers[gl].q_heads.size() * hd_g, H},
        {"o full", H, s.layers[gl].q_heads.size() * hd_g},
        {"gate/up", ffn, H},
        {"down", H, ffn},
        {"lm head", s.vocab.size(), H},
    };
    for (const Shape& shape : shapes) {
      const size_t w_bytes = size_t{2} * shape.out * shape.in;
      const int copies = static_cast<int>(std::max<uint64_t>(1, kL2Defeat / w_bytes));
      std::vector<void*> w;
      for (int i = 0; i < copies; ++i) {
        TEMPER_ASSIGN_OR_RETURN(void* p, RandomDevice(size_t{1} * shape.out * shape.in, true, 1 + i));
        w.push_back(p);
      }
      TEMPER_ASSIGN_OR_RETURN(void* x, RandomDevice(size_t{8} * shape.in, false, 99));
      TEMPER_ASSIGN_OR_RETURN(void* y, Device(size_t{8} * shape.out * 4));
      for (int rows : {1, 8}) {
        TEMPER_ASSIGN_OR_RETURN(double ms, TimeMs([&](int i) {
          return LaunchGemvBf16(static_cast<float*>(x), shape.in, static_cast<uint16_t*>(w[i % copies]), shape.in,
                                static_cast<float*>(y), shape.out, rows, shape.in, shape.out, nullptr);
        }));
        const double gbs = w_bytes / (ms * 1e-3) / 1e9;
        std::printf("%-12s %6d x %6d %4d %5d %9.1f %9.0f %7.0f%%\n", shape.name, shape.out, shape.in, tp, rows,
                    ms * 1e3, gbs, 100 * gbs / copy_gbs);
      }
      for (void* p : w) cudaFree(p);
      cudaFree(x);
      cudaFree(y);
    }
  }

  // Prefill GEMMs through cuBLASLt at tp 1.
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<GemmBf16> gemm, GemmBf16::Create());
  std::printf("\n%-26s %6s %9s %9s\n", "GEMM (rows x out x in)", "", "ms", "TFLOP/s");
  for (int rows : {512, 2048}) {
    for (const Shape& shape : {Shape{"gate/up", c.intermediate_size, c.hidden_size},
                               Shape{"down", c.hidden_size, c.intermediate_size}}) {
      TEMPER_ASSIGN_OR_RETURN(void* w, RandomDevice(size_t{1} * shape.out * shape.in, true, 5));
      TEMPER_ASSIGN_OR_RETURN(void* x, RandomDevice(size_t{1} * rows * shape.in, true, 6));
      TEMPER_ASSIGN_OR_RETURN(void* y, Device(size_t{4} * rows * shape.out));
      TEMPER_ASSIGN_OR_RETURN(double ms, TimeMs([&](int) {
        return gemm->Run(static_cast<uint16_t*>(x), shape.in, static_cast<uint16_t*>(w), shape.in,
                         static_cast<float*>(y), shape.out, rows, shape.in, shape.out, nullptr);
      }));
      std::printf("%-8s %5d x %6d x %6d %9.3f %9.0f\n", shape.name, rows, shape.out, shape.in, ms,
                  2.0 * rows * shape.out * shape.in / (ms * 1e-3) / 1e12);
      cudaFree(w);
      cudaFree(x);
      cudaFree(y);
    }
  }
  return Status::OK();
}

}  // namespace
}  // namespace temper::engine::cuda

int main(int argc, char** argv) {
  CLI::App app{"temper-kernel-bench: the CUDA backend's decode GEMVs and prefill GEMMs against copy bandwidth"};
  std::string config = std::string(TEMPER_SOURCE_DIR) + "/tests/data/gemma4-31b-shape/config.json";
  int device = 0;
  std::vector<int> tps = {1, 4};
  app.add_option("--config", config, "config.json of the shapes");
  app.add_option("--device", device, "CUDA device");
  app.add_option("--tp", tps, "tensor-parallel degrees whose shards to time")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  const temper::Status s = temper::engine::cuda::Run(config, device, tps);
  if (!s.ok()) {
    std::fprintf(stderr, "temper-kernel-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
