// A hand-built EvidenceReport with one rule in each situation the exports must tell apart: fixed on
// the second attempt, already passing, escalated, waived, manual, not applicable, and a rule whose
// text carries markup. For the checklist and HTML tests, which need no daemon.
#pragma once

#include <deque>

#include "orchestrator/evidence/evidence_report.h"

namespace temper::testing {

struct EvidenceFixture {
  std::deque<stig::RuleInfo> infos;  // stable addresses for RuleEvidence::info
  evidence::EvidenceReport report;

  EvidenceFixture() {
    report.batch.id = 7;
    report.batch.name = "nightly";
    report.batch.target = "lab";
    report.batch.datastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
    report.batch.state = BatchState::kCompleted;
    report.benchmark_id = "xccdf_org.ssgproject.content_benchmark_UBUNTU2004";
    report.profile = {"xccdf_org.ssgproject.content_profile_stig", "Canonical Ubuntu 20.04 LTS STIG", "The profile."};

    evidence::RuleEvidence& fixed = Add("accounts_tmout", RuleState::kFixed, "fail", "pass", "fixed on attempt 2");
    fixed.attempts.push_back(Attempt(1, AttemptOutcome::kReverted, "fail", ""));
    fixed.attempts.back().attempt.reflection = "Tried: profile.d\nWhy it failed: wrong variable";
    fixed.attempts.push_back(Attempt(2, AttemptOutcome::kKept, "pass",
                                     "--- a/etc/profile.d/tmout.sh\n+++ b/etc/profile.d/tmout.sh\n"
                                     "@@ -0,0 +1 @@\n+declare -xr TMOUT=600\n"));
    fixed.after = stig::RuleEvidence{.rule_id = fixed.rule.rule_id,
                                     .result = "pass",
                                     .message = "",
                                     .definitions = {{.id = "oval:ssg-accounts_tmout:def:1",
                                                      .title = "Set TMOUT",
                                                      .result = "true",
                                                      .extends = {},
                                                      .tests = {}}}};
    Add("no_duplicate_uids", RuleState::kAlreadyPassing, "pass", "pass", "");
    evidence::RuleEvidence& escalated =
        Add("is_fips_mode_enabled", RuleState::kEscalated, "fail", "fail", "attempt budget spent: 3 attempts failed");
    escalated.attempts.push_back(Attempt(1, AttemptOutcome::kReverted, "fail", ""));
    escalated.attempts.back().attempt.reflection = "Tried: fips=1\nWhy it failed: needs a kernel";
    evidence::RuleEvidence& waived = Add("sshd_disable_root_login", RuleState::kWaived, "fail", "fail", "waived");
    waived.waiver = Waiver{waived.rule.rule_id, "jump host needs root", "ops@example.com", std::nullopt};
    Add("configure_user_data_backups", RuleState::kManual, "notchecked", "notchecked", "no automated check");
    Add("package_mcafeetp_installed", RuleState::kSkipped, "notapplicable", "notapplicable", "not applicable");
    evidence::RuleEvidence& markup = Add("banner_etc_issue_net", RuleState::kFixed, "fail", "pass", "");
    infos.back().title = "Banner <script>alert('x')</script> & more";
    markup.attempts.push_back(Attempt(1, AttemptOutcome::kKept, "pass", "+<script>document.cookie</script>\n"));
    report.before = {.pass = 1, .fail = 5, .other = 2};
    report.after = {.pass = 3, .fail = 2, .other = 2};
  }

  evidence::RuleEvidence& Add(const std::string& name, RuleState state, const std::string& before,
                              const std::string& after, const std::string& detail) {
    stig::RuleInfo& info = infos.emplace_back();
    info.id = std::string(stig::kRulePrefix) + name;
    info.title = "Rule " + name;
    info.severity = "medium";
    info.description = "Why " + name + " matters.";
    info.oval_definition_id = "oval:ssg-" + name + ":def:1";
    info.check_summary = "checks " + name;
    info.fix_bash = "echo fix " + name;
    info.stig_ids = {"UBTU-20-010000"};
    info.ccis = {"CCI-000366", "CCI-001384"};
    info.srgs = {"SRG-OS-000480-GPOS-00227"};
    evidence::RuleEvidence r;
    r.rule = {.rule_id = info.id,
              .state = state,
              .attempts = 0,
              .tokens_used = 0,
              .detail = detail,
              .before_verdict = before,
              .after_verdict = after};
    r.info = &info;
    report.rules.push_back(std::move(r));
    return report.rules.back();
  }

  static evidence::AttemptEvidence Attempt(uint32_t number, AttemptOutcome outcome, const std::string& verdict,
                                           const std::string& diff) {
    evidence::AttemptEvidence a;
    a.attempt.number = number;
    a.attempt.outcome = outcome;
    a.attempt.verdict = verdict;
    a.attempt.approach = "approach " + std::to_string(number);
    a.attempt.commands = {"write_file /etc/profile.d/tmout.sh"};
    if (!diff.empty()) {
      a.changes.files.push_back({.path = "/etc/profile.d/tmout.sh",
                                 .change = stig::FileChangeKind::kAdded,
                                 .before = std::nullopt,
                                 .after = stig::FileState{stig::FileType::kFile, 0644, 0, 0, 22, ""},
                                 .diff = diff});
    }
    return a;
  }
};

}  // namespace temper::testing
