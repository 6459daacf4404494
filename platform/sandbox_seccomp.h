// SandboxSeccomp: the system call filter every command in a rootfs sandbox runs under, so that it
// cannot change its own namespaces or limits.
//
// Uid 0 in the sandbox is the host's uid 0 (sandbox.h). A command that could make a user namespace
// of its own would be root with every capability over the mount and cgroup namespaces it makes
// next; it could mount its cgroup's hierarchy there and write -1 into memory.limit_in_bytes and max
// into pids.max, because cgroupfs checks only the file owner's uid, which is that same uid 0 (the
// attack of issue 46; cgroup v2 without nsdelegate alike). The filter closes every step of that at
// the kernel's door, whatever the cgroup version and whatever program makes the call:
//   - unshare(2) and clone(2) with any CLONE_NEW* flag, and clone3(2) altogether (it answers ENOSYS,
//     so C libraries fall back to clone(2), whose flags a filter can read; clone3 passes them in
//     memory it cannot);
//   - setns(2), into another process's namespaces;
//   - mount(2), umount2(2), pivot_root(2) and the new mount API (open_tree, move_mount, fsopen,
//     fsconfig, fsmount, fspick, mount_setattr, open_tree_attr): no cgroup, proc, sysfs or bpf file
//     system can be mounted, nor an existing mount moved or changed;
//   - bpf(2): cgroup BPF programs and maps are another way to act on a cgroup.
// These answer EPERM, as a kernel without the privilege would, so a package's maintainer script
// that tries one fails the way it would in any container rather than being killed. Nothing a
// package install, chown/chmod or a setuid program does needs them (without CAP_SYS_ADMIN the
// sandbox could not mount before either).
//
// The numbers are per architecture: the filter knows x86_64 and aarch64. A call made in any other
// convention (i386 or x32 on x86_64, arm32 on aarch64) would reach the same kernel functions under
// numbers the filter does not check, so the process making it is killed.
// Thread safety: pure functions.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "common/status.h"
#include "platform/unique_fd.h"

namespace temper {

// The classic BPF program (what bwrap's --seccomp reads: struct sock_filter, host byte order).
std::vector<sock_filter> SandboxSeccompProgram();

// A memory file holding SandboxSeccompProgram, positioned at its start, for one bwrap to read
// (--seccomp FD reads it to the end). Close-on-exec: the child that passes it on clears the flag
// (ProcessSpec::inherit_fds). IOError when the memory file cannot be made or written.
Result<UniqueFd> SandboxSeccompFd();

}  // namespace temper
