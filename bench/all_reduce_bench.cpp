#include "bench/all_reduce_bench.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <thread>

#include "bench/bench_timing.h"
#include "engine/cuda/all_reduce.h"
#include "engine/cuda/cuda_status.h"

namespace temper::engine::bench {
namespace {

using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;
using cuda::AllReduceAlgo;

// One rank's part: its buffer, stream and captured graph.
struct Rank {
  int device = 0;
  float* data = nullptr;
  cudaStream_t stream = nullptr;
  cudaGraphExec_t graph = nullptr;
};

Status Capture(cuda::DeviceAllReduce& ar, AllReduceAlgo algo, int r, Rank& rank, size_t n, int iterations) {
  TEMPER_CUDA_TRY(cudaSetDevice(rank.device));
  TEMPER_CUDA_TRY(cudaStreamBeginCapture(rank.stream, cudaStreamCaptureModeThreadLocal));
  Status s;
  for (int i = 0; i < iterations && s.ok(); ++i) s = ar.AllReduceSumWith(algo, r, rank.data, n, rank.stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(rank.stream, &graph);
  TEMPER_RETURN_IF_ERROR(s);
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

// Runs fn(r) on one thread per rank; the first error.
Status OnRanks(int tp, const std::function<Status(int)>& fn) {
  std::vector<Status> status(static_cast<size_t>(tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) threads.emplace_back([&, r] { status[r] = fn(r); });
  for (auto& t : threads) t.join();
  for (const Status& s : status) TEMPER_RETURN_IF_ERROR(s);
  return Status::OK();
}

}  // namespace

Result<std::vector<AllReduceTiming>> BenchAllReduce(std::span<const int> devices, std::span<const uint64_t> bytes,
                                                    int iterations) {
  const int tp = static_cast<int>(devices.size());
  uint64_t largest = 0;
  for (uint64_t b : bytes) largest = std::max(largest, b);
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceAllReduce> ar, cuda::DeviceAllReduce::Create(devices, {}));
  std::vector<Rank> ranks(static_cast<size_t>(tp));
  for (int r = 0; r < tp; ++r) {
    ranks[r].device = devices[r];
    TEMPER_CUDA_TRY(cudaSetDevice(devices[r]));
    TEMPER_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&ranks[r].data), largest));
    TEMPER_CUDA_TRY(cudaMemset(ranks[r].data, 0, largest));
    TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&ranks[r].stream, cudaStreamNonBlocking));
  }
  std::vector<AllReduceTiming> out;
  for (AllReduceAlgo algo : {AllReduceAlgo::kNccl, AllReduceAlgo::kOneShotP2p, AllReduceAlgo::kHostStaged}) {
    for (uint64_t b : bytes) {
      AllReduceTiming t;
      t.algo = algo;
      t.bytes = b;
      const cuda::AllReduceTopology& topo = ar->topology();
      if (algo == AllReduceAlgo::kNccl && !topo.nccl_available) {
        t.note = "NCCL is not up: it needs one GPU per rank and libnccl.so.2 (or TEMPER_NCCL_LIBRARY)";
      } else if (algo == AllReduceAlgo::kOneShotP2p && !topo.p2p_ok) {
        t.note = "peer access absent or the transfer test failed";
      } else {
        const size_t n = b / sizeof(float);
        TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Capture(*ar, algo, r, ranks[r], n, iterations); }));
        TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Replay(ranks[r]); }));  // warm-up
        std::vector<double> samples;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = Clock::now();
          TEMPER_RETURN_IF_ERROR(OnRanks(tp, [&](int r) { return Replay(ranks[r]); }));
          samples.push_back(1e6 * Seconds(t0, Clock::now()) / iterations);
        }
        t.available = true;
        t.median_us = Median(std::move(samples));
        for (Rank& rank : ranks) {
          cudaGraphExecDestroy(rank.graph);
          rank.graph = nullptr;
        }
      }
      out.push_back(t);
    }
  }
  for (Rank& rank : ranks) {
    cudaSetDevice(rank.device);
    cudaStreamDestroy(rank.stream);
    cudaFree(rank.data);
  }
  return out;
}

}  // namespace temper::engine::bench
