// Command runners: each runner's options and operands, and what it runs.
#include "policy/command_runners.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

std::vector<ShellWord> Words(std::initializer_list<const char*> words) {
  std::vector<ShellWord> out;
  for (const char* w : words) out.push_back({w, false});
  return out;
}

std::vector<std::string> Texts(const std::vector<ShellWord>& words) {
  std::vector<std::string> out;
  for (const ShellWord& w : words) out.push_back(w.text);
  return out;
}

using K = RunnerStep::Kind;
using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("runners name the command after their options and operands") {
  struct Case {
    std::initializer_list<const char*> words;
    Strings rest;
  };
  const Case cases[] = {
      {{"sudo", "-u", "root", "-E", "reboot"}, {"reboot"}},
      {{"/usr/bin/env", "-i", "-u", "HOME", "--chdir=/", "X=1", "reboot"}, {"X=1", "reboot"}},
      {{"env", "--", "reboot"}, {"reboot"}},
      {{"nice", "-n", "5", "reboot"}, {"reboot"}},
      {{"nice", "-10", "reboot"}, {"reboot"}},
      {{"timeout", "-s", "KILL", "10", "reboot"}, {"reboot"}},
      {{"timeout", "--kill-after=5", "10s", "reboot"}, {"reboot"}},
      {{"stdbuf", "-oL", "-e", "0", "reboot"}, {"reboot"}},
      {{"setsid", "-f", "reboot"}, {"reboot"}},
      {{"chroot", "--userspec=0:0", "/", "reboot"}, {"reboot"}},
      {{"flock", "-w", "5", "/run/x.lock", "reboot", "-f"}, {"reboot", "-f"}},
      {{"unshare", "-m", "--propagation", "private", "reboot"}, {"reboot"}},
      {{"nsenter", "-t", "1", "-m", "-u", "reboot"}, {"reboot"}},
      {{"chrt", "-f", "10", "reboot"}, {"reboot"}},
      {{"taskset", "-c", "0", "reboot"}, {"reboot"}},
      {{"ionice", "-c", "3", "reboot"}, {"reboot"}},
      {{"setpriv", "--reuid=0", "--clear-groups", "reboot"}, {"reboot"}},
      {{"runuser", "-u", "root", "--", "reboot"}, {"reboot"}},
      {{"sudo", "--us", "root", "reboot"}, {"reboot"}},  // getopt takes an unambiguous abbreviation
      {{"busybox", "reboot"}, {"reboot"}},
      {{"xargs", "-0", "-r", "rm", "-f"}, {"rm", "-f"}},
      {{"xargs"}, {"echo"}},
      {{"strace", "-f", "-o", "/tmp/t", "reboot"}, {"reboot"}},
      {{"start-stop-daemon", "--start", "--exec", "/sbin/reboot", "--", "-f"}, {"/sbin/reboot", "-f"}},
      {{"ip", "netns", "exec", "blue", "reboot"}, {"reboot"}},
      {{"su", "-", "root", "-c", "reboot"}, {"sh", "-c", "reboot"}},
      {{"su", "-c", "reboot", "root"}, {"sh", "-c", "reboot"}},
      {{"su", "-s", "/tmp/x", "root"}, {"/tmp/x"}},
  };
  for (const Case& c : cases) {
    auto words = Words(c.words);
    INFO(words[0].text << " … " << words.back().text);
    auto step = PeelRunner(words);
    REQUIRE(step.has_value());
    CHECK(step->kind == K::kCommand);
    CHECK(Texts(step->rest) == c.rest);
  }
  CHECK_FALSE(PeelRunner(Words({"systemctl", "stop", "ssh"})).has_value());
  CHECK_FALSE(PeelRunner(Words({"command", "-v", "reboot"})).has_value());
  CHECK_FALSE(PeelRunner(Words({"ip", "link", "show"})).has_value());
}

TEST_CASE("runners that hand a command line to a shell give its text") {
  struct Case {
    std::initializer_list<const char*> words;
    std::string script;
  };
  const Case cases[] = {
      {{"env", "-S", "systemctl stop ssh"}, "systemctl stop ssh"},
      {{"env", "-Ssystemctl stop ssh"}, "systemctl stop ssh"},
      {{"env", "-iS", "systemctl stop", "ssh"}, "systemctl stop 'ssh'"},
      {{"env", "--split-string=systemctl stop ssh"}, "systemctl stop ssh"},
      {{"env", "--split", "systemctl stop ssh"}, "systemctl stop ssh"},
      {{"flock", "/run/x", "-c", "systemctl stop ssh"}, "systemctl stop ssh"},
      {{"watch", "-n", "1", "systemctl", "stop", "ssh"}, "systemctl stop ssh"},
      {{"sudo", "-s", "systemctl", "stop", "ssh"}, "systemctl stop ssh"},
      {{"ssh", "-p", "2222", "root@localhost", "systemctl", "stop", "ssh"}, "systemctl stop ssh"},
      {{"script", "-qc", "systemctl stop ssh", "/dev/null"}, "systemctl stop ssh"},
      {{"sg", "root", "-c", "systemctl stop ssh"}, "systemctl stop ssh"},
  };
  for (const Case& c : cases) {
    auto words = Words(c.words);
    INFO(words[0].text << " " << words[1].text);
    auto step = PeelRunner(words);
    REQUIRE(step.has_value());
    CHECK(step->kind == K::kScript);
    CHECK(step->script == c.script);
  }
}

TEST_CASE("runners that run nothing, a shell on their input, or a command made of their input") {
  CHECK(PeelRunner(Words({"nice"}))->kind == K::kNothing);
  CHECK(PeelRunner(Words({"chrt", "-p", "1234"}))->kind == K::kNothing);
  CHECK(PeelRunner(Words({"taskset", "-p", "1", "1234"}))->kind == K::kNothing);
  CHECK(PeelRunner(Words({"flock", "9"}))->kind == K::kNothing);
  CHECK(PeelRunner(Words({"ionice", "-p", "1234"}))->kind == K::kNothing);
  CHECK(PeelRunner(Words({"sudo", "-s"}))->kind == K::kStdinShell);
  CHECK(PeelRunner(Words({"chroot", "/srv/x"}))->kind == K::kStdinShell);
  CHECK(PeelRunner(Words({"script", "-q", "/dev/null"}))->kind == K::kStdinShell);
  for (auto words : {Words({"xargs", "sudo"}), Words({"xargs", "-n1", "env"}),
                     Words({"xargs", "-I{}", "sh", "-c", "{}"}), Words({"xargs", "-I", "CMD", "CMD"}),
                     Words({"xargs", "bash"}), Words({"xargs", "nohup", "nice"}), Words({"xargs", "eval"})}) {
    INFO(words.back().text);
    auto step = PeelRunner(words);
    REQUIRE(step.has_value());
    CHECK(step->kind == K::kUnjudgeable);
    CHECK_THAT(step->why, Catch::Contains("xargs builds the command it runs from its input"));
  }
  // A shell given -c keeps its script; xargs only adds arguments.
  CHECK(PeelRunner(Words({"xargs", "sh", "-c", "echo \"$@\"", "_"}))->kind == K::kCommand);
}
