// TemperService's twin calls: copying an SSH host into a twin (a rootfs target), listing the twins
// and removing one. The copy runs on the call's own thread for as long as it takes (the CLI waits
// with a long deadline); a client that goes away stops it, and what was copied is removed.
#include <algorithm>

#include <google/protobuf/util/time_util.h>

#include <fmt/format.h>

#include "orchestrator/config/request_bounds.h"
#include "orchestrator/loop/target_factory.h"
#include "orchestrator/message_chunks.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/temper_service.h"
#include "stig/ssh/host_copy.h"

namespace temper {

namespace {

constexpr uint32_t kMaxTwinsPage = 1000;

void ToProto(const TwinRecord& t, temper::v1::Twin* out) {
  out->set_name(t.name);
  out->set_host(t.host);
  out->set_login(t.login);
  if (t.copied_at != 0) {
    *out->mutable_copied_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(t.copied_at);
  }
  out->set_bytes(t.bytes);
  out->set_files(t.files);
  out->set_skipped_special_files(t.skipped_special_files);
  for (const std::string& path : t.excluded) out->add_excluded(path);
  out->set_seconds(t.seconds);
  out->set_packages(t.packages);
  out->set_os_release(t.os_release);
  out->set_path(t.dir);
}

grpc::Status NoTwins() {
  return ToGrpcStatus(Status::Unavailable("this temperd keeps no twins (no twins registry was opened)"));
}

}  // namespace

grpc::Status TemperService::CreateTwin(grpc::ServerContext* context, const temper::v1::CreateTwinRequest* request,
                                       temper::v1::Twin* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "CreateTwin");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (twins_ == nullptr) return NoTwins();
  if (Status name = Twins::ValidateName(request->name()); !name.ok()) return ToGrpcStatus(name.WithContext("name"));
  const std::string& host = request->host();
  if (host.empty()) {
    return ToGrpcStatus(Status::InvalidArgument("host: required (user@name[:port], or an SSH host target's name)"));
  }
  // A host temperd knows (by its target name or its address) brings its own key and known_hosts. Any
  // other address is copied without being registered: only an admin calls this, and an admin's
  // SubmitBatch may name any host too.
  TargetConfig source;
  if (std::optional<SshHostState> known = hosts_.Find(host)) {
    source = known->target;
  } else {
    Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(host);
    if (!endpoint.ok()) {
      return ToGrpcStatus(Status::InvalidArgument(
          fmt::format("host: '{}' is neither an SSH host temperd knows nor user@name[:port]: {}", host,
                      endpoint.status().message())));
    }
    if (std::optional<SshHostState> named = hosts_.Find(SshHosts::NameFor(host))) {
      source = named->target;
    } else {
      source.name = SshHosts::NameFor(host);
      source.type = "ssh";
      source.host = endpoint->ToString();
    }
  }
  Result<stig::SshTargetOptions> options = SshTargetOptionsFor(source, config_);
  if (!options.ok()) return ToGrpcStatus(options.status().WithContext("host"));

  log_.Info("CreateTwin: copying {} into twin {}", source.host, request->name());
  Result<TwinRecord> twin =
      twins_->Create(request->name(), [&](const std::string& root_dir) -> Result<stig::HostCopyRecord> {
        TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<stig::SshConnection> ssh,
                                stig::SshConnection::Open(options->ssh, log_));
        stig::HostCopyOptions copy;
        copy.destination = root_dir;
        copy.max_bytes = config_.twins.max_bytes;
        copy.exclude = config_.twins.exclude;
        copy.host_dir = config_.ssh.host_dir;
        copy.stop_requested = [context] { return context->IsCancelled(); };
        return stig::CopyHostRoot(*ssh, copy, log_);
      });
  if (!twin.ok()) {
    log_.Warning("CreateTwin {} from {}: {}", request->name(), source.host, twin.status().ToString());
    return ToGrpcStatus(twin.status());
  }
  runner_.AddTarget(twin->Target());
  ToProto(*twin, response);
  return grpc::Status::OK;
}

grpc::Status TemperService::ListTwins(grpc::ServerContext* context, const temper::v1::ListTwinsRequest* request,
                                      temper::v1::ListTwinsResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ListTwins");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (twins_ == nullptr) return NoTwins();
  if (request->page_size() > kMaxTwinsPage) {
    return ToGrpcStatus(Status::InvalidArgument(
        fmt::format("page_size: {} is above the maximum {}", request->page_size(), kMaxTwinsPage)));
  }
  // A page token is the name to continue from: twins come sorted by name, and one removed or added
  // meanwhile moves no other.
  const std::vector<TwinRecord> twins = twins_->List();
  auto first = std::lower_bound(twins.begin(), twins.end(), request->page_token(),
                                [](const TwinRecord& t, const std::string& name) { return t.name < name; });
  PageBudget budget(0);
  uint32_t taken = 0;
  for (auto it = first; it != twins.end(); ++it) {
    temper::v1::Twin t;
    ToProto(*it, &t);
    if ((request->page_size() != 0 && taken == request->page_size()) || !budget.Take(t.ByteSizeLong())) {
      response->set_next_page_token(it->name);
      break;
    }
    *response->add_twins() = std::move(t);
    ++taken;
  }
  return grpc::Status::OK;
}

grpc::Status TemperService::RemoveTwin(grpc::ServerContext* context, const temper::v1::RemoveTwinRequest* request,
                                       temper::v1::Twin* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "RemoveTwin");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (twins_ == nullptr) return NoTwins();
  if (!twins_->Find(request->name())) {
    return ToGrpcStatus(Status::NotFound(fmt::format("name: no twin named '{}'", request->name())));
  }
  // Its files are the target's tree: never pulled from under a batch.
  std::optional<int64_t> before;
  do {
    Result<StateStore::BatchPage> page = store_.ListBatches(before, 500, {BatchState::kQueued, BatchState::kRunning});
    if (!page.ok()) return ToGrpcStatus(page.status());
    for (const BatchRecord& b : page->batches) {
      if (b.target == request->name()) {
        return ToGrpcStatus(Status::FailedPrecondition(
            fmt::format("twin {} has batch {} {}; cancel it or wait for it to end first", request->name(), b.id,
                        b.state == BatchState::kQueued ? "queued" : "running")));
      }
    }
    before = page->next_before_id;
  } while (before);
  // Its overlay is mounted while its target is open: closed first, or the deletion would reach into
  // the mount.
  if (Status closed = runner_.CloseTarget(request->name()); !closed.ok()) return ToGrpcStatus(closed);
  Result<TwinRecord> removed = twins_->Remove(request->name());
  if (!removed.ok()) return ToGrpcStatus(removed.status());
  ToProto(*removed, response);
  return grpc::Status::OK;
}

}  // namespace temper
