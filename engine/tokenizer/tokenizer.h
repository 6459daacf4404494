// Tokenizer: text <-> token ids for Gemma, from a Hugging Face `tokenizer.json`.
//
// The model only understands the ids the tokenizer it was trained with produces, so this follows
// Rust `tokenizers` exactly (checked line by line against tests/data/tokenizer/cases.jsonl, which
// an independent implementation re-derived). The pipeline, for Gemma 3/4:
//   1. added tokens are cut out of the raw text first, leftmost-longest, special or not
//      (`<bos>`, `<|turn>`, newline runs, HTML tags, `<unusedN>`), see added_token_trie.h;
//   2. each remaining piece is normalized (Gemma: every " " becomes "▁"; no dummy prefix);
//   3. pre-tokenized (Gemma's Split(" ") finds nothing left to split, so pieces stay whole and
//      merges cross word boundaries);
//   4. encoded by BPE with byte fallback, see bpe.h.
// Decoding maps ids to token strings and runs the file's decoder (Gemma: "▁" -> " ", fuse runs of
// `<0xXX>` byte tokens and decode them as UTF-8, one U+FFFD per byte of an invalid run, as Rust
// does). Which components are supported is listed in tokenizer_json.h.
//
// Special-token ids are never hard-coded: look them up by their text (TokenToId / RequireToken).
//
// Thread safety: immutable after loading; Encode and Decode are const and may run concurrently.
// Ownership: a Tokenizer owns all its tables (about 35 MB resident for Gemma's 262k vocabulary);
// move-only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/tokenizer/added_token_trie.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace temper::engine {

struct EncodeOptions {
  // Wrap the ids in the post-processor's template (Gemma: prepend `<bos>`), as
  // add_special_tokens=True does in transformers.
  bool add_special_tokens = false;
  // Recognise special added tokens written in the text. Off, a literal "<|turn>" in untrusted
  // content (a file read from a host, a tool's output) is encoded as ordinary text and cannot open
  // a turn; non-special added tokens (newline runs, HTML tags) still match, so ordinary text
  // encodes the same either way. transformers calls the off state split_special_tokens=True.
  bool match_special_tokens = true;
};

class Tokenizer {
 public:
  // Reads and parses a tokenizer.json. Errors: IOError naming the path when it cannot be read;
  // otherwise FromJson's errors, prefixed with the path.
  static Result<Tokenizer> FromFile(const std::string& path);
  // Parses the text of a tokenizer.json. Errors: DataLoss for malformed content (bad JSON,
  // "missing \"model\"", "model.merges[N]: ...", an added token that disagrees with the
  // vocabulary), Unimplemented for component types not supported (e.g. a WordPiece model).
  static Result<Tokenizer> FromJson(std::string_view json);
  // Builds the tables of a spec made elsewhere (a GGUF's vocabulary, engine/model/gguf_model.h).
  // Errors: Bpe::Build's (DataLoss naming a bad vocabulary entry or merge) and DataLoss for an
  // added token that disagrees with the vocabulary or a template id that is not a token.
  static Result<Tokenizer> FromSpec(TokenizerSpec spec);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Never fails: every byte sequence is encodable (bytes that are not valid UTF-8 take the byte
  // fallback path).
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const;

  // Errors: OutOfRange naming the first id (and its index) that is not a token.
  Result<std::string> Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // TokenToId, or NotFound "tokenizer has no token '<|turn>'".
  Result<int32_t> RequireToken(std::string_view token) const;
  // The token's string as stored (Gemma: "▁the", "<0x0A>", "<bos>"); nullopt for an unknown id.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // True for added tokens marked special (those Decode(skip_special_tokens) drops).
  bool IsSpecial(int32_t id) const;
  // One past the largest id (Gemma 3: 262145, because `<image_soft_token>` is 262144).
  int32_t id_limit() const { return id_limit_; }

 private:
  Tokenizer(Bpe bpe) : bpe_(std::move(bpe)) {}
  static Result<Tokenizer> Build(TokenizerSpec spec);

  struct Scratch {
    BpeScratch bpe;
    std::string normalized;
    std::string tmp;
  };
  void EncodeText(std::string_view text, bool match_special, std::vector<int32_t>& out, Scratch& scratch) const;
  void EncodeNormalized(std::string_view piece, bool match_special, std::vector<int32_t>& out,
                        BpeScratch& scratch) const;
  void PreTokenizeAndEncode(std::string_view piece, std::vector<int32_t>& out, BpeScratch& scratch) const;

  Bpe bpe_;
  int32_t id_limit_ = 0;
  // Added tokens, sorted by content (TokenToId) and by id (IdToToken); most are also in the
  // vocabulary under the same id, which Build() checks.
  std::vector<std::pair<std::string, int32_t>> added_by_content_;
  std::vector<std::pair<int32_t, std::string>> added_by_id_;
  std::vector<bool> special_;        // by id
  AddedTokenTrie raw_added_;         // added tokens with normalized=false
  AddedTokenTrie normalized_added_;  // added tokens with normalized=true (content normalized)
  std::vector<NormalizerStep> normalizer_;
  std::vector<SplitStep> pre_tokenizer_;
  std::vector<DecoderStep> decoder_;
  std::vector<TemplatePiece> single_template_;
};

}  // namespace temper::engine
