// The rootfs sandbox's seccomp filter on its own (platform/sandbox_seccomp.h): loaded into a forked
// child of this test, each call it refuses answers EPERM (clone3 ENOSYS), what a package install
// needs still works, and a call in the x32 convention kills the caller. The same calls inside a
// real sandbox are tests/security/sandbox_escape_attack_test.cpp's.
#include "platform/sandbox_seccomp.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include <catch2/catch.hpp>

#include "skip.h"

namespace temper {
namespace {

// Runs `call` in a forked child under the filter and returns how the child ended: its exit status
// (the errno the call left, or 0 when it succeeded), or 128 + the signal that killed it.
int UnderFilter(const std::function<int()>& call) {
  const std::vector<sock_filter> program = SandboxSeccompProgram();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    sock_fprog fprog{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(200);
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) ::_exit(201);
    ::_exit(call());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int ErrnoOf(long result) { return result == -1 ? errno : 0; }

TEST_CASE("the sandbox's seccomp filter refuses namespaces, setns, mounts and bpf, and lets the rest run",
          "[stig][sandbox]") {
#if !defined(__x86_64__) && !defined(__aarch64__)
  TEMPER_SKIP("the filter knows x86_64 and aarch64 only; on this architecture it kills every call");
#else
  // Refused: a namespace of its own, however asked for.
  CHECK(UnderFilter([] { return ErrnoOf(::unshare(CLONE_NEWUSER)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::unshare(CLONE_NEWCGROUP | CLONE_NEWNS)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::unshare(CLONE_NEWTIME)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)); }) == EPERM);
  // The high half of the flags word does not hide a flag: the kernel reads the low 32 bits.
  CHECK(UnderFilter([] {
          return ErrnoOf(::syscall(SYS_clone, (0xffffffffUL << 32) | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
        }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(SYS_clone3, nullptr, 0)); }) == ENOSYS);
  CHECK(UnderFilter([] {
          int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
          return fd < 0 ? 255 : ErrnoOf(::setns(fd, 0));
        }) == EPERM);
  // On paths that do not exist: were the filter to let them through, they would fail harmlessly
  // (ENOENT, EINVAL) instead of changing this test's own mounts.
  CHECK(UnderFilter([] { return ErrnoOf(::mount("none", "/nonexistent-temper-mnt", "cgroup2", 0, nullptr)); }) ==
        EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::umount2("/nonexistent-temper-mnt", MNT_DETACH)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(SYS_fsopen, "proc", 0)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(SYS_open_tree, AT_FDCWD, "/", 0)); }) == EPERM);
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(SYS_bpf, 0, nullptr, 0)); }) == EPERM);

  // Allowed: unshare of what is not a namespace, fork, threads' clone (through fork here), files.
  CHECK(UnderFilter([] { return ErrnoOf(::unshare(CLONE_FILES | CLONE_FS)); }) == 0);
  CHECK(UnderFilter([] {
          const pid_t child = ::fork();
          if (child == 0) ::_exit(7);
          int status = 0;
          if (child < 0 || ::waitpid(child, &status, 0) != child) return 255;
          return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : 254;
        }) == 0);
  CHECK(UnderFilter([] { return ErrnoOf(::access("/", R_OK)); }) == 0);
#endif
}

TEST_CASE("the sandbox's seccomp filter kills a call made in another convention (x32)", "[stig][sandbox]") {
#if !defined(__x86_64__)
  TEMPER_SKIP("x32 is an x86_64 convention");
#else
  constexpr long kX32Bit = 0x40000000;
  CHECK(UnderFilter([] { return ErrnoOf(::syscall(kX32Bit | SYS_getpid)); }) == 128 + SIGSYS);
#endif
}

TEST_CASE("SandboxSeccompFd holds the program, sealed and read from its start", "[stig][sandbox]") {
  auto fd = SandboxSeccompFd();
  REQUIRE(fd.ok());
  const std::vector<sock_filter> program = SandboxSeccompProgram();
  std::vector<sock_filter> read_back(program.size() + 1);
  const ssize_t n = ::read(fd->get(), read_back.data(), read_back.size() * sizeof(sock_filter));
  REQUIRE(n == static_cast<ssize_t>(program.size() * sizeof(sock_filter)));
  CHECK(std::memcmp(read_back.data(), program.data(), static_cast<size_t>(n)) == 0);
  CHECK(::write(fd->get(), "x", 1) == -1);  // sealed against writes
  CHECK((::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC) != 0);
}

}  // namespace
}  // namespace temper
