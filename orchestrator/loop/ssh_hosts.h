// SshHosts: the SSH hosts temperd knows and what last happened on each, for `temper hosts` and for
// the loop runner (which refuses batches on a host that needs a human).
//
// Hosts come from temperd.yaml (targets of type ssh) or from a submit naming user@name[:port];
// those are remembered, with every host's state, in <state_dir>/ssh/hosts.json (written whole and
// renamed into place), so a restarted daemon still knows them and still refuses a host that needs
// a human until a person clears it.
// States (HostState): idle, running, needs_human; their names are what hosts.json and `temper hosts`
// show.
// Thread safety: all methods are thread-safe (the gRPC service and the loop threads share one).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/records.h"
#include "stig/ssh/ssh_connection.h"

namespace temper {

enum class HostState {
  kIdle,        // no batch on it
  kRunning,     // a batch runs on it
  kNeedsHuman,  // a revert failed: no batch runs on it until a person clears it
};
std::string_view HostStateName(HostState state);  // "idle", "running", "needs_human"
std::optional<HostState> ParseHostState(std::string_view name);

struct SshHostState {
  TargetConfig target;  // type ssh
  bool configured = false;
  HostState state = HostState::kIdle;
  std::string detail;
  int64_t last_batch = 0;
  TimeMs updated_at = 0;
};

class SshHosts {
 public:
  // Reads hosts.json (a missing file is an empty registry) and adds temperd.yaml's ssh targets.
  // DataLoss for a file that does not parse or holds an unknown state, naming it.
  static Result<std::unique_ptr<SshHosts>> Open(const DaemonConfig& config);

  // The target for `spec` (user@name[:port]): the known host with that login, name and port
  // (configured ones included), else a new one registered now; `created` tells which.
  // InvalidArgument for a malformed spec; AlreadyExists when its name is a configured target that
  // is not this host.
  Result<TargetConfig> FromSubmit(const std::string& spec, bool* created = nullptr);
  // The target name a batch for `spec` goes to: the known host's, else NameFor(spec).
  std::string TargetNameFor(const std::string& spec) const;
  std::vector<SshHostState> List() const;
  std::optional<SshHostState> Find(const std::string& name) const;
  // Targets named on submit (configured ones are in the config).
  std::vector<TargetConfig> Submitted() const;

  Status SetState(const std::string& name, HostState state, const std::string& detail, int64_t batch);
  // needs_human -> idle. NotFound for an unknown host; FailedPrecondition while running.
  Result<SshHostState> Clear(const std::string& name);

  // The target name a submitted host gets: "user@name", with ":port" when the port is not 22.
  static std::string NameFor(const std::string& spec);

 private:
  explicit SshHosts(const DaemonConfig& config) : config_(config) {}
  Status SaveLocked() const;
  const SshHostState* FindLocked(const std::string& name, const stig::SshEndpoint& endpoint) const;

  const DaemonConfig& config_;
  std::string path_;
  mutable std::mutex mu_;
  std::vector<SshHostState> hosts_;
};

}  // namespace temper
