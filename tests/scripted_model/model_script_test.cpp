// The model script: its YAML form, the attempt plan it gives each rule, and located errors for
// every kind of mistake a test author can make in it.
#include "scripted_model/model_script.h"

#include <unistd.h>

#include <fstream>

#include <catch2/catch.hpp>

#include "scratch_space.h"

using namespace temper;
using namespace temper::scripted;

namespace {

const char* kFull = R"(# every key
tool_calls: text
reengage: pivot
regress_command: "echo broken >> /etc/passwd"
faults:
  fail_first: 2
  fail_status: 429
  retry_after_seconds: 3
  cut_streams_first: 1
  cut_after_text: true
rules:
  package_aide_installed: fix
  sysctl_net_ipv4_tcp_syncookies: wrong_first
  xccdf_org.ssgproject.content_rule_accounts_tmout: regress
  grub2_audit_argument: unfixable
  partition_for_tmp: skip
  sshd_set_idle_timeout: {wrong_first: 2, reengage: escalate}
  sshd_disable_root_login: {wrong_first: 1, regress_first: 1}
)";

std::string ErrorOf(const std::string& yaml) {
  auto r = ParseModelScript(yaml, "script.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("an empty script fixes every rule on its first attempt, natively, and re-engages CONTINUE") {
  auto s = ParseModelScript("", "empty.yaml");
  REQUIRE(s.ok());
  CHECK(s->tool_calls == ToolCallStyle::kNative);
  CHECK(s->reengage == Reengage::kContinue);
  CHECK(s->KindOf("xccdf_org.ssgproject.content_rule_anything", 1) == AttemptKind::kFix);
  CHECK(s->faults.fail_first == 0);
  CHECK(s->RegressCommand("xccdf_org.ssgproject.content_rule_x") == DefaultRegressCommand("x"));
}

TEST_CASE("every key of the YAML form is read, and rules are found by full or short id") {
  auto s = ParseModelScript(kFull, "full.yaml");
  REQUIRE(s.ok());
  CHECK(s->tool_calls == ToolCallStyle::kText);
  CHECK(s->reengage == Reengage::kPivot);
  CHECK(s->RegressCommand("accounts_tmout") == "echo broken >> /etc/passwd");
  CHECK(s->faults.fail_first == 2);
  CHECK(s->faults.fail_status == 429);
  CHECK(s->faults.retry_after_seconds == 3);
  CHECK(s->faults.cut_streams_first == 1);
  CHECK(s->faults.cut_after_text);

  const std::string prefix(kRulePrefix);
  CHECK(s->KindOf(prefix + "package_aide_installed", 1) == AttemptKind::kFix);
  CHECK(s->KindOf(prefix + "sysctl_net_ipv4_tcp_syncookies", 1) == AttemptKind::kWrong);
  CHECK(s->KindOf(prefix + "sysctl_net_ipv4_tcp_syncookies", 2) == AttemptKind::kFix);
  CHECK(s->KindOf("accounts_tmout", 1) == AttemptKind::kFixAndRegress);  // listed by full id, asked by short
  CHECK(s->KindOf(prefix + "accounts_tmout", 2) == AttemptKind::kFix);
  for (int attempt = 1; attempt <= 5; ++attempt)
    CHECK(s->KindOf("grub2_audit_argument", attempt) == AttemptKind::kWrong);
  CHECK(s->For("partition_for_tmp").skip);
  CHECK_FALSE(s->For("package_aide_installed").skip);
  CHECK(s->KindOf("sshd_set_idle_timeout", 2) == AttemptKind::kWrong);
  CHECK(s->KindOf("sshd_set_idle_timeout", 3) == AttemptKind::kFix);
  REQUIRE(s->For("sshd_set_idle_timeout").reengage.has_value());
  CHECK(*s->For("sshd_set_idle_timeout").reengage == Reengage::kEscalate);
  CHECK_FALSE(s->For("package_aide_installed").reengage.has_value());
  CHECK(s->KindOf("sshd_disable_root_login", 1) == AttemptKind::kWrong);
  CHECK(s->KindOf("sshd_disable_root_login", 2) == AttemptKind::kFixAndRegress);
  CHECK(s->KindOf("sshd_disable_root_login", 3) == AttemptKind::kFix);
}

TEST_CASE("script errors name the file, line, column and field") {
  CHECK(ErrorOf("rules:\n  x: {wrong_frist: 1}\n") ==
        "script.yaml:2:7: rules.x.wrong_frist: unknown key 'wrong_frist' (did you mean 'wrong_first'?); the keys are "
        "wrong_first, regress_first, unfixable, skip, reengage");
  CHECK(ErrorOf("rules:\n  x: {wrong_first: two}\n") ==
        "script.yaml:2:20: rules.x.wrong_first: expected an integer, got 'two'");
  CHECK(ErrorOf("rules:\n  x: {wrong_first: -1}\n") ==
        "script.yaml:2:20: rules.x.wrong_first: -1 is outside [0, 1000]");
  CHECK_THAT(ErrorOf("rules:\n  x: sometimes\n"),
             Catch::Contains("script.yaml:2:6: rules.x: 'sometimes' is not one of fix"));
  CHECK_THAT(ErrorOf("reengage: pivto\n"), Catch::Contains("(did you mean 'pivot'?)"));
  CHECK_THAT(ErrorOf("tool_call: text\n"),
             Catch::Contains("script.yaml:1:1: tool_call: unknown key 'tool_call' (did you mean 'tool_calls'?)"));
  CHECK_THAT(ErrorOf("faults: {fail_status: 404}\n"),
             Catch::Contains("faults.fail_status: 404 is not one of 429, 500, 502, 503"));
  CHECK_THAT(ErrorOf("rules:\n  x: {skip: yes please}\n"), Catch::Contains("rules.x.skip: expected true or false"));
  CHECK_THAT(ErrorOf("rules:\n  accounts_tmout: fix\n  xccdf_org.ssgproject.content_rule_accounts_tmout: skip\n"),
             Catch::Contains("script.yaml:3:53: rules.xccdf_org.ssgproject.content_rule_accounts_tmout: the rule "
                             "'accounts_tmout' is listed twice"));
  CHECK_THAT(ErrorOf("rules:\n  x: fix\n  x: skip\n"),
             Catch::Contains("script.yaml:3:3: rules.x: the key is repeated"));
  CHECK_THAT(ErrorOf("rules: [a, b]\n"), Catch::Contains("script.yaml:1:8: rules: expected a mapping"));
  CHECK_THAT(ErrorOf("rules:\n  x: {wrong_first: 1\n"), Catch::StartsWith("script.yaml:3:"));  // a syntax error
}

TEST_CASE("a script file is read from disk, a missing one is NotFound naming it") {
  std::string path = temper::testing::TestTempDir() + "/model-script-XXXXXX";
  int fd = mkstemp(path.data());
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << "rules:\n  partition_for_tmp: skip\n";
  auto s = LoadModelScript(path);
  unlink(path.c_str());
  REQUIRE(s.ok());
  CHECK(s->For("partition_for_tmp").skip);

  auto missing = LoadModelScript("/nonexistent/script.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/script.yaml"));
}

TEST_CASE("the example script in tests/data parses") {
  auto s = LoadModelScript(std::string(TEMPER_TEST_DATA_DIR) + "/scripted_model/example.yaml");
  REQUIRE(s.ok());
  CHECK(s->faults.fail_status == 503);
  CHECK(s->KindOf("sysctl_net_ipv4_tcp_syncookies", 1) == AttemptKind::kWrong);
  CHECK(s->KindOf("accounts_tmout", 1) == AttemptKind::kFixAndRegress);
  CHECK(s->For("grub2_audit_argument").unfixable);
  CHECK(s->For("partition_for_tmp").skip);
  CHECK(s->For("sshd_set_idle_timeout").reengage == Reengage::kPivot);
}
