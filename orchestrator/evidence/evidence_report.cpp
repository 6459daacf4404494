#include "orchestrator/evidence/evidence_report.h"

#include <ctime>
#include <filesystem>
#include <map>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "orchestrator/evidence/results_redaction.h"

namespace temper::evidence {
namespace {

bool Passing(const std::string& v) { return v == "pass" || v == "fixed"; }

// The evidence of `arf` per rule; empty when the evaluation has not run yet.
Result<std::map<std::string, stig::RuleEvidence>> EvidenceOf(const std::string& arf,
                                                             const std::vector<std::string>& ids) {
  std::map<std::string, stig::RuleEvidence> out;
  if (arf.empty()) return out;
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::RuleEvidence> all, stig::ReadOvalEvidence(arf, ids));
  RedactPasswordFields(all);  // shadow items' hashes stay on the host (results_redaction.h)
  for (stig::RuleEvidence& e : all) {
    std::string id = e.rule_id;
    out.emplace(std::move(id), std::move(e));
  }
  return out;
}

}  // namespace

const AttemptEvidence* RuleEvidence::kept() const {
  for (const AttemptEvidence& a : attempts) {
    if (a.attempt.outcome == AttemptOutcome::kKept) return &a;
  }
  return nullptr;
}

std::optional<double> Score::percent() const {
  if (pass + fail == 0) return std::nullopt;
  return 100.0 * pass / (pass + fail);
}

std::string IsoTime(TimeMs ms) {
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(seconds));
}

std::string BatchResultsDir(const std::string& results_root, int64_t batch_id, const std::string& leaf) {
  return fmt::format("{}/batch-{}/{}", results_root, batch_id, leaf);
}

Result<EvidenceReport> CollectEvidence(StateStore& store, const stig::Content& content, const std::string& results_root,
                                       int64_t batch_id) {
  EvidenceReport report;
  report.generated_at = NowMs();
  TEMPER_ASSIGN_OR_RETURN(report.batch, store.GetBatch(batch_id));
  report.benchmark_id = content.benchmark_id();
  report.profile = content.profile();
  for (const char* leaf : {"before", "after"}) {
    std::string arf = BatchResultsDir(results_root, batch_id, leaf) + "/arf.xml";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(arf, ec)) continue;
    (std::string_view(leaf) == "before" ? report.before_arf : report.after_arf) = arf;
  }
  std::vector<std::string> ids;
  for (const BatchRuleRecord& r : report.batch.rules) ids.push_back(r.rule_id);
  TEMPER_ASSIGN_OR_RETURN(auto before, EvidenceOf(report.before_arf, ids));
  TEMPER_ASSIGN_OR_RETURN(auto after, EvidenceOf(report.after_arf, ids));
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, store.BatchAttempts(batch_id));

  for (const BatchRuleRecord& r : report.batch.rules) {
    RuleEvidence e;
    e.rule = r;
    // A plan-only batch reverted everything it did: the target stands at its verdicts before, and
    // the after evidence (the plan's own rescan) only says what the plan would reach.
    if (report.batch.options.plan_only) e.rule.after_verdict.clear();
    if (Result<const stig::RuleInfo*> info = content.Rule(r.rule_id); info.ok()) e.info = *info;
    if (auto it = before.find(r.rule_id); it != before.end()) e.before = it->second;
    if (auto it = after.find(r.rule_id); it != after.end()) e.after = it->second;
    for (const AttemptRecord& a : attempts) {
      if (a.rule_id != r.rule_id) continue;
      AttemptEvidence ae{.attempt = a, .changes = {}, .changes_error = {}};
      Result<stig::ChangeSet> changes = stig::ChangeSet::FromJson(a.changes_json);
      if (changes.ok()) {
        ae.changes = std::move(*changes);
      } else {
        ae.changes_error = changes.status().message();
      }
      e.attempts.push_back(std::move(ae));
    }
    e.plan_only = report.batch.options.plan_only;
    for (const Waiver& w : report.batch.options.waivers) {
      if (w.rule_id == r.rule_id) e.waiver = w;
    }
    auto count = [](Score& s, const std::string& v) {
      if (v.empty()) return;
      ++(Passing(v) ? s.pass : v == "fail" ? s.fail : s.other);
    };
    count(report.before, r.before_verdict);
    count(report.after, e.latest_verdict());
    report.rules.push_back(std::move(e));
  }
  return report;
}

}  // namespace temper::evidence
