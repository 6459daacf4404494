// Batches of any size through the real daemon (issue 22). A batch of every rule of the Ubuntu
// 20.04 STIG profile, with about as many attempts as the loop makes on it and outputs as long as
// real ones (change sets of package installs, long evidence), is written through the real state
// store; the real temperd serves it over its real socket, and the real `temper report` (every
// format) and `temper export` (every format) read it. Its report is well over gRPC's default 4 MiB
// message, and one rule's history holds an attempt that alone is over it. A second case takes
// every other answer that grows with a batch (a batch's rules, the batch list, a rule's memory,
// the host list) past one message. Both read through a client that refuses any message over
// 1 MiB and a little: nothing temperd sends may come near the 4 MiB limit.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <google/protobuf/util/message_differencer.h>

#include "orchestrator/cli/report_render.h"
#include "orchestrator/daemon_process.h"
#include "orchestrator/message_chunks.h"
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

// A client that refuses any message larger than a chunk and a margin for framing.
std::unique_ptr<temper::v1::Temper::Stub> TightStub(const DaemonProcess& daemon) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kChunkBytes + (64 << 10)));
  return temper::v1::Temper::NewStub(
      grpc::CreateCustomChannel("unix:" + daemon.socket_path(), grpc::InsecureChannelCredentials(), args));
}

bool Same(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
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

  // Over gRPC: the chunks put together are the stored report, none of them over a chunk.
  CHECK(Same(ReadReport(*TightStub(daemon), id), stored));

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

  // A client that stops reading mid-stream holds nothing up: other calls (another whole report
  // among them) are answered meanwhile, and once it cancels, the stream stops.
  auto stub = TightStub(daemon);
  temper::v1::GetBatchReportRequest request;
  request.set_batch_id(id);
  grpc::ClientContext stalled;
  auto reader = stub->GetBatchReport(&stalled, request);
  temper::v1::BatchReportChunk chunk;
  REQUIRE(reader->Read(&chunk));
  temper::v1::GetBatchRequest get;
  get.set_batch_id(id);
  temper::v1::Batch got;
  CHECK(stub->GetBatch(CallContext(5).get(), get, &got).ok());
  CHECK(Cli(daemon, {"report", id, "--format", "json"}).out == json.out);
  CHECK(daemon.Log().find("GetBatchReport 1: the client went away") == std::string::npos);
  stalled.TryCancel();
  reader->Finish();
  // gRPC's sync server wakes a writer blocked on a client that does not read within seconds of
  // the cancel (about 5 s with gRPC 1.51), not at once.
  for (int i = 0; i < 200 && daemon.Log().find("GetBatchReport 1: the client went away") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(daemon.Log().find("GetBatchReport 1: the client went away before the end; the stream stopped") !=
        std::string::npos);
}

TEST_CASE("a batch's rules, the batch list, a rule's memory and the host list come in pieces under one message") {
  TempDir dir;
  std::filesystem::create_directories(dir / "state");
  const std::string rule = "xccdf_org.ssgproject.content_rule_package_aide_installed";
  {
    auto opened = StateStore::Open(dir / "state/temper.db");
    REQUIRE(opened.ok());
    StateStore& store = **opened;
    // Twelve batches whose waivers (written past SubmitBatch's bound, as an older temperd could
    // have) take 200 KiB each, so that a page of the list cannot hold them all.
    for (int b = 0; b < 12; ++b) {
      NewBatch nb{.name = fmt::format("waived {}", b), .target = "lab", .datastream = kDatastream, .profile = "stig"};
      nb.rule_ids = {rule};
      for (int w = 0; w < 100; ++w) {
        nb.options.waivers.push_back(
            {.rule_id = fmt::format("{}_{}", rule, w), .reason = Filler("why", 2000), .owner = "alice"});
      }
      REQUIRE(store.SubmitBatch(nb).ok());
    }
    // A batch of 400 rules whose details take 6 KB each: 2.4 MB of rules.
    NewBatch wide{.name = "wide", .target = "lab", .datastream = kDatastream, .profile = "stig"};
    for (int r = 0; r < 400; ++r) wide.rule_ids.push_back(fmt::format("{}_{:03}", rule, r));
    auto submitted = store.SubmitBatch(wide);
    REQUIRE(submitted.ok());
    LoopStep details{.batch_id = submitted->batch.id};
    for (const std::string& r : wide.rule_ids) {
      details.rules.push_back({.rule_id = r, .state = RuleState::kEscalated, .detail = Filler("escalated " + r, 6000)});
    }
    REQUIRE(store.CommitStep(details).ok());
    // Seven attempts at `rule` with change sets of 1.5 MB, and an eighth of 5 MB: 15 MB of memory.
    for (int n = 1; n <= 8; ++n) {
      std::string changes = n == 8 ? ChangesJson("last", 40, 50'000, 15'000) : ChangesJson("m", 10, 150'000, 0);
      LoopStep step{.batch_id = 1};
      step.attempt = AttemptRecord{.batch_id = 1,
                                   .rule_id = rule,
                                   .number = static_cast<uint32_t>(n),
                                   .approach = fmt::format("approach {}", n),
                                   .changes_json = std::move(changes)};
      step.lesson = LessonRecord{.rule_id = rule, .batch_id = 1, .text = fmt::format("lesson {}", n)};
      REQUIRE(store.CommitStep(step).ok());
    }
  }
  DaemonProcess daemon(dir, {.content_dirs = {kContentDir}});
  REQUIRE(daemon.Start().ok());
  auto stub = TightStub(daemon);

  SECTION("a batch's rules, in pages that GetBatch continues, and whole in `temper status`") {
    temper::v1::GetBatchRequest request;
    request.set_batch_id("13");
    std::vector<std::string> rules;
    int pages = 0;
    do {
      temper::v1::Batch page;
      grpc::Status s = stub->GetBatch(CallContext().get(), request, &page);
      INFO(s.error_message());
      REQUIRE(s.ok());
      CHECK(page.counts().total() == 400);  // the batch's own fields on every page
      for (const auto& r : page.rules()) rules.push_back(r.rule_id());
      request.set_rules_page_token(page.next_rules_page_token());
      ++pages;
    } while (!request.rules_page_token().empty());
    CHECK(pages >= 3);
    REQUIRE(rules.size() == 400);
    for (int r = 0; r < 400; ++r) CHECK(rules[static_cast<size_t>(r)] == fmt::format("{}_{:03}", rule, r));
    request.set_rules_page_token("401");
    temper::v1::Batch refused;
    grpc::Status bad = stub->GetBatch(CallContext().get(), request, &refused);
    CHECK(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(bad.error_message() == "rules_page_token: not a token this server issued");

    ProcessResult status = Cli(daemon, {"status", "13", "--json"});
    INFO(status.err);
    REQUIRE(status.exit_code == 0);
    nlohmann::json batch = nlohmann::json::parse(status.out);
    REQUIRE(batch["rules"].size() == 400);
    CHECK(batch["rules"][399]["rule_id"] == fmt::format("{}_399", rule));
    CHECK_FALSE(batch.contains("next_rules_page_token"));
  }

  SECTION("the batch list, in pages cut by bytes") {
    temper::v1::ListBatchesRequest request;
    request.set_page_size(50);
    std::vector<std::string> ids;
    std::vector<int> sizes;
    do {
      temper::v1::ListBatchesResponse page;
      grpc::Status s = stub->ListBatches(CallContext().get(), request, &page);
      INFO(s.error_message());
      REQUIRE(s.ok());
      for (const auto& b : page.batches()) ids.push_back(b.id());
      sizes.push_back(page.batches_size());
      request.set_page_token(page.next_page_token());
    } while (!request.page_token().empty());
    CHECK(sizes.size() >= 3);
    CHECK(sizes[0] < 13);
    REQUIRE(ids.size() == 13);
    for (int i = 0; i < 13; ++i) CHECK(ids[static_cast<size_t>(i)] == std::to_string(13 - i));
    // `temper list` shows a page and where to go on.
    ProcessResult list = Cli(daemon, {"list"});
    CHECK(list.exit_code == 0);
    CHECK(list.out.find("(more: --page-token ") != std::string::npos);
  }

  SECTION("a rule's memory, streamed") {
    temper::v1::GetRuleMemoryRequest request;
    request.set_rule_id("package_aide_installed");
    request.set_max_attempts(20);
    auto ctx = CallContext(30);
    auto reader = stub->GetRuleMemory(ctx.get(), request);
    ChunkAssembler<temper::v1::RuleMemoryChunk> assembler;
    temper::v1::RuleMemoryChunk chunk;
    int fragments = 0;
    while (reader->Read(&chunk)) {
      fragments += chunk.has_fragment();
      REQUIRE(assembler.Add(chunk).ok());
    }
    grpc::Status s = reader->Finish();
    INFO(s.error_message());
    REQUIRE(s.ok());
    Result<temper::v1::RuleMemory> memory = std::move(assembler).Finish();
    REQUIRE(memory.ok());
    CHECK(fragments > 4);  // the last attempt alone is over 4 MiB
    CHECK(memory->rule_id() == rule);
    REQUIRE(memory->attempts_size() == 8);
    CHECK(memory->attempts(0).number() == 8);  // newest first
    CHECK(memory->attempts(0).changes_json().size() > kGrpcDefaultLimit);
    CHECK(memory->attempts(7).approach() == "approach 1");
    REQUIRE(memory->lessons_size() == 8);
    CHECK(memory->lessons(0).text() == "lesson 8");
    // max_attempts still bounds it, across the store's pages.
    request.set_max_attempts(3);
    auto few_ctx = CallContext(30);
    auto few = stub->GetRuleMemory(few_ctx.get(), request);
    ChunkAssembler<temper::v1::RuleMemoryChunk> few_assembler;
    while (few->Read(&chunk)) REQUIRE(few_assembler.Add(chunk).ok());
    REQUIRE(few->Finish().ok());
    Result<temper::v1::RuleMemory> recent = std::move(few_assembler).Finish();
    REQUIRE(recent.ok());
    REQUIRE(recent->attempts_size() == 3);
    CHECK(recent->attempts(2).number() == 6);
  }

  SECTION("the host list, in pages") {
    for (int h = 0; h < 5; ++h) {
      temper::v1::SubmitBatchRequest submit;
      submit.set_host(fmt::format("root@host-{}.example", h));
      submit.set_datastream("ssg-ubuntu2004-ds.xml");
      submit.set_profile("stig");
      submit.add_rule_ids("package_aide_installed");
      SubmitOk(*stub, submit);
    }
    temper::v1::ListHostsRequest request;
    request.set_page_size(2);
    std::vector<std::string> targets;
    int pages = 0;
    do {
      temper::v1::ListHostsResponse page;
      grpc::Status s = stub->ListHosts(CallContext().get(), request, &page);
      INFO(s.error_message());
      REQUIRE(s.ok());
      CHECK(page.hosts_size() <= 2);
      for (const auto& h : page.hosts()) targets.push_back(h.target());
      request.set_page_token(page.next_page_token());
      ++pages;
    } while (!request.page_token().empty());
    CHECK(pages == 3);
    REQUIRE(targets.size() == 5);
    for (int h = 0; h < 5; ++h) CHECK(targets[static_cast<size_t>(h)] == fmt::format("root@host-{}.example", h));
    ProcessResult hosts = Cli(daemon, {"hosts", "--json"});
    REQUIRE(hosts.exit_code == 0);
    CHECK(nlohmann::json::parse(hosts.out)["hosts"].size() == 5);
  }
}

}  // namespace
}  // namespace temper::testing
