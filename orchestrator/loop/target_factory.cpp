#include "orchestrator/loop/target_factory.h"

#include <fmt/format.h>

#include "stig/rootfs/rootfs_target.h"

namespace temper {

Result<stig::SshTargetOptions> SshTargetOptionsFor(const TargetConfig& target, const DaemonConfig& config) {
  stig::SshTargetOptions o;
  o.name = target.name;
  TEMPER_ASSIGN_OR_RETURN(o.ssh.endpoint, stig::SshEndpoint::Parse(target.host));
  o.ssh.identity_file = target.key_file.empty() ? config.ssh.key_file : target.key_file;
  o.ssh.known_hosts = target.known_hosts.empty() ? config.ssh.known_hosts : target.known_hosts;
  o.ssh.control_dir = config.ssh.control_dir;
  o.ssh.connect_timeout = config.ssh.connect_timeout;
  o.host_dir = config.ssh.host_dir;
  o.reconnect_tries = config.ssh.reconnect_tries;
  o.reconnect_pause = config.ssh.reconnect_pause;
  return o;
}

Result<std::unique_ptr<stig::Target>> OpenTarget(const TargetConfig& target, const DaemonConfig& config,
                                                 const Logger& log) {
  if (target.type == "ssh") {
    TEMPER_ASSIGN_OR_RETURN(stig::SshTargetOptions options, SshTargetOptionsFor(target, config));
    Result<std::unique_ptr<stig::SshTarget>> opened = stig::SshTarget::Open(std::move(options), log);
    if (!opened.ok()) return opened.status();  // names the target and the host already
    return std::unique_ptr<stig::Target>(std::move(*opened));
  }
  // `temper target create` lays a rootfs target out as <path>/root (the root) and <path>/state.
  Result<std::unique_ptr<stig::RootfsTarget>> opened = stig::RootfsTarget::Open(
      target.name, target.path + "/state", target.path + "/root", config.package_cache, config.sandbox);
  if (!opened.ok()) return opened.status().WithContext(fmt::format("target {} ({})", target.name, target.path));
  return std::unique_ptr<stig::Target>(std::move(*opened));
}

}  // namespace temper
