// How the GPU benches time device work (bench/RESULTS.md, METHOD.md's rules): CUDA events on the
// stream that runs the work, a warm-up first, the median of several samples, and small kernels
// timed as CUDA graphs of many launches, as a decode step runs them (a graph hides most of the
// launch gap that timing one eager launch would add).
//
// Built only with nvcc (TEMPER_HAVE_CUDA). Thread safety: each call uses the calling thread's
// current device and its own stream and events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "bench/bench_timing.h"
#include "common/status.h"
#include "engine/cuda/cuda_status.h"

namespace temper::bench {

// The yardstick every GB/s figure is compared with: `bytes` copied device to device on `device`,
// the median of `reps` copies after one warm-up, in GB/s counting bytes read plus bytes written
// (as STREAM's Copy and METHOD.md count them).
Result<double> DeviceCopyBandwidth(int device, size_t bytes = size_t{1} << 30, int reps = 10);

// Microseconds per launch of `launch(i)`, i = 0 .. launches-1, recorded once on `stream` as one
// CUDA graph, replayed once to warm up and then `replays` times between events; the median
// replay over `launches`. `launch` must enqueue its work on `stream` and return its Status; i
// lets it rotate over copies of its inputs so that L2 cannot serve a repeat.
template <typename Launch>
Result<double> MicrosPerLaunchInGraph(cudaStream_t stream, int launches, Launch launch, int replays = 7) {
  TEMPER_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  auto record = [&]() -> Status {
    for (int i = 0; i < launches; ++i) TEMPER_RETURN_IF_ERROR(launch(i));
    return Status::OK();
  };
  const Status recorded = record();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!recorded.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return recorded;
  }
  TEMPER_CUDA_TRY(ended);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TEMPER_CUDA_TRY(made);
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<double> us;
  auto run = [&]() -> Status {
    TEMPER_CUDA_TRY(cudaEventCreate(&start));
    TEMPER_CUDA_TRY(cudaEventCreate(&stop));
    TEMPER_CUDA_TRY(cudaGraphLaunch(exec, stream));  // warm-up: module load, first touch
    for (int r = 0; r < replays; ++r) {
      TEMPER_CUDA_TRY(cudaEventRecord(start, stream));
      TEMPER_CUDA_TRY(cudaGraphLaunch(exec, stream));
      TEMPER_CUDA_TRY(cudaEventRecord(stop, stream));
      TEMPER_CUDA_TRY(cudaEventSynchronize(stop));
      float ms = 0;
      TEMPER_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(1e3 * ms / launches);
    }
    return Status::OK();
  };
  const Status s = run();
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  if (!s.ok()) return s;
  return Median(std::move(us));
}

}  // namespace temper::bench
