#include "stig/change_set.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/change_set_redaction.h"

namespace temper::stig {
namespace {

using nlohmann::json;

constexpr FileType kFileTypes[] = {FileType::kFile, FileType::kDir, FileType::kSymlink, FileType::kOther};
constexpr FileChangeKind kChangeKinds[] = {FileChangeKind::kAdded, FileChangeKind::kModified, FileChangeKind::kDeleted,
                                           FileChangeKind::kMetadata};

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

// Readers of a parsed document that name the field they failed on.
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

Result<std::optional<FileState>> ParseState(const json& obj, const std::string& field, const std::string& where) {
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

std::string Plural(size_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

std::string_view FileTypeName(FileType t) {
  switch (t) {
    case FileType::kFile:
      return "file";
    case FileType::kDir:
      return "dir";
    case FileType::kSymlink:
      return "symlink";
    case FileType::kOther:
      return "other";
  }
  return "other";
}

std::string_view FileChangeKindName(FileChangeKind k) {
  switch (k) {
    case FileChangeKind::kAdded:
      return "added";
    case FileChangeKind::kModified:
      return "modified";
    case FileChangeKind::kDeleted:
      return "deleted";
    case FileChangeKind::kMetadata:
      return "metadata";
  }
  return "modified";
}

bool ChangeSet::empty() const { return files.empty() && packages == PackageChanges{} && services == ServiceChanges{}; }

std::string ChangeSet::Summary() const {
  std::vector<std::string> parts;
  if (!files.empty()) {
    size_t counts[4] = {};
    for (const FileChange& f : files) ++counts[static_cast<int>(f.change)];
    std::vector<std::string> kinds;
    for (FileChangeKind k : kChangeKinds) {
      if (counts[static_cast<int>(k)] > 0)
        kinds.push_back(fmt::format("{} {}", counts[static_cast<int>(k)], FileChangeKindName(k)));
    }
    parts.push_back(fmt::format("{} ({})", Plural(files.size(), "file"), fmt::join(kinds, ", ")));
  }
  auto add = [&](const std::vector<std::string>& list, std::string_view what, std::string_view verb) {
    if (!list.empty()) parts.push_back(fmt::format("{} {}", Plural(list.size(), what), verb));
  };
  add(packages.installed, "package", "installed");
  add(packages.removed, "package", "removed");
  add(packages.upgraded, "package", "upgraded");
  add(services.enabled, "service", "enabled");
  add(services.disabled, "service", "disabled");
  add(services.masked, "service", "masked");
  add(services.unmasked, "service", "unmasked");
  return parts.empty() ? "no changes" : fmt::format("{}", fmt::join(parts, "; "));
}

std::string ChangeSet::ToJson() const {
  json out_files = json::array();
  for (const FileChange& f : files) {
    json item = {{"path", f.path},
                 {"change", FileChangeKindName(f.change)},
                 {"before", StateJson(f.before)},
                 {"after", StateJson(f.after)},
                 {"diff", RedactHashesInDiff(f.path, f.diff)},
                 {"binary", f.binary}};
    if (!f.diff_skipped.empty()) item["diff_skipped"] = f.diff_skipped;
    out_files.push_back(std::move(item));
  }
  json out = {
      {"files", std::move(out_files)},
      {"packages", {{"installed", packages.installed}, {"removed", packages.removed}, {"upgraded", packages.upgraded}}},
      {"services",
       {{"enabled", services.enabled},
        {"disabled", services.disabled},
        {"masked", services.masked},
        {"unmasked", services.unmasked}}}};
  // Replacement characters keep a file's invalid UTF-8 (a Latin-1 config) from failing the dump.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ChangeSet> ChangeSet::FromJson(std::string_view text) {
  ChangeSet cs;
  if (text.empty()) return cs;
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("change set: not valid JSON");
  if (!doc.is_object()) return Status::InvalidArgument("change set: expected a JSON object");
  if (auto it = doc.find("files"); it != doc.end()) {
    if (!it->is_array()) return Status::InvalidArgument("files: expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& item = (*it)[i];
      std::string at = fmt::format("files[{}]", i);
      if (!item.is_object()) return Status::InvalidArgument(at + ": expected an object");
      FileChange f;
      TEMPER_ASSIGN_OR_RETURN(f.path, String(item, "path", at));
      if (f.path.empty() || f.path[0] != '/') return Status::InvalidArgument(at + ".path: expected an absolute path");
      TEMPER_ASSIGN_OR_RETURN(std::string change, String(item, "change", at));
      bool known = false;
      for (FileChangeKind k : kChangeKinds) {
        if (FileChangeKindName(k) == change) {
          f.change = k;
          known = true;
        }
      }
      if (!known) {
        return Status::InvalidArgument(
            fmt::format("{}.change: \"{}\" is not added, modified, deleted or metadata", at, change));
      }
      TEMPER_ASSIGN_OR_RETURN(f.before, ParseState(item, "before", at));
      TEMPER_ASSIGN_OR_RETURN(f.after, ParseState(item, "after", at));
      TEMPER_ASSIGN_OR_RETURN(std::string diff, String(item, "diff", at));
      f.diff = RedactHashesInDiff(f.path, diff);  // a change set stored before redaction existed
      TEMPER_ASSIGN_OR_RETURN(f.diff_skipped, String(item, "diff_skipped", at));
      if (auto b = item.find("binary"); b != item.end()) {
        if (!b->is_boolean()) return Status::InvalidArgument(at + ".binary: expected true or false");
        f.binary = b->get<bool>();
      }
      cs.files.push_back(std::move(f));
    }
  }
  auto group = [&](const char* name) -> Result<const json*> {
    static const json kEmpty = json::object();
    auto it = doc.find(name);
    if (it == doc.end()) return &kEmpty;
    if (!it->is_object()) return Status::InvalidArgument(fmt::format("{}: expected an object", name));
    return &*it;
  };
  TEMPER_ASSIGN_OR_RETURN(const json* packages, group("packages"));
  TEMPER_ASSIGN_OR_RETURN(cs.packages.installed, Strings(*packages, "installed", "packages"));
  TEMPER_ASSIGN_OR_RETURN(cs.packages.removed, Strings(*packages, "removed", "packages"));
  TEMPER_ASSIGN_OR_RETURN(cs.packages.upgraded, Strings(*packages, "upgraded", "packages"));
  TEMPER_ASSIGN_OR_RETURN(const json* services, group("services"));
  TEMPER_ASSIGN_OR_RETURN(cs.services.enabled, Strings(*services, "enabled", "services"));
  TEMPER_ASSIGN_OR_RETURN(cs.services.disabled, Strings(*services, "disabled", "services"));
  TEMPER_ASSIGN_OR_RETURN(cs.services.masked, Strings(*services, "masked", "services"));
  TEMPER_ASSIGN_OR_RETURN(cs.services.unmasked, Strings(*services, "unmasked", "services"));
  return cs;
}

}  // namespace temper::stig
