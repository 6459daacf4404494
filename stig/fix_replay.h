// ReplayFix: writes a FixBundle (fix_bundle.h) onto a Target — an SSH host in `temper apply`, a
// rootfs target when the library's proven fix is tried before any model call.
//
// A replay checks before it changes. Every file the bundle names is read on the target first and
// judged against the bundle:
//   - it is as the fix left it (`after`): nothing to do (so a second replay changes nothing);
//   - it is as the fix found it (`before`): set to `after`;
//   - it drifted (neither): a regular text file whose `before` and `after` are both text is merged
//     line by line (line_merge.h: base `before`, the target's content and the fix's `after`) and the
//     merge written; anything else (a binary file, a type that changed, a deletion of a file that
//     drifted, lines both sides changed differently) is a conflict naming the path and why.
//   - a file of a package the fix installed (BundleFile::package): judged after the install, against
//     the package's md5 instead of `before`.
// When any path conflicts the replay changes nothing and returns the conflicts (ok() false): the
// caller refuses the rule on that target, naming them. Otherwise it installs the packages (the
// target's own apt: Target::PreparePackages, then RunWithPackages of `apt-get install` with the exact
// versions; removals with `apt-get remove`), writes the files in path order (directories before what
// they hold; content through Target::WriteFile, then owner, group and mode; symlinks replaced as links,
// never written through), deletes what the fix deleted (deepest first), and, on a target whose
// services run (not ChangesAreFilesOnly: an SSH host with systemd), reloads systemd and starts or
// stops the services the fix enabled, disabled, masked or unmasked.
//
// Everything goes through the Target's own operations, so an SSH host's guards hold as for the
// Worker: the lock-out guard and temper's own directory refuse a change (PermissionDenied, returned
// as the error), and the undo journal records every path before it is written. A replay does not
// snapshot, verify or revert: the caller (the loop's attempt) does, as for any attempt.
//
// Paths are the bundle's, validated by FixBundle::FromJson; a path is never resolved on this
// machine. The commands a replay runs quote every path and value (the shell parser's quoting).
// Thread safety: drives one Target; as the Target.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "stig/fix_bundle.h"
#include "stig/target.h"

namespace temper::stig {

enum class ReplayAction {
  kAlreadyThere,  // the target had the fix's state
  kWritten,       // set from `before` to `after`
  kMerged,        // drifted, merged line by line
  kDeleted,
  kPackages,      // packages installed or removed (path empty)
  kServices,      // services started or stopped (path empty)
};
std::string_view ReplayActionName(ReplayAction a);  // "already_there", "written", "merged", ...

struct ReplayStep {
  ReplayAction action = ReplayAction::kWritten;
  std::string path;     // empty for kPackages and kServices
  std::string command;  // what ran, for the attempt's record and the journal (one line)
};

struct ReplayConflict {
  std::string path;
  std::string why;  // "drifted: the target's content is neither the fix's before nor after, and ..."
};

struct ReplayResult {
  std::vector<ReplayStep> steps;
  std::vector<ReplayConflict> conflicts;

  bool ok() const { return conflicts.empty(); }
  // "3 written, 1 merged, 2 already there; 1 package" or the conflicts, one clause each.
  std::string Summary() const;
};

// Errors: the target's (a command or write it refused, a lost connection); FailedPrecondition when a
// package the bundle installs cannot be prepared on the target (named). A conflict is not an error.
Result<ReplayResult> ReplayFix(Target& target, const FixBundle& bundle);

}  // namespace temper::stig
