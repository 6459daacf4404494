// The state store's schema, as an ordered list of migrations. PRAGMA user_version records how many
// have been applied; each runs in its own transaction, so a crash mid-migration leaves the previous
// version intact. A database from a newer temper (user_version beyond what this build knows) is
// refused rather than guessed at.
#pragma once

#include "common/status.h"
#include "orchestrator/store/sqlite.h"

namespace temper {

// The version this build writes.
int CurrentSchemaVersion();

// Applies the migrations from the database's version up to `target_version` (default: current).
// Tests pass an older target to build a database of a previous schema.
Status MigrateSchema(sqlite::Database& db, int target_version = -1);

}  // namespace temper
