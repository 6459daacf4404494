// The `temper` CLI's subcommands. Each Add*Command registers one subcommand on the app; when the
// user picks it, its callback stores the work to do in `run`, which main executes after parsing.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "orchestrator/cli/connection.h"
#include "temper/v1/temper.pb.h"

namespace temper::cli {

struct CommandContext {
  ConnectionOptions connection;
  std::function<Status()> run;
  // The exit status when `run` succeeds: 0, or an outcome a command reports through it (watch BATCH).
  int exit_status = 0;
};

// `temper watch BATCH`'s exit status once the batch has ended (1 and 2 are the CLI's errors).
inline constexpr int kExitCompleted = 0;
inline constexpr int kExitBatchFailed = 3;
inline constexpr int kExitBatchCancelled = 4;

void AddSubmitCommand(CLI::App& app, CommandContext& ctx);
void AddListCommand(CLI::App& app, CommandContext& ctx);
void AddStatusCommand(CLI::App& app, CommandContext& ctx);
void AddCancelCommand(CLI::App& app, CommandContext& ctx);
// temper rebooted BATCH: the host rebooted; verify the batch's reboot_pending rules (batch_commands.cpp).
void AddRebootedCommand(CLI::App& app, CommandContext& ctx);
void AddWatchCommand(CLI::App& app, CommandContext& ctx);
void AddReportCommand(CLI::App& app, CommandContext& ctx);
void AddHostsCommand(CLI::App& app, CommandContext& ctx);
void AddExportCommand(CLI::App& app, CommandContext& ctx);
void AddRevertCommand(CLI::App& app, CommandContext& ctx);
// temper library list|show|export|retire: the library of proven fixes (library_commands.cpp).
void AddLibraryCommand(CLI::App& app, CommandContext& ctx);
// temper apply BATCH --host H ...: a batch's kept fixes onto a fleet (apply_command.cpp).
void AddApplyCommand(CLI::App& app, CommandContext& ctx);
// temper twin create|list|remove: copies of SSH hosts as rootfs targets (twin_commands.cpp).
void AddTwinCommand(CLI::App& app, CommandContext& ctx);
// Local commands on rootfs targets (stig_commands.cpp); they run in the CLI process, as root.
void AddTargetCommand(CLI::App& app, CommandContext& ctx);
void AddBaselineCommand(CLI::App& app, CommandContext& ctx);

// The `temper hosts` table (host_commands.cpp).
std::string RenderHostTable(const temper::v1::ListHostsResponse& list);

}  // namespace temper::cli
