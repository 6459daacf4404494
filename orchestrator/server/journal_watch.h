// JournalWatchers: WatchJournal's streams served without a thread each (issue 46). A stream is a
// gRPC callback reactor: it reads the journal from the store a chunk at a time and writes it; once
// caught up (following), it parks here and holds no thread. One waker thread waits on the journal
// and resumes the parked streams that an event concerns, so 500 open `temper watch` streams cost
// memory and a descriptor each, not 500 threads, and cannot starve the other calls.
//
// Streams keep the journal's contract (journal.h): events are read back from the store, in seq
// order, each once, from after_seq on. When the journal closes (shutdown), every following stream
// ends with UNAVAILABLE naming the seq to resume from; a client that cancels ends its stream with
// CANCELLED. A stream that cannot park (temperd could not start the waker thread) ends with
// UNAVAILABLE saying so, and temperd serves on.
//
// Thread safety: Start and the parking calls may come from any thread. The store, journal and log
// must outlive this object, and the gRPC server (every stream) must be shut down before it dies.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/server/client_limits.h"
#include "orchestrator/store/journal.h"
#include "orchestrator/store/state_store.h"
#include "temper/v1/temper.grpc.pb.h"

namespace temper {

class JournalWatch;

class JournalWatchers {
 public:
  JournalWatchers(StateStore& store, Journal& journal, const Logger& log)
      : store_(store), journal_(journal), log_(log) {}
  ~JournalWatchers();
  JournalWatchers(const JournalWatchers&) = delete;
  JournalWatchers& operator=(const JournalWatchers&) = delete;

  // A stream of the events after `after_seq` (of `batch_id` only when given), following new ones
  // when `follow`. The request is already checked; `slot` counts the stream against its client
  // until it ends. gRPC owns the returned reactor.
  grpc::ServerWriteReactor<temper::v1::JournalEvent>* Start(std::optional<int64_t> batch_id, uint64_t after_seq,
                                                            bool follow, ClientLimits::WatchSlot slot);
  // A stream that ends at once with `status` (a refused request).
  static grpc::ServerWriteReactor<temper::v1::JournalEvent>* Refuse(const grpc::Status& status);

  // Streams parked now (caught up, waiting for events): for tests.
  size_t parked() const;

 private:
  friend class JournalWatch;
  // A caught-up stream waits for an event beyond `beyond`: true once parked (the waker resumes it);
  // false when it must read again now (an event came, the journal closed or the client cancelled
  // meanwhile). Unavailable when the waker thread cannot be started.
  Result<bool> Park(JournalWatch* watch, uint64_t beyond);
  // From a stream's OnCancel: true when it was parked and is now the caller's to finish.
  bool Unpark(JournalWatch* watch);
  void WakerThread();

  StateStore& store_;
  Journal& journal_;
  const Logger& log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<JournalWatch*, uint64_t> parked_;  // each with the seq it waits to be passed
  bool stopping_ = false;
  std::thread waker_;  // started by the first stream that parks
};

}  // namespace temper
