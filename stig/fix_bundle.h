// FixBundle: a kept fix exactly as it can be replayed on another machine of the same image — the
// bytes, owners and modes of every file it changed, before and after, the packages it installed or
// removed and the services it enabled or masked.
//
// A ChangeSet (change_set.h) is what an assessor reads: diffs, sizes, no bytes. A bundle is what a
// machine replays: `temper apply` writes a twin batch's kept fixes onto SSH hosts in commit order,
// the library of proven fixes tries one on a later target before any model call, and the Ansible and
// shell exports set exactly these files. So a bundle holds whole contents, and the state each file had
// before the fix: replay compares it with what the target holds now, and a file that drifted is
// merged line by line from it (fix_replay.h) or refused with the path named.
//
// Files a package the fix installed (or upgraded) brings are not carried: the replay installs the
// package from the target's own apt, and the files come with it. Such a file is carried only where the
// fix changed it after the install (its content differs from the checksum dpkg recorded for the
// package); it then names the package and the package's checksum instead of a `before`. dpkg's and
// apt's own state (/var/lib/dpkg, /var/lib/apt, /var/cache/apt, /var/cache/debconf, apt's and dpkg's
// logs) is never carried: the install writes its own.
//
// JSON form (ToJson/FromJson), stored with each kept attempt (AttemptRecord.fix_json) and in the
// library:
//   {"files":[{"path":"/etc/issue.net",
//              "before":{"type":"file","mode":"0644","uid":0,"gid":0,"size":26,"link":"",
//                        "content_base64":"...","sha256":"..."} or null,
//              "after":{...} or null,
//              "package":"aide", "package_md5":"..."}],      (only for a package's file, see above)
//    "packages":{"installed":["aide 0.17.4-1"],"removed":[],"upgraded":[]},
//    "services":{"enabled":[],"disabled":[],"masked":[],"unmasked":[]}}
// `content_base64` and `sha256` are present for regular files only; directories, symlinks (with
// `link`) and deletions carry their state alone. Fields are only ever added; FromJson ignores
// fields it does not know and refuses, naming the field, anything that breaks the limits below or
// does not add up (a sha256 that is not the content's, a size that is not its length, a path that is
// not absolute or holds "..", files not sorted by path, a path twice).
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "stig/change_set.h"

namespace temper::stig {

// A bundle is for configuration, not payloads: a fix that writes a larger file, or more in all, is
// kept on its target but cannot be replayed (capture fails with FailedPrecondition naming the path
// and the limit, and the fix is recorded without a bundle).
inline constexpr std::uint64_t kMaxBundleFileBytes = 4ull << 20;
inline constexpr std::uint64_t kMaxBundleBytes = 16ull << 20;
inline constexpr std::size_t kMaxBundleFiles = 4096;

// One path's exact state.
struct FileImage {
  FileState state;      // type, mode, owner, group, size, symlink target
  std::string content;  // a regular file's bytes (state.size == content.size()); empty otherwise
  std::string sha256;   // lower-case hex of `content`; regular files only

  bool operator==(const FileImage&) const = default;
};

struct BundleFile {
  std::string path;                // absolute, inside the target
  std::optional<FileImage> before;  // nullopt: nothing at the path (or a package's file, below)
  std::optional<FileImage> after;   // nullopt: the fix deleted it
  // A file of a package the fix installed or upgraded, changed after the install: the package's name
  // and the md5 dpkg recorded for the file as the package ships it. Empty otherwise.
  std::string package;
  std::string package_md5;

  bool operator==(const BundleFile&) const = default;
};

struct FixBundle {
  std::vector<BundleFile> files;  // sorted by path, so a directory comes before what it holds
  PackageChanges packages;
  ServiceChanges services;

  bool empty() const { return files.empty() && packages == PackageChanges{} && services == ServiceChanges{}; }
  // Sum of the regular files' bytes, before and after.
  std::uint64_t content_bytes() const;

  std::string ToJson() const;
  // InvalidArgument naming the field ("files[3].after.sha256: ...") when `json` is not a bundle
  // within the limits above.
  static Result<FixBundle> FromJson(std::string_view json);

  bool operator==(const FixBundle&) const = default;
};

// Lower-case hex sha256 of `bytes` (common/sha256), as FileImage::sha256 holds it.
std::string ContentSha256(std::string_view bytes);

// Whether `path` is dpkg's or apt's own state, which a bundle never carries (see above).
bool IsPackageManagerState(std::string_view path);

}  // namespace temper::stig
