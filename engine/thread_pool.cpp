#include "engine/thread_pool.h"

#include <algorithm>

namespace temper::engine {

WorkerGroup::WorkerGroup(int size) : size_(std::max(1, size)) {
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
}

WorkerGroup::~WorkerGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerGroup::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void WorkerGroup::Run(const std::function<void(int)>& fn) {
  if (size_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    pending_ = size_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void WorkerGroup::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, size_);
  if (parts == 1) {
    fn(0, n);
    return;
  }
  Run([&](int i) {
    if (i >= parts) return;
    const int64_t begin = n * i / parts, end = n * (i + 1) / parts;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace temper::engine
