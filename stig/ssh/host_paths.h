// HostPaths: the paths a command names on an SSH host, and which of them it may change — for the
// SSH target's guards. A write follows symlinks on the host (`echo > /tmp/x` where /tmp/x ->
// /root/.ssh/authorized_keys lands in authorized_keys), so the guards must judge where a change
// lands, not how it is spelled: SshTarget resolves the paths named here on the host and asks the
// guards again with what they resolve to.
//
// It also keeps every change out of temper's own directory on the host (the undo journal in
// /var/lib/temper): a journal the Worker can rewrite is a revert the Worker controls.
//
// Paths are read from the command with policy/shell_split: arguments that are absolute paths (or
// --option=/path), relative ones joined to a literal `cd` before them, words that are a variable
// the script gives one literal value, and redirection targets. What a command computes at run time
// cannot be named here; the Worker's command policy has refused most of it before, and the undo
// journal's revert is the last line.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::stig {

struct NamedPath {
  std::string path;        // absolute, lexically normalized
  bool changes = false;    // the command holding it may change it (it does not only read it)
  bool recursive = false;  // ... and all under it (rm -r, mv, find -delete, tar -C, cp -r into it)
  std::string command;     // that command's text, for messages
};

// The paths `command` names, in order. InvalidArgument (naming the column) when it cannot be parsed.
Result<std::vector<NamedPath>> PathsNamedBy(std::string_view command);

// Why the change `named` would touch temper's directory `dir` on the host: a change to it or to
// anything under it, or a recursive change to a directory above it. "" when it would not.
std::string HostDirRisk(const NamedPath& named, std::string_view dir);

}  // namespace temper::stig
