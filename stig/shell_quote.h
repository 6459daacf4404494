// ShellQuote: a word quoted for a POSIX shell, for the commands temper builds from values it does
// not control (paths and names on a target, from a bundle or a host).
//
// Single quotes take everything literally but a single quote, which is closed, escaped and reopened,
// so the quoted word is exactly `text` whatever it holds ($, `, \, newlines, spaces, globs).
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace temper::stig {

// `text` quoted for a POSIX shell: 'text', with each ' written as '\''.
std::string ShellQuote(std::string_view text);

}  // namespace temper::stig
