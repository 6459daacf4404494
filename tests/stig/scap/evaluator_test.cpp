#include "stig/scap/evaluator.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "platform/process.h"
#include "platform/scratch_dir.h"
#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::FullRuleId;
using testing::QuietLog;
using testing::ScopedTarget;
using testing::Ubuntu2004Stig;

// Rules whose verdicts on the fresh root are known (measured on the SSG 0.1.65 content).
const std::vector<std::string> kMixedRules = {
    "sshd_disable_root_login",      // fail: PermitRootLogin is not set
    "package_aide_installed",       // fail: aide is only in the apt cache
    "package_sudo_installed",       // pass
    "file_permissions_etc_shadow",  // pass: 0640
    "service_auditd_enabled",       // live-only: systemd state
    "no_empty_passwords",           // pass
};

TEST_CASE("Evaluator returns OpenSCAP's own verdicts for a batch of rules", "[stig][evaluator]") {
  ScopedTarget t("eval-batch");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  EvaluationRequest req;
  req.rule_ids = kMixedRules;
  auto e = t->Evaluate(ev, req);
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  REQUIRE(e->verdicts.size() == kMixedRules.size());
  CHECK(e->verdicts[0].rule_id == FullRuleId("sshd_disable_root_login"));
  CHECK(*e->VerdictOf(FullRuleId("sshd_disable_root_login")) == Verdict::kFail);
  CHECK(*e->VerdictOf(FullRuleId("package_aide_installed")) == Verdict::kFail);
  CHECK(*e->VerdictOf(FullRuleId("package_sudo_installed")) == Verdict::kPass);
  CHECK(*e->VerdictOf(FullRuleId("file_permissions_etc_shadow")) == Verdict::kPass);
  // systemd's state cannot be read from a root file system: OpenSCAP says so instead of guessing.
  Verdict svc = *e->VerdictOf(FullRuleId("service_auditd_enabled"));
  CHECK(
      (svc == Verdict::kUnknown || svc == Verdict::kError || svc == Verdict::kNotApplicable || svc == Verdict::kFail));
  CHECK(e->VerdictOf(FullRuleId("accounts_tmout")).status().code() == StatusCode::kNotFound);
}

TEST_CASE("Evaluation is deterministic", "[stig][evaluator]") {
  ScopedTarget t("eval-determinism");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  EvaluationRequest req;
  // 30 profile rules of every kind, evaluated twice on the same state.
  const auto& ids = Ubuntu2004Stig().profile_rule_ids();
  req.rule_ids.assign(ids.begin(), ids.begin() + 30);
  auto first = t->Evaluate(ev, req);
  REQUIRE(first.ok());
  for (int i = 0; i < 1; ++i) {
    auto again = t->Evaluate(ev, req);
    REQUIRE(again.ok());
    REQUIRE(again->verdicts.size() == first->verdicts.size());
    for (std::size_t k = 0; k < first->verdicts.size(); ++k) {
      INFO(first->verdicts[k].rule_id);
      CHECK(again->verdicts[k].verdict == first->verdicts[k].verdict);
    }
  }
}

TEST_CASE("A rule goes fail -> pass after its fix and back after revert", "[stig][evaluator][snapshot]") {
  ScopedTarget t("eval-fix");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  const std::string rule = FullRuleId("sshd_disable_root_login");
  EvaluationRequest req;
  req.rule_ids = {rule};
  REQUIRE(*t->Evaluate(ev, req)->VerdictOf(rule) == Verdict::kFail);

  auto snap = t->Snapshot();
  REQUIRE(snap.ok());
  const RuleInfo* info = *Ubuntu2004Stig().Rule(rule);
  REQUIRE(t->WriteFile("/tmp/fix.sh", info->fix_bash, 0700).ok());
  auto fix = t->Run("bash /tmp/fix.sh", SandboxLimits{});
  REQUIRE(fix.ok());
  REQUIRE(fix->Succeeded());
  CHECK(*t->Evaluate(ev, req)->VerdictOf(rule) == Verdict::kPass);

  REQUIRE(t->Revert(*snap).ok());
  CHECK(*t->Evaluate(ev, req)->VerdictOf(rule) == Verdict::kFail);
}

TEST_CASE("Evaluator writes XCCDF results, ARF and the fix script users know", "[stig][evaluator]") {
  ScopedTarget t("eval-files");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  EvaluationRequest req;
  req.rule_ids = {"sshd_disable_root_login", "package_sudo_installed"};
  req.output_dir = t.dir() + "/out";
  req.write_fix_script = true;
  auto e = t->Evaluate(ev, req);
  REQUIRE(e.ok());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  std::string results = slurp(e->results_path);
  CHECK(results.find("<TestResult") != std::string::npos);
  CHECK(results.find("idref=\"" + FullRuleId("sshd_disable_root_login") + "\"") != std::string::npos);
  CHECK(slurp(e->arf_path).find("asset-report-collection") != std::string::npos);
  std::string fix = slurp(e->fix_script_path);
  CHECK(fix.find("PermitRootLogin") != std::string::npos);         // the failing rule's fix
  CHECK(fix.find("package_sudo_installed") == std::string::npos);  // not the passing one's
}

TEST_CASE("Evaluator names unknown rules and a missing helper", "[stig][evaluator]") {
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  EvaluationRequest req;
  req.rule_ids = {"sshd_disable_root_logni"};
  auto e = ev.Evaluate(testing::SharedRoot(), req);
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().code() == StatusCode::kNotFound);
  CHECK(e.status().message().find("did you mean 'sshd_disable_root_login'") != std::string::npos);

  EvaluatorOptions opts;
  opts.helper_path = "/nonexistent/temper-stig-eval";
  Evaluator broken(Ubuntu2004Stig(), opts, QuietLog());
  req.rule_ids = {"sshd_disable_root_login"};
  auto b = broken.Evaluate(testing::SharedRoot(), req);
  CHECK(b.status().code() == StatusCode::kUnavailable);
  CHECK(b.status().message().find("/nonexistent/temper-stig-eval") != std::string::npos);

  req.write_fix_script = true;
  CHECK(ev.Evaluate(testing::SharedRoot(), req).status().code() == StatusCode::kInvalidArgument);
  req.write_fix_script = false;
  CHECK(ev.Evaluate("/nonexistent/root", req).status().code() == StatusCode::kNotFound);
}

TEST_CASE("Results files name the target, not the host that evaluated it", "[stig][evaluator]") {
  ScopedTarget t("eval-target-name");
  for (bool servers : {true, false}) {
    INFO((servers ? "through a server" : "through the one-shot helper"));
    Evaluator ev(Ubuntu2004Stig(), {.use_servers = servers}, QuietLog());
    const std::string out = t.dir() + (servers ? "/served" : "/one-shot");
    auto e = t->Evaluate(ev, {.rule_ids = {kMixedRules.front()}, .output_dir = out});
    INFO(e.status().ToString());
    REQUIRE(e.ok());
    for (const std::string& path : {e->results_path, e->arf_path}) {
      std::ifstream f(path);
      std::stringstream text;
      text << f.rdbuf();
      INFO(path);
      CHECK(text.str().find("<target>" + t->name() + "</target>") != std::string::npos);
    }
  }
}

TEST_CASE("Verdicts read back from a results file match the evaluation's", "[stig][evaluator]") {
  ScopedTarget t("eval-read-back");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  auto e = t->Evaluate(ev, {.rule_ids = kMixedRules, .output_dir = t.dir() + "/out"});
  REQUIRE(e.ok());
  auto read = ev.ReadResults(e->results_path, kMixedRules);
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  REQUIRE(read->size() == e->verdicts.size());
  for (std::size_t i = 0; i < read->size(); ++i) {
    CHECK((*read)[i].rule_id == e->verdicts[i].rule_id);
    CHECK((*read)[i].verdict == e->verdicts[i].verdict);
  }
}

// librpm reads its macros from the root directory, and a macro may run Lua when expanded; OpenSCAP's
// rpm probes start inside the target (and expand %{_dbpath}). Planted Lua that writes into the
// helper's verdict stream would make the evaluation fail (a malformed line) or, written cleverly,
// forge verdicts: it must not run, and every rule keeps its own verdict.
TEST_CASE("A target's rpm macros run no Lua in the evaluator", "[stig][evaluator]") {
  ScopedTarget t("eval-rpm-lua");
  REQUIRE(t->Run("mkdir -p /usr/lib/rpm /etc/rpm", SandboxLimits{})->Succeeded());
  REQUIRE(t->WriteFile("/usr/lib/rpm/rpmrc", "macrofiles: /etc/rpm/macros\n", 0644).ok());
  REQUIRE(t->WriteFile("/etc/rpm/macros",
                       "%_dbpath %{lua: io.stdout:write('target Lua ran in the evaluator' .. string.char(10)); "
                       "io.stdout:flush(); print('/var/lib/rpm')}\n",
                       0644)
              .ok());
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  auto e = t->Evaluate(ev, {});  // the whole profile: some of its CPE checks start the rpm probe
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  CHECK(e->verdicts.size() == Ubuntu2004Stig().profile_rule_ids().size());
  CHECK(*e->VerdictOf(FullRuleId("package_aide_installed")) == Verdict::kFail);
}

// The reference is the real `oscap xccdf eval` over an identical target, run the way temper ran
// OpenSCAP before its evaluator was contained: as host root, OSCAP_PROBE_ROOT pointing at the tree,
// apt kept away from the host's apt.conf.d, D-Bus pointing nowhere. Same tree, same content, so
// every rule of the profile must get the same verdict from both.
TEST_CASE("The contained evaluator gives the same verdicts as uncontained oscap on the whole STIG profile",
          "[stig][evaluator][profile]") {
  ScopedTarget contained("eval-profile");
  ScopedTarget reference("eval-profile-ref");
  // The fresh root passes every file walk; plant what the walks over the whole tree (local file
  // systems only) must find, in both, so the comparison covers how each evaluator decides which
  // directories are local.
  const std::string plant =
      "touch /etc/temper-ww && chmod 0666 /etc/temper-ww && mkdir -p /srv/temper-wwdir && chmod 0777 /srv/temper-wwdir "
      "&& "
      "touch /srv/temper-unowned && chown 4242:4242 /srv/temper-unowned && chmod 0644 /etc/shadow";
  for (ScopedTarget* t : {&contained, &reference}) {
    auto planted = (*t)->Run(plant, SandboxLimits{});
    REQUIRE(planted.ok());
    REQUIRE(planted->Succeeded());
  }
  const Content& content = Ubuntu2004Stig();
  Evaluator ev(content, {}, QuietLog());
  auto start = std::chrono::steady_clock::now();
  auto e = contained->Evaluate(ev, {});
  const double contained_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  REQUIRE(e->verdicts.size() == content.profile_rule_ids().size());

  auto work = ScratchDir::Create("", "oscap-reference");
  REQUIRE(work.ok());
  const std::string apt_conf = work->path() + "/apt.conf";
  std::ofstream(apt_conf) << "Dir::Etc::Parts \"/nonexistent\";\n";
  const std::string results = work->path() + "/results.xml";
  ProcessSpec spec;
  spec.argv = {"/usr/bin/oscap",     "xccdf",     "eval",  "--skip-valid",           "--profile",
               content.profile().id, "--results", results, content.datastream_path()};
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
              "HOME=" + work->path(),
              "LC_ALL=C",
              "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/temper-no-system-bus",
              "APT_CONFIG=" + apt_conf,
              "OSCAP_PROBE_ROOT=" + reference->root(),
              "OSCAP_EVALUATION_TARGET=chroot://" + reference->root()};
  spec.timeout = std::chrono::minutes(10);
  spec.max_output_bytes = 16 << 20;
  auto ran = RunProcess(spec);
  REQUIRE(ran.ok());
  INFO(ran->err.substr(0, 4000));
  REQUIRE(!ran->timed_out);
  REQUIRE((ran->exit_code == 0 || ran->exit_code == 2));  // oscap: 2 = some rule failed
  auto expected = ev.ReadResults(results, {});
  INFO(expected.status().ToString());
  REQUIRE(expected.ok());
  REQUIRE(expected->size() == e->verdicts.size());

  int mismatches = 0;
  std::string listed;
  for (std::size_t i = 0; i < e->verdicts.size(); ++i) {
    REQUIRE((*expected)[i].rule_id == e->verdicts[i].rule_id);
    if ((*expected)[i].verdict == e->verdicts[i].verdict) continue;
    ++mismatches;
    listed += fmt::format("\n  {}: contained {}, reference {}", e->verdicts[i].rule_id,
                          VerdictName(e->verdicts[i].verdict), VerdictName((*expected)[i].verdict));
  }
  std::string counts;
  for (const auto& [v, n] : e->Counts()) counts += fmt::format(" {} {}", n, VerdictName(v));
  fmt::print(
      "whole STIG profile, {} rules:{}; contained evaluator {:.1f} s (helper {:.1f} s), reference oscap {:.1f} s; "
      "{} mismatch(es){}\n",
      e->verdicts.size(), counts, contained_s, e->seconds, ran->seconds, mismatches, listed);
  INFO(listed);
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace temper::stig
