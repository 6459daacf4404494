// temper: the command-line client of temperd.
//
// Exit status: 0 on success, 1 when the daemon refused or failed the request (or cannot be reached),
// 2 for a usage error; `temper watch BATCH` ends with the batch's outcome: 0 completed, 3 failed,
// 4 cancelled (commands.h).
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "orchestrator/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app("temper: submit STIG remediation batches to temperd and follow them", "temper");
  app.require_subcommand(1);
  temper::cli::CommandContext ctx;
  if (const char* socket = std::getenv("TEMPER_SOCKET")) ctx.connection.socket = socket;
  if (const char* address = std::getenv("TEMPER_ADDRESS")) ctx.connection.address = address;
  app.add_option("--socket", ctx.connection.socket, "temperd's unix socket (env TEMPER_SOCKET)")->capture_default_str();
  app.add_option("--address", ctx.connection.address, "host:port of temperd's TCP port (env TEMPER_ADDRESS)");
  app.add_option("--tls-ca", ctx.connection.tls_ca, "CA certificate (PEM) for --address");
  app.add_option("--token-file", ctx.connection.token_file, "bearer token file for --address");
  app.add_option("--timeout", ctx.connection.timeout_seconds, "seconds to wait for an answer")->capture_default_str();
  app.set_version_flag("--version", "temper 0.1.0");

  temper::cli::AddSubmitCommand(app, ctx);
  temper::cli::AddListCommand(app, ctx);
  temper::cli::AddStatusCommand(app, ctx);
  temper::cli::AddCancelCommand(app, ctx);
  temper::cli::AddRebootedCommand(app, ctx);
  temper::cli::AddWatchCommand(app, ctx);
  temper::cli::AddReportCommand(app, ctx);
  temper::cli::AddHostsCommand(app, ctx);
  temper::cli::AddTwinCommand(app, ctx);
  temper::cli::AddExportCommand(app, ctx);
  temper::cli::AddRevertCommand(app, ctx);
  temper::cli::AddLibraryCommand(app, ctx);
  temper::cli::AddApplyCommand(app, ctx);
  temper::cli::AddTargetCommand(app, ctx);
  temper::cli::AddBaselineCommand(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help and --version exit 0; usage errors print and exit 2
  }
  if (!ctx.run) return 2;
  temper::Status status = ctx.run();
  if (!status.ok()) {
    std::fprintf(stderr, "temper: %s\n", status.message().c_str());
    return status.code() == temper::StatusCode::kInvalidArgument && status.message().rfind("--", 0) == 0 ? 2 : 1;
  }
  return ctx.exit_status;
}
