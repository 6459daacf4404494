// Where a client-named datastream may come from: real directories, owners, modes, symlinks and a
// POSIX ACL made for each case (the suite runs as root).
#include "stig/scap/content_trust.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include <catch2/catch.hpp>

#include "platform/scratch_dir.h"
#include "skip.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// Two content directories (0755, root's) under a private scratch directory, each with a datastream.
struct Dirs {
  ScratchDir scratch = *ScratchDir::Create("", "trust");
  std::string a = scratch.path() + "/a";
  std::string b = scratch.path() + "/b";
  std::string outside = scratch.path() + "/home";
  Dirs() {
    for (const std::string& d : {a, b, outside}) {
      fs::create_directory(d);
      ::chmod(d.c_str(), 0755);
    }
    ::chmod(scratch.path().c_str(), 0755);
    Write(a + "/ssg-one-ds.xml");
    Write(b + "/ssg-two-ds.xml");
    Write(outside + "/ds.xml");
  }
  static void Write(const std::string& path) {
    std::ofstream(path) << "<ds/>\n";
    ::chmod(path.c_str(), 0644);
  }
  std::vector<std::string> dirs() const { return {a, b}; }
  std::string listed() const { return "content_dirs: " + a + ", " + b; }
};

TEST_CASE("A bare name is found in the content directories in order, and a path inside one is taken",
          "[stig][content_trust]") {
  Dirs d;
  auto two = ResolveTrustedDatastream("ssg-two-ds.xml", d.dirs());
  INFO(two.status().ToString());
  REQUIRE(two.ok());
  CHECK(*two == d.b + "/ssg-two-ds.xml");
  Dirs::Write(d.b + "/ssg-one-ds.xml");  // the same name later in the list does not shadow the first
  CHECK(*ResolveTrustedDatastream("ssg-one-ds.xml", d.dirs()) == d.a + "/ssg-one-ds.xml");
  CHECK(*ResolveTrustedDatastream(d.b + "/ssg-two-ds.xml", d.dirs()) == d.b + "/ssg-two-ds.xml");
  // A symlink inside a content directory to a file in another one resolves and stays trusted.
  fs::create_symlink(d.b + "/ssg-two-ds.xml", d.a + "/alias-ds.xml");
  CHECK(*ResolveTrustedDatastream("alias-ds.xml", d.dirs()) == d.b + "/ssg-two-ds.xml");
}

TEST_CASE("A datastream outside the content directories is refused naming it and the directories",
          "[stig][content_trust]") {
  Dirs d;
  auto r = ResolveTrustedDatastream(d.outside + "/ds.xml", d.dirs());
  REQUIRE(r.status().code() == StatusCode::kPermissionDenied);
  CHECK(r.status().message() == "datastream " + d.outside + "/ds.xml is not inside a content directory (" + d.listed() +
                                    "): temperd loads datastreams only from there");
  // Through a symlink placed in a content directory, or "..": the resolved path decides.
  fs::create_symlink(d.outside + "/ds.xml", d.a + "/evil-ds.xml");
  auto via_link = ResolveTrustedDatastream("evil-ds.xml", d.dirs());
  REQUIRE(via_link.status().code() == StatusCode::kPermissionDenied);
  // The refusal does not say where the link leads: temperd resolves as root, for any client.
  CHECK(via_link.status().message() == "datastream " + d.a + "/evil-ds.xml leads out of the content directories (" +
                                           d.listed() +
                                           ") through a symlink: temperd loads datastreams only from there");
  CHECK(via_link.status().message().find(d.outside) == std::string::npos);
  CHECK(ResolveTrustedDatastream(d.a + "/../home/ds.xml", d.dirs()).status().code() == StatusCode::kPermissionDenied);
  // A path that does not exist outside the directories says no more than that.
  CHECK(ResolveTrustedDatastream("/nonexistent/ds.xml", d.dirs()).status().code() == StatusCode::kPermissionDenied);
}

TEST_CASE("A path outside the content directories is no oracle: existing or not, a link or not, one answer",
          "[stig][content_trust]") {
  Dirs d;
  fs::create_symlink(d.outside + "/ds.xml", d.outside + "/link-ds.xml");
  auto refusal = [&](const std::string& path) {
    return "datastream " + path + " is not inside a content directory (" + d.listed() +
           "): temperd loads datastreams only from there";
  };
  // Root could resolve each of these; the client learns only that its text lies outside.
  for (const std::string& path :
       {d.outside + "/ds.xml", d.outside + "/missing-ds.xml", d.outside + "/link-ds.xml", std::string("/proc/self/cwd"),
        std::string("/proc/1/fd/0"), std::string("/root/.ssh/id_rsa")}) {
    auto r = ResolveTrustedDatastream(path, d.dirs());
    REQUIRE(r.status().code() == StatusCode::kPermissionDenied);
    CHECK(r.status().message() == refusal(path));
  }
}

TEST_CASE("Names that are not plain file names, missing files and non-files are named errors",
          "[stig][content_trust]") {
  Dirs d;
  auto rel = ResolveTrustedDatastream("../home/ds.xml", d.dirs());
  CHECK(rel.status().code() == StatusCode::kInvalidArgument);
  CHECK(rel.status().message() ==
        "datastream: '../home/ds.xml' must be a file name in a content directory or an absolute "
        "path (" +
            d.listed() + ")");
  CHECK(ResolveTrustedDatastream("", d.dirs()).status().code() == StatusCode::kInvalidArgument);
  auto typo = ResolveTrustedDatastream("ssg-tow-ds.xml", d.dirs());
  CHECK(typo.status().code() == StatusCode::kNotFound);
  CHECK(typo.status().message() == "datastream 'ssg-tow-ds.xml' is in no content directory (" + d.listed() +
                                       ") (did you mean 'ssg-two-ds.xml', 'ssg-one-ds.xml'?)");
  auto missing = ResolveTrustedDatastream(d.a + "/ssg-one-sd.xml", d.dirs());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message() ==
        "datastream " + d.a + "/ssg-one-sd.xml does not exist (did you mean 'ssg-one-ds.xml'?)");
  fs::create_directory(d.a + "/dir-ds.xml");
  CHECK(ResolveTrustedDatastream("dir-ds.xml", d.dirs()).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A file or directory on the path that someone else can write is refused", "[stig][content_trust]") {
  Dirs d;
  const std::string file = d.a + "/ssg-one-ds.xml";
  auto refused = [&](const std::string& why) {
    auto r = ResolveTrustedDatastream(file, d.dirs());
    INFO(r.status().ToString());
    REQUIRE(r.status().code() == StatusCode::kPermissionDenied);
    CHECK(r.status().message().find(why) != std::string::npos);
  };
  SECTION("owned by another user") {
    REQUIRE(::chown(file.c_str(), 65534, 0) == 0);
    refused("the file " + file + " is owned by uid 65534");
  }
  SECTION("group-writable") {
    REQUIRE(::chown(file.c_str(), 0, 50) == 0);
    REQUIRE(::chmod(file.c_str(), 0664) == 0);
    refused("the file " + file + " is writable by group 50");
  }
  SECTION("a world-writable content directory") {
    REQUIRE(::chmod(d.a.c_str(), 0777) == 0);
    refused("the directory " + d.a + " is writable by everyone");
  }
  SECTION("a world-writable sticky directory holding someone else's directory") {
    REQUIRE(::chmod(d.scratch.path().c_str(), 01777) == 0);
    REQUIRE(::chown(d.a.c_str(), 65534, 0) == 0);
    refused("the directory " + d.scratch.path() + " is writable by everyone");
  }
  SECTION("a sticky world-writable directory (like /tmp) is safe for what root owns") {
    REQUIRE(::chmod(d.scratch.path().c_str(), 01777) == 0);
    CHECK(ResolveTrustedDatastream(file, d.dirs()).ok());
  }
}

// A case of its own, so that a file system without POSIX ACLs skips this check alone.
TEST_CASE("A file with a POSIX ACL granting a user write is refused", "[stig][content_trust]") {
  Dirs d;
  const std::string file = d.a + "/ssg-one-ds.xml";
  // version 2; USER_OBJ rw-, USER 1000 rw-, GROUP_OBJ r--, MASK rw-, OTHER r--
  const std::uint16_t entries[][2] = {{0x01, 6}, {0x02, 6}, {0x04, 4}, {0x10, 6}, {0x20, 4}};
  const std::uint32_t ids[] = {0xffffffff, 1000, 0xffffffff, 0xffffffff, 0xffffffff};
  std::vector<unsigned char> acl = {2, 0, 0, 0};
  for (int i = 0; i < 5; ++i) {
    for (int b = 0; b < 2; ++b)
      acl.insert(acl.end(),
                 {static_cast<unsigned char>(entries[i][b]), static_cast<unsigned char>(entries[i][b] >> 8)});
    for (int k = 0; k < 4; ++k) acl.push_back(static_cast<unsigned char>(ids[i] >> (8 * k)));
  }
  if (::setxattr(file.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) != 0) {
    TEMPER_SKIP("the file system here has no POSIX ACLs");
  }
  auto r = ResolveTrustedDatastream(file, d.dirs());
  INFO(r.status().ToString());
  REQUIRE(r.status().code() == StatusCode::kPermissionDenied);
  CHECK(r.status().message().find("the file " + file + " has a POSIX ACL letting user 1000 write it") !=
        std::string::npos);
}

}  // namespace
}  // namespace temper::stig
