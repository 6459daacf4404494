// A SIMT emulator: runs the CUDA backend's kernels on the CPU, so that machines without a GPU (CI,
// and every session without a lent device) hold the kernels themselves, not only the host logic
// around them, to their CPU twins.
//
// The kernels' .cu files compile unchanged as C++ against the stand-in runtime beside this file
// (cuda_runtime.h: the types, intrinsics and qualifiers they use), once launch_syntax.pl has
// turned `kernel<<<grid, block, shared, stream>>>(args)` into a call of Launcher. RunGrid then runs
// the grid block after block; a block's threads are fibers on the calling thread that switch only
// where CUDA threads synchronise (__syncthreads, a warp shuffle), in thread order from one barrier
// to the next and in reverse order to the one after (blocks alternate which comes first): shared
// memory and barriers behave as on a GPU, and a thread that reads what another writes without a
// barrier between them (in either direction), or threads that wait at different barriers, show
// up. As on a GPU since Volta, threads that have exited do not hold up a __syncthreads.
//
// Not emulated: timing, the memory model beyond barriers, atomics, launch limits other than the
// 1,024 threads of a block, and shared memory's size. `__shared__` becomes `static`, so one grid
// runs at a time in the whole process (Launcher holds a lock).
//
// Thread safety: RunGrid may be called from any thread; calls are serialised.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace temper::emulation {

struct Extent {
  unsigned x = 1, y = 1, z = 1;
  unsigned Count() const { return x * y * z; }
};

// Runs `body` once for every thread of every block, blocks in order. False, with `error` saying
// which block and why, when the threads of a block deadlock (some wait at __syncthreads while
// others wait at a shuffle, or have finished with others waiting at a shuffle).
bool RunGrid(Extent grid, Extent block, const std::function<void()>& body, std::string* error);

// For the running thread of the running grid.
Extent ThreadIdx();
Extent BlockIdx();
Extent BlockDim();
Extent GridDim();
// __syncthreads(): returns when every thread of the block that has not finished has called it.
void SyncThreads();
// A warp shuffle: this lane's 8 bytes in, lane `source`'s out, once every unfinished lane of the
// warp has called it.
uint64_t WarpExchange(uint64_t value, int source);

}  // namespace temper::emulation
