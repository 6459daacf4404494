// Golden test of the CPU forward pass against the independent fp32 reference of the tiny Gemma 4
// fixture. Tolerances from the fixture README: logits within 1e-3, hidden states within 1e-4 of
// max |ref|, greedy tokens equal. Every deliberate bug in the README's table moves the logits by
// at least 0.0043, so each of them fails here.
#include <cstdio>

#include <catch2/catch.hpp>

#include "engine/golden_fixture.h"

namespace temper::engine::testing {
namespace {

void CheckPrompt(int prompt) {
  const std::string j = std::to_string(prompt);
  const ModelConfig& c = Tiny().config;
  const std::vector<int32_t> ids = TeacherForcedIds(prompt);
  const int64_t T = static_cast<int64_t>(Reference<int32_t>("input_ids_" + j).size());
  const int V = c.vocab_size, H = c.hidden_size;

  auto backend = TinyBackend();
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, ids, /*all_logits=*/true};
  auto out = backend->Forward({&item, 1}, ForwardOptions{.capture_hidden = true});
  REQUIRE(out.ok());
  REQUIRE(out->rows == static_cast<int64_t>(ids.size()));

  const std::vector<float> logits = Reference<float>("logits_" + j);
  const float d_logits = MaxAbsDiff(out->logits.data(), logits.data(), logits.size());
  std::printf("prompt %d: logits_%d max |diff| %.3g\n", prompt, prompt, d_logits);
  CHECK(d_logits <= 1e-3f);

  const std::vector<float> greedy_logits = Reference<float>("greedy_logits_" + j);
  const float d_greedy = MaxAbsDiff(out->logits.data() + (T - 1) * V, greedy_logits.data(), greedy_logits.size());
  std::printf("prompt %d: greedy_logits_%d max |diff| %.3g\n", prompt, prompt, d_greedy);
  CHECK(d_greedy <= 1e-3f);

  const std::vector<int32_t> greedy = Reference<int32_t>("greedy_" + j);
  for (size_t k = 0; k < greedy.size(); ++k) {
    INFO("greedy step " << k);
    CHECK(ArgMax(out->logits.data() + (T - 1 + static_cast<int64_t>(k)) * V, V) == greedy[k]);
  }

  // Hidden states: the reference covers the prompt only, [layers + 1][T][H]; ours cover all rows.
  const std::vector<float> hidden = Reference<float>("hidden_" + j);
  const int64_t rows = static_cast<int64_t>(ids.size());
  for (int layer = 0; layer <= c.num_layers; ++layer) {
    const float* ref = hidden.data() + layer * T * H;
    const float* got = out->hidden.data() + layer * rows * H;
    const float rel = MaxAbsDiff(got, ref, T * H) / MaxAbs(ref, T * H);
    std::printf("prompt %d: hidden_%d[%d] max |diff| / max |ref| %.3g\n", prompt, prompt, layer, rel);
    INFO("hidden layer " << layer);
    CHECK(rel <= 1e-4f);
  }
}

TEST_CASE("CPU forward matches the golden reference on prompt 0", "[engine][golden]") { CheckPrompt(0); }
TEST_CASE("CPU forward matches the golden reference on prompt 1", "[engine][golden]") { CheckPrompt(1); }

TEST_CASE("free-running greedy decode reproduces the reference tokens", "[engine][golden]") {
  const ModelConfig& c = Tiny().config;
  for (int prompt : {0, 1}) {
    const std::string j = std::to_string(prompt);
    const std::vector<int32_t> ids = Reference<int32_t>("input_ids_" + j);
    const std::vector<int32_t> greedy = Reference<int32_t>("greedy_" + j);
    auto backend = TinyBackend();
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    std::vector<int32_t> next = ids;
    std::vector<int32_t> produced;
    for (size_t k = 0; k < greedy.size(); ++k) {
      ForwardItem item{*seq, next, false};
      auto out = backend->Forward({&item, 1}, {});
      REQUIRE(out.ok());
      produced.push_back(ArgMax(out->logits.data(), c.vocab_size));
      next = {produced.back()};
    }
    INFO("prompt " << prompt);
    CHECK(produced == greedy);
  }
}

}  // namespace
}  // namespace temper::engine::testing
