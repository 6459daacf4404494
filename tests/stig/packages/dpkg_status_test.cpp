#include "stig/packages/dpkg_status.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

constexpr const char* kStatus = R"(Package: adduser
Status: install ok installed
Architecture: all
Version: 3.134
Conffiles:
 /etc/adduser.conf cc3493ecd2d09837ffdcc3e25fdfff18
Description: add and remove users and groups
 Version: 9.9 (a continuation line, not a field)

Package: telnet
Status: deinstall ok config-files
Architecture: amd64
Version: 0.17+2.4-2

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u4

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9+deb12u4

Package: broken
Status: install reinstreq half-installed
Version: 1.0
)";

TEST_CASE("Installed packages are read from dpkg's status file", "[stig][dpkg_status]") {
  auto installed = InstalledPackages(kStatus);
  CHECK(installed == std::map<std::string, std::string>{{"adduser", "3.134"},
                                                        {"libc6:amd64", "2.36-9+deb12u4"},
                                                        {"libc6:i386", "2.36-9+deb12u4"}});
  CHECK(InstalledPackages("").empty());
  CHECK(InstalledPackages("garbage without fields\n\n\n").empty());
}

TEST_CASE("Package changes are installs, removals and version changes", "[stig][dpkg_status]") {
  std::map<std::string, std::string> before = {{"bash", "5.2-1"}, {"telnet", "0.17-44"}, {"sudo", "1.9"}};
  std::map<std::string, std::string> after = {{"bash", "5.2-2"}, {"aide", "0.17.4-1"}, {"sudo", "1.9"}};
  PackageChanges c = ComparePackages(before, after);
  CHECK(c.installed == std::vector<std::string>{"aide 0.17.4-1"});
  CHECK(c.removed == std::vector<std::string>{"telnet 0.17-44"});
  CHECK(c.upgraded == std::vector<std::string>{"bash 5.2-1 -> 5.2-2"});
  CHECK(ComparePackages(before, before) == PackageChanges{});
}

TEST_CASE("A package's recorded checksums: its conffiles from the status file, the rest from md5sums",
          "[stig][dpkg_status]") {
  CHECK(PackageConffiles(kStatus, "adduser") ==
        std::map<std::string, std::string>{{"/etc/adduser.conf", "cc3493ecd2d09837ffdcc3e25fdfff18"}});
  CHECK(PackageConffiles(kStatus, "libc6:amd64").empty());
  CHECK(PackageConffiles(kStatus, "telnet").empty());  // not installed
  CHECK(PackageConffiles(kStatus, "absent").empty());
  CHECK(PackageMd5sums("0cc175b9c0f1b6a831c399e269772661  usr/share/doc/a b\n"
                       "not a line\n"
                       "d41d8cd98f00b204e9800998ecf8427e  usr/bin/x") ==
        std::map<std::string, std::string>{{"/usr/share/doc/a b", "0cc175b9c0f1b6a831c399e269772661"},
                                           {"/usr/bin/x", "d41d8cd98f00b204e9800998ecf8427e"}});
}

}  // namespace
}  // namespace temper::stig
