// The log-probabilities of a generated token and of the row's most likely tokens, as OpenAI's
// `logprobs` report them. They are the model's own distribution: the log-softmax of the logit row
// as the model wrote it, before temperature, top-k/top-p/min-p and any grammar's mask (vLLM's
// default too), so they say how likely the model found each token, not how the sampler drew it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace temper::engine {

// The most alternatives a request may ask for (OpenAI's top_logprobs maximum).
inline constexpr int kMaxTopLogprobs = 20;

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the row's `top` most likely ids, most likely first, ties to the lower id
};

// `token`'s log-probability in `logits` (one row) and the row's `top` most likely tokens, 0 <= top
// <= kMaxTopLogprobs.
TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t token, int top);

}  // namespace temper::engine
