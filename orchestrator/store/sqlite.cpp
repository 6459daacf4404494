#include "orchestrator/store/sqlite.h"

#include <filesystem>

#include <fmt/format.h>

#include "orchestrator/store/private_files.h"
#include "platform/host_disk.h"
#include "platform/sandbox_caps.h"

namespace temper::sqlite {

namespace {

// " (the file system holding DIR: N free of M)": what a full database's error names, so that the
// operator reading "database or disk is full" learns which disk, and how full it is.
std::string DiskOf(const std::string& db_path) {
  std::string dir = std::filesystem::path(db_path).parent_path().string();
  if (dir.empty()) dir = ".";
  Result<temper::HostDiskSpace> space = temper::HostDiskSpaceOf(dir);
  if (!space.ok()) return fmt::format(" (the file system holding {}: {})", dir, space.status().message());
  return fmt::format(" (the file system holding {}: {} free of {})", dir, temper::FormatBytes(space->free),
                     temper::FormatBytes(space->total));
}

}  // namespace

Result<Database> Database::Open(const std::string& path, const std::string& vfs) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           vfs.empty() ? nullptr : vfs.c_str());
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::IOError(fmt::format("cannot open database {}: {}", path, message));
  }
  sqlite3_extended_result_codes(db, 1);
  // Root's alone (private_files.h), whatever the umask: SQLite makes a new database 0644 less the
  // umask, and its -wal and -shm files later with the database's own mode.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    Result<bool> made = MakePrivate(path + suffix);
    if (!made.ok()) {
      sqlite3_close(db);
      return made.status().WithContext("opening database " + path);
    }
  }
  return Database(db, path);
}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    other.db_ = nullptr;
  }
  return *this;
}

Database::~Database() { sqlite3_close(db_); }

Status Database::Error(std::string_view what) const {
  int code = sqlite3_extended_errcode(db_);
  std::string message = fmt::format("{}: {}: {}", path_, what, sqlite3_errmsg(db_));
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::DataLoss(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(message);
    case SQLITE_FULL:
      return Status::ResourceExhausted(message + DiskOf(path_));
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
      return Status::IOError(message);
    case SQLITE_CONSTRAINT:
      return Status::AlreadyExists(message);
    default:
      return Status::Internal(message);
  }
}

Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error(fmt::format("executing \"{}\"", text.substr(0, 120)));
  }
  return Status::OK();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK) {
    return Error(fmt::format("preparing \"{}\"", sql.substr(0, 120)));
  }
  return Statement(this, stmt);
}

Result<int64_t> Database::QueryInt(std::string_view sql) {
  TEMPER_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  TEMPER_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return Status::Internal(fmt::format("{}: \"{}\" returned no row", path_, sql));
  return stmt.ColumnInt(0);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(fmt::format("running \"{}\"", std::string(sqlite3_sql(stmt_)).substr(0, 120)));
}

Status Statement::Run() {
  TEMPER_ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  return Status::OK();
}

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

Result<Transaction> Transaction::Begin(Database& db) {
  TEMPER_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  TEMPER_RETURN_IF_ERROR(db_->Exec("COMMIT"));
  db_ = nullptr;
  return Status::OK();
}

}  // namespace temper::sqlite
