// temper-lm: runs the engine from the command line, for users and for tests.
//
//   temper-lm logits   --model DIR --ids 5,17,... [--tp N] --out FILE.safetensors
//   temper-lm generate --model DIR --ids 5,17,... --max-new N
//                      [--greedy | --temperature T --top-k K --top-p P --min-p M --seed S] [--tp N]
//
// `--synthetic CONFIG.json` replaces `--model DIR` with seeded random weights of that config's
// shape (for benchmarks). Each subcommand is one function below; errors print one line to stderr
// and exit with status 1.
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
#include "engine/cpu_backend.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine/sampler.h"
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

Result<Loaded> Load(const ModelArgs& a, int64_t context) {
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
