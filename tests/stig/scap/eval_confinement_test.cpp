// What temper-stig-eval does to itself (eval_confinement.h) and the sandbox it runs in
// (eval_sandbox.h), each tried for real: the confinement in a forked child (a chroot and a
// seccomp filter are for the rest of a process's life), the sandbox with a shell in place of the
// helper, looking at what it can see.
#include "stig/scap/eval_confinement.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include "platform/process.h"
#include "platform/scratch_dir.h"
#include "stig/scap/eval_sandbox.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a forked child and returns its exit code (128 + signal when killed). The child
// returns 0 for success or the number of the check that failed.
int InChild(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_CASE("Once confined, the evaluator can neither run a program nor map new code", "[stig][eval_confinement]") {
  int rc = InChild([] {
    if (!PreloadLazyLibraries().ok() || !ForbidNewCode().ok()) return 1;
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    if (::execv("/bin/true", argv) == 0 || errno != EPERM) return 2;
    void* exec_map = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (exec_map != MAP_FAILED || errno != EPERM) return 3;
    void* data = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return 4;  // ordinary memory still works
    if (::mprotect(data, 4096, PROT_READ | PROT_EXEC) == 0 || errno != EPERM) return 5;
    bool ran = false;
    std::thread([&] { ran = true; }).join();  // OpenSCAP's probe threads still start
    if (!ran) return 6;
    return 0;
  });
  CHECK(rc == 0);
}

TEST_CASE("Inside a target root every path and absolute symlink resolves in the tree, and the root is left again",
          "[stig][eval_confinement]") {
  auto scratch = ScratchDir::Create("", "confine");
  REQUIRE(scratch.ok());
  const std::string tree = scratch->path() + "/tree";
  fs::create_directories(tree + "/etc");
  std::ofstream(tree + "/etc/hostname") << "in-the-tree\n";
  fs::create_symlink("/etc/hostname", tree + "/etc/issue.net");
  const std::string outside = scratch->path() + "/outside-only";
  std::ofstream(outside) << "host\n";
  int rc = InChild([&] {
    TargetRoot root;
    if (!root.Enter(tree).ok()) return 1;
    std::ifstream link("/etc/issue.net");
    std::string line;
    std::getline(link, line);
    if (line != "in-the-tree") return 2;                 // the absolute link stayed in the tree
    if (::access(outside.c_str(), F_OK) == 0) return 3;  // host paths are gone
    if (root.Enter(tree).code() != StatusCode::kFailedPrecondition) return 4;
    if (!root.Leave().ok()) return 5;
    if (::access(outside.c_str(), F_OK) != 0) return 6;  // back where it started
    if (root.Leave().code() != StatusCode::kFailedPrecondition) return 7;
    return 0;
  });
  CHECK(rc == 0);
}

TEST_CASE("The evaluator's sandbox shows only /usr, the tree and its own files, read-only but for the tree",
          "[stig][eval_sandbox]") {
  auto scratch = ScratchDir::Create("", "evalbox");
  REQUIRE(scratch.ok());
  const std::string tree = scratch->path() + "/tree";
  const std::string out = scratch->path() + "/out";
  const std::string input = scratch->path() + "/input.xml";
  fs::create_directories(tree);
  fs::create_directories(out);
  std::ofstream(input) << "<x/>\n";
  const std::string script =
      "set -e; ls -A /etc; test ! -e /home; test ! -e /root; test ! -e /var; test ! -e /proc/1; "
      "test -r " +
      input + "; ! touch " + input +
      " 2>/dev/null; ! touch /usr/temper-probe 2>/dev/null; "
      "touch " +
      tree + "/written " + out + "/written /tmp/written; echo done";
  ProcessSpec spec;
  spec.argv = EvalSandboxArgv({.helper = "/usr/bin/sh", .read_only = {input}, .writable = {out}, .target = tree},
                              {{"PATH", "/usr/bin"}}, {"-c", script});
  spec.new_user_namespace = true;
  spec.timeout = std::chrono::seconds(30);
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  INFO(r->out << r->err);
  REQUIRE(r->Succeeded());
  CHECK(r->out == "ld.so.cache\ndone\n");
  CHECK(fs::exists(tree + "/written"));
  CHECK(fs::exists(out + "/written"));
}

}  // namespace
}  // namespace temper::stig
