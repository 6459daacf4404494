#include "policy/shell_split.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

namespace temper {

namespace {

// $( inside bash -c inside ${ …: deeper is not a fix anyone writes, and the bound keeps the
// parser's recursion (one C++ frame chain per level) small on any input.
constexpr int kMaxDepth = 8;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The characters that end an unquoted word (bash's metacharacters).
bool IsMeta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' ||
         c == ')';
}

bool IsName(std::string_view w) {
  if (w.empty() || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
  return std::all_of(w.begin(), w.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "NAME=", "NAME+=" or "NAME[subscript]=": the start of an assignment.
bool IsAssignmentPrefix(std::string_view raw) {
  if (raw.empty() || raw.back() != '=') return false;
  raw.remove_suffix(1);
  if (!raw.empty() && raw.back() == '+') raw.remove_suffix(1);
  if (!raw.empty() && raw.back() == ']') {
    size_t open = raw.find('[');
    if (open == std::string_view::npos) return false;
    raw = raw.substr(0, open);
  }
  return IsName(raw);
}

bool IsAssignment(const std::string& w) {
  size_t eq = w.find('=');
  return eq != std::string::npos && IsAssignmentPrefix(std::string_view(w).substr(0, eq + 1));
}

// "2" in "2>file", "{fd}" in "exec {fd}>file".
bool IsFdWord(std::string_view raw) {
  if (raw.size() > 2 && raw.front() == '{' && raw.back() == '}') return IsName(raw.substr(1, raw.size() - 2));
  return !raw.empty() &&
         std::all_of(raw.begin(), raw.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One word as the parser read it: its text, whether it held an expansion, and an array
// literal's elements (`a=(x y)`).
struct Word {
  std::string text;
  bool expanded = false;
  bool array = false;
  std::vector<ShellWord> elements;
};

// NAME=value / NAME+=value / NAME=(…) as an assignment.
ShellAssignment ToAssignment(const Word& w) {
  ShellAssignment a;
  const size_t eq = w.text.find('=');
  std::string lhs = w.text.substr(0, eq);
  if (!lhs.empty() && lhs.back() == '+') {
    a.append = true;
    lhs.pop_back();
  }
  a.name = lhs.substr(0, lhs.find('['));
  if (w.array) {
    for (const ShellWord& e : w.elements) {
      a.values.push_back(e.text);
      a.computed = a.computed || e.expanded;
    }
  } else {
    a.values.push_back(w.text.substr(eq + 1));
    a.computed = w.expanded;
  }
  return a;
}

ShellAssignment Computed(const std::string& name) {
  ShellAssignment a;
  a.name = name;
  a.computed = true;
  return a;
}

Status ParseScript(std::string_view script, int depth, const std::string& where, ParsedShell* out);

bool IsShell(const std::string& program) {
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"};
  return std::find(std::begin(kShells), std::end(kShells), program) != std::end(kShells);
}

// The script a shell's -c, eval, trap or alias runs; false when there is none.
bool InlineScript(const SimpleCommand& cmd, std::string* script) {
  if (cmd.program == "eval") {
    for (size_t k = 0; k < cmd.args.size(); ++k) *script += (k ? " " : "") + cmd.args[k];
    return true;
  }
  // trap ACTION SIGNAL...: the action runs when the signal comes (EXIT: when the shell ends).
  if (cmd.program == "trap") {
    size_t k = 0;
    if (k < cmd.args.size() && cmd.args[k] == "--") ++k;
    if (k + 1 >= cmd.args.size() || cmd.args[k].starts_with("-")) return false;
    *script = cmd.args[k];
    return true;
  }
  // alias NAME=VALUE...: with expand_aliases on, NAME runs VALUE.
  if (cmd.program == "alias") {
    bool any = false;
    for (const std::string& a : cmd.args) {
      const size_t eq = a.find('=');
      if (eq == std::string::npos) continue;
      *script += (any ? "\n" : "") + a.substr(eq + 1);
      any = true;
    }
    return any;
  }
  if (!IsShell(cmd.program)) return false;
  for (size_t k = 0; k + 1 < cmd.args.size(); ++k) {
    const std::string& a = cmd.args[k];
    if (a == "-c" || (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.back() == 'c')) {
      *script = cmd.args[k + 1];
      return true;
    }
  }
  return false;
}

// The commands find runs: each -exec/-execdir/-ok/-okdir up to ";" (or "{} +").
std::vector<std::vector<Word>> FindExecs(const SimpleCommand& cmd) {
  std::vector<std::vector<Word>> execs;
  if (cmd.program != "find") return execs;
  for (size_t k = 0; k < cmd.args.size(); ++k) {
    const std::string& a = cmd.args[k];
    if (a != "-exec" && a != "-execdir" && a != "-ok" && a != "-okdir") continue;
    std::vector<Word> exec;
    size_t j = k + 1;
    for (; j < cmd.args.size(); ++j) {
      if (cmd.args[j] == ";" || (cmd.args[j] == "+" && !exec.empty() && exec.back().text == "{}")) break;
      exec.push_back({cmd.args[j], cmd.args_expanded[j], false, {}});
    }
    if (!exec.empty()) execs.push_back(std::move(exec));
    k = j;
  }
  return execs;
}

// The shell variables a builtin sets from what it reads or computes: read, mapfile/readarray,
// printf -v, getopts. Their values are not in the text.
std::vector<ShellAssignment> VariablesSetBy(const SimpleCommand& cmd) {
  std::vector<ShellAssignment> out;
  const std::vector<std::string>& a = cmd.args;
  if (cmd.program == "read") {
    for (size_t k = 0; k < a.size(); ++k) {
      if (a[k] == "-a" && k + 1 < a.size()) out.push_back(Computed(a[++k]));
      else if (a[k].size() == 2 && a[k][0] == '-' &&
               std::string_view("dnNptui").find(a[k][1]) != std::string_view::npos)
        ++k;
      else if (IsName(a[k])) out.push_back(Computed(a[k]));
    }
    if (out.empty()) out.push_back(Computed("REPLY"));
  } else if (cmd.program == "mapfile" || cmd.program == "readarray") {
    std::string name = "MAPFILE";
    for (size_t k = 0; k < a.size(); ++k) {
      if (a[k].size() == 2 && a[k][0] == '-' && std::string_view("dnOsuCc").find(a[k][1]) != std::string_view::npos)
        ++k;
      else if (IsName(a[k])) name = a[k];
    }
    out.push_back(Computed(name));
  } else if (cmd.program == "printf") {
    for (size_t k = 0; k + 1 < a.size(); ++k) {
      if (a[k] == "-v") out.push_back(Computed(a[k + 1].substr(0, a[k + 1].find('['))));
    }
  } else if (cmd.program == "getopts" && a.size() >= 2) {
    out.push_back(Computed(a[1]));
  }
  return out;
}

bool IsDeclarationBuiltin(const std::string& program) {
  return program == "export" || program == "declare" || program == "typeset" || program == "local" ||
         program == "readonly";
}

// What Finish made of one simple command.
struct Finished {
  size_t index = 0;  // of the command in out->commands (valid when emitted)
  bool emitted = false;
  bool reads_stdin_script = false;  // a shell reading its script from standard input
};

// Turns the words of one simple command into a SimpleCommand and appends it, then the commands
// of the script it hands to a shell or eval and those of find -exec. `finished.reads_stdin_script`
// is set when the program is a shell without -c reading its script from standard input, so that
// the caller parses the here-documents and here-strings given to it as commands. `function`: the
// function whose body holds the command.
Status Finish(std::vector<Word> words, std::vector<Redirect> redirects, bool piped, std::optional<size_t> piped_from,
              int depth, const std::string& function, ParsedShell* out, Finished* finished) {
  SimpleCommand cmd;
  cmd.piped_from = piped_from;
  cmd.redirects = std::move(redirects);
  cmd.function = function;
  // `< <(…)`: standard input is a pipe from another command, as with `|`.
  cmd.stdin_from_pipe = piped;
  for (const Redirect& r : cmd.redirects) {
    if ((r.op == "<" || r.op == "0<") && r.target.starts_with("<(")) cmd.stdin_from_pipe = true;
  }
  for (size_t k = 0; k < words.size(); ++k) cmd.text += (k ? " " : "") + words[k].text;

  // Assignments, then runners, until the program.
  std::vector<ShellWord> rest;
  size_t at = 0;
  for (; at < words.size() && IsAssignment(words[at].text); ++at) cmd.environment.push_back(ToAssignment(words[at]));
  const bool only_assignments = at >= words.size();
  for (size_t k = at; k < words.size(); ++k) rest.push_back({words[k].text, words[k].expanded});
  std::optional<std::string> runner_script;
  bool runner_stdin_shell = false;
  for (int peeled = 0; !rest.empty(); ++peeled) {
    if (peeled > 16) return Status::InvalidArgument("cannot parse the command: runners nest too deeply");
    std::optional<RunnerStep> step = PeelRunner(rest);
    if (!step) break;
    if (step->kind == RunnerStep::Kind::kCommand) {
      cmd.prefixes.push_back(Basename(rest[0].text));
      rest = std::move(step->rest);
      size_t k = 0;
      for (; k < rest.size() && IsAssignment(rest[k].text); ++k) {
        cmd.environment.push_back(ToAssignment({rest[k].text, rest[k].expanded, false, {}}));
      }
      rest.erase(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    // The runner itself is the program: it runs a script, a shell on its input, or nothing.
    if (step->kind == RunnerStep::Kind::kScript) runner_script = step->script;
    runner_stdin_shell = step->kind == RunnerStep::Kind::kStdinShell;
    if (step->kind == RunnerStep::Kind::kUnjudgeable) cmd.unjudgeable = step->why;
    break;
  }
  if (only_assignments && cmd.redirects.empty()) {
    for (Word& w : words) out->assignments.push_back(ToAssignment(w));
    return Status::OK();
  }
  if (!rest.empty()) {
    cmd.program = Basename(rest[0].text);
    cmd.program_word = rest[0].text;
    cmd.program_computed = rest[0].expanded;
    for (size_t k = 1; k < rest.size(); ++k) {
      cmd.args.push_back(rest[k].text);
      cmd.args_expanded.push_back(rest[k].expanded);
    }
  }
  if (IsDeclarationBuiltin(cmd.program)) {
    for (size_t k = 0; k < cmd.args.size(); ++k) {
      if (IsAssignment(cmd.args[k]))
        out->assignments.push_back(ToAssignment({cmd.args[k], cmd.args_expanded[k], false, {}}));
    }
  }
  for (ShellAssignment& a : VariablesSetBy(cmd)) out->assignments.push_back(std::move(a));
  std::string script;
  const bool has_script = runner_script ? (script = *runner_script, true) : InlineScript(cmd, &script);
  finished->reads_stdin_script =
      !has_script && (runner_stdin_shell || (IsShell(cmd.program) && !ShellScriptFile(cmd).has_value()));
  std::vector<std::vector<Word>> execs = FindExecs(cmd);
  const std::string where = fmt::format(" of the script given to {}", cmd.program);
  finished->index = out->commands.size();
  finished->emitted = true;
  out->commands.push_back(std::move(cmd));
  if ((has_script || !execs.empty()) && depth + 1 > kMaxDepth) {
    return Status::InvalidArgument("cannot parse the command: scripts nest too deeply");
  }
  if (has_script) TEMPER_RETURN_IF_ERROR(ParseScript(script, depth + 1, where, out));
  for (std::vector<Word>& exec : execs) {
    // `find … -exec {} \;` runs the files it finds.
    const bool runs_found = exec[0].text.find("{}") != std::string::npos;
    Finished inner;
    TEMPER_RETURN_IF_ERROR(Finish(std::move(exec), {}, false, std::nullopt, depth + 1, function, out, &inner));
    if (runs_found && inner.emitted) out->commands[inner.index].unjudgeable = "find runs the files it finds";
  }
  return Status::OK();
}

struct Heredoc {
  std::string delimiter;
  bool strip_tabs = false;  // <<-
  bool expands = true;      // unquoted delimiter: $(…) and `…` in the body run
  bool script = false;      // given to a shell that runs it: the body is commands, not data
  // Where the body goes: the command (in out->commands) and its redirection, once emitted.
  std::optional<size_t> command;
  size_t redirect = 0;
};

// A compound command that is open, with the position of the word that opened it.
struct Frame {
  enum Kind { kSubshell, kGroup, kIf, kLoop, kCase } kind;
  size_t at;
  size_t first_command = 0;  // out->commands.size() when it opened
  bool piped_in = false;     // it reads a pipe: the right side of `a | { …; }`
  std::string function;      // the function whose body it is ("" when it is not a body)
};
// Parses one command list of `s` from a position: the whole input, or (for $(…), <(…), >(…))
// up to the ")" that closes it. Nested lists get a Parser of their own over the same text, so
// positions in errors are columns of the line the caller gave.
class Parser {
 public:
  // `where` ends every error message, naming the script the columns count in when that is not the
  // caller's line (" of the script given to bash").
  // `function`: the function whose body holds this text ("" at a script's top level).
  Parser(std::string_view s, size_t begin, int depth, std::string where, std::string function, ParsedShell* out)
      : s_(s), i_(begin), depth_(depth), where_(std::move(where)), outer_function_(std::move(function)), out_(out) {}

  Status ParseAll() { return ParseList(false, "", 0); }
  // The list inside `opener` (at `opened_at`); pos() is then just after its ")".
  Status ParseUntilParen(std::string_view opener, size_t opened_at) { return ParseList(true, opener, opened_at); }
  size_t pos() const { return i_; }
  // Here-documents whose bodies had not started when the list ended: bash reads them after the
  // line that holds the substitution.
  std::vector<Heredoc> TakeHeredocs() { return std::move(heredocs_); }

 private:
  struct Command {
    std::vector<Word> words;
    std::vector<Redirect> redirects;
    bool piped = false;
    std::optional<size_t> piped_from;  // the simple command piped into it
    bool data = false;                 // a for/select header: its words are not a command
    std::vector<size_t> heredocs;      // its here-documents, as indices in heredocs_
  };

  // Leaves one level of nesting when it goes out of scope.
  class NestGuard {
   public:
    explicit NestGuard(int* nest) : nest_(nest) {}
    ~NestGuard() { --*nest_; }
    NestGuard(const NestGuard&) = delete;
    NestGuard& operator=(const NestGuard&) = delete;

   private:
    int* nest_;
  };

  char Peek(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool AtEnd() const { return i_ >= s_.size(); }
  bool AtCommandStart() const { return cmd_.words.empty() && !cmd_.data; }
  // `word` at i_, standing alone (followed by a metacharacter or the end).
  bool LooksAt(std::string_view word) const {
    return s_.substr(i_, word.size()) == word && (i_ + word.size() >= s_.size() || IsMeta(s_[i_ + word.size()]));
  }

  Status Error(std::string_view what, size_t at) const {
    return Status::InvalidArgument(fmt::format("cannot parse the command: {} at column {}{}", what, at + 1, where_));
  }

  Status Enter(size_t at) {
    if (depth_ + nest_ + 1 > kMaxDepth) return Error("substitutions nest too deeply", at);
    ++nest_;
    return Status::OK();
  }

  Status Unclosed(const Frame& f) const {
    switch (f.kind) {
      case Frame::kSubshell:
        return Error("a '(' without ')'", f.at);
      case Frame::kGroup:
        return Error("a '{' without '}'", f.at);
      case Frame::kIf:
        return Error("an 'if' without 'fi'", f.at);
      case Frame::kLoop:
        return Error("a loop without 'done'", f.at);
      case Frame::kCase:
        return Error("a 'case' without 'esac'", f.at);
    }
    return Error("an unclosed compound command", f.at);
  }

  Status Inside(Frame::Kind kind, std::string_view word, std::string_view outside, size_t at) const {
    if (frames_.empty() || frames_.back().kind != kind) return Error(fmt::format("'{}' outside {}", word, outside), at);
    return Status::OK();
  }

  Status Close(Frame::Kind kind, std::string_view word, std::string_view opener, size_t at) {
    if (frames_.empty() || frames_.back().kind != kind) {
      return Error(fmt::format("'{}' without a matching {}", word, opener), at);
    }
    Pop();
    return Status::OK();
  }

  // Blanks and line continuations.
  void SkipBlanks() {
    while (i_ < s_.size()) {
      if (IsBlank(s_[i_])) ++i_;
      else if (s_[i_] == '\\' && Peek(1) == '\n') i_ += 2;
      else break;
    }
  }

  void SkipComment() {
    while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }

  // At a '\n': here-document bodies follow the line that introduced them.
  Status Newline() {
    ++i_;
    return ReadHeredocBodies();
  }

  Status ParseList(bool until_paren, std::string_view opener, size_t opened_at) {
    for (;;) {
      SkipBlanks();
      if (AtEnd()) break;
      const char c = s_[i_];
      if (c == '#') {
        SkipComment();
      } else if (c == '\n') {
        TEMPER_RETURN_IF_ERROR(EndCommand(false, false));
        TEMPER_RETURN_IF_ERROR(Newline());
      } else if (c == ';') {
        TEMPER_RETURN_IF_ERROR(EndCommand(false, false));
        if (Peek(1) == ';' || Peek(1) == '&') {  // ;; ;& ;;& end a case item
          const size_t size = Peek(1) == ';' && Peek(2) == '&' ? 3 : 2;
          if (frames_.empty() || frames_.back().kind != Frame::kCase) {
            return Error(fmt::format("'{}' outside a case statement", s_.substr(i_, size)), i_);
          }
          i_ += size;
          TEMPER_RETURN_IF_ERROR(ReadCasePatterns());
        } else {
          ++i_;
        }
      } else if (c == '&' && Peek(1) == '>') {
        TEMPER_RETURN_IF_ERROR(ReadRedirect(""));
      } else if (c == '&' || c == '|') {
        const bool pipe = c == '|' && Peek(1) != '|';
        const bool background = c == '&' && Peek(1) != '&';
        i_ += Peek(1) == c || (c == '|' && Peek(1) == '&') ? 2 : 1;
        TEMPER_RETURN_IF_ERROR(EndCommand(pipe, pipe || background));
      } else if (c == ')') {
        TEMPER_RETURN_IF_ERROR(EndCommand(false, false));
        if (!frames_.empty() && frames_.back().kind == Frame::kSubshell) {
          Pop();
          ++i_;
        } else if (until_paren && frames_.empty()) {
          ++i_;
          return Status::OK();
        } else if (!frames_.empty()) {
          return Unclosed(frames_.back());
        } else {
          return Error("a ')' without a matching '('", i_);
        }
      } else if (c == '(') {
        TEMPER_RETURN_IF_ERROR(OpenParen());
      } else if ((c == '<' || c == '>') && Peek(1) != '(') {
        TEMPER_RETURN_IF_ERROR(ReadRedirect(""));
      } else {
        TEMPER_RETURN_IF_ERROR(ReadCommandWord());
      }
    }
    TEMPER_RETURN_IF_ERROR(EndCommand(false, false));
    if (!frames_.empty()) return Unclosed(frames_.back());
    if (until_paren) return Error(fmt::format("an unterminated {}", opener), opened_at);
    return Status::OK();
  }

  // Ends the command being read. `next_piped`: a `|` follows, so the next command reads this one's
  // output; `async`: a `|` or `&` follows, so this one runs beside the shell.
  Status EndCommand(bool next_piped, bool async) {
    if (cmd_.data) {
      ForLoopVariable();
      cmd_.words.clear();
    }
    async = async || cmd_.piped;
    // `{ …; } &`, `done | sort`: the compound command just closed is what runs beside the shell.
    const bool after_compound = last_closed_.has_value() && cmd_.words.empty();
    if (async && after_compound) MarkAsync(last_closed_->first, last_closed_->second);
    last_closed_.reset();
    std::optional<size_t> source;
    if (!cmd_.words.empty() || !cmd_.redirects.empty()) {
      std::vector<std::string> here_strings;
      for (const Redirect& r : cmd_.redirects) {
        if (r.op.ends_with("<<<")) here_strings.push_back(r.target);
      }
      const size_t first = out_->commands.size();
      Finished finished;
      TEMPER_RETURN_IF_ERROR(Finish(std::move(cmd_.words), std::move(cmd_.redirects), cmd_.piped, cmd_.piped_from,
                                    depth_, CurrentFunction(), out_, &finished));
      if (next_piped && finished.emitted && !after_compound) source = finished.index;
      for (size_t k : cmd_.heredocs) {
        if (finished.emitted) heredocs_[k].command = finished.index;
      }
      if (finished.reads_stdin_script) {
        if (depth_ + 1 > kMaxDepth) return Error("scripts nest too deeply", i_);
        for (const std::string& h : here_strings) {
          TEMPER_RETURN_IF_ERROR(ParseScript(h, depth_ + 1, " of the here-string given to a shell", out_));
        }
        for (size_t k : cmd_.heredocs) heredocs_[k].script = true;
      }
      if (async) MarkAsync(first, out_->commands.size());
    }
    cmd_ = Command{};
    cmd_.piped = next_piped;
    cmd_.piped_from = source;
    return Status::OK();
  }

  // `for NAME in WORDS`: NAME takes each word in turn (without `in`, each argument: "$@").
  void ForLoopVariable() {
    if (cmd_.words.empty() || !IsName(cmd_.words[0].text)) return;
    ShellAssignment a;
    a.name = cmd_.words[0].text;
    a.alternatives = true;
    if (cmd_.words.size() >= 2 && cmd_.words[1].text == "in") {
      for (size_t k = 2; k < cmd_.words.size(); ++k) {
        a.values.push_back(cmd_.words[k].text);
        a.computed = a.computed || cmd_.words[k].expanded;
      }
    } else {
      a.computed = true;
    }
    out_->assignments.push_back(std::move(a));
  }

  void MarkAsync(size_t first, size_t last) {
    for (size_t k = first; k < last && k < out_->commands.size(); ++k) out_->commands[k].async = true;
  }

  // The function whose body is being read: the innermost body open here, else the one around
  // this text.
  std::string CurrentFunction() const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      if (!f->function.empty()) return f->function;
    }
    return outer_function_;
  }

  // Opens a compound command; the first one after `name()` is that function's body.
  void Open(Frame::Kind kind, size_t at) {
    frames_.push_back({kind, at, out_->commands.size(), cmd_.piped, std::move(pending_function_)});
    pending_function_.clear();
  }

  // Closes the innermost compound command (the caller checked its kind).
  void Pop() {
    const Frame f = frames_.back();
    frames_.pop_back();
    if (f.piped_in) MarkAsync(f.first_command, out_->commands.size());
    last_closed_ = std::make_pair(f.first_command, out_->commands.size());
  }

  // A '(' : a subshell or (( arithmetic )) where a command starts, or the "()" of `name()`.
  Status OpenParen() {
    if (AtCommandStart()) {
      if (Peek(1) == '(') {
        std::string expression;
        TEMPER_ASSIGN_OR_RETURN(bool arithmetic, ReadArithmetic(&expression));
        if (arithmetic) {
          cmd_.words.push_back({"((", false, false, {}});
          cmd_.words.push_back({std::move(expression), false, false, {}});
          return Status::OK();
        }
      }
      Open(Frame::kSubshell, i_);
      ++i_;
      return Status::OK();
    }
    if (cmd_.words.size() == 1 && cmd_.redirects.empty()) {
      size_t j = i_ + 1;
      while (j < s_.size() && IsBlank(s_[j])) ++j;
      if (j < s_.size() && s_[j] == ')') {  // a function definition: its body is the next command
        i_ = j + 1;
        pending_function_ = cmd_.words[0].text;
        cmd_.words.clear();
        return Status::OK();
      }
    }
    return Error("an unexpected '('", i_);
  }

  Status ReadCommandWord() {
    const size_t start = i_;
    std::string word;
    bool quoted = false;
    expanded_ = false;
    array_.reset();
    TEMPER_RETURN_IF_ERROR(ReadWord(&word, &quoted, false));
    if (i_ == start) return Error(fmt::format("an unexpected '{}'", s_[i_]), i_);
    const std::string_view raw = s_.substr(start, i_ - start);
    if (!AtEnd() && (s_[i_] == '<' || s_[i_] == '>') && Peek(1) != '(' && IsFdWord(raw)) {
      return ReadRedirect(std::string(raw));
    }
    if (AtCommandStart() && !quoted && raw == word) {
      TEMPER_ASSIGN_OR_RETURN(bool reserved, ReservedWord(word, start));
      if (reserved) return Status::OK();
    }
    pending_function_.clear();  // a body must be a compound command
    Word w{std::move(word), expanded_, array_.has_value(), {}};
    if (array_) w.elements = std::move(*array_);
    cmd_.words.push_back(std::move(w));
    return Status::OK();
  }

  // Handles a reserved word where a command starts; false when `word` is not one.
  Result<bool> ReservedWord(const std::string& word, size_t at) {
    if (word == "!") return true;
    if (word == "time") {  // `time [-p] pipeline`
      SkipBlanks();
      if (LooksAt("-p")) i_ += 2;
      return true;
    }
    if (word == "{") {
      Open(Frame::kGroup, at);
      return true;
    }
    if (word == "}") {
      TEMPER_RETURN_IF_ERROR(Close(Frame::kGroup, word, "'{'", at));
      return true;
    }
    if (word == "if") {
      Open(Frame::kIf, at);
      return true;
    }
    if (word == "then" || word == "elif" || word == "else") {
      TEMPER_RETURN_IF_ERROR(Inside(Frame::kIf, word, "an 'if'", at));
      return true;
    }
    if (word == "fi") {
      TEMPER_RETURN_IF_ERROR(Close(Frame::kIf, word, "'if'", at));
      return true;
    }
    if (word == "while" || word == "until") {
      Open(Frame::kLoop, at);
      return true;
    }
    if (word == "for" || word == "select") {
      Open(Frame::kLoop, at);
      SkipBlanks();
      if (word == "for" && Peek(0) == '(' && Peek(1) == '(') {
        std::string expression;
        TEMPER_ASSIGN_OR_RETURN(bool arithmetic, ReadArithmetic(&expression));
        if (!arithmetic) return Error("a 'for ((' without '))'", i_);
      }
      cmd_.data = true;  // the loop variable and its words; their substitutions still run
      return true;
    }
    if (word == "do") {
      TEMPER_RETURN_IF_ERROR(Inside(Frame::kLoop, word, "a loop", at));
      return true;
    }
    if (word == "done") {
      TEMPER_RETURN_IF_ERROR(Close(Frame::kLoop, word, "loop", at));
      return true;
    }
    if (word == "case") {
      TEMPER_RETURN_IF_ERROR(ReadCaseHead(at));
      return true;
    }
    if (word == "esac") {
      TEMPER_RETURN_IF_ERROR(Close(Frame::kCase, word, "'case'", at));
      return true;
    }
    if (word == "function") {  // function NAME [()] BODY
      SkipBlanks();
      const size_t name_at = i_;
      std::string name;
      bool quoted = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&name, &quoted, false));
      if (i_ == name_at) return Error("a 'function' without a name", at);
      pending_function_ = name;
      SkipBlanks();
      if (Peek(0) == '(') {
        size_t j = i_ + 1;
        while (j < s_.size() && IsBlank(s_[j])) ++j;
        if (j >= s_.size() || s_[j] != ')') return Error("a function's '(' without ')'", i_);
        i_ = j + 1;
      }
      return true;
    }
    if (word == "coproc") {  // coproc [NAME] compound-command, or coproc simple-command
      SkipBlanks();
      if (Peek(0) == '(' || LooksAt("{")) return true;
      const size_t name_at = i_;
      std::string name;
      bool quoted = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&name, &quoted, false));
      size_t after = i_;
      SkipBlanks();
      if (Peek(0) == '(' || LooksAt("{")) return true;  // it was the NAME
      i_ = after;
      if (i_ == name_at) return true;
      cmd_.words.push_back({std::move(name), false, false, {}});
      return true;
    }
    if (word == "[[") {
      TEMPER_RETURN_IF_ERROR(ReadConditional(at));
      return true;
    }
    return false;
  }

  // After `case`: the word, `in`, then the first patterns.
  Status ReadCaseHead(size_t at) {
    SkipBlanks();
    const size_t subject_at = i_;
    std::string subject;
    bool quoted = false;
    TEMPER_RETURN_IF_ERROR(ReadWord(&subject, &quoted, false));
    if (i_ == subject_at) return Error("a 'case' without a word to match", at);
    for (;;) {
      SkipBlanks();
      if (Peek(0) != '\n') break;
      TEMPER_RETURN_IF_ERROR(Newline());
    }
    if (!LooksAt("in")) return Error("a 'case' without 'in'", i_);
    i_ += 2;
    Open(Frame::kCase, at);
    return ReadCasePatterns();
  }

  // At the start of a case item: `[(] pattern [| pattern]... )`, or `esac`.
  Status ReadCasePatterns() {
    for (;;) {
      SkipBlanks();
      if (AtEnd()) return Unclosed(frames_.back());
      if (s_[i_] == '\n') {
        TEMPER_RETURN_IF_ERROR(Newline());
      } else if (s_[i_] == '#') {
        SkipComment();
      } else {
        break;
      }
    }
    if (LooksAt("esac")) {
      i_ += 4;
      Pop();
      return Status::OK();
    }
    if (s_[i_] == '(') ++i_;
    for (;;) {
      SkipBlanks();
      const size_t at = i_;
      std::string pattern;
      bool quoted = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&pattern, &quoted, false));
      if (i_ == at) return Error("a case pattern expected", at);
      SkipBlanks();
      if (Peek(0) == '|') {
        ++i_;
      } else if (Peek(0) == ')') {
        ++i_;
        return Status::OK();
      } else {
        return Error("a case pattern without ')'", i_);
      }
    }
  }

  // After `[[`: words up to `]]`. Inside, < > ( ) | & are operators of the test, not of the
  // shell, and a regex after =~ may hold any of them unquoted.
  Status ReadConditional(size_t at) {
    cmd_.words.push_back({"[[", false, false, {}});
    for (;;) {
      SkipBlanks();
      if (AtEnd()) return Error("an unterminated '[['", at);
      if (s_[i_] == '\n') {
        TEMPER_RETURN_IF_ERROR(Newline());
        continue;
      }
      if (LooksAt("]]")) {
        i_ += 2;
        return Status::OK();
      }
      std::string word;
      bool quoted = false;
      expanded_ = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&word, &quoted, true));
      cmd_.words.push_back({std::move(word), expanded_, false, {}});
    }
  }

  // One word, quotes removed; substitutions in it are parsed (their commands appended to out_)
  // and kept as text. In a [[ ]] (`conditional`) only blanks and newlines end it.
  Status ReadWord(std::string* word, bool* quoted, bool conditional) {
    const size_t start = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if ((c == '<' || c == '>') && Peek(1) == '(') {
        TEMPER_RETURN_IF_ERROR(ReadSubstitution(word, c == '<' ? "<(" : ">("));
        expanded_ = true;
        continue;
      }
      if (conditional) {
        if (IsBlank(c) || c == '\n') break;
      } else {
        if (c == '(' && IsAssignmentPrefix(s_.substr(start, i_ - start))) {
          TEMPER_RETURN_IF_ERROR(ReadArrayLiteral(word));
          continue;
        }
        if (IsMeta(c)) break;
      }
      if (c == '\\') {
        if (i_ + 1 >= s_.size()) {
          word->push_back('\\');
          ++i_;
        } else {
          if (s_[i_ + 1] != '\n') {
            word->push_back(s_[i_ + 1]);
            *quoted = true;
          }
          i_ += 2;
        }
      } else if (c == '\'') {
        *quoted = true;
        size_t e = s_.find('\'', i_ + 1);
        if (e == std::string_view::npos) return Error("an unterminated ' quote", i_);
        word->append(s_.substr(i_ + 1, e - i_ - 1));
        i_ = e + 1;
      } else if (c == '"') {
        *quoted = true;
        TEMPER_RETURN_IF_ERROR(ReadDoubleQuoted(word));
      } else if (c == '$') {
        TEMPER_RETURN_IF_ERROR(ReadDollar(word, quoted, false));
      } else if (c == '`') {
        TEMPER_RETURN_IF_ERROR(ReadBacktick(word, false));
      } else {
        word->push_back(c);
        ++i_;
      }
    }
    return Status::OK();
  }

  // "NAME=(" … ")": the elements are words (data, but their substitutions run).
  Status ReadArrayLiteral(std::string* word) {
    TEMPER_RETURN_IF_ERROR(Enter(i_));
    NestGuard guard(&nest_);
    const size_t open = i_++;
    std::vector<ShellWord> elements;
    for (;;) {
      SkipBlanks();
      if (AtEnd()) return Error("an array '(' without ')'", open);
      const char c = s_[i_];
      if (c == ')') {
        ++i_;
        break;
      }
      if (c == '\n') {
        TEMPER_RETURN_IF_ERROR(Newline());
        continue;
      }
      if (c == '#') {
        SkipComment();
        continue;
      }
      const size_t at = i_;
      std::string element;
      bool quoted = false;
      const bool outer_expanded = expanded_;
      expanded_ = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&element, &quoted, false));
      if (i_ == at) return Error(fmt::format("an unexpected '{}' in an array", c), at);
      elements.push_back({std::move(element), expanded_});
      expanded_ = outer_expanded;
    }
    word->append(s_.substr(open, i_ - open));
    array_ = std::move(elements);
    return Status::OK();
  }

  Status ReadDoubleQuoted(std::string* word) {
    const size_t start = i_++;
    for (;;) {
      if (AtEnd()) return Error("an unterminated \" quote", start);
      const char d = s_[i_];
      if (d == '"') {
        ++i_;
        return Status::OK();
      }
      if (d == '\\' && i_ + 1 < s_.size()) {
        const char n = s_[i_ + 1];
        if (n == '"' || n == '\\' || n == '$' || n == '`') {
          word->push_back(n);
        } else if (n != '\n') {
          word->push_back('\\');
          word->push_back(n);
        }
        i_ += 2;
      } else if (d == '$') {
        bool ignored = false;
        TEMPER_RETURN_IF_ERROR(ReadDollar(word, &ignored, true));
      } else if (d == '`') {
        TEMPER_RETURN_IF_ERROR(ReadBacktick(word, true));
      } else {
        word->push_back(d);
        ++i_;
      }
    }
  }

  // At a '$': $((…)), $(…), ${…}, $'…', $"…" or a plain '$'.
  Status ReadDollar(std::string* word, bool* quoted, bool in_dquote) {
    const char next = Peek(1);
    if (next == '(' || next == '{' || std::isalnum(static_cast<unsigned char>(next)) || next == '_' ||
        std::string_view("@*#?$!-").find(next) != std::string_view::npos) {
      expanded_ = true;  // $(…), $((…)), ${…}, $name, $1, $@ and the other special parameters
    }
    if (next == '(') {
      if (Peek(2) == '(') {
        const size_t dollar = i_++;
        std::string expression;
        TEMPER_ASSIGN_OR_RETURN(bool arithmetic, ReadArithmetic(&expression));
        if (arithmetic) {
          word->append(s_.substr(dollar, i_ - dollar));
          return Status::OK();
        }
        i_ = dollar;  // "$((cmd) )": a command substitution that starts with a subshell
      }
      return ReadSubstitution(word, "$(");
    }
    if (next == '{') return ReadBrace(word, in_dquote);
    if (next == '\'' && !in_dquote) {
      *quoted = true;
      return ReadAnsiC(word);
    }
    if (next == '"' && !in_dquote) {  // $"…": a translatable string, read as "…"
      ++i_;
      return Status::OK();
    }
    word->push_back('$');
    ++i_;
    return Status::OK();
  }

  // At "((": an arithmetic expression up to its "))", whose $(…) and `…` run. False (with
  // nothing consumed or appended) when the parentheses close otherwise, as in "((cd /; ls) )":
  // then bash reads a subshell, and so does the caller.
  Result<bool> ReadArithmetic(std::string* expression) {
    TEMPER_RETURN_IF_ERROR(Enter(i_));
    NestGuard guard(&nest_);
    const size_t start = i_;
    const size_t emitted = out_->commands.size();
    const size_t assigned = out_->assignments.size();
    const size_t pending = heredocs_.size();
    i_ += 2;
    int parens = 0;
    bool fine = true;
    while (fine && i_ < s_.size()) {
      const char c = s_[i_];
      std::string ignored;
      bool ignored_quoted = false;
      if (c == '(') {
        ++parens;
        ++i_;
      } else if (c == ')') {
        if (parens > 0) {
          --parens;
          ++i_;
        } else if (Peek(1) == ')') {
          expression->assign(s_.substr(start + 2, i_ - start - 2));
          i_ += 2;
          return true;
        } else {
          break;
        }
      } else if (c == '\\') {
        i_ += i_ + 1 < s_.size() ? 2 : 1;
      } else if (c == '$') {
        fine = ReadDollar(&ignored, &ignored_quoted, true).ok();
      } else if (c == '`') {
        fine = ReadBacktick(&ignored, true).ok();
      } else if (c == '"') {
        fine = ReadDoubleQuoted(&ignored).ok();
      } else {
        ++i_;
      }
    }
    // Not arithmetic (or not well formed as such): the caller parses it again as commands, which
    // reports any real error.
    i_ = start;
    out_->commands.resize(emitted);
    out_->assignments.resize(assigned);
    heredocs_.resize(pending);
    return false;
  }

  // At "$(", "<(" or ">(": the list inside, parsed in place.
  Status ReadSubstitution(std::string* word, std::string_view opener) {
    const size_t start = i_;
    if (depth_ + nest_ + 1 > kMaxDepth) return Error("substitutions nest too deeply", start);
    Parser inner(s_, i_ + opener.size(), depth_ + nest_ + 1, where_, CurrentFunction(), out_);
    TEMPER_RETURN_IF_ERROR(inner.ParseUntilParen(opener, start));
    for (Heredoc& h : inner.TakeHeredocs()) heredocs_.push_back(std::move(h));
    i_ = inner.pos();
    word->append(s_.substr(start, i_ - start));
    return Status::OK();
  }

  // At "`": the command up to the closing backquote, with \` \\ \$ (and \" inside double
  // quotes) unescaped first, as bash does.
  Status ReadBacktick(std::string* word, bool in_dquote) {
    const size_t start = i_;
    expanded_ = true;
    std::string script;
    size_t j = i_ + 1;
    for (;;) {
      if (j >= s_.size()) return Error("an unterminated backtick", start);
      const char c = s_[j];
      if (c == '`') break;
      if (c == '\\' && j + 1 < s_.size()) {
        const char e = s_[j + 1];
        if (e == '\\' || e == '`' || e == '$' || (in_dquote && e == '"')) {
          script.push_back(e);
        } else {
          script.push_back('\\');
          script.push_back(e);
        }
        j += 2;
        continue;
      }
      script.push_back(c);
      ++j;
    }
    word->append(s_.substr(start, j + 1 - start));
    i_ = j + 1;
    if (depth_ + nest_ + 1 > kMaxDepth) return Error("substitutions nest too deeply", start);
    Parser inner(script, 0, depth_ + nest_ + 1, fmt::format(" of the `…` at column {}{}", start + 1, where_),
                 CurrentFunction(), out_);
    TEMPER_RETURN_IF_ERROR(inner.ParseAll());
    for (Heredoc& h : inner.TakeHeredocs()) heredocs_.push_back(std::move(h));
    return Status::OK();
  }

  // At "${": up to the matching "}". Quotes pair inside it, even within double quotes, and
  // its $(…), `…` and nested ${…} run.
  Status ReadBrace(std::string* word, bool in_dquote) {
    TEMPER_RETURN_IF_ERROR(Enter(i_));
    NestGuard guard(&nest_);
    const size_t start = i_;
    i_ += 2;
    for (;;) {
      if (AtEnd()) return Error("an unterminated ${", start);
      const char c = s_[i_];
      std::string ignored;
      bool ignored_quoted = false;
      if (c == '}') {
        ++i_;
        break;
      }
      if (c == '\\') {
        i_ += i_ + 1 < s_.size() ? 2 : 1;
      } else if (c == '\'') {
        size_t e = s_.find('\'', i_ + 1);
        if (e == std::string_view::npos) return Error("an unterminated ' quote", i_);
        i_ = e + 1;
      } else if (c == '"') {
        TEMPER_RETURN_IF_ERROR(ReadDoubleQuoted(&ignored));
      } else if (c == '$') {
        TEMPER_RETURN_IF_ERROR(ReadDollar(&ignored, &ignored_quoted, in_dquote));
      } else if (c == '`') {
        TEMPER_RETURN_IF_ERROR(ReadBacktick(&ignored, in_dquote));
      } else {
        ++i_;
      }
    }
    word->append(s_.substr(start, i_ - start));
    return Status::OK();
  }

  // At "$'": bash's ANSI-C quoting, decoded, so that $'\x72eboot' reads as reboot.
  Status ReadAnsiC(std::string* word) {
    const size_t start = i_;
    i_ += 2;
    for (;;) {
      if (AtEnd()) return Error("an unterminated $' quote", start);
      const char c = s_[i_];
      if (c == '\'') {
        ++i_;
        return Status::OK();
      }
      if (c != '\\' || i_ + 1 >= s_.size()) {
        word->push_back(c);
        ++i_;
        continue;
      }
      const char e = s_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'a':
          word->push_back('\a');
          break;
        case 'b':
          word->push_back('\b');
          break;
        case 'e':
        case 'E':
          word->push_back('\x1b');
          break;
        case 'f':
          word->push_back('\f');
          break;
        case 'n':
          word->push_back('\n');
          break;
        case 'r':
          word->push_back('\r');
          break;
        case 't':
          word->push_back('\t');
          break;
        case 'v':
          word->push_back('\v');
          break;
        case '\\':
        case '\'':
        case '"':
        case '?':
          word->push_back(e);
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t max_digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t value = 0;
          size_t digits = 0;
          while (digits < max_digits && !AtEnd() && HexValue(s_[i_]) >= 0) {
            value = value * 16 + static_cast<uint32_t>(HexValue(s_[i_++]));
            ++digits;
          }
          if (digits == 0) {
            word->push_back('\\');
            word->push_back(e);
          } else if (e == 'x') {
            word->push_back(static_cast<char>(value));
          } else {
            AppendUtf8(std::min<uint32_t>(value, 0x10FFFF), word);
          }
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t value = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && !AtEnd() && s_[i_] >= '0' && s_[i_] <= '7'; ++k)
              value = value * 8 + static_cast<uint32_t>(s_[i_++] - '0');
            word->push_back(static_cast<char>(value & 0xFF));
          } else {
            word->push_back('\\');
            word->push_back(e);
          }
      }
    }
  }

  // At '<', '>' or "&>" (after `fd`, e.g. "2"): the operator and its target.
  Status ReadRedirect(const std::string& fd) {
    const size_t start = i_;
    static constexpr std::string_view kOps[] = {"&>>", "&>", "<<<", "<<-", "<<", "<>",
                                                "<&",  "<",  ">>",  ">|",  ">&", ">"};
    std::string_view op;
    for (std::string_view o : kOps) {
      if (s_.substr(i_, o.size()) == o) {
        op = o;
        break;
      }
    }
    i_ += op.size();
    SkipBlanks();
    const size_t target_at = i_;
    std::string target;
    bool quoted = false;
    expanded_ = false;
    TEMPER_RETURN_IF_ERROR(ReadWord(&target, &quoted, false));
    if (i_ == target_at) return Error(fmt::format("a redirection '{}{}' without a target", fd, op), start);
    if (op == "<<" || op == "<<-") {
      cmd_.heredocs.push_back(heredocs_.size());
      Heredoc h{target, op == "<<-", !quoted, false, std::nullopt, cmd_.redirects.size()};
      heredocs_.push_back(std::move(h));
    }
    const bool heredoc = op == "<<" || op == "<<-";
    Redirect r{fd + std::string(op), std::move(target), "", heredoc ? !quoted : expanded_, expanded_ && !heredoc};
    if (op == "<<<") r.body = r.target;
    cmd_.redirects.push_back(std::move(r));
    return Status::OK();
  }

  // After a newline: the bodies of the here-documents its line introduced. They are data (only
  // an unquoted delimiter's body expands, and then its $(…) and `…` run), unless a shell reads
  // them as its script.
  Status ReadHeredocBodies() {
    std::vector<Heredoc> docs = std::move(heredocs_);
    heredocs_.clear();
    for (const Heredoc& h : docs) {
      const size_t body_begin = i_;
      size_t body_end = s_.size();  // bash warns and takes the end of input as the end
      for (;;) {
        if (AtEnd()) break;
        const size_t line_begin = i_;
        const size_t nl = s_.find('\n', i_);
        const size_t line_end = nl == std::string_view::npos ? s_.size() : nl;
        std::string_view line = s_.substr(i_, line_end - i_);
        if (h.strip_tabs) {
          while (!line.empty() && line.front() == '\t') line.remove_prefix(1);
        }
        const size_t next_line = nl == std::string_view::npos ? s_.size() : nl + 1;
        if (line == h.delimiter) {
          body_end = line_begin;
          i_ = next_line;
          break;
        }
        if (!h.expands) {
          i_ = next_line;
          continue;
        }
        while (i_ < s_.size() && s_[i_] != '\n') {  // a substitution may run past this line
          const char c = s_[i_];
          std::string ignored;
          bool ignored_quoted = false;
          if (c == '\\') {
            i_ += i_ + 1 < s_.size() ? 2 : 1;
          } else if (c == '$') {
            TEMPER_RETURN_IF_ERROR(ReadDollar(&ignored, &ignored_quoted, true));
          } else if (c == '`') {
            TEMPER_RETURN_IF_ERROR(ReadBacktick(&ignored, false));
          } else {
            ++i_;
          }
        }
        if (i_ < s_.size()) ++i_;
      }
      if (h.command) {
        std::string body(s_.substr(body_begin, body_end - body_begin));
        if (h.strip_tabs) {
          std::string stripped;
          bool line_start = true;
          for (char ch : body) {
            if (line_start && ch == '\t') continue;
            stripped.push_back(ch);
            line_start = ch == '\n';
          }
          body = std::move(stripped);
        }
        out_->commands[*h.command].redirects[h.redirect].body = std::move(body);
      }
      if (h.script) {
        if (depth_ + 1 > kMaxDepth) return Error("scripts nest too deeply", body_begin);
        TEMPER_RETURN_IF_ERROR(ParseScript(s_.substr(body_begin, body_end - body_begin), depth_ + 1,
                                           fmt::format(" of the here-document at column {}{}", body_begin + 1, where_),
                                           out_));
      }
    }
    return Status::OK();
  }

  std::string_view s_;
  size_t i_;
  int depth_;     // parsers and scripts this one is nested in
  int nest_ = 0;  // ${…}, $((…)) and arrays open inside this parser
  std::string where_;
  std::string outer_function_;
  ParsedShell* out_;
  Command cmd_;
  std::vector<Frame> frames_;
  std::string pending_function_;                          // `name()` was read: the next compound command is its body
  std::optional<std::pair<size_t, size_t>> last_closed_;  // commands of the compound command that just closed
  bool expanded_ = false;                                 // the word being read held an expansion
  std::optional<std::vector<ShellWord>> array_;           // the word being read was an array literal: its elements
  std::vector<Heredoc> heredocs_;                         // introduced on the current line, bodies not read yet
};

Status ParseScript(std::string_view script, int depth, const std::string& where, ParsedShell* out) {
  Parser parser(script, 0, depth, where, "", out);
  return parser.ParseAll();
}

}  // namespace

std::optional<std::string> ShellScriptFile(const SimpleCommand& cmd) {
  if (!IsShell(cmd.program)) return std::nullopt;
  for (size_t k = 0; k < cmd.args.size(); ++k) {
    const std::string& a = cmd.args[k];
    if (a == "-s") return std::nullopt;
    if (a == "-c" || (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.back() == 'c')) return std::nullopt;
    if (a == "-o" || a == "+o" || a == "-O" || a == "+O") {
      ++k;
      continue;
    }
    if (a == "--") return k + 1 < cmd.args.size() ? std::optional<std::string>(cmd.args[k + 1]) : std::nullopt;
    if (a.empty() || (a[0] != '-' && a[0] != '+')) return a;
  }
  return std::nullopt;
}

Result<ParsedShell> Respell(const SimpleCommand& c, const std::vector<std::string>& program_words) {
  std::vector<Word> words;
  for (const std::string& w : program_words) words.push_back({w, false, false, {}});
  for (size_t k = 0; k < c.args.size(); ++k) words.push_back({c.args[k], c.args_expanded[k], false, {}});
  ParsedShell out;
  Finished finished;
  TEMPER_RETURN_IF_ERROR(
      Finish(std::move(words), c.redirects, c.stdin_from_pipe, c.piped_from, 1, c.function, &out, &finished));
  for (SimpleCommand& respelled : out.commands) respelled.async = c.async;
  if (finished.emitted) {
    std::vector<ShellAssignment>& env = out.commands[finished.index].environment;
    env.insert(env.begin(), c.environment.begin(), c.environment.end());
  }
  return out;
}

Result<ParsedShell> SplitShellCommand(std::string_view line) {
  ParsedShell out;
  TEMPER_RETURN_IF_ERROR(ParseScript(line, 0, "", &out));
  return out;
}

}  // namespace temper
