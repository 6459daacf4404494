// AcceptBackoff: what a listening socket's owner does when accept(2) fails, so that no failure can
// make it spin or stop for good.
//
// Linux reports three kinds of failure from accept:
//   - the pending connection's own trouble (ECONNABORTED, and the network errors accept(2) lists:
//     EPROTO, ENETDOWN, EHOSTUNREACH, ...; EPERM from a firewall hook): take the next one at once;
//   - nothing to take (EAGAIN, EINTR): wait until the socket is readable again;
//   - the process or the system out of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM): accepting again
//     at once fails the same way, and the pending connection keeps the socket readable, so a loop
//     that just retries spins. Instead the owner stops watching the socket for pause(), starting at
//     50 ms and doubling up to 1 s while it lasts; the connections wait in the listen backlog and
//     are served once descriptors free up. The spell is logged once when it starts and once when
//     an accept succeeds again (with how long it lasted), never once per attempt.
// Any other error (EBADF, EINVAL, ENOTSOCK: the listening socket itself is broken) stops accepting,
// logged as an error.
//
// Thread safety: one instance per accepting thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/log.h"

namespace temper {

class AcceptBackoff {
 public:
  enum class Action { kNext, kWait, kPause, kStop };

  // `listener` names the socket in log lines ("unix socket /run/temper/temper.sock"). `log` must
  // outlive this.
  AcceptBackoff(std::string listener, const Logger& log) : listener_(std::move(listener)), log_(log) {}

  // Classifies the errno of a failed accept. For kPause, pause() says for how long.
  Action OnError(int err);
  std::chrono::milliseconds pause() const { return pause_; }
  // An accept succeeded: ends a spell of pauses.
  void OnAccepted();

 private:
  static constexpr std::chrono::milliseconds kFirstPause{50};
  static constexpr std::chrono::milliseconds kLongestPause{1000};

  const std::string listener_;
  const Logger& log_;
  std::chrono::milliseconds pause_{0};  // zero: not in a spell
  std::chrono::steady_clock::time_point spell_start_;
  uint64_t pauses_ = 0;
};

}  // namespace temper
