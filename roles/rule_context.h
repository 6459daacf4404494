// What the roles are told about a rule and its history: the rule's SCAP metadata, the batch's
// progress, lessons from memory and the attempts made so far. Plain values the orchestrator fills
// from the datastream and the state store; roles only render them into prompts.
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace temper {

struct RuleInfo {
  std::string id;  // xccdf_org.ssgproject.content_rule_...
  std::string title;
  std::string severity;  // high, medium, low, unknown
  std::string description;
  std::string rationale;
  std::string check_text;
  std::string fix_text;
  std::vector<std::string> references;  // STIG ids, CCIs, NIST controls
  // What the content says about the fix's risk, as one phrase ("disruption high, needs a reboot");
  // empty when the content declares nothing.
  std::string risk;
  // Where fix_text comes from, for the record of a reference fix that ran: the datastream's file
  // name and benchmark ("ssg-ubuntu2004-ds.xml, benchmark xccdf_..._UBUNTU_20-04"); empty when unknown.
  std::string reference_fix_source;
};

struct Lesson {
  std::string rule_id;  // the rule it was learnt on
  std::string text;
  double utility = 0.5;    // 0..1, rises and falls with later outcomes
  bool same_rule = false;  // learnt on the rule at hand (else on a similar rule)
  // Where, when and by whom it was learnt, shown beside it so the model weighs it as a note from
  // that target and not as an instruction: "learnt on rootfs target lab in batch 3 at ... by the
  // reflector (endpoint local)"; empty: not known to the caller (nothing is shown).
  std::string provenance;
};

struct PastAttempt {
  int number = 0;
  std::string approach;
  std::string actions;   // the commands run and files written, summarised
  std::string verdict;   // pass, fail, regression, unhealthy, error
  std::string evidence;  // the evaluator's evidence (OVAL results, health check output)
  std::string lesson;    // the Reflector's lesson, if any
};

struct BatchProgress {
  size_t total = 0, passed = 0, failed = 0, escalated = 0, skipped = 0, pending = 0;
  std::vector<std::string> recent_events;  // newest last: "rule X passed on attempt 2"
};

}  // namespace temper
