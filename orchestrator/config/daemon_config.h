// DaemonConfig: temperd.yaml, the daemon's own settings (where it listens, where it keeps state,
// default budgets, the targets it may touch). Loaded once at start-up; a bad file stops the daemon
// with an error naming file:line:column and the field, before anything is opened.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/budgets.h"
#include "orchestrator/config/access_config.h"
#include "orchestrator/records.h"
#include "platform/sandbox_caps.h"
#include "stig/packages/package_cache.h"

namespace temper {

struct UnixListenConfig {
  std::string path = "/run/temper/temper.sock";
  // Besides root (and the daemon's own user), members of this group may connect. Empty: root only.
  std::string group = "temper";
};

// TCP is served only with TLS, and every client proves who it is with a bearer token or a client
// certificate (access_config.h): never plaintext on the network, never anonymous.
struct TcpListenConfig {
  std::string address;     // host:port, e.g. 0.0.0.0:7443
  std::string tls_cert;    // PEM certificate chain file
  std::string tls_key;     // PEM private key file
  std::string token_file;  // optional: the operator token named "tcp" (access_config.h)
  // Optional: PEM CA certificates; when set, every TCP client must present a certificate they sign,
  // and `access:` entries with tls_client name the clients by their certificates.
  std::string client_ca;
};

// listen.metrics: Prometheus's GET /metrics over plain HTTP (orchestrator/server/metrics_endpoint.h).
// Counts only, no names; localhost unless a host is given.
struct MetricsListenConfig {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (temperd says which when ready)
};

// listen.dashboard: temperd's live dashboard (orchestrator/server/dashboard_endpoint.h), on a loopback
// address, each request with the token of token_file.
struct DashboardListenConfig {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (temperd says which when ready)
  std::string token_file;
};

struct TargetConfig {
  std::string name;
  std::string type;  // "rootfs" or "ssh"
  std::string path;  // rootfs: the directory holding the root
  // ssh: user@name[:port]; the key file and known_hosts when not the `ssh:` section's; sudo -n
  // is how a login other than root runs commands as root (false only with a root login).
  std::string host;
  std::string key_file;
  std::string known_hosts;
  bool sudo = true;
};

// How temperd reaches SSH hosts (targets of type ssh, and hosts named on submit).
struct SshConfig {
  std::string known_hosts;  // temperd's own; default <state_dir>/ssh/known_hosts
  std::string key_file;     // default: none, the agent at $SSH_AUTH_SOCK
  std::string control_dir;  // the masters' sockets; default <state_dir>/ssh/control
  std::chrono::seconds connect_timeout{10};
  std::string host_dir = "/var/lib/temper";  // temper's root-only directory on each host
  // A revert after a lost connection tries this many fresh connections, this far apart.
  int reconnect_tries = 6;
  std::chrono::seconds reconnect_pause{4};
  // ssh.max_hosts: SSH hosts registered besides the configured ones (an admin's submit registers
  // one). Each is a hosts.json entry and a target; past the cap a registration is refused.
  uint32_t max_hosts = 256;
};

// twins: copies of SSH hosts' root file systems, each a rootfs target in <state_dir>/twins/<name>
// (`temper twin create`; stig/ssh/host_copy.h, orchestrator/loop/twins.h).
struct TwinsConfig {
  // twins.max_bytes: the most a host's archive may stream; a bigger copy is refused and removed.
  uint64_t max_bytes = uint64_t{8} << 30;
  // twins.exclude: absolute paths on the hosts left out of every copy (data, backups), besides the
  // mount points, /proc, /sys, /dev, /run and ssh.host_dir, which are always left out.
  std::vector<std::string> exclude;
};

// limits: what one client (orchestrator/server/client_identity.h) may hold at once, so no client
// exhausts temperd for the others (orchestrator/server/client_limits.h). Admins are exempt from the
// per-client limits, so root is always served; watch_streams_total applies to everyone.
struct ClientLimitsConfig {
  uint32_t active_batches_per_client = 16;   // queued or running batches a client submitted
  uint32_t rules_per_batch = 1000;           // rules one submit names (a whole profile is the datastream's)
  uint32_t parallel_attempts_per_batch = 4;  // a batch's parallel_attempts
  uint32_t watch_streams_per_client = 32;    // open WatchJournal streams (`temper watch`)
  uint32_t watch_streams_total = 1024;       // open WatchJournal streams of all clients together
  uint32_t server_threads = 64;              // gRPC's threads for the calls other than WatchJournal
  uint32_t calls_per_client = 8;             // calls other than WatchJournal in progress at once
};

struct DaemonConfig {
  std::string source;  // the file this was read from, for messages
  UnixListenConfig unix_socket;
  std::optional<TcpListenConfig> tcp;
  std::optional<MetricsListenConfig> metrics;      // none unless listen.metrics is set
  std::optional<DashboardListenConfig> dashboard;  // none unless listen.dashboard is set
  std::string state_dir = "/var/lib/temper";
  std::string database;  // default: <state_dir>/temper.db
  // The only places datastreams are taken from (stig/scap/content_trust.h), searched in this order for
  // a bare file name. temperd.yaml's `content_dirs:`; the older `content_dir: DIR` reads as {DIR}.
  std::vector<std::string> content_dirs = {"/usr/share/xml/scap/ssg/content"};
  std::string models_file;  // optional: models.yaml, validated at start-up when set
  // Optional: a directory of DISA STIG XCCDF files (*.xml), read at start-up; checklist exports
  // carry the DISA ids of the one that covers a batch (orchestrator/evidence/batch_export.h).
  std::string disa_stigs_dir;
  LogLevel log_level = LogLevel::kInfo;
  std::chrono::seconds shutdown_grace{10};
  Budgets default_budgets;
  // Where rootfs targets install packages from (stig/packages/package_cache.h). Default: <state_dir>/packages
  // over Debian's archive; `package_cache: {enabled: false}` leaves dir empty (no installs).
  stig::PackageCacheOptions package_cache;
  SshConfig ssh;
  TwinsConfig twins;
  // sandbox: what each rootfs target's sandboxed commands may take of the host (pids, memory,
  // cpu_weight per command; disk for all the target's layers). Defaults in platform/sandbox_caps.h.
  temper::SandboxCaps sandbox;
  // loop.fixpoint_passes: how many times a batch may go round again for rules that flipped.
  uint32_t fixpoint_passes = kDefaultFixpointPasses;
  // loop.cross_check_verification: also evaluate the regression rules a change cannot affect, and
  // journal any the cut would have missed (a check of stig/scap/check_footprint.h; slower).
  bool cross_check_verification = false;
  // loop.parallel_attempts: attempts in flight at once on a rootfs target, each on its own fork of
  // the known-good snapshot (SSH hosts stay at one). 1 runs the loop serially; nullopt is `auto`
  // (the default), sized for each batch from the Worker's endpoint and the machine
  // (parallel_attempts.h).
  std::optional<uint32_t> parallel_attempts;
  std::vector<TargetConfig> targets;
  // access: who may do what (access_config.h); empty: the defaults described there.
  std::vector<AccessGrant> access;
  // Site-wide accepted risks (orchestrator/config/waivers.h), full rule ids; a batch's own waiver for a
  // rule replaces the configured one.
  std::vector<Waiver> waivers;
  ClientLimitsConfig limits;

  const TargetConfig* FindTarget(const std::string& name) const;
};

Result<DaemonConfig> LoadDaemonConfig(const std::string& path);
// For tests and for `temperd --check-config`: parses text that stands for file `source_name`.
Result<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& source_name);

}  // namespace temper
