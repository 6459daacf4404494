#include "roles/shell_split.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace temper {

namespace {

constexpr int kMaxDepth = 8;  // $( inside bash -c inside $( ...: deeper is not a fix anyone writes

struct Token {
  enum Kind { kWord, kSeparator, kRedirect } kind;
  std::string text;    // word text, separator, or redirect op
  std::string target;  // redirect target
};

class Lexer {
 public:
  Lexer(std::string_view s, int depth, std::vector<SimpleCommand>* inner)
      : s_(s), depth_(depth), inner_(inner) {}

  Result<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t') { ++i_; continue; }
      if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') { i_ += 2; continue; }
      if (c == '#') { while (i_ < s_.size() && s_[i_] != '\n') ++i_; continue; }
      if (c == '\n') {
        ++i_;
        out.push_back({Token::kSeparator, "\n", ""});
        TEMPER_RETURN_IF_ERROR(SkipHeredocs());
        continue;
      }
      if (c == ';' || c == '(' || c == ')') { ++i_; out.push_back({Token::kSeparator, std::string(1, c), ""}); continue; }
      if (c == '&' || c == '|') {
        if (c == '&' && Peek(1) == '>') { TEMPER_RETURN_IF_ERROR(ReadRedirect("", &out)); continue; }
        std::string op(1, c);
        if (Peek(1) == c || (c == '|' && Peek(1) == '&')) op.push_back(s_[i_ + 1]);
        i_ += op.size();
        out.push_back({Token::kSeparator, op, ""});
        continue;
      }
      if (c == '<' || c == '>') { TEMPER_RETURN_IF_ERROR(ReadRedirect("", &out)); continue; }
      std::string word;
      bool quoted = false;
      TEMPER_RETURN_IF_ERROR(ReadWord(&word, &quoted));
      // "2>file": a bare number right before a redirection is its file descriptor.
      if (!quoted && i_ < s_.size() && (s_[i_] == '>' || s_[i_] == '<') && !word.empty() &&
          std::all_of(word.begin(), word.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
        TEMPER_RETURN_IF_ERROR(ReadRedirect(word, &out));
        continue;
      }
      out.push_back({Token::kWord, std::move(word), ""});
    }
    TEMPER_RETURN_IF_ERROR(SkipHeredocs());
    return out;
  }

 private:
  char Peek(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  Status Error(std::string_view what, size_t at) const {
    return Status::InvalidArgument(fmt::format("cannot parse the command: {} at column {}", what, at + 1));
  }

  Status Recurse(std::string_view script) {
    if (depth_ + 1 > kMaxDepth) return Status::InvalidArgument("cannot parse the command: substitutions nest too deeply");
    auto cmds = SplitInner(script, depth_ + 1);
    if (!cmds.ok()) return cmds.status();
    inner_->insert(inner_->end(), cmds->begin(), cmds->end());
    return Status::OK();
  }

  // Reads from "$(" to its ")" (i_ at '$'); appends the text to `word` and parses the inside.
  Status ReadDollarParen(std::string* word) {
    size_t start = i_;
    bool arithmetic = Peek(2) == '(';
    i_ += 2;
    int depth = 1;
    size_t inner_start = i_;
    while (i_ < s_.size() && depth > 0) {
      char c = s_[i_];
      if (c == '\\') { i_ += 2; continue; }
      if (c == '\'') { size_t e = s_.find('\'', i_ + 1); if (e == std::string_view::npos) return Error("an unterminated ' quote", i_); i_ = e + 1; continue; }
      if (c == '"') { size_t j = i_ + 1; while (j < s_.size() && s_[j] != '"') j += s_[j] == '\\' ? 2 : 1; if (j >= s_.size()) return Error("an unterminated \" quote", i_); i_ = j + 1; continue; }
      if (c == '(') ++depth;
      if (c == ')') --depth;
      ++i_;
    }
    if (depth > 0) return Error("an unterminated $(", start);
    word->append(s_.substr(start, i_ - start));
    if (arithmetic) return Status::OK();
    return Recurse(s_.substr(inner_start, i_ - 1 - inner_start));
  }

  Status ReadBacktick(std::string* word) {
    size_t start = i_;
    size_t j = i_ + 1;
    while (j < s_.size() && s_[j] != '`') j += s_[j] == '\\' ? 2 : 1;
    if (j >= s_.size()) return Error("an unterminated backtick", start);
    word->append(s_.substr(start, j + 1 - start));
    i_ = j + 1;
    return Recurse(s_.substr(start + 1, j - start - 1));
  }

  Status ReadWord(std::string* word, bool* quoted) {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' ||
          c == '>' || c == '(' || c == ')') {
        break;
      }
      if (c == '\\') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] != '\n') word->push_back(s_[i_ + 1]);
        i_ += 2;
      } else if (c == '\'') {
        *quoted = true;
        size_t e = s_.find('\'', i_ + 1);
        if (e == std::string_view::npos) return Error("an unterminated ' quote", i_);
        word->append(s_.substr(i_ + 1, e - i_ - 1));
        i_ = e + 1;
      } else if (c == '"') {
        *quoted = true;
        size_t start = i_++;
        for (;;) {
          if (i_ >= s_.size()) return Error("an unterminated \" quote", start);
          char d = s_[i_];
          if (d == '"') { ++i_; break; }
          if (d == '\\' && i_ + 1 < s_.size()) {
            char n = s_[i_ + 1];
            if (n == '"' || n == '\\' || n == '$' || n == '`') word->push_back(n);
            else if (n != '\n') { word->push_back('\\'); word->push_back(n); }
            i_ += 2;
          } else if (d == '$' && Peek(1) == '(') {
            TEMPER_RETURN_IF_ERROR(ReadDollarParen(word));
          } else if (d == '`') {
            TEMPER_RETURN_IF_ERROR(ReadBacktick(word));
          } else {
            word->push_back(d);
            ++i_;
          }
        }
      } else if (c == '$' && Peek(1) == '(') {
        TEMPER_RETURN_IF_ERROR(ReadDollarParen(word));
      } else if (c == '`') {
        TEMPER_RETURN_IF_ERROR(ReadBacktick(word));
      } else {
        word->push_back(c);
        ++i_;
      }
    }
    return Status::OK();
  }

  Status ReadRedirect(std::string fd, std::vector<Token>* out) {
    std::string op = fd;
    size_t start = i_;
    while (i_ < s_.size() && (s_[i_] == '<' || s_[i_] == '>' || s_[i_] == '&' || s_[i_] == '|' || s_[i_] == '-') &&
           op.size() - fd.size() < 3) {
      if ((s_[i_] == '|' || s_[i_] == '-') && i_ == start) break;
      op.push_back(s_[i_++]);
    }
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
    std::string target;
    bool quoted = false;
    TEMPER_RETURN_IF_ERROR(ReadWord(&target, &quoted));
    if (target.empty() && !quoted) return Error(fmt::format("a redirection '{}' without a target", op), start);
    std::string bare = op.substr(fd.size());
    if (bare == "<<" || bare == "<<-") pending_heredocs_.push_back({target, bare == "<<-"});
    out->push_back({Token::kRedirect, std::move(op), std::move(target)});
    return Status::OK();
  }

  // Here-document bodies are data, not commands: skip them after the line that introduced them.
  Status SkipHeredocs() {
    for (const auto& [delim, strip_tabs] : pending_heredocs_) {
      for (;;) {
        if (i_ >= s_.size()) return Status::OK();  // bash warns and accepts end of input
        size_t nl = s_.find('\n', i_);
        std::string_view line = s_.substr(i_, nl == std::string_view::npos ? std::string_view::npos : nl - i_);
        i_ = nl == std::string_view::npos ? s_.size() : nl + 1;
        if (strip_tabs) while (!line.empty() && line.front() == '\t') line.remove_prefix(1);
        if (line == delim) break;
      }
    }
    pending_heredocs_.clear();
    return Status::OK();
  }

 public:
  static Result<std::vector<SimpleCommand>> SplitInner(std::string_view line, int depth);

 private:
  std::string_view s_;
  size_t i_ = 0;
  int depth_;
  std::vector<SimpleCommand>* inner_;
  std::vector<std::pair<std::string, bool>> pending_heredocs_;
};

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsAssignment(const std::string& w) {
  if (w.empty() || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
  for (char c : w) {
    if (c == '=') return true;
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return false;
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

Status Finish(std::vector<std::string> words, std::vector<Redirect> redirects, bool piped, int depth,
              std::vector<SimpleCommand>* out) {
  SimpleCommand cmd;
  cmd.redirects = std::move(redirects);
  cmd.stdin_from_pipe = piped;
  for (size_t k = 0; k < words.size(); ++k) cmd.text += (k ? " " : "") + words[k];
  size_t i = 0;
  for (;;) {
    while (i < words.size() && (IsAssignment(words[i]) || words[i] == "{" || words[i] == "}" || words[i] == "!")) ++i;
    if (i >= words.size()) break;
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
    if (next == i) break;
    cmd.prefixes.push_back(prog);
    i = next;
  }
  if (i >= words.size() && cmd.redirects.empty()) return Status::OK();  // only "}" or assignments
  if (i < words.size()) {
    cmd.program = Basename(words[i]);
    cmd.args.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  }
  // Scripts handed to a shell, su or eval run too: parse them as well.
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "su", "runuser"};
  bool is_shell = false;
  for (std::string_view s : kShells) is_shell = is_shell || cmd.program == s;
  std::string script;
  bool has_script = false;
  if (is_shell) {
    for (size_t k = 0; k + 1 < cmd.args.size(); ++k) {
      const std::string& a = cmd.args[k];
      if (a == "-c" || (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.back() == 'c')) {
        script = cmd.args[k + 1];
        has_script = true;
        break;
      }
    }
  } else if (cmd.program == "eval") {
    for (size_t k = 0; k < cmd.args.size(); ++k) script += (k ? " " : "") + cmd.args[k];
    has_script = true;
  }
  out->push_back(std::move(cmd));
  if (has_script) {
    if (depth + 1 > kMaxDepth) return Status::InvalidArgument("cannot parse the command: scripts nest too deeply");
    TEMPER_ASSIGN_OR_RETURN(auto inner, Lexer::SplitInner(script, depth + 1));
    out->insert(out->end(), inner.begin(), inner.end());
  }
  return Status::OK();
}

Result<std::vector<SimpleCommand>> Lexer::SplitInner(std::string_view line, int depth) {
  std::vector<SimpleCommand> inner;
  Lexer lexer(line, depth, &inner);
  TEMPER_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  std::vector<SimpleCommand> out = std::move(inner);
  std::vector<std::string> words;
  std::vector<Redirect> redirects;
  bool piped = false;
  auto flush = [&](bool next_piped) -> Status {
    if (!words.empty() || !redirects.empty()) {
      TEMPER_RETURN_IF_ERROR(Finish(std::move(words), std::move(redirects), piped, depth, &out));
    }
    words.clear();
    redirects.clear();
    piped = next_piped;
    return Status::OK();
  };
  for (Token& t : tokens) {
    if (t.kind == Token::kWord) words.push_back(std::move(t.text));
    else if (t.kind == Token::kRedirect) redirects.push_back({std::move(t.text), std::move(t.target)});
    else TEMPER_RETURN_IF_ERROR(flush(t.text == "|" || t.text == "|&"));
  }
  TEMPER_RETURN_IF_ERROR(flush(false));
  return out;
}

}  // namespace

Result<std::vector<SimpleCommand>> SplitShellCommand(std::string_view line) {
  return Lexer::SplitInner(line, 0);
}

}  // namespace temper
