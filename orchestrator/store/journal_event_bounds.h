// Journal event bounds: no single journal event may grow large enough to hurt the daemon.
//
// Events carry what the loop saw: a tool call's arguments, a model's reply, a command's output, a
// cancel reason. None of those has a natural size limit, and one unbounded event costs every reader
// of the journal: a line of megabytes in a JSON Lines file, a gRPC message near its 4 MiB limit for
// every watcher, a row SQLite must copy whole. So every event is bounded once, where it enters the
// state store (StateStore::AppendEvent and the transactions that record events):
//
//   - each string inside the event's data is cut to kMaxEventStringBytes at a UTF-8 character
//     boundary, ending in a visible marker that says how much was cut: "…[cut by temper: 1048576 of
//     1064960 bytes left out]";
//   - if the data is still too big (many strings), the per-string cut is halved until it fits; then
//     lists keep their first 1024 items, halving down to 4, with a last item saying how many were
//     left out ("…[cut by temper: 3000 of 4024 items left out]"); data even that cannot shrink
//     (an object of many keys) becomes {"truncated": {"original_bytes": N, "prefix": "<the first
//     bytes of the original JSON>"}};
//   - target, rule id, role and type are cut to kMaxEventFieldBytes the same way.
//
// The documented bound: a bounded event's line in a journal file (JournalFiles::ToJsonLine) is at
// most kMaxJournalLineBytes. Events within the bounds pass unchanged, byte for byte.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>

#include "orchestrator/records.h"

namespace temper {

// One journal line, and so one event: 64 KiB.
inline constexpr size_t kMaxJournalLineBytes = 64 << 10;
// One string inside an event's data, before any further cut the line bound needs.
inline constexpr size_t kMaxEventStringBytes = 16 << 10;
// An event's target, rule id, role and type.
inline constexpr size_t kMaxEventFieldBytes = 256;

// `event` within the bounds above (strings cut with common/text_cut.h). Its data must be a JSON
// object (StateStore checks that first).
NewEvent BoundJournalEvent(NewEvent event);

}  // namespace temper
