// Programmatic dependent launch for a captured step (sm_90 and later): each edge of the graph from
// one kernel to a kernel that begins with AwaitPriorGrid (grid_dependency.h) becomes a
// programmatic edge, so the second kernel launches while the first is still running and waits on
// the device instead of in the launch path.
//
// Why: a decode step is about 550 dependent kernels at tp 1 (9 a layer), and on an H200 about
// 1.4 ms of its 17.4 ms is neither weight bytes nor attention (bench/RESULTS.md, "GPU: the H200"):
// mostly each kernel's launch, block scheduling and ramp-up after the one before has drained.
// With programmatic edges those overlap the previous kernel's tail.
//
// Edges stay ordinary when either end is not a kernel (copies, memsets) or when the second kernel
// does not wait (the all-reduce's, NCCL's and cuBLASLt's kernels): only a kernel that waits before
// touching memory may start early. Ordinary stream order holds everywhere else.
//
// Built only with nvcc. Thread safety: one call per graph at a time.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "engine/cuda/kernel_loading.h"

namespace temper::engine::cuda {

struct EdgeCount {
  int programmatic = 0;  // edges made programmatic by this call
  int edges = 0;         // edges in the graph
};

// Rewrites `graph`'s kernel-to-kernel edges into kernels listed in `awaiting` as programmatic
// edges. Errors: the CUDA call that failed (the graph is then partly rewritten: destroy it).
Result<EdgeCount> MakeEdgesProgrammatic(cudaGraph_t graph, const AwaitingKernels& awaiting);

// Whether `device` runs programmatic dependent launch (compute capability 9.0 or later).
Result<bool> ProgrammaticLaunchSupported(int device);

}  // namespace temper::engine::cuda
