#include "orchestrator/loop/ssh_hosts.h"

#include <filesystem>
#include <fstream>
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

Result<std::unique_ptr<SshHosts>> SshHosts::Open(const DaemonConfig& config) {
  std::unique_ptr<SshHosts> hosts(new SshHosts(config));
  hosts->path_ = (fs::path(config.state_dir) / "ssh" / "hosts.json").string();
  std::vector<SshHostState> stored;
  std::ifstream in(hosts->path_);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
      return Status::DataLoss(
          fmt::format("{} is not a JSON array of hosts; move it away to start afresh", hosts->path_));
    }
    for (const nlohmann::json& h : j) {
      if (!h.is_object() || !h.contains("name") || !h.contains("host") || !h["name"].is_string() ||
          !h["host"].is_string()) {
        return Status::DataLoss(fmt::format("{}: a host entry without name and host: {}", hosts->path_, h.dump()));
      }
      SshHostState s;
      s.target.name = h["name"].get<std::string>();
      s.target.type = "ssh";
      s.target.host = h["host"].get<std::string>();
      s.configured = h.value("configured", false);
      const nlohmann::json state = h.value("state", nlohmann::json(HostStateName(HostState::kIdle)));
      std::optional<HostState> parsed = state.is_string() ? ParseHostState(state.get<std::string>()) : std::nullopt;
      if (!parsed) {
        return Status::DataLoss(fmt::format("{}: host {} has the state {}, which is none of idle, running, needs_human",
                                            hosts->path_, s.target.name, state.dump()));
      }
      s.state = *parsed;
      s.detail = h.value("detail", std::string());
      s.last_batch = h.value("last_batch", int64_t{0});
      s.updated_at = h.value("updated_at", TimeMs{0});
      stored.push_back(std::move(s));
    }
  }
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
  for (SshHostState& old : stored) {
    if (old.configured || config.FindTarget(old.target.name) != nullptr) continue;
    // The daemon stopped under it; the loop resumes it.
    if (old.state == HostState::kRunning) old.state = HostState::kIdle;
    hosts->hosts_.push_back(std::move(old));
  }
  return hosts;
}

Result<TargetConfig> SshHosts::FromSubmit(const std::string& spec, bool* created) {
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
  SshHostState s;
  s.target.name = name;
  s.target.type = "ssh";
  s.target.host = endpoint->ToString();
  s.updated_at = NowMs();
  hosts_.push_back(s);
  TEMPER_RETURN_IF_ERROR(SaveLocked());
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
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec) return Status::IOError(fmt::format("creating {}: {}", fs::path(path_).parent_path().string(), ec.message()));
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return Status::IOError("writing " + tmp);
  }
  fs::rename(tmp, path_, ec);
  if (ec) return Status::IOError(fmt::format("replacing {}: {}", path_, ec.message()));
  return Status::OK();
}

}  // namespace temper
