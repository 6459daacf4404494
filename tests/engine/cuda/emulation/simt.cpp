#include "engine/cuda/emulation/simt.h"

#include <setjmp.h>

#include <array>
#include <memory>
#include <mutex>
#include <vector>

namespace temper::emulation {
namespace {

// Generous for the kernels' few local arrays, also unoptimised; pages are touched only as used.
constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxBlockThreads = 1024;

enum class Wait { kNone, kBlockBarrier, kWarpBarrier, kFinished };

struct Thread {
  Extent idx;      // threadIdx
  jmp_buf resume;  // where it waits, once started
  bool started = false;
  Wait wait = Wait::kNone;
  unsigned shuffles = 0;  // shuffles this thread has made, for the slot parity
};

// The block being run on this OS thread.
struct BlockRun {
  Extent grid, block, block_idx;
  const std::function<void()>* body = nullptr;
  jmp_buf scheduler;
  std::vector<Thread> threads;
  unsigned current = 0;
  // [warp][parity][lane]: a shuffle's values. Two parities suffice: a lane can be one shuffle
  // ahead of its warp at most, since each shuffle waits for the whole warp.
  std::vector<std::array<std::array<uint64_t, 32>, 2>> slots;
  std::vector<char*> stacks;  // one per thread, from StackPool
  unsigned blocks_run = 0;
};

thread_local BlockRun* running = nullptr;

void ThreadMain();

// A thread's first entry: ThreadMain on the thread's own stack (which ends at `top`, 16-byte
// aligned). Two instructions of assembly, where ucontext's makecontext/setcontext would cost two
// system calls for every thread of every block.
[[noreturn]] void StartThread(char* top) {
#if defined(__x86_64__)
  asm volatile("mov %0, %%rsp\n\tcall *%1\n\tud2" : : "r"(top), "r"(&ThreadMain) : "memory");
#elif defined(__aarch64__)
  asm volatile("mov sp, %0\n\tblr %1\n\tbrk #0" : : "r"(top), "r"(&ThreadMain) : "memory", "x30");
#else
#error "the SIMT emulator starts its threads on x86-64 and AArch64 only"
#endif
  __builtin_unreachable();
}

// Every later switch, either way, is _setjmp/_longjmp (no signal mask, so no system call).
void Yield() {
  BlockRun& r = *running;
  if (_setjmp(r.threads[r.current].resume) == 0) _longjmp(r.scheduler, 1);
}

// Runs thread i until it waits or finishes.
void Resume(BlockRun& r, unsigned i) {
  Thread& t = r.threads[i];
  r.current = i;
  if (_setjmp(r.scheduler) != 0) return;
  if (!t.started) {
    t.started = true;
    StartThread(r.stacks[i] + kStackBytes);
  }
  _longjmp(t.resume, 1);
}

void ThreadMain() {
  BlockRun& r = *running;
  (*r.body)();
  r.threads[r.current].wait = Wait::kFinished;
  _longjmp(r.scheduler, 1);
}

Extent Unflatten(unsigned i, Extent e) { return {i % e.x, (i / e.x) % e.y, i / (e.x * e.y)}; }

// Releases the threads whose barrier every unfinished thread of its scope has reached. False
// when every unfinished thread waits and none can go on.
bool Release(BlockRun& r, std::string* why) {
  const unsigned n = r.block.Count();
  unsigned unfinished = 0, at_block = 0, at_warp = 0;
  for (const Thread& t : r.threads) {
    unfinished += t.wait != Wait::kFinished;
    at_block += t.wait == Wait::kBlockBarrier;
    at_warp += t.wait == Wait::kWarpBarrier;
  }
  if (unfinished == 0) return true;
  if (at_block == unfinished) {
    for (Thread& t : r.threads) {
      if (t.wait == Wait::kBlockBarrier) t.wait = Wait::kNone;
    }
    return true;
  }
  bool released = false;
  for (unsigned w = 0; w * 32 < n; ++w) {
    bool all = true, any = false;
    for (unsigned i = w * 32; i < std::min(n, w * 32 + 32); ++i) {
      if (r.threads[i].wait == Wait::kFinished) continue;
      any = true;
      all = all && r.threads[i].wait == Wait::kWarpBarrier;
    }
    if (!any || !all) continue;
    for (unsigned i = w * 32; i < std::min(n, w * 32 + 32); ++i) {
      if (r.threads[i].wait == Wait::kWarpBarrier) r.threads[i].wait = Wait::kNone;
    }
    released = true;
  }
  if (released) return true;
  *why = std::to_string(at_block) + " thread(s) wait at __syncthreads, " + std::to_string(at_warp) +
         " at a warp shuffle, " + std::to_string(n - unfinished) + " have finished";
  return false;
}

std::mutex& GridLock() {
  static std::mutex lock;
  return lock;
}

// Thread stacks, kept from grid to grid (a grid runs only under GridLock).
std::vector<std::unique_ptr<char[]>>& StackPool() {
  static std::vector<std::unique_ptr<char[]>> pool;
  return pool;
}

// Runs block r.block_idx's threads to their ends. False, with `error`, when they deadlock.
bool RunBlock(BlockRun& r, std::string* error) {
  const unsigned n = r.block.Count();
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = r.threads[i];
    t.wait = Wait::kNone;
    t.shuffles = 0;
    t.started = false;
  }
  // Between two barriers the threads run one after another, in thread order and then, from one
  // barrier to the next, in reverse; blocks start in alternate orders. A thread that reads what
  // another writes without a barrier between them sees stale data in one of the orders.
  for (bool reverse = r.blocks_run++ % 2 == 1;; reverse = !reverse) {
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = reverse ? n - 1 - k : k;
      if (r.threads[i].wait == Wait::kNone) Resume(r, i);
    }
    bool finished = true;
    for (const Thread& t : r.threads) finished = finished && t.wait == Wait::kFinished;
    if (finished) return true;
    std::string why;
    if (!Release(r, &why)) {
      const Extent at = r.block_idx;
      *error = "block (" + std::to_string(at.x) + ", " + std::to_string(at.y) + ", " + std::to_string(at.z) +
               ") deadlocks: " + why;
      return false;
    }
  }
}

}  // namespace

bool RunGrid(Extent grid, Extent block, const std::function<void()>& body, std::string* error) {
  std::lock_guard<std::mutex> lock(GridLock());
  const unsigned n = block.Count();
  if (n == 0 || n > kMaxBlockThreads || grid.Count() == 0) {
    *error = "invalid launch: " + std::to_string(grid.Count()) + " blocks of " + std::to_string(n) + " threads";
    return false;
  }
  BlockRun r;
  r.grid = grid;
  r.block = block;
  r.body = &body;
  r.threads.resize(n);
  for (unsigned i = 0; i < n; ++i) r.threads[i].idx = Unflatten(i, block);
  r.slots.resize((n + 31) / 32);
  auto& pool = StackPool();
  while (pool.size() < n) pool.push_back(std::unique_ptr<char[]>(new char[kStackBytes]));
  for (unsigned i = 0; i < n; ++i) r.stacks.push_back(pool[i].get());
  BlockRun* outer = running;
  running = &r;
  bool ok = true;
  for (unsigned b = 0; b < grid.Count() && ok; ++b) {
    r.block_idx = Unflatten(b, grid);
    ok = RunBlock(r, error);
  }
  running = outer;
  return ok;
}

Extent ThreadIdx() { return running->threads[running->current].idx; }
Extent BlockIdx() { return running->block_idx; }
Extent BlockDim() { return running->block; }
Extent GridDim() { return running->grid; }

void SyncThreads() {
  running->threads[running->current].wait = Wait::kBlockBarrier;
  Yield();
}

uint64_t WarpExchange(uint64_t value, int source) {
  BlockRun& r = *running;
  const unsigned i = r.current, warp = i / 32;
  Thread& t = r.threads[i];
  auto& slot = r.slots[warp][t.shuffles++ % 2];
  slot[i % 32] = value;
  t.wait = Wait::kWarpBarrier;
  Yield();
  return slot[static_cast<unsigned>(source) % 32];
}

}  // namespace temper::emulation
