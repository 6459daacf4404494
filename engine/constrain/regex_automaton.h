// CharDfa: a deterministic automaton over Unicode code points, what a JSON schema's `pattern` and
// `format` compile to before the schema's grammar spells its strings (json_schema_grammar.h), and the
// operations that grammar needs on it: intersection (a pattern with a length, with the rule that a
// string never holds "<|" or "|>"), and trimming to the states from which the string can still end.
//
// RegexDfa reads the subset of ECMA-262 regular expressions that schemas use: literals; escapes
// (\d \D \w \W \s \S, \n \r \t \f \v \0, \xHH, \uHHHH, \u{H..}, \cX, and any escaped punctuation);
// `.` (any character but line terminators); classes with ranges and negation ([a-z_], [^"\\]);
// groups ((...), (?:...), (?<name>...)); alternation; the quantifiers ? * + {m} {m,} {m,n} (lazy
// forms read as greedy: the language is the same); `^` and `$` at the ends of a top-level
// alternative. A pattern matches anywhere in the string, as JSON Schema says: a side of an
// alternative without its anchor matches any text there. Refused, naming the construct and its
// offset (in characters): backreferences, lookaround, word boundaries, Unicode property escapes,
// inline flags, and anchors anywhere else.
//
// Bounded: a pattern whose automaton has more than kMaxPatternStates states (or whose repetitions
// unroll to more than kMaxNfaStates), or an intersection of more than kMaxDfaStates (a pattern with
// a maxLength multiplies them: pydantic's HttpUrl is format uri and maxLength 2083), is refused
// rather than built; each state becomes a grammar rule.
//
// Thread safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::engine {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;
inline constexpr size_t kMaxPatternStates = 4096;
inline constexpr size_t kMaxDfaStates = 65536;
inline constexpr size_t kMaxNfaStates = 65536;
// Trim merges equivalent states of automata up to this size; past it (a long length counted into a
// pattern) the refinement's rounds, up to one per state, would cost more than the merge saves.
inline constexpr size_t kMaxMergedStates = 256;

// A set of code points: sorted, disjoint, non-adjacent ranges (inclusive). Surrogates
// (U+D800-U+DFFF) are never members: UTF-8 cannot spell them.
struct CodeRange {
  char32_t lo, hi;
  bool operator==(const CodeRange&) const = default;
};
using CodeSet = std::vector<CodeRange>;

CodeSet AnyCodePoint();
CodeSet CodePoints(std::u32string_view chars);  // exactly these
CodeSet Intersection(const CodeSet& a, const CodeSet& b);
CodeSet Difference(const CodeSet& a, const CodeSet& b);
bool Contains(const CodeSet& set, char32_t c);

struct CharDfa {
  struct Edge {
    CodeSet chars;  // the edges of a state are disjoint
    int to = 0;
  };
  struct State {
    std::vector<Edge> edges;
    bool accepting = false;
  };
  std::vector<State> states;  // states[0] is the start; no states: the empty language
};

// `pattern`'s automaton (see above). Errors: InvalidArgument naming the construct and offset
// ("lookahead '(?=' at offset 3 is not supported"), or the size.
Result<CharDfa> RegexDfa(std::string_view pattern);

// The strings both accept, trimmed. Errors: InvalidArgument when it would exceed kMaxDfaStates.
Result<CharDfa> Intersect(const CharDfa& a, const CharDfa& b);

// Keeps the states reachable from the start from which an accepting state is reachable, and
// merges equivalent ones (up to kMaxMergedStates); no states when the language is empty. Every state
// of the result can end.
CharDfa Trim(const CharDfa& dfa);

// Every string but the ones in `words` (UTF-8).
CharDfa AllStringsExcept(const std::vector<std::string>& words);

// The UTF-8 byte ranges that spell the code points lo..hi: each sequence a byte range per byte
// (the ranges of one sequence multiply out to exactly its code points). Surrogates are skipped.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(char32_t lo, char32_t hi);

}  // namespace temper::engine
