// temper report's renderers on hand-built reports: a finished batch with a fixed rule (two attempts,
// the second kept), an escalated rule, an already passing rule, a skipped rule; and a queued batch.
#include "orchestrator/cli/report_render.h"

#include <fmt/format.h>
#include <google/protobuf/util/time_util.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper::cli {
namespace {

using google::protobuf::util::TimeUtil;

constexpr const char* kPrefix = "xccdf_org.ssgproject.content_rule_";

void AddRule(temper::v1::BatchReport& r, const std::string& name, temper::v1::RuleState state,
             const std::string& before, const std::string& after, uint32_t attempts, uint64_t tokens,
             const std::string& detail) {
  temper::v1::BatchRule* rule = r.mutable_batch()->add_rules();
  rule->set_rule_id(kPrefix + name);
  rule->set_state(state);
  rule->set_before_verdict(before);
  rule->set_after_verdict(after);
  rule->set_attempts(attempts);
  rule->set_tokens_used(tokens);
  rule->set_detail(detail);
}

temper::v1::Attempt* AddAttempt(temper::v1::BatchReport& r, const std::string& name, uint32_t number,
                                const std::string& outcome, const std::string& verdict,
                                std::vector<std::string> commands) {
  temper::v1::Attempt* a = r.add_attempts();
  a->set_batch_id("7");
  a->set_rule_id(kPrefix + name);
  a->set_number(number);
  a->set_approach(fmt::format("approach {} for {}", number, name));
  for (const std::string& c : commands) a->add_commands(c);
  a->set_verdict(verdict);
  a->set_outcome(outcome);
  a->set_evidence("Evaluator: rule " + verdict);
  a->mutable_usage()->set_prompt_tokens(1000);
  a->mutable_usage()->set_completion_tokens(200);
  *a->mutable_started_at() = TimeUtil::SecondsToTimestamp(1'800'000'010);
  *a->mutable_finished_at() = TimeUtil::SecondsToTimestamp(1'800'000'050);
  return a;
}

temper::v1::BatchReport FinishedReport() {
  temper::v1::BatchReport r;
  temper::v1::Batch* b = r.mutable_batch();
  b->set_id("7");
  b->set_name("demo");
  b->set_target("lab");
  b->set_datastream("ssg-ubuntu2004-ds.xml");
  b->set_profile("xccdf_org.ssgproject.content_profile_stig");
  b->set_state(temper::v1::BATCH_STATE_COMPLETED);
  b->mutable_budgets()->set_max_attempts(3);
  *b->mutable_created_at() = TimeUtil::SecondsToTimestamp(1'800'000'000);
  *b->mutable_updated_at() = TimeUtil::SecondsToTimestamp(1'800'000'245);  // 4m 05s later
  AddRule(r, "sshd_disable_root_login", temper::v1::RULE_STATE_FIXED, "fail", "pass", 2, 2400, "fixed on attempt 2");
  AddRule(r, "accounts_tmout", temper::v1::RULE_STATE_ESCALATED, "fail", "fail", 3, 3600,
          "attempt budget spent: 3 attempts failed");
  AddRule(r, "sysctl_kernel_dmesg_restrict", temper::v1::RULE_STATE_ALREADY_PASSING, "pass", "pass", 0, 0, "");
  AddRule(r, "partition_for_tmp", temper::v1::RULE_STATE_SKIPPED, "notapplicable", "notapplicable", 0, 0,
          "nothing to fix | not applicable here");
  AddRule(r, "package_aide_installed", temper::v1::RULE_STATE_FIXED, "fail", "pass", 1, 1200, "fixed on attempt 1");
  AddAttempt(r, "sshd_disable_root_login", 1, "reverted", "fail",
             {"$ echo 'PermitRootLogin no' >> /etc/ssh/sshd_config → exit 0"});
  AddAttempt(r, "sshd_disable_root_login", 2, "kept", "pass",
             {"$ sed -i 's/^#*PermitRootLogin.*/PermitRootLogin no/' /etc/ssh/sshd_config → exit 0",
              "write /etc/ssh/sshd_config.d/00-stig.conf (22 bytes)"});
  for (uint32_t n = 1; n <= 3; ++n)
    AddAttempt(r, "accounts_tmout", n, "reverted", "fail", {"$ echo TMOUT=600 → exit 0"});
  AddAttempt(r, "package_aide_installed", 1, "kept", "pass", {"$ apt-get install -y aide → exit 0"});
  temper::v1::Lesson* l = r.add_lessons();
  l->set_id(11);
  l->set_rule_id(std::string(kPrefix) + "sshd_disable_root_login");
  l->set_batch_id("7");
  l->set_text("sshd uses the first PermitRootLogin it reads; appending a second one changes nothing.");
  l->set_utility(0.5);
  l->set_target_class("rootfs");
  l->set_target("lab");
  l->set_learnt_by("reflector (endpoint local)");
  l->set_provenance("learnt on rootfs target lab in batch 7 at 2026-11-29 10:02 UTC by the reflector (endpoint local)");
  r.set_results_dir("/var/lib/temper/results/batch-7/after");
  return r;
}

temper::v1::BatchReport QueuedReport() {
  temper::v1::BatchReport r;
  temper::v1::Batch* b = r.mutable_batch();
  b->set_id("8");
  b->set_target("lab");
  b->set_profile("stig");
  b->set_state(temper::v1::BATCH_STATE_QUEUED);
  AddRule(r, "sshd_disable_root_login", temper::v1::RULE_STATE_PENDING, "", "", 0, 0, "");
  return r;
}

TEST_CASE("the report summary counts states, the fix rate, tokens and wall time") {
  temper::v1::BatchReport report = FinishedReport();
  ReportSummary s = SummarizeReport(report);
  CHECK(s.counts.total() == 5);
  CHECK(s.counts.fixed() == 2);
  CHECK(s.counts.escalated() == 1);
  CHECK(s.counts.already_passing() == 1);
  CHECK(s.counts.skipped() == 1);
  CHECK(s.failed_before == 3);
  CHECK(s.fixed == 2);
  REQUIRE(s.fix_rate.has_value());
  CHECK(*s.fix_rate == Approx(2.0 / 3.0));
  CHECK(s.tokens == 2400 + 3600 + 1200);
  CHECK(s.attempts == 6);
  CHECK(s.wall_seconds == 245);
  CHECK(s.has_run);
  REQUIRE(s.rules.size() == 5);
  CHECK(s.rules[0].attempts.size() == 2);
  REQUIRE(s.rules[0].fixed_by != nullptr);
  CHECK(s.rules[0].fixed_by->number() == 2);
  CHECK(s.rules[0].lessons.size() == 1);
  CHECK(s.rules[1].fixed_by == nullptr);
  CHECK(s.rules[1].attempts.size() == 3);
}

TEST_CASE("the text report gives the summary, a row per rule and each rule's story") {
  std::string text = RenderReportText(FinishedReport());
  INFO(text);
  CHECK(text.rfind("batch 7 (demo): completed on target lab\n", 0) == 0);
  CHECK(text.find("  rules       5: 2 fixed, 1 already passing, 1 escalated, 1 skipped\n") != std::string::npos);
  CHECK(text.find("  fix rate    2 of 3 rules that failed before (67%)\n") != std::string::npos);
  CHECK(text.find("  tokens      7200 in 6 attempts\n") != std::string::npos);
  CHECK(text.find("  wall time   4m 05s (2027-01-15 08:00:00Z → 2027-01-15 08:04:05Z)\n") != std::string::npos);
  CHECK(text.find("  results     /var/lib/temper/results/batch-7/after (results.xml, arf.xml)\n") != std::string::npos);
  CHECK(text.find("has not run") == std::string::npos);
  // The rule table: aligned columns, short names, "-" for no verdict.
  CHECK(text.find("RULE                          BEFORE         AFTER          STATE            ATTEMPTS  TOKENS\n") !=
        std::string::npos);
  CHECK(text.find("sshd_disable_root_login       fail           pass           fixed            2         2400\n") !=
        std::string::npos);
  CHECK(text.find("sysctl_kernel_dmesg_restrict  pass           pass           already_passing  0         0\n") !=
        std::string::npos);
  // The fixed rule's section: the kept attempt's commands, not the reverted one's.
  size_t sshd = text.find("\nsshd_disable_root_login: fixed, fail → pass, 2 attempts, 2400 tokens\n");
  REQUIRE(sshd != std::string::npos);
  CHECK(text.find("  fixed by attempt 2: approach 2 for sshd_disable_root_login\n"
                  "    $ sed -i 's/^#*PermitRootLogin.*/PermitRootLogin no/' /etc/ssh/sshd_config → exit 0\n"
                  "    write /etc/ssh/sshd_config.d/00-stig.conf (22 bytes)\n",
                  sshd) != std::string::npos);
  CHECK(text.find("    #1  reverted  fail  1200 tokens  approach 1 for sshd_disable_root_login\n", sshd) !=
        std::string::npos);
  CHECK(text.find("  lessons:\n    - sshd uses the first PermitRootLogin it reads", sshd) != std::string::npos);
  CHECK(text.find("changes nothing.\n      (learnt on rootfs target lab in batch 7 at 2026-11-29 10:02 UTC by the "
                  "reflector (endpoint local))\n",
                  sshd) != std::string::npos);
  // The escalated rule says why; the already passing rule has no section.
  CHECK(text.find("\naccounts_tmout: escalated, fail → fail, 3 attempts, 3600 tokens\n"
                  "  reason: attempt budget spent: 3 attempts failed\n") != std::string::npos);
  CHECK(text.find("\nsysctl_kernel_dmesg_restrict:") == std::string::npos);
  CHECK(text.find("  reason: nothing to fix | not applicable here\n") != std::string::npos);
}

TEST_CASE("the Markdown report has a table row per rule and sections with commands and reasons") {
  std::string md = RenderReportMarkdown(FinishedReport());
  INFO(md);
  CHECK(md.rfind("# temper report: batch 7 (demo), completed\n", 0) == 0);
  CHECK(md.find("| Fix rate | 2 of 3 rules that failed before (67%) |\n") != std::string::npos);
  CHECK(md.find("| Wall time | 4m 05s (") != std::string::npos);
  CHECK(md.find("| Results | `/var/lib/temper/results/batch-7/after` (`results.xml`, `arf.xml`) |\n") !=
        std::string::npos);
  CHECK(md.find("| Rule | Before | After | State | Attempts | Tokens | Note |\n|---|---|---|---|---:|---:|---|\n") !=
        std::string::npos);
  CHECK(md.find("| `sshd_disable_root_login` | fail | pass | fixed | 2 | 2400 | fixed on attempt 2 |\n") !=
        std::string::npos);
  CHECK(md.find(
            "| `accounts_tmout` | fail | fail | escalated | 3 | 3600 | attempt budget spent: 3 attempts failed |\n") !=
        std::string::npos);
  CHECK(md.find("| `sysctl_kernel_dmesg_restrict` | pass | pass | already_passing | 0 | 0 |  |\n") !=
        std::string::npos);
  // A '|' in a cell is escaped so the row keeps its columns.
  CHECK(md.find("| `partition_for_tmp` | notapplicable | notapplicable | skipped | 0 | 0 | nothing to fix \\| not "
                "applicable here |\n") != std::string::npos);
  size_t rows = 0;
  for (size_t at = md.find("\n| `"); at != std::string::npos; at = md.find("\n| `", at + 1)) ++rows;
  CHECK(rows == 5);
  CHECK(md.find("## `sshd_disable_root_login`: fixed\n") != std::string::npos);
  CHECK(md.find("Fixed by attempt 2 (approach 2 for sshd_disable_root_login):\n\n```sh\n"
                "$ sed -i 's/^#*PermitRootLogin.*/PermitRootLogin no/' /etc/ssh/sshd_config → exit 0\n"
                "write /etc/ssh/sshd_config.d/00-stig.conf (22 bytes)\n```\n") != std::string::npos);
  CHECK(md.find("**Why escalated:** attempt budget spent: 3 attempts failed\n") != std::string::npos);
  CHECK(md.find("- sshd uses the first PermitRootLogin it reads") != std::string::npos);
  CHECK(md.find("| 1 | reverted | fail | 1200 | approach 1 for sshd_disable_root_login |\n") != std::string::npos);
}

TEST_CASE("the JSON report is one object with stable field names") {
  std::string out = RenderReportJson(FinishedReport());
  REQUIRE(out.back() == '\n');
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_object());
  CHECK(j["batch_id"] == "7");
  CHECK(j["state"] == "completed");
  CHECK(j["created_at"] == "2027-01-15T08:00:00Z");
  CHECK(j["results"]["xccdf"] == "/var/lib/temper/results/batch-7/after/results.xml");
  CHECK(j["results"]["arf"] == "/var/lib/temper/results/batch-7/after/arf.xml");
  const nlohmann::json& s = j["summary"];
  CHECK(s["has_run"] == true);
  CHECK(s["rules"] == 5);
  CHECK(s["fixed"] == 2);
  CHECK(s["escalated"] == 1);
  CHECK(s["already_passing"] == 1);
  CHECK(s["failed_before"] == 3);
  CHECK(s["fix_rate"].get<double>() == Approx(2.0 / 3.0));
  CHECK(s["tokens"] == 7200);
  CHECK(s["attempts"] == 6);
  CHECK(s["wall_time_seconds"] == 245);
  REQUIRE(j["rules"].size() == 5);
  const nlohmann::json& sshd = j["rules"][0];
  CHECK(sshd["name"] == "sshd_disable_root_login");
  CHECK(sshd["rule_id"] == std::string(kPrefix) + "sshd_disable_root_login");
  CHECK(sshd["before_verdict"] == "fail");
  CHECK(sshd["after_verdict"] == "pass");
  CHECK(sshd["fix_commands"] ==
        nlohmann::json::array({"$ sed -i 's/^#*PermitRootLogin.*/PermitRootLogin no/' /etc/ssh/sshd_config → exit 0",
                               "write /etc/ssh/sshd_config.d/00-stig.conf (22 bytes)"}));
  REQUIRE(sshd["history"].size() == 2);
  CHECK(sshd["history"][0]["outcome"] == "reverted");
  CHECK(sshd["history"][1]["usage"]["prompt_tokens"] == 1000);
  CHECK(sshd["lessons"][0]["id"] == 11);
  CHECK(sshd["lessons"][0]["target_class"] == "rootfs");
  CHECK(sshd["lessons"][0]["target"] == "lab");
  CHECK(sshd["lessons"][0]["learnt_by"] == "reflector (endpoint local)");
  CHECK_THAT(sshd["lessons"][0]["provenance"].get<std::string>(), Catch::StartsWith("learnt on rootfs target lab"));
  const nlohmann::json& tmout = j["rules"][1];
  CHECK(tmout["state"] == "escalated");
  CHECK(tmout["detail"] == "attempt budget spent: 3 attempts failed");
  CHECK(tmout["fix_commands"].empty());
  CHECK(tmout["history"].size() == 3);
}

TEST_CASE("every format totals the batch's model calls per role") {
  temper::v1::BatchReport report = FinishedReport();
  auto add = [&](const char* role, uint64_t calls, uint64_t prompt, uint64_t cached, uint64_t generated) {
    temper::v1::RoleUsage* r = report.add_role_usage();
    r->set_role(role);
    r->set_calls(calls);
    r->mutable_usage()->set_prompt_tokens(prompt);
    r->mutable_usage()->set_cached_prompt_tokens(cached);
    r->mutable_usage()->set_completion_tokens(generated);
  };
  add("architect", 5, 40000, 0, 600);
  add("worker", 12, 90000, 72000, 9000);
  const std::string text = RenderReportText(report);
  CHECK_THAT(text,
             Catch::Contains("  architect   5 calls, 40000 prompt tokens (0% from the prefix cache), 600 generated\n"));
  CHECK_THAT(text, Catch::Contains(
                       "  worker      12 calls, 90000 prompt tokens (80% from the prefix cache), 9000 generated\n"));
  CHECK_THAT(
      RenderReportMarkdown(report),
      Catch::Contains(
          "| Model calls, worker | 12 calls, 90000 prompt tokens (80% from the prefix cache), 9000 generated |"));
  const nlohmann::json j = nlohmann::json::parse(RenderReportJson(report));
  REQUIRE(j["role_usage"].size() == 2);
  CHECK(j["role_usage"][1] == nlohmann::json{{"role", "worker"},
                                             {"calls", 12},
                                             {"prompt_tokens", 90000},
                                             {"cached_prompt_tokens", 72000},
                                             {"completion_tokens", 9000}});
  CHECK(nlohmann::json::parse(RenderReportJson(FinishedReport()))["role_usage"].empty());
}

TEST_CASE("every format says how many rules the library of proven fixes fixed and the tokens it saved") {
  temper::v1::BatchReport report = FinishedReport();
  report.mutable_library()->set_tried(4);
  report.mutable_library()->set_kept(3);
  report.mutable_library()->set_tokens_saved(41200);
  CHECK_THAT(RenderReportText(report),
             Catch::Contains("  library     3 of 4 rules fixed from proven fixes, 41,200 model tokens saved\n"));
  CHECK_THAT(RenderReportMarkdown(report),
             Catch::Contains("| Library | 3 of 4 rules fixed from proven fixes, 41,200 model tokens saved |"));
  CHECK(nlohmann::json::parse(RenderReportJson(report))["library"] ==
        nlohmann::json{{"tried", 4}, {"kept", 3}, {"tokens_saved", 41200}});
  // Not tried: no line; the JSON's counts are zero.
  CHECK_THAT(RenderReportText(FinishedReport()), !Catch::Contains("proven fixes"));
  CHECK(nlohmann::json::parse(RenderReportJson(FinishedReport()))["library"]["tried"] == 0);
}

TEST_CASE("a queued batch's report says it has not run yet, in every format") {
  temper::v1::BatchReport report = QueuedReport();
  ReportSummary s = SummarizeReport(report);
  CHECK_FALSE(s.has_run);
  CHECK_FALSE(s.fix_rate.has_value());

  std::string text = RenderReportText(report);
  INFO(text);
  CHECK(text.find("  status      the batch has not run yet (queued): no verdicts, attempts or results so far\n") !=
        std::string::npos);
  CHECK(text.find("  fix rate    - (no rule evaluated yet)\n") != std::string::npos);
  CHECK(text.find("  results     - (written when the batch completes)\n") != std::string::npos);
  CHECK(text.find("sshd_disable_root_login  -       -      pending  0         0\n") != std::string::npos);

  CHECK(RenderReportMarkdown(report).find("> **Note:** the batch has not run yet (queued)") != std::string::npos);

  nlohmann::json j = nlohmann::json::parse(RenderReportJson(report));
  CHECK(j["summary"]["has_run"] == false);
  CHECK(j["summary"]["fix_rate"].is_null());
  CHECK(j["results"].is_null());
  CHECK(j["rules"][0]["state"] == "pending");
  CHECK(j["rules"][0]["before_verdict"] == "");

  report.mutable_batch()->set_state(temper::v1::BATCH_STATE_CANCELLED);
  report.mutable_batch()->set_error("not today");
  text = RenderReportText(report);
  CHECK(text.find("  status      the batch was cancelled before any rule was evaluated\n"
                  "  reason      not today\n") != std::string::npos);
  CHECK(RenderReportMarkdown(report).find("| Reason | not today |\n") != std::string::npos);
}

TEST_CASE("a Markdown code block survives commands holding backticks") {
  temper::v1::BatchReport report = QueuedReport();
  report.mutable_batch()->set_state(temper::v1::BATCH_STATE_COMPLETED);
  report.mutable_batch()->mutable_rules(0)->set_state(temper::v1::RULE_STATE_FIXED);
  AddAttempt(report, "sshd_disable_root_login", 1, "kept", "pass", {"$ echo ```x``` → exit 0"});
  std::string md = RenderReportMarkdown(report);
  CHECK(md.find("````sh\n$ echo ```x``` → exit 0\n````\n") != std::string::npos);
}

TEST_CASE("plan-only and reverted batches say so, reverted rules are counted, and fixpoint passes are shown") {
  temper::v1::BatchReport r = FinishedReport();
  r.mutable_batch()->set_plan_only(true);
  r.mutable_batch()->mutable_rules(0)->set_state(temper::v1::RULE_STATE_REVERTED);
  temper::v1::FixpointPass* p1 = r.add_fixpoint_passes();
  p1->set_pass(1);
  p1->set_attempts(3);
  p1->set_fixed(1);
  p1->set_rescanned(4);
  p1->set_passing(2);
  p1->set_failing(2);
  p1->add_flipped(std::string(kPrefix) + "accounts_tmout");
  p1->add_requeued(std::string(kPrefix) + "accounts_tmout");
  temper::v1::FixpointPass* p2 = r.add_fixpoint_passes();
  p2->set_pass(2);
  p2->set_final(true);
  p2->set_rescanned(4);
  p2->set_passing(3);
  p2->set_failing(1);

  CHECK(SummarizeReport(r).counts.reverted() == 1);
  std::string text = RenderReportText(r);
  CHECK_THAT(text, Catch::Contains("plan only: every change was reverted"));
  CHECK_THAT(text, Catch::Contains("1 reverted"));
  CHECK_THAT(text, Catch::Contains("fixpoint    2 passes: #1 3 attempts (1 kept), rescanned 4 (2 passing, 2 failing), "
                                   "re-queued 1; #2 0 attempts (0 kept), rescanned 4 (3 passing, 1 failing)"));
  CHECK_THAT(RenderReportMarkdown(r),
             Catch::Contains("| Fixpoint | 2 passes") && Catch::Contains("| Note | plan only"));
  nlohmann::json j = nlohmann::json::parse(RenderReportJson(r));
  CHECK(j["plan_only"] == true);
  CHECK(j["reverted_at"].is_null());
  CHECK(j["summary"]["reverted"] == 1);
  REQUIRE(j["fixpoint"].size() == 2);
  CHECK(j["fixpoint"][0]["requeued"] == nlohmann::json::array({std::string(kPrefix) + "accounts_tmout"}));
  CHECK(j["fixpoint"][1]["final"] == true);

  r.mutable_batch()->set_plan_only(false);
  *r.mutable_batch()->mutable_reverted_at() = TimeUtil::SecondsToTimestamp(1'800'000'300);
  CHECK_THAT(RenderReportText(r),
             Catch::Contains("reverted at 2027-01-15 08:05:00Z: the batch's fixes were taken back out"));
  CHECK(nlohmann::json::parse(RenderReportJson(r))["reverted_at"] == "2027-01-15T08:05:00Z");
}

TEST_CASE(
    "waived, manual, held and reboot-pending rules are reported with why, never as pass, expired waivers flagged") {
  temper::v1::BatchReport r;
  temper::v1::Batch* b = r.mutable_batch();
  b->set_id("9");
  b->set_target("lab");
  b->set_profile("stig");
  b->set_state(temper::v1::BATCH_STATE_COMPLETED);
  AddRule(r, "accounts_tmout", temper::v1::RULE_STATE_WAIVED, "fail", "fail", 0, 0,
          "waived by alice: kiosk sessions (until 2027-01-31)");
  AddRule(r, "banner_etc_issue_net", temper::v1::RULE_STATE_FIXED, "fail", "pass", 1, 900, "fixed on attempt 1");
  AddRule(r, "installed_os_is_vendor_supported", temper::v1::RULE_STATE_MANUAL, "notchecked", "notchecked", 0, 0,
          "manual: SCAP Security Guide has no automated check for this rule");
  AddRule(r, "kernel_module_usb-storage_disabled", temper::v1::RULE_STATE_HELD, "fail", "fail", 0, 0,
          "held, not changed: disruptive (...). To remediate it, submit it again allowing disruptive changes");
  AddRule(r, "kernel_module_cramfs_disabled", temper::v1::RULE_STATE_REBOOT_PENDING, "fail", "pass", 1, 800,
          "fixed on attempt 1, staged: it takes effect after a reboot");
  AddAttempt(r, "kernel_module_cramfs_disabled", 1, "kept", "pass", {"$ bash /root/fix.sh → exit 0"});
  temper::v1::Waiver* w = b->add_waivers();
  w->set_rule_id(std::string(kPrefix) + "accounts_tmout");
  w->set_reason("kiosk sessions");
  w->set_owner("alice");
  *w->mutable_expires_at() = TimeUtil::SecondsToTimestamp(1801353600);  // 2027-01-31
  w = b->add_waivers();
  w->set_rule_id(std::string(kPrefix) + "banner_etc_issue_net");
  w->set_reason("legal review");
  w->set_owner("bob");
  *w->mutable_expires_at() = TimeUtil::SecondsToTimestamp(1577836800);  // 2020-01-01

  ReportSummary s = SummarizeReport(r);
  CHECK(s.counts.waived() == 1);
  CHECK(s.counts.manual() == 1);
  CHECK(s.counts.held() == 1);
  CHECK(s.counts.reboot_pending() == 1);
  CHECK(s.fixed == 1);  // only the rule fixed for good counts
  CHECK(s.failed_before == 4);

  std::string text = RenderReportText(r);
  INFO(text);
  CHECK(text.find("  rules       5: 1 fixed, 1 reboot pending, 1 waived, 1 held (disruptive), 1 manual\n") !=
        std::string::npos);
  CHECK(text.find("  options     2 waivers (1 EXPIRED)\n") != std::string::npos);
  CHECK(
      text.find(
          "\nwaivers:\n  accounts_tmout        applied                       alice  until 2027-01-31  kiosk sessions\n"
          "  banner_etc_issue_net  EXPIRED: remediated as usual  bob    until 2020-01-01  legal review\n") !=
      std::string::npos);
  CHECK(text.find("accounts_tmout: waived, fail → fail, 0 attempts, 0 tokens\n"
                  "  reason: waived by alice: kiosk sessions (until 2027-01-31)\n") != std::string::npos);
  CHECK(text.find("  reason: held, not changed: disruptive") != std::string::npos);
  CHECK(text.find("kernel_module_cramfs_disabled: reboot_pending, fail → pass") != std::string::npos);

  std::string md = RenderReportMarkdown(r);
  CHECK(md.find("| Options | 2 waivers (1 EXPIRED) |\n") != std::string::npos);
  CHECK(
      md.find(
          "| `banner_etc_issue_net` | **EXPIRED: remediated as usual** | bob | until 2020-01-01 | legal review |\n") !=
      std::string::npos);
  CHECK(md.find("| `installed_os_is_vendor_supported` | notchecked | notchecked | manual |") != std::string::npos);

  nlohmann::json j = nlohmann::json::parse(RenderReportJson(r));
  CHECK(j["allow_disruptive"] == false);
  REQUIRE(j["waivers"].size() == 2);
  CHECK(j["waivers"][0]["status"] == "applied");
  CHECK(j["waivers"][0]["expires_at"] == "2027-01-31T00:00:00Z");
  CHECK(j["waivers"][1]["status"] == "expired");
  CHECK(j["summary"]["waived"] == 1);
  CHECK(j["summary"]["held"] == 1);
  CHECK(j["summary"]["reboot_pending"] == 1);
  CHECK(j["rules"][3]["state"] == "held");
}

}  // namespace
}  // namespace temper::cli
