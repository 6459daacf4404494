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
//   - the scripts of `bash -c '…'` / `sh -c` / `eval`, and the commands of `find … -exec … ;`;
//   - command runners (policy/command_runners.h: sudo, env and env -S, nohup, nice, timeout,
//     stdbuf, setsid, flock, watch, unshare, nsenter, chroot, busybox, su, xargs, ssh, …) peeled
//     off, so `program` is what actually runs, and the command lines they hand to a shell parsed.
// Here-document bodies and here-strings are data: only their $(…)/`…` (when the delimiter is
// unquoted) run — unless they are given to a shell that reads its script from standard input
// (`bash <<'EOF'`, `sh -s <<< '…'`), whose script they are and are parsed as. Their text is kept
// with the redirection (Redirect::body), so a policy can judge what a command writes. Comments
// (# at the start of a word) are skipped. Redirections are kept with their targets.
//
// This is not a shell: it does not expand variables or globs (a program named by a variable,
// `"$SYSTEMCTL_EXEC" stop x`, comes out as "$SYSTEMCTL_EXEC" with program_computed set). Words keep
// their text with quotes removed; a word that held a $(…), `…`, <(…), $((…)) or ${…} keeps that
// text too, so a policy can look inside. [[ … ]] and (( … )) come out as commands named "[[" and
// "((" whose arguments are data. Commands inside a substitution come out before the command whose
// word holds it. Assignments to shell variables (NAME=value, NAME=(…), export/declare/local/
// readonly/typeset, for-loop variables, read/mapfile/printf -v targets) are listed apart, so a
// policy can resolve a program named by a variable that holds a literal.
//
// Errors: InvalidArgument for what a shell would also reject — an unterminated quote, $(, ${,
// [[, a redirection without a target, an `if` without `fi`, a `)` or `fi` with nothing to close, a case
// pattern without `)` — naming the problem and its column (1-based, in the line given; inside a
// `…` or a `bash -c` script the message says which column of that script). Nesting deeper than a
// fix would write (eight levels of substitutions and scripts) is refused the same way.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "policy/command_runners.h"

namespace temper {

struct Redirect {
  std::string op;      // ">", ">>", "<", ">|", "&>", "2>", "<<", "<<<", ...
  std::string target;  // file name (or &N), here-document delimiter, here-string word
  // The data the command reads: a here-document's body (tabs stripped for <<-) or the
  // here-string's word. Empty for other redirections.
  std::string body;
  // The body's $x, $(…) and `…` expand (an unquoted here-document delimiter, or a here-string
  // word that held them): the text written is not the body as it stands.
  bool body_expanded = false;
  bool target_expanded = false;  // the target held an expansion: its text is not the file's name
};

// NAME=value, NAME+=value, NAME=(a b c), or a variable set some other way.
struct ShellAssignment {
  std::string name;
  std::vector<std::string> values;  // the value, an array's elements, or a for loop's words
  bool append = false;              // +=
  bool alternatives = false;        // a for/select variable: one of `values` at a time
  bool computed = false;            // the value is made at run time ($(…), $x, read, mapfile, ...)
};

struct SimpleCommand {
  std::string program;                       // basename of the program run, after the runners
  std::string program_word;                  // the program's word as written (a path when it holds a '/')
  bool program_computed = false;             // the program's word held an expansion: its text is not the program
  std::vector<std::string> args;             // words after the program
  std::vector<bool> args_expanded;           // per arg: it held an expansion
  std::vector<std::string> prefixes;         // peeled runners, e.g. {"sudo", "nohup"}
  std::vector<ShellAssignment> environment;  // NAME=value words before the program (and env's)
  std::vector<Redirect> redirects;
  bool stdin_from_pipe = false;  // another command's output is its input: `a | this`, `this < <(a)`
  // The simple command whose output is its input (an index in ParsedShell::commands), when that
  // is one simple command: `echo x | this`.
  std::optional<size_t> piped_from;
  // It runs beside the shell that started it: in the background (&) or in a pipeline of several
  // commands (each a process of its own), itself or as part of a compound command.
  bool async = false;
  std::string function;  // the innermost function whose body holds it ("" outside any)
  // Set when a runner builds the command from elsewhere (xargs from its input): why its words do
  // not say what runs.
  std::string unjudgeable;
  std::string text;  // the command's words re-joined, for messages
};

struct ParsedShell {
  std::vector<SimpleCommand> commands;
  std::vector<ShellAssignment> assignments;  // to the shell's own variables, in order
};

Result<ParsedShell> SplitShellCommand(std::string_view line);

// What `c` runs when its program word stands for `program_words` (a variable's value): `c` again,
// with the runners among those words peeled and the scripts they hand to a shell parsed.
// Errors as SplitShellCommand's.
Result<ParsedShell> Respell(const SimpleCommand& c, const std::vector<std::string>& program_words);

// For a shell (sh, bash, dash, zsh, ksh) run without -c: the script file it runs (its first
// operand, as written), or nullopt when it reads its script from standard input (no operand, -s)
// or is not a shell.
std::optional<std::string> ShellScriptFile(const SimpleCommand& cmd);

}  // namespace temper
