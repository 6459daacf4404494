// TEMPER_DCHECK: an invariant a header states in words, checked in debug builds.
//
// Comments say what must hold ("seqs are strictly increasing", "ids are never reused"); a DCHECK
// beside the code that keeps the promise makes a debug build stop at the first place it breaks,
// with the file, the line, the condition and the invariant's words, instead of letting a broken
// state reach the disk. It is for the code's own promises only, never for input (a file, a host,
// a client): bad input gets a Status.
//
//   TEMPER_DCHECK(seq > last_seq_, "journal seqs are strictly increasing");
//
// Debug builds (NDEBUG not defined, as CMAKE_BUILD_TYPE=Debug): a false condition prints one line
// to stderr and aborts, like assert. Release builds (NDEBUG, as RelWithDebInfo and Release): the
// condition is compiled (so it cannot rot) but never evaluated, and costs nothing.
// Thread safety: the check itself shares nothing.
#pragma once

#include <source_location>
#include <string_view>

namespace temper {

// Writes "file:line: function: TEMPER_DCHECK(condition) failed: why" to stderr and aborts.
[[noreturn]] void DcheckFailed(std::string_view condition, std::string_view why, std::source_location where);

}  // namespace temper

#ifdef NDEBUG
#define TEMPER_DCHECK(condition, why) \
  do {                                \
    if (false) {                      \
      (void)(condition);              \
    }                                 \
  } while (0)
#else
#define TEMPER_DCHECK(condition, why)                                                           \
  do {                                                                                          \
    if (!(condition)) ::temper::DcheckFailed(#condition, why, std::source_location::current()); \
  } while (0)
#endif
