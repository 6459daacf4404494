// JSON nesting depth, found without parsing: a request body is checked before the parser builds
// anything from it, so a body of a few megabytes of '[' costs one pass over its bytes and not a
// tree of millions of nodes (nor, for code that walks the tree recursively, a stack of millions of
// frames).
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace temper::engine {

// The byte offset of the bracket at which `text` first nests deeper than `limit` levels (brackets
// inside strings do not count); nullopt when it never does. Text that is not JSON is not judged
// here: the parser reports it.
std::optional<size_t> FindNestingBeyond(std::string_view text, int limit);

}  // namespace temper::engine
