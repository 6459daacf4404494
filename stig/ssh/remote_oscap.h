// RemoteOscap: OpenSCAP evaluation on the host itself, the way oscap-ssh does it.
//
// The probes must read the live system (its processes, sysctls, systemd units, package database),
// so `oscap` runs on the host: the datastream is copied there once (kept by its SHA-256 in the
// host's root-only temper directory, so later evaluations skip the copy), `oscap xccdf eval
// --profile P [--rule R]... --results --results-arf` writes the results in a private directory on
// the host, and results.xml (plus arf.xml and fix.sh when asked) are copied back. The verdicts are
// then read by Evaluator::ReadResults, the same helper and parser as a local evaluation's, so a
// verdict means the same thing whichever way it was made.
//
// Errors: FailedPrecondition when the host has no `oscap`, saying how to install it; Internal with
// oscap's own message when it fails (exit 1); the Evaluator's errors (unknown rules); the shell's
// transport errors. Thread safety: single owner (as Target).
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "stig/scap/evaluator.h"
#include "stig/ssh/remote_shell.h"

namespace temper::stig {

// The most temper takes of each results file (results.xml, arf.xml, fix.sh) an SSH host sends back:
// each is read whole into memory, and a hostile or broken host could answer with any amount (the
// size the host reports is the host's word). A full STIG profile's ARF on a busy server is a few
// MiB to a few tens; past this cap the evaluation fails, naming the file, the host and the cap.
inline constexpr std::size_t kMaxResultsFileBytes = std::size_t{64} << 20;

class RemoteOscap {
 public:
  // `host_dir` is temper's root-only directory on the host (content/ and eval/ go there). `shell`
  // must outlive this.
  RemoteOscap(RemoteShell& shell, std::string host_dir, const Logger& log)
      : shell_(&shell), host_dir_(std::move(host_dir)), log_(&log) {}

  // As Evaluator::Evaluate, on the host. The results files land in request.output_dir when set.
  Result<Evaluation> Evaluate(const Evaluator& evaluator, const EvaluationRequest& request);

 private:
  // The datastream's path on the host, copying it there unless a copy with its SHA-256 is there.
  Result<std::string> EnsureDatastream(const std::string& local_path);

  RemoteShell* shell_;
  std::string host_dir_;
  const Logger* log_;
  std::map<std::string, std::string> uploaded_;  // local "path|size|mtime" -> path on the host
};

}  // namespace temper::stig
