// `temper watch`'s event lines for people: the loop's event types as short sentences, anything else
// generic.
#include "orchestrator/cli/event_render.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/util/time_util.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/cli/watch_progress.h"
#include "orchestrator/proto_convert.h"

namespace temper::cli {
namespace {

temper::v1::JournalEvent Ev(const std::string& type, const std::string& role, const std::string& rule,
                            const std::string& data) {
  temper::v1::JournalEvent e;
  e.set_seq(42);
  *e.mutable_time() = google::protobuf::util::TimeUtil::SecondsToTimestamp(1'800'000'000);
  e.set_batch_id("3");
  e.set_target("lab");
  e.set_rule_id(rule.empty() ? "" : "xccdf_org.ssgproject.content_rule_" + rule);
  e.set_role(role);
  e.set_type(type);
  e.set_data_json(data);
  return e;
}

TEST_CASE("an event line has seq, time, batch, role, a short sentence and the tokens") {
  temper::v1::JournalEvent e =
      Ev("rule.fixed", "daemon", "sysctl_kernel_dmesg_restrict",
         R"({"attempts":2,"tokens":1234,"commands":["$ sysctl -w kernel.dmesg_restrict=1 → exit 0"]})");
  CHECK(RenderEvent(e) ==
        "    42  2027-01-15 08:00:00Z  batch 3  [daemon]  rule.fixed sysctl_kernel_dmesg_restrict after 2 attempts "
        "(1234 tokens)\n");
  temper::v1::JournalEvent call =
      Ev("worker.model_call", "worker", "accounts_tmout", R"({"attempt":1,"latency_ms":2350})");
  call.mutable_usage()->set_prompt_tokens(900);
  call.mutable_usage()->set_completion_tokens(40);
  CHECK(RenderEvent(call) ==
        "    42  2027-01-15 08:00:00Z  batch 3  [worker]  worker.model_call accounts_tmout #1 (2.4 s)  (900 + 40 "
        "tokens)\n");
}

TEST_CASE("the loop's event types read as sentences") {
  CHECK(
      DescribeEvent(Ev("batch.submitted", "daemon", "",
                       R"({"rules":2,"whole_profile":false,"profile":"xccdf_org.ssgproject.content_profile_stig"})")) ==
      "batch.submitted: 2 rules on target lab (profile stig)");
  CHECK(DescribeEvent(Ev("batch.submitted", "daemon", "", R"({"rules":0,"whole_profile":true,"profile":"stig"})")) ==
        "batch.submitted: every rule of the profile on target lab (profile stig)");
  CHECK(DescribeEvent(Ev("batch.expanded", "daemon", "",
                         R"({"rules":152,"profile":"xccdf_org.ssgproject.content_profile_stig"})")) ==
        "batch.expanded to 152 rules of profile stig");
  CHECK(DescribeEvent(Ev("batch.resumed", "daemon", "",
                         R"({"interrupted_rules":["xccdf_org.ssgproject.content_rule_accounts_tmout"]})")) ==
        "batch.resumed on target lab, interrupted work reverted on accounts_tmout");
  CHECK(DescribeEvent(Ev("evaluation.before", "evaluator", "", R"({"rules":5,"verdicts":{"fail":3,"pass":2}})")) ==
        "evaluation.before of 5 rules: 3 fail, 2 pass");
  CHECK(DescribeEvent(Ev("batch.completed", "daemon", "", R"({"rules":{"pending":0,"fixed":2,"escalated":1}})")) ==
        "batch.completed: 2 fixed, 1 escalated");
  CHECK(DescribeEvent(
            Ev("fixpoint.pass", "evaluator", "",
               R"({"pass":1,"max_passes":3,"verdicts":{"pass":3,"fail":1},"requeued":["r"],"escalated":[]})")) ==
        "fixpoint.pass 1 of at most 3: 3 pass, 1 fail; 1 rule re-queued");
  CHECK(DescribeEvent(Ev("batch.plan_reverted", "daemon", "", R"({"start_snapshot":4})")) ==
        "batch.plan_reverted: plan only, target back at snapshot 4");
  CHECK(DescribeEvent(Ev("rule.reverted", "daemon", "accounts_tmout", R"({"verdict":"fail"})")) ==
        "rule.reverted accounts_tmout: now fail");
  CHECK(DescribeEvent(Ev("batch.cancelled", "daemon", "",
                         R"({"previous_state":"queued","reason":"demo","rules_cancelled":1})")) ==
        "batch.cancelled (was queued, 1 rule cancelled): demo");
  CHECK(DescribeEvent(Ev("architect.skip", "architect", "grub2_password", R"({"reason":"needs the boot loader"})")) ==
        "architect.skip grub2_password: needs the boot loader");
  CHECK(DescribeEvent(Ev("architect.reengage", "architect", "accounts_tmout",
                         R"({"verdict":"PIVOT","reasoning":"profile.d is not read","plan":"use /etc/bash.bashrc"})")) ==
        "architect.reengage accounts_tmout PIVOT: profile.d is not read");
  CHECK(DescribeEvent(Ev("rule.escalated", "daemon", "accounts_tmout",
                         R"({"detail":"attempt budget spent: 3 attempts failed"})")) ==
        "rule.escalated accounts_tmout: attempt budget spent: 3 attempts failed");
  CHECK(DescribeEvent(Ev("attempt.started", "worker", "accounts_tmout",
                         R"({"number":2,"approach":"set TMOUT\nin profile.d"})")) ==
        "attempt.started accounts_tmout #2: set TMOUT in profile.d");
  CHECK(
      DescribeEvent(Ev(
          "worker.tool_call", "worker", "accounts_tmout",
          R"({"attempt":2,"tool":"run_command","arguments":{"command":"grep TMOUT /etc/profile"},"detail":"exit status 1\n"})")) ==
      "worker.tool_call accounts_tmout #2 run_command: grep TMOUT /etc/profile → exit status 1");
  CHECK(
      DescribeEvent(Ev(
          "worker.tool_call", "worker", "accounts_tmout",
          R"({"attempt":2,"tool":"write_file","arguments":{"path":"/etc/profile.d/tmout.sh","content":"TMOUT=600\n"},"detail":"wrote 10 bytes"})")) ==
      "worker.tool_call accounts_tmout #2 write_file: /etc/profile.d/tmout.sh (10 bytes) → wrote 10 bytes");
  CHECK(
      DescribeEvent(Ev(
          "worker.refused", "worker", "accounts_tmout",
          R"({"attempt":2,"tool":"run_command","arguments":{"command":"reboot"},"detail":"refused by policy: reboot"})")) ==
      "worker.refused accounts_tmout #2 run_command: reboot — refused by policy: reboot");
  CHECK(DescribeEvent(Ev("attempt.reverted", "evaluator", "accounts_tmout",
                         R"({"number":2,"verdict":"fail","outcome":"regression","summary":"1 regression"})")) ==
        "attempt.reverted accounts_tmout #2: regression, rule fail: 1 regression");
  CHECK(DescribeEvent(
            Ev("attempt.kept", "evaluator", "accounts_tmout", R"({"number":3,"verdict":"pass","outcome":"kept"})")) ==
        "attempt.kept accounts_tmout #3: kept, rule pass");
  CHECK(DescribeEvent(Ev("attempt.kept", "evaluator", "accounts_tmout",
                         R"j({"number":3,"verdict":"pass","outcome":"kept","changes":"1 file (1 added)"})j")) ==
        "attempt.kept accounts_tmout #3: kept, rule pass [changed: 1 file (1 added)]");
  CHECK(DescribeEvent(Ev("reflector.lesson", "reflector", "accounts_tmout",
                         R"({"number":2,"lesson":"bash reads /etc/profile.d only for login shells"})")) ==
        "reflector.lesson accounts_tmout #2: bash reads /etc/profile.d only for login shells");
  CHECK(DescribeEvent(Ev("prompt.trimmed", "architect", "",
                         R"({"sections":[{"name":"memory","tokens":1200,"kept_tokens":300}]})")) ==
        "prompt.trimmed: memory 1200→300 tokens");
}

TEST_CASE("long text is cut to one line, and unknown or malformed events stay generic") {
  std::string approach(400, 'x');
  std::string line = DescribeEvent(Ev("architect.pick", "architect", "r", R"({"approach":")" + approach + R"("})"));
  CHECK(line.rfind("architect.pick r: xxx", 0) == 0);
  CHECK(line.ends_with("x…"));
  CHECK(line.size() == std::string("architect.pick r: ").size() + 159 + std::string("…").size());

  CHECK(DescribeEvent(Ev("custom.thing", "daemon", "r", R"({"a":1})")) ==
        "custom.thing xccdf_org.ssgproject.content_rule_r  {\"a\":1}");
  CHECK(DescribeEvent(Ev("rule.fixed", "daemon", "r", "not json")) ==
        "rule.fixed xccdf_org.ssgproject.content_rule_r  not json");
  // Fields of the wrong type read as missing rather than throwing.
  CHECK(DescribeEvent(Ev("rule.fixed", "daemon", "r", R"({"attempts":"two","tokens":-1})")) ==
        "rule.fixed r (0 tokens)");
}

TEST_CASE("the rule policy's and the reboot verification's events read as sentences") {
  CHECK(DescribeEvent(
            Ev("rule.waived", "daemon", "accounts_tmout",
               R"({"owner":"alice","reason":"kiosk sessions","expires":"2027-01-31","before_verdict":"fail"})")) ==
        "rule.waived accounts_tmout by alice until 2027-01-31: kiosk sessions");
  CHECK(
      DescribeEvent(Ev("waiver.expired", "daemon", "banner_etc_issue_net",
                       R"({"detail":"the waiver by bob expired on 2020-01-01: the rule is remediated as usual"})")) ==
      "waiver.expired banner_etc_issue_net: the waiver by bob expired on 2020-01-01: the rule is remediated as usual");
  CHECK(DescribeEvent(Ev("rule.manual", "daemon", "installed_os_is_vendor_supported", "{}")) ==
        "rule.manual installed_os_is_vendor_supported: no automated check; a person must review it");
  CHECK(DescribeEvent(Ev("rule.held", "daemon", "package_telnet_removed", R"({"detail":"held, not changed"})")) ==
        "rule.held package_telnet_removed: held, not changed");
  CHECK(DescribeEvent(Ev("rule.reboot_pending", "daemon", "kernel_module_cramfs_disabled", R"({"attempts":1})")) ==
        "rule.reboot_pending kernel_module_cramfs_disabled after 1 attempt: staged until the host reboots (temper "
        "rebooted)");
  CHECK(DescribeEvent(Ev("reboot.confirmed", "daemon", "", R"({"rules":["a","b"],"note":"CHG-7"})")) ==
        "reboot.confirmed: 2 rules to verify: CHG-7");
  CHECK(DescribeEvent(Ev("rule.fixed", "evaluator", "kernel_module_cramfs_disabled",
                         R"({"after_reboot":true,"verdict":"pass"})")) ==
        "rule.fixed kernel_module_cramfs_disabled after the reboot (OpenSCAP: pass)");
  CHECK(DescribeEvent(Ev("reboot.verified", "evaluator", "", R"({"fixed":1,"escalated":0})")) ==
        "reboot.verified: 1 fixed, 0 escalated");
  CHECK(DescribeEvent(Ev("reboot.verification_failed", "evaluator", "", R"({"error":"target lab: cannot mount"})")) ==
        "reboot.verification_failed: target lab: cannot mount");
}

// A journal file's line (JournalFiles::ToJsonLine) as the daemon sends it to `temper watch`.
temper::v1::JournalEvent FromJournalLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line);
  EventRecord e;
  e.seq = j["seq"].get<uint64_t>();
  e.time = j["time_ms"].get<int64_t>();
  if (j["batch_id"].is_string()) e.batch_id = std::stoll(j["batch_id"].get<std::string>());
  e.target = j["target"];
  e.rule_id = j["rule_id"];
  e.role = j["role"];
  e.type = j["type"];
  // The file holds data that is not JSON as a string, and JSON data as it is.
  e.data_json = j["data"].is_string() ? j["data"].get<std::string>() : j["data"].dump();
  e.usage = {j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"], j["usage"]["cached_prompt_tokens"]};
  temper::v1::JournalEvent out;
  ToProto(e, &out);
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `watch` prints each event's line and the progress after it, as `temper watch` does.
std::string Watch(const std::vector<temper::v1::JournalEvent>& events, bool tty) {
  ProgressBoard board(tty, tty ? 100 : 0);
  std::string out;
  for (const temper::v1::JournalEvent& e : events) out += board.Show(e, RenderEvent(e));
  return out + board.Finish();
}

// The first line where `actual` and `expected` differ, for the failure message.
std::string FirstDifference(const std::string& actual, const std::string& expected) {
  std::istringstream a(actual), e(expected);
  std::string la, le;
  for (int n = 1;; ++n) {
    bool more_a = static_cast<bool>(std::getline(a, la)), more_e = static_cast<bool>(std::getline(e, le));
    if (!more_a && !more_e) return "none";
    if (la != le || more_a != more_e)
      return "line " + std::to_string(n) + ":\n  now:      " + la + "\n  recorded: " + le;
  }
}

// Journals already written must read the same in every later temper: every event type the loop
// writes (recorded from the end-to-end suites, tests/data/journal/README.md), rendered and fed to the
// progress board, compared with the output recorded before the event vocabulary became a table.
TEST_CASE("a recorded journal of every event type renders as it was recorded to") {
  std::vector<temper::v1::JournalEvent> events;
  std::istringstream lines(ReadText(std::string(TEMPER_TEST_DATA_DIR) + "/journal/every_event_type.jsonl"));
  for (std::string line; std::getline(lines, line);) events.push_back(FromJournalLine(line));
  REQUIRE(events.size() > 40);
  for (bool tty : {false, true}) {
    const std::string name = tty ? "every_event_type.watch-tty" : "every_event_type.watch";
    const std::string expected = ReadText(std::string(TEMPER_TEST_DATA_DIR) + "/journal/" + name);
    const std::string actual = Watch(events, tty);
    if (actual != expected) {
      const std::string written = std::string(TEMPER_BINARY_DIR) + "/" + name;
      std::ofstream(written, std::ios::binary) << actual;
      FAIL(name << " differs from what was recorded (now in " << written << "); first difference at "
                << FirstDifference(actual, expected));
    }
  }
}

}  // namespace
}  // namespace temper::cli
