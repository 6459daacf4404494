// DpkgStatus: the packages installed on a Debian target, read from its /var/lib/dpkg/status, what
// changed between two such files, and the checksums dpkg recorded for a package's files.
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

// The conffiles dpkg recorded for the installed `package` ("name" or "name:arch", as
// InstalledPackages keys it) in `dpkg_status`: absolute path -> md5 of the file as the package
// shipped it. Empty when the package is not installed or has none.
std::map<std::string, std::string> PackageConffiles(std::string_view dpkg_status, std::string_view package);

// A package's /var/lib/dpkg/info/<pkg>.md5sums ("md5  path/relative/to/root" per line): absolute
// path -> md5. Lines of another form are skipped.
std::map<std::string, std::string> PackageMd5sums(std::string_view md5sums);

// dpkg's architecture from a status file where /var/lib/dpkg/arch is absent (a debootstrap or
// mmdebstrap root never wrote one): the architecture most of the installed Essential packages are
// built for ("all" packages say nothing of the machine). Empty when none says.
std::string EssentialArchitecture(std::string_view dpkg_status);

// What turned `before` into `after` (both name -> version), each list sorted by name.
PackageChanges ComparePackages(const std::map<std::string, std::string>& before,
                               const std::map<std::string, std::string>& after);

}  // namespace temper::stig
