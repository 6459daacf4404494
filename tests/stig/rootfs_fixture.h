// The one Debian 12 root the stig suite shares, and per-test targets layered over it.
//
// The root is built once per build tree by the hidden test case "[.rootfs_build]", which ctest
// runs as the FIXTURES_SETUP of every other case (see CMakeLists.txt), and rebuilt only when its
// spec changes. Each test case opens its own RootfsTarget over that root in a fresh directory,
// so cases can run in parallel without seeing each other's changes. Also the content and logger the
// suite's cases share.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "common/log.h"
#include "scratch_space.h"
#include "stig/rootfs/rootfs_target.h"
#include "stig/scap/content.h"

namespace temper::stig::testing {

// The Ubuntu 20.04 STIG profile of Debian 12's SSG content, loaded once per test process.
inline const Content& Ubuntu2004Stig() {
  static const Result<Content> content = Content::Load(kUbuntu2004Datastream, "stig");
  REQUIRE(content.ok());
  return *content;
}

// The full XCCDF id of an SSG rule's short name ("sshd_disable_root_login").
inline std::string FullRuleId(const std::string& name) { return std::string(kRulePrefix) + name; }

inline const Logger& QuietLog() {
  static const Logger log(LogLevel::kWarning);
  return log;
}

inline std::string RootfsDir() { return std::string(TEMPER_BINARY_DIR) + "/stig-rootfs"; }
inline std::string SharedRoot() { return RootfsDir() + "/root"; }

// A target over the shared root in a directory of its own (in the test process's scratch directory,
// scratch_space.h), removed at the end of the test.
class ScopedTarget {
 public:
  explicit ScopedTarget(const std::string& name, PackageCacheOptions packages = {}) : packages_(std::move(packages)) {
    REQUIRE(std::filesystem::is_directory(SharedRoot()));
    dir_ = ::temper::testing::TestScratchDir() + "/target-" + name;
    std::filesystem::remove_all(dir_);  // a target an earlier run of this case (a SECTION) failed to open
    auto t = RootfsTarget::Open(name, dir_, SharedRoot(), packages_);
    INFO(t.status().ToString());
    REQUIRE(t.ok());
    target_ = std::move(*t);
  }
  ~ScopedTarget() {
    target_.reset();  // unmounts
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScopedTarget(const ScopedTarget&) = delete;
  ScopedTarget& operator=(const ScopedTarget&) = delete;

  RootfsTarget& operator*() { return *target_; }
  RootfsTarget* operator->() { return target_.get(); }
  const std::string& dir() const { return dir_; }
  // Re-opens the target from its directory, as a restarted daemon would.
  void Reopen() {
    std::string name = target_->name();
    target_.reset();
    auto t = RootfsTarget::Open(name, dir_, SharedRoot(), packages_);
    REQUIRE(t.ok());
    target_ = std::move(*t);
  }

 private:
  PackageCacheOptions packages_;
  std::string dir_;
  std::unique_ptr<RootfsTarget> target_;
};

}  // namespace temper::stig::testing
