// The fix exports run by the real tools against fresh SSH test hosts (tests/stig/ssh): SSG's own fixes
// for a few rules are made on a rootfs target (the twin) and captured as bundles; the playbook goes
// to one host through Debian's ansible-playbook, the script to another over ssh; then OpenSCAP on
// each host must give the twin's verdicts, a second run must change nothing, and a dry run on the
// fresh host must change nothing while reporting changes.
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/file.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "common/sha256.h"
#include "orchestrator/evidence/fix_playbook.h"
#include "platform/process.h"
#include "stig/rootfs_fixture.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/ssh/ssh_target.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Bump when the script below changes.
constexpr int kPythonRecipe = 1;

// $1 lower dirs, $2 upper, $3 work, $4 merged. As the SSH test layer's own build (ssh_test_root.cpp).
constexpr const char* kPythonLayerScript = R"SH(set -eu
lower=$1; upper=$2; work=$3; m=$4
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$m"
mount -t tmpfs tmpfs "$m/var/lib/apt/lists"
mount -t tmpfs tmpfs "$m/var/cache/apt"
mount --bind /etc/resolv.conf "$m/etc/resolv.conf"
mount --bind /dev "$m/dev"
chroot "$m" apt-get update -q
DEBIAN_FRONTEND=noninteractive chroot "$m" apt-get install -y -q --no-install-recommends python3
umount "$m/dev" "$m/etc/resolv.conf" "$m/var/cache/apt" "$m/var/lib/apt/lists"
umount "$m"
)SH";

// The SSH test root with python3 on top, which Ansible's modules run with on a managed host: one
// more cached layer (built once per build tree, rebuilt when the SSH test layer changes), so the
// SSH test layer every other SSH test uses stays as it is.
Result<SshTestRoot> AnsibleReadyRoot() {
  const SshTestRoot& ssh = TestRoot();
  const fs::path dir = fs::path(TEMPER_BINARY_DIR) / "stig-rootfs-ssh-python";
  std::error_code ec;
  fs::create_directories(dir, ec);
  SshTestRoot out = ssh;
  out.base = ssh.layer + ":" + ssh.base;  // NetnsSshHost stacks "layer:base"
  out.layer = (dir / "layer").string();
  int lock = ::open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return Status::FromErrno(errno, "opening " + (dir / "lock").string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "locking " + (dir / "lock").string());
  }
  const std::string key = fmt::format("recipe {}; ssh layer {}", kPythonRecipe, ReadAll(SshTestRootDir() + "/stamp"));
  if (ReadAll((dir / "stamp").string()) == key && fs::is_directory(out.layer, ec)) return out;
  for (const char* d : {"layer", "layer.tmp", "work", "merged"}) fs::remove_all(dir / d, ec);
  for (const char* d : {"layer.tmp", "work", "merged"}) fs::create_directories(dir / d, ec);
  ProcessSpec spec;
  spec.argv = {"/usr/bin/unshare",
               "-m",
               "--propagation",
               "private",
               "/bin/sh",
               "-c",
               kPythonLayerScript,
               "build-python-layer",
               out.base,
               (dir / "layer.tmp").string(),
               (dir / "work").string(),
               (dir / "merged").string()};
  spec.timeout = std::chrono::minutes(10);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  if (!r.Succeeded()) {
    std::string tail = r.out + r.err;
    if (tail.size() > 3000) tail = tail.substr(tail.size() - 3000);
    return Status::Unavailable(
        fmt::format("installing python3 in the SSH test root failed ({}): {}", r.Describe(), tail));
  }
  fs::rename(dir / "layer.tmp", out.layer, ec);
  if (ec) return Status::IOError("moving the python layer into place: " + ec.message());
  fs::remove_all(dir / "work", ec);
  std::ofstream(dir / "stamp") << key;
  return out;
}

const stig::Content& Ubuntu2004Stig() {
  static const Result<stig::Content> content = stig::Content::Load(std::string(stig::kUbuntu2004Datastream), "stig");
  INFO(content.status().ToString());
  REQUIRE(content.ok());
  return *content;
}

struct Host {
  std::unique_ptr<NetnsSshHost> host;
  ScopedControlDir control;
  std::string known_hosts;
  std::unique_ptr<stig::SshTarget> target;

  Host(const SshTestRoot& root, const std::string& name) {
    auto started = NetnsSshHost::Start(root, name);
    INFO(started.status().ToString());
    REQUIRE(started.ok());
    host = std::move(*started);
    known_hosts = AcceptedKnownHosts(*host);
    stig::SshTargetOptions o;
    o.name = name;
    o.ssh = TestSshOptions(host->Endpoint("root"), root.client_key, known_hosts, control.path());
    auto t = stig::SshTarget::Open(o, QuietSshLog());
    INFO(t.status().ToString());
    REQUIRE(t.ok());
    target = std::move(*t);
  }
  std::string Tree(const std::string& path) const { return host->tree() + path; }

  std::map<std::string, stig::Verdict> Verdicts(const std::vector<std::string>& rules) {
    stig::Evaluator evaluator(Ubuntu2004Stig(), {}, QuietSshLog());
    auto e = target->Evaluate(evaluator, {.rule_ids = rules});
    INFO(e.status().ToString());
    REQUIRE(e.ok());
    std::map<std::string, stig::Verdict> out;
    for (const stig::RuleVerdict& v : e->verdicts) out[v.rule_id] = v.verdict;
    return out;
  }
};

// The path's state in a host's tree as a bundle records it, or nullopt when nothing is there.
std::optional<stig::FileImage> ImageAt(const Host& h, const std::string& path) {
  struct stat st {};
  if (::lstat(h.Tree(path).c_str(), &st) != 0) return std::nullopt;
  stig::FileImage image;
  image.state.mode = st.st_mode & 07777;
  image.state.uid = st.st_uid;
  image.state.gid = st.st_gid;
  if (S_ISDIR(st.st_mode)) {
    image.state.type = stig::FileType::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    image.state.type = stig::FileType::kSymlink;
    image.state.link = fs::read_symlink(h.Tree(path)).string();
    image.state.size = image.state.link.size();
  } else {
    image.state.type = stig::FileType::kFile;
    image.content = ReadAll(h.Tree(path));
    image.state.size = image.content.size();
    image.sha256 = Sha256Hex(image.content);
  }
  return image;
}

std::string Output(const ProcessResult& r) { return r.out + r.err; }

struct PlayRun {
  ProcessResult process;
  int changed = -1;
  int failed = -1;
};

PlayRun RunAnsible(const Host& h, const std::string& playbook, bool check) {
  const std::string dir = h.host->dir() + "/files";
  ProcessSpec spec;
  spec.argv = {"ansible-playbook",
               "-i",
               h.host->address() + ",",
               "-u",
               "root",
               "--private-key",
               TestRoot().client_key,
               "-e",
               "ansible_ssh_common_args='-o UserKnownHostsFile=" + h.known_hosts +
                   " -o StrictHostKeyChecking=yes -o ControlMaster=no'",
               "-e",
               "ansible_python_interpreter=/usr/bin/python3",
               playbook};
  if (check) spec.argv.push_back("--check");
  // No ControlPersist (nothing left running after the test), temporaries and settings in the host's
  // directory, not the user's home.
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
              "HOME=" + dir,
              "ANSIBLE_LOCAL_TEMP=" + dir + "/ansible-tmp",
              "ANSIBLE_SSH_ARGS=-o ControlMaster=no",
              "ANSIBLE_NOCOLOR=1",
              "ANSIBLE_RETRY_FILES_ENABLED=0",
              "ANSIBLE_PIPELINING=1",
              "LC_ALL=C.UTF-8"};
  spec.timeout = std::chrono::seconds(600);
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

// The script run on the host over ssh, as an operator's fleet tool would: sent on stdin to a file,
// then run by the host's /bin/sh.
ProcessResult RunScriptOverSsh(const Host& h, const std::string& script, const std::string& args) {
  ProcessSpec spec;
  spec.argv = {"/usr/bin/ssh",
               "-i",
               TestRoot().client_key,
               "-o",
               "UserKnownHostsFile=" + h.known_hosts,
               "-o",
               "StrictHostKeyChecking=yes",
               "-o",
               "BatchMode=yes",
               "root@" + h.host->address(),
               "cat > /root/temper-fixes.sh && sh /root/temper-fixes.sh " + args};
  spec.stdin_data = script;
  spec.timeout = std::chrono::seconds(300);
  Result<ProcessResult> r = RunProcess(spec);
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE(
    "The exports run by ansible-playbook and sh on fresh SSH hosts reach the twin's verdicts, idempotently, "
    "with dry runs that change nothing",
    "[ssh][fix_export]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  if (!fs::exists("/usr/bin/ansible-playbook")) TEMPER_SKIP("Debian's ansible is not installed (deploy/setup.sh)");
  Result<SshTestRoot> root = AnsibleReadyRoot();
  if (root.status().code() == StatusCode::kUnavailable) TEMPER_SKIP(root.status().ToString());
  INFO(root.status().ToString());
  REQUIRE(root.ok());

  // The twin: a rootfs target over the same Debian root the SSH hosts serve. SSG's fixes run there
  // one rule at a time, and each rule's bundle is what FixSinceSnapshot captured of its fix, through
  // the stored JSON form: a new file (tmout.sh) and two fixes of /etc/login.defs, the later building
  // on the earlier one's file.
  const std::vector<std::string> rules = {"xccdf_org.ssgproject.content_rule_accounts_tmout",
                                          "xccdf_org.ssgproject.content_rule_accounts_maximum_age_login_defs",
                                          "xccdf_org.ssgproject.content_rule_accounts_minimum_age_login_defs"};
  stig::testing::ScopedTarget twin("fx-twin");
  stig::Evaluator evaluator(Ubuntu2004Stig(), {}, QuietSshLog());
  evidence::FixExport fixes;
  fixes.batch_id = 1;
  fixes.target = "fx-twin";
  std::map<std::string, std::optional<stig::FileImage>> final_state;  // what the last fix of a path left
  for (const std::string& rule : rules) {
    INFO(rule);
    REQUIRE(twin->Snapshot().ok());
    const std::string out = twin.dir() + "-fix-" + std::to_string(fixes.fixes.size());
    auto e = twin->Evaluate(evaluator, {.rule_ids = {rule}, .output_dir = out, .write_fix_script = true});
    INFO(e.status().ToString());
    REQUIRE(e.ok());
    REQUIRE(e->verdicts.at(0).verdict == stig::Verdict::kFail);  // each fix must change something
    auto ran = twin->Run(ReadAll(e->fix_script_path), Limits(300));
    fs::remove_all(out);
    INFO(ran.status().ToString());
    REQUIRE(ran.ok());
    INFO(ran->out << ran->err);
    REQUIRE(ran->Succeeded());
    auto captured = twin->FixSinceSnapshot();
    INFO(captured.status().ToString());
    REQUIRE(captured.ok());
    auto stored = stig::FixBundle::FromJson(captured->ToJson());
    INFO(stored.status().ToString());
    REQUIRE(stored.ok());
    REQUIRE_FALSE(stored->files.empty());
    for (const stig::BundleFile& f : stored->files) final_state[f.path] = f.after;
    fixes.fixes.push_back(evidence::KeptFix{rule, "", std::move(*stored)});
  }
  std::vector<std::string> watched;
  for (const auto& [path, state] : final_state) watched.push_back(path);
  CHECK(final_state.contains("/etc/profile.d/tmout.sh"));
  CHECK(final_state.contains("/etc/login.defs"));
  auto twin_eval = twin->Evaluate(evaluator, {.rule_ids = rules});
  INFO(twin_eval.status().ToString());
  REQUIRE(twin_eval.ok());
  std::map<std::string, stig::Verdict> twin_verdicts;
  for (const stig::RuleVerdict& v : twin_eval->verdicts) twin_verdicts[v.rule_id] = v.verdict;
  for (const std::string& rule : rules) {
    INFO(rule << " after its fix: " << stig::VerdictName(twin_verdicts[rule]));
    CHECK(twin_verdicts[rule] == stig::Verdict::kPass);
  }

  Result<std::string> playbook_text = evidence::WriteFixPlaybook(fixes);
  REQUIRE(playbook_text.ok());
  Result<std::string> script = evidence::WriteFixScript(fixes);
  REQUIRE(script.ok());

  {  // the playbook, through Debian's ansible-playbook
    Host h(*root, "fx-ansible");
    const std::string playbook = h.host->dir() + "/files/fixes.yml";
    std::ofstream(playbook) << *playbook_text;
    std::map<std::string, std::string> fresh_files;
    for (const std::string& p : watched) fresh_files[p] = ReadAll(h.Tree(p));

    PlayRun dry = RunAnsible(h, playbook, true);
    INFO(Output(dry.process));
    CHECK(dry.failed == 0);
    CHECK(dry.changed > 0);
    for (const std::string& p : watched) CHECK(ReadAll(h.Tree(p)) == fresh_files[p]);

    PlayRun run = RunAnsible(h, playbook, false);
    INFO(Output(run.process));
    REQUIRE(run.failed == 0);
    CHECK(run.changed > 0);
    CHECK(h.Verdicts(rules) == twin_verdicts);
    for (const std::string& p : watched) CHECK(ImageAt(h, p) == final_state[p]);

    PlayRun second = RunAnsible(h, playbook, false);
    INFO(Output(second.process));
    CHECK(second.failed == 0);
    CHECK(second.changed == 0);

    // A file someone else changed since: the host is failed with the path named, not overwritten.
    std::ofstream(h.Tree("/etc/login.defs")) << "PASS_MAX_DAYS 30\n";
    PlayRun drifted = RunAnsible(h, playbook, false);
    INFO(Output(drifted.process));
    CHECK(drifted.failed == 1);
    CHECK(drifted.process.out.find("/etc/login.defs drifted") != std::string::npos);
    CHECK(ReadAll(h.Tree("/etc/login.defs")) == "PASS_MAX_DAYS 30\n");
  }

  {  // the script, over ssh
    Host h(*root, "fx-sh");
    std::map<std::string, std::string> fresh_files;
    for (const std::string& p : watched) fresh_files[p] = ReadAll(h.Tree(p));

    ProcessResult dry = RunScriptOverSsh(h, *script, "--check");
    INFO(Output(dry));
    CHECK(dry.exit_code == 2);
    CHECK(dry.out.find("would write /etc/profile.d/tmout.sh") != std::string::npos);
    for (const std::string& p : watched) CHECK(ReadAll(h.Tree(p)) == fresh_files[p]);

    ProcessResult run = RunScriptOverSsh(h, *script, "");
    INFO(Output(run));
    REQUIRE(run.exit_code == 0);
    CHECK(h.Verdicts(rules) == twin_verdicts);
    for (const std::string& p : watched) CHECK(ImageAt(h, p) == final_state[p]);

    ProcessResult second = RunScriptOverSsh(h, *script, "");
    INFO(Output(second));
    CHECK(second.exit_code == 0);
    CHECK(second.out.find("temper: 0 change(s) made") != std::string::npos);
    CHECK(RunScriptOverSsh(h, *script, "--check").exit_code == 0);

    std::ofstream(h.Tree("/etc/login.defs")) << "PASS_MAX_DAYS 30\n";
    ProcessResult drifted = RunScriptOverSsh(h, *script, "");
    INFO(Output(drifted));
    CHECK(drifted.exit_code == 3);
    CHECK(drifted.err.find("/etc/login.defs drifted") != std::string::npos);
    CHECK(ReadAll(h.Tree("/etc/login.defs")) == "PASS_MAX_DAYS 30\n");
  }
}

}  // namespace
}  // namespace temper::testing
