// Sampling: greedy is the argmax; a seed reproduces its tokens; top-k, top-p and min-p keep
// exactly the tokens they should; bad parameters are refused.
#include <cmath>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "engine/sampler.h"

namespace temper::engine {
namespace {

Sampler Make(SamplingParams p) {
  auto s = Sampler::Create(p);
  REQUIRE(s.ok());
  return std::move(*s);
}

// Logits whose softmax at temperature 1 is exactly `probs`.
std::vector<float> FromProbs(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::set<int32_t> Drawn(SamplingParams p, const std::vector<float>& logits, int n = 2000) {
  Sampler s = Make(p);
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(s.Sample(logits));
  return seen;
}

TEST_CASE("greedy takes the argmax, lowest id on ties", "[engine][sampler]") {
  Sampler s = Make({});
  CHECK(s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  CHECK(s.Sample(std::vector<float>{-5.0f}) == 0);
}

TEST_CASE("a seed reproduces the draws, and another seed changes them", "[engine][sampler]") {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = static_cast<float>(std::sin(i * 1.7));
  auto draw = [&](uint64_t seed) {
    Sampler s = Make({.temperature = 1.0f, .top_p = 0.95f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  CHECK(draw(42) == draw(42));
  CHECK(draw(42) != draw(43));
}

TEST_CASE("draws follow the distribution", "[engine][sampler]") {
  const std::vector<float> logits = FromProbs({0.5, 0.3, 0.2});
  Sampler s = Make({.temperature = 1.0f, .seed = 1});
  std::map<int32_t, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.Sample(logits)];
  CHECK(std::abs(count[0] / double(n) - 0.5) < 0.02);
  CHECK(std::abs(count[1] / double(n) - 0.3) < 0.02);
  CHECK(std::abs(count[2] / double(n) - 0.2) < 0.02);
}

TEST_CASE("top-k, top-p and min-p keep the right tokens", "[engine][sampler]") {
  const std::vector<float> logits = FromProbs({0.05, 0.4, 0.1, 0.3, 0.15});
  CHECK(Drawn({.temperature = 1.0f, .seed = 3}, logits) == std::set<int32_t>{0, 1, 2, 3, 4});
  CHECK(Drawn({.temperature = 1.0f, .top_k = 2, .seed = 3}, logits) == std::set<int32_t>{1, 3});
  // 0.4 + 0.3 = 0.7 < 0.75, so the third (0.15) is needed.
  CHECK(Drawn({.temperature = 1.0f, .top_p = 0.75f, .seed = 3}, logits) == std::set<int32_t>{1, 3, 4});
  CHECK(Drawn({.temperature = 1.0f, .top_p = 0.7f, .seed = 3}, logits).size() <= 3);
  // min_p 0.3: keep p >= 0.12.
  CHECK(Drawn({.temperature = 1.0f, .min_p = 0.3f, .seed = 3}, logits) == std::set<int32_t>{1, 3, 4});
  // A low temperature sharpens towards the argmax.
  CHECK(Drawn({.temperature = 0.01f, .seed = 3}, logits) == std::set<int32_t>{1});
}

TEST_CASE("bad sampling parameters are refused", "[engine][sampler]") {
  CHECK(Sampler::Create({.temperature = -1.0f}).status().message().find("temperature") != std::string::npos);
  CHECK(Sampler::Create({.top_k = -2}).status().message().find("top_k") != std::string::npos);
  CHECK(Sampler::Create({.top_p = 0.0f}).status().message().find("top_p") != std::string::npos);
  CHECK(Sampler::Create({.min_p = 1.0f}).status().message().find("min_p") != std::string::npos);
}

TEST_CASE("stop tokens", "[engine][sampler]") {
  Sampler s = Make({.stop_tokens = {1, 106}});
  CHECK(s.IsStop(106));
  CHECK_FALSE(s.IsStop(2));
}

}  // namespace
}  // namespace temper::engine
