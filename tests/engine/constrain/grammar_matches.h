// Test helper: whether a text is a whole sentence of a grammar, byte by byte, as the recognizer
// that the token masks are built on reads it.
#pragma once

#include <string_view>

#include "engine/constrain/grammar.h"

namespace temper::engine::testing {

inline bool Matches(const Grammar& g, std::string_view text) {
  GrammarState s = GrammarState::Start(g);
  for (char c : text) {
    s = s.Advance(g, static_cast<uint8_t>(c));
    if (s.Dead()) return false;
  }
  return s.Complete();
}

}  // namespace temper::engine::testing
