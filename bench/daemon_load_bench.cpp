// daemon_load_bench: temperd under a flood from clients (issue 46, findings 2 and 3). Runs the real
// temperd (with a models.yaml whose endpoint is down, so its loop runs) and, phase by phase: 500
// concurrent watch streams of root's, then 500 of a member's (uid 65534 in the socket's group
// nogroup, as tests/security/daemon_attacks_test.cpp runs one), then 1,000 submits from that member
// (every other one naming an SSH host no admin registered). After each phase it prints temperd's
// threads (/proc/PID/status Threads), RSS and open descriptors, and the median and slowest of root's
// own ListBatches calls made during the phase. The goal: flat threads, memory and descriptors, and
// root served in under 100 ms throughout. Needs root (to be the member, and to be root).
//
//   build/bench/daemon_load_bench [--temperd PATH] [--flood PATH] [--streams 500] [--submits 1000]
//                                 [--no-models]
//
// --temperd runs another build's temperd (an older one, for the numbers before a change); --flood is
// tests/security's temper_watch_flood (many `temper watch` clients in one process); --no-models
// starts temperd without models.yaml, so no loop runs and submitted batches stay queued.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "temper/v1/temper.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kMemberUid = 65534;  // nobody, group nogroup: the socket's group below
constexpr int kMemberGid = 65534;

// The ids a submit is checked against, nothing OpenSCAP could evaluate (the daemon tests' datastream).
constexpr const char* kDatastream = R"(<?xml version="1.0" encoding="UTF-8"?>
<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2" id="scap_test_collection">
  <ds:component id="scap_test_comp_xccdf">
    <xccdf:Benchmark xmlns:xccdf="http://checklists.nist.gov/xccdf/1.2" id="xccdf_org.ssgproject.content_benchmark_TEST">
      <xccdf:Profile id="xccdf_org.ssgproject.content_profile_stig"/>
      <xccdf:Rule id="xccdf_org.ssgproject.content_rule_accounts_tmout"/>
    </xccdf:Benchmark>
  </ds:component>
</ds:data-stream-collection>
)";

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Sample {
  int threads = 0;
  double rss_mib = 0;
  size_t fds = 0;
};

Sample Measure(pid_t pid) {
  Sample s;
  std::istringstream status(ReadAll(fmt::format("/proc/{}/status", pid)));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::stoi(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;  // kB
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++s.fds;
  }
  return s;
}

// Root's ListBatches calls, timed, from a thread of their own while a phase runs.
class RootCalls {
 public:
  explicit RootCalls(const std::string& socket)
      : stub_(temper::v1::Temper::NewStub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()))) {}
  void Start() {
    stop_ = false;
    {
      std::lock_guard lock(mu_);
      times_ms_.clear();
      failures_ = 0;
      first_failure_.clear();
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        Call();
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  // The phase's calls: "p50 / max ms (n calls, f failed: why)".
  std::string Stop() {
    stop_ = true;
    thread_.join();
    Call();  // at least one per phase
    std::lock_guard lock(mu_);
    std::vector<double> t = times_ms_;
    std::sort(t.begin(), t.end());
    std::string out =
        t.empty() ? "-" : fmt::format("{:.1f} / {:.1f} ms ({} calls", t[t.size() / 2], t.back(), t.size());
    if (failures_ > 0) out += fmt::format(", {} failed: {}", failures_, first_failure_);
    return out + ")";
  }

 private:
  void Call() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    temper::v1::ListBatchesRequest request;
    request.set_page_size(10);
    temper::v1::ListBatchesResponse response;
    const auto start = Clock::now();
    grpc::Status s = stub_->ListBatches(&ctx, request, &response);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    std::lock_guard lock(mu_);
    if (s.ok()) {
      times_ms_.push_back(ms);
    } else if (failures_++ == 0) {
      first_failure_ = fmt::format("{} {}", static_cast<int>(s.error_code()), s.error_message());
    }
  }

  std::unique_ptr<temper::v1::Temper::Stub> stub_;
  std::atomic<bool> stop_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::vector<double> times_ms_;
  int failures_ = 0;
  std::string first_failure_;
};

// A child process, optionally as the member, its stdin and stdout piped.
struct Child {
  pid_t pid = -1;
  int in = -1;
  int out = -1;

  static Child Spawn(const std::vector<std::string>& argv, bool as_member) {
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) std::exit(1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    Child c;
    c.pid = fork();
    if (c.pid == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      if (as_member && (setgroups(0, nullptr) != 0 || setgid(kMemberGid) != 0 || setuid(kMemberUid) != 0)) _exit(126);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c.in = to[1];
    c.out = from[0];
    return c;
  }
  std::string ReadLine(std::chrono::seconds limit) {
    std::string line;
    const auto deadline = Clock::now() + limit;
    char ch;
    while (Clock::now() < deadline) {
      pollfd p{out, POLLIN, 100};
      if (poll(&p, 1, 100) <= 0) continue;
      if (read(out, &ch, 1) != 1) break;
      if (ch == '\n') return line;
      line += ch;
    }
    return line;
  }
  void Send(const std::string& text) { (void)!write(in, text.data(), text.size()); }
  void End() {
    if (pid <= 0) return;
    close(in);
    char buf[4096];
    while (read(out, buf, sizeof buf) > 0) {
    }
    close(out);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

// The member's submits, in the child the bench re-runs itself as (--member-submits SOCKET N): 8 at
// a time, every other one naming an invented SSH host. Prints one line: the codes counted.
int MemberSubmits(const std::string& socket, int count) {
  auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  std::mutex mu;
  std::map<int, int> codes;
  std::map<int, std::string> examples;
  std::atomic<int> next = 0;
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next++) < count;) {
        temper::v1::SubmitBatchRequest r;
        r.set_name(fmt::format("member {}", i));
        if (i % 2 == 1) {
          r.set_host(fmt::format("root@127.0.0.1:{}", 20000 + i));  // closed ports: nothing to reach
        } else {
          r.set_target("lab");
        }
        r.set_datastream("ssg-test-ds.xml");
        r.set_profile("stig");
        r.add_rule_ids("accounts_tmout");
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 30s);
        temper::v1::Batch b;
        grpc::Status s = stub->SubmitBatch(&ctx, r, &b);
        std::lock_guard lock(mu);
        ++codes[static_cast<int>(s.error_code())];
        examples.emplace(static_cast<int>(s.error_code()), s.error_message().substr(0, 120));
      }
    });
  }
  for (std::thread& t : workers) t.join();
  std::string line;
  for (const auto& [code, n] : codes) {
    line +=
        fmt::format("{}code {} x{}{}", line.empty() ? "" : "; ", code, n, code == 0 ? "" : " (" + examples[code] + ")");
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string self = fs::canonical("/proc/self/exe").string();
  std::string temperd = (fs::path(self).parent_path().parent_path() / "orchestrator/temperd").string();
  std::string flood = (fs::path(self).parent_path().parent_path() / "tests/security/temper_watch_flood").string();
  int streams = 500, submits = 1000;
  bool models = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--member-submits" && i + 2 < argc) return MemberSubmits(argv[i + 1], std::atoi(argv[i + 2]));
    if (a == "--temperd" && i + 1 < argc) temperd = argv[++i];
    else if (a == "--flood" && i + 1 < argc) flood = argv[++i];
    else if (a == "--streams" && i + 1 < argc) streams = std::atoi(argv[++i]);
    else if (a == "--submits" && i + 1 < argc) submits = std::atoi(argv[++i]);
    else if (a == "--no-models") models = false;
    else {
      std::fprintf(stderr,
                   "usage: daemon_load_bench [--temperd PATH] [--flood PATH] [--streams N] [--submits N] "
                   "[--no-models]\n");
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "daemon_load_bench: run it as root (it runs a member client as uid %d)\n", kMemberUid);
    return 2;
  }
  char dir_template[] = "/tmp/temper-load-XXXXXX";
  const fs::path dir = mkdtemp(dir_template);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  // The member runs copies it can reach wherever the build tree lies.
  for (std::string* binary : {&flood, &self}) {
    const fs::path copy = dir / "bin" / fs::path(*binary).filename();
    fs::create_directories(copy.parent_path());
    fs::copy_file(*binary, copy);
    fs::permissions(copy.parent_path(), fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec |
                                            fs::perms::group_read | fs::perms::group_exec);
    *binary = copy.string();
  }
  const std::string socket = (dir / "run/temper.sock").string();
  Write(dir / "content/ssg-test-ds.xml", kDatastream);
  Write(dir / "models.yaml",
        "endpoints:\n  down: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: none}\n"
        "roles:\n  architect: {endpoint: down}\n  worker: {endpoint: down}\n  reflector: {endpoint: down}\n");
  Write(dir / "temperd.yaml",
        fmt::format("listen:\n  unix:\n    path: {}\n    group: nogroup\n{}"
                    "state_dir: {}\ncontent_dirs: [{}]\nshutdown_grace: 2s\n"
                    "targets:\n  lab:\n    type: rootfs\n    path: {}\n",
                    socket, models ? "models: " + (dir / "models.yaml").string() + "\n" : "", (dir / "state").string(),
                    (dir / "content").string(), (dir / "roots/lab").string()));
  fs::create_directories(dir / "run");
  fs::permissions(dir / "run",
                  fs::perms::owner_all | fs::perms::group_all | fs::perms::others_read | fs::perms::others_exec);

  const pid_t daemon = fork();
  if (daemon == 0) {
    int log = open((dir / "temperd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    execl(temperd.c_str(), temperd.c_str(), "--config", (dir / "temperd.yaml").c_str(), nullptr);
    _exit(127);
  }
  RootCalls root(socket);
  {
    auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    ctx.set_wait_for_ready(true);
    temper::v1::ListBatchesResponse list;
    grpc::Status up = stub->ListBatches(&ctx, {}, &list);
    if (!up.ok()) {
      std::fprintf(stderr, "temperd did not answer: %s\n%s\n", up.error_message().c_str(),
                   ReadAll((dir / "temperd.log").string()).c_str());
      kill(daemon, SIGKILL);
      waitpid(daemon, nullptr, 0);
      return 1;
    }
  }
  std::printf("temperd %s, %d streams a client, %d submits\n", temperd.c_str(), streams, submits);
  std::printf("%-34s %8s %8s %6s  %-44s %s\n", "phase", "threads", "RSS MiB", "fds", "root ListBatches p50 / max",
              "clients saw");
  auto row = [&](const std::string& phase, const std::string& calls, const std::string& notes) {
    Sample s = Measure(daemon);
    std::printf("%-34s %8d %8.1f %6zu  %-44s %s\n", phase.c_str(), s.threads, s.rss_mib, s.fds, calls.c_str(),
                notes.c_str());
    std::fflush(stdout);
  };

  std::this_thread::sleep_for(1s);
  root.Start();
  std::this_thread::sleep_for(1s);
  row("idle", root.Stop(), "");

  root.Start();
  Child root_flood = Child::Spawn({flood, socket, std::to_string(streams)}, false);
  const std::string root_opened = root_flood.ReadLine(120s);
  std::this_thread::sleep_for(1s);
  row(fmt::format("+{} root watch streams", streams), root.Stop(), root_opened.substr(0, 60));

  root.Start();
  Child member_flood = Child::Spawn({flood, socket, std::to_string(streams)}, true);
  const std::string member_opened = member_flood.ReadLine(120s);
  std::this_thread::sleep_for(1s);
  row(fmt::format("+{} member watch streams", streams), root.Stop(), member_opened.substr(0, 120));

  root.Start();
  Child submitter = Child::Spawn({self, "--member-submits", socket, std::to_string(submits)}, true);
  const std::string submitted = submitter.ReadLine(600s);
  std::this_thread::sleep_for(1s);
  row(fmt::format("+{} member submits", submits), root.Stop(), submitted);
  submitter.End();

  root.Start();
  root_flood.End();
  member_flood.End();
  std::this_thread::sleep_for(1s);
  row("streams closed", root.Stop(), "");
  std::printf("hosts.json: %zu bytes\n", ReadAll((dir / "state/ssh/hosts.json").string()).size());

  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
