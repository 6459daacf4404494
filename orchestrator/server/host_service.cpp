// TemperService's SSH host calls: listing hosts with their state and recorded keys, accepting a
// host key the operator checked, and clearing a host a person has looked at.
#include <algorithm>

#include <google/protobuf/util/time_util.h>

#include <fmt/format.h>

#include "orchestrator/config/request_bounds.h"
#include "orchestrator/message_chunks.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/authorization.h"
#include "orchestrator/server/temper_service.h"
#include "stig/ssh/ssh_known_hosts.h"

namespace temper {

namespace {

constexpr uint32_t kMaxHostsPage = 1000;

// The known_hosts file a target's connections check.
std::string KnownHostsOf(const TargetConfig& t, const DaemonConfig& config) {
  return t.known_hosts.empty() ? config.ssh.known_hosts : t.known_hosts;
}

void ToProto(const SshHostState& h, const DaemonConfig& config, temper::v1::Host* out) {
  out->set_target(h.target.name);
  Result<stig::SshEndpoint> e = stig::SshEndpoint::Parse(h.target.host);
  out->set_address(e.ok() ? e->ToString() : h.target.host);
  out->set_configured(h.configured);
  out->set_state(std::string(HostStateName(h.state)));
  out->set_detail(h.detail);
  if (h.last_batch != 0) out->set_last_batch_id(std::to_string(h.last_batch));
  if (h.updated_at != 0) {
    *out->mutable_updated_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(h.updated_at);
  }
  if (e.ok()) {
    Result<std::vector<stig::HostKey>> keys = stig::RecordedHostKeys(KnownHostsOf(h.target, config), *e);
    if (keys.ok()) {
      for (const stig::HostKey& k : *keys) {
        temper::v1::HostKey* key = out->add_recorded_keys();
        key->set_type(k.type);
        key->set_fingerprint(k.fingerprint);
      }
    }
  }
}

}  // namespace

grpc::Status TemperService::ListHosts(grpc::ServerContext* context, const temper::v1::ListHostsRequest* request,
                                      temper::v1::ListHostsResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ListHosts");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (request->page_size() > kMaxHostsPage) {
    return ToGrpcStatus(Status::InvalidArgument(
        fmt::format("page_size: {} is above the maximum {}", request->page_size(), kMaxHostsPage)));
  }
  // Hosts are only ever appended to the list while temperd runs, so a position is a stable token.
  const std::vector<SshHostState> hosts = hosts_.List();
  Result<size_t> first = PagePosition(request->page_token(), hosts.size(), "page_token");
  if (!first.ok()) return ToGrpcStatus(first.status());
  const size_t last = request->page_size() == 0 ? hosts.size() : std::min(hosts.size(), *first + request->page_size());
  PageBudget budget(0);
  for (size_t i = *first; i < hosts.size(); ++i) {
    temper::v1::Host h;
    if (i < last) ToProto(hosts[i], config_, &h);
    if (i == last || !budget.Take(h.ByteSizeLong())) {
      response->set_next_page_token(std::to_string(i));
      break;
    }
    *response->add_hosts() = std::move(h);
  }
  return grpc::Status::OK;
}

grpc::Status TemperService::AcceptHostKey(grpc::ServerContext* context, const temper::v1::AcceptHostKeyRequest* request,
                                          temper::v1::AcceptHostKeyResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "AcceptHostKey");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (request->host().empty())
    return ToGrpcStatus(Status::InvalidArgument("host: required (a target or user@name[:port])"));
  // A known host by its target name, else an address (which need not be registered yet).
  TargetConfig target;
  if (std::optional<SshHostState> h = hosts_.Find(request->host())) {
    target = h->target;
  } else {
    Result<stig::SshEndpoint> e = stig::SshEndpoint::Parse(request->host());
    if (!e.ok()) {
      return ToGrpcStatus(Status::NotFound(
          fmt::format("host: '{}' is neither an SSH host temperd knows nor user@name[:port]", request->host())));
    }
    target.host = e->ToString();
    if (std::optional<SshHostState> named = hosts_.Find(SshHosts::NameFor(request->host()))) target = named->target;
  }
  Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(target.host);
  if (!endpoint.ok()) return ToGrpcStatus(endpoint.status());
  const std::string known_hosts = KnownHostsOf(target, config_);
  if (request->fingerprint().empty()) {
    Result<std::vector<stig::HostKey>> offered = stig::ScanHostKeys(*endpoint, config_.ssh.connect_timeout);
    if (!offered.ok()) return ToGrpcStatus(offered.status());
    for (const stig::HostKey& k : *offered) {
      temper::v1::HostKey* key = response->add_offered();
      key->set_type(k.type);
      key->set_fingerprint(k.fingerprint);
    }
    return grpc::Status::OK;
  }
  Result<stig::HostKey> accepted =
      stig::AcceptHostKey(known_hosts, *endpoint, request->fingerprint(), config_.ssh.connect_timeout);
  if (!accepted.ok()) return ToGrpcStatus(accepted.status());
  log_.Info("host key {} {} of {} recorded in {}", accepted->type, accepted->fingerprint, endpoint->ToString(),
            known_hosts);
  response->set_recorded(true);
  response->mutable_accepted()->set_type(accepted->type);
  response->mutable_accepted()->set_fingerprint(accepted->fingerprint);
  return grpc::Status::OK;
}

grpc::Status TemperService::ClearHost(grpc::ServerContext* context, const temper::v1::ClearHostRequest* request,
                                      temper::v1::Host* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ClearHost");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<SshHostState> cleared = hosts_.Clear(request->target());
  if (!cleared.ok()) return ToGrpcStatus(cleared.status().WithContext("target"));
  log_.Info("host {} cleared by a person", request->target());
  ToProto(*cleared, config_, response);
  return grpc::Status::OK;
}

}  // namespace temper
