#include "orchestrator/cli/watch_progress.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/cli/render.h"
#include "orchestrator/journal_event_types.h"

namespace temper::cli {

namespace {

using nlohmann::json;

constexpr size_t kBarWidth = 10;
// Erase the whole line, and move up one line: enough of ANSI to redraw lines in place.
constexpr const char* kEraseLine = "\033[2K";
constexpr const char* kCursorUp = "\033[1A";

uint32_t Count(const json& counts, const std::string& key) {
  auto it = counts.find(key);
  return it != counts.end() && it->is_number_integer() && it->get<int64_t>() > 0
             ? static_cast<uint32_t>(it->get<int64_t>())
             : 0;
}

// A count by rule state, keyed by the state's name.
uint32_t Count(const json& counts, RuleState state) { return Count(counts, std::string(RuleStateName(state))); }

// The tally a final rule state counts in; nullptr for the states the line does not count (pending,
// running: left; reverted: a fix taken out after the batch).
uint32_t* Tally(ProgressCounts& c, RuleState state) {
  switch (state) {
    case RuleState::kFixed:
      return &c.fixed;
    case RuleState::kAlreadyPassing:
      return &c.already_passing;
    case RuleState::kError:
      return &c.failed;
    case RuleState::kEscalated:
      return &c.escalated;
    case RuleState::kSkipped:
      return &c.skipped;
    case RuleState::kCancelled:
      return &c.cancelled;
    case RuleState::kWaived:
      return &c.waived;
    case RuleState::kManual:
      return &c.manual;
    case RuleState::kHeld:
      return &c.held;
    case RuleState::kRebootPending:
      return &c.reboot_pending;
    case RuleState::kPending:
    case RuleState::kRunning:
    case RuleState::kReverted:
      return nullptr;
  }
  return nullptr;
}

bool Counted(RuleState state) {
  ProgressCounts c;
  return Tally(c, state) != nullptr;
}

}  // namespace

void BatchProgressModel::SetFinal(const std::string& rule_id, RuleState state) {
  if (rule_id.empty()) return;
  auto it = finals_.find(rule_id);
  // A reboot verification after batch.completed moves a reboot_pending rule on, and the completed
  // counts with it.
  if (completed_ && it != finals_.end() && it->second == RuleState::kRebootPending && completed_->reboot_pending > 0 &&
      (state == RuleState::kFixed || state == RuleState::kEscalated)) {
    --completed_->reboot_pending;
    ++*Tally(*completed_, state);
  }
  finals_[rule_id] = state;
}

void BatchProgressModel::Seed(const temper::v1::Batch& batch) {
  if (!batch.whole_profile() || batch.rules_size() > 0) total_ = static_cast<uint32_t>(batch.rules_size());
  for (const temper::v1::BatchRule& r : batch.rules()) {
    if (!r.before_verdict().empty()) seed_had_verdicts_ = true;
    if (r.state() == temper::v1::RULE_STATE_RUNNING) rule_ = r.rule_id();
    std::optional<RuleState> state = ParseRuleState(StateName(r.state()));
    if (state && Counted(*state)) SetFinal(r.rule_id(), *state);
  }
  switch (batch.state()) {
    case temper::v1::BATCH_STATE_QUEUED:
      phase_ = Phase::kQueued;
      break;
    case temper::v1::BATCH_STATE_RUNNING:
      phase_ = Phase::kRunning;
      break;
    case temper::v1::BATCH_STATE_COMPLETED:
      phase_ = Phase::kCompleted;
      break;
    case temper::v1::BATCH_STATE_CANCELLED:
      phase_ = Phase::kCancelled;
      break;
    case temper::v1::BATCH_STATE_FAILED:
      phase_ = Phase::kFailed;
      error_ = batch.error();
      break;
    default:
      break;
  }
}

void BatchProgressModel::ApplyBatchEvent(EventType type, const json& d) {
  switch (type) {
    case EventType::kBatchSubmitted: {
      phase_ = Phase::kQueued;
      auto whole = d.find("whole_profile");
      if (!(whole != d.end() && whole->is_boolean() && whole->get<bool>())) total_ = Count(d, "rules");
      break;
    }
    case EventType::kBatchStarted:
    case EventType::kBatchResumed:
      phase_ = Phase::kRunning;
      error_.clear();
      break;
    case EventType::kBatchExpanded:
      total_ = Count(d, "rules");
      break;
    case EventType::kBatchCompleted: {
      phase_ = Phase::kCompleted;
      auto rules = d.find("rules");
      if (rules == d.end() || !rules->is_object()) break;
      ProgressCounts c;
      for (int s = 0; s < kRuleStateCount; ++s) {
        if (uint32_t* tally = Tally(c, static_cast<RuleState>(s))) *tally = Count(*rules, static_cast<RuleState>(s));
      }
      c.total_known = true;
      c.total = c.done() + Count(*rules, RuleState::kPending) + Count(*rules, RuleState::kRunning);
      completed_ = c;
      break;
    }
    case EventType::kBatchFailed: {
      phase_ = Phase::kFailed;
      auto error = d.find("error");
      error_ = error != d.end() && error->is_string() ? error->get<std::string>() : "";
      break;
    }
    case EventType::kBatchCancelled:
      phase_ = Phase::kCancelled;
      break;
    case EventType::kEvaluationBefore:
      ApplyEvaluationBefore(d);
      break;
    default:
      break;
  }
}

void BatchProgressModel::ApplyEvaluationBefore(const json& d) {
  auto verdicts = d.find("verdicts");
  auto states = d.find("states");
  if (states != d.end() && states->is_object()) {
    // The states the evaluation decided; the rule policy's own (waived, ...) come as rule events.
    ProgressCounts b;
    for (RuleState s : {RuleState::kAlreadyPassing, RuleState::kError, RuleState::kSkipped}) {
      *Tally(b, s) = Count(*states, s);
    }
    before_ = b;
  } else if (verdicts != d.end() && verdicts->is_object()) {
    // As the loop classifies them: pass/fixed are already passing, fail is left to fix, error and
    // unknown could not be decided, anything else (notapplicable, ...) is skipped.
    ProgressCounts b;
    for (const auto& [verdict, n] : verdicts->items()) {
      uint32_t count = Count(*verdicts, verdict);
      if (verdict == "pass" || verdict == "fixed") b.already_passing += count;
      else if (verdict == "error" || verdict == "unknown") b.failed += count;
      else if (verdict != "fail") b.skipped += count;
    }
    // Rule ids the datastream does not hold end as errors without a verdict.
    auto unknown = d.find("not_in_datastream");
    if (unknown != d.end() && unknown->is_array()) b.failed += static_cast<uint32_t>(unknown->size());
    before_ = b;
  }
}

void BatchProgressModel::Apply(const temper::v1::JournalEvent& e) {
  if (e.batch_id() != batch_id_) return;
  rule_ = e.rule_id();
  role_ = e.role();
  json d = json::parse(e.data_json().empty() ? "{}" : e.data_json(), nullptr, /*allow_exceptions=*/false);
  if (!d.is_object()) d = json::object();
  const std::optional<EventType> type = ParseEventType(e.type());
  if (type) {
    ApplyBatchEvent(*type, d);
    // An event that puts its rule in a state the line counts.
    std::optional<RuleState> state = SpecOf(*type).rule_state;
    if (state && Counted(*state)) SetFinal(e.rule_id(), *state);
  }
  const bool ends_batch =
      type == EventType::kBatchCancelled || type == EventType::kBatchFailed || type == EventType::kBatchCompleted;
  if ((phase_ == Phase::kUnknown || (phase_ == Phase::kQueued && type != EventType::kBatchSubmitted)) && !ends_batch) {
    phase_ = Phase::kRunning;
  }
}

ProgressCounts BatchProgressModel::counts() const {
  if (completed_) return *completed_;
  ProgressCounts c;
  if (!seed_had_verdicts_) c = before_;
  c.total_known = total_.has_value();
  c.total = total_.value_or(0);
  for (const auto& [rule, state] : finals_) ++*Tally(c, state);
  // Cancelling a batch cancels every rule not yet final.
  if (phase_ == Phase::kCancelled) c.cancelled += c.left();
  return c;
}

std::string BatchProgressModel::ChangeKey() const {
  ProgressCounts c = counts();
  return fmt::format("{}/{} {} {} {} {} {} {} {} {} {} {} phase {} {}", c.total_known ? std::to_string(c.total) : "?",
                     c.done(), c.fixed, c.already_passing, c.failed, c.escalated, c.skipped, c.cancelled, c.waived,
                     c.manual, c.held, c.reboot_pending, static_cast<int>(phase_), error_);
}

std::string BatchProgressModel::Line() const {
  ProgressCounts c = counts();
  size_t filled = c.total_known && c.total > 0 ? std::min<size_t>(kBarWidth, c.done() * kBarWidth / c.total) : 0;
  std::string out =
      fmt::format("batch {}  [{}{}] {}/{}  ", batch_id_, std::string(filled, '#'), std::string(kBarWidth - filled, '-'),
                  c.done(), c.total_known ? std::to_string(c.total) : "?");
  out += fmt::format("fixed {} · already {} · failed {} · escalated {} · skipped {}", c.fixed, c.already_passing,
                     c.failed, c.escalated, c.skipped);
  // The rule policy's states only when they occur, so a batch without them keeps a short line.
  for (const auto& [n, name] :
       {std::pair{c.reboot_pending, "reboot pending"}, std::pair{c.waived, "waived"}, std::pair{c.held, "held"},
        std::pair{c.manual, "manual"}, std::pair{c.cancelled, "cancelled"}}) {
    if (n > 0) out += fmt::format(" · {} {}", name, n);
  }
  out += fmt::format(" · left {}", c.total_known ? std::to_string(c.left()) : "?");
  switch (phase_) {
    case Phase::kCompleted:
      return out + "  ✔ completed";
    case Phase::kCancelled:
      return out + "  ✖ cancelled";
    case Phase::kFailed:
      return out + "  ✖ failed" + (error_.empty() ? "" : ": " + OneLine(error_, 200));
    case Phase::kQueued:
      return out + "  ▸ queued";
    case Phase::kUnknown:
    case Phase::kRunning:
      break;
  }
  if (!rule_.empty()) return out + "  ▸ " + ShortRuleName(rule_) + (role_.empty() ? "" : " (" + role_ + ")");
  return out + "  ▸ " + (role_.empty() ? "running" : "(" + role_ + ")");
}

const BatchProgressModel* ProgressBoard::Find(const std::string& batch_id) const {
  for (const BatchProgressModel& m : models_) {
    if (m.batch_id() == batch_id) return &m;
  }
  return nullptr;
}

BatchProgressModel& ProgressBoard::Model(const std::string& batch_id) {
  for (BatchProgressModel& m : models_) {
    if (m.batch_id() == batch_id) return m;
  }
  models_.emplace_back(batch_id);
  if (tty_) live_.push_back(batch_id);
  return models_.back();
}

bool ProgressBoard::WantsSeed(const temper::v1::JournalEvent& event) const {
  return !event.batch_id().empty() && ParseEventType(event.type()) != EventType::kBatchSubmitted &&
         Find(event.batch_id()) == nullptr;
}

std::string ProgressBoard::Fit(const std::string& line) const {
  // One column short of the width: writing the last column makes some terminals wrap, and a wrapped
  // line would no longer be erased by the redraw.
  return width_ > 1 ? FitWidth(line, width_ - 1) : line;
}

std::string ProgressBoard::Clear() {
  if (!tty_ || drawn_ == 0) return "";
  std::string out = std::string("\r") + kEraseLine;
  for (size_t i = 1; i < drawn_; ++i) out += std::string(kCursorUp) + kEraseLine;
  drawn_ = 0;
  return out;
}

std::string ProgressBoard::Draw() {
  std::string out;
  for (const std::string& id : live_) {
    if (drawn_ > 0) out += "\n";
    out += Fit(Find(id)->Line());
    ++drawn_;
  }
  return out;
}

void ProgressBoard::Seed(const temper::v1::Batch& batch) { Model(batch.id()).Seed(batch); }

std::string ProgressBoard::Refresh() {
  if (tty_) return Clear() + Draw();
  std::string out;
  for (const BatchProgressModel& model : models_) {
    std::string key = model.ChangeKey();
    if (printed_[model.batch_id()] == key) continue;
    printed_[model.batch_id()] = key;
    out += model.Line() + "\n";
  }
  return out;
}

std::string ProgressBoard::Show(const temper::v1::JournalEvent& event, const std::string& line) {
  std::string out = Clear() + line;
  if (!event.batch_id().empty()) {
    BatchProgressModel& model = Model(event.batch_id());
    bool was_ended = model.ended();
    model.Apply(event);
    if (tty_) {
      // A batch that just ended leaves its last line in the scrollback and leaves the live area.
      if (!was_ended && model.ended()) {
        out += Fit(model.Line()) + "\n";
        live_.erase(std::remove(live_.begin(), live_.end(), model.batch_id()), live_.end());
      } else if (std::find(live_.begin(), live_.end(), model.batch_id()) == live_.end()) {
        live_.push_back(model.batch_id());
      }
    } else {
      std::string key = model.ChangeKey();
      if (printed_[model.batch_id()] != key) {
        printed_[model.batch_id()] = key;
        out += model.Line() + "\n";
      }
    }
  }
  return tty_ ? out + Draw() : out;
}

std::string ProgressBoard::Finish() {
  if (!tty_ || drawn_ == 0) return "";
  drawn_ = 0;
  return "\n";
}

}  // namespace temper::cli
