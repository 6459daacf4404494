// temper-bench --gpus: the CUDA backend's speed and memory (bench/RESULTS.md records the runs).
//
// Measures, in one run: the device copy bandwidth (cudaMemcpy device to device, counting bytes read
// plus bytes written, as STREAM and METHOD.md do); load time; prefill tok/s at each
// --prefill-tokens length; decode tok/s at batch 1 and 8 for each --decode-tokens count after a
// --context-tokens prompt (time per output token from the decode steps alone, and end to end with
// the prefill); the bytes a decode step reads and the achieved GB/s against the copy bandwidth;
// the all-reduce microbenchmark; per-GPU memory and KV capacity. Weights are seeded synthetic
// values filled on the device (the 31B shape's 57 GiB would take minutes to build on the host).
//
// It ends with a projection for the reference box, 4×L4 at tp 4: per-rank bytes over the L4's
// 300 GB/s at the decode efficiency measured here (achieved read rate over copy bandwidth), plus
// 120 all-reduces per token at the one-shot latency over PCIe, plus the per-step overhead measured
// here. It is arithmetic on measured numbers, printed as such, not a measurement of an L4.
#include "bench/temper_bench_gpu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "bench/all_reduce_bench.h"
#include "bench/bench_timing.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/memory_plan.h"
#include "engine/model_config.h"
#include "engine/tensor_parallel.h"

namespace temper::engine::bench {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Median of `reps` device-to-device copies of `bytes`, timed with events, in GB/s of read + write.
Result<double> CopyBandwidth(int device, size_t bytes, int reps) {
  TEMPER_CUDA_TRY(cudaSetDevice(device));
  void *src = nullptr, *dst = nullptr;
  TEMPER_CUDA_TRY(cudaMalloc(&src, bytes));
  TEMPER_CUDA_TRY(cudaMalloc(&dst, bytes));
  TEMPER_CUDA_TRY(cudaMemset(src, 0x5a, bytes));
  cudaEvent_t start, stop;
  TEMPER_CUDA_TRY(cudaEventCreate(&start));
  TEMPER_CUDA_TRY(cudaEventCreate(&stop));
  std::vector<double> gbs;
  for (int r = 0; r < reps + 1; ++r) {
    TEMPER_CUDA_TRY(cudaEventRecord(start));
    TEMPER_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    TEMPER_CUDA_TRY(cudaEventRecord(stop));
    TEMPER_CUDA_TRY(cudaEventSynchronize(stop));
    float ms = 0;
    TEMPER_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) gbs.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);  // first one warms up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(src);
  cudaFree(dst);
  return Median(std::move(gbs));
}

std::vector<int32_t> Prompt(uint64_t seed, int n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int32_t& t : ids) {
    t = static_cast<int32_t>(((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

int32_t Argmax(const float* row, int n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// Bytes one decode step of one sequence reads on one rank at context `ctx`: the rank's weights
// (the tied embedding counted once, as the LM head) and the bf16 KV its attention visits.
double RankDecodeBytes(const ModelConfig& c, const RankShard& shard, int64_t ctx) {
  double bytes = static_cast<double>(cuda::RankWeightBytes(c, shard));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const double width = 2.0 * shard.layers[l].kv_heads.size() * g.head_dim;
    const double visible = g.kind == LayerKind::kSliding ? std::min<int64_t>(ctx, c.sliding_window) : ctx;
    bytes += visible * width * (g.k_eq_v ? 1 : 2);
  }
  return bytes;
}

struct DecodeRun {
  double step_s = 0;      // median seconds per decode step
  double tpot_tok_s = 0;  // output tokens per second from the steps alone (all sequences)
  double e2e_tok_s = 0;   // output tokens per second including the prefill
};

// `batch` sequences, each a `context`-token prompt then `tokens` greedy steps.
Result<DecodeRun> Decode(cuda::DeviceBackend& b, int batch, int context, int tokens) {
  const ModelConfig& c = b.config();
  std::vector<SequenceId> seqs;
  std::vector<int32_t> next(static_cast<size_t>(batch));
  const auto t0 = Clock::now();
  for (int s = 0; s < batch; ++s) {
    TEMPER_ASSIGN_OR_RETURN(SequenceId seq, b.AddSequence());
    seqs.push_back(seq);
    const std::vector<int32_t> prompt = Prompt(100 + s, context, c.vocab_size);
    ForwardItem item{seq, prompt, false};
    TEMPER_ASSIGN_OR_RETURN(ForwardResult r, b.Forward({&item, 1}, {}));
    next[s] = Argmax(r.logits.data(), c.vocab_size);
  }
  std::vector<double> steps;
  for (int k = 0; k < tokens; ++k) {
    std::vector<ForwardItem> items;
    for (int s = 0; s < batch; ++s) items.push_back({seqs[s], {&next[s], 1}, false});
    const auto s0 = Clock::now();
    TEMPER_ASSIGN_OR_RETURN(ForwardResult r, b.Forward(items, {}));
    steps.push_back(Seconds(s0, Clock::now()));
    for (int s = 0; s < batch; ++s) next[s] = Argmax(r.logits.data() + int64_t{s} * c.vocab_size, c.vocab_size);
  }
  const double total = Seconds(t0, Clock::now());
  for (SequenceId seq : seqs) TEMPER_RETURN_IF_ERROR(b.ReleaseSequence(seq));
  DecodeRun run;
  double sum = 0;
  for (double s : steps) sum += s;
  run.step_s = Median(steps);
  run.tpot_tok_s = batch * tokens / sum;
  run.e2e_tok_s = batch * tokens / total;
  return run;
}

}  // namespace

Status RunGpuBench(const GpuBenchArgs& a) {
  TEMPER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(a.config));
  const int tp = static_cast<int>(a.devices.size());
  std::printf("model %s: %.3f B parameters, %d layers, hidden %d, vocab %d; tp %d on GPUs [%s]\n", a.config.c_str(),
              config.ParameterCount() / 1e9, config.num_layers, config.hidden_size, config.vocab_size, tp,
              fmt::format("{}", fmt::join(a.devices, ", ")).c_str());

  TEMPER_ASSIGN_OR_RETURN(double copy_gbs, CopyBandwidth(a.devices[0], size_t{2} << 30, 10));
  std::printf("device copy bandwidth (GPU %d, 2 GiB, median of 10, read + write): %.0f GB/s\n", a.devices[0], copy_gbs);

  const int longest = std::max(*std::max_element(a.prefill_tokens.begin(), a.prefill_tokens.end()),
                               a.context_tokens + *std::max_element(a.decode_tokens.begin(), a.decode_tokens.end()));
  cuda::CudaBackendOptions options;
  options.devices = a.devices;
  options.kv_memory_fraction = a.kv_fraction;
  options.backend.max_context = std::min<int64_t>(config.max_position_embeddings, longest + 16);
  options.backend.kv.max_sequences = std::max(8, a.max_batch);
  options.backend.max_batch = a.max_batch;
  options.backend.max_rows = a.max_rows;
  options.backend.top_candidates = 0;  // full logits: the bench samples on the host like a test would
  cuda::CudaBackendInfo info;
  const auto l0 = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceBackend> backend,
                          cuda::CreateCudaBackend(config, nullptr, options, &info));
  const double load_s = Seconds(l0, Clock::now());
  std::printf("load: %.2f s (synthetic weights filled on the device, KV pool and buffers allocated)\n", load_s);
  for (const auto& g : info.gpus) {
    std::printf("GPU %d (%s), %d rank(s): free before %.2f GiB; weights %.2f GiB, KV %.2f GiB, workspace %.2f GiB\n",
                g.device, g.name.c_str(), g.ranks, g.free_before / kGiB, g.weight_bytes / kGiB, g.kv_bytes / kGiB,
                g.workspace_bytes / kGiB);
  }
  std::printf("KV capacity: %lld tokens in the paged pool (+ %d sliding-window rings); all-reduce: %s\n",
              static_cast<long long>(info.kv_capacity_tokens), options.backend.kv.max_sequences, info.all_reduce.c_str());

  // ---- prefill ----
  for (int n : a.prefill_tokens) {
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {  // the first run also captures nothing but warms cuBLASLt
      TEMPER_ASSIGN_OR_RETURN(SequenceId seq, backend->AddSequence());
      const std::vector<int32_t> prompt = Prompt(7, n, config.vocab_size);
      ForwardItem item{seq, prompt, false};
      const auto p0 = Clock::now();
      TEMPER_ASSIGN_OR_RETURN(ForwardResult r, backend->Forward({&item, 1}, {}));
      best = std::min(best, Seconds(p0, Clock::now()));
      TEMPER_RETURN_IF_ERROR(backend->ReleaseSequence(seq));
    }
    std::printf("prefill %5d tokens: %.3f s = %.0f tok/s (time to first token)\n", n, best, n / best);
  }

  // ---- decode ----
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, tp));
  const double rank_bytes = RankDecodeBytes(config, shards[0], a.context_tokens);
  double tp1_efficiency = 0, tp1_overhead_s = 0;
  (void)Decode(*backend, 1, 16, 4);  // captures the bucket graphs outside the timings
  std::printf("decode after a %d-token prompt (greedy; per-step median; tok/s summed over the batch):\n",
              a.context_tokens);
  for (int batch : {1, a.max_batch}) {
    for (int tokens : a.decode_tokens) {
      TEMPER_ASSIGN_OR_RETURN(DecodeRun run, Decode(*backend, batch, a.context_tokens, tokens));
      // Ranks sharing one GPU read their bytes one after another; weights are read once per step
      // whatever the batch.
      const double gpu_bytes = rank_bytes * tp / static_cast<double>(info.gpus.size());
      const double gbs = gpu_bytes / run.step_s / 1e9;
      std::printf("  batch %d, %3d tokens: %.2f ms/step, %.1f tok/s (steps), %.1f tok/s (end to end); "
                  "%.2f GB/step per GPU -> %.0f GB/s = %.0f%% of copy bandwidth\n",
                  batch, tokens, run.step_s * 1e3, run.tpot_tok_s, run.e2e_tok_s, gpu_bytes / 1e9, gbs,
                  100.0 * gbs / copy_gbs);
      if (batch == 1 && tp == 1) {
        tp1_efficiency = gbs / copy_gbs;
        tp1_overhead_s = std::max(0.0, run.step_s - gpu_bytes / (copy_gbs * 1e9));
      }
    }
  }

  // ---- all-reduce ----
  if (tp > 1 || a.all_reduce_ranks > 1) {
    std::vector<int> ranks = a.devices;
    while (static_cast<int>(ranks.size()) < a.all_reduce_ranks) ranks.push_back(a.devices[0]);
    const std::vector<uint64_t> sizes = {10752, 86016};
    TEMPER_ASSIGN_OR_RETURN(std::vector<AllReduceTiming> timings, BenchAllReduce(ranks, sizes, 200));
    std::printf("all-reduce, %zu ranks on GPUs [%s] (median per call inside a graph):\n", ranks.size(),
                fmt::format("{}", fmt::join(ranks, ", ")).c_str());
    for (const AllReduceTiming& t : timings) {
      if (t.available) {
        std::printf("  %-14s %6llu B: %7.2f us\n", std::string(cuda::AllReduceAlgoName(t.algo)).c_str(),
                    static_cast<unsigned long long>(t.bytes), t.median_us);
      } else {
        std::printf("  %-14s %6llu B: n/a (%s)\n", std::string(cuda::AllReduceAlgoName(t.algo)).c_str(),
                    static_cast<unsigned long long>(t.bytes), t.note.c_str());
      }
    }
  }

  // ---- KV capacity at the reference box's shapes, and the 4×L4 projection ----
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> tp4, PlanShards(config, 4));
  cuda::MemoryPlanInput l4;
  l4.free_bytes = 23034ull << 20;  // an L4 as GKE reports it
  l4.kv_fraction = a.kv_fraction;
  l4.max_batch = 8;
  l4.max_sequences = 8;
  l4.max_prefill_tokens = a.max_rows;
  Result<cuda::GpuMemoryPlan> l4_plan = cuda::PlanGpuMemory(config, tp4[0], l4);
  if (l4_plan.ok()) {
    const double paged = kGiB / static_cast<double>(l4_plan->rank.kv_per_token);
    const double with_rings = static_cast<double>(l4_plan->kv_capacity_tokens) /
                              ((l4_plan->kv_pool_bytes + l4_plan->ring_bytes) / kGiB);
    std::printf("KV at tp 4 on an L4 (%.1f GiB free): %lld tokens; %.0f tokens/GiB of paged pool, %.0f tokens/GiB "
                "counting 8 sliding rings (vLLM's reference: 4,361 tokens/GiB -> %.1fx / %.1fx)\n",
                l4.free_bytes / kGiB, static_cast<long long>(l4_plan->kv_capacity_tokens), paged, with_rings,
                paged / 4361.0, with_rings / 4361.0);
  } else {
    std::printf("KV at tp 4 on an L4: %s\n", l4_plan.status().ToString().c_str());
  }
  if (tp1_efficiency > 0) {
    const double l4_bw = 300e9;
    const double bytes4 = RankDecodeBytes(config, tp4[0], a.context_tokens);
    const double weights_s = bytes4 / (l4_bw * tp1_efficiency);
    const int reduces = 2 * config.num_layers;
    for (double us : {7.0, 20.0}) {
      const double step = weights_s + reduces * us * 1e-6 + tp1_overhead_s;
      std::printf("projection 4xL4 tp 4, batch 1: %.2f GB/rank at %.0f%% of 300 GB/s = %.1f ms + %d all-reduces x %.0f us "
                  "+ %.1f ms step overhead (measured here) = %.1f ms -> %.1f tok/s\n",
                  bytes4 / 1e9, 100 * tp1_efficiency, weights_s * 1e3, reduces, us, tp1_overhead_s * 1e3, step * 1e3,
                  1.0 / step);
    }
    std::printf("  (7 us: a one-shot push over PCIe, engines.md 1.4; 20 us: NCCL over PCIe. Goal >= 17.5 tok/s; "
                "vLLM measured 14.9; roofline 19.5)\n");
  }
  return Status::OK();
}

}  // namespace temper::engine::bench
