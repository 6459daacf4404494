#include "orchestrator/cli/batch_file.h"

#include <catch2/catch.hpp>

namespace temper::cli {
namespace {

TEST_CASE("the example batch file becomes a SubmitBatch request") {
  auto r = LoadBatchFile(std::string(TEMPER_SOURCE_DIR) + "/config/batch-example.yaml");
  REQUIRE(r.ok());
  CHECK(r->target() == "lab");
  CHECK(r->profile() == "stig");
  CHECK(r->rule_ids_size() == 3);
  CHECK(r->budgets().max_attempts() == 4);
  CHECK(r->budgets().wall_time_seconds() == 900);
  CHECK(r->budgets().max_tokens() == 300000);
}

TEST_CASE("batch file errors name file, line, column and field") {
  CHECK(ParseBatchFile("target: lab\nrule: [a]\n", "b.yaml").status().message() ==
        "b.yaml:2:1: rule: unknown key (did you mean 'rules'?) (valid keys here: name, target, datastream, "
        "profile, rules, whole_profile, budgets, request_id, waivers, allow_disruptive, plan_only, parallel_attempts)");
  CHECK(ParseBatchFile("rules: a\n", "b.yaml").status().message() ==
        "b.yaml:1:8: rules: expected a sequence, got a scalar");
  CHECK(ParseBatchFile("budgets:\n  wall_time: forever\n", "b.yaml").status().message() ==
        "b.yaml:2:14: budgets.wall_time: 'forever' is not a duration (examples: 90s, 20m, 1h30m, 2d)");
  CHECK(ParseBatchFile("whole_profile: maybe\n", "b.yaml").status().message() ==
        "b.yaml:1:16: whole_profile: expected true or false");
  CHECK(LoadBatchFile("/nonexistent.yaml").status().code() == StatusCode::kNotFound);
}

TEST_CASE("a batch file carries waivers and the opt-ins") {
  auto r = ParseBatchFile(
      "target: lab\nrules: [accounts_tmout, banner_etc_issue_net]\nallow_disruptive: true\nplan_only: false\n"
      "waivers:\n  - {rule: accounts_tmout, reason: 'kiosk: no timeout', owner: alice, expires: 2027-01-31}\n"
      "  - {rule: banner_etc_issue_net, reason: legal review, owner: bob}\n",
      "b.yaml");
  REQUIRE(r.ok());
  CHECK(r->allow_disruptive());
  CHECK_FALSE(r->plan_only());
  REQUIRE(r->waivers_size() == 2);
  CHECK(r->waivers(0).rule_id() == "xccdf_org.ssgproject.content_rule_accounts_tmout");
  CHECK(r->waivers(0).reason() == "kiosk: no timeout");
  CHECK(r->waivers(0).owner() == "alice");
  CHECK(r->waivers(0).expires_at().seconds() == 1801353600);  // 2027-01-31T00:00:00Z
  CHECK_FALSE(r->waivers(1).has_expires_at());
  CHECK(ParseBatchFile("parallel_attempts: 4\n", "b.yaml")->parallel_attempts() == 4);
  CHECK(ParseBatchFile("parallel_attempts: 0\n", "b.yaml").status().message() ==
        "b.yaml:1:20: parallel_attempts: 0 is out of range [1, 16]");
  CHECK(ParseBatchFile("plan_only: soon\n", "b.yaml").status().message() ==
        "b.yaml:1:12: plan_only: expected true or false");
  CHECK(ParseBatchFile("waivers:\n  - {rule: accounts_tmout, owner: alice}\n", "b.yaml").status().message() ==
        "b.yaml:2:5: waivers[0]: missing required key 'reason'");
  CHECK(ParseBatchFile("waivers:\n  - {rule: accounts_tmout, reason: r, owner: a, expires: 31/01/2027}\n", "b.yaml")
            .status()
            .message() ==
        "b.yaml:2:58: waivers[0].expires: '31/01/2027' is not a date: expected YYYY-MM-DD, e.g. 2027-01-31");
}

}  // namespace
}  // namespace temper::cli
