// Twins: the copies of SSH hosts temperd keeps as rootfs targets (`temper twin create NAME
// --from-host HOST`), so that batches rehearse on the copy (forks, parallel attempts, no risk to the
// host) before their fixes go to the fleet.
//
// A twin lives in <state_dir>/twins/<name>/ in the layout `temper target create` makes: root/ (the
// host's "/", stig/ssh/host_copy.h) and state/ (the snapshot layers), plus twin.json (where and when
// it was copied from, what was left out) and packages.txt (the host's packages, "name version" per
// line). Its target is {name, type rootfs, path <state_dir>/twins/<name>}, opened as any rootfs
// target (target_factory.h). A twin's name is its target's: it must not be a configured target's or
// an SSH host's (AlreadyExists).
// A start never fails on what the twins directory holds: a twin.json that does not parse or does
// not describe its directory is logged (file and reason) and that twin skipped, its files kept for
// a person to look at; a directory without twin.json is a copy that never finished (temperd stopped
// mid-copy) and is removed.
// Thread safety: all methods are thread-safe (the gRPC service's threads share one); Create holds
// no lock while it copies, and a name being created is taken until it ends.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/loop/ssh_hosts.h"
#include "orchestrator/records.h"
#include "stig/ssh/host_copy.h"

namespace temper {

struct TwinRecord {
  std::string name;
  std::string dir;    // <state_dir>/twins/<name>
  std::string host;   // the source: user@name:port
  std::string login;  // the user temperd logged in as
  TimeMs copied_at = 0;
  uint64_t bytes = 0;
  uint64_t files = 0;
  uint64_t skipped_special_files = 0;  // device nodes and FIFOs not created
  std::vector<std::string> excluded;   // paths on the host left out
  double seconds = 0;
  uint64_t packages = 0;   // installed packages (their list: packages.txt)
  std::string os_release;  // the copy's os-release PRETTY_NAME, else its ID and VERSION_ID

  // The rootfs target the twin is.
  TargetConfig Target() const;
};

class Twins {
 public:
  static constexpr std::size_t kMaxNameLength = 64;

  // Reads <state_dir>/twins (made 0700 when missing). `hosts` may be null (no SSH registry); it and
  // the rest must outlive the registry. Errors: IOError when the directory cannot be made or read.
  static Result<std::unique_ptr<Twins>> Open(const DaemonConfig& config, const SshHosts* hosts, const Logger& log);

  // InvalidArgument unless `name` is 1-64 of [a-z0-9._-], starting with a letter or digit.
  static Status ValidateName(const std::string& name);

  // Copies a host into a new twin `name`: `copy` is called with the directory the host's "/" must
  // become (not existing yet) and no lock held; on success twin.json and packages.txt are written
  // and the twin is listed. Errors: InvalidArgument for a bad name; AlreadyExists when the name is a
  // configured target's, an SSH host's, a twin's or one being created; `copy`'s error (the twin's
  // directory removed); IOError writing the record.
  Result<TwinRecord> Create(const std::string& name,
                            const std::function<Result<stig::HostCopyRecord>(const std::string& root_dir)>& copy);

  std::vector<TwinRecord> List() const;
  std::optional<TwinRecord> Find(const std::string& name) const;
  // The twins' targets, for the loop runner at start.
  std::vector<TargetConfig> Targets() const;
  // Forgets the twin and deletes its directory. NotFound for no such twin.
  Result<TwinRecord> Remove(const std::string& name);

 private:
  Twins(const DaemonConfig& config, const SshHosts* hosts, const Logger& log, std::string dir)
      : config_(config), hosts_(hosts), log_(log), dir_(std::move(dir)) {}
  Status Load();
  // Why `name` cannot be a new twin (AlreadyExists), or OK. Holds mu_.
  Status NameTakenLocked(const std::string& name) const;

  const DaemonConfig& config_;
  const SshHosts* hosts_;
  const Logger& log_;
  const std::string dir_;
  mutable std::mutex mu_;
  std::vector<TwinRecord> twins_;
  std::set<std::string> creating_;
};

// The record as twin.json holds it, and back. FromJson: InvalidArgument naming the field.
std::string TwinToJson(const TwinRecord& twin);
Result<TwinRecord> TwinFromJson(const std::string& text);

}  // namespace temper
