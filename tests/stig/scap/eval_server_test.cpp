// The evaluation servers behind Evaluator (eval_server.h): the content loaded once, a forked child
// per evaluation, on real SSG content over the shared Debian 12 root.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"
#include "stig/scap/evaluator.h"

namespace temper::stig {
namespace {

using testing::FullRuleId;
using testing::QuietLog;
using testing::ScopedTarget;
using testing::Ubuntu2004Stig;

const std::string kSshRule = FullRuleId("sshd_disable_root_login");         // fail on the fresh root
const std::string kShadowRule = FullRuleId("file_permissions_etc_shadow");  // pass on the fresh root
const std::string kX11Rule = FullRuleId("sshd_disable_x11_forwarding");     // in the profile; fail on the fresh root

// What a whole-profile evaluation tells apart, as text for a readable failure.
std::string Differences(const Evaluation& a, const Evaluation& b) {
  std::string out;
  if (a.verdicts.size() != b.verdicts.size())
    return fmt::format("{} vs {} verdicts", a.verdicts.size(), b.verdicts.size());
  for (std::size_t i = 0; i < a.verdicts.size(); ++i) {
    if (a.verdicts[i].rule_id != b.verdicts[i].rule_id || a.verdicts[i].verdict != b.verdicts[i].verdict) {
      out += fmt::format("\n  {} {} vs {} {}", a.verdicts[i].rule_id, VerdictName(a.verdicts[i].verdict),
                         b.verdicts[i].rule_id, VerdictName(b.verdicts[i].verdict));
    }
  }
  return out;
}

void Change(ScopedTarget& t, const std::string& command) {
  auto r = t->Run(command, SandboxLimits{});
  REQUIRE(r.ok());
  REQUIRE(r->Succeeded());
}

// The pids of `pid` and everything under it.
std::set<pid_t> Descendants(pid_t pid) {
  std::set<pid_t> found = {pid};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      pid_t p = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
      if (p <= 0 || found.count(p)) continue;
      std::ifstream status(entry.path() / "status");
      std::string line;
      while (std::getline(status, line)) {
        if (line.rfind("PPid:", 0) == 0 && found.count(static_cast<pid_t>(std::atoi(line.c_str() + 5)))) {
          found.insert(p);
          grew = true;
        }
      }
    }
  }
  return found;
}

bool Alive(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  }
  return false;
}

TEST_CASE("The evaluation server gives the one-shot verdicts on the whole profile, before and after a change",
          "[stig][evaluator][server][profile]") {
  ScopedTarget t("server-profile");
  const Content& content = Ubuntu2004Stig();
  Evaluator served(content, {.use_servers = true}, QuietLog());
  Evaluator one_shot(content, {.use_servers = false}, QuietLog());

  auto s1 = t->Evaluate(served, {});
  auto o1 = t->Evaluate(one_shot, {});
  INFO(s1.status().ToString() << " " << o1.status().ToString());
  REQUIRE(s1.ok());
  REQUIRE(o1.ok());
  REQUIRE(served.IdleServerPids().size() == 1);
  REQUIRE(one_shot.IdleServerPids().empty());
  REQUIRE(s1->verdicts.size() == content.profile_rule_ids().size());
  CHECK(Differences(*s1, *o1) == "");
  CHECK(*s1->VerdictOf(kX11Rule) == Verdict::kFail);

  Change(t, "sed -i 's/^X11Forwarding yes/X11Forwarding no/' /etc/ssh/sshd_config && chmod 0644 /etc/shadow");
  auto s2 = t->Evaluate(served, {});
  auto o2 = t->Evaluate(one_shot, {});
  REQUIRE(s2.ok());
  REQUIRE(o2.ok());
  CHECK(Differences(*s2, *o2) == "");
  CHECK(*s2->VerdictOf(kX11Rule) == Verdict::kPass);
  CHECK(Differences(*s1, *s2) != "");
  fmt::print("whole profile: server {:.2f} s then {:.2f} s, one-shot {:.2f} s then {:.2f} s\n", s1->seconds,
             s2->seconds, o1->seconds, o2->seconds);
}

TEST_CASE("One server evaluates different trees in a row, each seeing only its own", "[stig][evaluator][server]") {
  ScopedTarget a("server-tree-a");
  ScopedTarget b("server-tree-b");
  Change(a, "echo 'PermitRootLogin no' >> /etc/ssh/sshd_config");
  Change(b, "chmod 0644 /etc/shadow");
  Evaluator ev(Ubuntu2004Stig(), {.use_servers = true}, QuietLog());
  EvaluationRequest req{.rule_ids = {kSshRule, kShadowRule}};
  std::set<pid_t> servers;
  for (int round = 0; round < 2; ++round) {
    auto ea = a->Evaluate(ev, req);
    auto eb = b->Evaluate(ev, req);
    INFO(ea.status().ToString() << " " << eb.status().ToString());
    REQUIRE(ea.ok());
    REQUIRE(eb.ok());
    CHECK(*ea->VerdictOf(kSshRule) == Verdict::kPass);
    CHECK(*ea->VerdictOf(kShadowRule) == Verdict::kPass);
    CHECK(*eb->VerdictOf(kSshRule) == Verdict::kFail);
    CHECK(*eb->VerdictOf(kShadowRule) == Verdict::kFail);
    for (pid_t p : ev.IdleServerPids()) servers.insert(p);
  }
  CHECK(servers.size() == 1);  // every evaluation went through the same server
}

TEST_CASE("The server writes results.xml, an ARF with the datastream, and fix.sh", "[stig][evaluator][server]") {
  ScopedTarget t("server-files");
  Evaluator ev(Ubuntu2004Stig(), {.use_servers = true}, QuietLog());
  for (int round = 0; round < 2; ++round) {  // the second from a server that has served before
    const std::string out = t.dir() + fmt::format("/out{}", round);
    auto e = t->Evaluate(ev, {.rule_ids = {kSshRule, kShadowRule}, .output_dir = out, .write_fix_script = true});
    INFO(e.status().ToString());
    REQUIRE(e.ok());
    CHECK(e->results_path == out + "/results.xml");
    auto slurp = [](const std::string& p) {
      std::ifstream f(p);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    std::string results = slurp(e->results_path);
    CHECK(results.find("<TestResult") != std::string::npos);
    CHECK(results.find("idref=\"" + kSshRule + "\"") != std::string::npos);
    std::string arf = slurp(e->arf_path);
    CHECK(arf.find("asset-report-collection") != std::string::npos);
    CHECK(arf.find("data-stream-collection") != std::string::npos);  // the datastream itself
    CHECK(arf.find("oval_results") != std::string::npos);
    std::string fix = slurp(e->fix_script_path);
    CHECK(fix.find("PermitRootLogin") != std::string::npos);
    CHECK(fix.find(kShadowRule) == std::string::npos);
  }
  CHECK(ev.IdleServerPids().size() == 1);
}

TEST_CASE("A killed server is replaced and an evaluation past its timeout kills its server",
          "[stig][evaluator][server]") {
  ScopedTarget t("server-kill");
  EvaluationRequest one{.rule_ids = {kSshRule}};

  Evaluator ev(Ubuntu2004Stig(), {.use_servers = true}, QuietLog());
  REQUIRE(t->Evaluate(ev, one).ok());
  REQUIRE(ev.IdleServerPids().size() == 1);
  const pid_t first = ev.IdleServerPids()[0];
  REQUIRE(::kill(first, SIGKILL) == 0);
  auto again = t->Evaluate(ev, one);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(*again->VerdictOf(kSshRule) == Verdict::kFail);
  REQUIRE(ev.IdleServerPids().size() == 1);
  CHECK(ev.IdleServerPids()[0] != first);
  CHECK_FALSE(Alive(first));

  Evaluator hasty(Ubuntu2004Stig(), {.timeout = std::chrono::milliseconds(1500), .use_servers = true}, QuietLog());
  REQUIRE(t->Evaluate(hasty, one).ok());  // starts the server (its load has a bound of its own)
  REQUIRE(hasty.IdleServerPids().size() == 1);
  const pid_t hasty_server = hasty.IdleServerPids()[0];
  const std::set<pid_t> tree = Descendants(hasty_server);
  auto whole = t->Evaluate(hasty, {});  // the whole profile takes several seconds
  INFO(whole.status().ToString());
  CHECK(whole.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(whole.status().message().find("timed out") != std::string::npos);
  CHECK(hasty.IdleServerPids().empty());
  for (pid_t p : tree) CHECK_FALSE(Alive(p));
  auto after = t->Evaluate(hasty, one);  // a new server
  INFO(after.status().ToString());
  REQUIRE(after.ok());
  CHECK(*after->VerdictOf(kSshRule) == Verdict::kFail);
}

TEST_CASE("A killed evaluation child fails its evaluation, not the server", "[stig][evaluator][server]") {
  ScopedTarget t("server-child-kill");
  Evaluator ev(Ubuntu2004Stig(), {.use_servers = true}, QuietLog());
  REQUIRE(t->Evaluate(ev, {.rule_ids = {kSshRule}}).ok());
  REQUIRE(ev.IdleServerPids().size() == 1);
  const pid_t server = ev.IdleServerPids()[0];
  const std::set<pid_t> idle = Descendants(server);

  Result<Evaluation> whole = Status::Internal("not run");
  std::thread evaluation([&] { whole = t->Evaluate(ev, {}); });
  // The child is the one process of the server's tree that was not there while it was idle.
  pid_t child = 0;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       child == 0 && std::chrono::steady_clock::now() < deadline;) {
    for (pid_t p : Descendants(server)) {
      if (!idle.count(p)) child = p;
    }
    if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(child != 0);
  if (child != 0) ::kill(child, SIGKILL);
  evaluation.join();
  INFO(whole.status().ToString());
  CHECK(whole.status().code() == StatusCode::kInternal);
  CHECK(whole.status().message().find("killed by signal 9") != std::string::npos);
  REQUIRE(ev.IdleServerPids().size() == 1);
  CHECK(ev.IdleServerPids()[0] == server);  // the same server answers the next one
  auto next = t->Evaluate(ev, {.rule_ids = {kSshRule}});
  INFO(next.status().ToString());
  REQUIRE(next.ok());
  CHECK(*next->VerdictOf(kSshRule) == Verdict::kFail);
}

TEST_CASE("An Evaluator leaves no server process behind", "[stig][evaluator][server]") {
  ScopedTarget t("server-leak");
  std::set<pid_t> tree;
  {
    Evaluator ev(Ubuntu2004Stig(), {.use_servers = true}, QuietLog());
    REQUIRE(t->Evaluate(ev, {.rule_ids = {kSshRule}}).ok());
    REQUIRE(ev.IdleServerPids().size() == 1);
    tree = Descendants(ev.IdleServerPids()[0]);
    CHECK(tree.size() >= 3);  // bwrap, its init in the pid namespace, the server
  }
  // The namespace's init is reparented and reaped by init: give it a moment.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto alive = [&] {
    int n = 0;
    for (pid_t p : tree) n += Alive(p);
    return n;
  };
  while (alive() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(alive() == 0);
}

}  // namespace
}  // namespace temper::stig
