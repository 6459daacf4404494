// JournalFiles: the journal as JSON Lines files, one per batch (batch-<id>.jsonl) plus daemon.jsonl
// for events of no batch, so operators can `tail -f`, grep and archive a batch's history without
// the API.
//
// The SQLite journal is the source of truth; these files are derived from it. A line is appended
// only after its event is committed, and before watchers are woken. A crash between the commit and
// the append leaves a file one or more lines short; Reconcile() at start-up appends exactly the
// missing events (by seq), so a file never loses or repeats a committed event.
//
// Thread safety: all methods may be called from any thread; appends are serialized.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/state_store.h"

namespace temper {

class JournalFiles {
 public:
  // Files live in `dir`, which is created if missing.
  static Result<std::unique_ptr<JournalFiles>> Open(const std::string& dir);

  // Appends one line for `event` to its file and flushes it to the disk.
  Status Append(const EventRecord& event);
  // Appends the events the store has committed beyond each file's last line. Returns how many.
  Result<uint64_t> Reconcile(StateStore& store);

  // The file that holds `batch_id`'s events (nullopt: daemon-wide events).
  std::string PathFor(std::optional<int64_t> batch_id) const;
  // One event as the line written to a file (no trailing newline).
  static std::string ToJsonLine(const EventRecord& event);

 private:
  explicit JournalFiles(std::string dir) : dir_(std::move(dir)) {}
  Status AppendLocked(const EventRecord& event);
  // The seq of the last complete line of `path`, 0 for a missing or empty file. A torn last line
  // (no newline: the crash hit mid-write) is cut off so the next append starts a clean line.
  Result<uint64_t> LastSeqLocked(const std::string& path);

  const std::string dir_;
  std::mutex mu_;
};

}  // namespace temper
