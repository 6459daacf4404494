#include "docs/doc_paths.h"

#include <cctype>
#include <system_error>

namespace temper::testing {
namespace {

bool IsPathSeparator(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ';' || c == '(' || c == ')' || c == '\'' ||
         c == '"' || c == '=' || c == '|' || c == '[' || c == ']' || c == '`';
}

// Drops what follows a path in prose or a compiler message: `x.cpp:74`, `x.h,`, `dir/.`
std::string TrimPath(std::string word) {
  while (!word.empty() && (word.back() == '.' || word.back() == ':' || word.back() == '!' || word.back() == '?')) {
    word.pop_back();
  }
  const size_t colon = word.find(':');
  if (colon != std::string::npos) word.erase(colon);
  return word;
}

bool HasTemplateParts(std::string_view word) {
  return word.find_first_of("<>*{}$~") != std::string_view::npos || word.find("...") != std::string_view::npos ||
         word.find("\xE2\x80\xA6") != std::string_view::npos;  // an ellipsis character
}

void AddCodePaths(std::string_view code, int line, const std::set<std::string>& top_level_folders,
                  std::vector<NamedPath>& out) {
  size_t i = 0;
  while (i < code.size()) {
    while (i < code.size() && IsPathSeparator(code[i])) ++i;
    size_t end = i;
    while (end < code.size() && !IsPathSeparator(code[end])) ++end;
    std::string word = TrimPath(std::string(code.substr(i, end - i)));
    i = end;
    const size_t slash = word.find('/');
    if (slash == std::string::npos || slash == 0 || HasTemplateParts(word)) continue;
    if (!top_level_folders.contains(word.substr(0, slash))) continue;
    out.push_back({word, line, false});
  }
}

void AddLinkTargets(std::string_view text, int line, std::vector<NamedPath>& out) {
  size_t at = 0;
  while ((at = text.find("](", at)) != std::string_view::npos) {
    const size_t start = at + 2;
    const size_t close = text.find(')', start);
    if (close == std::string_view::npos) return;
    std::string target(text.substr(start, close - start));
    at = close;
    const size_t anchor = target.find('#');
    if (anchor != std::string::npos) target.erase(anchor);
    if (target.empty() || target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
    out.push_back({target, line, true});
  }
}

}  // namespace

std::set<std::string> TopLevelFolders(const std::filesystem::path& checkout) {
  std::set<std::string> folders;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(checkout, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(error) || name == "build") continue;
    if (name.starts_with('.') && name != ".ci") continue;
    folders.insert(name);
  }
  return folders;
}

std::vector<NamedPath> PathsNamedIn(std::string_view markdown, const std::set<std::string>& top_level_folders) {
  std::vector<NamedPath> paths;
  bool in_fence = false;
  int line_number = 0;
  size_t line_start = 0;
  while (line_start <= markdown.size()) {
    size_t line_end = markdown.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = markdown.size();
    const std::string_view line = markdown.substr(line_start, line_end - line_start);
    ++line_number;
    line_start = line_end + 1;
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && line.substr(first).starts_with("```")) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) {
      AddCodePaths(line, line_number, top_level_folders, paths);
      continue;
    }
    // Code spans: the text between a backquote and the next one on the line.
    size_t open = line.find('`');
    while (open != std::string_view::npos) {
      const size_t close = line.find('`', open + 1);
      if (close == std::string_view::npos) break;
      AddCodePaths(line.substr(open + 1, close - open - 1), line_number, top_level_folders, paths);
      open = line.find('`', close + 1);
    }
    AddLinkTargets(line, line_number, paths);
  }
  return paths;
}

std::vector<NamedPath> StalePathsIn(const std::filesystem::path& document, std::string_view markdown,
                                    const std::filesystem::path& checkout) {
  std::vector<NamedPath> stale;
  for (NamedPath& named : PathsNamedIn(markdown, TopLevelFolders(checkout))) {
    const std::filesystem::path resolved =
        named.is_link ? (checkout / document).parent_path() / named.path : checkout / named.path;
    std::error_code error;
    if (!std::filesystem::exists(resolved, error)) stale.push_back(std::move(named));
  }
  return stale;
}

}  // namespace temper::testing
