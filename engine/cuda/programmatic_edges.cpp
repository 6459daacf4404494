#include "engine/cuda/programmatic_edges.h"

#include <vector>

#include "engine/cuda/cuda_status.h"

namespace temper::engine::cuda {
namespace {

// The runtime function of a kernel node, or null for any other node and for a kernel whose
// parameters the runtime cannot give back: a library's (cuBLASLt's, NCCL's) launched through the
// driver API (cudaErrorInvalidDeviceFunction). Null keeps an edge ordinary, which is always safe.
Result<const void*> KernelOf(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  TEMPER_CUDA_TRY(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return static_cast<const void*>(nullptr);
  cudaKernelNodeParams params{};
  if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess) {
    (void)cudaGetLastError();  // not left for a later launch's check to report
    return static_cast<const void*>(nullptr);
  }
  return static_cast<const void*>(params.func);
}

}  // namespace

Result<EdgeCount> MakeEdgesProgrammatic(cudaGraph_t graph, const AwaitingKernels& awaiting) {
  size_t n = 0;
  TEMPER_CUDA_TRY(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  TEMPER_CUDA_TRY(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n));
  EdgeCount count;
  count.edges = static_cast<int>(n);
  for (size_t i = 0; i < n; ++i) {
    if (data[i].type != cudaGraphDependencyTypeDefault) continue;
    TEMPER_ASSIGN_OR_RETURN(const void* first, KernelOf(from[i]));
    TEMPER_ASSIGN_OR_RETURN(const void* second, KernelOf(to[i]));
    if (!first || !second || !awaiting.Contains(second)) continue;
    TEMPER_CUDA_TRY(cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1));
    cudaGraphEdgeData programmatic{};
    programmatic.type = cudaGraphDependencyTypeProgrammatic;
    programmatic.from_port = cudaGraphKernelNodePortProgrammatic;  // when every block of `first` has triggered
    TEMPER_CUDA_TRY(cudaGraphAddDependencies(graph, &from[i], &to[i], &programmatic, 1));
    ++count.programmatic;
  }
  return count;
}

Result<bool> ProgrammaticLaunchSupported(int device) {
  int major = 0;
  TEMPER_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

}  // namespace temper::engine::cuda
