#include "orchestrator/loop/batch_loop.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "orchestrator/loop/proven_fix.h"
#include "orchestrator/loop/rule_policy.h"
#include "orchestrator/loop/start_order.h"
#include "orchestrator/loop/target_tools.h"
#include "orchestrator/store/private_files.h"
#include "roles/structured_answer.h"
#include "stig/fix_replay.h"
#include "stig/ssh/ssh_target.h"
#include "stig/verification.h"

namespace temper {

namespace {

using Clock = std::chrono::steady_clock;

// The approach of a rule no Architect planned: the rule's own fix text.
constexpr std::string_view kFixTextApproach =
    "Apply the SCAP Security Guide fix text for this rule, then verify the setting as the check reads it.";

int64_t Ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// The target as episodic memory scopes lessons: an SSH host, or a rootfs target (every other kind
// runs on this machine as a lab would).
MemoryTarget MemoryTargetOf(const stig::Target& target) {
  const bool ssh = dynamic_cast<const stig::SshTarget*>(&target) != nullptr;
  return {target.name(), ssh ? kSshTargetClass : kRootfsTargetClass};
}

uint64_t Total(const TokenUsage& u) { return u.prompt_tokens + u.completion_tokens; }

void Add(TokenUsage& into, const TokenUsage& u) {
  into.prompt_tokens += u.prompt_tokens;
  into.completion_tokens += u.completion_tokens;
  into.cached_prompt_tokens += u.cached_prompt_tokens;
}

TokenUsage UsageOf(const StructuredCall& call) {
  TokenUsage u;
  for (const ChatResponse& r : call.responses) Add(u, r.usage);
  return u;
}

std::string ShortRuleName(const std::string& id) {
  size_t at = id.find(stig::kRulePrefix);
  return at == std::string::npos ? id : id.substr(at + stig::kRulePrefix.size());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// What the Reflector and later attempts are told about a rejected change.
std::string Evidence(const stig::VerificationReport& report, const stig::RuleInfo& rule) {
  std::string out = fmt::format("Evaluator: {}\n", report.Summary());
  for (const stig::RuleVerdict& v : report.rules) {
    out += fmt::format("OpenSCAP {} = {}\n", v.rule_id, stig::VerdictName(v.verdict));
  }
  for (const stig::RuleVerdict& v : report.regressions) {
    out += fmt::format("Regression: {} passed before this attempt, now {}\n", v.rule_id, stig::VerdictName(v.verdict));
  }
  for (const stig::HealthResult& h : report.health.results) {
    if (std::find(report.broken_health.begin(), report.broken_health.end(), h.name) == report.broken_health.end())
      continue;
    out += fmt::format("Health check {} (`{}`) now fails: {}\n", h.name, h.command, h.detail);
  }
  if (!rule.check_summary.empty()) out += fmt::format("The check: {}\n", rule.check_summary);
  return out;
}

// Where a new batch starts: the latest snapshot when nothing changed since it, so a batch that
// changes nothing adds no layer to the target; else a new snapshot of the current state.
Result<stig::SnapshotId> StartingSnapshot(stig::Target& target) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changed, target.UnsnapshottedPaths());
  if (!changed.empty()) return target.Snapshot();
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotId> held, target.Snapshots());
  return held.empty() ? stig::SnapshotId{0} : held.back();
}

std::string ReflectionText(const Reflection& r) {
  std::string out = fmt::format("Tried: {}\nWhy it failed: {}\nNext: {}", r.tried, r.why_failed, r.next);
  if (!r.never.empty()) out += fmt::format("\nNever again: {}", fmt::join(r.never, "; "));
  return out;
}

// "3 files (1,204 bytes), 1 package, 0 services": what a captured fix holds, for the journal.
std::string BundleSummary(const stig::FixBundle& bundle) {
  const stig::PackageChanges& p = bundle.packages;
  const stig::ServiceChanges& v = bundle.services;
  const size_t packages = p.installed.size() + p.removed.size() + p.upgraded.size();
  const size_t services = v.enabled.size() + v.disabled.size() + v.masked.size() + v.unmasked.size();
  return fmt::format("{} files ({} bytes), {} packages, {} services", bundle.files.size(), bundle.content_bytes(),
                     packages, services);
}

// Deletes a fork with the main target's lock held: forks are made, committed and destroyed one at
// a time (OverlaySnapshots is driven by one thread at once).
struct ForkDeleter {
  std::mutex* target_mu;
  void operator()(stig::Target* fork) const {
    std::lock_guard lock(*target_mu);
    delete fork;
  }
};

}  // namespace

struct BatchLoop::RuleRun {
  const stig::RuleInfo& rule;
  std::string approach;
  std::vector<PastAttempt> attempts;  // this batch's, oldest first
  uint32_t attempts_made = 0;         // as stored for the rule (survives a resume)
  uint64_t tokens_used = 0;
  Clock::time_point started = Clock::now();
  uint32_t failures_in_a_row = 0;
  std::string last_verdict;
  uint32_t remakes = 0;  // parallel: rejected forks made again because fixes landed since
  // Attempts that replayed a proven fix and were rejected: not counted against the attempt budget.
  uint32_t replays_rejected = 0;
  bool library_tried = false;  // the library's fix was tried in this batch (stored, so also after a resume)
};

BatchLoop::BatchLoop(LoopServices services, stig::Target& target, BatchRecord batch, std::function<bool()> stopping)
    : s_(std::move(services)),
      target_(target),
      batch_(std::move(batch)),
      batch_id_(batch_.id),
      budgets_(batch_.budgets),
      allow_disruptive_(batch_.options.allow_disruptive),
      stopping_(std::move(stopping)),
      memory_(s_.journal.store(), MemoryTargetOf(target)),
      // An apply batch replays its source's fixes in the order they were kept, on the target itself.
      forks_(batch_.options.parallel_attempts > 1 && target.CanFork() && batch_.apply_from == 0) {}

NewEvent BatchLoop::Event(const std::string& rule_id, const std::string& role, EventType type,
                          const nlohmann::json& data, TokenUsage usage) const {
  NewEvent e;
  e.batch_id = batch_id_;
  e.target = target_.name();
  e.rule_id = rule_id;
  e.role = role;
  e.type = EventTypeName(type);
  e.data_json = EventDataJson(data);
  e.usage = usage;
  return e;
}

Result<StepCommitted> BatchLoop::Commit(LoopStep step) {
  step.batch_id = batch_id_;
  TEMPER_ASSIGN_OR_RETURN(StepCommitted committed, s_.journal.Commit(step));
  if (committed.batch_ended) cancelled_ = true;
  return committed;
}

Status BatchLoop::RefreshBatch() {
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, s_.journal.store().GetBatch(batch_id_));
  std::lock_guard lock(mu_);
  batch_ = std::move(batch);
  if (batch_.state == BatchState::kCancelled) cancelled_ = true;
  return Status::OK();
}

bool BatchLoop::Interrupted() { return cancel_requested_ || cancelled_ || failed_ || stopping_(); }

std::string BatchLoop::ResultsDir(const std::string& leaf) const {
  return fmt::format("{}/batch-{}/{}", s_.results_root, batch_id_, leaf);
}

Result<stig::Evaluation> BatchLoop::EvaluateWithResults(const std::vector<std::string>& rule_ids,
                                                        const std::string& results_dir,
                                                        std::map<std::string, int>& counts) {
  std::error_code ec;
  std::filesystem::create_directories(results_dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create {}: {}", results_dir, ec.message()));
  TEMPER_ASSIGN_OR_RETURN(stig::Evaluation eval,
                          target_.Evaluate(s_.evaluator, {.rule_ids = rule_ids, .output_dir = results_dir}));
  // OpenSCAP's reports say how the target is configured: root's alone, as the rest of the state.
  std::vector<std::string> opened;
  TEMPER_RETURN_IF_ERROR(MakeTreePrivate(std::filesystem::path(results_dir).parent_path().string(), opened));
  for (const stig::RuleVerdict& v : eval.verdicts) ++counts[std::string(stig::VerdictName(v.verdict))];
  return eval;
}

Status BatchLoop::JournalTrimmed(const std::string& rule_id, const std::string& role,
                                 const std::vector<TrimmedSection>& trimmed) {
  if (trimmed.empty()) return Status::OK();
  nlohmann::json sections = nlohmann::json::array();
  for (const TrimmedSection& t : trimmed) {
    sections.push_back({{"name", t.name}, {"tokens", t.tokens}, {"kept_tokens", t.kept_tokens}});
  }
  return s_.journal.Append(Event(rule_id, role, EventType::kPromptTrimmed, {{"sections", sections}})).status();
}

BatchProgress BatchLoop::Progress() const {
  std::lock_guard lock(mu_);
  BatchProgress p;
  p.total = batch_.TotalRules();
  p.passed = batch_.Count(RuleState::kFixed) + batch_.Count(RuleState::kAlreadyPassing);
  p.failed = batch_.Count(RuleState::kError);
  p.escalated = batch_.Count(RuleState::kEscalated);
  p.skipped = batch_.Count(RuleState::kSkipped);
  p.pending = batch_.Count(RuleState::kPending) + batch_.Count(RuleState::kRunning);
  size_t from = recent_.size() > 8 ? recent_.size() - 8 : 0;
  p.recent_events.assign(recent_.begin() + static_cast<ptrdiff_t>(from), recent_.end());
  return p;
}

std::vector<std::string> BatchLoop::PassingRules() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const BatchRuleRecord& r : batch_.rules) {
    if (r.state == RuleState::kFixed || r.state == RuleState::kAlreadyPassing || r.state == RuleState::kRebootPending) {
      out.push_back(r.rule_id);
    }
  }
  return out;
}

Status BatchLoop::Run() {
  TEMPER_RETURN_IF_ERROR(Start());
  // A restart after the last rescan (a plan-only batch's revert was under way) only completes.
  if (!batch_.fixpoint.empty() && batch_.fixpoint.back().final) return Complete();
  TEMPER_RETURN_IF_ERROR(EvaluateBefore());
  TEMPER_ASSIGN_OR_RETURN(stig::HealthReport health,
                          stig::CheckHealth(target_, stig::DefaultHealthChecks(), temper::SandboxLimits{}));
  health_ = std::move(health);
  if (batch_.apply_from != 0) return RunApply();
  // Read now, before any rule thread: forks are made and committed on the target meanwhile.
  if (s_.library != nullptr) (void)Platform();
  if (s_.models == nullptr) {
    return Status::FailedPrecondition(
        fmt::format("batch {} needs the roles' models, and temperd has none configured", batch_id_));
  }
  return RunSlots(forks_ ? batch_.options.parallel_attempts : 1);
}

Status BatchLoop::Start() {
  LoopStep step;
  nlohmann::json data = {{"target", target_.name()}};
  // Attempts at once: the batch's number on a target that forks, one on the target itself.
  data["parallel_attempts"] = forks_ ? batch_.options.parallel_attempts : 1;
  if (!s_.parallel_why.empty()) data["parallel_attempts_why"] = s_.parallel_why;
  if (batch_.state == BatchState::kQueued) {
    step.batch_state = BatchState::kRunning;
    step.events.push_back(Event("", "daemon", EventType::kBatchStarted, data));
  } else {
    // Resuming after a crash or a restart: whatever an interrupted attempt did is reverted below,
    // and its rule is picked again.
    std::vector<std::string> interrupted;
    for (const BatchRuleRecord& r : batch_.rules) {
      if (r.state != RuleState::kRunning) continue;
      interrupted.push_back(r.rule_id);
      step.rules.push_back({.rule_id = r.rule_id, .state = RuleState::kPending});
    }
    data["interrupted_rules"] = interrupted;
    data["good_snapshot"] = batch_.good_snapshot ? nlohmann::json(*batch_.good_snapshot) : nlohmann::json();
    step.events.push_back(Event("", "daemon", EventType::kBatchResumed, data));
  }
  if (batch_.apply_from != 0 && batch_.rules.empty()) {
    // An apply batch works on the rules of the batch it replays.
    TEMPER_ASSIGN_OR_RETURN(BatchRecord source, s_.journal.store().GetBatch(batch_.apply_from));
    for (const BatchRuleRecord& r : source.rules) step.add_rules.push_back(r.rule_id);
    step.events.push_back(Event("", "daemon", EventType::kBatchExpanded,
                                {{"apply_from", batch_.apply_from}, {"rules", step.add_rules.size()}}));
  } else if (batch_.whole_profile && batch_.rules.empty()) {
    step.add_rules = s_.content.profile_rule_ids();
    step.events.push_back(Event("", "daemon", EventType::kBatchExpanded,
                                {{"profile", s_.content.profile().id}, {"rules", step.add_rules.size()}}));
  }
  if (batch_.good_snapshot) {
    TEMPER_RETURN_IF_ERROR(target_.Revert(*batch_.good_snapshot));
    good_snapshot_ = *batch_.good_snapshot;
  } else {
    TEMPER_ASSIGN_OR_RETURN(good_snapshot_, StartingSnapshot(target_));
    step.good_snapshot = good_snapshot_;
    step.start_snapshot = good_snapshot_;
  }
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  return RefreshBatch();
}

Status BatchLoop::EvaluateBefore() {
  LoopStep step;
  std::vector<std::string> ids;
  for (const BatchRuleRecord& r : batch_.rules) {
    if (IsFinal(r.state) || !r.before_verdict.empty()) continue;
    if (!s_.content.Rule(r.rule_id).ok()) {
      step.rules.push_back({.rule_id = r.rule_id,
                            .state = RuleState::kError,
                            .detail = fmt::format("not a rule of {}", s_.content.datastream_path())});
      continue;
    }
    ids.push_back(r.rule_id);
  }
  if (ids.empty() && step.rules.empty()) return Status::OK();
  std::map<std::string, int> counts;
  std::string results_dir = ResultsDir("before");
  std::vector<NewEvent> decided;  // the rule policy's events, journalled after the evaluation's
  if (!ids.empty()) {
    TEMPER_ASSIGN_OR_RETURN(stig::Evaluation eval, EvaluateWithResults(ids, results_dir, counts));
    for (const stig::RuleVerdict& v : eval.verdicts) {
      std::string name(stig::VerdictName(v.verdict));
      RuleUpdate u{.rule_id = v.rule_id, .before_verdict = name};
      if (stig::IsPassing(v.verdict)) {
        u.state = RuleState::kAlreadyPassing;
        u.after_verdict = name;
      } else if (v.verdict == stig::Verdict::kError || v.verdict == stig::Verdict::kUnknown) {
        u.state = RuleState::kError;
        u.detail = fmt::format("OpenSCAP could not decide the rule before any change ({})", name);
      } else if (v.verdict != stig::Verdict::kFail) {
        u.state = RuleState::kSkipped;
        u.detail = fmt::format("OpenSCAP verdict before any change is {}: nothing to fix on this target", name);
      }
      ApplyRulePolicy(v, u, decided);
      step.rules.push_back(std::move(u));
    }
  }
  std::vector<std::string> unknown;
  for (const RuleUpdate& u : step.rules) {
    if (!u.before_verdict) unknown.push_back(u.rule_id);
  }
  // Until the batch completes, its results are these: a cancelled batch still has them to show.
  if (!ids.empty()) step.results_dir = results_dir;
  std::map<std::string, int> states;
  for (const RuleUpdate& u : step.rules) ++states[std::string(RuleStateName(u.state.value_or(RuleState::kPending)))];
  step.events.push_back(Event("", "evaluator", EventType::kEvaluationBefore,
                              {{"rules", ids.size()},
                               {"verdicts", counts},
                               {"not_in_datastream", unknown},
                               {"results_dir", results_dir},
                               {"states", states}}));
  step.events.insert(step.events.end(), decided.begin(), decided.end());
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  return RefreshBatch();
}

template <typename Answer, typename Parse>
BatchLoop::Asked BatchLoop::Ask(ModelClient& client, const RolePrompt& prompt, Parse parse, Answer& answer) {
  StructuredCall call;
  Asked out;
  out.status = AskStructured(
      client, prompt.request,
      [&](const ChatResponse& r) -> Status {
        TEMPER_ASSIGN_OR_RETURN(answer, parse(r));
        return Status::OK();
      },
      kMaxCorrections, &call);
  out.usage = UsageOf(call);
  for (const ChatResponse& r : call.responses) out.latency += r.latency;
  out.corrections = std::move(call.corrections);
  return out;
}

void BatchLoop::ApplyRulePolicy(const stig::RuleVerdict& before, RuleUpdate& update,
                                std::vector<NewEvent>& events) const {
  PolicyDecision decision = DecideRule(**s_.content.Rule(before.rule_id), before.verdict, batch_.options, NowMs(),
                                       !target_.ChangesAreFilesOnly());
  if (decision.state) {
    update.state = decision.state;
    update.detail = decision.detail;
  }
  for (const PolicyEvent& e : decision.events) events.push_back(Event(before.rule_id, "daemon", e.type, e.data));
}

Result<std::optional<BatchLoop::Picked>> BatchLoop::Pick(const std::vector<std::string>& startable) {
  ArchitectInput input;
  input.batch = Progress();
  std::vector<const stig::RuleInfo*> candidates;
  for (const std::string& id : startable) {
    TEMPER_ASSIGN_OR_RETURN(const stig::RuleInfo* rule, s_.content.Rule(id));
    candidates.push_back(rule);
    input.candidates.push_back(ToRoleRule(*rule));
    TEMPER_ASSIGN_OR_RETURN(RecalledMemory memory, memory_.Recall(*rule, batch_id_));
    for (Lesson& l : memory.lessons) input.lessons.push_back(std::move(l));
    if (!memory.earlier_attempts.empty())
      input.attempts_so_far[rule->id] = static_cast<int>(memory.earlier_attempts.size());
    for (PastAttempt& a : memory.earlier_attempts) input.prior_attempts.push_back(std::move(a));
    if (candidates.size() == kCandidates) break;
  }
  if (candidates.empty()) return std::optional<Picked>();
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, s_.models->architect().BuildPick(input));
  TEMPER_RETURN_IF_ERROR(JournalTrimmed("", "architect", prompt.trimmed));
  ArchitectPick pick;
  Asked asked = Ask(
      s_.models->architect_client(), prompt,
      [&](const ChatResponse& r) { return s_.models->architect().ParsePick(r, input); }, pick);
  if (asked.transport_failed()) return asked.status.WithContext("architect");
  if (!asked.status.ok()) {
    // The Architect only orders the work; without a usable answer the batch goes on in order, with
    // SSG's fix text as the plan, and the journal says so.
    pick = {ArchitectPick::Kind::kAttempt, candidates.front()->id, std::string(kFixTextApproach), ""};
  }
  const stig::RuleInfo* rule = *s_.content.Rule(pick.rule_id);
  nlohmann::json data = {{"corrections", asked.corrections}, {"latency_ms", asked.latency.count()}};
  if (!asked.status.ok()) data["error"] = asked.status.message();
  if (pick.kind == ArchitectPick::Kind::kSkip) {
    data["reason"] = pick.reason;
    LoopStep step;
    step.rules.push_back(
        {.rule_id = rule->id, .state = RuleState::kSkipped, .detail = pick.reason, .add_tokens = Total(asked.usage)});
    step.events.push_back(Event(rule->id, "architect", EventType::kArchitectSkip, data, asked.usage));
    {
      std::lock_guard lock(mu_);
      recent_.push_back(fmt::format("skipped {}: {}", ShortRuleName(rule->id), pick.reason));
    }
    TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
    return std::optional<Picked>();
  }
  data["approach"] = pick.approach;
  const EventType type = asked.status.ok() ? EventType::kArchitectPick : EventType::kArchitectFallback;
  TEMPER_RETURN_IF_ERROR(s_.journal.Append(Event(rule->id, "architect", type, data, asked.usage)).status());
  return std::optional<Picked>(Picked{rule, pick.approach, asked.usage});
}

Result<std::optional<BatchLoop::Picked>> BatchLoop::PickFromLibrary(const std::vector<std::string>& startable) {
  if (s_.library == nullptr) return std::optional<Picked>();
  Result<stig::TargetPlatform> platform = Platform();
  if (!platform.ok()) return std::optional<Picked>();
  const std::string content_id = FixContentId(s_.content);
  for (const std::string& id : startable) {
    if (!library_looked_up_.insert(id).second) continue;
    TEMPER_ASSIGN_OR_RETURN(std::optional<FixRecord> entry, s_.library->Match(id, content_id, *platform));
    if (!entry) continue;
    TEMPER_ASSIGN_OR_RETURN(const stig::RuleInfo* rule, s_.content.Rule(id));
    // Should the proven fix fail here, the model's attempts follow the rule's own fix text, as
    // after an Architect without a usable answer.
    return std::optional<Picked>(Picked{rule, std::string(kFixTextApproach), {}});
  }
  return std::optional<Picked>();
}

Status BatchLoop::RunSlots(uint32_t slots) {
  // One thread per slot for the whole batch, not one per rule: an evaluation server dies with the
  // thread that started it (platform/process.cpp), so threads that last keep their servers warm.
  std::deque<Picked> queue;  // picked, not yet started; under mu_
  bool closing = false;      // under mu_
  std::condition_variable work_ready;
  auto worker = [&] {
    while (true) {
      std::optional<Picked> p;
      {
        std::unique_lock lock(mu_);
        work_ready.wait(lock, [&] { return closing || !queue.empty(); });
        if (queue.empty()) return;
        p = std::move(queue.front());
        queue.pop_front();
      }
      Status ran = RunRule(*p->rule, std::move(p->approach), p->usage);
      std::lock_guard lock(mu_);
      in_flight_.erase(p->rule->id);
      if (!ran.ok() && thread_error_.ok()) {
        thread_error_ = ran.WithContext(ShortRuleName(p->rule->id));
        failed_ = true;
      }
      rule_finished_.notify_all();
    }
  };
  // Which rules may start beside those in flight, for attempts on forks (start_order.h). On the
  // target itself every attempt starts from every fix kept, so any pending rule may start (the
  // Architect chooses among them) and no file of the target is read for it. Read off the main line
  // before any thread runs: which checks name files it lacks.
  std::optional<StartOrder> order;
  if (forks_) {
    std::vector<std::string> rule_ids;
    for (const BatchRuleRecord& r : batch_.rules) rule_ids.push_back(r.rule_id);
    order.emplace(s_.content, rule_ids, [&](const std::string& path) {
      return target_.ReadFile(path, 0).status().code() != StatusCode::kNotFound;
    });
  }
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < slots; ++i) threads.emplace_back(worker);

  Status out;
  while (true) {
    out = RefreshBatch();
    if (!out.ok() || Interrupted()) break;
    size_t in_flight = 0;
    std::vector<std::string> pending, startable;
    {
      std::lock_guard lock(mu_);
      in_flight = in_flight_.size();
      for (const BatchRuleRecord& r : batch_.rules) {
        if (r.state == RuleState::kPending && !in_flight_.count(r.rule_id)) pending.push_back(r.rule_id);
      }
      startable = order ? order->Startable(pending, in_flight_) : pending;
    }
    if (in_flight == 0 && pending.empty()) {
      // Nothing in flight, so no fork is open: the rescan reads the main line.
      Result<bool> settled = Rescan();
      if (!settled.ok()) {
        out = settled.status();
        break;
      }
      if (*settled) break;
      continue;
    }
    // Picks ahead: with slots to spare for forks, up to `slots` rules more are picked while the
    // others run (in_flight_ holds the picked-not-started ones too), so the Architect's call
    // overlaps the attempts and a slot that frees starts its next rule at once. A serial batch
    // picks only when its one slot is free: each pick sees the last rule's outcome.
    const size_t picked_at_most = slots > 1 ? 2 * size_t{slots} : 1;
    if (in_flight < picked_at_most && !startable.empty()) {
      Result<std::optional<Picked>> picked = PickFromLibrary(startable);
      if (picked.ok() && !*picked) picked = Pick(startable);
      if (!picked.ok()) {
        out = picked.status();
        break;
      }
      if (!*picked) continue;
      {
        std::lock_guard lock(mu_);
        in_flight_.insert((*picked)->rule->id);
        queue.push_back(std::move(**picked));
      }
      work_ready.notify_one();
      continue;
    }
    // Every slot busy (or nothing left to start): wait for a rule to end, or for a stop.
    std::unique_lock lock(mu_);
    rule_finished_.wait_for(lock, std::chrono::milliseconds(200),
                            [&] { return in_flight_.size() < in_flight || failed_; });
  }
  {
    std::lock_guard lock(mu_);
    closing = true;
    // Picked but never started: back to pending at the next start, like an interrupted rule.
    for (const Picked& p : queue) in_flight_.erase(p.rule->id);
    queue.clear();
  }
  work_ready.notify_all();
  for (std::thread& t : threads) t.join();
  if (!out.ok()) return out;
  {
    std::lock_guard lock(mu_);
    if (!thread_error_.ok()) return thread_error_;
  }
  if (Interrupted()) return Interrupt();
  return Complete();
}

Status BatchLoop::RunRule(const stig::RuleInfo& rule, std::string approach, TokenUsage pick_usage) {
  RuleRun run{.rule = rule, .approach = std::move(approach)};
  {
    std::lock_guard lock(mu_);
    for (const BatchRuleRecord& r : batch_.rules) {
      if (r.rule_id != rule.id) continue;
      run.attempts_made = r.attempts;
      run.tokens_used = r.tokens_used + Total(pick_usage);
    }
  }
  // After a resume, this batch's attempts so far (and whether they failed in a row) are stored.
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> stored, s_.journal.store().BatchAttempts(batch_id_));
  for (const AttemptRecord& a : stored) {
    if (a.rule_id != rule.id) continue;
    run.attempts.push_back(ToPastAttempt(a));
    if (std::optional<ProvenFixSource> proven = ParseProvenFixApproach(a.approach)) {
      run.library_tried = run.library_tried || proven->library_fix != 0;
      if (a.outcome != AttemptOutcome::kKept) ++run.replays_rejected;
      continue;
    }
    run.failures_in_a_row = a.outcome == AttemptOutcome::kKept ? 0 : run.failures_in_a_row + 1;
    // The wall-time budget counts the recorded attempts' time too, so a restart does not renew it.
    run.started -= std::chrono::milliseconds(std::max<TimeMs>(0, a.finished_at - a.started_at));
  }
  LoopStep started;
  started.rules.push_back({.rule_id = rule.id, .state = RuleState::kRunning, .add_tokens = Total(pick_usage)});
  started.events.push_back(Event(rule.id, "daemon", EventType::kRuleStarted,
                                 {{"approach", run.approach}, {"attempts_made", run.attempts_made}}));
  TEMPER_RETURN_IF_ERROR(Commit(std::move(started)).status());
  TEMPER_ASSIGN_OR_RETURN(bool fixed_from_library, TryLibraryFirst(run));
  if (fixed_from_library) return Status::OK();

  const Budgets& budget = budgets_;
  while (!Interrupted()) {
    if (run.attempts_made - run.replays_rejected >= budget.max_attempts) {
      return Escalate(
          run, fmt::format("attempt budget spent: {} attempts failed", run.attempts_made - run.replays_rejected));
    }
    if (run.tokens_used >= budget.max_tokens) {
      return Escalate(run, fmt::format("token budget spent: {} of {} tokens", run.tokens_used, budget.max_tokens));
    }
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - run.started);
    if (elapsed >= budget.wall_time) {
      return Escalate(run,
                      fmt::format("wall-time budget spent: {} s of {} s", elapsed.count(), budget.wall_time.count()));
    }
    TEMPER_ASSIGN_OR_RETURN(RecalledMemory memory, memory_.Recall(rule, batch_id_));
    if (run.failures_in_a_row >= kReengageAfter) {
      run.failures_in_a_row = 0;
      TEMPER_ASSIGN_OR_RETURN(ReengageDecision decision, Reengage(run, memory));
      if (decision.verdict == ReengageVerdict::kEscalate) {
        return Escalate(run, "the Architect escalated: " + decision.reasoning);
      }
      if (decision.verdict == ReengageVerdict::kPivot) run.approach = decision.plan;
    }
    TEMPER_ASSIGN_OR_RETURN(AttemptEnd end, Attempt(run, memory));
    if (end == AttemptEnd::kKept) return Status::OK();
  }
  return Status::OK();
}

Result<ReengageDecision> BatchLoop::Reengage(RuleRun& run, const RecalledMemory& memory) {
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, s_.models->architect().BuildReengage(ToRoleRule(run.rule), run.approach,
                                                                                  run.attempts, memory.lessons));
  TEMPER_RETURN_IF_ERROR(JournalTrimmed(run.rule.id, "architect", prompt.trimmed));
  ReengageDecision decision;
  Asked asked = Ask(
      s_.models->architect_client(), prompt,
      [&](const ChatResponse& r) { return s_.models->architect().ParseReengage(r); }, decision);
  if (asked.transport_failed()) return asked.status.WithContext("architect");
  if (!asked.status.ok()) {
    // Never read as CONTINUE: a human looks at a rule the Architect could not rule on.
    decision = {ReengageVerdict::kEscalate, "no usable re-engagement answer: " + asked.status.message(), ""};
  }
  run.tokens_used += Total(asked.usage);
  static constexpr const char* kVerdictNames[] = {"CONTINUE", "PIVOT", "ESCALATE"};
  LoopStep step;
  step.rules.push_back({.rule_id = run.rule.id, .add_tokens = Total(asked.usage)});
  step.events.push_back(Event(run.rule.id, "architect", EventType::kArchitectReengage,
                              {{"verdict", kVerdictNames[static_cast<int>(decision.verdict)]},
                               {"reasoning", decision.reasoning},
                               {"plan", decision.plan},
                               {"corrections", asked.corrections},
                               {"latency_ms", asked.latency.count()}},
                              asked.usage));
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  return decision;
}

// Where one attempt works, opened at the known-good state (see the top of batch_loop.h): a fork of
// its snapshot, the main line untouched, when the batch's attempts run on forks; else the target
// itself (a serial batch's one slot, the only way on targets that cannot fork). The attempt's
// stages ask the slot to discard or keep, never which kind it is.
class BatchLoop::Slot {
 public:
  explicit Slot(BatchLoop& loop) : loop_(loop), fork_(nullptr, ForkDeleter{&loop.target_mu_}) {}

  // Makes the fork (forks are made under target_mu_) and reads what the attempt is judged against.
  Status Open() {
    std::lock_guard main_line(loop_.target_mu_);
    if (loop_.forks_) {
      TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<stig::Target> made, loop_.target_.Fork());
      fork_.reset(made.release());
      fork_name_ = fork_->name();
    }
    passing_before = loop_.PassingRules();
    std::lock_guard lock(loop_.mu_);
    opened_at = loop_.good_snapshot_;
    health_before = *loop_.health_;
    return Status::OK();
  }

  stig::Target& work() { return fork_ ? *fork_ : loop_.target_; }
  // An event about the attempt names its fork; one on the target itself names none.
  void NameIn(nlohmann::json& data) const {
    if (!fork_name_.empty()) data["fork"] = fork_name_;
  }
  const std::string& fork_name() const { return fork_name_; }

  // Back to the known-good state: the target reverted, or the fork dropped.
  Status Discard() {
    if (fork_name_.empty()) return loop_.target_.Revert(loop_.good_snapshot_);
    fork_.reset();
    return Status::OK();
  }

  // The slot's change as the new known-good snapshot, with target_mu_ held by the caller: the
  // target snapshotted, or the fork committed onto the main line (CommitToMainLine: nullopt with
  // `conflict` when it did not fit; `report` becomes the main line's verification).
  Result<std::optional<stig::SnapshotId>> Keep(const stig::VerificationRequest& request,
                                               stig::VerificationReport& report, std::string& conflict) {
    if (!fork_) {
      TEMPER_ASSIGN_OR_RETURN(stig::SnapshotId snapshot, loop_.target_.Snapshot());
      return std::optional<stig::SnapshotId>(snapshot);
    }
    return loop_.CommitToMainLine(*fork_, opened_at, request, report, conflict);
  }

  // The known-good snapshot now, when fixes were kept since the slot was opened (a fork lacks
  // them); nullopt otherwise, always so on the target itself, where no other slot keeps a fix.
  std::optional<stig::SnapshotId> KeptSinceOpened() const {
    std::lock_guard lock(loop_.mu_);
    if (loop_.good_snapshot_ == opened_at) return std::nullopt;
    return loop_.good_snapshot_;
  }

  // What the attempt is judged against: the rules passing and the health of the tree it starts
  // from. A fork's tree lacks the fixes kept after it was made, so those rules are not its
  // regressions; the main line checks them when the fork lands (CommitToMainLine).
  std::vector<std::string> passing_before;
  stig::HealthReport health_before;
  stig::SnapshotId opened_at = 0;  // the known-good snapshot the slot started from

 private:
  BatchLoop& loop_;
  // A fork is made and destroyed under target_mu_ (its deleter takes it), whichever way the
  // attempt ends.
  std::unique_ptr<stig::Target, ForkDeleter> fork_;
  std::string fork_name_;  // empty on the target itself
};

// What one attempt did, before the batch is told (TryAttempt's outcome, ApplyAttempt's input).
struct BatchLoop::TriedAttempt {
  // Its number, approach, usage, commands, verdict, outcome, evidence and changes.
  AttemptRecord attempt;
  bool interrupted = false;                        // the Worker was cancelled: nothing below is set
  stig::VerificationRequest request;               // what the evaluator was asked
  std::optional<stig::VerificationReport> report;  // its answer; nullopt when it failed
  std::string summary;                             // the report's summary, or the evaluator's error
  nlohmann::json evaluated;                        // the data of attempt.kept / attempt.reverted
  Clock::time_point verified_at;
  // The change whole (Target::FixSinceSnapshot), read with the change set; nullopt until then.
  std::optional<Result<stig::FixBundle>> fix;
  const ProvenFix* proven = nullptr;  // set when the attempt replayed a proven fix, not the Worker's
  bool accepted() const { return report && report->accepted(); }
};

// A proven fix replayed as an attempt (ReplayAttempt): the library's entry, or a fix the source of
// an apply batch kept.
struct BatchLoop::ProvenFix {
  stig::FixBundle bundle;
  std::string approach;        // LibraryFixApproach or ApplyFixApproach (proven_fix.h)
  int64_t library_fix = 0;     // the library entry's id; 0 for an apply batch's
  int64_t source_attempt = 0;  // the source batch's kept attempt; 0 for the library's
};

Result<BatchLoop::AttemptEnd> BatchLoop::Attempt(RuleRun& run, const RecalledMemory& memory) {
  Slot slot(*this);
  TEMPER_RETURN_IF_ERROR(slot.Open());
  TEMPER_ASSIGN_OR_RETURN(TriedAttempt tried, TryAttempt(run, memory, slot));
  return ApplyAttempt(run, memory, slot, std::move(tried));
}

Result<BatchLoop::TriedAttempt> BatchLoop::TryAttempt(const RuleRun& run, const RecalledMemory& memory, Slot& slot) {
  const stig::RuleInfo& rule = run.rule;
  TriedAttempt tried;
  AttemptRecord& attempt = tried.attempt;
  attempt.batch_id = batch_id_;
  attempt.rule_id = rule.id;
  attempt.number = run.attempts_made + 1;
  attempt.approach = run.approach;
  attempt.started_at = NowMs();
  stig::Target& work = slot.work();
  nlohmann::json started = {{"number", attempt.number}, {"approach", run.approach}};
  slot.NameIn(started);
  TEMPER_RETURN_IF_ERROR(s_.journal.Append(Event(rule.id, "worker", EventType::kAttemptStarted, started)).status());

  // The Worker changes the target, starting from the known-good state.
  WorkerBudget worker_budget;
  worker_budget.max_tokens = std::min(worker_budget.max_tokens, budgets_.max_tokens - run.tokens_used);
  Worker worker = s_.models->MakeWorker(worker_budget);
  WorkerTask task{ToRoleRule(rule, s_.content), run.approach, memory.lessons, memory.earlier_attempts};
  task.allow_package_removal = allow_disruptive_;
  task.prior_attempts.insert(task.prior_attempts.end(), run.attempts.begin(), run.attempts.end());
  TargetTools tools(work, [this] { return Interrupted(); });
  Status journal_error;
  auto on_event = [&](const WorkerEvent& e) {
    // By WorkerEvent::Kind.
    static constexpr EventType kKinds[] = {EventType::kWorkerModelCall, EventType::kWorkerToolCall,
                                           EventType::kWorkerRefused, EventType::kWorkerUnusableAnswer,
                                           EventType::kWorkerElided};
    nlohmann::json data = {{"attempt", attempt.number}};
    if (!e.tool.empty()) data["tool"] = e.tool;
    if (!e.arguments.is_null()) data["arguments"] = e.arguments;
    if (!e.reference_fix.is_null()) data["reference_fix"] = e.reference_fix;
    if (!e.detail.empty()) data["detail"] = e.detail;
    if (e.kind == WorkerEvent::Kind::kModelCall) data["latency_ms"] = e.latency.count();
    Result<EventRecord> appended =
        s_.journal.Append(Event(rule.id, "worker", kKinds[static_cast<int>(e.kind)], data, e.usage));
    if (!appended.ok() && journal_error.ok()) journal_error = appended.status();
  };
  Clock::time_point worker_start = Clock::now();
  Result<WorkerResult> worked = worker.Run(s_.models->worker_client(), tools, task, on_event);
  Clock::time_point worker_end = Clock::now();
  if (journal_error.ok() && !worked.ok() && worked.status().code() == StatusCode::kCancelled) {
    tried.interrupted = true;
    return tried;
  }
  if (!worked.ok() || !journal_error.ok()) {
    TEMPER_RETURN_IF_ERROR(slot.Discard());
    if (!journal_error.ok()) return journal_error;
    return worked.status().WithContext(fmt::format("worker on {}", rule.id));
  }
  TEMPER_RETURN_IF_ERROR(JournalTrimmed(rule.id, "worker", worked->trimmed));
  attempt.usage = worked->usage;
  attempt.commands = Lines(worked->actions);
  TEMPER_RETURN_IF_ERROR(Judge(run, slot, tried, worker_end));
  tried.evaluated["worker_outcome"] = WorkerOutcomeName(worked->outcome);
  tried.evaluated["worker_summary"] = worked->summary;
  tried.evaluated["worker_ms"] = Ms(worker_end - worker_start);
  return tried;
}

Status BatchLoop::Judge(const RuleRun& run, Slot& slot, TriedAttempt& tried, Clock::time_point acted_at) {
  const stig::RuleInfo& rule = run.rule;
  AttemptRecord& attempt = tried.attempt;
  stig::Target& work = slot.work();
  // What the attempt changed, kept or not: the evidence of what a fix applied or tried, and the
  // paths that decide which earlier passes it could have broken.
  Result<stig::ChangeSet> changes = work.ChangesSinceSnapshot();
  if (!changes.ok() && changes.status().code() != StatusCode::kUnimplemented) return changes.status();
  // The same change whole, read at the same moment, for replaying it elsewhere once it is kept.
  tried.fix = work.FixSinceSnapshot();
  Clock::time_point listed_end = Clock::now();

  // The evaluator's judgement: the rule, every rule that passed before (those the change could
  // have affected, when the target says its changes are files only), and the health checks.
  stig::VerificationRequest& request = tried.request;
  request.rule_ids = {rule.id};
  request.previously_passing = slot.passing_before;
  request.health_before = &slot.health_before;
  if (changes.ok() && work.ChangesAreFilesOnly()) {
    std::vector<std::string> paths;
    for (const stig::FileChange& f : changes->files) paths.push_back(f.path);
    request.changed_paths = std::move(paths);
    request.cross_check = s_.cross_check_verification;
  }
  Result<stig::VerificationReport> report = stig::Verify(work, s_.evaluator, request);
  tried.verified_at = Clock::now();
  if (report.ok()) {
    Result<stig::Verdict> verdict = report->evaluation.VerdictOf(rule.id);
    attempt.verdict = verdict.ok() ? std::string(stig::VerdictName(*verdict)) : "error";
    attempt.outcome = report->accepted()               ? AttemptOutcome::kKept
                      : !report->broken_health.empty() ? AttemptOutcome::kUnhealthy
                      : !report->regressions.empty()   ? AttemptOutcome::kRegression
                                                       : AttemptOutcome::kReverted;
    attempt.evidence = Evidence(*report, rule);
    tried.summary = report->Summary();
  } else {
    attempt.verdict = "error";
    attempt.outcome = AttemptOutcome::kReverted;
    attempt.evidence = "The evaluator failed: " + report.status().ToString();
    tried.summary = report.status().message();
  }
  nlohmann::json& evaluated = tried.evaluated;
  evaluated = {{"number", attempt.number},
               {"verdict", attempt.verdict},
               {"outcome", AttemptOutcomeName(attempt.outcome)},
               {"summary", tried.summary},
               {"verify_ms", Ms(tried.verified_at - listed_end)}};
  evaluated["changes_ms"] = Ms(listed_end - acted_at);
  slot.NameIn(evaluated);
  evaluated["regression_checked"] = report.ok() ? report->regression_checked : 0;
  evaluated["regression_skipped"] = report.ok() ? report->regression_skipped : 0;
  if (report.ok() && s_.cross_check_verification) {
    nlohmann::json misses = nlohmann::json::array();
    for (const stig::RuleVerdict& m : report->filter_misses) misses.push_back(m.rule_id);
    evaluated["filter_misses"] = misses;
  }
  if (changes.ok()) {
    attempt.changes_json = changes->ToJson();
    evaluated["changes"] = changes->Summary();
  } else {
    evaluated["changes_error"] = changes.status().message();
  }
  if (report.ok()) tried.report = std::move(*report);
  return Status::OK();
}

Result<BatchLoop::AttemptEnd> BatchLoop::ApplyAttempt(RuleRun& run, const RecalledMemory& memory, Slot& slot,
                                                      TriedAttempt tried) {
  if (tried.interrupted) {
    TEMPER_RETURN_IF_ERROR(slot.Discard());
    return AttemptEnd::kInterrupted;
  }
  run.last_verdict = tried.attempt.verdict;
  if (tried.accepted()) return Keep(run, memory, slot, tried);
  // Rejected on a fork while fixes landed on the main line: what it lacked may be one of them (a
  // package another rule installs), so it is made again on a fresh fork, a bounded number of times,
  // before failures count.
  if (run.remakes < kMaxRemakes) {
    if (std::optional<stig::SnapshotId> good = slot.KeptSinceOpened()) {
      ++run.remakes;
      TEMPER_RETURN_IF_ERROR(slot.Discard());
      return MadeAgain(run, tried.attempt, slot.fork_name(), RemakeCause::kRejectedBehind,
                       fmt::format("rejected on a fork made before snapshot {} landed ({}); made again on the main "
                                   "line as it is now",
                                   *good, tried.summary));
    }
  }
  return Reject(run, memory, slot, tried);
}

Result<BatchLoop::AttemptEnd> BatchLoop::Keep(RuleRun& run, const RecalledMemory& memory, Slot& slot,
                                              TriedAttempt& tried) {
  const stig::RuleInfo& rule = run.rule;
  AttemptRecord& attempt = tried.attempt;
  // Kept: the fixed state is the new known-good snapshot, recorded with the attempt. The main line
  // is held from the keep to the record, so snapshots and records keep one order.
  std::unique_lock main_line(target_mu_);
  std::string conflict;
  TEMPER_ASSIGN_OR_RETURN(std::optional<stig::SnapshotId> kept_snapshot,
                          slot.Keep(tried.request, *tried.report, conflict));
  if (!kept_snapshot) {
    main_line.unlock();
    return MadeAgain(run, attempt, slot.fork_name(), RemakeCause::kCommit, conflict);
  }
  const stig::SnapshotId snapshot = *kept_snapshot;
  tried.evaluated["snapshot_ms"] = Ms(Clock::now() - tried.verified_at);
  attempt.finished_at = NowMs();
  attempt.snapshot = snapshot;
  // The fix whole, stored with the attempt for `temper apply`, the library and the exports. A
  // target that cannot capture it (an SSH host), or a fix past a bundle's limits, keeps the fix
  // without it, and the journal says why.
  if (!tried.fix) tried.fix = Result<stig::FixBundle>(Status::Unimplemented("the attempt's change was not read"));
  if (tried.fix->ok() && !(*tried.fix)->empty()) {
    const stig::FixBundle& bundle = **tried.fix;
    attempt.fix_json = bundle.ToJson();
    tried.evaluated["fix_bundle"] = BundleSummary(bundle);
  } else {
    tried.evaluated["fix_bundle"] =
        "none: " + (tried.fix->ok() ? std::string("the attempt changed nothing") : tried.fix->status().message());
  }
  LoopStep step;
  step.good_snapshot = snapshot;
  step.attempt = attempt;
  // A fix that takes effect only after a reboot stays staged until `temper rebooted` verifies it.
  const RuleState kept = KeptFixState(rule);
  std::string detail = fmt::format("fixed on attempt {}", attempt.number);
  if (kept == RuleState::kRebootPending) {
    detail += fmt::format(
        ", staged: it takes effect after a reboot; once the host rebooted, `temper rebooted {}` "
        "verifies it",
        batch_id_);
  }
  step.rules.push_back({.rule_id = rule.id,
                        .state = kept,
                        .detail = detail,
                        .after_verdict = attempt.verdict,
                        .add_attempts = 1,
                        .add_tokens = Total(attempt.usage)});
  for (int64_t id : memory.lesson_ids) step.utility_changes.push_back({id, EpisodicMemory::kUtilityOnPass});
  step.events.push_back(Event(rule.id, "evaluator", EventType::kAttemptKept, tried.evaluated));
  const EventType announced = kept == RuleState::kRebootPending ? EventType::kRuleRebootPending : EventType::kRuleFixed;
  step.events.push_back(Event(rule.id, "daemon", announced,
                              {{"attempts", attempt.number},
                               {"tokens", run.tokens_used + Total(attempt.usage)},
                               {"commands", attempt.commands}}));
  TEMPER_ASSIGN_OR_RETURN(StepCommitted committed, Commit(std::move(step)));
  {
    std::lock_guard lock(mu_);
    good_snapshot_ = snapshot;
    health_ = std::move(tried.report->health);
    recent_.push_back(fmt::format("{} {} on attempt {}", ShortRuleName(rule.id), RuleStateName(kept), attempt.number));
  }
  main_line.unlock();
  if (tried.proven == nullptr) {
    RecordInLibrary(run, tried, committed.attempt_id.value_or(0));
  } else if (tried.proven->library_fix != 0) {
    Status noted = s_.library->NoteOutcome(tried.proven->library_fix, batch_id_, true, "");
    if (!noted.ok()) {
      s_.log.Warning("batch {}: noting library fix #{} kept on {}: {}", batch_id_, tried.proven->library_fix, rule.id,
                     noted.ToString());
    }
  }
  return AttemptEnd::kKept;
}

void BatchLoop::RecordInLibrary(const RuleRun& run, const TriedAttempt& tried, int64_t attempt_id) {
  const AttemptRecord& attempt = tried.attempt;
  if (s_.library == nullptr || attempt.fix_json.empty()) return;
  // The library is what later batches save with; a fix it could not take is still kept here, so a
  // failure is logged, not the batch's.
  Result<stig::TargetPlatform> platform = Platform();
  if (!platform.ok()) return;  // said once, when it was read
  NewFix fix{.rule_id = run.rule.id,
             .content_id = FixContentId(s_.content),
             .platform = std::move(*platform),
             .bundle = **tried.fix,
             .evidence = fmt::format("OpenSCAP {} on attempt {}: {}\n{}", attempt.verdict, attempt.number,
                                     tried.summary, attempt.evidence),
             .source_batch = batch_id_,
             .source_attempt = attempt_id,
             .source_target = target_.name(),
             .model_tokens = run.tokens_used + Total(attempt.usage)};
  Result<int64_t> recorded = s_.library->Record(fix);
  if (!recorded.ok()) {
    s_.log.Warning("batch {}: recording the fix of {} in the library: {}", batch_id_, run.rule.id,
                   recorded.status().ToString());
    return;
  }
  s_.log.Info("batch {}: the fix of {} (attempt {}) is proven fix #{} in the library", batch_id_, run.rule.id,
              attempt.number, *recorded);
}

Result<stig::TargetPlatform> BatchLoop::Platform() {
  std::lock_guard lock(platform_mu_);
  if (!platform_) {
    platform_ = stig::ReadTargetPlatform(target_);
    if (!platform_->ok()) {
      s_.log.Warning(
          "batch {}: the platform of target {} cannot be told ({}): the library of proven fixes is "
          "neither asked nor added to",
          batch_id_, target_.name(), platform_->status().ToString());
    }
  }
  return *platform_;
}

Result<BatchLoop::AttemptEnd> BatchLoop::Reject(RuleRun& run, const RecalledMemory& memory, Slot& slot,
                                                TriedAttempt& tried) {
  const stig::RuleInfo& rule = run.rule;
  AttemptRecord& attempt = tried.attempt;
  // Rejected: back to the known-good state, and the Reflector turns the failure into a lesson.
  TEMPER_RETURN_IF_ERROR(slot.Discard());
  tried.evaluated["revert_ms"] = Ms(Clock::now() - tried.verified_at);
  LoopStep step;
  step.events.push_back(Event(rule.id, "evaluator", EventType::kAttemptReverted, tried.evaluated));
  TEMPER_RETURN_IF_ERROR(Reflect(run, memory, attempt, step));
  attempt.finished_at = NowMs();
  step.attempt = attempt;
  step.rules.push_back({.rule_id = rule.id, .add_attempts = 1, .add_tokens = Total(attempt.usage)});
  for (int64_t id : memory.lesson_ids) step.utility_changes.push_back({id, EpisodicMemory::kUtilityOnFail});
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  ++run.attempts_made;
  ++run.failures_in_a_row;
  run.tokens_used += Total(attempt.usage);
  run.attempts.push_back(ToPastAttempt(attempt));
  std::lock_guard lock(mu_);
  recent_.push_back(fmt::format("{} attempt {} failed ({})", ShortRuleName(rule.id), attempt.number,
                                AttemptOutcomeName(attempt.outcome)));
  return AttemptEnd::kReverted;
}

Result<bool> BatchLoop::TryLibraryFirst(RuleRun& run) {
  // Once per rule and batch, and only before the model's first attempt at it.
  if (s_.library == nullptr || run.library_tried || run.attempts_made > run.replays_rejected) return false;
  Result<stig::TargetPlatform> platform = Platform();
  if (!platform.ok()) return false;
  TEMPER_ASSIGN_OR_RETURN(std::optional<FixRecord> entry,
                          s_.library->Match(run.rule.id, FixContentId(s_.content), *platform));
  if (!entry) return false;
  run.library_tried = true;
  Result<stig::FixBundle> bundle = stig::FixBundle::FromJson(entry->bundle_json);
  if (!bundle.ok()) {
    // The store's entry is not a bundle (written by hand?): a failure of the entry, not the batch's.
    const std::string why = "its stored bundle does not read: " + bundle.status().message();
    s_.log.Warning("batch {}: library fix #{} for {}: {}", batch_id_, entry->id, run.rule.id, why);
    TEMPER_RETURN_IF_ERROR(s_.library->NoteOutcome(entry->id, batch_id_, false, why));
    return false;
  }
  ProvenFix fix{.bundle = std::move(*bundle),
                .approach = LibraryFixApproach(entry->id, entry->source_batch),
                .library_fix = entry->id};
  for (uint32_t made = 0;; ++made) {
    std::string refused;
    TEMPER_ASSIGN_OR_RETURN(AttemptEnd end, ReplayAttempt(run, fix, refused));
    if (end == AttemptEnd::kKept) return true;
    // A parallel attempt that did not fit the main line is made again, as the Worker's are; past
    // that bound the model takes over.
    if (end != AttemptEnd::kConflict || made >= kMaxRemakes) return false;
  }
}

Result<BatchLoop::AttemptEnd> BatchLoop::ReplayAttempt(RuleRun& run, const ProvenFix& fix, std::string& refused) {
  Slot slot(*this);
  TEMPER_RETURN_IF_ERROR(slot.Open());
  TEMPER_ASSIGN_OR_RETURN(TriedAttempt tried, TryReplay(run, fix, slot));
  if (tried.interrupted) {
    TEMPER_RETURN_IF_ERROR(slot.Discard());
    return AttemptEnd::kInterrupted;
  }
  if (tried.report) run.last_verdict = tried.attempt.verdict;
  if (tried.accepted()) {
    const RecalledMemory no_lessons;  // a replay is shown none, so none gains or loses utility
    return Keep(run, no_lessons, slot, tried);
  }
  // Rejected on a fork made before fixes landed: made again on the main line as it is, as the
  // Worker's attempts are (ApplyAttempt).
  if (tried.report && run.remakes < kMaxRemakes) {
    if (std::optional<stig::SnapshotId> good = slot.KeptSinceOpened()) {
      ++run.remakes;
      TEMPER_RETURN_IF_ERROR(slot.Discard());
      return MadeAgain(run, tried.attempt, slot.fork_name(), RemakeCause::kRejectedBehind,
                       fmt::format("rejected on a fork made before snapshot {} landed ({}); made again on the main "
                                   "line as it is now",
                                   *good, tried.summary));
    }
  }
  refused = tried.summary;
  return RejectReplay(run, fix, slot, tried);
}

Result<BatchLoop::TriedAttempt> BatchLoop::TryReplay(const RuleRun& run, const ProvenFix& fix, Slot& slot) {
  const stig::RuleInfo& rule = run.rule;
  TriedAttempt tried;
  tried.proven = &fix;
  AttemptRecord& attempt = tried.attempt;
  attempt.batch_id = batch_id_;
  attempt.rule_id = rule.id;
  attempt.number = run.attempts_made + 1;
  attempt.approach = fix.approach;
  attempt.started_at = NowMs();
  // Where the fix comes from, on each of the attempt's events.
  const nlohmann::json source = fix.library_fix != 0 ? nlohmann::json{{"library_fix", fix.library_fix}}
                                                     : nlohmann::json{{"replay_of", fix.source_attempt}};
  nlohmann::json started = {{"number", attempt.number}, {"approach", fix.approach}};
  started.update(source);
  slot.NameIn(started);
  TEMPER_RETURN_IF_ERROR(s_.journal.Append(Event(rule.id, "daemon", EventType::kAttemptStarted, started)).status());
  if (Interrupted()) {
    tried.interrupted = true;
    return tried;
  }

  // The fix's files, packages and services written through the slot's target, after checking that
  // each file is as the fix found it (or merges); no model is asked.
  const Clock::time_point replay_start = Clock::now();
  Result<stig::ReplayResult> replayed = stig::ReplayFix(slot.work(), fix.bundle);
  const Clock::time_point replay_end = Clock::now();
  if (replayed.ok()) {
    for (const stig::ReplayStep& step : replayed->steps) attempt.commands.push_back(step.command);
  }
  if (replayed.ok() && replayed->ok()) {
    TEMPER_RETURN_IF_ERROR(Judge(run, slot, tried, replay_end));
    tried.evaluated["replay"] = replayed->Summary();
    tried.evaluated["replay_ms"] = Ms(replay_end - replay_start);
    tried.evaluated.update(source);
    return tried;
  }
  // Refused before any judgement: the fix conflicts with what the target holds (nothing was
  // written), or the target refused part of it (what was written goes with the slot).
  attempt.outcome = AttemptOutcome::kReverted;
  nlohmann::json conflicts = nlohmann::json::array();
  if (replayed.ok()) {
    attempt.verdict = "conflict";
    attempt.evidence = "The proven fix does not fit this target; nothing of it was written:\n";
    for (const stig::ReplayConflict& c : replayed->conflicts) {
      attempt.evidence += fmt::format("{}: {}\n", c.path, c.why);
      conflicts.push_back({{"path", c.path}, {"why", c.why}});
    }
    tried.summary = replayed->Summary();
  } else {
    attempt.verdict = "error";
    attempt.evidence = "The replay failed: " + replayed.status().ToString();
    tried.summary = "the replay failed: " + replayed.status().message();
  }
  tried.verified_at = Clock::now();
  tried.evaluated = {
      {"number", attempt.number}, {"verdict", attempt.verdict}, {"outcome", AttemptOutcomeName(attempt.outcome)},
      {"summary", tried.summary}, {"replay", tried.summary},    {"replay_ms", Ms(replay_end - replay_start)}};
  if (!conflicts.empty()) tried.evaluated["conflicts"] = std::move(conflicts);
  tried.evaluated.update(source);
  slot.NameIn(tried.evaluated);
  return tried;
}

Result<BatchLoop::AttemptEnd> BatchLoop::RejectReplay(RuleRun& run, const ProvenFix& fix, Slot& slot,
                                                      TriedAttempt& tried) {
  const stig::RuleInfo& rule = run.rule;
  AttemptRecord& attempt = tried.attempt;
  TEMPER_RETURN_IF_ERROR(slot.Discard());
  tried.evaluated["revert_ms"] = Ms(Clock::now() - tried.verified_at);
  LoopStep step;
  if (fix.library_fix != 0) {
    // The model is told, as a lesson of the rule, and its attempts follow.
    const std::string lesson =
        fmt::format("the library's proven fix #{} failed here: {}", fix.library_fix, tried.summary);
    attempt.reflection = lesson;
    step.lesson = memory_.NewLesson(rule, batch_id_, lesson, "the library of proven fixes");
    tried.evaluated["lesson"] = lesson;
  }
  step.events.push_back(Event(rule.id, "evaluator", EventType::kAttemptReverted, tried.evaluated));
  attempt.finished_at = NowMs();
  step.attempt = attempt;
  step.rules.push_back({.rule_id = rule.id, .add_attempts = 1});
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  ++run.attempts_made;
  ++run.replays_rejected;
  run.attempts.push_back(ToPastAttempt(attempt));
  {
    std::lock_guard lock(mu_);
    recent_.push_back(
        fmt::format("{} attempt {} (a proven fix) refused: {}", ShortRuleName(rule.id), attempt.number, tried.summary));
  }
  if (fix.library_fix != 0) {
    Status noted = s_.library->NoteOutcome(fix.library_fix, batch_id_, false, tried.summary);
    if (!noted.ok()) {
      s_.log.Warning("batch {}: noting library fix #{} refused on {}: {}", batch_id_, fix.library_fix, rule.id,
                     noted.ToString());
    }
  }
  return AttemptEnd::kReverted;
}

Status BatchLoop::RunApply() {
  // The fixes the source kept and still holds, whole, in the order it kept them.
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> source, s_.journal.store().BatchAttempts(batch_.apply_from));
  std::vector<AttemptRecord> kept;
  for (AttemptRecord& a : source) {
    if (a.outcome == AttemptOutcome::kKept && !a.reverted_at && !a.fix_json.empty()) kept.push_back(std::move(a));
  }
  std::stable_sort(kept.begin(), kept.end(), [](const AttemptRecord& a, const AttemptRecord& b) {
    return a.finished_at != b.finished_at ? a.finished_at < b.finished_at : a.id < b.id;
  });
  // Those this batch replayed already, before a restart.
  std::set<int64_t> replayed;
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> mine, s_.journal.store().BatchAttempts(batch_id_));
  for (const AttemptRecord& a : mine) {
    std::optional<ProvenFixSource> from = ParseProvenFixApproach(a.approach);
    if (from && from->source_attempt != 0) replayed.insert(from->source_attempt);
  }
  Status out;
  while (true) {
    out = RefreshBatch();
    if (!out.ok() || Interrupted()) break;
    out = ApplyPass(kept, replayed);
    if (!out.ok() || Interrupted()) break;
    Result<bool> settled = Rescan();
    if (!settled.ok()) return settled.status();
    if (*settled) break;
  }
  if (!out.ok()) return out;
  if (Interrupted()) return Interrupt();
  return Complete();
}

Status BatchLoop::ApplyPass(const std::vector<AttemptRecord>& kept, std::set<int64_t>& replayed) {
  const int64_t from = batch_.apply_from;
  // The rule's state now (one thread runs an apply batch: batch_ is read without the slots).
  auto pending = [&](const std::string& rule_id) {
    for (const BatchRuleRecord& r : batch_.rules) {
      if (r.rule_id == rule_id)
        return r.state == RuleState::kPending ? std::optional<BatchRuleRecord>(r) : std::nullopt;
    }
    return std::optional<BatchRuleRecord>();
  };
  for (const AttemptRecord& source : kept) {
    if (Interrupted()) return Status::OK();
    // A rule the source fixed twice (a later fix flipped it) takes its fixes one pass at a time.
    if (replayed.contains(source.id)) continue;
    std::optional<BatchRuleRecord> rule = pending(source.rule_id);
    if (!rule) continue;
    TEMPER_ASSIGN_OR_RETURN(const stig::RuleInfo* info, s_.content.Rule(source.rule_id));
    RuleRun run{.rule = *info, .approach = ApplyFixApproach(from, source.id)};
    run.attempts_made = rule->attempts;
    run.tokens_used = rule->tokens_used;
    replayed.insert(source.id);
    LoopStep started;
    started.rules.push_back({.rule_id = info->id, .state = RuleState::kRunning});
    started.events.push_back(Event(info->id, "daemon", EventType::kRuleStarted,
                                   {{"approach", run.approach}, {"attempts_made", run.attempts_made}}));
    TEMPER_RETURN_IF_ERROR(Commit(std::move(started)).status());
    Result<stig::FixBundle> bundle = stig::FixBundle::FromJson(source.fix_json);
    if (!bundle.ok()) {
      TEMPER_RETURN_IF_ERROR(Escalate(run, fmt::format("the fix batch {} kept (attempt {}) does not read: {}", from,
                                                       source.id, bundle.status().message())));
      TEMPER_RETURN_IF_ERROR(RefreshBatch());
      continue;
    }
    const ProvenFix fix{.bundle = std::move(*bundle), .approach = run.approach, .source_attempt = source.id};
    std::string refused;
    TEMPER_ASSIGN_OR_RETURN(AttemptEnd end, ReplayAttempt(run, fix, refused));
    if (end == AttemptEnd::kInterrupted) return Status::OK();
    if (end != AttemptEnd::kKept) {
      TEMPER_RETURN_IF_ERROR(Escalate(run, "refused on this host: " + refused));
    }
    TEMPER_RETURN_IF_ERROR(RefreshBatch());
  }
  // Failing still, and the source kept no fix (left) for them: a person decides.
  for (const BatchRuleRecord& r : std::vector<BatchRuleRecord>(batch_.rules)) {
    if (Interrupted()) return Status::OK();
    if (r.state != RuleState::kPending) continue;
    TEMPER_ASSIGN_OR_RETURN(const stig::RuleInfo* info, s_.content.Rule(r.rule_id));
    RuleRun run{.rule = *info};
    TEMPER_RETURN_IF_ERROR(Escalate(run, fmt::format("no proven fix in batch {}", from)));
  }
  return RefreshBatch();
}

Result<BatchLoop::AttemptEnd> BatchLoop::MadeAgain(RuleRun& run, const AttemptRecord& attempt, const std::string& fork,
                                                   RemakeCause cause, const std::string& why) {
  LoopStep again;
  again.rules.push_back({.rule_id = run.rule.id, .add_tokens = Total(attempt.usage)});
  again.events.push_back(Event(
      run.rule.id, "evaluator", EventType::kAttemptConflict,
      {{"number", attempt.number}, {"fork", fork}, {"cause", RemakeCauseName(cause)}, {"detail", why}}, attempt.usage));
  TEMPER_RETURN_IF_ERROR(Commit(std::move(again)).status());
  run.tokens_used += Total(attempt.usage);
  return AttemptEnd::kConflict;
}

Result<std::optional<stig::SnapshotId>> BatchLoop::CommitToMainLine(stig::Target& fork, stig::SnapshotId forked_from,
                                                                    const stig::VerificationRequest& request,
                                                                    stig::VerificationReport& report,
                                                                    std::string& conflict) {
  Result<stig::SnapshotId> committed = target_.CommitFork(fork);
  if (!committed.ok()) {
    if (committed.status().code() != StatusCode::kAborted) return committed.status();
    conflict = committed.status().message();
    return std::optional<stig::SnapshotId>();
  }
  stig::SnapshotId good;
  stig::HealthReport health;
  {
    std::lock_guard lock(mu_);
    good = good_snapshot_;
    health = *health_;
  }
  // Nothing kept since the fork was made: the main line is now exactly the tree the fork verified.
  if (good == forked_from) return std::optional<stig::SnapshotId>(*committed);
  // Fixes were kept meanwhile: the rule and the regression set again, on the main line as it is.
  stig::VerificationRequest again = request;
  again.previously_passing = PassingRules();
  again.health_before = &health;
  Result<stig::VerificationReport> verified = stig::Verify(target_, s_.evaluator, again);
  if (verified.ok() && verified->accepted()) {
    report = std::move(*verified);
    return std::optional<stig::SnapshotId>(*committed);
  }
  // No fork reads the new snapshot (forks wait for target_mu_), so it can go alone.
  TEMPER_RETURN_IF_ERROR(target_.DropSnapshot(*committed));
  conflict = "on the main line, with the fixes kept since its fork: " +
             (verified.ok() ? verified->Summary() : verified.status().ToString());
  return std::optional<stig::SnapshotId>();
}

Status BatchLoop::Reflect(const RuleRun& run, const RecalledMemory& memory, AttemptRecord& attempt, LoopStep& step) {
  const stig::RuleInfo& rule = run.rule;
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, s_.models->reflector().Build(ToRoleRule(rule), ToPastAttempt(attempt),
                                                                          run.attempts, memory.lessons));
  TEMPER_RETURN_IF_ERROR(JournalTrimmed(rule.id, "reflector", prompt.trimmed));
  Reflection reflection;
  Asked asked = Ask(
      s_.models->reflector_client(), prompt, [&](const ChatResponse& r) { return s_.models->reflector().Parse(r); },
      reflection);
  if (asked.transport_failed()) return asked.status.WithContext("reflector");
  Add(attempt.usage, asked.usage);
  if (!asked.status.ok()) {
    // The attempt is recorded without a lesson; the next one still sees its evidence.
    step.events.push_back(
        Event(rule.id, "reflector", EventType::kReflectorFailed,
              {{"number", attempt.number}, {"error", asked.status.message()}, {"latency_ms", asked.latency.count()}},
              asked.usage));
    return Status::OK();
  }
  attempt.reflection = ReflectionText(reflection);
  step.lesson = memory_.NewLesson(rule, batch_id_, reflection.lesson,
                                  fmt::format("reflector (endpoint {})", s_.models->endpoint_of().at("reflector")));
  step.events.push_back(Event(rule.id, "reflector", EventType::kReflectorLesson,
                              {{"number", attempt.number},
                               {"lesson", reflection.lesson},
                               {"why_failed", reflection.why_failed},
                               {"next", reflection.next},
                               {"never", reflection.never},
                               {"latency_ms", asked.latency.count()}},
                              asked.usage));
  return Status::OK();
}

Status BatchLoop::Escalate(RuleRun& run, const std::string& detail) {
  LoopStep step;
  RuleUpdate update{.rule_id = run.rule.id, .state = RuleState::kEscalated, .detail = detail};
  if (!run.last_verdict.empty()) update.after_verdict = run.last_verdict;
  step.rules.push_back(std::move(update));
  step.events.push_back(Event(run.rule.id, "daemon", EventType::kRuleEscalated,
                              {{"detail", detail}, {"attempts", run.attempts_made}, {"tokens", run.tokens_used}}));
  {
    std::lock_guard lock(mu_);
    recent_.push_back(
        fmt::format("{} {}: {}", ShortRuleName(run.rule.id), RuleStateName(RuleState::kEscalated), detail));
  }
  return Commit(std::move(step)).status();
}

Result<bool> BatchLoop::Rescan() {
  const uint32_t pass_number = static_cast<uint32_t>(batch_.fixpoint.size()) + 1;
  std::vector<std::string> ids;
  for (const BatchRuleRecord& r : batch_.rules) {
    if (s_.content.Rule(r.rule_id).ok()) ids.push_back(r.rule_id);
  }
  // Each rescan's results stay in pass-N; the final one is moved to "after", where the batch's
  // final evaluation is read from (report, exports).
  std::string results_dir = ResultsDir(fmt::format("pass-{}", pass_number));
  std::map<std::string, int> counts;
  stig::Evaluation eval;
  if (!ids.empty()) {
    TEMPER_ASSIGN_OR_RETURN(eval, EvaluateWithResults(ids, results_dir, counts));
  }
  // This pass's attempts: the batch's so far, less those of the passes before.
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, s_.journal.store().BatchAttempts(batch_id_));
  uint32_t made = static_cast<uint32_t>(attempts.size()), kept = 0;
  for (const AttemptRecord& a : attempts) kept += a.outcome == AttemptOutcome::kKept ? 1 : 0;
  for (const FixpointPass& p : batch_.fixpoint) {
    made -= p.attempts;
    kept -= p.fixed;
  }
  FixpointDecision d = DecidePass(batch_, eval, pass_number, s_.fixpoint_passes, made, kept);
  if (d.pass.final && !ids.empty()) {
    const std::string after = ResultsDir("after");
    std::error_code ec;
    std::filesystem::remove_all(after, ec);  // a resumed batch's earlier try at this pass
    std::filesystem::rename(results_dir, after, ec);
    if (ec) return Status::IOError(fmt::format("moving {} to {}: {}", results_dir, after, ec.message()));
    results_dir = after;
  }

  LoopStep step;
  step.rules = std::move(d.updates);
  if (!ids.empty()) step.results_dir = results_dir;
  nlohmann::json flipped = nlohmann::json::array();
  for (const FlippedRule& f : d.flips) {
    flipped.push_back({{"rule_id", f.rule_id}, {"was", f.was}, {"now", f.now}, {"reason", f.reason}});
  }
  step.events.push_back(Event("", "evaluator", EventType::kFixpointPass,
                              {{"pass", pass_number},
                               {"max_passes", s_.fixpoint_passes},
                               {"final", d.pass.final},
                               {"verdicts", counts},
                               {"attempts", made},
                               {"fixed", kept},
                               {"flipped", flipped},
                               {"requeued", d.pass.requeued},
                               {"escalated", d.pass.escalated},
                               {"results_dir", results_dir}}));
  for (const RuleUpdate& u : step.rules) {
    if (!u.state) continue;
    const EventType type = *u.state == RuleState::kPending ? EventType::kRuleRequeued : EventType::kRuleEscalated;
    step.events.push_back(Event(u.rule_id, "daemon", type, {{"detail", *u.detail}, {"pass", pass_number}}));
    std::lock_guard lock(mu_);
    recent_.push_back(fmt::format("{} {}", ShortRuleName(u.rule_id), *u.detail));
  }
  // A plan-only batch goes back to where it started next: a resume from here must not redo its fixes.
  if (d.pass.final && batch_.options.plan_only) step.good_snapshot = batch_.start_snapshot;
  step.fixpoint_pass = std::move(d.pass);
  TEMPER_RETURN_IF_ERROR(Commit(std::move(step)).status());
  TEMPER_RETURN_IF_ERROR(RefreshBatch());
  return !batch_.fixpoint.empty() && batch_.fixpoint.back().final;
}

Status BatchLoop::Complete() {
  LoopStep step;
  if (batch_.options.plan_only) {
    TEMPER_ASSIGN_OR_RETURN(nlohmann::json reverted, RevertPlan());
    step.events.push_back(Event("", "daemon", EventType::kBatchPlanReverted, reverted));
  }
  step.batch_state = BatchState::kCompleted;
  nlohmann::json rules = nlohmann::json::object();
  for (int s = 0; s < kRuleStateCount; ++s) {
    rules[std::string(RuleStateName(static_cast<RuleState>(s)))] = batch_.rule_counts[s];
  }
  const FixpointPass* last = batch_.fixpoint.empty() ? nullptr : &batch_.fixpoint.back();
  TEMPER_ASSIGN_OR_RETURN(nlohmann::json remakes, Remakes());
  TEMPER_ASSIGN_OR_RETURN(LibraryUse library, BatchLibraryUse(s_.journal.store(), batch_id_));
  step.events.push_back(Event("", "daemon", EventType::kBatchCompleted,
                              {{"rules", rules},
                               {"remakes", remakes},
                               {"library", library.ToJson()},
                               {"verdicts_after", last ? nlohmann::json(last->verdicts) : nlohmann::json::object()},
                               {"fixpoint_passes", batch_.fixpoint.size()},
                               {"plan_only", batch_.options.plan_only},
                               {"results_dir", batch_.results_dir}}));
  return Commit(std::move(step)).status();
}

Result<nlohmann::json> BatchLoop::Remakes() {
  // From the journal, so that a batch resumed after a restart counts the remakes before it too.
  constexpr uint32_t kPage = 1000;
  const std::string conflict(EventTypeName(EventType::kAttemptConflict));
  std::map<std::string, uint32_t> by_cause = {{RemakeCauseName(RemakeCause::kCommit), 0},
                                              {RemakeCauseName(RemakeCause::kRejectedBehind), 0}};
  uint32_t total = 0;
  for (uint64_t after = 0;;) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<EventRecord> page, s_.journal.store().ReadEvents(after, batch_id_, kPage));
    for (const EventRecord& e : page) {
      after = e.seq;
      if (e.type != conflict) continue;
      ++total;
      const nlohmann::json data = nlohmann::json::parse(e.data_json, nullptr, false);
      // Events journalled before the cause was recorded were all commits that did not fit or
      // rejections behind the main line alike: counted in the total only.
      if (data.is_object() && data.contains("cause") && data["cause"].is_string()) {
        auto it = by_cause.find(data["cause"].get<std::string>());
        if (it != by_cause.end()) ++it->second;
      }
    }
    if (page.size() < kPage) break;
  }
  nlohmann::json out = by_cause;
  out["total"] = total;
  return out;
}

Result<nlohmann::json> BatchLoop::RevertPlan() {
  if (!batch_.start_snapshot) {
    return Status::FailedPrecondition(
        fmt::format("plan-only batch {} has no recorded start snapshot to revert to", batch_id_));
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotId> before, target_.Snapshots());
  TEMPER_RETURN_IF_ERROR(target_.Revert(*batch_.start_snapshot));
  good_snapshot_ = *batch_.start_snapshot;
  size_t dropped = 0;
  for (stig::SnapshotId id : before) dropped += id > *batch_.start_snapshot ? 1 : 0;
  return nlohmann::json{{"start_snapshot", *batch_.start_snapshot}, {"snapshots_dropped", dropped}};
}

Status BatchLoop::Interrupt() {
  if (!batch_.options.plan_only || !(cancelled_ || cancel_requested_)) return Status::OK();
  // Cancelled: the plan's changes go now. (Stopping: they stay, and the batch resumes.)
  TEMPER_ASSIGN_OR_RETURN(nlohmann::json reverted, RevertPlan());
  return s_.journal.Append(Event("", "daemon", EventType::kBatchPlanReverted, reverted)).status();
}

void RefusedRecord::NoteRefusal() {
  // What held the batch up, and what the operator has to fix, is the store: the record says so.
  constexpr std::string_view kNote = "; the state store refused this record at first: ";
  if (step.batch_error.find(kNote) != std::string::npos) return;
  step.batch_error += std::string(kNote) + refused.ToString();
  for (NewEvent& event : step.events) {
    if (event.type == EventTypeName(EventType::kBatchFailed))
      event.data_json = EventDataJson({{"error", step.batch_error}});
  }
}

std::optional<RefusedRecord> BatchLoop::Fail(const Status& error) {
  // A plan-only batch leaves nothing behind, even when it fails.
  const bool plan = batch_.options.plan_only && batch_.start_snapshot;
  Status reverted = target_.Revert(plan ? *batch_.start_snapshot : good_snapshot_);
  if (!reverted.ok()) s_.log.Error("batch {}: reverting target {}: {}", batch_id_, target_.name(), reverted.ToString());
  LoopStep step;
  step.batch_state = BatchState::kFailed;
  step.batch_error = error.ToString();
  for (const BatchRuleRecord& r : batch_.rules) {
    if (r.state == RuleState::kRunning) step.rules.push_back({.rule_id = r.rule_id, .state = RuleState::kPending});
  }
  step.events.push_back(Event("", "daemon", EventType::kBatchFailed, {{"error", error.ToString()}}));
  step.batch_id = batch_id_;
  Result<StepCommitted> committed = Commit(step);
  if (committed.ok()) return std::nullopt;
  s_.log.Error("batch {}: recording its failure: {}", batch_id_, committed.status().ToString());
  return RefusedRecord{std::move(step), committed.status()};
}

}  // namespace temper
