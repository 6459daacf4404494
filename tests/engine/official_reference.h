// Test helpers for the fixtures made by transformers' own Gemma 4 and Gemma 3 classes (tests/data/reference/,
// written by tools/reference/make_fixtures.py; its README says what each config covers). Each
// fixture is a checkpoint as save_pretrained writes it plus reference.safetensors with the same
// tensor names as the golden fixture's (golden_fixture.h), and, where the vocabulary is too large
// to store whole rows, `logit_ids`: the columns the logit rows hold.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/golden_fixture.h"
#include "engine/model/drafter_config.h"
#include "engine/model/drafter_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"

namespace temper::engine::testing {

// Every config the generator writes. gemma4-31b-ratios: the 31B's GQA ratios and K = V full layers
// at tiny widths; gemma4-kv-separate: V projections on full layers, no softcap, partial rotary 0.5,
// an odd window; gemma4-real-vocab: the 262,144-entry vocabulary. Gemma 3 (Gemma3ForCausalLM):
// gemma3-scaled-rope: query_pre_attn_scalar 48 at head_dim 32, linear RoPE scaling 8 on full
// layers; gemma3-270m-shape: the 270M's 4:1 GQA at head_dim 256, no RoPE scaling.
inline const std::vector<std::string>& OfficialFixtureNames() {
  static const std::vector<std::string> names = {"gemma4-31b-ratios", "gemma4-kv-separate", "gemma4-real-vocab",
                                                 "gemma3-scaled-rope", "gemma3-270m-shape"};
  return names;
}

struct OfficialFixture {
  std::string name;
  ModelConfig config;
  std::shared_ptr<const ModelWeights> weights;
  std::shared_ptr<const SafetensorsFile> reference;
  std::vector<int32_t> columns;  // the vocabulary ids the stored logit rows hold, in order

  int NumPrompts() const {
    int n = 0;
    while (reference->Find("input_ids_" + std::to_string(n)) != nullptr) ++n;
    return n;
  }
  template <typename T>
  std::vector<T> Tensor(const std::string& tensor) const {
    return TensorValues<T>(*reference, tensor, nullptr);
  }
  // The prompt followed by all greedy tokens but the last: teacher-forcing it gives, from row T-1
  // on, the rows of greedy_logits_J.
  std::vector<int32_t> TeacherForcedIds(int prompt) const {
    std::vector<int32_t> ids = Tensor<int32_t>("input_ids_" + std::to_string(prompt));
    const std::vector<int32_t> greedy = Tensor<int32_t>("greedy_" + std::to_string(prompt));
    ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);
    return ids;
  }
};

inline const OfficialFixture& Official(const std::string& name) {
  static std::vector<std::unique_ptr<OfficialFixture>> loaded;
  for (const auto& f : loaded) {
    if (f->name == name) return *f;
  }
  const std::filesystem::path dir = TestDataDir() / "reference" / name;
  auto fixture = std::make_unique<OfficialFixture>();
  fixture->name = name;
  auto config = LoadModelConfig(dir / "config.json");
  if (!config.ok()) FAIL(config.status().ToString());
  fixture->config = *config;
  auto weights = ModelWeights::Load(dir, fixture->config);
  if (!weights.ok()) FAIL(weights.status().ToString());
  fixture->weights = std::move(*weights);
  auto reference = SafetensorsFile::Open(dir / "reference.safetensors");
  if (!reference.ok()) FAIL(reference.status().ToString());
  fixture->reference = std::make_shared<SafetensorsFile>(std::move(*reference));
  if (fixture->reference->Find("logit_ids") != nullptr) {
    fixture->columns = fixture->Tensor<int32_t>("logit_ids");
  } else {
    for (int id = 0; id < fixture->config.vocab_size; ++id) fixture->columns.push_back(id);
  }
  loaded.push_back(std::move(fixture));
  return *loaded.back();
}

// The MTP assistant transformers made for a target fixture (tests/data/reference/<target>-assistant),
// with draft cases in tests/data/gemma4-tiny-assistant's format: sequence_J (prompt and greedy
// tokens), case_prompt, case_length (the target's cache holds positions 0..L-1 and its next token
// is sequence[L]), draft_tokens [cases][steps], draft_logits [cases][steps][vocab], draft_margin.
struct OfficialDrafter {
  std::shared_ptr<const DrafterWeights> weights;
  std::shared_ptr<const SafetensorsFile> reference;

  template <typename T>
  std::vector<T> Tensor(const std::string& tensor) const {
    return TensorValues<T>(*reference, tensor, nullptr);
  }
};

inline const OfficialDrafter& OfficialAssistant(const OfficialFixture& target) {
  static std::vector<std::pair<std::string, std::unique_ptr<OfficialDrafter>>> loaded;
  for (const auto& [name, d] : loaded) {
    if (name == target.name) return *d;
  }
  const std::filesystem::path dir = TestDataDir() / "reference" / (target.name + "-assistant");
  auto drafter = std::make_unique<OfficialDrafter>();
  auto config = LoadDrafterConfig(dir / "config.json", target.config);
  if (!config.ok()) FAIL(config.status().ToString());
  auto weights = DrafterWeights::Load(dir, *config);
  if (!weights.ok()) FAIL(weights.status().ToString());
  drafter->weights = std::shared_ptr<const DrafterWeights>(std::move(*weights));
  auto reference = SafetensorsFile::Open(dir / "reference.safetensors");
  if (!reference.ok()) FAIL(reference.status().ToString());
  drafter->reference = std::make_shared<SafetensorsFile>(std::move(*reference));
  loaded.emplace_back(target.name, std::move(drafter));
  return *loaded.back().second;
}

// What one backend's teacher-forced pass over prompt + greedy[:-1] gave.
struct TeacherForcedPass {
  std::vector<float> logits;  // [rows][vocab]
  std::vector<float> hidden;  // [layers + 1][rows][hidden]
};

struct Tolerances {
  float logits;           // max |Δlogit| over every stored logit
  float hidden_relative;  // max |Δ| / max |ref| per hidden-state entry
  float greedy_margin;    // the greedy token must win on every step whose reference margin exceeds this
};

// Holds `pass` to the fixture's reference for `prompt`; returns the max |Δlogit| it measured.
inline float CheckTeacherForced(const OfficialFixture& f, int prompt, const TeacherForcedPass& pass,
                                const Tolerances& tolerances, const std::string& backend) {
  const std::string j = std::to_string(prompt);
  const ModelConfig& c = f.config;
  const int64_t V = c.vocab_size, H = c.hidden_size, K = static_cast<int64_t>(f.columns.size());
  const int64_t T = static_cast<int64_t>(f.Tensor<int32_t>("input_ids_" + j).size());
  const std::vector<int32_t> greedy = f.Tensor<int32_t>("greedy_" + j);
  const int64_t rows = T + static_cast<int64_t>(greedy.size()) - 1;
  REQUIRE(pass.logits.size() == static_cast<size_t>(rows * V));

  // The rows' stored columns, [rows][K], beside the reference's prompt rows then greedy rows.
  std::vector<float> got(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) got[r * K + k] = pass.logits[r * V + f.columns[k]];
  }
  const std::vector<float> logits = f.Tensor<float>("logits_" + j);
  const std::vector<float> greedy_logits = f.Tensor<float>("greedy_logits_" + j);
  const float d_prompt = MaxAbsDiff(got.data(), logits.data(), logits.size());
  const float d_greedy = MaxAbsDiff(got.data() + (T - 1) * K, greedy_logits.data(), greedy_logits.size());
  std::printf("%s, %s, prompt %d (T=%lld, positions 0..%lld): max |dlogit| %.3g (prompt rows), %.3g (greedy rows)\n",
              f.name.c_str(), backend.c_str(), prompt, static_cast<long long>(T), static_cast<long long>(rows - 1),
              d_prompt, d_greedy);
  INFO(f.name << ", " << backend << ", prompt " << prompt);
  CHECK(d_prompt <= tolerances.logits);
  CHECK(d_greedy <= tolerances.logits);

  // Argmax over the whole vocabulary, not only the stored columns.
  const std::vector<float> margin = f.Tensor<float>("greedy_margin_" + j);
  for (size_t k = 0; k < greedy.size(); ++k) {
    if (margin[k] <= tolerances.greedy_margin) continue;
    INFO("greedy step " << k << " (margin " << margin[k] << ")");
    CHECK(ArgMax(pass.logits.data() + (T - 1 + static_cast<int64_t>(k)) * V, static_cast<int>(V)) == greedy[k]);
  }

  // Hidden states cover the prompt rows only: [layers + 1][T][H] (HF's output_hidden_states, the
  // last entry after the final norm). The first layer past tolerance is where a feature diverges.
  const std::vector<float> hidden = f.Tensor<float>("hidden_" + j);
  REQUIRE(pass.hidden.size() == static_cast<size_t>((c.num_layers + 1) * rows * H));
  for (int layer = 0; layer <= c.num_layers; ++layer) {
    const float* want = hidden.data() + layer * T * H;
    const float rel = MaxAbsDiff(pass.hidden.data() + layer * rows * H, want, T * H) / MaxAbs(want, T * H);
    INFO("hidden entry " << layer << " ("
                         << (layer == 0                                        ? "embedding"
                             : c.layers[layer - 1].kind == LayerKind::kSliding ? "after a sliding layer"
                                                                               : "after a full layer")
                         << "): max |d| / max |ref| " << rel);
    CHECK(rel <= tolerances.hidden_relative);
  }
  return std::max(d_prompt, d_greedy);
}

}  // namespace temper::engine::testing
