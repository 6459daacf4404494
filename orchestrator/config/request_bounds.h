// Request bounds: the most bytes each string field of a temper.v1 request may carry.
//
// Every string a client sends ends up somewhere that has a cost: the state store, a journal event,
// a log line, an argv, an error message. gRPC's own 4 MiB message limit is not a bound for any of
// them, so each field has one of its own, checked before the request is looked at: identifiers and
// names (batch ids, rule ids, target names, profiles, formats, page tokens, fingerprints) get
// kMaxIdentifierBytes unless the table in request_bounds.cpp names a different bound (a path, a
// free-text reason or note, a host address). The walk goes through nested and repeated messages,
// so a field added to the proto is bounded from the day it exists.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <string_view>

#include <google/protobuf/message.h>

#include "common/status.h"

namespace temper {

// Identifiers and names, unless the table says otherwise.
inline constexpr size_t kMaxIdentifierBytes = 256;

// A DISA STIG sent with an export: what fits in gRPC's default 4 MiB message with room to spare.
inline constexpr size_t kMaxDisaStigUploadBytes = 4'000'000;

// The bound of one string (or bytes) field.
size_t StringFieldBound(const google::protobuf::FieldDescriptor& field);

// OK when `value`, the string field `field` at `path` ("waivers[2].reason"), is within its bound;
// else InvalidArgument naming the path and both sizes, without echoing the value.
Status CheckStringBound(std::string_view path, const google::protobuf::FieldDescriptor& field, std::string_view value);

// OK when every string field of `request` (recursively) is within its bound. Otherwise
// InvalidArgument naming the first field over it by its path and both sizes, without echoing the
// value: "waivers[2].reason: 4096 bytes; at most 2000".
Status CheckRequestBounds(const google::protobuf::Message& request);

}  // namespace temper
