#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace temper::engine {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// How far a device's tail mass may be off, as a fraction of the row's whole softmax mass. Each
// rank sums exp over its shard in fp32 (engine/cuda/top_candidates.cu: one block of 1024 threads,
// each adding up to 256 terms sequentially for a 262,144-entry shard, then a 10-level tree), so
// the rounding is at most about (256 + 10) · 2^-24 ≈ 1.6e-5 of the mass, and expf adds a couple
// of ulps per term; the merge recomputes the candidates' share in double. 1e-4 covers that with
// room; a decision near a bound then goes to the full row, which costs a copy, never a token.
constexpr double kTailSlack = 1e-4;

// The index drawn among the `keep` largest logits of a row, logit(0) ≥ logit(1) ≥ ...: softmax
// at the temperature in double, top_p, min_p, renormalise, then the first entry whose running
// probability passes uniform · total (the last kept one if rounding leaves none). Sample(full
// row) after its top_k cut, and Sample(candidates) when every kept entry is a candidate: the same
// arithmetic on the same values, hence the same index.
template <typename LogitAt>
size_t DrawSorted(const SamplingParams& p, size_t keep, LogitAt logit, double uniform, std::vector<double>& probs) {
  probs.assign(keep, 0.0);
  const double max = logit(0) / p.temperature;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += probs[i] = std::exp(logit(i) / p.temperature - max);
  for (double& x : probs) x /= sum;
  // top_p: the smallest prefix whose mass reaches top_p (always at least one token).
  if (p.top_p < 1) {
    double mass = 0;
    size_t cut = 0;
    while (cut < keep) {
      mass += probs[cut++];
      if (mass >= p.top_p) break;
    }
    keep = cut;
  }
  // min_p: drop tokens below min_p times the most likely one.
  if (p.min_p > 0) {
    const double floor = p.min_p * probs[0];
    size_t cut = 1;
    while (cut < keep && probs[cut] >= floor) ++cut;
    keep = cut;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  const double u = uniform * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return i;
  }
  return keep - 1;
}

}  // namespace

Result<Sampler> Sampler::Create(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    return Status::InvalidArgument(fmt::format("sampling: temperature must be >= 0, got {}", p.temperature));
  }
  if (p.top_k < 0) return Status::InvalidArgument(fmt::format("sampling: top_k must be >= 0, got {}", p.top_k));
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return Status::InvalidArgument(fmt::format("sampling: top_p must be in (0, 1], got {}", p.top_p));
  }
  if (!(p.min_p >= 0 && p.min_p < 1)) {
    return Status::InvalidArgument(fmt::format("sampling: min_p must be in [0, 1), got {}", p.min_p));
  }
  return Sampler(p);
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  uint64_t s = params.seed;
  for (uint64_t& word : state_) word = SplitMix64(s);
}

double Sampler::NextUniform() {
  // xoshiro256** (Blackman and Vigna).
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

bool Sampler::IsStop(int32_t token) const {
  return std::find(params_.stop_tokens.begin(), params_.stop_tokens.end(), token) != params_.stop_tokens.end();
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (params_.temperature == 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return best;
  }
  // Candidates sorted by logit, descending (ties: lower id first), cut to top_k.
  candidates_.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) candidates_[i] = {logits[i], i};
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), better);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), better);
  }
  const size_t i = DrawSorted(
      params_, keep, [&](size_t j) { return candidates_[j].first; }, TakeUniform(), probs_);
  return candidates_[i].second;
}

double Sampler::TakeUniform() {
  if (!pending_uniform_) return NextUniform();
  const double u = *pending_uniform_;
  pending_uniform_.reset();
  return u;
}

Sampler::Outcome Sampler::Sample(const LogitCandidates& c) {
  const size_t k = std::min(c.logits.size(), c.ids.size());
  if (k == 0) return {.needs_full_row = true};
  if (params_.temperature == 0) return {.token = c.ids[0]};
  // Every non-greedy step takes exactly one uniform, on whichever path decides it.
  pending_uniform_.reset();
  const double uniform = NextUniform();
  const size_t top_k = static_cast<size_t>(params_.top_k);
  const bool whole_row = c.vocab_size > 0 && k >= static_cast<size_t>(c.vocab_size);
  if (whole_row || (top_k > 0 && top_k <= k)) {
    // Every kept entry is a candidate: the full row's arithmetic on the same values, so the same
    // token to the bit.
    const size_t keep = top_k > 0 ? std::min(top_k, k) : k;
    return {.token = c.ids[DrawSorted(
                params_, keep, [&](size_t j) { return c.logits[j]; }, uniform, probs_)]};
  }
  // A top_k beyond the candidates in a vocabulary of unknown size, or a tail mass that is no
  // number: nothing to bound with.
  if ((top_k > 0 && c.vocab_size <= 0) || !std::isfinite(c.tail_mass)) {
    pending_uniform_ = uniform;
    return {.needs_full_row = true};
  }

  // The kept entries may reach beyond the candidates. Work in weights relative to the top entry,
  // w_i = exp(l_i / T − l_0 / T) (the full row's probabilities times its softmax denominator D),
  // and their running sums a_i. What the candidates do not tell is bounded instead:
  //   D, the sum over the top_k entries (all when top_k is 0 or ≥ vocab): seen + tail_mass
  //     exactly, or with a top_k beyond the candidates, seen plus the top_k − k largest tail
  //     entries, which hold at least their share of the tail and each at most w_{k−1};
  //   T, the weight of the entries kept after the top_p and min_p cuts, which fixes the draw
  //     u · T against the running sums.
  // A decision is taken here only when it holds across those bounds (widened by the tail mass's
  // own error, kTailSlack); then it is the full row's decision, up to rounding. Otherwise the
  // caller finishes on the full row with this same uniform.
  std::vector<double>& w = weights_;
  std::vector<double>& a = probs_;
  w.resize(k);
  a.resize(k);
  const double max = c.logits[0] / params_.temperature;
  double seen = 0;
  for (size_t i = 0; i < k; ++i) {
    w[i] = std::exp(c.logits[i] / params_.temperature - max);
    a[i] = seen += w[i];
  }
  const double tail = std::max(c.tail_mass, 0.0);
  const double slack = kTailSlack * (seen + tail);
  double d_lo = seen + tail, d_hi = seen + tail;
  if (top_k > 0 && top_k < static_cast<size_t>(c.vocab_size)) {
    const double unseen_kept = static_cast<double>(top_k - k);
    d_lo = seen + tail * unseen_kept / static_cast<double>(static_cast<size_t>(c.vocab_size) - k);
    d_hi = seen + std::min(tail, unseen_kept * w[k - 1]);
  }
  d_lo = std::max(seen, d_lo - slack);
  d_hi += slack;

  // Cuts as the number of entries kept; k + 1 stands for "more than the candidates".
  const size_t beyond = k + 1;
  auto reach = [&](double mass) {  // the shortest prefix of the candidates holding `mass`
    const size_t at = static_cast<size_t>(std::lower_bound(a.begin(), a.end(), mass) - a.begin());
    return at < k ? at + 1 : beyond;
  };
  // top_p: the shortest prefix reaching top_p · D; D's bounds give the shortest and longest.
  size_t p_lo = beyond, p_hi = beyond;
  if (params_.top_p < 1) {
    p_lo = reach(params_.top_p * d_lo);
    p_hi = reach(params_.top_p * d_hi);
  }
  // min_p: keeps the entries with w_i ≥ min_p · w_0, which D does not change.
  size_t m = beyond;
  if (params_.min_p > 0) {
    for (size_t i = 1; i < k; ++i) {
      if (w[i] < params_.min_p * w[0]) {
        m = i;
        break;
      }
    }
  }
  const size_t keep_lo = std::min(p_lo, m), keep_hi = std::min(p_hi, m);
  // Bounds on T. Kept within the candidates: their running sum. Kept beyond them: more than the
  // candidates' weight, and without min_p at least top_p · D (the top_p cut reaches it, and a
  // top_k cut keeps all of D); at most D, and with top_p less than top_p · D plus the last kept
  // entry, a tail entry (the cut stops at the first entry reaching top_p · D).
  double t_lo, t_hi;
  if (keep_lo <= k) {
    t_lo = a[keep_lo - 1];
  } else {
    t_lo = params_.min_p > 0 ? seen : std::max(seen, params_.top_p * d_lo);
  }
  if (keep_hi <= k) {
    t_hi = a[keep_hi - 1];
  } else {
    t_hi = params_.top_p < 1 ? std::min(d_hi, params_.top_p * d_hi + w[k - 1]) : d_hi;
  }
  // The draw: the first entry whose running sum passes u · T, for T anywhere in [t_lo, t_hi].
  auto drawn = [&](double total) {
    return static_cast<size_t>(std::upper_bound(a.begin(), a.end(), uniform * total) - a.begin());
  };
  const size_t at_lo = drawn(t_lo), at_hi = drawn(t_hi);
  if (keep_lo == keep_hi && keep_lo <= k) return {.token = c.ids[std::min(at_lo, keep_lo - 1)]};
  if (at_hi < k && at_lo == at_hi) return {.token = c.ids[at_hi]};
  pending_uniform_ = uniform;
  return {.needs_full_row = true};
}

}  // namespace temper::engine
