// Splits a shell command line into the simple commands it runs, well enough for a policy to see
// every program that would execute: the pieces between ; && || | & and newlines, the insides of
// $(…), backticks, (…) subshells and { …; } groups, the scripts of `bash -c '…'` / `sh -c` / `eval`,
// with prefixes that only change how a program runs (sudo and its options, env and VAR=value,
// nohup, nice, timeout, stdbuf, ionice, chroot-less wrappers: command, builtin, exec, time, xargs)
// peeled off so `program` is what actually runs. Redirections are kept with their targets.
//
// This is not a shell: it does not expand variables or globs. Words keep their text with quotes
// removed; a word that held a $(…) or `…` keeps that text too, so a policy can look inside.
// Errors (InvalidArgument) for what a shell would also reject: an unterminated quote or $( —
// with the column.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

struct Redirect {
  std::string op;      // ">", ">>", "<", ">|", "&>", "2>", ...
  std::string target;  // file name (or &N)
};

struct SimpleCommand {
  std::string program;             // basename of the program run, after the prefixes
  std::vector<std::string> args;   // words after the program
  std::vector<std::string> prefixes;  // peeled wrappers, e.g. {"sudo", "nohup"}
  std::vector<Redirect> redirects;
  bool stdin_from_pipe = false;    // the previous command's output is piped into this one
  std::string text;                // the command's words re-joined, for messages
};

Result<std::vector<SimpleCommand>> SplitShellCommand(std::string_view line);

}  // namespace temper
