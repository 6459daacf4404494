// FixBundle's JSON form: a round trip keeps every byte, and hostile documents (wrong types, sizes
// that do not add up, checksums of other bytes, paths that climb out or repeat, limits broken) are
// each refused with the field named.
#include "stig/fix_bundle.h"

#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper::stig {
namespace {

using nlohmann::json;

FileImage File(std::string content, std::uint32_t mode = 0644) {
  FileImage image{.state = {.type = FileType::kFile, .mode = mode, .size = content.size()}, .content = content};
  image.sha256 = ContentSha256(image.content);
  return image;
}

FixBundle Sample() {
  FixBundle b;
  b.files.push_back({.path = "/etc/issue.net", .before = File("Debian\n"), .after = File("Authorized use only\n")});
  b.files.push_back({.path = "/etc/new.d", .after = FileImage{.state = {.type = FileType::kDir, .mode = 0755}}});
  b.files.push_back({.path = "/etc/new.d/binary", .after = File(std::string("\0\xff\x01\n", 4), 0600)});
  b.files.push_back({.path = "/etc/old", .before = File("gone\n")});
  b.files.push_back(
      {.path = "/etc/x.link",
       .after = FileImage{.state = {.type = FileType::kSymlink, .mode = 0777, .size = 9, .link = "/dev/null"}}});
  b.files.push_back({.path = "/usr/share/temper-test/ok",
                     .after = File("changed\n"),
                     .package = "temper-test-ok",
                     .package_md5 = "9a0364b9e99bb480dd25e1f0284c8555"});
  b.packages.installed = {"temper-test-ok 1.0"};
  b.packages.upgraded = {"bash 5.2-1 -> 5.2-2"};
  b.services.enabled = {"auditd.service"};
  b.services.masked = {"getty@tty1.service"};
  return b;
}

// The sample as JSON with `edit` applied, parsed.
Status Edited(const std::function<void(json&)>& edit) {
  json doc = json::parse(Sample().ToJson());
  edit(doc);
  return FixBundle::FromJson(doc.dump()).status();
}

void RefusedNaming(const std::function<void(json&)>& edit, const std::string& field) {
  Status s = Edited(edit);
  INFO(s.ToString());
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find(field) != std::string::npos);
}

TEST_CASE("A bundle's JSON round trip keeps every byte, owner, mode and link", "[stig][fix_bundle]") {
  FixBundle b = Sample();
  b.files[0].after->state.uid = 4242;
  b.files[0].after->state.gid = 7;
  auto back = FixBundle::FromJson(b.ToJson());
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  CHECK(*back == b);
  CHECK(back->content_bytes() == 7 + 20 + 4 + 5 + 8);
  CHECK(FixBundle::FromJson("{}").value().empty());
  // Fields it does not know are ignored: fields are only ever added.
  CHECK(Edited([](json& d) {
          d["files"][0]["future"] = 1;
          d["later"] = {1, 2};
        }).ok());
}

TEST_CASE("Hostile bundles are refused with the field named", "[stig][fix_bundle][security]") {
  RefusedNaming([](json& d) { d["files"] = "x"; }, "files");
  RefusedNaming([](json& d) { d["files"][0]["path"] = 7; }, "files[0].path");
  RefusedNaming([](json& d) { d["files"][0]["path"] = "etc/issue.net"; }, "files[0].path");
  RefusedNaming([](json& d) { d["files"][0]["path"] = "/etc/../root/.ssh/authorized_keys"; }, "files[0].path");
  RefusedNaming([](json& d) { d["files"][0]["path"] = "/etc//issue"; }, "files[0].path");
  RefusedNaming([](json& d) { d["files"][0]["path"] = "/"; }, "files[0].path");
  // Unsorted, and a path twice.
  RefusedNaming([](json& d) { std::swap(d["files"][0], d["files"][1]); }, "files[1].path");
  RefusedNaming([](json& d) { d["files"][1] = d["files"][0]; }, "files[1].path");
  RefusedNaming([](json& d) { d["files"][0]["after"]["sha256"] = ContentSha256("other"); }, "files[0].after.sha256");
  RefusedNaming([](json& d) { d["files"][0]["after"]["size"] = 3; }, "files[0].after");
  RefusedNaming([](json& d) { d["files"][0]["after"]["size"] = -1; }, "files[0].after.size");
  RefusedNaming([](json& d) { d["files"][0]["after"]["size"] = kMaxBundleFileBytes + 1; }, "files[0].after.size");
  RefusedNaming([](json& d) { d["files"][0]["after"]["content_base64"] = "@@@@"; }, "files[0].after.content_base64");
  RefusedNaming([](json& d) { d["files"][0]["after"]["content_base64"] = 5; }, "files[0].after.content_base64");
  RefusedNaming([](json& d) { d["files"][0]["after"]["mode"] = "99999"; }, "files[0].after.mode");
  RefusedNaming([](json& d) { d["files"][0]["after"]["uid"] = 1ull << 40; }, "files[0].after");
  RefusedNaming([](json& d) { d["files"][0]["after"]["type"] = "other"; }, "files[0].after.type");
  RefusedNaming(
      [](json& d) {
        d["files"][0]["before"] = nullptr;
        d["files"][0]["after"] = nullptr;
      },
      "files[0]");
  RefusedNaming([](json& d) { d["files"][4]["after"]["link"] = ""; }, "files[4].after.link");
  RefusedNaming([](json& d) { d["files"][5]["package_md5"] = "not hex"; }, "files[5].package_md5");
  RefusedNaming([](json& d) { d["files"][5]["before"] = d["files"][0]["before"]; }, "files[5].before");
  RefusedNaming([](json& d) { d["files"][5]["package"] = "-o Dpkg::Pre-Invoke=x"; }, "files[5].package");
  RefusedNaming([](json& d) { d["packages"]["installed"] = {"--allow-unauthenticated 1"}; }, "packages.installed[0]");
  RefusedNaming([](json& d) { d["packages"]["installed"] = {"aide 1.0; rm -rf /"}; }, "packages.installed[0]");
  RefusedNaming([](json& d) { d["packages"]["upgraded"] = {"bash 5.2-1"}; }, "packages.upgraded[0]");
  RefusedNaming([](json& d) { d["services"]["enabled"] = {"--now"}; }, "services.enabled[0]");
  RefusedNaming([](json& d) { d["services"]["masked"] = {"a$(id).service"}; }, "services.masked[0]");
  RefusedNaming([](json& d) { d["services"] = 3; }, "services");
  // More files than a bundle holds.
  RefusedNaming(
      [](json& d) {
        json many = json::array();
        for (std::size_t i = 0; i <= kMaxBundleFiles; ++i) {
          many.push_back({{"path", fmt::format("/f{:05}", i)},
                          {"after", {{"type", "dir"}, {"mode", "0755"}, {"uid", 0}, {"gid", 0}, {"size", 0}}}});
        }
        d["files"] = many;
      },
      "files");
  // More bytes in all than a bundle holds: five files of the per-file limit each.
  RefusedNaming(
      [](json& d) {
        std::string big(kMaxBundleFileBytes, 'x');
        FixBundle b;
        for (int i = 0; i < 5; ++i) b.files.push_back({.path = fmt::format("/big{}", i), .after = File(big)});
        d = json::parse(b.ToJson());
      },
      "files[4].after.content_base64");
  CHECK(FixBundle::FromJson("not json").status().code() == StatusCode::kInvalidArgument);
  CHECK(FixBundle::FromJson("[]").status().code() == StatusCode::kInvalidArgument);
  std::string deep(100000, '[');
  Status too_deep = FixBundle::FromJson("{\"files\":" + deep).status();
  CHECK(too_deep.message().find("nested deeper") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
