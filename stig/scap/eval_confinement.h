// EvalConfinement: what temper-stig-eval does to itself so that a target's files can only ever be
// data, never code or a way out to the host.
//
// OpenSCAP 1.3.7 evaluates an offline tree by prefixing OSCAP_PROBE_ROOT to every path and opening
// the result on the host (PROBE_OFFLINE_OWN probes), so an absolute symlink in the target
// (/etc/issue.net -> /etc/shadow) is followed on the host. temper-stig-eval therefore chroot(2)s
// into the target and evaluates with the probe root at the new "/": every path, and every
// symlink's target, resolves inside the target tree. It runs inside its own sandbox
// (eval_sandbox.h), so even the host paths it can see from there are only the read-only libraries
// it runs from.
//
// Inside the target's tree nothing may be loaded or run: the tree is written by whoever controls
// the target. glibc loads some libraries on first use (libgcc_s for pthread_cancel, which
// OpenSCAP's probe threads need; NSS modules), so PreloadLazyLibraries makes those first uses
// happen before the chroot. ForbidNewCode then installs a seccomp filter: no execve/execveat, no
// mapping or re-protecting memory executable (mmap, mprotect, pkey_mprotect, shmat with SHM_EXEC),
// no ptrace or process_vm_writev, no personality (READ_IMPLIES_EXEC would make every readable
// mapping executable). From then on no new code can enter the process, whatever a library or a
// probe tries (apt running dpkg, a gconv or rpm plugin, an SCE script): the call fails with EPERM.
// A syscall from another ABI (x32, 32-bit) kills the process, so the filter cannot be sidestepped.
// Configuration that libraries would read from the target and that could run code without loading
// any (rpm's Lua macros) is answered by the helper itself (eval_overrides.cpp).
//
// TargetRoot enters the target (chroot) and leaves it again through a descriptor of the original
// root kept open for that, so the results are written where the daemon reads them.
//
// Thread safety: call these from the main thread before OpenSCAP starts its probe threads; the
// filter is synchronised onto every thread of the process (and inherited by any thread created).
#pragma once

#include <string>

#include "common/status.h"

namespace temper::stig {

// Makes glibc load what it would otherwise load lazily from the (future) root directory.
// Errors: Internal when a thread cannot be created.
Status PreloadLazyLibraries();

// Installs the seccomp filter described above. Irreversible. Errors: Internal from prctl/seccomp.
Status ForbidNewCode();

// The process's root directory switched to a target tree and back. Not copyable.
class TargetRoot {
 public:
  TargetRoot() = default;
  ~TargetRoot();
  TargetRoot(const TargetRoot&) = delete;
  TargetRoot& operator=(const TargetRoot&) = delete;

  // chroot(2) into `dir` (which needs CAP_SYS_CHROOT), with the working directory at its "/".
  // Errors: IOError naming `dir`; FailedPrecondition when already inside a target.
  Status Enter(const std::string& dir);
  // The same for the directory open at `dir_fd`, which may lie in another mount namespace (a tree
  // passed over a socket); `name` names it in errors.
  Status Enter(int dir_fd, const std::string& name);
  // Back to the root the process had before Enter, working directory "/". Errors: IOError;
  // FailedPrecondition when not inside a target.
  Status Leave();

 private:
  int original_root_ = -1;
};

}  // namespace temper::stig
