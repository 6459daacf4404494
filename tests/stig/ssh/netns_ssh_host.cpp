#include "stig/ssh/netns_ssh_host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "platform/process.h"
#include "scratch_space.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

// Hosts made by this process so far; with the pid it picks the /30 and the names.
std::atomic<unsigned> g_hosts{0};

Status Run(std::vector<std::string> argv) {
  temper::ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.timeout = std::chrono::seconds(30);
  TEMPER_ASSIGN_OR_RETURN(temper::ProcessResult r, temper::RunProcess(spec));
  if (!r.Succeeded()) {
    std::string line;
    for (const std::string& a : spec.argv) line += (line.empty() ? "" : " ") + a;
    return Status::Internal(fmt::format("{} failed ({}): {}{}", line, r.Describe(), r.err, r.out));
  }
  return Status::OK();
}

// Once per process: mounts made from here on stay private to this process and its children.
Status PrivateMounts() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] {
    if (::unshare(CLONE_NEWNS) != 0) {
      result = Status::FromErrno(errno, "unshare(CLONE_NEWNS) (the test process must still be single-threaded)");
      return;
    }
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      result = Status::FromErrno(errno, "making / a private mount");
    }
  });
  return result;
}

std::string Fingerprint(const std::string& pub) {
  temper::ProcessSpec spec;
  spec.argv = {"/usr/bin/ssh-keygen", "-l", "-E", "sha256", "-f", pub};
  spec.timeout = std::chrono::seconds(10);
  Result<temper::ProcessResult> r = temper::RunProcess(spec);
  if (!r.ok() || !r->Succeeded()) return "";
  std::size_t start = r->out.find("SHA256:");
  return start == std::string::npos ? "" : r->out.substr(start, r->out.find(' ', start) - start);
}

}  // namespace

std::string NetnsSshHost::Unavailable() {
  if (::geteuid() != 0) return "needs root (network namespaces, mounts, sshd)";
  for (const char* tool : {"/usr/sbin/ip", "/usr/bin/ssh", "/usr/bin/ssh-keygen", "/usr/bin/unshare"}) {
    if (::access(tool, X_OK) != 0) return fmt::format("{} is missing", tool);
  }
  if (::access("/proc/self/ns/net", R_OK) != 0) return "the kernel has no network namespaces";
  return "";
}

Result<std::unique_ptr<NetnsSshHost>> NetnsSshHost::Start(const SshTestRoot& root, const std::string& name) {
  std::string why = Unavailable();
  if (!why.empty()) return Status::FailedPrecondition("SSH test host: " + why);
  TEMPER_RETURN_IF_ERROR(PrivateMounts());
  std::unique_ptr<NetnsSshHost> host(new NetnsSshHost());
  Status s = host->Setup(root, name);
  if (!s.ok()) return s.WithContext("SSH test host " + name);  // the destructor undoes what was made
  return host;
}

Status NetnsSshHost::Setup(const SshTestRoot& root, const std::string& name) {
  const unsigned index = ((static_cast<unsigned>(::getpid()) % 4096) << 4) | (g_hosts++ % 16);
  const std::uint32_t net = (10u << 24) | (192u << 16) | (index << 2);
  auto dotted = [](std::uint32_t a) {
    return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
  };
  address_ = dotted(net + 2);
  const std::string local = dotted(net + 1);
  netns_ = fmt::format("temper-ssh-{:05x}", index);
  veth_ = fmt::format("tsh{:05x}", index);

  dir_ = fmt::format("{}/ssh-host-{}-{}", TestScratchDir(), name, index & 15);
  merged_ = dir_ + "/merged";
  std::error_code ec;
  fs::remove_all(dir_, ec);
  for (const char* d : {"upper", "work", "merged", "files"}) {
    fs::create_directories(fs::path(dir_) / d, ec);
    if (ec) return Status::IOError(fmt::format("creating {}/{}: {}", dir_, d, ec.message()));
  }
  const std::string options =
      fmt::format("lowerdir={}:{},upperdir={}/upper,workdir={}/work", root.layer, root.base, dir_, dir_);
  if (::mount("overlay", merged_.c_str(), "overlay", 0, options.c_str()) != 0) {
    return Status::FromErrno(errno, "mounting the host's overlay at " + merged_);
  }
  mounted_ = true;

  // A host key of its own.
  for (const char* k : {"ssh_host_rsa_key", "ssh_host_ecdsa_key", "ssh_host_ed25519_key"}) {
    fs::remove(merged_ + "/etc/ssh/" + k, ec);
    fs::remove(merged_ + "/etc/ssh/" + std::string(k) + ".pub", ec);
  }
  TEMPER_RETURN_IF_ERROR(ReplaceHostKey());

  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "netns", "add", netns_}));
  netns_made_ = true;
  TEMPER_RETURN_IF_ERROR(
      Run({"/usr/sbin/ip", "link", "add", veth_ + "h", "type", "veth", "peer", "name", veth_ + "n"}));
  veth_made_ = true;
  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "link", "set", veth_ + "n", "netns", netns_}));
  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "addr", "add", local + "/30", "dev", veth_ + "h"}));
  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "link", "set", veth_ + "h", "up"}));
  TEMPER_RETURN_IF_ERROR(
      Run({"/usr/sbin/ip", "netns", "exec", netns_, "ip", "addr", "add", address_ + "/30", "dev", veth_ + "n"}));
  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "netns", "exec", netns_, "ip", "link", "set", veth_ + "n", "up"}));
  TEMPER_RETURN_IF_ERROR(Run({"/usr/sbin/ip", "netns", "exec", netns_, "ip", "link", "set", "lo", "up"}));
  return StartSshd();
}

Status NetnsSshHost::ReplaceHostKey() {
  const std::string key = merged_ + "/etc/ssh/ssh_host_ed25519_key";
  std::error_code ec;
  fs::remove(key, ec);
  fs::remove(key + ".pub", ec);
  TEMPER_RETURN_IF_ERROR(
      Run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "temper-test-host", "-f", key}));
  fingerprint_ = Fingerprint(key + ".pub");
  if (fingerprint_.empty()) return Status::Internal("cannot fingerprint " + key + ".pub");
  return Status::OK();
}

Status NetnsSshHost::StartSshd() {
  StopSshd();
  const std::string log = dir_ + "/files/sshd.log";
  // Not bubblewrap: it always sets no_new_privs, and sudo (setuid) must work for the logins. A
  // mount, pid and uts namespace of its own (hostname temper-test-host, which the layer's /etc/hosts names), /proc
  // mounted in the tree, the host's /dev bound over the tree's (a root built where mknod is not allowed has an empty
  // /dev, and sshd exits without /dev/null), and sshd chrooted into it as the namespace's init: killing `unshare`
  // (--kill-child) takes sshd and every session with it.
  std::vector<std::string> argv = {
      "/usr/sbin/ip",
      "netns",
      "exec",
      netns_,
      "/usr/bin/unshare",
      "--mount",
      "--propagation",
      "private",
      "--pid",
      "--uts",
      "--fork",
      "--kill-child",
      "/bin/sh",
      "-c",
      "hostname temper-test-host && mount -t proc proc \"$1/proc\" && mount --bind /dev \"$1/dev\" && "
      "exec chroot \"$1\" "
      "/usr/sbin/sshd -D -e -o UsePAM=no -o \"ListenAddress=$2\" "
      "-o HostKey=/etc/ssh/ssh_host_ed25519_key -o PidFile=/run/sshd.pid",
      "sshd-host",
      merged_,
      address_};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork for sshd");
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // sshd must not outlive a crashed test
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  sshd_ = pid;
  return WaitForPort();
}

Status NetnsSshHost::WaitForPort() {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(22);
  ::inet_pton(AF_INET, address_.c_str(), &sa.sin_addr);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool up = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (fd >= 0) ::close(fd);
    if (up) return Status::OK();
    int status;
    if (::waitpid(sshd_, &status, WNOHANG) == sshd_) {
      sshd_ = -1;
      return Status::Internal("sshd exited at start; see " + dir_ + "/files/sshd.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::DeadlineExceeded("sshd did not accept connections on " + address_ + ":22 within 15 s");
}

void NetnsSshHost::StopSshd() {
  if (sshd_ <= 0) return;
  ::kill(sshd_, SIGKILL);
  int status;
  ::waitpid(sshd_, &status, 0);
  sshd_ = -1;
  // The pid namespace's processes die with its init; wait until the port is closed.
  for (int i = 0; i < 100; ++i) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(22);
    ::inet_pton(AF_INET, address_.c_str(), &sa.sin_addr);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool up = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (fd >= 0) ::close(fd);
    if (!up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

NetnsSshHost::~NetnsSshHost() {
  StopSshd();
  if (veth_made_) (void)Run({"/usr/sbin/ip", "link", "del", veth_ + "h"});
  if (netns_made_) (void)Run({"/usr/sbin/ip", "netns", "del", netns_});
  if (mounted_) ::umount2(merged_.c_str(), MNT_DETACH);
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

stig::SshOptions TestSshOptions(const stig::SshEndpoint& endpoint, const std::string& key,
                                const std::string& known_hosts, const std::string& control_dir) {
  stig::SshOptions o;
  o.endpoint = endpoint;
  o.identity_file = key;
  o.known_hosts = known_hosts;
  o.control_dir = control_dir;
  o.connect_timeout = std::chrono::seconds(5);
  o.alive_interval = std::chrono::seconds(2);
  o.alive_count_max = 2;
  return o;
}

ScopedControlDir::ScopedControlDir() {
  std::string tmpl = TestTempDir() + "/ssh-control-XXXXXX";
  if (::mkdtemp(tmpl.data())) path_ = tmpl;
}

ScopedControlDir::~ScopedControlDir() {
  if (path_.empty()) return;
  // An ssh master told to exit may still be taking its socket down (seconds on a loaded machine),
  // so the directory can be non-empty again for a moment after the first try.
  for (int tries = 0; tries < 50; ++tries) {
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (!fs::exists(path_, ec)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace temper::testing
