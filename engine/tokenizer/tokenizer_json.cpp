#include "engine/tokenizer/tokenizer_json.h"

#include <exception>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace temper::engine {
namespace {

using json = nlohmann::json;

Status Malformed(std::string_view field, std::string_view what) {
  return Status::DataLoss(fmt::format("{}: {}", field, what));
}

Status Unsupported(std::string_view field, std::string_view what) {
  return Status::Unimplemented(fmt::format("{}: {}", field, what));
}

// Quotes a token for an error message, cut short so a hostile file cannot make errors huge.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 40;
  if (s.size() <= kMax) return fmt::format("'{}'", s);
  return fmt::format("'{}...'", s.substr(0, kMax));
}

// Builds a DOM for everything except model.vocab and model.merges, which go straight into the
// BpeSpec's arena (see the header for why).
class SpecSax final : public nlohmann::json_sax<json> {
 public:
  explicit SpecSax(BpeSpec& bpe) : bpe_(bpe) {}

  json root;
  std::string error;
  bool seen_vocab = false;
  bool seen_merges = false;

  bool null() override { return Scalar(json(nullptr), "null"); }
  bool boolean(bool v) override { return Scalar(json(v), "a boolean"); }
  bool number_integer(number_integer_t v) override { return Scalar(json(v), "a negative number"); }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return VocabId(v);
    return Scalar(json(v), "a number");
  }
  bool number_float(number_float_t v, const string_t&) override { return Scalar(json(v), "a number"); }
  bool binary(binary_t&) override { return Fail("<binary>", "unexpected binary value"); }

  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) return MergeString(v);
    return Scalar(json(std::move(v)), "a string");
  }

  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      if (bpe_.arena.size() + k.size() > std::numeric_limits<uint32_t>::max()) {
        return Fail("model.vocab", "too large");
      }
      vocab_key_ = BpeSpec::Span{static_cast<uint32_t>(bpe_.arena.size()), static_cast<uint32_t>(k.size())};
      bpe_.arena += k;
      return true;
    }
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::kVocab) return Fail(VocabField(), "expected an integer id, got an object");
    if (mode_ == Mode::kMerges) return Fail(MergeField(), "expected a string or a [left, right] pair, got an object");
    if (AtModelKey("vocab")) {
      mode_ = Mode::kVocab;
      seen_vocab = true;
      return true;
    }
    return Open(json::object());
  }

  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kVocab) return Fail(VocabField(), "expected an integer id, got an array");
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 2) return Fail(MergeField(), "expected a string, got an array");
      merge_depth_ = 2;
      pair_size_ = 0;
      return true;
    }
    if (AtModelKey("merges")) {
      mode_ = Mode::kMerges;
      merge_depth_ = 1;
      seen_merges = true;
      return true;
    }
    return Open(json::array());
  }

  bool end_array() override {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 2) {
        if (pair_size_ != 2) {
          return Fail(MergeField(), fmt::format("expected two tokens, got {}", pair_size_));
        }
        bpe_.merges.push_back(BpeSpec::MergeEntry{pair_[0], pair_[1]});
        merge_depth_ = 1;
        return true;
      }
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error = fmt::format("JSON syntax error at byte {}: {}", position, ex.what());
    return false;
  }

 private:
  enum class Mode { kDom, kVocab, kMerges };

  bool Fail(std::string_view field, std::string_view what) {
    error = fmt::format("{}: {}", field, what);
    return false;
  }

  std::string VocabField() const { return fmt::format("model.vocab[{}]", Quote(bpe_.View(vocab_key_))); }
  std::string MergeField() const { return fmt::format("model.merges[{}]", bpe_.merges.size()); }

  // True when the container about to open is the value of `key` inside the top-level "model".
  bool AtModelKey(std::string_view key) const { return stack_.size() == 2 && names_[1] == "model" && key_ == key; }

  bool VocabId(number_unsigned_t v) {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<int32_t>::max())) {
      return Fail(VocabField(), fmt::format("id {} is out of range", v));
    }
    bpe_.vocab.push_back(BpeSpec::VocabEntry{vocab_key_, static_cast<int32_t>(v)});
    return true;
  }

  BpeSpec::Span Append(std::string_view s) {
    BpeSpec::Span span{static_cast<uint32_t>(bpe_.arena.size()), static_cast<uint32_t>(s.size())};
    bpe_.arena += s;
    return span;
  }

  bool MergeString(const std::string& s) {
    if (bpe_.arena.size() + s.size() > std::numeric_limits<uint32_t>::max()) return Fail("model.merges", "too large");
    if (merge_depth_ == 2) {
      if (pair_size_ < 2) pair_[pair_size_] = Append(s);
      ++pair_size_;
      return true;
    }
    // The older format: "left right", split on one space as tokenizers does.
    size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return Fail(MergeField(), fmt::format("{} is not two tokens separated by one space", Quote(s)));
    }
    BpeSpec::Span left = Append(std::string_view(s).substr(0, space));
    BpeSpec::Span right = Append(std::string_view(s).substr(space + 1));
    bpe_.merges.push_back(BpeSpec::MergeEntry{left, right});
    return true;
  }

  bool Scalar(json value, std::string_view what) {
    if (mode_ == Mode::kVocab)
      return Fail(VocabField(), fmt::format("expected a non-negative integer id, got {}", what));
    if (mode_ == Mode::kMerges) {
      return Fail(MergeField(), fmt::format("expected a string or a [left, right] pair, got {}", what));
    }
    Put(std::move(value));
    return true;
  }

  json* Put(json value) {
    if (stack_.empty()) {
      root = std::move(value);
      return &root;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(value);
    return &slot;
  }

  bool Open(json container) {
    std::string name = (!stack_.empty() && stack_.back()->is_object()) ? key_ : std::string();
    stack_.push_back(Put(std::move(container)));
    names_.push_back(std::move(name));
    return true;
  }

  bool Close() {
    stack_.pop_back();
    names_.pop_back();
    return true;
  }

  BpeSpec& bpe_;
  Mode mode_ = Mode::kDom;
  std::vector<json*> stack_;        // open containers; pointers stay valid while they are open
  std::vector<std::string> names_;  // key of each open container in its parent ("" in arrays)
  std::string key_;                 // the last key read in DOM mode
  BpeSpec::Span vocab_key_;
  int merge_depth_ = 0;  // 1: in model.merges, 2: inside one [left, right] pair
  BpeSpec::Span pair_[2];
  size_t pair_size_ = 0;
};

// Field accessors: each names the field in its error.
Result<bool> OptionalBool(const json& obj, std::string_view field, std::string_view key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Malformed(fmt::format("{}.{}", field, key), "expected true or false");
  return it->get<bool>();
}

Result<std::string> RequiredString(const json& obj, std::string_view field, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end()) return Malformed(field, fmt::format("missing \"{}\"", key));
  if (!it->is_string()) return Malformed(fmt::format("{}.{}", field, key), "expected a string");
  return it->get<std::string>();
}

Result<int> OptionalSmallInt(const json& obj, std::string_view field, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > 1024) {
    return Malformed(fmt::format("{}.{}", field, key), "expected a small non-negative integer");
  }
  return static_cast<int>(it->get<uint64_t>());
}

// {"String": "x"} -> "x"; {"Regex": ...} is refused.
Result<std::string> StringPattern(const json& obj, std::string_view field) {
  auto it = obj.find("pattern");
  if (it == obj.end() || !it->is_object()) return Malformed(field, "missing \"pattern\" object");
  if (it->contains("Regex")) return Unsupported(fmt::format("{}.pattern", field), "Regex patterns are not supported");
  auto s = it->find("String");
  if (s == it->end() || !s->is_string())
    return Malformed(fmt::format("{}.pattern", field), "expected {\"String\": ...}");
  if (s->get_ref<const std::string&>().empty()) return Malformed(fmt::format("{}.pattern", field), "empty pattern");
  return s->get<std::string>();
}

// Applies `one` to `node`, or to each element of a Sequence (under `list_key`).
template <typename Fn>
Status ForEachStep(const json& node, std::string_view field, std::string_view list_key, Fn one) {
  if (node.is_null()) return Status::OK();
  if (!node.is_object()) return Malformed(field, "expected an object or null");
  TEMPER_ASSIGN_OR_RETURN(std::string type, RequiredString(node, field, "type"));
  if (type != "Sequence") return one(node, std::string(field), type);
  auto list = node.find(list_key);
  if (list == node.end() || !list->is_array())
    return Malformed(field, fmt::format("Sequence without a \"{}\" array", list_key));
  for (size_t i = 0; i < list->size(); ++i) {
    std::string sub = fmt::format("{}.{}[{}]", field, list_key, i);
    const json& step = (*list)[i];
    if (!step.is_object()) return Malformed(sub, "expected an object");
    TEMPER_ASSIGN_OR_RETURN(std::string step_type, RequiredString(step, sub, "type"));
    if (step_type == "Sequence") {
      TEMPER_RETURN_IF_ERROR(ForEachStep(step, sub, list_key, one));
    } else {
      TEMPER_RETURN_IF_ERROR(one(step, sub, step_type));
    }
  }
  return Status::OK();
}

Status ParseModel(const json& root, TokenizerSpec& spec, const SpecSax& sax) {
  auto it = root.find("model");
  if (it == root.end()) return Malformed("tokenizer.json", "missing \"model\"");
  const json& model = *it;
  if (!model.is_object()) return Malformed("model", "expected an object");
  auto type = model.find("type");
  if (type != model.end()) {
    if (!type->is_string()) return Malformed("model.type", "expected a string");
    if (*type != "BPE") {
      return Unsupported("model.type",
                         fmt::format("unknown model type '{}' (only BPE is supported)", type->get<std::string>()));
    }
  }
  if (!sax.seen_vocab) return Malformed("model", "missing \"vocab\" object");
  if (!sax.seen_merges) return Malformed("model", "missing \"merges\" array");
  if (auto d = model.find("dropout"); d != model.end() && !d->is_null()) {
    if (!d->is_number()) return Malformed("model.dropout", "expected a number or null");
    if (d->get<double>() != 0.0) return Unsupported("model.dropout", "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto f = model.find(key);
    if (f == model.end() || f->is_null()) continue;
    if (!f->is_string()) return Malformed(fmt::format("model.{}", key), "expected a string or null");
    if (!f->get_ref<const std::string&>().empty()) return Unsupported(fmt::format("model.{}", key), "not supported");
  }
  if (auto u = model.find("unk_token"); u != model.end() && !u->is_null()) {
    if (!u->is_string()) return Malformed("model.unk_token", "expected a string or null");
    spec.model.unk_token = u->get<std::string>();
  }
  TEMPER_ASSIGN_OR_RETURN(spec.model.byte_fallback, OptionalBool(model, "model", "byte_fallback", false));
  TEMPER_ASSIGN_OR_RETURN(spec.model.fuse_unk, OptionalBool(model, "model", "fuse_unk", false));
  TEMPER_ASSIGN_OR_RETURN(spec.model.ignore_merges, OptionalBool(model, "model", "ignore_merges", false));
  return Status::OK();
}

Status ParseAddedTokens(const json& root, TokenizerSpec& spec) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return Status::OK();
  if (!it->is_array()) return Malformed("added_tokens", "expected an array");
  spec.added_tokens.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    std::string field = fmt::format("added_tokens[{}]", i);
    const json& t = (*it)[i];
    if (!t.is_object()) return Malformed(field, "expected an object");
    AddedTokenSpec token;
    auto id = t.find("id");
    if (id == t.end() || !id->is_number_unsigned() ||
        id->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return Malformed(field, "\"id\" must be a non-negative 32-bit integer");
    }
    token.id = static_cast<int32_t>(id->get<uint64_t>());
    TEMPER_ASSIGN_OR_RETURN(token.content, RequiredString(t, field, "content"));
    if (token.content.empty()) return Malformed(field, "empty \"content\"");
    TEMPER_ASSIGN_OR_RETURN(token.special, OptionalBool(t, field, "special", false));
    // tokenizers' default: an added token is normalized unless it is special.
    TEMPER_ASSIGN_OR_RETURN(token.normalized, OptionalBool(t, field, "normalized", !token.special));
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      TEMPER_ASSIGN_OR_RETURN(bool set, OptionalBool(t, field, flag, false));
      if (set)
        return Unsupported(fmt::format("{} ({})", field, Quote(token.content)),
                           fmt::format("{} is not supported", flag));
    }
    spec.added_tokens.push_back(std::move(token));
  }
  return Status::OK();
}

Status ParseNormalizer(const json& root, TokenizerSpec& spec) {
  auto it = root.find("normalizer");
  if (it == root.end()) return Status::OK();
  return ForEachStep(*it, "normalizer", "normalizers",
                     [&](const json& step, const std::string& field, const std::string& type) -> Status {
                       NormalizerStep out;
                       if (type == "Replace") {
                         out.kind = NormalizerStep::Kind::kReplace;
                         TEMPER_ASSIGN_OR_RETURN(out.pattern, StringPattern(step, field));
                         TEMPER_ASSIGN_OR_RETURN(out.content, RequiredString(step, field, "content"));
                       } else if (type == "Prepend") {
                         out.kind = NormalizerStep::Kind::kPrepend;
                         TEMPER_ASSIGN_OR_RETURN(out.content, RequiredString(step, field, "prepend"));
                       } else {
                         return Unsupported(field, fmt::format("normalizer type '{}' is not supported", type));
                       }
                       spec.normalizer.push_back(std::move(out));
                       return Status::OK();
                     });
}

Status ParsePreTokenizer(const json& root, TokenizerSpec& spec) {
  auto it = root.find("pre_tokenizer");
  if (it == root.end()) return Status::OK();
  return ForEachStep(*it, "pre_tokenizer", "pretokenizers",
                     [&](const json& step, const std::string& field, const std::string& type) -> Status {
                       if (type != "Split")
                         return Unsupported(field, fmt::format("pre-tokenizer type '{}' is not supported", type));
                       SplitStep out;
                       TEMPER_ASSIGN_OR_RETURN(out.pattern, StringPattern(step, field));
                       TEMPER_ASSIGN_OR_RETURN(bool invert, OptionalBool(step, field, "invert", false));
                       if (invert)
                         return Unsupported(fmt::format("{}.invert", field), "inverted Split is not supported");
                       TEMPER_ASSIGN_OR_RETURN(std::string behavior, RequiredString(step, field, "behavior"));
                       if (behavior == "Removed") out.behavior = SplitBehavior::kRemoved;
                       else if (behavior == "Isolated") out.behavior = SplitBehavior::kIsolated;
                       else if (behavior == "MergedWithPrevious") out.behavior = SplitBehavior::kMergedWithPrevious;
                       else if (behavior == "MergedWithNext") out.behavior = SplitBehavior::kMergedWithNext;
                       else if (behavior == "Contiguous") out.behavior = SplitBehavior::kContiguous;
                       else
                         return Malformed(fmt::format("{}.behavior", field),
                                          fmt::format("unknown behavior '{}'", behavior));
                       spec.pre_tokenizer.push_back(std::move(out));
                       return Status::OK();
                     });
}

Status ParseDecoder(const json& root, TokenizerSpec& spec) {
  auto it = root.find("decoder");
  if (it == root.end()) return Status::OK();
  return ForEachStep(*it, "decoder", "decoders",
                     [&](const json& step, const std::string& field, const std::string& type) -> Status {
                       DecoderStep out;
                       if (type == "Replace") {
                         out.kind = DecoderStep::Kind::kReplace;
                         TEMPER_ASSIGN_OR_RETURN(out.pattern, StringPattern(step, field));
                         TEMPER_ASSIGN_OR_RETURN(out.content, RequiredString(step, field, "content"));
                       } else if (type == "ByteFallback") {
                         out.kind = DecoderStep::Kind::kByteFallback;
                       } else if (type == "Fuse") {
                         out.kind = DecoderStep::Kind::kFuse;
                       } else if (type == "Strip") {
                         out.kind = DecoderStep::Kind::kStrip;
                         TEMPER_ASSIGN_OR_RETURN(out.content, RequiredString(step, field, "content"));
                         TEMPER_ASSIGN_OR_RETURN(out.start, OptionalSmallInt(step, field, "start"));
                         TEMPER_ASSIGN_OR_RETURN(out.stop, OptionalSmallInt(step, field, "stop"));
                       } else {
                         return Unsupported(field, fmt::format("decoder type '{}' is not supported", type));
                       }
                       spec.decoder.push_back(std::move(out));
                       return Status::OK();
                     });
}

Status ParsePostProcessor(const json& root, TokenizerSpec& spec) {
  auto it = root.find("post_processor");
  if (it == root.end() || it->is_null()) return Status::OK();
  const json& pp = *it;
  if (!pp.is_object()) return Malformed("post_processor", "expected an object or null");
  TEMPER_ASSIGN_OR_RETURN(std::string type, RequiredString(pp, "post_processor", "type"));
  if (type != "TemplateProcessing") {
    return Unsupported("post_processor", fmt::format("post-processor type '{}' is not supported", type));
  }
  auto single = pp.find("single");
  if (single == pp.end() || !single->is_array()) return Malformed("post_processor", "missing \"single\" array");
  auto specials = pp.find("special_tokens");
  for (size_t i = 0; i < single->size(); ++i) {
    std::string field = fmt::format("post_processor.single[{}]", i);
    const json& piece = (*single)[i];
    if (!piece.is_object()) return Malformed(field, "expected an object");
    TemplatePiece out;
    if (auto seq = piece.find("Sequence"); seq != piece.end()) {
      if (!seq->is_object()) return Malformed(field, "\"Sequence\" must be an object");
      TEMPER_ASSIGN_OR_RETURN(std::string id, RequiredString(*seq, field + ".Sequence", "id"));
      if (id != "A") return Malformed(field, fmt::format("the single template can only hold sequence A, not {}", id));
      out.is_sequence = true;
    } else if (auto tok = piece.find("SpecialToken"); tok != piece.end()) {
      if (!tok->is_object()) return Malformed(field, "\"SpecialToken\" must be an object");
      TEMPER_ASSIGN_OR_RETURN(std::string name, RequiredString(*tok, field + ".SpecialToken", "id"));
      if (specials == pp.end() || !specials->is_object() || !specials->contains(name)) {
        return Malformed(field, fmt::format("special token {} is not in post_processor.special_tokens", Quote(name)));
      }
      const json& entry = (*specials)[name];
      std::string entry_field = fmt::format("post_processor.special_tokens[{}]", Quote(name));
      auto ids = entry.is_object() ? entry.find("ids") : entry.end();
      if (!entry.is_object() || ids == entry.end() || !ids->is_array() || ids->empty()) {
        return Malformed(entry_field, "expected a non-empty \"ids\" array");
      }
      for (const json& id : *ids) {
        if (!id.is_number_unsigned() ||
            id.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          return Malformed(entry_field, "ids must be non-negative 32-bit integers");
        }
        out.ids.push_back(static_cast<int32_t>(id.get<uint64_t>()));
      }
    } else {
      return Malformed(field, "expected \"Sequence\" or \"SpecialToken\"");
    }
    spec.single_template.push_back(std::move(out));
  }
  return Status::OK();
}

}  // namespace

Result<TokenizerSpec> ParseTokenizerJson(std::string_view text) {
  TokenizerSpec spec;
  try {
    SpecSax sax(spec.model);
    if (!json::sax_parse(text, &sax)) {
      return Status::DataLoss(sax.error.empty() ? std::string("JSON parse failed") : sax.error);
    }
    if (!sax.root.is_object()) return Malformed("tokenizer.json", "the top level must be a JSON object");
    TEMPER_RETURN_IF_ERROR(ParseModel(sax.root, spec, sax));
    TEMPER_RETURN_IF_ERROR(ParseAddedTokens(sax.root, spec));
    TEMPER_RETURN_IF_ERROR(ParseNormalizer(sax.root, spec));
    TEMPER_RETURN_IF_ERROR(ParsePreTokenizer(sax.root, spec));
    TEMPER_RETURN_IF_ERROR(ParseDecoder(sax.root, spec));
    TEMPER_RETURN_IF_ERROR(ParsePostProcessor(sax.root, spec));
  } catch (const std::exception& e) {
    // nlohmann reports type errors by throwing; every access above is type-checked first, so this
    // is reached only on allocation failure. It must still not cross the library boundary.
    return Status::Internal(fmt::format("reading tokenizer.json: {}", e.what()));
  }
  return spec;
}

}  // namespace temper::engine
