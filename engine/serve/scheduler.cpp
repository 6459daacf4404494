#include "engine/serve/scheduler.h"

#include <algorithm>
#include <array>
#include <limits>

#include <fmt/format.h>

#include "engine/serve/ngrams.h"
#include "engine/serve/prefix_cache.h"
#include "engine/serve/schedule_plan.h"

namespace temper::engine {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Where a verification pass's drafts come from; each source keeps its own draft length.
enum class DraftSource { kPromptLookup, kHistory, kDrafter };
constexpr size_t kDraftSources = 3;
constexpr size_t Index(DraftSource source) { return static_cast<size_t>(source); }

}  // namespace

// vLLM's buckets (vllm/v1/metrics/loggers.py), so that dashboards made for it read these alike; the
// inter-token ones start lower, at 1 ms: a decode step of a small model on a GPU takes a few, and
// accepted drafts arrive together.
RequestLatencies::RequestLatencies()
    : time_to_first_token({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                           1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      inter_token({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
                   0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0}),
      end_to_end({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// RequestStream

void StreamEvent::Append(StreamEvent later) {
  tokens.insert(tokens.end(), later.tokens.begin(), later.tokens.end());
  logprobs.insert(logprobs.end(), std::make_move_iterator(later.logprobs.begin()),
                  std::make_move_iterator(later.logprobs.end()));
  text += later.text;
  finish = later.finish;
  error = std::move(later.error);
  usage = later.usage;
}

void RequestStream::Push(StreamEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_) {
    pending_ = std::move(event);
  } else {
    pending_->Append(std::move(event));
  }
  if (pending_->finish != FinishReason::kNone) {
    ended_ = true;
    wake_ = nullptr;  // the scheduler may go away from here on
  }
  cv_.notify_all();
}

std::optional<StreamEvent> RequestStream::TakeLocked() {
  std::optional<StreamEvent> e = std::move(pending_);
  pending_.reset();
  if (e && e->finish != FinishReason::kNone) returned_ = true;
  return e;
}

std::optional<StreamEvent> RequestStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.has_value() || returned_; });
  return TakeLocked();
}

std::optional<StreamEvent> RequestStream::NextFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return pending_.has_value() || returned_; })) return StreamEvent{};
  return TakeLocked();
}

StreamEvent RequestStream::Wait() {
  StreamEvent all;
  while (std::optional<StreamEvent> e = Next()) all.Append(std::move(*e));
  return all;
}

void RequestStream::Cancel() {
  cancelled_.store(true);
  // Under mu_, so the scheduler cannot finish this stream (clearing wake_) and be destroyed
  // while the nudge is on its way.
  std::lock_guard<std::mutex> lock(mu_);
  if (wake_) wake_();
}

// ---------------------------------------------------------------------------------------------
// Scheduler

struct Scheduler::Request {
  std::shared_ptr<RequestStream> stream;
  GenerateRequest req;
  std::optional<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  std::vector<int32_t> tokens;  // the prompt, then every generated token
  int64_t prompt_len = 0;
  std::vector<int64_t> checkpoints;  // sorted, unique, ending with prompt_len
  SequenceId seq = -1;
  int64_t fed = 0;  // tokens in the sequence's cache
  uint64_t order = 0;
  bool admitted_before = false;
  bool done = false;
  std::optional<PromptLookup> lookup;           // made at the first decode step
  std::optional<GrammarConstraint> constraint;  // GenerateRequest::grammar, followed
  // Drafts the next verification tries, per source: each source's guesses are right at their own
  // rate, so each adapts to its own record.
  std::array<DraftLength, kDraftSources> draft_lengths{DraftLength(0), DraftLength(0), DraftLength(0)};
  int64_t sampled_row = -1;              // the last pass's row that sampled tokens.back(); -1: none
  std::vector<int32_t> prepared_drafts;  // with a drafter: the next step's drafts, made after a pass
  // Where the next pass's drafts come from. It holds until the pass that feeds them has been
  // accepted: the next drafts are made after AcceptDrafts.
  DraftSource draft_source = DraftSource::kPromptLookup;
  std::deque<TokenLogprobs> sampled_logprobs;  // with req.logprobs: sampled, not yet emitted
  std::string text_buf;                        // all text so far (cut at a stop string)
  size_t text_sent = 0;
  Clock::time_point submitted;
  Clock::time_point last_token;  // when the latest token was emitted
  RequestUsage usage;

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - fed; }
};

Scheduler::Scheduler(Backend& backend, const SchedulerOptions& options, const Logger& log)
    : backend_(backend), options_(options), log_(log), history_(options.speculation.history) {}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(Backend& backend, const SchedulerOptions& options,
                                                     const Logger& log) {
  if (options.max_batch_tokens < 1) {
    return Status::InvalidArgument(
        fmt::format("scheduler: max_batch_tokens is {}, must be at least 1", options.max_batch_tokens));
  }
  const SpeculationOptions& spec = options.speculation;
  if (spec.max_draft_tokens < 0 || spec.max_draft_tokens > kMaxDraftTokens) {
    return Status::InvalidArgument(fmt::format("scheduler: speculation.max_draft_tokens is {}, must be in [0, {}]",
                                               spec.max_draft_tokens, kMaxDraftTokens));
  }
  if (Status lookup = CheckNgramRange("speculation n-grams", spec.lookup.min_ngram, spec.lookup.max_ngram);
      !lookup.ok()) {
    return lookup.WithContext("scheduler");
  }
  if (Status history = spec.history.Check(); !history.ok()) return history.WithContext("scheduler");
  if (options.max_waiting < 1) {
    return Status::InvalidArgument(
        fmt::format("scheduler: max_waiting is {}, must be at least 1", options.max_waiting));
  }
  std::unique_ptr<Scheduler> s(new Scheduler(backend, options, log));
  if (options.prefix_cache) s->cache_ = std::make_unique<PrefixCache>(backend);
  s->counters_.kv = backend.kv_usage();
  s->pool_tokens_ = s->counters_.kv.total_blocks * s->counters_.kv.block_tokens;
  s->metrics_ = s->counters_;
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<std::shared_ptr<RequestStream>> Scheduler::Submit(GenerateRequest request) {
  const ModelConfig& config = backend_.config();
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) return Status::InvalidArgument("request: the prompt is empty");
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = request.prompt[static_cast<size_t>(i)];
    if (id < 0 || id >= config.vocab_size) {
      return Status::InvalidArgument(
          fmt::format("request: prompt token {} is id {}, outside the vocabulary [0, {})", i, id, config.vocab_size));
    }
  }
  if (request.max_tokens < 1) {
    return Status::InvalidArgument(fmt::format("request: max_tokens is {}, must be at least 1", request.max_tokens));
  }
  if (request.logprobs < -1 || request.logprobs > kMaxTopLogprobs) {
    return Status::InvalidArgument(
        fmt::format("request: logprobs is {}, must be -1 (none) or 0..{}", request.logprobs, kMaxTopLogprobs));
  }
  Result<Sampler> sampler = Sampler::Create(request.sampling);
  if (!sampler.ok()) return sampler.status().WithContext("request sampling");
  if (!request.stop_strings.empty() && options_.detokenizer == nullptr) {
    return Status::InvalidArgument("request: stop strings need a detokenizer, and this engine has none");
  }
  for (size_t i = 0; i < request.stop_strings.size(); ++i) {
    if (request.stop_strings[i].empty())
      return Status::InvalidArgument(fmt::format("request: stop string {} is empty", i));
  }
  if (request.grammar && static_cast<int64_t>(request.grammar->vocabulary().size()) > config.vocab_size) {
    return Status::InvalidArgument(fmt::format("request: the grammar's vocabulary has {} tokens, the model {}",
                                               request.grammar->vocabulary().size(), config.vocab_size));
  }
  for (int64_t c : request.checkpoints) {
    if (c < 1 || c > n) {
      return Status::InvalidArgument(fmt::format("request: checkpoint {} is outside the prompt (1..{})", c, n));
    }
  }
  // Constants of the backend, safe to read from any thread.
  const int64_t limit = backend_.context_limit();
  if (n + request.max_tokens > limit) {
    return Status::OutOfRange(
        fmt::format("request: the prompt's {} tokens plus max_tokens {} exceed the context limit of {} tokens", n,
                    request.max_tokens, limit));
  }
  const int64_t pool = pool_tokens_;
  if (n + request.max_tokens > pool) {
    return Status::OutOfRange(
        fmt::format("request: the prompt's {} tokens plus max_tokens {} exceed the KV pool of {} tokens", n,
                    request.max_tokens, pool));
  }

  auto r = std::make_unique<Request>();
  r->stream = std::make_shared<RequestStream>();
  r->stream->wake_ = [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      nudged_ = true;
    }
    cv_.notify_all();
  };
  r->sampler = std::move(*sampler);
  if (request.grammar) r->constraint.emplace(request.grammar);
  r->draft_lengths.fill(DraftLength(options_.speculation.max_draft_tokens));
  if (options_.detokenizer != nullptr) r->text = options_.detokenizer->NewStream();
  r->tokens = request.prompt;
  r->prompt_len = n;
  r->checkpoints = request.checkpoints;
  r->checkpoints.push_back(n);
  std::sort(r->checkpoints.begin(), r->checkpoints.end());
  r->checkpoints.erase(std::unique(r->checkpoints.begin(), r->checkpoints.end()), r->checkpoints.end());
  r->req = std::move(request);
  r->submitted = Clock::now();
  r->usage.prompt_tokens = n;
  std::shared_ptr<RequestStream> stream = r->stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int64_t>(incoming_.size()) + metrics_.waiting >= options_.max_waiting) {
      return Status::ResourceExhausted(fmt::format("scheduler: {} requests are already waiting", options_.max_waiting));
    }
    incoming_.push_back(std::move(r));
  }
  cv_.notify_all();
  return stream;
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerMetrics m = metrics_;
  m.waiting += static_cast<int64_t>(incoming_.size());
  return m;
}

void Scheduler::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (running_.empty() && waiting_.empty()) {
        // Idle: wake for new work, a cancellation, shutdown, or once a second to refresh metrics.
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_ || nudged_ || !incoming_.empty(); });
      }
      if (stop_) break;
      nudged_ = false;
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    Step();
    PublishMetrics();
  }
  // Shutdown: every request still known ends as cancelled.
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!incoming_.empty()) {
      waiting_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  for (auto& r : running_) Finish(*r, FinishReason::kCancelled);
  for (auto& r : waiting_) Finish(*r, FinishReason::kCancelled);
  running_.clear();
  waiting_.clear();
  cache_.reset();
}

void Scheduler::Step() {
  DropCancelled();
  Admit();
  if (running_.empty()) return;
  Status s = RunBatch();
  if (!s.ok()) log_.Error("scheduler: forward pass failed: {}", s.ToString());
  std::erase_if(running_, [](const std::unique_ptr<Request>& r) { return r->done; });
}

void Scheduler::DropCancelled() {
  for (auto& r : running_) {
    if (r->stream->cancelled()) Finish(*r, FinishReason::kCancelled);
  }
  std::erase_if(running_, [](const std::unique_ptr<Request>& r) { return r->done; });
  for (auto& r : waiting_) {
    if (r->stream->cancelled()) Finish(*r, FinishReason::kCancelled);
  }
  std::erase_if(waiting_, [](const std::unique_ptr<Request>& r) { return r->done; });
}

void Scheduler::Admit() {
  while (!waiting_.empty()) {
    if (!AdmitOne(*waiting_.front())) break;
    std::unique_ptr<Request> r = std::move(waiting_.front());
    waiting_.pop_front();
    if (!r->done) running_.push_back(std::move(r));
  }
}

// Returns false when the request must keep waiting; true when it was admitted or failed.
bool Scheduler::AdmitOne(Request& r) {
  const KvUsage kv = backend_.kv_usage();
  if (kv.live_sequences >= kv.max_sequences) return false;
  AdmissionInput room{.block_tokens = kv.block_tokens,
                      .free_blocks = kv.free_blocks,
                      .request_tokens = static_cast<int64_t>(r.tokens.size()),
                      .can_free_cache = cache_ != nullptr};
  for (const auto& q : running_) room.running_remaining.push_back(q->remaining());
  const int64_t usable = static_cast<int64_t>(r.tokens.size()) - 1;  // at least one token is fed
  PrefixCache::Match match;
  while (true) {
    if (room.can_free_cache) match = cache_->Lookup(r.tokens, usable);
    room.cached_tokens = match.length;
    const AdmissionVerdict verdict = DecideAdmission(room);
    if (verdict == AdmissionVerdict::kWait) return false;
    if (verdict == AdmissionVerdict::kAdmit) break;
    // Lookup made the match the most recently used entry, so it is evicted last.
    if (cache_->EvictOne()) {
      room.free_blocks = backend_.kv_usage().free_blocks;
    } else {
      room.can_free_cache = false;
    }
  }
  Result<SequenceId> seq = match.snapshot >= 0 ? backend_.ForkSnapshot(match.snapshot) : backend_.AddSequence();
  if (!seq.ok() && match.snapshot >= 0) {
    match = {};
    seq = backend_.AddSequence();
  }
  if (!seq.ok()) {
    if (seq.status().code() == StatusCode::kResourceExhausted && !running_.empty()) return false;
    Finish(r, FinishReason::kError, seq.status().WithContext("starting a sequence"));
    return true;
  }
  r.seq = *seq;
  r.fed = match.length;
  r.order = ++admissions_;
  if (!r.admitted_before) {
    r.admitted_before = true;
    r.usage.queue_seconds = Seconds(r.submitted, Clock::now());
    r.usage.cached_prompt_tokens = std::min(match.length, r.prompt_len);
    counters_.prompt_tokens += r.prompt_len;
    counters_.cached_prompt_tokens += r.usage.cached_prompt_tokens;
  }
  return true;
}

// One forward pass's work: the plan (schedule_plan.h), the requests it indexes and the drafts they
// proposed.
struct Scheduler::Batch {
  StepPlan plan;
  std::vector<Request*> requests;               // running_ when planned, in its order
  std::vector<std::vector<int32_t>> proposals;  // each request's proposed drafts (decoding ones only)

  Request& request(const PlannedItem& it) const { return *requests[it.sequence]; }
  std::span<const int32_t> drafts(const PlannedItem& it) const {
    return std::span<const int32_t>(proposals[it.sequence]).first(static_cast<size_t>(it.drafts));
  }
};

Status Scheduler::RunBatch() {
  Batch batch = PlanBatch();
  if (batch.plan.items.empty()) return Status::OK();
  Result<ForwardResult> out = ExecuteBatch(batch);
  if (!out.ok()) return out.status();
  if (batch.plan.items.empty()) return Status::OK();  // every planned request was preempted
  ApplyBatch(batch, *out);
  return Status::OK();
}

Scheduler::Batch Scheduler::PlanBatch() {
  Batch batch;
  ScheduleInput input{.max_batch_tokens = options_.max_batch_tokens, .max_decode_rows = backend_.max_decode_rows()};
  for (auto& r : running_) {
    batch.requests.push_back(r.get());
    input.running.push_back(
        {.tokens = static_cast<int64_t>(r->tokens.size()), .fed = r->fed, .checkpoints = r->checkpoints});
  }
  // Each decoding request proposes up to all the rows drafts may have; the plan keeps what fits,
  // in admission order. (Every source's drafts for fewer rows are the first of these.)
  batch.proposals.resize(running_.size());
  if (const int64_t rows = DraftRowCapacity(input); rows > 0) {
    for (size_t i = 0; i < running_.size(); ++i) {
      if (input.running[i].remaining() != 1) continue;
      batch.proposals[i] = Draft(*running_[i], rows);
      input.running[i].proposed_drafts = static_cast<int64_t>(batch.proposals[i].size());
    }
  }
  batch.plan = PlanStep(input);
  return batch;
}

Result<ForwardResult> Scheduler::ExecuteBatch(Batch& batch) {
  while (true) {
    std::vector<std::vector<int32_t>> verified(batch.plan.items.size());  // the next token, then drafts
    std::vector<ForwardItem> forward;
    forward.reserve(batch.plan.items.size());
    for (size_t i = 0; i < batch.plan.items.size(); ++i) {
      const PlannedItem& it = batch.plan.items[i];
      const Request& r = batch.request(it);
      const float temperature = r.sampler->params().temperature;
      if (it.drafts > 0) {
        verified[i].push_back(r.tokens.back());
        const std::span<const int32_t> drafts = batch.drafts(it);
        verified[i].insert(verified[i].end(), drafts.begin(), drafts.end());
        forward.push_back({r.seq, verified[i], true, temperature});
      } else {
        const auto fed =
            std::span<const int32_t>(r.tokens).subspan(static_cast<size_t>(r.fed), static_cast<size_t>(it.tokens));
        forward.push_back({r.seq, fed, false, temperature});
      }
    }
    // A backend that samples on its devices sends each row's candidates, not the whole row.
    Result<ForwardResult> out =
        backend_.Forward(forward, ForwardOptions{.candidates = backend_.sample_candidates() > 0});
    if (out.ok()) {
      ++counters_.forward_passes;
      return out;
    }
    auto fail_all = [&] {
      for (const PlannedItem& it : batch.plan.items) Finish(batch.request(it), FinishReason::kError, out.status());
      return out.status();
    };
    if (out.status().code() != StatusCode::kResourceExhausted) return fail_all();
    // Out of KV pages: drop the drafts first, then give back cached prefixes, then the newest
    // request's pages.
    if (DropDrafts(batch.plan)) continue;
    if (cache_ && cache_->EvictOne()) continue;
    std::vector<Request*> live;
    std::vector<uint64_t> orders;
    for (auto& r : running_) {
      if (r->done) continue;
      live.push_back(r.get());
      orders.push_back(r->order);
    }
    const std::optional<size_t> victim = ChoosePreemptionVictim(orders);
    if (!victim) return fail_all();
    Request* preempted = live[*victim];
    Preempt(*preempted);
    std::erase_if(batch.plan.items, [&](const PlannedItem& it) { return &batch.request(it) == preempted; });
    if (batch.plan.items.empty()) return ForwardResult{};
  }
}

void Scheduler::ApplyBatch(const Batch& batch, const ForwardResult& out) {
  int64_t row = 0;  // an item's first logit row: one per item, or one per token fed with drafts
  for (const PlannedItem& it : batch.plan.items) {
    Request& r = batch.request(it);
    r.sampled_row = -1;
    const int64_t first_row = row;
    if (it.drafts > 0) {
      row += it.tokens;
      AcceptDrafts(r, batch.drafts(it), out, first_row);
      continue;
    }
    ++row;
    r.fed += it.tokens;
    if (r.remaining() > 0) {
      counters_.prefilled_tokens += it.tokens;
      if (std::binary_search(r.checkpoints.begin(), r.checkpoints.end(), r.fed)) PinPrefix(r, r.fed);
      continue;  // a prefill chunk short of the end: its logits are not needed
    }
    if (r.fed == r.prompt_len) PinPrefix(r, r.fed);
    if (it.tokens > 1) counters_.prefilled_tokens += it.tokens;
    if (std::optional<int32_t> token = SampleRow(r, out, first_row)) {
      r.sampled_row = first_row;
      Emit(r, *token);
    }
  }
  if (DrafterDrafts()) {
    std::vector<Request*> passed;
    for (const PlannedItem& it : batch.plan.items) passed.push_back(&batch.request(it));
    PrepareDrafts(passed);
  }
}

bool Scheduler::DrafterDrafts() const {
  return options_.speculation.max_draft_tokens > 0 && options_.speculation.use_drafter && backend_.has_drafter();
}

void Scheduler::PrepareDrafts(std::span<Request* const> requests) {
  std::vector<DraftRequest> asks;
  std::vector<Request*> asking;
  for (Request* r : requests) {
    r->prepared_drafts.clear();
    // Only a request whose last token this pass sampled and whose next step is a decode step.
    if (r->done || r->sampled_row < 0 || r->remaining() != 1) continue;
    const int64_t left = r->req.max_tokens - r->generated() - 1;
    if (left < 1) continue;
    // Where the text so far predicts the next tokens, its drafts: on the roles' replies they run
    // long and are mostly right (4.7 tokens a pass, bench/RESULTS.md "Speculative decoding"), and cost nothing.
    r->prepared_drafts = TextDrafts(*r, left);
    if (!r->prepared_drafts.empty()) continue;
    r->draft_source = DraftSource::kDrafter;
    const int64_t count = std::min<int64_t>(r->draft_lengths[Index(DraftSource::kDrafter)].next(), left);
    asks.push_back({r->seq, r->tokens.back(), r->sampled_row, static_cast<int>(count)});
    asking.push_back(r);
  }
  if (asks.empty()) return;
  Result<DraftResult> drafted = backend_.Draft(asks, {});
  if (!drafted.ok()) {
    // Drafts only ever save time: the requests go on without them. FailedPrecondition is expected:
    // a pass with more logit rows than a device backend keeps (a verification pass beside new
    // prompts) leaves it no hidden states to start from.
    if (drafted.status().code() != StatusCode::kFailedPrecondition) {
      log_.Warning("scheduler: the MTP drafter failed, so this step has no drafts: {}", drafted.status().ToString());
    }
    return;
  }
  for (size_t i = 0; i < asking.size(); ++i) asking[i]->prepared_drafts = std::move(drafted->tokens[i]);
}

std::vector<int32_t> Scheduler::TextDrafts(Request& r, int64_t most) {
  auto within = [&](DraftSource source) {
    r.draft_source = source;
    return static_cast<int>(std::min<int64_t>(most, r.draft_lengths[Index(source)].next()));
  };
  if (!r.lookup) r.lookup.emplace(options_.speculation.lookup);
  std::vector<int32_t> drafts = r.lookup->Draft(r.tokens, within(DraftSource::kPromptLookup));
  if (!drafts.empty()) return drafts;
  return history_.Draft(r.tokens, within(DraftSource::kHistory));
}

std::vector<int32_t> Scheduler::Draft(Request& r, int64_t room) {
  const SpeculationOptions& spec = options_.speculation;
  // Constrained requests draft too: each row of a verification pass is sampled under the mask of
  // the state its accepted drafts reach, so a draft the grammar refuses is never taken.
  if (spec.max_draft_tokens == 0) return {};
  // Each accepted draft is one more token generated, and the pass always yields one after them.
  const int64_t most = std::min<int64_t>({room, kMaxDraftTokens, r.req.max_tokens - r.generated() - 1});
  if (most < 1) return {};
  if (!DrafterDrafts()) return TextDrafts(r, most);
  // Prepared within each source's own draft length.
  std::vector<int32_t> drafts = std::move(r.prepared_drafts);
  r.prepared_drafts.clear();
  if (static_cast<int64_t>(drafts.size()) > most) drafts.resize(static_cast<size_t>(most));
  return drafts;
}

std::optional<int32_t> Scheduler::SampleRow(Request& r, const ForwardResult& out, int64_t row, int64_t ahead) {
  std::optional<int32_t> token;
  const size_t vocab = static_cast<size_t>(backend_.config().vocab_size);
  if (r.constraint) {
    token = SampleConstrained(r, out, row, ahead);
  } else if (out.candidates.empty()) {
    token = r.sampler->Sample(std::span<const float>(out.logits).subspan(static_cast<size_t>(row) * vocab, vocab));
  } else {
    const Sampler::Outcome picked = r.sampler->Sample(out.candidates[static_cast<size_t>(row)]);
    token = picked.token;
    if (picked.needs_full_row) {
      Result<std::vector<float>> full = backend_.LogitsRow(row);
      if (!full.ok()) {
        Finish(r, FinishReason::kError, full.status());
        return std::nullopt;
      }
      ++counters_.full_row_samples;
      token = r.sampler->Sample(*full);
    }
  }
  if (token && r.req.logprobs >= 0 && !RecordLogprobs(r, out, row, *token)) return std::nullopt;
  return token;
}

bool Scheduler::RecordLogprobs(Request& r, const ForwardResult& out, int64_t row, int32_t token) {
  const size_t vocab = static_cast<size_t>(backend_.config().vocab_size);
  if (out.candidates.empty()) {
    const auto logits = std::span<const float>(out.logits).subspan(static_cast<size_t>(row) * vocab, vocab);
    r.sampled_logprobs.push_back(LogprobsOf(logits, token, r.req.logprobs));
    return true;
  }
  Result<std::vector<float>> full = backend_.LogitsRow(row);
  if (!full.ok()) {
    Finish(r, FinishReason::kError, full.status().WithContext("logprobs"));
    return false;
  }
  r.sampled_logprobs.push_back(LogprobsOf(*full, token, r.req.logprobs));
  return true;
}

std::optional<int32_t> Scheduler::SampleConstrained(Request& r, const ForwardResult& out, int64_t row, int64_t ahead) {
  const size_t vocab = static_cast<size_t>(backend_.config().vocab_size);
  std::vector<float> logits;
  if (out.candidates.empty()) {
    const auto full = std::span<const float>(out.logits).subspan(static_cast<size_t>(row) * vocab, vocab);
    logits.assign(full.begin(), full.end());
  } else {
    Result<std::vector<float>> full = backend_.LogitsRow(row);
    if (!full.ok()) {
      Finish(r, FinishReason::kError, full.status());
      return std::nullopt;
    }
    logits = std::move(*full);
  }
  // Tokens the grammar refuses (and ids past the tokenizer's vocabulary) can never be drawn.
  const TokenBits& allowed = r.constraint->Allowed();
  if (std::none_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w != 0; })) {
    // A vocabulary without a token for the bytes the grammar needs next (a real tokenizer has
    // every byte; a test vocabulary may not).
    Finish(r, FinishReason::kError,
           Status::FailedPrecondition("grammar: no token of the vocabulary can continue the text"));
    return std::nullopt;
  }
  const size_t grammar_vocab = r.req.grammar->vocabulary().size();
  auto keep_only = [&](const TokenBits& bits) {
    for (size_t id = 0; id < logits.size(); ++id) {
      if (id >= grammar_vocab || !TokenAllowed(bits, static_cast<int32_t>(id))) {
        logits[id] = -std::numeric_limits<float>::infinity();
      }
    }
  };
  keep_only(allowed);
  int32_t token = r.sampler->Sample(logits);
  // Near max_tokens, a token that leaves the text too far from whole to end in time is drawn
  // again from the tokens that do fit, so that a constrained reply ends well-formed rather than
  // cut. (Checked after the draw: the budget binds only in a request's last tokens.)
  const int64_t tokens_left = r.req.max_tokens - r.generated() - ahead;
  Result<bool> fits = r.constraint->AcceptWithin(token, tokens_left);
  Status accepted = fits.status();
  if (fits.ok() && !*fits) {
    const TokenBits& fitting = r.constraint->AllowedWithin(tokens_left);
    if (std::any_of(fitting.begin(), fitting.end(), [](uint64_t w) { return w != 0; })) {
      keep_only(fitting);
      token = r.sampler->Sample(logits);
      ++counters_.budget_redraws;
    }
    accepted = r.constraint->Accept(token);
  }
  if (!accepted.ok()) {
    Finish(r, FinishReason::kError, accepted.WithContext("grammar"));
    return std::nullopt;
  }
  return token;
}

void Scheduler::AcceptDrafts(Request& r, std::span<const int32_t> draft, const ForwardResult& out, int64_t row) {
  // Row j follows the next token and drafts 1..j: its sample decides draft j + 1.
  std::vector<int32_t> emitted;
  for (size_t j = 0; j <= draft.size(); ++j) {
    std::optional<int32_t> token = SampleRow(r, out, row + static_cast<int64_t>(j), static_cast<int64_t>(j));
    if (!token) return;
    emitted.push_back(*token);
    if (j == draft.size() || *token != draft[j]) break;
  }
  const int64_t accepted = static_cast<int64_t>(emitted.size()) - 1;
  const int64_t k = static_cast<int64_t>(draft.size());
  ++counters_.verify_passes;
  counters_.draft_tokens += k;
  counters_.accepted_draft_tokens += accepted;
  r.usage.draft_tokens += k;
  r.usage.accepted_draft_tokens += accepted;
  if (r.draft_source == DraftSource::kHistory) {
    counters_.history_tokens += k;
    counters_.accepted_history_tokens += accepted;
  } else if (r.draft_source == DraftSource::kDrafter) {
    counters_.drafter_tokens += k;
    counters_.accepted_drafter_tokens += accepted;
  }
  r.draft_lengths[Index(r.draft_source)].Update(static_cast<int>(k), static_cast<int>(accepted));
  // The row after the accepted drafts sampled the last token emitted here.
  r.sampled_row = row + accepted;
  // Keep the next token and the accepted drafts; the rejected ones' rows go.
  r.fed += 1 + accepted;
  Status kept = backend_.Truncate(r.seq, r.fed);
  if (!kept.ok()) {
    Finish(r, FinishReason::kError, kept.WithContext("dropping rejected draft tokens"));
    return;
  }
  for (int32_t token : emitted) {
    Emit(r, token);
    if (r.done) return;
  }
}

void Scheduler::Preempt(Request& r) {
  ReleaseSequence(r);
  r.fed = 0;
  r.prepared_drafts.clear();  // guesses from a cache that is gone; the recomputed one drafts anew
  ++r.usage.preemptions;
  ++counters_.preemptions;
  log_.Info("scheduler: KV pool full; preempted a request with {} tokens (recomputed later)", r.tokens.size());
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() == &r) {
      waiting_.push_front(std::move(*it));
      running_.erase(it);
      return;
    }
  }
}

void Scheduler::PinPrefix(Request& r, int64_t length) {
  if (!cache_ || r.seq < 0 || length <= 0) return;
  Result<bool> pinned = cache_->Insert(std::span<const int32_t>(r.tokens).first(static_cast<size_t>(length)), r.seq);
  if (!pinned.ok()) log_.Warning("prefix cache: cannot pin a {}-token prefix: {}", length, pinned.status().ToString());
}

void Scheduler::ReleaseSequence(Request& r) {
  if (r.seq < 0) return;
  Status s = backend_.ReleaseSequence(r.seq);
  if (!s.ok()) log_.Error("scheduler: releasing sequence {}: {}", r.seq, s.ToString());
  r.seq = -1;
}

void Scheduler::Emit(Request& r, int32_t token) {
  const Clock::time_point now = Clock::now();
  if (r.generated() == 0) {
    r.usage.ttft_seconds = Seconds(r.submitted, now);
    counters_.latency.time_to_first_token.Observe(r.usage.ttft_seconds);
  } else {
    counters_.latency.inter_token.Observe(Seconds(r.last_token, now));
  }
  r.last_token = now;
  r.tokens.push_back(token);
  ++counters_.generated_tokens;
  StreamEvent event;
  event.tokens.push_back(token);
  if (!r.sampled_logprobs.empty()) {
    // The stop token that ends generation is not part of the output, nor are its logprobs.
    if (!r.sampler->IsStop(token)) event.logprobs.push_back(std::move(r.sampled_logprobs.front()));
    r.sampled_logprobs.pop_front();
  }

  FinishReason finish = FinishReason::kNone;
  if (r.sampler->IsStop(token)) {
    finish = FinishReason::kStop;  // the stop token's own text is not part of the output
  } else if (r.text) {
    Result<std::string> piece = r.text->Push(token);
    if (!piece.ok()) {
      Finish(r, FinishReason::kError, piece.status().WithContext("detokenizing"));
      return;
    }
    const size_t before = r.text_buf.size();
    r.text_buf += *piece;
    // A stop string may end in this piece and start in earlier ones.
    size_t cut = std::string::npos;
    for (const std::string& stop : r.req.stop_strings) {
      const size_t from = before >= stop.size() - 1 ? before - (stop.size() - 1) : 0;
      const size_t at = r.text_buf.find(stop, from);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      r.text_buf.resize(cut);
      finish = FinishReason::kStop;
    }
  }
  if (finish == FinishReason::kNone && r.generated() >= r.req.max_tokens) finish = FinishReason::kLength;
  if (finish != FinishReason::kNone) {
    r.stream->Push(std::move(event));
    Finish(r, finish);
    return;
  }
  // Hold back the longest tail that could still grow into a stop string.
  size_t hold = 0;
  for (const std::string& stop : r.req.stop_strings) {
    for (size_t k = std::min(stop.size() - 1, r.text_buf.size() - r.text_sent); k > hold; --k) {
      if (r.text_buf.compare(r.text_buf.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  const size_t send_end = r.text_buf.size() - hold;
  event.text = r.text_buf.substr(r.text_sent, send_end - r.text_sent);
  r.text_sent = send_end;
  r.stream->Push(std::move(event));
}

void Scheduler::Finish(Request& r, FinishReason reason, Status error) {
  if (r.done) return;
  r.done = true;
  // Output that ended inside accepted drafts leaves the cache holding drafts past the last token.
  const int64_t emitted = static_cast<int64_t>(r.tokens.size());
  if (r.seq >= 0 && r.fed > emitted) {
    if (backend_.Truncate(r.seq, emitted).ok()) {
      r.fed = emitted;
    } else {
      ReleaseSequence(r);  // nothing of it can be pinned
    }
  }
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    // The end of a turn is a checkpoint: the next turn of the conversation resends all of it.
    PinPrefix(r, r.fed);
    // And its reply drafts for the requests after it.
    if (options_.speculation.max_draft_tokens > 0) {
      const std::span<const int32_t> all(r.tokens);
      history_.Add(all.first(static_cast<size_t>(r.prompt_len)), all.subspan(static_cast<size_t>(r.prompt_len)));
    }
  }
  ReleaseSequence(r);
  StreamEvent event;
  if (r.text && (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
    const bool cut_at_stop_string = reason == FinishReason::kStop && !r.sampler->IsStop(r.tokens.back());
    if (!cut_at_stop_string) {
      Result<std::string> rest = r.text->Finish();
      if (rest.ok()) r.text_buf += *rest;
    }
    event.text = r.text_buf.substr(std::min(r.text_sent, r.text_buf.size()));
    r.text_sent = r.text_buf.size();
  }
  event.finish = reason;
  event.error = std::move(error);
  r.usage.completion_tokens = std::max<int64_t>(0, r.generated());
  r.usage.total_seconds = Seconds(r.submitted, Clock::now());
  event.usage = r.usage;
  counters_.latency.end_to_end.Observe(r.usage.total_seconds);
  ++counters_.finished_requests;
  if (reason == FinishReason::kCancelled) ++counters_.cancelled_requests;
  r.stream->Push(std::move(event));
}

void Scheduler::PublishMetrics() {
  const Clock::time_point now = Clock::now();
  rate_samples_.emplace_back(now, counters_.generated_tokens);
  while (rate_samples_.size() > 2 && Seconds(rate_samples_[1].first, now) > 10.0) rate_samples_.pop_front();
  const KvUsage kv = backend_.kv_usage();
  const int64_t cache_entries = cache_ ? cache_->entries() : 0;
  const double span = Seconds(rate_samples_.front().first, now);
  const double rate =
      span > 0 ? static_cast<double>(counters_.generated_tokens - rate_samples_.front().second) / span : 0;
  std::lock_guard<std::mutex> lock(mu_);
  // Copy-assigned in place: the histograms' buckets reuse metrics_'s storage, so publishing after
  // every step allocates nothing.
  metrics_ = counters_;
  metrics_.waiting = static_cast<int64_t>(waiting_.size());
  metrics_.running = static_cast<int64_t>(running_.size());
  metrics_.kv = kv;
  metrics_.cache_entries = cache_entries;
  metrics_.generated_tokens_per_second = rate;
}

}  // namespace temper::engine
