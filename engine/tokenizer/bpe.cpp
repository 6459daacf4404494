#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <utility>

#include <fmt/format.h>

namespace temper::engine {

std::string QuoteToken(std::string_view text) {
  constexpr size_t kMax = 40;
  if (text.size() <= kMax) return fmt::format("'{}'", text);
  return fmt::format("'{}...'", text.substr(0, kMax));
}

namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t TextHash(std::string_view s) {
  // FNV-1a, 64-bit: tokens are short, and this is cheap and well spread.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

uint64_t PairHash(uint64_t key) {
  // Fibonacci hashing with a final mix: ids are small and dense, so spread them over the table.
  key ^= key >> 29;
  return key * 0x9E3779B97F4A7C15ull;
}

// Heap order of tokenizers' Merge: the smallest rank first, then the leftmost position.
struct MergeAfter {
  bool operator()(const BpeScratch::Merge& a, const BpeScratch::Merge& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

}  // namespace

size_t DecodeUtf8(std::string_view s, size_t pos, uint32_t* codepoint) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  *codepoint = kInvalidCodepoint;
  if (b0 < 0x80) {
    *codepoint = b0;
    return 1;
  }
  size_t len;
  uint32_t cp;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 1;
  }
  if (pos + len > s.size()) return 1;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  *codepoint = cp;
  return len;
}

Result<Bpe> Bpe::Build(BpeSpec spec) {
  Bpe bpe;
  bpe.fuse_unk_ = spec.fuse_unk;
  bpe.ignore_merges_ = spec.ignore_merges;

  int32_t max_id = -1;
  for (const auto& e : spec.vocab) max_id = std::max(max_id, e.id);
  // Ids index a table; a hostile file must not make it huge with one enormous id.
  if (static_cast<uint64_t>(max_id) >= 2 * static_cast<uint64_t>(spec.vocab.size()) + 1024) {
    return Status::DataLoss(
        fmt::format("model.vocab: id {} is far beyond the {} entries (ids must be dense)", max_id, spec.vocab.size()));
  }
  bpe.id_to_token_.resize(static_cast<size_t>(max_id + 1));
  std::vector<bool> used(bpe.id_to_token_.size(), false);
  for (const auto& e : spec.vocab) {
    std::string_view token = spec.View(e.token);
    if (used[e.id]) {
      return Status::DataLoss(fmt::format("model.vocab[{}]: id {} is already used by {}", QuoteToken(token), e.id,
                                          QuoteToken(bpe.id_to_token_[e.id])));
    }
    used[e.id] = true;
    bpe.id_to_token_[e.id] = std::string(token);
  }
  const size_t token_capacity = std::bit_ceil(std::max<size_t>(16, spec.vocab.size() * 2));
  bpe.token_slots_.assign(token_capacity, TokenSlot{0, -1});
  bpe.token_mask_ = token_capacity - 1;
  for (const auto& e : spec.vocab) {
    if (!bpe.InsertToken(e.id)) {
      return Status::DataLoss(fmt::format("model.vocab: token {} appears twice", QuoteToken(bpe.id_to_token_[e.id])));
    }
  }

  // Merges: rank = position in the list. A pair listed twice keeps its last rank, as the HashMap
  // that tokenizers collects them into does.
  size_t capacity = std::bit_ceil(std::max<size_t>(16, spec.merges.size() * 2));
  bpe.pairs_.assign(capacity, PairSlot{kEmpty, 0, 0});
  bpe.pair_mask_ = capacity - 1;
  std::string merged;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& m = spec.merges[rank];
    std::string_view left = spec.View(m.left);
    std::string_view right = spec.View(m.right);
    auto l = bpe.TokenToId(left);
    if (!l)
      return Status::DataLoss(
          fmt::format("model.merges[{}]: token {} is not in the vocabulary", rank, QuoteToken(left)));
    auto r = bpe.TokenToId(right);
    if (!r)
      return Status::DataLoss(
          fmt::format("model.merges[{}]: token {} is not in the vocabulary", rank, QuoteToken(right)));
    merged.assign(left);
    merged.append(right);
    auto n = bpe.TokenToId(merged);
    if (!n) {
      return Status::DataLoss(
          fmt::format("model.merges[{}]: merged token {} is not in the vocabulary", rank, QuoteToken(merged)));
    }
    bpe.InsertPair(*l, *r, static_cast<uint32_t>(rank), *n);
  }

  bpe.bmp_ids_.assign(0x10000, -1);
  for (const auto& e : spec.vocab) {
    std::string_view token = spec.View(e.token);
    if (token.empty()) continue;
    uint32_t cp;
    if (DecodeUtf8(token, 0, &cp) != token.size() || cp == kInvalidCodepoint) continue;
    if (cp < 0x10000) {
      bpe.bmp_ids_[cp] = e.id;
    } else {
      bpe.astral_ids_[cp] = e.id;
    }
  }

  bpe.byte_ids_.fill(-1);
  bool all_bytes = spec.byte_fallback;
  if (spec.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      auto id = bpe.TokenToId(fmt::format("<0x{:02X}>", b));
      if (id) {
        bpe.byte_ids_[b] = *id;
      } else {
        all_bytes = false;
      }
    }
  }
  if (spec.unk_token) {
    auto id = bpe.TokenToId(*spec.unk_token);
    if (!id)
      return Status::DataLoss(fmt::format("model.unk_token: {} is not in the vocabulary", QuoteToken(*spec.unk_token)));
    bpe.unk_id_ = *id;
  } else if (!all_bytes) {
    return Status::DataLoss(
        "model: no unk_token, and byte_fallback is off or lacks some <0xXX> tokens, so some text could not be "
        "encoded");
  }
  return bpe;
}

bool Bpe::InsertToken(int32_t id) {
  const std::string_view token = id_to_token_[id];
  const uint64_t h = TextHash(token);
  for (uint64_t i = h & token_mask_;; i = (i + 1) & token_mask_) {
    TokenSlot& slot = token_slots_[i];
    if (slot.id < 0) {
      slot = TokenSlot{static_cast<uint32_t>(h >> 32), id};
      return true;
    }
    if (slot.hash == static_cast<uint32_t>(h >> 32) && id_to_token_[slot.id] == token) return false;
  }
}

std::optional<int32_t> Bpe::TokenToId(std::string_view token) const {
  if (token_slots_.empty()) return std::nullopt;
  const uint64_t h = TextHash(token);
  for (uint64_t i = h & token_mask_;; i = (i + 1) & token_mask_) {
    const TokenSlot& slot = token_slots_[i];
    if (slot.id < 0) return std::nullopt;
    if (slot.hash == static_cast<uint32_t>(h >> 32) && id_to_token_[slot.id] == token) return slot.id;
  }
}

const Bpe::PairSlot* Bpe::FindPair(int32_t left, int32_t right) const {
  const uint64_t key = PairKey(left, right);
  for (uint64_t i = PairHash(key) & pair_mask_;; i = (i + 1) & pair_mask_) {
    const PairSlot& slot = pairs_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmpty) return nullptr;
  }
}

void Bpe::InsertPair(int32_t left, int32_t right, uint32_t rank, int32_t new_id) {
  const uint64_t key = PairKey(left, right);
  for (uint64_t i = PairHash(key) & pair_mask_;; i = (i + 1) & pair_mask_) {
    PairSlot& slot = pairs_[i];
    if (slot.key == kEmpty || slot.key == key) {
      slot = PairSlot{key, rank, new_id};
      return;
    }
  }
}

int32_t Bpe::CharId(uint32_t codepoint) const {
  if (codepoint < 0x10000) return bmp_ids_[codepoint];
  if (codepoint == kInvalidCodepoint) return -1;
  auto it = astral_ids_.find(codepoint);
  return it == astral_ids_.end() ? -1 : it->second;
}

void Bpe::EncodeWord(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = TokenToId(word)) {
      out.push_back(*id);
      return;
    }
  }

  // Initial symbols, as tokenizers' BPE::merge_word builds them.
  auto& symbols = scratch.symbols;
  symbols.clear();
  auto add = [&symbols](int32_t id, uint32_t len) {
    const auto index = static_cast<int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back(BpeScratch::Symbol{id, index - 1, -1, len});
  };
  uint32_t unk_len = 0;  // pending unknown bytes, not yet added
  for (size_t pos = 0; pos < word.size();) {
    uint32_t cp;
    const size_t len = DecodeUtf8(word, pos, &cp);
    const int32_t id = CharId(cp);
    bool bytes_ok = id < 0;
    for (size_t i = 0; bytes_ok && i < len; ++i) {
      bytes_ok = byte_ids_[static_cast<unsigned char>(word[pos + i])] >= 0;
    }
    if (id >= 0 || bytes_ok) {
      if (unk_len > 0) {
        add(unk_id_, unk_len);
        unk_len = 0;
      }
      if (id >= 0) {
        add(id, static_cast<uint32_t>(len));
      } else {
        for (size_t i = 0; i < len; ++i) add(byte_ids_[static_cast<unsigned char>(word[pos + i])], 1);
      }
    } else if (unk_len > 0 && !fuse_unk_) {
      add(unk_id_, unk_len);
      unk_len = static_cast<uint32_t>(len);
    } else {
      unk_len += static_cast<uint32_t>(len);
    }
    pos += len;
  }
  if (unk_len > 0) add(unk_id_, unk_len);

  MergeAll(scratch);
  for (const auto& s : symbols) {
    if (s.len > 0) out.push_back(s.id);
  }
}

// tokenizers' Word::merge_all (without dropout), step for step.
void Bpe::MergeAll(BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  heap.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const PairSlot* p = FindPair(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back(BpeScratch::Merge{p->rank, static_cast<uint32_t>(i), symbols[i].id, symbols[i + 1].id, p->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), MergeAfter{});

  auto push = [&heap](const PairSlot* p, int32_t pos, int32_t left, int32_t right) {
    heap.push_back(BpeScratch::Merge{p->rank, static_cast<uint32_t>(pos), left, right, p->new_id});
    std::push_heap(heap.begin(), heap.end(), MergeAfter{});
  };

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), MergeAfter{});
    const BpeScratch::Merge top = heap.back();
    heap.pop_back();

    BpeScratch::Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next == -1) continue;  // merged away, or now the last symbol
    const int32_t right_pos = left.next;
    const BpeScratch::Symbol right = symbols[right_pos];
    // A stale entry: the pair at this position changed since it was pushed. tokenizers re-looks
    // the pair up and compares the merged id; comparing the pair's ids is equivalent, because a
    // symbol only changes by absorbing its right neighbour, which changes the pair's text.
    if (left.id != top.left || right.id != top.right) continue;

    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    symbols[right_pos].len = 0;
    if (right.next != -1) symbols[right.next].prev = static_cast<int32_t>(top.pos);

    if (left.prev >= 0) {
      const int32_t prev_id = symbols[left.prev].id;
      if (const PairSlot* p = FindPair(prev_id, left.id)) push(p, left.prev, prev_id, left.id);
    }
    if (left.next >= 0) {
      const int32_t next_id = symbols[left.next].id;
      if (const PairSlot* p = FindPair(left.id, next_id)) push(p, static_cast<int32_t>(top.pos), left.id, next_id);
    }
  }
}

}  // namespace temper::engine
