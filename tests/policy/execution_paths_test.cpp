// Execution paths: which files run later, and the commands each kind of file runs.
#include "policy/execution_paths.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

std::vector<std::string> Commands(FileKind kind, std::string_view content) {
  auto r = CommandsInFile(kind, "/test/file", content);
  INFO(content);
  if (!r.ok()) FAIL(r.status().ToString());
  std::vector<std::string> out;
  for (const LaterCommand& c : *r) out.push_back(c.command);
  return out;
}

std::string Refusal(FileKind kind, std::string_view content) {
  auto r = CommandsInFile(kind, "/test/file", content);
  INFO(content);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kPermissionDenied);
  return r.status().message();
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("paths whose files run later, and paths that are data") {
  const std::pair<const char*, FileKind> cases[] = {
      {"/etc/crontab", FileKind::kCronTable},
      {"/etc/cron.d/x", FileKind::kCronTable},
      {"/var/spool/cron/crontabs/root", FileKind::kUserCronTable},
      {"/etc/cron.daily/x", FileKind::kProgram},
      {"/etc/anacrontab", FileKind::kAnacrontab},
      {"/etc/profile", FileKind::kShellScript},
      {"/etc/profile.d/tmout.sh", FileKind::kShellScript},
      {"/root/.bashrc", FileKind::kShellScript},
      {"/home/admin/.profile", FileKind::kShellScript},
      {"/etc/skel/.bashrc", FileKind::kShellScript},
      {"/etc/bash.bashrc", FileKind::kShellScript},
      {"/etc/rc.local", FileKind::kShellScript},
      {"/etc/systemd/system/x.service", FileKind::kSystemdUnit},
      {"/etc/systemd/system/ssh.service.d/override.conf", FileKind::kSystemdUnit},
      {"/usr/lib/systemd/system/x.timer", FileKind::kSystemdUnit},
      {"/lib/systemd/system/x.service", FileKind::kSystemdUnit},
      {"/root/.config/systemd/user/x.service", FileKind::kSystemdUnit},
      {"/usr/lib/systemd/system-generators/x", FileKind::kProgram},
      {"/lib/systemd/systemd-journald", FileKind::kProgram},
      {"/etc/pam.d/common-auth", FileKind::kPam},
      {"/usr/share/pam-configs/x", FileKind::kPam},
      {"/etc/udev/rules.d/99-x.rules", FileKind::kUdevRules},
      {"/etc/sudoers", FileKind::kSudoers},
      {"/etc/sudoers.d/x", FileKind::kSudoers},
      {"/etc/modprobe.d/x.conf", FileKind::kModprobe},
      {"/etc/sysctl.d/99-x.conf", FileKind::kSysctl},
      {"/etc/apt/apt.conf.d/50x", FileKind::kAptConf},
      {"/etc/dpkg/dpkg.cfg.d/x", FileKind::kDpkgConf},
      {"/etc/logrotate.d/x", FileKind::kLogrotate},
      {"/etc/ld.so.preload", FileKind::kLdPreload},
      {"/usr/local/bin/fix", FileKind::kProgram},
      {"/usr/sbin/sshd", FileKind::kProgram},
      {"/etc/init.d/x", FileKind::kProgram},
      {"/etc/update-motd.d/50-x", FileKind::kProgram},
      // Configuration that only selects behaviour is data.
      {"/etc/ssh/sshd_config", FileKind::kData},
      {"/etc/systemd/system.conf", FileKind::kData},
      {"/etc/login.defs", FileKind::kData},
      {"/etc/audit/rules.d/stig.rules", FileKind::kData},
      {"/etc/issue", FileKind::kData},
      {"/etc/cron.allow", FileKind::kData},
      {"/root/notes.txt", FileKind::kData},
      {"/tmp/fix.sh", FileKind::kData},
      {"/etc/crontab.bak/x", FileKind::kData}};
  for (const auto& [path, kind] : cases) {
    INFO(path);
    CHECK(ClassifyPath(path).kind == kind);
  }
}

TEST_CASE("cron tables, units, PAM, udev, sudoers and modprobe give the commands they run") {
  CHECK(Commands(FileKind::kCronTable,
                 "SHELL=/bin/sh\n# c\n17 * * * * root cd / && run-parts x\n@reboot root reboot now\n") ==
        Strings{"cd / && run-parts x", "reboot now"});
  CHECK(Commands(FileKind::kUserCronTable, "*/5 * * * * /usr/bin/date >> /tmp/d % input\n") ==
        Strings{"/usr/bin/date >> /tmp/d "});
  CHECK(Commands(FileKind::kAnacrontab, "1 5 cron.daily run-parts --report /etc/cron.daily\n") ==
        Strings{"run-parts --report /etc/cron.daily"});
  CHECK(Commands(FileKind::kSystemdUnit,
                 "[Service]\nExecStartPre=-/bin/true\nExecStart=@/usr/sbin/x x -d\n"
                 "ExecStop=\nExecReload=/bin/kill -HUP $MAINPID \\\n  --verbose\n") ==
        Strings{"/bin/true", "/usr/sbin/x x -d", "/bin/kill -HUP $MAINPID    --verbose"});
  CHECK(Commands(FileKind::kPam,
                 "auth required pam_unix.so\nsession optional pam_exec.so seteuid log=/tmp/l /usr/bin/x a\n") ==
        Strings{"/usr/bin/x a"});
  CHECK(Commands(FileKind::kUdevRules,
                 "ACTION==\"add\", RUN+=\"/bin/x %k\", PROGRAM==\"/bin/y\", RUN{builtin}+=\"kmod load\"\n") ==
        Strings{"/bin/x %k", "/bin/y"});
  CHECK(Commands(FileKind::kSudoers, "Defaults use_pty\nDefaults:root mailerpath=/usr/sbin/sendmail, !lecture\n") ==
        Strings{"/usr/sbin/sendmail"});
  CHECK(Commands(FileKind::kModprobe, "install usb-storage /bin/true\nblacklist x\nremove y /sbin/z \\\n --now\n") ==
        Strings{"/bin/true", "/sbin/z   --now"});
  CHECK(Commands(FileKind::kAptConf,
                 "DPkg::Post-Invoke {\"/usr/bin/a\"; \"/usr/bin/b\";};\nAPT::Update::Pre-Invoke \"c\";\n") ==
        Strings{"c", "/usr/bin/a", "/usr/bin/b"});
  CHECK(Commands(FileKind::kLogrotate, "/var/log/x {\n  postrotate\n    /usr/bin/killall -HUP x\n  endscript\n}\n") ==
        Strings{"    /usr/bin/killall -HUP x\n"});
  CHECK(Commands(FileKind::kSysctl, "kernel.sysrq = 0\nkernel.core_pattern=core\n").empty());
  CHECK(Commands(FileKind::kProgram, "#!/usr/bin/env bash\necho hi\n") == Strings{"#!/usr/bin/env bash\necho hi\n"});
}

TEST_CASE("lines that take the host down or hand it to unjudged code are refused, naming the line") {
  CHECK_THAT(Refusal(FileKind::kSystemdUnit, "[Unit]\nDescription=x\nOnFailure=reboot.target\n"),
             Catch::Contains("line 3") && Catch::Contains("OnFailure=reboot.target"));
  CHECK_THAT(Refusal(FileKind::kSystemdUnit, "[Service]\nFailureAction=poweroff-force\n"), Catch::Contains("line 2"));
  CHECK_THAT(Refusal(FileKind::kSystemdUnit, "[Unit]\nConflicts=ssh.service\n"), Catch::Contains("ssh.service"));
  CHECK_THAT(Refusal(FileKind::kSystemdUnit, "[Service]\nEnvironment=LD_PRELOAD=/tmp/x.so\n"), Catch::Contains("load"));
  CHECK_THAT(Refusal(FileKind::kPam, "auth optional /tmp/evil.so\n"), Catch::Contains("/tmp/evil.so"));
  CHECK_THAT(Refusal(FileKind::kSysctl, "# x\nkernel.core_pattern = |/tmp/x %p\n"), Catch::Contains("line 2"));
  CHECK_THAT(Refusal(FileKind::kSysctl, "kernel/modprobe=/tmp/m\n"), Catch::Contains("kernel.modprobe"));
  CHECK_THAT(Refusal(FileKind::kSysctl, "kernel.sysrq=1\n"), Catch::Contains("sysrq"));
  CHECK_THAT(Refusal(FileKind::kCronTable, "SHELL=/tmp/sh\n* * * * * root ls\n"), Catch::Contains("SHELL"));
  // A line that is not of the file's format is InvalidArgument, not a danger: the policy refuses a
  // whole file it cannot read, and judges a sed edit's fragment as the command it may complete.
  auto malformed = CommandsInFile(FileKind::kCronTable, "/etc/cron.d/x", "# c\n* * * * *\n");
  CHECK(malformed.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(malformed.status().message(), Catch::Contains("/etc/cron.d/x line 2: a schedule line without a command"));
  CHECK_THAT(Refusal(FileKind::kSudoers, "#includedir /tmp/sudo\n"), Catch::Contains("/tmp/sudo"));
  CHECK_THAT(Refusal(FileKind::kSudoers, "Defaults secure_path=/tmp:/usr/bin\n"), Catch::Contains("/tmp"));
  CHECK_THAT(Refusal(FileKind::kAptConf, "Dir::Bin::dpkg \"/tmp/dpkg\";\n"), Catch::Contains("Dir::Bin"));
  CHECK_THAT(Refusal(FileKind::kProgram, "#!/usr/bin/python3\nimport os\n"), Catch::Contains("python3"));
  CHECK_THAT(Refusal(FileKind::kProgram, std::string("\x7f"
                                                     "ELF\x02\x01",
                                                     6)),
             Catch::Contains("binary"));
  CHECK_THAT(Refusal(FileKind::kLdPreload, "/tmp/x.so\n"), Catch::Contains("every program"));
}
