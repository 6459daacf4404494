// `temper watch`'s progress: the per-batch tally fed with the loop's events, and the board that
// prints it under the event lines (redrawn on a terminal, on change elsewhere).
#include "orchestrator/cli/watch_progress.h"

#include <catch2/catch.hpp>

namespace temper::cli {
namespace {

constexpr const char* kPrefix = "xccdf_org.ssgproject.content_rule_";

temper::v1::JournalEvent Ev(const std::string& type, const std::string& role, const std::string& rule = "",
                            const std::string& data = "{}", const std::string& batch = "3") {
  temper::v1::JournalEvent e;
  e.set_batch_id(batch);
  e.set_target("lab");
  e.set_rule_id(rule.empty() ? "" : kPrefix + rule);
  e.set_role(role);
  e.set_type(type);
  e.set_data_json(data);
  return e;
}

TEST_CASE("progress follows a batch's events from submission to completion") {
  BatchProgressModel m("3");
  m.Apply(Ev("batch.submitted", "daemon", "", R"({"rules":4,"whole_profile":false})"));
  CHECK(m.counts().total == 4);
  CHECK(m.counts().left() == 4);
  CHECK(m.Line() ==
        "batch 3  [----------] 0/4  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left 4  ▸ queued");

  m.Apply(Ev("batch.started", "daemon", "", R"({"target":"lab"})"));
  m.Apply(Ev("evaluation.before", "evaluator", "", R"({"rules":4,"verdicts":{"pass":1,"fail":2,"notapplicable":1}})"));
  CHECK(m.counts().already_passing == 1);
  CHECK(m.counts().skipped == 1);
  CHECK(m.counts().left() == 2);
  CHECK(m.Line() ==
        "batch 3  [#####-----] 2/4  fixed 0 · already 1 · failed 0 · escalated 0 · skipped 1 · left 2  ▸ (evaluator)");

  m.Apply(Ev("architect.pick", "architect", "sshd_disable_root_login", R"({"approach":"edit sshd_config"})"));
  m.Apply(Ev("attempt.started", "worker", "sshd_disable_root_login", R"({"number":1})"));
  CHECK(m.Line().ends_with("left 2  ▸ sshd_disable_root_login (worker)"));
  m.Apply(Ev("rule.fixed", "daemon", "sshd_disable_root_login", R"({"attempts":1,"tokens":900})"));
  CHECK(m.counts().fixed == 1);
  m.Apply(Ev("rule.escalated", "daemon", "accounts_tmout", R"({"detail":"attempt budget spent"})"));
  CHECK(m.counts().escalated == 1);
  CHECK(m.counts().left() == 0);
  CHECK_FALSE(m.ended());
  CHECK(m.Line() ==
        "batch 3  [##########] 4/4  fixed 1 · already 1 · failed 0 · escalated 1 · skipped 1 · left 0  "
        "▸ accounts_tmout (daemon)");

  m.Apply(Ev(
      "batch.completed", "daemon", "",
      R"({"rules":{"pending":0,"running":0,"fixed":1,"already_passing":1,"escalated":1,"skipped":1,"cancelled":0,"error":0}})"));
  CHECK(m.ended());
  CHECK(m.Line() ==
        "batch 3  [##########] 4/4  fixed 1 · already 1 · failed 0 · escalated 1 · skipped 1 · left 0  ✔ completed");
}

TEST_CASE("progress of a whole-profile batch is unknown until the profile is expanded") {
  BatchProgressModel m("3");
  m.Apply(Ev("batch.submitted", "daemon", "", R"({"rules":0,"whole_profile":true})"));
  CHECK_FALSE(m.counts().total_known);
  CHECK(m.Line().find("[----------] 0/? ") != std::string::npos);
  CHECK(m.Line().find("left ?") != std::string::npos);
  m.Apply(Ev("batch.expanded", "daemon", "", R"({"rules":120,"profile":"stig"})"));
  CHECK(m.counts().total == 120);
  m.Apply(
      Ev("evaluation.before", "evaluator", "",
         R"({"rules":118,"verdicts":{"pass":60,"fail":50,"error":2,"notchecked":6},"not_in_datastream":["a","b"]})"));
  ProgressCounts c = m.counts();
  CHECK(c.already_passing == 60);
  CHECK(c.failed == 4);  // two errors and two ids the datastream does not hold
  CHECK(c.skipped == 6);
  CHECK(c.left() == 50);
  m.Apply(Ev("architect.skip", "architect", "grub2_password", R"({"reason":"needs a boot loader"})"));
  CHECK(m.counts().skipped == 7);
  CHECK(m.Line().find("[#####-----] 71/120") != std::string::npos);
}

TEST_CASE("a seed from GetBatch and older events replayed after it count each rule once") {
  temper::v1::Batch batch;
  batch.set_id("3");
  batch.set_state(temper::v1::BATCH_STATE_RUNNING);
  auto add = [&](const std::string& name, temper::v1::RuleState state, const std::string& before) {
    temper::v1::BatchRule* r = batch.add_rules();
    r->set_rule_id(kPrefix + name);
    r->set_state(state);
    r->set_before_verdict(before);
  };
  add("sshd_disable_root_login", temper::v1::RULE_STATE_FIXED, "fail");
  add("sysctl_kernel_dmesg_restrict", temper::v1::RULE_STATE_ALREADY_PASSING, "pass");
  add("accounts_tmout", temper::v1::RULE_STATE_RUNNING, "fail");
  BatchProgressModel m("3");
  m.Seed(batch);
  CHECK(m.counts().fixed == 1);
  CHECK(m.counts().already_passing == 1);
  CHECK(m.counts().left() == 1);
  CHECK(m.Line().ends_with("▸ accounts_tmout"));

  // What `watch --after N` replays: events the seed already holds.
  m.Apply(Ev("evaluation.before", "evaluator", "", R"({"rules":3,"verdicts":{"pass":1,"fail":2}})"));
  m.Apply(Ev("rule.fixed", "daemon", "sshd_disable_root_login", R"({"attempts":1})"));
  CHECK(m.counts().fixed == 1);
  CHECK(m.counts().already_passing == 1);
  CHECK(m.counts().left() == 1);
  m.Apply(Ev("rule.escalated", "daemon", "accounts_tmout", "{}"));
  CHECK(m.counts().escalated == 1);
  CHECK(m.counts().left() == 0);
}

TEST_CASE("cancelled and failed batches say so, and other batches' events change nothing") {
  BatchProgressModel m("3");
  m.Apply(Ev("batch.submitted", "daemon", "", R"({"rules":3})"));
  m.Apply(Ev("rule.fixed", "daemon", "a", "{}", "4"));
  CHECK(m.counts().fixed == 0);
  m.Apply(Ev("batch.cancelled", "daemon", "", R"({"previous_state":"queued","rules_cancelled":3})"));
  CHECK(m.ended());
  CHECK(m.counts().cancelled == 3);
  CHECK(m.Line() ==
        "batch 3  [##########] 3/3  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · "
        "cancelled 3 · left 0  ✖ cancelled");

  BatchProgressModel f("5");
  f.Apply(Ev("batch.submitted", "daemon", "", R"({"rules":2})", "5"));
  f.Apply(Ev("batch.failed", "daemon", "", R"({"error":"Unavailable: target lab: no such directory"})", "5"));
  CHECK(f.ended());
  CHECK(f.Line().ends_with("left 2  ✖ failed: Unavailable: target lab: no such directory"));
  // Malformed data is not fatal: the event still moves the current rule and role.
  f.Apply(Ev("batch.resumed", "daemon", "", "not json", "5"));
  CHECK_FALSE(f.ended());
}

TEST_CASE("off a terminal, the board prints a batch's line only when its counts change") {
  ProgressBoard board(/*tty=*/false, 0);
  std::string out = board.Show(Ev("batch.submitted", "daemon", "", R"({"rules":2})"), "E1\n");
  CHECK(out ==
        "E1\nbatch 3  [----------] 0/2  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left 2  ▸ queued\n");
  CHECK(board.Show(Ev("batch.started", "daemon"), "E2\n").find("batch 3  [") != std::string::npos);  // queued → running
  CHECK(board.Show(Ev("architect.pick", "architect", "r1"), "E3\n") == "E3\n");
  CHECK(board.Show(Ev("attempt.started", "worker", "r1"), "E4\n") == "E4\n");
  CHECK(board.Show(Ev("rule.fixed", "daemon", "r1"), "E5\n") ==
        "E5\nbatch 3  [#####-----] 1/2  fixed 1 · already 0 · failed 0 · escalated 0 · skipped 0 · left 1  ▸ r1 "
        "(daemon)\n");
  // A daemon-wide event has no batch, so no progress.
  CHECK(board.Show(Ev("daemon.started", "daemon", "", "{}", ""), "E6\n") == "E6\n");
  CHECK(board.Finish().empty());
}

TEST_CASE("on a terminal, the board redraws its lines in place under the events") {
  ProgressBoard board(/*tty=*/true, 0);
  std::string first = board.Show(Ev("batch.submitted", "daemon", "", R"({"rules":2})"), "E1\n");
  CHECK(first ==
        "E1\nbatch 3  [----------] 0/2  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left 2  ▸ queued");
  // The next event erases the progress line (carriage return, erase line), prints, and redraws.
  std::string second = board.Show(Ev("batch.submitted", "daemon", "", R"({"rules":1})", "4"), "E2\n");
  CHECK(second.rfind("\r\033[2KE2\nbatch 3  [", 0) == 0);
  CHECK(second.find("\nbatch 4  [----------] 0/1") != std::string::npos);
  // Two progress lines on screen: erase both (up one line) before the next event.
  std::string third = board.Show(Ev("rule.fixed", "daemon", "r1"), "E3\n");
  CHECK(third.rfind("\r\033[2K\033[1A\033[2KE3\n", 0) == 0);
  // A batch that ends leaves its final line in the scrollback and the live area.
  std::string fourth = board.Show(Ev("batch.cancelled", "daemon", "", "{}", "4"), "E4\n");
  CHECK(fourth.find("E4\nbatch 4  [##########] 1/1") != std::string::npos);
  CHECK(fourth.find("✖ cancelled\nbatch 3  [#####-----] 1/2") != std::string::npos);
  CHECK(fourth.back() != '\n');
  CHECK(board.Clear() == "\r\033[2K");
  CHECK(board.Clear().empty());
  CHECK(board.Show(Ev("batch.started", "daemon"), "E5\n").rfind("E5\n", 0) == 0);
  CHECK(board.Finish() == "\n");
}

TEST_CASE("on a narrow terminal the progress line is cut to fit, characters not bytes") {
  ProgressBoard board(/*tty=*/true, 30);
  std::string out = board.Show(Ev("batch.submitted", "daemon", "", R"({"rules":2})"), "E\n");
  CHECK(out == "E\nbatch 3  [----------] 0/2  fi");
  board.set_width(49);
  out = board.Show(Ev("batch.started", "daemon"), "E\n");
  CHECK(out.ends_with("\nbatch 3  [----------] 0/2  fixed 0 · already 0 ·"));
}

TEST_CASE("the board asks for a seed only for a batch first met mid-way") {
  ProgressBoard board(/*tty=*/false, 0);
  CHECK_FALSE(board.WantsSeed(Ev("batch.submitted", "daemon", "", R"({"rules":1})", "9")));
  CHECK(board.WantsSeed(Ev("rule.fixed", "daemon", "r", "{}", "9")));
  CHECK_FALSE(board.WantsSeed(Ev("daemon.started", "daemon", "", "{}", "")));
  temper::v1::Batch batch;
  batch.set_id("9");
  batch.set_state(temper::v1::BATCH_STATE_RUNNING);
  batch.add_rules()->set_rule_id("r");
  board.Seed(batch);
  CHECK_FALSE(board.WantsSeed(Ev("rule.fixed", "daemon", "r", "{}", "9")));
  CHECK(board.Refresh() ==
        "batch 9  [----------] 0/1  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left 1  ▸ running\n");
  CHECK(board.Refresh().empty());
}

TEST_CASE("progress counts waived, manual, held and reboot-pending rules, and the reboot verification after") {
  BatchProgressModel m("3");
  m.Apply(Ev("batch.submitted", "daemon", "", R"({"rules":5,"whole_profile":false})"));
  m.Apply(Ev("batch.started", "daemon"));
  // The states the evaluation decided; a waived rule that passed is not "already passing".
  m.Apply(Ev(
      "evaluation.before", "evaluator", "",
      R"({"rules":5,"verdicts":{"pass":1,"fail":3,"notchecked":1},"states":{"pending":2,"waived":1,"manual":1,"held":1}})"));
  m.Apply(Ev("rule.waived", "daemon", "accounts_tmout", R"({"owner":"alice"})"));
  m.Apply(Ev("rule.manual", "daemon", "installed_os_is_vendor_supported"));
  m.Apply(Ev("rule.held", "daemon", "kernel_module_usb-storage_disabled"));
  CHECK(m.counts().already_passing == 0);
  CHECK(m.counts().skipped == 0);
  CHECK(m.counts().left() == 2);
  m.Apply(Ev("rule.fixed", "daemon", "banner_etc_issue_net", R"({"attempts":1})"));
  m.Apply(Ev("rule.reboot_pending", "daemon", "kernel_module_cramfs_disabled", R"({"attempts":1})"));
  CHECK(m.Line() ==
        "batch 3  [##########] 5/5  fixed 1 · already 0 · failed 0 · escalated 0 · skipped 0 · reboot "
        "pending 1 · waived 1 · held 1 · manual 1 · left 0  ▸ kernel_module_cramfs_disabled (daemon)");
  m.Apply(Ev("batch.completed", "daemon", "",
             R"({"rules":{"fixed":1,"waived":1,"manual":1,"held":1,"reboot_pending":1}})"));
  CHECK(m.counts().reboot_pending == 1);
  CHECK(m.counts().total == 5);
  // `temper rebooted`: the staged rule is verified after the batch completed.
  m.Apply(Ev("reboot.confirmed", "daemon", "", R"({"rules":["x"]})"));
  m.Apply(Ev("rule.fixed", "evaluator", "kernel_module_cramfs_disabled", R"({"after_reboot":true,"verdict":"pass"})"));
  CHECK(m.counts().reboot_pending == 0);
  CHECK(m.counts().fixed == 2);
  CHECK(m.ended());
}

}  // namespace
}  // namespace temper::cli
