// Suggestions for misspelt names: "unknown key 'stat_dir' (did you mean 'state_dir'?)".
// Used wherever a user-typed name is checked against a known set (config keys, rule and profile ids).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace temper {

// Levenshtein distance (insert, delete, substitute; each costs 1).
size_t EditDistance(std::string_view a, std::string_view b);

// Up to `max_results` candidates closest to `word`, nearest first, keeping only those whose distance
// is at most max(2, |word| / 3): close enough to be a typo, far enough to avoid nonsense suggestions.
// Candidates that contain `word` as a substring also qualify, ranked after the typo matches.
std::vector<std::string> ClosestMatches(std::string_view word, const std::vector<std::string>& candidates,
                                        size_t max_results = 3);

// A ready-made suffix for error messages: " (did you mean 'a', 'b'?)", or "" when nothing is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace temper
