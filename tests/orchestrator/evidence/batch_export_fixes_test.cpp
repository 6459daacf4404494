// ExportBatch's ansible and sh formats read a batch's kept fixes from the store: the kept attempts
// not since reverted, in the order the batch committed them, with the bundles stored beside them;
// kept fixes without a bundle are named, not dropped silently.
#include <filesystem>

#include <yaml-cpp/yaml.h>
#include <catch2/catch.hpp>

#include "orchestrator/evidence/batch_export.h"
#include "orchestrator/evidence/fix_bundle_builders.h"
#include "scratch_space.h"

namespace temper::evidence {
namespace {

using testing::Changed;
using testing::FileWith;

const std::string kPrefix = "xccdf_org.ssgproject.content_rule_";

struct StoreWithBatch {
  testing::ScratchPath dir{"batch-export-fixes"};
  std::unique_ptr<StateStore> store;
  int64_t batch_id = 0;

  StoreWithBatch() {
    std::filesystem::create_directories(dir.path());
    auto opened = StateStore::Open(dir.path() + "/state.db");
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    store = std::move(*opened);
    NewBatch b;
    b.name = "fleet";
    b.target = "twin";
    b.datastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
    b.profile = "stig";
    for (const char* r : {"a", "b", "c", "d", "e"}) b.rule_ids.push_back(kPrefix + r);
    auto submitted = store->SubmitBatch(b);
    REQUIRE(submitted.ok());
    batch_id = submitted->batch.id;
  }

  // Returns the attempt's id.
  int64_t Attempt(const std::string& rule, AttemptOutcome outcome, std::string fix_json,
                  std::optional<uint32_t> snapshot) {
    AttemptRecord a;
    a.batch_id = batch_id;
    a.rule_id = kPrefix + rule;
    a.number = 1;
    a.outcome = outcome;
    a.verdict = outcome == AttemptOutcome::kKept ? "pass" : "fail";
    a.fix_json = std::move(fix_json);
    a.snapshot = snapshot;
    auto id = store->RecordAttempt(a);
    INFO(id.status().ToString());
    REQUIRE(id.ok());
    return *id;
  }

  Result<ExportedFile> Export(ExportFormat format) {
    ExportSources sources{*store,
                          [](const BatchRecord&) -> Result<const stig::Content*> {
                            return Status::NotFound("no content here: the export goes without titles");
                          },
                          dir.path() + "/results"};
    return ExportBatch(sources, batch_id, format);
  }
};

std::string BundleJson(const std::string& path, const std::string& content) {
  stig::FixBundle bundle;
  bundle.files.push_back(Changed(path, std::nullopt, FileWith(content)));
  return bundle.ToJson();
}

TEST_CASE("The ansible and sh exports carry the kept fixes in commit order and name those without a bundle",
          "[evidence][fix_playbook]") {
  StoreWithBatch s;
  // b's change landed first (snapshot 3) although a's attempt was recorded first: attempts at once.
  s.Attempt("a", AttemptOutcome::kKept, BundleJson("/etc/a.conf", "a=1\n"), 5);
  s.Attempt("b", AttemptOutcome::kKept, BundleJson("/etc/b.conf", "b=1\n"), 3);
  s.Attempt("c", AttemptOutcome::kKept, "", 6);  // found on an SSH host: no bundle
  s.Attempt("d", AttemptOutcome::kReverted, BundleJson("/etc/d.conf", "d=1\n"), std::nullopt);
  int64_t e = s.Attempt("e", AttemptOutcome::kKept, BundleJson("/etc/e.conf", "e=1\n"), 7);
  RevertStep revert;  // temper revert BATCH e
  revert.batch_id = s.batch_id;
  revert.reverted_attempts = {e};
  REQUIRE(s.store->CommitRevert(revert).ok());

  Result<ExportedFile> playbook = s.Export(ExportFormat::kAnsible);
  INFO(playbook.status().ToString());
  REQUIRE(playbook.ok());
  CHECK(playbook->file_name == "batch-" + std::to_string(s.batch_id) + ".yml");
  CHECK(playbook->media_type == "application/yaml");
  CHECK(playbook->not_carried == std::vector<std::string>{kPrefix + "c"});
  YAML::Node tasks = YAML::Load(playbook->content)[0]["tasks"];
  REQUIRE(tasks.size() == 2);
  CHECK(tasks[0]["name"].as<std::string>() == kPrefix + "b");
  CHECK(tasks[1]["name"].as<std::string>() == kPrefix + "a");
  CHECK(playbook->content.find("#   " + kPrefix + "c\n") != std::string::npos);
  for (const char* gone : {"/etc/d.conf", "/etc/e.conf"}) CHECK(playbook->content.find(gone) == std::string::npos);

  Result<ExportedFile> script = s.Export(ExportFormat::kSh);
  REQUIRE(script.ok());
  CHECK(script->file_name == "batch-" + std::to_string(s.batch_id) + ".sh");
  CHECK(script->media_type == "text/x-shellscript");
  CHECK(script->not_carried == std::vector<std::string>{kPrefix + "c"});
  size_t b_at = script->content.find("p='/etc/b.conf'"), a_at = script->content.find("p='/etc/a.conf'");
  REQUIRE(b_at != std::string::npos);
  REQUIRE(a_at != std::string::npos);
  CHECK(b_at < a_at);

  CHECK(ParseExportFormat("ansible").ok());
  CHECK(ParseExportFormat("sh").ok());
  CHECK(ParseExportFormat("puppet").status().message() ==
        "format: \"puppet\" is not one of arf, ckl, cklb, xccdf, html, ansible, sh");
}

TEST_CASE("A stored bundle that does not read fails the export, naming the attempt", "[evidence][fix_playbook]") {
  StoreWithBatch s;
  s.Attempt("a", AttemptOutcome::kKept, R"({"files":[{"path":"relative"}]})", 1);
  Result<ExportedFile> playbook = s.Export(ExportFormat::kAnsible);
  REQUIRE_FALSE(playbook.ok());
  CHECK(playbook.status().code() == StatusCode::kDataLoss);
  CHECK(playbook.status().message().find("the stored fix of attempt") != std::string::npos);
  CHECK(playbook.status().message().find(kPrefix + "a") != std::string::npos);
}

}  // namespace
}  // namespace temper::evidence
