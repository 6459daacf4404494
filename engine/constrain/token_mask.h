// TokenMasker: which tokens of the vocabulary a Grammar allows next, as a bitmask over token ids.
//
// Every token is its bytes (TokenBytes: byte-fallback tokens "<0xE2>" are the byte, "▁" a space);
// tokens are kept in a trie of their bytes, laid out depth first, so the walk for a state advances
// the recognizer once per trie edge, reading memory in order, and drops a whole subtree at the
// first byte the grammar refuses. Inside a JSON key or a number almost every subtree dies at its
// first byte; inside a free string most survive, which is the slow case: there the walk visits most
// of the trie's million edges. So the recognizer's states are interned and each state's transitions
// are computed once for all 256 bytes, one Advance per class of bytes the same stacks accept, and
// kept in a table: a walk step is then a table lookup. And most of the vocabulary is "plain" —
// whole UTF-8 characters, no '"', '\', '<', '|', '>' or control byte. Where every plain character
// leads the recognizer to one same state, step after step (a string's content: the same state
// again, or the next count of a maxLength), the plain tokens allowed are those with at most as many
// characters as the steps stay alive — a bitset per length, no walk — and only the other tokens are
// walked, in a trie of their own. The same holds where plain characters lead to different states
// but none of them ever dies (the text around an unanchored pattern's match,
// json_schema_grammar.h): every plain token is allowed. States repeat as text is generated too, so
// masks are cached per state: a state met before costs a hash lookup. The end tokens are allowed
// exactly when the text so far is a whole sentence of the grammar; other special tokens never are,
// but the marker tokens a grammar spells (grammar.h).
//
// Near max_tokens, AllowedWithin gives the tokens after which the text can still be made whole in
// the tokens left (GrammarState::ShortestCompletion per state), so a constrained reply ends whole.
//
// GrammarMasks holds a grammar with its vocabulary and masker for every request that uses it, so a
// state's mask is walked once per process, not once per request; GrammarConstraint follows one
// request: the mask for its next token, and the state after a token.
//
// Thread safety: a TokenMasker is used by one thread (its cache); GrammarMasks locks around its
// masker; a GrammarConstraint is used by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/constrain/grammar.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {

// The bytes `id` stands for in generated text; nullopt for special tokens.
std::optional<std::string> TokenBytes(const Tokenizer& tokenizer, int32_t id);

// A bit per token id: bit i of word i / 64.
using TokenBits = std::vector<uint64_t>;
inline bool TokenAllowed(const TokenBits& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

class TokenVocabulary {
 public:
  // `bytes[id]`: the token's bytes, nullopt for tokens a grammar never produces; `end_tokens` end
  // generation (allowed where the grammar is complete).
  TokenVocabulary(const std::vector<std::optional<std::string>>& bytes, std::vector<int32_t> end_tokens);
  // Every token as TokenBytes gives it, but the byte-fallback tokens of marker bytes (grammar.h),
  // which are no text; `markers` are the special tokens a grammar may write, each as its marker
  // byte (NotFound naming a marker's text the tokenizer lacks, or one at or past `id_limit`). Ids
  // at and past `id_limit` (the model's vocabulary size, when the tokenizer has special tokens
  // beyond it: Gemma 3's <image_soft_token>) are left out; 0 keeps every id of the tokenizer.
  static Result<TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer, std::vector<int32_t> end_tokens,
                                               std::span<const MarkerToken> markers = {}, int64_t id_limit = 0);

  size_t size() const { return size_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  const std::optional<std::string>& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

 private:
  friend class TokenMasker;
  // A trie of tokens' bytes, laid out depth first: a node's subtree is the nodes after it up to its
  // `end`, so a walk reads memory in order and drops a subtree by jumping past it.
  struct Trie {
    struct Node {
      uint8_t byte = 0;
      uint16_t depth = 0;  // the node's bytes: 1 for a token's first byte
      int32_t end = 0;     // one past its subtree
      int32_t tokens = 0;  // its tokens: token_ids[tokens, the next node's tokens)
    };
    std::vector<Node> nodes;  // nodes[0] is the root (the empty prefix); the last, a sentinel
    std::vector<int32_t> token_ids;
    size_t max_depth = 0;
  };
  // The trie of (bytes, id) pairs.
  static Trie BuildTrie(const std::vector<std::pair<std::string_view, int32_t>>& tokens);
  // The number of characters of a plain token: whole UTF-8 characters, none of them a byte a
  // string treats specially (quotes, escapes, '<', '|', '>', controls); nullopt for any other.
  std::optional<int> PlainCharacters(std::string_view bytes) const;
  int max_plain_chars() const { return static_cast<int>(plain_up_to_.size()) - 1; }
  const TokenBits& plain_up_to(int chars) const { return plain_up_to_[static_cast<size_t>(chars)]; }

  size_t size_ = 0;
  Trie nodes_;                          // every token with bytes
  Trie special_nodes_;                  // the tokens that are not plain
  std::vector<TokenBits> plain_up_to_;  // [n]: the plain tokens of at most n characters
  TokenBits plain_leading_space_;       // the plain tokens that start with ' '
  ByteSet plain_bytes_{};               // the ASCII bytes plain tokens may hold
  std::vector<std::optional<std::string>> bytes_;
  std::vector<int32_t> end_tokens_;
};

class TokenMasker {
 public:
  // Both must outlive the masker.
  TokenMasker(const Grammar& grammar, const TokenVocabulary& vocabulary, size_t cache_states = 256);
  // The tokens allowed after reaching `state`.
  const TokenBits& Allowed(const GrammarState& state);
  // The tokens allowed after `state` that leave a text whose shortest completion is at most
  // `max_completion` bytes (the end tokens where the text is whole). Not cached (it depends on the
  // budget): for the last tokens of a request that must end its text in time, not for every step.
  void AllowedWithin(const GrammarState& state, int64_t max_completion, TokenBits& bits);
  // The shortest completion of `state` in bytes (GrammarState::ShortestCompletion).
  int64_t ShortestCompletion(const GrammarState& state) const {
    return state.ShortestCompletion(grammar_, min_lengths_);
  }

  struct Stats {
    uint64_t lookups = 0;
    uint64_t misses = 0;  // computed by walking the trie
  };
  const Stats& stats() const { return stats_; }

 private:
  // The id of `state` among the interned states, interning it when new.
  int32_t Intern(GrammarState state);
  // The state after byte `b` from interned state `id`; kDead when the grammar refuses the byte.
  int32_t Next(int32_t id, uint8_t b);
  void Walk(const TokenVocabulary::Trie& trie, int32_t state, TokenBits& bits);
  void WalkWithin(const TokenVocabulary::Trie& trie, int32_t state, int64_t max_completion, TokenBits& bits);
  // The states plain characters lead `state` through, one per character, while every plain
  // character leads to one same state (`uniform`; else the tokens must be walked). `length`: how
  // many characters stay alive (max_plain_chars() when the chain loops back on itself).
  struct PlainChain {
    bool uniform = true;
    bool no_leading_space = false;  // ' ' dies at the first character: tokens starting with it are out
    int length = 0;
    std::vector<int32_t> states;
  };
  PlainChain FollowPlainText(int32_t state);
  // Whether no plain character dies at `state`, nor at any state plain characters lead it to (a
  // string's content that a pattern only counts, such as the text around an unanchored pattern's
  // match): then every plain token is allowed there without a walk. False past a bound on the
  // states searched.
  bool PlainClosed(int32_t state);
  void ClearLeadingSpace(TokenBits& bits) const;
  int64_t Distance(int32_t state);  // ShortestCompletion of an interned state, kept
  // The one state every plain character (but ' ', when `except_space`) leads `state` to; kDead when
  // every one dies there, kMixed when they differ.
  int32_t PlainStep(int32_t state, bool except_space = false);

  static constexpr int32_t kUnknown = -1;
  static constexpr int32_t kDead = -2;
  static constexpr int32_t kMixed = -3;

  const Grammar& grammar_;
  const TokenVocabulary& vocabulary_;
  const size_t cache_states_;
  // Recently used first; the map points into the list.
  std::list<std::pair<GrammarState, TokenBits>> recent_;
  std::unordered_multimap<uint64_t, std::list<std::pair<GrammarState, TokenBits>>::iterator> cache_;
  // Interned recognizer states and their byte transitions (kUnknown until first taken).
  std::vector<GrammarState> states_;
  std::unordered_multimap<uint64_t, int32_t> state_ids_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<uint8_t> continues_;  // per interned state: CanContinue()
  std::vector<int64_t> distance_;   // per interned state; -1 until computed
  const std::vector<int64_t> min_lengths_;
  Stats stats_;
};

class GrammarMasks {
 public:
  GrammarMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
               size_t cache_states = 1024);
  // The tokens allowed after `state`, copied out under the lock (32 KB at 262K ids).
  void Allowed(const GrammarState& state, TokenBits& out);
  // TokenMasker::AllowedWithin, under the lock.
  void AllowedWithin(const GrammarState& state, int64_t max_completion, TokenBits& out);
  int64_t ShortestCompletion(const GrammarState& state);
  const Grammar& grammar() const { return *grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  TokenMasker::Stats stats();

 private:
  const std::shared_ptr<const Grammar> grammar_;
  const std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::mutex mu_;
  TokenMasker masker_;  // guarded by mu_
};

// One request's constraint: the grammar's state after the tokens so far.
class GrammarConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<GrammarMasks> masks);
  const TokenBits& Allowed();
  // Takes `token` when the text can still be made whole and ended after it with `tokens_left`
  // tokens to go, this one and the end token included (true); leaves the state as it was when it
  // cannot (false). Counts a byte as a token, which a vocabulary with a token for every byte
  // (Gemma's byte fallback) can always keep to. Errors: Accept's.
  Result<bool> AcceptWithin(int32_t token, int64_t tokens_left);
  // The tokens that fit the budget (AcceptWithin), for when a sampled one did not.
  const TokenBits& AllowedWithin(int64_t tokens_left);
  // FailedPrecondition when `token` was not allowed (the sampler was not masked).
  Status Accept(int32_t token);
  bool Complete() const { return state_.Complete(); }

 private:
  bool IsEnd(int32_t token) const;
  // The state after `token`'s bytes; FailedPrecondition when it is no text or breaks the grammar.
  Result<GrammarState> After(int32_t token) const;

  std::shared_ptr<GrammarMasks> masks_;
  GrammarState state_;
  TokenBits allowed_;
};

}  // namespace temper::engine
