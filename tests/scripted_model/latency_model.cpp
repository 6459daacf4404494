#include "scripted_model/latency_model.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "common/closest_match.h"

namespace temper::scripted {

namespace {

constexpr std::string_view kReferenceBox = "reference-box";
constexpr std::string_view kReferenceBoxMtp = "reference-box-mtp";
constexpr std::string_view kTemper4xL4 = "temper-4xl4";
constexpr int kMaxCurveStreams = 4096;

// The reference box, every figure from /work/shared/notes (engines.md, gemma-forge.md), as cited:
//
// Decode, one stream: 14.9 tok/s, measured on the box (engines.md, header "Reference deployment" and
// §3's table; gemma-forge.md §5 "Speed": 9.8 / 14.9 / 14.8 tok/s at 128 / 256 / 512 output tokens;
// the 128-token run carried warm-up). That is 67.1 ms per decode step.
//
// The batching curve is derived, not measured (nobody published vLLM's batched decode on this box:
// engines.md §3, "max-num-seqs 8 (not measured)"). A decode step at batch B reads the weights once
// for the whole batch and each sequence's KV cache once, so step(B) = step(1) + (B - 1) × Δ with Δ
// what one more sequence adds per GPU (engines.md §1.2–§1.4, TP 4):
//   - its KV reads: the 50 sliding layers read 204,800 B/token over the 1,024-token window
//     (210 MB), the 10 global layers 20,480 B/token over the whole context: 105 MB at 5 K tokens,
//     about a loop request's (3.81 M tokens over 143 attempts of ~5 requests:
//     bench/history/issue-09-loop-whole-profile.md), 315 MB in all; at the 229 GB/s the box reaches at batch 1 (15.35
//     GB of weights per GPU in 67.1 ms, 76 % of the L4's 300 GB/s) that is 1.38 ms;
//   - its share of the 120 all-reduces per step: NCCL over PCIe takes ~20 µs at batch 1's 10.75 KB
//     and ~40 µs at batch 8's 86 KB (§1.4's table), +2.4 ms at batch 8, 0.34 ms per sequence;
//   - no compute: a bf16 GEMM at M ≤ 8 does M FLOPs per weight byte read, far below the L4's
//     ~200–400 FLOP/byte ridge (§1.1, §1.3), so it hides under the weight reads.
// Δ = 1.72 ms: step(2) = 68.8 ms, step(4) = 72.3 ms, step(8) = 79.1 ms, and the aggregate
// B / step(B) is 29.1, 55.4 and 101.1 tok/s (6.8× at 8 streams). A check against the batched figures
// published for this model: vLLM FP8 on an H100 SXM decodes 67–69 tok/s at batch 1 and 515 at
// batch 8 (7.5×), rvLLM 63 and 434 (6.9×) (engines.md §3, rvllm.com/bench). The curve moves by 2 %
// at most for contexts from 2 K (103.6 tok/s at 8 streams) to 8 K tokens (98.7).
//
// Prefill: 2 × 29.3 G parameters of linears plus attention ≈ 61 GFLOP per prompt token at a 5 K
// context (engines.md §1.6: 60.5 at 2 K, 62.9 at 8 K). The L4 is power-capped: matmul sweeps measure 54–71 TFLOPS bf16
// of its 121 dense (§1.1), ~58 each; at 0.8 of that over four (185 TFLOPS, §1.6) a token costs 0.33 ms, and the
// tensor-parallel ring all-reduce, 1.5 × 10,752 B × 120 = 1.94 MB per token per GPU at ~20 GB/s over PCIe (§1.1, §1.6),
// adds 0.10 ms when it does not overlap: 0.43 ms, 2,300 tok/s, 29 % MFU of the four L4s' 484 TFLOPS dense peak (a 2 K
// prompt in 0.89 s: §1.6 estimates 0.7–0.9 s).
//
// KV capacity: 17,968 tokens, what vLLM reported on the box at gpu-memory-utilization 0.92 with its
// hybrid KV manager off, so every layer keeps the whole context (engines.md header, §0 point 4, §1.7).
// Admission: --max-num-seqs 8 (gemma-forge.md §4, serve-gemma-bf16-tp4.sh). Prefix cache: vLLM's V1
// engine caches prefixes by default (engines.md §4).
constexpr double kReferenceDecodeTokS = 14.9;
constexpr double kReferenceCurve[][2] = {{1, 14.9}, {2, 29.1}, {4, 55.4}, {8, 101.1}};
constexpr double kReferencePrefillTokS = 2300;
constexpr uint64_t kReferenceKvTokens = 17968;
constexpr int kReferenceMaxSeqs = 8;

// reference-box-mtp: the competing system's deployment as of 2026-11-29 (gemma-forge.md, "Update
// 2026-11-29": infra/vllm/scripts/serve-gemma-bf16-tp4.sh @ a90695a, docs/adr/0018-vllm-mtp-cutover.md
// @ 0fb51ec), on the same box: vLLM with the MTP drafter gemma-4-31B-it-assistant,
// num_speculative_tokens = 2, --max-num-seqs 8, --max-model-len 16384, KV cache 45,336 tokens.
// The target's own decode, batching and prefill are reference-box's (the same weights, TP 4, eager).
//
// Acceptance is vLLM's metric, accepted drafts over proposed, so a pass yields 1 + 2 × acceptance:
//   - Worker: ~60% (the ADR: "Worker prompts (scripts) drop to ~60% acceptance at p10"; the only
//     Worker figure published, a 10th percentile, so this is the slow side): 2.2 tokens a pass;
//   - Architect (pick and re-engagement) and Reflector: 95% ("above 95% at the median"): 2.9.
// Pass cost (verification of 1 + 2 rows plus two draft steps, × a decode step): 1.076, from the
// deployment's own micro-benchmark, 41 tok/s at ~98% acceptance (2.96 tokens a pass) over the 14.9
// tok/s of one stream: 14.9 × 2.96 / 41. temper's H200 measurement of a 3-row check, 1.23× a step,
// plus two draft steps at 0.042 each (bench/history/issue-49-whole-profile-in-minutes.md) would give
// 1.31 and predict 33.6 tok/s for that micro-benchmark, not the 41 measured on the box: the box's
// own figure wins. A lone Worker stream: 14.9 × 2.2 / 1.076 = 30.5 tok/s; the other roles 40.2.
// The same cost is assumed at every batch size (a pass of n streams = the n-stream step × 1.076).
constexpr double kMtpDrafts = 2;
constexpr double kMtpMicroBenchAcceptance = 0.98;
constexpr double kMtpMicroBenchTokS = 41;
constexpr double kMtpWorkerAcceptance = 0.60;
constexpr double kMtpOtherAcceptance = 0.95;
constexpr uint64_t kMtpKvTokens = 45336;
constexpr uint64_t kMtpMaxModelLen = 16384;

// temper-4xl4: temper's engine on the same box (4×L4, TP 4, Gemma 4 31B bf16), every figure from
// bench/history/issue-49-whole-profile-in-minutes.md (the H200 run of 2026-11-29) unless named:
//   - decode, one stream: the slow end of the engine's 4×L4 estimate (bench/l4_decode_estimate.cpp
//     over temper-kernel-bench's H200 kernel times: 63.09–76.23 ms a step, 13.1–15.9 tok/s): 76.23 ms,
//     13.1 tok/s. The slow end reads at 76% of the L4's 300 GB/s, what vLLM reaches on the box; the
//     fast end assumes 90%, not shown on an L4 yet.
//   - batching: temper-bench at tp 1 on the H200, 1,024-token context: batch 8 takes 33.88 ms a step
//     against 17.60 ms at batch 1 (1.925×); the GEMVs read the weights once for every row, so a step
//     grows linearly in rows between: step(n) = step(1) × (1 + (n − 1) × 0.925 / 7), held past 8.
//   - speculation: prompt lookup, adaptive k ≤ 8, the engine's default, as measured on the roles'
//     recorded requests of the loop whose Worker calls apply_reference_fix (bench/RESULTS.md
//     "Speculative decoding", 2026-11-29: temper-bench --lookup-transcript over the whole profile's
//     459 requests), tokens a pass (drafts checked a pass): Worker 1.59 (1.5), Reflector 3.00 (3.0),
//     Architect pick 1.62 (1.8), re-engagement 1.31 (1.0). The output history's higher figures are
//     left out: they come from the scripted model's templated replies.
//   - pass cost: the H200's check of the next token and k drafts, × a decode step: k = 1 1.13, 2
//     1.23, 3 1.29, 5 1.83, 7 1.90, 8 2.01 (no graph); linear between. Lone streams: Worker 13.1 ×
//     1.59 / 1.18 = 17.7 tok/s, Reflector 30.5, Architect pick 17.6, re-engagement 15.2. As for vLLM
//     the same ratio is assumed at every batch size (not measured above one stream).
//   - prefill: 1,344 tok/s on the H200 for a 2,048-token prompt at tp 1, scaled by the ratio the
//     estimate uses for kernels not bound by bandwidth (the H200's 132 SMs × 1.98 GHz over an L4's
//     58 × 2.04 GHz: 2.21) over four L4s: 2,433 tok/s; plus the tensor-parallel all-reduce that
//     reference-box charges, 1.94 MB a token per GPU at ~20 GB/s over PCIe (0.097 ms a token):
//     1,968 tok/s, below the 2,300 tok/s reference-box derives for vLLM's tensor-core GEMMs.
//   - KV: the engine holds every admitted stream's KV in a paged pool (16-token blocks, 40 KiB a
//     token for the full-attention layers over all ranks) plus one 808 MiB sliding-window ring per
//     sequence slot (bench-tp1's output). Four L4s show 23,034 MiB each (engines.md §1.7); less the
//     weights (58.05 GiB), each rank's workspace and runtime (0.91 + 0.47 GiB on the H200), the
//     5.3% the H200 run left free (7.41 of 139.28 GiB) and 8 rings leaves 15,675 MiB: 401,264
//     tokens. Admission: 8 sequence slots, as bench-tp1 allocates. Prefix cache: yes.
constexpr double kTemperStepMs = 76.23;
constexpr double kTemperBatch8StepMs = 33.88;
constexpr double kTemperBatch1StepMs = 17.60;
constexpr int kTemperBatchRows = 8;
constexpr PassCostPoint kTemperPassCosts[] = {{0, 1.0},  {1, 1.13}, {2, 1.23}, {3, 1.29},
                                              {5, 1.83}, {7, 1.90}, {8, 2.01}};
constexpr double kH200PrefillTokS = 1344;
constexpr double kH200OverL4Compute = 2.21;
constexpr int kL4Ranks = 4;
constexpr double kAllReduceMsPerPrefillToken = 0.097;
constexpr double kL4VisibleMiB = 23034;
constexpr double kWeightsGiB = 58.05;
constexpr double kRankRuntimeGiB = 0.91 + 0.47;
constexpr double kFreeMarginShare = 7.41 / 139.28;
constexpr double kSlidingRingMiB = 808;
constexpr int kTemperSequenceSlots = 8;
constexpr double kKvKiBPerToken = 40;
constexpr uint64_t kKvBlockTokens = 16;

Status BadFlag(std::string_view flag, std::string_view value, std::string_view problem) {
  return Status::InvalidArgument(fmt::format("{} '{}': {}", flag, value, problem));
}

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0; }

Status CheckRate(std::string_view flag, std::optional<double> v) {
  if (v && !PositiveFinite(*v)) return BadFlag(flag, fmt::format("{}", *v), "must be a positive number of tokens/s");
  return Status::OK();
}

Status CheckCount(std::string_view flag, std::optional<int64_t> v, std::string_view zero_means) {
  if (v && *v < 0) return BadFlag(flag, fmt::format("{}", *v), fmt::format("must be 0 ({}) or more", zero_means));
  return Status::OK();
}

std::string CurveText(const std::vector<CurvePoint>& curve) {
  std::string out;
  for (const CurvePoint& p : curve) out += fmt::format("{}{}:{:g}", out.empty() ? "" : ",", p.streams, p.tok_s);
  return out;
}

}  // namespace

double LatencyModel::AggregateTokS(int streams) const {
  if (batch_curve.empty() || streams < 1) return 0.0;
  if (streams <= batch_curve.front().streams) return batch_curve.front().tok_s;
  for (size_t i = 1; i < batch_curve.size(); ++i) {
    const CurvePoint& a = batch_curve[i - 1];
    const CurvePoint& b = batch_curve[i];
    if (streams <= b.streams) {
      const double f = static_cast<double>(streams - a.streams) / (b.streams - a.streams);
      return a.tok_s + f * (b.tok_s - a.tok_s);
    }
  }
  return batch_curve.back().tok_s;  // held beyond the last point
}

double LatencyModel::PerStreamTokS(int streams) const { return streams < 1 ? 0.0 : AggregateTokS(streams) / streams; }

std::string LatencyModel::Describe() const {
  std::string spec = "no speculation";
  if (speculation) {
    spec = fmt::format("speculation {}: lone stream tok/s", speculation->method);
    for (int r = 0; r < kScriptedRoles; ++r) {
      const auto role = static_cast<ScriptedRole>(r);
      spec += fmt::format("{} {} {:.1f}", r == 0 ? "" : ",", RoleLabel(role), LoneStreamTokS(role));
    }
  }
  return fmt::format("decode {}, {}, prefill {}, KV {}, max {} sequences, max model len {}, prefix cache {}{}",
                     batch_curve.empty() ? "instant" : CurveText(batch_curve) + " tok/s (streams:aggregate)", spec,
                     prefill_tok_s > 0 ? fmt::format("{:g} tok/s", prefill_tok_s) : "instant",
                     kv_tokens > 0 ? fmt::format("{} tokens", kv_tokens) : "unbounded",
                     max_seqs > 0 ? fmt::format("{}", max_seqs) : "unbounded",
                     max_model_len > 0 ? fmt::format("{}", max_model_len) : "unbounded",
                     prefix_cache_prompts > 0 ? fmt::format("{} prompts", prefix_cache_prompts) : "off",
                     speedup != 1.0 ? fmt::format(" (rates {:g} times the modelled box's)", speedup) : "");
}

LatencyModel ReferenceBox() {
  LatencyModel m;
  for (const auto& [streams, tok_s] : kReferenceCurve) m.batch_curve.push_back({static_cast<int>(streams), tok_s});
  m.prefill_tok_s = kReferencePrefillTokS;
  m.kv_tokens = kReferenceKvTokens;
  m.max_seqs = kReferenceMaxSeqs;
  static_assert(kReferenceCurve[0][1] == kReferenceDecodeTokS, "the curve starts at the measured one-stream rate");
  return m;
}

LatencyModel ReferenceBoxMtp() {
  LatencyModel m = ReferenceBox();
  m.kv_tokens = kMtpKvTokens;
  m.max_model_len = kMtpMaxModelLen;
  Speculation s;
  s.method = "MTP, k = 2";
  const double micro_bench_tokens = 1 + kMtpDrafts * kMtpMicroBenchAcceptance;
  s.costs = {{0, 1.0}, {kMtpDrafts, kReferenceDecodeTokS * micro_bench_tokens / kMtpMicroBenchTokS}};
  for (RoleSpeculation& r : s.roles) r = {kMtpDrafts, 1 + kMtpDrafts * kMtpOtherAcceptance};
  s.roles[static_cast<int>(ScriptedRole::kWorker)] = {kMtpDrafts, 1 + kMtpDrafts * kMtpWorkerAcceptance};
  m.speculation = std::move(s);
  return m;
}

LatencyModel Temper4xL4() {
  LatencyModel m;
  const double step_s = kTemperStepMs / 1e3;
  const double per_row = (kTemperBatch8StepMs / kTemperBatch1StepMs - 1) / (kTemperBatchRows - 1);
  for (int n = 1; n <= kTemperBatchRows; ++n) m.batch_curve.push_back({n, n / (step_s * (1 + (n - 1) * per_row))});
  m.prefill_tok_s = 1 / (1 / (kH200PrefillTokS * kL4Ranks / kH200OverL4Compute) + kAllReduceMsPerPrefillToken / 1e3);
  const double visible_mib = kL4Ranks * kL4VisibleMiB;
  const double pool_mib = visible_mib - kWeightsGiB * 1024 - kL4Ranks * kRankRuntimeGiB * 1024 -
                          kFreeMarginShare * visible_mib - kTemperSequenceSlots * kSlidingRingMiB;
  const auto pool_tokens = static_cast<uint64_t>(pool_mib * 1024 / kKvKiBPerToken);
  m.kv_tokens = pool_tokens / kKvBlockTokens * kKvBlockTokens;
  m.max_seqs = kTemperSequenceSlots;
  Speculation s;
  s.method = "prompt lookup, adaptive k <= 8";
  s.costs.assign(std::begin(kTemperPassCosts), std::end(kTemperPassCosts));
  s.roles[static_cast<int>(ScriptedRole::kWorker)] = {1.5, 1.59};
  s.roles[static_cast<int>(ScriptedRole::kReflector)] = {3.0, 3.00};
  s.roles[static_cast<int>(ScriptedRole::kArchitectPick)] = {1.8, 1.62};
  s.roles[static_cast<int>(ScriptedRole::kArchitectReengage)] = {1.0, 1.31};
  m.speculation = std::move(s);
  return m;
}

std::vector<std::string> LatencyPresets() {
  return {std::string(kReferenceBox), std::string(kReferenceBoxMtp), std::string(kTemper4xL4)};
}

double Speculation::PassCost(double drafted) const {
  if (costs.empty() || drafted <= costs.front().drafted) return costs.empty() ? 1.0 : costs.front().step_cost;
  for (size_t i = 1; i < costs.size(); ++i) {
    const PassCostPoint& a = costs[i - 1];
    const PassCostPoint& b = costs[i];
    if (drafted <= b.drafted)
      return a.step_cost + (drafted - a.drafted) / (b.drafted - a.drafted) * (b.step_cost - a.step_cost);
  }
  return costs.back().step_cost;  // held beyond the last point
}

double LatencyModel::StepSeconds(int streams, double mean_drafted) const {
  const double aggregate = AggregateTokS(streams);
  if (aggregate <= 0) return 0.0;
  return streams / aggregate * (speculation ? speculation->PassCost(mean_drafted) : 1.0);
}

double LatencyModel::TokensPerStep(ScriptedRole role) const {
  return speculation ? speculation->For(role).tokens_per_pass : 1.0;
}

double LatencyModel::DraftedPerStep(ScriptedRole role) const {
  return speculation ? speculation->For(role).drafted : 0.0;
}

double LatencyModel::LoneStreamTokS(ScriptedRole role) const {
  const double step = StepSeconds(1, DraftedPerStep(role));
  return step > 0 ? TokensPerStep(role) / step : 0.0;
}

Status ContextLengthError(const LatencyModel& model, uint64_t prompt_tokens, std::optional<uint64_t> max_tokens) {
  const uint64_t limit = model.max_model_len;
  if (limit == 0) return Status::OK();
  // vLLM's two refusals (vllm/entrypoints/openai serving, as its 400 BadRequestError bodies read).
  if (prompt_tokens >= limit) {
    return Status::InvalidArgument(fmt::format(
        "This model's maximum context length is {} tokens. However, your request has {} input tokens. Please "
        "reduce the length of the input messages.",
        limit, prompt_tokens));
  }
  if (max_tokens && *max_tokens > limit - prompt_tokens) {
    return Status::InvalidArgument(fmt::format(
        "'max_tokens' or 'max_completion_tokens' is too large: {}. This model's maximum context length is {} tokens "
        "and your request has {} input tokens ({} > {} - {}).",
        *max_tokens, limit, prompt_tokens, *max_tokens, limit, prompt_tokens));
  }
  return Status::OK();
}

Result<std::vector<CurvePoint>> ParseBatchCurve(std::string_view text) {
  constexpr std::string_view kFlag = "--batch-curve";
  std::vector<CurvePoint> curve;
  if (text.empty()) return BadFlag(kFlag, text, "is empty; expected STREAMS:TOKENS_PER_S points such as 1:14.9,8:102");
  size_t start = 0;
  for (int index = 1;; ++index) {
    const size_t comma = text.find(',', start);
    const std::string_view point = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    const size_t colon = point.find(':');
    auto bad = [&](std::string_view problem) {
      return BadFlag(kFlag, text, fmt::format("point {} '{}' {}", index, point, problem));
    };
    if (colon == std::string_view::npos) return bad("is not STREAMS:TOKENS_PER_S");
    const std::string_view s = point.substr(0, colon), r = point.substr(colon + 1);
    CurvePoint p;
    auto [s_end, s_ec] = std::from_chars(s.data(), s.data() + s.size(), p.streams);
    if (s.empty() || s_ec != std::errc() || s_end != s.data() + s.size() || p.streams < 1 ||
        p.streams > kMaxCurveStreams) {
      return bad(fmt::format("has no stream count from 1 to {} before the ':'", kMaxCurveStreams));
    }
    auto [r_end, r_ec] = std::from_chars(r.data(), r.data() + r.size(), p.tok_s);
    if (r.empty() || r_ec != std::errc() || r_end != r.data() + r.size() || !PositiveFinite(p.tok_s)) {
      return bad("has no positive tokens/s after the ':'");
    }
    if (!curve.empty() && p.streams <= curve.back().streams) {
      return bad(fmt::format("comes after {} streams: stream counts must increase", curve.back().streams));
    }
    curve.push_back(p);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return curve;
}

Result<std::optional<LatencyModel>> LatencyFromFlags(const LatencyFlags& flags) {
  if (flags.simulate.empty() && !flags.decode_tok_s && !flags.batch_curve && !flags.prefill_tok_s && !flags.kv_tokens &&
      !flags.max_seqs && !flags.prefix_cache_prompts && !flags.speedup) {
    return std::optional<LatencyModel>();
  }
  LatencyModel m;
  if (!flags.simulate.empty()) {
    if (flags.simulate == kReferenceBox) {
      m = ReferenceBox();
    } else if (flags.simulate == kReferenceBoxMtp) {
      m = ReferenceBoxMtp();
    } else if (flags.simulate == kTemper4xL4) {
      m = Temper4xL4();
    } else {
      return BadFlag("--simulate", flags.simulate,
                     fmt::format("is not a preset; known: {}, {}, {}{}", kReferenceBox, kReferenceBoxMtp, kTemper4xL4,
                                 DidYouMean(flags.simulate, LatencyPresets())));
    }
  }
  TEMPER_RETURN_IF_ERROR(CheckRate("--decode-tok-s", flags.decode_tok_s));
  TEMPER_RETURN_IF_ERROR(CheckRate("--prefill-tok-s", flags.prefill_tok_s));
  if (flags.speedup && !PositiveFinite(*flags.speedup)) {
    return BadFlag("--speedup", fmt::format("{}", *flags.speedup),
                   "must be a positive number (1: the box's own rates)");
  }
  TEMPER_RETURN_IF_ERROR(CheckCount("--kv-tokens", flags.kv_tokens, "unbounded"));
  TEMPER_RETURN_IF_ERROR(CheckCount("--max-seqs", flags.max_seqs, "unbounded"));
  TEMPER_RETURN_IF_ERROR(CheckCount("--prefix-cache-prompts", flags.prefix_cache_prompts, "no prefix cache"));
  if (flags.max_seqs && *flags.max_seqs > kMaxCurveStreams) {
    return BadFlag("--max-seqs", fmt::format("{}", *flags.max_seqs), fmt::format("is above {}", kMaxCurveStreams));
  }

  if (flags.batch_curve) {
    TEMPER_ASSIGN_OR_RETURN(m.batch_curve, ParseBatchCurve(*flags.batch_curve));
    if (m.batch_curve.front().streams != 1) {
      if (!flags.decode_tok_s) {
        return BadFlag("--batch-curve", *flags.batch_curve,
                       "has no 1-stream point: start it with 1:RATE, or give the one-stream rate as --decode-tok-s");
      }
      m.batch_curve.insert(m.batch_curve.begin(), CurvePoint{1, *flags.decode_tok_s});
    } else if (flags.decode_tok_s && m.batch_curve.front().tok_s != *flags.decode_tok_s) {
      return BadFlag("--batch-curve", *flags.batch_curve,
                     fmt::format("says 1 stream decodes {:g} tok/s, but --decode-tok-s says {:g}",
                                 m.batch_curve.front().tok_s, *flags.decode_tok_s));
    }
  } else if (flags.decode_tok_s) {
    m.batch_curve = {{1, *flags.decode_tok_s}};  // streams decoding at once share the one rate
  }
  // A stream cannot decode faster because others joined it: each decode step serves every stream,
  // so the aggregate grows at most linearly with the batch.
  for (size_t i = 1; i < m.batch_curve.size(); ++i) {
    const CurvePoint& a = m.batch_curve[i - 1];
    const CurvePoint& b = m.batch_curve[i];
    if (b.tok_s / b.streams > a.tok_s / a.streams * (1 + 1e-9)) {
      const std::string_view flag = flags.batch_curve ? "--batch-curve" : "--decode-tok-s";
      return BadFlag(flag, flags.batch_curve ? *flags.batch_curve : fmt::format("{:g}", *flags.decode_tok_s),
                     fmt::format("{} streams at {:g} tok/s in all is {:g} tok/s each, faster than {} at {:g} each: "
                                 "the aggregate can grow at most linearly with the streams",
                                 b.streams, b.tok_s, b.tok_s / b.streams, a.streams, a.tok_s / a.streams));
    }
  }
  if (flags.prefill_tok_s) m.prefill_tok_s = *flags.prefill_tok_s;
  if (flags.kv_tokens) m.kv_tokens = static_cast<uint64_t>(*flags.kv_tokens);
  if (flags.max_seqs) m.max_seqs = static_cast<int>(*flags.max_seqs);
  if (flags.prefix_cache_prompts) m.prefix_cache_prompts = static_cast<size_t>(*flags.prefix_cache_prompts);
  if (flags.speedup) {
    m.speedup = *flags.speedup;
    for (CurvePoint& p : m.batch_curve) p.tok_s *= m.speedup;
    m.prefill_tok_s *= m.speedup;
  }
  return std::optional<LatencyModel>(std::move(m));
}

}  // namespace temper::scripted
