#include "platform/fault_env.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "scratch_space.h"

namespace temper {
namespace {

using Op = FaultEnv::Op;

// A fresh directory for one case, removed with everything under it (ScratchPath).
struct ScratchDir {
  ::temper::testing::ScratchPath scratch{"fault-env-test"};
  const std::string path = (std::filesystem::create_directories(scratch.path()), scratch.path());
};

std::string ReadAll(const std::string& path) {
  auto file = Env::Default().OpenSequential(path);
  REQUIRE(file.ok());
  std::string out(1 << 16, '\0');
  out.resize(*(*file)->Read(out.data(), out.size()));
  return out;
}

TEST_CASE("FaultEnv fails exactly the Nth write, once, after writing half of it", "[stig][env]") {
  ScratchDir dir;
  FaultEnv env;
  env.FailNth(Op::kWrite, 3);
  auto file = *env.OpenAppendable(dir.path + "/f", 0600);
  REQUIRE(file->Append("one\n").ok());
  REQUIRE(file->Append("two\n").ok());
  CHECK_FALSE(env.fired());
  Status failed = file->Append("three\n");
  CHECK(failed.code() == StatusCode::kIOError);
  CHECK(failed.message() == "injected fault: write #3 (append to " + dir.path + "/f)");
  CHECK(env.fired());
  CHECK(env.fired_at() == "write #3 (append to " + dir.path + "/f)");
  CHECK(ReadAll(dir.path + "/f") == "one\ntwo\nthr");  // torn, as on a full disk
  REQUIRE(file->Append("ee\n").ok());                  // the next write passes
  CHECK(env.count(Op::kWrite) == 4);
  CHECK(env.count(Op::kSync) == 0);
  // Truncates count as writes; counting restarts from the arming.
  env.FailNth(Op::kWrite, 1);
  CHECK_FALSE(env.fired());
  CHECK(env.Truncate(dir.path + "/f", 0).code() == StatusCode::kIOError);
  CHECK(ReadAll(dir.path + "/f") == "one\ntwo\nthree\n");
}

TEST_CASE("FaultEnv fails the Nth fsync, of files and directories alike", "[stig][env]") {
  ScratchDir dir;
  FaultEnv env;
  env.FailNth(Op::kSync, 2);
  auto file = *env.OpenAppendable(dir.path + "/f", 0600);
  REQUIRE(file->Sync().ok());
  Status failed = env.SyncDir(dir.path);
  CHECK(failed.code() == StatusCode::kIOError);
  CHECK_THAT(failed.message(), Catch::Contains("fsync #2 (fsync directory " + dir.path + ")"));
  REQUIRE(file->Sync().ok());
  CHECK(env.count(Op::kSync) == 3);
}

TEST_CASE("FaultEnv fails the Nth process start without starting it", "[stig][env]") {
  ScratchDir dir;
  FaultEnv env;
  env.FailNth(Op::kProcessStart, 2);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo ran >> " + dir.path + "/log"};
  REQUIRE(env.RunProcess(spec).ok());
  auto failed = env.RunProcess(spec);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "injected fault: process start #2 (/bin/sh)");
  REQUIRE(env.RunProcess(spec).ok());
  CHECK(ReadAll(dir.path + "/log") == "ran\nran\n");
}

TEST_CASE("FaultEnv armed from the Nth fails every later operation until disarmed", "[stig][env]") {
  FaultEnv env;
  env.FailFromNth(Op::kProcessStart, 2);
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  CHECK(env.RunProcess(spec).ok());
  CHECK_FALSE(env.RunProcess(spec).ok());
  CHECK_FALSE(env.RunProcess(spec).ok());
  CHECK(env.fired_at() == "process start #2 (/bin/true)");  // the first it hit
  env.FailNth(Op::kProcessStart, 0);
  CHECK(env.RunProcess(spec).ok());
}

TEST_CASE("FaultEnv's clock is the base's until set, then moves only when advanced", "[stig][env]") {
  FaultEnv env;
  auto real = std::chrono::system_clock::now();
  CHECK(env.Now() - real < std::chrono::seconds(5));
  const auto when = std::chrono::sys_days(std::chrono::year{2030} / 1 / 1);
  env.SetClock(when);
  auto steady = env.SteadyNow();
  CHECK(env.Now() == when);
  CHECK(env.SteadyNow() == steady);
  env.AdvanceClock(std::chrono::milliseconds(2500));
  CHECK(env.Now() == when + std::chrono::milliseconds(2500));
  CHECK(env.SteadyNow() - steady == std::chrono::milliseconds(2500));
}

}  // namespace
}  // namespace temper
