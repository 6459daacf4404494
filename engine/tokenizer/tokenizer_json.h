// TokenizerSpec: the parts of a Hugging Face `tokenizer.json` that temper's tokenizer runs, parsed
// and checked but not yet indexed.
//
// Why a separate step: the file is untrusted input (33 MB for Gemma, written by whoever published
// the checkpoint), so every field is checked here and each error names the field and index it is
// about ("model.merges[17]: ..."). Tokenizer (engine/tokenizer/tokenizer.h) then builds its lookup tables from
// a spec that is known to be well formed.
//
// Speed: the vocabulary (262,144 entries) and merges (514,906) are read with nlohmann's SAX
// interface straight into one string arena, never into a JSON DOM; building the DOM alone takes
// ~0.8 s for Gemma's file, the SAX pass ~0.15 s. The small sections (normalizer, decoder, ...) are
// read as DOM.
//
// Supported (anything else is refused with an error naming the type):
//   model          BPE (byte_fallback, unk_token, fuse_unk, ignore_merges; merges as "a b" strings
//                  or as ["a", "b"] pairs). No dropout, continuing_subword_prefix or
//                  end_of_word_suffix.
//   added_tokens   without lstrip / rstrip / single_word.
//   normalizer     null, Replace (string pattern), Prepend, Sequence of those.
//   pre_tokenizer  null, Split (string pattern, not inverted), Sequence of those.
//   post_processor null, TemplateProcessing (its `single` template).
//   decoder        null, Replace (string pattern), ByteFallback, Fuse, Strip, Sequence of those.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::engine {

struct AddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool special = false;     // dropped by Decode(skip_special_tokens=true)
  bool normalized = false;  // matched after normalization (true) or on the raw text (false)
};

struct NormalizerStep {
  enum class Kind { kReplace, kPrepend };
  Kind kind = Kind::kReplace;
  std::string pattern;  // kReplace: the literal string to replace
  std::string content;  // kReplace: the replacement; kPrepend: the prefix
};

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  std::string pattern;  // a literal string
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip };
  Kind kind = Kind::kFuse;
  std::string pattern;  // kReplace
  std::string content;  // kReplace: the replacement; kStrip: the character stripped
  int start = 0;        // kStrip: occurrences stripped at the start of each token
  int stop = 0;         // kStrip: ... and at its end
};

// One element of TemplateProcessing's `single` template: either the encoded text ("A") or the ids
// of a special token.
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<int32_t> ids;  // when !is_sequence
};

// Strings live in `arena`; vocab and merges refer to them by offset so that half a million merges
// cost no allocations of their own.
struct BpeSpec {
  struct Span {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct VocabEntry {
    Span token;
    int32_t id = 0;
  };
  struct MergeEntry {
    Span left;
    Span right;
  };
  std::string arena;
  std::vector<VocabEntry> vocab;   // file order
  std::vector<MergeEntry> merges;  // rank = index
  std::optional<std::string> unk_token;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;

  std::string_view View(Span s) const { return std::string_view(arena).substr(s.offset, s.size); }
};

struct TokenizerSpec {
  BpeSpec model;
  std::vector<AddedTokenSpec> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<SplitStep> pre_tokenizer;
  std::vector<DecoderStep> decoder;
  std::vector<TemplatePiece> single_template;  // empty: the post-processor adds nothing
};

// Parses the text of a tokenizer.json. Errors are DataLoss (malformed JSON, a field of the wrong
// type, a bad merges entry) or Unimplemented (a component type this tokenizer does not run), each
// naming the field, e.g. "model.merges[12]: expected two tokens, got 3".
Result<TokenizerSpec> ParseTokenizerJson(std::string_view json);

}  // namespace temper::engine
