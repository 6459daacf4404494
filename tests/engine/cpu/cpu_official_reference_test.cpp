// The CPU forward pass against transformers' own Gemma 4 implementation (tests/data/reference/,
// tools/reference/make_fixtures.py): every config there, at the golden fixture's fp32 tolerances
// (logits within 1e-3, hidden states within 1e-4 of max |ref|, every greedy token equal, teacher-
// forced and free-running). The fixtures' prompts were drawn so that no greedy step is a near-tie
// (every margin >= 0.02, ~100x the fp32 error).
#include <catch2/catch.hpp>

#include "engine/official_reference.h"

namespace temper::engine::testing {
namespace {

std::unique_ptr<CpuBackend> Backend(const OfficialFixture& f) {
  CpuBackendOptions options;
  options.threads = 2;
  options.max_context = 256;
  options.kv.max_tokens = 512;
  options.kv.block_tokens = 4;  // small blocks, so a prompt spans several
  auto backend = CpuBackend::Create(f.config, f.weights, options);
  if (!backend.ok()) FAIL(backend.status().ToString());
  return std::move(*backend);
}

TEST_CASE("CPU forward matches transformers' Gemma 4 on every official fixture", "[engine][official]") {
  const Tolerances fp32{.logits = 1e-3f, .hidden_relative = 1e-4f, .greedy_margin = 0.0f};
  for (const std::string& name : OfficialFixtureNames()) {
    const OfficialFixture& f = Official(name);
    for (int prompt = 0; prompt < f.NumPrompts(); ++prompt) {
      auto backend = Backend(f);
      auto seq = backend->AddSequence();
      REQUIRE(seq.ok());
      const std::vector<int32_t> ids = f.TeacherForcedIds(prompt);
      ForwardItem item{*seq, ids, /*all_logits=*/true};
      auto out = backend->Forward({&item, 1}, ForwardOptions{.capture_hidden = true});
      REQUIRE(out.ok());
      CheckTeacherForced(f, prompt, TeacherForcedPass{out->logits, out->hidden}, fp32, "cpu");
    }
  }
}

TEST_CASE("CPU greedy decode reproduces transformers' generate() tokens on every official fixture",
          "[engine][official]") {
  for (const std::string& name : OfficialFixtureNames()) {
    const OfficialFixture& f = Official(name);
    for (int prompt = 0; prompt < f.NumPrompts(); ++prompt) {
      const std::vector<int32_t> greedy = f.Tensor<int32_t>("greedy_" + std::to_string(prompt));
      auto backend = Backend(f);
      auto seq = backend->AddSequence();
      REQUIRE(seq.ok());
      std::vector<int32_t> next = f.Tensor<int32_t>("input_ids_" + std::to_string(prompt));
      std::vector<int32_t> produced;
      for (size_t k = 0; k < greedy.size(); ++k) {
        ForwardItem item{*seq, next, false};
        auto out = backend->Forward({&item, 1}, {});
        REQUIRE(out.ok());
        produced.push_back(ArgMax(out->logits.data(), f.config.vocab_size));
        next = {produced.back()};
      }
      INFO(name << ", prompt " << prompt);
      CHECK(produced == greedy);
    }
  }
}

}  // namespace
}  // namespace temper::engine::testing
