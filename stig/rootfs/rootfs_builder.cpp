#include "stig/rootfs/rootfs_builder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/fnv1a.h"
#include "platform/process.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// Bump when the recipe below changes in a way the spec does not show.
constexpr int kRecipeVersion = 2;

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

// Runs on the finished root, given as $1.
std::string CustomizeScript() {
  return R"SH(set -e
root="$1"
# SSG's ubuntu2004 platform check reads /etc/lsb-release.
cat > "$root/etc/lsb-release" <<'EOF'
DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=20.04
DISTRIB_CODENAME=focal
DISTRIB_DESCRIPTION="Ubuntu 20.04.6 LTS"
EOF
# sshd -t needs its privilege separation directory, which systemd-tmpfiles makes at boot.
# (This runs after mmdebstrap, which keeps /run a tmpfs during its hooks.)
mkdir -p "$root/run/sshd"
# Home directories of system users that a booted system would have, so `pwck -r` starts clean.
awk -F: '$6 != "/nonexistent" && $6 != "" {print $6}' "$root/etc/passwd" | while read -r home; do
  mkdir -p "$root$home"
done
)SH";
}

Status WriteStamp(const fs::path& path, const RootfsSpec& spec) {
  nlohmann::json j = {{"key", spec.Key()},
                      {"suite", spec.suite},
                      {"mirror", spec.mirror},
                      {"packages", spec.packages},
                      {"cached_packages", spec.cached_packages},
                      {"recipe", kRecipeVersion}};
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return Status::IOError("writing " + path.string());
  return Status::OK();
}

std::string ReadStampKey(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("key") || !j["key"].is_string()) return "";
  return j["key"].get<std::string>();
}

std::string Tail(const std::string& s, std::size_t n) { return s.size() > n ? s.substr(s.size() - n) : s; }

}  // namespace

std::vector<std::string> RootfsSpec::DefaultPackages() {
  return {"openssh-server", "sudo",   "auditd", "libpam-pwquality", "systemd",  "rsyslog", "procps",
          "cron",           "passwd", "login",  "libpam-runtime",   "apt-utils"};
}

std::vector<std::string> RootfsSpec::DefaultCachedPackages() {
  // The packages SSG 0.1.65's Ubuntu 20.04 STIG fixes `apt-get install` and Debian 12 has.
  return {"aide", "apparmor", "audispd-plugins", "chrony", "libpam-pkcs11", "opensc-pkcs11", "ufw", "vlock"};
}

std::string RootfsSpec::Key() const {
  return Fnv1aHex(fmt::format("{}|{}|{}|{}|{}|{}", kRecipeVersion, suite, mirror, Join(packages, ","),
                              Join(cached_packages, ","), CustomizeScript()));
}

Result<RootfsBuild> EnsureRootfs(const std::string& dir, const RootfsSpec& spec, const Logger& log) {
  if (::geteuid() != 0) return Status::FailedPrecondition("building a rootfs needs root (mmdebstrap --mode=root)");
  if (::access("/usr/bin/mmdebstrap", X_OK) != 0) {
    return Status::FailedPrecondition("/usr/bin/mmdebstrap is missing (apt-get install mmdebstrap)");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
  fs::path d = fs::absolute(dir);
  // A rootfs holds setuid programs owned by root; keep host users out of it.
  fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace, ec);

  int lock = ::open((d / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return Status::FromErrno(errno, "opening " + (d / "lock").string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "locking " + (d / "lock").string());
  }

  RootfsBuild out;
  out.root = (d / "root").string();
  const std::string key = spec.Key();
  if (ReadStampKey(d / "stamp.json") == key && fs::is_directory(d / "root", ec)) return out;

  log.Info("building the {} rootfs in {} (mmdebstrap, about a minute)", spec.suite, out.root);
  fs::path tmp = d / "root.tmp";
  fs::remove_all(tmp, ec);
  fs::remove(d / "stamp.json", ec);
  ProcessSpec p;
  p.argv = {"/usr/bin/mmdebstrap", "--mode=root", "--variant=minbase", "--include=" + Join(spec.packages, ","),
            // Keep apt's lists and cache so that fixes can install the cached packages offline.
            "--skip=cleanup/apt/lists,cleanup/apt/cache", "--customize-hook=chroot \"$1\" apt-get clean",
            // With Recommends: the root's apt installs them (mmdebstrap's own apt does not), so a
            // fix's `apt-get install aide` needs aide-common and the rest in the cache too.
            "--customize-hook=chroot \"$1\" apt-get install --download-only -y -q -o APT::Install-Recommends=true " +
                Join(spec.cached_packages, " "),
            spec.suite, tmp.string(), spec.mirror};
  p.timeout = std::chrono::minutes(20);
  p.max_output_bytes = 4 << 20;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(p));
  if (!r.Succeeded()) {
    fs::remove_all(tmp, ec);
    return Status::Unavailable(fmt::format("mmdebstrap {} into {} failed ({}): {}", spec.suite, tmp.string(),
                                           r.Describe(), Tail(r.err + r.out, 2000)));
  }
  ProcessSpec c;
  c.argv = {"/bin/sh", "-c", CustomizeScript(), "customize", tmp.string()};
  c.timeout = std::chrono::minutes(1);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult cr, RunProcess(c));
  if (!cr.Succeeded()) {
    fs::remove_all(tmp, ec);
    return Status::Internal(fmt::format("customising {} failed ({}): {}", tmp.string(), cr.Describe(), cr.err));
  }
  fs::remove_all(d / "root", ec);
  fs::rename(tmp, d / "root", ec);
  if (ec) return Status::IOError("moving " + tmp.string() + " into place: " + ec.message());
  TEMPER_RETURN_IF_ERROR(WriteStamp(d / "stamp.json", spec));
  out.built = true;
  out.seconds = r.seconds;
  log.Info("built {} in {:.0f} s", out.root, r.seconds);
  return out;
}

}  // namespace temper::stig
