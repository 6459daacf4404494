#include "stig/fix_bundle.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "stig/change_set_json.h"

namespace temper::stig {
namespace {

using nlohmann::json;

// A bundle nests four levels ({"files":[{"before":{...}}]}); a document nested deeper is not one,
// and is refused before its depth costs anything.
constexpr int kMaxJsonDepth = 8;
// The most JSON a bundle within the limits can take: its content as base64 (4 bytes per 3) twice
// over at most (a before and an after), and a generous allowance per file for its fields.
constexpr std::uint64_t kMaxJsonBytes = kMaxBundleBytes / 3 * 4 + 8 + kMaxBundleFiles * std::uint64_t{8192};

constexpr char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16 | static_cast<std::uint8_t>(bytes[i + 1]) << 8 |
                      static_cast<std::uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kBase64Alphabet[(v >> shift) & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    out += kBase64Alphabet[(v >> 18) & 63];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Standard base64 with padding, nothing else (no line breaks, no URL alphabet): what Base64Encode
// writes. nullopt for anything else.
std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  static const std::array<int, 256> kValue = [] {
    std::array<int, 256> v;
    v.fill(-1);
    for (int i = 0; i < 64; ++i) v[static_cast<std::uint8_t>(kBase64Alphabet[i])] = i;
    return v;
  }();
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" style
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int d = k >= 4 - pad ? 0 : kValue[static_cast<std::uint8_t>(text[i + k])];
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

json ImageJson(const std::optional<FileImage>& image) {
  if (!image) return nullptr;
  json out = json_fields::StateJson(image->state);
  out["link"] = image->state.link;
  if (image->state.type == FileType::kFile) {
    out["content_base64"] = Base64Encode(image->content);
    out["sha256"] = image->sha256;
  }
  return out;
}

// A path a bundle may name: absolute, no empty, "." or ".." component, no NUL, no trailing slash.
Status CheckPath(const std::string& path, const std::string& at) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument(at + ": expected an absolute path");
  if (path == "/") return Status::InvalidArgument(at + ": the root itself is not a path a fix changes");
  if (path.find('\0') != std::string::npos) return Status::InvalidArgument(at + ": holds a NUL byte");
  std::size_t at_part = 1;
  while (at_part <= path.size()) {
    std::size_t end = path.find('/', at_part);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + at_part, end - at_part);
    if (part.empty() || part == "." || part == "..") {
      return Status::InvalidArgument(fmt::format(
          "{}: \"{}\" has an empty, \".\" or \"..\" component; a bundle names paths as they are", at, path));
    }
    at_part = end + 1;
  }
  return Status::OK();
}

bool IsLowerHex(std::string_view s, std::size_t length) {
  return s.size() == length &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Result<std::optional<FileImage>> ParseImage(const json& item, const std::string& field, const std::string& where,
                                            std::uint64_t& content_total) {
  TEMPER_ASSIGN_OR_RETURN(std::optional<FileState> state, json_fields::State(item, field, where));
  if (!state) return std::optional<FileImage>();
  const std::string at = where + "." + field;
  const json& obj = item.at(field);
  FileImage image{.state = std::move(*state)};
  switch (image.state.type) {
    case FileType::kOther:
      return Status::InvalidArgument(at + ".type: a FIFO, socket or device cannot be replayed");
    case FileType::kDir:
      if (image.state.size != 0 || !image.state.link.empty()) {
        return Status::InvalidArgument(at + ": a directory has no size or link");
      }
      break;
    case FileType::kSymlink:
      if (image.state.link.empty() || image.state.link.find('\0') != std::string::npos) {
        return Status::InvalidArgument(at + ".link: a symlink needs a target without NUL bytes");
      }
      if (image.state.size != image.state.link.size()) {
        return Status::InvalidArgument(at + ".size: is not the length of the link");
      }
      break;
    case FileType::kFile: {
      if (!image.state.link.empty()) return Status::InvalidArgument(at + ".link: a regular file has no link");
      if (image.state.size > kMaxBundleFileBytes) {
        return Status::InvalidArgument(fmt::format("{}.size: {} bytes, more than a bundle's {} per file", at,
                                                   image.state.size, kMaxBundleFileBytes));
      }
      auto b64 = obj.find("content_base64");
      if (b64 == obj.end() || !b64->is_string()) {
        return Status::InvalidArgument(at + ".content_base64: expected a string for a regular file");
      }
      const std::string& encoded = b64->get_ref<const std::string&>();
      // Checked before decoding: the encoded length bounds the bytes.
      if (encoded.size() / 4 * 3 > image.state.size + 2) {
        return Status::InvalidArgument(at + ".content_base64: longer than the size says");
      }
      std::optional<std::string> content = Base64Decode(encoded);
      if (!content) return Status::InvalidArgument(at + ".content_base64: not base64");
      if (content->size() != image.state.size) {
        return Status::InvalidArgument(
            fmt::format("{}.size: {} bytes, but the content holds {}", at, image.state.size, content->size()));
      }
      image.content = std::move(*content);
      TEMPER_ASSIGN_OR_RETURN(image.sha256, json_fields::String(obj, "sha256", at));
      if (image.sha256 != ContentSha256(image.content)) {
        return Status::InvalidArgument(at + ".sha256: is not the sha256 of the content");
      }
      content_total += image.content.size();
      if (content_total > kMaxBundleBytes) {
        return Status::InvalidArgument(
            fmt::format("{}.content_base64: the bundle's files pass its {} bytes in all", at, kMaxBundleBytes));
      }
      break;
    }
  }
  return std::optional<FileImage>(std::move(image));
}

// "name version" or "name old -> new" with Debian's characters for each, so that nothing a
// replay hands apt-get can read as an option or hold a shell's metacharacter.
bool IsPackageName(std::string_view s) {
  if (s.empty() || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == ':';
  });
}

bool IsVersion(std::string_view s) {
  if (s.empty() || !(s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
           c == '.' || c == '~' || c == ':';
  });
}

std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < s.size()) {
    std::size_t end = s.find(' ', at);
    if (end == std::string_view::npos) end = s.size();
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

Status CheckPackages(const PackageChanges& p) {
  auto check = [](const std::vector<std::string>& list, const char* field, bool upgrade) -> Status {
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::vector<std::string_view> w = Words(list[i]);
      bool ok = upgrade ? w.size() == 4 && IsPackageName(w[0]) && IsVersion(w[1]) && w[2] == "->" && IsVersion(w[3])
                        : w.size() == 2 && IsPackageName(w[0]) && IsVersion(w[1]);
      if (!ok) {
        return Status::InvalidArgument(fmt::format("packages.{}[{}]: \"{}\" is not \"{}\"", field, i, list[i],
                                                   upgrade ? "name old -> new" : "name version"));
      }
    }
    return Status::OK();
  };
  TEMPER_RETURN_IF_ERROR(check(p.installed, "installed", false));
  TEMPER_RETURN_IF_ERROR(check(p.removed, "removed", false));
  return check(p.upgraded, "upgraded", true);
}

// A systemd unit name ("auditd.service", "getty@tty1.service").
Status CheckServices(const ServiceChanges& s) {
  auto check = [](const std::vector<std::string>& list, const char* field) -> Status {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string& u = list[i];
      bool ok = !u.empty() && u.size() <= 256 && u[0] != '-' && u.find('.') != std::string::npos &&
                std::all_of(u.begin(), u.end(), [](char c) {
                  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
                         c == '_' || c == '.' || c == '@' || c == '-' || c == '\\';
                });
      if (!ok) return Status::InvalidArgument(fmt::format("services.{}[{}]: \"{}\" is not a unit name", field, i, u));
    }
    return Status::OK();
  };
  TEMPER_RETURN_IF_ERROR(check(s.enabled, "enabled"));
  TEMPER_RETURN_IF_ERROR(check(s.disabled, "disabled"));
  TEMPER_RETURN_IF_ERROR(check(s.masked, "masked"));
  return check(s.unmasked, "unmasked");
}

}  // namespace

std::string ContentSha256(std::string_view bytes) { return Sha256Hex(bytes); }

bool IsPackageManagerState(std::string_view path) {
  static constexpr std::string_view kDirs[] = {"/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf",
                                               "/var/log/apt"};
  for (std::string_view dir : kDirs) {
    if (path == dir || (path.starts_with(dir) && path.size() > dir.size() && path[dir.size()] == '/')) return true;
  }
  // dpkg's log, and the alternatives log its maintainer scripts write.
  return path == "/var/log/dpkg.log" || path == "/var/log/alternatives.log";
}

std::uint64_t FixBundle::content_bytes() const {
  std::uint64_t total = 0;
  for (const BundleFile& f : files) {
    if (f.before) total += f.before->content.size();
    if (f.after) total += f.after->content.size();
  }
  return total;
}

std::string FixBundle::ToJson() const {
  json out_files = json::array();
  for (const BundleFile& f : files) {
    json item = {{"path", f.path}, {"before", ImageJson(f.before)}, {"after", ImageJson(f.after)}};
    if (!f.package.empty()) {
      item["package"] = f.package;
      item["package_md5"] = f.package_md5;
    }
    out_files.push_back(std::move(item));
  }
  json out = {{"files", std::move(out_files)},
              {"packages", json_fields::PackagesJson(packages)},
              {"services", json_fields::ServicesJson(services)}};
  // Contents travel as base64; a path or link that is not UTF-8 comes back with replacement
  // characters, which a replay then fails to find, rather than the dump failing here.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<FixBundle> FixBundle::FromJson(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return Status::InvalidArgument(fmt::format(
        "bundle: {} bytes of JSON, more than a bundle within its limits takes ({})", text.size(), kMaxJsonBytes));
  }
  bool too_deep = false;
  json::parser_callback_t depth_guard = [&too_deep](int depth, json::parse_event_t event, json&) {
    if (depth > kMaxJsonDepth &&
        (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start)) {
      too_deep = true;
      return false;
    }
    return !too_deep;
  };
  json doc = json::parse(text, depth_guard, /*allow_exceptions=*/false);
  if (too_deep) return Status::InvalidArgument(fmt::format("bundle: nested deeper than {} levels", kMaxJsonDepth));
  if (doc.is_discarded()) return Status::InvalidArgument("bundle: not valid JSON");
  if (!doc.is_object()) return Status::InvalidArgument("bundle: expected a JSON object");
  FixBundle bundle;
  std::uint64_t content_total = 0;
  if (auto it = doc.find("files"); it != doc.end()) {
    if (!it->is_array()) return Status::InvalidArgument("files: expected an array");
    if (it->size() > kMaxBundleFiles) {
      return Status::InvalidArgument(
          fmt::format("files: {} files, more than a bundle's {}", it->size(), kMaxBundleFiles));
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& item = (*it)[i];
      const std::string at = fmt::format("files[{}]", i);
      if (!item.is_object()) return Status::InvalidArgument(at + ": expected an object");
      BundleFile f;
      TEMPER_ASSIGN_OR_RETURN(f.path, json_fields::String(item, "path", at));
      TEMPER_RETURN_IF_ERROR(CheckPath(f.path, at + ".path"));
      if (!bundle.files.empty() && f.path <= bundle.files.back().path) {
        return Status::InvalidArgument(
            fmt::format("{}.path: \"{}\" {} \"{}\"; files are sorted by path, each once", at, f.path,
                        f.path == bundle.files.back().path ? "repeats" : "comes after", bundle.files.back().path));
      }
      TEMPER_ASSIGN_OR_RETURN(f.before, ParseImage(item, "before", at, content_total));
      TEMPER_ASSIGN_OR_RETURN(f.after, ParseImage(item, "after", at, content_total));
      if (!f.before && !f.after) {
        return Status::InvalidArgument(at + ": neither before nor after: nothing to replay");
      }
      TEMPER_ASSIGN_OR_RETURN(f.package, json_fields::String(item, "package", at));
      TEMPER_ASSIGN_OR_RETURN(f.package_md5, json_fields::String(item, "package_md5", at));
      if (!f.package.empty()) {
        if (!IsPackageName(f.package)) return Status::InvalidArgument(at + ".package: not a package name");
        if (!IsLowerHex(f.package_md5, 32)) {
          return Status::InvalidArgument(at + ".package_md5: expected 32 lower-case hex digits");
        }
        if (f.before)
          return Status::InvalidArgument(at + ".before: a package's file is judged by its md5, not a before");
        if (!f.after) return Status::InvalidArgument(at + ".after: a package's file the fix changed needs its after");
      } else if (!f.package_md5.empty()) {
        return Status::InvalidArgument(at + ".package_md5: given without a package");
      }
      bundle.files.push_back(std::move(f));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(bundle.packages, json_fields::Packages(doc));
  TEMPER_RETURN_IF_ERROR(CheckPackages(bundle.packages));
  TEMPER_ASSIGN_OR_RETURN(bundle.services, json_fields::Services(doc));
  TEMPER_RETURN_IF_ERROR(CheckServices(bundle.services));
  return bundle;
}

}  // namespace temper::stig
