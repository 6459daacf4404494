#include "stig/packages/dpkg_status.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

namespace temper::stig {
namespace {

struct Stanza {
  std::string package, version, arch, status;
};

// The value of "Field: value" when `line` starts with `field`; continuation lines (leading space)
// belong to multi-line fields we do not read.
bool Field(std::string_view line, std::string_view field, std::string& value) {
  if (line.size() <= field.size() || line.substr(0, field.size()) != field || line[field.size()] != ':') return false;
  std::string_view v = line.substr(field.size() + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r')) v.remove_suffix(1);
  value = std::string(v);
  return true;
}

bool Installed(const std::string& status) {
  // "want flag state", e.g. "install ok installed" or "deinstall ok config-files".
  size_t last = status.find_last_of(' ');
  return last != std::string::npos && status.substr(last + 1) == "installed";
}

}  // namespace

std::map<std::string, std::string> InstalledPackages(std::string_view text) {
  std::vector<Stanza> stanzas(1);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line == "\r") {
      if (!stanzas.back().package.empty()) stanzas.emplace_back();
      continue;
    }
    Stanza& s = stanzas.back();
    if (line.front() == ' ' || line.front() == '\t') continue;
    const std::pair<std::string_view, std::string*> fields[] = {{"Package", &s.package},
                                                                {"Version", &s.version},
                                                                {"Architecture", &s.arch},
                                                                {"Status", &s.status}};
    for (const auto& [name, into] : fields) {
      if (Field(line, name, *into)) break;
    }
  }
  std::map<std::string, int> arches;
  for (const Stanza& s : stanzas) {
    if (!s.package.empty() && !s.version.empty() && Installed(s.status)) ++arches[s.package];
  }
  std::map<std::string, std::string> out;
  for (const Stanza& s : stanzas) {
    if (s.package.empty() || s.version.empty() || !Installed(s.status)) continue;
    std::string key = arches[s.package] > 1 ? s.package + ":" + s.arch : s.package;
    out[key] = s.version;
  }
  return out;
}

PackageChanges ComparePackages(const std::map<std::string, std::string>& before,
                               const std::map<std::string, std::string>& after) {
  PackageChanges out;
  for (const auto& [name, version] : after) {
    auto it = before.find(name);
    if (it == before.end()) {
      out.installed.push_back(fmt::format("{} {}", name, version));
    } else if (it->second != version) {
      out.upgraded.push_back(fmt::format("{} {} -> {}", name, it->second, version));
    }
  }
  for (const auto& [name, version] : before) {
    if (!after.contains(name)) out.removed.push_back(fmt::format("{} {}", name, version));
  }
  return out;
}

}  // namespace temper::stig
