// ChangeSet redaction: password hashes never leave the host in a change set.
//
// A rule about password fields (empty passwords, the hashing algorithm, account aging) has the
// Worker change /etc/shadow, and the change set records a diff of it: every account's hash would
// then sit in the state store, the journal, the model's prompts and every evidence export (HTML,
// CKL, CKLB, XCCDF), where an offline cracker needs nothing more. So in the files that hold hashes
// (shadow(5), gshadow(5), pam_unix's /etc/security/opasswd, and the backups shadow- and gshadow-)
// each hash is replaced by a marker that names its algorithm, "<sha512crypt hash redacted>", and
// keeps a lock prefix ("!"), while the rest of the line (the user, the aging fields) stays, so an
// assessor still sees which account changed and how: locked, emptied, moved to yescrypt.
// Values that are not hashes ("", "*", "!", "!!") stay as they are: they are what the rules judge.
// Applied where diffs are made (overlay_changes) and again wherever a change set is written or read
// (ChangeSet::ToJson and FromJson), so nothing stored before this existed is exported with hashes.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace temper::stig {

// True for the absolute target paths whose lines hold password hashes (see above).
bool HoldsPasswordHashes(std::string_view path);

// "<sha512crypt hash redacted>" for "$6$...", "!<yescrypt hash redacted>" for "!$y$...", and the
// value itself for one that is not a hash ("", "*", "!", "!!", and passwd(5)'s "x").
std::string RedactHash(std::string_view value);

// One line of `path` (HoldsPasswordHashes) with its hash fields redacted; other lines unchanged.
std::string RedactHashLine(std::string_view path, std::string_view line);

// A unified diff of `path` with the hash fields of its content lines redacted (the ---/+++ and
// @@ lines as they are). `diff` unchanged when `path` holds no hashes.
std::string RedactHashesInDiff(std::string_view path, std::string_view diff);

}  // namespace temper::stig
