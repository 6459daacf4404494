// What a sed script does besides editing its input, for the command policy: the commands it runs
// (GNU sed's `e COMMAND`, and `e` or the s///e flag, which run the pattern space), the files it
// writes (w, W, s///w), and the text it puts into its output (a, i, c, and s replacements) — the
// text that `sed -i` leaves in a file the policy judges as commands (execution_paths.h).
//
// Replacement text keeps `&` and `\1`…`\9` as written: they stand for text already in the file.
// Errors: InvalidArgument naming the problem and its column, for a script whose commands cannot be
// told apart (an unterminated s, y or address, an unknown command).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

struct SedEffects {
  std::vector<std::string> runs;      // commands of `e COMMAND`; "" where the pattern space runs
  std::vector<std::string> writes;    // files written by w, W and s///w
  std::vector<std::string> inserted;  // text of a, i, c and s replacements
};

Result<SedEffects> ReadSedScript(std::string_view script);

}  // namespace temper
