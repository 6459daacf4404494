// Command runners: programs whose job is to run another command (sudo, env, nohup, nice, timeout,
// stdbuf, setsid, flock, watch, unshare, nsenter, chroot, busybox, xargs, su, ssh, ...). To judge
// what a command line does, a reader must look through them to the command they run, and each
// names that command its own way: after its options (`nice -n 5 cmd`), after operands
// (`timeout 10 cmd`, `chroot /srv cmd`, `flock /run/x cmd`), as one string a shell or env splits
// (`su -c 'cmd'`, `flock /run/x -c 'cmd'`, `watch 'cmd'`, `env -S 'cmd'`, `ssh host cmd`), or as
// a shell reading its input (`sudo -s`, `su`). This file is the one table of them and their options.
//
// Some runners build the command from their input, so its words do not say what will run
// (`xargs sudo`, `xargs -I{} sh -c '{}'`); those are reported as unjudgeable with the reason.
// Schedulers that run a command later, outside the line that is judged (systemd-run, at, batch),
// are not runners here: the command policy refuses them.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace temper {

// One word of a command, quotes removed. `expanded`: it held a parameter expansion, command
// substitution or arithmetic ($x, ${x}, $(…), `…`, $((…))), so its text is not what runs.
struct ShellWord {
  std::string text;
  bool expanded = false;
};

struct RunnerStep {
  enum class Kind {
    kCommand,     // `rest` is the command it runs (peel it again: it may be a runner too)
    kScript,      // it hands `script` to a shell (or splits it into words, as env -S does)
    kStdinShell,  // it starts a shell that reads its commands from standard input
    kNothing,     // it runs no command (`nice` alone, `chrt -p 1`, `flock 3`)
    kUnjudgeable  // the command it runs is not in its words; `why` says where it comes from
  } kind = Kind::kNothing;
  std::vector<ShellWord> rest;
  std::string script;
  std::string why;
};

// What `words[0]` runs when it is a runner (matched on its basename); nullopt when it is not one.
std::optional<RunnerStep> PeelRunner(const std::vector<ShellWord>& words);

}  // namespace temper
