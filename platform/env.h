// Env: the one seam through which temper's durable state reaches the operating system: files,
// child processes and the clock (LevelDB's Env, for temper).
//
// Why: what must survive a crash (the state store, the journal files, an SSH host's undo journal)
// is only as good as its handling of a write, an fsync or a process start that fails. Those
// components take an Env (in their Open or constructor, defaulting to Env::Default(), the real
// one), and a test passes a FaultEnv (fault_env.h) that fails the Nth write, fsync or process start,
// or sets the clock, and then checks that nothing committed was lost. Nothing reaches the seam
// through global state.
//
// What goes through it:
//   - files temper writes itself (the journal's JSON Lines): created, appended, fsynced, read,
//     truncated;
//   - files SQLite writes for the state store: SQLite opens, reads, locks and maps them itself, and
//     the store's VFS shim (orchestrator/store/sqlite_env_vfs.h) hands each write, fsync and truncate to
//     the Env as an operation on a PositionalFile, and each delete to Remove (and SyncDir);
//   - child processes (platform/process.h's RunProcess): the OpenSSH client an SSH host is reached with;
//   - the wall clock (timestamps the store records) and the monotonic clock (idle and elapsed times).
// Other code keeps calling the system directly until it needs the seam.
//
// Errors: IOError naming the path and errno's text, NotFound where a method says so. A write that
// fails may have written part of its data (a disk that fills up mid-write): callers repair that.
// Ownership: files returned are owned by the caller and closed when destroyed.
// Thread safety: Env::Default() is stateless and may be used from any thread at once; every Env
// must be. A file object belongs to one thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "platform/process.h"

namespace temper {

// A file opened for appending.
class WritableFile {
 public:
  virtual ~WritableFile() = default;  // closes the file
  virtual const std::string& path() const = 0;
  // Writes all of `data` at the end of the file (a short write is continued). On an error part of
  // `data` may have been written.
  virtual Status Append(std::string_view data) = 0;
  // Flushes the file's data to the disk (fsync).
  virtual Status Sync() = 0;
};

// A file opened for reading from its start.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;  // closes the file
  // Reads up to `n` bytes into `buf`: the count read, 0 at the end of the file.
  virtual Result<std::size_t> Read(char* buf, std::size_t n) = 0;
};

// A file another library opened and writes at offsets (SQLite's database and WAL). The library's
// own code does the I/O; the Env is handed each operation to perform or refuse (see Env::WriteAt).
class PositionalFile {
 public:
  virtual const std::string& path() const = 0;
  virtual Status WriteAt(std::uint64_t offset, std::string_view data) = 0;
  virtual Status Sync() = 0;
  virtual Status Truncate(std::uint64_t size) = 0;

 protected:
  ~PositionalFile() = default;  // owned by the library that opened the file, never through this
};

class Env {
 public:
  // The real Env: POSIX files, RunProcess, the system clocks. Lives as long as the process.
  static Env& Default();

  virtual ~Env() = default;

  // Files temper writes itself.

  // Creates `path` and its missing parents (as std::filesystem::create_directories: 0777 less the
  // umask); an existing directory is fine.
  virtual Status CreateDirs(const std::string& path) = 0;
  // Opens `path` for appending, creating it with `mode` when missing.
  virtual Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path, mode_t mode) = 0;
  // NotFound when `path` does not exist.
  virtual Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) = 0;
  // Cuts (or extends) `path` to `size` bytes.
  virtual Status Truncate(const std::string& path, std::uint64_t size) = 0;
  // Deletes the file `path`. NotFound when it does not exist.
  virtual Status Remove(const std::string& path) = 0;
  // Flushes the directory `path`'s entries to the disk, so a file created or removed in it stays so.
  virtual Status SyncDir(const std::string& path) = 0;

  // Files another library writes: the real Env performs the operation on `file`; a test Env may
  // fail it instead (having written part of `data`, or nothing).
  virtual Status WriteAt(PositionalFile& file, std::uint64_t offset, std::string_view data) = 0;
  virtual Status Sync(PositionalFile& file) = 0;
  virtual Status Truncate(PositionalFile& file, std::uint64_t size) = 0;

  // Processes: starts `spec` and waits for it, as temper::RunProcess (errors as there).
  virtual Result<ProcessResult> RunProcess(const ProcessSpec& spec) = 0;

  // Clocks.
  virtual std::chrono::system_clock::time_point Now() = 0;
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;
};

}  // namespace temper
