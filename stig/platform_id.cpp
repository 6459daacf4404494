#include "stig/platform_id.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/packages/dpkg_status.h"

namespace temper::stig {

namespace {

// os-release is a few hundred bytes; dpkg's status is megabytes on a full server (rootfs_target.cpp
// reads it with the same bound).
constexpr std::size_t kMaxOsReleaseBytes = 64 << 10;
constexpr std::size_t kMaxDpkgStatusBytes = std::size_t{256} << 20;
constexpr std::size_t kMaxDpkgArchBytes = 4 << 10;
constexpr const char* kDpkgStatus = "/var/lib/dpkg/status";
constexpr const char* kDpkgArch = "/var/lib/dpkg/arch";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// One os-release value as a shell would read it (os-release(5)): "double" quotes with \" \\ \$ \`
// escapes, 'single' quotes taken literally, or a bare word.
std::string OsReleaseValue(std::string_view raw) {
  raw = Trim(raw);
  if (raw.size() >= 2 && raw.front() == '\'' && raw.back() == '\'') return std::string(raw.substr(1, raw.size() - 2));
  if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"') {
    std::string out;
    std::string_view inner = raw.substr(1, raw.size() - 2);
    for (std::size_t i = 0; i < inner.size(); ++i) {
      if (inner[i] == '\\' && i + 1 < inner.size() &&
          std::string_view("\"\\$`").find(inner[i + 1]) != std::string_view::npos) {
        ++i;
      }
      out += inner[i];
    }
    return out;
  }
  return std::string(raw);
}

std::map<std::string, std::string> ParseOsRelease(std::string_view text) {
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    fields[std::string(Trim(line.substr(0, eq)))] = OsReleaseValue(line.substr(eq + 1));
  }
  return fields;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string TargetPlatform::Label() const {
  std::vector<std::string> parts;
  for (const std::string* part : {&os, &version, &arch}) {
    if (!part->empty()) parts.push_back(*part);
  }
  return parts.empty() ? "unknown platform" : fmt::format("{}", fmt::join(parts, " "));
}

std::string TargetPlatform::ToJson() const {
  return nlohmann::json{{"os", os}, {"version", version}, {"arch", arch}, {"packages", packages}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<TargetPlatform> TargetPlatform::FromJson(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("platform: not JSON");
  if (!j.is_object()) return Status::InvalidArgument("platform: not a JSON object");
  // A field this temper does not know could be a condition it cannot check: such a platform is
  // refused rather than matched on the fields it does know.
  for (const auto& [key, value] : j.items()) {
    if (key != "os" && key != "version" && key != "arch" && key != "packages") {
      return Status::InvalidArgument(fmt::format("platform.{}: unknown field", key));
    }
  }
  TargetPlatform p;
  for (auto [key, into] : {std::pair{"os", &p.os}, std::pair{"version", &p.version}, std::pair{"arch", &p.arch}}) {
    if (!j.contains(key)) return Status::InvalidArgument(fmt::format("platform.{}: missing", key));
    if (!j[key].is_string()) return Status::InvalidArgument(fmt::format("platform.{}: not a string", key));
    *into = j[key].get<std::string>();
  }
  if (p.os.empty())
    return Status::InvalidArgument("platform.os: empty (a platform that cannot be told is never matched)");
  if (!j.contains("packages")) return Status::InvalidArgument("platform.packages: missing");
  if (!j["packages"].is_object()) return Status::InvalidArgument("platform.packages: not a JSON object");
  for (const auto& [name, version] : j["packages"].items()) {
    if (name.empty()) return Status::InvalidArgument("platform.packages: a package with an empty name");
    if (!version.is_string() || version.get<std::string>().empty()) {
      return Status::InvalidArgument(fmt::format("platform.packages.{}: not a version string", name));
    }
    p.packages[name] = version.get<std::string>();
  }
  return p;
}

Result<TargetPlatform> ReadTargetPlatform(Target& target) {
  TargetPlatform platform;
  std::string os_release_path = "/etc/os-release";
  Result<std::string> os_release = target.ReadFile(os_release_path, kMaxOsReleaseBytes);
  if (!os_release.ok() && os_release.status().code() == StatusCode::kNotFound) {
    os_release_path = "/usr/lib/os-release";
    os_release = target.ReadFile(os_release_path, kMaxOsReleaseBytes);
  }
  if (!os_release.ok()) {
    return Status::FailedPrecondition(
        fmt::format("target {} has no readable os-release (/etc/os-release, /usr/lib/os-release): {}", target.name(),
                    os_release.status().ToString()));
  }
  std::map<std::string, std::string> fields = ParseOsRelease(*os_release);
  platform.os = Lower(fields["ID"]);
  platform.version = fields["VERSION_ID"];
  if (platform.os.empty()) {
    return Status::FailedPrecondition(
        fmt::format("target {}: {} has no ID, so its platform cannot be told", target.name(), os_release_path));
  }

  Result<std::string> status = target.ReadFile(kDpkgStatus, kMaxDpkgStatusBytes);
  if (!status.ok()) {
    return Status::FailedPrecondition(fmt::format("target {} has no readable {}, so its packages cannot be told: {}",
                                                  target.name(), kDpkgStatus, status.status().ToString()));
  }
  platform.packages = InstalledPackages(*status);

  // dpkg lists the native architecture first, any foreign ones (dpkg --add-architecture) after it.
  Result<std::string> arch = target.ReadFile(kDpkgArch, kMaxDpkgArchBytes);
  if (arch.ok()) {
    std::string_view text = *arch;
    platform.arch = std::string(Trim(text.substr(0, text.find('\n'))));
  } else if (arch.status().code() != StatusCode::kNotFound) {
    return arch.status().WithContext(fmt::format("reading {} on target {}", kDpkgArch, target.name()));
  }
  if (platform.arch.empty()) platform.arch = EssentialArchitecture(*status);
  return platform;
}

}  // namespace temper::stig
