#include "engine/constrain/grammar.h"

#include <algorithm>

namespace temper::engine {
namespace {

void SetByte(ByteSet& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

// Recursion guard while resolving references: a grammar whose rule can reach itself without
// consuming a byte first would loop; the compiler never builds one, and this bound keeps a
// mistaken grammar from hanging (the stack is then dropped).
constexpr size_t kMaxResolveDepth = 256;

}  // namespace

ByteSet Bytes(std::string_view chars) {
  ByteSet set{};
  for (char c : chars) SetByte(set, static_cast<uint8_t>(c));
  return set;
}

ByteSet ByteRange(uint8_t first, uint8_t last) {
  ByteSet set{};
  for (int b = first; b <= last; ++b) SetByte(set, static_cast<uint8_t>(b));
  return set;
}

ByteSet TextBytes() { return ByteRange(0, kFirstMarkerByte - 1); }

ByteSet AnyByteExcept(std::string_view chars) {
  ByteSet set = TextBytes();
  for (char c : chars) {
    const uint8_t b = static_cast<uint8_t>(c);
    set[b >> 6] &= ~(uint64_t{1} << (b & 63));
  }
  return set;
}

GrammarElement Chars(const ByteSet& set) { return GrammarElement{-1, set}; }
GrammarElement Ref(int rule) { return GrammarElement{rule, {}}; }
GrammarElement Marker(uint8_t marker_byte) { return Chars(ByteRange(marker_byte, marker_byte)); }

std::vector<GrammarElement> Literal(std::string_view text) {
  std::vector<GrammarElement> out;
  for (char c : text) out.push_back(Chars(Bytes(std::string_view(&c, 1))));
  return out;
}

namespace {

int64_t SequenceLength(const std::vector<GrammarElement>& seq, size_t from, const std::vector<int64_t>& lengths) {
  int64_t n = 0;
  for (size_t i = from; i < seq.size(); ++i) n += seq[i].rule < 0 ? 1 : lengths[static_cast<size_t>(seq[i].rule)];
  return std::min(n, kNoCompletion);
}

}  // namespace

std::vector<int64_t> MinimalLengths(const Grammar& grammar) {
  // Relaxation to the fixed point: each pass can only shorten a rule, and a rule's shortest match
  // uses at most as many rules as the grammar has, so this ends.
  std::vector<int64_t> lengths(grammar.rules.size(), kNoCompletion);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      for (const auto& alt : grammar.rules[r].alternatives) {
        const int64_t n = SequenceLength(alt, 0, lengths);
        if (n < lengths[r]) {
          lengths[r] = n;
          changed = true;
        }
      }
    }
  }
  return lengths;
}

int64_t GrammarState::ShortestCompletion(const Grammar& grammar, const std::vector<int64_t>& min_lengths) const {
  if (complete_) return 0;
  int64_t best = kNoCompletion;
  for (const GrammarStack& stack : stacks_) {
    // Every frame finishes its sequence; frames below the top already point past their call.
    int64_t n = 0;
    for (const GrammarPos& p : stack) {
      const auto& seq = grammar.rules[static_cast<size_t>(p.rule)].alternatives[static_cast<size_t>(p.alt)];
      n += SequenceLength(seq, static_cast<size_t>(p.index), min_lengths);
    }
    best = std::min(best, n);
  }
  return best;
}

GrammarState GrammarState::Start(const Grammar& grammar) {
  GrammarState s;
  const GrammarRule& root = grammar.rules[static_cast<size_t>(grammar.root)];
  for (size_t alt = 0; alt < root.alternatives.size(); ++alt) {
    s.AddResolved(grammar, {GrammarPos{grammar.root, static_cast<int32_t>(alt), 0}});
  }
  s.Normalize();
  return s;
}

void GrammarState::AddResolved(const Grammar& grammar, GrammarStack stack) {
  // Pop finished sequences: the position below continues after the reference it called.
  while (!stack.empty()) {
    const GrammarPos& top = stack.back();
    const auto& seq = grammar.rules[static_cast<size_t>(top.rule)].alternatives[static_cast<size_t>(top.alt)];
    if (static_cast<size_t>(top.index) < seq.size()) break;
    stack.pop_back();
  }
  if (stack.empty()) {
    complete_ = true;
    return;
  }
  if (stack.size() > kMaxResolveDepth) return;
  const GrammarPos top = stack.back();
  const auto& seq = grammar.rules[static_cast<size_t>(top.rule)].alternatives[static_cast<size_t>(top.alt)];
  const GrammarElement& e = seq[static_cast<size_t>(top.index)];
  if (e.rule < 0) {
    stacks_.push_back(std::move(stack));
    return;
  }
  // A reference: continue after it (or, in last position, return straight to the caller's caller:
  // a tail call keeps repetitions from growing the stack), then enter each alternative.
  stack.back().index++;
  const GrammarRule& callee = grammar.rules[static_cast<size_t>(e.rule)];
  for (size_t alt = 0; alt < callee.alternatives.size(); ++alt) {
    GrammarStack next = stack;
    while (!next.empty()) {
      const GrammarPos& t = next.back();
      const auto& s = grammar.rules[static_cast<size_t>(t.rule)].alternatives[static_cast<size_t>(t.alt)];
      if (static_cast<size_t>(t.index) < s.size()) break;
      next.pop_back();
    }
    next.push_back(GrammarPos{e.rule, static_cast<int32_t>(alt), 0});
    AddResolved(grammar, std::move(next));
  }
}

void GrammarState::Normalize() {
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

GrammarState GrammarState::Advance(const Grammar& grammar, uint8_t byte) const {
  GrammarState next;
  for (const GrammarStack& stack : stacks_) {
    const GrammarPos& top = stack.back();
    const GrammarElement& e = grammar.rules[static_cast<size_t>(top.rule)]
                                  .alternatives[static_cast<size_t>(top.alt)][static_cast<size_t>(top.index)];
    if (!e.Accepts(byte)) continue;
    GrammarStack advanced = stack;
    advanced.back().index++;
    next.AddResolved(grammar, std::move(advanced));
  }
  next.Normalize();
  return next;
}

int GrammarState::ByteClasses(const Grammar& grammar, std::array<uint16_t, 256>& classes) const {
  // Refined stack by stack: a class splits into the bytes the stack's top accepts and the rest.
  classes.fill(0);
  int count = 1;
  for (const GrammarStack& stack : stacks_) {
    const GrammarPos& top = stack.back();
    const GrammarElement& e = grammar.rules[static_cast<size_t>(top.rule)]
                                  .alternatives[static_cast<size_t>(top.alt)][static_cast<size_t>(top.index)];
    std::array<int, 512> ids;  // classes as split (at most 2 x 256), numbered again densely
    std::array<int, 256> next;
    ids.fill(-1);
    ids[0] = 0;
    count = 1;
    for (size_t b = 0; b < 256; ++b) {
      int c = classes[b];
      if (e.Accepts(static_cast<uint8_t>(b))) c = 256 + c;
      if (ids[static_cast<size_t>(c)] < 0) ids[static_cast<size_t>(c)] = count++;
      next[b] = ids[static_cast<size_t>(c)];
    }
    for (size_t b = 0; b < 256; ++b) classes[b] = static_cast<uint16_t>(next[b]);
  }
  return count;
}

uint64_t GrammarState::Hash() const {
  uint64_t h = complete_ ? 0x9e3779b97f4a7c15ull : 0;
  for (const GrammarStack& stack : stacks_) {
    for (const GrammarPos& p : stack) {
      for (int32_t v : {p.rule, p.alt, p.index}) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ull + 0x51ed27;
    }
    h = (h ^ 0xff) * 0x100000001b3ull;
  }
  return h;
}

}  // namespace temper::engine
