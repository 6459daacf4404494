// The `temper` CLI as users run it: the real binary against a real temperd.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <future>

#include "orchestrator/daemon_process.h"

namespace temper::testing {
namespace {

ProcessResult Cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.insert(args.begin(), {TemperBinary(), "--socket", daemon.socket_path()});
  return RunProcess(args);
}

// The same under coreutils' timeout: a CLI still running after `seconds` is stopped and exits 124,
// so a watch that does not end fails its check instead of hanging the test.
ProcessResult CliWithin(const DaemonProcess& daemon, int seconds, std::vector<std::string> args) {
  args.insert(args.begin(),
              {"/usr/bin/timeout", std::to_string(seconds), TemperBinary(), "--socket", daemon.socket_path()});
  return RunProcess(args);
}

// What a daemon without models answers about a queued batch (LoopRunner::WhyWaiting).
constexpr const char* kNoModels = "no model is configured for the roles architect, worker, reflector (";

// loop.parallel_attempts: auto would print this machine's count of attempts at once: serial, the
// lines below are the same everywhere.
const DaemonOptions kSerial{.extra_yaml = "loop:\n  parallel_attempts: 1\n"};

TEST_CASE("temper submit, list, status, cancel and watch print for people") {
  TempDir dir;
  DaemonProcess daemon(dir, kSerial);
  REQUIRE(daemon.Start().ok());

  ProcessResult submit = Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r",
                                      "sshd_disable_root_login", "--name", "cli"});
  INFO(submit.err);
  CHECK(submit.exit_code == 0);
  CHECK(submit.out == "batch 1 queued: 1 rule on target lab (profile stig)\n");
  // This daemon has no models: the batch is accepted, and the answer says at once that it waits and why.
  CHECK(submit.err == fmt::format("temper: batch 1 is waiting: {}{} has no `models:` entry naming a models.yaml; "
                                  "see config/models.yaml): batches stay queued until temperd starts with one\n",
                                  kNoModels, daemon.config_path()));

  std::string batch_file = dir.Write("batch.yaml",
                                     "target: lab\ndatastream: ssg-test-ds.xml\nprofile: stig\n"
                                     "whole_profile: true\nbudgets: {max_attempts: 3}\n");
  ProcessResult from_file = Cli(daemon, {"submit", "-f", batch_file});
  CHECK(from_file.out == "batch 2 queued: every rule of the profile on target lab (profile stig)\n");

  ProcessResult list = Cli(daemon, {"list"});
  CHECK(list.exit_code == 0);
  CHECK(list.out.rfind("ID  STATE   TARGET  PROFILE  RULES    FIXED  ESCALATED  LEFT  CREATED", 0) == 0);
  CHECK(list.out.find("\n2   queued  lab     stig     profile  0") != std::string::npos);
  CHECK(list.out.find(fmt::format("\nbatches 2, 1 wait: {}", kNoModels)) != std::string::npos);

  ProcessResult status = Cli(daemon, {"status", "1"});
  CHECK(status.out.find(fmt::format("batch 1 (cli)\n  state       queued\n  waiting     {}", kNoModels)) == 0);
  CHECK(status.out.find("xccdf_org.ssgproject.content_rule_sshd_disable_root_login  pending") != std::string::npos);

  ProcessResult json = Cli(daemon, {"status", "2", "--json"});
  CHECK(json.out.find("\"whole_profile\":true") != std::string::npos);
  CHECK(json.out.find("\"max_attempts\":3") != std::string::npos);
  CHECK_THAT(nlohmann::json::parse(json.out)["waiting_reason"].get<std::string>(), Catch::StartsWith(kNoModels));
  // gRPC clients get it in every answer that carries a batch.
  temper::v1::ListBatchesResponse listed;
  REQUIRE(daemon.Stub()->ListBatches(CallContext().get(), {}, &listed).ok());
  REQUIRE(listed.batches_size() == 2);
  CHECK_THAT(listed.batches(1).waiting_reason(), Catch::StartsWith(kNoModels));

  CHECK(Cli(daemon, {"cancel", "1", "--reason", "demo"}).out == "batch 1 cancelled (1 rules cancelled)\n");
  // An ended batch waits for nothing.
  CHECK(Cli(daemon, {"status", "1"}).out.find("waiting") == std::string::npos);

  ProcessResult watch = Cli(daemon, {"watch", "--no-follow"});
  CHECK(watch.exit_code == 0);
  CHECK(watch.out.find("batch 1  [daemon]  batch.submitted") != std::string::npos);
  CHECK(watch.out.find("batch 1  [daemon]  batch.cancelled (was queued, 1 rule cancelled): demo\n") !=
        std::string::npos);
  // Off a terminal, a batch's progress line follows an event that changed its counts.
  CHECK(watch.out.find("batch.submitted: 1 rule on target lab (profile stig)\n"
                       "batch 1  [----------] 0/1  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left 1  "
                       "▸ queued\n") != std::string::npos);
  CHECK(watch.out.find("\nbatch 1  [##########] 1/1  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · "
                       "cancelled 1 · left 0  ✖ cancelled\n") != std::string::npos);
  CHECK(
      watch.out.find("\nbatch 2  [----------] 0/?  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · left ?  "
                     "▸ queued\n") != std::string::npos);

  // Resuming one batch past its events: the progress comes from GetBatch.
  ProcessResult resumed = Cli(daemon, {"watch", "1", "--after", "3", "--no-follow"});
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.out ==
        "batch 1  [##########] 1/1  fixed 0 · already 0 · failed 0 · escalated 0 · skipped 0 · "
        "cancelled 1 · left 0  ✖ cancelled\n");

  ProcessResult watch_json = Cli(daemon, {"watch", "1", "--after", "1", "--no-follow", "--json"});
  CHECK(watch_json.out.rfind("{\"batch_id\":\"1\",\"data\":{\"previous_state\":\"queued\"", 0) == 0);
  CHECK(watch_json.out.find("\"seq\":\"3\"") != std::string::npos);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("temper watch BATCH exits when the batch ends, its exit status the outcome, and --follow-forever does not") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  REQUIRE(
      Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "accounts_tmout"}).exit_code ==
      0);

  // Queued on a daemon without models: watch says why it waits, and waits.
  auto watch = std::async(std::launch::async, [&] { return CliWithin(daemon, 60, {"watch", "1"}); });
  auto forever = std::async(std::launch::async, [&] {
    return CliWithin(daemon, 8, {"watch", "1", "--follow-forever"});
  });
  REQUIRE(watch.wait_for(std::chrono::seconds(2)) == std::future_status::timeout);
  REQUIRE(Cli(daemon, {"cancel", "1", "--reason", "no models here"}).exit_code == 0);
  ProcessResult ended = watch.get();
  INFO(ended.err);
  CHECK(ended.exit_code == 4);  // cancelled
  CHECK_THAT(ended.out, Catch::EndsWith("batch.cancelled (was queued, 1 rule cancelled): no models here\n"
                                        "batch 1  [##########] 1/1  fixed 0 · already 0 · failed 0 · escalated 0 · "
                                        "skipped 0 · cancelled 1 · left 0  ✖ cancelled\n"));
  CHECK_THAT(ended.err, Catch::StartsWith(fmt::format("temper: batch 1 is waiting: {}", kNoModels)));
  // --follow-forever was still following when timeout stopped it, the cancellation long seen.
  ProcessResult followed = forever.get();
  CHECK(followed.exit_code == 124);
  CHECK_THAT(followed.out, Catch::Contains("batch.cancelled"));

  // A batch that already ended: its events, and the same exit status at once; --json alike.
  ProcessResult again = CliWithin(daemon, 30, {"watch", "1", "--json"});
  CHECK(again.exit_code == 4);  // cancelled
  REQUIRE(again.out.size() > 1);
  const std::string last_line = again.out.substr(again.out.rfind('\n', again.out.size() - 2) + 1);
  CHECK(nlohmann::json::parse(last_line)["type"] == "batch.cancelled");
  ProcessResult past_end = CliWithin(daemon, 30, {"watch", "1", "--after", "1000"});
  CHECK(past_end.exit_code == 4);  // cancelled
  // --no-follow prints what is stored and exits 0, as before; it cannot be combined with --follow-forever.
  CHECK(CliWithin(daemon, 30, {"watch", "1", "--no-follow"}).exit_code == 0);
  ProcessResult both = Cli(daemon, {"watch", "1", "--no-follow", "--follow-forever"});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Catch::Contains("--no-follow excludes --follow-forever"));
  CHECK_THAT(Cli(daemon, {"watch", "--help"}).out,
             Catch::Contains("0 completed") && Catch::Contains("3 failed") && Catch::Contains("4 cancelled"));
  CHECK(daemon.Stop() == 0);

  // With models, a batch that cannot run (here its target's root was never made) fails: exit 3.
  TempDir with_models;
  DaemonProcess runner(with_models,
                       {.models_yaml = "endpoints:\n  down: {type: openai, base_url: 'http://127.0.0.1:9/v1', "
                                       "model: none}\nroles:\n  architect: {endpoint: down}\n"
                                       "  worker: {endpoint: down}\n  reflector: {endpoint: down}\n"});
  REQUIRE(runner.Start().ok());
  ProcessResult submitted =
      Cli(runner, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "accounts_tmout"});
  REQUIRE(submitted.exit_code == 0);
  CHECK(submitted.err.empty());  // it has models: nothing holds the batch up
  ProcessResult failed = CliWithin(runner, 120, {"watch", "1"});
  INFO(runner.Log());
  CHECK(failed.exit_code == 3);  // failed
  CHECK_THAT(failed.out, Catch::Contains("batch.failed"));
  CHECK(runner.Stop() == 0);
}

TEST_CASE("temper submit takes waivers and the opt-ins, status shows them, rebooted wants a completed batch") {
  TempDir dir;
  DaemonProcess daemon(dir, kSerial);
  REQUIRE(daemon.Start().ok());
  std::string batch_file = dir.Write(
      "batch.yaml",
      "target: lab\ndatastream: ssg-test-ds.xml\nprofile: stig\nrules: [accounts_tmout, banner_etc_issue_net]\n"
      "waivers:\n  - {rule: accounts_tmout, reason: from the file, owner: carol}\n"
      "  - {rule: banner_etc_issue_net, reason: legal review, owner: bob, expires: 2027-01-31}\n");
  // The flag's waiver replaces the file's for the same rule.
  ProcessResult submit =
      Cli(daemon, {"submit", "-f", batch_file, "--waive", "accounts_tmout:kiosk sessions: no timeout:alice@example.com",
                   "--allow-disruptive", "--plan-only"});
  INFO(submit.err);
  REQUIRE(submit.exit_code == 0);
  CHECK(submit.out ==
        "batch 1 queued: 2 rules on target lab (profile stig)\n"
        "  disruptive changes allowed · plan only · 2 waivers\n");

  nlohmann::json batch = nlohmann::json::parse(Cli(daemon, {"status", "1", "--json"}).out);
  CHECK(batch["allow_disruptive"] == true);
  CHECK(batch["plan_only"] == true);
  REQUIRE(batch["waivers"].size() == 2);
  CHECK(batch["waivers"][0]["rule_id"] == "xccdf_org.ssgproject.content_rule_banner_etc_issue_net");
  CHECK(batch["waivers"][0]["expires_at"] == "2027-01-31T00:00:00Z");
  CHECK(batch["waivers"][1]["owner"] == "alice@example.com");
  CHECK(batch["waivers"][1]["reason"] == "kiosk sessions: no timeout");

  ProcessResult status = Cli(daemon, {"status", "1"});
  INFO(status.out);
  CHECK(status.out.find("  options     disruptive changes allowed · plan only · 2 waivers\n") != std::string::npos);
  CHECK(
      status.out.find("  WAIVED RULE           STATUS             OWNER              EXPIRY            REASON\n"
                      "  banner_etc_issue_net  not evaluated yet  bob                until 2027-01-31  legal review\n"
                      "  accounts_tmout        not evaluated yet  alice@example.com  no expiry         kiosk sessions: "
                      "no timeout\n") != std::string::npos);

  ProcessResult bad = Cli(daemon, {"submit", "-f", batch_file, "--waive", "accounts_tmout:no owner"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "temper: --waive 'accounts_tmout:no owner': no owner (expected RULE:REASON:OWNER[:YYYY-MM-DD])\n");

  ProcessResult queued = Cli(daemon, {"rebooted", "1"});
  CHECK(queued.exit_code == 1);
  CHECK(queued.err == "temper: batch 1 is queued: only a completed batch has fixes staged for a reboot\n");
  ProcessResult unknown = Cli(daemon, {"rebooted", "9"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err == "temper: batch 9 does not exist\n");
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("temper report on a batch that has not run, and its errors") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  REQUIRE(Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "sshd_disable_root_login",
                       "--name", "report"})
              .exit_code == 0);

  ProcessResult text = Cli(daemon, {"report", "1"});
  INFO(text.err);
  CHECK(text.exit_code == 0);
  CHECK(text.out.rfind("batch 1 (report): queued on target lab\n"
                       "  status      the batch has not run yet (queued): no verdicts, attempts or results so far\n",
                       0) == 0);
  CHECK(text.out.find("sshd_disable_root_login  -       -      pending  0         0\n") != std::string::npos);

  ProcessResult md = Cli(daemon, {"report", "1", "--format", "markdown"});
  CHECK(md.exit_code == 0);
  CHECK(md.out.find("| `sshd_disable_root_login` | - | - | pending | 0 | 0 |  |\n") != std::string::npos);

  ProcessResult json = Cli(daemon, {"report", "1", "--format", "json"});
  CHECK(json.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_object());
  CHECK(j["batch_id"] == "1");
  CHECK(j["state"] == "queued");
  CHECK(j["summary"]["has_run"] == false);
  CHECK(j["rules"][0]["rule_id"] == "xccdf_org.ssgproject.content_rule_sshd_disable_root_login");
  CHECK(j["rules"][0]["state"] == "pending");

  ProcessResult no_results = Cli(daemon, {"report", "1", "--results-to", dir / "out"});
  CHECK(no_results.exit_code == 1);
  CHECK(no_results.err ==
        "temper: --results-to: batch 1 has no results files yet (they are written when the batch "
        "completes; it is queued)\n");
  CHECK(no_results.out.empty());

  ProcessResult unknown = Cli(daemon, {"report", "42"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err == "temper: batch 42 does not exist\n");

  ProcessResult format = Cli(daemon, {"report", "1", "--format", "yaml"});
  CHECK(format.exit_code == 2);
  CHECK(format.err.find("--format: yaml not in {text,markdown,json}") != std::string::npos);
  CHECK(Cli(daemon, {"report"}).exit_code == 2);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("temper revert refuses what it cannot revert, naming why, before it touches a target") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  REQUIRE(
      Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "accounts_tmout"}).exit_code ==
      0);
  REQUIRE(
      Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "accounts_tmout"}).exit_code ==
      0);
  REQUIRE(Cli(daemon, {"cancel", "2"}).exit_code == 0);
  ProcessResult typo =
      Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig", "-r", "acounts_tmout"});
  CHECK(typo.exit_code == 1);
  CHECK_THAT(typo.err, Catch::Contains("'acounts_tmout' is not a rule of ssg-test-ds.xml (did you mean "
                                       "'accounts_tmout'?)"));

  ProcessResult queued = Cli(daemon, {"revert", "1"});
  CHECK(queued.exit_code == 1);
  CHECK(queued.err == "temper: batch 1 has not run yet: it changed nothing to revert\n");
  ProcessResult cancelled = Cli(daemon, {"revert", "2", "accounts_tmout"});
  CHECK(cancelled.exit_code == 1);
  CHECK(cancelled.err == "temper: batch 2 never started on target lab (cancelled): it changed nothing to revert\n");
  CHECK(Cli(daemon, {"revert", "42"}).err == "temper: batch 42 does not exist\n");
  CHECK(Cli(daemon, {"revert", "1", "no such rule"}).err.rfind("temper: rule_id: ", 0) == 0);
  CHECK(Cli(daemon, {"revert"}).exit_code == 2);
  // Nothing was mounted or created for the target.
  CHECK_FALSE(std::filesystem::exists(dir / "roots/lab/state"));
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("temper reports each error clearly and exits non-zero") {
  TempDir dir;
  DaemonProcess daemon(dir);

  ProcessResult down = Cli(daemon, {"list"});
  CHECK(down.exit_code == 1);
  CHECK(down.err.rfind(fmt::format("temper: temperd is not answering on unix:{}", daemon.socket_path()), 0) == 0);
  CHECK(down.err.find("Is it running?") != std::string::npos);

  REQUIRE(daemon.Start().ok());
  ProcessResult unknown = Cli(daemon, {"status", "42"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err == "temper: batch 42 does not exist\n");

  ProcessResult not_a_number = Cli(daemon, {"cancel", "abc"});
  CHECK(not_a_number.exit_code == 1);
  CHECK(not_a_number.err == "temper: batch_id: 'abc' is not a batch id (batch ids are positive numbers)\n");

  std::string bad_file = dir.Write("bad.yaml", "target: lab\nrules:\n  - a\n  - {b: c}\n");
  ProcessResult bad = Cli(daemon, {"submit", "-f", bad_file});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == fmt::format("temper: {}:4:5: rules[1]: expected a string, got a mapping\n", bad_file));

  ProcessResult missing_file = Cli(daemon, {"submit", "-f", dir / "nope.yaml"});
  CHECK(missing_file.err == fmt::format("temper: {}: no such file\n", dir / "nope.yaml"));

  ProcessResult invalid = Cli(daemon, {"submit", "-t", "lab", "-d", "ssg-test-ds.xml", "-p", "stig"});
  CHECK(invalid.exit_code == 1);
  CHECK(invalid.err == "temper: rule_ids: give either explicit rule ids or whole_profile, exactly one of the two\n");

  ProcessResult state = Cli(daemon, {"list", "--state", "done"});
  CHECK(state.exit_code == 2);
  CHECK(state.err.find("--state: 'done' is not a batch state") != std::string::npos);

  ProcessResult usage = Cli(daemon, {"frobnicate"});
  CHECK(usage.exit_code == 2);
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
