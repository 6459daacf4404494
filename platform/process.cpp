#include "platform/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "platform/unique_fd.h"

namespace temper {
namespace {

constexpr int kUserNamespaceIdCount = 65536;  // covers nobody/nogroup (65534)
// How often a child that closed its output is checked for having exited: commands seldom do that
// (daemons), so the cost of polling stays small.
constexpr auto kExitPoll = std::chrono::milliseconds(20);

Status MakePipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe2");
  read_end = UniqueFd(fds[0]);
  write_end = UniqueFd(fds[1]);
  return Status::OK();
}

// What the child writes to /proc/self/oom_score_adj, prepared before fork: "" leaves it alone.
std::string OomScoreText(const ProcessSpec& spec) {
  if (spec.oom_score_adj) return std::to_string(*spec.oom_score_adj);
  int fd = ::open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[16] = {};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 && buf[0] == '-' ? "0" : "";
}

// Child side after fork: only async-signal-safe calls from here to execve.
[[noreturn]] void ChildExec(const ProcessSpec& spec, char* const* argv, char* const* envp, int in_fd, int out_fd,
                            int err_fd, int sync_write, int go_read, int report_fd, pid_t parent,
                            const std::string& oom_score) {
  auto fail = [&](int stage) {
    int e = errno;
    int msg[2] = {stage, e};
    (void)!::write(report_fd, msg, sizeof msg);
    ::_exit(127);
  };
  // Into the command's cgroups before anything else, so nothing it starts escapes them.
  for (int fd : spec.join_cgroup_fds) {
    if (::write(fd, "0", 1) != 1) fail(9);
  }
  if (!oom_score.empty()) {
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, oom_score.data(), oom_score.size()) != static_cast<ssize_t>(oom_score.size())) fail(10);
    ::close(fd);
  }
  ::setpgid(0, 0);
  // A child outliving a killed temperd would keep reading a target that the restarted daemon is
  // about to revert; it dies with its parent instead (checked again in case the parent is gone).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) fail(1);
  // Other threads open files without O_CLOEXEC (iostreams do): a descriptor inherited into a
  // long-lived child, say one inside another target's overlay, keeps that mount busy and its
  // snapshot or revert fails with EBUSY. Nothing but stdio crosses the exec.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail(8);
  for (int fd : spec.inherit_fds) {
    if (::fcntl(fd, F_SETFD, 0) != 0) fail(11);
  }
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) fail(2);
  if (spec.memory_limit_bytes > 0) {
    struct rlimit lim {
      spec.memory_limit_bytes, spec.memory_limit_bytes
    };
    if (::setrlimit(RLIMIT_AS, &lim) != 0) fail(3);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (spec.new_user_namespace) {
    if (::unshare(CLONE_NEWUSER) != 0) fail(4);
    char one = 1;
    if (::write(sync_write, &one, 1) != 1) fail(5);  // the parent now writes our id maps
    if (::read(go_read, &one, 1) != 1 || one != 1) fail(6);
  }
  if (spec.reap_orphans) {
    const pid_t reaper = ::getpid();
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) fail(12);
    const pid_t program = ::fork();
    if (program < 0) fail(12);
    if (program == 0) {
      // PR_SET_PDEATHSIG is not inherited across fork: this one dies with the reaper.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != reaper) ::_exit(127);
      ::execvpe(argv[0], argv, envp);
      fail(7);
    }
    // The reaper never execs, so close-on-exec closes nothing here: it closes every descriptor
    // itself. It keeps no end of its own pipes (the parent sees EOF when the program's side
    // closes, and the program reports its own exec failure), nor of the pipes other threads had
    // open when it forked: holding another command's output pipe, it kept that command's
    // RunProcess waiting until this one ended.
    ::close_range(0, ~0U, 0);  // cannot fail where the CLOSE_RANGE_CLOEXEC call above worked
    int status = 0, program_status = 0;
    while (true) {
      const pid_t done = ::waitpid(-1, &status, 0);
      if (done == program) program_status = status;
      if (done < 0 && errno != EINTR) break;  // ECHILD: nothing left below
    }
    if (WIFSIGNALED(program_status)) {
      ::signal(WTERMSIG(program_status), SIG_DFL);
      ::kill(reaper, WTERMSIG(program_status));
    }
    ::_exit(WIFEXITED(program_status) ? WEXITSTATUS(program_status) : 127);
  }
  ::execvpe(argv[0], argv, envp);
  fail(7);
  ::_exit(127);
}

const char* StageName(int stage) {
  switch (stage) {
    case 1:
      return "redirecting stdio";
    case 2:
      return "changing directory";
    case 3:
      return "setting the memory limit";
    case 4:
      return "creating a user namespace";
    case 5:
    case 6:
      return "synchronising the user namespace setup";
    case 8:
      return "closing inherited descriptors";
    case 9:
      return "joining the command's cgroups";
    case 10:
      return "setting its OOM score";
    case 11:
      return "passing on inherited descriptors";
    case 12:
      return "starting it under a reaper";
    default:
      return "executing";
  }
}

Status WriteIdMap(pid_t pid, const char* file) {
  std::string path = fmt::format("/proc/{}/{}", pid, file);
  std::string line = fmt::format("0 0 {}\n", kUserNamespaceIdCount);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening " + path);
  ssize_t n = ::write(fd, line.data(), line.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) return Status::FromErrno(e, "writing " + path);
  return Status::OK();
}

// write(2) to the child's stdin pipe without raising SIGPIPE in this process when the child has
// gone: SIGPIPE is blocked for this thread around the call and, if the write raised one, taken
// back (unless one was already pending), so EPIPE comes back as an ordinary error. This holds
// whatever the process's disposition for SIGPIPE is.
ssize_t WriteWithoutSigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_only, old_mask, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ssize_t n = ::write(fd, data, size);
  const int err = errno;
  if (n < 0 && err == EPIPE && !was_pending) {
    const timespec no_wait{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = err;
  return n;
}

}  // namespace

std::string ProcessResult::Describe() const {
  if (!cap_hit.empty()) {
    ProcessResult ended = *this;
    ended.cap_hit.clear();
    return fmt::format("{} ({})", cap_hit, ended.Describe());
  }
  if (timed_out) return fmt::format("timed out after {:.1f} s", seconds);
  if (stopped) return fmt::format("stopped after {:.1f} s", seconds);
  if (term_signal != 0) return fmt::format("killed by signal {} ({})", term_signal, strsignal(term_signal));
  return fmt::format("exit {}", exit_code);
}

namespace {

// Forks the child of `spec` with `in_fd`, `out_fd`, `err_fd` as its stdio and, for a new user
// namespace, writes its id maps. `report` gets the read end of the pipe on which the child reports
// a failure to start (EOF once it has exec'd). Returns its pid (its own process group).
Result<pid_t> ForkChild(const ProcessSpec& spec, int in_fd, int out_fd, int err_fd, UniqueFd& report) {
  if (spec.argv.empty()) return Status::InvalidArgument("RunProcess: empty argv");

  // Everything the child touches is prepared before fork.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  static const std::string kDefaultPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  std::vector<char*> envp;
  if (spec.env.empty()) envp.push_back(const_cast<char*>(kDefaultPath.c_str()));
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const std::string oom_score = OomScoreText(spec);

  UniqueFd sync_r, sync_w, go_r, go_w, rep_w;
  TEMPER_RETURN_IF_ERROR(MakePipe(sync_r, sync_w));
  TEMPER_RETURN_IF_ERROR(MakePipe(go_r, go_w));
  TEMPER_RETURN_IF_ERROR(MakePipe(report, rep_w));

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork for " + spec.argv[0]);
  if (pid == 0) {
    ChildExec(spec, argv.data(), envp.data(), in_fd, out_fd, err_fd, sync_w.get(), go_r.get(), rep_w.get(), parent,
              oom_score);
  }
  ::setpgid(pid, pid);  // also done in the child; whichever runs first wins, both are harmless
  sync_w.Reset();
  go_r.Reset();
  rep_w.Reset();

  if (spec.new_user_namespace) {
    char one = 0;
    ssize_t n = ::read(sync_r.get(), &one, 1);
    Status s;
    if (n == 1) {
      s = WriteIdMap(pid, "uid_map");
      if (s.ok()) s = WriteIdMap(pid, "gid_map");
    }
    char go = s.ok() && n == 1 ? 1 : 0;
    (void)!::write(go_w.get(), &go, 1);
    if (!s.ok()) {
      ::kill(-pid, SIGKILL);
      int st;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      return s.WithContext("setting up the user namespace for " + spec.argv[0]);
    }
  }
  return pid;
}

}  // namespace

Result<ProcessResult> RunProcess(const ProcessSpec& spec) {
  if (spec.stdin_fd >= 0 && !spec.stdin_data.empty()) {
    return Status::InvalidArgument("RunProcess: both stdin_fd and stdin_data given for " +
                                   (spec.argv.empty() ? std::string("(no program)") : spec.argv[0]));
  }
  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w, rep_r;
  if (spec.stdin_fd < 0) TEMPER_RETURN_IF_ERROR(MakePipe(in_r, in_w));
  if (spec.stdout_fd < 0) TEMPER_RETURN_IF_ERROR(MakePipe(out_r, out_w));
  TEMPER_RETURN_IF_ERROR(MakePipe(err_r, err_w));

  auto start = std::chrono::steady_clock::now();
  TEMPER_ASSIGN_OR_RETURN(pid_t pid, ForkChild(spec, spec.stdin_fd >= 0 ? spec.stdin_fd : in_r.get(),
                                               spec.stdout_fd >= 0 ? spec.stdout_fd : out_w.get(), err_w.get(),
                                               rep_r));
  in_r.Reset();
  out_w.Reset();
  err_w.Reset();

  auto kill_and_reap = [&]() {
    ::kill(-pid, SIGKILL);
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  };

  // Feed stdin and drain both outputs together, so neither side can block the other.
  ProcessResult result;
  std::size_t in_off = 0;
  if (spec.stdin_data.empty()) in_w.Reset();
  if (in_w.get() >= 0) ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
  auto deadline = start + spec.timeout;
  auto next_stop_check = start;
  char buf[65536];
  while (out_r.get() >= 0 || err_r.get() >= 0 || in_w.get() >= 0) {
    pollfd fds[3];
    int nfds = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (out_r.get() >= 0) {
      idx_out = nfds;
      fds[nfds++] = {out_r.get(), POLLIN, 0};
    }
    if (err_r.get() >= 0) {
      idx_err = nfds;
      fds[nfds++] = {err_r.get(), POLLIN, 0};
    }
    if (in_w.get() >= 0) {
      idx_in = nfds;
      fds[nfds++] = {in_w.get(), POLLOUT, 0};
    }
    int wait_ms = -1;
    if (spec.timeout.count() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
    }
    if (spec.stop_when) {
      // Asked once per stop_poll, however much output wakes the loop up in between.
      auto now = std::chrono::steady_clock::now();
      if (now >= next_stop_check) {
        if (spec.stop_when()) {
          result.stopped = true;
          break;
        }
        next_stop_check = now + spec.stop_poll;
      }
      long long poll_ms =
          std::max<long long>(1, std::chrono::duration_cast<std::chrono::milliseconds>(next_stop_check - now).count());
      wait_ms = wait_ms < 0 ? static_cast<int>(poll_ms) : static_cast<int>(std::min<long long>(wait_ms, poll_ms));
    }
    int r = ::poll(fds, nfds, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      kill_and_reap();
      return Status::FromErrno(e, "poll on the output of " + spec.argv[0]);
    }
    auto drain = [&](int idx, UniqueFd& fd, std::string& sink, bool& truncated) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) return;
        fd.Reset();
        return;
      }
      std::size_t room = spec.max_output_bytes > sink.size() ? spec.max_output_bytes - sink.size() : 0;
      std::size_t keep = std::min<std::size_t>(room, static_cast<std::size_t>(n));
      sink.append(buf, keep);
      if (keep < static_cast<std::size_t>(n)) truncated = true;
    };
    drain(idx_out, out_r, result.out, result.out_truncated);
    drain(idx_err, err_r, result.err, result.err_truncated);
    if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = WriteWithoutSigpipe(in_w.get(), spec.stdin_data.data() + in_off, spec.stdin_data.size() - in_off);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        result.stdin_cut_short = errno == EPIPE;
        in_w.Reset();
      }
      if (n > 0) in_off += static_cast<std::size_t>(n);
      if (in_off == spec.stdin_data.size()) in_w.Reset();
    }
  }
  // A child may close its output and run on: the timeout and stop_when hold until it exits.
  int st = 0;
  while (!result.timed_out && !result.stopped) {
    pid_t waited = ::waitpid(pid, &st, WNOHANG);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) {
      int e = errno;
      kill_and_reap();
      return Status::FromErrno(e, "waitpid for " + spec.argv[0]);
    }
    if (spec.timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
    } else if (spec.stop_when && spec.stop_when()) {
      result.stopped = true;
    } else {
      std::this_thread::sleep_for(kExitPoll);
    }
  }
  if (result.timed_out || result.stopped) {
    kill_and_reap();
    result.term_signal = SIGKILL;
  } else {
    // A sandbox may leave daemons behind in the group when it has no pid namespace of its own.
    ::kill(-pid, SIGKILL);
    if (WIFEXITED(st)) result.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) result.term_signal = WTERMSIG(st);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int report[2];
  if (::read(rep_r.get(), report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
    return Status::FromErrno(report[1], fmt::format("starting {} ({})", spec.argv[0], StageName(report[0])));
  }
  return result;
}

Result<StartedProcess> StartProcess(const ProcessSpec& spec, int stdio_fd) {
  if (spec.reap_orphans) {
    return Status::InvalidArgument(
        "StartProcess: reap_orphans is for RunProcess (the reaper would hold the report "
        "pipe that says the helper has started)");
  }
  UniqueFd err_r, err_w, rep_r;
  TEMPER_RETURN_IF_ERROR(MakePipe(err_r, err_w));
  TEMPER_ASSIGN_OR_RETURN(pid_t pid, ForkChild(spec, stdio_fd, stdio_fd, err_w.get(), rep_r));
  err_w.Reset();
  // The report pipe closes on exec; a child that could not get there says why first.
  int report[2];
  ssize_t n;
  while ((n = ::read(rep_r.get(), report, sizeof report)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof report)) {
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return Status::FromErrno(report[1], fmt::format("starting {} ({})", spec.argv[0], StageName(report[0])));
  }
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  return StartedProcess{pid, std::move(err_r)};
}

}  // namespace temper
