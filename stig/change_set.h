// ChangeSet: what one attempt changed on a target — files, packages and services — in the form an
// assessor reads and a revert checks against.
//
// Assessors ask for "the exact diff applied" per rule: which files were added, changed or deleted
// (owner, mode, type, size, symlink target before and after, and a unified diff of text), which
// packages came or went, which services were enabled or masked. The loop stores one ChangeSet per
// evaluated attempt (AttemptRecord.changes_json), kept or reverted, so the report shows what a
// rejected fix tried as well as what a kept one left.
//
// The JSON form (ToJson/FromJson) is the stored and wire format (temper.v1.Attempt.changes_json):
//   {"files":[{"path":"/etc/ssh/sshd_config","change":"added|modified|deleted|metadata",
//              "before":{"type":"file|dir|symlink|other","mode":"0644","uid":0,"gid":0,"size":123,
//                        "link":"target, symlinks only"} or null,
//              "after":{...} or null, "diff":"unified diff or empty", "binary":false,
//              "diff_skipped":"why a text change has no diff, or empty"}],
//    "packages":{"installed":["aide 0.17.4-1"],"removed":[...],"upgraded":["bash 5.2-1 -> 5.2-2"]},
//    "services":{"enabled":["auditd.service"],"disabled":[],"masked":[],"unmasked":[]}}
// Fields are only ever added; FromJson ignores fields it does not know.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::stig {

enum class FileType { kFile, kDir, kSymlink, kOther };

// One path's state as lstat(2) sees it (symlinks are not followed).
struct FileState {
  FileType type = FileType::kFile;
  std::uint32_t mode = 0;  // permission bits with setuid, setgid and sticky (mode & 07777)
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint64_t size = 0;  // bytes for files and symlinks; 0 for directories and others
  std::string link;        // the symlink's target; empty for other types

  bool operator==(const FileState&) const = default;
};

enum class FileChangeKind {
  kAdded,     // nothing at the path before
  kModified,  // content, symlink target or type changed (owner and mode may have too)
  kDeleted,   // nothing at the path after
  kMetadata,  // only owner, group or mode changed
};

// Text diffs stop here; larger files are compared but not diffed (diff_skipped says so).
inline constexpr std::uint64_t kMaxDiffFileBytes = 256 * 1024;

struct FileChange {
  std::string path;  // absolute, inside the target
  FileChangeKind change = FileChangeKind::kModified;
  std::optional<FileState> before;  // nullopt when added
  std::optional<FileState> after;   // nullopt when deleted
  // `diff -u` of the regular-file content, sides labelled a/PATH and b/PATH (an absent or
  // non-regular side diffs as empty); empty when the content did not change or was not diffed.
  std::string diff;
  bool binary = false;       // a side holds a NUL byte: compared, never diffed
  std::string diff_skipped;  // why a changed text file has no diff (too large, diff budget spent)

  bool operator==(const FileChange&) const = default;
};

struct PackageChanges {
  std::vector<std::string> installed;  // "name version", sorted
  std::vector<std::string> removed;    // "name version" as it was
  std::vector<std::string> upgraded;   // "name old -> new" (downgrades too)

  bool operator==(const PackageChanges&) const = default;
};

struct ServiceChanges {
  std::vector<std::string> enabled;  // unit names, sorted
  std::vector<std::string> disabled;
  std::vector<std::string> masked;
  std::vector<std::string> unmasked;

  bool operator==(const ServiceChanges&) const = default;
};

struct ChangeSet {
  std::vector<FileChange> files;  // sorted by path
  PackageChanges packages;
  ServiceChanges services;

  bool empty() const;
  // One line for people: "3 files (1 added, 2 modified); 1 package installed; 1 service enabled",
  // or "no changes".
  std::string Summary() const;

  // Compact JSON in the format above.
  std::string ToJson() const;
  // InvalidArgument naming the field ("files[2].before.mode: ...") when `json` is not a change set.
  // An empty string is the empty ChangeSet (attempts stored before change sets were recorded).
  static Result<ChangeSet> FromJson(std::string_view json);

  bool operator==(const ChangeSet&) const = default;
};

std::string_view FileTypeName(FileType t);              // "file", "dir", "symlink", "other"
std::string_view FileChangeKindName(FileChangeKind k);  // "added", "modified", "deleted", "metadata"

}  // namespace temper::stig
