// Bearer tokens, shared by temperd (its TCP clients, orchestrator/server/tcp_callers.h; its dashboard)
// and the `temper` client: reading a token file, and comparing tokens in constant time. A token never
// appears in a log line or an error.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace temper {

// Whether a token a client sent equals the expected one, in time that does not depend on where
// they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Reads a token file: the first line, surrounding whitespace trimmed. Refuses an empty token and a
// file that other users can read (mode & 077), naming the file.
Result<std::string> ReadTokenFile(const std::string& path);

}  // namespace temper
