// Close matches: the "did you mean" list for unknown datastream, profile and rule ids.
//
// A user who types `sshd_disable_root_logins` should be told the id that exists. Candidates are
// ranked by Levenshtein distance (ties keep the input order); only those within a distance that
// grows with the query's length are kept, so unrelated ids never show up as suggestions.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace temper::stig {

// Edit distance (insert, delete, substitute; each costs 1).
std::size_t EditDistance(std::string_view a, std::string_view b);

// Up to `limit` candidates closest to `query`, best first, within max(2, |query| / 3) edits.
// A candidate that contains the query as a substring also counts as close (so "root_login"
// finds "sshd_disable_root_login").
std::vector<std::string> CloseMatches(std::string_view query, const std::vector<std::string>& candidates,
                                      std::size_t limit = 5);

// ": did you mean a, b or c?" or "" when there is nothing close; for error messages.
std::string DidYouMean(std::string_view query, const std::vector<std::string>& candidates);

}  // namespace temper::stig
