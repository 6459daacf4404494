// The OVAL check written out for the Worker: for one rule of each OVAL test type the Ubuntu 20.04
// STIG profile uses (a dozen or more), the text names the test type, what the object looks at
// and what the state expects, as the model needs it to write what passes. Each rendering is
// printed, so the test output shows what a Worker reads.
#include "stig/scap/oval_criteria.h"

#include <cstdio>
#include <map>

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"
#include "stig/scap/content.h"

namespace temper::stig {
namespace {

using testing::Ubuntu2004Stig;

TEST_CASE("the OVAL criteria of a rule of each test type are written out for the Worker", "[stig][content]") {
  const Content& c = Ubuntu2004Stig();
  std::map<std::string, const RuleInfo*> by_type;  // the first rule of each test type
  size_t with_check = 0;
  for (const std::string& id : c.profile_rule_ids()) {
    const RuleInfo* r = *c.Rule(id);
    if (r->oval_definition_id.empty()) {
      CHECK(r->check_criteria.empty());
      continue;
    }
    ++with_check;
    INFO(id);
    CHECK_FALSE(r->check_criteria.empty());
    CHECK(r->check_criteria.size() <= kMaxCriteriaBytes + 100);
    CHECK(r->check_criteria.starts_with("- "));
    for (const std::string& t : r->oval_test_types) by_type.emplace(t, r);
  }
  CHECK(with_check > 150);
  std::printf("%zu OVAL test types in the profile\n", by_type.size());
  CHECK(by_type.size() >= 12);
  for (const auto& [type, rule] : by_type) {
    std::printf("\n=== %s (%s)\n%s", type.c_str(), rule->id.c_str(), rule->check_criteria.c_str());
    INFO(type << " in " << rule->id << ":\n" << rule->check_criteria);
    CHECK(rule->check_criteria.find(type + " test") != std::string::npos);
    CHECK(rule->check_criteria.find("looks at: ") != std::string::npos);
    CHECK(rule->check_criteria.find("existence: ") != std::string::npos);
  }

  // What a model needs to act on, for rules it sees often.
  auto criteria = [&](const char* id) { return (*c.Rule(id))->check_criteria; };
  const std::string tmout = criteria("accounts_tmout");
  INFO(tmout);
  CHECK(tmout.find("TMOUT") != std::string::npos);  // the line pattern
  CHECK(tmout.find("/etc/profile") != std::string::npos);
  CHECK(tmout.find("the rule's XCCDF value") != std::string::npos);  // the timeout bound is var_accounts_tmout
  const std::string aide = criteria("package_aide_installed");
  INFO(aide);
  CHECK(aide.find("dpkginfo test") != std::string::npos);
  CHECK(aide.find("name = aide") != std::string::npos);
  const std::string syncookies = criteria("sysctl_net_ipv4_tcp_syncookies");
  INFO(syncookies);
  CHECK(syncookies.find("net.ipv4.tcp_syncookies") != std::string::npos);
  CHECK(syncookies.find("ALL of") != std::string::npos);
}

TEST_CASE("the Worker's check text carries the criteria after the summary", "[stig][content]") {
  const RuleInfo* r = *Ubuntu2004Stig().Rule("sshd_disable_root_login");
  CHECK(r->check_criteria.find("PermitRootLogin") != std::string::npos);
  CHECK(r->check_criteria.find("sshd_config") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
