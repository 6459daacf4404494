// EnvVfs: the state store's SQLite files written through a temper::Env, so that a test Env fails
// SQLite's writes and fsyncs like any other (the Nth write may be a WAL frame or a checkpointed
// page), and the store's recovery from them is tested with the rest.
//
// A shim over SQLite's own unix VFS, chosen over a VFS of our own: SQLite still opens, reads, locks
// and memory-maps its files itself (POSIX locks belong to the process and are subtle; the WAL's
// shared memory is SQLite's), and the shim passes only what changes the disk to the Env: each
// write (Env::WriteAt), fsync (Env::Sync), truncate (Env::Truncate) and delete (Env::Remove, then
// Env::SyncDir when SQLite asks for the directory to be synced). With Env::Default() the calls,
// bytes and order reaching the disk are exactly the unix VFS's. An Env's refusal reaches SQLite
// as the I/O error the unix VFS would return (SQLITE_IOERR_WRITE, _FSYNC, _TRUNCATE, _DELETE,
// _DIR_FSYNC), and SQLite rolls the transaction back as after a real one.
//
// Lifetime: registered with SQLite under name(), unique to this object, for as long as it lives;
// every database opened with that name must be closed before it is destroyed, and the Env must
// outlive it. Thread safety: SQLite may call the shim from any thread; the shim's only state is
// per open file, and SQLite serializes a file's calls.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "platform/env.h"

namespace temper::sqlite {

class EnvVfs {
 public:
  // Internal when SQLite has no default VFS or refuses the registration.
  static Result<std::unique_ptr<EnvVfs>> Register(temper::Env& env);
  ~EnvVfs();
  EnvVfs(const EnvVfs&) = delete;
  EnvVfs& operator=(const EnvVfs&) = delete;

  // The name to open databases with (sqlite::Database::Open's `vfs`).
  const std::string& name() const { return name_; }

 private:
  EnvVfs(temper::Env& env, sqlite3_vfs* base) : env_(env), base_(base) {}

  friend struct EnvVfsCalls;  // the C callbacks, in the .cpp
  temper::Env& env_;
  sqlite3_vfs* const base_;  // the unix VFS, which does the I/O
  std::string name_;
  sqlite3_vfs vfs_{};
};

}  // namespace temper::sqlite
