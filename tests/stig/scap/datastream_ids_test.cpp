#include "stig/scap/datastream_ids.h"

#include <fstream>

#include <catch2/catch.hpp>

#include "platform/scratch_dir.h"
#include "stig/scap/content.h"

namespace temper::stig {
namespace {

const std::string kSsg = std::string(kDefaultContentDir) + "/" + std::string(kUbuntu2004Datastream);

TEST_CASE("the ids of SSG's Ubuntu 20.04 datastream, read without OpenSCAP", "[stig][content]") {
  auto ids = ReadDatastreamIds(kSsg);
  REQUIRE(ids.ok());
  CHECK(ids->rules.count("xccdf_org.ssgproject.content_rule_sshd_disable_root_login") == 1);
  CHECK(ids->rules.count("xccdf_org.ssgproject.content_rule_accounts_tmout") == 1);
  CHECK(ids->profiles.count(std::string(kStigProfile)) == 1);
  CHECK(ids->rules.size() > 191);  // every rule of the benchmark, not only the profile's
  // Every rule OpenSCAP's load of the profile selects.
  auto content = Content::Load(kSsg, "stig");
  REQUIRE(content.ok());
  for (const std::string& id : content->profile_rule_ids()) CHECK(ids->rules.count(id) == 1);
}

TEST_CASE("a file that is not a datastream with rules is named as such", "[stig][content]") {
  ScratchDir dir = *ScratchDir::Create("", "ids");
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  CHECK(ReadDatastreamIds(dir.path() + "/missing.xml").status().code() == StatusCode::kNotFound);
  auto junk = ReadDatastreamIds(write("junk.xml", "not <xml"));
  CHECK(junk.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(junk.status().message(), Catch::StartsWith(dir.path() + "/junk.xml: not"));
  const std::string other = write("other.xml", "<html><body/></html>");
  CHECK(ReadDatastreamIds(other).status().message() ==
        other + ": not a SCAP source datastream (the document is <html>)");
  const std::string empty =
      write("empty.xml", "<ds:data-stream-collection xmlns:ds=\"http://scap.nist.gov/schema/scap/source/1.2\"/>");
  CHECK(ReadDatastreamIds(empty).status().message() == empty + ": the datastream defines no XCCDF rule");
}

}  // namespace
}  // namespace temper::stig
