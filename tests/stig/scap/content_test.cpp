#include "stig/scap/content.h"

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::Ubuntu2004Stig;

const std::string kData = std::string(TEMPER_TEST_DATA_DIR) + "/stig";

TEST_CASE("Content loads the Ubuntu 20.04 STIG profile with its rules", "[stig][content]") {
  const Content& c = Ubuntu2004Stig();
  CHECK(c.profile().id == kStigProfile);
  // SSG 0.1.65 (Debian 12's ssg-debderived): 191 rules selected out of 592.
  CHECK(c.profile_rule_ids().size() == 191);
  CHECK(c.rules().size() == 592);
  CHECK(c.profiles().size() >= 2);
  // The benchmark's id and <version>: what a library entry's content id is made of.
  CHECK(c.benchmark_id() == "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04");
  CHECK(c.benchmark_version() == "0.1.65");

  auto rule = c.Rule("sshd_disable_root_login");
  REQUIRE(rule.ok());
  const RuleInfo& r = **rule;
  CHECK(r.id == "xccdf_org.ssgproject.content_rule_sshd_disable_root_login");
  CHECK(r.title == "Disable SSH Root Login");
  CHECK(r.severity == "medium");
  CHECK(r.group_id == "xccdf_org.ssgproject.content_group_ssh_server");
  CHECK(c.Rule("sshd_set_idle_timeout").value()->group_id == r.group_id);
  CHECK(c.Rule("package_aide_installed").value()->group_id != r.group_id);
  CHECK(r.description.find("PermitRootLogin no") != std::string::npos);
  CHECK(r.description.find("<") == std::string::npos);  // markup reduced to text
  CHECK(r.rationale.find("accountability") != std::string::npos);
  CHECK(r.oval_definition_id == "oval:ssg-sshd_disable_root_login:def:1");
  CHECK(r.check_summary.find("textfilecontent54") != std::string::npos);
  CHECK(r.fix_bash.find("PermitRootLogin no") != std::string::npos);
  CHECK(r.ccis == std::vector<std::string>{"CCI-000366", "CCI-000770"});
  CHECK(r.srgs.size() == 3);
  CHECK(r.classification.decidability == Decidability::kRootfs);
}

TEST_CASE("Content carries STIG ids and profile-resolved fix values", "[stig][content]") {
  const Content& c = Ubuntu2004Stig();
  // accounts_maximum_age_login_defs: UBTU-20-010008, its fix uses <sub idref="var_accounts_maximum_age_login_defs"/>,
  // which the STIG profile sets to 60.
  auto rule = c.Rule("xccdf_org.ssgproject.content_rule_accounts_maximum_age_login_defs");
  REQUIRE(rule.ok());
  const RuleInfo& r = **rule;
  CHECK(r.stig_ids == std::vector<std::string>{"UBTU-20-010008"});
  CHECK(r.fix_bash.find("var_accounts_maximum_age_login_defs='60'") != std::string::npos);
  CHECK(r.fix_bash.find("<sub") == std::string::npos);
}

TEST_CASE("Content classifies every profile rule", "[stig][content][classification]") {
  const Content& c = Ubuntu2004Stig();
  int rootfs = 0, live = 0, manual = 0;
  for (const auto& id : c.profile_rule_ids()) {
    switch (c.rules().at(id).classification.decidability) {
      case Decidability::kRootfs:
        ++rootfs;
        break;
      case Decidability::kLiveHost:
        ++live;
        break;
      case Decidability::kManual:
        ++manual;
        break;
    }
  }
  CHECK(rootfs + live + manual == 191);
  CHECK(manual == 9);  // the rules with no OVAL check (notchecked on every target)
  CHECK(rootfs > 150);
  auto svc = c.Rule("service_auditd_enabled");
  REQUIRE(svc.ok());
  CHECK((*svc)->classification.decidability == Decidability::kLiveHost);
}

TEST_CASE("Unknown rule and profile ids are named with close matches", "[stig][content]") {
  const Content& c = Ubuntu2004Stig();
  auto r = c.Rule("sshd_disable_root_logins");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message().find("\"sshd_disable_root_logins\"") != std::string::npos);
  CHECK(r.status().message().find("did you mean 'sshd_disable_root_login'") != std::string::npos);

  auto p = Content::Load(kUbuntu2004Datastream, "stgi");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kNotFound);
  CHECK(p.status().message().find("profile \"stgi\"") != std::string::npos);
  CHECK(p.status().message().find("xccdf_org.ssgproject.content_profile_stig") != std::string::npos);
}

TEST_CASE("Unknown datastreams are named with close file names", "[stig][content]") {
  auto r = Content::Load("ssg-ubuntu2040-ds.xml", "stig");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message().find("ssg-ubuntu2040-ds.xml") != std::string::npos);
  CHECK(r.status().message().find("did you mean 'ssg-ubuntu2004-ds.xml'") != std::string::npos);
}

TEST_CASE("Malformed datastreams are DataLoss naming the file", "[stig][content]") {
  for (const char* name : {"not-xml.xml", "truncated-ds.xml", "xccdf-only.xml"}) {
    INFO(name);
    std::string path = kData + "/" + name;
    auto r = Content::Load(path, "stig");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message().find(path) != std::string::npos);
  }
  auto x = Content::Load(kData + "/xccdf-only.xml", "stig");
  CHECK(x.status().message().find("not a SCAP source datastream") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
