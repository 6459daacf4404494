// libFuzzer target: the command policy's readers of untrusted text — the shell parser
// (policy/shell_split, with the command runners and variables), the policy's judgement of a
// command line and of a file written where it runs later (policy/command_policy, its rules, sed
// scripts and execution paths), and the SSH guards' readings of the same line.
//
// The input is a command line, optionally followed by a NUL and the content of every file the
// policy reads from the "target" (so that scripts run by the command are judged, recursively, from
// fuzzed text too). Every input must give a value or an error Status of the documented kind: no
// crash, hang, leak or out-of-bounds read (ASan/UBSan watch). Seeds: tests/fuzz/corpus/command_policy.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/command_policy.h"
#include "policy/execution_paths.h"
#include "policy/sed_script.h"
#include "policy/shell_split.h"
#include "stig/ssh/host_paths.h"
#include "stig/ssh/login_guard.h"

namespace {

void Expect(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace temper;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view line = input.substr(0, nul);
  const std::string file = nul == std::string_view::npos ? std::string("reboot\n") : std::string(input.substr(nul + 1));
  const TargetFileReader read = [&](const std::string& path, size_t max_bytes) -> Result<std::string> {
    if (path.find("missing") != std::string::npos) return Status::NotFound(path + " does not exist");
    return file.substr(0, max_bytes);
  };

  Result<ParsedShell> parsed = SplitShellCommand(line);
  Expect(parsed.ok() || parsed.status().code() == StatusCode::kInvalidArgument);
  if (parsed.ok()) {
    for (const SimpleCommand& c : parsed->commands) Expect(c.args.size() == c.args_expanded.size());
  }

  for (const PolicyContext& context :
       {PolicyContext{}, PolicyContext{.bootloader_rule = true, .allow_package_removal = true}}) {
    Status s = CheckCommand(line, context, read);
    Expect(s.ok() || s.code() == StatusCode::kPermissionDenied);
    Status w = CheckWrite("/etc/cron.d/fuzz", line, context, read);
    Expect(w.ok() || w.code() == StatusCode::kPermissionDenied);
  }
  for (FileKind kind :
       {FileKind::kProgram, FileKind::kCronTable, FileKind::kSystemdUnit, FileKind::kPam, FileKind::kUdevRules,
        FileKind::kSudoers, FileKind::kModprobe, FileKind::kSysctl, FileKind::kAptConf, FileKind::kLogrotate}) {
    auto commands = CommandsInFile(kind, "/fuzz", line);
    Expect(commands.ok() || commands.status().code() == StatusCode::kPermissionDenied ||
           commands.status().code() == StatusCode::kInvalidArgument);
  }
  auto sed = ReadSedScript(line);
  Expect(sed.ok() || sed.status().code() == StatusCode::kInvalidArgument);

  const stig::LoginIdentity login{"admin", "/home/admin", 22};
  (void)stig::LockoutRisk(line, login);
  auto named = stig::PathsNamedBy(line);
  Expect(named.ok() || named.status().code() == StatusCode::kInvalidArgument);
  if (named.ok()) {
    for (const stig::NamedPath& n : *named) {
      Expect(!n.path.empty() && n.path[0] == '/');
      (void)stig::HostDirRisk(n, "/var/lib/temper");
    }
  }
  return 0;
}
