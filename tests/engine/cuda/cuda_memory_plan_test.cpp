// The CUDA backend's memory plan: byte counts checked by hand against the model shapes, and the
// order of claims (weights, workspace, rings, then the KV pool).
#include "engine/cuda/memory_plan.h"

#include <catch2/catch.hpp>

#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::cuda {
namespace {

ModelConfig Load(const char* rel) {
  auto c = LoadModelConfig(std::string(TEMPER_TEST_DATA_DIR) + rel);
  REQUIRE(c.ok());
  return *c;
}

TEST_CASE("tp 1 weight bytes are the parameter count in bf16, plus alignment") {
  const ModelConfig c = Load("/gemma4-tiny/config.json");
  auto shards = PlanShards(c, 1);
  REQUIRE(shards.ok());
  const uint64_t want = static_cast<uint64_t>(c.ParameterCount()) * 2;
  const uint64_t got = RankWeightBytes(c, (*shards)[0]);
  CHECK(got >= want);
  CHECK(got - want < 256 * static_cast<uint64_t>(13 * c.num_layers + 3));  // each of 13 tensors a layer rounded
}

TEST_CASE("31B at tp 4: 10,240 KV bytes per token per rank, over 10x vLLM's tokens per GiB") {
  const ModelConfig c = Load("/gemma4-31b-shape/config.json");
  auto shards = PlanShards(c, 4);
  REQUIRE(shards.ok());
  MemoryPlanInput in;
  in.free_bytes = 22ull << 30;  // an L4 after the driver
  in.kv_fraction = 0.9;
  in.tp = 4;
  in.nccl = true;  // the L4 box: one GPU per rank
  auto plan = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE(plan.ok());
  // 10 full layers, one 512-wide KV head per rank, V only (k_eq_v), bf16.
  CHECK(plan->rank.kv_per_token == 10 * 512 * 2);
  CHECK(plan->rank.block == 16 * 10240);
  // 50 sliding layers, 4 of 16 KV heads per rank, K and V, a ring of the 1024-token window and
  // the slack for draft tokens (engine/kv_cache.h's RingSlots).
  CHECK(plan->rank.ring_per_seq == 50ull * 2 * 4 * 256 * 2 * (1024 + engine::kMaxDraftTokens + 2));
  const double tokens_per_gib = (1ull << 30) / static_cast<double>(plan->rank.kv_per_token);
  CHECK(tokens_per_gib >= 10 * 4361);
  CHECK(plan->kv_capacity_tokens == plan->num_blocks * 16);
  // The all-reduce's receive slots (2 parities x 4 senders x 1 MiB) and flags, and the reserve for
  // CUDA's and NCCL's own memory, are claims of their own.
  CHECK(plan->all_reduce_bytes >= 8ull << 20);
  CHECK(plan->all_reduce_bytes < (8ull << 20) + 4096);
  CHECK(plan->reserve_bytes == kCudaReservePerRankBytes + kNcclReserveBytes);
  // Everything claimed fits in what was free, the pool took about kv_fraction of the rest, and the
  // margin is what nothing claims.
  const uint64_t fixed =
      plan->weight_bytes + plan->workspace_bytes + plan->all_reduce_bytes + plan->ring_bytes + plan->reserve_bytes;
  CHECK(fixed + plan->kv_pool_bytes + plan->margin_bytes == in.free_bytes);
  CHECK(plan->margin_bytes >= static_cast<uint64_t>(0.1 * static_cast<double>(in.free_bytes - fixed)));
  const double rest = static_cast<double>(in.free_bytes - fixed);
  CHECK(static_cast<double>(plan->kv_pool_bytes) <= 0.9 * rest);
  CHECK(static_cast<double>(plan->kv_pool_bytes) > 0.9 * rest - static_cast<double>(plan->rank.block));
}

TEST_CASE("ranks sharing a GPU multiply the weights and CUDA's reserve, and split the pool") {
  const ModelConfig c = Load("/gemma4-tiny/config.json");
  auto shards = PlanShards(c, 2);
  REQUIRE(shards.ok());
  MemoryPlanInput in;
  in.free_bytes = 2ull << 30;  // each rank also takes a 32 MiB GEMM workspace, and CUDA 512 MiB
  auto one = PlanGpuMemory(c, (*shards)[0], in);
  in.ranks_on_device = 2;
  auto two = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(two->weight_bytes == 2 * one->weight_bytes);
  CHECK(two->workspace_bytes == 2 * one->workspace_bytes);
  CHECK(two->reserve_bytes == 2 * one->reserve_bytes);
  CHECK(two->num_blocks < one->num_blocks);
  CHECK(two->num_blocks * 2 <= one->num_blocks + 1);
}

TEST_CASE("a tp 1 plan keeps no all-reduce buffers and no NCCL reserve") {
  const ModelConfig c = Load("/gemma4-tiny/config.json");
  auto shards = PlanShards(c, 1);
  REQUIRE(shards.ok());
  MemoryPlanInput in;
  in.free_bytes = 1ull << 30;
  auto plan = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE(plan.ok());
  CHECK(plan->all_reduce_bytes == 0);
  CHECK(plan->reserve_bytes == kCudaReservePerRankBytes);
  in.tp = 0;
  CHECK(PlanGpuMemory(c, (*shards)[0], in).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("the memory plan refuses what does not fit, naming the bytes") {
  const ModelConfig c = Load("/gemma4-31b-shape/config.json");
  auto shards = PlanShards(c, 1);
  REQUIRE(shards.ok());
  MemoryPlanInput in;
  in.free_bytes = 22ull << 30;  // 31B in bf16 is about 58 GiB
  auto plan = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(plan.status().message(), Catch::Contains("exceed the"));
  CHECK_THAT(plan.status().message(), Catch::Contains("kept for CUDA"));
  in.free_bytes = 80ull << 30;
  in.kv_fraction = 0;
  auto bad = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  in.kv_fraction = 0.9;
  auto h100 = PlanGpuMemory(c, (*shards)[0], in);
  REQUIRE(h100.ok());
  CHECK(h100->kv_capacity_tokens > 100000);
}

}  // namespace
}  // namespace temper::engine::cuda
