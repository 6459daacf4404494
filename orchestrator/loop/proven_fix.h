// Proven fixes as the loop records them: an attempt that replays a fix instead of calling the Worker
// names where the fix came from in its approach (the one field every attempt has, stored, shown to
// people and to later prompts), and this file writes and reads those names, so that a resumed
// batch knows which proven fixes it already tried and a report can count them.
//   the library's fix:        "proven fix #7 from the library (batch 3)"
//   an apply batch's source:  "proven fix of batch 3 (attempt 12)"
// Thread safety: stateless; BatchLibraryUse reads the store (itself thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "orchestrator/store/state_store.h"
#include "temper/v1/temper.pb.h"

namespace temper {

std::string LibraryFixApproach(int64_t fix_id, int64_t source_batch);
std::string ApplyFixApproach(int64_t source_batch, int64_t source_attempt);

// Where a replayed fix came from: exactly one of library_fix and source_attempt is set.
struct ProvenFixSource {
  int64_t library_fix = 0;
  int64_t source_batch = 0;
  int64_t source_attempt = 0;
};
// nullopt for any approach that is not exactly one of the two forms above (a model's).
std::optional<ProvenFixSource> ParseProvenFixApproach(std::string_view approach);

// What the library did in one batch: rules whose first attempt replayed the library's fix, those
// of them kept, and the model tokens the kept entries had cost to find (what the batch did not spend).
struct LibraryUse {
  uint32_t tried = 0;
  uint32_t kept = 0;
  uint64_t tokens_saved = 0;

  nlohmann::json ToJson() const;
};
// Its wire form (temper.proto's LibraryUse, in BatchReport).
void ToProto(const LibraryUse& use, temper::v1::LibraryUse* out);
// From the batch's stored attempts and the library's entries (an entry no longer stored counts no
// tokens). Errors: the store's.
Result<LibraryUse> BatchLibraryUse(StateStore& store, int64_t batch_id);

}  // namespace temper
