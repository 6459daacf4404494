#include "common/display_text.h"

#include <cctype>
#include <string_view>

namespace temper {

namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string ShortRuleName(const std::string& rule_id) {
  static constexpr std::string_view kMarker = "_rule_";
  size_t at = rule_id.find(kMarker);
  return at == std::string::npos ? rule_id : rule_id.substr(at + kMarker.size());
}

std::string FitWidth(const std::string& text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsContinuationByte(text[i])) continue;
    if (chars == max_chars) return text.substr(0, i);
    ++chars;
  }
  return text;
}

std::string OneLine(const std::string& text, size_t max_chars) {
  std::string flat;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !flat.empty();
      continue;
    }
    if (space) flat += ' ';
    space = false;
    flat += c;
  }
  if (FitWidth(flat, max_chars).size() == flat.size()) return flat;
  std::string cut = FitWidth(flat, max_chars > 0 ? max_chars - 1 : 0);
  while (!cut.empty() && cut.back() == ' ') cut.pop_back();
  return cut + "…";
}

}  // namespace temper
