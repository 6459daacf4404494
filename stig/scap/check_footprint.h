// CheckFootprint: the files a rule's OVAL check reads, so that a verification re-checks only the
// previously passing rules a change could have affected.
//
// Why: every attempt re-checks the rules that passed before (the regression set, up to ~160 rules
// of a whole profile, some of which walk every system library), and that evaluation is most of
// the loop's harness time. A change that wrote /etc/ssh/sshd_config cannot change the verdict of
// a check that reads only /etc/login.defs. The footprint is read from the OVAL objects reachable
// from the rule's definition (extended definitions included):
//   - file-reading objects (textfilecontent54, file, symlink, xmlfilecontent, ...) give the path
//     they read: a whole `filepath`, or `path` + `filename`, each equal to a string or matched by a
//     regular expression (OVAL's pattern match), searched downwards when the object's behaviors
//     recurse;
//   - objects with fixed answers on a host (family, the OVAL variable object) read no file;
//   - packages (dpkginfo) read dpkg's database, /var/lib/dpkg/status;
//   - everything else (runtime state: sysctl, systemd units, processes, mounts; a path computed by
//     a variable; object sets; a pattern this library cannot compile) makes the rule *untied*: it
//     is re-checked after every change.
// A change to a directory counts for every path beneath it (a directory removed or replaced).
// The loop's own cross-check (VerificationRequest::cross_check) evaluates the whole regression
// set beside the filtered one and reports every rule the filter would have missed.
//
// Thread safety: a built footprint is immutable; Touches may run from any thread.
#pragma once

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace temper::stig {

// One string an OVAL object entity names: equal to `text`, or (pattern) any string in which the
// regular expression `text` finds a match, as OVAL's "pattern match" operation says.
class EntityMatch {
 public:
  static EntityMatch Equal(std::string text);
  // Null when `pattern` does not compile as an ECMAScript regular expression.
  static std::unique_ptr<EntityMatch> Pattern(std::string pattern);

  bool Matches(std::string_view s) const;
  // True for a pattern match, false for an equal one.
  bool pattern() const { return regex_ != nullptr; }
  // The longest directory every match must lie in ("/etc/audit" for "^/etc/audit/rules\.d/.*"),
  // "" when the match can lie anywhere: a removed directory above it changes what it matches.
  const std::string& fixed_dir() const { return fixed_dir_; }

 private:
  EntityMatch() = default;
  std::string text_;
  std::shared_ptr<const std::regex> regex_;  // null for Equal
  std::string fixed_dir_;
};

// The files one OVAL object reads.
struct PathPattern {
  std::shared_ptr<const EntityMatch> filepath;  // a whole path; else dir + name
  std::shared_ptr<const EntityMatch> dir;
  std::shared_ptr<const EntityMatch> name;  // null: the directory itself
  bool recurse_down = false;                // dir also matches every directory beneath a match

  bool Touches(const std::string& changed_path) const;
  // Whether the object reads `path` itself (Touches without the directories above).
  bool Reads(const std::string& path) const;
  // The one file the object names, when it names one (no pattern, no recursion).
  std::optional<std::string> NamedFile() const;
};

struct CheckFootprint {
  // True when every object the check reads is a file pattern below (or reads no file); false when
  // any part of the check cannot be tied to paths, or the rule has no OVAL check.
  bool tied = false;
  std::string untied_because;  // e.g. "a sysctl object", "a path taken from a variable"
  std::vector<PathPattern> paths;

  // Whether a change to any of `changed_paths` (absolute paths in the target) may change the
  // check's verdict. Always true for an untied footprint.
  bool Touches(const std::vector<std::string>& changed_paths) const;
  // Whether the check reads nothing but the package database: it tests that a package is
  // installed or absent (package_aide_installed, install_smartcard_packages).
  bool ReadsOnlyPackages() const;
  // What the check names outright: each object's one file, or the directory a pattern's matches
  // must lie in (none for a pattern that may match anywhere). Empty when untied.
  std::vector<std::string> NamedPaths() const;
};

// The path of the dpkg database that package objects read; any change beneath /var/lib/dpkg also
// changes which rules apply (CPE platforms test installed packages), see Verify.
inline constexpr std::string_view kDpkgStatusPath = "/var/lib/dpkg/status";

}  // namespace temper::stig
