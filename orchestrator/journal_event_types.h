// The journal's vocabulary: every event type temperd writes, defined once. One table (in
// journal_event_types.cpp) gives each type its name as stored, written to the JSON Lines files and
// sent to clients ("batch.submitted"), the keys of the data it carries, the rule state it puts its
// rule in (for those that move a rule), what it means in a few words, and its one-line human form.
// The writers name events by EventType; `temper watch` reads them through the table (its sentences
// and its progress bar); the JournalEvent.type documentation in temper.proto lists the same table
// (a test compares them).
//
// Names never change: journals already written are read by later versions. A stored type outside
// the vocabulary (written by a later version, or by hand) is not an error: ParseEventType says
// nullopt and readers show it generically, its data as JSON.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "orchestrator/records.h"

namespace temper {

enum class EventType {
  // A batch's life.
  kBatchSubmitted,
  kBatchStarted,
  kBatchResumed,
  kBatchExpanded,
  kBatchCompleted,
  kBatchFailed,
  kBatchCancelled,
  kBatchPlanReverted,
  kBatchRevertStarted,
  kBatchReverted,
  // The evaluator's scans.
  kEvaluationBefore,
  kFixpointPass,
  // The Architect.
  kArchitectPick,
  kArchitectSkip,
  kArchitectFallback,
  kArchitectReengage,
  // A rule's state.
  kRuleStarted,
  kRuleFixed,
  kRuleRebootPending,
  kRuleEscalated,
  kRuleRequeued,
  kRuleWaived,
  kRuleManual,
  kRuleHeld,
  kRuleRevertStarted,
  kRuleReverted,
  kWaiverExpired,
  // One attempt at a rule: the Worker's steps, the verdict, the Reflector's lesson.
  kAttemptStarted,
  kAttemptKept,
  kAttemptReverted,
  kAttemptConflict,
  kWorkerModelCall,
  kWorkerToolCall,
  kWorkerRefused,
  kWorkerUnusableAnswer,
  kWorkerElided,
  kReflectorLesson,
  kReflectorFailed,
  kPromptTrimmed,
  // `temper rebooted`.
  kRebootConfirmed,
  kRebootVerified,
  kRebootVerificationFailed,
};
inline constexpr size_t kEventTypeCount = 42;

// What a sentence is built from: the stored event, and its data parsed (a JSON object).
struct EventView {
  std::string_view type;  // the stored name
  const std::string& rule_id;
  const std::string& target;
  std::string_view data_json;  // as stored
  const nlohmann::json& data;
};

struct EventSpec {
  EventType type;
  std::string_view name;    // as stored, written and sent: "batch.submitted"
  std::string_view fields;  // the data's keys as the writers write them, space-separated
  // The state the event puts its rule in (rule.fixed: fixed; architect.skip: skipped); nullopt for
  // events that move no rule.
  std::optional<RuleState> rule_state;
  std::string_view meaning;  // what happened, in a few words (temper.proto's documentation)
  // The one-line human form, without seq, time, batch or tokens: "rule.fixed accounts_tmout after 2
  // attempts"; types without a sentence of their own read generically (EventSentence). Data of the
  // wrong shape reads as missing, never throws.
  std::string (*describe)(const EventView& event);
};

// Every type, in EventType order.
std::span<const EventSpec> EventSpecs();
const EventSpec& SpecOf(EventType type);
std::string_view EventTypeName(EventType type);
// nullopt for a name outside the vocabulary.
std::optional<EventType> ParseEventType(std::string_view name);

// The event as a sentence for people: its type's human form when the type is in the vocabulary and
// `data_json` is a JSON object; otherwise generic: the type, the full rule id, and the data as
// stored. Long free text (approaches, lessons, command output) is cut to one line.
std::string EventSentence(std::string_view type, const std::string& rule_id, const std::string& target,
                          const std::string& data_json);

}  // namespace temper
