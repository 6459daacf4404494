// Text for people on one line: what `temper` prints (tables, progress lines) and the journal's event
// sentences (orchestrator/journal_event_types.h) cut long free text, fit a terminal's width and name
// rules by their short names the same way, wherever the line is built.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <string>

namespace temper {

// `text` on one line: runs of whitespace (newlines included) become one space, and text longer than
// `max_chars` characters (UTF-8 code points) is cut with "…".
std::string OneLine(const std::string& text, size_t max_chars);
// `text` cut to at most `max_chars` UTF-8 code points (no marker); for lines that must fit a terminal.
std::string FitWidth(const std::string& text, size_t max_chars);
// The name after "_rule_" of an SSG rule id (sshd_disable_root_login); other ids unchanged.
std::string ShortRuleName(const std::string& rule_id);

}  // namespace temper
