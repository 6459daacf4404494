// Validation of SubmitBatch requests: every field is checked before anything is stored, and each
// error names the field (and the list index for rule ids) so a script can tell what to fix.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/records.h"
#include "stig/scap/datastream_ids.h"
#include "temper/v1/temper.pb.h"

namespace temper {

// The XCCDF id prefix SCAP Security Guide uses; short rule names are expanded with it.
inline constexpr std::string_view kSsgRulePrefix = "xccdf_org.ssgproject.content_rule_";

// "sshd_disable_root_login" → "xccdf_org.ssgproject.content_rule_sshd_disable_root_login"; full
// XCCDF 1.2 rule ids (xccdf_<namespace>_rule_<name>) pass unchanged. InvalidArgument otherwise.
Result<std::string> NormalizeRuleId(std::string_view id);

// Checks `request` against the daemon's configuration and fills in default budgets. `more_targets`
// are valid target names besides the configured ones (SSH hosts named on submit). Errors:
// InvalidArgument for malformed fields and strings over their bounds (request_bounds.h), NotFound for
// an unknown target or datastream.
Result<NewBatch> ValidateSubmitRequest(const temper::v1::SubmitBatchRequest& request, const DaemonConfig& config,
                                       const std::vector<std::string>& more_targets = {});

// Checks that the datastream `ids` were read from (stig/scap/datastream_ids.h) defines the batch's
// profile and every rule it names, so a typo is refused at submit. NotFound naming the field, what
// was asked for as the client wrote it, the datastream's file name and the closest ids:
// "rule_ids[0]: 'acounts_tmout' is not a rule of ssg-ubuntu2004-ds.xml (did you mean 'accounts_tmout'?)".
Status CheckIdsInDatastream(const temper::v1::SubmitBatchRequest& request, const NewBatch& batch,
                            const stig::DatastreamIds& ids);

// Parses a batch id as the API carries it (decimal). InvalidArgument names the bad text.
Result<int64_t> ParseBatchId(std::string_view text);

}  // namespace temper
