#include "loop/loop_harness.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

namespace temper::testing {
namespace {

// A fresh target directory <dir>/<name> whose root is the shared root: temperd mounts its overlay.
std::string MakeTargetDir(const TempDir& dir, const std::string& name) {
  std::filesystem::create_directories(dir / name);
  std::filesystem::create_directory_symlink(SharedRoot(), dir / (name + "/root"));
  return dir / name;
}

std::unique_ptr<grpc::ClientContext> ContextWithDeadline() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

bool Ended(const temper::v1::Batch& b) {
  return b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
         b.state() == temper::v1::BATCH_STATE_CANCELLED;
}

}  // namespace

std::string ShortRuleName(const std::string& rule_id) { return rule_id.substr(std::string(kSsgRulePrefix).size()); }

std::string SharedRoot() { return std::string(TEMPER_BINARY_DIR) + "/stig-rootfs/root"; }

LoopDaemon::LoopDaemon(const scripted::ScriptedModelServer& server, const LoopDaemonOptions& options)
    : LoopDaemon(server.ModelsYaml(), options) {}

LoopDaemon::LoopDaemon(const std::string& models_yaml, const LoopDaemonOptions& options) {
  REQUIRE(std::filesystem::is_directory(SharedRoot()));
  DaemonOptions daemon_options;
  for (const std::string& name : options.more_targets) {
    daemon_options.more_targets.push_back({name, MakeTargetDir(dir, name)});
  }
  daemon_options.models_yaml = models_yaml;
  daemon_options.content_dirs = options.content_dirs;
  if (daemon_options.content_dirs.empty()) daemon_options.content_dirs = {"/usr/share/xml/scap/ssg/content"};
  daemon_options.lab_path = MakeTargetDir(dir, "lab");
  daemon_options.extra_yaml = options.extra_yaml;
  daemon_options.dashboard_yaml = options.dashboard_yaml;
  daemon = std::make_unique<DaemonProcess>(dir, daemon_options);
  REQUIRE(daemon->Start().ok());
}

std::string LoopDaemon::TargetPath(const std::string& path, const std::string& target) const {
  return dir / (target + "/state/merged" + path);
}

bool LoopDaemon::TargetHas(const std::string& path, const std::string& target) const {
  return std::filesystem::exists(TargetPath(path, target));
}

std::string LoopDaemon::Submit(const BatchSpec& spec) const {
  temper::v1::SubmitBatchRequest req;
  req.set_name(spec.name);
  req.set_target(spec.target);
  req.set_datastream("ssg-ubuntu2004-ds.xml");
  req.set_profile("stig");
  for (const std::string& r : spec.rules) req.add_rule_ids(r);
  if (spec.max_attempts != 0) req.mutable_budgets()->set_max_attempts(spec.max_attempts);
  if (spec.max_tokens != 0) req.mutable_budgets()->set_max_tokens(spec.max_tokens);
  req.set_allow_disruptive(spec.allow_disruptive);
  req.set_plan_only(spec.plan_only);
  req.set_parallel_attempts(spec.parallel_attempts);
  temper::v1::Batch batch;
  grpc::Status s = daemon->Stub()->SubmitBatch(ContextWithDeadline().get(), req, &batch);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return batch.id();
}

temper::v1::Batch LoopDaemon::GetBatch(const std::string& batch_id) const {
  temper::v1::GetBatchRequest req;
  req.set_batch_id(batch_id);
  temper::v1::Batch b;
  REQUIRE(daemon->Stub()->GetBatch(ContextWithDeadline().get(), req, &b).ok());
  return b;
}

temper::v1::Batch LoopDaemon::WaitUntilEnded(const std::string& batch_id) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  while (std::chrono::steady_clock::now() < deadline) {
    temper::v1::Batch b = GetBatch(batch_id);
    if (Ended(b)) return b;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("batch " << batch_id << " did not end in 20 minutes:\n" << daemon->Log());
  return {};
}

std::vector<temper::v1::JournalEvent> LoopDaemon::JournalEvents(const std::string& batch_id) const {
  temper::v1::WatchJournalRequest req;
  req.set_batch_id(batch_id);
  req.set_follow(false);
  auto ctx = ContextWithDeadline();
  auto stub = daemon->Stub();
  auto reader = stub->WatchJournal(ctx.get(), req);
  std::vector<temper::v1::JournalEvent> events;
  temper::v1::JournalEvent e;
  while (reader->Read(&e)) events.push_back(e);
  REQUIRE(reader->Finish().ok());
  return events;
}

uint64_t LoopDaemon::WaitForEvent(const std::string& batch_id, const std::string& type, uint64_t after_seq) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : JournalEvents(batch_id)) {
      if (e.type() == type && e.seq() > after_seq) return e.seq();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("no " << type << " event in batch " << batch_id << ":\n" << daemon->Log());
  return 0;
}

temper::v1::BatchReport LoopDaemon::Report(const std::string& batch_id) const {
  return ReadReport(*daemon->Stub(), batch_id);
}

ProcessResult LoopDaemon::Cli(std::vector<std::string> args) const {
  args.insert(args.begin(), {TemperBinary(), "--socket", daemon->socket_path()});
  return RunProcess(args);
}

nlohmann::json LoopDaemon::CliJson(const std::vector<std::string>& args) const {
  ProcessResult r = Cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

std::string LoopDaemon::SubmitWithCli(const BatchSpec& spec) const {
  std::vector<std::string> args = {"submit", "-t",   spec.target, "-d",      "ssg-ubuntu2004-ds.xml",
                                   "-p",     "stig", "--name",    spec.name, "--json"};
  for (const std::string& r : spec.rules) args.insert(args.end(), {"-r", r});
  if (spec.max_attempts != 0) args.insert(args.end(), {"--max-attempts", std::to_string(spec.max_attempts)});
  if (spec.allow_disruptive) args.push_back("--allow-disruptive");
  if (spec.plan_only) args.push_back("--plan-only");
  if (spec.parallel_attempts != 0) {
    args.insert(args.end(), {"--parallel-attempts", std::to_string(spec.parallel_attempts)});
  }
  return CliJson(args)["id"].get<std::string>();
}

nlohmann::json LoopDaemon::ReportJson(const std::string& batch_id) const {
  return CliJson({"report", batch_id, "--format", "json"});
}

std::vector<nlohmann::json> LoopDaemon::WatchedEvents(const std::string& batch_id) const {
  ProcessResult r = Cli({"watch", batch_id, "--no-follow", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<nlohmann::json> events;
  size_t start = 0;
  while (start < r.out.size()) {
    size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    if (end > start) events.push_back(nlohmann::json::parse(r.out.substr(start, end - start)));
    start = end + 1;
  }
  return events;
}

std::map<std::string, temper::v1::BatchRule> RulesByShortName(const temper::v1::Batch& batch) {
  std::map<std::string, temper::v1::BatchRule> out;
  for (const auto& r : batch.rules()) out[ShortRuleName(r.rule_id())] = r;
  return out;
}

}  // namespace temper::testing
