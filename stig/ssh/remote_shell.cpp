#include "stig/ssh/remote_shell.h"

#include <fmt/format.h>

namespace temper::stig {
namespace {

// Exit codes of the file scripts below (6: any other failure); 1 and 2 stay free for the shell's
// own failures, 255 for ssh.
constexpr int kMissing = 3;
constexpr int kNotRegular = 4;
constexpr int kTooLarge = 5;
constexpr int kShort = 7;

// $1 path, $2 limit. The size is printed to stderr when over the limit.
constexpr const char* kReadScript = R"SH(f=$1
[ -e "$f" ] || exit 3
[ -f "$f" ] || exit 4
s=$(stat -L -c %s -- "$f") || exit 6
if [ "$s" -gt "$2" ]; then echo "$s" >&2; exit 5; fi
exec cat -- "$f"
)SH";

// $1 path, $2 octal mode, $3 byte count; the content on stdin.
constexpr const char* kWriteScript = R"SH(f=$1
case $f in /*) ;; *) exit 4 ;; esac
if [ -L "$f" ]; then f=$(readlink -f -- "$f") || exit 6; fi
[ -d "$f" ] && exit 4
d=$(dirname -- "$f")
[ -d "$d" ] || exit 3
t=$(mktemp -- "$d/.temper-write.XXXXXX") || exit 6
trap 'rm -f -- "$t"' EXIT
trap 'rm -f -- "$t"; exit 6' HUP INT TERM PIPE
cat > "$t" || exit 6
n=$(wc -c < "$t")
[ "$n" -eq "$3" ] || exit 7
chown 0:0 -- "$t" && chmod "$2" -- "$t" && mv -f -- "$t" "$f" || exit 6
trap - EXIT
)SH";

// $@ paths; each resolved path followed by a NUL. Exit 9: neither realpath -m nor readlink -m.
constexpr const char* kResolveScript = R"SH(for p; do
r=$(realpath -m -- "$p" 2>/dev/null || readlink -m -- "$p" 2>/dev/null) || exit 9
printf '%s\0' "$r"
done
)SH";
constexpr int kNoResolver = 9;

std::string Tail(const std::string& s) { return s.size() > 600 ? "…" + s.substr(s.size() - 600) : s; }

}  // namespace

Result<std::string> RemoteReadFile(RemoteShell& shell, const std::string& path, std::size_t max_bytes) {
  SandboxLimits limits;
  limits.timeout = std::chrono::minutes(5);
  limits.memory_limit_bytes = 0;
  // One byte more than allowed shows a file that grew past the limit after stat.
  limits.max_output_bytes = max_bytes + 1;
  TEMPER_ASSIGN_OR_RETURN(
      ProcessResult r,
      shell.Exec({"/bin/sh", "-c", kReadScript, "temper-read", path, std::to_string(max_bytes)}, {}, limits));
  const std::string where = fmt::format("{} on {}", path, shell.host_name());
  if (r.timed_out) return Status::DeadlineExceeded(fmt::format("reading {} {}", where, r.Describe()));
  if (r.term_signal == 0 && r.exit_code == kMissing) return Status::NotFound(where + " does not exist");
  if (r.term_signal == 0 && r.exit_code == kNotRegular)
    return Status::InvalidArgument(where + " is not a regular file");
  if (r.term_signal == 0 && r.exit_code == kTooLarge) {
    std::string size = r.err;
    while (!size.empty() && (size.back() == '\n' || size.back() == '\r')) size.pop_back();
    return Status::OutOfRange(fmt::format("{} is {} bytes, more than the {} allowed", where, size, max_bytes));
  }
  if (!r.Succeeded())
    return Status::Internal(fmt::format("reading {} failed ({}): {}", where, r.Describe(), Tail(r.err)));
  if (r.out_truncated || r.out.size() > max_bytes) {
    return Status::OutOfRange(fmt::format("{} grew past the {} bytes allowed while it was read", where, max_bytes));
  }
  return std::move(r.out);
}

Result<std::vector<std::string>> RemoteResolvePaths(RemoteShell& shell, const std::vector<std::string>& paths) {
  if (paths.empty()) return std::vector<std::string>{};
  if (paths.size() > kMaxResolvedPaths) {
    return Status::InvalidArgument(fmt::format("{} paths to resolve on {}, more than the {} allowed", paths.size(),
                                               shell.host_name(), kMaxResolvedPaths));
  }
  std::vector<std::string> argv = {"/bin/sh", "-c", kResolveScript, "temper-resolve"};
  for (const std::string& p : paths) {
    if (p.empty() || p[0] != '/' || p.find('\n') != std::string::npos || p.find('\0') != std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("cannot resolve \"{}\" on {}: not an absolute path on one line", p, shell.host_name()));
    }
    argv.push_back(p);
  }
  SandboxLimits limits;
  limits.timeout = std::chrono::minutes(1);
  limits.memory_limit_bytes = 0;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell.Exec(argv, {}, limits));
  if (r.term_signal == 0 && r.exit_code == kNoResolver) {
    return Status::FailedPrecondition(
        fmt::format("{} has neither `realpath -m` nor `readlink -m` to resolve paths with", shell.host_name()));
  }
  if (!r.Succeeded())
    return Status::Internal(
        fmt::format("resolving paths on {} failed ({}): {}", shell.host_name(), r.Describe(), Tail(r.err)));
  std::vector<std::string> out;
  size_t i = 0;
  while (i < r.out.size()) {
    size_t nul = r.out.find('\0', i);
    if (nul == std::string::npos) break;
    out.push_back(r.out.substr(i, nul - i));
    i = nul + 1;
  }
  if (out.size() != paths.size()) {
    return Status::Internal(
        fmt::format("resolving {} paths on {} gave {} answers", paths.size(), shell.host_name(), out.size()));
  }
  return out;
}

Status RemoteWriteFile(RemoteShell& shell, const std::string& path, std::string_view content, mode_t mode) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("target path must be absolute: \"" + path + "\"");
  if (content.size() > kMaxRemoteWriteBytes) {
    return Status::OutOfRange(fmt::format("writing {} on {}: {} bytes, more than the {} allowed", path,
                                          shell.host_name(), content.size(), kMaxRemoteWriteBytes));
  }
  SandboxLimits limits;
  limits.timeout = std::chrono::minutes(5);
  limits.memory_limit_bytes = 0;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r,
                          shell.Exec({"/bin/sh", "-c", kWriteScript, "temper-write", path,
                                      fmt::format("{:o}", mode & 07777), std::to_string(content.size())},
                                     content, limits));
  const std::string where = fmt::format("{} on {}", path, shell.host_name());
  if (r.timed_out) return Status::DeadlineExceeded(fmt::format("writing {} {}", where, r.Describe()));
  if (r.term_signal == 0 && r.exit_code == kMissing)
    return Status::NotFound("the directory of " + where + " does not exist");
  if (r.term_signal == 0 && r.exit_code == kNotRegular) return Status::InvalidArgument(where + " is a directory");
  if (r.term_signal == 0 && r.exit_code == kShort) {
    return Status::Aborted(
        fmt::format("writing {}: the host received fewer than the {} bytes sent; the file was left as it was", where,
                    content.size()));
  }
  if (!r.Succeeded())
    return Status::Internal(fmt::format("writing {} failed ({}): {}", where, r.Describe(), Tail(r.err)));
  return Status::OK();
}

}  // namespace temper::stig
