// Grammar: a context-free grammar over bytes, the form every constraint on generated text compiles
// to (json_schema_grammar.h makes one from a JSON schema), and GrammarState, the set of places a
// recognizer can be in after the bytes so far.
//
// A rule is a list of alternatives; an alternative a sequence of elements; an element a set of
// bytes or a reference to a rule. Repetition is right recursion (`list ::= item list | ""`), and a
// reference in last position is a tail call, so a recognizer's stacks stay as deep as the nesting
// of the text, not its length. Rules must not be left-recursive (the compiler never makes one).
//
// The recognizer is the one llama.cpp's GBNF sampler uses: a state is the set of stacks of
// positions whose top is a byte set still to match; a byte advances every stack whose top accepts
// it. Several stacks are alive where the grammar is ambiguous so far (optional properties that
// share a prefix). A state is a plain value: equal states compare equal, so masks can be cached
// per state (token_mask.h).
//
// Thread safety: a Grammar is immutable once built; states are values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper::engine {

// 256 bits: which bytes an element accepts.
using ByteSet = std::array<uint64_t, 4>;

struct GrammarElement {
  int rule = -1;    // a reference to rules[rule], or -1 for a byte set
  ByteSet bytes{};  // when rule is -1
  bool Accepts(uint8_t b) const { return (bytes[b >> 6] >> (b & 63)) & 1; }
};

struct GrammarRule {
  std::string name;  // for messages and tests
  std::vector<std::vector<GrammarElement>> alternatives;
};

struct Grammar {
  std::vector<GrammarRule> rules;
  int root = 0;
};

// The fewest bytes each rule matches (for GrammarState::ShortestCompletion); a rule that matches
// nothing finite gets kNoCompletion.
inline constexpr int64_t kNoCompletion = int64_t{1} << 40;
std::vector<int64_t> MinimalLengths(const Grammar& grammar);

// Special tokens a grammar writes (Gemma's <|"|> string delimiter, its tool-call brackets) are
// spelled with marker bytes: 0xF8-0xFF never occur in UTF-8 text, so the vocabulary maps the
// special tokens a grammar may write onto them and drops the byte-fallback tokens of those bytes
// (token_mask.h). TextBytes() is every byte but the markers: what a grammar's free text is made of.
inline constexpr uint8_t kFirstMarkerByte = 0xF8;
struct MarkerToken {
  const char* text;  // the special token's text in the tokenizer
  uint8_t byte;      // the marker byte that spells it in a grammar
};

// The byte ranges each valid UTF-8 multi-byte character is made of (RFC 3629), by its first byte:
// what a grammar's strings are made of (json_schema_grammar.h) and what a plain token is
// (token_mask.h).
struct Utf8Form {
  uint8_t first_lo, first_hi;
  std::array<std::pair<uint8_t, uint8_t>, 3> rest;
  int rest_count;
};
inline constexpr Utf8Form kUtf8Forms[] = {
    {0xc2, 0xdf, {{{0x80, 0xbf}}}, 1},
    {0xe0, 0xe0, {{{0xa0, 0xbf}, {0x80, 0xbf}}}, 2},
    {0xe1, 0xec, {{{0x80, 0xbf}, {0x80, 0xbf}}}, 2},
    {0xed, 0xed, {{{0x80, 0x9f}, {0x80, 0xbf}}}, 2},
    {0xee, 0xef, {{{0x80, 0xbf}, {0x80, 0xbf}}}, 2},
    {0xf0, 0xf0, {{{0x90, 0xbf}, {0x80, 0xbf}, {0x80, 0xbf}}}, 3},
    {0xf1, 0xf3, {{{0x80, 0xbf}, {0x80, 0xbf}, {0x80, 0xbf}}}, 3},
    {0xf4, 0xf4, {{{0x80, 0x8f}, {0x80, 0xbf}, {0x80, 0xbf}}}, 3},
};

// Builders for byte sets.
ByteSet TextBytes();
ByteSet Bytes(std::string_view chars);           // exactly these bytes
ByteSet ByteRange(uint8_t first, uint8_t last);  // first..last inclusive
ByteSet AnyByteExcept(std::string_view chars);   // every text byte but these (never a marker)
GrammarElement Chars(const ByteSet& set);
GrammarElement Ref(int rule);
GrammarElement Marker(uint8_t marker_byte);  // the special token a marker byte stands for
// The elements that match `text` byte for byte.
std::vector<GrammarElement> Literal(std::string_view text);

// A position: element `index` of alternative `alt` of rule `rule`.
struct GrammarPos {
  int32_t rule = 0;
  int32_t alt = 0;
  int32_t index = 0;
  auto operator<=>(const GrammarPos&) const = default;
};
using GrammarStack = std::vector<GrammarPos>;  // bottom first; the top is a byte-set position

class GrammarState {
 public:
  // The state before any byte: every way the root can start.
  static GrammarState Start(const Grammar& grammar);
  // The state after `byte`; empty (dead) when no stack accepts it.
  GrammarState Advance(const Grammar& grammar, uint8_t byte) const;
  // Numbers each byte by which stacks accept it: bytes of one class lead to the same state, so a
  // table of every byte's transition takes one Advance per class. Class 0 is the bytes no stack
  // accepts (dead). Returns the number of classes.
  int ByteClasses(const Grammar& grammar, std::array<uint16_t, 256>& classes) const;
  bool Dead() const { return stacks_.empty() && !complete_; }
  // The text so far is a whole sentence of the grammar (generation may end here).
  bool Complete() const { return complete_; }
  // More bytes may follow.
  bool CanContinue() const { return !stacks_.empty(); }
  // The fewest bytes that make the text so far whole (0 when it is); `min_lengths` is
  // MinimalLengths(grammar).
  int64_t ShortestCompletion(const Grammar& grammar, const std::vector<int64_t>& min_lengths) const;
  bool operator==(const GrammarState&) const = default;
  uint64_t Hash() const;

 private:
  // Adds `stack` with its top resolved to byte-set positions (references expanded, finished
  // sequences popped); a stack that empties marks the state complete.
  void AddResolved(const Grammar& grammar, GrammarStack stack);
  void Normalize();

  std::vector<GrammarStack> stacks_;  // sorted, unique
  bool complete_ = false;
};

}  // namespace temper::engine
