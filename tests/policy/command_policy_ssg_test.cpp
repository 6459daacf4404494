// The command policy over every bash fix SCAP Security Guide ships for the Ubuntu 20.04 STIG
// profile: the Worker writes such a script with write_file and runs it, and the policy judges the
// script's text when it runs. A policy that refuses SSG's own fixes blocks the baseline the loop is
// measured against, so every fix must pass except the few that are refused by design (2 of 170).
// (Before shell_split read bash's process substitutions, 69 of the 170 were refused: 68 could
// not be parsed. Before the policy judged files copied where they run later, 1.)
//
// This test joins policy/ and stig/ (the content). The two libraries never depend on each other,
// so it has an executable of its own (temper_policy_ssg_tests): temper_policy_tests stays free of
// libopenscap, and this suite does not need the stig suite's rootfs fixture. It reads the content
// Debian 12's ssg-debderived installs (deploy/setup.sh), as the stig suite does.
#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "policy/command_policy.h"
#include "stig/scap/content.h"

namespace temper {
namespace {

// The fixes are judged as the Worker's command would be, without a target: every file the policy
// would read (a script a fix runs, a file it copies into cron) is missing, as on a host where the
// fix's package is not installed yet.
Result<std::string> NoFiles(const std::string& path, size_t) { return Status::NotFound(path + " does not exist"); }

// Rule (SSG short name) → a phrase of the refusal it must get. Each one is dangerous to run
// unattended on a host reached over the network.
const std::map<std::string, std::string>& RefusedByDesign() {
  static const std::map<std::string, std::string> kRefused = {
      // `nmcli radio all off` turns off every radio; on a host managed over Wi-Fi that is the
      // operator's only link.
      {"wireless_disable_interfaces", "disconnects the host"},
      // The fix installs aide, then copies the package's cron script into /etc/cron.weekly in the
      // same script. Files in cron directories run later as root, so the policy judges the copied
      // file by its content, and it cannot read a file that does not exist yet. In the loop the
      // Worker installs aide first (install_package), and the copy is judged by what aide ships.
      {"aide_periodic_cron_checking", "the policy cannot read it to judge"},
  };
  return kRefused;
}

TEST_CASE("the policy accepts every SSG bash fix of the Ubuntu 20.04 STIG profile but the dangerous ones") {
  auto content = stig::Content::Load(stig::kUbuntu2004Datastream, "stig");
  REQUIRE(content.ok());
  size_t fixes = 0;
  std::map<std::string, std::string> refused;  // short name → refusal
  for (const std::string& id : content->profile_rule_ids()) {
    const stig::RuleInfo& rule = **content->Rule(id);
    if (rule.fix_bash.empty()) continue;
    ++fixes;
    // SSG's package removals run only in batches that allow disruptive changes; the test below
    // checks what the policy does without that opt-in.
    const PolicyContext context{.bootloader_rule = IsBootloaderRule(rule.id, rule.title),
                                .allow_package_removal = true};
    Status s = CheckCommand(rule.fix_bash, context, NoFiles);
    if (!s.ok()) refused[id.substr(stig::kRulePrefix.size())] = s.message();
  }
  WARN(refused.size() << " of " << fixes << " SSG fix scripts refused by the command policy");
  // SSG 0.1.65 (Debian 12's ssg-debderived): 170 of the profile's 191 rules have a bash fix.
  CHECK(fixes == 170);
  for (const auto& [rule, message] : refused) {
    INFO(rule << ": " << message);
    auto expected = RefusedByDesign().find(rule);
    CHECK(expected != RefusedByDesign().end());
    if (expected != RefusedByDesign().end()) CHECK_THAT(message, Catch::Contains(expected->second));
  }
  for (const auto& [rule, why] : RefusedByDesign()) {
    INFO(rule << " must be refused (" << why << ")");
    CHECK(refused.count(rule) == 1);
  }
}

TEST_CASE("without the opt-in exactly the profile's package removal fixes are refused") {
  auto content = stig::Content::Load(stig::kUbuntu2004Datastream, "stig");
  REQUIRE(content.ok());
  std::set<std::string> refused, removal_rules;
  for (const std::string& id : content->profile_rule_ids()) {
    const stig::RuleInfo& rule = **content->Rule(id);
    if (rule.fix_bash.empty()) continue;
    std::string name = id.substr(stig::kRulePrefix.size());
    if (name.starts_with("package_") && name.ends_with("_removed")) removal_rules.insert(name);
    Status s =
        CheckCommand(rule.fix_bash, PolicyContext{.bootloader_rule = IsBootloaderRule(rule.id, rule.title)}, NoFiles);
    if (!s.ok() && s.message().find("is a disruptive change") != std::string::npos) refused.insert(name);
  }
  CHECK(refused == removal_rules);
  CHECK(removal_rules.count("package_telnetd_removed") == 1);
}

}  // namespace
}  // namespace temper
