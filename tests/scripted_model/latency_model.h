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

namespace temper::scripted {

struct CurvePoint {
  int streams = 1;     // concurrent decoding streams
  double tok_s = 0.0;  // aggregate tokens/s over all of them
};

struct LatencyModel {
  std::vector<CurvePoint> batch_curve;  // streams strictly increasing from 1; empty: decoding is instant
  double prefill_tok_s = 0.0;           // 0: prefill is instant
  uint64_t kv_tokens = 0;               // KV capacity in tokens (prompt + completion); 0: unbounded
  int max_seqs = 0;                     // requests admitted at once; 0: unbounded
  size_t prefix_cache_prompts = 64;     // recent prompts the prefix cache holds; 0: no prefix cache
  double speedup = 1.0;                 // the rates above already multiplied by it (see the top)

  // Aggregate decode tokens/s with `streams` (≥ 1) decoding at once; 0 when decoding is instant.
  double AggregateTokS(int streams) const;
  // What each of `streams` streams gets: AggregateTokS(streams) / streams.
  double PerStreamTokS(int streams) const;
  // One line for the server's log: "decode 1:14.9,2:29.2 tok/s, prefill 2300 tok/s, KV 17968 tokens, ...".
  std::string Describe() const;
};

// The reference box: Gemma 4 31B bf16 on vLLM 0.19, tensor parallel 4 over 4×NVIDIA L4, as the
// competing system deploys it (see latency_model.cpp for every figure's source and derivation).
LatencyModel ReferenceBox();

// The names --simulate accepts ("reference-box").
std::vector<std::string> LatencyPresets();

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
