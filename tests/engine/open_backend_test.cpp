// OpenBackend on the tiny fixture model: a spec without devices opens the CPU backend with what it
// asks for (ranks, context, KV cache, the drafter) and computes what the CPU backend does, and a
// spec that cannot be opened is refused naming the model and the tp or the GPUs.
#include "engine/open_backend.h"

#include <catch2/catch.hpp>

#include "engine/cuda/cuda_backend.h"
#include "engine/drafter_fixture.h"
#include "engine/golden_fixture.h"

namespace temper::engine::testing {
namespace {

const LoadedModel& TinyWithDrafter() {
  static const LoadedModel model = [] {
    auto loaded = LoadModel(ModelSource{.dir = TinyDir().string(),
                                        .tokenizer_need = TokenizerNeed::kNone,
                                        .drafter_dir = TinyDrafterDir().string()});
    if (!loaded.ok()) FAIL(loaded.status().ToString());
    return std::move(*loaded);
  }();
  return model;
}

std::vector<float> LastLogits(Backend& backend, const std::vector<int32_t>& prompt) {
  auto seq = backend.AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, prompt, /*all_logits=*/false};
  auto r = backend.Forward({&item, 1}, {});
  REQUIRE(r.ok());
  return r->logits;
}

TEST_CASE("a spec without devices opens the CPU backend it describes", "[engine][open-backend]") {
  const LoadedModel& model = TinyWithDrafter();
  BackendSpec spec;
  spec.tp = 2;
  spec.threads = 2;
  spec.max_context = 48;
  spec.kv.max_sequences = 3;
  spec.kv.max_tokens = 96;
  spec.kv.max_snapshots = 2;
  spec.device_max_snapshots = 1;  // GPUs only: the CPU keeps kv.max_snapshots
  CHECK(BackendDescription(spec) == "the CPU backend (tp 2)");
  auto opened = OpenBackend(spec, model);
  REQUIRE(opened.ok());
  Backend& backend = **opened;
  CHECK(backend.context_limit() == 48);
  const KvUsage usage = backend.kv_usage();
  CHECK(usage.max_sequences == 3);
  CHECK(usage.max_snapshots == 2);
  CHECK(usage.total_blocks * usage.block_tokens == 96);
  CHECK(backend.has_drafter());

  // It computes what the CPU backend opened by hand computes, bit for bit (the CPU backend's
  // all-reduce sums in a fixed order).
  CpuBackendOptions by_hand;
  by_hand.tp = 2;
  by_hand.threads = 2;
  by_hand.max_context = 48;
  auto direct = CpuBackend::Create(model.config, model.weights, by_hand);
  REQUIRE(direct.ok());
  const std::vector<int32_t> prompt = {2, 17, 301, 44, 5};
  CHECK(LastLogits(backend, prompt) == LastLogits(**direct, prompt));

  spec.use_drafter = false;
  auto without = OpenBackend(spec, model);
  REQUIRE(without.ok());
  CHECK_FALSE((*without)->has_drafter());
}

TEST_CASE("a spec that cannot be opened is refused naming the model and the tp or the GPUs", "[engine][open-backend]") {
  const LoadedModel& model = TinyWithDrafter();
  BackendSpec spec;
  spec.threads = 2;
  spec.max_context = 32;
  spec.model_name = "gemma4-tiny";

  // The tiny model's heads do not split over three ranks.
  spec.tp = 3;
  auto tp3 = OpenBackend(spec, model);
  REQUIRE_FALSE(tp3.ok());
  CHECK(tp3.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(tp3.status().message(), Catch::StartsWith("opening model gemma4-tiny on the CPU backend (tp 3): "));

  // A context beyond the model's positions.
  spec.tp = 1;
  spec.max_context = model.config.max_position_embeddings + 1;
  auto long_context = OpenBackend(spec, model);
  REQUIRE_FALSE(long_context.ok());
  CHECK(long_context.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(long_context.status().message(), Catch::Contains("gemma4-tiny") && Catch::Contains("max_context"));

  // GPUs: GPU 7 exists on no test machine, and this one has none (or the build has no CUDA
  // backend, which says so).
  spec.max_context = 32;
  spec.devices = {0, 7};
  spec.tp = 2;
  CHECK(BackendDescription(spec) == "the CUDA backend (gpus [0, 7])");
  auto gpus = OpenBackend(spec, model);
  REQUIRE_FALSE(gpus.ok());
  CHECK(gpus.status().code() == (cuda::CudaBackendBuilt() ? StatusCode::kInvalidArgument : StatusCode::kUnimplemented));
  CHECK_THAT(
      gpus.status().message(),
      Catch::StartsWith("opening model gemma4-tiny on the CUDA backend (gpus [0, 7]): ") && Catch::Contains("7"));

  // A tp that contradicts the GPU list is refused before any GPU is touched.
  spec.devices = {0};
  auto contradiction = OpenBackend(spec, model);
  REQUIRE_FALSE(contradiction.ok());
  CHECK(contradiction.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(contradiction.status().message(),
             Catch::Contains("the CUDA backend (gpus [0])") && Catch::Contains("tp 2 but 1 GPUs listed"));

  // Without a model name the backend alone is named.
  spec.devices.clear();
  spec.tp = 3;
  spec.model_name.clear();
  CHECK_THAT(OpenBackend(spec, model).status().message(), Catch::StartsWith("opening the CPU backend (tp 3): "));
}

}  // namespace
}  // namespace temper::engine::testing
