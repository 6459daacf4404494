// SubmitBatch requests, in two stages: the proto decoded into a SubmitRequest (no checks), then one
// validator that checks everything before anything is stored; each error names the field (and the
// list index for rule ids) so a script can tell what to fix. The server then makes one domain call.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/config/parallel_attempts.h"
#include "orchestrator/records.h"
#include "stig/scap/datastream_ids.h"
#include "temper/v1/temper.pb.h"

namespace temper {

// The XCCDF id prefix SCAP Security Guide uses; short rule names are expanded with it.
inline constexpr std::string_view kSsgRulePrefix = "xccdf_org.ssgproject.content_rule_";

// "sshd_disable_root_login" → "xccdf_org.ssgproject.content_rule_sshd_disable_root_login"; full
// XCCDF 1.2 rule ids (xccdf_<namespace>_rule_<name>) pass unchanged. InvalidArgument otherwise.
Result<std::string> NormalizeRuleId(std::string_view id);

// A SubmitBatch request as the client sent it: the proto decoded, nothing checked (ValidateSubmit
// checks). Zero budgets and parallel_attempts mean temperd's defaults, as in the proto.
struct RequestedWaiver {
  std::string rule_id;  // as written: a short name or a full XCCDF id
  std::string reason;
  std::string owner;
  bool has_expires_at = false;
  int64_t expires_seconds = 0;
  int32_t expires_nanos = 0;
};
struct SubmitRequest {
  std::string target;
  std::string host;  // an SSH host named on submit (user@name:port), instead of target
  std::string datastream;
  std::string profile;
  std::vector<std::string> rule_ids;  // as written
  bool whole_profile = false;
  uint32_t max_attempts = 0;
  uint32_t wall_time_seconds = 0;
  uint64_t max_tokens = 0;
  std::string name;
  std::string request_id;
  std::vector<RequestedWaiver> waivers;
  bool allow_disruptive = false;
  bool plan_only = false;
  uint32_t parallel_attempts = 0;
};
SubmitRequest DecodeSubmitRequest(const temper::v1::SubmitBatchRequest& request);

// What a request is checked against: the daemon's configuration and what temperd knows now. The
// functions are the server's (the tests give their own).
struct SubmitContext {
  const DaemonConfig& config;
  // Target names besides the configured ones: the SSH hosts known so far.
  std::vector<std::string> host_targets;
  // A host named on submit: OK when the caller may use it (registered, or the caller may
  // register it), else the refusal; and the target name its batches go to.
  std::function<Status(const std::string& host)> admit_host;
  std::function<std::string(const std::string& host)> target_for_host;
  // The caller's right to submit on `target`, and to waive rules; PermissionDenied when not.
  std::function<Status(const std::string& target)> authorize_target;
  std::function<Status()> authorize_waivers;
  // The ids the datastream at `path` (absolute, trusted) defines.
  std::function<Result<std::shared_ptr<const stig::DatastreamIds>>(const std::string& path)> datastream_ids;
  // What loop.parallel_attempts: auto sizes a batch from (parallel_attempts.h): the Worker role's
  // endpoint, and the machine's CPUs (nullopt: CpusAvailable() at the submit).
  EndpointCapacity worker_endpoint;
  std::optional<MachineCpus> machine;
};

// The one check of a SubmitBatch request, before anything is stored: every string within its
// bound (request_bounds.h), then the host, the caller's rights, every field, and the datastream's
// ids, in that order, returning the first refusal; on success the batch to store, with default
// budgets filled in, a host's target name as its target, and the attempts at once chosen (the
// request's, else loop.parallel_attempts, auto sized here). Each error names the field (and the
// list index): InvalidArgument for malformed fields and strings over their bounds, NotFound for
// an unknown target, datastream, profile or rule ("rule_ids[0]: 'acounts_tmout' is not a rule of
// ssg-ubuntu2004-ds.xml (did you mean 'accounts_tmout'?)"), PermissionDenied or the host's refusal
// from the context.
Result<NewBatch> ValidateSubmit(const SubmitRequest& request, const SubmitContext& context);

// Parses a batch id as the API carries it (decimal). InvalidArgument names the bad text.
Result<int64_t> ParseBatchId(std::string_view text);

}  // namespace temper
