// JournalFiles: the journal as JSON Lines files, one per batch (batch-<id>.jsonl) plus daemon.jsonl
// for events of no batch, so operators can `tail -f`, grep and archive a batch's history without
// the API.
//
// The SQLite journal is the source of truth; these files are derived from it. A line is appended
// only after its event is committed, and before watchers are woken. A crash between the commit and
// the append leaves a file one or more lines short; Reconcile() at start-up appends exactly the
// missing events (by seq), so a file never loses or repeats a committed event.
// An append that fails while the daemon runs (a full disk) is repaired the same way without a
// restart: the file keeps the failed events, and the next append to it cuts what the failure left
// half-written and writes them first, so no later line ever hides an earlier one from Reconcile.
// Past kMaxPendingEvents failed events a file takes no more appends until the next Reconcile.
//
// Nothing a file holds can stop the start-up (journal_file_scan.h reads it): a torn last line (a
// crash mid-append) is cut off and its event appended again; a line of any length is read; a line
// that is not an event, anywhere, is left in place and reported with its file, line and offset.
// New lines are bounded (journal_event_bounds.h: at most kMaxJournalLineBytes).
//
// Files are reached through a temper::Env (platform/env.h), the real one unless a test passes its own.
// Thread safety: all methods may be called from any thread; appends are serialized.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/journal_file_scan.h"
#include "orchestrator/store/state_store.h"
#include "platform/env.h"

namespace temper {

class JournalFiles {
 public:
  // Files live in `dir`, which is created if missing. `env` must outlive the JournalFiles.
  static Result<std::unique_ptr<JournalFiles>> Open(const std::string& dir, temper::Env& env = temper::Env::Default());

  // Events whose appends failed that a file keeps in memory for its next append (each at most
  // kMaxJournalLineBytes, so at most 64 MiB).
  static constexpr size_t kMaxPendingEvents = 1024;

  // What Reconcile found wrong in one file, and what it did about it.
  struct FileRepair {
    std::string path;
    uint64_t torn_bytes = 0;                   // a torn last line, cut off; its event was appended again
    uint64_t torn_offset = 0;                  // where it started
    std::vector<JournalLineProblem> problems;  // lines left in place (the first kMaxReportedProblems)
    uint64_t problem_count = 0;
    uint64_t longest_line = 0;  // reported when over kMaxJournalLineBytes: written before lines were bounded
  };
  struct Reconciled {
    uint64_t appended = 0;            // events appended in all
    std::vector<FileRepair> repairs;  // one per file with a torn tail, problem lines or an oversized line
  };

  // Appends one line for `event` (a committed one) to its file and flushes it to the disk, after
  // the events of that file whose appends failed before. On an error the event is kept for the next
  // append (or left to Reconcile past kMaxPendingEvents).
  Status Append(const EventRecord& event);
  // Reads every file that holds a committed event, cuts a torn tail, and appends the events the
  // store has committed beyond each file's last event. IOError when a file cannot be read, cut or
  // appended to; never an error for what a file contains.
  Result<Reconciled> Reconcile(StateStore& store);

  // The file that holds `batch_id`'s events (nullopt: daemon-wide events).
  std::string PathFor(std::optional<int64_t> batch_id) const;
  // One event as the line written to a file (no trailing newline).
  static std::string ToJsonLine(const EventRecord& event);

 private:
  JournalFiles(std::string dir, temper::Env& env) : dir_(std::move(dir)), env_(env) {}
  Status AppendLocked(const EventRecord& event);
  // Writes `lines` at the end of `path` and fsyncs it.
  Status WriteLocked(const std::string& path, const std::string& lines);
  // Scans `path` (a missing file is empty) and cuts a torn last line off, so the next append starts
  // a clean line. `repair` gets what was wrong.
  Result<JournalFileScan> ScanLocked(const std::string& path, FileRepair& repair);

  const std::string dir_;
  temper::Env& env_;
  std::mutex mu_;
  // Per file: the committed events whose appends failed, oldest first, written before its next
  // line. A file in `withheld_` overflowed kMaxPendingEvents and waits for Reconcile.
  std::map<std::string, std::vector<EventRecord>> pending_;
  std::set<std::string> withheld_;
};

}  // namespace temper
