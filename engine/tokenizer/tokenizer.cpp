#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

#include <fmt/format.h>

namespace temper::engine {
namespace {

void ReplaceAll(std::string_view in, std::string_view pattern, std::string_view content, std::string& out) {
  out.clear();
  size_t pos = 0;
  for (size_t hit; (hit = in.find(pattern, pos)) != std::string_view::npos; pos = hit + pattern.size()) {
    out.append(in.substr(pos, hit - pos));
    out.append(content);
  }
  out.append(in.substr(pos));
}

// `tmp` is working memory, kept by the caller so that encoding allocates once per call, not per piece.
void Normalize(const std::vector<NormalizerStep>& steps, std::string_view in, std::string& out, std::string& tmp) {
  out.assign(in);
  for (const auto& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kReplace:
        ReplaceAll(out, step.pattern, step.content, tmp);
        out.swap(tmp);
        break;
      case NormalizerStep::Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.content);
        break;
    }
  }
}

// tokenizers' Split pre-tokenizer with a literal pattern (pre_tokenizers/split.rs and
// NormalizedString::split): regions alternate between non-matches and matches, then the behavior
// decides where the matches go. Empty pieces are dropped.
void SplitPieces(std::string_view s, const SplitStep& step, std::vector<std::string_view>& out) {
  struct Region {
    size_t begin, end;
    bool match;
  };
  std::vector<Region> regions;
  size_t prev = 0;
  for (size_t hit; (hit = s.find(step.pattern, prev)) != std::string_view::npos; prev = hit + step.pattern.size()) {
    if (hit != prev) regions.push_back({prev, hit, false});
    regions.push_back({hit, hit + step.pattern.size(), true});
  }
  if (prev != s.size()) regions.push_back({prev, s.size(), false});

  std::vector<Region> merged;
  bool previous_match = false;
  switch (step.behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& r : regions) {
        if (!r.match) merged.push_back(r);
      }
      break;
    case SplitBehavior::kIsolated:
      merged = regions;
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& r : regions) {
        if (r.match && !previous_match && !merged.empty()) {
          merged.back().end = r.end;
        } else {
          merged.push_back(r);
        }
        previous_match = r.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = regions.rbegin(); it != regions.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& r : regions) {
        if (r.match == previous_match && !merged.empty()) {
          merged.back().end = r.end;
        } else {
          merged.push_back(r);
        }
        previous_match = r.match;
      }
      break;
  }
  for (const auto& r : merged) {
    if (r.end > r.begin) out.push_back(s.substr(r.begin, r.end - r.begin));
  }
}

// `<0xXX>` -> the byte, as tokenizers' ByteFallback decoder recognises it.
std::optional<unsigned char> ByteToken(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(token[3]);
  const int lo = hex(token[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

bool ValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp;
    pos += DecodeUtf8(s, pos, &cp);
    if (cp == kInvalidCodepoint) return false;
  }
  return true;
}

void ApplyDecoder(const DecoderStep& step, std::vector<std::string>& tokens) {
  switch (step.kind) {
    case DecoderStep::Kind::kReplace: {
      std::string tmp;
      for (auto& t : tokens) {
        ReplaceAll(t, step.pattern, step.content, tmp);
        t.swap(tmp);
      }
      break;
    }
    case DecoderStep::Kind::kByteFallback: {
      // Runs of byte tokens become their UTF-8 text, or one U+FFFD per byte when invalid (Rust's
      // behaviour; transformers.js differs, see the fixtures README).
      std::vector<std::string> out;
      out.reserve(tokens.size());
      std::string bytes;
      auto flush = [&] {
        if (bytes.empty()) return;
        if (ValidUtf8(bytes)) {
          out.push_back(bytes);
        } else {
          for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
        }
        bytes.clear();
      };
      for (auto& t : tokens) {
        if (auto b = ByteToken(t)) {
          bytes.push_back(static_cast<char>(*b));
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens.swap(out);
      break;
    }
    case DecoderStep::Kind::kFuse: {
      std::string all;
      for (const auto& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case DecoderStep::Kind::kStrip: {
      // Strips up to `start` leading and `stop` trailing copies of `content` from each token.
      const std::string& c = step.content;
      for (auto& t : tokens) {
        std::string_view v = t;
        for (int i = 0; i < step.start && !c.empty() && v.substr(0, c.size()) == c; ++i) v.remove_prefix(c.size());
        for (int i = 0; i < step.stop && !c.empty() && v.size() >= c.size() && v.substr(v.size() - c.size()) == c;
             ++i) {
          v.remove_suffix(c.size());
        }
        t = std::string(v);
      }
      break;
    }
  }
}

}  // namespace

Result<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::FromErrno(errno, fmt::format("opening tokenizer {}", path));
  std::string text;
  // One read of the whole file when its size is known (33 MB for Gemma); chunks otherwise.
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) text.reserve(static_cast<size_t>(size));
    std::rewind(f.get());
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) return Status::FromErrno(errno, fmt::format("reading tokenizer {}", path));
  auto tok = FromJson(text);
  if (!tok.ok()) return tok.status().WithContext(path);
  return tok;
}

Result<Tokenizer> Tokenizer::FromJson(std::string_view json) {
  TEMPER_ASSIGN_OR_RETURN(TokenizerSpec spec, ParseTokenizerJson(json));
  return Build(std::move(spec));
}

Result<Tokenizer> Tokenizer::FromSpec(TokenizerSpec spec) { return Build(std::move(spec)); }

Result<Tokenizer> Tokenizer::Build(TokenizerSpec spec) {
  TEMPER_ASSIGN_OR_RETURN(Bpe bpe, Bpe::Build(std::move(spec.model)));
  Tokenizer tok(std::move(bpe));
  const std::vector<std::string>& vocab = tok.bpe_.id_to_token();
  size_t id_limit = vocab.size();

  // Added tokens: a token also in the vocabulary must keep its vocabulary id, and an id may not
  // name two different tokens.
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const auto& t = spec.added_tokens[i];
    const std::string field = fmt::format("added_tokens[{}] ({})", i, QuoteToken(t.content));
    if (auto id = tok.bpe_.TokenToId(t.content); id && *id != t.id) {
      return Status::DataLoss(fmt::format("{}: id {} disagrees with the vocabulary's id {}", field, t.id, *id));
    }
    // Same density guard as the vocabulary's (bpe.cpp).
    if (static_cast<size_t>(t.id) >= 2 * (vocab.size() + spec.added_tokens.size()) + 1024) {
      return Status::DataLoss(fmt::format("{}: id {} is far beyond the vocabulary", field, t.id));
    }
    if (static_cast<size_t>(t.id) < vocab.size() && !vocab[t.id].empty() && vocab[t.id] != t.content) {
      return Status::DataLoss(fmt::format("{}: id {} already belongs to {}", field, t.id, QuoteToken(vocab[t.id])));
    }
    id_limit = std::max(id_limit, static_cast<size_t>(t.id) + 1);
    tok.added_by_content_.emplace_back(t.content, t.id);
    tok.added_by_id_.emplace_back(t.id, t.content);
  }
  std::sort(tok.added_by_content_.begin(), tok.added_by_content_.end());
  for (size_t i = 1; i < tok.added_by_content_.size(); ++i) {
    if (tok.added_by_content_[i].first == tok.added_by_content_[i - 1].first) {
      return Status::DataLoss(
          fmt::format("added_tokens: {} is listed twice", QuoteToken(tok.added_by_content_[i].first)));
    }
  }
  std::sort(tok.added_by_id_.begin(), tok.added_by_id_.end());
  for (size_t i = 1; i < tok.added_by_id_.size(); ++i) {
    if (tok.added_by_id_[i].first == tok.added_by_id_[i - 1].first) {
      return Status::DataLoss(fmt::format("added_tokens: id {} is used by {} and {}", tok.added_by_id_[i].first,
                                          QuoteToken(tok.added_by_id_[i - 1].second),
                                          QuoteToken(tok.added_by_id_[i].second)));
    }
  }
  tok.id_limit_ = static_cast<int32_t>(id_limit);

  tok.special_.assign(id_limit, false);
  std::string normalized;
  std::string tmp;
  for (const auto& t : spec.added_tokens) {
    tok.special_[t.id] = t.special;
    if (t.normalized) {
      // tokenizers matches these after normalization, so it normalizes their content too.
      Normalize(spec.normalizer, t.content, normalized, tmp);
      tok.normalized_added_.Add(normalized, t.id, t.special);
    } else {
      tok.raw_added_.Add(t.content, t.id, t.special);
    }
  }
  tok.normalizer_ = std::move(spec.normalizer);
  tok.pre_tokenizer_ = std::move(spec.pre_tokenizer);
  tok.decoder_ = std::move(spec.decoder);
  tok.single_template_ = std::move(spec.single_template);
  for (const auto& piece : tok.single_template_) {
    for (int32_t id : piece.ids) {
      if (!tok.IdToToken(id)) {
        return Status::DataLoss(fmt::format("post_processor: special token id {} is not in the vocabulary", id));
      }
    }
  }
  return tok;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  Scratch scratch;
  if (!options.add_special_tokens || single_template_.empty()) {
    EncodeText(text, options.match_special_tokens, out, scratch);
    return out;
  }
  for (const auto& piece : single_template_) {
    if (piece.is_sequence) {
      EncodeText(text, options.match_special_tokens, out, scratch);
    } else {
      out.insert(out.end(), piece.ids.begin(), piece.ids.end());
    }
  }
  return out;
}

void Tokenizer::EncodeText(std::string_view text, bool match_special, std::vector<int32_t>& out,
                           Scratch& scratch) const {
  auto flush = [&](size_t begin, size_t end) {
    if (end == begin) return;
    Normalize(normalizer_, text.substr(begin, end - begin), scratch.normalized, scratch.tmp);
    EncodeNormalized(scratch.normalized, match_special, out, scratch.bpe);
  };
  size_t start = 0;  // first byte not yet encoded
  if (!raw_added_.empty()) {
    for (size_t pos = 0; pos < text.size();) {
      const AddedTokenTrie::Match m = raw_added_.LongestAt(text, pos, match_special);
      if (m.length == 0) {
        ++pos;
        continue;
      }
      flush(start, pos);
      out.push_back(m.id);
      pos += m.length;
      start = pos;
    }
  }
  flush(start, text.size());
}

void Tokenizer::EncodeNormalized(std::string_view piece, bool match_special, std::vector<int32_t>& out,
                                 BpeScratch& scratch) const {
  if (normalized_added_.empty()) {
    PreTokenizeAndEncode(piece, out, scratch);
    return;
  }
  size_t start = 0;
  for (size_t pos = 0; pos < piece.size();) {
    const AddedTokenTrie::Match m = normalized_added_.LongestAt(piece, pos, match_special);
    if (m.length == 0) {
      ++pos;
      continue;
    }
    PreTokenizeAndEncode(piece.substr(start, pos - start), out, scratch);
    out.push_back(m.id);
    pos += m.length;
    start = pos;
  }
  PreTokenizeAndEncode(piece.substr(start), out, scratch);
}

void Tokenizer::PreTokenizeAndEncode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const {
  if (piece.empty()) return;
  if (pre_tokenizer_.empty()) {
    bpe_.EncodeWord(piece, out, scratch);
    return;
  }
  std::vector<std::string_view> pieces{piece};
  std::vector<std::string_view> next;
  for (const auto& step : pre_tokenizer_) {
    next.clear();
    for (std::string_view p : pieces) SplitPieces(p, step, next);
    pieces.swap(next);
  }
  for (std::string_view p : pieces) bpe_.EncodeWord(p, out, scratch);
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    auto token = IdToToken(id);
    if (!token) {
      return Status::OutOfRange(
          fmt::format("ids[{}]: {} is not a token id (the vocabulary has ids 0..{})", i, id, id_limit_ - 1));
    }
    if (skip_special_tokens && special_[id]) continue;
    tokens.emplace_back(*token);
  }
  if (decoder_.empty()) {
    // tokenizers joins the tokens with spaces when the file has no decoder.
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  for (const auto& step : decoder_) ApplyDecoder(step, tokens);
  std::string text;
  for (const auto& t : tokens) text += t;
  return text;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = std::lower_bound(added_by_content_.begin(), added_by_content_.end(), token,
                             [](const std::pair<std::string, int32_t>& e, std::string_view t) { return e.first < t; });
  if (it != added_by_content_.end() && it->first == token) return it->second;
  return bpe_.TokenToId(token);
}

Result<int32_t> Tokenizer::RequireToken(std::string_view token) const {
  if (auto id = TokenToId(token)) return *id;
  return Status::NotFound(fmt::format("tokenizer has no token {}", QuoteToken(token)));
}

std::optional<std::string_view> Tokenizer::IdToToken(int32_t id) const {
  const std::vector<std::string>& vocab = bpe_.id_to_token();
  if (id >= 0 && static_cast<size_t>(id) < vocab.size() && !vocab[id].empty()) return vocab[id];
  auto it = std::lower_bound(added_by_id_.begin(), added_by_id_.end(), id,
                             [](const std::pair<int32_t, std::string>& e, int32_t i) { return e.first < i; });
  if (it != added_by_id_.end() && it->first == id) return it->second;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

}  // namespace temper::engine
