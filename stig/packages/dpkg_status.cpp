#include "stig/packages/dpkg_status.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

namespace temper::stig {
namespace {

struct Stanza {
  std::string package, version, arch, status, essential;
  std::map<std::string, std::string> conffiles;  // path -> md5, from the Conffiles field's lines
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

// The whitespace-separated words of `line`.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (true) {
    at = line.find_first_not_of(" \t\r", at);
    if (at == std::string_view::npos) return out;
    size_t end = line.find_first_of(" \t\r", at);
    if (end == std::string_view::npos) end = line.size();
    out.push_back(line.substr(at, end - at));
    at = end;
  }
}

std::vector<Stanza> Stanzas(std::string_view text) {
  std::vector<Stanza> stanzas(1);
  bool in_conffiles = false;  // continuation lines belong to the Conffiles field
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line == "\r") {
      if (!stanzas.back().package.empty()) stanzas.emplace_back();
      in_conffiles = false;
      continue;
    }
    Stanza& s = stanzas.back();
    if (line.front() == ' ' || line.front() == '\t') {
      // " /etc/path md5" and, for a conffile the package no longer ships, a third word "obsolete".
      std::vector<std::string_view> words = Words(line);
      if (in_conffiles && words.size() >= 2 && words[0].starts_with('/')) {
        s.conffiles[std::string(words[0])] = std::string(words[1]);
      }
      continue;
    }
    std::string ignored;
    in_conffiles = Field(line, "Conffiles", ignored);
    const std::pair<std::string_view, std::string*> fields[] = {{"Package", &s.package},
                                                                {"Version", &s.version},
                                                                {"Architecture", &s.arch},
                                                                {"Status", &s.status},
                                                                {"Essential", &s.essential}};
    for (const auto& [name, into] : fields) {
      if (Field(line, name, *into)) break;
    }
  }
  return stanzas;
}

}  // namespace

std::map<std::string, std::string> InstalledPackages(std::string_view text) {
  std::vector<Stanza> stanzas = Stanzas(text);
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

std::string EssentialArchitecture(std::string_view text) {
  std::map<std::string, int> votes;
  for (const Stanza& s : Stanzas(text)) {
    if (s.essential == "yes" && Installed(s.status) && !s.arch.empty() && s.arch != "all") ++votes[s.arch];
  }
  std::string best;
  int most = 0;
  for (const auto& [arch, n] : votes) {
    if (n > most) {
      best = arch;
      most = n;
    }
  }
  return best;
}

std::map<std::string, std::string> PackageConffiles(std::string_view text, std::string_view package) {
  size_t colon = package.find(':');
  std::string_view name = package.substr(0, colon);
  std::string_view arch = colon == std::string_view::npos ? "" : package.substr(colon + 1);
  for (Stanza& s : Stanzas(text)) {
    if (s.package == name && (arch.empty() || s.arch == arch) && Installed(s.status)) return std::move(s.conffiles);
  }
  return {};
}

std::map<std::string, std::string> PackageMd5sums(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    // md5sum's format: 32 hex digits, two spaces, the path relative to the root.
    if (line.size() < 35 || line[32] != ' ' || line[33] != ' ') continue;
    out["/" + std::string(line.substr(34))] = std::string(line.substr(0, 32));
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
