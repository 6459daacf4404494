#include "stig/ssh/ssh_test_root.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platform/process.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

// Bump when the script below changes.
constexpr int kRecipe = 3;

// $1 base, $2 upper, $3 work, $4 merged, $5 key directory. Runs in a private mount namespace, so
// every mount it makes goes away with it.
constexpr const char* kBuildScript = R"SH(set -eu
base=$1; upper=$2; work=$3; m=$4; keys=$5
mount -t overlay overlay -o "lowerdir=$base,upperdir=$upper,workdir=$work" "$m"
# apt's indexes and downloads stay out of the layer (the shared root keeps its own cache).
mount -t tmpfs tmpfs "$m/var/lib/apt/lists"
mount -t tmpfs tmpfs "$m/var/cache/apt"
mount --bind /etc/resolv.conf "$m/etc/resolv.conf"
# apt-key writes to /dev/null: the host's devices, since a root built where mknod is not allowed
# (mmdebstrap then leaves /dev empty) has none.
mount --bind /dev "$m/dev"
chroot "$m" apt-get update -q
DEBIAN_FRONTEND=noninteractive chroot "$m" apt-get install -y -q --no-install-recommends openscap-scanner attr acl
umount "$m/dev" "$m/etc/resolv.conf" "$m/var/cache/apt" "$m/var/lib/apt/lists"
# Without PAM, sshd refuses accounts whose password is locked ("!"); "*" has no password and is open.
chroot "$m" useradd -m -s /bin/bash -p '*' admin
chroot "$m" useradd -m -s /bin/bash clerk
echo 'clerk:temper-test-password' | chroot "$m" chpasswd
printf 'admin ALL=(ALL) NOPASSWD: ALL\n' > "$m/etc/sudoers.d/temper-admin"
printf 'clerk ALL=(ALL) ALL\n' > "$m/etc/sudoers.d/temper-clerk"
chmod 0440 "$m/etc/sudoers.d/temper-admin" "$m/etc/sudoers.d/temper-clerk"
for u in root admin clerk; do
  home=$(chroot "$m" getent passwd "$u" | cut -d: -f6)
  mkdir -p "$m$home/.ssh"
  cp "$keys/id_ed25519.pub" "$m$home/.ssh/authorized_keys"
  chmod 0700 "$m$home/.ssh"
  chmod 0600 "$m$home/.ssh/authorized_keys"
  chroot "$m" chown -R "$u:" "$home/.ssh"
done
# The hosts' name (netns_ssh_host.h sets it), so sudo resolves it.
echo temper-test-host > "$m/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 temper-test-host\n' > "$m/etc/hosts"
# sshd's privilege separation directory, made at boot on a real host.
mkdir -p "$m/run/sshd"
umount "$m"
)SH";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status Keygen(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::remove(path + ".pub", ec);
  temper::ProcessSpec spec;
  spec.argv = {"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "temper-test", "-f", path};
  spec.timeout = std::chrono::seconds(30);
  TEMPER_ASSIGN_OR_RETURN(temper::ProcessResult r, temper::RunProcess(spec));
  if (!r.Succeeded()) return Status::Internal(fmt::format("ssh-keygen {} failed ({}): {}", path, r.Describe(), r.err));
  return Status::OK();
}

}  // namespace

std::string SshTestRootDir() { return std::string(TEMPER_BINARY_DIR) + "/stig-rootfs-ssh"; }

Result<SshTestRoot> EnsureSshTestRoot(const Logger& log) {
  if (::geteuid() != 0) return Status::FailedPrecondition("SSH test hosts need root (mounts, network namespaces)");
  const fs::path rootfs = fs::path(TEMPER_BINARY_DIR) / "stig-rootfs";
  SshTestRoot out;
  out.base = (rootfs / "root").string();
  std::error_code ec;
  if (!fs::is_directory(out.base, ec)) {
    return Status::FailedPrecondition(
        out.base + " is missing: build the shared root first (temper_stig_tests \"[.rootfs_build]\")");
  }
  const fs::path dir = SshTestRootDir();
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  out.layer = (dir / "layer").string();
  out.client_key = (dir / "keys/id_ed25519").string();
  out.wrong_key = (dir / "keys/wrong_ed25519").string();

  int lock = ::open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return Status::FromErrno(errno, "opening " + (dir / "lock").string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "locking " + (dir / "lock").string());
  }
  const std::string key = fmt::format("recipe {}; root {}", kRecipe, ReadAll((rootfs / "stamp.json").string()));
  if (ReadAll((dir / "stamp").string()) == key && fs::is_directory(out.layer, ec) && fs::exists(out.client_key, ec)) {
    return out;
  }

  log.Info("building the SSH test layer in {} (apt in a chroot, about half a minute)", out.layer);
  for (const char* d : {"layer", "layer.tmp", "work", "merged", "keys"}) fs::remove_all(dir / d, ec);
  for (const char* d : {"layer.tmp", "work", "merged", "keys"}) {
    fs::create_directories(dir / d, ec);
    if (ec) return Status::IOError(fmt::format("creating {}: {}", (dir / d).string(), ec.message()));
  }
  TEMPER_RETURN_IF_ERROR(Keygen(out.client_key));
  TEMPER_RETURN_IF_ERROR(Keygen(out.wrong_key));
  temper::ProcessSpec spec;
  spec.argv = {"/usr/bin/unshare",
               "-m",
               "--propagation",
               "private",
               "/bin/sh",
               "-c",
               kBuildScript,
               "build-ssh-layer",
               out.base,
               (dir / "layer.tmp").string(),
               (dir / "work").string(),
               (dir / "merged").string(),
               (dir / "keys").string()};
  spec.timeout = std::chrono::minutes(15);
  spec.max_output_bytes = 4 << 20;
  TEMPER_ASSIGN_OR_RETURN(temper::ProcessResult r, temper::RunProcess(spec));
  if (!r.Succeeded()) {
    std::string tail = r.out + r.err;
    if (tail.size() > 3000) tail = tail.substr(tail.size() - 3000);
    return Status::Unavailable(fmt::format("building the SSH test layer failed ({}): {}", r.Describe(), tail));
  }
  fs::rename(dir / "layer.tmp", out.layer, ec);
  if (ec) return Status::IOError("moving the SSH test layer into place: " + ec.message());
  fs::remove_all(dir / "work", ec);
  std::ofstream(dir / "stamp") << key;
  log.Info("built the SSH test layer in {:.0f} s", r.seconds);
  return out;
}

}  // namespace temper::testing
