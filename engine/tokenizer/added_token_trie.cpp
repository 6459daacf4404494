#include "engine/tokenizer/added_token_trie.h"

#include <algorithm>

namespace temper::engine {

int32_t AddedTokenTrie::Child(int32_t node, unsigned char byte) const {
  if (node == 0) return root_children_[byte];
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), byte,
                             [](const std::pair<unsigned char, int32_t>& c, unsigned char b) { return c.first < b; });
  return (it != children.end() && it->first == byte) ? it->second : -1;
}

void AddedTokenTrie::Add(std::string_view content, int32_t id, bool special) {
  int32_t node = 0;
  for (char ch : content) {
    const auto byte = static_cast<unsigned char>(ch);
    int32_t next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) {
        root_children_[byte] = next;
      } else {
        auto& children = nodes_[node].children;
        auto it =
            std::lower_bound(children.begin(), children.end(), byte,
                             [](const std::pair<unsigned char, int32_t>& c, unsigned char b) { return c.first < b; });
        children.insert(it, {byte, next});
      }
    }
    node = next;
  }
  nodes_[node].id = id;
  nodes_[node].special = special;
}

AddedTokenTrie::Match AddedTokenTrie::LongestAt(std::string_view text, size_t pos, bool match_special) const {
  Match best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const Node& n = nodes_[node];
    if (n.id >= 0 && (match_special || !n.special)) best = Match{i + 1 - pos, n.id};
  }
  return best;
}

}  // namespace temper::engine
