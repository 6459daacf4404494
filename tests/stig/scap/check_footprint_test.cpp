#include "stig/scap/check_footprint.h"

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"
#include "stig/scap/content.h"

namespace temper::stig {
namespace {

std::shared_ptr<const EntityMatch> Eq(std::string s) {
  return std::make_shared<const EntityMatch>(EntityMatch::Equal(std::move(s)));
}
std::shared_ptr<const EntityMatch> Re(std::string s) {
  std::unique_ptr<EntityMatch> m = EntityMatch::Pattern(std::move(s));
  REQUIRE(m != nullptr);
  return m;
}

TEST_CASE("a pattern's fixed directory is its anchored literal text up to the last slash", "[stig][footprint]") {
  CHECK(Re("^/etc/audit/rules\\.d/.*\\.rules$")->fixed_dir() == "/etc/audit/rules.d");
  CHECK(Re("^/etc/ssh/sshd_config$")->fixed_dir() == "/etc/ssh");
  CHECK(Re("^/etc/pam\\.d/common-(auth|password)$")->fixed_dir() == "/etc/pam.d");
  CHECK(Re("^/etc/sshd?/x$")->fixed_dir() == "/etc");  // 'd' is optional, "/etc/ssh" is not fixed
  CHECK(Re("/etc/shadow")->fixed_dir().empty());       // unanchored: the match can lie anywhere
  CHECK(Re("^.*/bin/.*$")->fixed_dir().empty());
  CHECK(EntityMatch::Pattern("^/etc/(unclosed$") == nullptr);
  CHECK(Eq("/etc/login.defs")->fixed_dir() == "/etc/login.defs");
}

TEST_CASE("a path pattern is touched by changes to what it reads and to directories above it", "[stig][footprint]") {
  SECTION("a whole file path") {
    PathPattern p{.filepath = Eq("/etc/ssh/sshd_config")};
    CHECK(p.Touches("/etc/ssh/sshd_config"));
    CHECK(p.Touches("/etc/ssh"));  // the directory removed or replaced
    CHECK_FALSE(p.Touches("/etc/ssh/sshd_config.d/x.conf"));
    CHECK_FALSE(p.Touches("/etc/login.defs"));
    CHECK_FALSE(p.Touches("/etc/ssh2"));
  }
  SECTION("a directory and a file name pattern") {
    PathPattern p{.dir = Eq("/etc/audit/rules.d"), .name = Re("^.*\\.rules$")};
    CHECK(p.Touches("/etc/audit/rules.d/10-temper.rules"));
    CHECK_FALSE(p.Touches("/etc/audit/rules.d/README"));
    CHECK_FALSE(p.Touches("/etc/audit/rules.d/sub/10.rules"));  // no recursion
    CHECK(p.Touches("/etc/audit"));
    CHECK_FALSE(p.Touches("/etc/audit/auditd.conf"));
  }
  SECTION("recursing downwards from a directory") {
    PathPattern p{.dir = Eq("/usr/lib"), .name = Re(".*"), .recurse_down = true};
    CHECK(p.Touches("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    CHECK(p.Touches("/usr/lib/a"));
    CHECK_FALSE(p.Touches("/usr/libexec/a"));
    CHECK_FALSE(p.Touches("/etc/passwd"));
  }
  SECTION("a directory itself (filename nil)") {
    PathPattern p{.dir = Re("^/var/log/audit$")};
    CHECK(p.Touches("/var/log/audit"));
    CHECK(p.Touches("/var/log"));
    CHECK_FALSE(p.Touches("/var/log/audit/audit.log"));
  }
  SECTION("a whole path pattern matched anywhere") {
    PathPattern p{.filepath = Re("/cron\\.(daily|weekly)/")};
    CHECK(p.Touches("/etc/cron.daily/aide"));
    CHECK_FALSE(p.Touches("/etc/crontab"));
  }
}

TEST_CASE("an untied footprint is touched by every change, a tied one only by its paths", "[stig][footprint]") {
  CheckFootprint untied{.tied = false, .untied_because = "a sysctl object"};
  CHECK(untied.Touches({"/tmp/x"}));
  CheckFootprint fixed_only{.tied = true};  // family and uname: nothing a change can touch
  CHECK_FALSE(fixed_only.Touches({"/etc/passwd"}));
  CheckFootprint tied{.tied = true, .paths = {PathPattern{.filepath = Eq("/etc/login.defs")}}};
  CHECK(tied.Touches({"/etc/issue", "/etc/login.defs"}));
  CHECK_FALSE(tied.Touches({"/etc/issue"}));
  CHECK_FALSE(tied.Touches({}));
}

TEST_CASE("a footprint names its files and its patterns' directories, and knows a package-only check",
          "[stig][footprint]") {
  CheckFootprint f{.tied = true,
                   .paths = {PathPattern{.filepath = Eq("/etc/login.defs")},
                             PathPattern{.dir = Re("^/etc/audit/rules\\.d$"), .name = Re("^.*\\.rules$")},
                             PathPattern{.filepath = Re("^.*/bin/.*$")}}};
  CHECK(f.NamedPaths() == std::vector<std::string>{"/etc/login.defs", "/etc/audit"});
  CHECK_FALSE(f.ReadsOnlyPackages());
  CheckFootprint packages{.tied = true, .paths = {PathPattern{.filepath = Eq(std::string(kDpkgStatusPath))}}};
  CHECK(packages.ReadsOnlyPackages());
  packages.tied = false;  // nothing is known of an untied check
  CHECK_FALSE(packages.ReadsOnlyPackages());
  CHECK(packages.NamedPaths().empty());
  CHECK_FALSE(CheckFootprint{.tied = true}.ReadsOnlyPackages());  // reads no file at all
}

TEST_CASE("footprints of the Ubuntu 20.04 STIG rules come from their OVAL objects", "[stig][footprint]") {
  const Content& c = testing::Ubuntu2004Stig();
  const RuleInfo& root_login = *c.Rule("sshd_disable_root_login").value();
  INFO(root_login.footprint.untied_because);
  REQUIRE(root_login.footprint.tied);
  CHECK(root_login.footprint.Touches({"/etc/ssh/sshd_config"}));
  CHECK_FALSE(root_login.footprint.Touches({"/etc/login.defs"}));
  CHECK_FALSE(root_login.footprint.Touches({"/etc/audit/auditd.conf"}));

  const RuleInfo& aide = *c.Rule("package_aide_installed").value();
  REQUIRE(aide.footprint.tied);
  CHECK(aide.footprint.Touches({std::string(kDpkgStatusPath)}));
  CHECK_FALSE(aide.footprint.Touches({"/etc/ssh/sshd_config"}));

  // Runtime state is never tied to paths: the kernel's sysctl values, systemd's units.
  const RuleInfo& sysctl = *c.Rule("sysctl_kernel_randomize_va_space").value();
  CHECK_FALSE(sysctl.footprint.tied);
  CHECK_FALSE(sysctl.footprint.untied_because.empty());
  CHECK(sysctl.footprint.Touches({"/nothing/it/reads"}));
  // A local variable's object: accounts_tmout compares values read from the files it names.
  const RuleInfo& tmout = *c.Rule("accounts_tmout").value();
  REQUIRE(tmout.footprint.tied);
  CHECK(tmout.footprint.Touches({"/etc/profile.d/tmout.sh"}));
  CHECK_FALSE(tmout.footprint.Touches({"/etc/profile.d/README"}));
  // Walking every system library: touched by a library, not by a configuration file.
  const RuleInfo& libs = *c.Rule("root_permissions_syslibrary_files").value();
  REQUIRE(libs.footprint.tied);
  CHECK(libs.footprint.Touches({"/usr/lib/x86_64-linux-gnu/libvlock.so"}));
  CHECK_FALSE(libs.footprint.Touches({"/etc/ssh/sshd_config"}));

  // Package rules, and what a check names (parallel attempts run the package rules first).
  CHECK(aide.footprint.ReadsOnlyPackages());
  CHECK(c.Rule("install_smartcard_packages").value()->footprint.ReadsOnlyPackages());
  CHECK_FALSE(root_login.footprint.ReadsOnlyPackages());
  CHECK_FALSE(sysctl.footprint.ReadsOnlyPackages());
  const RuleInfo& smartcard = *c.Rule("smartcard_configure_ca").value();
  CHECK_FALSE(smartcard.footprint.ReadsOnlyPackages());  // the package database and its configuration
  CHECK(smartcard.footprint.NamedPaths() ==
        std::vector<std::string>{std::string(kDpkgStatusPath), "/etc/pam_pkcs11/pam_pkcs11.conf"});
  CHECK(sysctl.footprint.NamedPaths().empty());

  int tied = 0, with_check = 0;
  std::map<std::string, int> why;
  for (const std::string& id : c.profile_rule_ids()) {
    const RuleInfo& r = c.rules().at(id);
    if (r.oval_definition_id.empty()) continue;
    ++with_check;
    if (r.footprint.tied) ++tied;
    else ++why[r.footprint.untied_because];
  }
  for (const auto& [reason, n] : why) UNSCOPED_INFO(n << " untied: " << reason);
  WARN(tied << " of " << with_check << " rules with an OVAL check are tied to paths");
  CHECK(tied * 10 >= with_check * 6);  // most STIG checks read files
}

}  // namespace
}  // namespace temper::stig
