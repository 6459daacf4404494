#include "engine/model/drafter_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/model/config_json.h"

namespace temper::engine {
namespace {

using nlohmann::json;

std::string_view KindName(LayerKind kind) { return kind == LayerKind::kFull ? "full" : "sliding"; }

// The target's last layer of `kind`, or -1 when it has none.
int LastTargetLayer(const ModelConfig& target, LayerKind kind) {
  for (int l = target.num_layers - 1; l >= 0; --l) {
    if (target.layers[l].kind == kind) return l;
  }
  return -1;
}

}  // namespace

Result<DrafterConfig> ParseDrafterConfig(std::string_view json_text, std::string_view source,
                                         const ModelConfig& target) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::InvalidArgument(fmt::format("{}: not valid JSON", source));
  if (!root.is_object()) return Status::InvalidArgument(fmt::format("{}: top level must be a JSON object", source));
  KeyReader top(root, std::string(source), "");
  TEMPER_ASSIGN_OR_RETURN(std::string model_type, top.String("model_type", ""));
  if (model_type.empty()) return top.Error("model_type", "is missing");
  if (model_type != "gemma4_assistant") {
    return top.Refuse("model_type", fmt::format("is '{}': an MTP drafter is 'gemma4_assistant'", model_type));
  }
  // The assistant reads the target's cache as Gemma 4 layers fill it (normed values, norms by w);
  // a Gemma 3 target fills it otherwise, and no Gemma 3 assistant exists.
  if (!target.model_type.starts_with("gemma4")) {
    return Status::Unimplemented(
        fmt::format("{}: an MTP drafter drafts for Gemma 4 targets only; the target model "
                    "is '{}'",
                    source, target.model_type));
  }
  TEMPER_ASSIGN_OR_RETURN(bool ordered, top.Bool("use_ordered_embeddings", false));
  if (ordered) {
    return top.Refuse("use_ordered_embeddings",
                      "is true: the centroid-masked head of the E2B/E4B drafters is not supported");
  }
  const json* text = top.Find("text_config");
  if (!text || !text->is_object())
    return top.Error("text_config", "must be an object for model_type 'gemma4_assistant'");
  KeyReader tr(*text, std::string(source), "text_config.");

  DrafterConfig d;
  TEMPER_ASSIGN_OR_RETURN(d.text, ParseTextConfig(tr, *text, TextDecoderRole::kDrafter));
  d.text.model_type = model_type;
  d.text.weight_prefix = "model.";
  // Gemma4AssistantForCausalLM ties its head by the top-level flag.
  TEMPER_ASSIGN_OR_RETURN(d.text.tie_word_embeddings, top.Bool("tie_word_embeddings", true));
  TEMPER_ASSIGN_OR_RETURN(DTypeKey dtype, FindDType(text, "text_config.", root, source));
  d.text.dtype = dtype.dtype.empty() ? "bfloat16" : dtype.dtype;
  if (d.text.dtype != "bfloat16") {
    return top.Refuse(dtype.key, fmt::format("is '{}': this engine loads bfloat16 checkpoints only", d.text.dtype));
  }

  TEMPER_ASSIGN_OR_RETURN(d.backbone_hidden_size, top.Size("backbone_hidden_size", 1536));
  if (d.backbone_hidden_size != target.hidden_size) {
    return top.Error("backbone_hidden_size", fmt::format("is {} but the target model's hidden_size is {}",
                                                         d.backbone_hidden_size, target.hidden_size));
  }
  if (d.text.vocab_size != target.vocab_size) {
    return tr.Error("vocab_size",
                    fmt::format("is {} but the target model's vocab_size is {}", d.text.vocab_size, target.vocab_size));
  }
  // The drafter's sliding layers read the target's rings, which keep the target's window.
  if (d.text.sliding_window != target.sliding_window) {
    return tr.Error("sliding_window", fmt::format("is {} but the target model's sliding_window is {}",
                                                  d.text.sliding_window, target.sliding_window));
  }
  for (int l = 0; l < d.text.num_layers; ++l) {
    const LayerGeometry& g = d.text.layers[l];
    const bool full = g.kind == LayerKind::kFull;
    const int t = LastTargetLayer(target, g.kind);
    if (t < 0) {
      return tr.Error(fmt::format("layer_types[{}]", l),
                      fmt::format("is {} attention, a kind of layer the target model does not have", KindName(g.kind)));
    }
    const LayerGeometry& tg = target.layers[t];
    if (g.head_dim != tg.head_dim) {
      return tr.Error(full ? "global_head_dim" : "head_dim",
                      fmt::format("is {} but target layer {} ({} attention, whose cache drafter layer {} reads) has "
                                  "head_dim {}",
                                  g.head_dim, t, KindName(g.kind), l, tg.head_dim));
    }
    if (g.num_kv_heads != tg.num_kv_heads) {
      return tr.Error(full ? "num_global_key_value_heads" : "num_key_value_heads",
                      fmt::format("is {} but target layer {} ({} attention, whose cache drafter layer {} reads) has "
                                  "{} KV heads",
                                  g.num_kv_heads, t, KindName(g.kind), l, tg.num_kv_heads));
    }
    d.target_layers.push_back(t);
  }
  return d;
}

Result<std::vector<Range>> PlanDrafterHeads(const DrafterConfig& drafter, const ModelConfig& target,
                                            std::span<const RankShard> shards) {
  const ModelConfig& c = drafter.text;
  const int tp = static_cast<int>(shards.size());
  // A drafter parsed against another target may not fit this one: check what the ranks rely on.
  if (drafter.backbone_hidden_size != target.hidden_size || c.vocab_size != target.vocab_size ||
      c.sliding_window != target.sliding_window || static_cast<int>(drafter.target_layers.size()) != c.num_layers) {
    return Status::InvalidArgument("the MTP drafter was not made for this model");
  }
  if (c.num_heads % tp != 0) {
    return Status::InvalidArgument(
        fmt::format("tp {} cannot split the MTP drafter's {} query heads evenly", tp, c.num_heads));
  }
  std::vector<Range> out;
  for (const RankShard& shard : shards) {
    const Range q_heads = EvenSplit(c.num_heads, tp, shard.rank);
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerGeometry& g = c.layers[l];
      const int t = drafter.target_layers[l];
      if (t < 0 || t >= target.num_layers || target.layers[t].kind != g.kind ||
          target.layers[t].head_dim != g.head_dim || target.layers[t].num_kv_heads != g.num_kv_heads) {
        return Status::InvalidArgument(
            fmt::format("MTP drafter layer {} does not fit target layer {} of this model", l, t));
      }
      // Each local query head must read a KV head this rank holds of the target layer.
      const int group = c.num_heads / g.num_kv_heads;
      const Range kv = shard.layers[t].kv_heads;
      if (q_heads.begin / group < kv.begin || (q_heads.end - 1) / group >= kv.end) {
        return Status::InvalidArgument(fmt::format(
            "at tp {}, rank {}'s MTP drafter heads [{}, {}) of layer {} read KV heads it does not hold ([{}, {}) of "
            "target layer {})",
            tp, shard.rank, q_heads.begin, q_heads.end, l, kv.begin, kv.end, t));
      }
    }
    out.push_back(q_heads);
  }
  return out;
}

Result<DrafterConfig> LoadDrafterConfig(const std::filesystem::path& path, const ModelConfig& target) {
  TEMPER_ASSIGN_OR_RETURN(const std::string text, ReadModelConfigText(path));
  return ParseDrafterConfig(text, path.string(), target);
}

}  // namespace temper::engine
