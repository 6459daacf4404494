// Fleets end to end (issue 50): a twin of one SSH host, a batch on the twin, then `temper apply` to ten
// hosts at once — one with drifted files, one that loses its connection midway — and a second twin of
// the same image whose batch takes its fixes from the library. The real temperd and temper binaries,
// the scripted model server, netns sshd hosts serving the same test root (one image), OpenSCAP on
// each host.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
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
constexpr int kHosts = 10;
constexpr int kDriftedHost = 3;  // /etc/ssh/sshd_config gained a line, /etc/issue.net was rewritten
constexpr int kLostHost = 7;     // sshd dies while its batch runs, then comes back

// File-only rules whose SSG fixes hold on a live host and on a root alike; sshd_disable_root_login
// would lock a root login out, which is why the fleet logs in as admin (sudo).
const std::vector<std::string> kRules = {"accounts_tmout", "banner_etc_issue_net", "sshd_disable_root_login",
                                         "sshd_disable_empty_passwords"};

struct FleetDaemon {
  explicit FleetDaemon(const ScriptedModelServer& server) {
    std::filesystem::create_directories(dir / "roots/lab");
    DaemonOptions options;
    options.models_yaml = server.ModelsYaml();
    options.content_dirs = {"/usr/share/xml/scap/ssg/content"};
    options.ssh_yaml = fmt::format("key_file: {}\nconnect_timeout: 5s\nreconnect_tries: 3\nreconnect_pause: 1s",
                                   TestRoot().client_key);
    daemon = std::make_unique<DaemonProcess>(dir, options);
    REQUIRE(daemon->Start().ok());
  }
  ProcessResult Cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {TemperBinary(), "--socket", daemon->socket_path()});
    return RunProcess(args);
  }
  nlohmann::json CliJson(std::vector<std::string> args) const {
    args.push_back("--json");
    ProcessResult r = Cli(args);
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  }
  void Accept(const NetnsSshHost& host, const std::string& login) const {
    ProcessResult r = Cli({"hosts", "accept", login, "--fingerprint", host.fingerprint()});
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
  }

  TempDir dir;
  std::unique_ptr<DaemonProcess> daemon;
};

temper::v1::Batch GetBatch(const DaemonProcess& daemon, const std::string& id) {
  temper::v1::GetBatchRequest req;
  req.set_batch_id(id);
  temper::v1::Batch b;
  REQUIRE(daemon.Stub()->GetBatch(CallContext(30).get(), req, &b).ok());
  return b;
}

bool Ended(const temper::v1::Batch& b) {
  return b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
         b.state() == temper::v1::BATCH_STATE_CANCELLED;
}

temper::v1::Batch WaitUntilEnded(const DaemonProcess& daemon, const std::string& id) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  while (std::chrono::steady_clock::now() < deadline) {
    temper::v1::Batch b = GetBatch(daemon, id);
    if (Ended(b)) return b;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("batch " << id << " did not end in 20 minutes:\n" << daemon.Log());
  return {};
}

std::vector<temper::v1::JournalEvent> Events(const DaemonProcess& daemon, const std::string& batch) {
  temper::v1::WatchJournalRequest req;
  req.set_batch_id(batch);
  req.set_follow(false);
  auto ctx = CallContext(30);
  auto stub = daemon.Stub();
  auto reader = stub->WatchJournal(ctx.get(), req);
  std::vector<temper::v1::JournalEvent> events;
  temper::v1::JournalEvent e;
  while (reader->Read(&e)) events.push_back(e);
  (void)reader->Finish();
  return events;
}

// Rule short name -> state, for comparing hosts with the twin.
std::map<std::string, temper::v1::RuleState> States(const temper::v1::Batch& b) {
  std::map<std::string, temper::v1::RuleState> out;
  for (const auto& r : b.rules()) out[r.rule_id().substr(std::string(kPrefix).size())] = r.state();
  return out;
}

std::string BatchIdOf(const nlohmann::json& j) { return j["id"].get<std::string>(); }

std::string Submit(const FleetDaemon& d, const std::string& target) {
  std::vector<std::string> args = {"submit", "-t", target, "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig"};
  for (const std::string& r : kRules) args.insert(args.end(), {"-r", r});
  return BatchIdOf(d.CliJson(args));
}

void AppendTo(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app);
  out << text;
  REQUIRE(out.good());
}

// A fresh login to the host works, with sudo: nobody was locked out.
bool LoginWorks(const NetnsSshHost& host, const std::string& user) {
  ScopedControlDir control;
  stig::SshOptions options =
      TestSshOptions(host.Endpoint(user), TestRoot().client_key, AcceptedKnownHosts(host), control.path());
  auto conn = stig::SshConnection::Open(options, QuietSshLog());
  if (!conn.ok()) return false;
  Status fresh = (*conn)->CheckFreshLogin();  // a new login bypassing the master, then sudo -n true
  INFO(fresh.ToString());
  return fresh.ok();
}

TEST_CASE(
    "a twin's kept fixes reach ten hosts at once: drift merged or refused, a lost host reverted, nobody locked out",
    "[ssh][fleet]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  // Every host before any thread: the test process unshares its mounts with the first.
  auto source = StartHost("fleet-src");
  std::vector<std::unique_ptr<NetnsSshHost>> hosts;
  for (int i = 1; i <= kHosts; ++i) hosts.push_back(StartHost(fmt::format("fleet-{}", i)));
  ModelScript script;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  FleetDaemon d(**server);
  auto login = [](const NetnsSshHost& h) { return "admin@" + h.address(); };

  // The twin: the source host's root, copied.
  d.Accept(*source, login(*source));
  ProcessResult twin = d.Cli({"twin", "create", "image-a", "--from-host", login(*source)});
  INFO(twin.out + twin.err);
  REQUIRE(twin.exit_code == 0);

  // The batch on the twin: the model finds the fixes, on forks, with no risk to any host.
  const size_t calls_before_first = (*server)->requests().size();
  const std::string first = Submit(d, "image-a");
  temper::v1::Batch on_twin = WaitUntilEnded(*d.daemon, first);
  INFO(d.daemon->Log());
  REQUIRE(on_twin.state() == temper::v1::BATCH_STATE_COMPLETED);
  const size_t first_calls = (*server)->requests().size() - calls_before_first;
  const auto twin_states = States(on_twin);
  REQUIRE(on_twin.counts().fixed() >= 3);

  // Host 3 drifted: a line appended to sshd_config (merged), issue.net rewritten (refused).
  const NetnsSshHost& drifted = *hosts[kDriftedHost - 1];
  AppendTo(drifted.tree() + "/etc/ssh/sshd_config", "# site: keep this line\n");
  {
    std::ofstream issue(drifted.tree() + "/etc/issue.net", std::ios::trunc);
    issue << "Authorized use of host 3 only.\n";
  }
  for (const auto& h : hosts) d.Accept(*h, login(*h));

  std::vector<std::string> args = {"apply", first, "--at-once", std::to_string(kHosts), "--json"};
  for (const auto& h : hosts) args.insert(args.end(), {"--host", login(*h)});
  nlohmann::json applied = d.CliJson(args);
  REQUIRE(applied["batches"].size() == kHosts);
  std::vector<std::string> ids;
  for (const auto& b : applied["batches"]) ids.push_back(b["id"].get<std::string>());

  // Host 7 loses its connection once its first replay has changed something, and gets it back.
  const std::string lost_id = ids[kLostHost - 1];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  bool cut = false;
  while (!cut && std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : Events(*d.daemon, lost_id)) cut = cut || e.type() == "attempt.started";
    if (!cut) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(cut);
  hosts[kLostHost - 1]->StopSshd();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(hosts[kLostHost - 1]->StartSshd().ok());

  std::vector<temper::v1::Batch> results;
  for (const std::string& id : ids) results.push_back(WaitUntilEnded(*d.daemon, id));
  INFO(d.daemon->Log());
  for (int i = 1; i <= kHosts; ++i) {
    const temper::v1::Batch& b = results[i - 1];
    INFO("host " << i << ": batch " << b.id() << " " << b.error());
    CHECK(b.apply_from() == first);
    if (i == kLostHost) {
      // Reverted through a fresh connection, or handed to a human with the reason: never half-done silently.
      if (b.state() == temper::v1::BATCH_STATE_FAILED) CHECK_THAT(b.error(), Catch::Contains("connection"));
      continue;
    }
    REQUIRE(b.state() == temper::v1::BATCH_STATE_COMPLETED);
    auto states = States(b);
    for (const std::string& rule : kRules) {
      if (i == kDriftedHost && rule == "banner_etc_issue_net") continue;
      CHECK(states[rule] == twin_states.at(rule));
    }
  }
  // The drifted host: sshd_config merged (the site's line kept), issue.net refused with its path named.
  const auto drifted_states = States(results[kDriftedHost - 1]);
  CHECK(drifted_states.at("sshd_disable_root_login") == temper::v1::RULE_STATE_FIXED);
  std::ifstream sshd(drifted.tree() + "/etc/ssh/sshd_config");
  std::string sshd_text((std::istreambuf_iterator<char>(sshd)), std::istreambuf_iterator<char>());
  CHECK_THAT(sshd_text, Catch::Contains("# site: keep this line"));
  CHECK(drifted_states.at("banner_etc_issue_net") != temper::v1::RULE_STATE_FIXED);
  bool refusal_named = false;
  for (const auto& e : Events(*d.daemon, results[kDriftedHost - 1].id())) {
    refusal_named = refusal_named || (e.data_json().find("/etc/issue.net") != std::string::npos &&
                                      e.data_json().find("drift") != std::string::npos);
  }
  CHECK(refusal_named);
  // No model was asked for any host.
  CHECK((*server)->requests().size() - calls_before_first == first_calls);
  // Nobody is locked out: a fresh login with sudo works on every host.
  for (int i = 1; i <= kHosts; ++i) {
    INFO("host " << i);
    CHECK(LoginWorks(*hosts[i - 1], "admin"));
  }

  // A second twin of the same image: its batch takes the fixes from the library.
  ProcessResult twin_b = d.Cli({"twin", "create", "image-b", "--from-host", login(*source)});
  INFO(twin_b.out + twin_b.err);
  REQUIRE(twin_b.exit_code == 0);
  const size_t calls_before_second = (*server)->requests().size();
  const std::string second = Submit(d, "image-b");
  temper::v1::Batch on_twin_b = WaitUntilEnded(*d.daemon, second);
  REQUIRE(on_twin_b.state() == temper::v1::BATCH_STATE_COMPLETED);
  const size_t second_calls = (*server)->requests().size() - calls_before_second;
  CHECK(States(on_twin_b) == twin_states);
  CHECK(second_calls * 10 <= first_calls);
  nlohmann::json library = d.CliJson({"library", "list"});
  CHECK(library["fixes"].size() >= on_twin.counts().fixed());
}

}  // namespace
}  // namespace temper::testing
