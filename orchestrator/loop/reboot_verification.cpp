#include "orchestrator/loop/reboot_verification.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/journal_event_types.h"

namespace temper {

namespace {

NewEvent RebootEvent(const BatchRecord& batch, const std::string& rule_id, EventType type, const nlohmann::json& data) {
  NewEvent e;
  e.batch_id = batch.id;
  e.target = batch.target;
  e.rule_id = rule_id;
  e.role = "evaluator";
  e.type = EventTypeName(type);
  e.data_json = EventDataJson(data);
  return e;
}

}  // namespace

Status AbandonRebootVerification(Journal& journal, const BatchRecord& batch, const Status& why) {
  LoopStep step;
  step.batch_id = batch.id;
  step.reboot_verified = true;
  step.events.push_back(RebootEvent(batch, "", EventType::kRebootVerificationFailed,
                                    {{"error", why.ToString()},
                                     {"confirmed_seq", batch.reboot_confirmed_seq.value_or(0)},
                                     {"detail", fmt::format("the rules stay reboot_pending; run `temper rebooted {}` "
                                                            "again once the target can be evaluated",
                                                            batch.id)}}));
  return journal.Commit(step).status();
}

Status VerifyAfterReboot(Journal& journal, stig::Target& target, const stig::Evaluator& evaluator,
                         const std::string& results_root, const BatchRecord& batch) {
  std::vector<const BatchRuleRecord*> pending;
  std::vector<std::string> ids;
  for (const BatchRuleRecord& r : batch.rules) {
    if (r.state != RuleState::kRebootPending) continue;
    pending.push_back(&r);
    ids.push_back(r.rule_id);
  }
  const uint64_t confirmed = batch.reboot_confirmed_seq.value_or(0);
  std::string dir = fmt::format("{}/batch-{}/after-reboot-{}", results_root, batch.id, confirmed);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return AbandonRebootVerification(journal, batch,
                                     Status::IOError(fmt::format("cannot create {}: {}", dir, ec.message())));
  }
  Result<stig::Evaluation> eval =
      ids.empty() ? stig::Evaluation{} : target.Evaluate(evaluator, {.rule_ids = ids, .output_dir = dir});
  if (!eval.ok()) return AbandonRebootVerification(journal, batch, eval.status());

  LoopStep step;
  step.batch_id = batch.id;
  step.reboot_verified = true;
  int fixed = 0, escalated = 0;
  for (const BatchRuleRecord* r : pending) {
    EventType outcome;
    Result<stig::Verdict> verdict = eval->VerdictOf(r->rule_id);
    std::string name = verdict.ok() ? std::string(stig::VerdictName(*verdict)) : "error";
    RuleUpdate u{.rule_id = r->rule_id, .after_verdict = name};
    nlohmann::json data = {{"after_reboot", true}, {"verdict", name}, {"confirmed_seq", confirmed}};
    if (verdict.ok() && stig::IsPassing(*verdict)) {
      ++fixed;
      outcome = EventType::kRuleFixed;
      u.state = RuleState::kFixed;
      u.detail = fmt::format("fixed on attempt {}; verified after the reboot (OpenSCAP: {})", r->attempts, name);
    } else {
      ++escalated;
      outcome = EventType::kRuleEscalated;
      u.state = RuleState::kEscalated;
      u.detail = fmt::format("the staged fix did not hold after the reboot: OpenSCAP verdict {}{}", name,
                             verdict.ok() ? "" : " (" + verdict.status().message() + ")");
    }
    data["detail"] = *u.detail;
    step.events.push_back(RebootEvent(batch, r->rule_id, outcome, data));
    step.rules.push_back(std::move(u));
  }
  step.events.push_back(RebootEvent(batch, "", EventType::kRebootVerified,
                                    {{"fixed", fixed},
                                     {"escalated", escalated},
                                     {"confirmed_seq", confirmed},
                                     {"results_dir", dir},
                                     {"seconds", eval->seconds}}));
  return journal.Commit(step).status();
}

}  // namespace temper
