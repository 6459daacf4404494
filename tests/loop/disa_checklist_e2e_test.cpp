// DISA's ids in the exports, end to end, read by the consumer that keys on them: temperd with a
// disa_stigs: directory holding DISA's Ubuntu 20.04 STIG runs a small batch, `temper export` writes
// CKL, CKLB and XCCDF results (once from the directory, once with --disa-stig), and STIG Manager's
// own import parsers (@nuwcdivnpt/stig-manager-client-modules, installed by deploy/setup.sh)
// read each: DISA's benchmark id, the V1R12 revision, SV- rule ids, one review per requirement.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "loop/loop_harness.h"
#include "orchestrator/evidence/checklist_ckl.h"
#include "scripted_model/scripted_answers.h"
#include "skip.h"
#include "stig/scap/disa_stig.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

const std::string kDisaFile =
    std::string(TEMPER_TEST_DATA_DIR) + "/stig/U_CAN_Ubuntu_20-04_LTS_STIG_V1R12_Manual-xccdf.xml";
const std::string kStigManagerModules = std::string(TEMPER_BINARY_DIR) + "/test-tools/node_modules";
const std::string kImportScript = std::string(TEMPER_SOURCE_DIR) + "/tests/consumers/stig_manager_import.cjs";

// What STIG Manager's parser makes of `file` (stig_manager_import.cjs), one entry.
nlohmann::json StigManagerImport(const std::string& format, const std::string& file) {
  ProcessResult r = RunProcess({"/usr/bin/node", kImportScript, kStigManagerModules, format, file});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  nlohmann::json out = nlohmann::json::parse(r.out);
  REQUIRE(out.size() == 1);
  return out[0];
}

// accounts_tmout implements UBTU-20-010013, which DISA's V1R12 calls V-238207 / SV-238207r853404_rule.
constexpr const char* kTmoutVuln = "V-238207";
constexpr const char* kTmoutRule = "SV-238207r853404_rule";

TEST_CASE("checklists with DISA's ids import into STIG Manager as DISA's STIG, every requirement listed",
          "[consumers]") {
  if (!std::filesystem::exists(kStigManagerModules + "/@nuwcdivnpt/stig-manager-client-modules/package.json") ||
      !std::filesystem::exists("/usr/bin/node")) {
    TEMPER_SKIP("STIG Manager's parsers are not installed (deploy/setup.sh installs node and them)");
  }
  auto disa = stig::ReadDisaStig(kDisaFile);
  REQUIRE(disa.ok());
  TempDir disa_dir;
  std::filesystem::copy_file(kDisaFile, disa_dir / "U_CAN_Ubuntu_20-04_LTS_STIG_V1R12_Manual-xccdf.xml");

  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.extra_yaml = "disa_stigs: " + disa_dir.path() + "\n"});
  const TempDir& dir = loop.dir;
  // sshd_disable_root_login is in no DISA requirement: SSG's STIG profile does not select it.
  std::string id = loop.Submit(
      {.rules = {"accounts_tmout", "no_duplicate_uids", "sshd_disable_root_login"}, .max_attempts = 1, .name = "disa"});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  REQUIRE(RulesByShortName(batch)["accounts_tmout"].state() == temper::v1::RULE_STATE_FIXED);

  auto export_to = [&](const std::string& format, const std::string& file, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"export", id, "--format", format, "-o", dir / file};
    args.insert(args.end(), more.begin(), more.end());
    ProcessResult r = loop.Cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return dir / file;
  };

  {  // CKL from the daemon's directory: DISA's STIG whole, valid to DISA's schema
    std::string ckl_path = export_to("ckl", "disa.ckl");
    ProcessResult valid =
        RunProcess({"/usr/bin/xmllint", "--noout", "--nonet", "--schema",
                    std::string(TEMPER_TEST_DATA_DIR) + "/checklist/U_Checklist_Schema_V2.xsd", ckl_path});
    INFO(valid.err);
    CHECK(valid.exit_code == 0);
    auto ckl = evidence::ReadCkl(ReadFileOrEmpty(ckl_path), "disa.ckl");
    REQUIRE(ckl.ok());
    const evidence::ChecklistStig& stig = ckl->stigs.at(0);
    CHECK(evidence::AttributeOf(stig.info, "stigid") == "Canonical_Ubuntu_20-04_LTS_STIG");
    CHECK(evidence::AttributeOf(stig.info, "releaseinfo") == "Release: 12 Benchmark Date: 24 Apr 2024");
    CHECK(evidence::AttributeOf(stig.info, "source") == "STIG.DOD.MIL");
    REQUIRE(stig.vulns.size() == disa->rules.size());
    std::map<std::string, const evidence::ChecklistVuln*> by_vuln;
    for (const auto& v : stig.vulns) by_vuln[evidence::AttributeOf(v.data, "Vuln_Num")] = &v;
    const evidence::ChecklistVuln& tmout = *by_vuln.at(kTmoutVuln);
    CHECK(evidence::AttributeOf(tmout.data, "Rule_ID") == kTmoutRule);
    CHECK(evidence::AttributeOf(tmout.data, "Rule_Ver") == "UBTU-20-010013");
    CHECK(tmout.status == evidence::ChecklistStatus::kNotAFinding);
    CHECK_THAT(tmout.finding_details, Catch::StartsWith("SCAP Security Guide rule accounts_tmout (NotAFinding):"));
    CHECK_THAT(tmout.finding_details, Catch::Contains("TMOUT"));
    // A requirement the batch did not cover is there, not reviewed, saying why.
    const evidence::ChecklistVuln& first = *by_vuln.at("V-238196");
    CHECK(first.status == evidence::ChecklistStatus::kNotReviewed);
    CHECK_THAT(first.comments, Catch::Contains("no rule of batch " + id + " implements UBTU-20-010000"));
    CHECK_THAT(ckl->asset.target_comment,
               Catch::Contains("1 rule of the batch implements no requirement of it: sshd_disable_root_login"));
  }

  // Every format through STIG Manager's parser, DISA's STIG sent by the CLI this time for two.
  std::map<std::string, std::string> files = {
      {"ckl", dir / "disa.ckl"},
      {"cklb", export_to("cklb", "disa.cklb", {"--disa-stig", kDisaFile})},
      {"xccdf", export_to("xccdf", "disa-xccdf.xml", {"--disa-stig", kDisaFile})}};
  for (const auto& [format, file] : files) {
    INFO(format);
    nlohmann::json imported = StigManagerImport(format, file);
    REQUIRE_FALSE(imported.contains("error"));
    CHECK(imported["target"] == "lab");
    REQUIRE(imported["checklists"].size() == 1);
    const nlohmann::json& c = imported["checklists"][0];
    CHECK(c["benchmarkId"] == "Canonical_Ubuntu_20-04_LTS_STIG");
    if (format != "xccdf") CHECK(c["revisionStr"] == "V1R12");  // XCCDF results carry no revision to read
    std::map<std::string, std::string> result_of;
    for (const auto& review : c["reviews"]) result_of[review["ruleId"]] = review["result"];
    CHECK(result_of.size() == disa->rules.size());
    for (const auto& [rule_id, result] : result_of) CHECK(rule_id.starts_with("SV-"));
    CHECK(result_of[kTmoutRule] == "pass");
    // Not reviewed: STIG Manager keeps an unreviewed requirement that carries a comment (ours says
    // why it was not evaluated) as "informational" from a checklist; its XCCDF parser reads no comment.
    CHECK(result_of["SV-238196r653763_rule"] == (format == "xccdf" ? "notchecked" : "informational"));
  }

  {  // The wrong file is refused, naming it
    ProcessResult r = loop.Cli({"export", id, "--format", "ckl", "-o", dir / "x.ckl", "--disa-stig",
                                std::string(TEMPER_TEST_DATA_DIR) + "/stig/xccdf-only.xml"});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("xccdf-only.xml") && Catch::Contains("this is not a DISA STIG"));
    CHECK_FALSE(std::filesystem::exists(dir / "x.ckl"));
  }
}

}  // namespace
}  // namespace temper::testing
