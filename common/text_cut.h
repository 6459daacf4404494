// Cutting text to a byte budget with a visible marker: where temper keeps only part of something
// (a journal event's string, a problem description quoting its input), the reader must see that it
// was cut and by how much, and the cut must never split a UTF-8 character (JSON encoders refuse
// such text).
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace temper {

// `text` itself when it fits `max_bytes`; otherwise its head cut at a character boundary followed
// by "…[cut by temper: N of M bytes left out]", the whole at most `max_bytes` long (for any
// `max_bytes` of at least 64; below that only the marker is left).
std::string CutWithMarker(std::string_view text, size_t max_bytes);

}  // namespace temper
