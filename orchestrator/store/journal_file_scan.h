// Journal file scan: reads one journal file (JSON Lines, journal_files.h) the way start-up needs it,
// so that no content of the file can stop temperd from starting.
//
// Every line is read whole, however long, in bounded memory for the line's structure (a streaming
// SAX parse: depth costs a bit per level, not a stack frame); only a JSON object with an unsigned
// top-level "seq" counts as an event. What the scan reports:
//   - last_seq: the highest seq of an event line (the file holds every event up to it, as far as the
//     appends went; JournalFiles::Reconcile appends the store's events after it);
//   - complete_bytes: the offset just past the last newline. Bytes after it are a torn tail: a crash
//     stopped an append mid-line, and that event is appended again from the state store;
//   - problems: each complete line that is not an event, or whose seq does not rise, with its line
//     number and byte offset. They are left in place (nothing a person may want to read is deleted),
//     and the events around them still count.
//
// ScanJournal is the reader's one entry point (the fuzz target's too): it takes any bytes.
// Thread safety: stateless.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper {

struct JournalLineProblem {
  uint64_t line = 0;    // 1-based
  uint64_t offset = 0;  // of the line's first byte
  uint64_t bytes = 0;   // the line's length, newline excluded
  std::string what;     // "not JSON: ...", "no unsigned top-level seq", "seq 3 does not follow seq 9"
};

struct JournalFileScan {
  uint64_t last_seq = 0;        // the highest seq of an event line; 0 when there is none
  uint64_t events = 0;          // event lines
  uint64_t lines = 0;           // complete lines
  uint64_t complete_bytes = 0;  // up to and including the last newline
  uint64_t torn_bytes = 0;      // after the last newline
  uint64_t longest_line = 0;    // bytes
  // The first kMaxReportedProblems problems, and how many there were in all.
  std::vector<JournalLineProblem> problems;
  uint64_t problem_count = 0;
};

inline constexpr size_t kMaxReportedProblems = 20;

// Reads `in` to its end. IOError when reading fails before the end.
Result<JournalFileScan> ScanJournal(std::istream& in);

}  // namespace temper
