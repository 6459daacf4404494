#include "orchestrator/server/authorization.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace temper {

namespace {

constexpr RpcAccess kTable[] = {
    {"GetBatch", ClientRole::kViewer, false},       {"ListBatches", ClientRole::kViewer, false},
    {"WatchJournal", ClientRole::kViewer, false},   {"GetRuleMemory", ClientRole::kViewer, false},
    {"GetBatchReport", ClientRole::kViewer, false}, {"ExportBatch", ClientRole::kViewer, false},
    {"ListHosts", ClientRole::kViewer, false},      {"SubmitBatch", ClientRole::kOperator, true},
    {"CancelBatch", ClientRole::kOperator, true},   {"RevertBatch", ClientRole::kOperator, true},
    {"ConfirmReboot", ClientRole::kOperator, true}, {"AcceptHostKey", ClientRole::kAdmin, false},
    {"ClearHost", ClientRole::kAdmin, false},       {"ApplyBatch", ClientRole::kOperator, true},
    {"ListFixes", ClientRole::kViewer, false},      {"GetFix", ClientRole::kViewer, false},
    {"ExportFixes", ClientRole::kViewer, false},    {"RetireFix", ClientRole::kOperator, true},
    {"CreateTwin", ClientRole::kAdmin, false},      {"ListTwins", ClientRole::kViewer, false},
    {"RemoveTwin", ClientRole::kAdmin, false},
};

// "a viewer", "an operator", "an admin".
std::string WithArticle(ClientRole role) {
  return fmt::format("{} {}", role == ClientRole::kViewer ? "a" : "an", ClientRoleName(role));
}

grpc::Status Denied(std::string message) { return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, message); }

}  // namespace

std::span<const RpcAccess> RpcAccessTable() { return kTable; }

grpc::Status Authorize(const ClientIdentity& caller, std::string_view method) {
  if (caller.key.empty()) return Denied(fmt::format("{}: the caller is unknown to temperd", method));
  const RpcAccess* rule =
      std::find_if(std::begin(kTable), std::end(kTable), [&](const RpcAccess& r) { return r.method == method; });
  if (rule == std::end(kTable)) return Denied(fmt::format("{}: temperd has no access rule for this call", method));
  if (caller.role < rule->least) {
    return Denied(fmt::format("{} is {} and may not call {}: that needs the {} role (temperd.yaml `access:`)",
                              caller.name, WithArticle(caller.role), method, ClientRoleName(rule->least)));
  }
  return grpc::Status::OK;
}

grpc::Status AuthorizeOnTarget(const ClientIdentity& caller, std::string_view method, std::string_view target) {
  if (grpc::Status allowed = Authorize(caller, method); !allowed.ok()) return allowed;
  if (!caller.MayActOn(target)) {
    return Denied(fmt::format("{} may not call {} on target {}: its grant in temperd.yaml `access:` lists {}",
                              caller.name, method, target, fmt::join(caller.targets, ", ")));
  }
  return grpc::Status::OK;
}

grpc::Status AuthorizeWaivers(const ClientIdentity& caller) {
  if (caller.role == ClientRole::kAdmin) return grpc::Status::OK;
  return Denied(fmt::format(
      "{} is {} and may not waive rules: a waiver accepts a risk on the host, which needs the admin role (temperd.yaml "
      "`access:`)",
      caller.name, WithArticle(caller.role)));
}

grpc::Status AuthorizeFileContents(const ClientIdentity& caller, std::string_view what, std::string_view target) {
  if (caller.role == ClientRole::kAdmin) return grpc::Status::OK;
  if (caller.role == ClientRole::kOperator && caller.MayActOn(target)) return grpc::Status::OK;
  return Denied(fmt::format(
      "{} is {} and may not read {} from target {}: it holds the target's files whole, secrets included, which "
      "needs the operator role on that target (temperd.yaml `access:`)",
      caller.name, WithArticle(caller.role), what, target));
}

}  // namespace temper
