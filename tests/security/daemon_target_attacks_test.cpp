// The target-side attacks (issue 20, part B) through the real temperd and its loop: the scripted
// model's Worker plants a FIFO or fills the disk with an ordinary run_command, as a misled model
// would, and the daemon must stay in control (cancel and shutdown finish; the batch goes on) while
// the host keeps its disk. Also temperd's own shield against the OOM killer.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "loop/loop_harness.h"
#include "scripted_model/scripted_answers.h"
#include "security/security_b_support.h"
#include "skip.h"
#include "small_tmpfs.h"

namespace temper::testing {
namespace {

using namespace std::chrono_literals;
using scripted::ModelScript;
using scripted::ScriptedModelServer;

// Both fail on the shared root and are fixed by their SSG fix text in one attempt.
constexpr const char* kRuleA = "banner_etc_issue_net";
constexpr const char* kRuleB = "accounts_tmout";

// Worker tool calls of the batch so far, as the journal holds them.
std::vector<nlohmann::json> ToolCalls(const LoopDaemon& d, const std::string& batch_id) {
  std::vector<nlohmann::json> out;
  for (const auto& e : d.JournalEvents(batch_id)) {
    if (e.type() != "worker.tool_call") continue;
    nlohmann::json data = nlohmann::json::parse(e.data_json());
    data["rule_id"] = e.rule_id();
    out.push_back(std::move(data));
  }
  return out;
}

// Where the Worker's apply_reference_fix writes a rule's fix script (roles/worker.cpp).
std::string ReferenceFixPath(const char* rule) { return fmt::format("/root/temper-reference-fix-{}.sh", rule); }

TEST_CASE("a FIFO the Worker made does not hang temperd: writing a script fails at once, cancel and shutdown finish") {
  ModelScript script;
  // Whichever rule the Architect takes first, its last command turns both rules' fix script paths
  // into FIFOs; the other rule's Worker then writes its fix script there (apply_reference_fix) and,
  // as its own last command finds the FIFOs already made, reads one.
  for (const char* rule : {kRuleA, kRuleB}) script.rules[rule].regress_first = 1;
  script.regress_command = fmt::format("mkfifo {0} {1} || cat {1}", ReferenceFixPath(kRuleA), ReferenceFixPath(kRuleB));
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon d(**server);  // its TempDir detaches what a killed temperd left mounted
  // One rule after the other: the second must start from the first one's kept FIFOs.
  const std::string id = d.Submit({.rules = {kRuleA, kRuleB}, .max_attempts = 2, .parallel_attempts = 1});

  // The second rule's script write meets the FIFO: it must come back with an error naming it.
  nlohmann::json refused;
  for (auto deadline = security::Clock::now() + 4min; refused.is_null() && security::Clock::now() < deadline;) {
    for (const nlohmann::json& call : ToolCalls(d, id)) {
      if (call.value("tool", "") == "apply_reference_fix" && call.value("detail", "").find("FIFO") != std::string::npos)
        refused = call;
    }
    if (refused.is_null()) std::this_thread::sleep_for(200ms);
  }
  INFO(d.daemon->Log());
  REQUIRE_FALSE(refused.is_null());
  CHECK_THAT(refused["detail"].get<std::string>(), Catch::Contains("is a FIFO in the target, not a regular file"));

  // The Worker goes on to read the FIFO inside the sandbox: cancel ends it.
  ProcessResult cancel = d.Cli({"cancel", id});
  CHECK(cancel.exit_code == 0);
  temper::v1::Batch batch;
  for (auto deadline = security::Clock::now() + 30s; security::Clock::now() < deadline;) {
    batch = d.GetBatch(id);
    if (batch.state() == temper::v1::BATCH_STATE_CANCELLED) break;
    std::this_thread::sleep_for(200ms);
  }
  CHECK(batch.state() == temper::v1::BATCH_STATE_CANCELLED);
  // shutdown_grace is 2 s in the harness's config; a stuck thread would hold temperd past it.
  std::optional<int> stopped = d.daemon->StopWithin(SIGTERM, 20s);
  REQUIRE(stopped.has_value());
  CHECK(*stopped == 0);
}

TEST_CASE("fallocate -l 100G by the Worker through temperd hits the writable layer's cap and the batch goes on") {
  ModelScript script;
  script.rules[kRuleA].regress_first = 1;  // its one attempt also runs the regress command
  script.regress_command = "fallocate -l 100G /big";
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon d(**server);  // its TempDir detaches what a killed temperd left mounted
  const std::uint64_t host_free_before = security::FreeBytes(d.dir.path());
  // Serial: rule B runs once A's attempt, and the space it took, are reverted. With attempts at once
  // (temperd's default) B's fork shares the 8 GiB layer with A's while A holds it, and B's attempts
  // in that time fail for want of space.
  const std::string id = d.Submit({.rules = {kRuleA, kRuleB}, .max_attempts = 2, .parallel_attempts = 1});
  temper::v1::Batch batch = d.WaitUntilEnded(id);
  const std::uint64_t host_free_after = security::FreeBytes(d.dir.path());
  INFO(d.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  auto rules = RulesByShortName(batch);
  CHECK(rules[kRuleA].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules[kRuleB].state() == temper::v1::RULE_STATE_FIXED);
  bool named = false;
  for (const nlohmann::json& call : ToolCalls(d, id)) {
    const std::string detail = call.value("detail", "");
    if (call.value("tool", "") == "run_command" && detail.find("the target's writable layer") != std::string::npos) {
      CHECK_THAT(detail, Catch::Contains("(cap 8 GiB)"));
      named = true;
    }
  }
  CHECK(named);
  CHECK(host_free_after + (std::uint64_t{8} << 30) >= host_free_before);
}

// Writes `path` until its file system has no room left (ENOSPC), as a runaway writer would.
void FillFileSystem(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "we");
  REQUIRE(f != nullptr);
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string chunk(1 << 20, 'x');
  for (std::size_t size : {std::size_t{1} << 20, std::size_t{4096}}) {
    while (std::fwrite(chunk.data(), 1, size, f) == size) {
    }
    std::clearerr(f);
  }
  std::fclose(f);
}

TEST_CASE("a full state directory pauses the batch, keeps the log bounded, and records the failure naming the disk") {
  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon d(**server);
  // The state directory (state store, journal, results) on a small file system of its own: the
  // daemon starts again on it with a fresh store.
  REQUIRE(d.daemon->Stop() == 0);
  SmallTmpfs state(d.dir.path() + "/state", 64 << 20);
  if (!state.mounted()) TEMPER_SKIP(state.error());
  REQUIRE(d.daemon->Start().ok());
  const std::string id = d.Submit({.rules = {kRuleA}, .max_attempts = 1});
  FillFileSystem(state.path() + "/fill");
  REQUIRE(security::FreeBytes(state.path()) < 64 << 10);

  // While the disk stays full, the target's thread waits between tries: a few lines, not a flood
  // (before, 100,000 lines in 27 s).
  const std::string log_before = d.daemon->Log();
  const auto lines_before = std::count(log_before.begin(), log_before.end(), '\n');
  std::this_thread::sleep_for(40s);
  const std::string log_full = d.daemon->Log();
  const auto lines_while_full = std::count(log_full.begin(), log_full.end(), '\n') - lines_before;
  INFO(log_full.substr(log_before.size(), 20000));
  CHECK(lines_while_full < 200);
  CHECK_THAT(log_full, Catch::Contains("the state store cannot record it yet"));
  CHECK_THAT(log_full, Catch::Contains("trying again in"));

  // Room again: the next try records the batch failed, with the reason naming the full disk.
  std::filesystem::remove(state.path() + "/fill");
  temper::v1::Batch batch = d.WaitUntilEnded(id);
  INFO(d.daemon->Log().substr(log_full.size()));
  CHECK(batch.state() == temper::v1::BATCH_STATE_FAILED);
  CHECK_THAT(batch.error(), Catch::Contains("database or disk is full"));
  CHECK_THAT(batch.error(), Catch::Contains("the file system holding " + state.path()));
  CHECK(d.daemon->Stop() == 0);  // before the tmpfs goes
}

// Paths under `dir` (itself included; links not followed, the package cache left out: its .debs
// are Debian's public packages) whose mode lets group or others in, with the mode.
std::vector<std::string> OpenToOthers(const std::string& dir) {
  std::vector<std::string> open;
  auto check = [&](const std::filesystem::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) return;
    if ((st.st_mode & 077) != 0) open.push_back(fmt::format("{} {:o}", p.string(), st.st_mode & 07777));
  };
  check(dir);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == "packages") {
      it.disable_recursion_pending();
      continue;
    }
    check(it->path());
  }
  return open;
}

TEST_CASE("temperd started by hand keeps its state root's alone: looser modes are fixed at start, new files are 0600") {
  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon d(**server);
  // As a start by hand with umask 022 (or an older temperd) left it: the state directory 0755,
  // the store 0644, a journal file and an OpenSCAP report open to everyone.
  REQUIRE(d.daemon->Stop() == 0);
  const std::string state = d.dir.path() + "/state";
  std::filesystem::create_directories(state + "/results/batch-0/before");
  std::ofstream(state + "/results/batch-0/before/arf.xml") << "<arf/>";
  std::ofstream(state + "/journal/daemon.jsonl", std::ios::app) << "";
  for (const std::string& path :
       {state, state + "/temper.db", state + "/results", state + "/results/batch-0", state + "/results/batch-0/before",
        state + "/results/batch-0/before/arf.xml", state + "/journal", state + "/journal/daemon.jsonl"}) {
    REQUIRE(::chmod(path.c_str(), std::filesystem::is_directory(path) ? 0755 : 0644) == 0);
  }
  REQUIRE_FALSE(OpenToOthers(state).empty());

  REQUIRE(d.daemon->Start().ok());
  struct stat st {};
  REQUIRE(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::stat((state + "/temper.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(OpenToOthers(state).empty());
  CHECK_THAT(d.daemon->Log(), Catch::Contains(state + "/temper.db was open to other users; it is root's alone now"));

  // A batch writes the store, the journal and OpenSCAP's reports: none of it is open to others.
  const std::string id = d.Submit({.rules = {kRuleA}, .max_attempts = 1});
  temper::v1::Batch batch = d.WaitUntilEnded(id);
  CHECK(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(std::filesystem::exists(state + "/results/batch-" + id));
  CHECK(std::filesystem::exists(state + "/journal/batch-" + id + ".jsonl"));
  CHECK(OpenToOthers(state) == std::vector<std::string>{});
  CHECK(d.daemon->Stop() == 0);
}

TEST_CASE("temperd shields itself from the OOM killer") {
  // Lowering a score takes CAP_SYS_RESOURCE; where this process (and so temperd) lacks it, temperd
  // must say that it runs unshielded.
  bool can_shield = false;
  {
    std::ofstream probe("/proc/self/oom_score_adj");
    probe << -1 << std::flush;
    can_shield = probe.good();
  }
  std::ofstream("/proc/self/oom_score_adj") << 0;
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  std::ifstream in(fmt::format("/proc/{}/oom_score_adj", daemon.pid()));
  int adj = 0;
  in >> adj;
  if (can_shield) {
    CHECK(adj <= -500);
  } else {
    CHECK_THAT(daemon.Log(), Catch::Contains("cannot shield itself from the OOM killer"));
  }
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
