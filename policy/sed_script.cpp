#include "policy/sed_script.h"

#include <cctype>

#include <fmt/format.h>

namespace temper {

namespace {

class SedReader {
 public:
  explicit SedReader(std::string_view s) : s_(s) {}

  Result<SedEffects> Read() {
    for (;;) {
      while (i_ < s_.size() && (std::isspace(static_cast<unsigned char>(s_[i_])) || s_[i_] == ';')) ++i_;
      if (i_ >= s_.size()) return effects_;
      if (s_[i_] == '#') {
        ToEndOfLine();
        continue;
      }
      TEMPER_RETURN_IF_ERROR(Address());
      SkipBlanks();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        SkipBlanks();
        TEMPER_RETURN_IF_ERROR(Address());
      }
      SkipBlanks();
      while (i_ < s_.size() && s_[i_] == '!') {
        ++i_;
        SkipBlanks();
      }
      if (i_ >= s_.size()) return Error("an address without a command", i_);
      TEMPER_RETURN_IF_ERROR(Command());
    }
  }

 private:
  Status Error(std::string_view what, size_t at) const {
    return Status::InvalidArgument(fmt::format("cannot read the sed script: {} at column {}", what, at + 1));
  }

  void SkipBlanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }

  std::string ToEndOfLine() {
    size_t nl = s_.find('\n', i_);
    std::string out(s_.substr(i_, nl == std::string_view::npos ? std::string_view::npos : nl - i_));
    i_ = nl == std::string_view::npos ? s_.size() : nl + 1;
    return out;
  }

  // Text up to `delim` (not escaped), unescaped (\delim → delim, \n → newline, other escapes kept
  // for replacements: \1, \&, \\).
  Result<std::string> Delimited(char delim, bool replacement) {
    const size_t start = i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != delim) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        const char e = s_[i_ + 1];
        if (e == delim) out.push_back(e);
        else if (e == 'n') out.push_back('\n');
        else if (replacement && e == '\n') out.push_back('\n');
        else {
          out.push_back('\\');
          out.push_back(e);
        }
        i_ += 2;
        continue;
      }
      out.push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) return Error(fmt::format("an unterminated '{}' section", delim), start);
    ++i_;
    return out;
  }

  Status Address() {
    if (i_ >= s_.size()) return Status::OK();
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '~') {
      ++i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '~')) ++i_;
    } else if (c == '$') {
      ++i_;
    } else if (c == '/' || c == '\\') {
      char delim = '/';
      if (c == '\\') {
        if (i_ + 1 >= s_.size()) return Error("an address without its delimiter", i_);
        delim = s_[i_ + 1];
        i_ += 2;
      } else {
        ++i_;
      }
      TEMPER_RETURN_IF_ERROR(Delimited(delim, false).status());
      while (i_ < s_.size() && (s_[i_] == 'I' || s_[i_] == 'M')) ++i_;
    }
    return Status::OK();
  }

  // a, i, c: GNU's one-line form (`a text`) or the classic `a\` followed by lines, each ended by
  // a backslash when another follows.
  std::string Text() {
    SkipBlanks();
    if (i_ < s_.size() && s_[i_] == '\\') {
      ++i_;
      if (i_ < s_.size() && s_[i_] == '\n') ++i_;
    }
    std::string out;
    while (i_ < s_.size() && s_[i_] != '\n') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        out.push_back(s_[i_ + 1] == 'n' ? '\n' : s_[i_ + 1]);
        i_ += 2;
        continue;
      }
      out.push_back(s_[i_++]);
    }
    if (i_ < s_.size()) ++i_;
    return out;
  }

  // A label, or an optional number: up to ';' or the end of the line.
  void Argument() {
    while (i_ < s_.size() && s_[i_] != ';' && s_[i_] != '\n' && s_[i_] != '}') ++i_;
  }

  Status Command() {
    const size_t at = i_;
    const char c = s_[i_++];
    switch (c) {
      case '{':
      case '}':
      case '=':
      case 'd':
      case 'D':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'n':
      case 'N':
      case 'p':
      case 'P':
      case 'x':
      case 'z':
      case 'F':
        return Status::OK();
      case 'a':
      case 'i':
      case 'c':
        effects_.inserted.push_back(Text());
        return Status::OK();
      case ':':
      case 'b':
      case 't':
      case 'T':
      case 'q':
      case 'Q':
      case 'l':
      case 'L':
      case 'v':
        Argument();
        return Status::OK();
      case 'r':
      case 'R':
        ToEndOfLine();
        return Status::OK();
      case 'w':
      case 'W': {
        SkipBlanks();
        effects_.writes.push_back(ToEndOfLine());
        return Status::OK();
      }
      case 'e': {
        SkipBlanks();
        effects_.runs.push_back(ToEndOfLine());
        return Status::OK();
      }
      case 's': {
        if (i_ >= s_.size()) return Error("an 's' without a delimiter", at);
        const char delim = s_[i_++];
        TEMPER_RETURN_IF_ERROR(Delimited(delim, false).status());
        TEMPER_ASSIGN_OR_RETURN(std::string replacement, Delimited(delim, true));
        effects_.inserted.push_back(std::move(replacement));
        while (i_ < s_.size() && s_[i_] != ';' && s_[i_] != '\n' && s_[i_] != '}') {
          const char f = s_[i_++];
          if (f == 'e') effects_.runs.push_back("");
          if (f == 'w') {
            SkipBlanks();
            effects_.writes.push_back(ToEndOfLine());
            break;
          }
        }
        return Status::OK();
      }
      case 'y': {
        if (i_ >= s_.size()) return Error("a 'y' without a delimiter", at);
        const char delim = s_[i_++];
        TEMPER_RETURN_IF_ERROR(Delimited(delim, false).status());
        return Delimited(delim, false).status();
      }
      default:
        return Error(fmt::format("an unknown command '{}'", c), at);
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  SedEffects effects_;
};

}  // namespace

Result<SedEffects> ReadSedScript(std::string_view script) { return SedReader(script).Read(); }

}  // namespace temper
