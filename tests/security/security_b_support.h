// What the target-safety attack cases (part B) share: running a call that may block forever with a
// deadline and a way to free it, the free space of the file system holding a path, and removing
// every mount a killed daemon left under a directory.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// Detaches every mount at or below `dir`, deepest first (a daemon killed with -9 leaves its
// overlays and disk images mounted).
inline void UnmountUnder(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::string> points;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == dir || point.rfind(dir + "/", 0) == 0) points.push_back(point);
  }
  std::sort(points.begin(), points.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& p : points) ::umount2(p.c_str(), MNT_DETACH);
}

}  // namespace temper::security
