// Splits a shell command line or script into the simple commands it runs, well enough for a policy
// to see every program that would execute. It reads the bash grammar that fixes are written in
// (SCAP Security Guide's own remediation scripts parse):
//   - lists and pipelines: ; && || | |& & and newlines;
//   - compound commands: ( … ) subshells, { …; } groups, if/then/elif/else/fi, while/until/for/
//     select … do … done, for ((…)), case … in pat) … ;; esac, [[ … ]] (regexes, < and > inside),
//     (( … )) and function definitions (`name() { … }`, `function name { … }`), whose bodies are
//     parsed like any other command;
//   - the commands inside $(…), `…`, process substitutions <(…) and >(…), $((…)) arithmetic and
//     ${…} expansions, in words, double quotes and unquoted here-document bodies;
//   - the scripts of `bash -c '…'` / `sh -c` / `su -c` / `eval`, and the commands of
//     `find … -exec … ;`;
//   - prefixes that only change how a program runs (sudo and its options, env and VAR=value,
//     nohup, nice, timeout, stdbuf, ionice, chroot, command, builtin, exec, time, xargs, coproc)
//     peeled off, so `program` is what actually runs.
// Here-document bodies and here-strings are data: only their $(…)/`…` (when the delimiter is
// unquoted) run — unless they are given to a shell that reads its script from standard input
// (`bash <<'EOF'`, `sh -s <<< '…'`), whose script they are and are parsed as. Comments (# at
// the start of a word) are skipped. Redirections are kept with their targets.
//
// This is not a shell: it does not expand variables or globs (a program named by a variable,
// `"$SYSTEMCTL_EXEC" stop x`, comes out as "$SYSTEMCTL_EXEC"). Words keep their text with quotes
// removed; a word that held a $(…), `…`, <(…), $((…)) or ${…} keeps that text too, so a policy
// can look inside. [[ … ]] and (( … )) come out as commands named "[[" and "((" whose arguments
// are data. Commands inside a substitution come out before the command whose word holds it.
//
// Errors: InvalidArgument for what a shell would also reject — an unterminated quote, $(, ${,
// [[, a redirection without a target, an `if` without `fi`, a `)` or `fi` with nothing to close, a case
// pattern without `)` — naming the problem and its column (1-based, in the line given; inside a
// `…` or a `bash -c` script the message says which column of that script). Nesting deeper than a
// fix would write (eight levels of substitutions and scripts) is refused the same way.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

struct Redirect {
  std::string op;      // ">", ">>", "<", ">|", "&>", "2>", "<<", "<<<", ...
  std::string target;  // file name (or &N), here-document delimiter, here-string word
};

struct SimpleCommand {
  std::string program;             // basename of the program run, after the prefixes
  std::vector<std::string> args;   // words after the program
  std::vector<std::string> prefixes;  // peeled wrappers, e.g. {"sudo", "nohup"}
  std::vector<Redirect> redirects;
  bool stdin_from_pipe = false;    // another command's output is its input: `a | this`, `this < <(a)`
  std::string text;                // the command's words re-joined, for messages
};

Result<std::vector<SimpleCommand>> SplitShellCommand(std::string_view line);

}  // namespace temper
