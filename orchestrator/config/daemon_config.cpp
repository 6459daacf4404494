#include "orchestrator/config/daemon_config.h"

#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "common/loopback.h"
#include "orchestrator/config/waivers.h"
#include "orchestrator/config/yaml_reader.h"
#include "stig/ssh/ssh_connection.h"

namespace temper {

namespace {

constexpr std::size_t kMaxSshControlDir = 70;

Status ParseUnix(const YamlNode& node, UnixListenConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"path", "group"}));
  if (auto n = node.Find("path")) {
    TEMPER_ASSIGN_OR_RETURN(out.path, n->AsPath());
  }
  if (auto n = node.Find("group")) {
    TEMPER_ASSIGN_OR_RETURN(out.group, n->AsString());
  }
  // sockaddr_un holds 108 bytes including the terminating NUL.
  if (out.path.size() > 107) {
    return node.Error(fmt::format("socket path is {} bytes; unix sockets allow at most 107", out.path.size()));
  }
  return Status::OK();
}

Status ParseTcp(const YamlNode& node, TcpListenConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"address", "tls_cert", "tls_key", "token_file", "client_ca"}));
  TEMPER_ASSIGN_OR_RETURN(YamlNode address, node.Require("address"));
  TEMPER_ASSIGN_OR_RETURN(out.address, address.AsString());
  size_t colon = out.address.rfind(':');
  if (colon == std::string::npos || colon + 1 == out.address.size()) {
    return address.Error(fmt::format("'{}' is not host:port", out.address));
  }
  TEMPER_ASSIGN_OR_RETURN(YamlNode cert, node.Require("tls_cert"));
  TEMPER_ASSIGN_OR_RETURN(out.tls_cert, cert.AsPath());
  TEMPER_ASSIGN_OR_RETURN(YamlNode key, node.Require("tls_key"));
  TEMPER_ASSIGN_OR_RETURN(out.tls_key, key.AsPath());
  if (auto n = node.Find("token_file")) {
    TEMPER_ASSIGN_OR_RETURN(out.token_file, n->AsPath());
  }
  if (auto n = node.Find("client_ca")) {
    TEMPER_ASSIGN_OR_RETURN(out.client_ca, n->AsPath());
  }
  return Status::OK();
}

// "HOST:PORT", or a port alone for localhost.
// "HOST:PORT", "[::1]:PORT" or a port alone (host left as it is).
Status ParseHostPort(const YamlNode& node, std::string& host, int& port_out) {
  TEMPER_ASSIGN_OR_RETURN(std::string text, node.AsString());
  const size_t colon = text.rfind(':');
  std::string port = text;
  if (colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [::1]
  }
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 ||
      value > 65535) {
    return node.Error(fmt::format("'{}' is not HOST:PORT or a port (0-65535; 0: any free port)", text));
  }
  port_out = value;
  return Status::OK();
}

Status ParseMetricsListen(const YamlNode& node, MetricsListenConfig& out) {
  return ParseHostPort(node, out.host, out.port);
}

Status ParseDashboardListen(const YamlNode& node, DashboardListenConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"address", "token_file"}));
  if (auto n = node.Find("address")) {
    TEMPER_RETURN_IF_ERROR(ParseHostPort(*n, out.host, out.port));
    if (!IsLoopbackHost(out.host)) {
      return n->Error(fmt::format(
          "{} is not a loopback address: the dashboard serves plain HTTP, so it listens on this machine only "
          "(reach it from elsewhere through an SSH tunnel)",
          out.host));
    }
  }
  std::optional<YamlNode> token = node.Find("token_file");
  if (!token) return node.Error("token_file is required: the dashboard shows the target's diffs, not to every user");
  TEMPER_ASSIGN_OR_RETURN(out.token_file, token->AsPath());
  return Status::OK();
}

Status ParseBudgets(const YamlNode& node, Budgets& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"max_attempts", "wall_time", "max_tokens"}));
  using R = BudgetRanges;
  if (auto n = node.Find("max_attempts")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(R::kMinAttempts, R::kMaxAttempts));
    out.max_attempts = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("wall_time")) {
    TEMPER_ASSIGN_OR_RETURN(out.wall_time, n->AsDuration(R::kMinWallTime, R::kMaxWallTime));
  }
  if (auto n = node.Find("max_tokens")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(R::kMinTokens, R::kMaxTokens));
    out.max_tokens = static_cast<uint64_t>(v);
  }
  return Status::OK();
}

Status ParsePackageCache(const YamlNode& node, stig::PackageCacheOptions& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"enabled", "dir", "sources", "max_index_age", "max_size"}));
  if (auto n = node.Find("enabled")) {
    TEMPER_ASSIGN_OR_RETURN(bool enabled, n->AsBool());
    if (!enabled) {
      out.dir.clear();
      return Status::OK();
    }
  }
  if (auto n = node.Find("dir")) {
    TEMPER_ASSIGN_OR_RETURN(out.dir, n->AsPath());
  }
  if (auto n = node.Find("sources")) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, n->Items());
    if (items.empty())
      return n->Error("give at least one apt source, e.g. 'deb http://deb.debian.org/debian bookworm main'");
    out.sources.clear();
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(std::string line, item.AsString());
      Status valid = stig::ValidateAptSource(line);
      if (!valid.ok()) return item.Error(valid.message());
      out.sources.push_back(std::move(line));
    }
  }
  if (auto n = node.Find("max_index_age")) {
    TEMPER_ASSIGN_OR_RETURN(out.max_index_age, n->AsDuration(std::chrono::seconds(0), std::chrono::hours(24 * 365)));
  }
  if (auto n = node.Find("max_size")) {
    TEMPER_ASSIGN_OR_RETURN(std::string text, n->AsString());
    Result<uint64_t> v = temper::ParseBytes(text);
    if (!v.ok()) return n->Error(v.status().message());
    out.max_bytes = *v;
  }
  Status valid = out.Validate();
  if (!valid.ok()) return node.Error(valid.message());
  return Status::OK();
}

Status ParseSshTarget(const YamlNode& spec, TargetConfig& target) {
  if (auto n = spec.Find("path")) return n->Error("ssh targets have no path (use host: user@name[:port])");
  TEMPER_ASSIGN_OR_RETURN(YamlNode host, spec.Require("host"));
  TEMPER_ASSIGN_OR_RETURN(target.host, host.AsString());
  Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(target.host);
  if (!endpoint.ok()) return host.Error(endpoint.status().message());
  if (auto n = spec.Find("key_file")) {
    TEMPER_ASSIGN_OR_RETURN(target.key_file, n->AsPath());
  }
  if (auto n = spec.Find("known_hosts")) {
    TEMPER_ASSIGN_OR_RETURN(target.known_hosts, n->AsPath());
  }
  if (auto n = spec.Find("sudo")) {
    TEMPER_ASSIGN_OR_RETURN(target.sudo, n->AsBool());
    if (!target.sudo && endpoint->user != "root") {
      return n->Error(
          fmt::format("without sudo, {} cannot run fixes as root: log in as root or allow sudo", endpoint->user));
    }
  }
  return Status::OK();
}

Status ParseSsh(const YamlNode& node, SshConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"known_hosts", "key_file", "control_dir", "connect_timeout",
                                                 "host_dir", "reconnect_tries", "reconnect_pause", "max_hosts"}));
  if (auto n = node.Find("known_hosts")) {
    TEMPER_ASSIGN_OR_RETURN(out.known_hosts, n->AsPath());
  }
  if (auto n = node.Find("key_file")) {
    TEMPER_ASSIGN_OR_RETURN(out.key_file, n->AsPath());
  }
  if (auto n = node.Find("control_dir")) {
    TEMPER_ASSIGN_OR_RETURN(out.control_dir, n->AsPath());
  }
  if (auto n = node.Find("connect_timeout")) {
    TEMPER_ASSIGN_OR_RETURN(out.connect_timeout, n->AsDuration(std::chrono::seconds(1), std::chrono::seconds(300)));
  }
  if (auto n = node.Find("reconnect_tries")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, 100));
    out.reconnect_tries = static_cast<int>(v);
  }
  if (auto n = node.Find("reconnect_pause")) {
    TEMPER_ASSIGN_OR_RETURN(out.reconnect_pause, n->AsDuration(std::chrono::seconds(1), std::chrono::seconds(300)));
  }
  if (auto n = node.Find("max_hosts")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(0, 100000));
    out.max_hosts = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("host_dir")) {
    TEMPER_ASSIGN_OR_RETURN(out.host_dir, n->AsString());
    if (out.host_dir.empty() || out.host_dir[0] != '/' || out.host_dir == "/") {
      return n->Error("the directory on the hosts must be absolute and not /");
    }
  }
  return Status::OK();
}

Status ParseTwins(const YamlNode& node, TwinsConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"max_bytes", "exclude"}));
  if (auto n = node.Find("max_bytes")) {
    TEMPER_ASSIGN_OR_RETURN(std::string text, n->AsString());
    Result<uint64_t> v = temper::ParseBytes(text);
    if (!v.ok()) return n->Error(v.status().message());
    if (*v == 0) return n->Error("max_bytes must be above 0 (e.g. 8GiB)");
    out.max_bytes = *v;
  }
  if (auto n = node.Find("exclude")) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, n->Items());
    out.exclude.clear();
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(std::string path, item.AsString());
      if (path.front() != '/' || path.find_first_not_of('/') == std::string::npos) {
        return item.Error(fmt::format("'{}' must be an absolute path on the hosts, and not /", path));
      }
      if (path.find('\n') != std::string::npos) return item.Error("an excluded path cannot hold a newline");
      out.exclude.push_back(std::move(path));
    }
  }
  return Status::OK();
}

Status ParseSandbox(const YamlNode& node, temper::SandboxCaps& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"pids", "memory", "cpu_weight", "disk"}));
  auto bytes = [](const YamlNode& n) -> Result<uint64_t> {
    TEMPER_ASSIGN_OR_RETURN(std::string text, n.AsString());
    Result<uint64_t> v = temper::ParseBytes(text);
    if (!v.ok()) return n.Error(v.status().message());
    return v;
  };
  if (auto n = node.Find("pids")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, INT32_MAX));
    out.pids = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("memory")) {
    TEMPER_ASSIGN_OR_RETURN(out.memory_bytes, bytes(*n));
  }
  if (auto n = node.Find("cpu_weight")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, INT32_MAX));
    out.cpu_weight = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("disk")) {
    TEMPER_ASSIGN_OR_RETURN(out.disk_bytes, bytes(*n));
  }
  if (Status s = out.Validate(); !s.ok()) return node.Error(s.message());
  return Status::OK();
}

Status ParseLoop(const YamlNode& node, DaemonConfig& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"fixpoint_passes", "cross_check_verification", "parallel_attempts"}));
  if (auto n = node.Find("fixpoint_passes")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, kMaxFixpointPasses));
    out.fixpoint_passes = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("cross_check_verification")) {
    TEMPER_ASSIGN_OR_RETURN(out.cross_check_verification, n->AsBool());
  }
  if (auto n = node.Find("parallel_attempts")) {
    // `auto` (the default) or a number; anything else names both.
    TEMPER_ASSIGN_OR_RETURN(std::string text, n->AsString());
    if (text == "auto") {
      out.parallel_attempts = std::nullopt;
    } else {
      Result<int64_t> v = n->AsInt(1, kMaxParallelAttempts);
      if (!v.ok()) {
        return n->Error(
            fmt::format("'{}' is neither auto nor a number of attempts from 1 to {}", text, kMaxParallelAttempts));
      }
      out.parallel_attempts = static_cast<uint32_t>(*v);
    }
  }
  return Status::OK();
}

Status ParseLimits(const YamlNode& node, ClientLimitsConfig& out) {
  const std::pair<const char*, uint32_t*> keys[] = {
      {"active_batches_per_client", &out.active_batches_per_client},
      {"rules_per_batch", &out.rules_per_batch},
      {"parallel_attempts_per_batch", &out.parallel_attempts_per_batch},
      {"watch_streams_per_client", &out.watch_streams_per_client},
      {"watch_streams_total", &out.watch_streams_total},
      {"server_threads", &out.server_threads},
      {"calls_per_client", &out.calls_per_client},
  };
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"active_batches_per_client", "rules_per_batch",
                                                 "parallel_attempts_per_batch", "watch_streams_per_client",
                                                 "watch_streams_total", "server_threads", "calls_per_client"}));
  for (const auto& [name, field] : keys) {
    if (auto n = node.Find(name)) {
      // gRPC needs a few threads of its own to serve anything at all (server_threads).
      TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(std::string_view(name) == "server_threads" ? 4 : 1, 1000000));
      *field = static_cast<uint32_t>(v);
    }
  }
  if (out.parallel_attempts_per_batch > kMaxParallelAttempts) {
    return node.Error(fmt::format("parallel_attempts_per_batch: {} is above temperd's own maximum of {}",
                                  out.parallel_attempts_per_batch, kMaxParallelAttempts));
  }
  return Status::OK();
}

Status ParseTargets(const YamlNode& node, std::vector<TargetConfig>& out) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMap());
  for (const auto& [name, spec] : node.Entries()) {
    bool valid_name = !name.empty() && name.size() <= 64;
    for (char c : name) {
      valid_name = valid_name && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    }
    if (!valid_name) {
      return spec.Error("target names are 1-64 characters of letters, digits, '-', '_' and '.'");
    }
    TargetConfig target;
    target.name = name;
    TEMPER_RETURN_IF_ERROR(spec.ExpectMapWithKeys({"type", "path", "host", "key_file", "known_hosts", "sudo"}));
    TEMPER_ASSIGN_OR_RETURN(YamlNode type, spec.Require("type"));
    TEMPER_ASSIGN_OR_RETURN(target.type, type.AsString());
    if (target.type == "rootfs") {
      for (const char* key : {"host", "key_file", "known_hosts", "sudo"}) {
        if (auto n = spec.Find(key)) return n->Error("only ssh targets take this key");
      }
      TEMPER_ASSIGN_OR_RETURN(YamlNode path, spec.Require("path"));
      TEMPER_ASSIGN_OR_RETURN(target.path, path.AsPath());
    } else if (target.type == "ssh") {
      TEMPER_RETURN_IF_ERROR(ParseSshTarget(spec, target));
    } else {
      return type.Error(fmt::format("unknown target type '{}' (expected: rootfs, ssh)", target.type));
    }
    out.push_back(std::move(target));
  }
  return Status::OK();
}

// `content_dirs: [DIR, ...]`, or `content_dir: DIR` as written by configs older than the list.
Status ParseContentDirs(const YamlNode& root, std::vector<std::string>& out) {
  std::optional<YamlNode> list = root.Find("content_dirs");
  std::optional<YamlNode> single = root.Find("content_dir");
  if (list && single) {
    return single->Error("give content_dirs (a list) or content_dir (one directory), not both");
  }
  if (single) {
    TEMPER_ASSIGN_OR_RETURN(std::string dir, single->AsPath());
    out = {dir};
  } else if (list) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, list->Items());
    if (items.empty()) return list->Error("give at least one directory, e.g. /usr/share/xml/scap/ssg/content");
    out.clear();
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(std::string dir, item.AsPath());
      out.push_back(std::move(dir));
    }
  }
  return Status::OK();
}

}  // namespace

const TargetConfig* DaemonConfig::FindTarget(const std::string& name) const {
  for (const TargetConfig& t : targets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// A TCP listener must have some way to know its clients: a token, a token grant or a client CA.
Status CheckTcpClientsNamed(const YamlNode& root, const DaemonConfig& config) {
  if (!config.tcp || !config.tcp->token_file.empty() || !config.tcp->client_ca.empty()) return Status::OK();
  for (const AccessGrant& g : config.access) {
    if (!g.token_file.empty()) return Status::OK();
  }
  return root.Find("listen")->Find("tcp")->Error(
      "TCP clients must prove who they are: set token_file, client_ca, or an access entry with a token_file");
}

Result<DaemonConfig> ParseDaemonConfigNode(const YamlNode& root) {
  DaemonConfig config;
  config.source = root.file();
  if (root.IsNull()) return root.Error("the file is empty; see config/temperd.yaml for an example");
  TEMPER_RETURN_IF_ERROR(
      root.ExpectMapWithKeys({"listen", "state_dir", "database", "content_dirs", "content_dir", "models", "disa_stigs",
                              "log_level", "shutdown_grace", "default_budgets", "package_cache", "ssh", "twins",
                              "sandbox", "targets", "loop", "waivers", "access", "limits"}));
  if (auto listen = root.Find("listen")) {
    TEMPER_RETURN_IF_ERROR(listen->ExpectMapWithKeys({"unix", "tcp", "metrics", "dashboard"}));
    if (auto n = listen->Find("unix")) TEMPER_RETURN_IF_ERROR(ParseUnix(*n, config.unix_socket));
    if (auto n = listen->Find("tcp")) {
      config.tcp.emplace();
      TEMPER_RETURN_IF_ERROR(ParseTcp(*n, *config.tcp));
    }
    if (auto n = listen->Find("metrics")) {
      config.metrics.emplace();
      TEMPER_RETURN_IF_ERROR(ParseMetricsListen(*n, *config.metrics));
    }
    if (auto n = listen->Find("dashboard")) {
      config.dashboard.emplace();
      TEMPER_RETURN_IF_ERROR(ParseDashboardListen(*n, *config.dashboard));
    }
  }
  if (auto n = root.Find("state_dir")) {
    TEMPER_ASSIGN_OR_RETURN(config.state_dir, n->AsPath());
  }
  if (auto n = root.Find("database")) {
    TEMPER_ASSIGN_OR_RETURN(config.database, n->AsPath());
  } else {
    config.database = (std::filesystem::path(config.state_dir) / "temper.db").string();
  }
  TEMPER_RETURN_IF_ERROR(ParseContentDirs(root, config.content_dirs));
  if (auto n = root.Find("models")) {
    TEMPER_ASSIGN_OR_RETURN(config.models_file, n->AsPath());
  }
  if (auto n = root.Find("disa_stigs")) {
    TEMPER_ASSIGN_OR_RETURN(config.disa_stigs_dir, n->AsPath());
  }
  if (auto n = root.Find("log_level")) {
    TEMPER_ASSIGN_OR_RETURN(std::string name, n->AsString());
    Result<LogLevel> level = ParseLogLevel(name);
    if (!level.ok()) return n->Error(level.status().message());
    config.log_level = *level;
  }
  if (auto n = root.Find("shutdown_grace")) {
    TEMPER_ASSIGN_OR_RETURN(config.shutdown_grace, n->AsDuration(std::chrono::seconds(0), std::chrono::seconds(600)));
  }
  if (auto n = root.Find("default_budgets")) TEMPER_RETURN_IF_ERROR(ParseBudgets(*n, config.default_budgets));
  config.package_cache.dir = (std::filesystem::path(config.state_dir) / "packages").string();
  if (auto n = root.Find("package_cache")) TEMPER_RETURN_IF_ERROR(ParsePackageCache(*n, config.package_cache));
  const std::filesystem::path ssh_dir = std::filesystem::path(config.state_dir) / "ssh";
  config.ssh.known_hosts = (ssh_dir / "known_hosts").string();
  config.ssh.control_dir = (ssh_dir / "control").string();
  if (auto n = root.Find("ssh")) TEMPER_RETURN_IF_ERROR(ParseSsh(*n, config.ssh));
  if (auto n = root.Find("twins")) TEMPER_RETURN_IF_ERROR(ParseTwins(*n, config.twins));
  // The masters' sockets are <control_dir>/m-<16 hex> plus ssh's own 17-byte suffix, in 108 bytes.
  if (config.ssh.control_dir.size() > kMaxSshControlDir) {
    YamlNode at = root.Find("ssh") ? *root.Find("ssh") : root;
    return at.Error(
        fmt::format("ssh control_dir {} is {} bytes; socket paths allow at most {} (set ssh.control_dir, "
                    "e.g. /run/temper/ssh)",
                    config.ssh.control_dir, config.ssh.control_dir.size(), kMaxSshControlDir));
  }
  if (auto n = root.Find("sandbox")) TEMPER_RETURN_IF_ERROR(ParseSandbox(*n, config.sandbox));
  if (auto n = root.Find("targets")) TEMPER_RETURN_IF_ERROR(ParseTargets(*n, config.targets));
  if (auto n = root.Find("loop")) TEMPER_RETURN_IF_ERROR(ParseLoop(*n, config));
  if (auto n = root.Find("limits")) TEMPER_RETURN_IF_ERROR(ParseLimits(*n, config.limits));
  if (auto n = root.Find("waivers")) {
    TEMPER_ASSIGN_OR_RETURN(config.waivers, ParseWaiverList(*n));
  }
  if (auto n = root.Find("access")) {
    TEMPER_ASSIGN_OR_RETURN(config.access, ParseAccessGrants(*n));
  }
  TEMPER_RETURN_IF_ERROR(CheckTcpClientsNamed(root, config));
  return config;
}

}  // namespace

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return ParseDaemonConfigNode(root);
}

Result<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& source_name) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadString(text, source_name));
  return ParseDaemonConfigNode(root);
}

}  // namespace temper
