#include "orchestrator/server/journal_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "orchestrator/proto_convert.h"

namespace temper {

namespace {

// Events read from the store at a time: a chunk is written one event after the other, so a stream
// holds at most this many in memory, whatever its client reads.
constexpr uint32_t kWatchReadChunk = 256;
// How often the waker looks up from the journal to see whether it must stop.
constexpr std::chrono::seconds kWakerPoll{1};

class RefusedWatch final : public grpc::ServerWriteReactor<temper::v1::JournalEvent> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// One WatchJournal stream. At any moment exactly one party may act on it (its "turn"): the thread
// that runs Pump, gRPC while a write is in flight (OnWriteDone takes the turn back), or the waker
// while it is parked. Only the turn's holder calls Finish, so it is called once, and OnDone (which
// deletes the stream) comes after it.
class JournalWatch final : public grpc::ServerWriteReactor<temper::v1::JournalEvent> {
 public:
  JournalWatch(JournalWatchers& hub, std::optional<int64_t> batch_id, uint64_t after_seq, bool follow,
               ClientLimits::WatchSlot slot)
      : hub_(hub), batch_id_(batch_id), cursor_(after_seq), follow_(follow), slot_(std::move(slot)) {}

  // The stream's first turn, on the gRPC thread that created it. Initial metadata goes at once, so
  // a client knows its stream was accepted before any event exists.
  void Begin() {
    StartSendInitialMetadata();
    Pump();
  }

  // From the waker: the journal moved past what this stream waited for (or closed).
  void Resume() { Pump(); }

  bool cancelled() const { return cancelled_.load(); }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    cursor_ = events_[next_].seq;
    ++next_;
    Pump();
  }

  void OnCancel() override {
    // Set before Unpark takes the waker's lock, so Park (under that lock) sees it: a stream never
    // parks after its client cancelled.
    cancelled_ = true;
    if (hub_.Unpark(this)) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client"));
  }

  void OnDone() override { delete this; }

 private:
  // Writes the next event, reading a chunk from the store when none is left; ends the stream, or
  // parks it when caught up. Called only by the turn's holder.
  void Pump() {
    while (true) {
      if (cancelled_) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client"));
        return;
      }
      if (next_ < events_.size()) {
        out_.Clear();
        ToProto(events_[next_], &out_);
        StartWrite(&out_);
        return;
      }
      // Everything up to `horizon` is committed, so the read below sees all of it that matches;
      // waiting beyond `horizon` (not the cursor) keeps a filtered watcher from waking on others'
      // events again and again.
      const uint64_t horizon = hub_.journal_.last_seq();
      Result<std::vector<EventRecord>> read = hub_.store_.ReadEvents(cursor_, batch_id_, kWatchReadChunk);
      if (!read.ok()) {
        Finish(ToGrpcStatus(read.status()));
        return;
      }
      events_ = std::move(*read);
      next_ = 0;
      if (!events_.empty()) continue;
      if (!follow_) {
        Finish(grpc::Status::OK);
        return;
      }
      if (hub_.journal_.closed()) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            fmt::format("temperd is shutting down; resume with after_seq={}", cursor_)));
        return;
      }
      Result<bool> parked = hub_.Park(this, std::max(horizon, cursor_));
      if (!parked.ok()) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            fmt::format("{}; resume with after_seq={}", parked.status().message(), cursor_)));
        return;
      }
      if (*parked) return;
    }
  }

  JournalWatchers& hub_;
  const std::optional<int64_t> batch_id_;
  uint64_t cursor_;  // the last seq written
  const bool follow_;
  const ClientLimits::WatchSlot slot_;  // counts this stream against its client until it is deleted
  std::atomic<bool> cancelled_ = false;
  std::vector<EventRecord> events_;  // the chunk being written
  size_t next_ = 0;                  // its next event to write
  temper::v1::JournalEvent out_;     // the write in flight
};

JournalWatchers::~JournalWatchers() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (waker_.joinable()) waker_.join();
}

grpc::ServerWriteReactor<temper::v1::JournalEvent>* JournalWatchers::Start(std::optional<int64_t> batch_id,
                                                                           uint64_t after_seq, bool follow,
                                                                           ClientLimits::WatchSlot slot) {
  auto* watch = new JournalWatch(*this, batch_id, after_seq, follow, std::move(slot));
  watch->Begin();
  return watch;
}

grpc::ServerWriteReactor<temper::v1::JournalEvent>* JournalWatchers::Refuse(const grpc::Status& status) {
  return new RefusedWatch(status);
}

size_t JournalWatchers::parked() const {
  std::lock_guard lock(mu_);
  return parked_.size();
}

Result<bool> JournalWatchers::Park(JournalWatch* watch, uint64_t beyond) {
  std::lock_guard lock(mu_);
  if (watch->cancelled() || journal_.closed() || journal_.last_seq() > beyond) return false;
  if (!waker_.joinable()) {
    try {
      waker_ = std::thread([this] { WakerThread(); });
    } catch (const std::system_error& e) {
      log_.Error("journal watch: could not start the thread that wakes waiting streams: {}", e.what());
      return Status::Unavailable(fmt::format("temperd could not start a thread to follow the journal ({})", e.what()));
    }
  }
  parked_[watch] = beyond;
  cv_.notify_all();
  return true;
}

bool JournalWatchers::Unpark(JournalWatch* watch) {
  std::lock_guard lock(mu_);
  return parked_.erase(watch) > 0;
}

void JournalWatchers::WakerThread() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (parked_.empty()) {
      cv_.wait(lock);
      continue;
    }
    lock.unlock();
    // Read before choosing whom to wake: a stream that parks later waits beyond at least this.
    const uint64_t seen = journal_.last_seq();
    const bool closed = journal_.closed();
    lock.lock();
    std::vector<JournalWatch*> due;
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (closed || it->second < seen) {
        due.push_back(it->first);
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    // Unparked under the lock, the streams are this thread's turn: nothing else finishes them.
    for (JournalWatch* watch : due) watch->Resume();
    if (due.empty()) journal_.WaitBeyond(seen, std::chrono::steady_clock::now() + kWakerPoll);
    lock.lock();
  }
}

}  // namespace temper
