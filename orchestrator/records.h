// The records the state store keeps: batches and their rules, attempts, lessons and journal events.
// Plain values, independent of the wire format (proto_convert.h maps them to temper.v1 messages).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestrator/budgets.h"
#include "roles/token_usage.h"

namespace temper {

// Milliseconds since the Unix epoch, UTC.
using TimeMs = int64_t;
TimeMs NowMs();

enum class BatchState { kQueued, kRunning, kCompleted, kCancelled, kFailed };
inline constexpr int kBatchStateCount = 5;
enum class RuleState {
  kPending,
  kRunning,
  kFixed,
  kAlreadyPassing,
  kEscalated,
  kSkipped,
  kCancelled,
  kError,
  kWaived,         // a waiver kept the rule out of remediation; never counted as pass
  kManual,         // no automated check; a person reviews it; never counted as pass
  kRebootPending,  // the fix is staged and takes effect after a reboot
  kHeld,           // disruptive, and the batch did not opt in
  kReverted,       // fixed, then its fix was taken back out by `temper revert`
};
inline constexpr int kRuleStateCount = 13;

// The names stored in the database ("queued", "already_passing", ...).
std::string_view BatchStateName(BatchState state);
std::string_view RuleStateName(RuleState state);
std::optional<BatchState> ParseBatchState(std::string_view name);
std::optional<RuleState> ParseRuleState(std::string_view name);
bool IsFinal(BatchState state);
bool IsFinal(RuleState state);

struct BatchRuleRecord {
  std::string rule_id;
  RuleState state = RuleState::kPending;
  uint32_t attempts = 0;
  uint64_t tokens_used = 0;
  std::string detail;
  std::string before_verdict;  // OpenSCAP's verdict when the batch started; empty until evaluated
  std::string after_verdict;   // after the loop finished with the rule
};

// An accepted risk: the rule is not remediated and is reported as waived until `expires_at`.
struct Waiver {
  std::string rule_id;  // full XCCDF id
  std::string reason;
  std::string owner;
  std::optional<TimeMs> expires_at;  // nullopt: no expiry

  bool ExpiredAt(TimeMs now) const { return expires_at && *expires_at <= now; }
};

// How the loop treats the batch's rules beyond the budgets.
struct BatchOptions {
  std::vector<Waiver> waivers;  // the batch's and the configured ones, one per rule
  bool allow_disruptive = false;
  bool plan_only = false;
  // Attempts in flight at once, each on a fork of the target (orchestrator/loop/batch_loop.h): the
  // request's, else temperd's loop.parallel_attempts. A target that cannot fork runs serially.
  uint32_t parallel_attempts = 1;
};

// What SubmitBatch stores, once validated.
struct NewBatch {
  std::string name;
  std::string target;
  std::string datastream;  // absolute path
  std::string profile;     // full XCCDF profile id or the suffix the user gave
  bool whole_profile = false;
  std::vector<std::string> rule_ids;  // full XCCDF ids, unique, in submission order
  Budgets budgets;
  BatchOptions options;
  std::string request_id;  // empty: no idempotency key
  // Fleets (`temper apply`): the batch whose kept fixes this one replays (0: an ordinary batch), the
  // first batch id of the apply call it belongs to (0: none) and how many of that fleet run at once.
  int64_t apply_from = 0;
  int64_t fleet = 0;
  uint32_t at_once = 0;
};

// One pass of the fixpoint: the loop ran until no rule was pending, then rescanned every rule of
// the batch. Rules that flipped (passing or not applicable before, failing now) are re-queued for
// the next pass, or escalated when the bound is reached.
struct FixpointPass {
  uint32_t pass = 0;                         // 1-based
  bool final = false;                        // the rescan was the batch's "after" evaluation: nothing re-queued
  std::map<std::string, uint32_t> verdicts;  // OpenSCAP verdict -> rules, in the rescan
  uint32_t attempts = 0;                     // attempts made during this pass
  uint32_t fixed = 0;                        // of those, kept
  std::vector<std::string> flipped;          // rule ids the rescan found flipped
  std::vector<std::string> requeued;         // of those, made pending for the next pass
  std::vector<std::string> escalated;        // of those, escalated: still flipping at the bound
};

struct BatchRecord {
  int64_t id = 0;
  std::string name;
  std::string target;
  std::string datastream;
  std::string profile;
  bool whole_profile = false;
  Budgets budgets;
  BatchOptions options;
  BatchState state = BatchState::kQueued;
  std::string error;
  std::string request_id;
  TimeMs created_at = 0;
  TimeMs updated_at = 0;
  std::optional<uint32_t> good_snapshot;   // the target's last known-good state for this batch
  std::optional<uint32_t> start_snapshot;  // the target's state when the batch started
  std::vector<FixpointPass> fixpoint;      // the passes so far, oldest first
  std::optional<TimeMs> reverted_at;       // when `temper revert BATCH` took its changes out
  std::string results_dir;                 // OpenSCAP results of the batch's last evaluation
  // The seq of a "reboot.confirmed" event whose re-verification has not run yet (temper rebooted).
  std::optional<uint64_t> reboot_confirmed_seq;
  int64_t apply_from = 0;  // as NewBatch
  int64_t fleet = 0;
  uint32_t at_once = 0;
  uint32_t rule_counts[kRuleStateCount] = {};  // indexed by RuleState; always filled
  std::vector<BatchRuleRecord> rules;          // in submission order; empty when listed without rules

  uint32_t Count(RuleState s) const { return rule_counts[static_cast<int>(s)]; }
  uint32_t TotalRules() const;
};

// An event's data as JSON text. Its strings carry what models, targets and clients wrote, which
// need not be UTF-8: such bytes become U+FFFD instead of failing the event (nlohmann's dump throws).
std::string EventDataJson(const nlohmann::json& data);

struct NewEvent {
  std::optional<int64_t> batch_id;  // nullopt: a daemon-wide event
  std::string target;
  std::string rule_id;
  std::string role;
  std::string type;
  std::string data_json = "{}";  // a JSON object
  TokenUsage usage;
};

struct EventRecord {
  uint64_t seq = 0;
  TimeMs time = 0;
  std::optional<int64_t> batch_id;
  std::string target;
  std::string rule_id;
  std::string role;
  std::string type;
  std::string data_json;
  TokenUsage usage;
};

// What became of an attempt's change: kept, or taken back out (the rule still failed, another rule
// that passed before now fails, or a health check broke).
enum class AttemptOutcome { kKept, kReverted, kRegression, kUnhealthy };
// The names stored in the database and sent to clients ("kept", "reverted", ...).
std::string_view AttemptOutcomeName(AttemptOutcome outcome);
std::optional<AttemptOutcome> ParseAttemptOutcome(std::string_view name);

struct AttemptRecord {
  int64_t id = 0;  // assigned by the store
  int64_t batch_id = 0;
  std::string rule_id;
  uint32_t number = 0;
  std::string approach;
  std::vector<std::string> commands;
  std::string verdict;
  AttemptOutcome outcome = AttemptOutcome::kReverted;
  std::string evidence;
  std::string reflection;
  std::string changes_json;           // what the attempt changed on the target (stig::ChangeSet as JSON)
  std::string fix_json;               // a kept attempt's replayable change (stig::FixBundle as JSON); empty: none
  std::optional<uint32_t> snapshot;   // a kept attempt: the target snapshot holding its change
  std::optional<TimeMs> reverted_at;  // when `temper revert` took that change back out
  TokenUsage usage;
  TimeMs started_at = 0;
  TimeMs finished_at = 0;
};

// A batch's model calls of one role, summed (StateStore::BatchRoleUsage).
struct RoleUsageRecord {
  std::string role;
  uint64_t calls = 0;
  TokenUsage usage;
};

// The classes of target a lesson can be learnt on, as lessons.target_class stores them.
inline constexpr const char* kRootfsTargetClass = "rootfs";
inline constexpr const char* kSshTargetClass = "ssh";
inline constexpr const char* kUnknownTargetClass = "unknown";  // stored before provenance was recorded

struct LessonRecord {
  int64_t id = 0;  // assigned by the store
  std::string rule_id;
  std::string group_id;  // the rule's XCCDF group, for retrieval by neighbouring rules
  std::optional<int64_t> batch_id;
  std::string text;
  double utility = 0.0;
  TimeMs created_at = 0;
  TimeMs updated_at = 0;
  // Where it was learnt, which decides the prompts it may reach (episodic_memory.h): the class of
  // target ("rootfs", "ssh"; "unknown" for lessons stored before schema 7 recorded it), the
  // target's name (empty when unknown) and the role and model endpoint that wrote it.
  std::string target_class = "unknown";
  std::string target;
  std::string learnt_by;
};

// Where a lesson was learnt, as prompts and reports show it: "learnt on SSH host web1 in batch 12
// at 2026-11-29 10:02 UTC by the reflector (endpoint local)", or "unknown (before provenance was
// recorded)".
std::string LessonProvenance(const LessonRecord& lesson);

// The lessons a recall may return (EpisodicMemory::ScopeFor decides): those learnt on a target of
// one of `classes` and, when `target` is set, on that target alone.
struct LessonScope {
  std::vector<std::string> classes;
  std::optional<std::string> target;
};

// One step of the loop, committed in one transaction: a crash leaves all of it or none of it. Rule
// and batch state changes are not applied once the batch has ended (a cancel that raced the step);
// the attempt, lesson and events still are, since they happened.
struct RuleUpdate {
  std::string rule_id;
  std::optional<RuleState> state;
  std::optional<std::string> detail;
  std::optional<std::string> before_verdict;
  std::optional<std::string> after_verdict;
  uint32_t add_attempts = 0;
  uint64_t add_tokens = 0;
};

struct LoopStep {
  int64_t batch_id = 0;
  std::vector<std::string> add_rules;  // a whole-profile batch's rules, once expanded, as pending
  std::vector<RuleUpdate> rules;
  std::optional<BatchState> batch_state;
  std::string batch_error;  // with batch_state
  std::optional<uint32_t> good_snapshot;
  std::optional<uint32_t> start_snapshot;
  std::optional<FixpointPass> fixpoint_pass;  // appended to the batch's passes
  std::optional<std::string> results_dir;
  std::optional<AttemptRecord> attempt;
  std::optional<LessonRecord> lesson;
  std::vector<std::pair<int64_t, double>> utility_changes;  // lesson id, delta
  std::vector<NewEvent> events;
  // The re-verification after a confirmed reboot: its rule updates apply although the batch has
  // completed, and the batch's reboot confirmation is cleared.
  bool reboot_verified = false;
};

struct StepCommitted {
  std::vector<EventRecord> events;
  std::optional<int64_t> lesson_id;
  std::optional<int64_t> attempt_id;  // the step's attempt, as stored
  bool batch_ended = false;  // the batch was already final: its states were left alone
};

// What `temper revert` changes in the store, in one transaction, on a batch that has ended.
struct RevertStep {
  int64_t batch_id = 0;
  std::vector<RuleUpdate> rules;           // only state, detail and after_verdict are applied
  std::vector<int64_t> reverted_attempts;  // attempt ids whose change is gone
  bool batch_reverted = false;             // the whole batch: sets its reverted_at
  std::optional<std::string> results_dir;
  std::vector<NewEvent> events;
};

// An entry of the library of proven fixes (orchestrator/library/fix_library.h): one rule's kept fix
// under one content version on one platform, and how it fared when reused.
struct FixRecord {
  int64_t id = 0;  // assigned by the store
  std::string rule_id;
  std::string content_id;     // "<benchmark id> <benchmark version>"
  std::string platform_json;  // stig::TargetPlatform as JSON: what matching compares
  std::string bundle_json;    // stig::FixBundle as JSON: what a reuse replays
  std::string evidence;       // the kept attempt's verdict and evidence
  int64_t source_batch = 0;
  int64_t source_attempt = 0;
  std::string source_target;
  uint64_t model_tokens = 0;  // what the model spent finding it, saved at each reuse
  uint32_t uses = 0;          // reuses kept
  uint32_t failures = 0;      // reuses that did not pass
  uint64_t tokens_saved = 0;
  std::string last_failure;  // why the last failed reuse failed
  TimeMs created_at = 0;
  std::optional<TimeMs> retired_at;  // set: never matched again
  std::string retired_reason;
};

struct RuleMemoryRecord {
  std::string rule_id;
  std::vector<LessonRecord> lessons;    // newest first
  std::vector<AttemptRecord> attempts;  // newest first
};

}  // namespace temper
