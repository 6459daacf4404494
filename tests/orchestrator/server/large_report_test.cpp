// A whole-profile batch's report and exports through the real daemon (issue 22): a batch of every
// rule of the Ubuntu 20.04 STIG profile, with about as many attempts as the loop makes on it and
// outputs as long as real ones (change sets of package installs, long evidence), is written
// through the real state store; the real temperd serves it over its real socket, and the real
// `temper report` (every format) and `temper export` (every format) read it. Its report is well
// over gRPC's default 4 MiB message, and one rule's history holds an attempt that alone is over it.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/cli/report_render.h"
#include "orchestrator/daemon_process.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/store/state_store.h"
#include "skip.h"
#include "stig/change_set.h"
#include "stig/scap/content.h"

namespace temper::testing {
namespace {

constexpr const char* kContentDir = "/usr/share/xml/scap/ssg/content";
constexpr const char* kDatastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
constexpr size_t kGrpcDefaultLimit = 4 << 20;

// Text of about `bytes` bytes, different for each `seed`, in lines as a command's output is.
std::string Filler(const std::string& seed, size_t bytes) {
  std::string out;
  for (int line = 0; out.size() < bytes; ++line) out += fmt::format("{} line {}: {:.<60}\n", seed, line, "");
  return out;
}

// What an attempt changed: `files` files changed with a diff of `diff_bytes` each, and `added`
// files of a package installed (a package's file list is what makes a change set long).
std::string ChangesJson(const std::string& seed, int files, size_t diff_bytes, int added,
                        const std::string& last_path = "") {
  stig::ChangeSet set;
  for (int i = 0; i < files; ++i) {
    stig::FileChange f;
    f.path = fmt::format("/etc/{}/file-{}.conf", seed, i);
    f.before = stig::FileState{.mode = 0644, .size = 100};
    f.after = stig::FileState{.mode = 0600, .size = 200};
    f.diff = fmt::format("--- a{0}\n+++ b{0}\n@@ -1 +1 @@\n", f.path) + Filler("+" + seed, diff_bytes);
    set.files.push_back(std::move(f));
  }
  for (int i = 0; i < added; ++i) {
    stig::FileChange f;
    f.path = fmt::format("/usr/share/doc/{}-package/part-{:05}/file.txt", seed, i);
    f.change = stig::FileChangeKind::kAdded;
    f.after = stig::FileState{.mode = 0644, .size = 1234};
    set.files.push_back(std::move(f));
  }
  if (!last_path.empty()) {
    stig::FileChange f;
    f.path = last_path;
    f.change = stig::FileChangeKind::kAdded;
    f.after = stig::FileState{.mode = 0644, .size = 1};
    set.files.push_back(std::move(f));
  }
  std::sort(set.files.begin(), set.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  set.packages.installed = {seed + "-package 1.0-1"};
  return set.ToJson();
}

struct LargeBatch {
  int64_t id = 0;
  std::vector<std::string> rules;
  std::string biggest_rule;    // the rule with the longest history
  std::string last_approach;   // its last attempt's approach: found only where that attempt is whole
  std::string last_path;       // the last file of that attempt's change set
  size_t biggest_attempt = 0;  // bytes of that attempt's change set alone
  size_t attempts = 0;
};

// A completed whole-profile batch on target "lab", written through the real state store the way
// the loop writes one: per rule its verdicts, attempts with lessons, final states; the fixpoint's
// pass; and the final evaluation's results (an ARF file of `arf_bytes`).
LargeBatch WriteLargeBatch(const std::string& db, const std::string& results_root,
                           const std::vector<std::string>& rules, size_t arf_bytes) {
  auto opened = StateStore::Open(db);
  REQUIRE(opened.ok());
  StateStore& store = **opened;
  NewBatch nb{.name = "whole profile",
              .target = "lab",
              .datastream = kDatastream,
              .profile = "xccdf_org.ssgproject.content_profile_stig",
              .whole_profile = true};
  auto submitted = store.SubmitBatch(nb);
  REQUIRE(submitted.ok());
  LargeBatch out;
  out.id = submitted->batch.id;
  out.rules = rules;
  out.biggest_rule = rules[1];

  LoopStep expand{.batch_id = out.id, .add_rules = rules, .batch_state = BatchState::kRunning};
  for (size_t i = 0; i < rules.size(); ++i) {
    expand.rules.push_back({.rule_id = rules[i], .before_verdict = std::string(i % 3 == 2 ? "pass" : "fail")});
  }
  REQUIRE(store.CommitStep(expand).ok());

  auto attempt = [&](size_t rule_index, uint32_t number, bool kept, std::string changes) {
    const std::string& rule = rules[rule_index];
    std::string seed = fmt::format("r{}a{}", rule_index, number);
    AttemptRecord a{.batch_id = out.id,
                    .rule_id = rule,
                    .number = number,
                    .approach = fmt::format("approach {} for {}", number, rule),
                    .commands = {fmt::format("sed -i 's/^#{}/{}/' /etc/{}.conf", seed, seed, seed),
                                 fmt::format("systemctl restart {}", seed)},
                    .verdict = kept ? "pass" : "fail",
                    .outcome = kept ? AttemptOutcome::kKept : AttemptOutcome::kReverted,
                    .evidence = Filler("evidence " + seed, 6000),
                    .reflection = kept ? "" : Filler("reflection " + seed, 1500),
                    .changes_json = std::move(changes),
                    .usage = {.prompt_tokens = 1000 + number, .completion_tokens = 200},
                    .started_at = 1'700'000'000'000 + number * 1000,
                    .finished_at = 1'700'000'000'500 + number * 1000};
    if (rule_index == 1 && number == 12) a.approach = out.last_approach;
    LoopStep step{.batch_id = out.id};
    step.attempt = a;
    if (!kept) {
      step.lesson = LessonRecord{.rule_id = rule, .batch_id = out.id, .text = "lesson of " + seed, .utility = 0.5};
    }
    step.rules.push_back({.rule_id = rule, .add_attempts = 1, .add_tokens = 1200});
    REQUIRE(store.CommitStep(step).ok());
    ++out.attempts;
  };
  out.last_approach = "the twelfth and last attempt on the biggest rule";
  out.last_path = "/usr/share/doc/the-last-file-of-the-biggest-attempt";

  for (size_t i = 0; i < rules.size(); ++i) {
    if (i % 3 == 2) {
      REQUIRE(store
                  .CommitStep({.batch_id = out.id,
                               .rules = {{.rule_id = rules[i],
                                          .state = RuleState::kAlreadyPassing,
                                          .detail = "passed before any change",
                                          .after_verdict = "pass"}}})
                  .ok());
      continue;
    }
    RuleUpdate final{.rule_id = rules[i], .state = RuleState::kFixed, .after_verdict = "pass"};
    if (i == 1) {
      // The biggest history: eleven rejected attempts with long change sets, then a kept one
      // whose change set (a package with twenty thousand files) is alone over 4 MiB.
      for (uint32_t n = 1; n <= 11; ++n) attempt(i, n, false, ChangesJson(fmt::format("big{}", n), 6, 40'000, 500));
      std::string last = ChangesJson("big12", 40, 50'000, 20'000, out.last_path);
      out.biggest_attempt = last.size();
      attempt(i, 12, true, std::move(last));
      final.detail = "fixed on attempt 12";
    } else if (i % 20 == 4) {
      for (uint32_t n = 1; n <= 3; ++n) attempt(i, n, false, ChangesJson(fmt::format("esc{}n{}", i, n), 3, 8'000, 20));
      final.state = RuleState::kEscalated;
      final.detail = "attempt budget spent: 3 attempts failed";
      final.after_verdict = "fail";
    } else if (i % 7 == 3) {
      attempt(i, 1, false, ChangesJson(fmt::format("w{}", i), 3, 8'000, 20));
      attempt(i, 2, true, ChangesJson(fmt::format("k{}", i), 3, 8'000, 20));
      final.detail = "fixed on attempt 2";
    } else {
      attempt(i, 1, true, ChangesJson(fmt::format("k{}", i), 3, 8'000, 20));
      final.detail = "fixed on attempt 1";
    }
    REQUIRE(store.CommitStep({.batch_id = out.id, .rules = {final}}).ok());
  }

  // The final evaluation's results, as the loop leaves them: an ARF file whose TestResult holds
  // every rule (a whole profile's ARF is over 10 MB; here the rest is filler).
  std::string after = fmt::format("{}/batch-{}/after", results_root, out.id);
  std::filesystem::create_directories(after);
  std::string arf =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<arf:asset-report-collection xmlns:arf=\"http://scap.nist.gov/schema/asset-reporting-format/1.1\" "
      "xmlns:xccdf=\"http://checklists.nist.gov/xccdf/1.2\">\n<arf:reports>\n"
      "<arf:report id=\"xccdf1\"><arf:content><xccdf:TestResult id=\"xccdf_org.open-scap_testresult_stig\">\n";
  for (const std::string& r : rules) {
    arf += fmt::format("<xccdf:rule-result idref=\"{}\"><xccdf:result>pass</xccdf:result></xccdf:rule-result>\n", r);
  }
  arf += "</xccdf:TestResult></arf:content></arf:report>\n<arf:report id=\"filler\"><arf:content><filler>\n";
  while (arf.size() < arf_bytes) arf += "<item>" + Filler("collected item", 1 << 16) + "</item>\n";
  arf += "</filler></arf:content></arf:report>\n</arf:reports>\n</arf:asset-report-collection>\n";
  std::ofstream(after + "/arf.xml", std::ios::binary) << arf;

  FixpointPass pass{.pass = 1, .final = true, .verdicts = {{"pass", static_cast<uint32_t>(rules.size())}}};
  pass.attempts = static_cast<uint32_t>(out.attempts);
  REQUIRE(
      store
          .CommitStep(
              {.batch_id = out.id, .batch_state = BatchState::kCompleted, .fixpoint_pass = pass, .results_dir = after})
          .ok());
  return out;
}

// The report as the store holds it, in the shape temper.v1 gives it: what `temper report` must show.
temper::v1::BatchReport StoredReport(const std::string& db, int64_t id) {
  auto store = StateStore::Open(db);
  REQUIRE(store.ok());
  auto batch = (*store)->GetBatch(id);
  auto attempts = (*store)->BatchAttempts(id);
  auto lessons = (*store)->BatchLessons(id);
  REQUIRE((batch.ok() && attempts.ok() && lessons.ok()));
  temper::v1::BatchReport report;
  ToProto(*batch, report.mutable_batch());
  for (const AttemptRecord& a : *attempts) ToProto(a, report.add_attempts());
  for (const LessonRecord& l : *lessons) ToProto(l, report.add_lessons());
  report.set_results_dir(batch->results_dir);
  for (const FixpointPass& p : batch->fixpoint) ToProto(p, report.add_fixpoint_passes());
  return report;
}

ProcessResult Cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.insert(args.begin(), {TemperBinary(), "--socket", daemon.socket_path()});
  return RunProcess(args);
}

TEST_CASE("a whole-profile batch's report and every export (each over 4 MiB) read through temperd and temper") {
  if (!std::filesystem::exists(kDatastream)) TEMPER_SKIP("SCAP Security Guide's Ubuntu 20.04 datastream is missing");
  auto content = stig::Content::Load(kDatastream, "stig");
  REQUIRE(content.ok());
  const std::vector<std::string>& rules = content->profile_rule_ids();
  REQUIRE(rules.size() > 150);

  TempDir dir;
  std::filesystem::create_directories(dir / "state");
  LargeBatch batch = WriteLargeBatch(dir / "state/temper.db", dir / "state/results", rules, 12 << 20);
  temper::v1::BatchReport stored = StoredReport(dir / "state/temper.db", batch.id);
  INFO(fmt::format("{} rules, {} attempts; the report is {} bytes, the biggest attempt's change set {} bytes",
                   rules.size(), batch.attempts, stored.ByteSizeLong(), batch.biggest_attempt));
  REQUIRE(stored.ByteSizeLong() > 2 * kGrpcDefaultLimit);
  REQUIRE(batch.biggest_attempt > kGrpcDefaultLimit);
  REQUIRE(stored.attempts_size() == static_cast<int>(batch.attempts));

  DaemonProcess daemon(dir, {.content_dirs = {kContentDir}});
  REQUIRE(daemon.Start().ok());
  const std::string id = std::to_string(batch.id);

  // `temper report`: every format prints what the whole stored report renders to, byte for byte.
  ProcessResult json = Cli(daemon, {"report", id, "--format", "json"});
  INFO(json.err);
  REQUIRE(json.exit_code == 0);
  CHECK(json.out == cli::RenderReportJson(stored));
  nlohmann::json parsed = nlohmann::json::parse(json.out);
  REQUIRE(parsed["rules"].size() == rules.size());
  for (size_t i = 0; i < rules.size(); ++i) CHECK(parsed["rules"][i]["rule_id"] == rules[i]);
  const nlohmann::json& biggest = parsed["rules"][1];
  CHECK(biggest["rule_id"] == batch.biggest_rule);
  REQUIRE(biggest["history"].size() == 12);
  CHECK(biggest["history"][11]["approach"] == batch.last_approach);
  CHECK(biggest["history"][11]["outcome"] == "kept");
  CHECK(parsed["summary"]["attempts"] == batch.attempts);

  ProcessResult text = Cli(daemon, {"report", id});
  CHECK(text.exit_code == 0);
  CHECK(text.out == cli::RenderReportText(stored));
  ProcessResult markdown = Cli(daemon, {"report", id, "--format", "markdown"});
  CHECK(markdown.exit_code == 0);
  CHECK(markdown.out == cli::RenderReportMarkdown(stored));

  // `temper export`: the ARF file byte for byte; the checklists and the HTML report with every
  // rule and the biggest rule's last attempt.
  std::string arf_file = dir / "export.arf.xml";
  ProcessResult arf = Cli(daemon, {"export", id, "--format", "arf", "-o", arf_file});
  INFO(arf.err);
  REQUIRE(arf.exit_code == 0);
  std::string arf_bytes = ReadFileOrEmpty(arf_file);
  CHECK(arf_bytes.size() > 2 * kGrpcDefaultLimit);
  CHECK(arf_bytes == ReadFileOrEmpty(fmt::format("{}/state/results/batch-{}/after/arf.xml", dir.path(), batch.id)));
  for (const char* format : {"ckl", "cklb", "html"}) {
    std::string file = dir / fmt::format("export.{}", format);
    ProcessResult exported = Cli(daemon, {"export", id, "--format", format, "-o", file});
    INFO(format << ": " << exported.err);
    REQUIRE(exported.exit_code == 0);
    std::string body = ReadFileOrEmpty(file);
    CHECK(body.size() > kGrpcDefaultLimit / 4);
    for (const std::string& r : rules) CHECK(body.find(r) != std::string::npos);
    CHECK(body.find(batch.last_approach) != std::string::npos);
    if (std::string(format) == "html") {
      CHECK(body.size() > 2 * kGrpcDefaultLimit);
      CHECK(body.find(batch.last_path) != std::string::npos);
    }
  }
}

}  // namespace
}  // namespace temper::testing
