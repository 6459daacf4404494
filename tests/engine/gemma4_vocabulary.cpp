#include "engine/gemma4_vocabulary.h"

#include <nlohmann/json.hpp>

#include "engine/gzip_file.h"

namespace temper::engine::testing {

Result<std::string> Gemma4VocabularyTokenizerJson() {
  TEMPER_ASSIGN_OR_RETURN(std::string text,
                          ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz"));
  // The vocabulary is a map from token to id, so its keys' order does not matter.
  nlohmann::json tok = nlohmann::json::parse(text, nullptr, false);
  if (tok.is_discarded()) return Status::DataLoss("gemma3-tokenizer.json.gz does not hold JSON");
  static constexpr const char* kControl[] = {"<|turn>",      "<turn|>",          "<|think|>",        "<|channel>",
                                             "<channel|>",   "<|tool>",          "<tool|>",          "<|tool_call>",
                                             "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};
  auto& vocab = tok["model"]["vocab"];
  for (size_t i = 0; i < std::size(kControl); ++i) {
    const std::string unused = "<unused" + std::to_string(i) + ">";
    bool renamed = false;
    for (auto& added : tok["added_tokens"]) {
      if (added["content"] != unused) continue;
      added["content"] = kControl[i];
      added["special"] = true;
      renamed = true;
    }
    if (!renamed || !vocab.contains(unused)) {
      return Status::DataLoss("gemma3-tokenizer.json.gz has no " + unused + " to rename");
    }
    const auto id = vocab[unused];
    vocab.erase(unused);
    vocab[kControl[i]] = id;
  }
  return tok.dump();
}

}  // namespace temper::engine::testing
