// Human-readable output of the `temper` CLI: tables of batches, a batch's detail, and the small text
// helpers the other renderers (report, events, progress) share so that all commands print alike
// (with common/display_text.h: one line, a terminal's width, a rule's short name).
// Machine-readable output (--json) is protobuf's canonical JSON, one object per line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include "common/display_text.h"
#include "temper/v1/temper.pb.h"

namespace temper::cli {

std::string RenderBatchTable(const temper::v1::ListBatchesResponse& list);
std::string RenderBatchDetail(const temper::v1::Batch& batch);
// One line of protobuf JSON, with the .proto field names (snake_case) so scripts match the API docs.
std::string RenderJson(const google::protobuf::Message& message);
// An event as one JSON line, with its data as a nested object ("data") rather than a string.
std::string RenderEventJson(const temper::v1::JournalEvent& event);

// What became of each of the batch's waivers, read from its rules' states: a waiver is applied when
// its rule is waived; a rule that was evaluated but not waived had its waiver expired (the loop
// flagged it and remediated the rule as usual).
struct WaiverStatus {
  const temper::v1::Waiver* waiver = nullptr;  // points into the batch
  enum class Kind { kApplied, kExpired, kPending, kNotInBatch } kind = Kind::kPending;
  std::string Describe() const;  // "applied", "EXPIRED: remediated as usual", ...
};
std::vector<WaiverStatus> WaiverStatuses(const temper::v1::Batch& batch);
// "until 2027-01-31" (the expiry day, as written), or "no expiry".
std::string ExpiryText(const temper::v1::Waiver& waiver);
// The batch's opt-ins and waivers in one line: "disruptive changes allowed · 2 waivers (1 expired)";
// "" for a batch with neither.
std::string OptionsLine(const temper::v1::Batch& batch);

// "queued", "already_passing", ...
std::string StateName(temper::v1::BatchState state);
std::string StateName(temper::v1::RuleState state);

// "2026-11-22 21:50:01Z" (UTC, whole seconds); "-" for an unset timestamp.
std::string FormatTime(const google::protobuf::Timestamp& t);
// "12s", "4m 05s", "2h 03m 04s".
std::string FormatDuration(int64_t seconds);
// Left-aligned columns, as wide as their widest cell, two spaces apart; one line per row.
std::string Table(const std::vector<std::vector<std::string>>& rows);

}  // namespace temper::cli
