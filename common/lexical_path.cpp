#include "common/lexical_path.h"

#include <vector>

namespace temper {

std::string NormalizePath(std::string_view p) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < p.size()) {
    size_t j = p.find('/', i);
    std::string_view part = p.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  std::string out;
  if (p.empty() || p[0] != '/') {
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k) out += '/';
      out += parts[k];
    }
    return out;
  }
  for (std::string_view part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

bool PathWithin(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

}  // namespace temper
