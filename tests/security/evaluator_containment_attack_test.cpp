// Attacks on the evaluator's containment (issue 20): whoever controls a target's files (the Worker,
// an SSG fix, a compromised package) plants absolute symlinks to host paths, hoping OpenSCAP reads
// them on the host and puts what it found into OVAL evidence, results.xml and arf.xml (which feed
// model prompts and exports). Each case plants the link with the Worker's own tool (a command in
// the target's sandbox), evaluates rules whose OVAL objects read that path, and requires that the
// host's unique marker appears nowhere in what the evaluation produced.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"
#include "stig/rootfs_fixture.h"
#include "stig/scap/evaluator.h"
#include "stig/scap/oval_evidence.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

using temper::testing::TempDir;
using testing::QuietLog;
using testing::ScopedTarget;
using testing::Ubuntu2004Stig;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A string no file of the shared root or of OpenSCAP's content contains.
std::string UniqueMarker(const std::string& what) {
  std::random_device rd;
  return fmt::format("TEMPER-HOST-{}-{}-{:08x}", what, ::getpid(), rd());
}

// Runs `command` in the target's sandbox, as the Worker's run_command would.
void RunInTarget(RootfsTarget& t, const std::string& command) {
  SandboxLimits limits;
  limits.timeout = std::chrono::seconds(60);
  auto r = t.Run(command, limits);
  REQUIRE(r.ok());
  INFO(command << ": " << r->err);
  REQUIRE(r->Succeeded());
}

// Evaluates `rules` with results files and returns everything the evaluation produced as text:
// the verdicts, results.xml, arf.xml and the OVAL evidence read back from the ARF.
std::string EvaluationOutput(RootfsTarget& t, const std::vector<std::string>& rules, const std::string& out_dir) {
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  auto e = t.Evaluate(ev, {.rule_ids = rules, .output_dir = out_dir});
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  std::string all;
  for (const RuleVerdict& v : e->verdicts) all += v.rule_id + " " + std::string(VerdictName(v.verdict)) + "\n";
  all += Slurp(e->results_path);
  all += Slurp(e->arf_path);
  auto evidence = ReadOvalEvidence(e->arf_path);
  REQUIRE(evidence.ok());
  for (const RuleEvidence& r : *evidence) all += r.Text();  // what reports and prompts show
  return all;
}

TEST_CASE("Target symlink to a host file: the host file's content leaks into no verdict, results or ARF",
          "[security][evaluator]") {
  ScopedTarget t("leak-host-file");
  TempDir host;
  const std::string secret = UniqueMarker("FILE");
  // Shaped as a banner, so the banner rule's pattern (^(.*)$ on /etc/issue.net) would capture it.
  const std::string host_file = host.Write("secret-banner", "Authorized uses only. " + secret + "\n");
  RunInTarget(*t, "rm -f /etc/issue.net && ln -s " + host_file + " /etc/issue.net");

  std::string out = EvaluationOutput(*t, {"banner_etc_issue_net"}, host / "results");
  CHECK(out.find(secret) == std::string::npos);
}

TEST_CASE("Target symlink to a host directory: a file walk enumerates no host file", "[security][evaluator]") {
  ScopedTarget t("leak-host-dir");
  TempDir host;
  const std::string name = UniqueMarker("DIR");
  host.Write("walked/" + name, "host data\n");
  host.Write("walked/sub/" + name + "-nested", "host data\n");
  // /var/log/audit is walked recursively (file_permissions_var_log_audit), /var/log one level deep
  // (permissions_local_var_log): point the first at the host directory.
  RunInTarget(*t, "mkdir -p /var/log && rm -rf /var/log/audit && ln -s " + (host / "walked") + " /var/log/audit");

  std::string out =
      EvaluationOutput(*t, {"file_permissions_var_log_audit", "permissions_local_var_log"}, host / "results");
  CHECK(out.find(name) == std::string::npos);
}

}  // namespace
}  // namespace temper::stig
