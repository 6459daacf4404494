// Cgroups for sandboxed commands: each command of a rootfs target runs in a cgroup of its own,
// made before it starts and removed after it ends, with the pids, memory and CPU caps of
// sandbox_caps.h. What a fork bomb or a memory hog in the sandbox can take is then bounded by the
// kernel, and the cgroup's event counters say which cap a command hit.
//
// Two kernel interfaces, one layout:
//   - cgroup v2 where its memory and pids controllers are available (Debian 12 and every systemd
//     host with the unified hierarchy). The controllers can be handed to children only by a cgroup
//     without processes of its own, so the process moves itself (and what it started) into a leaf
//     "temper-self" of its cgroup first (under systemd: give temperd's unit Delegate=yes); a
//     cgroup that holds anybody else's processes is not ours to rearrange, and v2 is then
//     unavailable.
//   - cgroup v1 memory, pids (and cpu, when mounted) hierarchies otherwise (hybrid hosts and
//     containers), each under this process's own cgroup in that hierarchy.
// Under the base: temper-<pid>-<start time>-<n>/ per CgroupTree (one per target, capped for all
// its commands together), cmd-<seq>/ per command (capped again on its own). A tree whose owner process is gone (a
// daemon killed with -9) is removed, with anything still running in it, by the next CgroupTree::Open under the same
// base.
//
// Requires root (cgroupfs writes). Thread safety: a CgroupTree may make commands from several
// threads; a CommandCgroup belongs to the thread running its command.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "platform/sandbox_caps.h"
#include "platform/unique_fd.h"

namespace temper {

// One command's cgroup (one directory per v1 hierarchy, or one v2 directory).
class CommandCgroup {
 public:
  ~CommandCgroup();
  CommandCgroup(const CommandCgroup&) = delete;
  CommandCgroup& operator=(const CommandCgroup&) = delete;

  // Descriptors of the cgroup.procs files a child writes "0" to, before it execs, to move itself
  // (and so everything it starts) in. Valid until Remove.
  const std::vector<int>& join_fds() const { return join_fds_; }
  // The cap the command's processes hit so far: pids (a fork was refused) or memory (the kernel
  // killed a process for it), its own or its tree's. nullopt when none. On cgroup v2 a fork
  // refused by the tree's pids cap is counted at the tree only, so there it counts as hit for
  // every command of the tree that runs when it happens (the kernel does not say whose fork it was).
  std::optional<CapKind> CapHit() const;
  // Kills whatever still runs in the cgroup, waits until it is empty and removes it. Idempotent;
  // the destructor does it too (ignoring errors). IOError naming the directory when it stays.
  Status Remove();

 private:
  friend class CgroupTree;
  CommandCgroup(int version, std::vector<std::string> dirs) : version_(version), dirs_(std::move(dirs)) {}

  int version_;
  std::vector<std::string> dirs_;  // v2: one; v1: memory, pids, then cpu when present
  std::vector<UniqueFd> join_files_;
  std::vector<int> join_fds_;
  // v2: the tree's pids.events and its "max" count when the command was made.
  std::string tree_pids_events_;
  std::uint64_t tree_pids_refused_before_ = 0;
  bool removed_ = false;
};

class CgroupTree {
 public:
  // Finds where this process may make cgroups (v2 first, then v1), removes trees of owners that
  // are gone, and makes this tree's directory with `caps` (disk_bytes ignored), which then bound
  // all its commands together, however many run at once. FailedPrecondition naming what is missing when no
  // interface offers both memory and pids controllers (then no sandbox can be capped, and none
  // may run); IOError naming the path when cgroupfs refuses a write.
  static Result<std::unique_ptr<CgroupTree>> Open(const SandboxCaps& caps = SandboxCaps{});
  // Removes the trees whose owner process is gone (what Open does first), killing what still runs
  // in them: for whoever reaps a killed daemon. Errors are ignored; the next Open tries again.
  static void RemoveStale();
  // Removes the tree (commands must be removed first; anything left is killed).
  ~CgroupTree();
  CgroupTree(const CgroupTree&) = delete;
  CgroupTree& operator=(const CgroupTree&) = delete;

  // 2 or 1.
  int version() const { return version_; }
  // "cgroup v1 (memory, pids, cpu) under /sys/fs/cgroup/memory/x/temper-12-345-0, ..." for logs.
  std::string Describe() const;

  // A new, empty cgroup with `caps` (disk_bytes is not a cgroup's; it is ignored), under the
  // tree's: the command gets no more than `caps`, and no more than the tree's caps leave it while
  // other commands of the tree run. IOError naming the file that refused its value.
  Result<std::unique_ptr<CommandCgroup>> NewCommand(const SandboxCaps& caps);

 private:
  CgroupTree(int version, std::vector<std::string> dirs, bool has_cpu)
      : version_(version), dirs_(std::move(dirs)), has_cpu_(has_cpu) {}

  int version_;
  std::vector<std::string> dirs_;  // as CommandCgroup::dirs_, for the tree
  bool has_cpu_;
  std::atomic<std::uint64_t> next_{0};
};

}  // namespace temper
