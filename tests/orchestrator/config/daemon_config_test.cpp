#include "orchestrator/config/daemon_config.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

TEST_CASE("the example temperd.yaml parses with every field") {
  auto config = LoadDaemonConfig(std::string(TEMPER_SOURCE_DIR) + "/config/temperd.yaml");
  REQUIRE(config.ok());
  CHECK(config->unix_socket.path == "/run/temper/temper.sock");
  CHECK(config->unix_socket.group == "temper");
  CHECK_FALSE(config->tcp.has_value());
  REQUIRE(config->metrics.has_value());
  CHECK(config->metrics->host == "127.0.0.1");
  CHECK(config->metrics->port == 9464);
  CHECK(config->database == "/var/lib/temper/temper.db");
  CHECK(config->default_budgets.max_attempts == 5);
  CHECK(config->default_budgets.wall_time.count() == 1200);
  CHECK(config->shutdown_grace.count() == 10);
  CHECK(config->fixpoint_passes == 3);
  CHECK_FALSE(config->parallel_attempts.has_value());  // auto
  CHECK(config->sandbox.pids == 512);
  CHECK(config->sandbox.memory_bytes == std::uint64_t{2} << 30);
  CHECK(config->sandbox.cpu_weight == 50);
  CHECK(config->sandbox.disk_bytes == std::uint64_t{8} << 30);
  CHECK(config->content_dirs == std::vector<std::string>{"/usr/share/xml/scap/ssg/content"});
  REQUIRE(config->targets.size() == 1);
  CHECK(config->FindTarget("lab")->path == "/var/lib/temper/targets/lab");
  CHECK(config->FindTarget("nope") == nullptr);
}

TEST_CASE("defaults apply to an empty mapping, and the database follows state_dir") {
  auto config = ParseDaemonConfig("state_dir: /srv/t\n", "/etc/t.yaml");
  REQUIRE(config.ok());
  CHECK(config->database == "/srv/t/temper.db");
  CHECK(config->content_dirs == std::vector<std::string>{"/usr/share/xml/scap/ssg/content"});
  CHECK(config->log_level == LogLevel::kInfo);
  CHECK(config->package_cache.dir == "/srv/t/packages");
  CHECK(config->package_cache.sources == std::vector<std::string>{"deb http://deb.debian.org/debian bookworm main"});
}

TEST_CASE("the package cache takes a directory, apt sources and an index age, or is turned off") {
  auto config = ParseDaemonConfig(
      "package_cache:\n  dir: cache\n  sources:\n    - deb [trusted=yes] file:/srv/debs ./\n"
      "    - deb http://mirror.example/debian bookworm main contrib\n  max_index_age: 2h\n",
      "/etc/temper/t.yaml");
  REQUIRE(config.ok());
  CHECK(config->package_cache.dir == "/etc/temper/cache");
  CHECK(config->package_cache.sources ==
        std::vector<std::string>{"deb [trusted=yes] file:/srv/debs ./",
                                 "deb http://mirror.example/debian bookworm main contrib"});
  CHECK(config->package_cache.max_index_age.count() == 7200);
  auto off = ParseDaemonConfig("package_cache:\n  enabled: false\n", "/etc/temper/t.yaml");
  REQUIRE(off.ok());
  CHECK(off->package_cache.dir.empty());
}

TEST_CASE("content_dirs is a list of directories, and an older content_dir is read as a list of one") {
  auto list = ParseDaemonConfig("content_dirs:\n  - /usr/share/xml/scap/ssg/content\n  - site\n", "/etc/temper/t.yaml");
  REQUIRE(list.ok());
  CHECK(list->content_dirs == std::vector<std::string>{"/usr/share/xml/scap/ssg/content", "/etc/temper/site"});
  auto single = ParseDaemonConfig("content_dir: /srv/scap\n", "/etc/temper/t.yaml");
  REQUIRE(single.ok());
  CHECK(single->content_dirs == std::vector<std::string>{"/srv/scap"});
  CHECK(ParseDaemonConfig("content_dirs: []\n", "t.yaml").status().message() ==
        "t.yaml:1:15: content_dirs: give at least one directory, e.g. /usr/share/xml/scap/ssg/content");
  CHECK(ParseDaemonConfig("content_dirs: [/a]\ncontent_dir: /b\n", "t.yaml").status().message() ==
        "t.yaml:2:14: content_dir: give content_dirs (a list) or content_dir (one directory), not both");
}

TEST_CASE("the fixpoint's bound on passes comes from loop.fixpoint_passes") {
  auto config = ParseDaemonConfig("loop:\n  fixpoint_passes: 5\n", "/etc/temper/t.yaml");
  REQUIRE(config.ok());
  CHECK(config->fixpoint_passes == 5);
  CHECK(ParseDaemonConfig("state_dir: /x\n", "/t.yaml")->fixpoint_passes == kDefaultFixpointPasses);
}

TEST_CASE("loop.cross_check_verification is off unless set, and must be a boolean") {
  CHECK_FALSE(ParseDaemonConfig("state_dir: /x\n", "/t.yaml")->cross_check_verification);
  CHECK(ParseDaemonConfig("loop:\n  cross_check_verification: true\n", "/t.yaml")->cross_check_verification);
  auto bad = ParseDaemonConfig("loop:\n  cross_check_verification: often\n", "/t.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("/t.yaml:2:29: loop.cross_check_verification") == 0);
}

TEST_CASE("listen.metrics: off unless set, HOST:PORT or a port alone on localhost") {
  CHECK_FALSE(ParseDaemonConfig("state_dir: /x\n", "/t.yaml")->metrics.has_value());
  auto port_only = ParseDaemonConfig("listen:\n  metrics: 9100\n", "/t.yaml");
  REQUIRE(port_only.ok());
  CHECK(port_only->metrics->host == "127.0.0.1");
  CHECK(port_only->metrics->port == 9100);
  auto v6 = ParseDaemonConfig("listen:\n  metrics: '[::1]:0'\n", "/t.yaml");
  REQUIRE(v6.ok());
  CHECK(v6->metrics->host == "::1");
  CHECK(v6->metrics->port == 0);
  CHECK(ParseDaemonConfig("listen:\n  metrics: 0.0.0.0:9464\n", "/t.yaml")->metrics->host == "0.0.0.0");
  for (const char* wrong : {"localhost:http", "70000", ":9464", "127.0.0.1:", "-1"}) {
    INFO(wrong);
    auto bad = ParseDaemonConfig(std::string("listen:\n  metrics: '") + wrong + "'\n", "/t.yaml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == fmt::format("/t.yaml:2:12: listen.metrics: '{}' is not HOST:PORT or a port "
                                                "(0-65535; 0: any free port)",
                                                wrong));
  }
}

TEST_CASE("loop.parallel_attempts is auto unless set, auto or a number within 1-16") {
  CHECK_FALSE(ParseDaemonConfig("state_dir: /x\n", "/t.yaml")->parallel_attempts.has_value());
  auto set_auto = ParseDaemonConfig("loop:\n  parallel_attempts: auto\n", "/t.yaml");
  REQUIRE(set_auto.ok());
  CHECK_FALSE(set_auto->parallel_attempts.has_value());
  CHECK(ParseDaemonConfig("loop:\n  parallel_attempts: 8\n", "/t.yaml")->parallel_attempts == 8u);
  CHECK(ParseDaemonConfig("loop:\n  parallel_attempts: 1\n", "/t.yaml")->parallel_attempts == 1u);
  CHECK(ParseDaemonConfig("loop:\n  parallel_attempts: 16\n", "/t.yaml")->parallel_attempts == 16u);
  for (const char* wrong : {"0", "17", "many", "autom", "Auto"}) {
    INFO(wrong);
    auto bad = ParseDaemonConfig(std::string("loop:\n  parallel_attempts: ") + wrong + "\n", "/t.yaml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() ==
          fmt::format("/t.yaml:2:22: loop.parallel_attempts: '{}' is neither auto nor a number of attempts from 1 "
                      "to 16",
                      wrong));
  }
  auto mapping = ParseDaemonConfig("loop:\n  parallel_attempts: {n: 2}\n", "/t.yaml");
  REQUIRE_FALSE(mapping.ok());
  CHECK(mapping.status().message().find("/t.yaml:2:22: loop.parallel_attempts: expected a string") == 0);
}

TEST_CASE("the sandbox caps come from sandbox: with sizes in binary units, and refuse what cannot work") {
  auto defaults = ParseDaemonConfig("state_dir: /x\n", "/t.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->sandbox.pids == 512);
  CHECK(defaults->sandbox.memory_bytes == std::uint64_t{2} << 30);
  CHECK(defaults->sandbox.cpu_weight == 50);
  CHECK(defaults->sandbox.disk_bytes == std::uint64_t{8} << 30);
  auto config =
      ParseDaemonConfig("sandbox:\n  pids: 256\n  memory: 512MiB\n  cpu_weight: 20\n  disk: 20 GiB\n", "/t.yaml");
  REQUIRE(config.ok());
  CHECK(config->sandbox.pids == 256);
  CHECK(config->sandbox.memory_bytes == std::uint64_t{512} << 20);
  CHECK(config->sandbox.cpu_weight == 20);
  CHECK(config->sandbox.disk_bytes == std::uint64_t{20} << 30);
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"sandbox:\n  memory: 2GB\n",
       "t.yaml:2:11: sandbox.memory: '2GB' is not a size (write it as 8GiB, 512MiB, 64KiB or a number of bytes)"},
      {"sandbox:\n  disk: 10MiB\n", "t.yaml:2:3: sandbox: sandbox disk cap 10 MiB is under the minimum 64 MiB"},
      {"sandbox:\n  pids: 4\n", "t.yaml:2:3: sandbox: sandbox pids cap 4 is under the minimum 16"},
      {"sandbox:\n  cpu_weight: 20000\n", "t.yaml:2:3: sandbox: sandbox cpu_weight 20000 is outside 1..10000"},
      {"sandbox:\n  pid: 5\n",
       "t.yaml:2:3: sandbox.pid: unknown key (did you mean 'pids'?) (valid keys here: pids, memory, cpu_weight, disk)"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto bad = ParseDaemonConfig(c.text, "t.yaml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
    CHECK(bad.status().message() == c.message);
  }
}

TEST_CASE("twins: max_bytes and exclude have defaults, and bad values are named") {
  auto defaults = ParseDaemonConfig("state_dir: /x\n", "/t.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->twins.max_bytes == std::uint64_t{8} << 30);
  CHECK(defaults->twins.exclude.empty());
  auto config = ParseDaemonConfig("twins:\n  max_bytes: 20GiB\n  exclude: [/srv/data, /backup]\n", "/t.yaml");
  REQUIRE(config.ok());
  CHECK(config->twins.max_bytes == std::uint64_t{20} << 30);
  CHECK(config->twins.exclude == std::vector<std::string>{"/srv/data", "/backup"});
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"twins:\n  max_bytes: 2GB\n",
       "t.yaml:2:14: twins.max_bytes: '2GB' is not a size (write it as 8GiB, 512MiB, 64KiB or a number of bytes)"},
      {"twins:\n  max_bytes: 0\n", "t.yaml:2:14: twins.max_bytes: max_bytes must be above 0 (e.g. 8GiB)"},
      {"twins:\n  exclude: [srv/data]\n",
       "t.yaml:2:13: twins.exclude[0]: 'srv/data' must be an absolute path on the hosts, and not /"},
      {"twins:\n  exclude: [/srv, /]\n",
       "t.yaml:2:19: twins.exclude[1]: '/' must be an absolute path on the hosts, and not /"},
      {"twins:\n  max_byte: 1\n",
       "t.yaml:2:3: twins.max_byte: unknown key (did you mean 'max_bytes'?) (valid keys here: max_bytes, exclude)"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto bad = ParseDaemonConfig(c.text, "t.yaml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
    CHECK(bad.status().message() == c.message);
  }
}

TEST_CASE("temperd.yaml errors name file, line, column and field") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"stat_dir: /x\n",
       "t.yaml:1:1: stat_dir: unknown key (did you mean 'state_dir'?) (valid keys here: "
       "listen, state_dir, database, content_dirs, content_dir, models, disa_stigs, log_level, shutdown_grace, "
       "default_budgets, package_cache, ssh, twins, sandbox, targets, loop, waivers, access, limits)"},
      {"loop:\n  fixpoint_passes: 0\n", "t.yaml:2:20: loop.fixpoint_passes: 0 is out of range [1, 10]"},
      {"loop:\n  passes: 2\n",
       "t.yaml:2:3: loop.passes: unknown key (did you mean 'fixpoint_passes'?) (valid keys here: fixpoint_passes, "
       "cross_check_verification, parallel_attempts)"},
      {"package_cache:\n  sources:\n    - http://deb.debian.org/debian bookworm main\n",
       "t.yaml:3:7: package_cache.sources[0]: \"http://deb.debian.org/debian bookworm main\" is not a one-line apt "
       "source (\"deb [options] URI SUITE [COMPONENT...]\")"},
      {"package_cache:\n  sources: []\n",
       "t.yaml:2:12: package_cache.sources: give at least one apt source, e.g. "
       "'deb http://deb.debian.org/debian bookworm main'"},
      {"package_cache:\n  mirror: /srv\n",
       "t.yaml:2:3: package_cache.mirror: unknown key (valid keys here: enabled, "
       "dir, sources, max_index_age, max_size)"},
      {"package_cache:\n  max_size: 0\n",
       "t.yaml:2:3: package_cache: package cache max_size must be more than 0 bytes"},
      {"log_level: loud\n",
       "t.yaml:1:12: log_level: unknown log level 'loud' (expected debug, info, warning or error)"},
      {"default_budgets:\n  max_attempts: 0\n", "t.yaml:2:17: default_budgets.max_attempts: 0 is out of range [1, 50]"},
      {"default_budgets:\n  wall_time: 5s\n",
       "t.yaml:2:14: default_budgets.wall_time: duration 5s is out of range [10s, 86400s]"},
      {"listen:\n  tcp:\n    address: 0.0.0.0:7443\n", "t.yaml:3:5: listen.tcp: missing required key 'tls_cert'"},
      {"listen:\n  tcp:\n    address: nowhere\n    tls_cert: c\n    tls_key: k\n    token_file: t\n",
       "t.yaml:3:14: listen.tcp.address: 'nowhere' is not host:port"},
      {"targets:\n  lab:\n    type: vm\n    path: /x\n",
       "t.yaml:3:11: targets.lab.type: unknown target type 'vm' (expected: rootfs, ssh)"},
      {"targets:\n  web:\n    type: ssh\n    host: web1\n",
       "t.yaml:4:11: targets.web.host: host 'web1' must be user@name[:port]"},
      {"targets:\n  web:\n    type: ssh\n    host: admin@web1\n    sudo: false\n",
       "t.yaml:5:11: targets.web.sudo: without sudo, admin cannot run fixes as root: log in as root or allow sudo"},
      {"targets:\n  web:\n    type: ssh\n    host: root@web1\n    path: /x\n",
       "t.yaml:5:11: targets.web.path: ssh targets have no path (use host: user@name[:port])"},
      {"targets:\n  lab:\n    type: rootfs\n    path: /x\n    host: root@web1\n",
       "t.yaml:5:11: targets.lab.host: only ssh targets take this key"},
      {"targets:\n  bad name:\n    type: rootfs\n",
       "t.yaml:3:5: targets.bad name: target names are 1-64 characters of letters, digits, '-', '_' and '.'"},
      {"targets:\n  lab: {type: rootfs}\n", "t.yaml:2:8: targets.lab: missing required key 'path'"},
      {"waivers:\n  - {rule: accounts_tmout, reason: r}\n", "t.yaml:2:5: waivers[0]: missing required key 'owner'"},
      {"waivers:\n  - {rule: accounts_tmout, reason: r, owner: o, expires: 2027-02-30}\n",
       "t.yaml:2:58: waivers[0].expires: '2027-02-30' is not a calendar date after 1970"},
      {"waivers:\n  - {rule: accounts_tmout, reason: r, owner: o, expires: next week}\n",
       "t.yaml:2:58: waivers[0].expires: 'next week' is not a date: expected YYYY-MM-DD, e.g. 2027-01-31"},
      {"waivers:\n  - {rule: accounts_tmout, reason: r, owner: o}\n"
       "  - {rule: xccdf_org.ssgproject.content_rule_accounts_tmout, reason: r, owner: o}\n",
       "t.yaml:3:12: waivers[1].rule: 'xccdf_org.ssgproject.content_rule_accounts_tmout' is already waived by "
       "waivers[0]"},
      {"waivers:\n  - {rule: 'no spaces', reason: r, owner: o}\n",
       "t.yaml:2:12: waivers[0].rule: 'no spaces' is not a rule id: use letters, digits, '_', '.' and '-' (e.g. "
       "sshd_disable_root_login)"},
      {"waivers:\n  - {rule: accounts_tmout, reason: r, owner: o, until: 2027-01-01}\n",
       "t.yaml:2:49: waivers[0].until: unknown key (valid keys here: rule, reason, owner, expires)"},
      {"waivers: accounts_tmout\n", "t.yaml:1:10: waivers: expected a sequence, got a scalar"},
      {"- a\n- b\n", "t.yaml:1:1: expected a mapping, got a sequence"},
      {"", "t.yaml: the file is empty; see config/temperd.yaml for an example"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto config = ParseDaemonConfig(c.text, "t.yaml");
    REQUIRE_FALSE(config.ok());
    CHECK(config.status().code() == StatusCode::kInvalidArgument);
    CHECK(config.status().message() == c.message);
  }
}

TEST_CASE("ssh targets take a host, a key file, known_hosts and sudo, the ssh section sets the defaults") {
  auto config = ParseDaemonConfig(
      "state_dir: /srv/t\nssh:\n  key_file: keys/temper\n  connect_timeout: 20s\n  host_dir: /var/lib/temper-x\n"
      "  reconnect_tries: 2\n  reconnect_pause: 3s\n"
      "targets:\n  web1:\n    type: ssh\n    host: admin@web1.example.org:2222\n"
      "  db1:\n    type: ssh\n    host: root@10.0.0.7\n    key_file: /etc/temper/db.key\n    known_hosts: kh\n"
      "    sudo: false\n",
      "/etc/temper/t.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CHECK(config->ssh.key_file == "/etc/temper/keys/temper");
  CHECK(config->ssh.known_hosts == "/srv/t/ssh/known_hosts");
  CHECK(config->ssh.control_dir == "/srv/t/ssh/control");
  CHECK(config->ssh.connect_timeout.count() == 20);
  CHECK(config->ssh.host_dir == "/var/lib/temper-x");
  CHECK(config->ssh.reconnect_tries == 2);
  CHECK(config->ssh.reconnect_pause.count() == 3);
  const TargetConfig* web = config->FindTarget("web1");
  REQUIRE(web != nullptr);
  CHECK(web->type == "ssh");
  CHECK(web->host == "admin@web1.example.org:2222");
  CHECK(web->sudo);
  const TargetConfig* db = config->FindTarget("db1");
  REQUIRE(db != nullptr);
  CHECK(db->key_file == "/etc/temper/db.key");
  CHECK(db->known_hosts == "/etc/temper/kh");
  CHECK_FALSE(db->sudo);
  // The masters' sockets must fit sockaddr_un.
  auto deep = ParseDaemonConfig("state_dir: /" + std::string(80, 'd') + "\n", "/t.yaml");
  REQUIRE_FALSE(deep.ok());
  CHECK_THAT(deep.status().message(), Catch::Contains("socket paths allow at most 70"));
}

TEST_CASE("configured waivers are read with full rule ids and expiry days") {
  auto config = ParseDaemonConfig(
      "waivers:\n"
      "  - rule: accounts_tmout\n    reason: kiosk sessions must not time out\n    owner: ops@example.com\n"
      "  - rule: xccdf_org.ssgproject.content_rule_banner_etc_issue_net\n    reason: \"legal: banner: pending\"\n"
      "    owner: legal\n    expires: 2027-01-31\n",
      "t.yaml");
  REQUIRE(config.ok());
  REQUIRE(config->waivers.size() == 2);
  CHECK(config->waivers[0].rule_id == "xccdf_org.ssgproject.content_rule_accounts_tmout");
  CHECK(config->waivers[0].owner == "ops@example.com");
  CHECK_FALSE(config->waivers[0].expires_at.has_value());
  CHECK(config->waivers[1].reason == "legal: banner: pending");
  CHECK(config->waivers[1].expires_at == 1801353600000);  // 2027-01-31T00:00:00Z
}

TEST_CASE("limits: per-client limits and ssh.max_hosts have defaults, take positive counts, and name bad keys") {
  auto defaults = ParseDaemonConfig("state_dir: /srv/t\n", "t.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->limits.active_batches_per_client == 16);
  CHECK(defaults->limits.watch_streams_per_client == 32);
  CHECK(defaults->limits.watch_streams_total == 1024);
  CHECK(defaults->ssh.max_hosts == 256);
  auto set = ParseDaemonConfig(
      "limits:\n  active_batches_per_client: 2\n  rules_per_batch: 50\n  parallel_attempts_per_batch: 1\n"
      "  watch_streams_per_client: 3\n  watch_streams_total: 10\n  server_threads: 8\nssh:\n  max_hosts: 0\n",
      "t.yaml");
  REQUIRE(set.ok());
  CHECK(set->limits.active_batches_per_client == 2);
  CHECK(set->limits.rules_per_batch == 50);
  CHECK(set->limits.parallel_attempts_per_batch == 1);
  CHECK(set->limits.watch_streams_per_client == 3);
  CHECK(set->limits.watch_streams_total == 10);
  CHECK(set->limits.server_threads == 8);
  CHECK(set->ssh.max_hosts == 0);
  for (const char* bad : {"limits:\n  watch_streams_per_client: 0\n", "limits:\n  server_threads: 2\n",
                          "limits:\n  parallel_attempts_per_batch: 17\n", "limits:\n  streams: 3\n"}) {
    auto refused = ParseDaemonConfig(bad, "t.yaml");
    INFO(bad);
    CHECK_FALSE(refused.ok());
    CHECK_THAT(refused.status().message(), Catch::Contains("t.yaml:2:"));
  }
}

TEST_CASE("a socket path too long for sockaddr_un is refused at load time") {
  std::string text = "listen:\n  unix:\n    path: /" + std::string(120, 'x') + "\n";
  auto config = ParseDaemonConfig(text, "/t.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().message() ==
        "/t.yaml:3:5: listen.unix: socket path is 121 bytes; unix sockets allow at most 107");
}

}  // namespace
}  // namespace temper
