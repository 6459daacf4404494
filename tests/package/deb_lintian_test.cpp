// lintian, Debian's package checker, on the package cmake/packaging.cmake makes: no error and no
// warning, and the few tags the package overrides (usr/share/lintian/overrides/temper, each with
// its reason) still match something, so an override never hides more than it was written for. The
// tags a user found before the package had a copyright file, a changelog, a real maintainer and
// hardening flags must not come back even as overrides.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "orchestrator/daemon_process.h"
#include "package/built_deb.h"
#include "scratch_space.h"
#include "skip.h"

namespace temper::testing {
namespace {

struct Tag {
  char severity;     // E, W, I, P, X (experimental), O (overridden), M (masked)
  std::string name;  // "no-copyright-file"
  std::string line;  // lintian's whole line, for messages
};

// lintian's lines "E: temper: tag-name context...". Other lines (N: notes) are not tags.
std::vector<Tag> ParseTags(const std::string& out) {
  std::vector<Tag> tags;
  std::istringstream in(out);
  std::string line;
  const std::regex tag_line(R"(^([EWIPXOM]): temper(?: [a-z]+)?: ([a-z0-9][a-z0-9+.-]*)(?: |$))");
  for (std::smatch m; std::getline(in, line);) {
    if (std::regex_search(line, m, tag_line)) tags.push_back({m[1].str()[0], m[2].str(), line});
  }
  return tags;
}

TEST_CASE("lintian finds no error and no warning in the Debian package, and every override is used", "[package]") {
  if (!std::filesystem::exists("/usr/bin/lintian")) TEMPER_SKIP("lintian is missing (deploy/setup.sh installs it)");
  const BuiltDeb built = BuildDeb();
  // --display-level shows info and pedantic tags too; --show-overrides lists what the overrides
  // hid, as O: lines, so this case sees them.
  // lintian leaves a file in TMPDIR behind; give it one of the case's own.
  ScratchPath tmp("lintian-tmp");
  std::filesystem::create_directories(tmp.path());
  ProcessResult lint =
      RunProcess({"/usr/bin/env", "TMPDIR=" + tmp.path(), "/usr/bin/lintian", "--display-level", ">=pedantic",
                  "--show-overrides", "--tag-display-limit", "0", "--no-cfg", built.deb});
  INFO(lint.out << lint.err);
  // lintian exits 1 when it reports an error or warning tag, 2 on its own failure.
  REQUIRE(lint.exit_code != 2);
  const std::vector<Tag> tags = ParseTags(lint.out);

  for (const Tag& t : tags) {
    INFO(t.line);
    CHECK(t.severity != 'E');
    CHECK(t.severity != 'W');
    // An override that matches nothing, or matches only by a context it no longer has.
    CHECK(t.name != "unused-override");
    CHECK(t.name != "mismatched-override");
  }
  CHECK(lint.exit_code == 0);

  // What the issue's user found, which no override may hide.
  const std::set<std::string> never = {"no-copyright-file",
                                       "debian-changelog-file-missing-or-wrong-name",
                                       "no-changelog",
                                       "bogus-mail-host",
                                       "hardening-no-fortify-functions",
                                       "hardening-no-bindnow",
                                       "hardening-no-relro",
                                       "hardening-no-pie",
                                       "no-manual-page",
                                       "copyright-without-copyright-notice",
                                       "missing-license-paragraph-in-dep5-copyright",
                                       "changelog-file-not-compressed"};
  for (const Tag& t : tags) {
    INFO(t.line);
    CHECK(never.count(t.name) == 0);
  }
  // And lintian did look at the package: its files and the hardening of its binaries.
  CHECK(std::filesystem::exists(built.tree + "/usr/share/doc/temper/copyright"));
  CHECK(std::filesystem::exists(built.tree + "/usr/share/doc/temper/changelog.Debian.gz"));
}

// The Maintainer field is the project's identity, not a placeholder on localhost (which lintian
// tags as bogus-mail-host only when the host part is not a domain).
TEST_CASE("the Debian package names a maintainer with a mail domain", "[package]") {
  const BuiltDeb built = BuildDeb();
  ProcessResult maintainer = RunProcess({"/usr/bin/dpkg-deb", "--field", built.deb, "Maintainer"});
  REQUIRE(maintainer.exit_code == 0);
  CHECK(std::regex_match(maintainer.out, std::regex(R"([^<>@]+ <[a-z0-9.+-]+@[a-z0-9-]+(\.[a-z0-9-]+)+>\n)")));
  CHECK_THAT(maintainer.out, !Catch::Contains("localhost"));
  ProcessResult version = RunProcess({"/usr/bin/dpkg-deb", "--field", built.deb, "Version"});
  CHECK(version.out == std::string(TEMPER_DEB_VERSION) + "\n");
}

}  // namespace
}  // namespace temper::testing
