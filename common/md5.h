// MD5 (RFC 1321) of a byte string, as 32 lowercase hex digits: the digest `md5sum` prints and dpkg
// records per file of a package (/var/lib/dpkg/info/<pkg>.md5sums, a conffile's line in the status
// file), so temper can tell whether a package's file is as the package shipped it. Not for anything
// that must resist a forger: dpkg's record is the reference, and MD5 is what it records.
// Thread safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace temper {

std::string Md5Hex(std::string_view data);

}  // namespace temper
