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
        "profile, rules, whole_profile, budgets, request_id)");
  CHECK(ParseBatchFile("rules: a\n", "b.yaml").status().message() == "b.yaml:1:8: rules: expected a sequence, got a scalar");
  CHECK(ParseBatchFile("budgets:\n  wall_time: forever\n", "b.yaml").status().message() ==
        "b.yaml:2:14: budgets.wall_time: 'forever' is not a duration (examples: 90s, 20m, 1h30m, 2d)");
  CHECK(ParseBatchFile("whole_profile: maybe\n", "b.yaml").status().message() == "b.yaml:1:16: whole_profile: expected true or false");
  CHECK(LoadBatchFile("/nonexistent.yaml").status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace temper::cli
