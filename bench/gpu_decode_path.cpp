#include "bench/gpu_decode_path.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "engine/cuda/graph_buckets.h"

namespace temper::engine::bench {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Seconds;

// The greedy token and top logit of each output row of `r`; Internal on a NaN or inf.
Status Greedy(const ForwardResult& r, int vocab, bool candidates, std::vector<int32_t>& tokens,
              std::vector<float>& tops, const char* when) {
  tokens.clear();
  tops.clear();
  for (int64_t row = 0; row < r.rows; ++row) {
    if (candidates) {
      if (static_cast<size_t>(row) >= r.candidates.size() || r.candidates[row].ids.empty()) {
        return Status::Internal(fmt::format("{}: row {} came back without candidates", when, row));
      }
      const LogitCandidates& c = r.candidates[row];
      for (size_t i = 0; i < c.logits.size(); ++i) {
        if (!std::isfinite(c.logits[i])) {
          return Status::Internal(
              fmt::format("{}: row {}, candidate {} (token {}) is {}", when, row, i, c.ids[i], c.logits[i]));
        }
      }
      if (!std::isfinite(c.tail_mass)) {
        return Status::Internal(fmt::format("{}: row {}'s tail mass is {}", when, row, c.tail_mass));
      }
      tokens.push_back(c.ids[0]);
      tops.push_back(c.logits[0]);
    } else {
      const float* l = r.logits.data() + row * int64_t{vocab};
      for (int i = 0; i < vocab; ++i) {
        if (!std::isfinite(l[i]))
          return Status::Internal(fmt::format("{}: row {}, logit {} is {}", when, row, i, l[i]));
      }
      // max_element keeps the first of equal maxima: ties to the lower id, as candidates order them.
      const float* best = std::max_element(l, l + vocab);
      tokens.push_back(static_cast<int32_t>(best - l));
      tops.push_back(*best);
    }
  }
  return Status::OK();
}

}  // namespace

std::vector<int32_t> SyntheticPrompt(uint64_t seed, int n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int32_t& t : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

Result<DecodeRun> RunDecode(cuda::DeviceBackend& b, int batch, int context, int steps, bool candidates, uint64_t seed) {
  const int vocab = b.config().vocab_size;
  const ForwardOptions options{.candidates = candidates};
  std::vector<SequenceId> seqs;
  DecodeRun run;
  auto body = [&]() -> Status {
    std::vector<int32_t> first(static_cast<size_t>(batch)), tokens;
    std::vector<float> first_top(first.size()), tops;
    const auto p0 = Clock::now();
    for (int s = 0; s < batch; ++s) {
      TEMPER_ASSIGN_OR_RETURN(SequenceId seq, b.AddSequence());
      seqs.push_back(seq);
      const std::vector<int32_t> prompt = SyntheticPrompt(seed + s, context, vocab);
      const ForwardItem item{seq, prompt, false};
      TEMPER_ASSIGN_OR_RETURN(ForwardResult r, b.Forward({&item, 1}, options));
      TEMPER_RETURN_IF_ERROR(Greedy(r, vocab, candidates, tokens, tops, "prefill"));
      first[s] = tokens[0];
      first_top[s] = tops[0];
    }
    run.prefill_s = Seconds(p0, Clock::now());
    run.tokens.push_back(first);
    run.top_logits.push_back(first_top);
    // A batch a bucket holds runs as that bucket's graph when graphs are on (DeviceBackend::Forward).
    const int64_t graphs_before = b.graph_steps();
    for (int k = 0; k < steps; ++k) {
      const std::vector<int32_t>& next = run.tokens.back();
      std::vector<ForwardItem> items;
      for (int s = 0; s < batch; ++s) items.push_back({seqs[s], {&next[s], 1}, false});
      const auto s0 = Clock::now();
      TEMPER_ASSIGN_OR_RETURN(ForwardResult r, b.Forward(items, options));
      run.step_s.push_back(Seconds(s0, Clock::now()));
      TEMPER_RETURN_IF_ERROR(
          Greedy(r, vocab, candidates, tokens, tops, "decode").WithContext(fmt::format("step {}", k)));
      run.tokens.push_back(tokens);
      run.top_logits.push_back(tops);
    }
    const int64_t graph_steps = b.graph_steps() - graphs_before;
    if (graph_steps != steps) {
      return Status::FailedPrecondition(fmt::format(
          "{} of {} decode steps at batch {} ran as captured graphs: the timing would not be the graph path's",
          graph_steps, steps, batch));
    }
    return Status::OK();
  };
  Status s = body();
  for (SequenceId seq : seqs) {
    const Status released = b.ReleaseSequence(seq);
    if (s.ok()) s = released;
  }
  if (!s.ok())
    return s.WithContext(
        fmt::format("batch {}, {}-token prompts, {}", batch, context, candidates ? "candidates" : "full logits"));
  return run;
}

Result<std::vector<int>> WarmGraphBuckets(cuda::DeviceBackend& b, int max_batch) {
  const std::vector<int> buckets = cuda::GraphBuckets(max_batch);
  for (int size : buckets) {
    // The first step captures the bucket's graph, the second replays it.
    TEMPER_RETURN_IF_ERROR(RunDecode(b, size, 8, 2, /*candidates=*/true, 9000 + size).status());
  }
  return buckets;
}

Result<CandidatesCheck> CheckCandidatesMatchLogits(cuda::DeviceBackend& b, const std::vector<int>& batches, int context,
                                                   int steps) {
  CandidatesCheck check;
  for (int batch : batches) {
    const uint64_t seed = 500 + static_cast<uint64_t>(batch);
    TEMPER_ASSIGN_OR_RETURN(DecodeRun full, RunDecode(b, batch, context, steps, /*candidates=*/false, seed));
    TEMPER_ASSIGN_OR_RETURN(DecodeRun cand, RunDecode(b, batch, context, steps, /*candidates=*/true, seed));
    for (size_t k = 0; k < full.tokens.size(); ++k) {
      for (int s = 0; s < batch; ++s) {
        if (full.tokens[k][s] != cand.tokens[k][s]) {
          return Status::Internal(fmt::format(
              "greedy tokens differ at batch {}, {} {}, sequence {}: {} from the full logits (top logit {}), {} from "
              "the candidates (top logit {})",
              batch, k == 0 ? "prefill" : "decode step", k == 0 ? 0 : k - 1, s, full.tokens[k][s],
              full.top_logits[k][s], cand.tokens[k][s], cand.top_logits[k][s]));
        }
        check.max_top_logit_diff =
            std::max(check.max_top_logit_diff, std::abs(double{full.top_logits[k][s]} - cand.top_logits[k][s]));
        ++check.tokens_compared;
      }
    }
  }
  return check;
}

}  // namespace temper::engine::bench
