// Which repository paths a Markdown document names, and which of them no longer resolve.
//
// Documents cite files as evidence ("the rule lives in `stig/scap/rule_risk.h`"), and files move:
// a path that resolves nowhere sends a reader to nothing. A path counts as named when it appears
// in a code span, a fenced code block or a link target:
//   - in code, a word naming a repo path: it contains a '/' and its first segment is a top-level
//     folder of the checkout (`engine/cpu/forward.cpp`, `deploy/setup.sh`, `tests/security/`);
//     words with template parts (`tests/<folder>/<file>_test.cpp`, `$OUT/x`, `*`, `...`) name no
//     one file and are left out, and so is `build/`, which the build makes;
//   - a link target that is not a URL or an anchor, resolved from the document's own folder as
//     Markdown does (`[index](history/README.md)`, `[RESULTS](../bench/RESULTS.md)`).
// A trailing `:LINE` and trailing punctuation are not part of a path.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace temper::testing {

struct NamedPath {
  std::string path;  // as written, less a line suffix and trailing punctuation
  int line = 0;      // 1-based line of the document
  bool is_link = false;
};

// The checkout's top-level folders that a document's code may name paths under: every directory at
// the top of `checkout` except `build` (generated) and hidden ones other than `.ci`.
std::set<std::string> TopLevelFolders(const std::filesystem::path& checkout);

// Every repo path `markdown` names, in order of appearance.
std::vector<NamedPath> PathsNamedIn(std::string_view markdown, const std::set<std::string>& top_level_folders);

// The paths named in `markdown` (the text of the document at `document`, a path inside `checkout`)
// that resolve to no file or folder: code paths from `checkout`, link targets from the document's
// folder.
std::vector<NamedPath> StalePathsIn(const std::filesystem::path& document, std::string_view markdown,
                                    const std::filesystem::path& checkout);

}  // namespace temper::testing
