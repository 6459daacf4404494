#include "orchestrator/library/fix_library.h"

#include <set>
#include <string_view>

#include <fmt/format.h>

namespace temper {

namespace {

// The package name of a PackageChanges entry ("aide 0.17.4-1", "libc6 2.31 -> 2.32").
std::string PackageName(std::string_view entry) { return std::string(entry.substr(0, entry.find(' '))); }

// The packages a bundle touches, by name: those it installs, removes or upgrades and those whose
// files it carries. What the fix depends on of the platform's packages.
std::set<std::string> NamedPackages(const stig::FixBundle& bundle) {
  std::set<std::string> names;
  for (const auto* list : {&bundle.packages.installed, &bundle.packages.removed, &bundle.packages.upgraded}) {
    for (const std::string& entry : *list) names.insert(PackageName(entry));
  }
  for (const stig::BundleFile& file : bundle.files) {
    if (!file.package.empty()) names.insert(file.package);
  }
  return names;
}

// Whether `target` may take an entry proven on `proven` whose bundle installs `installs` (above).
bool Matches(const stig::TargetPlatform& proven, const std::set<std::string>& installs,
             const stig::TargetPlatform& target) {
  if (proven.os != target.os || proven.version != target.version || proven.arch != target.arch) return false;
  for (const auto& [name, version] : proven.packages) {
    auto it = target.packages.find(name);
    // The replay installs a package the fix installed: its absence is what the twin had too.
    if (it == target.packages.end()) {
      if (installs.count(name) == 0) return false;
    } else if (it->second != version) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<int64_t> FixLibrary::Record(const NewFix& fix) {
  if (fix.rule_id.empty()) return Status::InvalidArgument("library entry: rule_id is empty");
  if (fix.content_id.empty())
    return Status::InvalidArgument(fmt::format("library entry for {}: content_id is empty", fix.rule_id));
  if (fix.platform.os.empty()) {
    return Status::InvalidArgument(fmt::format("library entry for {}: platform.os is empty", fix.rule_id));
  }
  if (fix.bundle.empty())
    return Status::InvalidArgument(fmt::format("library entry for {}: bundle is empty", fix.rule_id));
  // Of the target's packages only those the fix touches decide where it may be reused: a twin
  // with one more tool installed is still the same image for this fix.
  stig::TargetPlatform kept = fix.platform;
  kept.packages.clear();
  for (const std::string& name : NamedPackages(fix.bundle)) {
    auto it = fix.platform.packages.find(name);
    if (it != fix.platform.packages.end()) kept.packages.insert(*it);
  }
  FixRecord record;
  record.rule_id = fix.rule_id;
  record.content_id = fix.content_id;
  record.platform_json = kept.ToJson();
  record.bundle_json = fix.bundle.ToJson();
  record.evidence = fix.evidence;
  record.source_batch = fix.source_batch;
  record.source_attempt = fix.source_attempt;
  record.source_target = fix.source_target;
  record.model_tokens = fix.model_tokens;
  return store_.AddFix(record);
}

Result<std::optional<FixRecord>> FixLibrary::Match(const std::string& rule_id, const std::string& content_id,
                                                   const stig::TargetPlatform& platform) {
  if (platform.os.empty()) return std::optional<FixRecord>{};  // a platform that cannot be told
  TEMPER_ASSIGN_OR_RETURN(std::vector<FixRecord> live, store_.LiveFixes(rule_id, content_id));
  for (FixRecord& entry : live) {
    Result<stig::TargetPlatform> proven = stig::TargetPlatform::FromJson(entry.platform_json);
    if (!proven.ok()) {
      return Status::DataLoss(
          fmt::format("library entry {}: stored platform: {}", entry.id, proven.status().message()));
    }
    Result<stig::FixBundle> bundle = stig::FixBundle::FromJson(entry.bundle_json);
    if (!bundle.ok()) {
      return Status::DataLoss(fmt::format("library entry {}: stored bundle: {}", entry.id, bundle.status().message()));
    }
    std::set<std::string> installs;
    for (const std::string& installed : bundle->packages.installed) installs.insert(PackageName(installed));
    if (Matches(*proven, installs, platform)) return std::optional<FixRecord>(std::move(entry));
  }
  return std::optional<FixRecord>{};
}

Status FixLibrary::NoteOutcome(int64_t id, int64_t batch, bool kept, const std::string& why) {
  return store_.NoteFixOutcome(id, kept, kept ? "" : fmt::format("batch {}: {}", batch, why));
}

Result<std::vector<FixRecord>> FixLibrary::List(const std::string& rule_id, bool include_retired, uint32_t limit,
                                                std::optional<int64_t> before_id) {
  return store_.ListFixes(rule_id, include_retired, limit, before_id);
}

Result<FixRecord> FixLibrary::Get(int64_t id) { return store_.GetFix(id); }

Result<FixRecord> FixLibrary::Retire(int64_t id, const std::string& reason) {
  if (reason.empty()) return Status::InvalidArgument(fmt::format("retiring library entry {}: reason is empty", id));
  return store_.RetireFix(id, reason);
}

std::string FixContentId(const stig::Content& content) {
  return fmt::format("{} {}", content.benchmark_id(), content.benchmark_version());
}

}  // namespace temper
