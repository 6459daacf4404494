// fleet_bench: hardening a fleet from one twin (issue 50), timed on this machine.
//
//   fleet_bench [--hosts N] [--at-once N] [--rules a,b,c | --whole-profile]
//
// Starts N + 1 SSH test hosts as the ssh tests make them (network namespaces, sshd over an overlay of
// the same test root: one image), a temperd with the scripted model server answering at once while
// it accounts what the reference box (vLLM, bf16, 4×L4) would have taken (latency_model.h, Pacing
// kNone), then times, through the real `temper` CLI:
//   1. `temper twin create` from the first host;
//   2. the batch on the twin (the model's work, once per image);
//   3. `temper apply` of that batch to the N other hosts, N at once by default;
//   4. a second twin of the same image and the same batch on it (fixes from the library).
// and prints a Markdown report: each step's wall time, rules fixed per host, model calls and tokens
// for the first host (the twin's batch) and for the others (apply batches: none), and beside the
// fleet's time the serial per-host loop's on the simulated reference box (N times the twin batch's
// harness time plus its model time, each request alone, as a serial loop meets them).
// Needs root and network namespaces, like the ssh tests; the SSH test root is built on first use.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
// The daemon harness reports through Catch's assertion macros; this program links Catch's
// implementation (no test runner is started, so its checks only ever count here).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/temp_dir.h"
#include "scripted_model/latency_model.h"
#include "scripted_model/scripted_model_server.h"
#include "stig/ssh/netns_ssh_host.h"
#include "stig/ssh/ssh_test_root.h"

namespace {

using temper::testing::ProcessResult;
using temper::testing::DaemonOptions;
using temper::testing::DaemonProcess;
using temper::testing::NetnsSshHost;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "fleet_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Fleet {
  DaemonProcess* daemon = nullptr;

  ProcessResult Cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {temper::testing::TemperBinary(), "--socket", daemon->socket_path()});
    return temper::testing::RunProcess(args);
  }
  nlohmann::json Json(std::vector<std::string> args) const {
    args.push_back("--json");
    ProcessResult r = Cli(args);
    if (r.exit_code != 0) Die(fmt::format("temper {} failed: {}{}", args[0], r.out, r.err));
    return nlohmann::json::parse(r.out);
  }
  void Must(const std::vector<std::string>& args) const {
    ProcessResult r = Cli(args);
    if (r.exit_code != 0) Die(fmt::format("temper {} failed: {}{}", args[0], r.out, r.err));
  }
  nlohmann::json WaitEnded(const std::string& id) const {
    while (true) {
      nlohmann::json b = Json({"status", id});
      const std::string state = b["state"].get<std::string>();
      if (state == "BATCH_STATE_COMPLETED" || state == "BATCH_STATE_FAILED" || state == "BATCH_STATE_CANCELLED") {
        return b;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  std::string Submit(const std::string& target, const std::vector<std::string>& rules, bool whole_profile) const {
    std::vector<std::string> args = {"submit", "-t", target, "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig"};
    if (whole_profile) args.push_back("--whole-profile");
    for (const std::string& r : rules) args.insert(args.end(), {"-r", r});
    return Json(args)["id"].get<std::string>();
  }
};

uint32_t Count(const nlohmann::json& batch, const char* state) {
  return batch["counts"].contains(state) ? batch["counts"][state].get<uint32_t>() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int hosts = 10, at_once = 0;
  std::vector<std::string> rules;
  bool whole_profile = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--hosts") {
      hosts = std::stoi(next());
    } else if (a == "--at-once") {
      at_once = std::stoi(next());
    } else if (a == "--rules") {
      std::string list = next();
      for (size_t p = 0; p <= list.size();) {
        size_t comma = list.find(',', p);
        if (comma == std::string::npos) comma = list.size();
        if (comma > p) rules.push_back(list.substr(p, comma - p));
        p = comma + 1;
      }
    } else if (a == "--whole-profile") {
      whole_profile = true;
    } else {
      Die("usage: fleet_bench [--hosts N] [--at-once N] [--rules a,b,c | --whole-profile]");
    }
  }
  if (rules.empty() && !whole_profile) {
    rules = {"accounts_tmout", "banner_etc_issue_net", "sshd_disable_root_login", "sshd_disable_empty_passwords"};
  }
  if (at_once == 0) at_once = hosts;
  std::string unavailable = NetnsSshHost::Unavailable();
  if (!unavailable.empty()) Die("SSH test hosts " + unavailable);
  const temper::Logger log(temper::LogLevel::kWarning);
  temper::Result<temper::testing::SshTestRoot> root = temper::testing::EnsureSshTestRoot(log);
  if (!root.ok()) Die(root.status().ToString());

  Clock::time_point t = Clock::now();
  std::vector<std::unique_ptr<NetnsSshHost>> fleet;
  for (int i = 0; i <= hosts; ++i) {
    auto host = NetnsSshHost::Start(*root, fmt::format("fb-{}", i));
    if (!host.ok()) Die(host.status().ToString());
    fleet.push_back(std::move(*host));
  }
  const double hosts_s = Seconds(t);

  temper::scripted::ScriptedModelOptions model_options;
  model_options.latency = temper::scripted::ReferenceBox();
  model_options.pacing = temper::scripted::Pacing::kNone;  // answered at once, the box's time accounted
  auto server = temper::scripted::ScriptedModelServer::Start({}, model_options);
  if (!server.ok()) Die(server.status().ToString());
  temper::testing::TempDir dir;
  DaemonOptions options;
  options.models_yaml = (*server)->ModelsYaml();
  options.content_dirs = {"/usr/share/xml/scap/ssg/content"};
  options.ssh_yaml = fmt::format("key_file: {}\nconnect_timeout: 5s", root->client_key);
  DaemonProcess daemon(dir, options);
  if (temper::Status started = daemon.Start(); !started.ok()) Die(started.ToString());
  Fleet f{&daemon};
  auto login = [&](int i) { return "admin@" + fleet[i]->address(); };
  for (int i = 0; i <= hosts; ++i) f.Must({"hosts", "accept", login(i), "--fingerprint", fleet[i]->fingerprint()});

  t = Clock::now();
  f.Must({"twin", "create", "image", "--from-host", login(0)});
  const double twin_s = Seconds(t);

  t = Clock::now();
  const std::string first = f.Submit("image", rules, whole_profile);
  nlohmann::json on_twin = f.WaitEnded(first);
  const double twin_batch_s = Seconds(t);
  const temper::scripted::ServingMetrics after_first = (*server)->Metrics();

  t = Clock::now();
  std::vector<std::string> apply = {"apply", first, "--at-once", std::to_string(at_once), "--wait"};
  for (int i = 1; i <= hosts; ++i) apply.insert(apply.end(), {"--host", login(i)});
  nlohmann::json applied = f.Json(apply);
  const double apply_s = Seconds(t);
  const temper::scripted::ServingMetrics after_apply = (*server)->Metrics();

  t = Clock::now();
  f.Must({"twin", "create", "image-again", "--from-host", login(0)});
  const std::string second = f.Submit("image-again", rules, whole_profile);
  nlohmann::json again = f.WaitEnded(second);
  const double second_s = Seconds(t);
  const temper::scripted::ServingMetrics after_second = (*server)->Metrics();

  // The serial per-host loop on the simulated reference box: every request alone, one after another.
  double model_s = 0;
  if (after_first.simulated)
    model_s = after_first.simulated->batch.prefill_seconds + after_first.simulated->batch.decode_seconds;
  const double serial_fleet_s = hosts * (twin_batch_s + model_s);

  std::printf("## fleet_bench: %d hosts, %d at once, %s\n\n", hosts, at_once,
              whole_profile ? "the whole STIG profile" : fmt::format("{} rules", rules.size()).c_str());
  std::printf("| step | wall s | result |\n|---|---:|---|\n");
  std::printf("| %d + 1 netns SSH hosts started | %.1f | |\n", hosts, hosts_s);
  std::printf("| `temper twin create` | %.1f | |\n", twin_s);
  std::printf("| batch %s on the twin | %.1f | %s; %u fixed; %lu model calls, %lu prompt + %lu completion tokens |\n",
              first.c_str(), twin_batch_s, on_twin["state"].get<std::string>().c_str(), Count(on_twin, "fixed"),
              static_cast<unsigned long>(after_first.requests), static_cast<unsigned long>(after_first.prompt_tokens),
              static_cast<unsigned long>(after_first.completion_tokens));
  std::string per_host;
  for (const auto& b : applied["batches"]) {
    per_host +=
        fmt::format("{}{}: {} fixed{}", per_host.empty() ? "" : "; ", b["target"].get<std::string>(), Count(b, "fixed"),
                    b["state"] == "BATCH_STATE_COMPLETED" ? "" : " (" + b["state"].get<std::string>() + ")");
  }
  std::printf("| `temper apply` to %d hosts | **%.1f** | %lu model calls; %s |\n", hosts, apply_s,
              static_cast<unsigned long>(after_apply.requests - after_first.requests), per_host.c_str());
  std::printf("| second twin + the same batch %s (library) | %.1f | %s; %u fixed; %lu model calls, %lu tokens |\n",
              second.c_str(), second_s, again["state"].get<std::string>().c_str(), Count(again, "fixed"),
              static_cast<unsigned long>(after_second.requests - after_apply.requests),
              static_cast<unsigned long>(after_second.prompt_tokens + after_second.completion_tokens -
                                         after_apply.prompt_tokens - after_apply.completion_tokens));
  std::printf("\n- time to harden %d hosts from the twin: %.1f s (twin copy + twin batch + apply: %.1f s)\n", hosts,
              apply_s, twin_s + twin_batch_s + apply_s);
  std::printf(
      "- the serial per-host loop on the simulated reference box: %d x (%.1f s harness + %.1f s model) = %.0f s\n",
      hosts, twin_batch_s, model_s, serial_fleet_s);
  std::printf("- model tokens, first host: %lu; each further host: %lu\n",
              static_cast<unsigned long>(after_first.prompt_tokens + after_first.completion_tokens),
              static_cast<unsigned long>((after_apply.prompt_tokens + after_apply.completion_tokens -
                                          after_first.prompt_tokens - after_first.completion_tokens) /
                                         std::max(hosts, 1)));
  std::printf("- model: %s\n", temper::scripted::SummaryLine(after_first).c_str());
  return 0;
}
