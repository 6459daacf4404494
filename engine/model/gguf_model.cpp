#include "engine/model/gguf_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/model/gguf_dequant.h"
#include "engine/tokenizer/bpe.h"

namespace temper::engine {
namespace {

constexpr std::string_view kArchitecture = "gemma3";
// llama.cpp's Gemma 3 (src/llama-model.cpp, LLM_ARCH_GEMMA3): sliding layers use RoPE base
// 10000 (hparams.rope_freq_base_train_swa), one layer in 6 is full (hparams.set_swa_pattern(6):
// layers 5, 11, 17, ...), and the 27B, the one with 62 layers, scales attention by
// 1/sqrt(hidden / heads) instead of 1/sqrt(key_length).
constexpr double kSlidingRopeTheta = 10000.0;
constexpr int kSlidingWindowPattern = 6;
constexpr uint64_t kGemma3_27bLayers = 62;

// The geometry the config and the tensor shapes both come from.
struct Gemma3Geometry {
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t ffn = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t context = 0;
  int64_t sliding_window = 0;
  double rms_eps = 0;
  double rope_theta = 0;
  std::optional<double> rope_linear_factor;
  int64_t query_pre_attn_scalar = 0;
  int64_t bos = -1, eos = -1, pad = -1;
  bool tied = true;
};

std::string Key(std::string_view suffix) { return fmt::format("{}.{}", kArchitecture, suffix); }

// A positive count that fits an int32 (every geometry value the engine keeps is an int).
Result<int64_t> Count(const GgufFile& f, const std::string& key) {
  TEMPER_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
  if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(fmt::format("{}: key '{}' is {}, not a count from 1 to 2^31-1", f.name(), key, v));
  }
  return static_cast<int64_t>(v);
}

// The float as it was written: a FLOAT32 1e-6 is 9.99999997e-07 as a double, and config.json
// should say 1e-06, so the shortest decimal that round-trips the float is read back as a double.
double ShortestDouble(double value, GgufValueType type) {
  if (type != GgufValueType::kF32) return value;
  return std::stod(fmt::format("{}", static_cast<float>(value)));
}

Result<double> FloatKey(const GgufFile& f, const std::string& key) {
  TEMPER_ASSIGN_OR_RETURN(double v, f.GetFloat(key));
  if (!std::isfinite(v) || v <= 0) {
    return Status::InvalidArgument(fmt::format("{}: key '{}' is {}, not a positive number", f.name(), key, v));
  }
  return ShortestDouble(v, f.Find(key)->type);
}

Result<int64_t> OptionalTokenId(const GgufFile& f, const std::string& key, int64_t vocab) {
  if (f.Find(key) == nullptr) return int64_t{-1};
  TEMPER_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
  if (v >= static_cast<uint64_t>(vocab)) {
    return Status::InvalidArgument(
        fmt::format("{}: key '{}' is {}, outside the vocabulary of {}", f.name(), key, v, vocab));
  }
  return static_cast<int64_t>(v);
}

Status CheckArchitecture(const GgufFile& f) {
  TEMPER_ASSIGN_OR_RETURN(std::string_view arch, f.GetString("general.architecture"));
  if (arch != kArchitecture) {
    return Status::InvalidArgument(fmt::format(
        "{}: key 'general.architecture' is '{}'; only gemma3 GGUF files are read", f.name(), arch.substr(0, 64)));
  }
  return Status::OK();
}

Result<Gemma3Geometry> ReadGeometry(const GgufFile& f) {
  TEMPER_RETURN_IF_ERROR(CheckArchitecture(f));
  Gemma3Geometry g;
  // transformers' GGUF loader takes vocab_size from the token list (integrations/ggml.py).
  TEMPER_ASSIGN_OR_RETURN(std::span<const std::string_view> tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens.empty() || tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(
        fmt::format("{}: key 'tokenizer.ggml.tokens' holds {} tokens", f.name(), tokens.size()));
  }
  g.vocab = static_cast<int64_t>(tokens.size());
  TEMPER_ASSIGN_OR_RETURN(g.hidden, Count(f, Key("embedding_length")));
  TEMPER_ASSIGN_OR_RETURN(g.ffn, Count(f, Key("feed_forward_length")));
  TEMPER_ASSIGN_OR_RETURN(g.layers, Count(f, Key("block_count")));
  // Each layer has 13 tensors; a count the file cannot back is refused before anything is sized by it.
  if (static_cast<uint64_t>(g.layers) * 13 > f.tensors().size()) {
    return Status::InvalidArgument(fmt::format("{}: key '{}' is {}, but the file holds only {} tensors", f.name(),
                                               Key("block_count"), g.layers, f.tensors().size()));
  }
  TEMPER_ASSIGN_OR_RETURN(g.heads, Count(f, Key("attention.head_count")));
  TEMPER_ASSIGN_OR_RETURN(g.kv_heads, Count(f, Key("attention.head_count_kv")));
  TEMPER_ASSIGN_OR_RETURN(g.head_dim, Count(f, Key("attention.key_length")));
  TEMPER_ASSIGN_OR_RETURN(int64_t value_length, Count(f, Key("attention.value_length")));
  if (value_length != g.head_dim) {
    return Status::InvalidArgument(fmt::format("{}: key '{}' is {} but '{}' is {}; Gemma 3 has one head_dim", f.name(),
                                               Key("attention.value_length"), value_length, Key("attention.key_length"),
                                               g.head_dim));
  }
  if (g.heads % g.kv_heads != 0) {
    return Status::InvalidArgument(fmt::format("{}: key '{}' ({}) does not divide '{}' ({})", f.name(),
                                               Key("attention.head_count_kv"), g.kv_heads, Key("attention.head_count"),
                                               g.heads));
  }
  TEMPER_ASSIGN_OR_RETURN(g.context, Count(f, Key("context_length")));
  TEMPER_ASSIGN_OR_RETURN(g.sliding_window, Count(f, Key("attention.sliding_window")));
  TEMPER_ASSIGN_OR_RETURN(g.rms_eps, FloatKey(f, Key("attention.layer_norm_rms_epsilon")));
  TEMPER_ASSIGN_OR_RETURN(g.rope_theta, FloatKey(f, Key("rope.freq_base")));
  if (f.Find(Key("rope.scaling.type")) != nullptr) {
    TEMPER_ASSIGN_OR_RETURN(std::string_view type, f.GetString(Key("rope.scaling.type")));
    if (type == "linear") {
      TEMPER_ASSIGN_OR_RETURN(double factor, FloatKey(f, Key("rope.scaling.factor")));
      g.rope_linear_factor = factor;
    } else if (type != "none") {
      return Status::InvalidArgument(fmt::format("{}: key '{}' is '{}'; Gemma 3 scales RoPE linearly or not at all",
                                                 f.name(), Key("rope.scaling.type"), type.substr(0, 64)));
    }
  }
  g.query_pre_attn_scalar = g.layers == static_cast<int64_t>(kGemma3_27bLayers) ? g.hidden / g.heads : g.head_dim;
  TEMPER_ASSIGN_OR_RETURN(g.bos, OptionalTokenId(f, "tokenizer.ggml.bos_token_id", g.vocab));
  TEMPER_ASSIGN_OR_RETURN(g.eos, OptionalTokenId(f, "tokenizer.ggml.eos_token_id", g.vocab));
  TEMPER_ASSIGN_OR_RETURN(g.pad, OptionalTokenId(f, "tokenizer.ggml.padding_token_id", g.vocab));
  g.tied = f.FindTensor("output.weight") == nullptr;
  return g;
}

// One tensor of the checkpoint: its GGUF name, HF name, HF shape, and whether it is a norm
// stored as 1 + w.
struct TensorMapping {
  std::string gguf;
  std::string hf;
  std::vector<int64_t> shape;
  bool norm = false;
};

std::vector<TensorMapping> ExpectedTensors(const Gemma3Geometry& g) {
  std::vector<TensorMapping> out;
  const int64_t h = g.hidden, q = g.heads * g.head_dim, kv = g.kv_heads * g.head_dim, ffn = g.ffn;
  out.push_back({"token_embd.weight", "model.embed_tokens.weight", {g.vocab, h}});
  for (int64_t i = 0; i < g.layers; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    const std::string l = fmt::format("model.layers.{}.", i);
    out.push_back({b + "attn_q.weight", l + "self_attn.q_proj.weight", {q, h}});
    out.push_back({b + "attn_k.weight", l + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({b + "attn_v.weight", l + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({b + "attn_output.weight", l + "self_attn.o_proj.weight", {h, q}});
    out.push_back({b + "attn_q_norm.weight", l + "self_attn.q_norm.weight", {g.head_dim}, true});
    out.push_back({b + "attn_k_norm.weight", l + "self_attn.k_norm.weight", {g.head_dim}, true});
    out.push_back({b + "ffn_gate.weight", l + "mlp.gate_proj.weight", {ffn, h}});
    out.push_back({b + "ffn_up.weight", l + "mlp.up_proj.weight", {ffn, h}});
    out.push_back({b + "ffn_down.weight", l + "mlp.down_proj.weight", {h, ffn}});
    out.push_back({b + "attn_norm.weight", l + "input_layernorm.weight", {h}, true});
    out.push_back({b + "post_attention_norm.weight", l + "post_attention_layernorm.weight", {h}, true});
    out.push_back({b + "ffn_norm.weight", l + "pre_feedforward_layernorm.weight", {h}, true});
    out.push_back({b + "post_ffw_norm.weight", l + "post_feedforward_layernorm.weight", {h}, true});
  }
  out.push_back({"output_norm.weight", "model.norm.weight", {h}, true});
  if (!g.tied) out.push_back({"output.weight", "lm_head.weight", {g.vocab, h}});
  return out;
}

bool ValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    uint32_t codepoint;
    pos += DecodeUtf8(s, pos, &codepoint);
    if (codepoint == kInvalidCodepoint) return false;
  }
  return true;
}

// Byte offsets of the code point boundaries inside `s` (valid UTF-8), first and last excluded.
void CodePointBoundaries(std::string_view s, std::vector<uint32_t>& out) {
  out.clear();
  for (size_t i = 1; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(static_cast<uint32_t>(i));
  }
}

// The vocabulary's pieces by a polynomial hash of their bytes, so that every split of a piece is
// looked up in O(1) after O(length) work (the prefix hashes, and each suffix's from them). Hashing
// each split's halves anew would cost O(length^2) a piece, which a hostile vocabulary of long pieces
// would turn into hours. A hit is confirmed byte for byte.
class PieceIndex {
 public:
  static constexpr uint64_t kBase = 0x100000001b3ULL;

  PieceIndex(const BpeSpec& bpe, std::span<const BpeSpec::Span> spans) : bpe_(bpe), spans_(spans) {
    by_hash_.reserve(spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      const std::string_view piece = bpe.View(spans[i]);
      const uint64_t hash = Hash(piece);
      // A repeated piece keeps its first id; the caller refuses the repeat.
      if (Find(piece, hash) < 0) by_hash_.emplace(Key(hash, piece.size()), static_cast<int32_t>(i));
    }
  }

  static uint64_t Hash(std::string_view s) {
    uint64_t h = 0;
    for (char c : s) h = h * kBase + static_cast<uint8_t>(c);
    return h;
  }

  // The id of the piece equal to `s`, whose Hash is `hash`; -1 when there is none.
  int32_t Find(std::string_view s, uint64_t hash) const {
    auto [begin, end] = by_hash_.equal_range(Key(hash, s.size()));
    for (auto it = begin; it != end; ++it) {
      if (bpe_.View(spans_[it->second]) == s) return it->second;
    }
    return -1;
  }
  int32_t Find(std::string_view s) const { return Find(s, Hash(s)); }

 private:
  static uint64_t Key(uint64_t hash, size_t size) {
    return hash ^ (static_cast<uint64_t>(size) * 0x9E3779B97F4A7C15ULL);
  }

  const BpeSpec& bpe_;
  std::span<const BpeSpec::Span> spans_;
  std::unordered_multimap<uint64_t, int32_t> by_hash_;
};

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

}  // namespace

bool IsGgufPath(const std::filesystem::path& path) {
  std::error_code ec;
  return path.extension() == ".gguf" && std::filesystem::is_regular_file(path, ec);
}

Result<std::string> GgufConfigJson(const GgufFile& file) {
  TEMPER_ASSIGN_OR_RETURN(Gemma3Geometry g, ReadGeometry(file));
  // The keys Gemma3TextConfig(...).to_json_string() writes in transformers 5.23 (the values that
  // differ from its defaults and those it always writes), plus `architectures`, which
  // save_pretrained adds, and `dtype`, which the bf16 weights have.
  nlohmann::json c = nlohmann::json::object();
  c["_sliding_window_pattern"] = kSlidingWindowPattern;
  c["architectures"] = {"Gemma3ForCausalLM"};
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["attn_logit_softcapping"] = nullptr;
  c["bos_token_id"] = g.bos >= 0 ? nlohmann::json(g.bos) : nlohmann::json(nullptr);
  c["dtype"] = "bfloat16";
  c["eos_token_id"] = g.eos >= 0 ? nlohmann::json(g.eos) : nlohmann::json(nullptr);
  c["final_logit_softcapping"] = nullptr;
  c["head_dim"] = g.head_dim;
  c["hidden_activation"] = "gelu_pytorch_tanh";
  c["hidden_size"] = g.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = g.ffn;
  nlohmann::json layer_types = nlohmann::json::array();
  for (int64_t i = 0; i < g.layers; ++i) {
    layer_types.push_back((i + 1) % kSlidingWindowPattern == 0 ? "full_attention" : "sliding_attention");
  }
  c["layer_types"] = std::move(layer_types);
  c["max_position_embeddings"] = g.context;
  c["model_type"] = "gemma3_text";
  c["num_attention_heads"] = g.heads;
  c["num_hidden_layers"] = g.layers;
  c["num_key_value_heads"] = g.kv_heads;
  c["pad_token_id"] = g.pad >= 0 ? nlohmann::json(g.pad) : nlohmann::json(nullptr);
  c["query_pre_attn_scalar"] = g.query_pre_attn_scalar;
  c["rms_norm_eps"] = g.rms_eps;
  nlohmann::json full = {{"rope_theta", g.rope_theta}, {"rope_type", "default"}};
  if (g.rope_linear_factor) {
    full["rope_type"] = "linear";
    full["factor"] = *g.rope_linear_factor;
  }
  c["rope_parameters"] = {{"full_attention", std::move(full)},
                          {"sliding_attention", {{"rope_theta", kSlidingRopeTheta}, {"rope_type", "default"}}}};
  c["sliding_window"] = g.sliding_window;
  c["tie_word_embeddings"] = g.tied;
  c["transformers_version"] = "5.23.0";
  c["use_bidirectional_attention"] = false;
  c["use_cache"] = true;
  c["vocab_size"] = g.vocab;
  return c.dump(2) + "\n";
}

Result<GgufBf16Tensors> GgufGemma3Tensors(const GgufFile& file) {
  TEMPER_ASSIGN_OR_RETURN(Gemma3Geometry g, ReadGeometry(file));
  const std::vector<TensorMapping> expected = ExpectedTensors(g);

  std::unordered_map<std::string_view, const TensorMapping*> by_gguf_name;
  for (const TensorMapping& m : expected) by_gguf_name.emplace(m.gguf, &m);
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!by_gguf_name.contains(t.name)) {
      return Status::DataLoss(
          fmt::format("{}: unexpected tensor '{}' (not part of the {}-layer Gemma 3 decoder "
                      "the metadata describes)",
                      file.name(), t.name.substr(0, 64), g.layers));
    }
  }

  std::vector<TensorInfo> infos;
  uint64_t total = 0;
  std::vector<const GgufTensorInfo*> sources;
  for (const TensorMapping& m : expected) {
    const GgufTensorInfo* t = file.FindTensor(m.gguf);
    if (t == nullptr) return Status::DataLoss(fmt::format("{}: missing tensor '{}'", file.name(), m.gguf));
    const std::vector<int64_t> hf_shape(t->dims.rbegin(), t->dims.rend());
    if (hf_shape != m.shape) {
      return Status::DataLoss(fmt::format(
          "{}: tensor '{}' has GGUF dims [{}] (HF shape [{}]) but the metadata "
          "implies [{}] for {}",
          file.name(), m.gguf, fmt::join(t->dims, ", "), fmt::join(hf_shape, ", "), fmt::join(m.shape, ", "), m.hf));
    }
    if (!CanDequantize(t->type)) {
      return Status::Unimplemented(fmt::format("{}: tensor '{}' has ggml type {}, which temper cannot dequantize",
                                               file.name(), m.gguf,
                                               GgmlTypeInfo(static_cast<uint32_t>(t->type))->name));
    }
    TensorInfo info;
    info.name = m.hf;
    info.dtype = DType::kBF16;
    info.shape = m.shape;
    info.begin = total;
    info.end = total + static_cast<uint64_t>(t->elements) * 2;
    total = info.end;
    infos.push_back(std::move(info));
    sources.push_back(t);
  }
  Result<MappedFile> storage = MappedFile::Anonymous(total);
  if (!storage.ok()) return storage.status().WithContext(fmt::format("{}: the bf16 weights", file.name()));
  GgufBf16Tensors out{std::move(storage).value(), std::move(infos)};
  const std::span<uint8_t> bytes = out.storage.mutable_bytes();
  // One tensor at a time per thread, biggest first so that the embedding (62% of the 270M) does
  // not start last: dequantizing is most of a GGUF's load time (0.75 s of the 270M on one core).
  std::vector<size_t> order(expected.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a]->elements > sources[b]->elements; });
  std::atomic<size_t> next{0};
  std::vector<Status> errors(expected.size());
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      const size_t i = order[k];
      const TensorInfo& info = out.tensors[i];
      std::span<uint16_t> values(reinterpret_cast<uint16_t*>(bytes.data() + info.begin), (info.end - info.begin) / 2);
      errors[i] =
          DequantizeToBf16(sources[i]->type, file.TensorData(*sources[i]), values, expected[i].norm ? 1.0f : 0.0f);
    }
  };
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  {
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!errors[i].ok()) return errors[i].WithContext(fmt::format("{}: tensor '{}'", file.name(), expected[i].gguf));
  }
  return out;
}

Result<TokenizerSpec> GgufTokenizerSpec(const GgufFile& f) {
  TEMPER_RETURN_IF_ERROR(CheckArchitecture(f));
  TEMPER_ASSIGN_OR_RETURN(std::string_view model, f.GetString("tokenizer.ggml.model"));
  if (model != "llama") {
    return Status::Unimplemented(
        fmt::format("{}: key 'tokenizer.ggml.model' is '{}'; only \"llama\" "
                    "(SentencePiece) vocabularies are built",
                    f.name(), model.substr(0, 64)));
  }
  TEMPER_ASSIGN_OR_RETURN(std::span<const std::string_view> tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  TEMPER_ASSIGN_OR_RETURN(std::vector<float> scores, f.GetF32Array("tokenizer.ggml.scores"));
  TEMPER_ASSIGN_OR_RETURN(std::vector<int32_t> types, f.GetI32Array("tokenizer.ggml.token_type"));
  if (scores.size() != tokens.size() || types.size() != tokens.size()) {
    return Status::InvalidArgument(
        fmt::format("{}: keys 'tokenizer.ggml.tokens', 'tokenizer.ggml.scores' and 'tokenizer.ggml.token_type' "
                    "hold {}, {} and {} entries; each token needs one of each",
                    f.name(), tokens.size(), scores.size(), types.size()));
  }
  if (tokens.empty() || tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(
        fmt::format("{}: key 'tokenizer.ggml.tokens' holds {} tokens", f.name(), tokens.size()));
  }
  const auto vocab_size = static_cast<int64_t>(tokens.size());

  TokenizerSpec spec;
  BpeSpec& bpe = spec.model;
  // The vocabulary, spaces spelled "▁" (see the header).
  std::vector<BpeSpec::Span> spans(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!ValidUtf8(tokens[i])) {
      return Status::InvalidArgument(fmt::format("{}: key 'tokenizer.ggml.tokens'[{}] is not UTF-8", f.name(), i));
    }
    if (bpe.arena.size() + tokens[i].size() * 3 > std::numeric_limits<uint32_t>::max()) {
      return Status::InvalidArgument(fmt::format("{}: key 'tokenizer.ggml.tokens' is too large", f.name()));
    }
    const auto offset = static_cast<uint32_t>(bpe.arena.size());
    for (char c : tokens[i]) {
      if (c == ' ') {
        bpe.arena += "\xE2\x96\x81";
      } else {
        bpe.arena += c;
      }
    }
    spans[i] = {offset, static_cast<uint32_t>(bpe.arena.size() - offset)};
    bpe.vocab.push_back({spans[i], static_cast<int32_t>(i)});
  }
  const PieceIndex ids(bpe, spans);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t first = ids.Find(bpe.View(spans[i]));
    if (first != static_cast<int32_t>(i)) {
      return Status::InvalidArgument(
          fmt::format("{}: key 'tokenizer.ggml.tokens'[{}] repeats [{}]", f.name(), i, first));
    }
    if (std::isnan(scores[i])) {
      return Status::InvalidArgument(fmt::format("{}: key 'tokenizer.ggml.scores'[{}] is NaN", f.name(), i));
    }
  }

  if (f.Find("tokenizer.ggml.merges") != nullptr) {
    TEMPER_ASSIGN_OR_RETURN(std::span<const std::string_view> merges, f.GetStringArray("tokenizer.ggml.merges"));
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t space = merges[i].find(' ');
      if (space == std::string_view::npos || merges[i].find(' ', space + 1) != std::string_view::npos) {
        return Status::InvalidArgument(
            fmt::format("{}: key 'tokenizer.ggml.merges'[{}] is not two tokens split by one space", f.name(), i));
      }
      const int32_t left = ids.Find(merges[i].substr(0, space));
      const int32_t right = ids.Find(merges[i].substr(space + 1));
      if (left < 0 || right < 0) {
        return Status::InvalidArgument(
            fmt::format("{}: key 'tokenizer.ggml.merges'[{}] names a token outside the vocabulary", f.name(), i));
      }
      bpe.merges.push_back({spans[left], spans[right]});
    }
  } else {
    // transformers' generate_merges: every split into two vocabulary pieces, ranked by the piece's
    // score (user-defined pieces at 0), then the left part's and right part's lengths in code
    // points, all descending, ties in piece-id order (Python's sort is stable).
    struct Candidate {
      float score;
      uint32_t left_chars, right_chars;
      int32_t piece;
      BpeSpec::Span left, right;
    };
    std::vector<Candidate> candidates;
    std::vector<uint32_t> cuts;
    std::vector<uint64_t> prefix, power;  // prefix[k]: Hash(piece[0, k)); power[k]: kBase^k
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view piece = bpe.View(spans[i]);
      CodePointBoundaries(piece, cuts);
      if (cuts.empty()) continue;
      prefix.assign(piece.size() + 1, 0);
      power.assign(piece.size() + 1, 1);
      for (size_t b = 0; b < piece.size(); ++b) {
        prefix[b + 1] = prefix[b] * PieceIndex::kBase + static_cast<uint8_t>(piece[b]);
        power[b + 1] = power[b] * PieceIndex::kBase;
      }
      const float score = types[i] == kUserDefined ? 0.0f : scores[i];
      const auto chars = static_cast<uint32_t>(cuts.size() + 1);
      const size_t n = piece.size();
      for (size_t k = 0; k < cuts.size(); ++k) {
        const size_t cut = cuts[k];
        const int32_t left = ids.Find(piece.substr(0, cut), prefix[cut]);
        if (left < 0) continue;
        // Hash(piece[cut, n)) = Hash(piece) - Hash(piece[0, cut)) * kBase^(n - cut), mod 2^64.
        const int32_t right = ids.Find(piece.substr(cut), prefix[n] - prefix[cut] * power[n - cut]);
        if (right < 0) continue;
        const auto left_chars = static_cast<uint32_t>(k + 1);
        candidates.push_back(
            {score, left_chars, chars - left_chars, static_cast<int32_t>(i), spans[left], spans[right]});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      if (a.score != b.score) return a.score > b.score;
      if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
      return a.right_chars > b.right_chars;
    });
    bpe.merges.reserve(candidates.size());
    for (const Candidate& c : candidates) bpe.merges.push_back({c.left, c.right});
  }

  bool byte_fallback = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t type = types[i];
    if (type < kNormal || type > kByte) {
      return Status::InvalidArgument(fmt::format(
          "{}: key 'tokenizer.ggml.token_type'[{}] is {}, not a SentencePiece type from 1 to 6", f.name(), i, type));
    }
    if (type == kByte) byte_fallback = true;
    if (type == kControl || type == kUserDefined) {
      spec.added_tokens.push_back({.id = static_cast<int32_t>(i),
                                   .content = std::string(bpe.View(spans[i])),
                                   .special = type == kControl,
                                   .normalized = false});
    }
  }
  bpe.byte_fallback = byte_fallback;
  bpe.fuse_unk = true;
  TEMPER_ASSIGN_OR_RETURN(int64_t unk, OptionalTokenId(f, "tokenizer.ggml.unknown_token_id", vocab_size));
  if (unk >= 0) bpe.unk_token = std::string(bpe.View(spans[unk]));

  auto flag = [&](const char* key, bool fallback) -> Result<bool> {
    if (f.Find(key) == nullptr) return fallback;
    return f.GetBool(key);
  };
  TEMPER_ASSIGN_OR_RETURN(bool space_prefix, flag("tokenizer.ggml.add_space_prefix", false));
  TEMPER_ASSIGN_OR_RETURN(bool add_bos, flag("tokenizer.ggml.add_bos_token", true));
  TEMPER_ASSIGN_OR_RETURN(bool add_eos, flag("tokenizer.ggml.add_eos_token", false));
  const std::string kSpace = " ", kMeta = "\xE2\x96\x81";
  if (space_prefix) spec.normalizer.push_back({NormalizerStep::Kind::kPrepend, "", kMeta});
  spec.normalizer.push_back({NormalizerStep::Kind::kReplace, kSpace, kMeta});
  spec.pre_tokenizer.push_back({kSpace, SplitBehavior::kMergedWithPrevious});
  spec.decoder.push_back({DecoderStep::Kind::kReplace, kMeta, kSpace});
  spec.decoder.push_back({DecoderStep::Kind::kByteFallback});
  spec.decoder.push_back({DecoderStep::Kind::kFuse});
  if (space_prefix) spec.decoder.push_back({DecoderStep::Kind::kStrip, "", kSpace, 1, 0});

  TEMPER_ASSIGN_OR_RETURN(int64_t bos, OptionalTokenId(f, "tokenizer.ggml.bos_token_id", vocab_size));
  TEMPER_ASSIGN_OR_RETURN(int64_t eos, OptionalTokenId(f, "tokenizer.ggml.eos_token_id", vocab_size));
  if (add_bos && bos < 0) {
    return Status::InvalidArgument(
        fmt::format("{}: add_bos_token is set but 'tokenizer.ggml.bos_token_id' is missing", f.name()));
  }
  if (add_eos && eos < 0) {
    return Status::InvalidArgument(
        fmt::format("{}: add_eos_token is set but 'tokenizer.ggml.eos_token_id' is missing", f.name()));
  }
  if (add_bos) spec.single_template.push_back({false, {static_cast<int32_t>(bos)}});
  spec.single_template.push_back({true, {}});
  if (add_eos) spec.single_template.push_back({false, {static_cast<int32_t>(eos)}});
  if (!add_bos && !add_eos) spec.single_template.clear();
  return spec;
}

Result<std::optional<std::string>> GgufChatTemplate(const GgufFile& file) {
  if (file.Find("tokenizer.chat_template") == nullptr) return std::optional<std::string>();
  TEMPER_ASSIGN_OR_RETURN(std::string_view text, file.GetString("tokenizer.chat_template"));
  return std::optional<std::string>(std::string(text));
}

}  // namespace temper::engine
