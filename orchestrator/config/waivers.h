// Waivers as people write them, and how a batch's waivers combine with the configured ones.
//
// A waiver is an accepted risk: the rule is kept out of remediation and reported as waived (never as
// pass) until it expires. People write waivers in three places, all read here so they mean the same:
//   temperd.yaml and batch files (YAML):
//     waivers:
//       - rule: sshd_disable_root_login        # SSG short name or full XCCDF id
//         reason: "break-glass access, ticket SEC-1234"
//         owner: alice@example.com
//         expires: 2027-01-31                  # optional
//   the command line: temper submit --waive RULE:REASON:OWNER[:YYYY-MM-DD]
// An expiry date is a UTC day: the waiver has expired from 00:00 UTC that day.
//
// A batch's waiver for a rule replaces the configured one for that rule (the batch is the more
// specific decision); configured waivers for rules outside an explicit rule list are left out, so
// a batch lists only the waivers that concern it.
// Errors name the file:line:column and field (YAML) or the flag's text (command line).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "orchestrator/config/yaml_reader.h"
#include "orchestrator/records.h"

namespace temper {

// Free text limits, as SubmitBatch enforces them.
inline constexpr size_t kMaxWaiverReason = 2000;
inline constexpr size_t kMaxWaiverOwner = 200;
// A batch's waivers, its own and the configured ones together (rule ids, reasons and owners): they
// travel with the batch in every answer that carries it, which must stay within one message of
// about 1 MiB (message_chunks.h) with room for other batches on a list's page.
inline constexpr size_t kMaxBatchWaiverBytes = 256 * 1024;

// "2027-01-31" → 00:00 UTC of that day. InvalidArgument names the text and the expected form.
Result<TimeMs> ParseExpiryDate(std::string_view text);
// 00:00 UTC of a day → "2027-01-31"; other times as "2027-01-31 12:00:00Z".
std::string FormatExpiry(TimeMs expires_at);

// "RULE:REASON:OWNER[:YYYY-MM-DD]". The reason may hold colons: the rule is what precedes the first
// one, the owner what follows the last (or the one before a trailing date). The rule id is kept as
// written (SubmitBatch resolves short names).
Result<Waiver> ParseWaiverFlag(std::string_view spec);

// A YAML sequence of {rule, reason, owner, expires?}. Rule ids are kept as written; a rule listed
// twice is an error naming both entries.
Result<std::vector<Waiver>> ParseWaiverList(const YamlNode& node);

// The waivers a batch applies: `batch`'s, plus `configured` ones for other rules (only those in
// `rule_ids` unless `whole_profile`). Rule ids must already be full XCCDF ids.
std::vector<Waiver> MergeWaivers(const std::vector<Waiver>& configured, const std::vector<Waiver>& batch,
                                 const std::vector<std::string>& rule_ids, bool whole_profile);

}  // namespace temper
