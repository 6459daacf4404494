// FixPlaybook: a batch's kept fixes as something a fleet tool runs — an Ansible playbook or a POSIX
// sh script that sets exactly the files, packages and services each fix's bundle (stig/fix_bundle.h)
// records, in commit order.
//
// Both give the guarantee `temper apply` gives, without its line merge: before a fix changes a path,
// the path must hold the fix's `before` or its `after` (a package's file: the package's md5 or the
// `after`); anything else is drift, and the host is refused with the path named, never overwritten
// blindly. Both are idempotent (a path already at `after` is left alone, so a second run changes
// nothing) and have a dry run that changes nothing and reports what would change:
//   - Ansible: `ansible-playbook --check` (every module used supports check mode); a second run
//     reports changed=0. Regular files go through ansible.builtin.copy with their content, as text
//     when it is UTF-8, else as base64 through the b64decode filter where that gives the bytes back
//     exactly (see CanCarryAsBase64); directories, metadata-only changes, symlinks and deletions
//     through ansible.builtin.file; packages through ansible.builtin.apt (exact versions); services
//     through ansible.builtin.systemd when the host runs systemd. Every value from a bundle is tagged
//     !unsafe, so Jinja never evaluates a path or a file's content; the YAML is written by yaml-cpp.
//   - sh: `set -eu`; `--check` reports and exits 2 when anything would change; drift exits 3 naming
//     the path; contents as base64 heredocs; every path single-quoted (nothing in a path or a
//     content runs).
// Where several fixes of the export change one path, an earlier fix also accepts, and leaves alone,
// what a later one left there (so a second run rewrites nothing), and in a dry run a later fix also
// accepts what the earlier one would have left, since the dry run did not leave it.
//
// Errors: FailedPrecondition naming the rule and path for what an export cannot carry (a file of
// type "other", a binary file the Ansible form cannot give back byte for byte, a package or unit
// name that is not one), InvalidArgument for a bundle that does not add up (a regular file without
// its content).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "stig/fix_bundle.h"

namespace temper::evidence {

// One kept fix, in the order the batch committed it.
struct KeptFix {
  std::string rule_id;
  std::string title;
  stig::FixBundle bundle;
};

struct FixExport {
  int64_t batch_id = 0;
  std::string target;                       // where the fixes were found, for the header
  std::vector<KeptFix> fixes;               // commit order
  std::vector<std::string> without_bundle;  // rule ids of kept fixes with no bundle: listed at the top
};

// The playbook's YAML text.
Result<std::string> WriteFixPlaybook(const FixExport& fixes);

// The sh script's text.
Result<std::string> WriteFixScript(const FixExport& fixes);

// Whether Ansible's `{{ '<base64>' | b64decode }}` as copy's content writes exactly `bytes`: the
// filter decodes to text with surrogate escapes (which copy encodes back), but a template whose
// result reads as a Python literal (starts with '{' or '[', or is True or False) is turned into that
// value, and copy would write its JSON instead.
bool CanCarryAsBase64(std::string_view bytes);

}  // namespace temper::evidence
