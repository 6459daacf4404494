// AddedTokenTrie: finds a tokenizer's added tokens in text, leftmost-longest.
//
// Hugging Face tokenizers cuts added tokens (`<bos>`, `<|turn>`, runs of newlines, ...) out of the
// text before anything else, with an Aho-Corasick automaton in LeftmostLongest mode: of the matches
// that start earliest, the longest wins. Scanning left to right and taking the longest token that
// starts at the first position where any starts gives the same result; a byte trie does that, and a
// 256-entry root table rejects most positions in one load.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace temper::engine {

class AddedTokenTrie {
 public:
  struct Match {
    size_t length = 0;  // bytes; 0 when nothing matched
    int32_t id = -1;
  };

  // Adds a token; `special` tokens can be skipped at match time. Contents must be distinct.
  void Add(std::string_view content, int32_t id, bool special);
  bool empty() const { return nodes_.size() <= 1; }

  // The longest token starting at text[pos], skipping special ones unless `match_special`.
  Match LongestAt(std::string_view text, size_t pos, bool match_special) const;

 private:
  struct Node {
    int32_t id = -1;  // token ending here, -1 if none
    bool special = false;
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
  };
  int32_t Child(int32_t node, unsigned char byte) const;

  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::vector<int32_t> root_children_ = std::vector<int32_t>(256, -1);
};

}  // namespace temper::engine
