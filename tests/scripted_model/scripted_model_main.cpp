// temper-scripted-model: the scripted OpenAI-compatible model server as a process, for manual runs
// and the benchmark (point models.yaml's roles at the URL it prints):
//   temper-scripted-model --listen 127.0.0.1:0 --script rules.yaml
// prints "http://127.0.0.1:N/v1" on stdout once it accepts, logs one line per request on stderr,
// and serves until SIGINT or SIGTERM.
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
  logger.Info("scripted model: signal {}, stopping after {} requests", signal_number, (*server)->requests().size());
  return 0;
}
