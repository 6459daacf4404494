#include "orchestrator/loop/twins.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace temper {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxTwinJson = 1 << 20;
constexpr std::size_t kMaxJsonString = 4096;
constexpr std::size_t kMaxExcluded = 4096;

// A value of os-release ("NAME=value", the value maybe quoted), empty when absent.
std::string OsReleaseValue(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != '=') continue;
    std::string value = line.substr(key.size() + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    return value.substr(0, 200);
  }
  return "";
}

std::string OsName(const std::string& os_release) {
  std::string pretty = OsReleaseValue(os_release, "PRETTY_NAME");
  if (!pretty.empty()) return pretty;
  std::string id = OsReleaseValue(os_release, "ID");
  std::string version = OsReleaseValue(os_release, "VERSION_ID");
  return version.empty() ? id : id + " " + version;
}

Status WriteFileReplacing(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << text;
    out.close();
    if (!out) return Status::IOError("writing " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("replacing {}: {}", path, ec.message()));
  return Status::OK();
}

}  // namespace

TargetConfig TwinRecord::Target() const {
  TargetConfig target;
  target.name = name;
  target.type = "rootfs";
  target.path = dir;
  return target;
}

std::string TwinToJson(const TwinRecord& twin) {
  nlohmann::json j = {{"version", 1},
                      {"name", twin.name},
                      {"host", twin.host},
                      {"login", twin.login},
                      {"copied_at", twin.copied_at},
                      {"bytes", twin.bytes},
                      {"files", twin.files},
                      {"skipped_special_files", twin.skipped_special_files},
                      {"excluded", twin.excluded},
                      {"seconds", twin.seconds},
                      {"packages", twin.packages},
                      {"os_release", twin.os_release}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<TwinRecord> TwinFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not JSON");
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  TwinRecord twin;
  auto string_field = [&](const char* key, std::string& out, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      return required ? Status::InvalidArgument(fmt::format("'{}' is missing", key)) : Status::OK();
    }
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxJsonString) {
      return Status::InvalidArgument(fmt::format("'{}' is not a string of at most {} bytes", key, kMaxJsonString));
    }
    out = it->get<std::string>();
    return Status::OK();
  };
  auto number_field = [&](const char* key, auto& out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    using T = std::remove_reference_t<decltype(out)>;
    if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number()) return Status::InvalidArgument(fmt::format("'{}' is not a number", key));
    } else {
      if (!it->is_number_integer() || it->template get<int64_t>() < 0) {
        return Status::InvalidArgument(fmt::format("'{}' is not a count", key));
      }
    }
    out = it->template get<T>();
    return Status::OK();
  };
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return Status::InvalidArgument("'version' is not 1");
  }
  TEMPER_RETURN_IF_ERROR(string_field("name", twin.name, true));
  TEMPER_RETURN_IF_ERROR(string_field("host", twin.host, true));
  TEMPER_RETURN_IF_ERROR(string_field("login", twin.login, false));
  TEMPER_RETURN_IF_ERROR(string_field("os_release", twin.os_release, false));
  TEMPER_RETURN_IF_ERROR(number_field("copied_at", twin.copied_at));
  TEMPER_RETURN_IF_ERROR(number_field("bytes", twin.bytes));
  TEMPER_RETURN_IF_ERROR(number_field("files", twin.files));
  TEMPER_RETURN_IF_ERROR(number_field("skipped_special_files", twin.skipped_special_files));
  TEMPER_RETURN_IF_ERROR(number_field("seconds", twin.seconds));
  TEMPER_RETURN_IF_ERROR(number_field("packages", twin.packages));
  if (auto it = j.find("excluded"); it != j.end()) {
    if (!it->is_array() || it->size() > kMaxExcluded) {
      return Status::InvalidArgument(fmt::format("'excluded' is not a list of at most {} paths", kMaxExcluded));
    }
    for (const nlohmann::json& path : *it) {
      if (!path.is_string() || path.get_ref<const std::string&>().size() > kMaxJsonString) {
        return Status::InvalidArgument("'excluded' holds something other than a path");
      }
      twin.excluded.push_back(path.get<std::string>());
    }
  }
  TEMPER_RETURN_IF_ERROR(Twins::ValidateName(twin.name).WithContext("'name'"));
  return twin;
}

Status Twins::ValidateName(const std::string& name) {
  bool valid = !name.empty() && name.size() <= kMaxNameLength && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) {
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  }
  if (!valid) {
    return Status::InvalidArgument(
        fmt::format("twin name '{}' must be 1-{} of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
                    name.substr(0, 80), kMaxNameLength));
  }
  return Status::OK();
}

Result<std::unique_ptr<Twins>> Twins::Open(const DaemonConfig& config, const SshHosts* hosts, const Logger& log) {
  const std::string dir = (fs::path(config.state_dir) / "twins").string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("creating {}: {}", dir, ec.message()));
  // Each twin's root holds the host's setuid programs and secrets: root's alone.
  if (::chmod(dir.c_str(), 0700) != 0) return Status::FromErrno(errno, "chmod 0700 " + dir);
  std::unique_ptr<Twins> twins(new Twins(config, hosts, log, dir));
  TEMPER_RETURN_IF_ERROR(twins->Load());
  return twins;
}

Status Twins::Load() {
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) return Status::IOError(fmt::format("reading {}: {}", dir_, ec.message()));
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    const std::string json_path = (entry.path() / "twin.json").string();
    if (!entry.is_directory(ec) || entry.is_symlink(ec) || !ValidateName(name).ok()) {
      log_.Warning("twins: {} is not a twin's directory; skipped", entry.path().string());
      continue;
    }
    if (!fs::exists(fs::symlink_status(json_path, ec))) {
      log_.Warning("twins: {} has no twin.json (a copy that never finished); removing it", entry.path().string());
      fs::remove_all(entry.path(), ec);
      if (ec) log_.Warning("twins: removing {}: {}", entry.path().string(), ec.message());
      continue;
    }
    if (!fs::is_regular_file(fs::symlink_status(json_path, ec)) || fs::file_size(json_path, ec) > kMaxTwinJson) {
      log_.Warning("twins: {} is not a regular file of at most 1 MiB; twin {} skipped", json_path, name);
      continue;
    }
    std::ifstream in(json_path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Result<TwinRecord> twin = TwinFromJson(text);
    if (!twin.ok()) {
      log_.Warning("twins: {}: {}; twin {} skipped (its files are kept)", json_path, twin.status().message(), name);
      continue;
    }
    if (twin->name != name) {
      log_.Warning("twins: {} names twin '{}', not its directory's '{}'; skipped", json_path, twin->name, name);
      continue;
    }
    if (config_.FindTarget(name) != nullptr) {
      log_.Warning("twins: twin {} has the name of a target in {}; skipped until one is renamed", name, config_.source);
      continue;
    }
    twin->dir = entry.path().string();
    twins_.push_back(std::move(*twin));
  }
  std::sort(twins_.begin(), twins_.end(), [](const TwinRecord& a, const TwinRecord& b) { return a.name < b.name; });
  if (!twins_.empty()) log_.Info("twins: {} in {}", twins_.size(), dir_);
  return Status::OK();
}

Status Twins::NameTakenLocked(const std::string& name) const {
  if (config_.FindTarget(name) != nullptr) {
    return Status::AlreadyExists(
        fmt::format("'{}' is a target in {}; give the twin another name", name, config_.source));
  }
  if (hosts_ != nullptr && hosts_->Find(name).has_value()) {
    return Status::AlreadyExists(fmt::format("'{}' is an SSH host's target; give the twin another name", name));
  }
  if (creating_.count(name) != 0) return Status::AlreadyExists(fmt::format("twin {} is being created now", name));
  if (std::any_of(twins_.begin(), twins_.end(), [&](const TwinRecord& t) { return t.name == name; })) {
    return Status::AlreadyExists(fmt::format("twin {} exists (temper twin remove {} first)", name, name));
  }
  return Status::OK();
}

Result<TwinRecord> Twins::Create(const std::string& name,
                                 const std::function<Result<stig::HostCopyRecord>(const std::string&)>& copy) {
  TEMPER_RETURN_IF_ERROR(ValidateName(name));
  const fs::path dir = fs::path(dir_) / name;
  {
    std::lock_guard lock(mu_);
    TEMPER_RETURN_IF_ERROR(NameTakenLocked(name));
    creating_.insert(name);
  }
  auto release = [&] {
    std::lock_guard lock(mu_);
    creating_.erase(name);
  };
  auto fail = [&](Status s) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    release();
    return s;
  };
  std::error_code ec;
  fs::remove_all(dir, ec);  // what a crashed create left (Load removes it too)
  if (::mkdir(dir.c_str(), 0700) != 0 || ::mkdir((dir / "state").c_str(), 0700) != 0) {
    return fail(Status::FromErrno(errno, "creating " + dir.string()));
  }
  Result<stig::HostCopyRecord> copied = copy((dir / "root").string());
  if (!copied.ok()) return fail(copied.status());

  TwinRecord twin;
  twin.name = name;
  twin.dir = dir.string();
  twin.host = copied->host;
  twin.login = copied->login;
  twin.copied_at = std::chrono::duration_cast<std::chrono::milliseconds>(copied->copied_at.time_since_epoch()).count();
  twin.bytes = copied->bytes;
  twin.files = copied->files;
  twin.skipped_special_files = copied->skipped_special_files;
  twin.excluded = copied->excluded;
  twin.seconds = copied->seconds;
  twin.packages = copied->packages.size();
  twin.os_release = OsName(copied->os_release);
  std::string packages;
  for (const auto& [package, version] : copied->packages) packages += package + " " + version + "\n";
  Status written = WriteFileReplacing((dir / "packages.txt").string(), packages);
  // twin.json last: its presence is what makes the directory a twin.
  if (written.ok()) written = WriteFileReplacing((dir / "twin.json").string(), TwinToJson(twin));
  if (!written.ok()) return fail(written.WithContext("twin " + name));
  {
    std::lock_guard lock(mu_);
    creating_.erase(name);
    twins_.push_back(twin);
    std::sort(twins_.begin(), twins_.end(), [](const TwinRecord& a, const TwinRecord& b) { return a.name < b.name; });
  }
  log_.Info("twin {}: copied from {} ({} bytes, {} files, {} packages)", name, twin.host, twin.bytes, twin.files,
            twin.packages);
  return twin;
}

std::vector<TwinRecord> Twins::List() const {
  std::lock_guard lock(mu_);
  return twins_;
}

std::optional<TwinRecord> Twins::Find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const TwinRecord& t : twins_) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

std::vector<TargetConfig> Twins::Targets() const {
  std::lock_guard lock(mu_);
  std::vector<TargetConfig> targets;
  for (const TwinRecord& t : twins_) targets.push_back(t.Target());
  return targets;
}

Result<TwinRecord> Twins::Remove(const std::string& name) {
  TwinRecord removed;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(twins_.begin(), twins_.end(), [&](const TwinRecord& t) { return t.name == name; });
    if (it == twins_.end()) return Status::NotFound(fmt::format("no twin named '{}'", name.substr(0, 80)));
    removed = *it;
    // remove_all would reach into a mounted overlay; the target is closed first (LoopRunner::CloseTarget).
    std::ifstream mounts_file("/proc/self/mounts");
    std::string mounts((std::istreambuf_iterator<char>(mounts_file)), std::istreambuf_iterator<char>());
    for (const std::string& point : stig::MountPointsBelowRoot(mounts)) {
      if (point.starts_with(removed.dir + "/")) {
        return Status::FailedPrecondition(
            fmt::format("twin {} is still mounted at {}; its target is in use", name, point));
      }
    }
    twins_.erase(it);
    // Taken until its files are gone, so no create of the same name races the removal.
    creating_.insert(name);
  }
  std::error_code ec;
  // twin.json first: should the removal stop half way, the next start takes the rest as unfinished.
  fs::remove(fs::path(removed.dir) / "twin.json", ec);
  fs::remove_all(removed.dir, ec);
  {
    std::lock_guard lock(mu_);
    creating_.erase(name);
  }
  if (ec) return Status::IOError(fmt::format("removing twin {} at {}: {}", name, removed.dir, ec.message()));
  log_.Info("twin {}: removed", name);
  return removed;
}

}  // namespace temper
