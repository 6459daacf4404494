// The device backend, on ReferenceOps (the CPU twin of every CUDA kernel), against transformers'
// own Gemma 4 and Gemma 3 implementations (tests/data/reference/,
// tools/reference/make_fixtures.py), at the golden fixture's bf16 tolerances
// (device_backend_test.cpp): max |Δlogit| <= 1.0, top-1 equal wherever the reference's margin
// exceeds 1.0, hidden states within 0.05 of max |ref|. Teacher-
// forced in one pass, and again as a prefill followed by decode steps (graph buckets), whose
// greedy tokens must be transformers' generate() tokens wherever the margin exceeds 1.0.
#include <algorithm>
#include <cstdio>
#include <span>

#include <catch2/catch.hpp>

#include "engine/cuda/device_backend.h"
#include "engine/cuda/reference_ops.h"
#include "engine/official_reference.h"

namespace temper::engine::cuda {
namespace {

using testing::ArgMax;
using testing::MaxAbsDiff;
using testing::OfficialFixture;

constexpr testing::Tolerances kBf16{.logits = 1.0f, .hidden_relative = 0.05f, .greedy_margin = 1.0f};

struct ReferenceDevice {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<DeviceBackend> backend;
};

ReferenceDevice Device(const OfficialFixture& f, int tp, std::shared_ptr<const DrafterWeights> drafter = nullptr) {
  ReferenceDevice d;
  d.comm = std::make_unique<Communicator>(tp);
  std::vector<std::unique_ptr<RankOps>> ops;
  // The 262,144-entry vocabulary's logit rows are 1 MiB each: 64 rows a pass, 256 MiB a rank.
  for (int r = 0; r < tp; ++r) ops.push_back(std::make_unique<ReferenceOps>(*d.comm, r, size_t{256} << 20));
  DeviceBackendOptions options;
  options.max_context = 256;
  options.max_rows = 64;
  options.kv.max_tokens = 512;
  options.kv.block_tokens = 4;  // small blocks, so a prompt spans several
  options.drafter = std::move(drafter);
  auto backend = DeviceBackend::Create(f.config, f.weights, std::move(ops), options);
  if (!backend.ok()) FAIL(f.name << " at tp " << tp << ": " << backend.status().ToString());
  d.backend = std::move(*backend);
  return d;
}

TEST_CASE("device backend on reference ops matches transformers' Gemma 4 and Gemma 3 on every official fixture",
          "[engine][device][official]") {
  for (const std::string& name : testing::OfficialFixtureNames()) {
    const OfficialFixture& f = testing::Official(name);
    for (int tp : {1, 2}) {
      auto dev = Device(f, tp);
      for (int prompt = 0; prompt < f.NumPrompts(); ++prompt) {
        auto seq = dev.backend->AddSequence();
        REQUIRE(seq.ok());
        const std::vector<int32_t> ids = f.TeacherForcedIds(prompt);
        ForwardItem item{*seq, ids, /*all_logits=*/true};
        auto out = dev.backend->Forward({&item, 1}, ForwardOptions{.capture_hidden = true});
        REQUIRE(out.ok());
        REQUIRE(dev.backend->ReleaseSequence(*seq).ok());
        testing::CheckTeacherForced(f, prompt, testing::TeacherForcedPass{out->logits, out->hidden}, kBf16,
                                    "device twins tp " + std::to_string(tp));
      }
    }
  }
}

TEST_CASE("device backend on reference ops decodes transformers' greedy tokens on every official fixture",
          "[engine][device][official]") {
  for (const std::string& name : testing::OfficialFixtureNames()) {
    const OfficialFixture& f = testing::Official(name);
    auto dev = Device(f, 1);
    for (int prompt = 0; prompt < f.NumPrompts(); ++prompt) {
      const std::string j = std::to_string(prompt);
      const std::vector<int32_t> greedy = f.Tensor<int32_t>("greedy_" + j);
      const std::vector<float> margin = f.Tensor<float>("greedy_margin_" + j);
      auto seq = dev.backend->AddSequence();
      REQUIRE(seq.ok());
      // Teacher-forced steps (each fed the reference's token) so that one near-tie does not end
      // the comparison: every step whose margin exceeds 1.0 must pick transformers' token.
      std::vector<int32_t> next = f.Tensor<int32_t>("input_ids_" + j);
      int compared = 0;
      for (size_t k = 0; k < greedy.size(); ++k) {
        ForwardItem item{*seq, next, false};
        auto out = dev.backend->Forward({&item, 1}, {});
        REQUIRE(out.ok());
        if (margin[k] > kBf16.greedy_margin) {
          INFO(name << ", prompt " << prompt << ", decode step " << k << " (margin " << margin[k] << ")");
          CHECK(ArgMax(out->logits.data(), f.config.vocab_size) == greedy[k]);
          ++compared;
        }
        next = {greedy[k]};
      }
      std::printf("%s, device twins decode, prompt %d: %d of %zu steps compared (margin > 1.0)\n", name.c_str(), prompt,
                  compared, greedy.size());
      REQUIRE(dev.backend->ReleaseSequence(*seq).ok());
    }
  }
}

// transformers' Gemma 4 assistant against the device drafter, at the bf16 bounds of
// device_backend_test.cpp's drafter case (max |Δlogit| <= 1.0, each draft equal until the first
// step whose margin is 1.0 or less), on every case, past the window too (the drafter's sliding
// layers read the last window + 1 target positions, see cpu_official_reference_test.cpp).
TEST_CASE("device backend on reference ops drafts as transformers' Gemma 4 assistant, past the window too",
          "[engine][device][official][drafter]") {
  const OfficialFixture& f = testing::Official("gemma4-31b-ratios");
  const testing::OfficialDrafter& d = testing::OfficialAssistant(f);
  const std::vector<int32_t> prompts = d.Tensor<int32_t>("case_prompt");
  const std::vector<int32_t> lengths = d.Tensor<int32_t>("case_length");
  const std::vector<int32_t> tokens = d.Tensor<int32_t>("draft_tokens");
  const std::vector<float> logits = d.Tensor<float>("draft_logits");
  const std::vector<float> margin = d.Tensor<float>("draft_margin");
  const int64_t V = f.config.vocab_size;
  const int steps = static_cast<int>(tokens.size() / prompts.size());
  int compared = 0;
  for (int tp : {1, 2}) {
    auto dev = Device(f, tp, d.weights);
    REQUIRE(dev.backend->has_drafter());
    float worst = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int64_t length = lengths[i];
      const std::vector<int32_t> sequence = d.Tensor<int32_t>("sequence_" + std::to_string(prompts[i]));
      INFO("tp " << tp << ", prompt " << prompts[i] << ", cache length " << length);
      auto seq = dev.backend->AddSequence();
      REQUIRE(seq.ok());
      ForwardItem item{*seq, std::span<const int32_t>(sequence).first(length), false};
      REQUIRE(dev.backend->Forward({&item, 1}, {}).ok());
      const DraftRequest request{*seq, sequence[length], 0, steps};
      auto drafted = dev.backend->Draft({&request, 1}, DraftOptions{.keep_logits = true});
      if (!drafted.ok()) FAIL(drafted.status().ToString());
      REQUIRE(drafted->tokens[0].size() == static_cast<size_t>(steps));
      for (int step = 0; step < steps; ++step) {
        const size_t at = i * steps + step;
        const float diff = MaxAbsDiff(drafted->logits.data() + step * V, logits.data() + at * V, V);
        worst = std::max(worst, diff);
        INFO("step " << step << ": max |dlogit| " << diff << ", margin " << margin[at]);
        CHECK(diff <= 1.0f);
        if (margin[at] <= 1.0f) break;
        CHECK(drafted->tokens[0][step] == tokens[at]);
        ++compared;
      }
      REQUIRE(dev.backend->ReleaseSequence(*seq).ok());
    }
    std::printf("gemma4-31b-ratios-assistant, device twins tp %d: max |dlogit| %.3g\n", tp, worst);
  }
  std::printf("gemma4-31b-ratios-assistant, device twins: %d draft tokens compared\n", compared);
  CHECK(compared >= 4);
}

}  // namespace
}  // namespace temper::engine::cuda
