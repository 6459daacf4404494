// FNV-1a 64 as 16 hex digits: a short name that stays the same across builds and machines
// (std::hash may not), for cache keys and socket names. Not for anything an attacker chooses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace temper {

inline std::string Fnv1aHex(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace temper
