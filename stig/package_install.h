// Package installs and removals on a Target with the target's own apt and dpkg, as the Worker's
// install_package / remove_package tools do them.
//
// Installing fetches the packages and their dependencies into the host-side package cache
// (package_cache.h), then runs `apt-get install --no-download` inside the target's sandbox, so the
// maintainer scripts run there and nothing touches the host. Removing runs `apt-get remove` (or
// purge) in the sandbox after a dry run: a removal that would take packages with it that were
// not named is refused, so every package that goes away was asked for by name (and so was seen by
// the command policy). Either way the change is an ordinary change of the target: a revert to an
// earlier snapshot undoes it exactly.
// Thread safety: as Target (single owner).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "stig/target.h"

namespace temper::stig {

struct PackageChange {
  std::vector<std::string> changed;  // dpkg's "Setting up NAME (VERSION)" / "Removing NAME (VERSION)" lines
  std::string output;                // apt's output without progress lines
  double seconds = 0;                // fetching and installing, or removing
};

// Installs `packages` and what they depend on. Errors (the message ends with apt's lines):
//   InvalidArgument     a name that is not a Debian package name
//   NotFound            a package not in the archive
//   FailedPrecondition  conflicts or unsatisfiable dependencies; a maintainer script that failed
//                       (the target may be left half-configured: revert the attempt); a timeout;
//                       no package cache, or one that cannot reach its sources (no network)
//   others              the target or its sandbox failed
Result<PackageChange> InstallPackages(Target& target, const std::vector<std::string>& packages,
                                      const SandboxLimits& limits);

// One package at one version, as dpkg's status names them.
struct PackageVersion {
  std::string name;
  std::string version;
};

// Installs exactly these versions (apt-get install NAME=VERSION ...) and what they depend on, as a
// replayed fix does (fix_replay.h): the install that was proven, not whatever is newest. Errors as
// InstallPackages; InvalidArgument for a version that is not a Debian version; FailedPrecondition
// when the target's sources do not offer a version asked for (apt's lines say which).
Result<PackageChange> InstallPackageVersions(Target& target, const std::vector<PackageVersion>& packages,
                                             const SandboxLimits& limits);

// Removes (or purges, with their configuration) `packages`. Installed packages the target's apt
// does not know are still removed; a name that is neither installed nor known is NotFound. A
// package that is not installed is not an error (`changed` stays empty). FailedPrecondition when
// the removal would also remove packages not named (they are listed), for essential packages and
// failing maintainer scripts; InvalidArgument for a bad name.
Result<PackageChange> RemovePackages(Target& target, const std::vector<std::string>& packages, bool purge,
                                     const SandboxLimits& limits);

// The packages a shell script installs with `apt-get install` / `apt install` (quoted or not,
// options skipped, names built from variables left out), in order, each once. For the baseline,
// which prepares them before running SSG's fix script.
std::vector<std::string> PackagesInstalledBy(std::string_view script);

}  // namespace temper::stig
