// Test harness: a real temperd process in a temporary directory, started from the built binary with
// a config written for it, and reached over its real unix socket. Readiness is taken from the
// daemon's own sd_notify READY=1 (NOTIFY_SOCKET points at a datagram socket the harness reads), so
// the harness also checks what systemd would see.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <optional>

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "orchestrator/temp_dir.h"
#include "temper/v1/temper.grpc.pb.h"

namespace temper::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` to completion (stdin closed), capturing its output. With `run_as_uid`, the child drops
// to that uid and `run_as_gid` (no supplementary groups) before exec; the caller must be root, and
// argv[0] must be reachable by that user (see CopyForOtherUsers). A program that cannot be started
// exits 127 with the reason on stderr.
ProcessResult RunProcess(const std::vector<std::string>& argv, int run_as_uid = -1, int run_as_gid = -1);

std::string TemperdBinary();
std::string TemperBinary();

// A copy of `binary` in `dir`/bin that any user can run: the build tree may lie where only root can
// reach it (a checkout under /root, mode 0700). Makes `dir` itself mode 0755; the copy goes with
// `dir`. A copy that fails fails the test case.
std::string CopyForOtherUsers(const TempDir& dir, const std::string& binary);

// A context for one call to the daemon, with a deadline `seconds` from now.
std::unique_ptr<grpc::ClientContext> CallContext(int seconds = 10);

// Submits `request`; a refusal fails the test case, with gRPC's message.
temper::v1::Batch SubmitOk(temper::v1::Temper::Stub& stub, const temper::v1::SubmitBatchRequest& request);

// The journal events of `batch` ("" for every event) after `after_seq`, read without following.
// A call that fails fails the test case, with gRPC's message.
std::vector<temper::v1::JournalEvent> ReadJournal(temper::v1::Temper::Stub& stub, const std::string& batch,
                                                  uint64_t after_seq = 0);

// The report of `batch`, its GetBatchReport chunks put together (ChunkAssembler). A call that fails
// or chunks that do not fit together fail the test case, with the reason.
temper::v1::BatchReport ReadReport(temper::v1::Temper::Stub& stub, const std::string& batch, int seconds = 30);

struct DaemonOptions {
  std::string unix_group;      // listen.unix.group; empty leaves the default
  std::string tcp_yaml;        // the keys of listen.tcp, one per line without indentation; empty: no TCP
  std::string metrics_listen;  // listen.metrics (HOST:PORT); empty: no metrics endpoint
  std::string dashboard_yaml;  // listen.dashboard as a flow mapping ({address: ..., token_file: ...}); empty: none
  std::string models_yaml;     // written to <dir>/models.yaml and named by `models:`; empty: no models
  std::vector<std::string> content_dirs;  // empty: <dir>/content with a datastream of ids only (validation only)
  std::string lab_path;                   // the rootfs target "lab"; empty: <dir>/roots/lab
  std::vector<std::pair<std::string, std::string>> more_targets;  // more rootfs targets: name, path
  std::string ssh_yaml;    // the keys of the ssh section, one per line without indentation; empty: none
  std::string extra_yaml;  // more top-level keys for temperd.yaml (e.g. "waivers:\n  - ..."), as written
};

class DaemonProcess {
 public:
  // The config is `<dir>/temperd.yaml`: a socket, state and content under `dir`, one rootfs target
  // "lab", and what `options` add.
  explicit DaemonProcess(const TempDir& dir, const DaemonOptions& options = {});
  ~DaemonProcess();

  // Starts temperd and waits for READY=1. The Status carries the daemon's log on failure.
  Status Start();
  // Sends `sig` and waits; returns the exit status (or 128 + signal when killed).
  int Stop(int sig = SIGTERM);
  // Sends `sig` and waits at most `limit`: the exit status, or nullopt when temperd was still
  // running then (it is killed with SIGKILL, so the harness never hangs on a stuck daemon).
  std::optional<int> StopWithin(int sig, std::chrono::milliseconds limit);
  bool running() const { return pid_ > 0; }
  // The daemon's pid while it runs (-1 before Start and after Stop).
  pid_t pid() const { return pid_; }
  // False once the process has exited (it is reaped then; Stop returns -1 afterwards).
  bool Alive();
  // How the process ended, once Alive() saw it exit: the exit status, or 128 + signal.
  int exit_status() const { return exit_status_; }

  // Every sd_notify message received so far, oldest first.
  std::vector<std::string> Notifications();
  std::string Log() const;

  const std::string& socket_path() const { return socket_path_; }
  const std::string& config_path() const { return config_path_; }
  std::shared_ptr<grpc::Channel> Channel() const;
  std::unique_ptr<temper::v1::Temper::Stub> Stub() const;

 private:
  const TempDir& dir_;
  std::string config_path_;
  std::string socket_path_;
  std::string log_path_;
  int notify_fd_ = -1;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::vector<std::string> notifications_;
};

// A SubmitBatchRequest valid for DaemonProcess's config.
// The port of the listener whose address READY's status line gives after `marker` ("metrics
// http://127.0.0.1:" for "... metrics http://127.0.0.1:PORT/metrics"); FAILs when it names none.
int NotifiedPort(DaemonProcess& daemon, const std::string& marker);

temper::v1::SubmitBatchRequest ValidSubmit(const std::string& name = "test batch");

// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, noted, released), for a listener
// a test configures. A bind that fails fails the test case.
int FreeLoopbackPort();

}  // namespace temper::testing
