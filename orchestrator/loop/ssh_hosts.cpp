#include "orchestrator/loop/ssh_hosts.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/ssh/ssh_connection.h"

namespace temper {

namespace {
namespace fs = std::filesystem;

constexpr std::string_view kHostStateNames[] = {"idle", "running", "needs_human"};
}  // namespace

std::string_view HostStateName(HostState state) { return kHostStateNames[static_cast<int>(state)]; }

std::optional<HostState> ParseHostState(std::string_view name) {
  for (size_t i = 0; i < std::size(kHostStateNames); ++i) {
    if (kHostStateNames[i] == name) return static_cast<HostState>(i);
  }
  return std::nullopt;
}

std::string SshHosts::NameFor(const std::string& spec) {
  Result<stig::SshEndpoint> e = stig::SshEndpoint::Parse(spec);
  if (!e.ok()) return spec;
  std::string host = e->host.find(':') != std::string::npos ? "[" + e->host + "]" : e->host;
  return e->port == 22 ? fmt::format("{}@{}", e->user, host) : fmt::format("{}@{}:{}", e->user, host, e->port);
}

Result<std::vector<SshHostState>> SshHosts::ReadStored() {
  std::vector<SshHostState> stored;
  std::ifstream in(path_);
  if (!in) return stored;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    // Copied, not moved: the file stays where it was until the registry is next written.
    const std::string aside = fmt::format("{}.unreadable-{}", path_, NowMs());
    std::error_code ec;
    fs::copy_file(path_, aside, ec);
    if (ec) {
      return Status::IOError(
          fmt::format("{} is not a JSON array of hosts, and copying it to {} failed: {}", path_, aside, ec.message()));
    }
    log_.Warning("{} is not a JSON array of hosts; copied to {}, and temperd starts with the configured hosts only",
                 path_, aside);
    return stored;
  }
  // Enough to find a bad entry in the file, not so much that a file of junk floods the log.
  constexpr size_t kLoggedEntries = 20;
  size_t skipped = 0;
  auto skip = [&](const nlohmann::json& h, const std::string& why) {
    if (skipped++ < kLoggedEntries) {
      log_.Warning("{}: skipped entry {} ({}); kept in the file as it is", path_,
                   h.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200), why);
    }
    kept_invalid_.push_back(h);
  };
  std::set<std::string> names;
  for (const nlohmann::json& h : j) {
    if (!h.is_object() || !h.contains("name") || !h.contains("host") || !h["name"].is_string() ||
        !h["host"].is_string()) {
      skip(h, "a host entry needs the strings name and host");
      continue;
    }
    SshHostState s;
    s.target.name = h["name"].get<std::string>();
    s.target.type = "ssh";
    s.target.host = h["host"].get<std::string>();
    if (Result<stig::SshEndpoint> e = stig::SshEndpoint::Parse(s.target.host); !e.ok()) {
      skip(h, "host: " + e.status().message());
      continue;
    }
    if (!names.insert(s.target.name).second) {
      skip(h, fmt::format("a second entry named {}", s.target.name));
      continue;
    }
    const nlohmann::json state = h.value("state", nlohmann::json(HostStateName(HostState::kIdle)));
    std::optional<HostState> parsed = state.is_string() ? ParseHostState(state.get<std::string>()) : std::nullopt;
    if (!parsed) {
      skip(h, fmt::format("host {} has the state {}, which is none of idle, running, needs_human", s.target.name,
                          state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
      continue;
    }
    const nlohmann::json configured = h.value("configured", nlohmann::json(false));
    const nlohmann::json detail = h.value("detail", nlohmann::json(""));
    const nlohmann::json last_batch = h.value("last_batch", nlohmann::json(0));
    const nlohmann::json updated_at = h.value("updated_at", nlohmann::json(0));
    if (!configured.is_boolean() || !detail.is_string() || !last_batch.is_number_integer() ||
        !updated_at.is_number_integer()) {
      skip(h, "configured is a boolean, detail a string, last_batch and updated_at integers");
      continue;
    }
    s.configured = configured.get<bool>();
    s.state = *parsed;
    s.detail = detail.get<std::string>();
    s.last_batch = last_batch.get<int64_t>();
    s.updated_at = updated_at.get<TimeMs>();
    stored.push_back(std::move(s));
  }
  if (skipped > kLoggedEntries) {
    log_.Warning("{}: {} more entries skipped, kept in the file", path_, skipped - kLoggedEntries);
  }
  return stored;
}

Result<std::unique_ptr<SshHosts>> SshHosts::Open(const DaemonConfig& config, const Logger& log) {
  std::unique_ptr<SshHosts> hosts(new SshHosts(config, log));
  hosts->path_ = (fs::path(config.state_dir) / "ssh" / "hosts.json").string();
  TEMPER_ASSIGN_OR_RETURN(std::vector<SshHostState> stored, hosts->ReadStored());
  // temperd.yaml's ssh targets first, keeping their stored state; then hosts named on submit that
  // no configured target shadows. A configured entry that left the config is forgotten.
  for (const TargetConfig& t : config.targets) {
    if (t.type != "ssh") continue;
    SshHostState s;
    s.target = t;
    s.configured = true;
    for (const SshHostState& old : stored) {
      if (old.target.name == t.name && old.target.host == t.host) {
        s.state = old.state == HostState::kRunning ? HostState::kIdle : old.state;
        s.detail = old.detail;
        s.last_batch = old.last_batch;
        s.updated_at = old.updated_at;
      }
    }
    hosts->hosts_.push_back(std::move(s));
  }
  size_t registered = 0;
  for (SshHostState& old : stored) {
    if (old.configured || config.FindTarget(old.target.name) != nullptr) continue;
    // The daemon stopped under it; the loop resumes it.
    if (old.state == HostState::kRunning) old.state = HostState::kIdle;
    hosts->hosts_.push_back(std::move(old));
    ++registered;
  }
  if (registered > config.ssh.max_hosts) {
    // Kept: they were registered (by an older temperd, or before the cap was lowered), and
    // forgetting them would strand their batches. None is added until some are gone.
    log.Warning("{}: {} SSH hosts registered, more than ssh.max_hosts ({}); no host is registered until fewer are",
                hosts->path_, registered, config.ssh.max_hosts);
  }
  return hosts;
}

Status SshHosts::NotRegistered(const std::string& spec) {
  return Status::PermissionDenied(
      fmt::format("host: {} is not a registered SSH host; an admin must register it first (an admin's `temper "
                  "submit --host {}`, or a target of type ssh in temperd.yaml)",
                  spec, spec));
}

bool SshHosts::Knows(const std::string& spec) const {
  Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(spec);
  if (!endpoint.ok()) return false;
  std::lock_guard lock(mu_);
  return FindLocked(NameFor(spec), *endpoint) != nullptr;
}

Result<TargetConfig> SshHosts::FromSubmit(const std::string& spec, HostRegistration registration, bool* created) {
  Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(spec);
  if (!endpoint.ok()) return endpoint.status().WithContext("host");
  const std::string name = NameFor(spec);
  std::lock_guard lock(mu_);
  if (created) *created = false;
  if (const SshHostState* h = FindLocked(name, *endpoint)) return h->target;
  if (const TargetConfig* t = config_.FindTarget(name)) {
    return Status::AlreadyExists(
        fmt::format("host: target '{}' is configured in {} as a {} target", name, config_.source, t->type));
  }
  if (registration != HostRegistration::kMayRegister) return NotRegistered(spec);
  const size_t registered =
      std::count_if(hosts_.begin(), hosts_.end(), [](const SshHostState& h) { return !h.configured; });
  if (registered >= config_.ssh.max_hosts) {
    return Status::ResourceExhausted(
        fmt::format("host: {} SSH hosts are registered, the limit (ssh.max_hosts in {}); {} is not added", registered,
                    config_.source, spec));
  }
  SshHostState s;
  s.target.name = name;
  s.target.type = "ssh";
  s.target.host = endpoint->ToString();
  s.updated_at = NowMs();
  hosts_.push_back(s);
  if (Status saved = SaveLocked(); !saved.ok()) {
    hosts_.pop_back();  // not remembered, so not registered: the submit fails and may be retried
    return saved;
  }
  if (created) *created = true;
  return s.target;
}

// The same machine and login is the same target, however it was named: one journal, one loop.
const SshHostState* SshHosts::FindLocked(const std::string& name, const stig::SshEndpoint& endpoint) const {
  for (const SshHostState& h : hosts_) {
    Result<stig::SshEndpoint> known = stig::SshEndpoint::Parse(h.target.host);
    if (h.target.name == name || (known.ok() && known->ToString() == endpoint.ToString())) return &h;
  }
  return nullptr;
}

std::string SshHosts::TargetNameFor(const std::string& spec) const {
  Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(spec);
  const std::string name = NameFor(spec);
  if (!endpoint.ok()) return name;
  std::lock_guard lock(mu_);
  const SshHostState* h = FindLocked(name, *endpoint);
  return h ? h->target.name : name;
}

std::vector<SshHostState> SshHosts::List() const {
  std::lock_guard lock(mu_);
  return hosts_;
}

std::optional<SshHostState> SshHosts::Find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const SshHostState& h : hosts_) {
    if (h.target.name == name) return h;
  }
  return std::nullopt;
}

std::vector<TargetConfig> SshHosts::Submitted() const {
  std::lock_guard lock(mu_);
  std::vector<TargetConfig> out;
  for (const SshHostState& h : hosts_) {
    if (!h.configured) out.push_back(h.target);
  }
  return out;
}

Status SshHosts::SetState(const std::string& name, HostState state, const std::string& detail, int64_t batch) {
  std::lock_guard lock(mu_);
  for (SshHostState& h : hosts_) {
    if (h.target.name != name) continue;
    h.state = state;
    h.detail = detail;
    if (batch != 0) h.last_batch = batch;
    h.updated_at = NowMs();
    return SaveLocked();
  }
  return Status::NotFound(fmt::format("no SSH host named '{}'", name));
}

Result<SshHostState> SshHosts::Clear(const std::string& name) {
  std::lock_guard lock(mu_);
  for (SshHostState& h : hosts_) {
    if (h.target.name != name) continue;
    if (h.state == HostState::kRunning) {
      return Status::FailedPrecondition(fmt::format("host {} is running batch {}", name, h.last_batch));
    }
    h.state = HostState::kIdle;
    h.detail = "cleared by a person";
    h.updated_at = NowMs();
    TEMPER_RETURN_IF_ERROR(SaveLocked());
    return h;
  }
  return Status::NotFound(fmt::format("no SSH host named '{}'", name));
}

Status SshHosts::SaveLocked() const {
  nlohmann::json j = nlohmann::json::array();
  for (const SshHostState& h : hosts_) {
    j.push_back({{"name", h.target.name},
                 {"host", h.target.host},
                 {"configured", h.configured},
                 {"state", HostStateName(h.state)},
                 {"detail", h.detail},
                 {"last_batch", h.last_batch},
                 {"updated_at", h.updated_at}});
  }
  for (const nlohmann::json& kept : kept_invalid_) j.push_back(kept);
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec) return Status::IOError(fmt::format("creating {}: {}", fs::path(path_).parent_path().string(), ec.message()));
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out.close();
    if (!out) return Status::IOError("writing " + tmp);
  }
  fs::rename(tmp, path_, ec);
  if (ec) return Status::IOError(fmt::format("replacing {}: {}", path_, ec.message()));
  return Status::OK();
}

}  // namespace temper
