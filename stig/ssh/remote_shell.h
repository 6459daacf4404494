// RemoteShell: runs programs as root on another machine, and moves files over the same channel.
//
// The undo journal, the remote OpenSCAP run and the SSH target only need "run this argv as root
// there, with these bytes on its stdin, and give me its exit status, stdout and stderr"; the
// transport (ssh_connection.h) is behind this seam. Files travel as plain bytes on stdin/stdout of
// `cat`-like commands (no base64), bounded in size on both sides.
// Thread safety: implementations are single-owner, like Target.
#pragma once

#include <sys/types.h>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "platform/process.h"
#include "platform/sandbox.h"
#include "stig/shell_quote.h"  // ShellQuote: the commands sent to a host quote their words

namespace temper::stig {

class RemoteShell {
 public:
  virtual ~RemoteShell() = default;

  // The host as messages name it (user@host:port).
  virtual const std::string& host_name() const = 0;

  // Runs `argv` (argv[0] found in the host's standard PATH) as root on the host with `stdin_data`
  // on its stdin. `limits` bound it on the host too: its time (timed_out is set), its address
  // space (0: unlimited) and the output kept. A program that fails is a ProcessResult, not an
  // error; errors are transport failures (see SshConnection for their codes).
  virtual Result<ProcessResult> Exec(const std::vector<std::string>& argv, std::string_view stdin_data,
                                     const SandboxLimits& limits) = 0;
};

// Reads at most `max_bytes` of the regular file `path` on the host (symlinks followed).
// Errors: NotFound when missing, InvalidArgument when not a regular file, OutOfRange when larger
// than `max_bytes` (also when it grows past it while read), Internal when the read fails, and the
// shell's transport errors.
Result<std::string> RemoteReadFile(RemoteShell& shell, const std::string& path, std::size_t max_bytes);

// Each of `paths` (absolute) as the host resolves it: every symlink followed and "."/".." removed,
// with parts that do not exist yet kept as written (`realpath -m`, or `readlink -m` where realpath
// lacks -m), in the same order. At most kMaxResolvedPaths per call. Errors: InvalidArgument for a
// relative path, one holding a newline or NUL, or too many paths; FailedPrecondition when the host
// has neither program; Internal when the answer does not match; the shell's transport errors.
constexpr std::size_t kMaxResolvedPaths = 512;
Result<std::vector<std::string>> RemoteResolvePaths(RemoteShell& shell, const std::vector<std::string>& paths);

// Creates or replaces `path` on the host with `content`, owned by root:root with `mode`. The bytes
// go to a temporary file beside it, which is checked for the full length and renamed over `path`,
// so a connection lost mid-transfer never leaves a cut file. A symlink is replaced at its target.
// Errors: InvalidArgument for a relative path or a directory, NotFound when the parent directory is
// missing, OutOfRange above kMaxRemoteWriteBytes, Internal when the host refuses the write, and the
// shell's transport errors.
constexpr std::size_t kMaxRemoteWriteBytes = std::size_t{256} << 20;
Status RemoteWriteFile(RemoteShell& shell, const std::string& path, std::string_view content, mode_t mode);

}  // namespace temper::stig
