#include "orchestrator/library/fix_wire.h"

#include <ctime>

#include <google/protobuf/util/time_util.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/message_chunks.h"
#include "stig/fix_bundle.h"
#include "stig/platform_id.h"

namespace temper {

namespace {

std::string Rfc3339(TimeMs ms) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", fmt::gmtime(static_cast<std::time_t>(ms / 1000)));
}

Status Corrupt(const FixRecord& fix, std::string_view what, const Status& why) {
  return Status::DataLoss(fmt::format("library entry {}: stored {}: {}", fix.id, what, why.message()));
}

}  // namespace

Status FixToProto(const FixRecord& fix, bool details, temper::v1::Fix* out) {
  Result<stig::TargetPlatform> platform = stig::TargetPlatform::FromJson(fix.platform_json);
  if (!platform.ok()) return Corrupt(fix, "platform", platform.status());
  out->set_id(std::to_string(fix.id));
  out->set_rule_id(fix.rule_id);
  out->set_content_id(fix.content_id);
  out->set_platform_label(platform->Label());
  for (const auto& [name, version] : platform->packages) (*out->mutable_packages())[name] = version;
  out->set_source_batch_id(std::to_string(fix.source_batch));
  out->set_source_attempt_id(std::to_string(fix.source_attempt));
  out->set_source_target(fix.source_target);
  out->set_model_tokens(fix.model_tokens);
  out->set_uses(fix.uses);
  out->set_failures(fix.failures);
  out->set_tokens_saved(fix.tokens_saved);
  out->set_last_failure(fix.last_failure);
  *out->mutable_created_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(fix.created_at);
  if (fix.retired_at) {
    *out->mutable_retired_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(*fix.retired_at);
  }
  out->set_retired_reason(fix.retired_reason);
  if (!details) return Status::OK();

  Result<stig::FixBundle> bundle = stig::FixBundle::FromJson(fix.bundle_json);
  if (!bundle.ok()) return Corrupt(fix, "bundle", bundle.status());
  out->set_evidence(fix.evidence);
  for (const std::string& p : bundle->packages.installed) out->add_packages_installed(p);
  for (const std::string& p : bundle->packages.removed) out->add_packages_removed(p);
  for (const std::string& p : bundle->packages.upgraded) out->add_packages_upgraded(p);
  for (const std::string& s : bundle->services.enabled) out->add_services_enabled(s);
  for (const std::string& s : bundle->services.disabled) out->add_services_disabled(s);
  for (const std::string& s : bundle->services.masked) out->add_services_masked(s);
  for (const std::string& s : bundle->services.unmasked) out->add_services_unmasked(s);
  // A bundle may list thousands of files: the message lists as many as keep it within a chunk.
  PageBudget budget(out->ByteSizeLong());
  for (const stig::BundleFile& f : bundle->files) {
    temper::v1::FixFile listed;
    temper::v1::FixFile* file = &listed;
    file->set_path(f.path);
    if (f.before) {
      file->set_before_type(std::string(stig::FileTypeName(f.before->state.type)));
      file->set_before_mode(f.before->state.mode);
      file->set_before_sha256(f.before->sha256);
    }
    if (f.after) {
      file->set_after_type(std::string(stig::FileTypeName(f.after->state.type)));
      file->set_after_mode(f.after->state.mode);
      file->set_after_sha256(f.after->sha256);
    }
    file->set_package(f.package);
    if (out->files_left_out() == 0 && budget.Take(listed.ByteSizeLong())) {
      *out->add_files() = std::move(listed);
    } else {
      out->set_files_left_out(out->files_left_out() + 1);
    }
  }
  return Status::OK();
}

Result<std::string> FixesExportJson(const std::vector<FixRecord>& fixes) {
  nlohmann::json entries = nlohmann::json::array();
  for (const FixRecord& fix : fixes) {
    nlohmann::json platform = nlohmann::json::parse(fix.platform_json, nullptr, /*allow_exceptions=*/false);
    if (!platform.is_object()) return Corrupt(fix, "platform", Status::DataLoss("not a JSON object"));
    nlohmann::json bundle = nlohmann::json::parse(fix.bundle_json, nullptr, /*allow_exceptions=*/false);
    if (!bundle.is_object()) return Corrupt(fix, "bundle", Status::DataLoss("not a JSON object"));
    entries.push_back(
        {{"id", fix.id},
         {"rule_id", fix.rule_id},
         {"content_id", fix.content_id},
         {"platform", std::move(platform)},
         {"bundle", std::move(bundle)},
         {"evidence", fix.evidence},
         {"source", {{"batch", fix.source_batch}, {"attempt", fix.source_attempt}, {"target", fix.source_target}}},
         {"model_tokens", fix.model_tokens},
         {"uses", fix.uses},
         {"failures", fix.failures},
         {"tokens_saved", fix.tokens_saved},
         {"last_failure", fix.last_failure},
         {"created_at", Rfc3339(fix.created_at)},
         {"retired_at", fix.retired_at ? nlohmann::json(Rfc3339(*fix.retired_at)) : nlohmann::json()},
         {"retired_reason", fix.retired_reason}});
  }
  // Evidence and reasons carry what targets and models wrote, which need not be UTF-8.
  return nlohmann::json{{"fixes", std::move(entries)}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace temper
