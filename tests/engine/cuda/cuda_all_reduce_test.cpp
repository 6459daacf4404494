// DeviceAllReduce with 2, 3 and 4 ranks on one GPU (each rank its own thread and stream): every
// algorithm available gives every rank the fp32 sum in rank order 0..tp-1, bit for bit, call after
// call and replayed inside CUDA graphs. GPU cases report themselves skipped without a device;
// the error case runs everywhere.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <random>
#include <string>
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

// One stream per rank, made together, readied for the all-reduce (PrepareAllReduceStream) and kept
// for the all-reduce's life, as the backend's ranks do. Without the readying, the first all-reduce on
// new streams stalled until the 20 s trap in 9 of 10 runs on an H100 and an H200 (2026-11-26).
class RankStreams {
 public:
  explicit RankStreams(int tp) : streams_(static_cast<size_t>(tp), nullptr) {
    for (cudaStream_t& s : streams_) {
      REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
      const Status ready = PrepareAllReduceStream(s);
      INFO(ready.ToString());
      REQUIRE(ready.ok());
    }
  }
  ~RankStreams() {
    for (cudaStream_t s : streams_) {
      if (s) cudaStreamDestroy(s);
    }
  }
  RankStreams(const RankStreams&) = delete;
  RankStreams& operator=(const RankStreams&) = delete;
  cudaStream_t operator[](int r) const { return streams_[static_cast<size_t>(r)]; }

 private:
  std::vector<cudaStream_t> streams_;
};

// Every rank's status in one line, so a rank that failed first is named beside those that waited.
std::string Statuses(const std::vector<Status>& status) {
  std::string all;
  for (size_t r = 0; r < status.size(); ++r) all += "rank " + std::to_string(r) + ": " + status[r].ToString() + "; ";
  return all;
}

// `calls` all-reduces of n floats with `algo` (eagerly, or as one graph per rank replayed
// `replays` times), each with fresh random inputs; every rank's result must equal the host sum in
// rank order, exactly.
void Check(DeviceAllReduce& ar, const RankStreams& streams, AllReduceAlgo algo, size_t n, int calls, bool graph) {
  const int tp = ar.tp();
  std::vector<float*> data(tp, nullptr);
  for (int r = 0; r < tp; ++r) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data[r]), sizeof(float) * n * calls) == cudaSuccess);
  }
  std::vector<cudaGraphExec_t> graphs(tp, nullptr);
  const int rounds = graph ? 5 : 1;
  INFO((graph ? "captured, replayed " : "eager, ") << calls << " calls per rank");
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
    INFO(Statuses(status) << ar.StallReport());
    for (int r = 0; r < tp; ++r) REQUIRE(status[r].ok());
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
    cudaFree(data[r]);
  }
}

TEST_CASE("all-reduce sums in rank order, bit for bit, with 2, 3 and 4 ranks on one GPU", "[gpu][all-reduce]") {
  TEMPER_SKIP_WITHOUT_GPU();
  for (int tp : {2, 3, 4}) {
    const std::vector<int> devices(static_cast<size_t>(tp), 0);
    DeviceAllReduce::Options options;
    options.slot_bytes = 64 * 1024;  // small slots: the 86 KB message goes in rounds
    auto ar = DeviceAllReduce::Create(devices, options);
    if (!ar.ok()) FAIL(ar.status().ToString());
    CHECK((*ar)->topology().p2p_ok);                // one GPU: its own memory
    CHECK_FALSE((*ar)->topology().nccl_available);  // NCCL refuses two ranks on one GPU
    const RankStreams streams(tp);
    for (AllReduceAlgo algo : {AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged}) {
      for (size_t n : {size_t{1}, size_t{1000}, size_t{2688}, size_t{21504}, size_t{12347}}) {
        INFO("tp " << tp << ", " << AllReduceAlgoName(algo) << ", n " << n);
        Check(**ar, streams, algo, n, /*calls=*/7, /*graph=*/false);
        Check(**ar, streams, algo, n, /*calls=*/3, /*graph=*/true);
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
TEST_CASE("all-reduce stays exact when the message size and so the grid change every call", "[gpu][all-reduce]") {
  TEMPER_SKIP_WITHOUT_GPU();
  const std::vector<size_t> sizes = {5376, 43008, 1, 12347, 5376, 5376, 5376, 65537, 2049, 200000, 31, 43008, 5376};
  for (int tp : {2, 4}) {
    const std::vector<int> devices(static_cast<size_t>(tp), 0);
    DeviceAllReduce::Options options;
    options.slot_bytes = 65536 * sizeof(float);  // 65,537 and 200,000 floats go in rounds
    auto ar = DeviceAllReduce::Create(devices, options);
    if (!ar.ok()) FAIL(ar.status().ToString());
    const RankStreams streams(tp);
    for (AllReduceAlgo algo : {AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged}) {
      INFO("tp " << tp << ", " << AllReduceAlgoName(algo));
      std::vector<std::vector<float*>> data(tp);
      std::vector<std::vector<std::vector<float>>> inputs(tp);
      for (int r = 0; r < tp; ++r) {
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
      INFO(Statuses(status) << (*ar)->StallReport());
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
