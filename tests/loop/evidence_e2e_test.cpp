// Evidence end to end: temperd with a rootfs target and the scripted model runs a small batch
// (a rule fixed at once, one fixed after a wrong attempt was reverted, one escalated, one already
// passing); every evaluated attempt records what it changed, and `temper export` writes each
// format, each then read by a reader that is not ours: oscap for ARF, xmllint with DISA's schema
// for CKL, a JSON parser for CKLB.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "loop/loop_harness.h"
#include "orchestrator/evidence/checklist_ckl.h"
#include "scripted_model/scripted_answers.h"
#include "stig/change_set.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

std::string DataFile(const std::string& name) { return std::string(TEMPER_TEST_DATA_DIR) + "/checklist/" + name; }

TEST_CASE(
    "a batch's evidence: change sets for kept and reverted attempts, and exports in ARF, CKL, CKLB and HTML "
    "that independent readers accept") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  const TempDir& dir = loop.dir;

  std::string id =
      loop.Submit({.rules = {"accounts_tmout", "banner_etc_issue_net", "is_fips_mode_enabled", "no_duplicate_uids"},
                   .max_attempts = 2,
                   .allow_disruptive = true,  // FIPS mode is disruptive: without it, held, not tried
                   .name = "evidence"});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);

  // Every evaluated attempt, kept or reverted, says what it changed.
  temper::v1::BatchReport report = loop.Report(id);
  std::map<std::string, std::vector<std::pair<std::string, stig::ChangeSet>>> attempts;
  for (const auto& a : report.attempts()) {
    INFO(a.rule_id() << " attempt " << a.number());
    REQUIRE_FALSE(a.changes_json().empty());
    auto changes = stig::ChangeSet::FromJson(a.changes_json());
    REQUIRE(changes.ok());
    attempts[ShortRuleName(a.rule_id())].emplace_back(a.outcome(), *changes);
  }
  REQUIRE(attempts["accounts_tmout"].size() == 1);
  const stig::ChangeSet& tmout = attempts["accounts_tmout"][0].second;
  bool profile_d = false;
  for (const stig::FileChange& f : tmout.files) {
    if (f.path.starts_with("/etc/profile.d/") && f.change == stig::FileChangeKind::kAdded) {
      profile_d = true;
      CHECK(f.diff.find("TMOUT") != std::string::npos);
    }
  }
  CHECK(profile_d);
  REQUIRE(attempts["banner_etc_issue_net"].size() == 2);
  CHECK(attempts["banner_etc_issue_net"][0].first == "reverted");
  std::string wrong_note = scripted::WrongNotePath(std::string(kSsgRulePrefix) + "banner_etc_issue_net");
  bool recorded_wrong = false;
  for (const stig::FileChange& f : attempts["banner_etc_issue_net"][0].second.files) {
    recorded_wrong = recorded_wrong || f.path == wrong_note;
  }
  CHECK(recorded_wrong);  // what the rejected attempt tried, though it was reverted
  CHECK_FALSE(loop.TargetHas(wrong_note));
  // The journal times the listing.
  int timed = 0;
  for (const temper::v1::JournalEvent& e : loop.JournalEvents(id)) {
    if (e.type() != "attempt.kept" && e.type() != "attempt.reverted") continue;
    nlohmann::json data = nlohmann::json::parse(e.data_json());
    CHECK(data.contains("changes_ms"));
    CHECK(data.contains("changes"));
    ++timed;
  }
  CHECK(timed == report.attempts_size());

  // One batch, every format: blocks rather than Catch sections, which would rerun the batch each.
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"export", id});
    return loop.Cli(args);
  };

  {  // ARF: OpenSCAP's own file, valid to oscap
    ProcessResult r = cli({"--format", "arf", "-o", dir / "out-arf.xml"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("wrote"));
    CHECK(ReadFileOrEmpty(dir / "out-arf.xml") == ReadFileOrEmpty(report.results_dir() + "/arf.xml"));
    ProcessResult valid = RunProcess({"/usr/bin/oscap", "ds", "rds-validate", dir / "out-arf.xml"});
    INFO(valid.out << valid.err);
    CHECK(valid.exit_code == 0);
  }
  {  // CKL: valid to DISA's schema, with a status per rule from the evidence
    ProcessResult r = cli({"--format", "ckl", "-o", dir / "out.ckl"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    ProcessResult valid = RunProcess(
        {"/usr/bin/xmllint", "--noout", "--nonet", "--schema", DataFile("U_Checklist_Schema_V2.xsd"), dir / "out.ckl"});
    INFO(valid.err);
    CHECK(valid.exit_code == 0);
    auto ckl = evidence::ReadCkl(ReadFileOrEmpty(dir / "out.ckl"), "out.ckl");
    REQUIRE(ckl.ok());
    std::map<std::string, evidence::ChecklistVuln> vulns;
    for (const auto& v : ckl->stigs.at(0).vulns) vulns[evidence::AttributeOf(v.data, "Vuln_Num")] = v;
    REQUIRE(vulns.size() == 4);
    CHECK(vulns["accounts_tmout"].status == evidence::ChecklistStatus::kNotAFinding);
    CHECK(vulns["banner_etc_issue_net"].status == evidence::ChecklistStatus::kNotAFinding);
    CHECK(vulns["is_fips_mode_enabled"].status == evidence::ChecklistStatus::kOpen);
    CHECK(vulns["no_duplicate_uids"].status == evidence::ChecklistStatus::kNotAFinding);
    CHECK_THAT(vulns["accounts_tmout"].finding_details, Catch::Contains("TMOUT") && Catch::Contains("OVAL definition"));
    CHECK_THAT(vulns["banner_etc_issue_net"].comments, Catch::Contains("Attempt 1: reverted"));
    // Which reference fix a kept attempt ran: the rule, the datastream and the script's sha256.
    CHECK_THAT(vulns["accounts_tmout"].comments,
               Catch::Contains("Commands:\n  reference fix " + std::string(kSsgRulePrefix) +
                               "accounts_tmout from ssg-ubuntu2004-ds.xml, benchmark "
                               "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 (sha256 "));
    CHECK_THAT(vulns["is_fips_mode_enabled"].comments, Catch::Contains("temper: escalated"));
    CHECK_FALSE(evidence::AttributeOf(vulns["accounts_tmout"].data, "Rule_Ver").empty());  // the DISA STIG id
    CHECK_FALSE(evidence::AttributesOf(vulns["accounts_tmout"].data, "CCI_REF").empty());
  }
  {  // XCCDF results need DISA's ids, which nothing here gives
    ProcessResult r = cli({"--format", "xccdf", "-o", dir / "out-xccdf.xml"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("no DISA STIG covers batch") && Catch::Contains("--disa-stig"));
  }
  {  // CKLB: JSON with the fields STIG Viewer 3 reads
    ProcessResult r = cli({"--format", "cklb", "-o", dir / "out.cklb"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    nlohmann::json doc = nlohmann::json::parse(ReadFileOrEmpty(dir / "out.cklb"));
    CHECK(doc["cklb_version"] == "1.0");
    CHECK(doc["target_data"]["host_name"] == "lab");
    REQUIRE(doc["stigs"].size() == 1);
    std::map<std::string, std::string> status;
    for (const auto& rule : doc["stigs"][0]["rules"]) status[rule["group_id"]] = rule["status"];
    CHECK(status["accounts_tmout"] == "not_a_finding");
    CHECK(status["is_fips_mode_enabled"] == "open");
    CHECK(doc["stigs"][0]["size"] == 4);
  }
  {  // HTML: self-contained, with the score and the applied diff; to stdout with -o -
    ProcessResult r = cli({"--format", "html", "-o", "-"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.starts_with("<!DOCTYPE html>"));
    CHECK(r.out.find("<script") == std::string::npos);
    CHECK(r.out.find("Score before:") != std::string::npos);
    CHECK(r.out.find("TMOUT") != std::string::npos);
    CHECK(r.out.find("Why temper gave up") != std::string::npos);
  }
  {  // errors name the problem
    ProcessResult unknown = loop.Cli({"export", "999", "--format", "ckl", "-o", dir / "none.ckl"});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, Catch::Contains("999"));
    CHECK_FALSE(std::filesystem::exists(dir / "none.ckl"));
    ProcessResult format = cli({"--format", "pdf"});
    CHECK(format.exit_code == 2);
  }
}

}  // namespace
}  // namespace temper::testing
