// temper-lm: runs the engine from the command line, for users and for tests.
//
//   temper-lm logits   --model DIR --ids 5,17,... [--tp N] --out FILE.safetensors
//   temper-lm generate --model DIR --ids 5,17,... --max-new N
//                      [--greedy | --temperature T --top-k K --top-p P --min-p M --seed S] [--tp N]
//   temper-lm serve    --model DIR [--host H] [--port P] [--model-name NAME] [--context N]
//                      [--kv-tokens N] [--max-sequences N] [--max-snapshots N] [--max-batch-tokens N]
//                      (an OpenAI-compatible HTTP server, see engine/http_server.h; runs until
//                      SIGINT or SIGTERM)
//
// `--synthetic CONFIG.json` replaces `--model DIR` with seeded random weights of that config's
// shape (for benchmarks). Each subcommand is one function below; errors print one line to stderr
// and exit with status 1.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/status.h"
#include "common/log.h"
#include "engine/cpu_backend.h"
#include "engine/http_server.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/weights.h"

namespace temper::engine {
namespace {

// Where the weights come from and how the backend runs.
struct ModelArgs {
  std::string model_dir;
  std::string synthetic_config;
  uint64_t weights_seed = 0;
  int tp = 1;
  int threads = 0;
};

void AddModelOptions(CLI::App* cmd, ModelArgs* a) {
  auto* model = cmd->add_option("--model", a->model_dir, "model directory (config.json + safetensors)");
  auto* synthetic = cmd->add_option("--synthetic", a->synthetic_config, "config.json to fill with seeded random weights");
  model->excludes(synthetic);
  cmd->add_option("--weights-seed", a->weights_seed, "seed of the synthetic weights");
  cmd->add_option("--tp", a->tp, "tensor-parallel ranks (threads on the CPU)")->check(CLI::Range(1, 64));
  cmd->add_option("--threads", a->threads, "threads in all (0: one per core)")->check(CLI::NonNegativeNumber);
}

struct Loaded {
  ModelConfig config;
  std::unique_ptr<CpuBackend> backend;
};

// `kv` null: room for one sequence of `context` tokens.
Result<Loaded> Load(const ModelArgs& a, int64_t context, const KvCacheOptions* kv = nullptr) {
  if (a.model_dir.empty() == a.synthetic_config.empty()) {
    return Status::InvalidArgument("give exactly one of --model DIR and --synthetic CONFIG.json");
  }
  Loaded out;
  std::shared_ptr<const ModelWeights> weights;
  if (!a.model_dir.empty()) {
    TEMPER_ASSIGN_OR_RETURN(out.config, LoadModelConfig(std::filesystem::path(a.model_dir) / "config.json"));
    TEMPER_ASSIGN_OR_RETURN(weights, ModelWeights::Load(a.model_dir, out.config));
  } else {
    TEMPER_ASSIGN_OR_RETURN(out.config, LoadModelConfig(a.synthetic_config));
    TEMPER_ASSIGN_OR_RETURN(weights, ModelWeights::Synthetic(out.config, a.weights_seed));
  }
  CpuBackendOptions options;
  options.tp = a.tp;
  options.threads = a.threads;
  options.max_context = std::min<int64_t>(out.config.max_position_embeddings, std::max<int64_t>(context, 1));
  options.kv.max_sequences = 1;
  options.kv.max_tokens = options.max_context;
  if (kv != nullptr) options.kv = *kv;
  TEMPER_ASSIGN_OR_RETURN(out.backend, CpuBackend::Create(out.config, std::move(weights), options));
  return out;
}

Result<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX) {
      return Status::InvalidArgument(fmt::format("--ids: '{}' (item {}) is not a token id", item, ids.size()));
    }
    ids.push_back(static_cast<int32_t>(v));
    pos = comma + 1;
  }
  return ids;
}

// ---- logits: teacher-forced logits and hidden states of one prompt ----
struct LogitsArgs {
  ModelArgs model;
  std::string ids;
  std::string out;
};

Status RunLogits(const LogitsArgs& a) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIds(a.ids));
  TEMPER_ASSIGN_OR_RETURN(Loaded m, Load(a.model, static_cast<int64_t>(ids.size())));
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, m.backend->AddSequence());
  ForwardItem item{seq, ids, /*all_logits=*/true};
  TEMPER_ASSIGN_OR_RETURN(ForwardResult r, m.backend->Forward({&item, 1}, ForwardOptions{.capture_hidden = true}));
  const int64_t T = static_cast<int64_t>(ids.size());
  auto bytes = [](const std::vector<float>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
  };
  const TensorToWrite tensors[] = {
      {"logits", DType::kF32, {T, m.config.vocab_size}, bytes(r.logits)},
      {"hidden", DType::kF32, {m.config.num_layers + 1, T, m.config.hidden_size}, bytes(r.hidden)},
  };
  return WriteSafetensors(a.out, tensors, {{"generator", "temper-lm logits"}});
}

// ---- generate: prompt ids in, new ids out ----
struct GenerateArgs {
  ModelArgs model;
  std::string ids;
  int max_new = 0;
  bool greedy = false;
  bool ignore_eos = false;
  std::string stop;
  SamplingParams sampling;
};

Status RunGenerate(GenerateArgs a) {
  using Clock = std::chrono::steady_clock;
  TEMPER_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIds(a.ids));
  TEMPER_ASSIGN_OR_RETURN(Loaded m, Load(a.model, static_cast<int64_t>(ids.size()) + a.max_new));
  if (a.greedy) a.sampling.temperature = 0;
  if (!a.stop.empty()) {
    TEMPER_ASSIGN_OR_RETURN(a.sampling.stop_tokens, ParseIds(a.stop));
  } else if (!a.ignore_eos) {
    a.sampling.stop_tokens.assign(m.config.eos_token_ids.begin(), m.config.eos_token_ids.end());
  }
  TEMPER_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(a.sampling));
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, m.backend->AddSequence());

  std::vector<int32_t> produced;
  std::vector<int32_t> next = ids;
  const auto start = Clock::now();
  auto decode_start = start;
  for (int k = 0; k < a.max_new; ++k) {
    ForwardItem item{seq, next, false};
    TEMPER_ASSIGN_OR_RETURN(ForwardResult r, m.backend->Forward({&item, 1}, {}));
    if (k == 0) decode_start = Clock::now();
    const int32_t token = sampler.Sample(r.logits);
    produced.push_back(token);
    if (sampler.IsStop(token)) break;
    next = {token};
  }
  const auto end = Clock::now();
  std::printf("%s\n", fmt::format("{}", fmt::join(produced, ",")).c_str());
  const double prefill_s = std::chrono::duration<double>(decode_start - start).count();
  const double decode_s = std::chrono::duration<double>(end - decode_start).count();
  std::fprintf(stderr, "temper-lm: prefill %zu tokens in %.1f ms; %zu new tokens, decode %.2f tok/s\n", ids.size(),
               prefill_s * 1e3, produced.size(), produced.size() > 1 ? (produced.size() - 1) / decode_s : 0.0);
  return Status::OK();
}

// ---- serve: the OpenAI-compatible HTTP server ----
struct ServeArgs {
  ModelArgs model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model_name;
  int64_t context = 8192;
  KvCacheOptions kv{.max_sequences = 16, .block_tokens = 16, .max_tokens = 65536, .max_snapshots = 64};
  int64_t max_batch_tokens = 512;
};

Status RunServe(const ServeArgs& a) {
  // Block the stop signals before any thread starts, so every thread inherits the mask and this
  // one can wait for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const Logger log(LogLevel::kInfo);
  TEMPER_ASSIGN_OR_RETURN(Loaded m, Load(a.model, a.context, &a.kv));
  SchedulerOptions sched;
  sched.max_batch_tokens = a.max_batch_tokens;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler, Scheduler::Create(*m.backend, sched, log));
  HttpServerOptions http;
  http.host = a.host;
  http.port = a.port;
  http.model_name = a.model_name;
  if (http.model_name.empty()) {
    http.model_name = !a.model.model_dir.empty() ? std::filesystem::path(a.model.model_dir).filename().string()
                                                 : std::filesystem::path(a.model.synthetic_config).stem().string();
  }
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::Start(*scheduler, http, log));
  const KvUsage kv = m.backend->kv_usage();
  log.Info("serving '{}' on http://{}:{} (KV pool {} tokens, {} sequences, {} cached prefixes)", http.model_name, a.host,
           server->port(), kv.total_blocks * kv.block_tokens, kv.max_sequences, kv.max_snapshots);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  log.Info("signal {}: stopping", signal);
  server->Stop();
  return Status::OK();
}

}  // namespace
}  // namespace temper::engine

int main(int argc, char** argv) {
  using namespace temper::engine;
  CLI::App app{"temper-lm: run the temper engine's Gemma 4 model on the CPU"};
  app.require_subcommand(1);
  std::function<temper::Status()> run;

  LogitsArgs logits;
  CLI::App* lc = app.add_subcommand("logits", "teacher-forced logits and hidden states to a safetensors file");
  AddModelOptions(lc, &logits.model);
  lc->add_option("--ids", logits.ids, "prompt token ids, comma-separated")->required();
  lc->add_option("--out", logits.out, "output .safetensors (F32 logits [T, vocab], hidden [layers+1, T, hidden])")
      ->required();
  lc->callback([&] { run = [&] { return RunLogits(logits); }; });

  GenerateArgs gen;
  CLI::App* gc = app.add_subcommand("generate", "generate token ids after a prompt");
  AddModelOptions(gc, &gen.model);
  gc->add_option("--ids", gen.ids, "prompt token ids, comma-separated")->required();
  gc->add_option("--max-new", gen.max_new, "tokens to generate")->required()->check(CLI::PositiveNumber);
  auto* greedy = gc->add_flag("--greedy", gen.greedy, "take the most likely token (the default)");
  auto* temp = gc->add_option("--temperature", gen.sampling.temperature, "sampling temperature (0: greedy)");
  greedy->excludes(temp);
  gc->add_option("--top-k", gen.sampling.top_k, "keep the k most likely tokens (0: all)");
  gc->add_option("--top-p", gen.sampling.top_p, "nucleus sampling mass");
  gc->add_option("--min-p", gen.sampling.min_p, "drop tokens below min-p times the top probability");
  gc->add_option("--seed", gen.sampling.seed, "sampling seed");
  gc->add_option("--stop", gen.stop, "stop token ids, comma-separated (default: the config's eos_token_id)");
  gc->add_flag("--ignore-eos", gen.ignore_eos, "do not stop at the config's eos_token_id");
  gc->callback([&] { run = [&] { return RunGenerate(gen); }; });

  ServeArgs serve;
  CLI::App* sc = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/models, /health, /metrics)");
  AddModelOptions(sc, &serve.model);
  sc->add_option("--host", serve.host, "address to listen on");
  sc->add_option("--port", serve.port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  sc->add_option("--model-name", serve.model_name, "the model name clients send (default: the model directory's name)");
  sc->add_option("--context", serve.context, "longest sequence, prompt plus output")->check(CLI::PositiveNumber);
  sc->add_option("--kv-tokens", serve.kv.max_tokens, "paged KV pool size in tokens")->check(CLI::PositiveNumber);
  sc->add_option("--max-sequences", serve.kv.max_sequences, "sequences decoded at once")->check(CLI::PositiveNumber);
  sc->add_option("--max-snapshots", serve.kv.max_snapshots, "prefixes the prefix cache may pin (0: no cache)")
      ->check(CLI::NonNegativeNumber);
  sc->add_option("--max-batch-tokens", serve.max_batch_tokens, "tokens per forward pass")->check(CLI::PositiveNumber);
  sc->callback([&] { run = [&] { return RunServe(serve); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const temper::Status status = run();
  if (!status.ok()) {
    std::fprintf(stderr, "temper-lm: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
