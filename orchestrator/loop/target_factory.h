// OpenTarget: the stig::Target a configured (or submitted) target names — a rootfs sandbox laid out
// by `temper target create`, or an SSH host reached with temperd's ssh settings.
// Thread safety: pure functions; the target returned is single-owner.
#pragma once

#include <memory>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "stig/ssh/ssh_target.h"
#include "stig/target.h"

namespace temper {

// Errors as RootfsTarget::Open or SshTarget::Open, with the target's name.
Result<std::unique_ptr<stig::Target>> OpenTarget(const TargetConfig& target, const DaemonConfig& config,
                                                 const Logger& log);

// The SSH target's options: the target's own key file and known_hosts, else the `ssh:` section's.
Result<stig::SshTargetOptions> SshTargetOptionsFor(const TargetConfig& target, const DaemonConfig& config);

}  // namespace temper
