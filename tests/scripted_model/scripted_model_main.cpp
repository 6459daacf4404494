// temper-scripted-model: the scripted OpenAI-compatible model server as a process, for manual runs
// and the benchmark (point models.yaml's roles at the URL it prints):
//   temper-scripted-model --listen 127.0.0.1:0 --script rules.yaml
// prints "http://127.0.0.1:N/v1" on stdout once it accepts, logs one line per request on stderr,
// and serves until SIGINT or SIGTERM, when it logs a summary line (serving_metrics.h).
//
// Answers are instant unless a latency model is given (latency_model.h), to time the loop as it
// would run on real hardware:
//   temper-scripted-model --simulate reference-box               # vLLM 0.19, Gemma 4 31B bf16, 4×L4
//   temper-scripted-model --simulate reference-box-mtp           # the same with MTP k = 2, max model len 16384
//   temper-scripted-model --simulate temper-4xl4                 # temper's engine on that box, prompt lookup
//   temper-scripted-model --decode-tok-s 15 --batch-curve 2:29,4:55,8:100 --prefill-tok-s 2300
// Flags given with --simulate override the preset's values. --no-pacing answers at once and only
// accounts the simulated time (simulated_engine.h), for a serial loop's time on the box in minutes.
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/log.h"
#include "scripted_model/scripted_model_server.h"

namespace {

using temper::Result;
using temper::Status;

// "HOST:PORT", "[::1]:PORT" or ":PORT" (127.0.0.1).
Status ParseListen(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument(fmt::format("--listen '{}' is not HOST:PORT", text));
  *host = text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "127.0.0.1";
  const std::string p = text.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), *port);
  if (p.empty() || ec != std::errc() || end != p.data() + p.size() || *port < 0 || *port > 65535) {
    return Status::InvalidArgument(fmt::format("--listen '{}': '{}' is not a port number (0-65535)", text, p));
  }
  return Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("temper-scripted-model: an OpenAI-compatible server answering temper's roles from each rule's fix text");
  std::string listen = "127.0.0.1:0", script_path, log_level = "info";
  size_t threads = 16;
  app.add_option("--listen", listen, "HOST:PORT to listen on; port 0 picks a free one")->capture_default_str();
  app.add_option("--script", script_path, "YAML model script (see tests/scripted_model/model_script.h)");
  app.add_option("--threads", threads, "requests served at once")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  temper::scripted::LatencyFlags latency;
  app.add_option("--simulate", latency.simulate,
                 "answer with the model time of a preset: reference-box (vLLM 0.19, Gemma 4 31B bf16, TP 4 on 4×L4), "
                 "reference-box-mtp (the same with the MTP drafter, k = 2, KV 45,336 tokens, --max-model-len 16384) "
                 "or temper-4xl4 (temper's engine on that box, prompt-lookup speculation); sources in "
                 "tests/scripted_model/latency_model.cpp");
  app.add_option("--decode-tok-s", latency.decode_tok_s, "one stream's decode rate, tokens/s");
  app.add_option("--batch-curve", latency.batch_curve,
                 "aggregate decode tokens/s at N streams decoding at once, N:RATE,... (e.g. 1:14.9,2:29.1,8:101.1); "
                 "linear between points, held after the last");
  app.add_option("--prefill-tok-s", latency.prefill_tok_s, "prefill rate for prompt tokens not in the prefix cache");
  app.add_option("--kv-tokens", latency.kv_tokens, "KV cache capacity in tokens (prompt + completion); 0: unbounded");
  app.add_option("--max-seqs", latency.max_seqs, "requests the engine runs at once; 0: unbounded");
  app.add_option("--prefix-cache-prompts", latency.prefix_cache_prompts,
                 "recent prompts the prefix cache holds; 0: no prefix cache");
  app.add_option("--speedup", latency.speedup,
                 "run the model this many times faster than the box it describes (every rate times it): a "
                 "paced run of hours in minutes, as on that box with the loop's harness that many times slower");
  std::string transcript;
  app.add_option("--transcript", transcript,
                 "append every answered request to this file, one JSON line each (messages, tools, answer)");
  bool no_pacing = false;
  app.add_flag("--no-pacing", no_pacing,
               "answer at once and only account the simulated time, each request as if alone (a serial loop's "
               "time on the simulated box is then its wall time plus the simulated busy time)");
  CLI11_PARSE(app, argc, argv);

  auto level = temper::ParseLogLevel(log_level);
  if (!level.ok()) {
    std::fprintf(stderr, "temper-scripted-model: %s\n", level.status().message().c_str());
    return 2;
  }
  temper::Logger logger(*level);
  temper::scripted::ScriptedModelOptions options;
  options.threads = threads;
  options.logger = &logger;
  options.transcript = transcript;
  auto model = temper::scripted::LatencyFromFlags(latency);
  if (!model.ok()) {
    logger.Error("{}", model.status().message());
    return 2;
  }
  options.latency = std::move(*model);
  if (no_pacing && !options.latency) {
    logger.Error("--no-pacing needs a latency model (--simulate, --decode-tok-s, ...)");
    return 2;
  }
  options.pacing = no_pacing ? temper::scripted::Pacing::kNone : temper::scripted::Pacing::kWallClock;
  if (options.latency) {
    logger.Info("scripted model: simulating model time{}: {}", no_pacing ? " without pacing (accounting only)" : "",
                options.latency->Describe());
  }
  if (Status s = ParseListen(listen, &options.host, &options.port); !s.ok()) {
    logger.Error("{}", s.message());
    return 2;
  }
  temper::scripted::ModelScript script;
  if (!script_path.empty()) {
    auto loaded = temper::scripted::LoadModelScript(script_path);
    if (!loaded.ok()) {
      logger.Error("{}", loaded.status().message());
      return 2;
    }
    script = std::move(*loaded);
  }

  // Blocked before the server's threads start, so they inherit the mask and only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = temper::scripted::ScriptedModelServer::Start(std::move(script), options);
  if (!server.ok()) {
    logger.Error("{}", server.status().message());
    return 1;
  }
  std::printf("%s\n", (*server)->base_url().c_str());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  logger.Info("scripted model: signal {}, stopping: {}", signal_number,
              temper::scripted::SummaryLine((*server)->Metrics()));
  return 0;
}
