// Paths as text: "/etc/", "/etc/." and "//etc" all name /etc, and ".." drops the part before it.
// Lexical only: nothing on any filesystem is looked at, so a symlink is not followed (callers that
// must know where a write lands resolve the path on the machine itself).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace temper {

// `path` without empty, "." and ".." parts; a relative path stays relative ("" for "." alone).
std::string NormalizePath(std::string_view path);

// True when `path` is `dir` or lies under it (both normalized).
bool PathWithin(std::string_view path, std::string_view dir);

}  // namespace temper
