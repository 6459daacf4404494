// SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits: the digest `sha256sum` prints,
// so a record can name exactly which bytes ran (the Worker's reference fixes) and a person can
// check it with the standard tool. Plain C++ over the whole input in memory; the inputs are
// scripts of a few kilobytes, not files to stream.
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace temper {

std::string Sha256Hex(std::string_view data);

}  // namespace temper
