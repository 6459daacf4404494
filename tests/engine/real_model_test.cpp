// The real model: Gemma 3 270M (Q4_K_M GGUF, fetched by deploy/setup.sh) on the CPU backend, against
// transformers' own Gemma3ForCausalLM on the same dequantized weights
// (tests/data/reference/gemma3-270m-q4km, written once by tools/reference/real_model_reference.py,
// so no torch is needed here). transformers loads the GGUF with its own GGUF support (gguf-py's
// dequantizers), the weights are rounded to bf16 as temper's loader rounds them, and it computes in
// fp32: the engine must give the same logits to within fp32 summation-order noise, the same greedy
// tokens for 64 steps on every prompt, and the same ids from its own tokenizer (read from the GGUF).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/golden_fixture.h"
#include "engine/loaded_model.h"
#include "engine/real_model.h"

namespace temper::engine::testing {
namespace {

struct RealModel {
  LoadedModel model;
  SafetensorsFile reference;
  std::vector<std::string> prompts;
  std::vector<int32_t> columns;  // the vocabulary ids the stored logit rows hold

  template <typename T>
  std::vector<T> Tensor(const std::string& name) const {
    return TensorValues<T>(reference, name, nullptr);
  }
};

// Loaded once for the whole run: dequantizing 270M parameters is the slow part.
const RealModel& Real() {
  static RealModel* real = [] {
    auto model = LoadModel(
        ModelSource{.dir = temper::testing::RealGemma3GgufPath().string(), .tokenizer_need = TokenizerNeed::kRequired});
    if (!model.ok()) FAIL(model.status().ToString());
    auto reference = SafetensorsFile::Open(TestDataDir() / "reference" / "gemma3-270m-q4km" / "reference.safetensors");
    if (!reference.ok()) FAIL(reference.status().ToString());
    auto* r = new RealModel{std::move(*model), std::move(*reference), {}, {}};
    r->prompts = nlohmann::json::parse(r->reference.header().metadata.at("prompts")).get<std::vector<std::string>>();
    r->columns = r->Tensor<int32_t>("logit_ids");
    return r;
  }();
  return *real;
}

std::unique_ptr<CpuBackend> Backend(const RealModel& r) {
  CpuBackendOptions options;
  options.threads = 2;
  options.max_context = 1024;
  options.kv.max_tokens = 1024;
  auto backend = CpuBackend::Create(r.model.config, r.model.weights, options);
  if (!backend.ok()) FAIL(backend.status().ToString());
  return std::move(*backend);
}

double LogSumExp(std::span<const float> row) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - top);
  return top + std::log(sum);
}

TEST_CASE("the real Gemma 3 270M's tokenizer, read from its GGUF, gives transformers' ids for every prompt",
          "[engine][real]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const RealModel& r = Real();
  REQUIRE(r.model.tokenizer != nullptr);
  for (size_t j = 0; j < r.prompts.size(); ++j) {
    INFO("prompt " << j);
    CHECK(r.model.tokenizer->Encode(r.prompts[j], {.add_special_tokens = true}) ==
          r.Tensor<int32_t>("input_ids_" + std::to_string(j)));
  }
}

// Every stored row of a teacher-forced pass over prompt + greedy[:-1]: its logits on the stored
// columns, its log-sum-exp over the whole vocabulary (the columns not stored), and the argmax of
// each greedy row over the whole vocabulary.
TEST_CASE("the real Gemma 3 270M on the CPU backend matches transformers' Gemma3ForCausalLM on the same weights",
          "[engine][real]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const RealModel& r = Real();
  const int64_t V = r.model.config.vocab_size;
  float worst_logit = 0, worst_lse = 0, smallest_margin_checked = 1e9f;
  for (size_t j = 0; j < r.prompts.size(); ++j) {
    const std::string n = std::to_string(j);
    std::vector<int32_t> ids = r.Tensor<int32_t>("input_ids_" + n);
    const int64_t T = static_cast<int64_t>(ids.size());
    const std::vector<int32_t> greedy = r.Tensor<int32_t>("greedy_" + n);
    ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);
    // The rows the reference holds: prompt rows, then the rows each greedy token was chosen from.
    std::vector<int32_t> rows = r.Tensor<int32_t>("prompt_rows_" + n);
    const size_t prompt_rows = rows.size();
    for (int64_t k = 0; k < static_cast<int64_t>(greedy.size()); ++k) rows.push_back(static_cast<int32_t>(T - 1 + k));

    // Fed in chunks of 64 rows, so the pass never holds more than 64 rows of 262,144 logits.
    auto backend = Backend(r);
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    std::vector<std::vector<float>> got(rows.size());
    for (int64_t begin = 0; begin < static_cast<int64_t>(ids.size()); begin += 64) {
      const int64_t end = std::min<int64_t>(begin + 64, static_cast<int64_t>(ids.size()));
      ForwardItem item{*seq, std::span<const int32_t>(ids).subspan(begin, end - begin), /*all_logits=*/true};
      auto out = backend->Forward({&item, 1}, {});
      REQUIRE(out.ok());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i] < begin || rows[i] >= end) continue;
        got[i].assign(out->logits.begin() + (rows[i] - begin) * V, out->logits.begin() + (rows[i] - begin + 1) * V);
      }
    }

    const std::vector<float> prompt_logits = r.Tensor<float>("prompt_logits_" + n);
    const std::vector<float> greedy_logits = r.Tensor<float>("greedy_logits_" + n);
    const std::vector<double> prompt_lse = r.Tensor<double>("prompt_logsumexp_" + n);
    const std::vector<double> greedy_lse = r.Tensor<double>("greedy_logsumexp_" + n);
    const std::vector<float> margin = r.Tensor<float>("greedy_margin_" + n);
    const size_t K = r.columns.size();
    float d_logit = 0, d_lse = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool is_prompt = i < prompt_rows;
      const size_t index = is_prompt ? i : i - prompt_rows;
      const float* want = (is_prompt ? prompt_logits.data() : greedy_logits.data()) + index * K;
      for (size_t k = 0; k < K; ++k) d_logit = std::max(d_logit, std::fabs(got[i][r.columns[k]] - want[k]));
      const double lse = is_prompt ? prompt_lse[index] : greedy_lse[index];
      d_lse = std::max(d_lse, static_cast<float>(std::fabs(LogSumExp(got[i]) - lse)));
      if (!is_prompt) {
        INFO("prompt " << j << ", greedy step " << index << " (reference margin " << margin[index] << ")");
        CHECK(ArgMax(got[i].data(), static_cast<int>(V)) == greedy[index]);
        smallest_margin_checked = std::min(smallest_margin_checked, margin[index]);
      }
    }
    std::printf(
        "gemma3-270m-q4km, cpu, prompt %zu (T=%lld, %zu rows checked): max |dlogit| %.3g, max |dlogsumexp| %.3g\n", j,
        static_cast<long long>(T), rows.size(), d_logit, d_lse);
    INFO("prompt " << j);
    // The golden fixtures' fp32 bound: transformers and the engine compute in fp32 from the same
    // bf16 weights (temper's dequantizers and transformers' gguf-py agree on every one), differing
    // only in summation order. Measured 2026-11-29: at most 7.6e-5 (logits near 25).
    CHECK(d_logit <= 1e-3f);
    CHECK(d_lse <= 1e-3f);
    worst_logit = std::max(worst_logit, d_logit);
    worst_lse = std::max(worst_lse, d_lse);
  }
  std::printf("gemma3-270m-q4km, cpu: worst |dlogit| %.3g, worst |dlogsumexp| %.3g, smallest greedy margin %.4f\n",
              worst_logit, worst_lse, smallest_margin_checked);
}

TEST_CASE("the real Gemma 3 270M decodes transformers' greedy tokens for 64 steps on every prompt", "[engine][real]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const RealModel& r = Real();
  for (size_t j = 0; j < r.prompts.size(); ++j) {
    const std::vector<int32_t> greedy = r.Tensor<int32_t>("greedy_" + std::to_string(j));
    auto backend = Backend(r);
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    std::vector<int32_t> next = r.Tensor<int32_t>("input_ids_" + std::to_string(j));
    std::vector<int32_t> produced;
    while (produced.size() < greedy.size()) {
      ForwardItem item{*seq, next, false};
      auto out = backend->Forward({&item, 1}, {});
      REQUIRE(out.ok());
      produced.push_back(ArgMax(out->logits.data(), r.model.config.vocab_size));
      next = {produced.back()};
    }
    INFO("prompt " << j);
    CHECK(produced == greedy);
    auto text = r.model.tokenizer->Decode(produced);
    REQUIRE(text.ok());
    std::printf("gemma3-270m-q4km, prompt %zu: %s\n", j, nlohmann::json(*text).dump().c_str());
  }
}

}  // namespace
}  // namespace temper::engine::testing
