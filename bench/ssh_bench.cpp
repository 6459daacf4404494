// ssh_bench: what an SSH host costs the loop — a command, a file each way, an undo snapshot and
// revert, and OpenSCAP on the host beside the local evaluator.
//
//   ssh_bench --host USER@NAME[:PORT] --known-hosts FILE [--key FILE] [--reps N]
//   ssh_bench --netns [--reps N]
//
// --netns starts a host like the ssh tests do (network namespace, sshd over an overlay of the
// tests' cached root; needs root and a build tree whose ssh tests have run once), and also times
// the local evaluator on the same tree. Against a real host the undo journal is written in
// /var/lib/temper/undo/ssh-bench and snapshot 0 is left there (delete it afterwards); the bench
// changes /etc/temper-ssh-bench only and reverts it. Prints milliseconds, medians of N.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/ssh/netns_ssh_host.h"
#include "stig/ssh/remote_oscap.h"
#include "stig/ssh/ssh_connection.h"
#include "stig/ssh/ssh_known_hosts.h"
#include "stig/ssh/ssh_test_root.h"
#include "stig/ssh/undo_journal.h"

namespace {

using namespace temper;
using namespace temper::stig;
using bench::Clock;
using bench::Median;
using bench::Ms;

int Fail(const Status& s) {
  std::fprintf(stderr, "ssh_bench: %s\n", s.ToString().c_str());
  return 1;
}

// Runs `f` `reps` times and prints its median.
template <typename F>
Status Time(const char* what, int reps, F f) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    TEMPER_RETURN_IF_ERROR(f());
    ms.push_back(Ms(a, Clock::now()));
  }
  std::printf("%-44s %10.1f ms  (median of %d)\n", what, Median(ms), reps);
  return Status::OK();
}

Status Bench(RemoteShell& shell, const std::string& local_tree, int reps, const Logger& log) {
  SandboxLimits limits;
  limits.timeout = std::chrono::seconds(60);
  TEMPER_RETURN_IF_ERROR(Time("exec `true` through the master", reps, [&]() -> Status {
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell.Exec({"true"}, {}, limits));
    return r.Succeeded() ? Status::OK() : Status::Internal("true failed: " + r.err);
  }));
  const std::string mib(1 << 20, 'x');
  TEMPER_RETURN_IF_ERROR(Time("write 1 MiB (temp file, length check, rename)", reps,
                              [&] { return RemoteWriteFile(shell, "/etc/temper-ssh-bench", mib, 0600); }));
  TEMPER_RETURN_IF_ERROR(
      Time("read 1 MiB", reps, [&] { return RemoteReadFile(shell, "/etc/temper-ssh-bench", 2 << 20).status(); }));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult removed, shell.Exec({"rm", "-f", "/etc/temper-ssh-bench"}, {}, limits));
  (void)removed;

  auto a = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(UndoJournal journal, UndoJournal::Open(shell, {"/var/lib/temper/undo/ssh-bench"}, log));
  std::printf("%-44s %10.1f ms\n", "undo journal open (snapshot 0 when new)", Ms(a, Clock::now()));
  std::uint32_t id = 0;
  TEMPER_RETURN_IF_ERROR(Time("undo snapshot (default roots)", reps, [&]() -> Status {
    TEMPER_ASSIGN_OR_RETURN(id, journal.Snapshot());
    return Status::OK();
  }));
  TEMPER_RETURN_IF_ERROR(Time("undo revert after a one-file change", reps, [&]() -> Status {
    Status changed = RemoteWriteFile(shell, "/etc/temper-ssh-bench", "changed\n", 0644);
    return changed.ok() ? journal.Revert(id).status() : changed;
  }));

  Result<Content> content = Content::Load(std::string(kUbuntu2004Datastream), "stig");
  if (!content.ok()) return content.status();
  Evaluator evaluator(*content, {}, log);
  RemoteOscap oscap(shell, "/var/lib/temper", log);
  EvaluationRequest one{.rule_ids = {"sshd_disable_root_login"}};
  TEMPER_RETURN_IF_ERROR(Time("oscap on the host, 1 rule (datastream cached)", reps,
                              [&] { return oscap.Evaluate(evaluator, one).status(); }));
  TEMPER_RETURN_IF_ERROR(
      Time("oscap on the host, whole profile", 1, [&] { return oscap.Evaluate(evaluator, {}).status(); }));
  if (!local_tree.empty()) {
    TEMPER_RETURN_IF_ERROR(Time("local evaluator on the same tree, 1 rule", reps,
                                [&] { return evaluator.Evaluate(local_tree, one).status(); }));
    TEMPER_RETURN_IF_ERROR(Time("local evaluator on the same tree, whole profile", 1,
                                [&] { return evaluator.Evaluate(local_tree, {}).status(); }));
  }
  return Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  std::string host, key, known_hosts;
  bool netns = false;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--host") host = value();
    else if (a == "--key") key = value();
    else if (a == "--known-hosts") known_hosts = value();
    else if (a == "--reps") reps = std::max(1, std::atoi(value().c_str()));
    else if (a == "--netns") netns = true;
    else {
      std::fprintf(stderr,
                   "usage: ssh_bench --host USER@NAME[:PORT] --known-hosts FILE [--key FILE] [--reps N] | --netns\n");
      return 2;
    }
  }
  Logger log(LogLevel::kWarning);
  temper::testing::ScopedControlDir control;
  std::unique_ptr<temper::testing::NetnsSshHost> test_host;
  SshOptions options;
  if (netns) {
    Result<temper::testing::SshTestRoot> root = temper::testing::EnsureSshTestRoot(log);
    if (!root.ok()) return Fail(root.status());
    Result<std::unique_ptr<temper::testing::NetnsSshHost>> started =
        temper::testing::NetnsSshHost::Start(*root, "bench");
    if (!started.ok()) return Fail(started.status());
    test_host = std::move(*started);
    known_hosts = test_host->dir() + "/files/known_hosts";
    Result<HostKey> accepted =
        AcceptHostKey(known_hosts, test_host->Endpoint("root"), test_host->fingerprint(), std::chrono::seconds(5));
    if (!accepted.ok()) return Fail(accepted.status());
    options =
        temper::testing::TestSshOptions(test_host->Endpoint("root"), root->client_key, known_hosts, control.path());
  } else {
    Result<SshEndpoint> endpoint = SshEndpoint::Parse(host);
    if (!endpoint.ok()) return Fail(endpoint.status());
    options.endpoint = *endpoint;
    options.identity_file = key;
    options.known_hosts = known_hosts;
    options.control_dir = control.path();
  }
  auto a = Clock::now();
  Result<std::unique_ptr<SshConnection>> connection = SshConnection::Open(options, log);
  if (!connection.ok()) return Fail(connection.status());
  std::printf("%-44s %10.1f ms\n", "open the master connection (+ sudo check)", Ms(a, Clock::now()));
  Status s = Bench(**connection, test_host ? test_host->tree() : "", reps, log);
  if (!s.ok()) return Fail(s);
  return 0;
}
