// Execution paths: files whose content becomes commands later, run by something other than the
// command that writes them — cron and anacron, systemd units and generators, login shells
// (/etc/profile, profile.d, bashrc files), rc.local and init scripts, PAM (pam_exec), udev rules
// (RUN+=, PROGRAM), sudoers (mailerpath), modprobe (install/remove), sysctl (core_pattern and the
// kernel's helper programs), apt and dpkg hooks, logrotate scripts, and the system's program
// directories. A write there is not data: the command policy judges it as the commands the file
// will run (CommandsInFile), so that writing `* * * * * root reboot` into /etc/cron.d is refused like
// running `reboot`.
//
// Configuration that only selects behaviour (sshd_config, system.conf, logind.conf, login.defs,
// audit rules) is data here: its effects are judged by the evaluator and the health checks, and
// SCAP Security Guide's own fixes write it with computed text.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

enum class FileKind {
  kData,           // not an execution path
  kShellScript,    // the whole file runs as a shell script (profile.d, bashrc, rc.local)
  kProgram,        // the file is run as a program (PATH directories, cron.daily, generators)
  kCronTable,      // /etc/crontab, /etc/cron.d: schedule, user, command
  kUserCronTable,  // /var/spool/cron/crontabs: schedule, command
  kAnacrontab,     // period, delay, job id, command
  kSystemdUnit,    // Exec*= lines, and dependencies or actions that switch the system's state
  kPam,            // pam_exec.so's command, and modules loaded from outside the system's libraries
  kUdevRules,      // RUN, PROGRAM and IMPORT{program}
  kSudoers,        // mailerpath, secure_path and includes
  kModprobe,       // install and remove commands
  kSysctl,         // core_pattern pipes and the kernel's helper programs
  kAptConf,        // Pre-Invoke, Post-Invoke and Pre-Install-Pkgs hooks, Dir::Bin
  kDpkgConf,       // pre-invoke= and post-invoke=
  kLogrotate,      // prerotate/postrotate/firstaction/lastaction scripts
  kLdPreload,      // /etc/ld.so.preload: never written
};

struct ExecutionPath {
  FileKind kind = FileKind::kData;
  std::string_view what;  // e.g. "a cron table", for messages
};

// Directories whose programs a PATH may name without taking over the system's program names:
// /bin, /sbin, /usr/bin, /usr/sbin, /usr/local/bin, /usr/local/sbin, /snap/bin.
bool IsSystemProgramDirectory(std::string_view dir);

// Which kind of file `path` is. `path` must be absolute and normalized (no "..", "." or "//").
ExecutionPath ClassifyPath(std::string_view path);

// One command the file runs later.
struct LaterCommand {
  std::string command;  // a shell command line (a whole script for script files)
  std::string where;    // where it is in the file, e.g. "line 3 (ExecStart)"
};

// The commands a file of `kind` at `path` runs, read from `content`. Errors (each naming the line):
// PermissionDenied for a line whose directive itself takes the host down or hands it to a program
// the policy cannot judge (OnFailure=reboot.target, FailureAction=reboot, kernel.core_pattern=|…,
// a PAM module loaded from outside the system's library directories, Dir::Bin::dpkg, a program
// file that is not a shell script, ld.so.preload); InvalidArgument for a line that is not of the
// file's format (a cron schedule without a command, pam_exec.so without one).
Result<std::vector<LaterCommand>> CommandsInFile(FileKind kind, std::string_view path, std::string_view content);

}  // namespace temper
