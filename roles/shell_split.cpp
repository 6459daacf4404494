#include "roles/shell_split.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>

namespace temper {

namespace {

// $( inside bash -c inside ${ …: deeper is not a fix anyone writes, and the bound keeps the
// parser's recursion (one C++ frame chain per level) small on any input.
constexpr int kMaxDepth = 8;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The characters that end an unquoted word (bash's metacharacters).
bool IsMeta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' ||
         c == '(' || c == ')';
}

bool IsName(std::string_view w) {
  if (w.empty() || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
  return std::all_of(w.begin(), w.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
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
  return !raw.empty() && std::all_of(raw.begin(), raw.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
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

// Skips a wrapper's options; `with_value` lists the short options that take the next word.
size_t SkipOptions(const std::vector<std::string>& w, size_t i, std::string_view with_value) {
  while (i < w.size() && w[i].size() > 1 && w[i][0] == '-') {
    if (w[i] == "--") return i + 1;
    bool takes = w[i].size() == 2 && with_value.find(w[i][1]) != std::string_view::npos;
    i += takes ? 2 : 1;
  }
  return i;
}

Status ParseScript(std::string_view script, int depth, const std::string& where, std::vector<SimpleCommand>* out);

// Peels the assignments and wrappers before the program (recording the wrappers in
// cmd->prefixes); returns the index of the program's word, or words.size() when there is none.
size_t PeelWrappers(const std::vector<std::string>& words, SimpleCommand* cmd) {
  size_t i = 0;
  for (;;) {
    while (i < words.size() && IsAssignment(words[i])) ++i;
    if (i >= words.size()) return i;
    const std::string prog = Basename(words[i]);
    size_t next = i;
    if (prog == "sudo" || prog == "doas") next = SkipOptions(words, i + 1, "ugpChDrtUT");
    else if (prog == "env") next = SkipOptions(words, i + 1, "uCS");
    else if (prog == "nohup" || prog == "builtin" || prog == "setsid" || prog == "unbuffer") next = i + 1;
    else if (prog == "exec") next = SkipOptions(words, i + 1, "a");
    else if (prog == "time") next = SkipOptions(words, i + 1, "fo");
    else if (prog == "nice") next = SkipOptions(words, i + 1, "n");
    else if (prog == "ionice") next = SkipOptions(words, i + 1, "cnpt");
    else if (prog == "stdbuf") next = SkipOptions(words, i + 1, "ioe");
    else if (prog == "xargs") next = SkipOptions(words, i + 1, "IinPLdEsa");
    else if (prog == "command" && !(i + 1 < words.size() && (words[i + 1] == "-v" || words[i + 1] == "-V"))) next = SkipOptions(words, i + 1, "");
    else if (prog == "timeout") { next = SkipOptions(words, i + 1, "sk"); if (next < words.size()) ++next; }
    else if (prog == "chroot") { next = SkipOptions(words, i + 1, ""); if (next < words.size()) ++next; }
    if (next == i) return i;
    cmd->prefixes.push_back(prog);
    i = next;
  }
}

bool IsShell(const std::string& program) {
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "su", "runuser"};
  return std::find(std::begin(kShells), std::end(kShells), program) != std::end(kShells);
}

// The script a shell's -c (or eval) runs; false when there is none.
bool InlineScript(const SimpleCommand& cmd, std::string* script) {
  if (cmd.program == "eval") {
    for (size_t k = 0; k < cmd.args.size(); ++k) *script += (k ? " " : "") + cmd.args[k];
    return true;
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

// A shell with no -c reads its script from standard input unless it names a script file (-s
// says it reads stdin whatever follows; -o/-O take a value). su and runuser take a user name,
// not a script file.
bool ReadsScriptFromStdin(const SimpleCommand& cmd) {
  if (!IsShell(cmd.program)) return false;
  if (cmd.program == "su" || cmd.program == "runuser") return true;
  for (size_t k = 0; k < cmd.args.size(); ++k) {
    const std::string& a = cmd.args[k];
    if (a == "-s") return true;
    if (a == "-o" || a == "+o" || a == "-O" || a == "+O") { ++k; continue; }
    if (a == "--") return k + 1 >= cmd.args.size();
    if (a.empty() || (a[0] != '-' && a[0] != '+')) return false;
  }
  return true;
}

// The commands find runs: each -exec/-execdir/-ok/-okdir up to ";" (or "{} +").
std::vector<std::vector<std::string>> FindExecs(const SimpleCommand& cmd) {
  std::vector<std::vector<std::string>> execs;
  if (cmd.program != "find") return execs;
  for (size_t k = 0; k < cmd.args.size(); ++k) {
    const std::string& a = cmd.args[k];
    if (a != "-exec" && a != "-execdir" && a != "-ok" && a != "-okdir") continue;
    std::vector<std::string> exec;
    size_t j = k + 1;
    for (; j < cmd.args.size(); ++j) {
      if (cmd.args[j] == ";" || (cmd.args[j] == "+" && !exec.empty() && exec.back() == "{}")) break;
      exec.push_back(cmd.args[j]);
    }
    if (!exec.empty()) execs.push_back(std::move(exec));
    k = j;
  }
  return execs;
}

// Turns the words of one simple command into a SimpleCommand and appends it, then the commands
// of the script it hands to a shell or eval and those of find -exec. `reads_stdin_script` (may be
// null) is set when the program is a shell without -c reading its script from standard input,
// so that the caller parses the here-documents and here-strings given to it as commands.
Status Finish(std::vector<std::string> words, std::vector<Redirect> redirects, bool piped, int depth,
              std::vector<SimpleCommand>* out, bool* reads_stdin_script) {
  SimpleCommand cmd;
  cmd.redirects = std::move(redirects);
  // `< <(…)`: standard input is a pipe from another command, as with `|`.
  cmd.stdin_from_pipe = piped;
  for (const Redirect& r : cmd.redirects) {
    if ((r.op == "<" || r.op == "0<") && r.target.starts_with("<(")) cmd.stdin_from_pipe = true;
  }
  for (size_t k = 0; k < words.size(); ++k) cmd.text += (k ? " " : "") + words[k];
  const size_t program = PeelWrappers(words, &cmd);
  if (program >= words.size() && cmd.redirects.empty()) return Status::OK();  // only assignments
  if (program < words.size()) {
    cmd.program = Basename(words[program]);
    cmd.args.assign(words.begin() + static_cast<std::ptrdiff_t>(program) + 1, words.end());
  }
  std::string script;
  const bool has_script = InlineScript(cmd, &script);
  if (reads_stdin_script != nullptr) *reads_stdin_script = !has_script && ReadsScriptFromStdin(cmd);
  std::vector<std::vector<std::string>> execs = FindExecs(cmd);
  const std::string where = fmt::format(" of the script given to {}", cmd.program);
  out->push_back(std::move(cmd));
  if ((has_script || !execs.empty()) && depth + 1 > kMaxDepth) {
    return Status::InvalidArgument("cannot parse the command: scripts nest too deeply");
  }
  if (has_script) TEMPER_RETURN_IF_ERROR(ParseScript(script, depth + 1, where, out));
  for (std::vector<std::string>& exec : execs) {
    TEMPER_RETURN_IF_ERROR(Finish(std::move(exec), {}, false, depth + 1, out, nullptr));
  }
  return Status::OK();
}

struct Heredoc {
  std::string delimiter;
  bool strip_tabs = false;  // <<-
  bool expands = true;      // unquoted delimiter: $(…) and `…` in the body run
  bool script = false;      // given to a shell that runs it: the body is commands, not data
};

// A compound command that is open, with the position of the word that opened it.
struct Frame {
  enum Kind { kSubshell, kGroup, kIf, kLoop, kCase } kind;
  size_t at;
};

// Parses one command list of `s` from a position: the whole input, or (for $(…), <(…), >(…))
// up to the ")" that closes it. Nested lists get a Parser of their own over the same text, so
// positions in errors are columns of the line the caller gave.
class Parser {
 public:
  // `where` ends every error message, naming the script the columns count in when that is not the
  // caller's line (" of the script given to bash").
  Parser(std::string_view s, size_t begin, int depth, std::string where, std::vector<SimpleCommand>* out)
      : s_(s), i_(begin), depth_(depth), where_(std::move(where)), out_(out) {}

  Status ParseAll() { return ParseList(false, "", 0); }
  // The list inside `opener` (at `opened_at`); pos() is then just after its ")".
  Status ParseUntilParen(std::string_view opener, size_t opened_at) { return ParseList(true, opener, opened_at); }
  size_t pos() const { return i_; }
  // Here-documents whose bodies had not started when the list ended: bash reads them after the
  // line that holds the substitution.
  std::vector<Heredoc> TakeHeredocs() { return std::move(heredocs_); }

 private:
  struct Command {
    std::vector<std::string> words;
    std::vector<Redirect> redirects;
    bool piped = false;
    bool data = false;  // a for/select header: its words are not a command
    std::vector<size_t> heredocs;  // its here-documents, as indices in heredocs_
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
      case Frame::kSubshell: return Error("a '(' without ')'", f.at);
      case Frame::kGroup: return Error("a '{' without '}'", f.at);
      case Frame::kIf: return Error("an 'if' without 'fi'", f.at);
      case Frame::kLoop: return Error("a loop without 'done'", f.at);
      case Frame::kCase: return Error("a 'case' without 'esac'", f.at);
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
    frames_.pop_back();
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
        TEMPER_RETURN_IF_ERROR(EndCommand(false));
        TEMPER_RETURN_IF_ERROR(Newline());
      } else if (c == ';') {
        TEMPER_RETURN_IF_ERROR(EndCommand(false));
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
        i_ += Peek(1) == c || (c == '|' && Peek(1) == '&') ? 2 : 1;
        TEMPER_RETURN_IF_ERROR(EndCommand(pipe));
      } else if (c == ')') {
        TEMPER_RETURN_IF_ERROR(EndCommand(false));
        if (!frames_.empty() && frames_.back().kind == Frame::kSubshell) {
          frames_.pop_back();
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
    TEMPER_RETURN_IF_ERROR(EndCommand(false));
    if (!frames_.empty()) return Unclosed(frames_.back());
    if (until_paren) return Error(fmt::format("an unterminated {}", opener), opened_at);
    return Status::OK();
  }

  Status EndCommand(bool next_piped) {
    if (cmd_.data) cmd_.words.clear();
    if (!cmd_.words.empty() || !cmd_.redirects.empty()) {
      std::vector<std::string> here_strings;
      for (const Redirect& r : cmd_.redirects) {
        if (r.op.ends_with("<<<")) here_strings.push_back(r.target);
      }
      bool reads_stdin_script = false;
      TEMPER_RETURN_IF_ERROR(Finish(std::move(cmd_.words), std::move(cmd_.redirects), cmd_.piped, depth_, out_,
                                    &reads_stdin_script));
      if (reads_stdin_script) {
        if (depth_ + 1 > kMaxDepth) return Error("scripts nest too deeply", i_);
        for (const std::string& h : here_strings) {
          TEMPER_RETURN_IF_ERROR(ParseScript(h, depth_ + 1, " of the here-string given to a shell", out_));
        }
        for (size_t k : cmd_.heredocs) heredocs_[k].script = true;
      }
    }
    cmd_ = Command{};
    cmd_.piped = next_piped;
    return Status::OK();
  }

  // A '(' : a subshell or (( arithmetic )) where a command starts, or the "()" of `name()`.
  Status OpenParen() {
    if (AtCommandStart()) {
      if (Peek(1) == '(') {
        std::string expression;
        TEMPER_ASSIGN_OR_RETURN(bool arithmetic, ReadArithmetic(&expression));
        if (arithmetic) {
          cmd_.words.push_back("((");
          cmd_.words.push_back(std::move(expression));
          return Status::OK();
        }
      }
      frames_.push_back({Frame::kSubshell, i_});
      ++i_;
      return Status::OK();
    }
    if (cmd_.words.size() == 1 && cmd_.redirects.empty()) {
      size_t j = i_ + 1;
      while (j < s_.size() && IsBlank(s_[j])) ++j;
      if (j < s_.size() && s_[j] == ')') {  // a function definition: its body is the next command
        i_ = j + 1;
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
    cmd_.words.push_back(std::move(word));
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
    if (word == "{") { frames_.push_back({Frame::kGroup, at}); return true; }
    if (word == "}") { TEMPER_RETURN_IF_ERROR(Close(Frame::kGroup, word, "'{'", at)); return true; }
    if (word == "if") { frames_.push_back({Frame::kIf, at}); return true; }
    if (word == "then" || word == "elif" || word == "else") {
      TEMPER_RETURN_IF_ERROR(Inside(Frame::kIf, word, "an 'if'", at));
      return true;
    }
    if (word == "fi") { TEMPER_RETURN_IF_ERROR(Close(Frame::kIf, word, "'if'", at)); return true; }
    if (word == "while" || word == "until") { frames_.push_back({Frame::kLoop, at}); return true; }
    if (word == "for" || word == "select") {
      frames_.push_back({Frame::kLoop, at});
      SkipBlanks();
      if (word == "for" && Peek(0) == '(' && Peek(1) == '(') {
        std::string expression;
        TEMPER_ASSIGN_OR_RETURN(bool arithmetic, ReadArithmetic(&expression));
        if (!arithmetic) return Error("a 'for ((' without '))'", i_);
      }
      cmd_.data = true;  // the loop variable and its words; their substitutions still run
      return true;
    }
    if (word == "do") { TEMPER_RETURN_IF_ERROR(Inside(Frame::kLoop, word, "a loop", at)); return true; }
    if (word == "done") { TEMPER_RETURN_IF_ERROR(Close(Frame::kLoop, word, "loop", at)); return true; }
    if (word == "case") { TEMPER_RETURN_IF_ERROR(ReadCaseHead(at)); return true; }
    if (word == "esac") { TEMPER_RETURN_IF_ERROR(Close(Frame::kCase, word, "'case'", at)); return true; }
    if (word == "function") {  // function NAME [()] BODY
      SkipBlanks();
      const size_t name_at = i_;
      std::string name;
      bool quoted = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&name, &quoted, false));
      if (i_ == name_at) return Error("a 'function' without a name", at);
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
      cmd_.words.push_back(std::move(name));
      return true;
    }
    if (word == "[[") { TEMPER_RETURN_IF_ERROR(ReadConditional(at)); return true; }
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
    frames_.push_back({Frame::kCase, at});
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
      frames_.pop_back();
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
    cmd_.words.push_back("[[");
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
      TEMPER_RETURN_IF_ERROR(ReadWord(&word, &quoted, true));
      cmd_.words.push_back(std::move(word));
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
      TEMPER_RETURN_IF_ERROR(ReadWord(&element, &quoted, false));
      if (i_ == at) return Error(fmt::format("an unexpected '{}' in an array", c), at);
    }
    word->append(s_.substr(open, i_ - open));
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
    const size_t emitted = out_->size();
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
    out_->resize(emitted);
    heredocs_.resize(pending);
    return false;
  }

  // At "$(", "<(" or ">(": the list inside, parsed in place.
  Status ReadSubstitution(std::string* word, std::string_view opener) {
    const size_t start = i_;
    if (depth_ + nest_ + 1 > kMaxDepth) return Error("substitutions nest too deeply", start);
    Parser inner(s_, i_ + opener.size(), depth_ + nest_ + 1, where_, out_);
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
    Parser inner(script, 0, depth_ + nest_ + 1, fmt::format(" of the `…` at column {}{}", start + 1, where_), out_);
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
        case 'a': word->push_back('\a'); break;
        case 'b': word->push_back('\b'); break;
        case 'e': case 'E': word->push_back('\x1b'); break;
        case 'f': word->push_back('\f'); break;
        case 'n': word->push_back('\n'); break;
        case 'r': word->push_back('\r'); break;
        case 't': word->push_back('\t'); break;
        case 'v': word->push_back('\v'); break;
        case '\\': case '\'': case '"': case '?': word->push_back(e); break;
        case 'x': case 'u': case 'U': {
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
            for (int k = 0; k < 2 && !AtEnd() && s_[i_] >= '0' && s_[i_] <= '7'; ++k) value = value * 8 + static_cast<uint32_t>(s_[i_++] - '0');
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
    static constexpr std::string_view kOps[] = {"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", "<",
                                                ">>", ">|", ">&", ">"};
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
    TEMPER_RETURN_IF_ERROR(ReadWord(&target, &quoted, false));
    if (i_ == target_at) return Error(fmt::format("a redirection '{}{}' without a target", fd, op), start);
    if (op == "<<" || op == "<<-") {
      cmd_.heredocs.push_back(heredocs_.size());
      heredocs_.push_back({target, op == "<<-", !quoted, false});
    }
    cmd_.redirects.push_back({fd + std::string(op), std::move(target)});
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
  int depth_;  // parsers and scripts this one is nested in
  int nest_ = 0;  // ${…}, $((…)) and arrays open inside this parser
  std::string where_;
  std::vector<SimpleCommand>* out_;
  Command cmd_;
  std::vector<Frame> frames_;
  std::vector<Heredoc> heredocs_;  // introduced on the current line, bodies not read yet
};

Status ParseScript(std::string_view script, int depth, const std::string& where, std::vector<SimpleCommand>* out) {
  Parser parser(script, 0, depth, where, out);
  return parser.ParseAll();
}

}  // namespace

Result<std::vector<SimpleCommand>> SplitShellCommand(std::string_view line) {
  std::vector<SimpleCommand> out;
  TEMPER_RETURN_IF_ERROR(ParseScript(line, 0, "", &out));
  return out;
}

}  // namespace temper
