// A library entry as clients see it: the temper.v1.Fix message (`temper library list` and `show`)
// and the JSON document `temper library export` writes, which carries each entry whole, its
// platform and bundle as JSON objects (stig/platform_id.h, stig/fix_bundle.h), so another temperd
// or a fleet tool can read it without temper's store.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "temper/v1/temper.pb.h"

namespace temper {

// The entry's fields; with `details`, its evidence and its bundle's files (paths, types, modes and
// checksums, no bytes; as many as keep the message within a chunk, files_left_out counting the rest),
// packages and services too. DataLoss naming the entry when its stored
// platform or bundle does not parse.
Status FixToProto(const FixRecord& fix, bool details, temper::v1::Fix* out);

// {"fixes":[{"id":1,"rule_id":...,"content_id":...,"platform":{...},"bundle":{...},"evidence":...,
//   "source":{"batch":3,"attempt":11,"target":"twin"},"model_tokens":...,"uses":...,"failures":...,
//   "tokens_saved":...,"last_failure":...,"created_at":"2026-11-29T23:00:00Z",
//   "retired_at":null or "...","retired_reason":...}, ...]}, entries in the order given.
// DataLoss naming the entry when its stored platform or bundle is not JSON.
Result<std::string> FixesExportJson(const std::vector<FixRecord>& fixes);

}  // namespace temper
