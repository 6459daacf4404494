// Reading apt's and dpkg's output: the package cache and the installer both look for their
// messages line by line.
// Thread safety: pure functions.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace temper::stig {

inline std::vector<std::string> OutputLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace temper::stig
