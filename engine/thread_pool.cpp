#include "engine/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace temper::engine {
namespace {

// How long an idle worker, or a caller waiting for the others, spins before it sleeps: longer
// than the gap between two forks of a decode step, far shorter than a time slice.
constexpr std::chrono::microseconds kSpin{50};

// Spins until `done()` or kSpin has passed; whether `done()` held.
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

WorkerGroup::WorkerGroup(int size) : size_(std::max(1, size)) {
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
}

WorkerGroup::~WorkerGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerGroup::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto started = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    const std::function<void(int)>* job;
    {
      if (!SpinUntil(started)) {
        std::unique_lock<std::mutex> lock(mu_);
        start_cv_.wait(lock, started);
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
    }
    (*job)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under mu_ before it sleeps
      done_cv_.notify_one();
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
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  fn(0);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
  std::lock_guard<std::mutex> lock(mu_);
  job_ = nullptr;
}

void WorkerGroup::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // A few chunks per worker, so the fast ones can take up a slow one's share.
  const int64_t chunks = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, 4 * int64_t{size_});
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  Run([&](int) {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      if (begin < end) fn(begin, end);
    }
  });
}

}  // namespace temper::engine
