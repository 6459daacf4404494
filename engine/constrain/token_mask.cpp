#include "engine/constrain/token_mask.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace temper::engine {

std::optional<std::string> TokenBytes(const Tokenizer& tokenizer, int32_t id) {
  if (tokenizer.IsSpecial(id)) return std::nullopt;
  std::optional<std::string_view> piece = tokenizer.IdToToken(id);
  if (!piece) return std::nullopt;
  // Byte fallback: "<0xE2>" is the byte itself (decoding it alone would give U+FFFD).
  if (piece->size() == 6 && piece->substr(0, 3) == "<0x" && piece->back() == '>') {
    unsigned value = 0;
    if (std::sscanf(std::string(*piece).c_str(), "<0x%2X>", &value) == 1)
      return std::string(1, static_cast<char>(value));
  }
  const int32_t one[] = {id};
  Result<std::string> text = tokenizer.Decode(one);
  if (!text.ok()) return std::nullopt;
  return *text;
}

std::optional<int> TokenVocabulary::PlainCharacters(std::string_view bytes) const {
  int chars = 0;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      if (!Chars(plain_bytes_).Accepts(b)) return std::nullopt;
      ++i;
      ++chars;
      continue;
    }
    const Utf8Form* form = nullptr;
    for (const Utf8Form& f : kUtf8Forms) {
      if (b >= f.first_lo && b <= f.first_hi) form = &f;
    }
    if (!form || i + 1 + static_cast<size_t>(form->rest_count) > bytes.size()) return std::nullopt;
    for (int k = 0; k < form->rest_count; ++k) {
      const auto c = static_cast<uint8_t>(bytes[i + 1 + static_cast<size_t>(k)]);
      if (c < form->rest[static_cast<size_t>(k)].first || c > form->rest[static_cast<size_t>(k)].second)
        return std::nullopt;
    }
    i += 1 + static_cast<size_t>(form->rest_count);
    ++chars;
  }
  return chars;
}

TokenVocabulary::Trie TokenVocabulary::BuildTrie(const std::vector<std::pair<std::string_view, int32_t>>& tokens) {
  // Sorted by their bytes, the tokens come in the trie's depth-first order: each adds the nodes of
  // its bytes past the prefix it shares with the one before, and closes the subtrees it leaves.
  std::vector<std::pair<std::string_view, int32_t>> sorted = tokens;
  std::sort(sorted.begin(), sorted.end());
  Trie trie;
  trie.nodes.push_back({});
  std::vector<int32_t> path = {0};  // the nodes along the previous token's bytes, root first
  std::string_view previous;
  for (const auto& [bytes, id] : sorted) {
    size_t common = 0;
    while (common < previous.size() && common < bytes.size() && previous[common] == bytes[common]) ++common;
    for (; path.size() > common + 1; path.pop_back()) {
      trie.nodes[static_cast<size_t>(path.back())].end = static_cast<int32_t>(trie.nodes.size());
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      trie.nodes.push_back({static_cast<uint8_t>(bytes[d]), static_cast<uint16_t>(d + 1), 0,
                            static_cast<int32_t>(trie.token_ids.size())});
      path.push_back(static_cast<int32_t>(trie.nodes.size() - 1));
    }
    trie.token_ids.push_back(id);
    trie.max_depth = std::max(trie.max_depth, bytes.size());
    previous = bytes;
  }
  for (; !path.empty(); path.pop_back()) {
    trie.nodes[static_cast<size_t>(path.back())].end = static_cast<int32_t>(trie.nodes.size());
  }
  trie.nodes.push_back({0, 0, 0, static_cast<int32_t>(trie.token_ids.size())});  // the sentinel
  return trie;
}

TokenVocabulary::TokenVocabulary(const std::vector<std::optional<std::string>>& bytes, std::vector<int32_t> end_tokens)
    : size_(bytes.size()), bytes_(bytes), end_tokens_(std::move(end_tokens)) {
  // ASCII that no string's content treats specially in either dialect (json_schema_grammar.h).
  plain_bytes_ = AnyByteExcept("\"\\<|>");
  plain_bytes_[0] &= ~uint64_t{0xffffffff};  // no control bytes (0x00-0x1f)
  plain_bytes_[2] = plain_bytes_[3] = 0;     // no bytes 0x80-0xff: those come in whole characters
  std::vector<std::pair<int, int32_t>> plain_chars;  // (characters, id) of each plain token
  std::vector<std::pair<std::string_view, int32_t>> all, special;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id] || bytes_[id]->empty()) continue;
    const auto token = static_cast<int32_t>(id);
    all.emplace_back(*bytes_[id], token);
    if (const std::optional<int> chars = PlainCharacters(*bytes_[id])) {
      plain_chars.emplace_back(*chars, token);
    } else {
      special.emplace_back(*bytes_[id], token);
    }
  }
  nodes_ = BuildTrie(all);
  special_nodes_ = BuildTrie(special);
  plain_leading_space_.assign((bytes.size() + 63) / 64, 0);
  for (const auto& [chars, id] : plain_chars) {
    if ((*bytes[static_cast<size_t>(id)])[0] == ' ') {
      plain_leading_space_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  // plain_up_to_[n]: the plain tokens of at most n characters.
  int longest = 0;
  for (const auto& [chars, id] : plain_chars) longest = std::max(longest, chars);
  plain_up_to_.assign(static_cast<size_t>(longest) + 1, TokenBits((bytes.size() + 63) / 64, 0));
  for (const auto& [chars, id] : plain_chars) {
    for (size_t n = static_cast<size_t>(chars); n < plain_up_to_.size(); ++n) {
      plain_up_to_[n][static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

Result<TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tokenizer, std::vector<int32_t> end_tokens,
                                                       std::span<const MarkerToken> markers, int64_t id_limit) {
  const int32_t ids =
      id_limit > 0 ? static_cast<int32_t>(std::min<int64_t>(id_limit, tokenizer.id_limit())) : tokenizer.id_limit();
  std::vector<std::optional<std::string>> bytes(static_cast<size_t>(ids));
  for (int32_t id = 0; id < ids; ++id) {
    std::optional<std::string> b = TokenBytes(tokenizer, id);
    const bool marks =
        b && std::any_of(b->begin(), b->end(), [](char c) { return static_cast<uint8_t>(c) >= kFirstMarkerByte; });
    if (!marks) bytes[static_cast<size_t>(id)] = std::move(b);
  }
  for (const MarkerToken& m : markers) {
    std::optional<int32_t> id = tokenizer.TokenToId(m.text);
    if (!id || *id >= ids) return Status::NotFound(fmt::format("the model's vocabulary has no token '{}'", m.text));
    bytes[static_cast<size_t>(*id)] = std::string(1, static_cast<char>(m.byte));
  }
  return TokenVocabulary(bytes, std::move(end_tokens));
}

TokenMasker::TokenMasker(const Grammar& grammar, const TokenVocabulary& vocabulary, size_t cache_states)
    : grammar_(grammar),
      vocabulary_(vocabulary),
      cache_states_(std::max<size_t>(cache_states, 1)),
      min_lengths_(MinimalLengths(grammar)) {}

int32_t TokenMasker::Intern(GrammarState state) {
  const uint64_t hash = state.Hash();
  for (auto [it, end] = state_ids_.equal_range(hash); it != end; ++it) {
    if (states_[static_cast<size_t>(it->second)] == state) return it->second;
  }
  continues_.push_back(state.CanContinue());
  states_.push_back(std::move(state));
  next_.emplace_back();
  next_.back().fill(kUnknown);
  distance_.push_back(-1);
  const auto id = static_cast<int32_t>(states_.size() - 1);
  state_ids_.emplace(hash, id);
  return id;
}

int32_t TokenMasker::Next(int32_t id, uint8_t b) {
  const int32_t known = next_[static_cast<size_t>(id)][b];
  if (known != kUnknown) return known;
  // Every byte's transition at once, one Advance per class of bytes that the same stacks accept:
  // a string's content, say, is one class for all its plain ASCII.
  std::array<uint16_t, 256> classes;
  const int count = states_[static_cast<size_t>(id)].ByteClasses(grammar_, classes);
  std::vector<int32_t> to(static_cast<size_t>(count), kUnknown);
  to[0] = kDead;
  for (int c = 0; c < 256; ++c) {
    int32_t& t = to[classes[static_cast<size_t>(c)]];
    if (t == kUnknown) {
      GrammarState after = states_[static_cast<size_t>(id)].Advance(grammar_, static_cast<uint8_t>(c));
      t = after.Dead() ? kDead : Intern(std::move(after));
    }
    next_[static_cast<size_t>(id)][static_cast<size_t>(c)] = t;  // indexed again: Intern can grow next_
  }
  return next_[static_cast<size_t>(id)][b];
}

int32_t TokenMasker::PlainStep(int32_t state, bool except_space) {
  // The one state every plain character leads to, folded over the characters: kUnknown before the
  // first, kMixed once two differ (a dead character against a live one counts as differing).
  int32_t common = kUnknown;
  auto fold = [&](int32_t to) {
    if (common == kUnknown) common = to;
    return common == to;
  };
  const GrammarElement plain = Chars(vocabulary_.plain_bytes_);
  for (int b = 0; b < 0x80; ++b) {
    if (except_space && b == ' ') continue;
    if (plain.Accepts(static_cast<uint8_t>(b)) && !fold(Next(state, static_cast<uint8_t>(b)))) return kMixed;
  }
  // Whole multi-byte characters. The states inside a character are few (one per bytes still to
  // come), so where a (state, form position) leads is remembered rather than walked 64^3 times.
  std::map<std::tuple<int32_t, const Utf8Form*, int>, int32_t> ends;
  std::function<int32_t(int32_t, const Utf8Form&, int)> rest = [&](int32_t at, const Utf8Form& form, int k) {
    if (at == kDead || k == form.rest_count) return at;
    auto [it, fresh] = ends.try_emplace({at, &form, k}, kUnknown);
    if (!fresh) return it->second;
    const auto [lo, hi] = form.rest[static_cast<size_t>(k)];
    int32_t same = kUnknown;
    for (int b = lo; b <= hi && same != kMixed; ++b) {
      const int32_t to = rest(Next(at, static_cast<uint8_t>(b)), form, k + 1);
      same = same == kUnknown || same == to ? to : kMixed;
    }
    ends[{at, &form, k}] = same;
    return same;
  };
  for (const Utf8Form& form : kUtf8Forms) {
    for (int b = form.first_lo; b <= form.first_hi; ++b) {
      const int32_t to = rest(Next(state, static_cast<uint8_t>(b)), form, 0);
      if (to == kMixed || !fold(to)) return kMixed;
    }
  }
  return common;
}

void TokenMasker::Walk(const TokenVocabulary::Trie& trie, int32_t state, TokenBits& bits) {
  std::vector<int32_t> at(trie.max_depth + 1);  // the state after each byte of the current node's path
  at[0] = state;
  const auto last = static_cast<int32_t>(trie.nodes.size() - 1);  // the sentinel
  for (int32_t i = 1; i < last;) {
    const TokenVocabulary::Trie::Node& node = trie.nodes[static_cast<size_t>(i)];
    const int32_t from = at[node.depth - 1u];
    int32_t next = next_[static_cast<size_t>(from)][node.byte];  // Next's table, read inline: the hot path
    if (next == kUnknown) next = Next(from, node.byte);
    if (next == kDead) {
      i = node.end;
      continue;
    }
    for (int32_t t = node.tokens; t < trie.nodes[static_cast<size_t>(i) + 1].tokens; ++t) {
      const int32_t id = trie.token_ids[static_cast<size_t>(t)];
      bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    if (!continues_[static_cast<size_t>(next)]) {
      i = node.end;
      continue;
    }
    at[node.depth] = next;
    ++i;
  }
}

int64_t TokenMasker::Distance(int32_t state) {
  int64_t& d = distance_[static_cast<size_t>(state)];
  if (d < 0) d = ShortestCompletion(states_[static_cast<size_t>(state)]);
  return d;
}

void TokenMasker::WalkWithin(const TokenVocabulary::Trie& trie, int32_t state, int64_t max_completion,
                             TokenBits& bits) {
  std::vector<int32_t> at(trie.max_depth + 1);
  at[0] = state;
  const auto last = static_cast<int32_t>(trie.nodes.size() - 1);
  for (int32_t i = 1; i < last;) {
    const TokenVocabulary::Trie::Node& node = trie.nodes[static_cast<size_t>(i)];
    const int32_t next = Next(at[node.depth - 1u], node.byte);
    if (next == kDead) {
      i = node.end;
      continue;
    }
    if (Distance(next) <= max_completion) {
      for (int32_t t = node.tokens; t < trie.nodes[static_cast<size_t>(i) + 1].tokens; ++t) {
        const int32_t id = trie.token_ids[static_cast<size_t>(t)];
        bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      }
    }
    if (!continues_[static_cast<size_t>(next)]) {
      i = node.end;
      continue;
    }
    at[node.depth] = next;
    ++i;
  }
}

void TokenMasker::AllowedWithin(const GrammarState& state, int64_t max_completion, TokenBits& bits) {
  bits.assign((vocabulary_.size() + 63) / 64, 0);
  if (state.CanContinue() && max_completion >= 0) {
    const int32_t id = Intern(state);
    const PlainChain chain = FollowPlainText(id);
    if (!chain.uniform) {
      WalkWithin(vocabulary_.nodes_, id, max_completion, bits);
    } else {
      // The plain tokens of k characters end in chain.states[k - 1] (the last one for every longer
      // token when the chain loops): allowed where that state can still be completed in time.
      const TokenBits* below = nullptr;
      for (int k = 1; k <= chain.length; ++k) {
        const size_t at = std::min(static_cast<size_t>(k), chain.states.size()) - 1;
        const TokenBits& up_to = vocabulary_.plain_up_to(k);
        if (Distance(chain.states[at]) <= max_completion) {
          for (size_t w = 0; w < bits.size(); ++w) bits[w] |= up_to[w] & ~(below ? (*below)[w] : 0);
        }
        below = &up_to;
      }
      if (chain.no_leading_space) ClearLeadingSpace(bits);
      WalkWithin(vocabulary_.special_nodes_, id, max_completion, bits);
    }
  }
  if (state.Complete()) {
    for (int32_t id : vocabulary_.end_tokens()) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
}

void TokenMasker::ClearLeadingSpace(TokenBits& bits) const {
  const TokenBits& spaced = vocabulary_.plain_leading_space_;
  for (size_t w = 0; w < bits.size(); ++w) bits[w] &= ~spaced[w];
}

TokenMasker::PlainChain TokenMasker::FollowPlainText(int32_t state) {
  // Where every plain character takes the recognizer to one same state, step after step (a
  // string's content, counted or not), the plain tokens allowed are those with at most as many
  // characters as the steps stay alive: a bitset per length, no walk.
  PlainChain chain;
  int32_t at = state;
  while (chain.length < vocabulary_.max_plain_chars()) {
    int32_t to = PlainStep(at);
    // A string that must start with a non-space (json_schema_grammar.h): the first step is uniform
    // but for ' ', and the plain tokens that start with one are left out.
    if (to == kMixed && chain.length == 0 && Next(at, ' ') == kDead) {
      to = PlainStep(at, /*except_space=*/true);
      chain.no_leading_space = to != kMixed;
    }
    if (to == kMixed) {
      chain.uniform = false;
      break;
    }
    if (to == kDead) break;
    chain.states.push_back(to);
    if (to == at) {
      chain.length = vocabulary_.max_plain_chars();  // a loop: every length stays alive
      break;
    }
    at = to;
    ++chain.length;
  }
  return chain;
}

bool TokenMasker::PlainClosed(int32_t state) {
  // A search over the states plain characters reach, byte by byte: (state, the UTF-8 form of the
  // character under way, how many of its continuation bytes are read). Fails at the first plain
  // byte that dies or leads where no more can follow.
  constexpr size_t kMaxClosure = 1024;
  using Node = std::tuple<int32_t, const Utf8Form*, int>;
  std::set<Node> seen = {{state, nullptr, 0}};
  std::vector<Node> todo(seen.begin(), seen.end());
  auto visit = [&](int32_t to, const Utf8Form* form, int k) {
    if (to == kDead || !states_[static_cast<size_t>(to)].CanContinue()) return false;
    if (seen.insert({to, form, k}).second) todo.emplace_back(to, form, k);
    return true;
  };
  const GrammarElement plain = Chars(vocabulary_.plain_bytes_);
  while (!todo.empty()) {
    if (seen.size() > kMaxClosure) return false;
    const auto [at, form, k] = todo.back();
    todo.pop_back();
    if (form == nullptr) {
      for (int b = 0; b < 0x80; ++b) {
        if (plain.Accepts(static_cast<uint8_t>(b)) && !visit(Next(at, static_cast<uint8_t>(b)), nullptr, 0)) {
          return false;
        }
      }
      for (const Utf8Form& f : kUtf8Forms) {
        for (int b = f.first_lo; b <= f.first_hi; ++b) {
          if (!visit(Next(at, static_cast<uint8_t>(b)), &f, 0)) return false;
        }
      }
      continue;
    }
    const auto [lo, hi] = form->rest[static_cast<size_t>(k)];
    const bool last = k + 1 == form->rest_count;
    for (int b = lo; b <= hi; ++b) {
      if (!visit(Next(at, static_cast<uint8_t>(b)), last ? nullptr : form, last ? 0 : k + 1)) return false;
    }
  }
  return true;
}

const TokenBits& TokenMasker::Allowed(const GrammarState& state) {
  ++stats_.lookups;
  const uint64_t hash = state.Hash();
  for (auto [it, end] = cache_.equal_range(hash); it != end; ++it) {
    if (it->second->first == state) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return recent_.front().second;
    }
  }
  ++stats_.misses;
  TokenBits bits((vocabulary_.size() + 63) / 64, 0);
  if (state.CanContinue()) {
    // Only the tokens that are not plain are walked where the plain ones follow a chain.
    const int32_t id = Intern(state);
    const PlainChain chain = FollowPlainText(id);
    if (chain.uniform) {
      bits = vocabulary_.plain_up_to(chain.length);
      if (chain.no_leading_space) ClearLeadingSpace(bits);
      Walk(vocabulary_.special_nodes_, id, bits);
    } else if (PlainClosed(id)) {
      bits = vocabulary_.plain_up_to(vocabulary_.max_plain_chars());
      Walk(vocabulary_.special_nodes_, id, bits);
    } else {
      Walk(vocabulary_.nodes_, id, bits);
    }
  }
  if (state.Complete()) {
    for (int32_t id : vocabulary_.end_tokens()) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  if (recent_.size() >= cache_states_) {
    const uint64_t old = recent_.back().first.Hash();
    for (auto [it, end] = cache_.equal_range(old); it != end; ++it) {
      if (it->second == std::prev(recent_.end())) {
        cache_.erase(it);
        break;
      }
    }
    recent_.pop_back();
  }
  recent_.emplace_front(state, std::move(bits));
  cache_.emplace(hash, recent_.begin());
  return recent_.front().second;
}

GrammarMasks::GrammarMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                           size_t cache_states)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      masker_(*grammar_, *vocabulary_, cache_states) {}

void GrammarMasks::Allowed(const GrammarState& state, TokenBits& out) {
  std::lock_guard<std::mutex> lock(mu_);
  out = masker_.Allowed(state);
}

void GrammarMasks::AllowedWithin(const GrammarState& state, int64_t max_completion, TokenBits& out) {
  std::lock_guard<std::mutex> lock(mu_);
  masker_.AllowedWithin(state, max_completion, out);
}

int64_t GrammarMasks::ShortestCompletion(const GrammarState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  return masker_.ShortestCompletion(state);
}

TokenMasker::Stats GrammarMasks::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return masker_.stats();
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<GrammarMasks> masks)
    : masks_(std::move(masks)), state_(GrammarState::Start(masks_->grammar())) {}

const TokenBits& GrammarConstraint::Allowed() {
  masks_->Allowed(state_, allowed_);
  return allowed_;
}

bool GrammarConstraint::IsEnd(int32_t token) const {
  const auto& ends = masks_->vocabulary().end_tokens();
  return std::find(ends.begin(), ends.end(), token) != ends.end();
}

Result<GrammarState> GrammarConstraint::After(int32_t token) const {
  const TokenVocabulary& vocabulary = masks_->vocabulary();
  if (token < 0 || static_cast<size_t>(token) >= vocabulary.size() || !vocabulary.bytes(token)) {
    return Status::FailedPrecondition(fmt::format("token {} is not text the grammar can take", token));
  }
  GrammarState next = state_;
  for (char c : *vocabulary.bytes(token)) {
    next = next.Advance(masks_->grammar(), static_cast<uint8_t>(c));
    if (next.Dead()) return Status::FailedPrecondition(fmt::format("token {} breaks the grammar", token));
  }
  return next;
}

Result<bool> GrammarConstraint::AcceptWithin(int32_t token, int64_t tokens_left) {
  if (IsEnd(token)) {
    TEMPER_RETURN_IF_ERROR(Accept(token));
    return true;
  }
  TEMPER_ASSIGN_OR_RETURN(GrammarState next, After(token));
  // After this token: the completion's bytes, then the end token.
  if (masks_->ShortestCompletion(next) + 1 > tokens_left - 1) return false;
  state_ = std::move(next);
  return true;
}

const TokenBits& GrammarConstraint::AllowedWithin(int64_t tokens_left) {
  masks_->AllowedWithin(state_, tokens_left - 2, allowed_);
  return allowed_;
}

Status GrammarConstraint::Accept(int32_t token) {
  if (IsEnd(token)) {
    if (!state_.Complete()) return Status::FailedPrecondition(fmt::format("token {} ends an incomplete text", token));
    return Status::OK();
  }
  TEMPER_ASSIGN_OR_RETURN(state_, After(token));
  return Status::OK();
}

}  // namespace temper::engine
