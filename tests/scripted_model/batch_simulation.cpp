#include "scripted_model/batch_simulation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/dcheck.h"

namespace temper::scripted {

namespace {

// A phase whose work left is below this many tokens is over: AdvanceTo lands exactly on a phase's
// end, and what floating point leaves of it is far below one token.
constexpr double kTokenEpsilon = 1e-6;

}  // namespace

BatchSimulation::BatchSimulation(LatencyModel model) : model_(std::move(model)) {}

BatchSimulation::Rates BatchSimulation::CurrentRates() const {
  Rates r;
  double drafted = 0;
  for (const auto& [id, job] : jobs_) {
    if (job.phase == Phase::kPrefill) ++r.prefilling;
    if (job.phase == Phase::kDecode) {
      ++r.decoding;
      drafted += job.drafted_per_step;
    }
  }
  if (r.prefilling > 0) r.prefill = model_.prefill_tok_s / r.prefilling;
  if (r.decoding > 0) r.step_s = model_.StepSeconds(r.decoding, drafted / r.decoding);
  return r;
}

BatchSimulation::JobId BatchSimulation::Add(double now, uint64_t prefill_tokens, uint64_t completion_tokens,
                                            uint64_t kv_tokens, ScriptedRole role) {
  AdvanceTo(now);
  const JobId id = next_id_++;
  Job& job = jobs_[id];
  // Instant phases (no rate configured, or nothing to do) take no work.
  job.prefill_left = model_.prefill_tok_s > 0 ? static_cast<double>(prefill_tokens) : 0.0;
  job.decode_left = model_.batch_curve.empty() ? 0.0 : static_cast<double>(completion_tokens);
  job.completion = completion_tokens;
  job.kv = kv_tokens;
  job.tokens_per_step = model_.TokensPerStep(role);
  job.drafted_per_step = model_.DraftedPerStep(role);
  job.t.arrived = job.t.admitted = job.t.decode_started = job.t.finished = now_;
  waiting_.push_back(id);
  ++totals_.jobs;
  Settle();
  return id;
}

void BatchSimulation::AdvanceTo(double now) {
  Settle();
  while (now > now_) {
    const Rates r = CurrentRates();
    const double next = NextEvent();
    if (next > now) {
      Progress(now);
      break;
    }
    // The jobs whose phase ends at `next` end there exactly, whatever rounding leaves of their work.
    std::vector<Job*> ending;
    for (auto& [id, job] : jobs_) {
      if (PhaseEnd(job, r) <= next) ending.push_back(&job);
    }
    Progress(next);
    for (Job* job : ending) (job->phase == Phase::kPrefill ? job->prefill_left : job->decode_left) = 0.0;
    Settle();
  }
}

double BatchSimulation::PhaseEnd(const Job& job, const Rates& r) const {
  if (job.phase == Phase::kPrefill) return now_ + job.prefill_left / r.prefill;
  if (job.phase == Phase::kDecode) return now_ + job.decode_left / r.Decode(job);
  return kNever;
}

void BatchSimulation::Progress(double to) {
  const double dt = to - now_;
  if (dt <= 0) return;
  const Rates r = CurrentRates();
  for (auto& [id, job] : jobs_) {
    if (job.phase == Phase::kPrefill) job.prefill_left = std::max(0.0, job.prefill_left - r.prefill * dt);
    if (job.phase == Phase::kDecode) {
      job.decode_left = std::max(0.0, job.decode_left - r.Decode(job) * dt);
      job.t.stream_seconds += r.decoding * dt;
    }
  }
  if (r.prefilling + r.decoding > 0) totals_.busy_seconds += dt;
  if (r.decoding > 0) {
    totals_.decode_busy_seconds += dt;
    totals_.decode_stream_seconds += r.decoding * dt;
    totals_.max_batch = std::max(totals_.max_batch, r.decoding);
  }
  now_ = to;
}

void BatchSimulation::EndPhase(Job& job) {
  switch (job.phase) {
    case Phase::kWaiting:
      job.phase = Phase::kPrefill;
      job.t.admitted = job.t.decode_started = job.t.finished = now_;
      totals_.queue_seconds += job.t.queue_s();
      ++admitted_;
      held_kv_ += job.kv;
      break;
    case Phase::kPrefill:
      job.phase = Phase::kDecode;
      job.t.decode_started = job.t.finished = now_;
      totals_.prefill_seconds += job.t.prefill_s();
      break;
    case Phase::kDecode:
      job.phase = Phase::kDone;
      job.t.finished = now_;
      totals_.decode_seconds += job.t.decode_s();
      --admitted_;
      held_kv_ -= job.kv;
      break;
    case Phase::kDone:
      break;
  }
}

void BatchSimulation::Settle() {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [id, job] : jobs_) {
      if ((job.phase == Phase::kPrefill && job.prefill_left <= kTokenEpsilon) ||
          (job.phase == Phase::kDecode && job.decode_left <= kTokenEpsilon)) {
        EndPhase(job);
        changed = true;
      }
    }
    // Arrival order: the head waits for room rather than let later, smaller jobs pass (vLLM's FCFS).
    while (!waiting_.empty()) {
      const Job& head = jobs_.at(waiting_.front());
      const bool seat = model_.max_seqs == 0 || admitted_ < model_.max_seqs;
      const bool room = model_.kv_tokens == 0 || held_kv_ == 0 || held_kv_ + head.kv <= model_.kv_tokens;
      if (!seat || !room) break;
      EndPhase(jobs_.at(waiting_.front()));
      waiting_.pop_front();
      changed = true;
    }
  }
}

double BatchSimulation::NextEvent() const {
  const Rates r = CurrentRates();
  double next = kNever;
  for (const auto& [id, job] : jobs_) next = std::min(next, PhaseEnd(job, r));
  return next;
}

void BatchSimulation::Abandon(double now, JobId id) {
  AdvanceTo(now);
  Job& job = jobs_.at(id);
  if (job.phase == Phase::kDone) return;
  if (job.phase == Phase::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
    job.t.admitted = job.t.decode_started = job.t.finished = now_;
    totals_.queue_seconds += job.t.queue_s();
  } else {
    if (job.phase == Phase::kPrefill) {
      job.t.decode_started = now_;
      totals_.prefill_seconds += job.t.prefill_s();
    }
    job.t.finished = now_;
    totals_.decode_seconds += job.t.decode_s();
    --admitted_;
    held_kv_ -= job.kv;
  }
  job.phase = Phase::kDone;
  job.t.abandoned = true;
  ++totals_.abandoned;
  Settle();
}

void BatchSimulation::Forget(JobId id) {
  TEMPER_DCHECK(jobs_.at(id).phase == Phase::kDone, "only a done job is forgotten");
  jobs_.erase(id);
}

BatchSimulation::Phase BatchSimulation::phase(JobId id) const { return jobs_.at(id).phase; }

uint64_t BatchSimulation::Decoded(JobId id) const {
  const Job& job = jobs_.at(id);
  if (job.phase == Phase::kDone && !job.t.abandoned) return job.completion;
  if (job.phase != Phase::kDecode && job.phase != Phase::kDone) return 0;
  const double done = static_cast<double>(job.completion) - job.decode_left;
  return std::min(job.completion, static_cast<uint64_t>(std::floor(done + kTokenEpsilon)));
}

const BatchSimulation::JobTimes& BatchSimulation::Times(JobId id) const { return jobs_.at(id).t; }

double BatchSimulation::WhenDecoded(JobId id, uint64_t tokens) const {
  const Job& job = jobs_.at(id);
  if (job.phase == Phase::kDone) return now_;
  if (job.phase != Phase::kDecode) return kNever;
  const double target = std::min(static_cast<double>(tokens), static_cast<double>(job.completion));
  const double missing = target - (static_cast<double>(job.completion) - job.decode_left);
  if (missing <= kTokenEpsilon) return now_;
  return now_ + missing / CurrentRates().Decode(job);
}

}  // namespace temper::scripted
