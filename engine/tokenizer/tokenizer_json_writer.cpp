#include "engine/tokenizer/tokenizer_json_writer.h"

#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace temper::engine {
namespace {

using ordered_json = nlohmann::ordered_json;

// A string as a JSON literal. nlohmann refuses invalid UTF-8 by throwing; that becomes an error
// naming where the string was.
Result<std::string> Quoted(std::string_view s, std::string_view where) {
  try {
    return ordered_json(std::string(s)).dump();
  } catch (const nlohmann::json::exception&) {
    return Status::InvalidArgument(fmt::format("{} is not UTF-8", where));
  }
}

ordered_json StringPattern(const std::string& s) { return ordered_json{{"String", s}}; }

ordered_json Steps(std::vector<ordered_json> steps, const char* sequence_key) {
  if (steps.empty()) return nullptr;
  if (steps.size() == 1) return std::move(steps[0]);
  ordered_json seq;
  seq["type"] = "Sequence";
  seq[sequence_key] = std::move(steps);
  return seq;
}

ordered_json Normalizer(const TokenizerSpec& spec) {
  std::vector<ordered_json> steps;
  for (const NormalizerStep& n : spec.normalizer) {
    if (n.kind == NormalizerStep::Kind::kReplace) {
      steps.push_back({{"type", "Replace"}, {"pattern", StringPattern(n.pattern)}, {"content", n.content}});
    } else {
      steps.push_back({{"type", "Prepend"}, {"prepend", n.content}});
    }
  }
  return Steps(std::move(steps), "normalizers");
}

ordered_json PreTokenizer(const TokenizerSpec& spec) {
  std::vector<ordered_json> steps;
  for (const SplitStep& s : spec.pre_tokenizer) {
    const char* behavior = "Isolated";
    switch (s.behavior) {
      case SplitBehavior::kRemoved:
        behavior = "Removed";
        break;
      case SplitBehavior::kIsolated:
        behavior = "Isolated";
        break;
      case SplitBehavior::kMergedWithPrevious:
        behavior = "MergedWithPrevious";
        break;
      case SplitBehavior::kMergedWithNext:
        behavior = "MergedWithNext";
        break;
      case SplitBehavior::kContiguous:
        behavior = "Contiguous";
        break;
    }
    steps.push_back(
        {{"type", "Split"}, {"pattern", StringPattern(s.pattern)}, {"behavior", behavior}, {"invert", false}});
  }
  return Steps(std::move(steps), "pretokenizers");
}

ordered_json Decoder(const TokenizerSpec& spec) {
  std::vector<ordered_json> steps;
  for (const DecoderStep& d : spec.decoder) {
    switch (d.kind) {
      case DecoderStep::Kind::kReplace:
        steps.push_back({{"type", "Replace"}, {"pattern", StringPattern(d.pattern)}, {"content", d.content}});
        break;
      case DecoderStep::Kind::kByteFallback:
        steps.push_back({{"type", "ByteFallback"}});
        break;
      case DecoderStep::Kind::kFuse:
        steps.push_back({{"type", "Fuse"}});
        break;
      case DecoderStep::Kind::kStrip:
        steps.push_back({{"type", "Strip"}, {"content", d.content}, {"start", d.start}, {"stop", d.stop}});
        break;
    }
  }
  return Steps(std::move(steps), "decoders");
}

Result<ordered_json> PostProcessor(const TokenizerSpec& spec) {
  if (spec.single_template.empty()) return ordered_json(nullptr);
  std::map<int32_t, std::string> names;  // every id the template may name: vocabulary, then added
  for (const TemplatePiece& piece : spec.single_template) {
    for (int32_t id : piece.ids) names[id];
  }
  for (const BpeSpec::VocabEntry& e : spec.model.vocab) {
    if (auto it = names.find(e.id); it != names.end()) it->second = spec.model.View(e.token);
  }
  for (const AddedTokenSpec& t : spec.added_tokens) {
    if (auto it = names.find(t.id); it != names.end()) it->second = t.content;
  }
  ordered_json single = ordered_json::array(), pair = ordered_json::array(), special = ordered_json::object();
  for (int sequence = 0; sequence < 2; ++sequence) {
    for (const TemplatePiece& piece : spec.single_template) {
      ordered_json& out = sequence == 0 ? single : pair;
      if (piece.is_sequence) {
        out.push_back({{"Sequence", {{"id", sequence == 0 ? "A" : "B"}, {"type_id", sequence}}}});
        continue;
      }
      std::string name;
      ordered_json ids = ordered_json::array(), tokens = ordered_json::array();
      for (int32_t id : piece.ids) {
        const std::string& token = names[id];
        if (token.empty()) {
          return Status::InvalidArgument(fmt::format("post_processor: id {} is not a token", id));
        }
        name += token;
        ids.push_back(id);
        tokens.push_back(token);
      }
      out.push_back({{"SpecialToken", {{"id", name}, {"type_id", sequence}}}});
      special[name] = {{"id", name}, {"ids", ids}, {"tokens", tokens}};
    }
  }
  return ordered_json{{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

}  // namespace

Result<std::string> WriteTokenizerJson(const TokenizerSpec& spec) {
  ordered_json head;
  head["version"] = "1.0";
  head["truncation"] = nullptr;
  head["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (const AddedTokenSpec& t : spec.added_tokens) {
    added.push_back({{"id", t.id},
                     {"content", t.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", t.normalized},
                     {"special", t.special}});
  }
  head["added_tokens"] = std::move(added);
  head["normalizer"] = Normalizer(spec);
  head["pre_tokenizer"] = PreTokenizer(spec);
  TEMPER_ASSIGN_OR_RETURN(head["post_processor"], PostProcessor(spec));
  head["decoder"] = Decoder(spec);

  const BpeSpec& bpe = spec.model;
  ordered_json model_head;
  model_head["type"] = "BPE";
  model_head["dropout"] = nullptr;
  model_head["unk_token"] = bpe.unk_token ? ordered_json(*bpe.unk_token) : ordered_json(nullptr);
  model_head["continuing_subword_prefix"] = nullptr;
  model_head["end_of_word_suffix"] = nullptr;
  model_head["fuse_unk"] = bpe.fuse_unk;
  model_head["byte_fallback"] = bpe.byte_fallback;
  model_head["ignore_merges"] = bpe.ignore_merges;

  std::string text;
  try {
    text = head.dump();
    text.pop_back();  // the closing brace: "model" follows
    text += ",\"model\":";
    std::string model_text = model_head.dump();
    model_text.pop_back();
    text += model_text;
  } catch (const nlohmann::json::exception&) {
    return Status::InvalidArgument("an added token, the unknown token or a normalizer string is not UTF-8");
  }
  // The vocabulary and merges (half a million entries for Gemma) are written string by string:
  // a DOM of them would cost seconds and gigabytes.
  text += ",\"vocab\":{";
  for (size_t i = 0; i < bpe.vocab.size(); ++i) {
    TEMPER_ASSIGN_OR_RETURN(std::string token, Quoted(bpe.View(bpe.vocab[i].token), fmt::format("model.vocab[{}]", i)));
    if (i > 0) text += ',';
    text += token;
    text += ':';
    text += std::to_string(bpe.vocab[i].id);
  }
  text += "},\"merges\":[";
  for (size_t i = 0; i < bpe.merges.size(); ++i) {
    const std::string where = fmt::format("model.merges[{}]", i);
    TEMPER_ASSIGN_OR_RETURN(std::string left, Quoted(bpe.View(bpe.merges[i].left), where));
    TEMPER_ASSIGN_OR_RETURN(std::string right, Quoted(bpe.View(bpe.merges[i].right), where));
    if (i > 0) text += ',';
    text += '[';
    text += left;
    text += ',';
    text += right;
    text += ']';
  }
  text += "]}}";
  return text;
}

}  // namespace temper::engine
