// temper-bench (CPU): load time, prefill and decode speed, and how close decode comes to the
// machine's memory bandwidth.
//
// Batch-1 decode reads every weight once per token, so its speed is bounded by bandwidth. The
// bench measures, in the same run and with the same thread count, a parallel read-only sum (the
// fair yardstick for a workload that only reads) and a parallel memcpy, and reports the decode's
// achieved read bandwidth, bytes per token × tokens per second, against both. Copy bandwidth
// counts bytes read plus bytes written, as STREAM's Copy does.
//
//   temper-bench --model DIR | --synthetic CONFIG.json [--tp N] [--threads N]
//                [--prompt-tokens 64] [--rounds 5] [--decode-tokens 8] [--copy-mib 1024]
//
// `--serving` measures the serving layer instead (engine/serve/scheduler.h): time to first token of a
// long prompt cold and again warm (resent with a new suffix, so the prefix cache supplies the
// prompt), aggregate decode speed of N concurrent streams against one stream, and KV capacity in
// tokens per GiB for this model and for `--kv-config` (e.g. the 31B shape, no weights needed).
//
//   temper-bench --serving --synthetic CONFIG.json [--threads N] [--serving-prompt 4096]
//                [--serving-suffix 200] [--streams 8] [--stream-tokens 64] [--kv-config CONFIG.json]
//
// `--gpus 0[,0,...]` measures the CUDA backend instead (bench/temper_bench_gpu.h), one rank per
// listed GPU (ranks may share one), on synthetic weights of --synthetic's shape, on the decode path
// the scheduler uses (sampling candidates, captured graphs, every bucket warmed first), after a
// self-check (greedy tokens from candidates = from full logits; no NaN/inf) whose failure makes the
// exit status non-zero; then the all-reduce at the model's message sizes (bench/gpu_bundle.sh runs
// it on a lent GPU):
//
//   temper-bench --gpus 0 --synthetic tests/data/gemma4-31b-shape/config.json
//                [--gpu-prefill 2048,8192] [--gpu-decode 256] [--gpu-context 1024,8192] [--gpu-batch 8]
//                [--gpu-ordinary-edges]
//
// `--lookup-transcript` and `--verify-cost` measure speculative decoding (bench/speculation_bench.h):
// prompt-lookup acceptance on the roles' recorded requests, and a verification pass's cost (with
// `--drafter-synthetic CONFIG.json`, an MTP drafter's draft steps too).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/bench_timing.h"
#include "bench/speculation_bench.h"
#include "common/log.h"
#include "engine/cuda/memory_plan.h"
#include "engine/kv_cache.h"
#include "engine/loaded_model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"
#include "engine/model/weights.h"
#include "engine/open_backend.h"
#include "engine/sampler.h"
#include "engine/serve/scheduler.h"
#include "engine/thread_pool.h"

#if TEMPER_HAVE_CUDA
#include "bench/temper_bench_gpu.h"
#endif

namespace temper::engine {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;

struct Args {
  std::string model_dir, synthetic;
  int tp = 1;
  int threads = 0;
  int prompt_tokens = 64;
  int decode_tokens = 8;  // per round
  int rounds = 5;
  int copy_mib = 1024;
  bool serving = false;
  int serving_prompt = 4096;
  int serving_suffix = 200;
  int streams = 8;
  int stream_tokens = 64;
  std::string kv_config;
  bool verify_cost = false;
  int verify_context = 512;
  std::string drafter_synthetic;  // an MTP drafter's config.json: also time its draft steps
};

// The machine's memory bandwidth, measured with the decode's own thread count: a parallel
// memcpy (GB/s counting read + write, as STREAM's Copy does) and a parallel read-only sum (the
// fair yardstick for decode, which only reads). Buffers are allocated and touched once, so a
// measurement is a pass over memory and nothing else.
class Yardsticks {
 public:
  Yardsticks(int threads, int mib)
      : pool_(threads), bytes_(size_t(mib) << 20), src_(bytes_, 1), dst_(bytes_, 0), words_(bytes_ / 8, 1) {}

  // Median of `reps` copies of the whole buffer.
  double Copy(int reps) {
    return MedianOfRuns(reps, [&] {
      const auto t0 = Clock::now();
      pool_.ParallelFor(static_cast<int64_t>(bytes_), 1 << 20, [&](int64_t b, int64_t e) {
        std::memcpy(dst_.data() + b, src_.data() + b, static_cast<size_t>(e - b));
      });
      return 2.0 * bytes_ / Seconds(t0, Clock::now()) / 1e9;
    });
  }

  // Median of `reps` reads of the whole buffer. Each thread sums its chunks with four independent
  // accumulators, which the compiler vectorises, so the loop is bound by memory, not by adds; the
  // sums are kept so the reads cannot be optimised away.
  double Read(int reps) {
    return MedianOfRuns(reps, [&] {
      std::atomic<uint64_t> total{0};
      const auto t0 = Clock::now();
      pool_.ParallelFor(static_cast<int64_t>(words_.size()), 1 << 17, [&](int64_t b, int64_t e) {
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t i = b;
        for (; i + 4 <= e; i += 4) {
          s0 += words_[i];
          s1 += words_[i + 1];
          s2 += words_[i + 2];
          s3 += words_[i + 3];
        }
        for (; i < e; ++i) s0 += words_[i];
        total += s0 + s1 + s2 + s3;
      });
      const double gbs = double(words_.size() * sizeof(uint64_t)) / Seconds(t0, Clock::now()) / 1e9;
      if (total.load() != words_.size()) std::fprintf(stderr, "read bandwidth: wrong sum\n");
      return gbs;
    });
  }

 private:
  template <typename Sample>
  static double MedianOfRuns(int reps, Sample sample) {
    std::vector<double> v;
    for (int i = 0; i < reps; ++i) v.push_back(sample());
    return Median(std::move(v));
  }

  WorkerGroup pool_;
  size_t bytes_;
  std::vector<char> src_, dst_;
  std::vector<uint64_t> words_;
};

double LoadAverage() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

// Bytes one decode step reads at context length `ctx`: every layer's weights, the LM head, one
// embedding row, and the fp32 KV cache the attention visits.
double DecodeBytes(const ModelConfig& c, int64_t ctx) {
  const double h = c.hidden_size;
  double bytes = 2.0 * c.vocab_size * h + 2.0 * h;  // head + embedding row
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const double q = c.QDim(l), kv = c.KvDim(l);
    bytes += 2.0 * (q * h + kv * h + (g.k_eq_v ? 0 : kv * h) + h * q + 3.0 * h * c.intermediate_size);
    const double visible = g.kind == LayerKind::kSliding ? std::min<int64_t>(ctx, c.sliding_window) : ctx;
    bytes += 4.0 * visible * kv * (g.k_eq_v ? 1 : 2);
  }
  return bytes;
}

uint64_t HashLogits(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) h = (h ^ ((u >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

// The model under test: a directory, or seeded random weights (seed 1) of a config's shapes.
Result<LoadedModel> LoadBenchModel(const Args& a) {
  return LoadModel(ModelSource{.dir = a.model_dir,
                               .synthetic_config = a.synthetic,
                               .synthetic_seed = 1,
                               .tokenizer_need = TokenizerNeed::kNone});
}

// On a shared machine bandwidth moves from second to second, so the decode is not judged against
// a best-ever yardstick measured at another moment: each of `rounds` rounds measures the
// yardsticks (median of three passes) and then decodes, and the ratios are taken round by round.
Status Run(const Args& a) {
  if (a.model_dir.empty() == a.synthetic.empty()) return Status::InvalidArgument("give one of --model and --synthetic");
  const int threads = a.threads > 0 ? a.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("threads %d, tp %d, load average %.2f\n", threads, a.tp, LoadAverage());
  Yardsticks yardsticks(threads, a.copy_mib);

  const auto t0 = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(LoadedModel model, LoadBenchModel(a));
  const ModelConfig& config = model.config;
  BackendSpec spec;  // the CPU backend
  spec.tp = a.tp;
  spec.threads = threads;
  const int decoded = a.rounds * a.decode_tokens + 1;
  spec.max_context = std::min<int64_t>(config.max_position_embeddings, a.prompt_tokens + decoded);
  spec.kv.max_sequences = 1;
  spec.kv.max_tokens = spec.max_context;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, OpenBackend(spec, model));
  const double load_s = Seconds(t0, Clock::now());
  std::printf("model: %.3f B parameters, load %.2f s (%s)\n", config.ParameterCount() / 1e9, load_s,
              a.model_dir.empty() ? "synthetic weights generated" : "memory-mapped, pages fault in on first use");

  // A seeded pseudo-random prompt.
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt_tokens));
  uint64_t s = 12345;
  for (int32_t& t : prompt)
    t = static_cast<int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % config.vocab_size;
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, backend->AddSequence());
  const auto p0 = Clock::now();
  ForwardItem item{seq, prompt, false};
  TEMPER_ASSIGN_OR_RETURN(ForwardResult r, backend->Forward({&item, 1}, {}));
  const double prefill_s = Seconds(p0, Clock::now());
  std::printf("prefill: %d tokens in %.3f s = %.1f tok/s\n", a.prompt_tokens, prefill_s, a.prompt_tokens / prefill_s);

  TEMPER_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create({}));
  int32_t token = sampler.Sample(r.logits);
  // One untimed step first: it faults in any page the prefill did not touch.
  {
    ForwardItem step{seq, {&token, 1}, false};
    TEMPER_ASSIGN_OR_RETURN(r, backend->Forward({&step, 1}, {}));
    token = sampler.Sample(r.logits);
  }
  int64_t ctx = a.prompt_tokens + 1;
  std::vector<double> tok_s, read_ratio, copy_ratio;
  std::printf(
      "round  read-only GB/s  memcpy GB/s (r+w)  decode tok/s  decode GB/s  %% of read-only  %% of memcpy (r+w)\n");
  for (int round = 0; round < a.rounds; ++round) {
    const double read = yardsticks.Read(3);
    const double copy = yardsticks.Copy(3);
    const auto d0 = Clock::now();
    for (int k = 0; k < a.decode_tokens; ++k) {
      ForwardItem step{seq, {&token, 1}, false};
      TEMPER_ASSIGN_OR_RETURN(r, backend->Forward({&step, 1}, {}));
      token = sampler.Sample(r.logits);
    }
    const double rate = a.decode_tokens / Seconds(d0, Clock::now());
    const double gbs = DecodeBytes(config, ctx + a.decode_tokens / 2) * rate / 1e9;
    ctx += a.decode_tokens;
    tok_s.push_back(rate);
    read_ratio.push_back(gbs / read);
    copy_ratio.push_back(gbs / copy);
    std::printf("%5d  %14.2f  %17.2f  %12.2f  %11.2f  %13.0f%%  %17.0f%%\n", round + 1, read, copy, rate, gbs,
                100 * gbs / read, 100 * gbs / copy);
  }
  const double bytes = DecodeBytes(config, ctx);
  std::printf(
      "decode reads %.1f MB/token; median over %d rounds: %.2f tok/s (%.1f ms/token) = %.0f%% of read-only "
      "bandwidth, %.0f%% of memcpy bandwidth counted read + write (%.0f%% of its read half); load average %.2f\n",
      bytes / 1e6, a.rounds, Median(tok_s), 1e3 / Median(tok_s), 100 * Median(read_ratio), 100 * Median(copy_ratio),
      200 * Median(copy_ratio), LoadAverage());
  std::printf("last logits hash %016llx\n", static_cast<unsigned long long>(HashLogits(r.logits)));
  return Status::OK();
}

// ---- speculation ----

Status RunVerifyCost(const Args& a) {
  TEMPER_ASSIGN_OR_RETURN(LoadedModel model, LoadBenchModel(a));
  const int threads = a.threads > 0 ? a.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (!a.drafter_synthetic.empty()) {
    TEMPER_ASSIGN_OR_RETURN(DrafterConfig config, LoadDrafterConfig(a.drafter_synthetic, model.config));
    TEMPER_ASSIGN_OR_RETURN(model.drafter, DrafterWeights::Synthetic(config, 2));
  }
  return bench::RunVerifyCost(model, bench::VerifyCostOptions{.threads = threads, .context = a.verify_context});
}

// ---- serving ----

std::vector<int32_t> BenchPrompt(uint64_t seed, int n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int32_t& t : ids)
    t = static_cast<int32_t>(((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) %
                             static_cast<uint64_t>(vocab));
  return ids;
}

// KV bytes per token of full-layer (paged) cache and per sequence of sliding-window state, as the
// CPU backend stores them (fp32), for one tensor-parallel rank of tp = 1; and what the CUDA
// backend's memory plan (engine/cuda/memory_plan.h, bf16, V only on k_eq_v layers) gives a
// 22.5 GiB L4 at tp 4 with 8 sequences, against vLLM's 4,361 tokens/GiB on that box.
Status ReportKvCapacity(const ModelConfig& config, const char* label) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, 1));
  KvCacheOptions kv;
  kv.max_tokens = kv.block_tokens;  // one block: only the geometry is needed
  KvPager pager(kv);
  CpuKvStore store(config, shards[0], pager);
  const double per_token = static_cast<double>(store.block_bytes()) / kv.block_tokens;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::printf(
      "KV capacity (%s, fp32 as the CPU backend stores it): full layers %.0f B/token = %.0f tokens/GiB "
      "(bf16 would be %.0f); sliding window state %.1f MiB per sequence (%d tokens)\n",
      label, per_token, gib / per_token, 2 * gib / per_token, static_cast<double>(store.ring_bytes()) / (1 << 20),
      config.sliding_window);
  Result<std::vector<RankShard>> tp4 = PlanShards(config, 4);
  if (!tp4.ok()) return Status::OK();  // a shape that does not split four ways has no L4 plan
  // The card's 23,034 MiB (as GKE reports an L4) are not all free: the driver's context takes its
  // share before the plan measures. 512 MiB is an assumption, not a measurement of an L4.
  constexpr uint64_t kL4TotalBytes = 23034ull << 20, kAssumedContextBytes = 512ull << 20;
  cuda::MemoryPlanInput l4;
  l4.free_bytes = kL4TotalBytes - kAssumedContextBytes;
  l4.tp = 4;
  l4.nccl = true;  // the reference box: one L4 per rank
  l4.max_sequences = 8;
  l4.max_batch = 8;
  l4.max_prefill_tokens = 2048;
  l4.max_context = std::min<int64_t>(config.max_position_embeddings, 32768);
  Result<cuda::GpuMemoryPlan> plan = cuda::PlanGpuMemory(config, (*tp4)[0], l4);
  if (!plan.ok()) {
    std::printf("KV capacity (%s, CUDA backend, tp 4 on an L4): %s\n", label, plan.status().ToString().c_str());
    return Status::OK();
  }
  const double kv_gib = static_cast<double>(plan->kv_pool_bytes + plan->ring_bytes) / gib;
  std::printf(
      "KV capacity (%s, CUDA backend's memory plan, tp 4 on a 22.5 GiB L4 less an assumed 0.5 GiB context, "
      "8 sequences): weights %.2f GiB, workspace %.2f GiB, all-reduce %.3f GiB, rings %.2f GiB, kept for "
      "CUDA and NCCL %.2f GiB, pool %.2f GiB = %lld tokens, margin %.2f GiB; %.0f tokens/GiB of pool (%.1fx "
      "vLLM's 4,361), %.0f counting the rings (%.1fx)\n",
      label, plan->weight_bytes / gib, plan->workspace_bytes / gib, plan->all_reduce_bytes / gib,
      plan->ring_bytes / gib, plan->reserve_bytes / gib, plan->kv_pool_bytes / gib,
      static_cast<long long>(plan->kv_capacity_tokens), plan->margin_bytes / gib,
      gib / static_cast<double>(plan->rank.kv_per_token), gib / static_cast<double>(plan->rank.kv_per_token) / 4361,
      plan->kv_capacity_tokens / kv_gib, plan->kv_capacity_tokens / kv_gib / 4361);
  return Status::OK();
}

Status RunServing(const Args& a) {
  if (a.synthetic.empty() && a.model_dir.empty()) return Status::InvalidArgument("give one of --model and --synthetic");
  const int threads = a.threads > 0 ? a.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  TEMPER_ASSIGN_OR_RETURN(LoadedModel model, LoadBenchModel(a));
  const ModelConfig& config = model.config;
  std::printf("model: %.3f B parameters, window %d, threads %d\n", config.ParameterCount() / 1e9, config.sliding_window,
              threads);
  BackendSpec spec;  // the CPU backend
  spec.threads = threads;
  spec.max_context =
      std::min<int64_t>(config.max_position_embeddings, 2 * a.serving_prompt + 2 * a.serving_suffix + 64);
  spec.kv.max_sequences = std::max(a.streams, 2);
  spec.kv.max_tokens = 2 * spec.max_context + int64_t{a.streams} * (a.stream_tokens + 64);
  spec.kv.max_snapshots = 8;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, OpenBackend(spec, model));
  const Logger log(LogLevel::kWarning);
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler, Scheduler::Create(*backend, SchedulerOptions{}, log));

  auto run = [&](std::vector<int32_t> prompt, int max_tokens) -> Result<StreamEvent> {
    GenerateRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    TEMPER_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> stream, scheduler->Submit(std::move(r)));
    StreamEvent e = stream->Wait();
    if (e.finish == FinishReason::kError) return e.error;
    return e;
  };

  // Warm vs cold time to first token.
  const std::vector<int32_t> base = BenchPrompt(1, a.serving_prompt, config.vocab_size);
  std::vector<int32_t> cold = base;
  const std::vector<int32_t> s1 = BenchPrompt(2, a.serving_suffix, config.vocab_size);
  const std::vector<int32_t> s2 = BenchPrompt(3, a.serving_suffix, config.vocab_size);
  cold.insert(cold.end(), s1.begin(), s1.end());
  // The first request pins its prompt's end; the second resends that prompt plus a new suffix.
  TEMPER_ASSIGN_OR_RETURN(StreamEvent c, run(cold, 1));
  std::vector<int32_t> resend = base;
  resend.insert(resend.end(), s1.begin(), s1.end());
  resend.insert(resend.end(), s2.begin(), s2.end());
  TEMPER_ASSIGN_OR_RETURN(StreamEvent w, run(resend, 1));
  std::printf(
      "TTFT cold: %d + %d tokens in %.3f s; warm (same %d tokens resent + %d new): %.3f s, %lld tokens from cache "
      "= %.1f%% of cold\n",
      a.serving_prompt, a.serving_suffix, c.usage.ttft_seconds, a.serving_prompt + a.serving_suffix, a.serving_suffix,
      w.usage.ttft_seconds, static_cast<long long>(w.usage.cached_prompt_tokens),
      100.0 * w.usage.ttft_seconds / c.usage.ttft_seconds);

  // One stream, then N at once: short prompts so the time is decode.
  const auto t1 = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(StreamEvent one, run(BenchPrompt(10, 16, config.vocab_size), a.stream_tokens));
  const double single = static_cast<double>(one.usage.completion_tokens) / Seconds(t1, Clock::now());
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto tn = Clock::now();
  for (int i = 0; i < a.streams; ++i) {
    GenerateRequest r;
    r.prompt = BenchPrompt(20 + static_cast<uint64_t>(i), 16, config.vocab_size);
    r.max_tokens = a.stream_tokens;
    TEMPER_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> s, scheduler->Submit(std::move(r)));
    streams.push_back(s);
  }
  int64_t total = 0;
  for (auto& s : streams) total += s->Wait().usage.completion_tokens;
  const double aggregate = static_cast<double>(total) / Seconds(tn, Clock::now());
  std::printf(
      "decode (16-token prompts, %d tokens each): 1 stream %.1f tok/s; %d streams %.1f tok/s aggregate = %.2fx\n",
      a.stream_tokens, single, a.streams, aggregate, aggregate / single);

  TEMPER_RETURN_IF_ERROR(ReportKvCapacity(config, "this model"));
  if (!a.kv_config.empty()) {
    TEMPER_ASSIGN_OR_RETURN(ModelConfig other, LoadModelConfig(a.kv_config));
    TEMPER_RETURN_IF_ERROR(ReportKvCapacity(other, a.kv_config.c_str()));
  }
  return Status::OK();
}

}  // namespace
}  // namespace temper::engine

int main(int argc, char** argv) {
  // Line by line, also into a file: a crash on a GPU machine then keeps what was printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  temper::engine::Args a;
  CLI::App app{"temper-bench: CPU speed of the temper engine"};
  auto* model = app.add_option("--model", a.model_dir, "model directory");
  app.add_option("--synthetic", a.synthetic, "config.json for seeded random weights")->excludes(model);
  app.add_option("--tp", a.tp, "tensor-parallel ranks")->check(CLI::Range(1, 64));
  app.add_option("--threads", a.threads, "threads in all (0: one per core)")->check(CLI::NonNegativeNumber);
  app.add_option("--prompt-tokens", a.prompt_tokens, "prefill length")->check(CLI::PositiveNumber);
  app.add_option("--decode-tokens", a.decode_tokens, "timed decode steps per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", a.rounds, "rounds of yardsticks then decode")->check(CLI::PositiveNumber);
  app.add_option("--copy-mib", a.copy_mib, "memcpy buffer size in MiB")->check(CLI::PositiveNumber);
  app.add_flag("--serving", a.serving, "benchmark the serving layer (TTFT cold/warm, concurrent streams, KV capacity)");
  app.add_option("--serving-prompt", a.serving_prompt, "long prompt for the TTFT test")->check(CLI::PositiveNumber);
  app.add_option("--serving-suffix", a.serving_suffix, "new tokens after the resent prompt")
      ->check(CLI::PositiveNumber);
  app.add_option("--streams", a.streams, "concurrent streams")->check(CLI::PositiveNumber);
  app.add_option("--stream-tokens", a.stream_tokens, "tokens each stream generates")->check(CLI::PositiveNumber);
  app.add_option("--kv-config", a.kv_config, "another config.json to report KV capacity for (no weights loaded)");
  std::vector<int> gpus, gpu_prefill = {2048, 8192}, gpu_decode = {256};
  std::vector<int> gpu_context = {1024};
  int gpu_batch = 8;
  app.add_option("--gpus", gpus, "CUDA backend: one GPU ordinal per rank, e.g. 0 or 0,0,0,0")->delimiter(',');
  app.add_option("--gpu-prefill", gpu_prefill, "CUDA: prefill lengths")->delimiter(',');
  app.add_option("--gpu-decode", gpu_decode, "CUDA: timed decode steps per run (batch 1 and 8)")->delimiter(',');
  app.add_option("--gpu-context", gpu_context,
                 "CUDA: prompts before the decode runs (one run each; the first also for the speculation checks)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  std::string gpu_drafter;
  app.add_option("--gpu-drafter", gpu_drafter,
                 "CUDA: an MTP drafter's config.json (e.g. bench/configs/gemma4-31b-assistant-shape.json): seeded "
                 "weights, its draft steps timed too");
  bool gpu_ordinary_edges = false;
  app.add_flag("--gpu-ordinary-edges", gpu_ordinary_edges,
               "CUDA: captured steps without programmatic edges (to measure what they save on sm_90)");
  app.add_option("--gpu-batch", gpu_batch,
                 "CUDA: largest decode batch (graph buckets up to it; 1 times a long context without 8 prefills)")
      ->check(CLI::PositiveNumber);
  std::string lookup_transcript, lookup_tokenizer;
  app.add_option("--lookup-transcript", lookup_transcript,
                 "prompt-lookup acceptance on a temper-scripted-model --transcript file");
  app.add_option("--lookup-tokenizer", lookup_tokenizer,
                 "tokenizer.json for --lookup-transcript (Gemma 3's, unpacked from tests/data/tokenizer)");
  app.add_flag("--verify-cost", a.verify_cost, "time verification passes of 1 + k tokens against a decode step");
  app.add_option("--verify-context", a.verify_context, "context before the timed verification passes")
      ->check(CLI::PositiveNumber);
  app.add_option(
      "--drafter-synthetic", a.drafter_synthetic,
      "with --verify-cost: an MTP drafter's config.json whose seeded weights draft; its steps are timed too");
  CLI11_PARSE(app, argc, argv);
  temper::Status s;
  if (!lookup_transcript.empty()) {
    s = lookup_tokenizer.empty() ? temper::Status::InvalidArgument("--lookup-transcript needs --lookup-tokenizer")
                                 : temper::engine::bench::RunLookupAcceptance(lookup_transcript, lookup_tokenizer);
  } else if (a.verify_cost) {
    s = temper::engine::RunVerifyCost(a);
  } else if (!gpus.empty()) {
#if TEMPER_HAVE_CUDA
    if (a.synthetic.empty()) {
      s = temper::Status::InvalidArgument("--gpus measures synthetic weights: give --synthetic CONFIG.json");
    } else {
      s = temper::engine::bench::RunGpuBench({.config = a.synthetic,
                                              .devices = gpus,
                                              .prefill_tokens = gpu_prefill,
                                              .decode_tokens = gpu_decode,
                                              .context_tokens = gpu_context,
                                              .max_batch = gpu_batch,
                                              .drafter_config = gpu_drafter,
                                              .programmatic_edges = !gpu_ordinary_edges});
    }
#else
    s = temper::Status::Unimplemented(
        "--gpus: this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
  } else {
    s = a.serving ? temper::engine::RunServing(a) : temper::engine::Run(a);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "temper-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
