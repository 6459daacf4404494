#include "stig/ssh/host_copy.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "platform/process.h"
#include "platform/sandbox_seccomp.h"
#include "platform/unique_fd.h"
#include "stig/packages/dpkg_status.h"
#include "stig/ssh/tar_stream_filter.h"
#include "stig/target_file.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// Always left out, mounted or not: a twin gets the sandbox's own of each.
constexpr const char* kVirtualDirs[] = {"/proc", "/sys", "/dev", "/run"};
// Where the destination lies inside the extraction sandbox.
constexpr const char* kSandboxCopyDir = "/copy";
constexpr std::size_t kChunk = std::size_t{256} << 10;
constexpr std::size_t kMaxPackageDatabase = std::size_t{64} << 20;
constexpr std::size_t kMaxOsRelease = 64 << 10;

std::string Tail(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 1500) text = "…" + text.substr(text.size() - 1500);
  return text;
}

// `path` as the copy names it: absolute, no "." or "..", no trailing '/', no NUL or newline.
Result<std::string> CleanHostPath(const std::string& path, std::string_view what) {
  if (path.empty() || path.front() != '/') {
    return Status::InvalidArgument(fmt::format("{} '{}' must be an absolute path on the host", what, path));
  }
  if (path.find('\0') != std::string::npos || path.find('\n') != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{} '{}' holds a NUL or a newline", what, path));
  }
  std::string clean = fs::path(path).lexically_normal().string();
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  if (clean == "/") return Status::InvalidArgument(fmt::format("{} '{}' would leave out everything", what, path));
  return clean;
}

// A mount point as /proc/self/mounts writes it: space, tab, newline and backslash as \ooo.
std::string DecodeMountPath(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (std::size_t k = 1; k <= 3; ++k) {
        char c = field[i + k];
        octal = octal && c >= '0' && c <= '7';
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// The mode a left-out directory is recreated with, as a fresh install has it.
std::string_view RecreatedMode(std::string_view path) {
  if (path == "/proc" || path == "/sys") return "0555";
  if (path == "/tmp" || path == "/var/tmp") return "1777";
  return "0755";
}

// bwrap's argv for the extraction: an empty tmpfs as "/", this machine's programs read-only, the
// destination the only writable path, no network, no devices to make (CAP_MKNOD dropped).
Result<std::vector<std::string>> ExtractionArgv(const std::string& destination, int seccomp_fd,
                                                const std::vector<std::string>& recreate) {
  std::vector<std::string> argv = {
      "/usr/bin/bwrap",    "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
      "--die-with-parent", "--new-session", "--ro-bind",     "/usr",          "/usr"};
  // Merged /usr keeps /bin, /lib ... as links into it; an older layout has them as directories.
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    fs::file_status st = fs::symlink_status(dir, ec);
    if (ec || !fs::exists(st)) continue;
    if (fs::is_symlink(st)) {
      argv.insert(argv.end(), {"--symlink", fs::read_symlink(dir, ec).string(), dir});
    } else if (fs::is_directory(st)) {
      argv.insert(argv.end(), {"--ro-bind", dir, dir});
    }
  }
  argv.insert(argv.end(), {"--ro-bind-try",
                           "/etc/ld.so.cache",
                           "/etc/ld.so.cache",
                           "--dev",
                           "/dev",
                           "--tmpfs",
                           "/tmp",
                           "--bind",
                           destination,
                           kSandboxCopyDir,
                           "--chdir",
                           kSandboxCopyDir,
                           "--seccomp",
                           std::to_string(seccomp_fd),
                           "--clearenv",
                           "--setenv",
                           "PATH",
                           "/usr/bin:/bin",
                           "--setenv",
                           "LC_ALL",
                           "C",
                           "--cap-drop",
                           "ALL"});
  // Enough to restore owners, modes, setuid bits, ACLs and file capabilities; never CAP_MKNOD.
  for (const char* cap :
       {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_SETFCAP"}) {
    argv.insert(argv.end(), {"--cap-add", cap});
  }
  // The left-out mount points come back empty, each with its usual mode ("MODE:PATH" arguments);
  // a planted link on the way resolves inside the sandbox, like every member's name.
  const std::string script =
      "tar --extract --file=- --numeric-owner --xattrs --xattrs-include='*' --acls --same-permissions "
      "--same-owner || exit $?\n"
      "for spec do mkdir -p -m \"${spec%%:*}\" -- \"/copy${spec#*:}\" || exit 3; done\n";
  argv.insert(argv.end(), {"/bin/sh", "-c", script, "temper-extract"});
  argv.insert(argv.end(), recreate.begin(), recreate.end());
  return argv;
}

// Sizes from `du -sxB1 PATH` lines ("BYTES\tPATH"), by path.
std::map<std::string, std::uint64_t> DuSizes(std::string_view out) {
  std::map<std::string, std::uint64_t> sizes;
  while (!out.empty()) {
    std::size_t end = out.find('\n');
    std::string_view line = out.substr(0, end);
    out = end == std::string_view::npos ? std::string_view() : out.substr(end + 1);
    std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos || tab == 0 || tab > 20) continue;
    std::uint64_t value = 0;
    bool digits = true;
    for (char c : line.substr(0, tab)) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (digits) sizes[std::string(line.substr(tab + 1))] = value;
  }
  return sizes;
}

Result<std::string> ReadCopyFile(const std::string& root, const std::string& path, std::size_t max_bytes) {
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fd, OpenTargetFileForRead(root, path));
  return ReadUpTo(fd.get(), max_bytes, path);
}

class HostCopier {
 public:
  HostCopier(SshConnection& ssh, const HostCopyOptions& options, const Logger& log)
      : ssh_(ssh), options_(options), log_(log), host_(ssh.host_name()) {}

  Result<HostCopyRecord> Run();

 private:
  Status CheckTar();
  Result<std::vector<std::string>> MountPoints();
  Status CheckEstimate(const std::vector<std::string>& user_excluded);
  Status Stream(const std::vector<std::string>& tar_argv, const std::vector<std::string>& recreate,
                HostCopyRecord& record);

  SshConnection& ssh_;
  const HostCopyOptions& options_;
  const Logger& log_;
  const std::string host_;
};

Status HostCopier::CheckTar() {
  SandboxLimits limits;
  limits.timeout = std::chrono::seconds(60);
  limits.memory_limit_bytes = 0;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, ssh_.Exec({"tar", "--version"}, {}, limits));
  if (!r.Succeeded() || r.out.find("GNU tar") == std::string::npos) {
    return Status::FailedPrecondition(
        fmt::format("copying {}: the host has no GNU tar (`tar --version`: {}); install it there (apt-get install tar)",
                    host_, r.Succeeded() ? Tail(r.out.substr(0, 200)) : r.Describe() + " " + Tail(r.err)));
  }
  return Status::OK();
}

Result<std::vector<std::string>> HostCopier::MountPoints() {
  SandboxLimits limits;
  limits.timeout = std::chrono::seconds(60);
  limits.memory_limit_bytes = 0;
  limits.max_output_bytes = 8 << 20;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, ssh_.Exec({"cat", "/proc/self/mounts"}, {}, limits));
  if (!r.Succeeded() || r.out_truncated) {
    return Status::Internal(fmt::format("copying {}: reading the host's /proc/self/mounts: {} {}", host_,
                                        r.out_truncated ? "over 8 MiB" : r.Describe(), Tail(r.err)));
  }
  return MountPointsBelowRoot(r.out);
}

Status HostCopier::CheckEstimate(const std::vector<std::string>& user_excluded) {
  // `du -x` of "/" less what is excluded on the root's own file system: refused before a byte
  // moves when the copy could not fit anyway.
  SandboxLimits limits;
  limits.timeout = options_.timeout;
  limits.memory_limit_bytes = 0;
  limits.max_output_bytes = 1 << 20;
  std::vector<std::string> argv = {"/bin/sh", "-c", "for p do du -sxB1 -- \"$p\" 2>/dev/null; done; exit 0",
                                   "temper-du", "/"};
  argv.insert(argv.end(), user_excluded.begin(), user_excluded.end());
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, ssh_.Exec(argv, {}, limits));
  std::map<std::string, std::uint64_t> sizes = DuSizes(r.out);
  auto root = sizes.find("/");
  if (!r.Succeeded() || root == sizes.end()) {
    log_.Warning("copying {}: no `du -x` estimate from the host ({}); the limit is checked on the stream only", host_,
                 r.Describe());
    return Status::OK();
  }
  std::uint64_t estimate = root->second;
  for (const std::string& path : user_excluded) {
    auto it = sizes.find(path);
    if (it != sizes.end()) estimate -= std::min(estimate, it->second);
  }
  if (estimate > options_.max_bytes) {
    return Status::ResourceExhausted(
        fmt::format("copying {}: its root file system holds about {} bytes (`du -x`, less the excluded paths), over "
                    "the twins' max_bytes of {} bytes; raise twins.max_bytes or exclude more (twins.exclude)",
                    host_, estimate, options_.max_bytes));
  }
  log_.Info("copying {}: about {} MiB by `du -x`", host_, estimate >> 20);
  return Status::OK();
}

Status HostCopier::Stream(const std::vector<std::string>& tar_argv, const std::vector<std::string>& recreate,
                          HostCopyRecord& record) {
  // host tar → ssh → [pipe] → this thread (count, filter) → [socket] → tar --extract in the sandbox
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe2 for the host's archive");
  UniqueFd from_host(pipe_fds[0]), host_end(pipe_fds[1]);
  int sock_fds[2];
  // A socket rather than a pipe: send(MSG_NOSIGNAL) reports a dead extractor as EPIPE, no SIGPIPE.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock_fds) != 0) {
    return Status::FromErrno(errno, "socketpair for the extraction");
  }
  UniqueFd to_extract(sock_fds[0]), extract_end(sock_fds[1]);
  ::shutdown(to_extract.get(), SHUT_RD);
  ::shutdown(extract_end.get(), SHUT_WR);

  TEMPER_ASSIGN_OR_RETURN(UniqueFd seccomp, SandboxSeccompFd());
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> extract_argv,
                          ExtractionArgv(options_.destination, seccomp.get(), recreate));

  std::atomic<bool> abort{false}, ssh_done{false}, extract_done{false};
  Result<ProcessResult> host_result = Status::Internal("the host's tar did not run");
  Result<ProcessResult> extract_result = Status::Internal("the extraction did not run");

  ProcessSpec extract;
  extract.argv = std::move(extract_argv);
  extract.inherit_fds = {seccomp.get()};
  extract.stdin_fd = extract_end.get();
  extract.timeout = options_.timeout;
  extract.memory_limit_bytes = std::uint64_t{2} << 30;
  extract.max_output_bytes = 64 << 10;
  extract.new_user_namespace = true;
  extract.reap_orphans = true;
  extract.oom_score_adj = 1000;
  extract.stop_when = [&] { return abort.load(); };
  std::thread extract_thread([&] {
    extract_result = RunProcess(extract);
    extract_done = true;
  });

  SandboxLimits host_limits;
  host_limits.timeout = options_.timeout;
  host_limits.memory_limit_bytes = 0;
  host_limits.max_output_bytes = 64 << 10;
  host_limits.stop_requested = [&] { return abort.load(); };
  std::thread host_thread([&] {
    host_result = ssh_.ExecToFd(tar_argv, host_limits, host_end.get());
    ssh_done = true;
  });

  TarStreamFilter filter;
  Status pump;
  bool over_limit = false, stopped = false, extraction_cut = false;
  // tar --extract may end once it has read the end-of-archive blocks, before the host's tar has
  // sent the rest of its last record: what follows is then read and dropped.
  bool extractor_gone = false;
  std::string in(kChunk, '\0'), out;
  while (true) {
    if (options_.stop_requested && options_.stop_requested()) {
      stopped = true;
      break;
    }
    if (extract_done && !filter.ended()) {
      extraction_cut = true;  // it ended early: its result says why
      break;
    }
    pollfd p{from_host.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) {
      pump = Status::FromErrno(errno, "poll on the host's archive");
      break;
    }
    if (ready <= 0) {
      // Our copy of the write end keeps the pipe open; once ssh has ended, drop it to see EOF.
      if (ssh_done && host_end.get() >= 0) host_end.Reset();
      continue;
    }
    ssize_t n = ::read(from_host.get(), in.data(), in.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      pump = Status::FromErrno(errno, "reading the host's archive");
      break;
    }
    if (n == 0) break;
    record.bytes += static_cast<std::uint64_t>(n);
    if (record.bytes > options_.max_bytes) {
      over_limit = true;
      break;
    }
    out.clear();
    pump = filter.Feed(std::string_view(in.data(), static_cast<std::size_t>(n)), out);
    if (!pump.ok()) break;
    std::size_t sent = 0;
    while (!extractor_gone && sent < out.size()) {
      ssize_t w = ::send(to_extract.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        extractor_gone = true;
        break;
      }
      sent += static_cast<std::size_t>(w);
    }
    if (extractor_gone && !filter.ended()) {
      extraction_cut = true;  // the extraction ended mid-archive: its result says why
      break;
    }
  }
  const bool complete = pump.ok() && !over_limit && !stopped && !extraction_cut;
  if (!complete) abort = true;
  to_extract.Reset();  // EOF for tar --extract
  host_thread.join();
  extract_thread.join();

  if (stopped) return Status::Aborted(fmt::format("copying {}: stopped", host_));
  if (over_limit) {
    return Status::ResourceExhausted(
        fmt::format("copying {}: the archive passed the twins' max_bytes of {} bytes; the copy was stopped and "
                    "removed (raise twins.max_bytes or exclude more: twins.exclude)",
                    host_, options_.max_bytes));
  }
  if (!pump.ok()) return pump.WithContext(fmt::format("copying {}: the host's archive", host_));
  if (!host_result.ok()) return host_result.status().WithContext("copying " + host_);
  const ProcessResult& host_tar = *host_result;
  if (host_tar.timed_out) {
    return Status::DeadlineExceeded(fmt::format("copying {}: not done within {} s", host_, options_.timeout.count()));
  }
  // tar exits 1 when a file changed while it read it: a live system does that, and the copy holds
  // the file as read.
  if (host_tar.term_signal != 0 || (host_tar.exit_code != 0 && host_tar.exit_code != 1)) {
    return Status::Internal(
        fmt::format("copying {}: the host's tar failed ({}): {}", host_, host_tar.Describe(), Tail(host_tar.err)));
  }
  if (host_tar.exit_code == 1) log_.Warning("copying {}: files changed while read: {}", host_, Tail(host_tar.err));
  if (!extract_result.ok()) return extract_result.status().WithContext("extracting the copy of " + host_);
  if (!extract_result->Succeeded()) {
    return Status::Internal(fmt::format("extracting the copy of {}: {}: {}", host_, extract_result->Describe(),
                                        Tail(extract_result->err + extract_result->out)));
  }
  TEMPER_RETURN_IF_ERROR(filter.Finish().WithContext(fmt::format("copying {}: the host's archive", host_)));
  record.files = filter.members();
  record.skipped_special_files = filter.skipped_special();
  return Status::OK();
}

Result<HostCopyRecord> HostCopier::Run() {
  const auto started = std::chrono::steady_clock::now();
  HostCopyRecord record;
  record.host = host_;
  record.login = ssh_.options().endpoint.user;
  record.copied_at = std::chrono::system_clock::now();

  if (options_.max_bytes == 0) return Status::InvalidArgument("copying " + host_ + ": max_bytes is 0");
  const std::string& destination = options_.destination;
  if (destination.empty() || destination.front() != '/') {
    return Status::InvalidArgument(fmt::format("copying {}: destination '{}' is not absolute", host_, destination));
  }
  std::vector<std::string> user_excluded;
  for (const std::string& path : options_.exclude) {
    TEMPER_ASSIGN_OR_RETURN(std::string clean, CleanHostPath(path, "an excluded path"));
    user_excluded.push_back(clean);
  }
  TEMPER_ASSIGN_OR_RETURN(std::string host_dir, CleanHostPath(options_.host_dir, "host_dir"));
  user_excluded.push_back(host_dir);

  TEMPER_RETURN_IF_ERROR(CheckTar());
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> mounts, MountPoints());
  TEMPER_RETURN_IF_ERROR(CheckEstimate(user_excluded));

  std::vector<std::string> excluded = mounts;
  excluded.insert(excluded.end(), std::begin(kVirtualDirs), std::end(kVirtualDirs));
  excluded.insert(excluded.end(), user_excluded.begin(), user_excluded.end());
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  record.excluded = excluded;

  // Mount points come back as empty directories; what the operator excluded stays absent.
  std::vector<std::string> recreate;
  for (const std::string& path : excluded) {
    bool is_mount = std::find(mounts.begin(), mounts.end(), path) != mounts.end() ||
                    std::find(std::begin(kVirtualDirs), std::end(kVirtualDirs), path) != std::end(kVirtualDirs);
    bool user = std::find(user_excluded.begin(), user_excluded.end(), path) != user_excluded.end();
    bool nested = std::any_of(excluded.begin(), excluded.end(),
                              [&](const std::string& above) { return path.starts_with(above + "/"); });
    if (is_mount && !user && !nested) recreate.push_back(fmt::format("{}:{}", RecreatedMode(path), path));
  }

  std::vector<std::string> tar_argv = {"tar",
                                       "--create",
                                       "--file=-",
                                       "--directory=/",
                                       "--format=posix",
                                       "--numeric-owner",
                                       "--xattrs",
                                       "--xattrs-include=*",
                                       "--acls",
                                       "--one-file-system",
                                       "--sparse",
                                       "--anchored",
                                       "--no-wildcards",
                                       "--warning=no-file-ignored"};
  // Members are named "./etc/..." (tar runs in "/" over "."): each exclusion names exactly one path.
  for (const std::string& path : excluded) tar_argv.push_back("--exclude=." + path);
  tar_argv.push_back(".");

  std::error_code ec;
  if (fs::exists(fs::symlink_status(destination, ec))) {
    return Status::AlreadyExists(fmt::format("copying {}: {} already exists", host_, destination));
  }
  if (::mkdir(destination.c_str(), 0755) != 0) {
    return Status::FromErrno(errno, "creating " + destination).WithContext("copying " + host_);
  }
  log_.Info("copying {} into {} (max {} bytes)", host_, destination, options_.max_bytes);
  Status streamed = Stream(tar_argv, recreate, record);
  if (!streamed.ok()) {
    fs::remove_all(destination, ec);
    if (ec) log_.Warning("copying {}: removing the partial copy {}: {}", host_, destination, ec.message());
    return streamed;
  }

  Result<std::string> status = ReadCopyFile(destination, "/var/lib/dpkg/status", kMaxPackageDatabase);
  if (status.ok()) {
    record.packages = InstalledPackages(*status);
  } else if (status.status().code() != StatusCode::kNotFound) {
    log_.Warning("copying {}: the copy's dpkg status: {}", host_, status.status().ToString());
  }
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"}) {
    Result<std::string> text = ReadCopyFile(destination, path, kMaxOsRelease);
    if (text.ok()) {
      record.os_release = *text;
      break;
    }
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log_.Info("copied {}: {} bytes, {} files, {} device nodes or FIFOs skipped, {:.1f} s", host_, record.bytes,
            record.files, record.skipped_special_files, record.seconds);
  return record;
}

}  // namespace

std::vector<std::string> MountPointsBelowRoot(std::string_view proc_mounts) {
  std::vector<std::string> points;
  while (!proc_mounts.empty()) {
    std::size_t end = proc_mounts.find('\n');
    std::string_view line = proc_mounts.substr(0, end);
    proc_mounts = end == std::string_view::npos ? std::string_view() : proc_mounts.substr(end + 1);
    std::size_t first = line.find(' ');
    if (first == std::string_view::npos) continue;
    std::size_t second = line.find(' ', first + 1);
    std::string point =
        DecodeMountPath(line.substr(first + 1, second == std::string_view::npos ? line.npos : second - first - 1));
    if (point.empty() || point.front() != '/' || point == "/") continue;
    if (point.find('\n') != std::string::npos || point.find('\0') != std::string::npos) continue;
    points.push_back(fs::path(point).lexically_normal().string());
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

Result<HostCopyRecord> CopyHostRoot(SshConnection& ssh, const HostCopyOptions& options, const Logger& log) {
  return HostCopier(ssh, options, log).Run();
}

}  // namespace temper::stig
