// The batch simulation on made-up times, where every answer can be worked out by hand: prefill then
// decode for one stream, rates that change the moment a stream joins or leaves (whenever the caller
// looks), prefills sharing the prefill rate, admission by sequence count and KV capacity in arrival
// order, abandoned requests, an instant model, and speculative decoding's steps shared by roles that
// draft and accept differently.
#include "scripted_model/batch_simulation.h"

#include <catch2/catch.hpp>

using namespace temper::scripted;
using Phase = BatchSimulation::Phase;

namespace {

LatencyModel Model(std::vector<CurvePoint> curve, double prefill = 0, int max_seqs = 0, uint64_t kv = 0) {
  LatencyModel m;
  m.batch_curve = std::move(curve);
  m.prefill_tok_s = prefill;
  m.max_seqs = max_seqs;
  m.kv_tokens = kv;
  return m;
}

}  // namespace

TEST_CASE("one stream: its prefill at the prefill rate, then its tokens at the 1-stream rate") {
  BatchSimulation sim(Model({{1, 20}, {2, 30}}, 1000));
  const auto id = sim.Add(0, 100, 10, 110);
  CHECK(sim.phase(id) == Phase::kPrefill);
  CHECK(sim.NextEvent() == Approx(0.1));
  CHECK(sim.WhenDecoded(id, 1) == kNever);  // not decoding yet

  sim.AdvanceTo(0.35);
  CHECK(sim.phase(id) == Phase::kDecode);
  CHECK(sim.Decoded(id) == 5);  // 0.25 s at 20 tok/s
  CHECK(sim.WhenDecoded(id, 8) == Approx(0.5));
  CHECK(sim.WhenDecoded(id, 3) == Approx(0.35));  // already there
  CHECK(sim.NextEvent() == Approx(0.6));

  sim.AdvanceTo(7);
  CHECK(sim.phase(id) == Phase::kDone);
  CHECK(sim.Decoded(id) == 10);
  const auto& t = sim.Times(id);
  CHECK(t.queue_s() == 0);
  CHECK(t.prefill_s() == Approx(0.1));
  CHECK(t.decode_s() == Approx(0.5));
  CHECK(t.finished == Approx(0.6));
  CHECK(t.mean_batch() == Approx(1));
  CHECK(sim.NextEvent() == kNever);
  CHECK(sim.totals().busy_seconds == Approx(0.6));
  CHECK(sim.totals().decode_busy_seconds == Approx(0.5));
  sim.Forget(id);
}

TEST_CASE("a stream's rate changes the moment another joins or leaves, however late the caller looks") {
  // 1 stream: 10 tok/s; 2 streams: 16 in all, 8 each. A (10 tokens) starts at 0; B (4 tokens) joins at
  // 0.5, when A has 5 left; both decode at 8 until B is done at 1.0; A's last token alone takes 0.1 s.
  auto run = [](double look_every) {
    BatchSimulation sim(Model({{1, 10}, {2, 16}}));
    const auto a = sim.Add(0, 0, 10, 10);
    for (double t = look_every; t < 0.5; t += look_every) sim.AdvanceTo(t);
    const auto b = sim.Add(0.5, 0, 4, 4);
    for (double t = 0.5 + look_every; t < 3; t += look_every) sim.AdvanceTo(t);
    sim.AdvanceTo(3);
    CHECK(sim.Times(b).decode_started == Approx(0.5));
    CHECK(sim.Times(b).finished == Approx(1.0));
    CHECK(sim.Times(b).mean_batch() == Approx(2));
    CHECK(sim.Times(a).finished == Approx(1.1));
    CHECK(sim.Times(a).mean_batch() == Approx((0.5 * 1 + 0.5 * 2 + 0.1 * 1) / 1.1));
    const auto& totals = sim.totals();
    CHECK(totals.jobs == 2);
    CHECK(totals.decode_seconds == Approx(1.1 + 0.5));
    CHECK(totals.decode_busy_seconds == Approx(1.1));
    CHECK(totals.decode_stream_seconds == Approx(1.6));
    CHECK(totals.max_batch == 2);
  };
  SECTION("looked at only when B joins and at the end") { run(10); }
  SECTION("looked at every 37 ms") { run(0.037); }
}

TEST_CASE("prefills running at once share the prefill rate") {
  BatchSimulation sim(Model({}, 100));  // decoding instant
  const auto a = sim.Add(0, 10, 5, 15);
  const auto b = sim.Add(0, 30, 5, 35);
  sim.AdvanceTo(1);
  CHECK(sim.Times(a).prefill_s() == Approx(0.2));  // 10 tokens at 50 each
  CHECK(sim.Times(b).prefill_s() == Approx(0.4));  // 10 at 50, then 20 alone at 100
  CHECK(sim.Times(b).decode_s() == 0);
  CHECK(sim.totals().prefill_seconds == Approx(0.6));
}

TEST_CASE("admission: at most max_seqs at once, in arrival order, the rest queue") {
  BatchSimulation sim(Model({{1, 10}}, 0, /*max_seqs=*/1));
  const auto a = sim.Add(0, 0, 10, 10);
  const auto b = sim.Add(0, 0, 5, 5);
  CHECK(sim.phase(b) == Phase::kWaiting);
  sim.AdvanceTo(5);
  CHECK(sim.Times(a).finished == Approx(1.0));
  CHECK(sim.Times(b).queue_s() == Approx(1.0));
  CHECK(sim.Times(b).finished == Approx(1.5));
  CHECK(sim.totals().queue_seconds == Approx(1.0));
  CHECK(sim.totals().busy_seconds == Approx(1.5));
}

TEST_CASE("admission: the KV held stays within kv_tokens, first come first served, and a job alone always runs") {
  BatchSimulation sim(Model({{1, 10}, {2, 16}}, 0, 0, /*kv=*/100));
  const auto a = sim.Add(0, 0, 10, 60);
  const auto b = sim.Add(0, 0, 5, 60);  // 120 > 100: waits for A
  const auto c = sim.Add(0, 0, 5, 30);  // would fit beside A, but waits behind B
  CHECK(sim.phase(b) == Phase::kWaiting);
  CHECK(sim.phase(c) == Phase::kWaiting);
  sim.AdvanceTo(2);
  CHECK(sim.Times(a).finished == Approx(1.0));  // alone at 10 tok/s
  CHECK(sim.Times(b).admitted == Approx(1.0));
  CHECK(sim.Times(c).admitted == Approx(1.0));    // 60 + 30 fit together
  CHECK(sim.Times(b).finished == Approx(1.625));  // 5 tokens at 8 each
  CHECK(sim.Times(c).finished == Approx(1.625));
  const auto d = sim.Add(2, 0, 10, 500);  // more than the whole cache, nothing else held
  CHECK(sim.phase(d) == Phase::kDecode);
  sim.AdvanceTo(4);
  CHECK(sim.Times(d).finished == Approx(3.0));
}

TEST_CASE("an abandoned request leaves the batch at once: the others speed up from that moment") {
  BatchSimulation sim(Model({{1, 10}, {2, 16}}));
  const auto a = sim.Add(0, 0, 10, 10);
  const auto b = sim.Add(0, 0, 100, 100);
  sim.Abandon(0.5, b);
  CHECK(sim.phase(b) == Phase::kDone);
  CHECK(sim.Decoded(b) == 4);  // 0.5 s at 8
  CHECK(sim.Times(b).abandoned);
  CHECK(sim.Times(b).decode_s() == Approx(0.5));
  sim.AdvanceTo(3);
  CHECK(sim.Times(a).finished == Approx(0.5 + 6.0 / 10));
  CHECK(sim.totals().abandoned == 1);
  sim.Forget(b);
  sim.Forget(a);
}

TEST_CASE("without rates every job is done the moment it arrives") {
  BatchSimulation sim(LatencyModel{});
  const auto id = sim.Add(2.5, 1000, 1000, 2000);
  CHECK(sim.phase(id) == Phase::kDone);
  CHECK(sim.Decoded(id) == 1000);
  CHECK(sim.Times(id).finished == 2.5);
  CHECK(sim.WhenDecoded(id, 1000) == 2.5);
  CHECK(sim.totals().busy_seconds == 0);
}

TEST_CASE("speculation: a step costs the pass of the streams' mean drafts, each stream yields its role's tokens") {
  LatencyModel m = Model({{1, 10}, {2, 16}});
  Speculation s;
  s.costs = {{0, 1.0}, {2, 1.2}, {4, 1.6}};
  s.roles[static_cast<int>(ScriptedRole::kWorker)] = {4, 3.0};
  s.roles[static_cast<int>(ScriptedRole::kReflector)] = {2, 2.0};
  m.speculation = s;

  // Alone, a Worker's step takes 0.1 s × 1.6 and yields 3 tokens: 18.75 tok/s.
  BatchSimulation alone(m);
  const auto solo = alone.Add(0, 0, 30, 30, ScriptedRole::kWorker);
  CHECK(alone.phase(solo) == Phase::kDecode);
  CHECK(alone.NextEvent() == Approx(1.6));
  // An Architect pick drafts nothing here: plain steps, one token each.
  BatchSimulation plain(m);
  plain.Add(0, 0, 10, 10, ScriptedRole::kArchitectPick);
  CHECK(plain.NextEvent() == Approx(1.0));

  // Together: 2 / 16 s × PassCost(3) = 0.175 s a step; the Worker gets 3 / 0.175, the Reflector 2 / 0.175.
  BatchSimulation sim(m);
  const auto worker = sim.Add(0, 0, 60, 60, ScriptedRole::kWorker);
  const auto reflector = sim.Add(0, 0, 20, 20, ScriptedRole::kReflector);
  CHECK(sim.WhenDecoded(reflector, 20) == Approx(1.75));
  CHECK(sim.WhenDecoded(worker, 30) == Approx(1.75));
  sim.AdvanceTo(1.75);
  CHECK(sim.phase(reflector) == Phase::kDone);
  CHECK(sim.Decoded(worker) == 30);
  // Alone again: the remaining 30 tokens at 18.75 tok/s.
  CHECK(sim.NextEvent() == Approx(1.75 + 1.6));
  sim.AdvanceTo(10);
  CHECK(sim.phase(worker) == Phase::kDone);
  CHECK(sim.Times(worker).finished == Approx(3.35));
  CHECK(sim.Times(worker).mean_batch() == Approx((2 * 1.75 + 1.6) / 3.35));
}
