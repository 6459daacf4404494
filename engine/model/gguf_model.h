// GgufModel: a Gemma 3 GGUF file (llama.cpp's format) as the pieces of a Hugging Face model
// directory: the text of its config.json, its tensors under Hugging Face names in bf16, its
// tokenizer and its chat template. `LoadModel` runs a .gguf through this, and `temper-lm convert`
// writes the same pieces out, so a GGUF and the directory converted from it load to identical
// weights and tokenizer.
//
// Only `general.architecture` gemma3 is taken; another is refused naming the key and its value.
// The mapping, and where each value comes from:
//   config      gemma3.* keys as transformers' GGUF loader maps them (integrations/ggml.py), written
//               as the config.json transformers 5.23's Gemma3TextConfig(...).to_json_string() writes
//               (ParseModelConfig reads it like any checkpoint's). What llama.cpp infers rather than
//               stores (src/llama-model.cpp, LLM_ARCH_GEMMA3) is inferred the same way: sliding
//               layers' RoPE base 10000 (rope_freq_base_train_swa), every 6th layer full
//               (set_swa_pattern(6)), and the attention scale 1/sqrt(key_length), except on the 27B
//               (62 layers) where it is 1/sqrt(hidden / heads): query_pre_attn_scalar.
//   tensors     token_embd, blk.N.{attn_q,attn_k,attn_v,attn_output,attn_q_norm,attn_k_norm,
//               attn_norm,post_attention_norm,ffn_norm,post_ffw_norm,ffn_gate,ffn_up,ffn_down},
//               output_norm (and output, when the head is not tied) -> model.embed_tokens.weight,
//               model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight.
//               GGUF lists dimensions innermost first, so [640, 262144] is HF's [262144, 640].
//               llama.cpp's converter stores every Gemma norm weight as 1 + w (Gemma3RMSNorm
//               multiplies by 1 + w); w = value - 1 is taken in fp32, then rounded to bf16.
//   tokenizer   tokenizer.ggml.{tokens,scores,token_type} (model "llama": SentencePiece BPE) as the
//               tokenizer.json Hugging Face ships for Gemma 3: see GgufTokenizerSpec.
//   template    tokenizer.chat_template, when the file has one.
//
// Thread safety: pure functions of an open GgufFile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model/gguf_file.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace temper::engine {

// The config.json text (two-space indent, keys sorted, a final newline, as transformers writes it).
// Errors: InvalidArgument naming general.architecture when it is not gemma3; NotFound or
// InvalidArgument naming a gemma3.* or tokenizer.ggml.* key that is missing or out of range.
Result<std::string> GgufConfigJson(const GgufFile& file);

// The tensors of a Hugging Face gemma3_text checkpoint, dequantized to bf16 in one owned buffer.
struct GgufBf16Tensors {
  MappedFile storage;               // anonymous memory: every tensor's bf16 values, back to back
  std::vector<TensorInfo> tensors;  // HF names and shapes; begin/end index `storage`, dtype BF16
};

// Errors: DataLoss naming the tensor when one the geometry implies is missing, one is not expected
// (not part of a Gemma 3 decoder), or its shape disagrees; Unimplemented naming the tensor for a
// ggml type that cannot be dequantized; ResourceExhausted when the memory cannot be mapped;
// GgufConfigJson's errors for the geometry.
Result<GgufBf16Tensors> GgufGemma3Tensors(const GgufFile& file);

// The tokenizer. Hugging Face's Gemma 3 tokenizer.json, rebuilt from what the GGUF keeps:
//   - vocabulary: tokens in id order. llama.cpp writes the spaces of user-defined pieces as " "
//     where SentencePiece (and the tokenizer.json) has "▁"; since the normalizer turns every space
//     into "▁" before BPE, a piece holding a space could never match, so spaces become "▁" again.
//   - merges: tokenizer.ggml.merges when present; otherwise derived as transformers'
//     SentencePieceExtractor does (generate_merges): every split of a piece into two vocabulary
//     pieces (at code point boundaries), ranked by the piece's score, highest first, then by the
//     left part's length and the right part's, longest first, then by the piece's id. User-defined
//     pieces (type 4) rank with score 0, the score SentencePiece gives them (llama.cpp stores
//     -1000): with that, the derived merges are the 514,906 of the real tokenizer.json in order.
//   - control pieces (type 3) are special added tokens, user-defined ones (4) added tokens that are
//     not special (as transformers' GGUF loader and SentencePieceExtractor mark them); none is
//     normalized. Byte pieces (type 6, "<0xXX>") give byte fallback; the unknown token is
//     tokenizer.ggml.unknown_token_id's.
//   - normalizer: " " -> "▁" (with a "▁" prepended first when add_space_prefix); pre-tokenizer
//     Split(" ", MergedWithPrevious); decoder "▁" -> " ", ByteFallback, Fuse (and Strip of the
//     leading space when add_space_prefix); post-processor: <bos> first when add_bos_token
//     (default true, as llama.cpp and transformers default it for a SentencePiece vocabulary),
//     <eos> last when add_eos_token.
// Errors: Unimplemented naming tokenizer.ggml.model when it is not "llama"; InvalidArgument naming
// the key (and index) for arrays of different lengths, a token that is not UTF-8, an id out of range.
Result<TokenizerSpec> GgufTokenizerSpec(const GgufFile& file);

// tokenizer.chat_template, or nullopt when the file has none.
Result<std::optional<std::string>> GgufChatTemplate(const GgufFile& file);

// True when `path` names a GGUF file (a regular file whose name ends in .gguf).
bool IsGgufPath(const std::filesystem::path& path);

}  // namespace temper::engine
