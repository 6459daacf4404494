// Status and Result<T>: how every temper library reports failure.
//
// Library code never throws across its interface, never exits and never aborts; it returns a Status
// that says what went wrong and where (file and line of a config key, tensor name, rule id, host).
// An OK Status is a null pointer, so returning one costs nothing (the LevelDB design).
//
//   Status s = store.Open(path);
//   if (!s.ok()) return s.WithContext("opening the state store");
//
//   Result<Config> config = LoadConfig(path);
//   if (!config.ok()) return config.status();
//   Use(*config);
//
// Thread safety: a Status or Result is a value; distinct objects may be used from distinct threads.
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace temper {

// The codes follow gRPC's (orchestrator/ maps them one to one onto grpc::StatusCode).
enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,  // stored data is corrupt (a malformed file, a damaged database)
  kUnauthenticated,
  kIOError,  // an operating-system call failed; the message carries errno's text
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::source_location where = std::source_location::current());

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
#define TEMPER_STATUS_FACTORY(Name, Code)                                                                 \
  static Status Name(std::string message, std::source_location where = std::source_location::current()) { \
    return Status(StatusCode::Code, std::move(message), where);                                           \
  }
  TEMPER_STATUS_FACTORY(Cancelled, kCancelled)
  TEMPER_STATUS_FACTORY(InvalidArgument, kInvalidArgument)
  TEMPER_STATUS_FACTORY(DeadlineExceeded, kDeadlineExceeded)
  TEMPER_STATUS_FACTORY(NotFound, kNotFound)
  TEMPER_STATUS_FACTORY(AlreadyExists, kAlreadyExists)
  TEMPER_STATUS_FACTORY(PermissionDenied, kPermissionDenied)
  TEMPER_STATUS_FACTORY(ResourceExhausted, kResourceExhausted)
  TEMPER_STATUS_FACTORY(FailedPrecondition, kFailedPrecondition)
  TEMPER_STATUS_FACTORY(Aborted, kAborted)
  TEMPER_STATUS_FACTORY(OutOfRange, kOutOfRange)
  TEMPER_STATUS_FACTORY(Unimplemented, kUnimplemented)
  TEMPER_STATUS_FACTORY(Internal, kInternal)
  TEMPER_STATUS_FACTORY(Unavailable, kUnavailable)
  TEMPER_STATUS_FACTORY(DataLoss, kDataLoss)
  TEMPER_STATUS_FACTORY(Unauthenticated, kUnauthenticated)
  TEMPER_STATUS_FACTORY(IOError, kIOError)
#undef TEMPER_STATUS_FACTORY

  // An IOError whose message is `what` followed by strerror(errnum).
  static Status FromErrno(int errnum, std::string_view what,
                          std::source_location where = std::source_location::current());

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The human message, without the code name; empty when OK.
  const std::string& message() const;
  // Where the error was created in temper's sources (for debug logs, not for users).
  std::source_location where() const;

  // "NotFound: batch 17 does not exist", or "OK".
  std::string ToString() const;

  // Prefixes the message with `context` ("context: message"); an OK status stays OK.
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::source_location where;
  };
  std::unique_ptr<State> state_;
};

// A value or the Status explaining why there is none. Holding an OK Status is a programming error:
// constructing a Result from Status::OK() yields an Internal error instead.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design, like std::expected
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Precondition for the accessors: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace temper

#define TEMPER_CONCAT_INNER(a, b) a##b
#define TEMPER_CONCAT(a, b) TEMPER_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not OK.
#define TEMPER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::temper::Status temper_status_ = (expr);        \
    if (!temper_status_.ok()) return temper_status_; \
  } while (0)

// `TEMPER_ASSIGN_OR_RETURN(auto x, Compute());` declares x from a Result, or returns its Status.
#define TEMPER_ASSIGN_OR_RETURN(lhs, expr) \
  TEMPER_ASSIGN_OR_RETURN_IMPL(TEMPER_CONCAT(temper_result_, __LINE__), lhs, expr)
#define TEMPER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
