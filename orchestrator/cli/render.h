// Human-readable output of the `temper` CLI: tables of batches, a batch's detail, journal events.
// Machine-readable output (--json) is protobuf's canonical JSON, one object per line.
#pragma once

#include <string>

#include <google/protobuf/message.h>

#include "temper/v1/temper.pb.h"

namespace temper::cli {

std::string RenderBatchTable(const temper::v1::ListBatchesResponse& list);
std::string RenderBatchDetail(const temper::v1::Batch& batch);
std::string RenderEvent(const temper::v1::JournalEvent& event);
// One line of protobuf JSON, with the .proto field names (snake_case) so scripts match the API docs.
std::string RenderJson(const google::protobuf::Message& message);
// An event as one JSON line, with its data as a nested object ("data") rather than a string.
std::string RenderEventJson(const temper::v1::JournalEvent& event);

// "queued", "already_passing", ...
std::string StateName(temper::v1::BatchState state);
std::string StateName(temper::v1::RuleState state);

}  // namespace temper::cli
