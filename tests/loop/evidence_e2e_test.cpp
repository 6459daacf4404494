// Evidence end to end: temperd with a rootfs target and the scripted model runs a small batch
// (a rule fixed at once, one fixed after a wrong attempt was reverted, one escalated, one already
// passing); every evaluated attempt records what it changed, and `temper export` writes each
// format, each then read by a reader that is not ours: oscap for ARF, xmllint with DISA's schema
// for CKL, a JSON parser for CKLB.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "orchestrator/daemon_process.h"
#include "orchestrator/evidence/checklist_ckl.h"
#include "scripted_model/scripted_answers.h"
#include "scripted_model/scripted_model_server.h"
#include "stig/change_set.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

constexpr const char* kPrefix = "xccdf_org.ssgproject.content_rule_";

std::string SharedRoot() { return std::string(TEMPER_BINARY_DIR) + "/stig-rootfs/root"; }
std::string DataFile(const std::string& name) { return std::string(TEMPER_TEST_DATA_DIR) + "/checklist/" + name; }

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

std::string ShortName(const std::string& id) { return id.substr(std::string(kPrefix).size()); }

TEST_CASE("a batch's evidence: change sets for kept and reverted attempts, and exports in ARF, CKL, CKLB and HTML "
          "that independent readers accept") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  TempDir dir;
  std::filesystem::create_directories(dir / "lab");
  std::filesystem::create_directory_symlink(SharedRoot(), dir / "lab/root");
  DaemonOptions options;
  options.models_yaml = fmt::format(R"(endpoints:
  scripted: {{type: openai, base_url: "{}", model: temper-scripted, timeout: 60s, max_retries: 2}}
roles:
  architect: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  worker: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  reflector: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 1024}}
)",
                                    (*server)->base_url());
  options.content_dir = "/usr/share/xml/scap/ssg/content";
  options.lab_path = dir / "lab";
  DaemonProcess daemon(dir, options);
  REQUIRE(daemon.Start().ok());

  temper::v1::SubmitBatchRequest req;
  req.set_name("evidence");
  req.set_target("lab");
  req.set_datastream("ssg-ubuntu2004-ds.xml");
  req.set_profile("stig");
  for (const char* r : {"accounts_tmout", "banner_etc_issue_net", "is_fips_mode_enabled", "no_duplicate_uids"}) {
    req.add_rule_ids(r);
  }
  req.mutable_budgets()->set_max_attempts(2);
  req.set_allow_disruptive(true);  // FIPS mode is disruptive: without the opt-in it would be held, not tried
  temper::v1::Batch batch;
  REQUIRE(daemon.Stub()->SubmitBatch(Ctx().get(), req, &batch).ok());
  std::string id = batch.id();

  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  temper::v1::GetBatchRequest get;
  get.set_batch_id(id);
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(daemon.Stub()->GetBatch(Ctx().get(), get, &batch).ok());
    if (batch.state() == temper::v1::BATCH_STATE_COMPLETED || batch.state() == temper::v1::BATCH_STATE_FAILED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  INFO(daemon.Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);

  // Every evaluated attempt, kept or reverted, says what it changed.
  temper::v1::GetBatchReportRequest report_req;
  report_req.set_batch_id(id);
  temper::v1::BatchReport report;
  REQUIRE(daemon.Stub()->GetBatchReport(Ctx().get(), report_req, &report).ok());
  std::map<std::string, std::vector<std::pair<std::string, stig::ChangeSet>>> attempts;
  for (const auto& a : report.attempts()) {
    INFO(a.rule_id() << " attempt " << a.number());
    REQUIRE_FALSE(a.changes_json().empty());
    auto changes = stig::ChangeSet::FromJson(a.changes_json());
    REQUIRE(changes.ok());
    attempts[ShortName(a.rule_id())].emplace_back(a.outcome(), *changes);
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
  std::string wrong_note = scripted::WrongNotePath(std::string(kPrefix) + "banner_etc_issue_net");
  bool recorded_wrong = false;
  for (const stig::FileChange& f : attempts["banner_etc_issue_net"][0].second.files) {
    recorded_wrong = recorded_wrong || f.path == wrong_note;
  }
  CHECK(recorded_wrong);  // what the rejected attempt tried, though it was reverted
  CHECK_FALSE(std::filesystem::exists(dir / ("lab/state/merged" + wrong_note)));
  // The journal times the listing.
  temper::v1::WatchJournalRequest watch;
  watch.set_batch_id(id);
  watch.set_follow(false);
  auto ctx = Ctx();
  auto stub = daemon.Stub();
  auto reader = stub->WatchJournal(ctx.get(), watch);
  temper::v1::JournalEvent e;
  int timed = 0;
  while (reader->Read(&e)) {
    if (e.type() != "attempt.kept" && e.type() != "attempt.reverted") continue;
    nlohmann::json data = nlohmann::json::parse(e.data_json());
    CHECK(data.contains("changes_ms"));
    CHECK(data.contains("changes"));
    ++timed;
  }
  REQUIRE(reader->Finish().ok());
  CHECK(timed == report.attempts_size());

  // One batch, every format: blocks rather than Catch sections, which would rerun the batch each.
  auto cli = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {TemperBinary(), "--socket", daemon.socket_path(), "export", id};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
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
    ProcessResult valid = RunProcess({"/usr/bin/xmllint", "--noout", "--nonet", "--schema", DataFile("U_Checklist_Schema_V2.xsd"),
                                      dir / "out.ckl"});
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
    CHECK_THAT(vulns["is_fips_mode_enabled"].comments, Catch::Contains("temper: escalated"));
    CHECK_FALSE(evidence::AttributeOf(vulns["accounts_tmout"].data, "Rule_Ver").empty());  // the DISA STIG id
    CHECK_FALSE(evidence::AttributesOf(vulns["accounts_tmout"].data, "CCI_REF").empty());
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
    ProcessResult unknown = RunProcess({TemperBinary(), "--socket", daemon.socket_path(), "export", "999", "--format", "ckl",
                                        "-o", dir / "none.ckl"});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, Catch::Contains("999"));
    CHECK_FALSE(std::filesystem::exists(dir / "none.ckl"));
    ProcessResult format = cli({"--format", "pdf"});
    CHECK(format.exit_code == 2);
  }
}

}  // namespace
}  // namespace temper::testing
