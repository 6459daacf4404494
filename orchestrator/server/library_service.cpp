// TemperService's library calls (`temper library`): listing, showing, retiring and exporting the
// entries of the library of proven fixes (orchestrator/library/fix_library.h).
#include <charconv>

#include <fmt/format.h>

#include "orchestrator/config/request_bounds.h"
#include "orchestrator/library/fix_wire.h"
#include "orchestrator/message_chunks.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/authorization.h"
#include "orchestrator/server/temper_service.h"

namespace temper {

namespace {

constexpr uint32_t kDefaultFixesPage = 50;
constexpr uint32_t kMaxFixesPage = 1000;

Result<int64_t> ParseFixId(std::string_view field, std::string_view text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || id <= 0) {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not a library entry id (ids are positive numbers)", field, text));
  }
  return id;
}

}  // namespace

grpc::Status TemperService::ListFixes(grpc::ServerContext* context, const temper::v1::ListFixesRequest* request,
                                      temper::v1::ListFixesResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ListFixes");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  if (request->page_size() > kMaxFixesPage) {
    return ToGrpcStatus(Status::InvalidArgument(
        fmt::format("page_size: {} is above the maximum {}", request->page_size(), kMaxFixesPage)));
  }
  const uint32_t page_size = request->page_size() == 0 ? kDefaultFixesPage : request->page_size();
  std::optional<int64_t> before;
  if (!request->page_token().empty()) {
    Result<int64_t> token = ParseFixId("page_token", request->page_token());
    if (!token.ok()) return ToGrpcStatus(token.status());
    before = *token;
  }
  // One more than the page tells whether another page follows.
  Result<std::vector<FixRecord>> fixes =
      library_.List(request->rule_id(), request->include_retired(), page_size + 1, before);
  if (!fixes.ok()) return ToGrpcStatus(fixes.status());
  PageBudget budget(0);
  for (size_t i = 0; i < fixes->size(); ++i) {
    temper::v1::Fix fix;
    if (Status s = FixToProto((*fixes)[i], /*details=*/false, &fix); !s.ok()) {
      log_.Error("ListFixes: {}", s.ToString());
      return ToGrpcStatus(s);
    }
    if (i == page_size || !budget.Take(fix.ByteSizeLong())) {
      response->set_next_page_token(std::to_string((*fixes)[i - 1].id));
      break;
    }
    *response->add_fixes() = std::move(fix);
  }
  return grpc::Status::OK;
}

grpc::Status TemperService::GetFix(grpc::ServerContext* context, const temper::v1::GetFixRequest* request,
                                   temper::v1::Fix* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "GetFix");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseFixId("fix_id", request->fix_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  Result<FixRecord> fix = library_.Get(*id);
  if (!fix.ok()) return ToGrpcStatus(fix.status());
  return ToGrpcStatus(FixToProto(*fix, /*details=*/true, response));
}

grpc::Status TemperService::RetireFix(grpc::ServerContext* context, const temper::v1::RetireFixRequest* request,
                                      temper::v1::Fix* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "RetireFix");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseFixId("fix_id", request->fix_id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  if (request->reason().empty()) {
    return ToGrpcStatus(Status::InvalidArgument("reason: empty; say why the entry must not be reused"));
  }
  Result<FixRecord> entry = library_.Get(*id);
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  // An entry is the work of a batch on its source target: an operator whose grant does not list
  // that target may not take it away from the targets that would reuse it.
  if (grpc::Status denied = AuthorizeOnTarget(CallerOf(*context), "RetireFix", entry->source_target); !denied.ok()) {
    return denied;
  }
  Result<FixRecord> retired = library_.Retire(*id, request->reason());
  if (!retired.ok()) return ToGrpcStatus(retired.status());
  log_.Info("library entry {} ({}) retired by {}: {}", *id, retired->rule_id, CallerOf(*context).name,
            request->reason());
  return ToGrpcStatus(FixToProto(*retired, /*details=*/true, response));
}

grpc::Status TemperService::ExportFixes(grpc::ServerContext* context, const temper::v1::ExportFixesRequest* request,
                                        grpc::ServerWriter<temper::v1::ExportChunk>* writer) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ExportFixes");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<std::vector<FixRecord>> fixes = library_.List(request->rule_id(), request->include_retired(), UINT32_MAX);
  if (!fixes.ok()) return ToGrpcStatus(fixes.status());
  // The entries hold their targets' files whole: only those the caller may read them from.
  const ClientIdentity caller = CallerOf(*context);
  for (const FixRecord& fix : *fixes) {
    grpc::Status denied = AuthorizeFileContents(caller, "the library's fixes", fix.source_target);
    if (!denied.ok()) return denied;
  }
  Result<std::string> json = FixesExportJson(*fixes);
  if (!json.ok()) {
    log_.Error("ExportFixes: {}", json.status().ToString());
    return ToGrpcStatus(json.status());
  }
  return SendExport(context, writer,
                    evidence::ExportedFile{.content = std::move(*json),
                                           .file_name = "temper-library.json",
                                           .media_type = "application/json"},
                    "ExportFixes");
}

}  // namespace temper
