// Process: runs one child process to completion with bounded time, memory and output.
//
// Everything stig/ does outside its own address space goes through here: the OpenSCAP evaluation
// child, bubblewrap sandboxes, mmdebstrap. One runner keeps the limits, the kill-on-timeout and
// the output caps in one place, so no caller can forget them.
//
// The child gets its own process group; on timeout the whole group is killed with SIGKILL (a
// bubblewrap child with --unshare-pid then takes every process of its sandbox with it).
// A child that exits (or closes its stdin) before taking all of stdin_data is a result
// (stdin_cut_short), never a SIGPIPE for the caller's process, whatever its signal disposition.
// Thread safety: RunProcess is reentrant; it forks with only async-signal-safe calls in the child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "platform/unique_fd.h"

namespace temper {

struct ProcessSpec {
  // argv[0] is the program: an absolute path, or a name searched in PATH of the parent.
  std::vector<std::string> argv;
  // The child's whole environment as KEY=VALUE. Empty means "PATH=/usr/sbin:/usr/bin:/sbin:/bin".
  std::vector<std::string> env;
  // Working directory; empty keeps the parent's.
  std::string cwd;
  // Written to the child's stdin, which is then closed.
  std::string stdin_data;
  // A descriptor the child gets as its stdin instead of a pipe fed with stdin_data (which must then
  // be empty), or as its stdout instead of the pipe read into ProcessResult::out (which then stays
  // empty): for a stream another thread feeds or reads while the child runs (a host's archive on
  // its way through a filter). -1: the pipe. The caller keeps them open until RunProcess returns.
  // RunProcess only.
  int stdin_fd = -1;
  int stdout_fd = -1;
  // Zero means no limit.
  std::chrono::milliseconds timeout{0};
  // Bytes kept per stream; the rest is read and dropped (so the child never blocks on a full pipe).
  std::size_t max_output_bytes = 1 << 20;
  // RLIMIT_AS for the child and everything it starts; zero means unlimited.
  std::uint64_t memory_limit_bytes = 0;
  // Start the child in a new user namespace whose ids 0..65535 map to the same ids outside (the
  // caller must be root). It is root there with capabilities only over namespaces it creates:
  // file ownership stays exact, while host-wide privileged operations (sysctl, mounts of host
  // file systems, module loading, device nodes) are refused by the kernel.
  bool new_user_namespace = false;
  // Descriptors of cgroup.procs files (platform/cgroup.h) the child writes "0" to first thing after
  // fork, so it and everything it starts run in those cgroups from their first instruction. The
  // caller keeps them open until RunProcess returns.
  std::vector<int> join_cgroup_fds;
  // Run argv under a reaper: the child becomes a subreaper (PR_SET_CHILD_SUBREAPER), starts argv in
  // a process of its own, reaps every process orphaned below it and ends as argv's process ended
  // (its exit status, or the signal that killed it). bubblewrap's pid 1 exits after bubblewrap
  // itself, so without this its zombie waits for the host's init to reap it (a second or two, or
  // for ever under an init that never reaps), its pid still charged to the command's cgroups.
  // RunProcess only: StartProcess answers InvalidArgument.
  bool reap_orphans = false;
  // Descriptors the child keeps across exec, at the same numbers (everything else but stdio is
  // closed): e.g. the seccomp filter bwrap reads with --seccomp FD. The caller keeps them open
  // until RunProcess returns.
  std::vector<int> inherit_fds;
  // The child's oom_score_adj. Unset: inherited, except that a negative score (a daemon shielding
  // itself from the OOM killer) becomes 0, so no child is shielded by accident.
  std::optional<int> oom_score_adj;
  // Asked every `stop_poll` while the child runs; when it answers true, the child's process group
  // is killed and the result says `stopped` (a cap was hit, the batch was cancelled). Called on
  // the thread that called RunProcess.
  std::function<bool()> stop_when;
  std::chrono::milliseconds stop_poll{100};
};

struct ProcessResult {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // the signal that ended the child, 0 when it exited
  bool timed_out = false;
  std::string out;
  std::string err;
  bool out_truncated = false;
  bool err_truncated = false;
  // The child closed its stdin (or exited) before taking all of stdin_data: the write got EPIPE.
  bool stdin_cut_short = false;
  double seconds = 0;
  // Killed because ProcessSpec::stop_when asked for it.
  bool stopped = false;
  // Set by the sandbox (sandbox.h, rootfs_target.h) when the command hit one of its caps: the
  // named error, e.g. "the command hit the sandbox's pids cap of 512". Empty otherwise.
  std::string cap_hit;

  bool Succeeded() const { return !timed_out && !stopped && term_signal == 0 && exit_code == 0 && cap_hit.empty(); }
  // "exit 2", "killed by signal 9", "timed out after 5.0 s", "stopped after 0.4 s", or the cap
  // hit followed by how the command ended.
  std::string Describe() const;
};

// Runs `spec` and waits for it. Errors: InvalidArgument for an empty argv, IOError when the child
// cannot be started (fork, pipes, exec of a missing program: the message names argv[0]). A child
// that runs and fails is not an error: inspect the ProcessResult.
Result<ProcessResult> RunProcess(const ProcessSpec& spec);

// A child left running by StartProcess. The caller ends it (kill(-pid, SIGKILL): it leads its own
// process group) and reaps it with waitpid.
struct StartedProcess {
  pid_t pid = -1;
  UniqueFd err;  // read end of its stderr, non-blocking
};

// Starts `spec` (argv, env, cwd, memory limit, user namespace, cgroups, OOM score as RunProcess;
// timeout, stdin_data, output caps and stop_when do not apply) with `stdio_fd` as its stdin and
// stdout, for a long-lived helper that talks over one socket. Returns once it has exec'd.
// Errors: as RunProcess's.
Result<StartedProcess> StartProcess(const ProcessSpec& spec, int stdio_fd);

}  // namespace temper
