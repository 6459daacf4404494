#include "engine/tokenizer/chat_format.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "engine/tokenizer/gemma3_chat_format.h"
#include "engine/tokenizer/gemma4_chat_format.h"

namespace temper::engine {

Status LookUpControlTokens(const Tokenizer& tokenizer, std::span<const char* const> texts, std::string_view family,
                           std::span<int32_t> ids) {
  for (size_t t = 0; t < texts.size(); ++t) {
    std::optional<int32_t> id = tokenizer.TokenToId(texts[t]);
    if (!id)
      return Status::NotFound(
          fmt::format("tokenizer has no token '{}' (needed by {}'s chat format)", texts[t], family));
    ids[t] = *id;
  }
  return Status::OK();
}

Status CheckToolName(std::string_view name, std::string_view field) {
  if (name.empty()) return Status::InvalidArgument(fmt::format("{}: empty name", field));
  const auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
  };
  if (!std::all_of(name.begin(), name.end(), name_char)) {
    return Status::InvalidArgument(
        fmt::format("{}: name '{}' may hold only letters, digits, '_', '-' and '.'", field, name));
  }
  return Status::OK();
}

ChatFamily ChatFamilyOfModelType(std::string_view model_type) {
  if (model_type == "gemma3" || model_type == "gemma3_text") return ChatFamily::kGemma3;
  if (model_type == "gemma4" || model_type == "gemma4_text") return ChatFamily::kGemma4;
  return ChatFamily::kFromTokenizer;
}

Result<ChatFormat> ChatFormat::Create(const Tokenizer& tokenizer, ChatFamily family) {
  if (family == ChatFamily::kFromTokenizer) {
    if (tokenizer.TokenToId("<|turn>")) {
      family = ChatFamily::kGemma4;
    } else if (tokenizer.TokenToId("<start_of_turn>")) {
      family = ChatFamily::kGemma3;
    } else {
      return Status::NotFound(
          "tokenizer has neither '<|turn>' (Gemma 4's chat format) nor '<start_of_turn>' (Gemma 3's): no chat "
          "format this engine speaks");
    }
  }
  if (family == ChatFamily::kGemma3) {
    TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Gemma3ChatFormat> gemma3, Gemma3ChatFormat::Create(tokenizer));
    return ChatFormat(tokenizer, std::move(gemma3));
  }
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4ChatFormat> gemma4, Gemma4ChatFormat::Create(tokenizer));
  return ChatFormat(tokenizer, std::move(gemma4));
}

Result<ModelReply> ChatFormat::ParseReply(std::span<const int32_t> ids) const {
  TEMPER_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(ids));
  return ParseReplyText(text);
}

}  // namespace temper::engine
