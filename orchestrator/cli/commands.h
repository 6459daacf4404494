// The `temper` CLI's subcommands. Each Add*Command registers one subcommand on the app; when the
// user picks it, its callback stores the work to do in `run`, which main executes after parsing.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "orchestrator/cli/connection.h"

namespace temper::cli {

struct CommandContext {
  ConnectionOptions connection;
  std::function<Status()> run;
};

void AddSubmitCommand(CLI::App& app, CommandContext& ctx);
void AddListCommand(CLI::App& app, CommandContext& ctx);
void AddStatusCommand(CLI::App& app, CommandContext& ctx);
void AddCancelCommand(CLI::App& app, CommandContext& ctx);
void AddWatchCommand(CLI::App& app, CommandContext& ctx);
void AddReportCommand(CLI::App& app, CommandContext& ctx);
void AddExportCommand(CLI::App& app, CommandContext& ctx);
void AddRevertCommand(CLI::App& app, CommandContext& ctx);
// Local commands on rootfs targets (stig_commands.cpp); they run in the CLI process, as root.
void AddTargetCommand(CLI::App& app, CommandContext& ctx);
void AddBaselineCommand(CLI::App& app, CommandContext& ctx);

}  // namespace temper::cli
