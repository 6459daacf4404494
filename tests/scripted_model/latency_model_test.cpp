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
        "decode 1:14.9,2:29.1,4:55.4,8:101.1 tok/s (streams:aggregate), prefill 2300 tok/s, KV 17968 tokens, max 8 "
        "sequences, prefix cache 64 prompts");
  for (int n = 2; n <= 16; ++n) CHECK(m.PerStreamTokS(n) < m.PerStreamTokS(n - 1));
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
        "--simulate 'reference-bx': is not a preset; known: reference-box (did you mean 'reference-box'?)");

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
