#include "platform/sandbox_seccomp.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "common/dcheck.h"

namespace temper {
namespace {

// Where the filter reads a call's facts (struct seccomp_data, linux/seccomp.h).
constexpr std::uint32_t kNrOffset = offsetof(seccomp_data, nr);
constexpr std::uint32_t kArchOffset = offsetof(seccomp_data, arch);
// The low 32 bits of the first argument on a little-endian machine (both architectures here):
// clone's and unshare's flags, which the kernel reads as 32 bits too (lower_32_bits() in
// kernel/fork.c), so the high half cannot smuggle a flag past the check.
constexpr std::uint32_t kFirstArgLowOffset = offsetof(seccomp_data, args[0]);

// Every flag that makes a namespace (linux/sched.h). In clone(2) the low byte is the exit signal,
// where unshare(2) takes CLONE_NEWTIME (0x80); a signal number never reaches 0x80, so clone is
// checked without that bit and unshare with it.
constexpr std::uint32_t kCloneNewFlags =
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
constexpr std::uint32_t kUnshareNewFlags = kCloneNewFlags | CLONE_NEWTIME;

// On x86_64, numbers with this bit set are x32's calls (arch/x86/include/uapi/asm/unistd.h).
constexpr std::uint32_t kX32SyscallBit = 0x40000000;

// One architecture's numbers for the calls the filter looks at.
struct ArchCalls {
  std::uint32_t audit_arch;
  bool x32_numbers;  // x86_64: the x32 numbering shares the architecture value
  std::uint32_t clone, clone3, unshare;
  // Refused outright (EPERM): setns, mount, umount2, pivot_root, open_tree, move_mount, fsopen,
  // fsconfig, fsmount, fspick, mount_setattr, open_tree_attr, bpf.
  std::array<std::uint32_t, 13> refused;
};

// arch/x86/entry/syscalls/syscall_64.tbl.
constexpr ArchCalls kX86_64{
    AUDIT_ARCH_X86_64, true, 56, 435, 272, {308, 165, 166, 155, 428, 429, 430, 431, 432, 433, 442, 467, 321}};
// include/uapi/asm-generic/unistd.h, which aarch64 uses.
constexpr ArchCalls kAarch64{
    AUDIT_ARCH_AARCH64, false, 220, 435, 97, {268, 40, 39, 41, 428, 429, 430, 431, 432, 433, 442, 467, 280}};
constexpr ArchCalls kArches[] = {kX86_64, kAarch64};

#if defined(__x86_64__)
static_assert(kX86_64.clone == __NR_clone && kX86_64.unshare == __NR_unshare && kX86_64.clone3 == __NR_clone3 &&
              kX86_64.refused[0] == __NR_setns && kX86_64.refused[1] == __NR_mount && kX86_64.refused[12] == __NR_bpf);
#elif defined(__aarch64__)
static_assert(kAarch64.clone == __NR_clone && kAarch64.unshare == __NR_unshare && kAarch64.clone3 == __NR_clone3 &&
              kAarch64.refused[0] == __NR_setns && kAarch64.refused[1] == __NR_mount &&
              kAarch64.refused[12] == __NR_bpf);
#endif

// A classic BPF program written with labels: conditional jumps name a label placed later, and
// Finish turns them into the forward offsets the kernel wants (at most 255 instructions ahead).
class ProgramWriter {
 public:
  using Label = std::size_t;

  Label NewLabel() {
    labels_.push_back(kUnplaced);
    return labels_.size() - 1;
  }
  void Place(Label l) { labels_[l] = code_.size(); }
  void Load(std::uint32_t offset) { code_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset)); }
  void Return(std::uint32_t action) { code_.push_back(BPF_STMT(BPF_RET | BPF_K, action)); }
  // Jumps to `to` when the loaded word is `k` (JEQ), has any bit of `k` (JSET), or is at least
  // `k` (JGE); otherwise goes on with the next instruction.
  void JumpIf(std::uint16_t test, std::uint32_t k, Label to) {
    jumps_.push_back({code_.size(), to});
    code_.push_back(BPF_JUMP(BPF_JMP | test | BPF_K, k, 0, 0));
  }

  std::vector<sock_filter> Finish() {
    for (const auto& [at, to] : jumps_) {
      TEMPER_DCHECK(labels_[to] != kUnplaced, "every label a jump names is placed");
      const std::size_t offset = labels_[to] - (at + 1);
      TEMPER_DCHECK(labels_[to] > at && offset <= 255, "classic BPF jumps go forward, at most 255 instructions");
      code_[at].jt = static_cast<std::uint8_t>(offset);
    }
    return code_;
  }

 private:
  static constexpr std::size_t kUnplaced = ~std::size_t{0};
  std::vector<sock_filter> code_;
  std::vector<std::size_t> labels_;
  std::vector<std::pair<std::size_t, Label>> jumps_;
};

}  // namespace

std::vector<sock_filter> SandboxSeccompProgram() {
  ProgramWriter w;
  const auto eperm = w.NewLabel(), enosys = w.NewLabel(), kill = w.NewLabel();
  std::vector<ProgramWriter::Label> arch_labels;
  for (std::size_t i = 0; i < std::size(kArches); ++i) arch_labels.push_back(w.NewLabel());

  // Which calling convention: one the filter knows, or the process dies.
  w.Load(kArchOffset);
  for (std::size_t i = 0; i < std::size(kArches); ++i) w.JumpIf(BPF_JEQ, kArches[i].audit_arch, arch_labels[i]);
  w.Return(SECCOMP_RET_KILL_PROCESS);

  for (std::size_t i = 0; i < std::size(kArches); ++i) {
    const ArchCalls& a = kArches[i];
    const auto check_clone = w.NewLabel(), check_unshare = w.NewLabel();
    w.Place(arch_labels[i]);
    w.Load(kNrOffset);
    if (a.x32_numbers) w.JumpIf(BPF_JGE, kX32SyscallBit, kill);
    w.JumpIf(BPF_JEQ, a.clone, check_clone);
    w.JumpIf(BPF_JEQ, a.unshare, check_unshare);
    w.JumpIf(BPF_JEQ, a.clone3, enosys);
    for (std::uint32_t nr : a.refused) w.JumpIf(BPF_JEQ, nr, eperm);
    w.Return(SECCOMP_RET_ALLOW);

    // clone: a fork or a thread is fine, a new namespace is not.
    w.Place(check_clone);
    w.Load(kFirstArgLowOffset);
    w.JumpIf(BPF_JSET, kCloneNewFlags, eperm);
    w.Return(SECCOMP_RET_ALLOW);

    // unshare: of files or the fs context is fine (CLONE_FILES, CLONE_FS), of a namespace not.
    w.Place(check_unshare);
    w.Load(kFirstArgLowOffset);
    w.JumpIf(BPF_JSET, kUnshareNewFlags, eperm);
    w.Return(SECCOMP_RET_ALLOW);
  }

  w.Place(eperm);
  w.Return(SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
  w.Place(enosys);
  w.Return(SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
  w.Place(kill);
  w.Return(SECCOMP_RET_KILL_PROCESS);
  return w.Finish();
}

Result<UniqueFd> SandboxSeccompFd() {
  const std::vector<sock_filter> program = SandboxSeccompProgram();
  UniqueFd fd(::memfd_create("temper-sandbox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status::FromErrno(errno, "making a memory file for the sandbox's seccomp filter");
  const auto* bytes = reinterpret_cast<const char*>(program.data());
  const std::size_t size = program.size() * sizeof(sock_filter);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd.get(), bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(errno, "writing the sandbox's seccomp filter to a memory file");
    done += static_cast<std::size_t>(n);
  }
  // Sealed, so what bwrap reads is what was written here.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return Status::FromErrno(errno, "sealing the sandbox's seccomp filter");
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return Status::FromErrno(errno, "rewinding the sandbox's seccomp filter");
  return fd;
}

}  // namespace temper
