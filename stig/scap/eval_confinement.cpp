#include "stig/scap/eval_confinement.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <pwd.h>
#include <shadow.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace temper::stig {
namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "temper-stig-eval's seccomp filter is written for x86_64 and aarch64"
#endif

void* Nothing(void*) { return nullptr; }

// A classic BPF program with forward jumps to named labels, patched once every label is placed.
class Bpf {
 public:
  enum Label { kDeny, kKill, kCheckProt, kCheckShm, kLabelCount };

  void Load(std::uint32_t offset) { code_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset)); }
  void Return(std::uint32_t action) { code_.push_back(BPF_STMT(BPF_RET | BPF_K, action)); }
  // if (A op k) goto `to`; else fall through.
  void JumpIf(std::uint16_t op, std::uint32_t k, Label to) { Jump(op, k, to, true); }
  // if (!(A op k)) goto `to`; else fall through.
  void JumpUnless(std::uint16_t op, std::uint32_t k, Label to) { Jump(op, k, to, false); }
  void Place(Label l) { at_[l] = code_.size(); }
  std::vector<sock_filter> Finish() {
    for (const Fixup& f : fixups_) {
      const auto offset = static_cast<std::uint8_t>(at_[f.to] - f.index - 1);
      (f.when_true ? code_[f.index].jt : code_[f.index].jf) = offset;
    }
    return code_;
  }

 private:
  struct Fixup {
    std::size_t index;
    Label to;
    bool when_true;
  };
  void Jump(std::uint16_t op, std::uint32_t k, Label to, bool when_true) {
    fixups_.push_back({code_.size(), to, when_true});
    code_.push_back(BPF_JUMP(BPF_JMP | op | BPF_K, k, 0, 0));
  }
  std::vector<sock_filter> code_;
  std::vector<Fixup> fixups_;
  std::size_t at_[kLabelCount] = {};
};

}  // namespace

Status PreloadLazyLibraries() {
  // glibc dlopen()s libgcc_s.so.1 on the first pthread_cancel (to unwind the cancelled thread);
  // OpenSCAP cancels probe threads, and its own preload runs only after a probe has chrooted.
  pthread_t t;
  if (int e = ::pthread_create(&t, nullptr, Nothing, nullptr); e != 0) {
    return Status::Internal(fmt::format("preloading libgcc_s: pthread_create: {}", std::strerror(e)));
  }
  ::pthread_cancel(t);
  ::pthread_join(t, nullptr);
  // NSS reads nsswitch.conf and loads the modules it names on the first lookup of each database
  // (XCCDF results record the evaluating user with getpwuid). A name that exists nowhere makes
  // the lookup go through every module. After a chroot glibc stops re-reading nsswitch.conf.
  const char* nobody = "temper-eval-no-such-name";
  ::getpwnam(nobody);
  ::getgrnam(nobody);
  ::getspnam(nobody);
  ::endpwent();
  ::endgrent();
  ::endspent();
  return Status::OK();
}

Status ForbidNewCode() {
  constexpr std::uint32_t kEperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  // The low 32 bits of the third argument (prot for mmap/mprotect/pkey_mprotect, shmflg for
  // shmat); both architectures are little-endian.
  constexpr std::uint32_t kArg2 = offsetof(seccomp_data, args) + 2 * sizeof(std::uint64_t);
  Bpf p;
  p.Load(offsetof(seccomp_data, arch));
  p.JumpUnless(BPF_JEQ, kAuditArch, Bpf::kKill);
  p.Load(offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  constexpr std::uint32_t kX32SyscallBit = 0x40000000;  // x32 ABI syscalls: <asm/unistd.h> __X32_SYSCALL_BIT
  p.JumpIf(BPF_JGE, kX32SyscallBit, Bpf::kKill);
#endif
  p.JumpIf(BPF_JEQ, __NR_execve, Bpf::kDeny);
  p.JumpIf(BPF_JEQ, __NR_execveat, Bpf::kDeny);
  // Other ways to executable memory: writing another process's code pages (ptrace pokes ignore
  // page protections), and READ_IMPLIES_EXEC, which makes every readable mapping executable.
  p.JumpIf(BPF_JEQ, __NR_ptrace, Bpf::kDeny);
  p.JumpIf(BPF_JEQ, __NR_process_vm_writev, Bpf::kDeny);
  p.JumpIf(BPF_JEQ, __NR_personality, Bpf::kDeny);
  p.JumpIf(BPF_JEQ, __NR_mmap, Bpf::kCheckProt);
  p.JumpIf(BPF_JEQ, __NR_mprotect, Bpf::kCheckProt);
  p.JumpIf(BPF_JEQ, __NR_pkey_mprotect, Bpf::kCheckProt);
  p.JumpIf(BPF_JEQ, __NR_shmat, Bpf::kCheckShm);
  p.Return(SECCOMP_RET_ALLOW);
  p.Place(Bpf::kCheckProt);
  p.Load(kArg2);
  p.JumpIf(BPF_JSET, PROT_EXEC, Bpf::kDeny);
  p.Return(SECCOMP_RET_ALLOW);
  p.Place(Bpf::kCheckShm);
  p.Load(kArg2);
  p.JumpIf(BPF_JSET, SHM_EXEC, Bpf::kDeny);
  p.Return(SECCOMP_RET_ALLOW);
  p.Place(Bpf::kDeny);
  p.Return(kEperm);
  p.Place(Bpf::kKill);
  p.Return(SECCOMP_RET_KILL_PROCESS);
  std::vector<sock_filter> code = p.Finish();

  // Without CAP_SYS_ADMIN a filter needs no_new_privs (bubblewrap sets it too).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Status::FromErrno(errno, "prctl(PR_SET_NO_NEW_PRIVS)");
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  long rc = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
  if (rc < 0) return Status::FromErrno(errno, "installing the seccomp filter");
  if (rc > 0) return Status::Internal(fmt::format("installing the seccomp filter: thread {} could not take it", rc));
  return Status::OK();
}

TargetRoot::~TargetRoot() {
  if (original_root_ >= 0) ::close(original_root_);
}

Status TargetRoot::Enter(const std::string& dir) {
  if (original_root_ >= 0) return Status::FailedPrecondition("already inside a target root");
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening the current root");
  if (::chdir(dir.c_str()) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "entering the target root " + dir);
  }
  original_root_ = fd;
  return Status::OK();
}

Status TargetRoot::Enter(int dir_fd, const std::string& name) {
  if (original_root_ >= 0) return Status::FailedPrecondition("already inside a target root");
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening the current root");
  if (::fchdir(dir_fd) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "entering the target root " + name);
  }
  original_root_ = fd;
  return Status::OK();
}

Status TargetRoot::Leave() {
  if (original_root_ < 0) return Status::FailedPrecondition("not inside a target root");
  if (::fchdir(original_root_) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0) {
    return Status::FromErrno(errno, "leaving the target root");
  }
  ::close(original_root_);
  original_root_ = -1;
  return Status::OK();
}

}  // namespace temper::stig
