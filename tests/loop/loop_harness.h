// The loop's end-to-end tests all drive the same setup: temperd with rootfs targets that are fresh
// overlays over the stig suite's shared root, models.yaml pointing every role at the scripted model
// server, batches submitted over the real socket (gRPC or the temper CLI) and waited on. This is
// that setup written once, so that each test file holds only its story and its assertions.
//
// Every helper asserts with Catch (REQUIRE/FAIL) where the daemon does not answer as a working
// daemon must, so it may be called only from a test case's thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/temp_dir.h"
#include "scripted_model/scripted_model_server.h"

namespace temper::testing {

// SCAP Security Guide's prefix of XCCDF rule ids; tests name rules by what follows it.
inline constexpr const char* kSsgRulePrefix = "xccdf_org.ssgproject.content_rule_";

// "xccdf_org.ssgproject.content_rule_accounts_tmout" -> "accounts_tmout".
std::string ShortRuleName(const std::string& rule_id);

// The root filesystem the stig_rootfs ctest fixture builds, shared read-only by every target.
std::string SharedRoot();

struct LoopDaemonOptions {
  // Rootfs targets besides "lab", each a fresh overlay over the shared root.
  std::vector<std::string> more_targets;
  // More top-level temperd.yaml keys, as written (DaemonOptions::extra_yaml).
  std::string extra_yaml;
  // Where temperd takes datastreams from; empty: SCAP Security Guide's system directory.
  std::vector<std::string> content_dirs;
  // listen.dashboard as a flow mapping; empty: no dashboard (DaemonOptions::dashboard_yaml).
  std::string dashboard_yaml;
};

// What a test asks of a batch, over gRPC (Submit) or through `temper submit` (SubmitWithCli).
struct BatchSpec {
  std::vector<std::string> rules;  // names after kSsgRulePrefix
  uint32_t max_attempts = 0;       // per rule; 0 leaves the daemon's default
  uint64_t max_tokens = 0;         // per rule, all roles; 0 leaves the daemon's default
  std::string target = "lab";
  bool allow_disruptive = false;
  bool plan_only = false;
  uint32_t parallel_attempts = 0;  // 0 leaves the daemon's loop.parallel_attempts
  std::string name = "e2e";        // the label people see
};

// temperd with the rootfs target "lab" (and LoopDaemonOptions::more_targets) over the shared root
// and the scripted model serving the architect, worker and reflector roles. Started by the
// constructor; stopped when it dies. `daemon` may be stopped and started again by a test (a kill
// -9, a config change); its targets' state survives in `dir`.
struct LoopDaemon {
  explicit LoopDaemon(const scripted::ScriptedModelServer& server, const LoopDaemonOptions& options = {});
  // The same with the roles served as `models_yaml` says (an inprocess endpoint, say).
  explicit LoopDaemon(const std::string& models_yaml, const LoopDaemonOptions& options = {});
  LoopDaemon(const LoopDaemon&) = delete;
  LoopDaemon& operator=(const LoopDaemon&) = delete;

  // Where `path` of a target is seen now: its overlay's merged view, mounted while temperd runs.
  std::string TargetPath(const std::string& path, const std::string& target = "lab") const;
  bool TargetHas(const std::string& path, const std::string& target = "lab") const;

  // Over gRPC. Submit returns the new batch's id.
  std::string Submit(const BatchSpec& spec) const;
  temper::v1::Batch GetBatch(const std::string& batch_id) const;
  // Polls until the batch is completed, failed or cancelled; FAILs after 20 minutes.
  temper::v1::Batch WaitUntilEnded(const std::string& batch_id) const;
  // The batch's journal so far, in order.
  std::vector<temper::v1::JournalEvent> JournalEvents(const std::string& batch_id) const;
  // Polls for the first event of `type` with a seq above `after_seq` and returns its seq; FAILs
  // after 10 minutes.
  uint64_t WaitForEvent(const std::string& batch_id, const std::string& type, uint64_t after_seq = 0) const;
  temper::v1::BatchReport Report(const std::string& batch_id) const;

  // Through the temper CLI, as an operator types it (the socket is added).
  ProcessResult Cli(std::vector<std::string> args) const;
  // Cli, REQUIREd to exit 0, its stdout parsed as JSON.
  nlohmann::json CliJson(const std::vector<std::string>& args) const;
  // `temper submit ... --json`; returns the new batch's id.
  std::string SubmitWithCli(const BatchSpec& spec) const;
  // `temper report ID --format json`.
  nlohmann::json ReportJson(const std::string& batch_id) const;
  // `temper watch ID --no-follow --json`: one object per journal event, in order.
  std::vector<nlohmann::json> WatchedEvents(const std::string& batch_id) const;

  TempDir dir;  // the daemon's config and state, and each target's directory <dir>/<name>
  std::unique_ptr<DaemonProcess> daemon;
};

// A batch's rules keyed by ShortRuleName.
std::map<std::string, temper::v1::BatchRule> RulesByShortName(const temper::v1::Batch& batch);

}  // namespace temper::testing
