#include "bench/all_reduce_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "engine/cuda/all_reduce.h"
#include "engine/cuda/cuda_status.h"

namespace temper::engine::bench {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;
using cuda::AllReduceAlgo;

// Bytes one captured graph moves at most (per rank), so a 44 MB prefill message takes a few
// calls, not 200.
constexpr uint64_t kGraphBytes = 64ull << 20;
constexpr int kMaxIterations = 200;
constexpr int kMinIterations = 4;

// One rank's part: its buffer, stream and captured graph.
struct Rank {
  int device = 0;
  float* data = nullptr;
  cudaStream_t stream = nullptr;
  cudaGraphExec_t graph = nullptr;
};

// Rank r's check value at element i: a small integer that differs between ranks.
float CheckValue(size_t i, int r) { return static_cast<float>(static_cast<int>((i * 7 + size_t(r) * 13) % 61) - 30); }

Status Capture(cuda::DeviceAllReduce& ar, AllReduceAlgo algo, int r, Rank& rank, size_t n, int iterations) {
  TEMPER_CUDA_TRY(cudaSetDevice(rank.device));
  TEMPER_CUDA_TRY(cudaStreamBeginCapture(rank.stream, cudaStreamCaptureModeThreadLocal));
  Status s;
  for (int i = 0; i < iterations && s.ok(); ++i) s = ar.AllReduceSumWith(algo, r, rank.data, n, rank.stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(rank.stream, &graph);
  if (!s.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return s;
  }
  TEMPER_CUDA_TRY(ended);
  const cudaError_t made = cudaGraphInstantiate(&rank.graph, graph, 0);
  cudaGraphDestroy(graph);
  TEMPER_CUDA_TRY(made);
  return Status::OK();
}

Status Replay(Rank& rank) {
  TEMPER_CUDA_TRY(cudaSetDevice(rank.device));
  TEMPER_CUDA_TRY(cudaGraphLaunch(rank.graph, rank.stream));
  TEMPER_CUDA_TRY(cudaStreamSynchronize(rank.stream));
  return Status::OK();
}

// Fills rank r's n floats with CheckValue (also what the timed graphs start from).
Status Fill(Rank& rank, int r, size_t n) {
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = CheckValue(i, r);
  TEMPER_CUDA_TRY(cudaSetDevice(rank.device));
  TEMPER_CUDA_TRY(cudaMemcpy(rank.data, host.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
  return Status::OK();
}

// Three eager all-reduces of rank r's filled buffer, then every element against tp² · Σ.
Status Check(cuda::DeviceAllReduce& ar, AllReduceAlgo algo, int r, Rank& rank, size_t n) {
  TEMPER_RETURN_IF_ERROR(Fill(rank, r, n));
  for (int call = 0; call < 3; ++call) {
    TEMPER_RETURN_IF_ERROR(ar.AllReduceSumWith(algo, r, rank.data, n, rank.stream));
  }
  TEMPER_CUDA_TRY(cudaStreamSynchronize(rank.stream));
  std::vector<float> got(n);
  TEMPER_CUDA_TRY(cudaMemcpy(got.data(), rank.data, sizeof(float) * n, cudaMemcpyDeviceToHost));
  const int tp = ar.tp();
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int q = 0; q < tp; ++q) sum += CheckValue(i, q);
    const float want = static_cast<float>(tp * tp) * sum;
    if (got[i] != want) {
      return Status::Internal(
          fmt::format("all-reduce {} of {} B: rank {} holds {} at element {} after three calls, "
                      "want {} ({} ranks)",
                      cuda::AllReduceAlgoName(algo), sizeof(float) * n, r, got[i], i, want, tp));
    }
  }
  return Status::OK();
}

// Runs fn(r) on one thread per rank; the first error, naming its rank.
Status OnRanks(int tp, const std::function<Status(int)>& fn) {
  std::vector<Status> status(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) threads.emplace_back([&, r] { status[r] = fn(r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < tp; ++r) {
    if (!status[r].ok()) return status[r].WithContext(fmt::format("rank {}", r));
  }
  return Status::OK();
}

}  // namespace

std::vector<AllReduceMessage> ModelAllReduceMessages(const ModelConfig& c, int max_batch, int max_rows) {
  const uint64_t row = sizeof(float) * static_cast<uint64_t>(c.hidden_size);
  std::vector<AllReduceMessage> messages = {{row, "decode, batch 1"}};
  if (max_batch > 1)
    messages.push_back({row * static_cast<uint64_t>(max_batch), fmt::format("decode, batch {}", max_batch)});
  messages.push_back({row * static_cast<uint64_t>(max_rows), fmt::format("prefill pass of {} tokens", max_rows)});
  return messages;
}

Result<std::vector<AllReduceTiming>> BenchAllReduce(std::span<const int> devices,
                                                    std::span<const AllReduceMessage> messages) {
  const int tp = static_cast<int>(devices.size());
  uint64_t largest = 0;
  for (const AllReduceMessage& m : messages) largest = std::max(largest, m.bytes);
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceAllReduce> ar, cuda::DeviceAllReduce::Create(devices, {}));
  std::vector<Rank> ranks(static_cast<size_t>(tp));
  auto release = [&] {
    for (Rank& rank : ranks) {
      cudaSetDevice(rank.device);
      if (rank.graph) cudaGraphExecDestroy(rank.graph);
      if (rank.stream) cudaStreamDestroy(rank.stream);
      cudaFree(rank.data);
    }
  };
  std::vector<AllReduceTiming> out;
  auto run = [&]() -> Status {
    for (int r = 0; r < tp; ++r) {
      ranks[r].device = devices[r];
      TEMPER_CUDA_TRY(cudaSetDevice(devices[r]));
      TEMPER_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&ranks[r].data), largest));
      TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&ranks[r].stream, cudaStreamNonBlocking));
      TEMPER_RETURN_IF_ERROR(cuda::PrepareAllReduceStream(ranks[r].stream));
    }
    const cuda::AllReduceTopology& topo = ar->topology();
    for (AllReduceAlgo algo : {AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged, AllReduceAlgo::kNccl}) {
      for (const AllReduceMessage& m : messages) {
        AllReduceTiming t;
        t.algo = algo;
        t.message = m;
        t.chosen = cuda::ChooseAllReduce(topo, m.bytes) == algo;
        if (algo == AllReduceAlgo::kNccl && !topo.nccl_available) {
          t.note = "NCCL is not up: it needs one GPU per rank and libnccl.so.2 (or TEMPER_NCCL_LIBRARY)";
        } else if (algo == AllReduceAlgo::kOneShotP2p && !topo.p2p_ok) {
          t.note = "peer access absent or the transfer test failed";
        } else {
          const size_t n = m.bytes / sizeof(float);
          t.iterations = static_cast<int>(std::clamp<uint64_t>(kGraphBytes / m.bytes, kMinIterations, kMaxIterations));
          TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Check(*ar, algo, r, ranks[r], n); }));
          TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Capture(*ar, algo, r, ranks[r], n, t.iterations); }));
          TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Replay(ranks[r]); }));  // warm-up
          std::vector<double> samples;
          for (int rep = 0; rep < 5; ++rep) {
            const auto t0 = Clock::now();
            TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Replay(ranks[r]); }));
            samples.push_back(1e6 * Seconds(t0, Clock::now()) / t.iterations);
          }
          t.available = true;
          t.median_us = Median(std::move(samples));
          for (Rank& rank : ranks) {
            cudaSetDevice(rank.device);
            cudaGraphExecDestroy(rank.graph);
            rank.graph = nullptr;
          }
        }
        out.push_back(t);
      }
    }
    return Status::OK();
  };
  const Status s = run();
  release();
  TEMPER_RETURN_IF_ERROR(s);
  return out;
}

}  // namespace temper::engine::bench
