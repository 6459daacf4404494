// Evaluator: OpenSCAP's verdicts for a set of rules on a directory tree, from a child process.
//
// libopenscap's probe root and chroot-mode probes are process-wide, so each evaluation runs in a
// process of its own (see eval_main.cpp). Loading the datastream costs about 0.45 s, evaluating a
// rule a few ms, so the Evaluator keeps evaluation servers (eval_server.h) that have loaded the
// content once and fork a child per evaluation: at most one per concurrent caller, started on
// first use, kept while they answer, killed and replaced after a timeout or a broken answer, and
// ended with the Evaluator. Where a server cannot start, evaluations fall back to a fresh helper
// process each (the one-shot mode, also used for ReadResults), and the Evaluator logs why once.
// Both modes run the same evaluation code and their verdicts are checked by the same code here.
// Verdicts are libopenscap's own result tokens; the same tree always gets the same verdicts.
//
// Every run of the helper, evaluating a tree or reading results copied from an SSH host, goes
// through its own sandbox (eval_sandbox.h): no network, the host's file system read-only and only
// what the helper needs, and the tree as the helper's root directory, so the tree's symlinks
// resolve inside it and never reach a host file (eval_confinement.h).
//
// Thread safety: Evaluate is const and may run concurrently from several threads (each call has
// its own server or child process, and scratch directory; the pool is locked).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "platform/process.h"
#include "stig/scap/content.h"
#include "stig/scap/eval_sandbox.h"
#include "stig/scap/eval_server.h"
#include "stig/verdict.h"

namespace temper::stig {

struct EvaluatorOptions {
  // The temper-stig-eval executable; empty picks DefaultEvalHelperPath().
  std::string helper_path;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // The full Ubuntu 20.04 profile peaks near 400 MB; rhel9 content near 1 GB.
  std::uint64_t memory_limit_bytes = std::uint64_t{4} << 30;
  // Where an SSH host's results files are copied back to when the caller keeps none (see
  // remote_oscap.h); empty means the system temp directory.
  std::string scratch_dir;
  // Evaluate through evaluation servers (above); false starts a fresh helper per evaluation.
  bool use_servers = true;
};

// The helper next to the running executable, else in <prefix>/libexec/temper for an installed
// executable in <prefix>/sbin or <prefix>/bin, else the one in this build tree.
std::string DefaultEvalHelperPath();

struct EvaluationRequest {
  // Full or short (after "_rule_") rule ids; empty means every rule the profile selects.
  std::vector<std::string> rule_ids;
  // When set, OpenSCAP writes results.xml (XCCDF 1.2 TestResult) and arf.xml (ARF) here.
  std::string output_dir;
  // With output_dir: also write fix.sh, SSG's bash remediation for the rules that failed.
  bool write_fix_script = false;
  // With output_dir: the target the results name (the TestResult's <target>), so that a checklist
  // tool files them under the host that was hardened; empty: the evaluating host's name, as
  // OpenSCAP writes it.
  std::string target_name;
};

struct RuleVerdict {
  std::string rule_id;  // full id
  Verdict verdict;
};

struct Evaluation {
  std::vector<RuleVerdict> verdicts;  // in request order (profile order for a whole profile)
  std::string results_path;           // empty unless output_dir was set
  std::string arf_path;
  std::string fix_script_path;
  double seconds = 0;

  // NotFound when `rule_id` (full id) was not evaluated.
  Result<Verdict> VerdictOf(const std::string& rule_id) const;
  std::map<Verdict, int> Counts() const;
};

class Evaluator {
 public:
  // `content` must outlive the Evaluator.
  Evaluator(const Content& content, EvaluatorOptions options, const Logger& log);
  // Ends every server.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  const Content& content() const { return content_; }

  // Evaluates the rules on the tree at `root_dir` (a root file system, seen as "/"). OpenSCAP's
  // package probe writes apt's cache into the tree, so pass a throwaway view of a target.
  // Errors: NotFound for an unknown rule id (with close matches); InvalidArgument for
  // write_fix_script without output_dir; Unavailable when the helper is missing;
  // FailedPrecondition when not running as root (the sandbox maps the id range); Internal when
  // OpenSCAP fails, refuses the content (content_policy.h) or returns no verdict for a requested
  // rule (the message carries its stderr); DeadlineExceeded past the timeout.
  Result<Evaluation> Evaluate(const std::string& root_dir, const EvaluationRequest& request) const;

  // The verdicts of an XCCDF results file that OpenSCAP wrote elsewhere (`oscap xccdf eval
  // --results` on an SSH host), read by the same helper and checked by the same code as Evaluate's,
  // so both give the same verdicts for the same evaluation. `rule_ids` as in EvaluationRequest.
  // Errors: NotFound for an unknown rule id; Unavailable when the helper is missing;
  // FailedPrecondition when not running as root; Internal when the file cannot be read, holds no
  // TestResult of this profile, or lacks a requested rule.
  Result<std::vector<RuleVerdict>> ReadResults(const std::string& results_path,
                                               const std::vector<std::string>& rule_ids) const;
  // The full ids of `rule_ids` (short names after "_rule_" expanded), in order. NotFound (with
  // close matches) for an id that is not in the content.
  Result<std::vector<std::string>> ResolveRules(const std::vector<std::string>& rule_ids) const;
  const EvaluatorOptions& options() const { return options_; }
  // The pids of the servers idle in the pool (for tests: a server killed from outside is replaced).
  std::vector<pid_t> IdleServerPids() const;

 private:
  // Runs the helper with `args` (its --rule arguments added) in its sandbox over `paths`, and
  // checks its verdict lines against `rules` (the profile's rules when empty); `where` names the
  // evaluated tree or file in errors.
  Result<std::vector<RuleVerdict>> RunHelper(std::vector<std::string> args, EvalSandboxPaths paths,
                                             const std::vector<std::string>& rules, const std::string& where,
                                             double* seconds) const;
  // The helper's preconditions: Unavailable when it is missing, FailedPrecondition when not root.
  Status CheckHelper() const;
  // The sandboxed process running the helper with `args` over `paths`.
  ProcessSpec HelperSpec(const std::vector<std::string>& args, EvalSandboxPaths paths) const;
  // The evaluation through a server; Unavailable when no server could be started (the caller
  // falls back to the one-shot helper).
  Result<std::vector<RuleVerdict>> ServeEvaluation(const std::string& root, const std::vector<std::string>& rules,
                                                   const std::string& output_dir, const EvaluationRequest& request,
                                                   const std::string& where, double* seconds) const;
  // An idle server (`reused` set), else a new one. Unavailable (logged once) when it cannot be started.
  Result<std::unique_ptr<EvalServer>> TakeServer(bool& reused) const;
  // The checked verdicts of the helper's `out` for `rules` (the profile's when empty); `err` is
  // quoted when one is missing.
  Result<std::vector<RuleVerdict>> CheckVerdicts(const std::string& out, const std::string& err,
                                                 const std::vector<std::string>& rules, const std::string& where) const;

  const Content& content_;
  EvaluatorOptions options_;
  const Logger& log_;
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<EvalServer>> idle_;  // guarded by pool_mu_
  mutable std::atomic<bool> servers_unavailable_{false};
};

}  // namespace temper::stig
