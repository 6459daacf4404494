#include "platform/env.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "scratch_space.h"

namespace temper {
namespace {

// A fresh directory for one case, removed with everything under it (ScratchPath).
struct ScratchDir {
  ::temper::testing::ScratchPath scratch{"env-test"};
  const std::string path = (std::filesystem::create_directories(scratch.path()), scratch.path());
};

std::string ReadAll(Env& env, const std::string& path) {
  auto file = env.OpenSequential(path);
  REQUIRE(file.ok());
  std::string out;
  char buf[7];  // small, so reads take several calls
  while (true) {
    auto n = (*file)->Read(buf, sizeof buf);
    REQUIRE(n.ok());
    if (*n == 0) return out;
    out.append(buf, *n);
  }
}

TEST_CASE("the real Env appends, syncs, reads, truncates and removes files", "[stig][env]") {
  ScratchDir dir;
  Env& env = Env::Default();
  const std::string sub = dir.path + "/a/b";
  REQUIRE(env.CreateDirs(sub).ok());
  REQUIRE(env.CreateDirs(sub).ok());  // an existing directory is fine
  const std::string path = sub + "/f";
  {
    auto file = env.OpenAppendable(path, 0640);
    REQUIRE(file.ok());
    CHECK((*file)->path() == path);
    REQUIRE((*file)->Append("hello ").ok());
    REQUIRE((*file)->Append("world\n").ok());
    REQUIRE((*file)->Sync().ok());
  }
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0640 & ~::umask(::umask(0))));
  {
    auto file = env.OpenAppendable(path, 0640);  // appends, never truncates
    REQUIRE((*file)->Append("again\n").ok());
  }
  CHECK(ReadAll(env, path) == "hello world\nagain\n");
  REQUIRE(env.Truncate(path, 5).ok());
  CHECK(ReadAll(env, path) == "hello");
  REQUIRE(env.SyncDir(sub).ok());
  REQUIRE(env.Remove(path).ok());
  CHECK(env.Remove(path).code() == StatusCode::kNotFound);
  CHECK(env.OpenSequential(path).status().code() == StatusCode::kNotFound);
}

TEST_CASE("the real Env names the path in its errors", "[stig][env]") {
  ScratchDir dir;
  Env& env = Env::Default();
  auto opened = env.OpenAppendable(dir.path + "/missing/f", 0600);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.status().code() == StatusCode::kIOError);
  CHECK_THAT(opened.status().message(), Catch::Contains(dir.path + "/missing/f"));
  Status cut = env.Truncate(dir.path + "/missing", 0);
  CHECK_THAT(cut.message(), Catch::Contains(dir.path + "/missing"));
  std::ofstream(dir.path + "/file") << "x";
  Status sync = env.SyncDir(dir.path + "/file");
  CHECK(sync.code() == StatusCode::kIOError);
  CHECK_THAT(sync.message(), Catch::Contains(dir.path + "/file"));
  CHECK_FALSE(env.CreateDirs(dir.path + "/file/sub").ok());
}

TEST_CASE("the real Env runs processes as RunProcess and reads the system clocks", "[stig][env]") {
  Env& env = Env::Default();
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "cat; exit 4"};
  spec.stdin_data = "in";
  auto r = env.RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->out == "in");
  CHECK(r->exit_code == 4);
  spec.argv = {"/nonexistent/program"};
  CHECK(env.RunProcess(spec).status().code() == StatusCode::kIOError);
  auto before = std::chrono::system_clock::now();
  auto now = env.Now();
  CHECK(now >= before);
  CHECK(now - before < std::chrono::seconds(5));
  auto steady = env.SteadyNow();
  CHECK(env.SteadyNow() >= steady);
}

}  // namespace
}  // namespace temper
