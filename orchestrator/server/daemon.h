// Daemon: temperd assembled. Start() opens the state store, builds the gRPC servers (the API with
// health and reflection; a refusal server for peers the socket policy turns away), and starts the
// listeners; temperd accepts every connection itself (UnixSocketListener, TcpListener) and hands it
// to gRPC, so running out of descriptors pauses accepting instead of stopping it. Shutdown() stops accepting, ends
// watch streams, drains in-flight calls within the grace period, and closes the store; everything already acknowledged
// to a client is on disk by then.
//
// Thread safety: Start and Shutdown are called from one (the main) thread.
#pragma once

#include <memory>
#include <thread>

#include <grpcpp/completion_queue.h>
#include <grpcpp/server.h>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/library/fix_library.h"
#include "orchestrator/loop/loop_runner.h"
#include "orchestrator/loop/role_models.h"
#include "orchestrator/loop/ssh_hosts.h"
#include "orchestrator/loop/twins.h"
#include "orchestrator/server/daemon_metrics.h"
#include "orchestrator/server/dashboard_endpoint.h"
#include "orchestrator/server/metrics_endpoint.h"
#include "orchestrator/server/tcp_listener.h"
#include "orchestrator/server/temper_service.h"
#include "orchestrator/server/unix_listener.h"
#include "orchestrator/store/journal.h"
#include "orchestrator/store/state_store.h"

namespace temper {

class Daemon {
 public:
  // gRPC server plugins are process-global. temperd passes grpc::reflection's initializer (v1alpha)
  // here rather than this library linking it, so test binaries that link the library can carry their
  // own v1alpha client messages. It runs after the refusal server is built: refused peers never get
  // reflection. Reflection v1 (reflection_v1.h) is this library's own, added to the API server alone.
  using EnablePlugins = void (*)();

  // `log` must outlive the daemon.
  static Result<std::unique_ptr<Daemon>> Start(DaemonConfig config, const Logger& log,
                                               EnablePlugins enable_plugins = nullptr);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon();

  // Idempotent.
  void Shutdown();

  // "unix:/run/temper/temper.sock, tcp 0.0.0.0:7443 (TLS, bearer token), metrics
  // http://127.0.0.1:9464/metrics" for READY messages (the port bound, when 0 was asked for).
  std::string DescribeListeners() const;

  // The library of proven fixes over the daemon's state store, which the service and the loop share.
  FixLibrary& library() const { return *library_; }

 private:
  Daemon(DaemonConfig config, const Logger& log) : config_(std::move(config)), log_(log) {}
  Status StartServing(EnablePlugins enable_plugins);

  DaemonConfig config_;
  const Logger& log_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<FixLibrary> library_;  // over store_
  std::unique_ptr<JournalFiles> journal_files_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<RoleModels> models_;
  std::vector<stig::DisaStig> disa_stigs_;  // config_.disa_stigs_dir, read at start
  std::unique_ptr<SshHosts> hosts_;
  std::unique_ptr<Twins> twins_;  // before runner_ and service_, which hold it
  std::unique_ptr<LoopRunner> runner_;
  std::unique_ptr<TemperService> service_;
  std::unique_ptr<grpc::CallbackGenericService> refusal_service_;
  std::unique_ptr<grpc::Server> refusal_server_;
  std::unique_ptr<grpc::Server> server_;
  // The queue io_poller_ waits on, so that gRPC's I/O is polled for the sync methods (daemon.cpp).
  std::unique_ptr<grpc::ServerCompletionQueue> io_poll_queue_;
  std::thread io_poller_;
  // Where unix_listener_ hands its connections, each as the identity its peer credentials gave it.
  std::unique_ptr<LocalCallers> local_callers_;
  std::unique_ptr<UnixSocketListener> unix_listener_;
  std::unique_ptr<TcpListener> tcp_listener_;
  // Where tcp_listener_ hands its connections: TLS and the client check (tcp_callers.h) run in gRPC
  // as on its own port.
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tcp_acceptor_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;      // listen.metrics; stopped before the store closes
  std::unique_ptr<DashboardEndpoint> dashboard_endpoint_;  // listen.dashboard; likewise
  bool shut_down_ = false;
};

}  // namespace temper
