// FixLibrary: the fixes temper has proven, per rule, content version and platform, tried before any
// model call on a matching target and reused by `temper apply`.
//
// Every kept fix whose change could be captured whole (a FixBundle, stig/fix_bundle.h) is recorded:
// the rule, the content it was judged by (the datastream's benchmark id and version), the platform it
// was proven on (the OS, its version, the architecture, and the versions of the packages the fix
// touches), the bundle, the evidence (OpenSCAP's verdict and the attempt), and the model tokens the
// rule's attempts cost to find it. A later batch whose target matches tries the entry first, through
// the same verification as any attempt, with no model call; its outcome is recorded on the entry
// (uses, failures, tokens saved), and a failure becomes a lesson for the model, which is then asked.
//
// Matching: same rule, same content id, same OS id, version and architecture, and every package the
// entry names at the same version on the target (a package the fix installed may also be absent
// there: the replay installs it). Retired entries never match. The newest matching entry wins.
// Entries live in the state store (one SQLite file with the batches they came from; StateStore's
// fixes table), so they survive restarts and kill -9 as the batches do.
// Thread safety: as StateStore (every method may be called from any thread).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/state_store.h"
#include "stig/fix_bundle.h"
#include "stig/platform_id.h"
#include "stig/scap/content.h"

namespace temper {

// What Record stores (the store assigns id and times).
struct NewFix {
  std::string rule_id;
  std::string content_id;          // FixContentId(content)
  stig::TargetPlatform platform;   // the whole platform of the target; Record keeps what matters
  stig::FixBundle bundle;
  std::string evidence;            // the kept attempt's verdict and evidence, for `temper library show`
  int64_t source_batch = 0;
  int64_t source_attempt = 0;
  std::string source_target;
  uint64_t model_tokens = 0;       // prompt + completion tokens of the rule's model calls in that batch
};

class FixLibrary {
 public:
  explicit FixLibrary(StateStore& store) : store_(store) {}

  // Stores `fix` and returns its id; a live entry with the same rule, content, platform and bundle
  // is not stored twice (its id is returned). InvalidArgument naming the field for an empty rule or
  // content id, or an empty bundle.
  Result<int64_t> Record(const NewFix& fix);
  // The newest live entry that matches (above); nullopt when none does.
  Result<std::optional<FixRecord>> Match(const std::string& rule_id, const std::string& content_id,
                                         const stig::TargetPlatform& platform);
  // A tried entry's outcome on a batch: kept adds a use and the tokens it saved (the entry's
  // model_tokens); not kept adds a failure and why. NotFound for an unknown id.
  Status NoteOutcome(int64_t id, int64_t batch, bool kept, const std::string& why);
  // Entries, newest first; retired ones too when `include_retired`. `rule_id` empty: every rule.
  // `before_id`: only entries with a lower id (the next page of a listing).
  Result<std::vector<FixRecord>> List(const std::string& rule_id, bool include_retired, uint32_t limit,
                                      std::optional<int64_t> before_id = std::nullopt);
  Result<FixRecord> Get(int64_t id);
  // Keeps the entry (for the record and exports of its batches) but never matches it again.
  // NotFound for an unknown id; FailedPrecondition when already retired (saying when and why);
  // InvalidArgument for an empty reason (it is shown with the entry for good).
  Result<FixRecord> Retire(int64_t id, const std::string& reason);

 private:
  StateStore& store_;
};

// The content id a library entry is matched by: "<benchmark id> <benchmark version>".
std::string FixContentId(const stig::Content& content);

}  // namespace temper
