// Bpe: the byte-pair-encoding model of a Hugging Face tokenizer, applied to one pre-tokenized word.
//
// It must give exactly the ids Rust `tokenizers` gives, because the model was trained on those.
// The order in which merges apply matters: tokenizers' `Word::merge_all` pops merges one at a time
// from a min-heap keyed by (rank, position), re-checking each popped entry against the current
// symbols, and pushes the two pairs a merge creates. Merging "every occurrence of the best pair per
// pass" is not equivalent in general, so EncodeWord follows merge_all step by step.
//
// Initial symbols: one per Unicode character found in the vocabulary; otherwise, with byte_fallback,
// one `<0xXX>` symbol per UTF-8 byte; otherwise the unk token (consecutive unknowns fused into one
// when fuse_unk). Bytes that are not valid UTF-8 are treated as one-byte characters that are never
// in the vocabulary, so they take the byte-fallback path.
//
// Thread safety: immutable after Build(); EncodeWord is const and may run from many threads, each
// with its own BpeScratch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace temper::engine {

// A token's text for an error message: quoted, and cut after 40 characters.
std::string QuoteToken(std::string_view text);

// Working memory EncodeWord reuses from one word to the next.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    uint32_t len;  // bytes covered; 0 once merged into its left neighbour
  };
  struct Merge {
    uint32_t rank;
    uint32_t pos;
    int32_t left;  // the pair's ids when pushed: the entry is stale once they change
    int32_t right;
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Merge> heap;
};

class Bpe {
 public:
  // Indexes `spec` (which it consumes). Errors (DataLoss) name the entry: a vocabulary id used twice,
  // "model.merges[N]: token 'x' is not in the vocabulary", a merged token missing from the
  // vocabulary, an unk_token that is not in it, or a vocabulary that cannot encode every byte (no
  // unk_token and byte fallback that misses some of the 256 `<0xXX>` tokens).
  static Result<Bpe> Build(BpeSpec spec);

  Bpe(Bpe&&) noexcept = default;
  Bpe& operator=(Bpe&&) noexcept = default;
  Bpe(const Bpe&) = delete;
  Bpe& operator=(const Bpe&) = delete;

  // Appends the ids of `word` to `out`. Never fails: Build() guaranteed every byte is encodable.
  void EncodeWord(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The vocabulary, indexed by id; ids without a token hold an empty string.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }

 private:
  Bpe() = default;

  struct PairSlot {
    uint64_t key;  // left id << 32 | right id; kEmpty when free
    uint32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  const PairSlot* FindPair(int32_t left, int32_t right) const;
  void InsertPair(int32_t left, int32_t right, uint32_t rank, int32_t new_id);
  int32_t CharId(uint32_t codepoint) const;
  void MergeAll(BpeScratch& scratch) const;

  // Token text -> id: open addressing over (hash, id) slots, the text compared in id_to_token_
  // only when the hash matches. Loading looks up 1.5 million strings (three per merge), and a
  // node-based unordered_map spent most of the load time chasing pointers.
  struct TokenSlot {
    uint32_t hash;
    int32_t id;  // -1 when free
  };
  bool InsertToken(int32_t id);  // false if the text is already present

  std::vector<std::string> id_to_token_;
  std::vector<TokenSlot> token_slots_;
  uint64_t token_mask_ = 0;
  // Open addressing, linear probing; the hot lookup of encoding.
  std::vector<PairSlot> pairs_;
  uint64_t pair_mask_ = 0;
  // Single-character tokens by code point: a flat table for the BMP, a map above it.
  std::vector<int32_t> bmp_ids_;
  std::unordered_map<uint32_t, int32_t> astral_ids_;
  std::array<int32_t, 256> byte_ids_{};  // `<0xXX>` ids, -1 where absent or byte_fallback is off
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

// Decodes the UTF-8 character at s[pos]: sets *codepoint and returns its length in bytes, or returns
// 1 with *codepoint = kInvalidCodepoint for a byte that does not start a well-formed sequence.
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFF;
size_t DecodeUtf8(std::string_view s, size_t pos, uint32_t* codepoint);

}  // namespace temper::engine
