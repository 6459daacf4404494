// EvalSandbox: the bubblewrap command line every run of temper-stig-eval goes through.
//
// The evaluator parses content and target data with a large C library (libopenscap, libxml2,
// libapt-pkg, librpm) as root, so it gets a sandbox of its own, separate from the Worker's
// (sandbox.h): new user (ids mapped 1:1, so file owners and modes read exactly), mount, pid, ipc,
// uts, cgroup and network namespaces (only a loopback that is down: no network); a root file system
// that is an empty tmpfs holding only
//   - the host's /usr (libraries, OpenSCAP's schemas and XSLT) and the /lib, /bin symlinks or
//     directories next to it, and /etc/ld.so.cache, all read-only; no other host /etc file (NSS
//     falls back to its built-in "files" service, so no NSS module is ever loaded);
//   - the helper binary and the datastream (or the results file to read), read-only;
//   - the output directory, read-write, when results are written;
//   - the target tree, read-write (OpenSCAP's dpkginfo probe rebuilds apt's cache in it; the
//     caller passes a throwaway view), which the helper chroot(2)s into (eval_confinement.h);
// a minimal /dev (null, zero, random, urandom, tty) and an empty tmpfs at /tmp for libopenscap's
// temporary files (mounted first, so any path above may lie under /tmp). Every path is bound at
// the path it has on the host, so arguments and output paths need no translation. Capabilities
// are dropped to CAP_SYS_CHROOT (entering the target), CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
// (reading every file of the target, as OpenSCAP must); with no CAP_SYS_ADMIN nothing can be
// remounted. The environment is cleared and set from `env`.
//
// Requires root on the host (the id map) and /usr/bin/bwrap; run with ProcessSpec::new_user_namespace.
// Thread safety: pure function.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace temper::stig {

struct EvalSandboxPaths {
  std::string helper;                  // the temper-stig-eval executable
  std::vector<std::string> read_only;  // files or directories the helper reads (datastream, results file)
  std::vector<std::string> writable;   // the output directory
  std::string target;                  // the tree to evaluate; empty when reading results only
};

// The bwrap argv that runs `helper_args` (without the helper itself) in the sandbox above.
std::vector<std::string> EvalSandboxArgv(const EvalSandboxPaths& paths,
                                         const std::vector<std::pair<std::string, std::string>>& env,
                                         const std::vector<std::string>& helper_args);

}  // namespace temper::stig
