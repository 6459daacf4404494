// Attacks on content trust (issue 20): a client that can reach temperd's socket hands it a SCAP
// datastream whose rule is an OpenSCAP SCE script. temperd evaluates as root, so if anything on
// the way runs that script, any member of the temper group (or holder of the TCP token) is root.
// Each case drives the real temper CLI against a real temperd (or the real temper-stig-eval), and
// the script's only effect is to create a marker file: the marker must never appear.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "loop/loop_harness.h"
#include "orchestrator/temp_dir.h"
#include "security/sce_datastream.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

using scripted::ModelScript;
using scripted::ScriptedModelServer;

constexpr uid_t kNobody = 65534;

std::unique_ptr<ScriptedModelServer> StartModel() {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  return std::move(*server);
}

// Where the script would leave its mark: a directory of its own, so nothing else creates the file.
struct Marker {
  TempDir dir;
  std::string path = dir / "sce-script-ran";
  bool Exists() const { return fs::exists(path); }
};

TEST_CASE("SCE datastream from a client's own directory: temper submit is refused and the script never runs",
          "[security][content]") {
  Marker marker;
  auto model = StartModel();
  LoopDaemon d(*model);

  // A temper-group member's home: the user owns the directory and the datastream in it.
  TempDir home;
  std::string ds = home.Write("me/ds.xml", SceDatastream(marker.path));
  REQUIRE(::chown((home / "me").c_str(), kNobody, kNobody) == 0);
  REQUIRE(::chown(ds.c_str(), kNobody, kNobody) == 0);

  ProcessResult submitted =
      d.Cli({"submit", "-t", "lab", "-d", ds, "-p", "stig", "-r", kSceRule, "--name", "sce-own-dir", "--json"});
  if (submitted.exit_code == 0) {
    // Accepted: let the batch run to its end, so the check below sees whatever it did.
    d.WaitUntilEnded(nlohmann::json::parse(submitted.out)["id"].get<std::string>());
  }
  INFO("stdout: " << submitted.out << "\nstderr: " << submitted.err);
  CHECK(submitted.exit_code == 1);
  CHECK(submitted.err.find(ds) != std::string::npos);
  CHECK(submitted.err.find("/usr/share/xml/scap/ssg/content") != std::string::npos);  // the configured directory
  CHECK_FALSE(marker.Exists());
}

TEST_CASE("SCE datastream in a content directory: the batch fails naming the rule and SCE, the script never runs",
          "[security][content]") {
  Marker marker;
  auto model = StartModel();
  // A content directory the operator configured (root's, not writable by anyone else), holding a
  // datastream with an SCE rule: trusted location, untrusted check system.
  TempDir content;
  REQUIRE(::chmod(content.path().c_str(), 0755) == 0);
  content.Write("ssg-sce-ds.xml", SceDatastream(marker.path));
  LoopDaemon d(*model, {.content_dirs = {content.path()}});

  nlohmann::json submitted = d.CliJson({"submit", "-t", "lab", "-d", "ssg-sce-ds.xml", "-p", "stig", "-r", kSceRule,
                                        "--name", "sce-content-dir", "--json"});
  temper::v1::Batch batch = d.WaitUntilEnded(submitted["id"].get<std::string>());
  INFO("batch error: " << batch.error() << "\n" << d.daemon->Log());
  CHECK(batch.state() == temper::v1::BATCH_STATE_FAILED);
  CHECK(batch.error().find(std::string(kSsgRulePrefix) + kSceRule) != std::string::npos);
  CHECK(batch.error().find(kSceSystem) != std::string::npos);
  CHECK_FALSE(marker.Exists());
}

TEST_CASE("SCE datastream given to temper-stig-eval directly: refused, the script never runs", "[security][content]") {
  Marker marker;
  TempDir dir;
  std::string ds = dir.Write("sce-ds.xml", SceDatastream(marker.path));
  fs::create_directories(dir / "root/etc");
  const std::string rule = std::string(kSsgRulePrefix) + kSceRule;
  ProcessResult r =
      RunProcess({std::string(TEMPER_BINARY_DIR) + "/stig/temper-stig-eval", "--datastream", ds, "--profile",
                  "xccdf_org.ssgproject.content_profile_stig", "--root", dir / "root", "--rule", rule});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(rule) != std::string::npos);
  CHECK(r.err.find(kSceSystem) != std::string::npos);
  CHECK_FALSE(marker.Exists());
}

}  // namespace
}  // namespace temper::testing
