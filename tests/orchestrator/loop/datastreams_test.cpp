#include "orchestrator/loop/datastreams.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::TempDir;

// SSG's datastream, copied so the case can make a new version of it.
std::string CopyOfSsg(const TempDir& dir) {
  const std::string path = dir / std::string(stig::kUbuntu2004Datastream);
  std::filesystem::copy_file(std::string(stig::kDefaultContentDir) + "/" + std::string(stig::kUbuntu2004Datastream),
                             path);
  return path;
}

// A new version of the file: same bytes, a modification time a second later.
void Touch(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_sec += 1;
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

TEST_CASE("datastreams: ids and content are read once per version of the file, and content handed out stays valid") {
  TempDir dir;
  const std::string path = CopyOfSsg(dir);
  Logger log{LogLevel::kError};
  Datastreams datastreams(log);

  auto ids = datastreams.Ids(path);
  REQUIRE(ids.ok());
  CHECK((*ids)->rules.count("xccdf_org.ssgproject.content_rule_accounts_tmout") == 1);
  CHECK(datastreams.Ids(path)->get() == ids->get());  // not read again
  auto content = datastreams.Content(path, "stig");
  REQUIRE(content.ok());
  CHECK(*datastreams.Content(path, "stig") == *content);
  // Every rule a batch on the profile can run is one a submit accepts: both come from one file.
  for (const std::string& id : (*content)->content.profile_rule_ids()) CHECK((*ids)->rules.count(id) == 1);

  // The file replaced: both read again; the content a running batch holds is still there.
  Touch(path);
  auto ids_again = datastreams.Ids(path);
  REQUIRE(ids_again.ok());
  CHECK(ids_again->get() != ids->get());
  auto content_again = datastreams.Content(path, "stig");
  REQUIRE(content_again.ok());
  CHECK(*content_again != *content);
  CHECK((*content)->content.profile().id == (*content_again)->content.profile().id);

  const std::string missing = dir / "missing-ds.xml";
  CHECK(datastreams.Ids(missing).status().code() == StatusCode::kNotFound);
  CHECK(datastreams.Content(missing, "stig").status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace temper
