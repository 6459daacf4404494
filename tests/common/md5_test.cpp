// Md5Hex against RFC 1321's test suite and md5sum at every padding boundary.
#include "common/md5.h"

#include <string>

#include <catch2/catch.hpp>

using temper::Md5Hex;

TEST_CASE("Md5Hex gives RFC 1321's digests") {
  CHECK(Md5Hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(Md5Hex("a") == "0cc175b9c0f1b6a831c399e269772661");
  CHECK(Md5Hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(Md5Hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(Md5Hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890") ==
        "57edf4a22be3c955ac49da2e2107b67a");
}

// Lengths 55, 56 and 64 are where the length field stops fitting in the last block; the digests
// are md5sum's for that many 'x' bytes.
TEST_CASE("Md5Hex pads correctly at the block boundaries") {
  CHECK(Md5Hex(std::string(55, 'x')) == "04364420e25c512fd958a70738aa8f72");
  CHECK(Md5Hex(std::string(56, 'x')) == "668a72d5ba17f08e62dabcafad6db14b");
  CHECK(Md5Hex(std::string(64, 'x')) == "c1bb4f81d892b2d57947682aeb252456");
}
