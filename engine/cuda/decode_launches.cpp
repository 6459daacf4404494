#include "engine/cuda/decode_launches.h"

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cuda/device_backend.h"
#include "engine/cuda/reference_ops.h"
#include "engine/model/model_config.h"

namespace temper::engine::cuda {
namespace {

// The config with every width cut to the golden fixture's scale; layer kinds, their count,
// k_eq_v and the softcap stay.
Result<ModelConfig> StructureOf(const std::filesystem::path& path) {
  TEMPER_ASSIGN_OR_RETURN(const std::string text, ReadModelConfigText(path));
  nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return Status::InvalidArgument(path.string() + ": not a JSON object");
  }
  nlohmann::json& text_config = config.contains("text_config") ? config["text_config"] : config;
  text_config["hidden_size"] = 64;
  text_config["intermediate_size"] = 128;
  text_config["num_attention_heads"] = 8;
  text_config["num_key_value_heads"] = 4;
  text_config["num_global_key_value_heads"] = 1;
  text_config["head_dim"] = 32;
  text_config["global_head_dim"] = 64;
  text_config["vocab_size"] = 512;
  text_config["max_position_embeddings"] = 4096;
  return ParseModelConfig(config.dump(), path.string() + " (at tiny widths)");
}

}  // namespace

Result<std::vector<OpCounts>> CountDecodeStepOps(const std::filesystem::path& config_json, int tp) {
  TEMPER_ASSIGN_OR_RETURN(const ModelConfig config, StructureOf(config_json));
  Communicator comm(tp);
  std::vector<std::unique_ptr<RankOps>> ops;
  std::vector<CountingOps*> counters;
  for (int r = 0; r < tp; ++r) {
    auto counting = std::make_unique<CountingOps>(std::make_unique<ReferenceOps>(comm, r, size_t{256} << 20), tp);
    counters.push_back(counting.get());
    ops.push_back(std::move(counting));
  }
  DeviceBackendOptions options;
  options.max_context = 256;
  options.kv.max_tokens = 512;
  options.kv.block_tokens = 4;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBackend> backend,
                          DeviceBackend::Create(config, nullptr, std::move(ops), options));
  TEMPER_ASSIGN_OR_RETURN(const SequenceId seq, backend->AddSequence());
  const std::vector<int32_t> prompt = {2, 10, 20, 30, 40, 50, 60, 70, 80, 90};
  ForwardItem first{seq, prompt, false};
  TEMPER_RETURN_IF_ERROR(backend->Forward({&first, 1}, {}).status());
  // Two graph decode steps: the first captures the graph, the second replays it; the second's ops
  // are what every later step runs.
  const int32_t token = 7;
  ForwardItem step{seq, {&token, 1}, false};
  ForwardOptions sampling;
  sampling.candidates = true;
  TEMPER_RETURN_IF_ERROR(backend->Forward({&step, 1}, sampling).status());
  for (CountingOps* c : counters) c->ResetCounts();
  TEMPER_RETURN_IF_ERROR(backend->Forward({&step, 1}, sampling).status());
  std::vector<OpCounts> counts;
  for (const CountingOps* c : counters) counts.push_back(c->counts());
  return counts;
}

}  // namespace temper::engine::cuda
