// The latency model: the batching curve's interpolation and hold, the reference box's figures, and the
// command-line flags, whose every bad value is an error naming the flag.
#include "scripted_model/latency_model.h"

#include <cmath>

#include <catch2/catch.hpp>

using namespace temper;
using namespace temper::scripted;
using Catch::Contains;

namespace {

LatencyModel Curve(std::vector<CurvePoint> points) {
  LatencyModel m;
  m.batch_curve = std::move(points);
  return m;
}

std::string ErrorOf(const LatencyFlags& flags) {
  auto r = LatencyFromFlags(flags);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("the batch curve: linear between its points, held after the last, shared evenly by the streams") {
  const LatencyModel m = Curve({{1, 10}, {2, 16}, {4, 24}});
  CHECK(m.AggregateTokS(1) == Approx(10));
  CHECK(m.AggregateTokS(2) == Approx(16));
  CHECK(m.AggregateTokS(3) == Approx(20));
  CHECK(m.AggregateTokS(4) == Approx(24));
  CHECK(m.AggregateTokS(8) == Approx(24));
  CHECK(m.PerStreamTokS(1) == Approx(10));
  CHECK(m.PerStreamTokS(3) == Approx(20.0 / 3));
  CHECK(m.PerStreamTokS(8) == Approx(3));
  CHECK(LatencyModel{}.AggregateTokS(4) == 0);  // no curve: decoding is instant
}

TEST_CASE("the reference box: 14.9 tok/s for one stream, the derived curve, vLLM's KV capacity and 8 sequences") {
  const LatencyModel m = ReferenceBox();
  CHECK(m.AggregateTokS(1) == Approx(14.9));
  CHECK(m.AggregateTokS(2) == Approx(29.1));
  CHECK(m.AggregateTokS(4) == Approx(55.4));
  CHECK(m.AggregateTokS(8) == Approx(101.1));
  CHECK(m.PerStreamTokS(8) == Approx(101.1 / 8));
  CHECK(m.prefill_tok_s == Approx(2300));
  CHECK(m.kv_tokens == 17968);
  CHECK(m.max_seqs == 8);
  CHECK(m.Describe() ==
        "decode 1:14.9,2:29.1,4:55.4,8:101.1 tok/s (streams:aggregate), no speculation, prefill 2300 tok/s, KV 17968 "
        "tokens, max 8 sequences, max model len unbounded, prefix cache 64 prompts");
  CHECK_FALSE(m.speculation);
  CHECK(m.max_model_len == 0);
  CHECK(m.LoneStreamTokS(ScriptedRole::kWorker) == Approx(14.9));
  for (int n = 2; n <= 16; ++n) CHECK(m.PerStreamTokS(n) < m.PerStreamTokS(n - 1));
}

TEST_CASE(
    "reference-box-mtp: vLLM's MTP at k = 2 on the same box, its pass cost from its own 41 tok/s micro-benchmark") {
  const LatencyModel m = ReferenceBoxMtp();
  const LatencyModel base = ReferenceBox();
  for (int n = 1; n <= 8; ++n) CHECK(m.AggregateTokS(n) == Approx(base.AggregateTokS(n)));  // the same target
  CHECK(m.prefill_tok_s == Approx(2300));
  CHECK(m.kv_tokens == 45336);
  CHECK(m.max_seqs == 8);
  CHECK(m.max_model_len == 16384);
  REQUIRE(m.speculation);
  // A pass of two drafts (verification and drafting) costs 14.9 × (1 + 2 × 0.98) / 41 decode steps.
  const double pass_cost = 14.9 * 2.96 / 41;
  CHECK(pass_cost == Approx(1.0757).margin(1e-4));
  CHECK(m.speculation->PassCost(2) == Approx(pass_cost));
  CHECK(m.speculation->PassCost(1) == Approx((1 + pass_cost) / 2));
  CHECK(m.StepSeconds(1, 2) == Approx(pass_cost / 14.9));
  CHECK(m.StepSeconds(8, 2) == Approx(8 / 101.1 * pass_cost));
  // Worker: 60% accepted (the ADR's p10 on scripts), 2.2 tokens a pass; the other roles 95%, 2.9.
  CHECK(m.TokensPerStep(ScriptedRole::kWorker) == Approx(2.2));
  CHECK(m.DraftedPerStep(ScriptedRole::kWorker) == 2);
  CHECK(m.LoneStreamTokS(ScriptedRole::kWorker) == Approx(41 * 2.2 / 2.96));  // 30.5 tok/s
  CHECK(m.LoneStreamTokS(ScriptedRole::kWorker) == Approx(30.47).margin(0.01));
  for (ScriptedRole role : {ScriptedRole::kArchitectPick, ScriptedRole::kArchitectReengage, ScriptedRole::kReflector}) {
    CHECK(m.TokensPerStep(role) == Approx(2.9));
    CHECK(m.LoneStreamTokS(role) == Approx(40.17).margin(0.01));
  }
  // At the micro-benchmark's acceptance one stream decodes its 41 tok/s.
  CHECK(14.9 * (1 + 2 * 0.98) / m.StepSeconds(1, 2) / 14.9 == Approx(41));
  CHECK_THAT(m.Describe(), Contains("speculation MTP, k = 2: lone stream tok/s architect_pick 40.2, architect_reengage "
                                    "40.2, worker 30.5, reflector 40.2") &&
                               Contains("KV 45336 tokens, max 8 sequences, max model len 16384"));
}

TEST_CASE("temper-4xl4: the 4xL4 estimate's slow end, the H200's batching and check costs, prompt lookup per role") {
  const LatencyModel m = Temper4xL4();
  // Batch 1: 76.23 ms a step, 13.1 tok/s; a step grows linearly in rows to 1.925x at 8 (33.88 / 17.60 ms).
  CHECK(m.AggregateTokS(1) == Approx(1000 / 76.23));
  CHECK(m.AggregateTokS(1) == Approx(13.12).margin(0.01));
  const double per_row = (33.88 / 17.60 - 1) / 7;
  for (int n = 1; n <= 8; ++n) CHECK(m.StepSeconds(n, 0) == Approx(0.07623 * (1 + (n - 1) * per_row)));
  CHECK(m.StepSeconds(8, 0) == Approx(0.07623 * 33.88 / 17.60));
  CHECK(m.AggregateTokS(8) == Approx(54.52).margin(0.01));
  CHECK(m.AggregateTokS(16) == Approx(m.AggregateTokS(8)));  // held past the measured batch
  // Prefill: 1,344 tok/s × 4 L4s / 2.21, plus 0.097 ms of all-reduce a token.
  CHECK(m.prefill_tok_s == Approx(1 / (2.21 / (1344.0 * 4) + 0.097e-3)));
  CHECK(m.prefill_tok_s == Approx(1968.2).margin(0.1));
  CHECK(m.prefill_tok_s < ReferenceBox().prefill_tok_s);
  CHECK(m.kv_tokens == 401264);
  CHECK(m.kv_tokens % 16 == 0);
  CHECK(m.max_seqs == 8);
  CHECK(m.max_model_len == 0);
  REQUIRE(m.speculation);
  const Speculation& s = *m.speculation;
  CHECK(s.PassCost(0) == 1);
  CHECK(s.PassCost(1) == Approx(1.13));
  CHECK(s.PassCost(2) == Approx(1.23));
  CHECK(s.PassCost(3) == Approx(1.29));
  CHECK(s.PassCost(4) == Approx(1.56));
  CHECK(s.PassCost(5) == Approx(1.83));
  CHECK(s.PassCost(7) == Approx(1.90));
  CHECK(s.PassCost(8) == Approx(2.01));
  CHECK(s.PassCost(12) == Approx(2.01));
  // Per role: tokens a pass (drafts a pass) as measured on the recorded replies, and a lone stream's rate.
  CHECK(m.TokensPerStep(ScriptedRole::kWorker) == Approx(1.59));
  CHECK(m.DraftedPerStep(ScriptedRole::kWorker) == Approx(1.5));
  CHECK(s.PassCost(1.5) == Approx(1.18));
  CHECK(m.LoneStreamTokS(ScriptedRole::kWorker) == Approx(1000 / 76.23 * 1.59 / 1.18));
  CHECK(m.LoneStreamTokS(ScriptedRole::kWorker) == Approx(17.68).margin(0.01));
  CHECK(m.LoneStreamTokS(ScriptedRole::kReflector) == Approx(1000 / 76.23 * 3.00 / 1.29));
  CHECK(m.LoneStreamTokS(ScriptedRole::kArchitectPick) == Approx(1000 / 76.23 * 1.62 / 1.21));
  CHECK(m.LoneStreamTokS(ScriptedRole::kArchitectReengage) == Approx(1000 / 76.23 * 1.31 / 1.13));
  // A batch of a Worker and a Reflector checks their mean drafts: (1.5 + 3.0) / 2 = 2.25.
  CHECK(m.StepSeconds(2, 2.25) == Approx(0.07623 * (1 + per_row) * s.PassCost(2.25)));
}

TEST_CASE(
    "max model len: a prompt plus max_tokens over it is refused with vLLM's words, and no limit refuses nothing") {
  LatencyModel m = ReferenceBoxMtp();
  CHECK(ContextLengthError(m, 14336, 2048).ok());  // exactly 16384
  CHECK(ContextLengthError(m, 16383, std::nullopt).ok());
  const Status over = ContextLengthError(m, 15000, 2048);
  CHECK(over.code() == StatusCode::kInvalidArgument);
  CHECK(over.message() ==
        "'max_tokens' or 'max_completion_tokens' is too large: 2048. This model's maximum context length is 16384 "
        "tokens and your request has 15000 input tokens (2048 > 16384 - 15000).");
  const Status long_prompt = ContextLengthError(m, 17400, 2048);
  CHECK(long_prompt.message() ==
        "This model's maximum context length is 16384 tokens. However, your request has 17400 input tokens. Please "
        "reduce the length of the input messages.");
  CHECK_FALSE(ContextLengthError(m, 16384, std::nullopt).ok());
  CHECK(ContextLengthError(ReferenceBox(), 100000, 2048).ok());
  CHECK(ContextLengthError(Temper4xL4(), 100000, 2048).ok());
}

TEST_CASE("flags: none keep answers instant, a preset, single flags, and flags that override the preset") {
  auto none = LatencyFromFlags({});
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  LatencyFlags preset;
  preset.simulate = "reference-box";
  preset.kv_tokens = 0;
  preset.prefill_tok_s = 5000;
  auto p = LatencyFromFlags(preset);
  REQUIRE(p.ok());
  REQUIRE(p->has_value());
  CHECK((*p)->AggregateTokS(8) == Approx(101.1));
  CHECK((*p)->kv_tokens == 0);
  CHECK((*p)->prefill_tok_s == 5000);
  CHECK((*p)->max_seqs == 8);

  REQUIRE(LatencyPresets() == std::vector<std::string>{"reference-box", "reference-box-mtp", "temper-4xl4"});
  for (const std::string& name : LatencyPresets()) {
    LatencyFlags named;
    named.simulate = name;
    named.speedup = 10;
    auto n = LatencyFromFlags(named);
    REQUIRE(n.ok());
    REQUIRE(n->has_value());
    CHECK((*n)->speedup == 10);
    const LatencyModel plain = name == "reference-box"       ? ReferenceBox()
                               : name == "reference-box-mtp" ? ReferenceBoxMtp()
                                                             : Temper4xL4();
    CHECK((*n)->LoneStreamTokS(ScriptedRole::kWorker) == Approx(10 * plain.LoneStreamTokS(ScriptedRole::kWorker)));
    CHECK((*n)->speculation.has_value() == (name != "reference-box"));
  }

  LatencyFlags decode;
  decode.decode_tok_s = 20;
  auto d = LatencyFromFlags(decode);
  REQUIRE(d.ok());
  CHECK((*d)->AggregateTokS(1) == 20);
  CHECK((*d)->AggregateTokS(4) == 20);  // without a curve, streams share the one rate
  CHECK((*d)->prefill_tok_s == 0);
  CHECK((*d)->kv_tokens == 0);
  CHECK((*d)->prefix_cache_prompts == 64);

  LatencyFlags curve;
  curve.decode_tok_s = 10;
  curve.batch_curve = "2:18,4:30";  // the 1-stream point comes from --decode-tok-s
  curve.prefix_cache_prompts = 0;
  auto c = LatencyFromFlags(curve);
  REQUIRE(c.ok());
  CHECK((*c)->AggregateTokS(1) == 10);
  CHECK((*c)->AggregateTokS(3) == Approx(24));
  CHECK((*c)->prefix_cache_prompts == 0);

  curve.batch_curve = "1:10,2:18";  // the same 1-stream rate twice is fine
  CHECK(LatencyFromFlags(curve).ok());

  LatencyFlags faster = preset;
  faster.speedup = 10;  // every rate ten times the box's; capacities unchanged
  auto s = LatencyFromFlags(faster);
  REQUIRE(s.ok());
  CHECK((*s)->speedup == 10);
  CHECK((*s)->AggregateTokS(1) == Approx(149));
  CHECK((*s)->AggregateTokS(8) == Approx(1011));
  CHECK((*s)->prefill_tok_s == Approx(50000));
  CHECK((*s)->max_seqs == 8);
  CHECK_THAT((*s)->Describe(), Contains("(rates 10 times the modelled box's)"));
}

TEST_CASE("flags: every bad value is an error naming the flag, the value and what is wrong") {
  LatencyFlags f;
  f.decode_tok_s = -3;
  CHECK(ErrorOf(f) == "--decode-tok-s '-3': must be a positive number of tokens/s");
  f.decode_tok_s = 0;
  CHECK_THAT(ErrorOf(f), Contains("--decode-tok-s '0'"));
  f.decode_tok_s = std::nan("");
  CHECK_THAT(ErrorOf(f), Contains("--decode-tok-s 'nan'"));

  f = {};
  f.prefill_tok_s = 0;
  CHECK(ErrorOf(f) == "--prefill-tok-s '0': must be a positive number of tokens/s");
  f = {};
  f.kv_tokens = -1;
  CHECK(ErrorOf(f) == "--kv-tokens '-1': must be 0 (unbounded) or more");
  f = {};
  f.max_seqs = -2;
  CHECK(ErrorOf(f) == "--max-seqs '-2': must be 0 (unbounded) or more");
  f.max_seqs = 100000;
  CHECK(ErrorOf(f) == "--max-seqs '100000': is above 4096");
  f = {};
  f.prefix_cache_prompts = -1;
  CHECK(ErrorOf(f) == "--prefix-cache-prompts '-1': must be 0 (no prefix cache) or more");

  f = {};
  f.speedup = 0;
  CHECK(ErrorOf(f) == "--speedup '0': must be a positive number (1: the box's own rates)");

  f = {};
  f.simulate = "reference-bx";
  CHECK(ErrorOf(f) ==
        "--simulate 'reference-bx': is not a preset; known: reference-box, reference-box-mtp, temper-4xl4 (did you "
        "mean 'reference-box'?)");

  f = {};
  f.batch_curve = "1:10,2x";
  CHECK(ErrorOf(f) == "--batch-curve '1:10,2x': point 2 '2x' is not STREAMS:TOKENS_PER_S");
  f.batch_curve = "1:10,:20";
  CHECK(ErrorOf(f) == "--batch-curve '1:10,:20': point 2 ':20' has no stream count from 1 to 4096 before the ':'");
  f.batch_curve = "1:10,0:20";
  CHECK_THAT(ErrorOf(f), Contains("point 2 '0:20' has no stream count"));
  f.batch_curve = "1:10,2:-5";
  CHECK(ErrorOf(f) == "--batch-curve '1:10,2:-5': point 2 '2:-5' has no positive tokens/s after the ':'");
  f.batch_curve = "1:10,2:fast";
  CHECK_THAT(ErrorOf(f), Contains("point 2 '2:fast' has no positive tokens/s"));
  f.batch_curve = "1:10,4:30,2:18";
  CHECK(ErrorOf(f) ==
        "--batch-curve '1:10,4:30,2:18': point 3 '2:18' comes after 4 streams: stream counts must increase");
  f.batch_curve = "";
  CHECK_THAT(ErrorOf(f), Contains("--batch-curve '': is empty"));
  f.batch_curve = "1:10,2:25";
  CHECK(ErrorOf(f) ==
        "--batch-curve '1:10,2:25': 2 streams at 25 tok/s in all is 12.5 tok/s each, faster than 1 at 10 each: the "
        "aggregate can grow at most linearly with the streams");
  f.batch_curve = "2:18";
  CHECK_THAT(ErrorOf(f), Contains("--batch-curve '2:18': has no 1-stream point"));
  f.decode_tok_s = 12;
  f.batch_curve = "1:10,2:18";
  CHECK(ErrorOf(f) == "--batch-curve '1:10,2:18': says 1 stream decodes 10 tok/s, but --decode-tok-s says 12");
  f.batch_curve = "2:30";  // with the 1-stream point from --decode-tok-s: 15 each beats 12
  CHECK_THAT(ErrorOf(f), Contains("--batch-curve '2:30': 2 streams at 30 tok/s in all is 15 tok/s each"));
}
