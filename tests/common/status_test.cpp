#include "common/status.h"

#include <cerrno>

#include <catch2/catch.hpp>

namespace temper {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  TEMPER_ASSIGN_OR_RETURN(int h, Half(x));
  TEMPER_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckPositive(int x) {
  if (x <= 0) return Status::OutOfRange("not positive");
  return Status::OK();
}

Status Chain(int x) {
  TEMPER_RETURN_IF_ERROR(CheckPositive(x));
  return Status::OK();
}

TEST_CASE("an OK status has no message and prints OK") {
  Status s;
  CHECK(s.ok());
  CHECK(s.code() == StatusCode::kOk);
  CHECK(s.message().empty());
  CHECK(s.ToString() == "OK");
  CHECK(s.WithContext("ignored").ok());
}

TEST_CASE("an error carries code, message, source location and context") {
  Status s = Status::NotFound("batch 17 does not exist");
  CHECK_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(s.ToString() == "NotFound: batch 17 does not exist");
  CHECK(std::string(s.where().file_name()).find("status_test.cpp") != std::string::npos);
  Status c = s.WithContext("GetBatch");
  CHECK(c.code() == StatusCode::kNotFound);
  CHECK(c.message() == "GetBatch: batch 17 does not exist");
  Status copy = c;
  CHECK(copy.message() == c.message());
}

TEST_CASE("FromErrno names the call and the OS error") {
  Status s = Status::FromErrno(ENOENT, "open /nope");
  CHECK(s.code() == StatusCode::kIOError);
  CHECK(s.message() == "open /nope: No such file or directory");
}

TEST_CASE("Result propagates values and errors through the macros") {
  REQUIRE(Quarter(8).ok());
  CHECK(*Quarter(8) == 2);
  Result<int> r = Quarter(6);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "odd: 3");
  CHECK(Chain(1).ok());
  CHECK(Chain(0).code() == StatusCode::kOutOfRange);
}

TEST_CASE("a Result built from an OK status is an internal error, not a value") {
  Result<int> r = Status::OK();
  CHECK_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInternal);
}

}  // namespace
}  // namespace temper
