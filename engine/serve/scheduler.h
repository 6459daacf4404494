// Scheduler: serves generation requests from many threads on one Backend, with iteration-level
// (continuous) batching.
//
// One thread owns the backend. Each iteration it drops cancelled requests, admits waiting ones
// (forking from the prefix cache where a cached prefix matches), and runs one forward pass whose
// batch holds one token for every decoding request first (decode priority) and then prefill
// chunks in arrival order, up to `max_batch_tokens`. Chunks end at checkpoints (message
// boundaries) so the state there can be pinned in the prefix cache. Requests join and leave the
// batch between any two iterations, and each one streams its tokens as they are sampled.
// The policy (what each pass runs, who is admitted, who is preempted) is schedule_plan.h's, pure
// functions tested without a backend; this class carries it out.
//
// Speculation: a decoding request whose text so far predicts what comes next (PromptLookup) feeds
// its next token together with up to `max_draft_tokens` draft tokens and asks for every row's
// logits. Each row is sampled exactly as a plain decode step would sample it, in order, and the
// drafts are kept while they equal what was sampled; the first sample that differs is kept as
// the correction and the sequence is truncated after it (Backend::Truncate). A draft that is a
// fixed guess has probability p(d) of matching the sample, so this is the standard acceptance
// rule for a point-mass proposal, and as each emitted token is one draw from its own row with the
// request's generator, the output is the same token for token, greedy or seeded, as without
// speculation (up to the backend's batch-size rounding). How many drafts a request tries adapts
// to how many it had accepted (DraftLength, kept for each source of drafts).
//
// Where drafts come from: PromptLookup, where the text so far predicts what comes next; else the
// OutputHistory, where an earlier request's reply does (the scheduler keeps every reply that ended
// by a stop or the length limit); else, when the backend has one (Backend::has_drafter) and
// `use_drafter` is on, Gemma 4's MTP drafter. With a drafter, each request's next drafts are made
// right after the pass that sampled its last token: the text's sources first, and one batched
// Backend::Draft for the requests they found nothing for, from the hidden state of the row that
// sampled the token. The drafter's greedy guesses are
// one-point proposals like prompt lookup's, so the acceptance rule and the unchanged output above
// hold for them too.
//
// Memory: requests are admitted while the KV pool has room for their remaining prompt; when the
// pool runs out mid-flight the scheduler first evicts prefix-cache entries, then preempts the most
// recently admitted request (its cache is dropped and recomputed when it is re-admitted; its
// sampler state is kept, so its output is the same as without preemption). A request that could
// never fit (prompt + max_tokens beyond the context limit or the pool) is refused at Submit.
//
// Thread safety: Submit, metrics and RequestStream's methods may be called from any thread.
// Ownership: borrows the backend (which nobody else may drive while the scheduler lives), the
// detokenizer and the logger; all must outlive it. Destruction cancels every request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/prometheus_text.h"
#include "common/status.h"
#include "engine/backend.h"
#include "engine/constrain/token_mask.h"
#include "engine/sampler.h"
#include "engine/serve/output_history.h"
#include "engine/serve/prompt_lookup.h"
#include "engine/serve/token_logprobs.h"
#include "engine/tokenizer/detokenizer.h"

namespace temper::engine {

struct GenerateRequest {
  std::vector<int32_t> prompt;  // at least one token
  SamplingParams sampling;      // including stop_tokens
  // Generation ends when the text contains one of these; the text stops before it. Needs a
  // detokenizer.
  std::vector<std::string> stop_strings;
  int64_t max_tokens = 256;  // generated tokens, at least 1
  // Prompt positions in (0, prompt.size()] where a message ends. The prefix cache pins the state
  // there, so a later prompt that shares the prefix up to one of them skips it. The prompt's end
  // and the end of generation are always pinned.
  std::vector<int64_t> checkpoints;
  // When set: every generated token keeps the text a sentence of the grammar so far, and the
  // vocabulary's end tokens come only once it is whole (constrain/token_mask.h; the masks are
  // shared by the requests that share the grammar). Such a request samples from full logit rows,
  // each row of a verification pass under the state its accepted drafts reach, and ends its text
  // whole within max_tokens.
  std::shared_ptr<GrammarMasks> grammar;
  // 0..kMaxTopLogprobs: each generated token's log-probability and that many of its row's most
  // likely alternatives come with it (StreamEvent::logprobs); -1: none. A device backend then
  // fetches each sampled row whole.
  int logprobs = -1;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
// "stop", "length", "cancelled", "error" ("" for kNone).
const char* FinishReasonName(FinishReason reason);

struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // taken from the prefix cache instead of prefilled
  int64_t completion_tokens = 0;
  int64_t draft_tokens = 0;           // speculated
  int64_t accepted_draft_tokens = 0;  // of which the model agreed with
  int64_t preemptions = 0;
  double queue_seconds = 0;  // submit to first admission
  double ttft_seconds = 0;   // submit to first token
  double total_seconds = 0;  // submit to finish
};

// What a request produced since the previous event. The last event of a stream has finish set.
struct StreamEvent {
  std::vector<int32_t> tokens;
  // With GenerateRequest::logprobs >= 0: one per token in order, but none for a stop token that
  // ends generation (its text is not output either).
  std::vector<TokenLogprobs> logprobs;
  std::string text;  // only with a detokenizer; held back while it may be the start of a stop string
  FinishReason finish = FinishReason::kNone;
  Status error;        // with kError
  RequestUsage usage;  // with a finish

  // Adds what `later` produced after this event.
  void Append(StreamEvent later);
};

// The consumer's end of one request. Thread-safe.
class RequestStream {
 public:
  // Blocks until there is something new and returns all of it merged into one event; nullopt
  // once the final event has been returned.
  std::optional<StreamEvent> Next();
  // As Next, but gives up after `timeout` (returning an empty, unfinished event).
  std::optional<StreamEvent> NextFor(std::chrono::milliseconds timeout);
  // Reads to the end: everything merged into one event.
  StreamEvent Wait();
  // Stops generation; the stream then ends with FinishReason::kCancelled. Idempotent.
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Scheduler;
  std::optional<StreamEvent> TakeLocked();
  void Push(StreamEvent event);  // merges into the pending event

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<StreamEvent> pending_;
  bool ended_ = false;     // the final event was pushed
  bool returned_ = false;  // ... and handed out
  std::atomic<bool> cancelled_{false};
  std::function<void()> wake_;  // nudges the scheduler (set before the stream is shared)
};

struct SpeculationOptions {
  // Drafts per verification pass, at most kMaxDraftTokens; 0 turns speculation off.
  int max_draft_tokens = kMaxDraftTokens;
  PromptLookupOptions lookup;
  // Where prompt lookup finds nothing, draft from earlier requests' replies (output_history.h);
  // history.max_tokens = 0 keeps none.
  OutputHistoryOptions history;
  // Where neither finds anything, draft with the backend's MTP drafter when it has one.
  bool use_drafter = true;
};

struct SchedulerOptions {
  int64_t max_batch_tokens = 512;  // tokens per forward pass, decode and draft tokens included
  SpeculationOptions speculation;
  bool prefix_cache = true;
  int64_t max_waiting = 4096;                // Submit refuses beyond this many waiting requests
  const Detokenizer* detokenizer = nullptr;  // for text and stop strings
};

// Each request's latencies, in seconds, recorded as the scheduler emits its tokens and finishes it,
// with vLLM's meanings (vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds,
// vllm:e2e_request_latency_seconds). A request refused at Submit is in none of them.
struct RequestLatencies {
  RequestLatencies();                   // the buckets, chosen in scheduler.cpp
  HistogramCounts time_to_first_token;  // submit to the first token: once per request that got one
  // From each token to the next of the same request: completion tokens - 1 observations per request.
  // Accepted drafts arrive in the pass that checked them, so with speculation many gaps are ~0.
  HistogramCounts inter_token;
  HistogramCounts end_to_end;  // submit to finish: once per finished request, whatever the reason
};

struct SchedulerMetrics {
  int64_t waiting = 0;  // queue depth
  int64_t running = 0;
  KvUsage kv;
  int64_t cache_entries = 0;
  int64_t prompt_tokens = 0;         // requested, over all admissions
  int64_t cached_prompt_tokens = 0;  // of which the prefix cache supplied
  int64_t prefilled_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t draft_tokens = 0;             // speculated
  int64_t accepted_draft_tokens = 0;    // of which the model agreed with
  int64_t verify_passes = 0;            // decode steps that carried drafts
  int64_t history_tokens = 0;           // of draft_tokens, the output history's
  int64_t accepted_history_tokens = 0;  // of which the model agreed with
  int64_t drafter_tokens = 0;           // of draft_tokens, the MTP drafter's
  int64_t accepted_drafter_tokens = 0;  // of which the model agreed with
  int64_t finished_requests = 0;
  int64_t cancelled_requests = 0;  // of those, ended by RequestStream::Cancel (or destruction)
  int64_t preemptions = 0;
  int64_t forward_passes = 0;
  int64_t full_row_samples = 0;            // draws that fell beyond a device-sampled row's candidates
  int64_t budget_redraws = 0;              // constrained draws made again so that the text could end within max_tokens
  double generated_tokens_per_second = 0;  // over the last ten seconds
  RequestLatencies latency;
  double draft_acceptance() const {
    return draft_tokens > 0 ? static_cast<double>(accepted_draft_tokens) / static_cast<double>(draft_tokens) : 0;
  }
  double cache_hit_rate() const {
    return prompt_tokens > 0 ? static_cast<double>(cached_prompt_tokens) / static_cast<double>(prompt_tokens) : 0;
  }
};

class Scheduler {
 public:
  // InvalidArgument for options out of range. Starts the scheduling thread.
  static Result<std::unique_ptr<Scheduler>> Create(Backend& backend, const SchedulerOptions& options,
                                                   const Logger& log);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. InvalidArgument for a bad request (empty prompt, token outside the
  // vocabulary, sampling parameter out of range, stop strings without a detokenizer, bad
  // checkpoint); OutOfRange when prompt + max_tokens exceeds the context limit or the KV pool;
  // ResourceExhausted when max_waiting requests are already queued.
  Result<std::shared_ptr<RequestStream>> Submit(GenerateRequest request);

  SchedulerMetrics metrics() const;
  const Backend& backend() const { return backend_; }

 private:
  struct Request;
  Scheduler(Backend& backend, const SchedulerOptions& options, const Logger& log);
  void Loop();
  void Step();
  void DropCancelled();
  void Admit();
  bool AdmitOne(Request& r);
  // One forward pass in three stages (vLLM's schedule, execute, update): PlanBatch decides what
  // runs (schedule_plan.h), ExecuteBatch runs it on the backend, preempting while the KV pool is
  // short, and ApplyBatch samples, verifies drafts, emits and finishes.
  struct Batch;
  Status RunBatch();
  Batch PlanBatch();
  // The pass's result; an empty one with an empty plan when every planned request was preempted.
  // An error finishes the planned requests with it.
  Result<ForwardResult> ExecuteBatch(Batch& batch);
  void ApplyBatch(const Batch& batch, const ForwardResult& out);
  // Drafts for `r`'s next step, at most `room`: none when speculation is off or nothing matches.
  std::vector<int32_t> Draft(Request& r, int64_t room);
  // The token row `row` of `out` gives `r`; nullopt when the request failed (it is finished).
  // `ahead`: tokens this pass sampled for `r` before this row and not yet emitted (its accepted
  // drafts), which count against max_tokens. SampleRow for a request with a grammar: the full row,
  // masked by the grammar's state after every token sampled so far.
  std::optional<int32_t> SampleConstrained(Request& r, const ForwardResult& out, int64_t row, int64_t ahead);
  std::optional<int32_t> SampleRow(Request& r, const ForwardResult& out, int64_t row, int64_t ahead = 0);
  // With GenerateRequest::logprobs: the sampled `token`'s log-probabilities from row `row`, kept for
  // Emit. False when the row could not be had (the request is finished with the error).
  bool RecordLogprobs(Request& r, const ForwardResult& out, int64_t row, int32_t token);
  // Keeps `r`'s drafts up to the first one its rows disagree with, then emits them and the row's
  // own token after them. The pass fed `r`'s next token and then `draft`, from row `row` on.
  void AcceptDrafts(Request& r, std::span<const int32_t> draft, const ForwardResult& out, int64_t row);
  // Whether drafts are prepared after each pass (PrepareDrafts): the backend has an MTP drafter.
  bool DrafterDrafts() const;
  // The next step's drafts of each of `requests` that will decode next: TextDrafts, else the MTP
  // drafter's (one batched call).
  void PrepareDrafts(std::span<Request* const> requests);
  // Drafts after `r`'s text, at most `most` and within the source's draft length: prompt lookup's,
  // else the output history's. Records the source in `r`.
  std::vector<int32_t> TextDrafts(Request& r, int64_t most);
  void Preempt(Request& r);
  void Finish(Request& r, FinishReason reason, Status error = Status::OK());
  void Emit(Request& r, int32_t token);
  void PinPrefix(Request& r, int64_t length);
  void ReleaseSequence(Request& r);
  void PublishMetrics();

  Backend& backend_;
  SchedulerOptions options_;
  const Logger& log_;
  std::unique_ptr<class PrefixCache> cache_;  // scheduler thread only
  OutputHistory history_;                     // scheduler thread only
  int64_t pool_tokens_ = 0;                   // the KV pool's capacity, fixed at creation

  mutable std::mutex mu_;  // guards incoming_, stop_, metrics_
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> incoming_;
  bool stop_ = false;
  bool nudged_ = false;
  SchedulerMetrics metrics_;

  // Scheduler thread only.
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;  // in admission order
  uint64_t admissions_ = 0;
  SchedulerMetrics counters_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> rate_samples_;

  std::thread thread_;
};

}  // namespace temper::engine
