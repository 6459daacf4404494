#include "stig/scap/eval_sandbox.h"

#include <filesystem>

namespace temper::stig {

namespace fs = std::filesystem;

std::vector<std::string> EvalSandboxArgv(const EvalSandboxPaths& paths,
                                         const std::vector<std::pair<std::string, std::string>>& env,
                                         const std::vector<std::string>& helper_args) {
  std::vector<std::string> argv = {
      "/usr/bin/bwrap",
      "--unshare-net",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-cgroup-try",
      "--hostname",
      "temper-eval",
      "--die-with-parent",
      "--new-session",
      "--clearenv",
      "--cap-drop",
      "ALL",
      "--cap-add",
      "CAP_SYS_CHROOT",
      "--cap-add",
      "CAP_DAC_OVERRIDE",
      "--cap-add",
      "CAP_DAC_READ_SEARCH",
      "--ro-bind",
      "/usr",
      "/usr",
  };
  // Merged-/usr systems (Debian 12) have /lib, /bin, ... as symlinks into /usr; others have
  // directories. Reproduce whichever the host has, so the dynamic loader finds its paths.
  for (const char* p : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    fs::file_status st = fs::symlink_status(p, ec);
    if (ec) continue;
    if (fs::is_symlink(st)) {
      fs::path to = fs::read_symlink(p, ec);
      if (!ec) argv.insert(argv.end(), {"--symlink", to.string(), p});
    } else if (fs::is_directory(st)) {
      argv.insert(argv.end(), {"--ro-bind", p, p});
    }
  }
  // libopenscap writes its temporary files (the OVAL results an ARF export embeds) under /tmp.
  argv.insert(argv.end(),
              {"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--dev", "/dev", "--tmpfs", "/tmp"});
  if (!paths.target.empty()) argv.insert(argv.end(), {"--bind", paths.target, paths.target});
  for (const std::string& p : paths.writable) argv.insert(argv.end(), {"--bind", p, p});
  for (const std::string& p : paths.read_only) argv.insert(argv.end(), {"--ro-bind", p, p});
  argv.insert(argv.end(), {"--ro-bind", paths.helper, paths.helper});
  for (const auto& [name, value] : env) argv.insert(argv.end(), {"--setenv", name, value});
  argv.insert(argv.end(), {"--chdir", "/", paths.helper});
  argv.insert(argv.end(), helper_args.begin(), helper_args.end());
  return argv;
}

}  // namespace temper::stig
