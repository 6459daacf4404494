#include "stig/change_set.h"
#include "stig/change_set_redaction.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper::stig {
namespace {

ChangeSet Sample() {
  ChangeSet cs;
  cs.files.push_back(
      {.path = "/etc/issue.net",
       .change = FileChangeKind::kModified,
       .before = FileState{FileType::kFile, 0644, 0, 0, 20, ""},
       .after = FileState{FileType::kFile, 0644, 0, 0, 31, ""},
       .diff = "--- a/etc/issue.net\n+++ b/etc/issue.net\n@@ -1 +1 @@\n-Debian\n+Authorized use only\n"});
  cs.files.push_back({.path = "/etc/localtime",
                      .change = FileChangeKind::kModified,
                      .before = FileState{FileType::kSymlink, 0777, 0, 0, 27, "/usr/share/zoneinfo/Etc/UTC"},
                      .after = FileState{FileType::kSymlink, 0777, 0, 0, 9, "/dev/null"}});
  cs.files.push_back({.path = "/etc/sudoers.d",
                      .change = FileChangeKind::kMetadata,
                      .before = FileState{FileType::kDir, 02755, 0, 0, 0, ""},
                      .after = FileState{FileType::kDir, 0750, 0, 42, 0, ""}});
  cs.files.push_back({.path = "/usr/bin/tool",
                      .change = FileChangeKind::kAdded,
                      .after = FileState{FileType::kFile, 04755, 0, 0, 9000, ""},
                      .binary = true});
  cs.files.push_back({.path = "/var/log/big",
                      .change = FileChangeKind::kDeleted,
                      .before = FileState{FileType::kFile, 0640, 0, 4, 300000, ""},
                      .diff_skipped = "larger than 256 KiB"});
  cs.packages = {{"aide 0.17.4-1"}, {"telnet 0.17-44"}, {"bash 5.2-1 -> 5.2-2"}};
  cs.services = {{"auditd.service"}, {"cron.service"}, {"ctrl-alt-del.target"}, {}};
  return cs;
}

TEST_CASE("A change set round-trips through its JSON, field for field", "[stig][change_set]") {
  ChangeSet cs = Sample();
  std::string json = cs.ToJson();
  auto back = ChangeSet::FromJson(json);
  INFO(json);
  REQUIRE(back.ok());
  CHECK(*back == cs);
  CHECK(back->ToJson() == json);
  // The documented shape: octal modes as strings, null for an absent side, links only on symlinks.
  CHECK(json.find(R"("mode":"2755")") != std::string::npos);
  CHECK(json.find(R"("mode":"4755")") != std::string::npos);
  CHECK(json.find(R"("before":null)") != std::string::npos);
  CHECK(json.find(R"("link":"/dev/null")") != std::string::npos);
  CHECK(json.find(R"("link":"")") == std::string::npos);
  CHECK(json.find(R"("upgraded":["bash 5.2-1 -> 5.2-2"])") != std::string::npos);
}

TEST_CASE("An empty change set is empty in both forms", "[stig][change_set]") {
  ChangeSet none;
  CHECK(none.empty());
  CHECK(none.Summary() == "no changes");
  auto back = ChangeSet::FromJson(none.ToJson());
  REQUIRE(back.ok());
  CHECK(back->empty());
  // Attempts stored before change sets were recorded have an empty column.
  auto legacy = ChangeSet::FromJson("");
  REQUIRE(legacy.ok());
  CHECK(legacy->empty());
}

TEST_CASE("The summary counts files by kind, packages and services", "[stig][change_set]") {
  CHECK(Sample().Summary() ==
        "5 files (1 added, 2 modified, 1 deleted, 1 metadata); 1 package installed; 1 package removed; "
        "1 package upgraded; 1 service enabled; 1 service disabled; 1 service masked");
}

TEST_CASE("Malformed change sets are refused with the field named", "[stig][change_set]") {
  auto error = [](const char* json) { return ChangeSet::FromJson(json).status().message(); };
  CHECK(error("{") == "change set: not valid JSON");
  CHECK(error("[]") == "change set: expected a JSON object");
  CHECK(error(R"({"files":{}})") == "files: expected an array");
  CHECK(error(R"({"files":[{"path":"etc/x","change":"added"}]})") == "files[0].path: expected an absolute path");
  CHECK(error(R"({"files":[{"path":"/x","change":"renamed"}]})") ==
        "files[0].change: \"renamed\" is not added, modified, deleted or metadata");
  CHECK(
      error(
          R"({"files":[{"path":"/x","change":"added","after":{"type":"file","mode":"0999","uid":0,"gid":0,"size":1}}]})") ==
      "files[0].after.mode: \"0999\" is not an octal mode such as \"0644\"");
  CHECK(
      error(
          R"({"files":[{"path":"/x","change":"added","after":{"type":"pipe","mode":"0644","uid":0,"gid":0,"size":1}}]})") ==
      "files[0].after.type: \"pipe\" is not file, dir, symlink or other");
  CHECK(
      error(
          R"({"files":[{"path":"/x","change":"added","after":{"type":"file","mode":"0644","uid":-1,"gid":0,"size":1}}]})") ==
      "files[0].after.uid: expected a non-negative integer");
  CHECK(error(R"({"files":[{"path":"/x","change":"added","binary":"yes"}]})") ==
        "files[0].binary: expected true or false");
  CHECK(error(R"({"packages":{"installed":["a 1", 2]}})") == "packages.installed[1]: expected a string");
  CHECK(error(R"({"services":[]})") == "services: expected an object");
}

TEST_CASE("Password hashes in shadow-format lines are redacted, the rest of each line kept",
          "[stig][change_set][redaction]") {
  CHECK(RedactHashLine("/etc/shadow", "root:$6$salt$abcdef:19000:0:99999:7:::") ==
        "root:<sha512crypt hash redacted>:19000:0:99999:7:::");
  CHECK(RedactHashLine("/etc/shadow-", "alice:!$y$j9T$salt$hash:19000::::::") ==
        "alice:!<yescrypt hash redacted>:19000::::::");
  CHECK(RedactHashLine("/etc/shadow", "bob:abcdefghijklm:1:::::") == "bob:<descrypt hash redacted>:1:::::");
  // Not hashes: what the empty-password and locked-account rules judge.
  for (const char* kept : {"daemon:*:19000:0:99999:7:::", "guest::19000:0:99999:7:::", "svc:!:19000::::::",
                           "old:!!:19000::::::", "nologin:!*:19000::::::"}) {
    CHECK(RedactHashLine("/etc/shadow", kept) == kept);
  }
  CHECK(RedactHashLine("/etc/gshadow", "sudo:$6$x$y:root:alice") == "sudo:<sha512crypt hash redacted>:root:alice");
  CHECK(RedactHashLine("/etc/security/opasswd", "alice:1000:2:$6$a$b,$y$c$d") ==
        "alice:1000:2:<sha512crypt hash redacted>,<yescrypt hash redacted>");
  // Other files are not touched, nor a line with no hash field.
  CHECK(RedactHashLine("/etc/passwd", "root:$6$x$y:0:0::/root:/bin/bash") == "root:$6$x$y:0:0::/root:/bin/bash");
  CHECK(RedactHashLine("/etc/shadow", "# comment") == "# comment");

  const std::string diff =
      "--- a/etc/shadow\n+++ b/etc/shadow\n@@ -1,2 +1,2 @@\n-root:$6$s$h:19000:0:99999:7:::\n"
      "+root:$y$j$s$h:19700:0:60:7:::\n daemon:*:19000:0:99999:7:::\n\\ No newline at end of file\n";
  CHECK(RedactHashesInDiff("/etc/shadow", diff) ==
        "--- a/etc/shadow\n+++ b/etc/shadow\n@@ -1,2 +1,2 @@\n-root:<sha512crypt hash redacted>:19000:0:99999:7:::\n"
        "+root:<yescrypt hash redacted>:19700:0:60:7:::\n daemon:*:19000:0:99999:7:::\n\\ No newline at end of "
        "file\n");
  CHECK(RedactHashesInDiff("/etc/issue", diff) == diff);
  // Redacting again changes nothing (a change set is redacted where made, written and read).
  const std::string once = RedactHashesInDiff("/etc/shadow", diff);
  CHECK(RedactHashesInDiff("/etc/shadow", once) == once);
  // The stored form, written or read, carries no hash either.
  ChangeSet cs;
  cs.files.push_back({.path = "/etc/shadow", .change = FileChangeKind::kModified, .diff = diff});
  CHECK(cs.ToJson().find("$6$") == std::string::npos);
  nlohmann::json stored = {{"files", {{{"path", "/etc/shadow"}, {"change", "modified"}, {"diff", diff}}}}};
  auto read = ChangeSet::FromJson(stored.dump());
  REQUIRE(read.ok());
  CHECK(read->files.at(0).diff.find("$y$") == std::string::npos);
}

}  // namespace
}  // namespace temper::stig
