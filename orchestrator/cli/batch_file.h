// Batch files: a YAML description of a SubmitBatch request, for batches users keep in version control.
//
//   name: nightly web tier
//   target: lab
//   datastream: ssg-ubuntu2004-ds.xml
//   profile: stig
//   rules: [sshd_disable_root_login, accounts_tmout]   # or: whole_profile: true
//   budgets: {max_attempts: 5, wall_time: 20m, max_tokens: 400000}
//   request_id: nightly-2026-11-22
//   waivers:                                    # accepted risks (orchestrator/config/waivers.h)
//     - {rule: sshd_disable_root_login, reason: "break-glass, SEC-1234", owner: alice, expires: 2027-01-31}
//   allow_disruptive: true                      # remediate disruptive rules too (stig/scap/rule_risk.h)
//   plan_only: true                             # report what would change; change nothing
//
// Errors name file:line:column and the field; unknown keys are errors.
#pragma once

#include <string>

#include "common/status.h"
#include "temper/v1/temper.pb.h"

namespace temper::cli {

Result<temper::v1::SubmitBatchRequest> LoadBatchFile(const std::string& path);
Result<temper::v1::SubmitBatchRequest> ParseBatchFile(const std::string& text, const std::string& source_name);

}  // namespace temper::cli
