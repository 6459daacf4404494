// Reading sed scripts for what they run, write and insert.
#include "policy/sed_script.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

SedEffects Read(std::string_view script) {
  auto r = ReadSedScript(script);
  INFO(script);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("sed scripts: inserted text, commands run and files written") {
  CHECK(Read("s/^PASS_MAX_DAYS.*/PASS_MAX_DAYS 60/").inserted == Strings{"PASS_MAX_DAYS 60"});
  CHECK(Read("s#\\(a\\)#\\1 \\#b#g; /x/d").inserted == Strings{"\\1 #b"});
  CHECK(Read("$a\\\nauth required pam_x.so").inserted == Strings{"auth required pam_x.so"});
  CHECK(Read("/^\\[Service\\]/a ExecStart=/bin/x").inserted == Strings{"ExecStart=/bin/x"});
  CHECK(Read("1i # header\n2c\\\nnew").inserted == Strings{"# header", "new"});
  CHECK(Read("\\#x#s/a/b/;y/abc/xyz/").inserted == Strings{"b"});
  CHECK(Read("1e reboot").runs == Strings{"reboot"});
  CHECK(Read("s/.*/date/e").runs == Strings{""});
  CHECK(Read("w /etc/cron.d/x").writes == Strings{"/etc/cron.d/x"});
  CHECK(Read("s/a/b/w /tmp/out").writes == Strings{"/tmp/out"});
  CHECK(Read("/a/,/b/{ s/x/y/; p }").inserted == Strings{"y"});
  CHECK(Read(":top\nN\nb top").inserted.empty());
}

TEST_CASE("sed scripts whose commands cannot be told apart are errors, with the column") {
  for (const char* bad : {"s/a/b", "y/ab/", "/unterminated", "k", "s"}) {
    INFO(bad);
    auto r = ReadSedScript(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("column"));
  }
}
