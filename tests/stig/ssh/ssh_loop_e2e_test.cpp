// The loop on a real SSH host: temperd (the real binary) with models.yaml pointing at the scripted
// model server, a host in its own network namespace running sshd, its key accepted and the batch
// submitted with the real `temper` CLI (`hosts accept`, `submit --host`, `hosts`), OpenSCAP run on
// the host, and the undo journal reverting what the loop rejects.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "orchestrator/daemon_process.h"
#include "scripted_model/scripted_answers.h"
#include "scripted_model/scripted_model_server.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

constexpr const char* kPrefix = "xccdf_org.ssgproject.content_rule_";

// temperd whose ssh section uses the test key; its rootfs "lab" target is unused here.
struct SshLoopDaemon {
  explicit SshLoopDaemon(const ScriptedModelServer& server) {
    std::filesystem::create_directories(dir / "roots/lab");
    DaemonOptions options;
    options.models_yaml = server.ModelsYaml();
    options.content_dirs = {"/usr/share/xml/scap/ssg/content"};
    options.ssh_yaml = fmt::format("key_file: {}\nconnect_timeout: 5s\nreconnect_tries: 3\nreconnect_pause: 1s",
                                   TestRoot().client_key);
    daemon = std::make_unique<DaemonProcess>(dir, options);
    REQUIRE(daemon->Start().ok());
  }
  // Runs the `temper` CLI against this daemon.
  ProcessResult Cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {TemperBinary(), "--socket", daemon->socket_path()});
    return RunProcess(args);
  }
  nlohmann::json Hosts() const {
    ProcessResult r = Cli({"hosts", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  }

  TempDir dir;
  std::unique_ptr<DaemonProcess> daemon;
};

// Submits with `temper submit --host` and returns the batch id.
std::string SubmitToHost(const SshLoopDaemon& d, const std::string& host, const std::vector<std::string>& rules,
                         int max_attempts) {
  std::vector<std::string> args = {"submit",
                                   "--host",
                                   host,
                                   "-d",
                                   "ssg-ubuntu2004-ds.xml",
                                   "-p",
                                   "stig",
                                   "--max-attempts",
                                   std::to_string(max_attempts),
                                   "--json"};
  for (const std::string& r : rules) args.insert(args.end(), {"-r", r});
  ProcessResult r = d.Cli(args);
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out)["id"].get<std::string>();
}

temper::v1::Batch WaitUntilEnded(const DaemonProcess& daemon, const std::string& batch) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(15);
  temper::v1::GetBatchRequest req;
  req.set_batch_id(batch);
  temper::v1::Batch b;
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(daemon.Stub()->GetBatch(CallContext(30).get(), req, &b).ok());
    if (b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
        b.state() == temper::v1::BATCH_STATE_CANCELLED) {
      return b;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("batch " << batch << " did not end in 15 minutes:\n" << daemon.Log());
  return b;
}

bool HasEvent(const DaemonProcess& daemon, const std::string& batch, const std::string& type) {
  temper::v1::WatchJournalRequest req;
  req.set_batch_id(batch);
  req.set_follow(false);
  auto ctx = CallContext(30);
  auto stub = daemon.Stub();
  auto reader = stub->WatchJournal(ctx.get(), req);
  temper::v1::JournalEvent e;
  bool found = false;
  while (reader->Read(&e)) found = found || e.type() == type;
  (void)reader->Finish();
  return found;
}

void WaitForEvent(const DaemonProcess& daemon, const std::string& batch, const std::string& type) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (HasEvent(daemon, batch, type)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("no " << type << " event:\n" << daemon.Log());
}

// `temper hosts accept` twice: first to see the offered key, then to record the one the test
// host really has (what an operator compares with the host's console).
void AcceptKey(const SshLoopDaemon& d, const NetnsSshHost& host, const std::string& login) {
  ProcessResult scan = d.Cli({"hosts", "accept", login});
  INFO(scan.out + scan.err);
  REQUIRE(scan.exit_code == 0);
  CHECK_THAT(scan.out, Catch::Contains(host.fingerprint()));
  CHECK_THAT(scan.out, Catch::Contains("nothing recorded"));
  ProcessResult accept = d.Cli({"hosts", "accept", login, "--fingerprint", host.fingerprint()});
  INFO(accept.out + accept.err);
  REQUIRE(accept.exit_code == 0);
  CHECK_THAT(accept.out, Catch::Contains("recorded ssh-ed25519 " + host.fingerprint()));
}

TEST_CASE("the loop fixes rules on an SSH host and reverts a wrong fix with the undo journal", "[ssh][ssh_loop_e2e]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("loop");  // before any thread: the test process unshares its mounts
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  SshLoopDaemon d(**server);
  const std::string login = "root@" + host->address();

  // Without an accepted key the host is refused, and the batch says why.
  std::string refused = SubmitToHost(d, login, {"accounts_tmout"}, 2);
  temper::v1::Batch unknown = WaitUntilEnded(*d.daemon, refused);
  CHECK(unknown.state() == temper::v1::BATCH_STATE_FAILED);
  CHECK_THAT(unknown.error(), Catch::Contains("\"host key unknown\""));

  AcceptKey(d, *host, login);
  std::string id = SubmitToHost(d, login, {"accounts_tmout", "banner_etc_issue_net"}, 3);
  temper::v1::Batch batch = WaitUntilEnded(*d.daemon, id);
  INFO(d.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(batch.target() == login);
  std::map<std::string, temper::v1::BatchRule> rules;
  for (const auto& r : batch.rules()) rules[r.rule_id().substr(std::string(kPrefix).size())] = r;
  CHECK(rules["accounts_tmout"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["accounts_tmout"].attempts() == 1);
  CHECK(rules["accounts_tmout"].before_verdict() == "fail");
  CHECK(rules["accounts_tmout"].after_verdict() == "pass");
  // The wrong first attempt was reverted on the host, the second kept.
  CHECK(rules["banner_etc_issue_net"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["banner_etc_issue_net"].attempts() == 2);
  CHECK_FALSE(
      std::filesystem::exists(host->tree() + scripted::WrongNotePath(std::string(kPrefix) + "banner_etc_issue_net")));
  CHECK(std::filesystem::exists(host->tree() + "/etc/profile.d/tmout.sh"));
  CHECK(HasEvent(*d.daemon, id, "attempt.reverted"));
  // The Reflector's lesson on attempt 1 reached the Worker's attempt 2 on this same host, saying
  // where it was learnt (lessons are scoped to the host they were learnt on: episodic_memory.h).
  const std::string banner = std::string(kPrefix) + "banner_etc_issue_net";
  bool lesson_with_provenance = false;
  for (const auto& r : (*server)->requests()) {
    const std::string prompt = r.messages.dump();
    if (r.role == "worker" && r.attempt == 2 && r.rule_id == banner &&
        prompt.find(scripted::LessonMarker(banner, 1)) != std::string::npos &&
        prompt.find(fmt::format("Provenance: learnt on SSH host {} in batch {}", login, id)) != std::string::npos) {
      lesson_with_provenance = true;
    }
  }
  CHECK(lesson_with_provenance);
  // The host's own results came back to the daemon.
  temper::v1::BatchReport report = ReadReport(*d.daemon->Stub(), id);
  CHECK(std::filesystem::exists(report.results_dir() + "/arf.xml"));

  nlohmann::json hosts = d.Hosts();
  REQUIRE(hosts["hosts"].size() == 1);
  CHECK(hosts["hosts"][0]["target"] == login);
  CHECK(hosts["hosts"][0]["state"] == "idle");
  CHECK(hosts["hosts"][0]["last_batch_id"] == id);
  CHECK(hosts["hosts"][0]["recorded_keys"][0]["fingerprint"] == host->fingerprint());
  ProcessResult table = d.Cli({"hosts"});
  CHECK_THAT(table.out, Catch::Contains(login + " *"));

  // An SSH host cannot capture a kept fix whole (no bundle): a fleet export leaves both fixes out
  // and names them, in the file and on stderr.
  const std::string exported = host->dir() + "/files/batch.sh";
  ProcessResult sh = d.Cli({"export", id, "--format", "sh", "-o", exported});
  INFO(sh.err);
  CHECK(sh.exit_code == 0);
  CHECK_THAT(sh.err, Catch::Contains("2 kept fix(es) have no recorded change set") &&
                         Catch::Contains("  " + std::string(kPrefix) + "accounts_tmout\n"));
  std::ifstream in(exported);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("#   " + banner + "\n"));
}

TEST_CASE("sshd lost mid-attempt: reverted through a fresh connection, or the host is left to a human",
          "[ssh][ssh_loop_e2e]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("loop-lost");
  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  SshLoopDaemon d(**server);
  const std::string login = "root@" + host->address();
  AcceptKey(d, *host, login);
  const std::string tmout = host->tree() + "/etc/profile.d/tmout.sh";

  SECTION("sshd comes back: the attempt's change is reverted and the host takes the next batch") {
    std::string id = SubmitToHost(d, login, {"accounts_tmout"}, 3);
    WaitForEvent(*d.daemon, id, "worker.tool_call");  // a change has been made on the host
    host->StopSshd();
    REQUIRE(host->StartSshd().ok());
    temper::v1::Batch batch = WaitUntilEnded(*d.daemon, id);
    INFO(d.daemon->Log());
    nlohmann::json hosts = d.Hosts();
    CHECK(hosts["hosts"][0]["state"] == "idle");
    if (batch.state() == temper::v1::BATCH_STATE_FAILED) {
      // Lost in the Worker's tool loop: the batch stops, the host was reverted.
      CHECK_THAT(batch.error(), Catch::Contains("\"connection lost\""));
      CHECK_FALSE(std::filesystem::exists(tmout));
    } else {
      // Lost while the change was being verified: that attempt was reverted, a later one kept.
      CHECK(batch.counts().fixed() == 1);
      CHECK(HasEvent(*d.daemon, id, "attempt.reverted"));
    }
    CHECK_THAT(d.daemon->Log(), Catch::Contains("through a fresh connection"));
    std::string next = SubmitToHost(d, login, {"accounts_tmout"}, 3);
    temper::v1::Batch again = WaitUntilEnded(*d.daemon, next);
    CHECK(again.state() == temper::v1::BATCH_STATE_COMPLETED);
    CHECK(again.counts().fixed() + again.counts().already_passing() == 1);
  }
  SECTION("sshd stays down: the host needs a human, its batches stop until it is cleared") {
    std::string id = SubmitToHost(d, login, {"accounts_tmout"}, 3);
    WaitForEvent(*d.daemon, id, "worker.tool_call");
    host->StopSshd();
    temper::v1::Batch batch = WaitUntilEnded(*d.daemon, id);
    INFO(d.daemon->Log());
    CHECK(batch.state() == temper::v1::BATCH_STATE_FAILED);
    nlohmann::json hosts = d.Hosts();
    CHECK(hosts["hosts"][0]["state"] == "needs_human");
    CHECK_THAT(hosts["hosts"][0]["detail"].get<std::string>(), Catch::Contains("connection refused"));
    // Refused at once while it needs a human, even with sshd back.
    REQUIRE(host->StartSshd().ok());
    std::string refused = SubmitToHost(d, login, {"accounts_tmout"}, 3);
    temper::v1::Batch stopped = WaitUntilEnded(*d.daemon, refused);
    CHECK(stopped.state() == temper::v1::BATCH_STATE_FAILED);
    CHECK_THAT(stopped.error(), Catch::Contains("needs a human") && Catch::Contains("temper hosts clear"));
    // A person checked the host.
    ProcessResult cleared = d.Cli({"hosts", "clear", login});
    INFO(cleared.out + cleared.err);
    REQUIRE(cleared.exit_code == 0);
    CHECK(d.Hosts()["hosts"][0]["state"] == "idle");
    std::string after = SubmitToHost(d, login, {"accounts_tmout"}, 3);
    CHECK(WaitUntilEnded(*d.daemon, after).state() == temper::v1::BATCH_STATE_COMPLETED);
  }
}

}  // namespace
}  // namespace temper::testing
