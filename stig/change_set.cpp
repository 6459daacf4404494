#include "stig/change_set.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/change_set_json.h"
#include "stig/change_set_redaction.h"

namespace temper::stig {
namespace {

using nlohmann::json;
using json_fields::StateJson;

constexpr FileChangeKind kChangeKinds[] = {FileChangeKind::kAdded, FileChangeKind::kModified, FileChangeKind::kDeleted,
                                           FileChangeKind::kMetadata};

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
  json out = {{"files", std::move(out_files)},
              {"packages", json_fields::PackagesJson(packages)},
              {"services", json_fields::ServicesJson(services)}};
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
      TEMPER_ASSIGN_OR_RETURN(f.path, json_fields::String(item, "path", at));
      if (f.path.empty() || f.path[0] != '/') return Status::InvalidArgument(at + ".path: expected an absolute path");
      TEMPER_ASSIGN_OR_RETURN(std::string change, json_fields::String(item, "change", at));
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
      TEMPER_ASSIGN_OR_RETURN(f.before, json_fields::State(item, "before", at));
      TEMPER_ASSIGN_OR_RETURN(f.after, json_fields::State(item, "after", at));
      TEMPER_ASSIGN_OR_RETURN(std::string diff, json_fields::String(item, "diff", at));
      f.diff = RedactHashesInDiff(f.path, diff);  // a change set stored before redaction existed
      TEMPER_ASSIGN_OR_RETURN(f.diff_skipped, json_fields::String(item, "diff_skipped", at));
      if (auto b = item.find("binary"); b != item.end()) {
        if (!b->is_boolean()) return Status::InvalidArgument(at + ".binary: expected true or false");
        f.binary = b->get<bool>();
      }
      cs.files.push_back(std::move(f));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(cs.packages, json_fields::Packages(doc));
  TEMPER_ASSIGN_OR_RETURN(cs.services, json_fields::Services(doc));
  return cs;
}

}  // namespace temper::stig
