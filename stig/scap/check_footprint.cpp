#include "stig/scap/check_footprint.h"

#include <optional>

#include <cctype>

namespace temper::stig {

namespace {

// "/a/b" for "/a/b/c", "/" for "/a".
std::string_view Parent(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {};
  return slash == 0 ? std::string_view("/") : path.substr(0, slash);
}

std::string_view Base(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// True when `path` is `dir` or lies beneath it.
bool AtOrBelow(std::string_view path, std::string_view dir) {
  if (dir.empty()) return false;
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/');
}

// The literal text every match of `pattern` starts with, when it is anchored at the start ("^");
// "" when it is not. An escaped punctuation character ("\.") is literal; a quantifier after the
// last literal character makes that character optional, so it is left out.
std::string AnchoredLiteralPrefix(std::string_view pattern) {
  if (pattern.empty() || pattern[0] != '^') return "";
  std::string literal;
  for (size_t i = 1; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size() && !std::isalnum(static_cast<unsigned char>(pattern[i + 1]))) {
      literal += pattern[++i];
      continue;
    }
    if (std::string_view(".[]()*+?{}|\\$^").find(c) != std::string_view::npos) {
      if ((c == '?' || c == '*' || c == '{') && !literal.empty()) literal.pop_back();
      break;
    }
    literal += c;
  }
  return literal;
}

}  // namespace

EntityMatch EntityMatch::Equal(std::string text) {
  EntityMatch m;
  m.fixed_dir_ = text;
  m.text_ = std::move(text);
  return m;
}

std::unique_ptr<EntityMatch> EntityMatch::Pattern(std::string pattern) {
  std::shared_ptr<const std::regex> regex;
  try {
    regex = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error&) {
    return nullptr;
  }
  std::unique_ptr<EntityMatch> m(new EntityMatch());
  const std::string literal = AnchoredLiteralPrefix(pattern);
  const size_t slash = literal.rfind('/');
  if (slash != std::string::npos && literal[0] == '/') m->fixed_dir_ = slash == 0 ? "/" : literal.substr(0, slash);
  m->text_ = std::move(pattern);
  m->regex_ = std::move(regex);
  return m;
}

bool EntityMatch::Matches(std::string_view s) const {
  if (!regex_) return s == text_;
  return std::regex_search(s.begin(), s.end(), *regex_);
}

bool PathPattern::Touches(const std::string& changed) const {
  // A directory removed or replaced above everything the object can match.
  const EntityMatch& where = filepath ? *filepath : *dir;
  if (AtOrBelow(where.fixed_dir(), changed)) return true;
  return Reads(changed);
}

std::optional<std::string> PathPattern::NamedFile() const {
  if (filepath) return filepath->pattern() ? std::nullopt : std::optional(filepath->fixed_dir());
  if (!dir || dir->pattern() || !name || name->pattern() || recurse_down) return std::nullopt;
  const std::string& d = dir->fixed_dir();
  return d + (d.ends_with('/') ? "" : "/") + name->fixed_dir();
}

bool PathPattern::Reads(const std::string& path) const {
  if (filepath) return filepath->Matches(path);
  auto dir_matches = [&](std::string_view d) {
    if (dir->Matches(d)) return true;
    if (!recurse_down) return false;
    for (std::string_view up = Parent(d); !up.empty(); up = up == "/" ? std::string_view() : Parent(up)) {
      if (dir->Matches(up)) return true;
    }
    return false;
  };
  if (!name) return dir_matches(path);
  const std::string_view parent = Parent(path);
  return !parent.empty() && name->Matches(Base(path)) && dir_matches(parent);
}

bool CheckFootprint::Touches(const std::vector<std::string>& changed_paths) const {
  if (!tied) return true;
  for (const std::string& changed : changed_paths) {
    for (const PathPattern& p : paths) {
      if (p.Touches(changed)) return true;
    }
  }
  return false;
}

bool CheckFootprint::ReadsOnlyPackages() const {
  if (!tied || paths.empty()) return false;
  for (const PathPattern& p : paths) {
    if (p.NamedFile() != kDpkgStatusPath) return false;
  }
  return true;
}

std::vector<std::string> CheckFootprint::NamedPaths() const {
  std::vector<std::string> out;
  if (!tied) return out;
  for (const PathPattern& p : paths) {
    if (std::optional<std::string> file = p.NamedFile()) {
      out.push_back(std::move(*file));
    } else if (const std::string& dir = (p.filepath ? *p.filepath : *p.dir).fixed_dir(); !dir.empty()) {
      out.push_back(dir);
    }
  }
  return out;
}

}  // namespace temper::stig
