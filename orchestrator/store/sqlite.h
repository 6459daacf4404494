// A thin RAII layer over the SQLite C API: a connection, prepared statements and transactions,
// every failure a Status carrying SQLite's own message and the SQL concerned.
//
// Thread safety: a Database and its Statements belong to one thread at a time; the StateStore that
// owns them serializes access with its own mutex.
#pragma once

#include <sqlite3.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper::sqlite {

class Statement;

class Database {
 public:
  // Opens (creating if needed) the database file. The connection uses extended result codes.
  static Result<Database> Open(const std::string& path);

  Database(Database&& other) noexcept : db_(other.db_), path_(std::move(other.path_)) { other.db_ = nullptr; }
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more statements that return no rows.
  Status Exec(std::string_view sql);
  Result<Statement> Prepare(std::string_view sql);
  // A single integer from a one-row query ("PRAGMA user_version").
  Result<int64_t> QueryInt(std::string_view sql);

  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  // A Status for the connection's last error: "<path>: <what>: <sqlite message>".
  Status Error(std::string_view what) const;

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

// A prepared statement. Parameters are 1-based as in SQLite; columns are 0-based.
class Statement {
 public:
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  template <std::integral T>
  Statement& Bind(int index, T value) {
    sqlite3_bind_int64(stmt_, index, static_cast<sqlite3_int64>(value));
    return *this;
  }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindNull(int index);

  // Makes the statement ready to run again with new bindings.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Advances to the next row: true when a row is available, false when done.
  Result<bool> Step();
  // Steps a statement that returns no rows.
  Status Run();

  int64_t ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }
  double ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Database* db_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace temper::sqlite
