// The GEMVs the kernel bench times for a decode step (bench/decode_step_gemvs.h) against the
// model's weights: each weight matrix of a rank read once a step, no more.
#include "bench/decode_step_gemvs.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/cuda/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::bench {
namespace {

engine::ModelConfig Load(const std::string& name) {
  auto c = engine::LoadModelConfig(std::string(TEMPER_TEST_DATA_DIR) + "/" + name + "/config.json");
  REQUIRE(c.ok());
  return *c;
}

TEST_CASE("a decode step's GEMVs read each of a rank's weight matrices once") {
  for (const std::string model : {"gemma4-31b-shape", "gemma4-tiny"}) {
    const engine::ModelConfig c = Load(model);
    for (int tp : {1, 2, 4}) {
      INFO(model << " at tp " << tp);
      auto shards = engine::PlanShards(c, tp);
      REQUIRE(shards.ok());
      const engine::RankShard& shard = (*shards)[0];
      double read = 0;
      for (const StepGemv& g : DecodeStepGemvs(c, shard)) read += g.per_step * g.Bytes();
      // The same matrices counted layer by layer: q, k (and v), o, gate, up, down, and the head.
      const double H = c.hidden_size;
      double matrices = 2.0 * shard.vocab.size() * H;
      double norms = 2.0 * H;  // the final norm
      for (int l = 0; l < c.num_layers; ++l) {
        const engine::LayerGeometry& g = c.layers[l];
        const double q = 1.0 * shard.layers[l].q_heads.size() * g.head_dim;
        const double kv = 1.0 * shard.layers[l].kv_heads.size() * g.head_dim;
        matrices += 2.0 * (2 * q * H + kv * H * (g.k_eq_v ? 1 : 2) + 3.0 * shard.ffn.size() * H);
        norms += 2.0 * (2 * g.head_dim + 4 * H);  // q and k norms, four sandwich norms
      }
      CHECK(read == matrices);
      // The memory plan's weights are those matrices and the norms, each tensor's allocation rounded
      // up to 256 bytes (at most 12 tensors a layer, and the head's two).
      const double planned = static_cast<double>(engine::cuda::RankWeightBytes(c, shard));
      CHECK(planned - read >= norms);
      CHECK(planned - read <= norms + 256.0 * (12 * c.num_layers + 2));
    }
  }
}

}  // namespace
}  // namespace temper::bench
