// Attacks through the fix exports (issue 50): `temper export --format ansible|sh` turns what a target
// held into something an operator runs across a fleet. A file a hostile fix wrote on a target (its
// content, its name, a link's target, the rule's title) must not become a command: not on the
// operator's Ansible controller (Jinja's lookup('pipe') runs there, even in a dry run) and not in the
// shell on a host. The fix is made from inside a real rootfs target's sandbox and captured with
// FixSinceSnapshot; the exports then run for real here, as dry runs (--check), which template and
// quote everything a real run does but write nothing to this machine's /etc.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "orchestrator/evidence/fix_playbook.h"
#include "platform/process.h"
#include "scratch_space.h"
#include "skip.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

namespace fs = std::filesystem;
using stig::testing::ScopedTarget;

TEST_CASE("A fix's content, file name and link target run nothing in the exported playbook or script",
          "[security][fix_export]") {
  testing::ScratchPath dir("fix-export-attack");
  fs::create_directories(dir.path());
  const std::string marker = dir.path() + "/pwned";
  ScopedTarget target("export-attack");
  REQUIRE(target->Snapshot().ok());
  // Planted from inside the sandbox, as a Worker's command would: a file whose content is a Jinja
  // lookup and a command substitution, a file whose name is one (relative: a name holds no '/'; the
  // dry runs run in `dir`), a link whose target is a template.
  std::string plant = fmt::format(
      "set -e; printf '%s\\n' \"{{{{ lookup('pipe', 'touch {m}-lookup') }}}}\" '$(touch {m}-subst)' "
      "> /etc/temper-export-attack.conf; "
      "printf 'x\\n' > \"/etc/temper-export-attack-\\$(touch pwned-name)-'q'\"; "
      "ln -s \"{{{{ lookup('pipe', 'touch {m}-link') }}}}\" /etc/temper-export-attack-link",
      fmt::arg("m", marker));
  auto planted = target->Run(plant, SandboxLimits{});
  REQUIRE(planted.ok());
  INFO(planted->err);
  REQUIRE(planted->Succeeded());
  auto captured = target->FixSinceSnapshot();
  INFO(captured.status().ToString());
  REQUIRE(captured.ok());
  auto stored = stig::FixBundle::FromJson(captured->ToJson());
  REQUIRE(stored.ok());
  REQUIRE(stored->files.size() == 3);

  evidence::FixExport fixes;
  fixes.batch_id = 1;
  fixes.target = "export-attack\n- hosts: all";
  fixes.fixes.push_back(
      {"xccdf_org.ssgproject.content_rule_planted", "{{ lookup('pipe', 'touch " + marker + "-title') }}", *stored});

  Result<std::string> script = evidence::WriteFixScript(fixes);
  REQUIRE(script.ok());
  std::ofstream(dir.path() + "/fixes.sh") << *script;
  ProcessSpec sh{.argv = {"/bin/sh", dir.path() + "/fixes.sh", "--check"}, .cwd = dir.path()};
  sh.timeout = std::chrono::seconds(60);
  auto dry = RunProcess(sh);
  REQUIRE(dry.ok());
  INFO(dry->out << dry->err);
  CHECK(dry->exit_code == 2);  // this machine lacks the planted files: all would be written

  Result<std::string> playbook = evidence::WriteFixPlaybook(fixes);
  REQUIRE(playbook.ok());
  if (geteuid() != 0 || !fs::exists("/usr/bin/ansible-playbook")) {
    for (const char* m : {"-subst", "-name"}) CHECK_FALSE(fs::exists(marker + m));
    TEMPER_SKIP("Debian's ansible as root is needed for the playbook's half (deploy/setup.sh)");
  }
  std::ofstream(dir.path() + "/fixes.yml") << *playbook;
  ProcessSpec play{.argv = {"ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_become=false", "-e",
                            "ansible_python_interpreter=/usr/bin/python3", dir.path() + "/fixes.yml", "--check"},
                   .env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir.path(),
                           "ANSIBLE_LOCAL_TEMP=" + dir.path() + "/ansible-tmp", "ANSIBLE_NOCOLOR=1",
                           "ANSIBLE_RETRY_FILES_ENABLED=0", "LC_ALL=C.UTF-8"},
                   .cwd = dir.path()};
  play.timeout = std::chrono::seconds(300);
  auto ran = RunProcess(play);
  REQUIRE(ran.ok());
  INFO(ran->out << ran->err);
  CHECK(ran->out.find("failed=0") != std::string::npos);  // the play itself ran through
  for (const char* m : {"-lookup", "-subst", "-name", "-link", "-title"}) {
    INFO(m);
    CHECK_FALSE(fs::exists(marker + m));
  }
  // Nothing of the dry runs reached this machine's /etc.
  CHECK_FALSE(fs::exists("/etc/temper-export-attack.conf"));
  CHECK_FALSE(fs::is_symlink("/etc/temper-export-attack-link"));
}

}  // namespace
}  // namespace temper
