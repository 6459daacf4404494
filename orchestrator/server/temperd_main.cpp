// temperd: the temper daemon. Serves temper.v1 on a unix socket (and TCP with TLS when configured),
// tells systemd when it is ready and when it stops, and shuts down cleanly on SIGTERM or SIGINT.
// SIGPIPE is ignored: a peer that went away is an EPIPE for the code that wrote to it.
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <CLI/CLI.hpp>

#include "common/log.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/config/models_config.h"
#include "orchestrator/server/daemon.h"
#include "orchestrator/token_auth.h"
#include "stig/scap/disa_stig.h"

namespace {

// temperd's oom_score_adj: when the host runs out of memory, the daemon that can stop and revert
// what runs in its sandboxes (whose processes are the first choice, at 1000: platform/sandbox.h) is
// among the last to go. Not -1000, which would make it unkillable even when it is the leak.
constexpr int kOomScoreAdj = -900;

// Lowering the score takes CAP_SYS_RESOURCE; without it temperd runs unshielded and says so.
void ShieldFromOomKiller(const temper::Logger& log) {
  FILE* f = std::fopen("/proc/self/oom_score_adj", "we");
  bool ok = f != nullptr && std::fprintf(f, "%d", kOomScoreAdj) > 0;
  int e = errno;
  if (f != nullptr && std::fclose(f) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    log.Warning("temperd cannot shield itself from the OOM killer (oom_score_adj {}): {}", kOomScoreAdj,
                std::strerror(e));
  }
}

int Run(int argc, char** argv) {
  CLI::App app("temperd: hardens hosts against STIG rules with an LLM remediation loop", "temperd");
  std::string config_path = "/etc/temper/temperd.yaml";
  std::string log_level_override;
  bool check_only = false;
  app.add_option("-c,--config", config_path, "daemon configuration file")->capture_default_str();
  app.add_option("--log-level", log_level_override, "debug, info, warning or error (overrides the config)");
  app.add_flag("--check-config", check_only,
               "validate the configuration (and models.yaml, the DISA STIGs of disa_stigs: and the dashboard's token "
               "file) and exit");
  app.set_version_flag("--version", "temperd 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  temper::Result<temper::DaemonConfig> config = temper::LoadDaemonConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "temperd: %s\n", config.status().message().c_str());
    return 1;
  }
  if (!log_level_override.empty()) {
    temper::Result<temper::LogLevel> level = temper::ParseLogLevel(log_level_override);
    if (!level.ok()) {
      std::fprintf(stderr, "temperd: --log-level: %s\n", level.status().message().c_str());
      return 2;
    }
    config->log_level = *level;
  }
  temper::Logger log(config->log_level);

  // A write to a pipe or socket whose reader is gone (a child that exited before reading its stdin,
  // a client that hung up) must fail with EPIPE where it happens, not end the daemon: SIGPIPE's
  // default action is to terminate.
  signal(SIGPIPE, SIG_IGN);
  // Signals are taken synchronously by the main thread (sigwait); every thread started after this
  // inherits the mask, so no handler ever runs on a gRPC thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (check_only) {
    if (!config->models_file.empty()) {
      temper::Result<temper::ModelsConfig> models = temper::LoadModelsConfig(config->models_file);
      if (!models.ok()) {
        std::fprintf(stderr, "temperd: models: %s\n", models.status().message().c_str());
        return 1;
      }
    } else {
      // Valid, but a new user's batches would wait for ever: say so before they find out.
      std::fprintf(stderr,
                   "temperd: warning: %s has no `models:` entry naming a models.yaml, so no model serves the roles "
                   "architect, worker, reflector: batches are accepted and stay queued (see config/models.yaml)\n",
                   config_path.c_str());
    }
    if (config->dashboard) {
      auto token = temper::ReadTokenFile(config->dashboard->token_file);
      if (!token.ok()) {
        std::fprintf(stderr, "temperd: listen.dashboard.token_file: %s\n", token.status().message().c_str());
        return 1;
      }
    }
    if (!config->disa_stigs_dir.empty()) {
      auto stigs = temper::stig::ReadDisaStigDirectory(config->disa_stigs_dir);
      if (!stigs.ok()) {
        std::fprintf(stderr, "temperd: disa_stigs: %s\n", stigs.status().message().c_str());
        return 1;
      }
    }
    std::printf("%s: OK\n", config_path.c_str());
    return 0;
  }

  ShieldFromOomKiller(log);
  temper::Result<std::unique_ptr<temper::Daemon>> daemon =
      temper::Daemon::Start(*config, log, &grpc::reflection::InitProtoReflectionServerBuilderPlugin);
  if (!daemon.ok()) {
    log.Error("cannot start: {}", daemon.status().message());
    return 1;
  }
  std::string listeners = (*daemon)->DescribeListeners();
  log.Info("temperd ready, serving on {}", listeners);
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s\nMAINPID=%d", listeners.c_str(), static_cast<int>(getpid()));

  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      log.Info("SIGHUP ignored: restart temperd to apply configuration changes");
      continue;
    }
    log.Info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
  (*daemon)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
