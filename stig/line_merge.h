// MergeLines: a three-way merge of text files, line by line (diff3's sync points), for a fork of a
// rootfs target whose change meets a change committed since it was made (overlay_snapshots.h), and
// for a fix replayed onto a target whose file drifted from what the fix found (fix_replay.h: base
// the fix's before, `theirs` the target's content, `ours` the fix's after).
//
// Both versions are compared with the base by a longest common subsequence of lines; lines that
// neither changed are sync points, and each stretch between two sync points is taken from the side
// that changed it. When both changed the same stretch:
//   - the same way: once;
//   - both only added lines at the same place (two fixes appending to one file): the base's side
//     first (`theirs`, what was committed first), then `ours`;
//   - otherwise: a conflict (nullopt), and the caller remakes the attempt on a fresh fork.
// The merged tree is verified again before it is kept, so a union that reads wrong is caught there.
// Texts over kMaxMergeBytes, or holding a NUL byte, are not merged (nullopt).
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace temper::stig {

inline constexpr std::size_t kMaxMergeBytes = std::size_t{1} << 20;

std::optional<std::string> MergeLines(std::string_view base, std::string_view ours, std::string_view theirs);

}  // namespace temper::stig
