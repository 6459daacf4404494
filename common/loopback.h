// IsLoopbackHost: whether a host name or address (without port) is this machine's loopback —
// "localhost", 127.0.0.0/8 or ::1 — for the listeners that serve plain HTTP only there.
// Thread safety: a pure function.
#pragma once

#include <string>

namespace temper {

bool IsLoopbackHost(const std::string& host);

}  // namespace temper
