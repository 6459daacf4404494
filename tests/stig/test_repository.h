// A flat apt repository of tiny .deb packages made for a test, standing in for an operator's
// mirror directory ("deb [trusted=yes] file:DIR ./"), so package installs are tested with the real
// apt and dpkg and no network. Built with dpkg-deb and dpkg-scanpackages (dpkg, dpkg-dev).
//
// The packages (all Architecture: all, version 1.0):
//   temper-test-ok        ships /usr/share/temper-test/ok
//   temper-test-dep       Depends: temper-test-ok; ships /usr/share/temper-test/dep
//   temper-test-conflict  Conflicts: temper-test-ok
//   temper-test-failing   its postinst exits 1
//   temper-test-service   ships temper-test.service (WantedBy=multi-user.target), not enabled
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "platform/process.h"
#include "scratch_space.h"

namespace temper::stig::testing {

class TestRepository {
 public:
  TestRepository() {
    std::string tmpl = ::temper::testing::TestTempDir() + "/test-repo-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    // apt reads file: sources as its unprivileged _apt user.
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                           std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                           std::filesystem::perms::others_exec);
    std::filesystem::create_directories(dir_ + "/debs");
    Package("temper-test-ok", "", {{"usr/share/temper-test/ok", "ok\n"}});
    Package("temper-test-dep", "Depends: temper-test-ok\n", {{"usr/share/temper-test/dep", "dep\n"}});
    Package("temper-test-conflict", "Conflicts: temper-test-ok\n", {{"usr/share/temper-test/conflict", "c\n"}});
    Package("temper-test-failing", "", {{"usr/share/temper-test/failing", "f\n"}},
            "#!/bin/sh\necho 'temper-test-failing: configuring fails on purpose' >&2\nexit 1\n");
    Package("temper-test-service", "",
            {{"lib/systemd/system/temper-test.service",
              "[Unit]\nDescription=temper test service\n\n[Service]\nExecStart=/bin/true\n\n"
              "[Install]\nWantedBy=multi-user.target\n"}});
    Run({"/bin/sh", "-c", "cd " + dir_ + "/debs && dpkg-scanpackages --multiversion . /dev/null > Packages"});
  }
  ~TestRepository() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestRepository(const TestRepository&) = delete;
  TestRepository& operator=(const TestRepository&) = delete;

  // The apt source line for a package cache.
  std::string Source() const { return "deb [trusted=yes] file:" + dir_ + "/debs ./"; }
  const std::string& dir() const { return dir_; }

 private:
  static void Run(std::vector<std::string> argv) {
    ProcessSpec p;
    p.argv = std::move(argv);
    p.timeout = std::chrono::seconds(60);
    auto r = RunProcess(p);
    REQUIRE(r.ok());
    INFO(r->err);
    REQUIRE(r->Succeeded());
  }

  void Package(const std::string& name, const std::string& relations,
               const std::vector<std::pair<std::string, std::string>>& files, const std::string& postinst = "") {
    namespace fs = std::filesystem;
    fs::path tree = fs::path(dir_) / "src" / name;
    fs::create_directories(tree / "DEBIAN");
    std::ofstream(tree / "DEBIAN/control") << fmt::format(
        "Package: {}\nVersion: 1.0\nArchitecture: all\nMaintainer: temper tests <tests@example.invalid>\n{}"
        "Description: temper test package\n A package made by temper's tests.\n",
        name, relations);
    if (!postinst.empty()) {
      std::ofstream(tree / "DEBIAN/postinst") << postinst;
      fs::permissions(tree / "DEBIAN/postinst", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                                    fs::perms::others_read | fs::perms::others_exec);
    }
    for (const auto& [path, content] : files) {
      fs::create_directories((tree / path).parent_path());
      std::ofstream(tree / path) << content;
    }
    Run({"dpkg-deb", "--root-owner-group", "--build", tree.string(),
         fmt::format("{}/debs/{}_1.0_all.deb", dir_, name)});
  }

  std::string dir_;
};

}  // namespace temper::stig::testing
