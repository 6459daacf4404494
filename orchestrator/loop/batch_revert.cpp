#include "orchestrator/loop/batch_revert.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/journal_event_types.h"

namespace temper {

namespace {

using Owners = StateStore::SnapshotOwners;

std::string Short(const std::string& id) {
  return id.rfind(stig::kRulePrefix, 0) == 0 ? id.substr(stig::kRulePrefix.size()) : id;
}

bool Passing(const std::string& verdict) { return verdict == "pass" || verdict == "fixed"; }

// States whose rule kept a change on the target: fixed, or staged until a reboot.
bool KeptAChange(RuleState s) { return s == RuleState::kFixed || s == RuleState::kRebootPending; }

std::string List(const std::vector<std::string>& items, size_t at_most = 8) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < at_most; ++i) out += (i == 0 ? "" : ", ") + items[i];
  if (items.size() > at_most) out += fmt::format(" and {} more", items.size() - at_most);
  return out;
}

// The kept, not yet reverted fix that made snapshot `id`, or null.
const Owners::Fix* FixOf(const Owners& owners, stig::SnapshotId id) {
  for (const Owners::Fix& f : owners.fixes) {
    if (f.snapshot == id && !f.reverted_at) return &f;
  }
  return nullptr;
}

// Who made snapshot `id`, for people: "rule accounts_tmout of batch 4 (attempt 1)".
std::string OwnerOf(const Owners& owners, stig::SnapshotId id) {
  if (const Owners::Fix* f = FixOf(owners, id)) {
    return fmt::format("rule {} of batch {} (attempt {}, snapshot {})", Short(f->rule_id), f->batch_id, f->number, id);
  }
  for (const Owners::Batch& b : owners.batches) {
    if (b.start_snapshot == id)
      return fmt::format("changes found on the target when batch {} started (snapshot {})", b.id, id);
  }
  return fmt::format("snapshot {}, which no batch recorded", id);
}

Status Refuse(std::string message) { return Status::FailedPrecondition(std::move(message)); }

// The checks both kinds of revert share.
Status CheckRevertible(const BatchRecord& batch) {
  switch (batch.state) {
    case BatchState::kQueued:
      return Refuse(fmt::format("batch {} has not run yet: it changed nothing to revert", batch.id));
    case BatchState::kRunning:
      return Refuse(
          fmt::format("batch {} is running on target {}: a revert must wait until it ends (or cancel it "
                      "with `temper cancel {}`)",
                      batch.id, batch.target, batch.id));
    default:
      break;
  }
  if (batch.options.plan_only) {
    return Refuse(
        fmt::format("batch {} was plan-only: it left nothing on target {} to revert", batch.id, batch.target));
  }
  if (batch.reverted_at) return Refuse(fmt::format("batch {} was already reverted", batch.id));
  if (!batch.start_snapshot && !batch.good_snapshot) {
    return Refuse(fmt::format("batch {} never started on target {} ({}): it changed nothing to revert", batch.id,
                              batch.target, BatchStateName(batch.state)));
  }
  if (!batch.start_snapshot) {
    return Refuse(
        fmt::format("batch {} recorded no start snapshot (it ran before temper could revert batches)", batch.id));
  }
  return Status::OK();
}

Status CheckNoLooseChanges(stig::Target& target) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changed, target.UnsnapshottedPaths());
  if (changed.empty()) return Status::OK();
  return Refuse(
      fmt::format("target {} has {} changed path{} that no snapshot holds ({}); they belong to no batch and "
                  "a revert would discard them: find out what changed the target outside temper first",
                  target.name(), changed.size(), changed.size() == 1 ? "" : "s", List(changed, 5)));
}

// Evaluates `ids` into a fresh results directory.
Result<stig::Evaluation> Evaluate(const RevertServices& s, stig::Target& target, int64_t batch_id,
                                  const std::vector<std::string>& ids, std::string& results_dir) {
  results_dir = fmt::format("{}/batch-{}/revert-{}", s.results_root, batch_id, NowMs());
  std::error_code ec;
  std::filesystem::create_directories(results_dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create {}: {}", results_dir, ec.message()));
  if (ids.empty()) return stig::Evaluation{};
  return target.Evaluate(s.evaluator, {.rule_ids = ids, .output_dir = results_dir});
}

NewEvent Event(const BatchRecord& batch, const std::string& rule_id, EventType type, const nlohmann::json& data) {
  NewEvent e;
  e.batch_id = batch.id;
  e.target = batch.target;
  e.rule_id = rule_id;
  e.role = "daemon";
  e.type = EventTypeName(type);
  e.data_json = EventDataJson(data);
  return e;
}

// Fresh verdicts into the step: every evaluated rule's after verdict, and the rules that passed
// before and fail now (other than those reverted).
void ApplyVerdicts(const BatchRecord& batch, const stig::Evaluation& eval, const std::set<std::string>& reverted,
                   RevertStep& step, RevertOutcome& out, std::map<std::string, int>& counts) {
  std::map<std::string, std::string> now;
  for (const stig::RuleVerdict& v : eval.verdicts) {
    now[v.rule_id] = std::string(stig::VerdictName(v.verdict));
    ++counts[now[v.rule_id]];
  }
  for (const BatchRuleRecord& r : batch.rules) {
    auto it = now.find(r.rule_id);
    if (it == now.end()) continue;
    if (!reverted.count(r.rule_id) && Passing(r.after_verdict) && !Passing(it->second)) {
      out.now_failing.push_back(r.rule_id);
    }
    if (reverted.count(r.rule_id)) continue;  // its update carries the verdict with the new state
    step.rules.push_back({.rule_id = r.rule_id, .after_verdict = it->second});
  }
}

Result<RevertOutcome> RevertWholeBatch(const RevertServices& s, stig::Target& target, const BatchRecord& batch,
                                       const Owners& owners) {
  const stig::SnapshotId start = *batch.start_snapshot;
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotId> held, target.Snapshots());
  // Everything above the start goes: it must be this batch's, or hold nothing.
  std::vector<std::string> in_the_way;
  std::set<int64_t> later_batches;
  for (stig::SnapshotId id : held) {
    if (id <= start) continue;
    const Owners::Fix* fix = FixOf(owners, id);
    if (fix && fix->batch_id == batch.id) continue;
    if (!fix) {
      TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changes, target.SnapshotChanges(id));
      if (changes.empty()) continue;
    }
    if (fix) later_batches.insert(fix->batch_id);
    in_the_way.push_back(OwnerOf(owners, id));
  }
  if (!in_the_way.empty()) {
    std::string first = later_batches.empty() ? "take those changes out first"
                                              : fmt::format("revert batch {} first (`temper revert {}`)",
                                                            *later_batches.rbegin(), *later_batches.rbegin());
    return Refuse(fmt::format("batch {} cannot be reverted: later changes on target {} lie on top of it: {}; {}",
                              batch.id, batch.target, List(in_the_way), first));
  }
  TEMPER_RETURN_IF_ERROR(CheckNoLooseChanges(target));

  std::set<std::string> reverted;
  for (const BatchRuleRecord& r : batch.rules) {
    if (KeptAChange(r.state)) reverted.insert(r.rule_id);
  }
  TEMPER_RETURN_IF_ERROR(s.journal
                             .Append(Event(batch, "", EventType::kBatchRevertStarted,
                                           {{"restore_snapshot", start},
                                            {"rules", std::vector<std::string>(reverted.begin(), reverted.end())}}))
                             .status());
  TEMPER_RETURN_IF_ERROR(target.Revert(start));

  RevertOutcome out;
  out.restored_snapshot = start;
  out.reverted_rules.assign(reverted.begin(), reverted.end());
  std::vector<std::string> ids;
  for (const BatchRuleRecord& r : batch.rules) {
    if (s.content.Rule(r.rule_id).ok()) ids.push_back(r.rule_id);
  }
  TEMPER_ASSIGN_OR_RETURN(stig::Evaluation eval, Evaluate(s, target, batch.id, ids, out.results_dir));

  RevertStep step;
  step.batch_id = batch.id;
  step.batch_reverted = true;
  step.results_dir = out.results_dir;
  std::map<std::string, int> counts;
  ApplyVerdicts(batch, eval, reverted, step, out, counts);
  for (const std::string& id : reverted) {
    Result<stig::Verdict> v = eval.VerdictOf(id);
    RuleUpdate u{.rule_id = id,
                 .state = RuleState::kReverted,
                 .detail = fmt::format("fixed, then reverted with the whole batch (`temper revert {}`)", batch.id)};
    if (v.ok()) u.after_verdict = std::string(stig::VerdictName(*v));
    step.rules.push_back(std::move(u));
  }
  for (const Owners::Fix& f : owners.fixes) {
    if (f.batch_id == batch.id && !f.reverted_at) step.reverted_attempts.push_back(f.attempt_id);
  }
  step.events.push_back(Event(batch, "", EventType::kBatchReverted,
                              {{"restored_snapshot", start},
                               {"reverted_rules", out.reverted_rules},
                               {"verdicts", counts},
                               {"now_failing", out.now_failing},
                               {"results_dir", out.results_dir}}));
  TEMPER_RETURN_IF_ERROR(s.journal.CommitRevert(step).status());
  TEMPER_ASSIGN_OR_RETURN(out.batch, s.journal.store().GetBatch(batch.id));
  return out;
}

Result<RevertOutcome> RevertRule(const RevertServices& s, stig::Target& target, const BatchRecord& batch,
                                 const Owners& owners, const std::string& rule_id) {
  std::vector<const Owners::Fix*> fixes;
  std::set<stig::SnapshotId> own;
  for (const Owners::Fix& f : owners.fixes) {
    if (f.batch_id != batch.id || f.rule_id != rule_id || f.reverted_at) continue;
    fixes.push_back(&f);
    own.insert(f.snapshot);
  }
  if (fixes.empty()) {
    return Refuse(fmt::format("rule {} of batch {} has no recorded snapshot (fixed before temper could revert rules)",
                              Short(rule_id), batch.id));
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotId> held_list, target.Snapshots());
  std::set<stig::SnapshotId> held(held_list.begin(), held_list.end());
  std::vector<stig::SnapshotId> present;  // a crashed earlier run may have dropped some already
  for (stig::SnapshotId id : own) {
    if (held.count(id)) present.push_back(id);
  }
  // Reverse order only: a later snapshot that holds one of these paths must go first.
  std::vector<std::string> in_the_way;
  std::string first_rule;
  for (stig::SnapshotId id : present) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotOverlap> overlaps, target.OverlapsAbove(id));
    for (const stig::SnapshotOverlap& o : overlaps) {
      if (own.count(o.later)) continue;
      in_the_way.push_back(fmt::format("{} changed {}", OwnerOf(owners, o.later), List(o.paths, 5)));
      if (const Owners::Fix* f = FixOf(owners, o.later); f && first_rule.empty()) {
        first_rule = fmt::format("`temper revert {} {}`", f->batch_id, Short(f->rule_id));
      }
    }
  }
  if (!in_the_way.empty()) {
    return Refuse(fmt::format(
        "rule {} of batch {} cannot be reverted alone: later changes touch the same paths: {}. Revert in reverse "
        "order: {} first, then this rule",
        Short(rule_id), batch.id, List(in_the_way), first_rule.empty() ? "those changes" : first_rule));
  }
  TEMPER_RETURN_IF_ERROR(CheckNoLooseChanges(target));

  TEMPER_RETURN_IF_ERROR(
      s.journal.Append(Event(batch, rule_id, EventType::kRuleRevertStarted, {{"snapshots", present}})).status());
  RevertOutcome out;
  for (auto it = present.rbegin(); it != present.rend(); ++it) {
    TEMPER_RETURN_IF_ERROR(target.DropSnapshot(*it));
    out.dropped_snapshots.push_back(*it);
  }
  out.reverted_rules = {rule_id};

  // The rule, and the batch's rules that passed: did taking this fix out break one of them?
  std::vector<std::string> ids = {rule_id};
  for (const BatchRuleRecord& r : batch.rules) {
    if (r.rule_id != rule_id && (r.state == RuleState::kFixed || r.state == RuleState::kAlreadyPassing) &&
        s.content.Rule(r.rule_id).ok()) {
      ids.push_back(r.rule_id);
    }
  }
  TEMPER_ASSIGN_OR_RETURN(stig::Evaluation eval, Evaluate(s, target, batch.id, ids, out.results_dir));

  RevertStep step;
  step.batch_id = batch.id;
  step.results_dir = out.results_dir;
  std::map<std::string, int> counts;
  ApplyVerdicts(batch, eval, {rule_id}, step, out, counts);
  std::vector<uint32_t> numbers;
  for (const Owners::Fix* f : fixes) {
    step.reverted_attempts.push_back(f->attempt_id);
    numbers.push_back(f->number);
  }
  RuleUpdate u{.rule_id = rule_id,
               .state = RuleState::kReverted,
               .detail = fmt::format("fixed on attempt {}, then reverted (`temper revert {} {}`)",
                                     fmt::join(numbers, " and "), batch.id, Short(rule_id))};
  std::string verdict;
  if (Result<stig::Verdict> v = eval.VerdictOf(rule_id); v.ok()) verdict = std::string(stig::VerdictName(*v));
  if (!verdict.empty()) u.after_verdict = verdict;
  step.rules.push_back(std::move(u));
  step.events.push_back(Event(batch, rule_id, EventType::kRuleReverted,
                              {{"dropped_snapshots", out.dropped_snapshots},
                               {"verdict", verdict},
                               {"verdicts", counts},
                               {"now_failing", out.now_failing},
                               {"results_dir", out.results_dir}}));
  TEMPER_RETURN_IF_ERROR(s.journal.CommitRevert(step).status());
  TEMPER_ASSIGN_OR_RETURN(out.batch, s.journal.store().GetBatch(batch.id));
  return out;
}

}  // namespace

Status CheckRevertRequest(const BatchRecord& batch, const RevertRequest& request) {
  TEMPER_RETURN_IF_ERROR(CheckRevertible(batch));
  if (request.rule_id.empty()) return Status::OK();
  auto rule = std::find_if(batch.rules.begin(), batch.rules.end(),
                           [&](const BatchRuleRecord& r) { return r.rule_id == request.rule_id; });
  if (rule == batch.rules.end()) {
    return Status::NotFound(fmt::format("batch {} has no rule {}", batch.id, request.rule_id));
  }
  if (rule->state == RuleState::kReverted) {
    return Refuse(fmt::format("rule {} of batch {} was already reverted", Short(request.rule_id), batch.id));
  }
  if (!KeptAChange(rule->state)) {
    return Refuse(fmt::format("rule {} of batch {} is {}, not fixed: it left no change to revert",
                              Short(request.rule_id), batch.id, RuleStateName(rule->state)));
  }
  return Status::OK();
}

Result<RevertOutcome> RevertBatch(const RevertServices& s, stig::Target& target, const RevertRequest& request) {
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, s.journal.store().GetBatch(request.batch_id));
  if (batch.target != target.name()) {
    return Status::Internal(fmt::format("batch {} ran on target {}, not {}", batch.id, batch.target, target.name()));
  }
  TEMPER_RETURN_IF_ERROR(CheckRevertRequest(batch, request));
  TEMPER_ASSIGN_OR_RETURN(Owners owners, s.journal.store().TargetSnapshotOwners(batch.target));
  if (request.rule_id.empty()) return RevertWholeBatch(s, target, batch, owners);
  return RevertRule(s, target, batch, owners, request.rule_id);
}

}  // namespace temper
