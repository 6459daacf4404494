#include "orchestrator/proto_convert.h"

#include <google/protobuf/util/time_util.h>

namespace temper {

namespace {

void SetTime(TimeMs ms, google::protobuf::Timestamp* out) {
  *out = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(ms);
}

void ToProto(const TokenUsage& usage, temper::v1::TokenUsage* out) {
  out->set_prompt_tokens(usage.prompt_tokens);
  out->set_completion_tokens(usage.completion_tokens);
  out->set_cached_prompt_tokens(usage.cached_prompt_tokens);
}

}  // namespace

temper::v1::BatchState ToProto(BatchState state) {
  switch (state) {
    case BatchState::kQueued:
      return temper::v1::BATCH_STATE_QUEUED;
    case BatchState::kRunning:
      return temper::v1::BATCH_STATE_RUNNING;
    case BatchState::kCompleted:
      return temper::v1::BATCH_STATE_COMPLETED;
    case BatchState::kCancelled:
      return temper::v1::BATCH_STATE_CANCELLED;
    case BatchState::kFailed:
      return temper::v1::BATCH_STATE_FAILED;
  }
  return temper::v1::BATCH_STATE_UNSPECIFIED;
}

std::optional<BatchState> FromProto(temper::v1::BatchState state) {
  switch (state) {
    case temper::v1::BATCH_STATE_QUEUED:
      return BatchState::kQueued;
    case temper::v1::BATCH_STATE_RUNNING:
      return BatchState::kRunning;
    case temper::v1::BATCH_STATE_COMPLETED:
      return BatchState::kCompleted;
    case temper::v1::BATCH_STATE_CANCELLED:
      return BatchState::kCancelled;
    case temper::v1::BATCH_STATE_FAILED:
      return BatchState::kFailed;
    default:
      return std::nullopt;
  }
}

temper::v1::RuleState ToProto(RuleState state) {
  switch (state) {
    case RuleState::kPending:
      return temper::v1::RULE_STATE_PENDING;
    case RuleState::kRunning:
      return temper::v1::RULE_STATE_RUNNING;
    case RuleState::kFixed:
      return temper::v1::RULE_STATE_FIXED;
    case RuleState::kAlreadyPassing:
      return temper::v1::RULE_STATE_ALREADY_PASSING;
    case RuleState::kEscalated:
      return temper::v1::RULE_STATE_ESCALATED;
    case RuleState::kSkipped:
      return temper::v1::RULE_STATE_SKIPPED;
    case RuleState::kCancelled:
      return temper::v1::RULE_STATE_CANCELLED;
    case RuleState::kError:
      return temper::v1::RULE_STATE_ERROR;
    case RuleState::kWaived:
      return temper::v1::RULE_STATE_WAIVED;
    case RuleState::kManual:
      return temper::v1::RULE_STATE_MANUAL;
    case RuleState::kRebootPending:
      return temper::v1::RULE_STATE_REBOOT_PENDING;
    case RuleState::kHeld:
      return temper::v1::RULE_STATE_HELD;
    case RuleState::kReverted:
      return temper::v1::RULE_STATE_REVERTED;
  }
  return temper::v1::RULE_STATE_UNSPECIFIED;
}

void ToProto(const BatchRuleRecord& r, temper::v1::BatchRule* out) {
  out->set_rule_id(r.rule_id);
  out->set_state(ToProto(r.state));
  out->set_attempts(r.attempts);
  out->set_tokens_used(r.tokens_used);
  out->set_detail(r.detail);
  out->set_before_verdict(r.before_verdict);
  out->set_after_verdict(r.after_verdict);
}

void ToProto(const BatchRecord& b, temper::v1::Batch* out) {
  out->set_id(std::to_string(b.id));
  out->set_name(b.name);
  out->set_target(b.target);
  out->set_datastream(b.datastream);
  out->set_profile(b.profile);
  out->set_whole_profile(b.whole_profile);
  out->mutable_budgets()->set_max_attempts(b.budgets.max_attempts);
  out->mutable_budgets()->set_wall_time_seconds(static_cast<uint32_t>(b.budgets.wall_time.count()));
  out->mutable_budgets()->set_max_tokens(b.budgets.max_tokens);
  out->set_state(ToProto(b.state));
  SetTime(b.created_at, out->mutable_created_at());
  SetTime(b.updated_at, out->mutable_updated_at());
  temper::v1::RuleCounts* c = out->mutable_counts();
  c->set_total(b.TotalRules());
  c->set_pending(b.Count(RuleState::kPending));
  c->set_running(b.Count(RuleState::kRunning));
  c->set_fixed(b.Count(RuleState::kFixed));
  c->set_already_passing(b.Count(RuleState::kAlreadyPassing));
  c->set_escalated(b.Count(RuleState::kEscalated));
  c->set_skipped(b.Count(RuleState::kSkipped));
  c->set_cancelled(b.Count(RuleState::kCancelled));
  c->set_error(b.Count(RuleState::kError));
  c->set_waived(b.Count(RuleState::kWaived));
  c->set_manual(b.Count(RuleState::kManual));
  c->set_reboot_pending(b.Count(RuleState::kRebootPending));
  c->set_held(b.Count(RuleState::kHeld));
  c->set_reverted(b.Count(RuleState::kReverted));
  for (const BatchRuleRecord& r : b.rules) ToProto(r, out->add_rules());
  out->set_error(b.error);
  out->set_request_id(b.request_id);
  for (const Waiver& w : b.options.waivers) ToProto(w, out->add_waivers());
  out->set_allow_disruptive(b.options.allow_disruptive);
  out->set_plan_only(b.options.plan_only);
  out->set_parallel_attempts(b.options.parallel_attempts);
  if (b.reboot_confirmed_seq) out->set_reboot_confirmed_seq(*b.reboot_confirmed_seq);
  if (b.start_snapshot) out->set_start_snapshot(*b.start_snapshot);
  if (b.reverted_at) SetTime(*b.reverted_at, out->mutable_reverted_at());
  if (b.apply_from != 0) out->set_apply_from(std::to_string(b.apply_from));
  if (b.fleet != 0) out->set_fleet(std::to_string(b.fleet));
  out->set_at_once(b.at_once);
}

void ToProto(const FixpointPass& p, temper::v1::FixpointPass* out) {
  out->set_pass(p.pass);
  out->set_final(p.final);
  uint32_t rescanned = 0;
  for (const auto& [verdict, n] : p.verdicts) rescanned += n;
  auto count = [&](const char* verdict) {
    auto it = p.verdicts.find(verdict);
    return it == p.verdicts.end() ? 0u : it->second;
  };
  out->set_rescanned(rescanned);
  out->set_passing(count("pass") + count("fixed"));
  out->set_failing(count("fail"));
  out->set_attempts(p.attempts);
  out->set_fixed(p.fixed);
  for (const std::string& id : p.flipped) out->add_flipped(id);
  for (const std::string& id : p.requeued) out->add_requeued(id);
  for (const std::string& id : p.escalated) out->add_escalated(id);
}

void ToProto(const Waiver& w, temper::v1::Waiver* out) {
  out->set_rule_id(w.rule_id);
  out->set_reason(w.reason);
  out->set_owner(w.owner);
  if (w.expires_at) SetTime(*w.expires_at, out->mutable_expires_at());
}

void ToProto(const EventRecord& e, temper::v1::JournalEvent* out) {
  out->set_seq(e.seq);
  SetTime(e.time, out->mutable_time());
  if (e.batch_id) out->set_batch_id(std::to_string(*e.batch_id));
  out->set_target(e.target);
  out->set_rule_id(e.rule_id);
  out->set_role(e.role);
  out->set_type(e.type);
  out->set_data_json(e.data_json);
  ToProto(e.usage, out->mutable_usage());
}

void ToProto(const RoleUsageRecord& r, temper::v1::RoleUsage* out) {
  out->set_role(r.role);
  out->set_calls(r.calls);
  ToProto(r.usage, out->mutable_usage());
}

void ToProto(const LessonRecord& l, temper::v1::Lesson* lesson) {
  lesson->set_id(l.id);
  lesson->set_rule_id(l.rule_id);
  if (l.batch_id) lesson->set_batch_id(std::to_string(*l.batch_id));
  lesson->set_text(l.text);
  lesson->set_utility(l.utility);
  SetTime(l.created_at, lesson->mutable_created_at());
  SetTime(l.updated_at, lesson->mutable_updated_at());
  lesson->set_target_class(l.target_class);
  lesson->set_target(l.target);
  lesson->set_learnt_by(l.learnt_by);
  lesson->set_provenance(LessonProvenance(l));
}

void ToProto(const AttemptRecord& a, temper::v1::Attempt* attempt) {
  attempt->set_id(a.id);
  attempt->set_batch_id(std::to_string(a.batch_id));
  attempt->set_rule_id(a.rule_id);
  attempt->set_number(a.number);
  attempt->set_approach(a.approach);
  for (const std::string& c : a.commands) attempt->add_commands(c);
  attempt->set_verdict(a.verdict);
  attempt->set_outcome(std::string(AttemptOutcomeName(a.outcome)));
  attempt->set_evidence(a.evidence);
  attempt->set_reflection(a.reflection);
  attempt->set_changes_json(a.changes_json);
  if (a.snapshot) attempt->set_snapshot(*a.snapshot);
  if (a.reverted_at) SetTime(*a.reverted_at, attempt->mutable_reverted_at());
  ToProto(a.usage, attempt->mutable_usage());
  SetTime(a.started_at, attempt->mutable_started_at());
  SetTime(a.finished_at, attempt->mutable_finished_at());
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kAborted:
      code = grpc::StatusCode::ABORTED;
      break;
    case StatusCode::kOutOfRange:
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    case StatusCode::kIOError:
      code = grpc::StatusCode::INTERNAL;
      break;
  }
  return grpc::Status(code, status.message());
}

}  // namespace temper
