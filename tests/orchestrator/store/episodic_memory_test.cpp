#include "orchestrator/store/episodic_memory.h"

#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::TempDir;

constexpr const char* kGroup = "xccdf_org.ssgproject.content_group_ssh_server";

stig::RuleInfo SshRule(const std::string& name) {
  stig::RuleInfo r;
  r.id = "xccdf_org.ssgproject.content_rule_" + name;
  r.group_id = kGroup;
  r.title = "t";
  r.fix_bash = "echo fix";
  r.stig_ids = {"UBTU-20-010047"};
  r.ccis = {"CCI-000366"};
  return r;
}

int64_t SubmitSshBatch(StateStore& store) {
  NewBatch b;
  b.target = "lab";
  b.datastream = "/ds.xml";
  b.profile = "stig";
  b.rule_ids = {SshRule("sshd_disable_root_login").id};
  return store.SubmitBatch(b)->batch.id;
}

TEST_CASE("recall brings the rule's own lessons first, then its group's most useful, and earlier batches' attempts") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  stig::RuleInfo rule = SshRule("sshd_disable_root_login");
  int64_t earlier = SubmitSshBatch(*store);
  int64_t current = SubmitSshBatch(*store);

  auto lesson = [&](const std::string& rule_id, const std::string& group, const std::string& text, double utility) {
    return *store->AddLesson(
        {.rule_id = rule_id, .group_id = group, .batch_id = earlier, .text = text, .utility = utility});
  };
  int64_t own = lesson(rule.id, kGroup, "use a drop-in in sshd_config.d", 0.5);
  lesson(SshRule("sshd_set_idle_timeout").id, kGroup, "neighbour: low", 0.1);
  int64_t useful = lesson(SshRule("sshd_set_keepalive").id, kGroup, "neighbour: useful", 0.9);
  lesson("xccdf_org.ssgproject.content_rule_package_aide_installed", "xccdf_org.ssgproject.content_group_aide",
         "unrelated", 1.0);

  AttemptRecord a{.batch_id = earlier,
                  .rule_id = rule.id,
                  .number = 1,
                  .approach = "sed the main file",
                  .commands = {"sed -i s/yes/no/ /etc/ssh/sshd_config"},
                  .verdict = "fail",
                  .outcome = AttemptOutcome::kReverted,
                  .evidence = "PermitRootLogin yes",
                  .reflection = "Tried: sed"};
  REQUIRE(store->RecordAttempt(a).ok());
  a.batch_id = current;  // this batch's attempts are the loop's own business
  REQUIRE(store->RecordAttempt(a).ok());

  EpisodicMemory memory(*store);
  auto recalled = memory.Recall(rule, current);
  REQUIRE(recalled.ok());
  REQUIRE(recalled->lessons.size() == 3);
  CHECK(recalled->lessons[0].text == "use a drop-in in sshd_config.d");
  CHECK(recalled->lessons[0].same_rule);
  CHECK(recalled->lessons[1].text == "neighbour: useful");
  CHECK_FALSE(recalled->lessons[1].same_rule);
  CHECK(recalled->lessons[2].text == "neighbour: low");
  CHECK(recalled->lesson_ids[0] == own);
  CHECK(recalled->lesson_ids[1] == useful);
  REQUIRE(recalled->earlier_attempts.size() == 1);
  CHECK(recalled->earlier_attempts[0].verdict == "reverted (fail)");
  CHECK(recalled->earlier_attempts[0].actions == "sed -i s/yes/no/ /etc/ssh/sshd_config");
  CHECK(recalled->earlier_attempts[0].lesson == "Tried: sed");

  // Outcomes move utility, within [0, 1], and so the order of recall.
  REQUIRE(store->AdjustLessonUtility(useful, -1.0).ok());
  recalled = memory.Recall(rule, current);
  CHECK(recalled->lessons[1].text == "neighbour: low");
  CHECK(recalled->lessons[2].utility == 0.0);
}

TEST_CASE("a rule becomes what the roles read: fix text and every reference") {
  stig::RuleInfo r = SshRule("sshd_disable_root_login");
  r.srgs = {"SRG-OS-000480-GPOS-00227"};
  r.check_summary = "sshd_config PermitRootLogin";
  RuleInfo role = ToRoleRule(r);
  CHECK(role.id == r.id);
  CHECK(role.fix_text == "echo fix");
  CHECK(role.check_text == "sshd_config PermitRootLogin");
  CHECK(role.references == std::vector<std::string>{"UBTU-20-010047", "CCI-000366", "SRG-OS-000480-GPOS-00227"});
}

}  // namespace
}  // namespace temper
