// What the target-safety attack cases (part B) share: running a call that may block forever with a
// deadline and a way to free it, and the free space of the file system holding a path.
#pragma once

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <thread>

namespace temper::security {

using Clock = std::chrono::steady_clock;

// Runs `call` on its own thread and waits up to `limit` for it. A call still running then is
// blocked in the code under test: `unblock` is called until it returns (so the test can end and
// clean up), and the result says it was late. Returns the call's result and how long it took.
template <typename T>
struct Timed {
  T value;
  std::chrono::milliseconds took;
  bool in_time;
};

template <typename Call>
auto CallWithin(std::chrono::milliseconds limit, Call call, const std::function<void()>& unblock)
    -> Timed<decltype(call())> {
  auto start = Clock::now();
  auto future = std::async(std::launch::async, [&] {
    auto v = call();
    return std::make_pair(std::move(v), Clock::now());
  });
  bool in_time = future.wait_for(limit) == std::future_status::ready;
  while (future.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) unblock();
  auto [value, end] = future.get();
  return {std::move(value), std::chrono::duration_cast<std::chrono::milliseconds>(end - start), in_time};
}

// Opens both ends of the FIFO at `host_path` for a moment: an open(2) blocked on either end returns.
inline void OpenBothEnds(const std::string& host_path) {
  int fd = ::open(host_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::close(fd);
  }
}

// Bytes available to unprivileged writers on the file system holding `path`.
inline std::uint64_t FreeBytes(const std::string& path) {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

}  // namespace temper::security
