#include "orchestrator/cli/batch_file.h"

#include "orchestrator/budgets.h"
#include "orchestrator/config/waivers.h"
#include "orchestrator/config/yaml_reader.h"
#include "orchestrator/proto_convert.h"

namespace temper::cli {

namespace {

Result<temper::v1::SubmitBatchRequest> ParseBatchNode(const YamlNode& root) {
  if (root.IsNull()) return root.Error("the batch file is empty");
  TEMPER_RETURN_IF_ERROR(
      root.ExpectMapWithKeys({"name", "target", "datastream", "profile", "rules", "whole_profile", "budgets",
                              "request_id", "waivers", "allow_disruptive", "plan_only", "parallel_attempts"}));
  temper::v1::SubmitBatchRequest request;
  auto string_field = [&](std::string_view key, std::string* out) -> Status {
    if (auto n = root.Find(key)) {
      TEMPER_ASSIGN_OR_RETURN(*out, n->AsString());
    }
    return Status::OK();
  };
  TEMPER_RETURN_IF_ERROR(string_field("name", request.mutable_name()));
  TEMPER_RETURN_IF_ERROR(string_field("target", request.mutable_target()));
  TEMPER_RETURN_IF_ERROR(string_field("datastream", request.mutable_datastream()));
  TEMPER_RETURN_IF_ERROR(string_field("profile", request.mutable_profile()));
  TEMPER_RETURN_IF_ERROR(string_field("request_id", request.mutable_request_id()));
  if (auto rules = root.Find("rules")) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, rules->Items());
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(std::string id, item.AsString());
      request.add_rule_ids(id);
    }
  }
  if (auto whole = root.Find("whole_profile")) {
    TEMPER_ASSIGN_OR_RETURN(bool value, whole->AsBool());
    request.set_whole_profile(value);
  }
  if (auto waivers = root.Find("waivers")) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<Waiver> list, ParseWaiverList(*waivers));
    for (const Waiver& w : list) ToProto(w, request.add_waivers());
  }
  if (auto flag = root.Find("allow_disruptive")) {
    TEMPER_ASSIGN_OR_RETURN(bool value, flag->AsBool());
    request.set_allow_disruptive(value);
  }
  if (auto flag = root.Find("plan_only")) {
    TEMPER_ASSIGN_OR_RETURN(bool value, flag->AsBool());
    request.set_plan_only(value);
  }
  if (auto n = root.Find("parallel_attempts")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, kMaxParallelAttempts));
    request.set_parallel_attempts(static_cast<uint32_t>(v));
  }
  if (auto budgets = root.Find("budgets")) {
    TEMPER_RETURN_IF_ERROR(budgets->ExpectMapWithKeys({"max_attempts", "wall_time", "max_tokens"}));
    using R = BudgetRanges;
    if (auto n = budgets->Find("max_attempts")) {
      TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(R::kMinAttempts, R::kMaxAttempts));
      request.mutable_budgets()->set_max_attempts(static_cast<uint32_t>(v));
    }
    if (auto n = budgets->Find("wall_time")) {
      TEMPER_ASSIGN_OR_RETURN(std::chrono::seconds v, n->AsDuration(R::kMinWallTime, R::kMaxWallTime));
      request.mutable_budgets()->set_wall_time_seconds(static_cast<uint32_t>(v.count()));
    }
    if (auto n = budgets->Find("max_tokens")) {
      TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(R::kMinTokens, R::kMaxTokens));
      request.mutable_budgets()->set_max_tokens(static_cast<uint64_t>(v));
    }
  }
  return request;
}

}  // namespace

Result<temper::v1::SubmitBatchRequest> LoadBatchFile(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return ParseBatchNode(root);
}

Result<temper::v1::SubmitBatchRequest> ParseBatchFile(const std::string& text, const std::string& source_name) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadString(text, source_name));
  return ParseBatchNode(root);
}

}  // namespace temper::cli
