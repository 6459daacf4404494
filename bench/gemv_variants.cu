#include "bench/gemv_variants.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <type_traits>
#include <vector>

#include "bench/gpu_timing.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemv_kernel.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/model/tensor_parallel.h"

namespace temper::bench {
namespace {

using engine::cuda::GemvParts;
namespace gemv = engine::cuda::gemv;

constexpr size_t kRotateBytes = size_t{256} << 20;  // weight copies that L2 cannot hold
constexpr int kChecked = 128;                       // outputs checked at each end of a product

// f(integral_constant R, integral_constant M) for R in 1-8 and M in {1, 2, 4, 8}.
template <typename F>
void ForVariant(int rows, int per_warp, F&& f) {
  gemv::ForRows(rows, [&](auto r) {
    switch (per_warp) {
      case 1:
        return f(r, std::integral_constant<int, 1>{});
      case 2:
        return f(r, std::integral_constant<int, 2>{});
      case 4:
        return f(r, std::integral_constant<int, 4>{});
      default:
        return f(r, std::integral_constant<int, 8>{});
    }
  });
}

// The weight rows a warp takes (M) in the SIMT kernels under test.
constexpr int kRowsPerWarp[] = {1, 2, 4, 8};

Status Launch(const float* x, const uint16_t* w, float* y, int rows, int in, int out, int per_warp,
              cudaStream_t stream) {
  ForVariant(rows, per_warp, [&](auto r, auto m) {
    constexpr int R = decltype(r)::value, M = decltype(m)::value;
    gemv::GemvKernel<R, M>
        <<<gemv::Blocks(out, M), gemv::kWarpsPerBlock * 32, 0, stream>>>(x, GemvParts().Add(w, y, out), in, out,
                                                                         /*vec=*/true);
  });
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

// The table's mark for M at `rows` rows: the launchers' choice.
const char* Mark(int per_warp, int rows) { return per_warp == gemv::RowsPerWarp(rows) ? " *" : ""; }

struct Shape {
  const char* name;
  int out, in;
};

}  // namespace

Status PrintGemvVariants(const engine::ModelConfig& c, double copy_gbs, cudaStream_t stream) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<engine::RankShard> tp1, engine::PlanShards(c, 1));
  TEMPER_ASSIGN_OR_RETURN(std::vector<engine::RankShard> tp4, engine::PlanShards(c, 4));
  const int H = c.hidden_size;
  const std::vector<Shape> shapes = {
      {"gate or up, tp 1", tp1[0].ffn.size(), H},
      {"gate or up, tp 4", tp4[0].ffn.size(), H},
      {"down, tp 4", H, tp4[0].ffn.size()},
  };
  std::printf(
      "\n* decode GEMV by weight rows per warp (M), rows = activation rows; bytes = the weights once; %% of the "
      "copy bandwidth; * = the launchers' M:\n\n"
      "| GEMV (out x in) | rows | M | us | GB/s | %% of copy |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  for (const Shape& s : shapes) {
    const size_t elems = size_t{1} * s.out * s.in, bytes = 2 * elems;
    const int copies = static_cast<int>(std::max<size_t>(1, kRotateBytes / bytes));
    uint16_t* w = nullptr;
    float *x = nullptr, *y = nullptr;
    TEMPER_CUDA_TRY(cudaMalloc(&w, bytes * copies));
    TEMPER_CUDA_TRY(cudaMalloc(&x, sizeof(float) * 8 * s.in));
    TEMPER_CUDA_TRY(cudaMalloc(&y, sizeof(float) * 8 * s.out));
    auto run = [&]() -> Status {
      TEMPER_RETURN_IF_ERROR(
          engine::cuda::LaunchFillSynthetic(w, static_cast<int64_t>(elems) * copies, 7, 0.0f, 0.05f, stream));
      std::mt19937 rng(11);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> hx(size_t{8} * s.in);
      for (float& v : hx) v = normal(rng);
      TEMPER_CUDA_TRY(cudaMemcpy(x, hx.data(), sizeof(float) * hx.size(), cudaMemcpyHostToDevice));
      std::vector<uint16_t> hw(elems);  // the first copy, for the CPU's products
      TEMPER_CUDA_TRY(cudaStreamSynchronize(stream));
      TEMPER_CUDA_TRY(cudaMemcpy(hw.data(), w, bytes, cudaMemcpyDeviceToHost));
      for (int rows : {1, 2, 4, 8}) {
        for (const int per_warp : kRowsPerWarp) {
          // Checked first: the outputs at both ends against fp64 sums on the CPU.
          TEMPER_RETURN_IF_ERROR(Launch(x, w, y, rows, s.in, s.out, per_warp, stream));
          std::vector<float> hy(size_t{8} * s.out);
          TEMPER_CUDA_TRY(cudaStreamSynchronize(stream));
          TEMPER_CUDA_TRY(cudaMemcpy(hy.data(), y, sizeof(float) * rows * s.out, cudaMemcpyDeviceToHost));
          bool right = true;
          for (int r = 0; r < rows && right; ++r) {
            for (int o = 0; o < s.out && right; o = o + 1 == kChecked ? std::max(o + 1, s.out - kChecked) : o + 1) {
              double want = 0;
              for (int i = 0; i < s.in; ++i) {
                want += double(hx[size_t(r) * s.in + i]) * engine::cuda::math::Bf16ToFloat(hw[size_t(o) * s.in + i]);
              }
              right = std::abs(hy[size_t(r) * s.out + o] - want) <= 1e-3 + 1e-3 * std::abs(want);
            }
          }
          const char* mark = Mark(per_warp, rows);
          if (!right) {
            std::printf("| %s %dx%d | %d | %d%s | WRONG: differs from the CPU | | |\n", s.name, s.out, s.in, rows,
                        per_warp, mark);
            continue;
          }
          TEMPER_ASSIGN_OR_RETURN(double us, MicrosPerLaunchInGraph(stream, std::max(copies, 20), [&](int i) {
                                    return Launch(x, w + size_t(i % copies) * elems, y, rows, s.in, s.out, per_warp,
                                                  stream);
                                  }));
          const double gbs = bytes / (us * 1e-6) / 1e9;
          std::printf("| %s %dx%d | %d | %d%s | %.1f | %.0f | %.0f%% |\n", s.name, s.out, s.in, rows, per_warp, mark,
                      us, gbs, 100 * gbs / copy_gbs);
        }
      }
      return Status::OK();
    };
    const Status status = run();
    cudaStreamSynchronize(stream);
    cudaFree(w);
    cudaFree(x);
    cudaFree(y);
    TEMPER_RETURN_IF_ERROR(status);
  }
  return Status::OK();
}

}  // namespace temper::bench
