// SshHosts: the SSH hosts temperd knows and what last happened on each, for `temper hosts` and for
// the loop runner (which refuses batches on a host that needs a human).
//
// Hosts come from temperd.yaml (targets of type ssh) or from an admin's submit naming
// user@name[:port]; a submit by anyone else may name only a host already registered (issue 46: any
// member could otherwise grow the registry, and with it temperd, without bound). Registered hosts
// are capped by ssh.max_hosts. They are remembered, with every host's state, in
// <state_dir>/ssh/hosts.json (written whole and renamed into place), so a restarted daemon still
// knows them and still refuses a host that needs a human until a person clears it.
// A start never fails on what that file holds: an entry that is not a valid host is logged (file
// and entry) and skipped, but kept in the file as it was; a file that is not a JSON array is
// copied aside (logged) and the registry starts with the configured hosts only.
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

#include <nlohmann/json.hpp>

#include "common/log.h"
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

// Whether a submit may add a host the registry does not know (only an admin's may).
enum class HostRegistration { kKnownOnly, kMayRegister };

class SshHosts {
 public:
  // Reads hosts.json (a missing file is an empty registry) and adds temperd.yaml's ssh targets.
  // What the file holds never fails the start (see above); IOError only when a file that does not
  // parse cannot be copied aside. `config` and `log` must outlive the registry.
  static Result<std::unique_ptr<SshHosts>> Open(const DaemonConfig& config, const Logger& log);

  // The target for `spec` (user@name[:port]): the known host with that login, name and port
  // (configured ones included), else, with kMayRegister, a new one registered now; `created` tells
  // which. InvalidArgument for a malformed spec; PermissionDenied for an unknown host with
  // kKnownOnly; ResourceExhausted when ssh.max_hosts hosts are registered already; AlreadyExists
  // when its name is a configured target that is not this host.
  Result<TargetConfig> FromSubmit(const std::string& spec, HostRegistration registration, bool* created = nullptr);
  // Whether `spec` names a host the registry knows (configured or registered).
  bool Knows(const std::string& spec) const;
  // The refusal for a submit that names the unknown host `spec` without the right to register it.
  static Status NotRegistered(const std::string& spec);
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
  SshHosts(const DaemonConfig& config, const Logger& log) : config_(config), log_(log) {}
  // Reads the stored hosts, skipping (and keeping in `kept_invalid_`) entries that are not hosts.
  Result<std::vector<SshHostState>> ReadStored();
  Status SaveLocked() const;
  const SshHostState* FindLocked(const std::string& name, const stig::SshEndpoint& endpoint) const;

  const DaemonConfig& config_;
  const Logger& log_;
  std::string path_;
  mutable std::mutex mu_;
  std::vector<SshHostState> hosts_;
  // hosts.json's entries that are not valid hosts, written back as they were: nothing a start
  // skipped is lost, and a person can repair it.
  std::vector<nlohmann::json> kept_invalid_;
};

}  // namespace temper
