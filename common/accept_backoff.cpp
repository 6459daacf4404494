#include "common/accept_backoff.h"

#include <cerrno>
#include <cstring>

namespace temper {

AcceptBackoff::Action AcceptBackoff::OnError(int err) {
  switch (err) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
      return Action::kWait;
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return Action::kNext;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      if (pause_.count() == 0) {
        spell_start_ = std::chrono::steady_clock::now();
        pause_ = kFirstPause;
        log_.Warning(
            "{}: cannot accept connections ({}); pausing until resources free up, connections wait in the backlog",
            listener_, std::strerror(err));
      } else {
        pause_ = std::min(pause_ * 2, kLongestPause);
      }
      ++pauses_;
      return Action::kPause;
    default:
      log_.Error("{}: accept failed ({}); no longer accepting connections", listener_, std::strerror(err));
      return Action::kStop;
  }
}

void AcceptBackoff::OnAccepted() {
  if (pause_.count() == 0) return;
  auto lasted = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - spell_start_);
  log_.Info("{}: accepting connections again after {} ms ({} pauses)", listener_, lasted.count(), pauses_);
  pause_ = std::chrono::milliseconds(0);
  pauses_ = 0;
}

}  // namespace temper
