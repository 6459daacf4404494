// temper-bench --gpus: the CUDA backend's speed and memory on the production decode path
// (bench/RESULTS.md holds the current figures, bench/history/ every run).
//
// In one run, in this order:
//  1. the device copy bandwidth (gpu_timing.h), the yardstick of every GB/s figure;
//  2. the backend on synthetic weights of the config's shape (seeded values filled on the device:
//     the 31B shape's 57 GiB would take minutes to build on the host), with the production options
//     (top_candidates 64, decode graphs, the memory plan), and its memory per GPU: what the plan
//     gave, and cudaMemGetInfo's free memory after load and again after every graph was captured
//     and every run done (the real margin);
//  3. every graph bucket (1, 2, 4, ... max_batch) captured and replayed once (gpu_decode_path.h),
//     so no capture falls inside a timing;
//  4. the self-check: greedy tokens from candidates equal to greedy tokens from full logits at
//     batch 1 and max_batch, nothing NaN or inf; a mismatch ends the run with a non-OK Status;
//  5. prefill at each --gpu-prefill length (time to first token, after a warm-up pass that loads
//     the GEMM plans);
//  6. decode at batch 1 and max_batch after each --gpu-context prompt, sampling candidates as the
//     scheduler does, every timed step checked to have run as a graph: ms per step, tok/s, the
//     bytes a step reads and the GB/s and share of the copy bandwidth that makes;
//  6b. speculative decoding's check: one sequence's next token with k = 1 ... 8 drafts in one pass
//     (truncated back after each), ms per pass against a decode step, and whether it ran as a graph;
//  6c. with --gpu-drafter, the MTP drafter (seeded weights of that config's shape, built on the
//     host and uploaded): one Draft call of k = 1, 2, 4, 8 steps after a decode step;
//  7. the all-reduce microbenchmark at the model's real message sizes (all_reduce_bench.h), each
//     size checked before it is timed; at tp 1 on --all-reduce-ranks ranks sharing the GPU.
// Lines starting with "* " or "|" are the results (bench/gpu_bundle.sh collects them); the rest
// is the log.
#include "bench/temper_bench_gpu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "bench/all_reduce_bench.h"
#include "bench/bench_timing.h"
#include "bench/decode_bytes.h"
#include "bench/gpu_decode_path.h"
#include "bench/gpu_timing.h"
#include "engine/cuda/all_reduce.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/decode_launches.h"
#include "engine/model/drafter_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::bench {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The self-check's decode: prompts of 40 tokens (three KV blocks of 16), 8 steps.
constexpr int kCheckContext = 40;
constexpr int kCheckSteps = 8;

Result<double> FreeGiB(int device) {
  TEMPER_CUDA_TRY(cudaSetDevice(device));
  size_t free = 0, total = 0;
  TEMPER_CUDA_TRY(cudaMemGetInfo(&free, &total));
  return free / kGiB;
}

Status Prefill(cuda::DeviceBackend& b, const std::vector<int>& lengths, int max_rows) {
  const int vocab = b.config().vocab_size;
  auto once = [&](int n) -> Result<double> {
    TEMPER_ASSIGN_OR_RETURN(SequenceId seq, b.AddSequence());
    const std::vector<int32_t> prompt = SyntheticPrompt(7, n, vocab);
    const ForwardItem item{seq, prompt, false};
    const auto t0 = Clock::now();
    Result<ForwardResult> r = b.Forward({&item, 1}, ForwardOptions{.candidates = true});
    const double s = Seconds(t0, Clock::now());
    TEMPER_RETURN_IF_ERROR(b.ReleaseSequence(seq));
    if (!r.ok()) return r.status().WithContext(fmt::format("prefill of {} tokens", n));
    return s;
  };
  // cuBLASLt picks and caches an algorithm per GEMM shape on first use: not inside a timing.
  TEMPER_RETURN_IF_ERROR(once(std::min(max_rows, *std::max_element(lengths.begin(), lengths.end()))).status());
  std::printf(
      "\n* prefill, one sequence, passes of up to %d tokens, candidates of the last token (time to first "
      "token; two runs after a warm-up pass, the faster one counted):\n\n",
      max_rows);
  std::printf("| prompt tokens | passes | first run s | second run s | tok/s |\n|---:|---:|---:|---:|---:|\n");
  for (int n : lengths) {
    TEMPER_ASSIGN_OR_RETURN(double first, once(n));
    TEMPER_ASSIGN_OR_RETURN(double second, once(n));
    std::printf("| %d | %d | %.3f | %.3f | %.0f |\n", n, (n + max_rows - 1) / max_rows, first, second,
                n / std::min(first, second));
  }
  return Status::OK();
}

// Speculative decoding's check (engine/serve/scheduler.h): one sequence after a `context`-token
// prompt, passes of its next token and k drafts (every row's candidates), each truncated back, so
// every pass sees the same context. k = 0 is a plain decode step. The first pass of each k is not
// timed (it may capture the graph of a bucket).
Status VerifyPasses(cuda::DeviceBackend& b, int context) {
  const int vocab = b.config().vocab_size;
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, b.AddSequence());
  const std::vector<int32_t> tokens = SyntheticPrompt(11, context + kMaxDraftTokens + 1, vocab);
  const ForwardItem prompt{seq, std::span<const int32_t>(tokens).first(static_cast<size_t>(context)), false};
  TEMPER_RETURN_IF_ERROR(b.Forward({&prompt, 1}, ForwardOptions{.candidates = true}).status());
  std::printf(
      "\n* speculative decoding's check after a %d-token prompt: the next token and k drafts in one pass, every "
      "row's candidates, truncated back (median of 20 after one untimed pass):\n\n| k | rows | graph step | ms "
      "per pass | x a decode step |\n|---:|---:|---|---:|---:|\n",
      context);
  double step_ms = 0;
  // Up to the largest graph bucket (max_batch rows), and one pass past it.
  for (int k : {0, 1, 2, 3, 5, 7, kMaxDraftTokens}) {
    const std::span<const int32_t> fed = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(context), k + 1);
    std::vector<double> ms;
    int64_t graph_steps = 0;
    for (int rep = 0; rep < 21; ++rep) {
      const ForwardItem item{seq, fed, /*all_logits=*/k > 0};
      const int64_t graphs_before = b.graph_steps();
      const auto t0 = Clock::now();
      TEMPER_RETURN_IF_ERROR(b.Forward({&item, 1}, ForwardOptions{.candidates = true}).status());
      if (rep > 0) ms.push_back(1e3 * Seconds(t0, Clock::now()));
      graph_steps += b.graph_steps() - graphs_before;
      TEMPER_RETURN_IF_ERROR(b.Truncate(seq, context));
    }
    const double median = Median(ms);
    if (k == 0) step_ms = median;
    std::printf("| %d | %d | %s | %.2f | %.2f |\n", k, k + 1, graph_steps == 21 ? "yes" : "no", median,
                median / step_ms);
  }
  return b.ReleaseSequence(seq);
}

// The MTP drafter's cost: after a `context`-token prompt and one decode step (whose row holds the
// hidden state the drafter starts from), one Draft call of k steps, against a decode step.
Status DraftSteps(cuda::DeviceBackend& b, int context) {
  const int vocab = b.config().vocab_size;
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, b.AddSequence());
  const std::vector<int32_t> tokens = SyntheticPrompt(13, context + 2, vocab);
  const ForwardItem prompt{seq, std::span<const int32_t>(tokens).first(static_cast<size_t>(context)), false};
  TEMPER_RETURN_IF_ERROR(b.Forward({&prompt, 1}, ForwardOptions{.candidates = true}).status());
  std::vector<double> step_ms;
  for (int rep = 0; rep < 21; ++rep) {
    const ForwardItem item{seq, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(context), 1), false};
    const auto t0 = Clock::now();
    TEMPER_RETURN_IF_ERROR(b.Forward({&item, 1}, ForwardOptions{.candidates = true}).status());
    if (rep > 0) step_ms.push_back(1e3 * Seconds(t0, Clock::now()));
    if (rep < 20) TEMPER_RETURN_IF_ERROR(b.Truncate(seq, context));
  }
  const double step = Median(step_ms);
  std::printf(
      "\n* the MTP drafter after a %d-token prompt: one Draft call of k steps (eager, a host round trip per "
      "step), median of 20 after one untimed call; a decode step took %.2f ms:\n\n| k | ms per call | ms per step | "
      "x a decode step |\n|---:|---:|---:|---:|\n",
      context, step);
  for (int k : {1, 2, 4, 8}) {
    const DraftRequest request{seq, tokens[static_cast<size_t>(context) + 1], 0, k};
    std::vector<double> ms;
    for (int rep = 0; rep < 21; ++rep) {
      const auto t0 = Clock::now();
      TEMPER_RETURN_IF_ERROR(b.Draft({&request, 1}, {}).status());
      if (rep > 0) ms.push_back(1e3 * Seconds(t0, Clock::now()));
    }
    std::printf("| %d | %.2f | %.2f | %.3f |\n", k, Median(ms), Median(ms) / k, Median(ms) / step);
  }
  return b.ReleaseSequence(seq);
}

}  // namespace

Status RunGpuBench(const GpuBenchArgs& a) {
  TEMPER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(a.config));
  const int tp = static_cast<int>(a.devices.size());
  if (a.prefill_tokens.empty() || a.decode_tokens.empty() || a.max_batch < 1) {
    return Status::InvalidArgument("--gpus: give at least one prefill length and one decode count, and max_batch >= 1");
  }
  std::printf("model %s: %.3f B parameters, %d layers, hidden %d, vocab %d; tp %d on GPUs [%s]\n", a.config.c_str(),
              config.ParameterCount() / 1e9, config.num_layers, config.hidden_size, config.vocab_size, tp,
              fmt::format("{}", fmt::join(a.devices, ", ")).c_str());

  // ---- 1. the yardstick, before the backend takes the memory ----
  // Its CUDA calls come before the backend's, which asks for the hardware queues that ranks sharing
  // a GPU need (all_reduce.h) before its own first call: ask here, before any.
  cuda::RequestQueueConnections();
  TEMPER_ASSIGN_OR_RETURN(double copy_gbs, ::temper::bench::DeviceCopyBandwidth(a.devices[0]));

  // ---- 2. the backend ----
  if (a.context_tokens.empty() || a.decode_tokens.empty() || a.prefill_tokens.empty()) {
    return Status::InvalidArgument("--gpus needs at least one prefill length, decode step count and context");
  }
  const int longest = std::max(*std::max_element(a.prefill_tokens.begin(), a.prefill_tokens.end()),
                               *std::max_element(a.context_tokens.begin(), a.context_tokens.end()) +
                                   *std::max_element(a.decode_tokens.begin(), a.decode_tokens.end()) + 1);
  cuda::CudaBackendOptions options;
  options.devices = a.devices;
  options.kv_memory_fraction = a.kv_fraction;
  options.programmatic_edges = a.programmatic_edges;
  options.backend.max_context = std::min<int64_t>(config.max_position_embeddings, longest + 16);
  options.backend.kv.max_sequences = std::max(8, a.max_batch);
  options.backend.max_batch = a.max_batch;
  options.backend.max_rows = a.max_rows;
  // top_candidates, decode_splits, graphs: DeviceBackendOptions' defaults, as the daemon runs them
  // (roles/inprocess_client.cpp sets neither).
  if (!a.drafter_config.empty()) {
    TEMPER_ASSIGN_OR_RETURN(DrafterConfig drafter, LoadDrafterConfig(a.drafter_config, config));
    TEMPER_ASSIGN_OR_RETURN(options.backend.drafter, DrafterWeights::Synthetic(drafter, 2));
    std::printf("MTP drafter %s: %.1f M parameters, seeded\n", a.drafter_config.c_str(),
                DrafterWeights::ParameterCount(drafter) / 1e6);
  }
  cuda::CudaBackendInfo info;
  const auto l0 = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceBackend> backend,
                          cuda::CreateCudaBackend(config, nullptr, options, &info));
  const double load_s = Seconds(l0, Clock::now());
  const std::string gpu_name = info.gpus.empty() ? "?" : info.gpus[0].name;
  std::printf(
      "* temper-bench --gpus %s: %s at tp %d, synthetic bf16 weights, on %s; copy bandwidth %.0f GB/s "
      "(GPU %d, 1 GiB device to device, read + write, median of 10)\n",
      fmt::format("{}", fmt::join(a.devices, ",")).c_str(),
      std::filesystem::path(a.config).parent_path().filename().c_str(), tp, gpu_name.c_str(), copy_gbs, a.devices[0]);
  std::printf(
      "* load: %.2f s (weights filled on the device, KV pool and buffers allocated); all-reduce: %s; programmatic "
      "edges in captured steps: %s\n",
      load_s, info.all_reduce.c_str(),
      info.programmatic_edges ? "on"
      : !a.programmatic_edges ? "off (--gpu-ordinary-edges)"
                              : "off (the GPU has no programmatic launch: before sm_90)");
  std::map<int, double> free_after_load;
  for (const auto& g : info.gpus) {
    TEMPER_ASSIGN_OR_RETURN(free_after_load[g.device], FreeGiB(g.device));
  }
  const KvUsage kv = backend->kv_usage();
  std::printf(
      "* KV capacity: %lld tokens in the paged pool (full-attention layers, %d-token blocks of %.0f KiB, all "
      "ranks), plus %d sequence slots of sliding-window rings (%.0f MiB each, all ranks); max context %lld tokens\n",
      static_cast<long long>(info.kv_capacity_tokens), kv.block_tokens, kv.block_bytes / 1024.0, kv.max_sequences,
      kv.window_bytes / (1024.0 * 1024.0), static_cast<long long>(backend->context_limit()));

  // ---- 3, 4. every bucket warmed; candidates against full logits ----
  TEMPER_ASSIGN_OR_RETURN(std::vector<int> buckets, WarmGraphBuckets(*backend, a.max_batch));
  std::printf("graph buckets (decode batch sizes) captured and replayed before any timing: [%s]\n",
              fmt::format("{}", fmt::join(buckets, ", ")).c_str());
  const std::vector<int> batches = a.max_batch > 1 ? std::vector<int>{1, a.max_batch} : std::vector<int>{1};
  TEMPER_ASSIGN_OR_RETURN(CandidatesCheck check,
                          CheckCandidatesMatchLogits(*backend, batches, kCheckContext, kCheckSteps));
  std::printf(
      "* self-check passed: greedy tokens from candidates equal greedy tokens from full logits (same %d-token "
      "prompts, fresh sequences, batch %s, prefill + %d steps): %d tokens, top-1 logit max |diff| %.3g; no "
      "NaN or inf\n",
      kCheckContext, fmt::format("{}", fmt::join(batches, " and ")).c_str(), kCheckSteps, check.tokens_compared,
      check.max_top_logit_diff);

  // ---- 5. prefill ----
  TEMPER_RETURN_IF_ERROR(Prefill(*backend, a.prefill_tokens, a.max_rows));

  // ---- 6. decode ----
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, tp));
  std::printf(
      "\n* decode after a prompt of each context's tokens, candidates (greedy = the first), every step a captured "
      "graph; bytes = weights once per step + each sequence's KV at the mean context, for the ranks on GPU %d; "
      "%% of the copy bandwidth measured above:\n\n",
      a.devices[0]);
  TEMPER_ASSIGN_OR_RETURN(std::vector<cuda::OpCounts> launches, cuda::CountDecodeStepOps(a.config, tp));
  std::printf(
      "kernel launches per decode step per rank at batch 1 (the captured graph's kernels; counted on the reference "
      "ops at this model's layer structure, engine/cuda/decode_launches.h): %lld (%s)\n\n",
      static_cast<long long>(launches.front().Launches()), launches.front().Describe().c_str());
  std::printf(
      "| context | batch | steps | ms per step (median) | tok/s (steps) | tok/s (with prefill) | GB per step | GB/s | "
      "%% of copy |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int context : a.context_tokens) {
    for (int batch : batches) {
      for (int steps : a.decode_tokens) {
        TEMPER_ASSIGN_OR_RETURN(DecodeRun run, RunDecode(*backend, batch, context, steps, /*candidates=*/true, 100));
        double bytes = 0;
        const int64_t mean_context = context + steps / 2;
        for (int r = 0; r < tp; ++r) {
          if (a.devices[r] == a.devices[0])
            bytes += ::temper::bench::RankDecodeReadBytes(config, shards[r], mean_context, batch);
        }
        double sum = 0;
        for (double s : run.step_s) sum += s;
        const double step = Median(run.step_s);
        const double gbs = bytes / step / 1e9;
        std::printf("| %d | %d | %d | %.2f | %.1f | %.1f | %.2f | %.0f | %.0f%% |\n", context, batch, steps, step * 1e3,
                    batch * steps / sum, batch * steps / (sum + run.prefill_s), bytes / 1e9, gbs, 100 * gbs / copy_gbs);
      }
    }
  }

  TEMPER_RETURN_IF_ERROR(VerifyPasses(*backend, a.context_tokens.front()));
  if (backend->has_drafter()) TEMPER_RETURN_IF_ERROR(DraftSteps(*backend, a.context_tokens.front()));

  // ---- memory: the real margin, with every graph captured ----
  std::printf("\n");
  for (const auto& g : info.gpus) {
    TEMPER_ASSIGN_OR_RETURN(double free_end, FreeGiB(g.device));
    const double own = (g.weight_bytes + g.kv_bytes + g.workspace_bytes) / kGiB;
    std::printf(
        "* GPU %d (%s), %d rank(s): free before load %.2f GiB; weights %.2f GiB, KV %.2f GiB (rings and paged "
        "pool), workspace %.2f GiB; free after load %.2f GiB, after every graph and run %.2f GiB (the real "
        "margin); %.2f GiB held beyond those buffers (CUDA module code, graphs, cuBLASLt workspaces and "
        "handles, all-reduce buffers, allocator rounding)\n",
        g.device, g.name.c_str(), g.ranks, g.free_before / kGiB, g.weight_bytes / kGiB, g.kv_bytes / kGiB,
        g.workspace_bytes / kGiB, free_after_load[g.device], free_end, g.free_before / kGiB - free_end - own);
  }

  // ---- 7. all-reduce ----
  std::vector<int> ranks = a.devices;
  while (static_cast<int>(ranks.size()) < a.all_reduce_ranks) ranks.push_back(a.devices[0]);
  if (ranks.size() > 1) {
    const std::vector<AllReduceMessage> messages = ModelAllReduceMessages(config, a.max_batch, a.max_rows);
    TEMPER_ASSIGN_OR_RETURN(std::vector<AllReduceTiming> timings, BenchAllReduce(ranks, messages));
    std::printf(
        "\n* all-reduce, %zu ranks on GPUs [%s], fp32 residual rows (hidden %d x 4 B per row); each size "
        "checked exactly before it is timed; median per call inside a CUDA graph:\n\n",
        ranks.size(), fmt::format("{}", fmt::join(ranks, ", ")).c_str(), config.hidden_size);
    std::printf(
        "| algorithm | message | bytes | calls per graph | us per call | GB/s (bytes / time) |\n"
        "|---|---|---:|---:|---:|---:|\n");
    for (const AllReduceTiming& t : timings) {
      const std::string algo =
          std::string(cuda::AllReduceAlgoName(t.algo)) + (t.chosen ? " (the backend's choice)" : "");
      if (t.available) {
        std::printf("| %s | %s | %llu | %d | %.2f | %.1f |\n", algo.c_str(), t.message.what.c_str(),
                    static_cast<unsigned long long>(t.message.bytes), t.iterations, t.median_us,
                    t.message.bytes / (t.median_us * 1e-6) / 1e9);
      } else {
        std::printf("| %s | %s | %llu | | n/a: %s | |\n", algo.c_str(), t.message.what.c_str(),
                    static_cast<unsigned long long>(t.message.bytes), t.note.c_str());
      }
    }
  }
  // What bench/gpu_bundle_run.sh looks for: printed only when every part above ran and checked out.
  std::printf("\ntemper-bench --gpus: finished, every check passed\n");
  return Status::OK();
}

}  // namespace temper::engine::bench
