#include "engine/constrain/regex_automaton.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace temper::engine {
namespace {

// Sorts, merges and drops the surrogates: the canonical form every CodeSet is kept in.
CodeSet Normalize(std::vector<CodeRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  CodeSet merged;
  for (const CodeRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  CodeSet out;
  for (const CodeRange& r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
  }
  return out;
}

// UTF-8 to code points; nullopt when it is not UTF-8.
std::optional<std::u32string> Decode(std::string_view text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= text.size()) return std::nullopt;
    char32_t c = extra == 0 ? b : b & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<uint8_t>(text[i + static_cast<size_t>(k)]);
      if ((cont & 0xc0) != 0x80) return std::nullopt;
      c = (c << 6) | (cont & 0x3f);
    }
    static constexpr char32_t kFewest[] = {0, 0x80, 0x800, 0x10000};
    if (c < kFewest[extra] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
    out.push_back(c);
    i += 1 + static_cast<size_t>(extra);
  }
  return out;
}

// ECMA-262's \s: white space and line terminators.
CodeSet Whitespace() {
  return Normalize({{'\t', '\r'},
                    {' ', ' '},
                    {0xA0, 0xA0},
                    {0x1680, 0x1680},
                    {0x2000, 0x200A},
                    {0x2028, 0x2029},
                    {0x202F, 0x202F},
                    {0x205F, 0x205F},
                    {0x3000, 0x3000},
                    {0xFEFF, 0xFEFF}});
}
CodeSet WordChars() { return Normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }

// A regular expression as a tree; an empty kConcat matches the empty string.
struct Node {
  enum class Kind { kChars, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;
  CodeSet chars;
  std::vector<Node> kids;
  int min = 0, max = -1;  // kRepeat; max -1: unbounded
};

Node Chars(CodeSet set) { return Node{Node::Kind::kChars, std::move(set), {}, 0, -1}; }
Node AnyText() { return Node{Node::Kind::kRepeat, {}, {Chars(AnyCodePoint())}, 0, -1}; }

// The largest count a {m,n} quantifier may give: each count unrolls into a copy of what it repeats.
constexpr int kMaxRepeat = 1000;

class Parser {
 public:
  explicit Parser(std::u32string p) : p_(std::move(p)) {}

  // Top-level alternatives, each anchored where it says so and open to any text where not.
  Result<Node> Top() {
    Node alt{Node::Kind::kAlt};
    do {
      bool start = false, end = false;
      TEMPER_ASSIGN_OR_RETURN(Node seq, Sequence(true, &start, &end));
      Node wrapped;
      if (!start) wrapped.kids.push_back(AnyText());
      wrapped.kids.push_back(std::move(seq));
      if (!end) wrapped.kids.push_back(AnyText());
      alt.kids.push_back(std::move(wrapped));
    } while (Eat('|'));
    if (i_ < p_.size()) return Error(fmt::format("unbalanced ')' at offset {}", i_));
    return alt;
  }

 private:
  static Status Error(std::string message) { return Status::InvalidArgument(std::move(message)); }
  static Status Unsupported(std::string_view what, size_t at) {
    return Error(fmt::format("{} at offset {} is not supported", what, at));
  }
  bool Eat(char32_t c) {
    if (i_ < p_.size() && p_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Ahead(std::u32string_view s) const { return p_.compare(i_, s.size(), s) == 0; }

  Result<Node> Alternation() {
    Node alt{Node::Kind::kAlt};
    do {
      TEMPER_ASSIGN_OR_RETURN(Node seq, Sequence(false, nullptr, nullptr));
      alt.kids.push_back(std::move(seq));
    } while (Eat('|'));
    return alt;
  }

  Result<Node> Sequence(bool top, bool* start, bool* end) {
    Node seq;
    if (top && Eat('^')) *start = true;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        if (top && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) {
          ++i_;
          *end = true;
          break;
        }
        return Unsupported("anchor '$' before the end", i_);
      }
      if (p_[i_] == '^') return Unsupported("anchor '^' after the start", i_);
      TEMPER_ASSIGN_OR_RETURN(Node atom, Atom());
      TEMPER_ASSIGN_OR_RETURN(atom, Quantified(std::move(atom)));
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  // {m}, {m,} or {m,n} at i_, which holds '{'; nullopt (i_ unmoved) when it is not one: then the
  // '{' is a literal (ECMA-262 Annex B, as browsers and Python read it).
  std::optional<std::pair<int64_t, int64_t>> Braces() {
    size_t j = i_ + 1;
    auto number = [&]() -> std::optional<int64_t> {
      const size_t from = j;
      int64_t v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = std::min<int64_t>(v * 10 + (p_[j] - '0'), int64_t{1} << 40);
        ++j;
      }
      if (j == from) return std::nullopt;
      return v;
    };
    const std::optional<int64_t> m = number();
    if (!m) return std::nullopt;
    int64_t n = *m;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      const std::optional<int64_t> upper = number();
      n = upper ? *upper : -1;
    }
    if (j >= p_.size() || p_[j] != '}') return std::nullopt;
    i_ = j + 1;
    return std::make_pair(*m, n);
  }

  Result<Node> Quantified(Node atom) {
    if (i_ >= p_.size()) return atom;
    const size_t at = i_;
    int64_t min = 0, max = 0;
    if (Eat('?')) {
      max = 1;
    } else if (Eat('*')) {
      max = -1;
    } else if (Eat('+')) {
      min = 1;
      max = -1;
    } else if (p_[i_] == '{') {
      const auto braces = Braces();
      if (!braces) return atom;
      std::tie(min, max) = *braces;
    } else {
      return atom;
    }
    if (min > kMaxRepeat || max > kMaxRepeat) {
      return Error(fmt::format("a repetition count over {} at offset {} is not supported", kMaxRepeat, at));
    }
    if (max >= 0 && min > max)
      return Error(fmt::format("repetition {{{},{}}} out of order at offset {}", min, max, at));
    Eat('?');  // lazy: the same strings
    return Node{Node::Kind::kRepeat, {}, {std::move(atom)}, static_cast<int>(min), static_cast<int>(max)};
  }

  Result<Node> Atom() {
    const size_t at = i_;
    const char32_t c = p_[i_];
    if (c == '(') {
      ++i_;
      if (Ahead(U"?:")) {
        i_ += 2;
      } else if (Ahead(U"?=") || Ahead(U"?!")) {
        return Unsupported(fmt::format("lookahead '(?{}'", static_cast<char>(p_[i_ + 1])), at);
      } else if (Ahead(U"?<=") || Ahead(U"?<!")) {
        return Unsupported(fmt::format("lookbehind '(?<{}'", static_cast<char>(p_[i_ + 2])), at);
      } else if (Ahead(U"?<") || Ahead(U"?P<")) {
        const size_t close = p_.find('>', i_);
        if (close == std::u32string::npos) return Error(fmt::format("unclosed group name at offset {}", at));
        i_ = close + 1;
      } else if (Ahead(U"?")) {
        return Unsupported("group flags '(?'", at);
      }
      TEMPER_ASSIGN_OR_RETURN(Node inner, Alternation());
      if (!Eat(')')) return Error(fmt::format("unclosed '(' at offset {}", at));
      return inner;
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++i_;
      return Chars(Difference(AnyCodePoint(), CodePoints(U"\n\r\u2028\u2029")));
    }
    if (c == '\\') {
      TEMPER_ASSIGN_OR_RETURN(Escaped e, Escape(false));
      return Chars(std::move(e.set));
    }
    if (c == '*' || c == '+' || c == '?')
      return Error(fmt::format("nothing to repeat before '{}' at offset {}", static_cast<char>(c), at));
    if (c == '{' && Braces()) return Error(fmt::format("nothing to repeat before '{{' at offset {}", at));
    ++i_;
    return Chars(CodePoints(std::u32string(1, c)));
  }

  struct Escaped {
    CodeSet set;
    std::optional<char32_t> single;  // the one character it stands for, when it is one
  };

  Result<char32_t> Hex(size_t digits, size_t at) {
    char32_t v = 0;
    for (size_t k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<int>(p_[i_] < 0x80 ? p_[i_] : 'g'))) {
        return Error(fmt::format("a bad hexadecimal escape at offset {}", at));
      }
      const char32_t h = p_[i_];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After the backslash at i_.
  Result<Escaped> Escape(bool in_class) {
    const size_t at = i_;
    ++i_;
    if (i_ >= p_.size()) return Error(fmt::format("a trailing '\\' at offset {}", at));
    const char32_t c = p_[i_++];
    auto one = [](char32_t ch) { return Escaped{CodePoints(std::u32string(1, ch)), ch}; };
    switch (c) {
      case 'd':
        return Escaped{Normalize({{'0', '9'}}), std::nullopt};
      case 'D':
        return Escaped{Difference(AnyCodePoint(), Normalize({{'0', '9'}})), std::nullopt};
      case 'w':
        return Escaped{WordChars(), std::nullopt};
      case 'W':
        return Escaped{Difference(AnyCodePoint(), WordChars()), std::nullopt};
      case 's':
        return Escaped{Whitespace(), std::nullopt};
      case 'S':
        return Escaped{Difference(AnyCodePoint(), Whitespace()), std::nullopt};
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case 'b':
        if (in_class) return one('\b');
        return Unsupported("word boundary '\\b'", at);
      case 'B':
        return Unsupported("word boundary '\\B'", at);
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') return Unsupported("octal escape", at);
        return one(0);
      case 'x': {
        TEMPER_ASSIGN_OR_RETURN(char32_t v, Hex(2, at));
        return one(v);
      }
      case 'u': {
        char32_t v = 0;
        if (Eat('{')) {
          const size_t close = p_.find('}', i_);
          if (close == std::u32string::npos || close == i_ || close - i_ > 6) {
            return Error(fmt::format("a bad '\\u{{' escape at offset {}", at));
          }
          TEMPER_ASSIGN_OR_RETURN(v, Hex(close - i_, at));
          ++i_;
        } else {
          TEMPER_ASSIGN_OR_RETURN(v, Hex(4, at));
          // A surrogate pair written as two escapes is one character.
          if (v >= 0xD800 && v <= 0xDBFF && Ahead(U"\\u")) {
            i_ += 2;
            TEMPER_ASSIGN_OR_RETURN(char32_t low, Hex(4, at));
            if (low < 0xDC00 || low > 0xDFFF) return Error(fmt::format("a lone surrogate at offset {}", at));
            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
          }
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
          return Error(fmt::format("a lone surrogate or a code point past U+10FFFF at offset {}", at));
        }
        return one(v);
      }
      case 'c':
        if (i_ < p_.size() && ((p_[i_] >= 'a' && p_[i_] <= 'z') || (p_[i_] >= 'A' && p_[i_] <= 'Z'))) {
          return one(p_[i_++] % 32);
        }
        return Error(fmt::format("a bad '\\c' escape at offset {}", at));
      case 'p':
      case 'P':
        return Unsupported(fmt::format("Unicode property escape '\\{}'", static_cast<char>(c)), at);
      case 'k':
        return Unsupported("backreference '\\k'", at);
      default:
        break;
    }
    if (c >= '1' && c <= '9') return Unsupported(fmt::format("backreference '\\{}'", static_cast<char>(c)), at);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return Unsupported(fmt::format("escape '\\{}'", static_cast<char>(c)), at);
    }
    return one(c);  // escaped punctuation stands for itself
  }

  Result<Node> Class() {
    const size_t at = i_;
    ++i_;
    const bool negate = Eat('^');
    std::vector<CodeRange> ranges;
    while (true) {
      if (i_ >= p_.size()) return Error(fmt::format("unclosed '[' at offset {}", at));
      if (Eat(']')) break;
      TEMPER_ASSIGN_OR_RETURN(Escaped lo, Member());
      if (lo.single && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        const size_t dash = i_++;
        TEMPER_ASSIGN_OR_RETURN(Escaped hi, Member());
        if (!hi.single || *hi.single < *lo.single) {
          return Error(fmt::format("a bad class range at offset {}", dash));
        }
        ranges.push_back({*lo.single, *hi.single});
        continue;
      }
      ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
    }
    CodeSet set = Normalize(std::move(ranges));
    return Chars(negate ? Difference(AnyCodePoint(), set) : set);
  }

  Result<Escaped> Member() {
    if (p_[i_] == '\\') return Escape(true);
    const char32_t c = p_[i_++];
    return Escaped{CodePoints(std::u32string(1, c)), c};
  }

  std::u32string p_;
  size_t i_ = 0;
};

// Thompson's construction: a state has epsilon moves and at most one move on a set of characters.
struct Nfa {
  struct State {
    std::vector<int> eps;
    CodeSet chars;
    int to = -1;
  };
  std::vector<State> states;
  int New() {
    states.emplace_back();
    return static_cast<int>(states.size() - 1);
  }
};

struct Fragment {
  int start, end;
};

Result<Fragment> Build(const Node& n, Nfa& nfa) {
  if (nfa.states.size() > kMaxNfaStates) {
    return Status::InvalidArgument(fmt::format("the pattern unrolls to more than {} states", kMaxNfaStates));
  }
  switch (n.kind) {
    case Node::Kind::kChars: {
      const int s = nfa.New(), e = nfa.New();
      nfa.states[static_cast<size_t>(s)].chars = n.chars;
      nfa.states[static_cast<size_t>(s)].to = e;
      return Fragment{s, e};
    }
    case Node::Kind::kConcat: {
      const int s = nfa.New();
      int end = s;
      for (const Node& k : n.kids) {
        TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(k, nfa));
        nfa.states[static_cast<size_t>(end)].eps.push_back(f.start);
        end = f.end;
      }
      return Fragment{s, end};
    }
    case Node::Kind::kAlt: {
      const int s = nfa.New(), e = nfa.New();
      for (const Node& k : n.kids) {
        TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(k, nfa));
        nfa.states[static_cast<size_t>(s)].eps.push_back(f.start);
        nfa.states[static_cast<size_t>(f.end)].eps.push_back(e);
      }
      return Fragment{s, e};
    }
    case Node::Kind::kRepeat: {
      const int s = nfa.New();
      int end = s;
      for (int i = 0; i < n.min; ++i) {
        TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(n.kids[0], nfa));
        nfa.states[static_cast<size_t>(end)].eps.push_back(f.start);
        end = f.end;
      }
      if (n.max < 0) {
        TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(n.kids[0], nfa));
        const int e = nfa.New();
        nfa.states[static_cast<size_t>(end)].eps.push_back(f.start);
        nfa.states[static_cast<size_t>(end)].eps.push_back(e);
        nfa.states[static_cast<size_t>(f.end)].eps.push_back(f.start);
        nfa.states[static_cast<size_t>(f.end)].eps.push_back(e);
        return Fragment{s, e};
      }
      const int e = nfa.New();
      for (int i = n.min; i < n.max; ++i) {
        TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(n.kids[0], nfa));
        nfa.states[static_cast<size_t>(end)].eps.push_back(f.start);
        nfa.states[static_cast<size_t>(end)].eps.push_back(e);
        end = f.end;
      }
      nfa.states[static_cast<size_t>(end)].eps.push_back(e);
      return Fragment{s, e};
    }
  }
  return Status::Internal("unknown regex node");
}

std::vector<int> Closure(const Nfa& nfa, std::vector<int> set) {
  std::vector<bool> seen(nfa.states.size());
  std::vector<int> stack = set, out;
  for (int s : set) seen[static_cast<size_t>(s)] = true;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    out.push_back(s);
    for (int t : nfa.states[static_cast<size_t>(s)].eps) {
      if (!seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = true;
        stack.push_back(t);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status TooLarge(size_t limit) {
  return Status::InvalidArgument(fmt::format("the automaton would exceed {} states", limit));
}

// Subset construction over the elementary intervals of each state's character sets.
Result<CharDfa> Determinize(const Nfa& nfa, Fragment f) {
  CharDfa dfa;
  std::map<std::vector<int>, int> ids;
  std::deque<std::vector<int>> queue;
  auto id_of = [&](std::vector<int> set) {
    auto [it, fresh] = ids.try_emplace(set, static_cast<int>(ids.size()));
    if (fresh) {
      dfa.states.emplace_back();
      dfa.states.back().accepting = std::binary_search(set.begin(), set.end(), f.end);
      queue.push_back(std::move(set));
    }
    return it->second;
  };
  id_of(Closure(nfa, {f.start}));
  for (int current = 0; !queue.empty(); ++current) {
    if (ids.size() > kMaxPatternStates) return TooLarge(kMaxPatternStates);
    const std::vector<int> set = std::move(queue.front());
    queue.pop_front();
    std::vector<char32_t> bounds;
    for (int s : set) {
      for (const CodeRange& r : nfa.states[static_cast<size_t>(s)].chars) {
        bounds.push_back(r.lo);
        bounds.push_back(r.hi + 1);
      }
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    std::map<int, std::vector<CodeRange>> by_target;
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      std::vector<int> next;
      for (int s : set) {
        const Nfa::State& st = nfa.states[static_cast<size_t>(s)];
        if (st.to >= 0 && Contains(st.chars, bounds[k])) next.push_back(st.to);
      }
      if (next.empty()) continue;
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      by_target[id_of(Closure(nfa, std::move(next)))].push_back({bounds[k], bounds[k + 1] - 1});
    }
    for (auto& [to, ranges] : by_target) {
      dfa.states[static_cast<size_t>(current)].edges.push_back({Normalize(std::move(ranges)), to});
    }
  }
  return dfa;
}

}  // namespace

CodeSet AnyCodePoint() { return Normalize({{0, kMaxCodePoint}}); }

CodeSet CodePoints(std::u32string_view chars) {
  std::vector<CodeRange> ranges;
  for (char32_t c : chars) ranges.push_back({c, c});
  return Normalize(std::move(ranges));
}

bool Contains(const CodeSet& set, char32_t c) {
  auto it = std::upper_bound(set.begin(), set.end(), c, [](char32_t v, const CodeRange& r) { return v < r.lo; });
  return it != set.begin() && std::prev(it)->hi >= c;
}

CodeSet Intersection(const CodeSet& a, const CodeSet& b) {
  CodeSet out;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const char32_t lo = std::max(a[i].lo, b[j].lo), hi = std::min(a[i].hi, b[j].hi);
    if (lo <= hi) out.push_back({lo, hi});
    (a[i].hi < b[j].hi ? i : j)++;
  }
  return out;
}

CodeSet Difference(const CodeSet& a, const CodeSet& b) {
  CodeSet out;
  size_t j = 0;
  for (CodeRange r : a) {
    while (j < b.size() && b[j].hi < r.lo) ++j;
    bool whole = true;
    for (size_t k = j; k < b.size() && b[k].lo <= r.hi; ++k) {
      if (b[k].lo > r.lo) out.push_back({r.lo, b[k].lo - 1});
      if (b[k].hi >= r.hi) {
        whole = false;
        break;
      }
      r.lo = b[k].hi + 1;
    }
    if (whole) out.push_back(r);
  }
  return out;
}

Result<CharDfa> RegexDfa(std::string_view pattern) {
  std::optional<std::u32string> chars = Decode(pattern);
  if (!chars) return Status::InvalidArgument("the pattern is not UTF-8");
  Parser parser(std::move(*chars));
  TEMPER_ASSIGN_OR_RETURN(Node tree, parser.Top());
  Nfa nfa;
  TEMPER_ASSIGN_OR_RETURN(Fragment f, Build(tree, nfa));
  TEMPER_ASSIGN_OR_RETURN(CharDfa dfa, Determinize(nfa, f));
  return Trim(dfa);
}

CharDfa Trim(const CharDfa& dfa) {
  const size_t n = dfa.states.size();
  if (n == 0) return {};
  // Reachable from the start, and able to reach an accepting state.
  std::vector<bool> reached(n), ends(n);
  std::vector<std::vector<int>> into(n);
  std::vector<int> stack = {0};
  reached[0] = true;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (const CharDfa::Edge& e : dfa.states[static_cast<size_t>(s)].edges) {
      into[static_cast<size_t>(e.to)].push_back(s);
      if (!reached[static_cast<size_t>(e.to)]) {
        reached[static_cast<size_t>(e.to)] = true;
        stack.push_back(e.to);
      }
    }
  }
  for (size_t s = 0; s < n; ++s) {
    if (reached[s] && dfa.states[s].accepting) {
      ends[s] = true;
      stack.push_back(static_cast<int>(s));
    }
  }
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int from : into[static_cast<size_t>(s)]) {
      if (!ends[static_cast<size_t>(from)]) {
        ends[static_cast<size_t>(from)] = true;
        stack.push_back(from);
      }
    }
  }
  if (!ends[0]) return {};
  if (n > kMaxMergedStates) {
    // Kept as they are, numbered again without the states that cannot end.
    std::vector<int> number(n, -1);
    CharDfa out;
    for (size_t s = 0; s < n; ++s) {
      if (!ends[s]) continue;
      number[s] = static_cast<int>(out.states.size());
      out.states.push_back({{}, dfa.states[s].accepting});
    }
    for (size_t s = 0; s < n; ++s) {
      if (!ends[s]) continue;
      for (const CharDfa::Edge& e : dfa.states[s].edges) {
        if (ends[static_cast<size_t>(e.to)]) {
          out.states[static_cast<size_t>(number[s])].edges.push_back({e.chars, number[static_cast<size_t>(e.to)]});
        }
      }
    }
    return out;
  }
  // Moore's refinement: states split by acceptance, then by where each character leads, until no
  // class splits further.
  std::vector<int> cls(n, -1);
  for (size_t s = 0; s < n; ++s) {
    if (ends[s]) cls[s] = dfa.states[s].accepting ? 1 : 0;
  }
  size_t classes = 0;
  while (true) {
    std::map<std::vector<uint32_t>, int> ids;
    std::vector<int> next(n, -1);
    for (size_t s = 0; s < n; ++s) {
      if (!ends[s]) continue;
      std::vector<std::pair<CodeRange, int>> moves;
      for (const CharDfa::Edge& e : dfa.states[s].edges) {
        if (!ends[static_cast<size_t>(e.to)]) continue;
        for (const CodeRange& r : e.chars) moves.push_back({r, cls[static_cast<size_t>(e.to)]});
      }
      std::sort(moves.begin(), moves.end(), [](const auto& a, const auto& b) { return a.first.lo < b.first.lo; });
      std::vector<uint32_t> signature = {static_cast<uint32_t>(cls[s])};
      for (const auto& [r, to] : moves) {
        const size_t m = signature.size();
        if (m > 1 && signature[m - 1] == static_cast<uint32_t>(to) && signature[m - 2] + 1 == r.lo) {
          signature[m - 2] = r.hi;
        } else {
          signature.insert(signature.end(), {r.lo, r.hi, static_cast<uint32_t>(to)});
        }
      }
      next[s] = ids.try_emplace(std::move(signature), static_cast<int>(ids.size())).first->second;
    }
    cls = std::move(next);
    if (ids.size() == classes) break;
    classes = ids.size();
  }
  // The classes, numbered in the order a walk from the start meets them.
  std::vector<int> number(classes, -1), representative;
  CharDfa out;
  auto visit = [&](int s) {
    int& k = number[static_cast<size_t>(cls[static_cast<size_t>(s)])];
    if (k < 0) {
      k = static_cast<int>(representative.size());
      representative.push_back(s);
    }
    return k;
  };
  visit(0);
  for (size_t k = 0; k < representative.size(); ++k) {
    const CharDfa::State& st = dfa.states[static_cast<size_t>(representative[k])];
    std::map<int, std::vector<CodeRange>> by_target;
    for (const CharDfa::Edge& e : st.edges) {
      if (!ends[static_cast<size_t>(e.to)]) continue;
      std::vector<CodeRange>& ranges = by_target[visit(e.to)];
      ranges.insert(ranges.end(), e.chars.begin(), e.chars.end());
    }
    CharDfa::State state{{}, st.accepting};
    for (auto& [to, ranges] : by_target) state.edges.push_back({Normalize(std::move(ranges)), to});
    out.states.push_back(std::move(state));
  }
  return out;
}

Result<CharDfa> Intersect(const CharDfa& a, const CharDfa& b) {
  if (a.states.empty() || b.states.empty()) return CharDfa{};
  CharDfa out;
  std::map<std::pair<int, int>, int> ids;
  std::deque<std::pair<int, int>> queue;
  auto id_of = [&](std::pair<int, int> p) {
    auto [it, fresh] = ids.try_emplace(p, static_cast<int>(ids.size()));
    if (fresh) {
      out.states.push_back(
          {{}, a.states[static_cast<size_t>(p.first)].accepting && b.states[static_cast<size_t>(p.second)].accepting});
      queue.push_back(p);
    }
    return it->second;
  };
  id_of({0, 0});
  for (int current = 0; !queue.empty(); ++current) {
    if (ids.size() > kMaxDfaStates) return TooLarge(kMaxDfaStates);
    const auto [x, y] = queue.front();
    queue.pop_front();
    std::map<int, std::vector<CodeRange>> by_target;
    for (const CharDfa::Edge& ea : a.states[static_cast<size_t>(x)].edges) {
      for (const CharDfa::Edge& eb : b.states[static_cast<size_t>(y)].edges) {
        CodeSet both = Intersection(ea.chars, eb.chars);
        if (both.empty()) continue;
        std::vector<CodeRange>& ranges = by_target[id_of({ea.to, eb.to})];
        ranges.insert(ranges.end(), both.begin(), both.end());
      }
    }
    for (auto& [to, ranges] : by_target) {
      out.states[static_cast<size_t>(current)].edges.push_back({Normalize(std::move(ranges)), to});
    }
  }
  return Trim(out);
}

CharDfa AllStringsExcept(const std::vector<std::string>& words) {
  // A trie of the words, and a sink past any character that leaves it: every state accepts but the
  // ends of the words.
  CharDfa dfa;
  dfa.states.push_back({{}, true});  // the sink
  dfa.states[0].edges.push_back({AnyCodePoint(), 0});
  dfa.states.push_back({{}, true});  // the root
  std::vector<std::map<char32_t, int>> children(2);
  for (const std::string& w : words) {
    const std::optional<std::u32string> chars = Decode(w);
    if (!chars) continue;  // not UTF-8: no string of the grammar spells it anyway
    int node = 1;
    for (char32_t c : *chars) {
      auto [it, fresh] = children[static_cast<size_t>(node)].try_emplace(c, static_cast<int>(dfa.states.size()));
      if (fresh) {
        dfa.states.push_back({{}, true});
        children.emplace_back();
      }
      node = it->second;
    }
    dfa.states[static_cast<size_t>(node)].accepting = false;
  }
  for (size_t s = 1; s < dfa.states.size(); ++s) {
    std::u32string out_of;
    for (const auto& [c, to] : children[s]) {
      dfa.states[s].edges.push_back({CodePoints(std::u32string(1, c)), to});
      out_of.push_back(c);
    }
    dfa.states[s].edges.push_back({Difference(AnyCodePoint(), CodePoints(out_of)), 0});
  }
  // Start at the root: swap it into state 0.
  std::swap(dfa.states[0], dfa.states[1]);
  for (CharDfa::State& st : dfa.states) {
    for (CharDfa::Edge& e : st.edges) e.to = e.to == 0 ? 1 : e.to == 1 ? 0 : e.to;
  }
  return Trim(dfa);
}

namespace {

void Encode(char32_t c, uint8_t* out, int& n) {
  if (c < 0x80) {
    out[0] = static_cast<uint8_t>(c);
    n = 1;
  } else if (c < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    n = 2;
  } else if (c < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    n = 3;
  } else {
    out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    n = 4;
  }
}

// Splits lo..hi until each piece has one encoded length and its code points are exactly the
// product of a byte range per position (the method of Rust's utf8-ranges).
void SplitUtf8(char32_t lo, char32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) SplitUtf8(lo, 0xD7FF, out);
    if (hi > 0xDFFF) SplitUtf8(0xE000, hi, out);
    return;
  }
  for (char32_t max : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= max && max < hi) {
      SplitUtf8(lo, max, out);
      SplitUtf8(max + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8(lo, lo | m, out);
        SplitUtf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8(lo, (hi & ~m) - 1, out);
        SplitUtf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  int n = 0;
  Encode(lo, a, n);
  Encode(hi, b, n);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int k = 0; k < n; ++k) seq.push_back({a[k], b[k]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  SplitUtf8(lo, std::min(hi, kMaxCodePoint), out);
  return out;
}

}  // namespace temper::engine
