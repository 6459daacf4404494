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
  // Softmax of logits / temperature over the kept candidates, in double.
  std::vector<double>& probs = probs_;
  probs.assign(keep, 0.0);
  const double max = candidates_[0].first / params_.temperature;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += probs[i] = std::exp(candidates_[i].first / params_.temperature - max);
  for (double& p : probs) p /= sum;
  // top_p: the smallest prefix whose mass reaches top_p (always at least one token).
  if (params_.top_p < 1) {
    double mass = 0;
    size_t cut = 0;
    while (cut < keep) {
      mass += probs[cut++];
      if (mass >= params_.top_p) break;
    }
    keep = cut;
  }
  // min_p: drop tokens below min_p times the most likely one.
  if (params_.min_p > 0) {
    const double floor = params_.min_p * probs[0];
    size_t cut = 1;
    while (cut < keep && probs[cut] >= floor) ++cut;
    keep = cut;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  const double u = TakeUniform() * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

double Sampler::TakeUniform() {
  if (!pending_uniform_) return NextUniform();
  const double u = *pending_uniform_;
  pending_uniform_.reset();
  return u;
}

Sampler::Outcome Sampler::Sample(const LogitCandidates& c) {
  const size_t k = c.logits.size();
  if (k == 0) return {.needs_full_row = true};
  if (params_.temperature == 0) return {.token = c.ids[0]};
  const size_t n = static_cast<size_t>(c.vocab_size);
  const bool topk_inside = params_.top_k > 0 && static_cast<size_t>(params_.top_k) <= k;
  const bool all_vocab = params_.top_k == 0 || static_cast<size_t>(params_.top_k) >= n;
  // A top-k between the candidates and the whole vocabulary needs the mass of entries we do not see.
  if (!topk_inside && !all_vocab) return {.needs_full_row = true};

  // As Sample(full row): softmax in double; the tail joins the denominator when the cut is the
  // whole vocabulary.
  const size_t seen = topk_inside ? static_cast<size_t>(params_.top_k) : k;
  std::vector<double>& probs = probs_;
  probs.assign(seen, 0.0);
  const double max = c.logits[0] / params_.temperature;
  double sum = 0;
  for (size_t i = 0; i < seen; ++i) sum += probs[i] = std::exp(c.logits[i] / params_.temperature - max);
  if (!topk_inside) sum += c.tail_mass;
  for (double& p : probs) p /= sum;
  const double tail = topk_inside ? 0.0 : c.tail_mass / sum;
  // The cuts, as long as they fall among the candidates.
  size_t keep = seen;
  bool cut = topk_inside;
  if (params_.top_p < 1) {
    double mass = 0;
    size_t at = 0;
    while (at < seen) {
      mass += probs[at++];
      if (mass >= params_.top_p) break;
    }
    if (mass >= params_.top_p || topk_inside) {
      keep = at;
      cut = true;
    }
  }
  if (params_.min_p > 0) {
    const double floor = params_.min_p * probs[0];
    size_t at = 1;
    while (at < keep && probs[at] >= floor) ++at;
    if (at < keep || cut) {
      keep = at;
      cut = true;
    }
  }
  if (!cut && (params_.top_p < 1 || params_.min_p > 0)) return {.needs_full_row = true};
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  if (!cut) total += tail;  // no cut: the whole vocabulary stays
  const double uniform = NextUniform();
  const double u = uniform * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return {.token = c.ids[i]};
  }
  if (cut) return {.token = c.ids[keep - 1]};
  // The draw fell among the entries beyond the candidates: finish on the full row with it.
  pending_uniform_ = uniform;
  return {.needs_full_row = true};
}

}  // namespace temper::engine
