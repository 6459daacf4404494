// temper-lm: runs the engine from the command line, for users and for tests.
//
//   temper-lm logits   --model DIR --ids 5,17,... [--tp N] --out FILE.safetensors
//   temper-lm generate --model DIR (--ids 5,17,... | --prompt TEXT [--chat]) --max-new N
//                      [--greedy | --temperature T --top-k K --top-p P --min-p M --seed S] [--tp N]
//                      [--tokenizer FILE]
//   temper-lm encode   --tokenizer FILE [--add-special-tokens]   (text on stdin, ids as JSON on stdout;
//                      FILE is a tokenizer.json or a Gemma 3 .gguf, for decode too)
//   temper-lm decode   --tokenizer FILE [--skip-special-tokens]  (ids as JSON on stdin, text on stdout)
//   temper-lm synthesize --config CONFIG.json [--seed S] [--tokenizer FILE] --out DIR
//                      (a model directory of seeded random weights: config.json, model.safetensors,
//                      tokenizer.json, loadable wherever a model directory is)
//   temper-lm convert  IN.gguf OUT_DIR
//                      (a Gemma 3 GGUF as a model directory: config.json, model.safetensors in bf16,
//                      tokenizer.json, chat_template.jinja when it has one; see
//                      engine/model/gguf_convert.h)
//
// Wherever a model directory is taken (--model DIR), a Gemma 3 .gguf file may be given instead: its
// weights are dequantized to bf16 in memory, and its tokenizer is the default one.
//
// `generate --prompt` encodes TEXT with the tokenizer (DIR/tokenizer.json unless --tokenizer), <bos>
// first; with --chat it renders TEXT as one user turn of the tokenizer's chat format (Gemma 4's, or
// Gemma 3's: engine/tokenizer/chat_format.h) and also stops at the format's stop tokens. With a
// tokenizer, generate prints the new ids' text on a second line.
//
//   temper-lm serve    --model DIR [--host H] [--port P] [--model-name NAME] [--context N]
//                      [--kv-tokens N] [--max-sequences N] [--max-snapshots N] [--max-batch-tokens N]
//                      [--tokenizer FILE] [--api-key KEY | --api-key-file FILE] [--allowed-host NAME]...
//                      [--max-body-bytes N] [--max-json-depth N] [--header-timeout S]
//                      [--body-timeout S] [--idle-timeout S] [--max-connections N] [--http-threads N]
//                      (an OpenAI-compatible HTTP server, see engine/serve/http_server.h; runs until
//                      SIGINT or SIGTERM). /v1/chat/completions needs a tokenizer: --tokenizer FILE,
//                      or DIR/tokenizer.json when it exists; without one only /v1/completions
//                      (token ids) is served. With an API key (prefer --api-key-file: argv is visible
//                      to every user in ps), clients send "Authorization: Bearer KEY"; the key is
//                      never logged. Without a key the server listens on loopback only: another
//                      --host is refused at start. Requests must name the server in Host as it is
//                      bound (its IP; localhost on loopback; any IP on 0.0.0.0 or ::) or as an
//                      --allowed-host NAME, and POST bodies must be application/json, so a web page
//                      the operator opens cannot drive it (engine/serve/cross_site_guard.h).
//
// `--synthetic CONFIG.json` replaces `--model DIR` with seeded random weights of that config's
// shape (for benchmarks). `--gpus 0,1,2,3` runs the model on the CUDA backend, one rank per listed
// GPU (an ordinal may repeat); without it the CPU backend runs `--tp` ranks. `--drafter DIR` loads
// the model's MTP drafter (a Gemma 4 "-assistant" checkpoint), and `serve` then drafts with it for
// speculative decoding where prompt lookup finds nothing. Each subcommand is one
// function below; errors print one line to stderr and exit with status 1.
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "engine/loaded_model.h"
#include "engine/model/gguf_convert.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/open_backend.h"
#include "engine/sampler.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/cross_site_guard.h"
#include "engine/serve/http_server.h"
#include "engine/serve/scheduler.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {
namespace {

// Where the weights come from and how the backend runs.
struct ModelArgs {
  std::string model_dir;
  std::string synthetic_config;
  uint64_t weights_seed = 0;
  int tp = 1;
  int threads = 0;
  std::string gpus;         // comma-separated CUDA ordinals, one per rank; empty: CPU
  std::string drafter_dir;  // Gemma 4's MTP drafter for the model, or empty
};

void AddModelOptions(CLI::App* cmd, ModelArgs* a) {
  auto* model =
      cmd->add_option("--model", a->model_dir, "model directory (config.json + safetensors) or a Gemma 3 .gguf file");
  auto* synthetic =
      cmd->add_option("--synthetic", a->synthetic_config, "config.json to fill with seeded random weights");
  model->excludes(synthetic);
  cmd->add_option("--weights-seed", a->weights_seed, "seed of the synthetic weights");
  cmd->add_option("--tp", a->tp, "tensor-parallel ranks (threads on the CPU)")->check(CLI::Range(1, 64));
  cmd->add_option("--threads", a->threads, "threads in all (0: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", a->gpus, "CUDA backend: one GPU ordinal per rank, e.g. 0,1,2,3 (may repeat)");
  cmd->add_option("--drafter", a->drafter_dir,
                  "the model's MTP drafter (an -assistant checkpoint directory): drafts for speculative decoding");
}

ModelSource Source(const ModelArgs& a, const std::string& tokenizer, TokenizerNeed need) {
  return ModelSource{.dir = a.model_dir,
                     .synthetic_config = a.synthetic_config,
                     .synthetic_seed = a.weights_seed,
                     .tokenizer = tokenizer,
                     .tokenizer_need = need,
                     .drafter_dir = a.drafter_dir};
}

struct Loaded {
  LoadedModel model;
  std::unique_ptr<Backend> backend;
};

Result<std::vector<int32_t>> ParseIds(const std::string& text, const char* flag = "--ids");

// `kv` null: room for one sequence of `context` tokens. The tokenizer per `need` (--tokenizer FILE
// or DIR/tokenizer.json) lands in model.tokenizer.
Result<Loaded> Load(const ModelArgs& a, int64_t context, const KvCacheOptions* kv = nullptr,
                    const std::string& tokenizer = "", TokenizerNeed need = TokenizerNeed::kNone) {
  if (a.model_dir.empty() == a.synthetic_config.empty()) {
    return Status::InvalidArgument("give exactly one of --model DIR and --synthetic CONFIG.json");
  }
  Loaded out;
  TEMPER_ASSIGN_OR_RETURN(out.model, LoadModel(Source(a, tokenizer, need)));
  BackendSpec spec;
  if (!a.gpus.empty()) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<int32_t> gpus, ParseIds(a.gpus, "--gpus"));
    spec.devices.assign(gpus.begin(), gpus.end());
  }
  spec.tp = a.tp;
  spec.threads = a.threads;
  spec.max_context = std::min<int64_t>(out.model.config.max_position_embeddings, std::max<int64_t>(context, 1));
  spec.kv.max_sequences = 1;
  spec.kv.max_tokens = spec.max_context;
  if (kv != nullptr) spec.kv = *kv;
  spec.model_name = a.model_dir.empty() ? a.synthetic_config : a.model_dir;
  TEMPER_ASSIGN_OR_RETURN(out.backend, OpenBackend(spec, out.model));
  return out;
}

Result<std::vector<int32_t>> ParseIds(const std::string& text, const char* flag) {
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
      return Status::InvalidArgument(
          fmt::format("{}: '{}' (item {}) is not a non-negative integer", flag, item, ids.size()));
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
      {"logits", DType::kF32, {T, m.model.config.vocab_size}, bytes(r.logits)},
      {"hidden", DType::kF32, {m.model.config.num_layers + 1, T, m.model.config.hidden_size}, bytes(r.hidden)},
  };
  return WriteSafetensors(a.out, tensors, {{"generator", "temper-lm logits"}});
}

// The whole of stdin.
Result<std::string> ReadStdin() {
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
  if (std::ferror(stdin)) return Status::FromErrno(errno, "reading stdin");
  return text;
}

// ---- encode / decode: the tokenizer alone ----
struct EncodeArgs {
  std::string tokenizer;
  bool add_special_tokens = false;
};

// A tokenizer.json, or the tokenizer of a Gemma 3 .gguf.
Result<std::unique_ptr<const Tokenizer>> LoadTokenizerFile(const std::string& path) {
  return LoadModelTokenizer(ModelSource{.tokenizer = path, .tokenizer_need = TokenizerNeed::kRequired});
}

Status RunEncode(const EncodeArgs& a) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<const Tokenizer> tokenizer, LoadTokenizerFile(a.tokenizer));
  const Tokenizer& tok = *tokenizer;
  TEMPER_ASSIGN_OR_RETURN(std::string text, ReadStdin());
  const std::vector<int32_t> ids = tok.Encode(text, EncodeOptions{.add_special_tokens = a.add_special_tokens});
  std::printf("[%s]\n", fmt::format("{}", fmt::join(ids, ",")).c_str());
  return Status::OK();
}

struct DecodeArgs {
  std::string tokenizer;
  bool skip_special_tokens = false;
};

Status RunDecode(const DecodeArgs& a) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<const Tokenizer> tokenizer, LoadTokenizerFile(a.tokenizer));
  const Tokenizer& tok = *tokenizer;
  TEMPER_ASSIGN_OR_RETURN(std::string input, ReadStdin());
  const nlohmann::json j = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::InvalidArgument("stdin: expected a JSON array of token ids, like [2,9259]");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX) {
      return Status::InvalidArgument(fmt::format("stdin: element {} ({}) is not a token id", i, j[i].dump()));
    }
    ids.push_back(static_cast<int32_t>(j[i].get<int64_t>()));
  }
  TEMPER_ASSIGN_OR_RETURN(std::string text, tok.Decode(ids, a.skip_special_tokens));
  std::fwrite(text.data(), 1, text.size(), stdout);  // exactly the text, so encode | decode round-trips
  return Status::OK();
}

// ---- synthesize: a model directory of seeded random weights ----
struct SynthesizeArgs {
  std::string config;
  uint64_t seed = 0;
  std::string tokenizer;
  std::string out;
};

// A model directory like a real checkpoint's (config.json, model.safetensors and, when given,
// tokenizer.json), so that everything that loads models can be run on it: the `inprocess` endpoint
// of models.yaml, `temper-lm serve --model`. Refuses to write over a model already there.
Status RunSynthesize(const SynthesizeArgs& a) {
  namespace fs = std::filesystem;
  TEMPER_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(a.config));
  const fs::path out(a.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create the directory: {}", a.out, ec.message()));
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    if (fs::exists(out / name)) {
      return Status::AlreadyExists(fmt::format("{}: already holds {}; give an empty directory", a.out, name));
    }
  }
  if (!a.tokenizer.empty()) {
    TEMPER_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(a.tokenizer));
    TEMPER_RETURN_IF_ERROR(CheckTokenizerFitsModel(tok, config, a.tokenizer));
  }
  TEMPER_RETURN_IF_ERROR(WriteSyntheticCheckpoint(out / "model.safetensors", config, a.seed));
  fs::copy_file(a.config, out / "config.json", ec);
  if (!ec && !a.tokenizer.empty()) fs::copy_file(a.tokenizer, out / "tokenizer.json", ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot copy into it: {}", a.out, ec.message()));
  std::printf("%s: %s with seeded random weights (seed %llu)\n", a.out.c_str(), a.config.c_str(),
              static_cast<unsigned long long>(a.seed));
  return Status::OK();
}

// ---- convert: a Gemma 3 GGUF as a model directory ----
struct ConvertArgs {
  std::string gguf;
  std::string out;
};

Status RunConvert(const ConvertArgs& a) {
  TEMPER_RETURN_IF_ERROR(ConvertGgufToDirectory(a.gguf, a.out));
  std::printf("%s: a model directory converted from %s\n", a.out.c_str(), a.gguf.c_str());
  return Status::OK();
}

// ---- generate: prompt ids in, new ids out ----
struct GenerateArgs {
  ModelArgs model;
  std::string ids;
  std::string prompt;
  bool chat = false;
  std::string tokenizer;
  int max_new = 0;
  bool greedy = false;
  bool ignore_eos = false;
  std::string stop;
  SamplingParams sampling;
};

Status RunGenerate(GenerateArgs a) {
  using Clock = std::chrono::steady_clock;
  if (a.ids.empty() == a.prompt.empty()) return Status::InvalidArgument("give exactly one of --ids and --prompt");
  if (a.chat && a.prompt.empty()) return Status::InvalidArgument("--chat needs --prompt");
  // The tokenizer comes first: the prompt's length sizes the backend.
  const ModelSource tokenizer_source = Source(a.model, a.tokenizer, TokenizerNeed::kRequired);
  std::unique_ptr<const Tokenizer> tok;
  if (!a.prompt.empty() || !a.tokenizer.empty()) {
    if (a.tokenizer.empty() && a.model.model_dir.empty()) {
      return Status::InvalidArgument("--prompt with --synthetic needs --tokenizer FILE");
    }
    TEMPER_ASSIGN_OR_RETURN(tok, LoadModelTokenizer(tokenizer_source));
  }
  std::vector<int32_t> ids;
  std::vector<int32_t> chat_stops;
  if (a.prompt.empty()) {
    TEMPER_ASSIGN_OR_RETURN(ids, ParseIds(a.ids));
  } else if (a.chat) {
    TEMPER_ASSIGN_OR_RETURN(ChatFormat format, ChatFormat::Create(*tok));
    Conversation conversation;
    conversation.messages.push_back(ChatMessage{.role = ChatRole::kUser, .content = a.prompt});
    TEMPER_ASSIGN_OR_RETURN(RenderedPrompt rendered, format.Render(conversation));
    ids = std::move(rendered.ids);
    chat_stops = format.stop_ids();
  } else {
    ids = tok->Encode(a.prompt, EncodeOptions{.add_special_tokens = true});
  }
  TEMPER_ASSIGN_OR_RETURN(Loaded m, Load(a.model, static_cast<int64_t>(ids.size()) + a.max_new));
  if (tok) {
    TEMPER_RETURN_IF_ERROR(CheckTokenizerFitsModel(*tok, m.model.config, ModelTokenizerPath(tokenizer_source)));
  }
  if (a.greedy) a.sampling.temperature = 0;
  if (!a.stop.empty()) {
    TEMPER_ASSIGN_OR_RETURN(a.sampling.stop_tokens, ParseIds(a.stop, "--stop"));
  } else if (!a.ignore_eos) {
    a.sampling.stop_tokens.assign(m.model.config.eos_token_ids.begin(), m.model.config.eos_token_ids.end());
    a.sampling.stop_tokens.insert(a.sampling.stop_tokens.end(), chat_stops.begin(), chat_stops.end());
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
  if (tok) {
    TEMPER_ASSIGN_OR_RETURN(std::string text, tok->Decode(produced));
    std::printf("%s\n", text.c_str());
  }
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
  std::string tokenizer;
  int64_t context = 8192;
  KvCacheOptions kv{.max_sequences = 16, .block_tokens = 16, .max_tokens = 65536, .max_snapshots = 64};
  int64_t max_batch_tokens = 512;
  int draft_tokens = kMaxDraftTokens;
  int64_t history_tokens = OutputHistoryOptions{}.max_tokens;
  std::string api_key;
  std::string api_key_file;
  HttpServerOptions http;  // the limits; host, port, model and chat are filled in from the rest
};

// The key in `path`: its first line, trimmed. InvalidArgument naming the file when it is empty.
Result<std::string> ReadKeyFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return Status::FromErrno(errno, "--api-key-file " + path);
  std::string key;
  for (int c = std::fgetc(f); c != EOF && c != '\n'; c = std::fgetc(f)) key.push_back(static_cast<char>(c));
  std::fclose(f);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
  if (key.empty()) return Status::InvalidArgument(fmt::format("--api-key-file {}: the file holds no key", path));
  return key;
}

Status RunServe(const ServeArgs& a) {
  // Block the stop signals before any thread starts, so every thread inherits the mask and this
  // one can wait for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client that hangs up is an EPIPE for the write to it, never the end of the server.
  signal(SIGPIPE, SIG_IGN);

  const Logger log(LogLevel::kInfo);
  // Checked before the model loads, so a refused start says so at once.
  const bool keyed = !a.api_key.empty() || !a.api_key_file.empty();
  if (!keyed && !IsLoopbackBindHost(a.host)) {
    return Status::InvalidArgument(fmt::format(
        "--host {}: without an API key the server listens on loopback only (127.0.0.1, ::1 or localhost), since "
        "anyone who reaches another address could use the model; add --api-key-file FILE (or --api-key KEY) to "
        "listen on {}",
        a.host.empty() ? "''" : a.host, a.host.empty() ? "all interfaces" : a.host));
  }
  TEMPER_ASSIGN_OR_RETURN(HostAllowList hosts, HostAllowList::For(a.host, a.http.allowed_hosts));
  if (!keyed) {
    log.Warning(
        "no API key: listening on loopback only, where any local user or process may use the model; add "
        "--api-key-file FILE to require a key");
  }
  TEMPER_ASSIGN_OR_RETURN(Loaded m, Load(a.model, a.context, &a.kv, a.tokenizer, TokenizerNeed::kIfPresent));
  SchedulerOptions sched;
  sched.max_batch_tokens = a.max_batch_tokens;
  sched.speculation.max_draft_tokens = a.draft_tokens;
  sched.speculation.history.max_tokens = a.history_tokens;
  // With a tokenizer the chat engine owns the scheduler; without one there is only the token API.
  std::unique_ptr<ChatEngine> chat;
  std::unique_ptr<Scheduler> own_scheduler;
  Scheduler* scheduler = nullptr;
  if (m.model.tokenizer != nullptr) {
    TEMPER_ASSIGN_OR_RETURN(chat, ChatEngine::Create(*m.backend, *m.model.tokenizer, sched, log));
    scheduler = &chat->scheduler();
    log.Info("tokenizer {}: /v1/chat/completions enabled",
             ModelTokenizerPath(Source(a.model, a.tokenizer, TokenizerNeed::kIfPresent)));
  } else {
    TEMPER_ASSIGN_OR_RETURN(own_scheduler, Scheduler::Create(*m.backend, sched, log));
    scheduler = own_scheduler.get();
    log.Warning("no tokenizer (no DIR/tokenizer.json, no --tokenizer): /v1/chat/completions will answer with an error");
  }
  HttpServerOptions http = a.http;
  if (!a.api_key_file.empty()) {
    TEMPER_ASSIGN_OR_RETURN(http.api_key, ReadKeyFile(a.api_key_file));
  } else {
    http.api_key = a.api_key;
  }
  http.chat = chat.get();
  http.host = a.host;
  http.port = a.port;
  http.model_name = a.model_name;
  if (http.model_name.empty()) {
    http.model_name = !a.model.model_dir.empty() ? std::filesystem::path(a.model.model_dir).filename().string()
                                                 : std::filesystem::path(a.model.synthetic_config).stem().string();
  }
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::Start(*scheduler, http, log));
  const KvUsage kv = m.backend->kv_usage();
  log.Info("serving '{}' on http://{}:{} (KV pool {} tokens, {} sequences, {} cached prefixes; {})", http.model_name,
           a.host, server->port(), kv.total_blocks * kv.block_tokens, kv.max_sequences, kv.max_snapshots,
           http.api_key.empty() ? "no API key" : "API key required");
  log.Info("answering requests whose Host is {}", hosts.Describe());
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
  auto* gen_ids = gc->add_option("--ids", gen.ids, "prompt token ids, comma-separated");
  auto* gen_prompt = gc->add_option("--prompt", gen.prompt, "prompt text, encoded with the tokenizer (<bos> first)");
  gen_ids->excludes(gen_prompt);
  gc->add_flag("--chat", gen.chat, "render --prompt as a user turn of the tokenizer's chat format (Gemma 4 or 3)");
  gc->add_option("--tokenizer", gen.tokenizer, "tokenizer.json (default: DIR/tokenizer.json when a prompt is given)");
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

  EncodeArgs enc;
  CLI::App* ec = app.add_subcommand("encode", "token ids of the text on stdin, as a JSON array");
  ec->add_option("--tokenizer", enc.tokenizer, "tokenizer.json, or a Gemma 3 .gguf")->required();
  ec->add_flag("--add-special-tokens", enc.add_special_tokens, "wrap as the post-processor does (Gemma: <bos> first)");
  ec->callback([&] { run = [&] { return RunEncode(enc); }; });

  DecodeArgs dec;
  CLI::App* dc = app.add_subcommand("decode", "text of the JSON array of token ids on stdin");
  dc->add_option("--tokenizer", dec.tokenizer, "tokenizer.json, or a Gemma 3 .gguf")->required();
  dc->add_flag("--skip-special-tokens", dec.skip_special_tokens, "drop special tokens (<bos>, <turn|>, ...)");
  dc->callback([&] { run = [&] { return RunDecode(dec); }; });
  SynthesizeArgs synth;
  CLI::App* yc = app.add_subcommand("synthesize", "write a model directory of seeded random weights for a config.json");
  yc->add_option("--config", synth.config, "config.json whose shapes the weights take")->required();
  yc->add_option("--seed", synth.seed, "weights seed")->capture_default_str();
  yc->add_option("--tokenizer", synth.tokenizer, "tokenizer.json to copy in (checked to fit the vocabulary)");
  yc->add_option("--out", synth.out, "the model directory to write")->required();
  yc->callback([&] { run = [&] { return RunSynthesize(synth); }; });

  ConvertArgs conv;
  CLI::App* cv = app.add_subcommand("convert", "write a Gemma 3 GGUF file as a model directory (bf16 safetensors)");
  cv->add_option("gguf", conv.gguf, "the .gguf file")->required();
  cv->add_option("out", conv.out, "the model directory to write (must not exist, or be empty)")->required();
  cv->callback([&] { run = [&] { return RunConvert(conv); }; });

  ServeArgs serve;
  CLI::App* sc = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /health, /metrics)");
  AddModelOptions(sc, &serve.model);
  sc->add_option(
      "--host", serve.host,
      "address to listen on (default 127.0.0.1). Without an API key only a loopback address (127.0.0.1, ::1, "
      "localhost) is taken. On 0.0.0.0 or :: (key required) requests may name any IP address in Host, since "
      "the server cannot list those clients use and a DNS-rebinding page always sends a name; names still "
      "need --allowed-host");
  sc->add_option("--port", serve.port, "port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  sc->add_option("--model-name", serve.model_name, "the model name clients send (default: the model directory's name)");
  sc->add_option("--context", serve.context, "longest sequence, prompt plus output")->check(CLI::PositiveNumber);
  sc->add_option("--kv-tokens", serve.kv.max_tokens, "paged KV pool size in tokens")->check(CLI::PositiveNumber);
  sc->add_option("--max-sequences", serve.kv.max_sequences, "sequences decoded at once")->check(CLI::PositiveNumber);
  sc->add_option("--max-snapshots", serve.kv.max_snapshots, "prefixes the prefix cache may pin (0: no cache)")
      ->check(CLI::NonNegativeNumber);
  sc->add_option("--tokenizer", serve.tokenizer,
                 "tokenizer.json for /v1/chat/completions (default: DIR/tokenizer.json if present)");
  sc->add_option("--max-batch-tokens", serve.max_batch_tokens, "tokens per forward pass")->check(CLI::PositiveNumber);
  sc->add_option("--draft-tokens", serve.draft_tokens,
                 "most prompt-lookup draft tokens checked per decode step (0: no speculation)")
      ->check(CLI::Range(0, kMaxDraftTokens))
      ->capture_default_str();
  sc->add_option("--history-tokens", serve.history_tokens,
                 "tokens of earlier replies kept to draft from (0: none, so that no client can tell from its "
                 "accepted drafts what another client's replies held)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* key = sc->add_option("--api-key", serve.api_key,
                             "clients must send 'Authorization: Bearer KEY' (visible in ps: prefer --api-key-file)");
  auto* key_file = sc->add_option("--api-key-file", serve.api_key_file, "file whose first line is the API key");
  key->excludes(key_file);
  sc->add_option("--allowed-host", serve.http.allowed_hosts,
                 "a host name (or IP) clients reach the server by, answered besides the bound address's own (its IP; "
                 "localhost on loopback; any IP on 0.0.0.0 or ::); repeatable. Requests naming another Host get 421, "
                 "so a web page cannot reach the server through DNS rebinding")
      ->allow_extra_args(false);
  sc->add_option("--max-body-bytes", serve.http.max_body_bytes, "larger request bodies get 413 without being read")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sc->add_option("--max-json-depth", serve.http.max_json_depth, "request bodies nesting JSON deeper get 400")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto seconds = [](std::chrono::milliseconds* out) {
    return [out](double s) { *out = std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  };
  sc->add_option_function<double>("--header-timeout", seconds(&serve.http.header_timeout),
                                  "seconds for a request's line and headers to arrive (default 10)")
      ->check(CLI::PositiveNumber);
  sc->add_option_function<double>("--body-timeout", seconds(&serve.http.body_timeout),
                                  "seconds for a request's body to arrive after its headers (default 30)")
      ->check(CLI::PositiveNumber);
  sc->add_option_function<double>("--idle-timeout", seconds(&serve.http.idle_timeout),
                                  "seconds a kept-alive connection may wait for its next request (default 60)")
      ->check(CLI::PositiveNumber);
  sc->add_option("--max-connections", serve.http.max_connections, "connections open at once; more get 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sc->add_option("--http-threads", serve.http.threads, "requests processed at once (a streaming reply holds one)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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
