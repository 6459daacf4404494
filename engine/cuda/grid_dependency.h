// AwaitPriorGrid: the first statement of every engine kernel, so that a captured step's kernels
// may be launched before the kernel they depend on has finished (programmatic dependent launch,
// sm_90 and later; programmatic_edges.h turns a graph's edges into such edges).
//
// A kernel so launched is resident early, its launch and block scheduling overlapping the tail of
// the kernel before it, and waits here until that kernel has completed and its writes are visible;
// nothing above this call may touch memory that a kernel of the step writes (the GEMVs ask L2 for
// their first weights above it: gemv_kernel.h). Once past it, the kernel lets the next one launch in
// turn (only one grid ahead: a grid triggers after it has waited, so waiting grids never pile up
// and take the multiprocessors a running grid's later blocks need).
//
// Both instructions are no-ops for a kernel launched the ordinary way, and compile to nothing
// before sm_90 (the L4) and in the SIMT emulator.
//
// Device code: included by .cu files only (and by the SIMT emulator's C++ build of them).
#pragma once

#include <cuda_runtime.h>

namespace temper::engine::cuda {

__device__ __forceinline__ void AwaitPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace temper::engine::cuda
