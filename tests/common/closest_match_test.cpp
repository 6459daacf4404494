#include "common/closest_match.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("edit distance counts inserts, deletes and substitutions") {
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("state_dir", "stat_dir") == 1);
  CHECK(EditDistance("abc", "") == 3);
}

TEST_CASE("close matches suggest typos and substrings, nearest first") {
  std::vector<std::string> keys = {"state_dir", "database", "content_dir", "listen"};
  CHECK(ClosestMatches("stat_dir", keys) == std::vector<std::string>{"state_dir"});
  CHECK(ClosestMatches("zzzzzz", keys).empty());
  std::vector<std::string> rules = {"xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
                                    "xccdf_org.ssgproject.content_rule_sshd_set_idle_timeout"};
  CHECK(ClosestMatches("disable_root_login", rules) ==
        std::vector<std::string>{"xccdf_org.ssgproject.content_rule_sshd_disable_root_login"});
  CHECK(DidYouMean("databse", keys) == " (did you mean 'database'?)");
  CHECK(DidYouMean("qqqqqqqq", keys).empty());
}

}  // namespace
}  // namespace temper
