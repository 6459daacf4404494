#include "orchestrator/evidence/fix_playbook.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <catch2/catch.hpp>

#include "orchestrator/evidence/fix_bundle_builders.h"
#include "platform/process.h"
#include "scratch_space.h"
#include "skip.h"

namespace temper::evidence {
namespace {

namespace fs = std::filesystem;
using testing::Changed;
using testing::DirWith;
using testing::FileWith;
using testing::LinkTo;

// Text a template engine or a shell would act on, if either ever evaluated it.
const std::string kHostileText =
    "{{ lookup('pipe', 'touch /tmp/temper-pwned') }}\n$(touch /tmp/temper-pwned) `id` 'q' \"dq\"\r\n\ttab \xc3\xa9 "
    "\xf0\x9f\x98\x80 nul:\0:end\n";

std::string Hostile() { return std::string(kHostileText.data(), kHostileText.size()); }

FixExport BannerExport(const std::string& root) {
  FixExport e;
  e.batch_id = 7;
  e.target = "twin\nfake: line";
  KeptFix banner{"xccdf_org.ssgproject.content_rule_banner_etc_issue_net", "Modify the System Login Banner", {}};
  banner.bundle.files.push_back(Changed(root + "/issue.net", FileWith("Debian GNU/Linux\n"),
                                        FileWith("You are accessing a U.S. Government (USG) Information System\n")));
  KeptFix hostile{"xccdf_org.ssgproject.content_rule_hostile", "A title with {{ braces }}", {}};
  hostile.bundle.files.push_back(Changed(root + "/conf.d", std::nullopt, DirWith(0750)));
  hostile.bundle.files.push_back(
      Changed(root + "/conf.d/a'b\n$(touch pwned)`id`", std::nullopt, FileWith(Hostile(), 0600, 1, 2)));
  hostile.bundle.files.push_back(Changed(root + "/link", LinkTo("/old target"), LinkTo("../new 'target'\n")));
  hostile.bundle.files.push_back(Changed(root + "/mode-only", FileWith("x\n", 0644), FileWith("x\n", 04750)));
  hostile.bundle.files.push_back(Changed(root + "/old", FileWith("gone\n"), std::nullopt));
  e.fixes = {banner, hostile};
  e.without_bundle = {"xccdf_org.ssgproject.content_rule_found_on_ssh"};
  return e;
}

std::vector<YAML::Node> TasksNamed(const YAML::Node& tasks, const std::string& module) {
  std::vector<YAML::Node> out;
  for (const YAML::Node& t : tasks) {
    if (t[module]) out.push_back(t);
  }
  return out;
}

TEST_CASE("The playbook has one block per kept fix and carries every value exactly, tagged !unsafe",
          "[evidence][fix_playbook]") {
  FixExport e = BannerExport("/etc");
  Result<std::string> yaml = WriteFixPlaybook(e);
  INFO(yaml.status().ToString());
  REQUIRE(yaml.ok());
  INFO(*yaml);
  YAML::Node doc = YAML::Load(*yaml);
  REQUIRE(doc.IsSequence());
  REQUIRE(doc.size() == 1);
  const YAML::Node& play = doc[0];
  CHECK(play["hosts"].as<std::string>() == "all");
  CHECK(play["become"].as<bool>());
  CHECK_FALSE(play["gather_facts"].as<bool>());
  const YAML::Node& tasks = play["tasks"];
  REQUIRE(tasks.size() == 2);  // no services: no fact gathering
  CHECK(tasks[0]["name"].as<std::string>() ==
        "xccdf_org.ssgproject.content_rule_banner_etc_issue_net: Modify the System Login Banner");
  CHECK(tasks[0]["name"].Tag() == "!unsafe");
  CHECK(tasks[1]["name"].as<std::string>() == "xccdf_org.ssgproject.content_rule_hostile: A title with {{ braces }}");

  // The banner: read, judged against before and after, then written with numeric owners and mode.
  const YAML::Node& banner = tasks[0]["block"];
  REQUIRE(TasksNamed(banner, "ansible.builtin.stat").size() == 1);
  YAML::Node stat = TasksNamed(banner, "ansible.builtin.stat")[0]["ansible.builtin.stat"];
  CHECK(stat["path"].as<std::string>() == "/etc/issue.net");
  CHECK(stat["checksum_algorithm"].as<std::string>() == "sha256");
  YAML::Node check = TasksNamed(banner, "ansible.builtin.assert")[0];
  auto sha256 = check["vars"]["temper_accepted"]["sha256"];
  REQUIRE(sha256.size() == 2);
  CHECK(sha256[0].as<std::string>() == Sha256Hex("Debian GNU/Linux\n"));
  CHECK(check["ansible.builtin.assert"]["fail_msg"].as<std::string>().find("/etc/issue.net drifted") !=
        std::string::npos);
  YAML::Node copy = TasksNamed(banner, "ansible.builtin.copy")[0]["ansible.builtin.copy"];
  CHECK(copy["content"].as<std::string>() == "You are accessing a U.S. Government (USG) Information System\n");
  CHECK(copy["owner"].as<std::string>() == "0");
  CHECK(copy["mode"].as<std::string>() == "0644");
  CHECK(copy["mode"].Tag() == "!");  // quoted: never read as an octal number

  // Hostile paths and contents come back byte for byte, never templated.
  const YAML::Node& hostile = tasks[1]["block"];
  std::vector<YAML::Node> copies = TasksNamed(hostile, "ansible.builtin.copy");
  REQUIRE(copies.size() == 1);
  CHECK(copies[0]["ansible.builtin.copy"]["dest"].as<std::string>() == "/etc/conf.d/a'b\n$(touch pwned)`id`");
  CHECK(copies[0]["ansible.builtin.copy"]["dest"].Tag() == "!unsafe");
  CHECK(copies[0]["ansible.builtin.copy"]["content"].as<std::string>() == Hostile());
  CHECK(copies[0]["ansible.builtin.copy"]["content"].Tag() == "!unsafe");
  CHECK(copies[0]["ansible.builtin.copy"]["mode"].as<std::string>() == "0600");
  CHECK(copies[0]["ansible.builtin.copy"]["group"].as<std::string>() == "2");
  // It lies under a directory the export makes: a dry run skips it unless the directory is there.
  CHECK(copies[0]["when"][0].as<std::string>().find("not ansible_check_mode") == 0);
  std::vector<YAML::Node> files = TasksNamed(hostile, "ansible.builtin.file");
  std::vector<std::string> states;
  for (const YAML::Node& f : files) states.push_back(f["ansible.builtin.file"]["state"].as<std::string>());
  CHECK(states == std::vector<std::string>{"directory", "link", "file", "absent"});
  CHECK(files[1]["ansible.builtin.file"]["src"].as<std::string>() == "../new 'target'\n");
  CHECK(files[1]["ansible.builtin.file"]["force"].as<bool>());
  CHECK(files[2]["ansible.builtin.file"]["mode"].as<std::string>() == "4750");
  CHECK(files[3]["ansible.builtin.file"]["path"].as<std::string>() == "/etc/old");

  // The header names what is not carried, each on a comment line of its own; the target's newline
  // cannot start a line of YAML.
  CHECK(yaml->find("#   xccdf_org.ssgproject.content_rule_found_on_ssh\n") != std::string::npos);
  CHECK(yaml->find("twin\\x0afake: line") != std::string::npos);
  CHECK(yaml->find("\nfake: line") == std::string::npos);
}

TEST_CASE("A binary file goes as base64 the filter decodes exactly, and one that would read as a literal is refused",
          "[evidence][fix_playbook]") {
  FixExport e;
  KeptFix fix{"rule_binary", "", {}};
  std::string binary("\x00\x01\xff\xfe\x80 abc", 9);
  fix.bundle.files.push_back(Changed("/etc/blob", std::nullopt, FileWith(binary)));
  e.fixes = {fix};
  Result<std::string> yaml = WriteFixPlaybook(e);
  REQUIRE(yaml.ok());
  YAML::Node copy = TasksNamed(YAML::Load(*yaml)[0]["tasks"][0]["block"], "ansible.builtin.copy")[0];
  CHECK(copy["ansible.builtin.copy"]["content"].as<std::string>() == "{{ 'AAH//oAgYWJj' | b64decode }}");

  e.fixes[0].bundle.files[0].after = FileWith(std::string("[1, 2]\xff", 7));
  Result<std::string> refused = WriteFixPlaybook(e);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("rule_binary: /etc/blob is binary") != std::string::npos);
  CHECK(WriteFixScript(e).ok());  // the script carries any bytes
}

TEST_CASE("What an export cannot carry is refused with the rule and the path named", "[evidence][fix_playbook]") {
  FixExport e;
  KeptFix fix{"rule_x", "", {}};
  SECTION("a path that is not UTF-8: the playbook refuses, the script carries it") {
    fix.bundle.files.push_back(Changed("/etc/\xff\n", std::nullopt, FileWith("a\n")));
    e.fixes = {fix};
    Result<std::string> yaml = WriteFixPlaybook(e);
    REQUIRE_FALSE(yaml.ok());
    CHECK(yaml.status().message().find("rule_x: /etc/\\xff\\x0a's path is not UTF-8") != std::string::npos);
    CHECK(WriteFixScript(e).ok());
  }
  SECTION("a file that is neither a file, a directory nor a symlink") {
    stig::FileImage fifo;
    fifo.state.type = stig::FileType::kOther;
    fix.bundle.files.push_back(Changed("/run/fifo", std::nullopt, fifo));
    e.fixes = {fix};
    for (const Result<std::string>& r : {WriteFixPlaybook(e), WriteFixScript(e)}) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message() ==
            "rule rule_x: /run/fifo is neither a file, a directory nor a symlink: an export cannot set it");
    }
  }
  SECTION("a package name that is not one") {
    fix.bundle.packages.installed = {"aide;reboot 1.0"};
    e.fixes = {fix};
    for (const Result<std::string>& r : {WriteFixPlaybook(e), WriteFixScript(e)}) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message() ==
            "rule rule_x: package \"aide;reboot\" is not a valid name; the export carries none such");
    }
  }
  SECTION("a unit name that is not one") {
    fix.bundle.services.enabled = {"$(reboot).service"};
    e.fixes = {fix};
    for (const Result<std::string>& r : {WriteFixPlaybook(e), WriteFixScript(e)}) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message().find("unit \"$(reboot).service\" is not a valid name") != std::string::npos);
    }
  }
}

TEST_CASE("Packages and services: exact versions, and units only where systemd runs them", "[evidence][fix_playbook]") {
  FixExport e;
  KeptFix fix{"rule_aide", "", {}};
  fix.bundle.packages.installed = {"aide 0.17.4-1"};
  fix.bundle.packages.upgraded = {"bash 5.2-1 -> 5.2.15-2+b2"};
  fix.bundle.packages.removed = {"telnet 0.17-44"};
  fix.bundle.services.enabled = {"aidecheck.timer"};
  stig::BundleFile conf = Changed("/etc/aide/aide.conf", std::nullopt, FileWith("changed\n"));
  conf.package = "aide";
  conf.package_md5 = "0123456789abcdef0123456789abcdef";
  fix.bundle.files.push_back(conf);
  e.fixes = {fix};
  Result<std::string> yaml = WriteFixPlaybook(e);
  REQUIRE(yaml.ok());
  INFO(*yaml);
  YAML::Node tasks = YAML::Load(*yaml)[0]["tasks"];
  CHECK(tasks[0]["ansible.builtin.setup"]["gather_subset"][2].as<std::string>() == "service_mgr");
  YAML::Node block = tasks[1]["block"];
  std::vector<YAML::Node> apt = TasksNamed(block, "ansible.builtin.apt");
  REQUIRE(apt.size() == 2);
  CHECK(apt[0]["ansible.builtin.apt"]["name"][0].as<std::string>() == "aide=0.17.4-1");
  CHECK(apt[0]["ansible.builtin.apt"]["name"][1].as<std::string>() == "bash=5.2.15-2+b2");
  CHECK(apt[1]["ansible.builtin.apt"]["name"][0].as<std::string>() == "telnet");
  CHECK(apt[1]["ansible.builtin.apt"]["state"].as<std::string>() == "absent");
  // The package's file is judged after the install, by the package's md5 (or nothing, in a dry run).
  size_t apt_at = 0, md5_at = 0;
  for (size_t i = 0; i < block.size(); ++i) {
    if (block[i]["ansible.builtin.apt"] && apt_at == 0) apt_at = i + 1;
    if (block[i]["ansible.builtin.stat"] && block[i]["register"].as<std::string>().starts_with("temper_md5_")) {
      md5_at = i + 1;
    }
  }
  CHECK(apt_at < md5_at);
  YAML::Node systemd = TasksNamed(block, "ansible.builtin.systemd")[0];
  CHECK(systemd["ansible.builtin.systemd"]["state"].as<std::string>() == "started");
  CHECK(systemd["when"][0].as<std::string>() == "ansible_service_mgr == 'systemd'");

  Result<std::string> sh = WriteFixScript(e);
  REQUIRE(sh.ok());
  CHECK(sh->find("apt-get install -y -q --no-install-recommends -- 'aide=0.17.4-1'") != std::string::npos);
  CHECK(sh->find("'md5:0123456789abcdef0123456789abcdef'") != std::string::npos);
  CHECK(sh->find("systemctl start -- 'aidecheck.timer'") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The script, run for real on paths under the scratch directory.

ProcessResult RunScript(const std::string& script, const std::vector<std::string>& args, const std::string& cwd) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", script};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.cwd = cwd;
  spec.timeout = std::chrono::seconds(60);
  Result<ProcessResult> r = RunProcess(spec);
  REQUIRE(r.ok());
  return *r;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

TEST_CASE("The script passes sh -n and quotes every path", "[evidence][fix_playbook]") {
  testing::ScratchPath dir("fix-script-syntax");
  fs::create_directories(dir.path());
  Result<std::string> sh = WriteFixScript(BannerExport("/etc"));
  REQUIRE(sh.ok());
  std::string file = dir.path() + "/fix.sh";
  WriteAll(file, *sh);
  for (const char* shell : {"/bin/sh", "/bin/dash", "/bin/bash"}) {
    if (!fs::exists(shell)) continue;
    Result<ProcessResult> r = RunProcess({.argv = {shell, "-n", file}});
    REQUIRE(r.ok());
    INFO(shell << ": " << r->err);
    CHECK(r->Succeeded());
  }
  CHECK(sh->find("p='/etc/conf.d/a'\\''b\n$(touch pwned)`id`'\n") != std::string::npos);
  CHECK(sh->find("#   xccdf_org.ssgproject.content_rule_found_on_ssh\n") != std::string::npos);
  CHECK(sh->starts_with("#!/bin/sh\n"));
  CHECK(sh->find("\nset -eu\n") != std::string::npos);
}

TEST_CASE(
    "The script run for real: a dry run changes nothing, the run sets exact bytes, owners and modes, a second "
    "run changes nothing, and drift stops it with the path named",
    "[evidence][fix_playbook]") {
  if (geteuid() != 0) TEMPER_SKIP("the script sets owners: needs root");
  testing::ScratchPath dir("fix-script-run");
  const std::string root = dir.path() + "/etc";
  fs::create_directories(root);
  WriteAll(root + "/issue.net", "Debian GNU/Linux\n");
  WriteAll(root + "/mode-only", "x\n");
  chmod((root + "/mode-only").c_str(), 0644);
  WriteAll(root + "/old", "gone\n");
  fs::create_symlink("/old target", root + "/link");
  FixExport e = BannerExport(root);
  // A later fix of the same path: a dry run accepts what the first would have left there.
  KeptFix again{"rule_banner_again", "", {}};
  again.bundle.files.push_back(Changed(root + "/issue.net",
                                       FileWith("You are accessing a U.S. Government (USG) Information System\n"),
                                       FileWith("Authorized uses only.\n", 0640)));
  e.fixes.push_back(again);
  Result<std::string> sh = WriteFixScript(e);
  REQUIRE(sh.ok());
  const std::string script = dir.path() + "/fix.sh";
  WriteAll(script, *sh);
  const std::string cwd = dir.path() + "/cwd";
  fs::create_directories(cwd);

  ProcessResult dry = RunScript(script, {"--check"}, cwd);
  INFO(dry.out << dry.err);
  CHECK(dry.exit_code == 2);
  CHECK(dry.out.find("would write " + root + "/issue.net") != std::string::npos);
  CHECK(ReadAll(root + "/issue.net") == "Debian GNU/Linux\n");
  CHECK_FALSE(fs::exists(root + "/conf.d"));
  CHECK(fs::exists(root + "/old"));

  ProcessResult run = RunScript(script, {}, cwd);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const std::string hostile_path = root + "/conf.d/a'b\n$(touch pwned)`id`";
  CHECK(ReadAll(hostile_path) == Hostile());
  struct stat st {};
  REQUIRE(lstat(hostile_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == 1);
  CHECK(st.st_gid == 2);
  REQUIRE(lstat((root + "/conf.d").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);
  REQUIRE(lstat((root + "/mode-only").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04750);
  CHECK(ReadAll(root + "/issue.net") == "Authorized uses only.\n");
  CHECK(fs::read_symlink(root + "/link").string() == "../new 'target'\n");
  CHECK_FALSE(fs::exists(root + "/old"));
  // Nothing in a path or a content ran.
  CHECK_FALSE(fs::exists(cwd + "/pwned"));
  CHECK_FALSE(fs::exists(root + "/conf.d/pwned"));
  CHECK_FALSE(fs::exists("/tmp/temper-pwned"));

  ProcessResult second = RunScript(script, {}, cwd);
  INFO(second.out << second.err);
  CHECK(second.exit_code == 0);
  CHECK(second.out.find("temper: 0 change(s) made") != std::string::npos);
  CHECK(RunScript(script, {"--check"}, cwd).exit_code == 0);

  // Drift: the banner is neither what a fix found nor what it left. Refused, named, exit 3.
  WriteAll(root + "/issue.net", "someone else's banner\n");
  ProcessResult drifted = RunScript(script, {}, cwd);
  CHECK(drifted.exit_code == 3);
  CHECK(drifted.err.find(root + "/issue.net drifted") != std::string::npos);
  CHECK(ReadAll(root + "/issue.net") == "someone else's banner\n");
}

// ---------------------------------------------------------------------------------------------
// The playbook, run by Debian's ansible-playbook over a local connection on scratch paths.

struct PlayRun {
  ProcessResult process;
  int changed = -1;
  int failed = -1;
};

PlayRun RunPlaybook(const std::string& playbook, const std::string& dir, bool check) {
  ProcessSpec spec;
  spec.argv = {"ansible-playbook",
               "-i",
               "localhost,",
               "-c",
               "local",
               "-e",
               "ansible_become=false",
               "-e",
               "ansible_python_interpreter=/usr/bin/python3",
               playbook};
  if (check) spec.argv.push_back("--check");
  // Ansible keeps its temporaries and its settings where the test says, not in the user's home.
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
              "HOME=" + dir,
              "ANSIBLE_LOCAL_TEMP=" + dir + "/ansible-tmp",
              "ANSIBLE_REMOTE_TEMP=" + dir + "/ansible-tmp",
              "ANSIBLE_NOCOLOR=1",
              "ANSIBLE_RETRY_FILES_ENABLED=0",
              "ANSIBLE_HOST_KEY_CHECKING=1",
              "LC_ALL=C.UTF-8"};
  spec.timeout = std::chrono::seconds(300);
  Result<ProcessResult> r = RunProcess(spec);
  REQUIRE(r.ok());
  PlayRun run{*r};
  std::smatch m;
  if (std::regex_search(r->out, m, std::regex(R"(changed=(\d+)\s+unreachable=\d+\s+failed=(\d+))"))) {
    run.changed = std::stoi(m[1]);
    run.failed = std::stoi(m[2]);
  }
  return run;
}

TEST_CASE(
    "The playbook run by ansible-playbook: a dry run changes nothing, the run sets exact bytes, owners and "
    "modes, a second run reports changed=0, and drift fails the host with the path named",
    "[evidence][fix_playbook]") {
  if (geteuid() != 0) TEMPER_SKIP("the playbook sets owners: needs root");
  if (!fs::exists("/usr/bin/ansible-playbook")) TEMPER_SKIP("Debian's ansible is not installed (deploy/setup.sh)");
  testing::ScratchPath dir("fix-playbook-run");
  const std::string root = dir.path() + "/etc";
  fs::create_directories(root);
  WriteAll(root + "/issue.net", "Debian GNU/Linux\n");
  WriteAll(root + "/mode-only", "x\n");
  chmod((root + "/mode-only").c_str(), 0644);
  WriteAll(root + "/old", "gone\n");
  fs::create_symlink("/old target", root + "/link");
  FixExport e = BannerExport(root);
  KeptFix again{"rule_banner_again", "", {}};
  again.bundle.files.push_back(Changed(root + "/issue.net",
                                       FileWith("You are accessing a U.S. Government (USG) Information System\n"),
                                       FileWith("Authorized uses only.\n", 0640)));
  std::string binary("\x00\x01\xff\xfe\x80 abc", 9);
  again.bundle.files.push_back(Changed(root + "/blob", std::nullopt, FileWith(binary, 0600)));
  e.fixes.push_back(again);
  Result<std::string> yaml = WriteFixPlaybook(e);
  REQUIRE(yaml.ok());
  const std::string playbook = dir.path() + "/fixes.yml";
  WriteAll(playbook, *yaml);

  PlayRun dry = RunPlaybook(playbook, dir.path(), true);
  INFO(*yaml << dry.process.out << dry.process.err);
  CHECK(dry.failed == 0);
  CHECK(dry.changed > 0);
  CHECK(ReadAll(root + "/issue.net") == "Debian GNU/Linux\n");
  CHECK_FALSE(fs::exists(root + "/conf.d"));
  CHECK_FALSE(fs::exists(root + "/blob"));
  CHECK(fs::exists(root + "/old"));

  PlayRun run = RunPlaybook(playbook, dir.path(), false);
  INFO(run.process.out << run.process.err);
  REQUIRE(run.failed == 0);
  const std::string hostile_path = root + "/conf.d/a'b\n$(touch pwned)`id`";
  CHECK(ReadAll(hostile_path) == Hostile());
  CHECK(ReadAll(root + "/blob") == binary);
  struct stat st {};
  REQUIRE(lstat(hostile_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == 1);
  CHECK(st.st_gid == 2);
  REQUIRE(lstat((root + "/mode-only").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04750);
  CHECK(ReadAll(root + "/issue.net") == "Authorized uses only.\n");
  REQUIRE(lstat((root + "/issue.net").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(fs::read_symlink(root + "/link").string() == "../new 'target'\n");
  CHECK_FALSE(fs::exists(root + "/old"));
  CHECK_FALSE(fs::exists(root + "/conf.d/pwned"));
  CHECK_FALSE(fs::exists("/tmp/temper-pwned"));

  PlayRun second = RunPlaybook(playbook, dir.path(), false);
  INFO(second.process.out);
  CHECK(second.failed == 0);
  CHECK(second.changed == 0);
  PlayRun dry_after = RunPlaybook(playbook, dir.path(), true);
  CHECK(dry_after.failed == 0);
  CHECK(dry_after.changed == 0);

  WriteAll(root + "/issue.net", "someone else's banner\n");
  PlayRun drifted = RunPlaybook(playbook, dir.path(), false);
  INFO(drifted.process.out);
  CHECK(drifted.failed == 1);
  CHECK(drifted.process.out.find(root + "/issue.net drifted") != std::string::npos);
  CHECK(ReadAll(root + "/issue.net") == "someone else's banner\n");
}

}  // namespace
}  // namespace temper::evidence
