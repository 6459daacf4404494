// BatchSimulation: the serving engine a LatencyModel describes, as an exact discrete-event simulation
// advanced to explicit times. SimulatedEngine runs it on the wall clock to pace the scripted server's
// answers; tests run it on made-up times to check the arithmetic.
//
// Each job waits, is admitted (in arrival order, while the model's max_seqs and kv_tokens allow; a
// job alone is always admitted), prefills, decodes, and is done. Between two events the rates are
// constant: each of the n_p prefilling jobs gets prefill_tok_s / n_p, and the n_d decoding jobs share
// decode steps of StepSeconds(n_d, their mean drafts), each job yielding its role's TokensPerStep a
// step (without speculation: PerStreamTokS(n_d) each). An event is a job ending a phase, or a job arriving or being
// abandoned; AdvanceTo splits time at every event, so a stream's rate changes at the exact moment another joins or
// leaves, however late the caller looks. Prefill and decode are separate pools (a prefill does not slow the decoding
// streams): the prompts the loop sends mostly hit the prefix cache, and the short suffixes that remain are what chunked
// prefill folds into decode steps. Times are seconds on the caller's clock; `now` must never decrease across calls.
// Thread safety: none; SimulatedEngine serializes.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>

#include "scripted_model/latency_model.h"

namespace temper::scripted {

// A time that never comes: what NextEvent and WhenDecoded answer when nothing would happen.
inline constexpr double kNever = std::numeric_limits<double>::infinity();

class BatchSimulation {
 public:
  using JobId = uint64_t;
  enum class Phase { kWaiting, kPrefill, kDecode, kDone };

  // One job's times. Before a phase is reached its start time is the phase's end (durations 0).
  struct JobTimes {
    double arrived = 0;
    double admitted = 0;
    double decode_started = 0;
    double finished = 0;
    double stream_seconds = 0;  // ∫ (streams decoding) dt over its decode: mean batch = this / decode_s
    bool abandoned = false;
    double queue_s() const { return admitted - arrived; }
    double prefill_s() const { return decode_started - admitted; }
    double decode_s() const { return finished - decode_started; }
    double mean_batch() const { return decode_s() > 0 ? stream_seconds / decode_s() : 0; }
  };

  // Sums over jobs (each phase counted when it ends, an abandoned job's partial phase when abandoned)
  // and over time.
  struct Totals {
    uint64_t jobs = 0;
    uint64_t abandoned = 0;
    double queue_seconds = 0;
    double prefill_seconds = 0;
    double decode_seconds = 0;
    double busy_seconds = 0;           // time with any job admitted
    double decode_busy_seconds = 0;    // time with any job decoding
    double decode_stream_seconds = 0;  // ∫ (streams decoding) dt: mean batch = this / decode_busy_seconds
    int max_batch = 0;                 // the most streams that decoded together
  };

  explicit BatchSimulation(LatencyModel model);

  // A job arriving at `now` with `prefill_tokens` to compute and `completion_tokens` to decode,
  // holding `kv_tokens` of KV cache from admission to the end; `role` sets its speculation.
  JobId Add(double now, uint64_t prefill_tokens, uint64_t completion_tokens, uint64_t kv_tokens,
            ScriptedRole role = ScriptedRole::kWorker);
  void AdvanceTo(double now);
  // Ends the job at `now` where it is (the client went away); its share goes to the others.
  void Abandon(double now, JobId id);
  // Drops a done job's record. Precondition: phase(id) == kDone.
  void Forget(JobId id);

  // Preconditions for the accessors: `id` was added and not forgotten.
  Phase phase(JobId id) const;
  // Completion tokens decoded so far (whole tokens).
  uint64_t Decoded(JobId id) const;
  const JobTimes& Times(JobId id) const;

  // When the next phase ends at the current rates; +infinity when nothing is admitted.
  double NextEvent() const;
  // When `id` will have decoded `tokens` at the current rates: now when it has (or is done),
  // +infinity while it has not started decoding.
  double WhenDecoded(JobId id, uint64_t tokens) const;

  double now() const { return now_; }
  const Totals& totals() const { return totals_; }

 private:
  struct Job {
    Phase phase = Phase::kWaiting;
    double prefill_left = 0;  // tokens
    double decode_left = 0;   // tokens
    uint64_t completion = 0;
    uint64_t kv = 0;
    double tokens_per_step = 1;  // the role's speculation
    double drafted_per_step = 0;
    JobTimes t;
  };
  struct Rates {
    int prefilling = 0;
    int decoding = 0;
    double prefill = 0;  // tokens/s per prefilling job
    double step_s = 0;   // one decode step of the decoding streams
    double Decode(const Job& job) const { return job.tokens_per_step / step_s; }  // tokens/s of a decoding job
  };

  Rates CurrentRates() const;
  // When the job's current phase ends at rates `r`; kNever when it is waiting or done.
  double PhaseEnd(const Job& job, const Rates& r) const;
  // Moves every admitted job forward to `to` at the current rates (no phase ends before `to`).
  void Progress(double to);
  // Ends the phases that are over and admits waiting jobs, until nothing changes.
  void Settle();
  void EndPhase(Job& job);

  const LatencyModel model_;
  double now_ = 0;
  JobId next_id_ = 1;
  std::map<JobId, Job> jobs_;
  std::deque<JobId> waiting_;  // arrival order
  int admitted_ = 0;
  uint64_t held_kv_ = 0;
  Totals totals_;
};

}  // namespace temper::scripted
