// Test helper: a small Gemma 3 text model's config.json (tests/data/reference/gemma3-scaled-rope,
// transformers' Gemma3TextConfig) with the vocabulary of Gemma 3's checkpoints, 262,144 tokens, so
// that seeded random weights of it pair with the real Gemma 3 tokenizer (whose <image_soft_token>,
// id 262144, lies past it and is never generated).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace temper::engine::testing {

inline std::string Gemma3VocabularyConfigJson() {
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/reference/gemma3-scaled-rope/config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json config = nlohmann::json::parse(text.str());
  config["vocab_size"] = 262144;
  return config.dump(2);
}

}  // namespace temper::engine::testing
