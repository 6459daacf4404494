// temper-bench (CPU): load time, prefill and decode speed, and how close decode comes to the
// machine's memory bandwidth.
//
// Batch-1 decode reads every weight once per token, so its speed is bounded by bandwidth. The
// bench measures a parallel memcpy in the same run (with the same thread count) and reports the
// decode's achieved read bandwidth, bytes per token × tokens per second, against it. Copy
// bandwidth counts bytes read plus bytes written, as STREAM's Copy does.
//
//   temper-bench --model DIR | --synthetic CONFIG.json [--tp N] [--threads N]
//                [--prompt-tokens 64] [--decode-tokens 32] [--copy-mib 1024]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "engine/cpu_backend.h"
#include "engine/model_config.h"
#include "engine/sampler.h"
#include "engine/thread_pool.h"
#include "engine/weights.h"

namespace temper::engine {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Args {
  std::string model_dir, synthetic;
  int tp = 1;
  int threads = 0;
  int prompt_tokens = 64;
  int decode_tokens = 32;
  int copy_mib = 1024;
};

// Best of five parallel copies of `mib` MiB, in GB/s counting read + write.
double CopyBandwidth(int threads, int mib) {
  const size_t bytes = size_t(mib) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  WorkerGroup pool(threads);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    pool.ParallelFor(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b));
    });
    best = std::max(best, 2.0 * bytes / Seconds(t0, Clock::now()) / 1e9);
  }
  return best;
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

Status Run(const Args& a) {
  if (a.model_dir.empty() == a.synthetic.empty()) return Status::InvalidArgument("give one of --model and --synthetic");
  const int threads = a.threads > 0 ? a.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("threads %d, tp %d\n", threads, a.tp);
  const double copy = CopyBandwidth(threads, a.copy_mib);
  std::printf("memcpy bandwidth: %.2f GB/s (read + write)\n", copy);

  const auto t0 = Clock::now();
  ModelConfig config;
  std::shared_ptr<const ModelWeights> weights;
  if (!a.model_dir.empty()) {
    TEMPER_ASSIGN_OR_RETURN(config, LoadModelConfig(std::filesystem::path(a.model_dir) / "config.json"));
    TEMPER_ASSIGN_OR_RETURN(weights, ModelWeights::Load(a.model_dir, config));
  } else {
    TEMPER_ASSIGN_OR_RETURN(config, LoadModelConfig(a.synthetic));
    TEMPER_ASSIGN_OR_RETURN(weights, ModelWeights::Synthetic(config, 1));
  }
  CpuBackendOptions options;
  options.tp = a.tp;
  options.threads = threads;
  options.max_context = std::min<int64_t>(config.max_position_embeddings, a.prompt_tokens + a.decode_tokens + 1);
  options.kv.max_sequences = 1;
  options.kv.max_tokens = options.max_context;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(config, weights, options));
  const double load_s = Seconds(t0, Clock::now());
  std::printf("model: %.3f B parameters, load %.2f s (%s)\n", config.ParameterCount() / 1e9, load_s,
              a.model_dir.empty() ? "synthetic weights generated" : "memory-mapped, pages fault in on first use");

  // A seeded pseudo-random prompt.
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt_tokens));
  uint64_t s = 12345;
  for (int32_t& t : prompt) t = static_cast<int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % config.vocab_size;
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
  const int64_t ctx0 = a.prompt_tokens + 1;
  const auto d0 = Clock::now();
  for (int k = 0; k < a.decode_tokens; ++k) {
    ForwardItem step{seq, {&token, 1}, false};
    TEMPER_ASSIGN_OR_RETURN(r, backend->Forward({&step, 1}, {}));
    token = sampler.Sample(r.logits);
  }
  const double decode_s = Seconds(d0, Clock::now());
  const double tok_s = a.decode_tokens / decode_s;
  const double bytes = DecodeBytes(config, ctx0 + a.decode_tokens / 2);
  const double gbs = bytes * tok_s / 1e9;
  std::printf("decode: %d tokens at %.2f tok/s, %.1f ms/token\n", a.decode_tokens, tok_s, 1e3 / tok_s);
  // Measured again after the decode; on a shared machine the two differ, and the higher one is
  // the fairer yardstick.
  const double copy_after = CopyBandwidth(threads, a.copy_mib);
  const double yardstick = std::max(copy, copy_after);
  std::printf("memcpy bandwidth after decode: %.2f GB/s\n", copy_after);
  // A copy moves each byte twice (read, then write); decode only reads. Both ratios are printed.
  std::printf("decode reads %.1f MB/token -> %.2f GB/s = %.0f%% of memcpy bandwidth (%.2f GB/s read + write), "
              "%.0f%% of its read half\n",
              bytes / 1e6, gbs, 100.0 * gbs / yardstick, yardstick, 200.0 * gbs / yardstick);
  std::printf("last logits hash %016llx\n", static_cast<unsigned long long>(HashLogits(r.logits)));
  return Status::OK();
}

}  // namespace
}  // namespace temper::engine

int main(int argc, char** argv) {
  temper::engine::Args a;
  CLI::App app{"temper-bench: CPU speed of the temper engine"};
  auto* model = app.add_option("--model", a.model_dir, "model directory");
  app.add_option("--synthetic", a.synthetic, "config.json for seeded random weights")->excludes(model);
  app.add_option("--tp", a.tp, "tensor-parallel ranks")->check(CLI::Range(1, 64));
  app.add_option("--threads", a.threads, "threads in all (0: one per core)")->check(CLI::NonNegativeNumber);
  app.add_option("--prompt-tokens", a.prompt_tokens, "prefill length")->check(CLI::PositiveNumber);
  app.add_option("--decode-tokens", a.decode_tokens, "timed decode steps")->check(CLI::PositiveNumber);
  app.add_option("--copy-mib", a.copy_mib, "memcpy buffer size in MiB")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const temper::Status s = temper::engine::Run(a);
  if (!s.ok()) {
    std::fprintf(stderr, "temper-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
