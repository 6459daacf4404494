#include "stig/close_matches.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

TEST_CASE("EditDistance counts single-character edits", "[stig][close_matches]") {
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("abc", "") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("stig", "stig") == 0);
  CHECK(EditDistance("stig", "sitg") == 2);
}

TEST_CASE("CloseMatches ranks near ids first and drops unrelated ones", "[stig][close_matches]") {
  std::vector<std::string> ids = {"sshd_disable_root_login", "sshd_disable_empty_passwords",
                                  "package_aide_installed", "sshd_disable_root_password_login"};
  auto m = CloseMatches("sshd_disable_root_logins", ids);
  REQUIRE_FALSE(m.empty());
  CHECK(m.front() == "sshd_disable_root_login");
  for (const auto& s : m) CHECK(s != "package_aide_installed");
  CHECK(CloseMatches("zzzzzzzz", ids).empty());
  // A substring of a real id counts as close.
  CHECK(CloseMatches("aide_installed", ids) == std::vector<std::string>{"package_aide_installed"});
}

TEST_CASE("DidYouMean formats the suggestion list", "[stig][close_matches]") {
  CHECK(DidYouMean("stg", {"stig", "cis", "stag"}) == ": did you mean stig or stag?");
  CHECK(DidYouMean("qqqqqqqqqqqq", {"stig"}).empty());
}

}  // namespace
}  // namespace temper::stig
