// WorkerGroup: a fixed set of threads that run one function on every index at once (fork-join).
//
// The CPU backend uses it twice: one group of `tp` threads runs the ranks of a tensor-parallel
// forward pass (each rank in its own thread, as each GPU will have its own host thread), and each
// rank has a group of helper threads that split its matrix products.
//
// A decode step forks and joins about a hundred times (each matrix product, each attention), so
// waking a worker must cost less than the work: idle workers and the waiting caller spin briefly
// (kSpin) before they sleep on a condition variable, which in a VM costs tens of microseconds per
// wake-up. ParallelFor hands out chunks from a shared counter, so a thread slowed by a noisy
// neighbour takes fewer of them instead of holding everyone up.
//
// Thread safety: Run and ParallelFor must not be called concurrently on one group; they may be
// called from any one thread at a time. The destructor joins the threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace temper::engine {

class WorkerGroup {
 public:
  // `size` >= 1 workers in all; the calling thread acts as worker 0, so `size` - 1 threads start.
  explicit WorkerGroup(int size);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int size() const { return size_; }

  // Runs fn(i) for every i in [0, size()), concurrently; returns when all have returned.
  void Run(const std::function<void(int)>& fn);

  // Splits [0, n) into contiguous chunks of nearly equal length, never shorter than `grain` (so
  // tiny loops stay on one thread), and runs fn(begin, end) on each, spread over the workers.
  // Which worker runs a chunk varies; the chunks themselves do not.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  const int size_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;  // written under mu_ before generation_ moves
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace temper::engine
