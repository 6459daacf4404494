// temper-kernel-bench: the CUDA backend's kernels alone, at the shapes of a config (by default the
// Gemma 4 31B shape), against the device's copy bandwidth measured in the same run, and the 4×L4
// decode estimate built from them. Where temper-bench --gpus gives a whole step, this says which
// stage falls short and by how much (bytes each stage must move, over its time), the way calm
// accounts for every stage.
//
//   temper-kernel-bench [--config tests/data/gemma4-31b-shape/config.json] [--device 0] [--tp 1,4]
//                       [--l4-context 2048] [--l4-read-gbs 228,270] [--l4-all-reduce-us LOW,HIGH]
//
// Prints, in order: the copy bandwidth; each decode GEMV at each --tp's rank-0 shard (1 and 8 rows);
// the GEMV at 1-8 rows with every number of weight rows per warp (gemv_variants.h); the
// prefill GEMMs (cuBLASLt, tp 1) with their GB/s or TFLOP/s; then every kernel of one batch-1 decode step of a tp 4
// rank (decode_step_kernels.h) and the 4×L4 estimate from them (l4_decode_estimate.h: the formula, the sources of the
// assumed L4 read bandwidth and all-reduce latency, and the range in tok/s beside vLLM's 14.9); last, the attention of
// a tp 1 rank's step at 1,024 and 8,192 tokens (issue 25's 8 K goal), each attention followed by its merge kernel's
// time alone, the tp 1 totals per step, and at 8 rows with each row's own splits and with the old rule's; and the
// attention of a tp 1 prefill chunk of 2,048 tokens over its own keys, per layer kind and per pass.
// --l4-all-reduce-us replaces the assumed per-call latency range (default: one-shot push to NCCL over one PLX switch,
// interpolated at the message size). Lines starting with "* " or "|" are the results (bench/gpu_bundle.sh collects
// them).
//
// Weights rotate over enough copies (256 MiB) that L2 cannot serve a repeat; inputs are random,
// never zeros; every figure is per launch inside a CUDA graph of many launches (gpu_timing.h), the
// median of 7 replays after a warm-up. Built only with nvcc; results go in bench/RESULTS.md.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/decode_bytes.h"
#include "bench/decode_step_kernels.h"
#include "bench/gemv_variants.h"
#include "bench/gpu_timing.h"
#include "bench/l4_decode_estimate.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemm_bf16.h"
#include "engine/cuda/kernels.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::cuda {
namespace {

using ::temper::bench::MicrosPerLaunchInGraph;

constexpr uint64_t kL2Defeat = 256ull << 20;  // bytes of weight copies to rotate over

struct Options {
  std::string config;
  int device = 0;
  std::vector<int> tps = {1, 4};
  int l4_context = 2048;
  std::vector<double> l4_read_gbs = {::temper::bench::kL4ReadShareLow * ::temper::bench::kL4SpecGBs,
                                     ::temper::bench::kL4ReadShareHigh* ::temper::bench::kL4SpecGBs};
  std::vector<double> l4_all_reduce_us;  // empty: the PLX table's range
};

// Device buffers of one table row, filled on `stream` (the one the row is timed on), freed when
// it goes.
class Buffers {
 public:
  explicit Buffers(cudaStream_t stream) : stream_(stream) {}
  ~Buffers() {
    cudaStreamSynchronize(stream_);
    for (void* p : owned_) cudaFree(p);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  Result<void*> Alloc(size_t bytes) {
    void* p = nullptr;
    TEMPER_CUDA_TRY(cudaMalloc(&p, bytes));
    owned_.push_back(p);
    return p;
  }
  // Seeded uniform bf16 in ±0.05, filled on the device (the tp 1 LM head is 2.8 GB).
  Result<uint16_t*> Bf16(size_t elems, uint64_t seed) {
    TEMPER_ASSIGN_OR_RETURN(void* p, Alloc(elems * 2));
    TEMPER_RETURN_IF_ERROR(
        LaunchFillSynthetic(static_cast<uint16_t*>(p), static_cast<int64_t>(elems), seed, 0.0f, 0.05f, stream_));
    return static_cast<uint16_t*>(p);
  }
  Result<float*> Floats(size_t elems, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> h(elems);
    for (float& v : h) v = d(rng);
    TEMPER_ASSIGN_OR_RETURN(void* p, Alloc(elems * 4));
    TEMPER_CUDA_TRY(cudaMemcpyAsync(p, h.data(), elems * 4, cudaMemcpyHostToDevice, stream_));
    TEMPER_CUDA_TRY(cudaStreamSynchronize(stream_));  // before `h` goes
    return static_cast<float*>(p);
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> owned_;
};

struct Shape {
  const char* name;
  int out, in;
};

Status GemvTable(const ModelConfig& c, const std::vector<int>& tps, double copy_gbs, cudaStream_t stream) {
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
      Buffers b(stream);
      const size_t w_elems = size_t{1} * shape.out * shape.in, w_bytes = 2 * w_elems;
      const int copies = static_cast<int>(std::max<uint64_t>(1, kL2Defeat / w_bytes));
      TEMPER_ASSIGN_OR_RETURN(uint16_t * w, b.Bf16(w_elems * copies, 1));
      TEMPER_ASSIGN_OR_RETURN(float* x, b.Floats(size_t{8} * shape.in, 99));
      TEMPER_ASSIGN_OR_RETURN(void* y, b.Alloc(size_t{8} * shape.out * 4));
      for (int rows : {1, 8}) {
        TEMPER_ASSIGN_OR_RETURN(double us, MicrosPerLaunchInGraph(stream, std::max(copies, 20), [&](int i) {
                                  return LaunchGemvBf16(
                                      x, GemvParts().Add(w + (i % copies) * w_elems, static_cast<float*>(y), shape.out),
                                      rows, shape.in, stream);
                                }));
        const double gbs = w_bytes / (us * 1e-6) / 1e9;
        std::printf("%-12s %6d x %6d %4d %5d %9.1f %9.0f %7.0f%%\n", shape.name, shape.out, shape.in, tp, rows, us, gbs,
                    100 * gbs / copy_gbs);
      }
    }
  }
  return Status::OK();
}

// Prefill GEMMs through cuBLASLt at tp 1.
Status GemmTable(const ModelConfig& c, cudaStream_t stream) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<GemmBf16> gemm, GemmBf16::Create());
  std::printf("\n%-26s %6s %9s %9s\n", "GEMM (rows x out x in)", "", "ms", "TFLOP/s");
  for (int rows : {512, 2048}) {
    for (const Shape& shape :
         {Shape{"gate/up", c.intermediate_size, c.hidden_size}, Shape{"down", c.hidden_size, c.intermediate_size}}) {
      Buffers b(stream);
      TEMPER_ASSIGN_OR_RETURN(uint16_t * w, b.Bf16(size_t{1} * shape.out * shape.in, 5));
      TEMPER_ASSIGN_OR_RETURN(uint16_t * x, b.Bf16(size_t{1} * rows * shape.in, 6));
      TEMPER_ASSIGN_OR_RETURN(void* y, b.Alloc(size_t{4} * rows * shape.out));
      // One eager run first: cuBLASLt picks and caches its algorithm outside the capture.
      TEMPER_RETURN_IF_ERROR(
          gemm->Run(x, shape.in, w, shape.in, static_cast<float*>(y), shape.out, rows, shape.in, shape.out, stream));
      TEMPER_ASSIGN_OR_RETURN(double us, MicrosPerLaunchInGraph(stream, 5, [&](int) {
                                return gemm->Run(x, shape.in, w, shape.in, static_cast<float*>(y), shape.out, rows,
                                                 shape.in, shape.out, stream);
                              }));
      std::printf("%-8s %5d x %6d x %6d %9.3f %9.0f\n", shape.name, rows, shape.out, shape.in, us * 1e-3,
                  2.0 * rows * shape.out * shape.in / (us * 1e-6) / 1e12);
    }
  }
  return Status::OK();
}

// `sm_ghz`: this GPU's SMs x boost clock in GHz (the slow end's factor for kernels far from the roofline).
Status L4Estimate(const ModelConfig& c, const Options& o, const std::string& gpu, double copy_gbs, double sm_ghz) {
  constexpr int kTp = 4;  // the reference box
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(c, kTp));
  ::temper::bench::DecodeStepShape shape;
  shape.context = o.l4_context;
  TEMPER_ASSIGN_OR_RETURN(std::vector<::temper::bench::StepKernel> kernels,
                          ::temper::bench::TimeDecodeStepKernels(c, shards[0], o.device, shape));
  // Every weight once and the KV: a kernel left out or counted twice shows here.
  double counted = 0;
  for (const auto& k : kernels) {
    if (k.cost == ::temper::bench::StepCost::kBandwidth) counted += k.per_step * k.bytes;
  }
  const double expected = ::temper::bench::RankDecodeReadBytes(c, shards[0], o.l4_context, 1);
  if (std::abs(counted - expected) > 0.005 * expected) {
    return Status::Internal("4xL4 estimate: the step's bandwidth-bound kernels read " + std::to_string(counted / 1e6) +
                            " MB, but the rank's weights and KV are " + std::to_string(expected / 1e6) +
                            " MB: a kernel is missing or counted twice (decode_step_kernels.cpp)");
  }
  ::temper::bench::L4Assumptions a;
  a.read_gbs_low = o.l4_read_gbs[0];
  a.read_gbs_high = o.l4_read_gbs[1];
  a.sm_ratio = sm_ghz / (::temper::bench::kL4SmCount * ::temper::bench::kL4BoostGHz);
  a.all_reduces = 1 + 2 * c.num_layers;  // the embedding's, then o_proj's and down_proj's (rank_forward.cpp)
  a.all_reduce_bytes = sizeof(float) * static_cast<uint64_t>(c.hidden_size);  // one fp32 residual row
  char source[256];
  if (o.l4_all_reduce_us.empty()) {
    const auto plx = ::temper::bench::PlxAllReduceLatency(a.all_reduce_bytes);
    a.all_reduce_us_low = plx.one_shot_us;
    a.all_reduce_us_high = plx.nccl_us;
    std::snprintf(
        source, sizeof source,
        "assumed: one-shot push to NCCL, 4 ranks over one PLX switch, engines.md 1.4, interpolated at %llu B; "
        "GPUs on separate root ports are slower",
        static_cast<unsigned long long>(a.all_reduce_bytes));
  } else {
    a.all_reduce_us_low = o.l4_all_reduce_us[0];
    a.all_reduce_us_high = o.l4_all_reduce_us[1];
    std::snprintf(source, sizeof source, "given with --l4-all-reduce-us");
  }
  a.all_reduce_source = source;
  char what[512];
  std::snprintf(what, sizeof what,
                "batch-1 decode of %s at tp 4, context %d tokens: one rank's kernels timed on %s (copy bandwidth %.0f "
                "GB/s), %d all-reduces per token",
                std::filesystem::path(o.config).parent_path().filename().c_str(), o.l4_context, gpu.c_str(), copy_gbs,
                a.all_reduces);
  ::temper::bench::PrintL4Estimate(kernels, copy_gbs, a, what);
  return Status::OK();
}

// Issue 25's attention goal, at most 10% of a tp 1 step at 8 K tokens: the attention kernels of a
// tp 1 rank's decode step at 1,024 and 8,192 tokens of context, summed per step (temper-bench
// --gpus times the whole step at those contexts); then a prefill chunk's, summed per pass
// (temper-bench --gpus times whole prefills).
Status Tp1Attention(const ModelConfig& c, int device) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(c, 1));
  for (int context : {1024, 8192}) {
    ::temper::bench::DecodeStepShape shape;
    shape.context = context;
    TEMPER_ASSIGN_OR_RETURN(std::vector<::temper::bench::StepKernel> kernels,
                            ::temper::bench::TimeDecodeAttention(c, shards[0], device, shape));
    double us = 0;
    for (const auto& k : kernels) {
      std::printf("* tp 1, %d tokens: %s, %.1f us, %d a step\n", context, k.name.c_str(), k.us, k.per_step);
      us += k.per_step * k.us;
    }
    std::printf("* decode attention per step, tp 1 rank, %d tokens of context: %.2f ms\n", context, us / 1000);
    // Batch 8 (issue 25's third goal), with a row's own splits and with the old rule's fewer.
    constexpr int kRows = 8;
    TEMPER_ASSIGN_OR_RETURN(std::vector<::temper::bench::BatchAttention> batch,
                            ::temper::bench::TimeDecodeAttentionBatch(c, shards[0], device, shape, kRows));
    double own = 0, for_rows = 0;
    for (const auto& b : batch) {
      std::printf(
          "* tp 1, %d tokens, %d rows: %s, %d a step: %.1f us with a row's own %d splits, %.1f us with the %d that "
          "filled the GPU for %d rows\n",
          context, kRows, b.name.c_str(), b.per_step, b.own_us, b.own_splits, b.for_rows_us, b.for_rows_splits, kRows);
      own += b.per_step * b.own_us;
      for_rows += b.per_step * b.for_rows_us;
    }
    std::printf(
        "* decode attention per step, tp 1 rank, %d rows, %d tokens of context each: %.2f ms with each row's own "
        "splits (the engine's); %.2f ms with the splits for %d rows (the rule before 2026-11-27)\n",
        kRows, context, own / 1000, for_rows / 1000, kRows);
  }
  // A prefill chunk as the engine runs one (DeviceBackendOptions::max_rows, 2,048), over its own keys.
  constexpr int kPrefillRows = 2048;
  TEMPER_ASSIGN_OR_RETURN(std::vector<::temper::bench::PrefillAttention> prefill,
                          ::temper::bench::TimePrefillAttention(c, shards[0], device, kPrefillRows));
  double prefill_us = 0;
  for (const auto& p : prefill) {
    std::printf("* tp 1, prefill of %d tokens: %s, %.1f us, %d a pass\n", p.rows, p.name.c_str(), p.us, p.per_pass);
    prefill_us += p.per_pass * p.us;
  }
  std::printf("* prefill attention per pass, tp 1 rank, %d tokens over their own keys: %.2f ms\n", kPrefillRows,
              prefill_us / 1000);
  return Status::OK();
}

Status Run(const Options& o) {
  TEMPER_CUDA_TRY(cudaSetDevice(o.device));
  cudaDeviceProp props{};
  TEMPER_CUDA_TRY(cudaGetDeviceProperties(&props, o.device));
  TEMPER_ASSIGN_OR_RETURN(ModelConfig c, LoadModelConfig(o.config));
  int clock_khz = 0;
  TEMPER_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, o.device));
  std::printf("%s, %d SMs at %.2f GHz, %.0f MB L2; %s\n", props.name, props.multiProcessorCount, clock_khz / 1e6,
              props.l2CacheSize / 1e6, o.config.c_str());
  TEMPER_ASSIGN_OR_RETURN(double copy_gbs, ::temper::bench::DeviceCopyBandwidth(o.device));
  std::printf("* copy bandwidth, %s: %.0f GB/s (1 GiB device to device, read + write, median of 10)\n\n", props.name,
              copy_gbs);
  cudaStream_t stream = nullptr;
  TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Status s = GemvTable(c, o.tps, copy_gbs, stream);
  if (s.ok()) s = ::temper::bench::PrintGemvVariants(c, copy_gbs, stream);
  if (s.ok()) s = GemmTable(c, stream);
  cudaStreamDestroy(stream);
  TEMPER_RETURN_IF_ERROR(s);
  TEMPER_RETURN_IF_ERROR(L4Estimate(c, o, props.name, copy_gbs, props.multiProcessorCount * (clock_khz / 1e6)));
  return Tp1Attention(c, o.device);
}

}  // namespace
}  // namespace temper::engine::cuda

int main(int argc, char** argv) {
  // Line by line, also into a file: a crash on a GPU machine then keeps what was printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"temper-kernel-bench: the CUDA backend's kernels against copy bandwidth, and the 4xL4 decode estimate"};
  temper::engine::cuda::Options o;
  o.config = std::string(TEMPER_SOURCE_DIR) + "/tests/data/gemma4-31b-shape/config.json";
  app.add_option("--config", o.config, "config.json of the shapes");
  app.add_option("--device", o.device, "CUDA device");
  app.add_option("--tp", o.tps, "tensor-parallel degrees whose GEMV shards to time")->delimiter(',');
  app.add_option("--l4-context", o.l4_context, "tokens in the sequence for the 4xL4 estimate's attention")
      ->check(CLI::PositiveNumber);
  app.add_option("--l4-read-gbs", o.l4_read_gbs, "achievable L4 read bandwidth range, GB/s: LOW,HIGH")
      ->delimiter(',')
      ->expected(2);
  app.add_option("--l4-all-reduce-us", o.l4_all_reduce_us, "all-reduce latency range per call, us: LOW,HIGH")
      ->delimiter(',')
      ->expected(2);
  CLI11_PARSE(app, argc, argv);
  if (o.l4_read_gbs[0] <= 0 || o.l4_read_gbs[0] > o.l4_read_gbs[1] ||
      (!o.l4_all_reduce_us.empty() && (o.l4_all_reduce_us[0] < 0 || o.l4_all_reduce_us[0] > o.l4_all_reduce_us[1]))) {
    std::fprintf(stderr,
                 "temper-kernel-bench: --l4-read-gbs and --l4-all-reduce-us take LOW,HIGH with 0 < LOW <= HIGH\n");
    return 2;
  }
  const temper::Status s = temper::engine::cuda::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "temper-kernel-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
