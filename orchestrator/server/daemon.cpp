#include "orchestrator/server/daemon.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "orchestrator/config/models_config.h"
#include "orchestrator/server/reflection_v1.h"
#include "orchestrator/server/tcp_callers.h"
#include "orchestrator/store/private_files.h"
#include "orchestrator/token_auth.h"

namespace temper {

namespace {

// Answers every call with PERMISSION_DENIED: the destination of connections that the unix socket's
// credential check refused, so the client learns why instead of seeing a dropped connection.
class RefusalService final : public grpc::CallbackGenericService {
 public:
  explicit RefusalService(std::string message) : message_(std::move(message)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(const std::string& message) {
        Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, message));
      }
      void OnDone() override { delete this; }
    };
    return new Reactor(message_);
  }

 private:
  const std::string message_;
};

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, fmt::format("cannot read {} {}", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The state directory and what temperd alone writes in it are root's alone (private_files.h),
// whoever started temperd: made so here, and the group and other bits that an earlier start left
// (temperd started by hand, an older temperd) taken off, each such path logged (the first ten,
// then a count). Only trees that are temperd's own are walked: targets and roots kept under the
// state directory keep their modes (their own directories are made root-only where they are made).
Status PrepareStateDir(const DaemonConfig& config, const Logger& log) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> changed;
  auto make_private = [&](const std::string& path) -> Status {
    TEMPER_ASSIGN_OR_RETURN(bool made, MakePrivate(path));
    if (made) changed.push_back(path);
    return Status::OK();
  };
  const std::string database_dir = fs::path(config.database).parent_path().string();
  for (const std::string& dir : {config.state_dir, database_dir}) {
    if (dir.empty()) continue;
    // A database directory of the operator's choosing that exists keeps its mode; the file is private.
    const bool ours = dir == config.state_dir || !fs::exists(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError(fmt::format("cannot create directory {}: {}", dir, ec.message()));
    if (ours) TEMPER_RETURN_IF_ERROR(make_private(dir));
  }
  const fs::path state = config.state_dir;
  // Made here, so the journal and results directories never get the umask's mode.
  for (const char* sub : {"journal", "results"}) {
    fs::create_directory(state / sub, ec);
    if (ec) return Status::IOError(fmt::format("cannot create directory {}: {}", (state / sub).string(), ec.message()));
  }
  for (const char* tree : {"journal", "results", "ssh"}) {
    TEMPER_RETURN_IF_ERROR(MakeTreePrivate((state / tree).string(), changed));
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    TEMPER_RETURN_IF_ERROR(make_private(config.database + suffix));
  }
  constexpr std::size_t kNamed = 10;
  for (std::size_t i = 0; i < changed.size() && i < kNamed; ++i) {
    log.Warning("state: {} was open to other users; it is root's alone now", changed[i]);
  }
  if (changed.size() > kNamed) {
    log.Warning("state: {} more paths under {} were open to other users; they are root's alone now",
                changed.size() - kNamed, config.state_dir);
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config, const Logger& log, EnablePlugins enable_plugins) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(config), log));
  if (!daemon->config_.models_file.empty()) {
    Result<ModelsConfig> models = LoadModelsConfig(daemon->config_.models_file);
    if (!models.ok()) return models.status().WithContext("models");
    TEMPER_ASSIGN_OR_RETURN(daemon->models_, RoleModels::Create(*models, log));
    log.Info("models: {} endpoints from {}", models->endpoints.size(), daemon->config_.models_file);
  }
  if (!daemon->config_.disa_stigs_dir.empty()) {
    Result<std::vector<stig::DisaStig>> stigs = stig::ReadDisaStigDirectory(daemon->config_.disa_stigs_dir);
    if (!stigs.ok()) return stigs.status().WithContext("disa_stigs");
    daemon->disa_stigs_ = std::move(*stigs);
    for (const stig::DisaStig& s : daemon->disa_stigs_) {
      log.Info("DISA STIG {} {} ({} requirements) from {}", s.benchmark_id, s.RevisionName(), s.rules.size(), s.source);
    }
  }
  TEMPER_RETURN_IF_ERROR(PrepareStateDir(daemon->config_, log));
  TEMPER_ASSIGN_OR_RETURN(daemon->store_, StateStore::Open(daemon->config_.database));
  log.Info("state store {} (schema version {})", daemon->store_->path(), daemon->store_->schema_version());
  daemon->library_ = std::make_unique<FixLibrary>(*daemon->store_);
  TEMPER_ASSIGN_OR_RETURN(daemon->journal_files_, JournalFiles::Open(daemon->config_.state_dir + "/journal"));
  TEMPER_ASSIGN_OR_RETURN(daemon->journal_, Journal::Open(*daemon->store_, *daemon->journal_files_, log));
  TEMPER_ASSIGN_OR_RETURN(daemon->hosts_, SshHosts::Open(daemon->config_, log));
  daemon->runner_ = std::make_unique<LoopRunner>(daemon->config_, *daemon->journal_, daemon->models_.get(), log,
                                                 daemon->hosts_.get());
  daemon->runner_->UseLibrary(daemon->library_.get());
  TEMPER_ASSIGN_OR_RETURN(daemon->twins_, Twins::Open(daemon->config_, daemon->hosts_.get(), log));
  for (const TargetConfig& twin : daemon->twins_->Targets()) daemon->runner_->AddTarget(twin);
  daemon->service_ =
      std::make_unique<TemperService>(daemon->config_, *daemon->store_, *daemon->journal_, *daemon->runner_,
                                      *daemon->hosts_, *daemon->library_, daemon->disa_stigs_, log);
  daemon->service_->UseTwins(daemon->twins_.get());
  TEMPER_RETURN_IF_ERROR(daemon->StartServing(enable_plugins));
  daemon->runner_->Start();
  return daemon;
}

Status Daemon::StartServing(EnablePlugins enable_plugins) {
  // Bind first: if another temperd is live on the socket, fail before touching anything else.
  TEMPER_ASSIGN_OR_RETURN(unix_listener_, UnixSocketListener::Bind(config_.unix_socket.path, log_));

  Result<PeerAccess> access = PeerAccess::Create(config_.unix_socket.group, config_.access);
  if (!access.ok() && access.status().code() == StatusCode::kNotFound) {
    log_.Warning("listen.unix.group: {}; only root, temperd's own user and the access list may connect",
                 access.status().message());
    access = PeerAccess::Create("", config_.access);
  }
  if (!access.ok()) return access.status();

  // The refusal server is built before the plugins (reflection) are switched on, and without the
  // health service, so a refused peer learns nothing about the API.
  refusal_service_ = std::make_unique<RefusalService>(access->Describe());
  {
    grpc::ServerBuilder builder;
    builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
    builder.RegisterCallbackGenericService(refusal_service_.get());
    refusal_server_ = builder.BuildAndStart();
    if (!refusal_server_) return Status::Internal("could not start the refusal gRPC server");
  }

  grpc::EnableDefaultHealthCheckService(true);
  if (enable_plugins != nullptr) enable_plugins();
  grpc::ServerBuilder builder;
  // gRPC's sync server starts a thread per call in progress, without bound; capped, a call past
  // limits.server_threads is refused (RESOURCE_EXHAUSTED) instead. Watches are callbacks and take
  // none of these threads (journal_watch.h).
  // gRPC counts its polling threads against the same quota (at most kMaxPollers for the one queue
  // set below), so they come on top: ClientLimits, which keeps a quarter of the calls' threads for
  // admins, then never meets gRPC's own "Server Threadpool Exhausted" first (root's call was refused
  // so under load while members held every thread they may).
  constexpr int kMaxPollers = 2;
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);
  grpc::ResourceQuota quota("temperd");
  quota.SetMaxThreads(static_cast<int>(config_.limits.server_threads) + kMaxPollers);
  builder.SetResourceQuota(quota);
  builder.RegisterService(service_.get());
  builder.SetOption(ReflectionV1Option());
  if (config_.tcp) {
    const TcpListenConfig& tcp = *config_.tcp;
    grpc::SslServerCredentialsOptions ssl;
    TEMPER_ASSIGN_OR_RETURN(std::string cert, ReadFile(tcp.tls_cert, "listen.tcp.tls_cert"));
    TEMPER_ASSIGN_OR_RETURN(std::string key, ReadFile(tcp.tls_key, "listen.tcp.tls_key"));
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (!tcp.client_ca.empty()) {
      TEMPER_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(tcp.client_ca, "listen.tcp.client_ca"));
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    TEMPER_ASSIGN_OR_RETURN(std::vector<TcpClient> clients, TcpClientsOf(config_));
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(ssl);
    creds->SetAuthMetadataProcessor(std::make_shared<TcpCallers>(std::move(clients)));
    Result<std::unique_ptr<TcpListener>> tcp_listener = TcpListener::Bind(tcp.address, log_);
    if (!tcp_listener.ok()) return tcp_listener.status().WithContext("listen.tcp.address");
    tcp_listener_ = std::move(*tcp_listener);
    tcp_acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
  }
  local_callers_ = std::make_unique<LocalCallers>(builder);
  // A server with a callback method (WatchJournal) is a "hybrid" one to gRPC: its sync methods'
  // queues then poll no sockets and wait for a queue that does, so without a thread polling one,
  // a sync call waited up to ~90 ms for the next timer-driven poll (root's ListBatches on an idle
  // daemon: 0.6 ms median, 91 ms worst; with this thread, 4.7 ms worst).
  io_poll_queue_ = builder.AddCompletionQueue(/*is_frequently_polled=*/true);
  server_ = builder.BuildAndStart();
  io_poller_ = std::thread([queue = io_poll_queue_.get()] {
    void* tag = nullptr;
    bool ok = false;
    while (queue->Next(&tag, &ok)) {
    }
  });
  if (!server_) return Status::Internal("could not start the gRPC server");
  server_->GetHealthCheckService()->SetServingStatus("temper.v1.Temper", true);
  unix_listener_->Start(*access, *local_callers_, refusal_server_.get());
  if (tcp_listener_) tcp_listener_->Start(tcp_acceptor_.get());
  if (config_.metrics) {
    metrics_ = std::make_unique<DaemonMetrics>(*store_, models_.get());
    Result<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(config_.metrics->host, config_.metrics->port, *metrics_, log_);
    if (!endpoint.ok()) return endpoint.status().WithContext("listen.metrics");
    metrics_endpoint_ = std::move(*endpoint);
  }
  if (config_.dashboard) {
    Result<std::string> token = ReadTokenFile(config_.dashboard->token_file);
    if (!token.ok()) return token.status().WithContext("listen.dashboard.token_file");
    Result<std::unique_ptr<DashboardEndpoint>> endpoint = DashboardEndpoint::Start(
        config_.dashboard->host, config_.dashboard->port, std::move(*token), *store_, *journal_, *runner_, log_);
    if (!endpoint.ok()) return endpoint.status().WithContext("listen.dashboard");
    dashboard_endpoint_ = std::move(*endpoint);
  }
  return Status::OK();
}

std::string Daemon::DescribeListeners() const {
  std::string out = fmt::format("unix:{}", config_.unix_socket.path);
  if (config_.tcp) out += fmt::format(", tcp {} (TLS, bearer token)", config_.tcp->address);
  if (metrics_endpoint_) {
    const std::string& host = config_.metrics->host;
    out += fmt::format(", metrics http://{}:{}/metrics", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                       metrics_endpoint_->port());
  }
  if (dashboard_endpoint_) {
    const std::string& host = config_.dashboard->host;
    out += fmt::format(", dashboard http://{}:{}/", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                       dashboard_endpoint_->port());
  }
  return out;
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
  if (unix_listener_) unix_listener_->Stop();
  if (tcp_listener_) tcp_listener_->Stop();
  metrics_endpoint_.reset();
  dashboard_endpoint_.reset();
  // Each loop finishes its current step; its batch stays running and resumes at the next start.
  if (runner_) runner_->Stop();
  // Watch streams end at once with UNAVAILABLE and the seq to resume from; other calls get the grace.
  if (journal_) journal_->Close();
  auto deadline = std::chrono::system_clock::now() + config_.shutdown_grace;
  if (server_) server_->Shutdown(deadline);
  if (refusal_server_) refusal_server_->Shutdown(deadline);
  // A queue is shut down after its server; io_poller_ drains it, then ends.
  if (io_poll_queue_) {
    io_poll_queue_->Shutdown();
    io_poller_.join();
  }
  server_.reset();
  tcp_acceptor_.reset();
  local_callers_.reset();
  refusal_server_.reset();
  service_.reset();
  runner_.reset();
  hosts_.reset();
  journal_.reset();
  journal_files_.reset();
  store_.reset();
  log_.Info("shut down cleanly");
}

Daemon::~Daemon() { Shutdown(); }

}  // namespace temper
