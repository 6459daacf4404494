// DpkgStatus: the packages installed on a Debian target, read from its /var/lib/dpkg/status, and
// what changed between two such files.
//
// A change set names the packages an attempt installed or removed; comparing dpkg's own database
// before and after is exact where parsing apt's output is not (maintainer scripts, dependencies
// pulled in, a `dpkg -i` that bypassed apt). A package counts as installed when the third word of
// its Status field is "installed"; half-installed and config-files packages do not.
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "stig/change_set.h"

namespace temper::stig {

// Installed packages, name -> version. A package installed for several architectures is keyed
// "name:arch" for each of them. Stanzas without Package or Version are skipped (dpkg never writes
// them for installed packages), so this never fails.
std::map<std::string, std::string> InstalledPackages(std::string_view dpkg_status);

// What turned `before` into `after` (both name -> version), each list sorted by name.
PackageChanges ComparePackages(const std::map<std::string, std::string>& before,
                               const std::map<std::string, std::string>& after);

}  // namespace temper::stig
