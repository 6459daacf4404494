// FaultEnv: an Env for tests that forwards to another Env (the real one by default) and fails the
// operation a test picks: the Nth write, the Nth fsync or the Nth process start, counted from when
// it was armed, as SQLite's own I/O-error tests fail the Nth call. A test runs the same work with
// N = 1, 2, ... until the work completes without reaching the Nth, and checks after each run that
// what was committed survived and that the component recovers.
//
// What counts (env.h says what goes through an Env):
//   write          WritableFile::Append, WriteAt, both Truncates (a change of a file's bytes or length)
//   fsync          WritableFile::Sync, Sync(PositionalFile), SyncDir
//   process start  RunProcess
// Opens, reads, directory creation and removal pass through uncounted.
// A failed write first writes the first half of its data, as a disk that fills up mid-write does,
// then returns IOError; a failed fsync or truncate does nothing; a failed process start starts
// nothing. Each injected error is an IOError whose message starts "injected fault:" and names the
// operation ("injected fault: write #3 (append to /tmp/x/batch-1.jsonl)"). An armed fault fires once
// (later operations pass, as after an operator freed space) unless armed with FailFromNth.
//
// The clock: the base Env's until SetClock; from then Now() is the time set and SteadyNow() moves
// only with AdvanceClock, so timestamps and elapsed times are exact.
// Thread safety: all methods may be called from any thread; files belong to one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "platform/env.h"

namespace temper {

class FaultEnv final : public Env {
 public:
  enum class Op { kWrite, kSync, kProcessStart };
  static constexpr int kOpCount = 3;

  // `base` performs every operation that is not failed; it must outlive this Env.
  explicit FaultEnv(Env& base = Env::Default()) : base_(base) {}
  FaultEnv(const FaultEnv&) = delete;
  FaultEnv& operator=(const FaultEnv&) = delete;

  // Fails the `n`th operation of kind `op` from now on (n >= 1; 0 disarms). Replaces an earlier arming.
  void FailNth(Op op, std::uint64_t n);
  // Fails the `n`th operation of kind `op` and every later one, until FailNth: a disk that stays full.
  void FailFromNth(Op op, std::uint64_t n);
  // True once the armed fault has fired (false again after FailNth).
  bool fired() const;
  // The first operation the fault hit ("write #3 (append to /x)"); empty until it fired.
  std::string fired_at() const;
  // Operations of kind `op` since construction, failed ones included.
  std::uint64_t count(Op op) const;

  // From now on Now() returns `now`, and SteadyNow() a time that moves only with AdvanceClock.
  void SetClock(std::chrono::system_clock::time_point now);
  // Moves both clocks forward (after SetClock; before it, the base's clocks run by themselves).
  void AdvanceClock(std::chrono::milliseconds by);

  Status CreateDirs(const std::string& path) override { return base_.CreateDirs(path); }
  Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path, mode_t mode) override;
  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override {
    return base_.OpenSequential(path);
  }
  Status Truncate(const std::string& path, std::uint64_t size) override;
  Status Remove(const std::string& path) override { return base_.Remove(path); }
  Status SyncDir(const std::string& path) override;
  Status WriteAt(PositionalFile& file, std::uint64_t offset, std::string_view data) override;
  Status Sync(PositionalFile& file) override;
  Status Truncate(PositionalFile& file, std::uint64_t size) override;
  Result<ProcessResult> RunProcess(const ProcessSpec& spec) override;
  std::chrono::system_clock::time_point Now() override;
  std::chrono::steady_clock::time_point SteadyNow() override;

  // Counts one operation of kind `op`, described by `what`: OK, or the injected IOError when it is
  // the armed one. Used by this Env's files too.
  Status Check(Op op, const std::string& what);

 private:
  Env& base_;
  mutable std::mutex mu_;
  std::uint64_t counts_[kOpCount] = {};
  std::optional<Op> armed_op_;
  std::uint64_t armed_at_ = 0;  // the count of armed_op_ that fails
  bool sticky_ = false;         // and every later one
  std::string fired_at_;
  std::optional<std::chrono::system_clock::time_point> wall_;
  std::chrono::steady_clock::time_point steady_{};
};

}  // namespace temper
