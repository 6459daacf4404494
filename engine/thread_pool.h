// WorkerGroup: a fixed set of threads that run one function on every index at once (fork-join).
//
// The CPU backend uses it twice: one group of `tp` threads runs the ranks of a tensor-parallel
// forward pass (each rank in its own thread, as each GPU will have its own host thread), and each
// rank has a group of helper threads that split its matrix products.
//
// Thread safety: Run and ParallelFor must not be called concurrently on one group; they may be
// called from any one thread at a time. The destructor joins the threads.
#pragma once

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

  // Splits [0, n) into size() contiguous parts of nearly equal length and runs fn(begin, end) on
  // each; parts are never shorter than `grain` (so tiny loops stay on one thread).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  const int size_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace temper::engine
