#include "orchestrator/store/sqlite_env_vfs.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <new>
#include <string_view>

#include <fmt/format.h>

namespace temper::sqlite {

namespace {

// One open file as SQLite sees it: this header, then the unix VFS's own file object (its
// szOsFile bytes), in the one allocation of EnvVfs::vfs_.szOsFile bytes SQLite makes per file.
struct ShimFile {
  sqlite3_file base;  // first: SQLite's view of the file
  // The shim's methods for this file: those the unix file has (a file opened without locking has
  // no shared memory), so SQLite sees the same capabilities through the shim.
  sqlite3_io_methods methods;
  temper::Env* env;
  std::string path;  // for the Env's messages

  sqlite3_file* real();
};

// Where the unix VFS's file starts: past the header, at pointer alignment (SQLite's allocation is
// 8-byte aligned, which is all the unix file needs).
constexpr std::size_t kRealOffset =
    (sizeof(ShimFile) + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);

sqlite3_file* ShimFile::real() { return reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(this) + kRealOffset); }

ShimFile* Shim(sqlite3_file* file) { return reinterpret_cast<ShimFile*>(file); }
sqlite3_file* Real(sqlite3_file* file) { return Shim(file)->real(); }

// The unix file as the Env sees it: each operation calls the unix VFS and keeps SQLite's result
// code, so an error the disk gave is returned to SQLite as it was.
class SqliteFile final : public temper::PositionalFile {
 public:
  SqliteFile(ShimFile& shim, int sync_flags = 0) : shim_(shim), sync_flags_(sync_flags) {}

  const std::string& path() const override { return shim_.path; }
  Status WriteAt(std::uint64_t offset, std::string_view data) override {
    sqlite3_file* real = shim_.real();
    rc_ = real->pMethods->xWrite(real, data.data(), static_cast<int>(data.size()), static_cast<sqlite3_int64>(offset));
    return Checked("write");
  }
  Status Sync() override {
    sqlite3_file* real = shim_.real();
    rc_ = real->pMethods->xSync(real, sync_flags_);
    return Checked("fsync");
  }
  Status Truncate(std::uint64_t size) override {
    sqlite3_file* real = shim_.real();
    rc_ = real->pMethods->xTruncate(real, static_cast<sqlite3_int64>(size));
    return Checked("truncate");
  }

  // SQLite's code for the call: the unix VFS's own when it failed, else `refused` (the Env failed
  // the call without the disk failing), else SQLITE_OK.
  int Code(const Status& status, int refused) const {
    if (status.ok()) return SQLITE_OK;
    return rc_ != SQLITE_OK ? rc_ : refused;
  }

 private:
  Status Checked(std::string_view what) const {
    if (rc_ == SQLITE_OK) return Status::OK();
    return Status::IOError(fmt::format("{}: {} failed: {}", shim_.path, what, sqlite3_errstr(rc_)));
  }

  ShimFile& shim_;
  const int sync_flags_;
  int rc_ = SQLITE_OK;
};

}  // namespace

// The C entry points SQLite calls; a struct so that they may reach EnvVfs's private members.
struct EnvVfsCalls {
  static EnvVfs& Self(sqlite3_vfs* vfs) { return *static_cast<EnvVfs*>(vfs->pAppData); }
  static sqlite3_vfs* Base(sqlite3_vfs* vfs) { return Self(vfs).base_; }

  // The file's methods: writes, fsyncs and truncates through the Env, the rest straight to the unix file.
  static int Close(sqlite3_file* file) {
    int rc = Real(file)->pMethods->xClose(Real(file));
    Shim(file)->~ShimFile();
    return rc;
  }
  static int Read(sqlite3_file* file, void* buf, int amount, sqlite3_int64 offset) {
    return Real(file)->pMethods->xRead(Real(file), buf, amount, offset);
  }
  static int Write(sqlite3_file* file, const void* buf, int amount, sqlite3_int64 offset) {
    ShimFile& shim = *Shim(file);
    SqliteFile f(shim);
    Status s = shim.env->WriteAt(f, static_cast<std::uint64_t>(offset),
                                 std::string_view(static_cast<const char*>(buf), static_cast<std::size_t>(amount)));
    return f.Code(s, SQLITE_IOERR_WRITE);
  }
  static int Truncate(sqlite3_file* file, sqlite3_int64 size) {
    ShimFile& shim = *Shim(file);
    SqliteFile f(shim);
    Status s = shim.env->Truncate(f, static_cast<std::uint64_t>(size));
    return f.Code(s, SQLITE_IOERR_TRUNCATE);
  }
  static int Sync(sqlite3_file* file, int flags) {
    ShimFile& shim = *Shim(file);
    SqliteFile f(shim, flags);
    Status s = shim.env->Sync(f);
    return f.Code(s, SQLITE_IOERR_FSYNC);
  }
  static int FileSize(sqlite3_file* file, sqlite3_int64* size) {
    return Real(file)->pMethods->xFileSize(Real(file), size);
  }
  static int Lock(sqlite3_file* file, int level) { return Real(file)->pMethods->xLock(Real(file), level); }
  static int Unlock(sqlite3_file* file, int level) { return Real(file)->pMethods->xUnlock(Real(file), level); }
  static int CheckReservedLock(sqlite3_file* file, int* out) {
    return Real(file)->pMethods->xCheckReservedLock(Real(file), out);
  }
  static int FileControl(sqlite3_file* file, int op, void* arg) {
    return Real(file)->pMethods->xFileControl(Real(file), op, arg);
  }
  static int SectorSize(sqlite3_file* file) { return Real(file)->pMethods->xSectorSize(Real(file)); }
  static int DeviceCharacteristics(sqlite3_file* file) {
    return Real(file)->pMethods->xDeviceCharacteristics(Real(file));
  }
  // Version 2 and 3 methods, offered only where the unix file has them (see Open).
  static int ShmMap(sqlite3_file* file, int page, int page_size, int extend, void volatile** out) {
    return Real(file)->pMethods->xShmMap(Real(file), page, page_size, extend, out);
  }
  static int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
    return Real(file)->pMethods->xShmLock(Real(file), offset, n, flags);
  }
  static void ShmBarrier(sqlite3_file* file) { Real(file)->pMethods->xShmBarrier(Real(file)); }
  static int ShmUnmap(sqlite3_file* file, int delete_flag) {
    return Real(file)->pMethods->xShmUnmap(Real(file), delete_flag);
  }
  static int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
    return Real(file)->pMethods->xFetch(Real(file), offset, amount, out);
  }
  static int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
    return Real(file)->pMethods->xUnfetch(Real(file), offset, p);
  }

  static constexpr sqlite3_io_methods kMethods = {.iVersion = 3,
                                                  .xClose = Close,
                                                  .xRead = Read,
                                                  .xWrite = Write,
                                                  .xTruncate = Truncate,
                                                  .xSync = Sync,
                                                  .xFileSize = FileSize,
                                                  .xLock = Lock,
                                                  .xUnlock = Unlock,
                                                  .xCheckReservedLock = CheckReservedLock,
                                                  .xFileControl = FileControl,
                                                  .xSectorSize = SectorSize,
                                                  .xDeviceCharacteristics = DeviceCharacteristics,
                                                  .xShmMap = ShmMap,
                                                  .xShmLock = ShmLock,
                                                  .xShmBarrier = ShmBarrier,
                                                  .xShmUnmap = ShmUnmap,
                                                  .xFetch = Fetch,
                                                  .xUnfetch = Unfetch};

  // The VFS's methods.
  static int Open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
    ShimFile* shim = new (file) ShimFile{{nullptr}, kMethods, &Self(vfs).env_, name ? name : "(a temporary file)"};
    sqlite3_file* real = shim->real();
    real->pMethods = nullptr;
    // The unix VFS is handed itself, never the shim: it keeps the VFS it was opened by and reads
    // its own pAppData from it.
    int rc = Base(vfs)->xOpen(Base(vfs), name, real, flags, out_flags);
    // SQLite calls xClose for a file whose pMethods is set after xOpen, whatever xOpen returned.
    if (real->pMethods == nullptr) {
      shim->~ShimFile();
      file->pMethods = nullptr;
      return rc;
    }
    const sqlite3_io_methods& unix_methods = *real->pMethods;
    sqlite3_io_methods& m = shim->methods;
    m.iVersion = std::min(unix_methods.iVersion, kMethods.iVersion);
    bool v2 = unix_methods.iVersion >= 2, v3 = unix_methods.iVersion >= 3;
    if (!v2 || unix_methods.xShmMap == nullptr) m.xShmMap = nullptr;
    if (!v2 || unix_methods.xShmLock == nullptr) m.xShmLock = nullptr;
    if (!v2 || unix_methods.xShmBarrier == nullptr) m.xShmBarrier = nullptr;
    if (!v2 || unix_methods.xShmUnmap == nullptr) m.xShmUnmap = nullptr;
    if (!v3 || unix_methods.xFetch == nullptr) m.xFetch = nullptr;
    if (!v3 || unix_methods.xUnfetch == nullptr) m.xUnfetch = nullptr;
    file->pMethods = &m;
    return rc;
  }
  static int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
    temper::Env& env = Self(vfs).env_;
    Status removed = env.Remove(name);
    if (!removed.ok()) {
      return removed.code() == StatusCode::kNotFound ? SQLITE_IOERR_DELETE_NOENT : SQLITE_IOERR_DELETE;
    }
    // As the unix VFS: the directory is synced when asked, so that the removal itself is durable.
    if (sync_dir & 1) {
      std::string dir = std::filesystem::path(name).parent_path().string();
      if (!env.SyncDir(dir.empty() ? "." : dir).ok()) return SQLITE_IOERR_DIR_FSYNC;
    }
    return SQLITE_OK;
  }
  static int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
    return Base(vfs)->xAccess(Base(vfs), name, flags, out);
  }
  static int FullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
    return Base(vfs)->xFullPathname(Base(vfs), name, size, out);
  }
  static void* DlOpen(sqlite3_vfs* vfs, const char* name) { return Base(vfs)->xDlOpen(Base(vfs), name); }
  static void DlError(sqlite3_vfs* vfs, int size, char* out) { Base(vfs)->xDlError(Base(vfs), size, out); }
  static void (*DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
    return Base(vfs)->xDlSym(Base(vfs), handle, symbol);
  }
  static void DlClose(sqlite3_vfs* vfs, void* handle) { Base(vfs)->xDlClose(Base(vfs), handle); }
  static int Randomness(sqlite3_vfs* vfs, int size, char* out) { return Base(vfs)->xRandomness(Base(vfs), size, out); }
  static int Sleep(sqlite3_vfs* vfs, int microseconds) { return Base(vfs)->xSleep(Base(vfs), microseconds); }
  static int CurrentTime(sqlite3_vfs* vfs, double* out) { return Base(vfs)->xCurrentTime(Base(vfs), out); }
  static int GetLastError(sqlite3_vfs* vfs, int size, char* out) {
    return Base(vfs)->xGetLastError(Base(vfs), size, out);
  }
  static int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
    return Base(vfs)->xCurrentTimeInt64(Base(vfs), out);
  }
  static int SetSystemCall(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr call) {
    return Base(vfs)->xSetSystemCall(Base(vfs), name, call);
  }
  static sqlite3_syscall_ptr GetSystemCall(sqlite3_vfs* vfs, const char* name) {
    return Base(vfs)->xGetSystemCall(Base(vfs), name);
  }
  static const char* NextSystemCall(sqlite3_vfs* vfs, const char* name) {
    return Base(vfs)->xNextSystemCall(Base(vfs), name);
  }
};

Result<std::unique_ptr<EnvVfs>> EnvVfs::Register(temper::Env& env) {
  sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  if (base == nullptr) return Status::Internal("SQLite has no default VFS to write the state store through");
  if (base->iVersion < 3) {
    return Status::Internal(fmt::format("SQLite's default VFS {} is version {}; the state store needs version 3",
                                        base->zName, base->iVersion));
  }
  std::unique_ptr<EnvVfs> self(new EnvVfs(env, base));
  self->name_ = fmt::format("temper-env-{}", static_cast<const void*>(self.get()));
  sqlite3_vfs& v = self->vfs_;
  v.iVersion = 3;
  v.szOsFile = static_cast<int>(kRealOffset) + base->szOsFile;
  v.mxPathname = base->mxPathname;
  v.zName = self->name_.c_str();
  v.pAppData = self.get();
  v.xOpen = EnvVfsCalls::Open;
  v.xDelete = EnvVfsCalls::Delete;
  v.xAccess = EnvVfsCalls::Access;
  v.xFullPathname = EnvVfsCalls::FullPathname;
  v.xDlOpen = EnvVfsCalls::DlOpen;
  v.xDlError = EnvVfsCalls::DlError;
  v.xDlSym = EnvVfsCalls::DlSym;
  v.xDlClose = EnvVfsCalls::DlClose;
  v.xRandomness = EnvVfsCalls::Randomness;
  v.xSleep = EnvVfsCalls::Sleep;
  v.xCurrentTime = EnvVfsCalls::CurrentTime;
  v.xGetLastError = EnvVfsCalls::GetLastError;
  v.xCurrentTimeInt64 = EnvVfsCalls::CurrentTimeInt64;
  v.xSetSystemCall = EnvVfsCalls::SetSystemCall;
  v.xGetSystemCall = EnvVfsCalls::GetSystemCall;
  v.xNextSystemCall = EnvVfsCalls::NextSystemCall;
  int rc = sqlite3_vfs_register(&v, /*makeDflt=*/0);
  if (rc != SQLITE_OK)
    return Status::Internal(fmt::format("registering SQLite VFS {}: {}", self->name_, sqlite3_errstr(rc)));
  return self;
}

EnvVfs::~EnvVfs() { sqlite3_vfs_unregister(&vfs_); }

}  // namespace temper::sqlite
