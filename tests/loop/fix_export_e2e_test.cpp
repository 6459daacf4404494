// `temper export --format sh|ansible` as an operator meets it: temperd fixes rules on the rootfs
// target "lab" (scripted model, real OpenSCAP), the CLI writes the batch's kept fixes, and the script
// then runs on a second rootfs target's tree over the same root (never touched by a batch) as a fleet
// tool would run it on a host: afterwards OpenSCAP gives there the verdicts the batch reached on lab.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <catch2/catch.hpp>

#include "common/display_text.h"
#include "loop/loop_harness.h"
#include "stig/rootfs_fixture.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE(
    "A batch's kept fixes exported by the CLI as sh reach its verdicts on another target, and as a playbook "
    "hold a block per fix",
    "[e2e][fix_export]") {
  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  const std::vector<std::string> rules = {"accounts_tmout", "accounts_maximum_age_login_defs"};
  std::string id = loop.Submit({.rules = rules, .max_attempts = 2, .name = "to-export"});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  for (const std::string& r : rules) REQUIRE(RulesByShortName(batch)[r].state() == temper::v1::RULE_STATE_FIXED);

  const std::string sh_file = loop.dir / "fixes.sh";
  ProcessResult sh = loop.Cli({"export", id, "--format", "sh", "-o", sh_file});
  INFO(sh.err);
  REQUIRE(sh.exit_code == 0);
  CHECK(sh.err.find("not in the file") == std::string::npos);  // every kept fix has its bundle
  const std::string sh_text = ReadAll(sh_file);
  CHECK(sh_text.find("p='/etc/profile.d/tmout.sh'") != std::string::npos);

  ProcessResult yml = loop.Cli({"export", id, "--format", "ansible", "-o", loop.dir / "fixes.yml"});
  INFO(yml.err);
  REQUIRE(yml.exit_code == 0);
  YAML::Node tasks = YAML::LoadFile(loop.dir / "fixes.yml")[0]["tasks"];
  REQUIRE(tasks.size() == rules.size());
  for (size_t i = 0; i < tasks.size(); ++i) CHECK(tasks[i]["block"].size() > 0);

  // Another target over the same root, as a host the script is run on: chrooted into its tree, a
  // dry run first.
  stig::testing::ScopedTarget fleet("fleet1");
  const std::string fleet_root = fleet->root();
  std::filesystem::copy_file(sh_file, fleet_root + "/root/temper-fixes.sh");
  const std::string before = ReadAll(fleet_root + "/etc/login.defs");
  ProcessResult dry = RunProcess({"/usr/sbin/chroot", fleet_root, "/bin/sh", "/root/temper-fixes.sh", "--check"});
  INFO(dry.out << dry.err);
  CHECK(dry.exit_code == 2);
  CHECK(ReadAll(fleet_root + "/etc/login.defs") == before);
  ProcessResult run = RunProcess({"/usr/sbin/chroot", fleet_root, "/bin/sh", "/root/temper-fixes.sh"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  ProcessResult again = RunProcess({"/usr/sbin/chroot", fleet_root, "/bin/sh", "/root/temper-fixes.sh"});
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("temper: 0 change(s) made") != std::string::npos);
  std::filesystem::remove(fleet_root + "/root/temper-fixes.sh");

  auto content = stig::Content::Load(std::string(stig::kUbuntu2004Datastream), "stig");
  REQUIRE(content.ok());
  static const Logger quiet(LogLevel::kWarning);
  stig::Evaluator evaluator(*content, {}, quiet);
  auto evaluated = evaluator.Evaluate(fleet_root, {.rule_ids = rules});
  INFO(evaluated.status().ToString());
  REQUIRE(evaluated.ok());
  for (const stig::RuleVerdict& v : evaluated->verdicts) {
    INFO(v.rule_id);
    CHECK(stig::VerdictName(v.verdict) == RulesByShortName(batch)[ShortRuleName(v.rule_id)].after_verdict());
  }
}

}  // namespace
}  // namespace temper::testing
