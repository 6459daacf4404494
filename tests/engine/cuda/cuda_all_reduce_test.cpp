// DeviceAllReduce with 2, 3 and 4 ranks on one GPU (each rank its own thread and stream): every
// algorithm available gives every rank the fp32 sum in rank order 0..tp-1, bit for bit, call after
// call and replayed inside CUDA graphs. GPU cases report themselves skipped without a device;
// the error case runs everywhere.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "engine/cuda/all_reduce.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) { return testing::RandomFloats(n, seed); }

// Runs `fn(rank)` on tp threads at once, each with device 0 current; returns each rank's status.
std::vector<Status> OnThreads(int tp, const std::function<Status(int)>& fn) {
  std::vector<Status> status(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) {
        status[r] = Status::Internal("cudaSetDevice");
        return;
      }
      status[r] = fn(r);
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

// `calls` all-reduces of n floats with `algo` (eagerly, or as one graph per rank replayed
// `replays` times), each with fresh random inputs; every rank's result must equal the host sum in
// rank order, exactly.
void Check(DeviceAllReduce& ar, AllReduceAlgo algo, size_t n, int calls, bool graph) {
  const int tp = ar.tp();
  std::vector<float*> data(tp, nullptr);
  std::vector<cudaStream_t> streams(tp, nullptr);
  for (int r = 0; r < tp; ++r) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data[r]), sizeof(float) * n * calls) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) == cudaSuccess);
  }
  std::vector<cudaGraphExec_t> graphs(tp, nullptr);
  const int rounds = graph ? 5 : 1;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<float>> inputs(tp);
    for (int r = 0; r < tp; ++r) {
      inputs[r] = Random(n * calls, static_cast<uint32_t>(1000 * round + r));
      REQUIRE(cudaMemcpy(data[r], inputs[r].data(), sizeof(float) * n * calls, cudaMemcpyHostToDevice) == cudaSuccess);
    }
    const std::vector<Status> status = OnThreads(tp, [&](int r) -> Status {
      if (graph && round == 0) {
        if (cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
          return Status::Internal("begin capture");
        }
      }
      if (!graph || round == 0) {
        for (int c = 0; c < calls; ++c) {
          Status s = ar.AllReduceSumWith(algo, r, data[r] + c * n, n, streams[r]);
          if (!s.ok()) return s;
        }
      }
      if (graph) {
        if (round == 0) {
          cudaGraph_t g = nullptr;
          if (cudaStreamEndCapture(streams[r], &g) != cudaSuccess) return Status::Internal("end capture");
          if (cudaGraphInstantiate(&graphs[r], g, 0) != cudaSuccess) return Status::Internal("instantiate");
          cudaGraphDestroy(g);
        }
        if (cudaGraphLaunch(graphs[r], streams[r]) != cudaSuccess) return Status::Internal("graph launch");
      }
      if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return Status::Internal("synchronize");
      return Status::OK();
    });
    for (int r = 0; r < tp; ++r) {
      INFO("rank " << r << ": " << status[r].ToString());
      REQUIRE(status[r].ok());
    }
    std::vector<float> want(n * calls, 0.0f);
    for (int r = 0; r < tp; ++r)
      for (size_t i = 0; i < want.size(); ++i) want[i] += inputs[r][i];
    for (int r = 0; r < tp; ++r) {
      std::vector<float> got(n * calls);
      REQUIRE(cudaMemcpy(got.data(), data[r], sizeof(float) * got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      INFO("rank " << r << ", round " << round);
      REQUIRE(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()) == 0);
    }
  }
  for (int r = 0; r < tp; ++r) {
    if (graphs[r]) cudaGraphExecDestroy(graphs[r]);
    cudaStreamDestroy(streams[r]);
    cudaFree(data[r]);
  }
}

TEST_CASE("all-reduce sums in rank order, bit for bit, with 2, 3 and 4 ranks on one GPU", "[gpu]") {
  TEMPER_SKIP_WITHOUT_GPU();
  for (int tp : {2, 3, 4}) {
    const std::vector<int> devices(static_cast<size_t>(tp), 0);
    DeviceAllReduce::Options options;
    options.slot_bytes = 64 * 1024;  // small slots: the 86 KB message goes in rounds
    auto ar = DeviceAllReduce::Create(devices, options);
    if (!ar.ok()) FAIL(ar.status().ToString());
    CHECK((*ar)->topology().p2p_ok);                // one GPU: its own memory
    CHECK_FALSE((*ar)->topology().nccl_available);  // NCCL refuses two ranks on one GPU
    for (AllReduceAlgo algo : {AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged}) {
      for (size_t n : {size_t{1}, size_t{1000}, size_t{2688}, size_t{21504}, size_t{12347}}) {
        INFO("tp " << tp << ", " << AllReduceAlgoName(algo) << ", n " << n);
        Check(**ar, algo, n, /*calls=*/7, /*graph=*/false);
        Check(**ar, algo, n, /*calls=*/3, /*graph=*/true);
      }
    }
    float* dummy = nullptr;
    CHECK((*ar)->AllReduceSumWith(AllReduceAlgo::kNccl, 0, dummy, 4, nullptr).code() ==
          StatusCode::kFailedPrecondition);
  }
}

// The sequence that broke the first protocol (per-block call counts): the grid changes at almost
// every call, with odd counts of decode-sized calls and messages in rounds (the host model of
// all_reduce_protocol_test.cpp runs the same sequences without a GPU).
TEST_CASE("all-reduce stays exact when the message size and so the grid change every call", "[gpu]") {
  TEMPER_SKIP_WITHOUT_GPU();
  const std::vector<size_t> sizes = {5376, 43008, 1, 12347, 5376, 5376, 5376, 65537, 2049, 200000, 31, 43008, 5376};
  for (int tp : {2, 4}) {
    const std::vector<int> devices(static_cast<size_t>(tp), 0);
    DeviceAllReduce::Options options;
    options.slot_bytes = 65536 * sizeof(float);  // 65,537 and 200,000 floats go in rounds
    auto ar = DeviceAllReduce::Create(devices, options);
    if (!ar.ok()) FAIL(ar.status().ToString());
    for (AllReduceAlgo algo : {AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged}) {
      INFO("tp " << tp << ", " << AllReduceAlgoName(algo));
      std::vector<std::vector<float*>> data(tp);
      std::vector<std::vector<std::vector<float>>> inputs(tp);
      std::vector<cudaStream_t> streams(tp, nullptr);
      for (int r = 0; r < tp; ++r) {
        REQUIRE(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) == cudaSuccess);
        for (size_t c = 0; c < sizes.size(); ++c) {
          float* d = nullptr;
          REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(float) * sizes[c]) == cudaSuccess);
          inputs[r].push_back(Random(sizes[c], static_cast<uint32_t>(100 * r + c)));
          REQUIRE(cudaMemcpy(d, inputs[r][c].data(), sizeof(float) * sizes[c], cudaMemcpyHostToDevice) == cudaSuccess);
          data[r].push_back(d);
        }
      }
      const std::vector<Status> status = OnThreads(tp, [&](int r) -> Status {
        for (size_t c = 0; c < sizes.size(); ++c) {
          Status s = (*ar)->AllReduceSumWith(algo, r, data[r][c], sizes[c], streams[r]);
          if (!s.ok()) return s;
        }
        return cudaStreamSynchronize(streams[r]) == cudaSuccess ? Status::OK() : Status::Internal("synchronize");
      });
      for (int r = 0; r < tp; ++r) REQUIRE(status[r].ok());
      for (size_t c = 0; c < sizes.size(); ++c) {
        std::vector<float> want(sizes[c], 0.0f);
        for (int r = 0; r < tp; ++r)
          for (size_t i = 0; i < sizes[c]; ++i) want[i] += inputs[r][c][i];
        for (int r = 0; r < tp; ++r) {
          std::vector<float> got(sizes[c]);
          REQUIRE(cudaMemcpy(got.data(), data[r][c], sizeof(float) * sizes[c], cudaMemcpyDeviceToHost) == cudaSuccess);
          INFO("call " << c << " (" << sizes[c] << " floats), rank " << r);
          REQUIRE(std::memcmp(got.data(), want.data(), sizeof(float) * sizes[c]) == 0);
        }
      }
      for (int r = 0; r < tp; ++r) {
        for (float* d : data[r]) cudaFree(d);
        cudaStreamDestroy(streams[r]);
      }
    }
  }
}

TEST_CASE("all-reduce refuses bad device lists and says when no GPU is usable", "[engine][cuda]") {
  int count = 0;
  const bool gpu = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  const std::vector<int> none;
  CHECK(DeviceAllReduce::Create(none, {}).status().code() == StatusCode::kInvalidArgument);
  const std::vector<int> nine(9, 0);
  CHECK(DeviceAllReduce::Create(nine, {}).status().code() == StatusCode::kInvalidArgument);
  const std::vector<int> missing = {0, 97};
  const Status s = DeviceAllReduce::Create(missing, {}).status();
  if (gpu) {
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("GPU 97"));
  } else {
    CHECK(s.code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(s.message(), Catch::Contains("no CUDA device"));
  }
}

}  // namespace
}  // namespace temper::engine::cuda
