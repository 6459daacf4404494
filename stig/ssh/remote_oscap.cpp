#include "stig/ssh/remote_oscap.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "platform/process.h"
#include "platform/sandbox_caps.h"
#include "platform/scratch_dir.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

constexpr int kNoOscap = 40;

// $1 temper dir, $2 datastream, $3 profile, $4 "1" for ARF, $5 "1" for fix.sh, then --rule pairs.
// Prints the private directory holding the results; oscap's exit 2 (some rule failed) is success.
constexpr const char* kEvalScript = R"SH(umask 077
base=$1/eval; ds=$2; profile=$3; arf=$4; fix=$5; shift 5
command -v oscap >/dev/null 2>&1 || exit 40
mkdir -p -- "$base" || exit 41
out=$(mktemp -d -- "$base/run.XXXXXX") || exit 41
echo "$out"
if [ "$arf" = 1 ]; then set -- --results-arf "$out/arf.xml" "$@"; fi
oscap xccdf eval --skip-valid --profile "$profile" --results "$out/results.xml" "$@" "$ds" > "$out/stdout" 2> "$out/stderr"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then
  echo "oscap xccdf eval exited $rc:" >&2; tail -c 4000 -- "$out/stderr" >&2; rm -rf -- "$out"; exit 42
fi
if [ "$fix" = 1 ]; then
  oscap xccdf generate fix --fix-type bash --output "$out/fix.sh" \
    --result-id "xccdf_org.open-scap_testresult_$profile" "$out/results.xml" 2> "$out/fix.err" ||
    { cat -- "$out/fix.err" >&2; rm -rf -- "$out"; exit 43; }
fi
)SH";

// $1 path, $2 sha256: exit 0 when the file is there with that digest.
constexpr const char* kHaveScript = R"SH([ -f "$1" ] || exit 1
set -- $(sha256sum -- "$1") "$2"
[ "$1" = "$3" ]
)SH";

Result<std::string> LocalSha256(const std::string& path) {
  ProcessSpec spec;
  spec.argv = {"sha256sum", "--", path};
  spec.timeout = std::chrono::minutes(2);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  if (!r.Succeeded() || r.out.size() < 64) {
    return Status::IOError(fmt::format("sha256sum {} failed ({}): {}", path, r.Describe(), r.err));
  }
  return r.out.substr(0, 64);
}

Result<std::string> ReadLocal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteLocal(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) return Status::IOError("writing " + path);
  return Status::OK();
}

SandboxLimits Quick() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(2);
  l.memory_limit_bytes = 0;
  return l;
}

}  // namespace

Result<std::string> RemoteOscap::EnsureDatastream(const std::string& local_path) {
  std::error_code ec;
  auto size = fs::file_size(local_path, ec);
  if (ec) return Status::NotFound(fmt::format("datastream {}: {}", local_path, ec.message()));
  auto mtime = fs::last_write_time(local_path, ec).time_since_epoch().count();
  const std::string key = fmt::format("{}|{}|{}", local_path, size, mtime);
  auto it = uploaded_.find(key);
  if (it != uploaded_.end()) return it->second;

  TEMPER_ASSIGN_OR_RETURN(std::string sha, LocalSha256(local_path));
  const std::string remote = fmt::format("{}/content/{}.xml", host_dir_, sha);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult have,
                          shell_->Exec({"/bin/sh", "-c", kHaveScript, "have", remote, sha}, {}, Quick()));
  if (!have.Succeeded()) {
    log_->Info("{}: copying {} ({} bytes) to {}", shell_->host_name(), local_path, size, remote);
    TEMPER_ASSIGN_OR_RETURN(
        ProcessResult made,
        shell_->Exec({"/bin/sh", "-c", "umask 077; mkdir -p -- \"$1\"", "mkdir", host_dir_ + "/content"}, {}, Quick()));
    if (!made.Succeeded()) {
      return Status::Internal(
          fmt::format("{}: creating {}/content failed: {}", shell_->host_name(), host_dir_, made.err));
    }
    TEMPER_ASSIGN_OR_RETURN(std::string bytes, ReadLocal(local_path));
    TEMPER_RETURN_IF_ERROR(RemoteWriteFile(*shell_, remote, bytes, 0600));
    TEMPER_ASSIGN_OR_RETURN(ProcessResult again,
                            shell_->Exec({"/bin/sh", "-c", kHaveScript, "have", remote, sha}, {}, Quick()));
    if (!again.Succeeded()) {
      return Status::DataLoss(fmt::format("{}: the copy of {} at {} does not have its SHA-256 {}", shell_->host_name(),
                                          local_path, remote, sha));
    }
  }
  uploaded_[key] = remote;
  return remote;
}

Result<Evaluation> RemoteOscap::Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) {
  if (request.write_fix_script && request.output_dir.empty()) {
    return Status::InvalidArgument("evaluation: write_fix_script needs an output_dir");
  }
  auto start = std::chrono::steady_clock::now();
  const Content& content = evaluator.content();
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> rules, evaluator.ResolveRules(request.rule_ids));
  TEMPER_ASSIGN_OR_RETURN(std::string datastream, EnsureDatastream(content.datastream_path()));

  const bool want_files = !request.output_dir.empty();
  std::vector<std::string> argv = {"/bin/sh",
                                   "-c",
                                   kEvalScript,
                                   "temper-eval",
                                   host_dir_,
                                   datastream,
                                   content.profile().id,
                                   want_files ? "1" : "0",
                                   request.write_fix_script ? "1" : "0"};
  for (const std::string& r : rules) argv.insert(argv.end(), {"--rule", r});
  SandboxLimits limits;
  limits.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(evaluator.options().timeout);
  limits.memory_limit_bytes = evaluator.options().memory_limit_bytes;
  log_->Debug("{}: evaluating {} rule(s) of {} with oscap on the host", shell_->host_name(),
              rules.empty() ? content.profile_rule_ids().size() : rules.size(), content.profile().id);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell_->Exec(argv, {}, limits));
  if (r.term_signal == 0 && r.exit_code == kNoOscap) {
    return Status::FailedPrecondition(fmt::format(
        "{} has no oscap: install OpenSCAP's scanner on it (Debian/Ubuntu: apt-get install openscap-scanner; "
        "RHEL/Fedora: dnf install openscap-scanner)",
        shell_->host_name()));
  }
  if (r.timed_out) return Status::DeadlineExceeded(fmt::format("oscap on {} {}", shell_->host_name(), r.Describe()));
  std::string remote_dir = r.out.substr(0, r.out.find('\n'));
  if (!r.Succeeded()) {
    return Status::Internal(
        fmt::format("OpenSCAP evaluation on {} failed ({}): {}", shell_->host_name(), r.Describe(), r.err));
  }
  if (!remote_dir.starts_with(host_dir_ + "/eval/run.")) {
    return Status::Internal(fmt::format("oscap on {}: unexpected answer instead of its results directory: {}",
                                        shell_->host_name(), r.out.substr(0, 200)));
  }
  // The host keeps nothing of the run once the files are here.
  struct RemoveRemote {
    RemoteShell* shell;
    std::string dir;
    ~RemoveRemote() { (void)shell->Exec({"rm", "-rf", "--", dir}, {}, Quick()); }
  } remove_remote{shell_, remote_dir};

  Evaluation out;
  std::optional<ScratchDir> scratch;
  std::string local_dir = request.output_dir;
  std::error_code ec;
  if (want_files) {
    fs::create_directories(local_dir, ec);
    if (ec) return Status::IOError("creating " + local_dir + ": " + ec.message());
  } else {
    TEMPER_ASSIGN_OR_RETURN(ScratchDir made, ScratchDir::Create(evaluator.options().scratch_dir, "remote-eval"));
    scratch.emplace(std::move(made));
    local_dir = scratch->path();
  }
  std::vector<std::pair<std::string, std::string*>> files = {{"results.xml", &out.results_path}};
  if (want_files) files.push_back({"arf.xml", &out.arf_path});
  if (request.write_fix_script) files.push_back({"fix.sh", &out.fix_script_path});
  std::string results_local;
  for (auto& [name, field] : files) {
    Result<std::string> bytes = RemoteReadFile(*shell_, remote_dir + "/" + name, kMaxResultsFileBytes);
    if (!bytes.ok()) {
      return bytes.status().WithContext(
          fmt::format("OpenSCAP's {} from {} (temper takes at most {} of each results file)", name, shell_->host_name(),
                      FormatBytes(kMaxResultsFileBytes)));
    }
    const std::string local = (fs::path(local_dir) / name).string();
    TEMPER_RETURN_IF_ERROR(WriteLocal(local, *bytes));
    if (want_files) *field = local;
    if (name == "results.xml") results_local = local;
  }
  Result<std::vector<RuleVerdict>> verdicts = evaluator.ReadResults(results_local, rules);
  if (!verdicts.ok()) return verdicts.status().WithContext(fmt::format("evaluation on {}", shell_->host_name()));
  out.verdicts = std::move(*verdicts);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace temper::stig
