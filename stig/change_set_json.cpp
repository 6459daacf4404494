#include "stig/change_set_json.h"

#include <fmt/format.h>

namespace temper::stig::json_fields {
namespace {

using nlohmann::json;

constexpr FileType kFileTypes[] = {FileType::kFile, FileType::kDir, FileType::kSymlink, FileType::kOther};

}  // namespace

json StateJson(const std::optional<FileState>& s) {
  if (!s) return nullptr;
  json out = {{"type", FileTypeName(s->type)},
              {"mode", fmt::format("{:04o}", s->mode)},
              {"uid", s->uid},
              {"gid", s->gid},
              {"size", s->size}};
  if (s->type == FileType::kSymlink) out["link"] = s->link;
  return out;
}

Result<std::string> String(const json& obj, const std::string& field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end()) return std::string();
  if (!it->is_string()) return Status::InvalidArgument(fmt::format("{}.{}: expected a string", where, field));
  return it->get<std::string>();
}

Result<std::uint64_t> Number(const json& obj, const std::string& field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_number_unsigned()) {
    return Status::InvalidArgument(fmt::format("{}.{}: expected a non-negative integer", where, field));
  }
  return it->get<std::uint64_t>();
}

Result<std::vector<std::string>> Strings(const json& obj, const std::string& field, const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(field);
  if (it == obj.end()) return out;
  if (!it->is_array()) return Status::InvalidArgument(fmt::format("{}.{}: expected an array of strings", where, field));
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) {
      return Status::InvalidArgument(fmt::format("{}.{}[{}]: expected a string", where, field, i));
    }
    out.push_back((*it)[i].get<std::string>());
  }
  return out;
}

Result<std::optional<FileState>> State(const json& obj, const std::string& field, const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::optional<FileState>();
  std::string at = where + "." + field;
  if (!it->is_object()) return Status::InvalidArgument(at + ": expected an object or null");
  FileState s;
  TEMPER_ASSIGN_OR_RETURN(std::string type, String(*it, "type", at));
  bool known = false;
  for (FileType t : kFileTypes) {
    if (FileTypeName(t) == type) {
      s.type = t;
      known = true;
    }
  }
  if (!known)
    return Status::InvalidArgument(fmt::format("{}.type: \"{}\" is not file, dir, symlink or other", at, type));
  TEMPER_ASSIGN_OR_RETURN(std::string mode, String(*it, "mode", at));
  size_t used = 0;
  unsigned long bits = 0;
  try {
    bits = std::stoul(mode, &used, 8);
  } catch (const std::exception&) {
    used = 0;
  }
  if (mode.empty() || used != mode.size() || bits > 07777) {
    return Status::InvalidArgument(fmt::format("{}.mode: \"{}\" is not an octal mode such as \"0644\"", at, mode));
  }
  s.mode = static_cast<std::uint32_t>(bits);
  TEMPER_ASSIGN_OR_RETURN(std::uint64_t uid, Number(*it, "uid", at));
  TEMPER_ASSIGN_OR_RETURN(std::uint64_t gid, Number(*it, "gid", at));
  if (uid > UINT32_MAX || gid > UINT32_MAX) return Status::InvalidArgument(at + ": uid or gid above 2^32-1");
  s.uid = static_cast<std::uint32_t>(uid);
  s.gid = static_cast<std::uint32_t>(gid);
  TEMPER_ASSIGN_OR_RETURN(s.size, Number(*it, "size", at));
  TEMPER_ASSIGN_OR_RETURN(s.link, String(*it, "link", at));
  return std::optional<FileState>(std::move(s));
}

Result<const json*> Group(const json& doc, const char* name) {
  static const json kEmpty = json::object();
  auto it = doc.find(name);
  if (it == doc.end()) return &kEmpty;
  if (!it->is_object()) return Status::InvalidArgument(fmt::format("{}: expected an object", name));
  return &*it;
}

json PackagesJson(const PackageChanges& p) {
  return {{"installed", p.installed}, {"removed", p.removed}, {"upgraded", p.upgraded}};
}

json ServicesJson(const ServiceChanges& s) {
  return {{"enabled", s.enabled}, {"disabled", s.disabled}, {"masked", s.masked}, {"unmasked", s.unmasked}};
}

Result<PackageChanges> Packages(const json& doc) {
  PackageChanges out;
  TEMPER_ASSIGN_OR_RETURN(const json* packages, Group(doc, "packages"));
  TEMPER_ASSIGN_OR_RETURN(out.installed, Strings(*packages, "installed", "packages"));
  TEMPER_ASSIGN_OR_RETURN(out.removed, Strings(*packages, "removed", "packages"));
  TEMPER_ASSIGN_OR_RETURN(out.upgraded, Strings(*packages, "upgraded", "packages"));
  return out;
}

Result<ServiceChanges> Services(const json& doc) {
  ServiceChanges out;
  TEMPER_ASSIGN_OR_RETURN(const json* services, Group(doc, "services"));
  TEMPER_ASSIGN_OR_RETURN(out.enabled, Strings(*services, "enabled", "services"));
  TEMPER_ASSIGN_OR_RETURN(out.disabled, Strings(*services, "disabled", "services"));
  TEMPER_ASSIGN_OR_RETURN(out.masked, Strings(*services, "masked", "services"));
  TEMPER_ASSIGN_OR_RETURN(out.unmasked, Strings(*services, "unmasked", "services"));
  return out;
}

}  // namespace temper::stig::json_fields
