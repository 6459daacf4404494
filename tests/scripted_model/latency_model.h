// LatencyModel: how fast a served model answers, so the scripted model server can make the loop wait
// as it would wait for a real engine on real hardware (issue 22: time a whole-profile run as it would
// run on the reference box). Off unless configured: without one every answer is instant.
//
// A request first waits for admission (at most `max_seqs` requests and `kv_tokens` tokens of KV cache
// held at once, in arrival order, as vLLM's FCFS scheduler admits them), then prefills the prompt
// tokens its prefix cache does not hold at `prefill_tok_s` (shared evenly by the requests prefilling
// at the same moment: prefill is compute bound), then decodes its completion tokens at the per-stream
// rate of the batch it is in: `batch_curve` gives the aggregate tokens/s at n streams decoding at
// once, linear between its points and held after the last, and each of n streams gets
// aggregate(n) / n (every decode step serves the whole batch, as in continuous batching).
// An empty curve makes decoding instant; a zero prefill rate makes prefill instant.
//
// With `speculation` each decode step is a verification pass: every stream drafts its role's
// `drafted` tokens and the pass checks them with the next token, yielding its role's
// `tokens_per_pass` (1 + the drafts accepted, on average). The step of n streams then takes
// n / aggregate(n) seconds times PassCost(the streams' mean drafted count), the cost of a pass of
// 1 + k rows (and of drafting them) relative to a plain decode step, and each stream gets its own
// tokens_per_pass per step. `max_model_len` refuses a request whose prompt plus max_tokens would
// not fit, with the error vLLM answers (ContextLengthError).
//
// `speedup` S runs the whole model S times faster than the box it describes (every rate times S),
// so a paced run of hours takes minutes: the same run as on that box with everything else
// (the loop's harness) S times slower. The simulated seconds it reports are the faster model's.
//
// LatencyFromFlags reads the server's command-line flags (--simulate, --decode-tok-s, --batch-curve,
// --prefill-tok-s, --kv-tokens, --max-seqs, --prefix-cache-prompts, --speedup); its errors name the flag.
// Thread safety: values, immutable once built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scripted_model/prompt_reading.h"

namespace temper::scripted {

struct CurvePoint {
  int streams = 1;     // concurrent decoding streams
  double tok_s = 0.0;  // aggregate tokens/s over all of them
};

// ScriptedRole's values, for per-role tables.
inline constexpr int kScriptedRoles = 4;
static_assert(static_cast<int>(ScriptedRole::kReflector) == kScriptedRoles - 1, "ScriptedRole indexes the tables");

// How one role's replies speculate: drafts per pass and the tokens a pass yields on average.
struct RoleSpeculation {
  double drafted = 0;          // draft tokens checked per pass (k; a mean when k adapts)
  double tokens_per_pass = 1;  // 1 + the drafts accepted, on average
};

// A cost point: a pass checking `drafted` drafts costs `step_cost` plain decode steps.
struct PassCostPoint {
  double drafted = 0;
  double step_cost = 1;
};

struct Speculation {
  std::string method;                     // for Describe: "MTP, k = 2, vLLM's acceptance figures"
  RoleSpeculation roles[kScriptedRoles];  // indexed by ScriptedRole
  std::vector<PassCostPoint> costs;       // drafted strictly increasing from 0 (cost 1); linear between, held after

  const RoleSpeculation& For(ScriptedRole role) const { return roles[static_cast<int>(role)]; }
  // Cost of a pass checking `drafted` drafts (a mean over a batch's streams), × a decode step.
  double PassCost(double drafted) const;
};

struct LatencyModel {
  std::vector<CurvePoint> batch_curve;     // streams strictly increasing from 1; empty: decoding is instant
  double prefill_tok_s = 0.0;              // 0: prefill is instant
  uint64_t kv_tokens = 0;                  // KV capacity in tokens (prompt + completion); 0: unbounded
  int max_seqs = 0;                        // requests admitted at once; 0: unbounded
  size_t prefix_cache_prompts = 64;        // recent prompts the prefix cache holds; 0: no prefix cache
  double speedup = 1.0;                    // the rates above already multiplied by it (see the top)
  std::optional<Speculation> speculation;  // none: one token per stream per decode step
  uint64_t max_model_len = 0;              // prompt + max_tokens allowed per request; 0: unbounded

  // Aggregate decode tokens/s with `streams` (≥ 1) decoding at once; 0 when decoding is instant.
  double AggregateTokS(int streams) const;
  // What each of `streams` streams gets: AggregateTokS(streams) / streams.
  double PerStreamTokS(int streams) const;
  // Seconds one decode step (a verification pass with speculation) takes with `streams` (≥ 1)
  // decoding, drafting `mean_drafted` tokens each on average; 0 when decoding is instant.
  double StepSeconds(int streams, double mean_drafted) const;
  // Tokens a step yields for a stream of `role`: its tokens_per_pass with speculation, else 1.
  double TokensPerStep(ScriptedRole role) const;
  // Drafts a stream of `role` checks per step: 0 without speculation.
  double DraftedPerStep(ScriptedRole role) const;
  // What a lone stream of `role` decodes per second: TokensPerStep / StepSeconds(1, its drafts).
  double LoneStreamTokS(ScriptedRole role) const;
  // One line for the server's log: "decode 1:14.9,2:29.2 tok/s, prefill 2300 tok/s, KV 17968 tokens, ...".
  std::string Describe() const;
};

// The reference box: Gemma 4 31B bf16 on vLLM 0.19, tensor parallel 4 over 4×NVIDIA L4, as the
// competing system deploys it (see latency_model.cpp for every figure's source and derivation).
LatencyModel ReferenceBox();

// The competing system's deployment of 2026-11-29 on the same box: vLLM with Gemma 4's MTP drafter,
// k = 2, KV cache 45,336 tokens, --max-model-len 16384 (latency_model.cpp: sources).
LatencyModel ReferenceBoxMtp();

// temper's own engine on the same box, from its kernel times measured on an H200 and its 4×L4
// estimate, with prompt-lookup speculation at the acceptance measured on the roles' recorded
// replies (latency_model.cpp: every figure's source).
LatencyModel Temper4xL4();

// The names --simulate accepts ("reference-box", "reference-box-mtp", "temper-4xl4").
std::vector<std::string> LatencyPresets();

// InvalidArgument with vLLM's own wording when a request of `prompt_tokens` asking for up to
// `max_tokens` (nullopt: not given, so vLLM fills the context) does not fit the model's
// max_model_len; OK when it fits or there is no limit.
Status ContextLengthError(const LatencyModel& model, uint64_t prompt_tokens, std::optional<uint64_t> max_tokens);

// The flags as given on the command line; nullopt (or "" for `simulate`) when not given.
struct LatencyFlags {
  std::string simulate;  // a preset; the other flags override its fields
  std::optional<double> decode_tok_s;
  std::optional<std::string> batch_curve;
  std::optional<double> prefill_tok_s;
  std::optional<int64_t> kv_tokens;
  std::optional<int64_t> max_seqs;
  std::optional<int64_t> prefix_cache_prompts;
  std::optional<double> speedup;
};

// nullopt when no flag is given. --decode-tok-s R alone is the curve "1:R" (streams share R);
// with --batch-curve it is the curve's 1-stream point, which the curve may then leave out.
// InvalidArgument naming the flag and the value for an unknown preset, a rate that is not a positive
// finite number (the speedup too), a negative count, a malformed curve, a curve whose per-stream rate grows with the
// batch, or a 1-stream rate given twice and differently.
Result<std::optional<LatencyModel>> LatencyFromFlags(const LatencyFlags& flags);

// "1:14.9,2:29.2,4:55.7,8:102": STREAMS:TOKENS_PER_S points, streams strictly increasing.
// InvalidArgument naming --batch-curve, the point and what is wrong with it. Does not check the
// per-stream rule (LatencyFromFlags does, once the 1-stream point is known).
Result<std::vector<CurvePoint>> ParseBatchCurve(std::string_view text);

}  // namespace temper::scripted
