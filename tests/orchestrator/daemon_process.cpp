#include "orchestrator/daemon_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <catch2/catch.hpp>

#include "orchestrator/message_chunks.h"
#include "platform/cgroup.h"

namespace temper::testing {

namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string MoreTargets(const DaemonOptions& options) {
  std::string out;
  for (const auto& [name, path] : options.more_targets) {
    out += fmt::format("  {}:\n    type: rootfs\n    path: {}\n", name, path);
  }
  return out;
}

}  // namespace

std::string TemperdBinary() { return std::string(TEMPER_BINARY_DIR) + "/orchestrator/temperd"; }
std::string TemperBinary() { return std::string(TEMPER_BINARY_DIR) + "/orchestrator/temper"; }

std::string CopyForOtherUsers(const TempDir& dir, const std::string& binary) {
  namespace fs = std::filesystem;
  const fs::path copy = fs::path(dir / "bin") / fs::path(binary).filename();
  std::error_code ec;
  fs::create_directories(copy.parent_path(), ec);
  if (!ec) fs::copy_file(binary, copy, fs::copy_options::overwrite_existing, ec);
  INFO("copying " << binary << " to " << copy.string() << ": " << ec.message());
  REQUIRE(!ec);
  constexpr fs::perms kEveryone = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec;  // 0755
  for (const fs::path& p : {fs::path(dir.path()), copy.parent_path(), copy}) {
    fs::permissions(p, kEveryone, ec);
    INFO("making " << p.string() << " mode 0755: " << ec.message());
    REQUIRE(!ec);
  }
  return copy.string();
}

std::unique_ptr<grpc::ClientContext> CallContext(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

temper::v1::Batch SubmitOk(temper::v1::Temper::Stub& stub, const temper::v1::SubmitBatchRequest& request) {
  temper::v1::Batch b;
  grpc::Status s = stub.SubmitBatch(CallContext().get(), request, &b);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return b;
}

std::vector<temper::v1::JournalEvent> ReadJournal(temper::v1::Temper::Stub& stub, const std::string& batch,
                                                  uint64_t after_seq) {
  temper::v1::WatchJournalRequest req;
  req.set_batch_id(batch);
  req.set_after_seq(after_seq);
  req.set_follow(false);
  auto ctx = CallContext();
  auto reader = stub.WatchJournal(ctx.get(), req);
  std::vector<temper::v1::JournalEvent> events;
  temper::v1::JournalEvent e;
  while (reader->Read(&e)) events.push_back(e);
  grpc::Status s = reader->Finish();
  INFO(s.error_message());
  REQUIRE(s.ok());
  return events;
}

temper::v1::BatchReport ReadReport(temper::v1::Temper::Stub& stub, const std::string& batch, int seconds) {
  temper::v1::GetBatchReportRequest req;
  req.set_batch_id(batch);
  auto ctx = CallContext(seconds);
  auto reader = stub.GetBatchReport(ctx.get(), req);
  ChunkAssembler<temper::v1::BatchReportChunk> report;
  temper::v1::BatchReportChunk chunk;
  while (reader->Read(&chunk)) {
    Status added = report.Add(chunk);
    INFO(added.ToString());
    REQUIRE(added.ok());
  }
  grpc::Status s = reader->Finish();
  INFO(s.error_message());
  REQUIRE(s.ok());
  Result<temper::v1::BatchReport> whole = std::move(report).Finish();
  INFO(whole.status().ToString());
  REQUIRE(whole.ok());
  return *std::move(whole);
}

ProcessResult RunProcess(const std::vector<std::string>& argv, int run_as_uid, int run_as_gid) {
  TempDir capture;
  std::string out_path = capture / "out";
  std::string err_path = capture / "err";
  std::vector<char*> args = CStrings(argv);
  const std::string cannot_run = "cannot run " + argv[0] + ": ";
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    // Nothing else of the test process: programs that number their own descriptors (mmdebstrap
    // hands apt a pipe by number) must find the table as a shell would leave it.
    close_range(3, ~0U, 0);
    if (run_as_uid >= 0) {
      if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(run_as_gid)) != 0 ||
          setuid(static_cast<uid_t>(run_as_uid)) != 0) {
        _exit(126);
      }
    }
    execv(args[0], args.data());
    // No allocation here: another thread of the parent may have held malloc's lock at the fork.
    const char* why = std::strerror(errno);
    (void)!write(2, cannot_run.data(), cannot_run.size());
    (void)!write(2, why, std::strlen(why));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  return result;
}

// A datastream with the ids submits are checked against (the stig profile and the rules
// ValidSubmit names) and nothing OpenSCAP could evaluate: for tests that never run a loop on it.
constexpr const char* kTestDatastream = R"(<?xml version="1.0" encoding="UTF-8"?>
<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2" id="scap_test_collection">
  <ds:component id="scap_test_comp_xccdf">
    <xccdf:Benchmark xmlns:xccdf="http://checklists.nist.gov/xccdf/1.2" id="xccdf_org.ssgproject.content_benchmark_TEST">
      <xccdf:Profile id="xccdf_org.ssgproject.content_profile_stig"/>
      <xccdf:Rule id="xccdf_org.ssgproject.content_rule_sshd_disable_root_login"/>
      <xccdf:Rule id="xccdf_org.ssgproject.content_rule_accounts_tmout"/>
      <xccdf:Rule id="xccdf_org.ssgproject.content_rule_banner_etc_issue_net"/>
      <xccdf:Rule id="xccdf_org.ssgproject.content_rule_package_aide_installed"/>
    </xccdf:Benchmark>
  </ds:component>
</ds:data-stream-collection>
)";

DaemonProcess::DaemonProcess(const TempDir& dir, const DaemonOptions& options) : dir_(dir) {
  socket_path_ = dir / "run/temper.sock";
  log_path_ = dir / "temperd.log";
  dir.Write("content/ssg-test-ds.xml", kTestDatastream);
  std::string listen = fmt::format("listen:\n  unix:\n    path: {}\n", socket_path_);
  if (!options.unix_group.empty()) listen += fmt::format("    group: {}\n", options.unix_group);
  if (!options.tcp_yaml.empty()) {
    listen += "  tcp:\n";
    size_t start = 0;
    while (start < options.tcp_yaml.size()) {
      size_t end = options.tcp_yaml.find('\n', start);
      if (end == std::string::npos) end = options.tcp_yaml.size();
      listen += "    " + options.tcp_yaml.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  if (!options.metrics_listen.empty()) listen += fmt::format("  metrics: '{}'\n", options.metrics_listen);
  if (!options.dashboard_yaml.empty()) listen += fmt::format("  dashboard: {}\n", options.dashboard_yaml);
  std::string ssh;
  if (!options.ssh_yaml.empty()) {
    ssh = "ssh:\n";
    size_t start = 0;
    while (start < options.ssh_yaml.size()) {
      size_t end = options.ssh_yaml.find('\n', start);
      if (end == std::string::npos) end = options.ssh_yaml.size();
      ssh += "  " + options.ssh_yaml.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  std::string models;
  if (!options.models_yaml.empty()) {
    dir.Write("models.yaml", options.models_yaml);
    models = "models: models.yaml\n";
  }
  config_path_ =
      dir.Write("temperd.yaml",
                listen + models + ssh +
                    fmt::format("state_dir: state\ncontent_dirs: [{}]\nshutdown_grace: 2s\nlog_level: debug\n"
                                "targets:\n  lab:\n    type: rootfs\n    path: {}\n",
                                options.content_dirs.empty() ? "content"
                                                             : fmt::format("{}", fmt::join(options.content_dirs, ", ")),
                                options.lab_path.empty() ? "roots/lab" : options.lab_path) +
                    MoreTargets(options) + options.extra_yaml);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Stop(SIGKILL);
  // A daemon killed with -9 (here or by the test) leaves its sandboxes' cgroup tree; the next
  // daemon would remove it, but no cgroup may outlive the test.
  temper::CgroupTree::RemoveStale();
  if (notify_fd_ >= 0) close(notify_fd_);
}

Status DaemonProcess::Start() {
  std::string notify_path = dir_ / "notify.sock";
  if (notify_fd_ < 0) {  // bound once: every start of this daemon reports to the same socket
    notify_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, notify_path.c_str(), sizeof addr.sun_path - 1);
    if (bind(notify_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return Status::FromErrno(errno, "binding the notify socket");
    }
  }
  std::vector<std::string> argv = {TemperdBinary(), "--config", config_path_};
  // Its temporaries (change sets' diffs, ...) in the test's directory, so a killed temperd's go with it.
  const std::string tmp = dir_ / "tmp";
  std::filesystem::create_directories(tmp);
  std::vector<std::string> env = {"NOTIFY_SOCKET=" + notify_path, "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  "TMPDIR=" + tmp};
  std::vector<char*> args = CStrings(argv);
  std::vector<char*> envp = CStrings(env);
  pid_ = fork();
  if (pid_ == 0) {
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(log, 1);
    dup2(log, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  // Only this start's notifications count; earlier runs of the same harness sent READY=1 too.
  size_t first_new = notifications_.size();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> notes = Notifications();
    for (size_t i = first_new; i < notes.size(); ++i) {
      if (notes[i].find("READY=1") != std::string::npos) return Status::OK();
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable(fmt::format("temperd exited during start-up (status {}):\n{}", status, Log()));
    }
  }
  return Status::DeadlineExceeded("temperd did not send READY=1 within 30 s:\n" + Log());
}

int DaemonProcess::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  Notifications();  // collect STOPPING=1
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<int> DaemonProcess::StopWithin(int sig, std::chrono::milliseconds limit) {
  if (pid_ <= 0) return std::nullopt;
  kill(pid_, sig);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      Stop(SIGKILL);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  Notifications();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool DaemonProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  return false;
}

std::vector<std::string> DaemonProcess::Notifications() {
  pollfd p{notify_fd_, POLLIN, 0};
  while (notify_fd_ >= 0 && poll(&p, 1, 50) > 0) {
    char buf[4096];
    ssize_t n = recv(notify_fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    notifications_.emplace_back(buf, static_cast<size_t>(n));
  }
  return notifications_;
}

std::string DaemonProcess::Log() const { return ReadFileOrEmpty(log_path_); }

std::shared_ptr<grpc::Channel> DaemonProcess::Channel() const {
  return grpc::CreateChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials());
}

std::unique_ptr<temper::v1::Temper::Stub> DaemonProcess::Stub() const { return temper::v1::Temper::NewStub(Channel()); }

int FreeLoopbackPort() {
  int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(probe >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  close(probe);
  return ntohs(addr.sin_port);
}

temper::v1::SubmitBatchRequest ValidSubmit(const std::string& name) {
  temper::v1::SubmitBatchRequest r;
  r.set_name(name);
  r.set_target("lab");
  r.set_datastream("ssg-test-ds.xml");
  r.set_profile("stig");
  r.add_rule_ids("sshd_disable_root_login");
  r.add_rule_ids("accounts_tmout");
  return r;
}

int NotifiedPort(DaemonProcess& daemon, const std::string& marker) {
  for (const std::string& note : daemon.Notifications()) {
    const size_t at = note.find(marker);
    if (at != std::string::npos) return std::stoi(note.substr(at + marker.size()));
  }
  FAIL("READY's status names no address after '" << marker << "'");
  return 0;
}

}  // namespace temper::testing
