#include "orchestrator/evidence/fix_playbook.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/sha256.h"

namespace temper::evidence {
namespace {

using stig::BundleFile;
using stig::FileImage;
using stig::FileType;

// ---------------------------------------------------------------------------------------------
// What both forms share: the states a path may be found in, and checked names.

// One state a path may hold when a fix comes to it.
struct PathState {
  enum Kind { kAbsent, kFile, kPackageFile, kDir, kLink } kind = kAbsent;
  std::string value;  // kFile: sha256 hex; kPackageFile: dpkg's md5; kLink: the link's target
  bool operator==(const PathState&) const = default;
};

// One file of one fix with the states it accepts: `accepted` on a real run, plus `dry_run_extra`
// in a dry run (what an earlier fix of the export would have left there, and, for a package's file,
// nothing yet, since the dry run installed no package).
struct FileStep {
  const KeptFix* fix = nullptr;
  const BundleFile* file = nullptr;
  std::vector<PathState> accepted;
  std::vector<PathState> dry_run_extra;
  // What later fixes of the export leave at the same path: accepted too, and left alone (a second run
  // must not write this fix's state only for a later fix to write its own again).
  std::vector<PathState> superseded_by;
  size_t id = 0;  // unique across the export, for Ansible's registered variables
};

void AddOnce(std::vector<PathState>& states, const PathState& s) {
  if (std::find(states.begin(), states.end(), s) == states.end()) states.push_back(s);
}

// A path or name for a message or a comment: printable ASCII as is, anything else (newlines, control
// characters, other bytes) as \xNN, so it can neither end a comment line nor fake one.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// Debian policy's package names and versions, and systemd's unit names: anything else in a bundle is
// not what it claims to be, and never reaches a command line.
const std::regex kPackageName("[a-z0-9][a-z0-9+.-]+");
const std::regex kPackageVersion("[A-Za-z0-9.+~:-]+");
const std::regex kUnitName("[A-Za-z0-9:_.@\\\\-]+");

struct PackageSpec {
  std::string name;
  std::string version;  // empty for a removal
};

struct PackagePlan {
  std::vector<PackageSpec> install;  // installed and upgraded, at the version the fix left
  std::vector<std::string> remove;
};

Status CheckedName(const std::string& rule, const std::string& what, const std::string& value, const std::regex& re) {
  if (std::regex_match(value, re)) return Status::OK();
  return Status::FailedPrecondition(fmt::format("rule {}: {} \"{}\" is not a valid name; the export carries none such",
                                                rule, what, Printable(value)));
}

Result<PackagePlan> PlanPackages(const KeptFix& fix) {
  PackagePlan plan;
  auto split = [&](const std::string& entry, bool upgrade) -> Result<PackageSpec> {
    size_t space = entry.find(' ');
    PackageSpec spec{entry.substr(0, space), ""};
    if (space != std::string::npos) {
      std::string rest = entry.substr(space + 1);
      size_t arrow = rest.rfind(" -> ");
      spec.version = upgrade && arrow != std::string::npos ? rest.substr(arrow + 4) : rest;
    }
    TEMPER_RETURN_IF_ERROR(CheckedName(fix.rule_id, "package", spec.name, kPackageName));
    TEMPER_RETURN_IF_ERROR(
        CheckedName(fix.rule_id, fmt::format("package {}'s version", spec.name), spec.version, kPackageVersion));
    return spec;
  };
  for (const std::string& p : fix.bundle.packages.installed) {
    TEMPER_ASSIGN_OR_RETURN(PackageSpec spec, split(p, false));
    plan.install.push_back(spec);
  }
  for (const std::string& p : fix.bundle.packages.upgraded) {
    TEMPER_ASSIGN_OR_RETURN(PackageSpec spec, split(p, true));
    plan.install.push_back(spec);
  }
  for (const std::string& p : fix.bundle.packages.removed) {
    TEMPER_ASSIGN_OR_RETURN(PackageSpec spec, split(p, false));
    plan.remove.push_back(spec.name);
  }
  return plan;
}

Status CheckUnits(const KeptFix& fix) {
  const stig::ServiceChanges& s = fix.bundle.services;
  for (const auto* list : {&s.enabled, &s.disabled, &s.masked, &s.unmasked}) {
    for (const std::string& unit : *list) TEMPER_RETURN_IF_ERROR(CheckedName(fix.rule_id, "unit", unit, kUnitName));
  }
  return Status::OK();
}

bool HasServices(const KeptFix& fix) {
  const stig::ServiceChanges& s = fix.bundle.services;
  return !s.enabled.empty() || !s.disabled.empty() || !s.masked.empty() || !s.unmasked.empty();
}

Result<PathState> StateOf(const KeptFix& fix, const BundleFile& file, const FileImage& image) {
  switch (image.state.type) {
    case FileType::kFile:
      if (image.content.size() != image.state.size) {
        return Status::InvalidArgument(fmt::format("rule {}: {}: {} bytes of content for a file of {}", fix.rule_id,
                                                   Printable(file.path), image.content.size(), image.state.size));
      }
      return PathState{PathState::kFile, Sha256Hex(image.content)};
    case FileType::kDir:
      return PathState{PathState::kDir, ""};
    case FileType::kSymlink:
      return PathState{PathState::kLink, image.state.link};
    case FileType::kOther:
      break;
  }
  return Status::FailedPrecondition(
      fmt::format("rule {}: {} is neither a file, a directory nor a symlink: an export cannot set it", fix.rule_id,
                  Printable(file.path)));
}

// Every file of every fix, in commit order and path order, with the states each accepts.
Result<std::vector<FileStep>> PlanFiles(const FixExport& in) {
  std::vector<FileStep> steps;
  std::map<std::string, size_t> last_step_at;  // path -> index into steps
  for (const KeptFix& fix : in.fixes) {
    for (const BundleFile& file : fix.bundle.files) {
      if (file.path.empty() || file.path[0] != '/') {
        return Status::InvalidArgument(
            fmt::format("rule {}: path \"{}\" is not absolute", fix.rule_id, Printable(file.path)));
      }
      FileStep step{&fix, &file, {}, {}, {}, steps.size()};
      if (file.before) {
        TEMPER_ASSIGN_OR_RETURN(PathState s, StateOf(fix, file, *file.before));
        AddOnce(step.accepted, s);
      } else if (!file.package.empty()) {
        AddOnce(step.accepted, PathState{PathState::kPackageFile, file.package_md5});
        AddOnce(step.dry_run_extra, PathState{PathState::kAbsent, ""});
      } else {
        AddOnce(step.accepted, PathState{PathState::kAbsent, ""});
      }
      if (file.after) {
        TEMPER_ASSIGN_OR_RETURN(PathState s, StateOf(fix, file, *file.after));
        AddOnce(step.accepted, s);
      } else {
        AddOnce(step.accepted, PathState{PathState::kAbsent, ""});
      }
      if (auto earlier = last_step_at.find(file.path); earlier != last_step_at.end()) {
        const FileStep& e = steps[earlier->second];
        for (const PathState& s : e.accepted) AddOnce(step.dry_run_extra, s);
        for (const PathState& s : e.dry_run_extra) AddOnce(step.dry_run_extra, s);
      }
      std::erase_if(step.dry_run_extra, [&](const PathState& s) {
        return std::find(step.accepted.begin(), step.accepted.end(), s) != step.accepted.end();
      });
      last_step_at[file.path] = steps.size();
      steps.push_back(std::move(step));
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = i + 1; j < steps.size(); ++j) {
      const BundleFile& later = *steps[j].file;
      if (later.path != steps[i].file->path) continue;
      PathState left{PathState::kAbsent, ""};
      if (later.after) {
        TEMPER_ASSIGN_OR_RETURN(left, StateOf(*steps[j].fix, later, *later.after));
      }
      AddOnce(steps[i].superseded_by, left);
      AddOnce(steps[i].accepted, left);
    }
  }
  return steps;
}

bool SameContent(const BundleFile& f) {
  return f.before && f.after && f.before->state.type == FileType::kFile && f.after->state.type == FileType::kFile &&
         f.before->content == f.after->content;
}

std::string OctalMode(uint32_t mode) { return fmt::format("{:04o}", mode & 07777); }

std::vector<std::string> HeaderLines(const FixExport& in, std::string_view how) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("temper batch {}{}: the kept fixes, in commit order, as {}", in.batch_id,
                              in.target.empty() ? "" : " on " + Printable(in.target), how));
  for (const KeptFix& fix : in.fixes) lines.push_back("  " + Printable(fix.rule_id));
  if (!in.without_bundle.empty()) {
    lines.push_back("NOT CARRIED: these kept fixes have no recorded change set to replay (found on an SSH host, or");
    lines.push_back("before bundles were recorded, or over a bundle's limits); apply them another way:");
    for (const std::string& rule : in.without_bundle) lines.push_back("  " + Printable(rule));
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Ansible

// A value from a bundle or the content: tagged !unsafe so Ansible's Jinja never evaluates it, and
// double-quoted so YAML reads it as the string it is (escapes for anything not printable ASCII).
void Unsafe(YAML::Emitter& y, std::string_view value) {
  y << YAML::LocalTag("unsafe") << YAML::DoubleQuoted << std::string(value);
}
void Quoted(YAML::Emitter& y, std::string_view value) { y << YAML::DoubleQuoted << std::string(value); }

Status CheckYamlText(const KeptFix& fix, const std::string& path, std::string_view what, std::string_view text) {
  if (IsUtf8(text)) return Status::OK();
  return Status::FailedPrecondition(
      fmt::format("rule {}: {}'s {} is not UTF-8, which a YAML playbook cannot hold; use the sh export for this batch",
                  fix.rule_id, Printable(path), what));
}

std::string Reg(const FileStep& s) { return fmt::format("temper_stat_{}", s.id); }
std::string RegMd5(const FileStep& s) { return fmt::format("temper_md5_{}", s.id); }

// The owner, group and mode of `image`, as numbers (names differ between hosts; ids are what the fix set).
void Ownership(YAML::Emitter& y, const FileImage& image, bool with_mode) {
  y << YAML::Key << "owner";
  Quoted(y, std::to_string(image.state.uid));
  y << YAML::Key << "group";
  Quoted(y, std::to_string(image.state.gid));
  if (with_mode) {
    y << YAML::Key << "mode";
    Quoted(y, OctalMode(image.state.mode));
  }
}

// The accepted states as the assert's vars: {absent, dir, sha256: [...], md5: [...], link: [...]}.
void StateVars(YAML::Emitter& y, const std::vector<PathState>& states) {
  auto values = [&](PathState::Kind kind) {
    y << YAML::Flow << YAML::BeginSeq;
    for (const PathState& s : states) {
      if (s.kind == kind) Unsafe(y, s.value);
    }
    y << YAML::EndSeq;
  };
  auto has = [&](PathState::Kind kind) {
    return std::any_of(states.begin(), states.end(), [&](const PathState& s) { return s.kind == kind; });
  };
  y << YAML::BeginMap;
  y << YAML::Key << "absent" << YAML::Value << has(PathState::kAbsent);
  y << YAML::Key << "dir" << YAML::Value << has(PathState::kDir);
  y << YAML::Key << "sha256" << YAML::Value;
  values(PathState::kFile);
  y << YAML::Key << "md5" << YAML::Value;
  values(PathState::kPackageFile);
  y << YAML::Key << "link" << YAML::Value;
  values(PathState::kLink);
  y << YAML::EndMap;
}

// Jinja: whether the stat registered for `s` is one of the states in the vars dict `d`.
std::string StateTest(const FileStep& s, std::string_view d) {
  std::string r = Reg(s) + ".stat";
  std::string test = fmt::format(
      "(not {r}.exists and {d}.absent) or ({r}.exists and (({r}.isreg and {r}.checksum in {d}.sha256) or "
      "({r}.isdir and {d}.dir) or ({r}.islnk and {r}.lnk_target in {d}.link)",
      fmt::arg("r", r), fmt::arg("d", d));
  if (!s.file->package.empty()) {
    test += fmt::format(" or ({m}.isreg and {m}.checksum in {d}.md5)", fmt::arg("m", RegMd5(s) + ".stat"),
                        fmt::arg("d", d));
  }
  return test + "))";
}

void StatTask(YAML::Emitter& y, const FileStep& s, std::string_view algorithm, const std::string& reg) {
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: read {} ({})", s.fix->rule_id, s.file->path, algorithm));
  y << YAML::Key << "ansible.builtin.stat" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "path" << YAML::Value;
  Unsafe(y, s.file->path);
  y << YAML::Key << "follow" << YAML::Value << false;
  y << YAML::Key << "get_checksum" << YAML::Value << true;
  y << YAML::Key << "checksum_algorithm" << YAML::Value << std::string(algorithm);
  y << YAML::Key << "get_mime" << YAML::Value << false;
  y << YAML::Key << "get_attributes" << YAML::Value << false;
  y << YAML::EndMap;
  y << YAML::Key << "register" << YAML::Value << reg;
  y << YAML::EndMap;
}

// Reads the path and fails the host, naming it, unless it holds one of the accepted states.
void DriftCheckTasks(YAML::Emitter& y, const FileStep& s) {
  StatTask(y, s, "sha256", Reg(s));
  if (!s.file->package.empty()) StatTask(y, s, "md5", RegMd5(s));
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: {} is as the fix found or left it", s.fix->rule_id, s.file->path));
  y << YAML::Key << "vars" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "temper_accepted" << YAML::Value;
  StateVars(y, s.accepted);
  if (!s.dry_run_extra.empty()) {
    y << YAML::Key << "temper_dry_run_accepted" << YAML::Value;
    StateVars(y, s.dry_run_extra);
  }
  y << YAML::EndMap;
  std::string test = StateTest(s, "temper_accepted");
  if (!s.dry_run_extra.empty()) {
    test = fmt::format("({}) or (ansible_check_mode and ({}))", test, StateTest(s, "temper_dry_run_accepted"));
  }
  y << YAML::Key << "ansible.builtin.assert" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "that" << YAML::Value << YAML::BeginSeq;
  Quoted(y, test);
  y << YAML::EndSeq;
  y << YAML::Key << "fail_msg" << YAML::Value;
  Unsafe(y, fmt::format("temper: {} drifted: it holds neither what the fix for {} found there nor what it left; "
                        "this host is refused for it (temper apply merges such files line by line)",
                        s.file->path, s.fix->rule_id));
  y << YAML::Key << "quiet" << YAML::Value << true;
  y << YAML::EndMap;
  y << YAML::EndMap;
}

// In a dry run, a write under a directory the export creates cannot run (the directory is not
// there): it is skipped then, and the directory's own task reports the change.
std::string DryRunGuard(const std::vector<FileStep>& steps, const FileStep& s) {
  const FileStep* nearest = nullptr;
  for (const FileStep& other : steps) {
    if (other.id >= s.id) break;
    const BundleFile& f = *other.file;
    bool creates_dir =
        f.after && f.after->state.type == FileType::kDir && !(f.before && f.before->state.type == FileType::kDir);
    if (creates_dir && s.file->path.size() > f.path.size() && s.file->path.starts_with(f.path) &&
        s.file->path[f.path.size()] == '/') {
      if (!nearest || f.path.size() >= nearest->file->path.size()) nearest = &other;
    }
  }
  if (!nearest) return "";
  return fmt::format("not ansible_check_mode or ({r}.exists and {r}.isdir and not {r}.islnk)",
                     fmt::arg("r", Reg(*nearest) + ".stat"));
}

// A write of a path a later fix of the export changes again is skipped where the path holds what a
// later fix left (see FileStep::superseded_by): the vars the condition reads, and the condition.
void SupersededVars(YAML::Emitter& y, const FileStep& s) {
  if (s.superseded_by.empty()) return;
  y << YAML::Key << "vars" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "temper_superseded" << YAML::Value;
  StateVars(y, s.superseded_by);
  y << YAML::EndMap;
}
std::string SupersededCondition(const FileStep& s) {
  return s.superseded_by.empty() ? "" : "not (" + StateTest(s, "temper_superseded") + ")";
}

void When(YAML::Emitter& y, const std::vector<std::string>& conditions) {
  std::vector<std::string> present;
  for (const std::string& c : conditions) {
    if (!c.empty()) present.push_back(c);
  }
  if (present.empty()) return;
  y << YAML::Key << "when" << YAML::Value << YAML::BeginSeq;
  for (const std::string& c : present) Quoted(y, c);
  y << YAML::EndSeq;
}

std::string_view StatTypeTest(FileType t) {
  switch (t) {
    case FileType::kFile:
      return "isreg";
    case FileType::kDir:
      return "isdir";
    case FileType::kSymlink:
      return "islnk";
    case FileType::kOther:
      break;
  }
  return "isreg";
}

Status WriteTasks(YAML::Emitter& y, const std::vector<FileStep>& steps, const FileStep& s) {
  const BundleFile& f = *s.file;
  const FileImage& after = *f.after;
  std::string guard = DryRunGuard(steps, s);
  // Another type at the path (the `before` the drift check allowed): removed first, since copy
  // would write into a directory and through a symlink.
  if (f.before && f.before->state.type != after.state.type) {
    y << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value;
    Unsafe(y, fmt::format("{}: clear {} for a {}", s.fix->rule_id, f.path, stig::FileTypeName(after.state.type)));
    y << YAML::Key << "ansible.builtin.file" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "path" << YAML::Value;
    Unsafe(y, f.path);
    y << YAML::Key << "state" << YAML::Value << "absent";
    y << YAML::EndMap;
    SupersededVars(y, s);
    When(y, {fmt::format("{r}.exists and not {r}.{t}", fmt::arg("r", Reg(s) + ".stat"),
                         fmt::arg("t", StatTypeTest(after.state.type))),
             guard, SupersededCondition(s)});
    y << YAML::EndMap;
  }
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: set {}", s.fix->rule_id, f.path));
  switch (after.state.type) {
    case FileType::kFile:
      if (SameContent(f)) {
        y << YAML::Key << "ansible.builtin.file" << YAML::Value << YAML::BeginMap;
        y << YAML::Key << "path" << YAML::Value;
        Unsafe(y, f.path);
        y << YAML::Key << "state" << YAML::Value << "file";
        y << YAML::Key << "follow" << YAML::Value << false;
        Ownership(y, after, true);
        y << YAML::EndMap;
        break;
      }
      y << YAML::Key << "ansible.builtin.copy" << YAML::Value << YAML::BeginMap;
      y << YAML::Key << "dest" << YAML::Value;
      Unsafe(y, f.path);
      y << YAML::Key << "content" << YAML::Value;
      if (IsUtf8(after.content)) {
        Unsafe(y, after.content);
      } else if (CanCarryAsBase64(after.content)) {
        Quoted(y, fmt::format("{{{{ '{}' | b64decode }}}}", Base64(after.content)));
      } else {
        return Status::FailedPrecondition(fmt::format(
            "rule {}: {} is binary and its content reads as a Python literal, which Ansible's b64decode would turn "
            "into a value: the playbook cannot set it byte for byte; use the sh export for this batch",
            s.fix->rule_id, Printable(f.path)));
      }
      y << YAML::Key << "force" << YAML::Value << true;
      y << YAML::Key << "follow" << YAML::Value << false;
      Ownership(y, after, true);
      y << YAML::EndMap;
      break;
    case FileType::kDir:
      y << YAML::Key << "ansible.builtin.file" << YAML::Value << YAML::BeginMap;
      y << YAML::Key << "path" << YAML::Value;
      Unsafe(y, f.path);
      y << YAML::Key << "state" << YAML::Value << "directory";
      y << YAML::Key << "follow" << YAML::Value << false;
      Ownership(y, after, true);
      y << YAML::EndMap;
      break;
    case FileType::kSymlink:
      y << YAML::Key << "ansible.builtin.file" << YAML::Value << YAML::BeginMap;
      y << YAML::Key << "path" << YAML::Value;
      Unsafe(y, f.path);
      y << YAML::Key << "src" << YAML::Value;
      Unsafe(y, after.state.link);
      y << YAML::Key << "state" << YAML::Value << "link";
      y << YAML::Key << "force" << YAML::Value << true;
      y << YAML::Key << "follow" << YAML::Value << false;
      Ownership(y, after, false);  // a symlink's mode means nothing on Linux
      y << YAML::EndMap;
      break;
    case FileType::kOther:
      break;  // refused by PlanFiles
  }
  SupersededVars(y, s);
  When(y, {guard, SupersededCondition(s)});
  y << YAML::EndMap;
  return Status::OK();
}

void DeleteTask(YAML::Emitter& y, const FileStep& s) {
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: delete {}", s.fix->rule_id, s.file->path));
  y << YAML::Key << "ansible.builtin.file" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "path" << YAML::Value;
  Unsafe(y, s.file->path);
  y << YAML::Key << "state" << YAML::Value << "absent";
  y << YAML::EndMap;
  SupersededVars(y, s);
  When(y, {SupersededCondition(s)});
  y << YAML::EndMap;
}

void AptTask(YAML::Emitter& y, const KeptFix& fix, const std::vector<std::string>& names, std::string_view state) {
  if (names.empty()) return;
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: packages {}", fix.rule_id, state));
  y << YAML::Key << "ansible.builtin.apt" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << YAML::BeginSeq;
  for (const std::string& n : names) Quoted(y, n);
  y << YAML::EndSeq;
  y << YAML::Key << "state" << YAML::Value << std::string(state);
  y << YAML::EndMap;
  y << YAML::EndMap;
}

void ServiceTask(YAML::Emitter& y, const KeptFix& fix, const std::string& unit, std::string_view key, bool value,
                 std::string_view run_state, bool reload) {
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("{}: {} {}", fix.rule_id, unit, run_state.empty() ? key : run_state));
  y << YAML::Key << "ansible.builtin.systemd" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Quoted(y, unit);
  y << YAML::Key << std::string(key) << YAML::Value << value;
  if (!run_state.empty()) y << YAML::Key << "state" << YAML::Value << std::string(run_state);
  if (reload) y << YAML::Key << "daemon_reload" << YAML::Value << true;
  y << YAML::EndMap;
  When(y, {"ansible_service_mgr == 'systemd'"});
  y << YAML::EndMap;
}

Status FixBlock(YAML::Emitter& y, const std::vector<FileStep>& steps, const KeptFix& fix) {
  TEMPER_ASSIGN_OR_RETURN(PackagePlan packages, PlanPackages(fix));
  TEMPER_RETURN_IF_ERROR(CheckUnits(fix));
  std::vector<const FileStep*> mine;
  for (const FileStep& s : steps) {
    if (s.fix == &fix) mine.push_back(&s);
  }
  for (const FileStep* s : mine) {
    TEMPER_RETURN_IF_ERROR(CheckYamlText(fix, s->file->path, "path", s->file->path));
    for (const auto* image : {&s->file->before, &s->file->after}) {
      if (*image && (*image)->state.type == FileType::kSymlink) {
        TEMPER_RETURN_IF_ERROR(CheckYamlText(fix, s->file->path, "symlink target", (*image)->state.link));
      }
    }
  }
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fix.title.empty() ? fix.rule_id : fmt::format("{}: {}", fix.rule_id, fix.title));
  y << YAML::Key << "block" << YAML::Value << YAML::BeginSeq;
  // Judge every path first: a drifted one fails the host before this fix changes anything.
  for (const FileStep* s : mine) {
    if (s->file->package.empty()) DriftCheckTasks(y, *s);
  }
  std::vector<std::string> install, remove;
  for (const PackageSpec& p : packages.install) install.push_back(p.name + "=" + p.version);
  AptTask(y, fix, install, "present");
  AptTask(y, fix, packages.remove, "absent");
  // A package's files are judged once the package is there.
  for (const FileStep* s : mine) {
    if (!s->file->package.empty()) DriftCheckTasks(y, *s);
  }
  for (const FileStep* s : mine) {
    if (s->file->after) TEMPER_RETURN_IF_ERROR(WriteTasks(y, steps, *s));
  }
  for (auto it = mine.rbegin(); it != mine.rend(); ++it) {  // deepest first
    if (!(*it)->file->after) DeleteTask(y, **it);
  }
  bool reload = true;  // once, before the first unit: the fix's unit files are in place by now
  for (const std::string& u : fix.bundle.services.unmasked) {
    ServiceTask(y, fix, u, "masked", false, "", std::exchange(reload, false));
  }
  for (const std::string& u : fix.bundle.services.enabled) {
    ServiceTask(y, fix, u, "enabled", true, "started", std::exchange(reload, false));
  }
  for (const std::string& u : fix.bundle.services.disabled) {
    ServiceTask(y, fix, u, "enabled", false, "stopped", std::exchange(reload, false));
  }
  for (const std::string& u : fix.bundle.services.masked) {
    ServiceTask(y, fix, u, "masked", true, "stopped", std::exchange(reload, false));
  }
  y << YAML::EndSeq;
  y << YAML::EndMap;
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// sh

std::string Q(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string ShState(const PathState& s) {
  switch (s.kind) {
    case PathState::kAbsent:
      return "absent";
    case PathState::kFile:
      return "file:" + s.value;
    case PathState::kPackageFile:
      return "md5:" + s.value;
    case PathState::kDir:
      return "dir";
    case PathState::kLink:
      return "link:" + s.value;
  }
  return "absent";
}

// The script's fixed part: argument handling and the helpers every fix calls.
constexpr const char* kScriptPrologue = R"SH(set -eu
umask 077
temper_check=0
case "${1-}" in
  --check) temper_check=1 ;;
  '') ;;
  *) printf 'usage: %s [--check]\n' "$0" >&2; exit 64 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo 'temper: run this as root' >&2; exit 1; }
temper_changes=0

# The path's state, as the fix names it: absent, dir, other, file:<sha256>, link:<target>. A link's
# target is read with a sentinel, since $(...) drops trailing newlines.
temper_read_state() {
  if [ -L "$1" ]; then
    temper_state=$(readlink -- "$1"; echo x)
    temper_state="link:${temper_state%?x}"
  elif [ -d "$1" ]; then
    temper_state=dir
  elif [ -f "$1" ]; then
    temper_state=$(sha256sum < "$1")
    temper_state="file:${temper_state%% *}"
  elif [ -e "$1" ]; then
    temper_state=other
  else
    temper_state=absent
  fi
}

# temper_accepts PATH STATE...: whether PATH holds one of the states (md5:<hash> is a package's
# file as dpkg installed it).
temper_accepts() {
  temper_path=$1
  shift
  temper_read_state "$temper_path"
  for temper_want in "$@"; do
    [ "$temper_state" = "$temper_want" ] && return 0
    case $temper_want in
      md5:*)
        if [ -f "$temper_path" ] && [ ! -L "$temper_path" ]; then
          temper_md5=$(md5sum < "$temper_path")
          [ "md5:${temper_md5%% *}" = "$temper_want" ] && return 0
        fi
        ;;
    esac
  done
  return 1
}

temper_drifted() {
  printf 'temper: %s drifted: it holds neither what the fix for %s found there nor what it left; refusing this host\n' "$1" "$2" >&2
  exit 3
}

# temper_would WHAT: in a dry run, reports WHAT and returns 0 (skip the change); otherwise returns 1.
temper_would() {
  temper_changes=$((temper_changes + 1))
  if [ "$temper_check" -eq 1 ]; then
    printf 'would %s\n' "$1"
    return 0
  fi
  printf '%s\n' "$1"
  return 1
}

# temper_owner_mode PATH UID:GID MODE (MODE empty for a symlink): sets them where they differ.
temper_owner_mode() {
  if [ -n "$3" ]; then
    [ "$(stat -c '%u:%g:%a' -- "$1")" = "$2:$3" ] && return 0
    temper_would "chown $2 and chmod $3 $1" && return 0
    chown -h -- "$2" "$1"
    chmod -- "$3" "$1"
  else
    [ "$(stat -c '%u:%g' -- "$1")" = "$2" ] && return 0
    temper_would "chown $2 $1" && return 0
    chown -h -- "$2" "$1"
  fi
}

# temper_clear PATH: removes what is at PATH (a type the fix replaces).
temper_clear() {
  if [ -L "$1" ] || [ -e "$1" ]; then
    temper_would "remove $1 to set a new type there" && return 0
    rm -rf -- "$1"
  fi
}

temper_has_package() {
  [ "$(dpkg-query -W -f='${Status} ${Version}' -- "$1" 2>/dev/null || true)" = "install ok installed $2" ]
}
temper_package_installed() {
  dpkg-query -W -f='${Status}' -- "$1" 2>/dev/null | grep -q '^install ok installed$'
}

temper_systemd() { [ -d /run/systemd/system ]; }
)SH";

std::string ShHeredocDelimiter() { return "TEMPER_BASE64_END"; }  // never base64 text: has '_'

void ShCheck(std::string& out, const FileStep& s) {
  out += "p=" + Q(s.file->path) + "\n";
  std::string accepted, extra;
  for (const PathState& st : s.accepted) accepted += " " + Q(ShState(st));
  for (const PathState& st : s.dry_run_extra) extra += " " + Q(ShState(st));
  std::string rule = Q(s.fix->rule_id);
  if (extra.empty()) {
    out += fmt::format("temper_accepts \"$p\"{} || temper_drifted \"$p\" {}\n", accepted, rule);
  } else {
    out += fmt::format(
        "temper_accepts \"$p\"{} || {{ [ \"$temper_check\" -eq 1 ] && temper_accepts \"$p\"{}; }} || temper_drifted "
        "\"$p\" {}\n",
        accepted, extra, rule);
  }
}

// The sh form of SupersededCondition: `if` text that skips the step where a later fix's state is there.
std::string ShSkipIfSuperseded(const FileStep& s) {
  if (s.superseded_by.empty()) return "";
  std::string states;
  for (const PathState& st : s.superseded_by) states += " " + Q(ShState(st));
  return "if temper_accepts \"$p\"" + states + "; then :; else\n";
}

void ShWrite(std::string& out, const FileStep& s) {
  const BundleFile& f = *s.file;
  const FileImage& after = *f.after;
  std::string owner = fmt::format("{}:{}", after.state.uid, after.state.gid);
  std::string mode = fmt::format("{:o}", after.state.mode & 07777);
  out += "p=" + Q(f.path) + "\n";
  std::string skip = ShSkipIfSuperseded(s);
  out += skip;
  switch (after.state.type) {
    case FileType::kFile: {
      std::string want = Q("file:" + Sha256Hex(after.content));
      out += fmt::format("temper_read_state \"$p\"\nif [ \"$temper_state\" = {} ]; then\n", want);
      out += fmt::format("  temper_owner_mode \"$p\" {} {}\nelse\n", owner, mode);
      out +=
          "  if [ \"$temper_state\" != absent ] && { [ -L \"$p\" ] || [ ! -f \"$p\" ]; }; then temper_clear \"$p\"; "
          "fi\n";
      out += "  if ! temper_would \"write $p\"; then\n";
      out += "    t=\"$p.temper-new.$$\"\n";
      out += fmt::format("    base64 -d > \"$t\" <<'{}'\n", ShHeredocDelimiter());
      std::string b64 = Base64(after.content);
      for (size_t i = 0; i < b64.size(); i += 76) out += b64.substr(i, 76) + "\n";
      out += ShHeredocDelimiter() + "\n";
      out += fmt::format("    chown -- {} \"$t\"\n    chmod -- {} \"$t\"\n    mv -f -- \"$t\" \"$p\"\n", owner, mode);
      out += "  fi\nfi\n";
      break;
    }
    case FileType::kDir:
      out += "if [ -L \"$p\" ] || { [ -e \"$p\" ] && [ ! -d \"$p\" ]; }; then temper_clear \"$p\"; fi\n";
      out += "if [ ! -d \"$p\" ] || [ -L \"$p\" ]; then temper_would \"make directory $p\" || mkdir -- \"$p\"; fi\n";
      out += fmt::format("if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then temper_owner_mode \"$p\" {} {}; fi\n", owner, mode);
      break;
    case FileType::kSymlink: {
      std::string want = Q("link:" + after.state.link);
      out += "l=" + Q(after.state.link) + "\n";
      out += fmt::format("temper_read_state \"$p\"\nif [ \"$temper_state\" != {} ]; then\n", want);
      out += "  if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then temper_clear \"$p\"; fi\n";
      out += "  temper_would \"link $p to $l\" || ln -sfn -- \"$l\" \"$p\"\nfi\n";
      out += fmt::format("if [ -L \"$p\" ]; then temper_owner_mode \"$p\" {} ''; fi\n", owner);
      break;
    }
    case FileType::kOther:
      break;  // refused by PlanFiles
  }
  if (!skip.empty()) out += "fi\n";
}

void ShDelete(std::string& out, const FileStep& s) {
  out += "p=" + Q(s.file->path) + "\n";
  std::string skip = ShSkipIfSuperseded(s);
  out += skip;
  out += "if [ -L \"$p\" ] || [ -e \"$p\" ]; then temper_would \"delete $p\" || rm -rf -- \"$p\"; fi\n";
  if (!skip.empty()) out += "fi\n";
}

Status ShFix(std::string& out, const std::vector<FileStep>& steps, const KeptFix& fix) {
  TEMPER_ASSIGN_OR_RETURN(PackagePlan packages, PlanPackages(fix));
  TEMPER_RETURN_IF_ERROR(CheckUnits(fix));
  std::vector<const FileStep*> mine;
  for (const FileStep& s : steps) {
    if (s.fix == &fix) mine.push_back(&s);
  }
  out += fmt::format("\n# ---- {}{}\n", Printable(fix.rule_id), fix.title.empty() ? "" : ": " + Printable(fix.title));
  out += "temper_rule=" + Q(fix.rule_id) + "\nprintf '%s\\n' \"temper: $temper_rule\"\n";
  for (const FileStep* s : mine) {
    if (s->file->package.empty()) ShCheck(out, *s);
  }
  for (const PackageSpec& p : packages.install) {
    out += fmt::format(
        "temper_has_package {n} {v} || temper_would {what} || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        "--no-install-recommends -- {spec}\n",
        fmt::arg("n", Q(p.name)), fmt::arg("v", Q(p.version)),
        fmt::arg("what", Q("install " + p.name + " " + p.version)), fmt::arg("spec", Q(p.name + "=" + p.version)));
  }
  for (const std::string& name : packages.remove) {
    out += fmt::format(
        "if temper_package_installed {n}; then temper_would {what} || DEBIAN_FRONTEND=noninteractive apt-get remove -y "
        "-q -- {n}; fi\n",
        fmt::arg("n", Q(name)), fmt::arg("what", Q("remove " + name)));
  }
  for (const FileStep* s : mine) {
    if (!s->file->package.empty()) ShCheck(out, *s);
  }
  for (const FileStep* s : mine) {
    if (s->file->after) ShWrite(out, *s);
  }
  for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
    if (!(*it)->file->after) ShDelete(out, **it);
  }
  if (HasServices(fix)) {
    const stig::ServiceChanges& sv = fix.bundle.services;
    out += "if temper_systemd; then\n";
    out += "  [ \"$temper_check\" -eq 1 ] || systemctl daemon-reload\n";
    for (const std::string& u : sv.enabled) {
      out += fmt::format("  systemctl is-active --quiet -- {u} || temper_would {what} || systemctl start -- {u}\n",
                         fmt::arg("u", Q(u)), fmt::arg("what", Q("start " + u)));
    }
    for (const auto* list : {&sv.disabled, &sv.masked}) {
      for (const std::string& u : *list) {
        out += fmt::format(
            "  if systemctl is-active --quiet -- {u}; then temper_would {what} || systemctl stop -- {u}; fi\n",
            fmt::arg("u", Q(u)), fmt::arg("what", Q("stop " + u)));
      }
    }
    out += "fi\n";
  }
  return Status::OK();
}

}  // namespace

bool CanCarryAsBase64(std::string_view bytes) {
  return !(bytes.starts_with('{') || bytes.starts_with('[') || bytes == "True" || bytes == "False");
}

Result<std::string> WriteFixPlaybook(const FixExport& in) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<FileStep> steps, PlanFiles(in));
  bool services = std::any_of(in.fixes.begin(), in.fixes.end(), HasServices);
  YAML::Emitter y;
  y.SetOutputCharset(YAML::EscapeNonAscii);
  for (const std::string& line : HeaderLines(in, "an Ansible playbook (ansible-playbook --check: a dry run)")) {
    y << YAML::Comment(line) << YAML::Newline;
  }
  y << YAML::BeginSeq << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value;
  Unsafe(y, fmt::format("temper batch {}: kept fixes", in.batch_id));
  y << YAML::Key << "hosts" << YAML::Value << "all";
  y << YAML::Key << "become" << YAML::Value << true;
  y << YAML::Key << "gather_facts" << YAML::Value << false;
  y << YAML::Key << "tasks" << YAML::Value << YAML::BeginSeq;
  if (services) {
    // Services are started only where systemd runs them: the one fact needed.
    y << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value << "temper: which service manager runs";
    y << YAML::Key << "ansible.builtin.setup" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "gather_subset" << YAML::Value << YAML::Flow << YAML::BeginSeq << "!all"
      << "!min"
      << "service_mgr" << YAML::EndSeq;
    y << YAML::EndMap << YAML::EndMap;
  }
  for (const KeptFix& fix : in.fixes) TEMPER_RETURN_IF_ERROR(FixBlock(y, steps, fix));
  y << YAML::EndSeq;
  y << YAML::EndMap << YAML::EndSeq;
  if (!y.good()) return Status::Internal(fmt::format("writing the playbook's YAML: {}", y.GetLastError()));
  return std::string("---\n") + y.c_str() + "\n";
}

Result<std::string> WriteFixScript(const FixExport& in) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<FileStep> steps, PlanFiles(in));
  std::string out = "#!/bin/sh\n";
  for (const std::string& line : HeaderLines(in,
                                             "a POSIX sh script (--check: a dry run, exit 2 if anything would "
                                             "change; exit 3: a drifted file)")) {
    out += "# " + line + "\n";
  }
  out += kScriptPrologue;
  for (const KeptFix& fix : in.fixes) TEMPER_RETURN_IF_ERROR(ShFix(out, steps, fix));
  out += R"SH(
if [ "$temper_check" -eq 1 ]; then
  if [ "$temper_changes" -gt 0 ]; then
    printf 'temper: %s change(s) would be made\n' "$temper_changes"
    exit 2
  fi
  echo 'temper: nothing to change'
  exit 0
fi
printf 'temper: %s change(s) made\n' "$temper_changes"
)SH";
  return out;
}

}  // namespace temper::evidence
