// Live progress for `temper watch`: per batch, how many rules are fixed, already passing, failed,
// escalated, skipped, waived, manual, held, reboot pending and left, and what the loop is doing now,
// kept up to date from the journal events the watch prints anyway, so progress costs no extra polling.
//
// BatchProgressModel is one batch's tally; ProgressBoard turns events into the text to write: on a
// terminal the progress lines stay under the event lines and are redrawn in place (ANSI erase line),
// elsewhere (a pipe, a file) a batch's line is printed only when its counts change, so logs stay
// short. Neither does I/O, so both are tested on hand-built events.
//
// Not thread-safe; one watch owns them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "orchestrator/journal_event_types.h"
#include "orchestrator/records.h"
#include "temper/v1/temper.pb.h"

namespace temper::cli {

struct ProgressCounts {
  bool total_known = false;  // false for a whole-profile batch until the profile is expanded
  uint32_t total = 0;
  uint32_t fixed = 0;
  uint32_t already_passing = 0;
  uint32_t failed = 0;  // the evaluator could not decide the rule (RULE_STATE_ERROR)
  uint32_t escalated = 0;
  uint32_t skipped = 0;
  uint32_t cancelled = 0;
  uint32_t waived = 0;  // rule policy (orchestrator/loop/rule_policy.h): never counted as pass
  uint32_t manual = 0;
  uint32_t held = 0;
  uint32_t reboot_pending = 0;  // fixed, staged until `temper rebooted`

  uint32_t done() const {
    return fixed + already_passing + failed + escalated + skipped + cancelled + waived + manual + held + reboot_pending;
  }
  // Rules not in a final state; 0 while the total is unknown.
  uint32_t left() const { return total_known && total > done() ? total - done() : 0; }
  bool operator==(const ProgressCounts&) const = default;
};

// One batch's progress. Events are applied idempotently per rule (a rule's final state is kept by
// rule id), so seeding from GetBatch and then replaying older events of the same batch does not count
// a rule twice. An event that puts its rule in a state (the journal's vocabulary says which:
// orchestrator/journal_event_types.h) counts the rule in that state when it is one the line shows.
// evaluation.before carries counts, not rule ids (the states it decided, or in older journals the
// verdicts); it is ignored when the seed already had before-verdicts. Rules the rule policy decided
// have their own events (rule.waived, ...). batch.completed's own counts, when seen,
// are taken as they are; a reboot verification after it (rule.fixed / rule.escalated of a
// reboot_pending rule) moves them on.
class BatchProgressModel {
 public:
  explicit BatchProgressModel(std::string batch_id) : batch_id_(std::move(batch_id)) {}

  // Takes the batch's state as GetBatch returned it: every rule's state, the total, whether it ended.
  void Seed(const temper::v1::Batch& batch);
  // Applies one event; events of other batches, and types that carry no progress, change nothing but
  // the current rule and role.
  void Apply(const temper::v1::JournalEvent& event);

  ProgressCounts counts() const;
  bool ended() const { return phase_ == Phase::kCompleted || phase_ == Phase::kFailed || phase_ == Phase::kCancelled; }
  const std::string& batch_id() const { return batch_id_; }
  const std::string& current_rule() const { return rule_; }
  const std::string& current_role() const { return role_; }

  // "batch 3  [###-------] 3/10  fixed 2 · already 1 · failed 0 · escalated 0 · skipped 0 · left 7
  //  ▸ sshd_disable_root_login (worker)"; the tail says "completed", "failed: why" or "cancelled" once
  // the batch ended, and "queued" before it started.
  std::string Line() const;
  // What a non-terminal watch compares to decide whether to print the line again: the counts and
  // whether (and how) the batch ended, not the current rule.
  std::string ChangeKey() const;

 private:
  enum class Phase { kUnknown, kQueued, kRunning, kCompleted, kFailed, kCancelled };

  // `state` is one the line counts (a final one).
  void SetFinal(const std::string& rule_id, RuleState state);
  // What an event about the whole batch (submitted, completed, evaluation.before, ...) changes.
  void ApplyBatchEvent(EventType type, const nlohmann::json& data);
  void ApplyEvaluationBefore(const nlohmann::json& data);

  std::string batch_id_;
  std::optional<uint32_t> total_;
  std::map<std::string, RuleState> finals_;  // rules known to be in a final state, by id
  ProgressCounts before_;                    // evaluation.before's verdict counts (rule ids unknown)
  bool seed_had_verdicts_ = false;           // the seed already holds evaluation.before's outcome
  std::optional<ProgressCounts> completed_;  // batch.completed's counts
  Phase phase_ = Phase::kUnknown;
  std::string error_;        // batch.failed's error
  std::string rule_, role_;  // from the latest event
};

class ProgressBoard {
 public:
  // `tty`: stdout is a terminal (redraw in place). `width`: its columns; 0 means do not cut lines.
  ProgressBoard(bool tty, size_t width) : tty_(tty), width_(width) {}

  void set_width(size_t width) { width_ = width; }

  // True when the board has not seen `event`'s batch and the event is not the batch's first
  // (batch.submitted): then the events alone cannot count what happened before, and the caller
  // should Seed the batch from GetBatch before Show.
  bool WantsSeed(const temper::v1::JournalEvent& event) const;
  // Seeds a batch (and starts showing it); writes nothing: Show or Refresh does.
  void Seed(const temper::v1::Batch& batch);
  // The text that brings the screen up to date without an event: on a terminal the progress lines
  // redrawn, elsewhere the lines of batches whose counts changed since they were last printed.
  std::string Refresh();
  // The text to write for one event: `line` (the event as rendered for people), then the progress.
  std::string Show(const temper::v1::JournalEvent& event, const std::string& line);
  // On a terminal, erases the progress lines (write this before printing anything else, e.g. to
  // stderr); the next Show draws them again. Empty elsewhere.
  std::string Clear();
  // At the end of the watch: a terminal's last progress line gets its newline.
  std::string Finish();

  const BatchProgressModel* Find(const std::string& batch_id) const;

 private:
  BatchProgressModel& Model(const std::string& batch_id);
  std::string Draw();
  std::string Fit(const std::string& line) const;

  bool tty_;
  size_t width_;
  std::vector<BatchProgressModel> models_;      // in the order first seen
  std::vector<std::string> live_;               // terminal: batches whose line is redrawn, in order
  std::map<std::string, std::string> printed_;  // elsewhere: the ChangeKey last printed per batch
  size_t drawn_ = 0;                            // terminal: progress lines now on screen
};

}  // namespace temper::cli
