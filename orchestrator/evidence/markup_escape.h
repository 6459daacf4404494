// MarkupEscape: text made safe to place inside XML and HTML, whatever bytes it came with.
//
// Exported checklists and reports carry text temper did not write: file contents from diffs,
// OpenSCAP's collected items, model output. Any of it may hold markup ("<script>"), bytes that
// are not UTF-8 (a Latin-1 config file) or control characters XML 1.0 forbids; each would either
// inject markup or make the file unreadable to a strict parser. Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace temper::evidence {

// `text` with &, <, >, " and ' as entities, carriage returns as &#13; (kept through XML's line-end
// normalisation), invalid UTF-8 sequences and characters XML 1.0 forbids (controls other than
// tab and newline, U+FFFE, U+FFFF) replaced by U+FFFD. Valid for XML and HTML text and attributes.
std::string MarkupEscape(std::string_view text);

// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, ending with a note of how
// many bytes were left out when it was cut.
std::string CutText(std::string_view text, std::size_t max_bytes);

}  // namespace temper::evidence
