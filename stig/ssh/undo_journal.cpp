#include "stig/ssh/undo_journal.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/dcheck.h"

namespace temper::stig {

struct UndoManifest {
  std::map<std::string, std::string> paths;             // path -> its description, xattrs included
  std::map<std::string, std::set<std::string>> xattrs;  // path -> its "name=value" lines
  bool xattrs_checked = true;
};

namespace {

// Shared by the scripts: `manifest OUT LIST` writes OUT.find (type, mode, owner, group, size,
// symlink target and path of everything under the NUL-separated roots in LIST), OUT.sha (SHA-256
// of every regular file) and OUT.xattr (getfattr's dump, or "unchecked" without getfattr).
constexpr const char* kPrelude = R"SH(set -u
umask 077
manifest() {
  xargs -0 -r sh -c 'exec find "$@" -xdev -printf "%y\t%m\t%U\t%G\t%s\t%l\t%p\0"' manifest < "$2" > "$1.find" || return 1
  xargs -0 -r sh -c 'exec find "$@" -xdev -type f -print0' manifest < "$2" | xargs -0 -r sha256sum -z -- > "$1.sha" || return 1
  if command -v getfattr >/dev/null 2>&1; then
    xargs -0 -r getfattr -P -R -h -d -m - -e hex --absolute-names -- < "$2" > "$1.xattr" || return 1
  else
    printf unchecked > "$1.xattr"
  fi
}
# emit FILE...: each file as its size in bytes on a line, then its bytes; -1 for a missing file.
emit() {
  for f; do
    if [ -f "$f" ]; then stat -c %s -- "$f" && cat -- "$f" || return 1; else echo -1; fi
  done
}
# existing LIST...: the paths of the NUL-separated lists that exist now.
existing() {
  cat -- "$@" | xargs -0 -r sh -c 'for r; do if [ -e "$r" ] || [ -L "$r" ]; then printf "%s\0" "$r"; fi; done' existing
}
)SH";

// $1 dir, then the default roots. Prints the tools found, the snapshots and the tracked roots.
constexpr const char* kOpenScript = R"SH(dir=$1; shift
for t in tar gzip find sha256sum xargs; do
  command -v "$t" >/dev/null 2>&1 || { echo "missing=$t"; exit 20; }
done
mkdir -p -- "$dir" && chmod 0700 -- "$dir" || exit 21
if [ ! -e "$dir/tracked" ]; then
  printf '%s\0' "$@" > "$dir/tracked.tmp" && mv -- "$dir/tracked.tmp" "$dir/tracked" || exit 21
fi
rm -rf -- "$dir"/*.tmp
if command -v getfattr >/dev/null 2>&1; then echo xattrs=yes; else echo xattrs=no; fi
if command -v dpkg-query >/dev/null 2>&1; then echo dpkg=yes; else echo dpkg=no; fi
for s in "$dir"/snap.*; do [ -d "$s" ] && echo "snapshot=${s##*/snap.}"; done
[ -f "$dir/last_id" ] && echo "last_id=$(cat -- "$dir/last_id")"
echo tracked
cat -- "$dir/tracked"
)SH";

// $1 dir, $2 id.
// The id is recorded before the snapshot exists: a failure costs an unused id, never a reused one.
constexpr const char* kSnapshotScript = R"SH(dir=$1; s="$dir/snap.$2"; t="$s.tmp"
printf '%s\n' "$2" > "$dir/last_id.tmp" && mv -- "$dir/last_id.tmp" "$dir/last_id" || exit 10
rm -rf -- "$t" && mkdir -- "$t" || exit 10
fail() { cat -- "$t"/*.err >&2 2>/dev/null; rm -rf -- "$t"; exit "$1"; }
: > "$t/roots"; : > "$t/absent"
xargs -0 -r sh -c 'for r; do if [ -e "$r" ] || [ -L "$r" ]; then printf "%s\0" "$r" >> "$0/roots"; else printf "%s\0" "$r" >> "$0/absent"; fi; done' "$t" < "$dir/tracked" || fail 10
tar -c -z -f "$t/files.tar.gz" --null -T "$t/roots" --xattrs --xattrs-include='*' --acls --numeric-owner --one-file-system 2> "$t/tar.err" || fail 11
manifest "$t/manifest" "$t/roots" 2> "$t/manifest.err" || fail 13
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f '${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' > "$t/packages" 2> "$t/dpkg.err" || fail 14
fi
rm -f -- "$t"/*.err
mv -- "$t" "$s" || exit 15
)SH";

// $1 dir, $2 snapshot dir: emits the snapshot's manifest.find and "type<TAB>path" NUL records of
// what now exists under its roots.
constexpr const char* kListScript =
    R"SH(existing "$2/roots" "$2/absent" | xargs -0 -r sh -c 'exec find "$@" -xdev -printf "%y\t%p\0"' list > "$1/now.list" || exit 17
emit "$2/manifest.find" "$1/now.list"
)SH";

// $1 dir, $2 snapshot dir: emits the snapshot's package list (-1 without dpkg) and the host's now.
constexpr const char* kPackagesScript = R"SH(if [ -f "$2/packages" ]; then
  dpkg-query -W -f '${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' > "$1/now.packages" || exit 14
fi
emit "$2/packages" "$1/now.packages"
)SH";

// $1 snapshot dir: extracts its archives over /.
constexpr const char* kExtractScript = R"SH(for f in "$1"/files.tar.gz "$1"/extra.*.tar.gz; do
  [ -e "$f" ] || continue
  tar -x -z -f "$f" -C / -p --same-owner --numeric-owner --xattrs --xattrs-include='*' --acls || exit 16
done
)SH";

// $1 dir, $2 snapshot dir: the manifest of what now exists under its roots, into $1/check.*;
// emits the snapshot's manifest and then that one (.find, .sha, .xattr each).
constexpr const char* kCheckScript = R"SH(existing "$2/roots" "$2/absent" > "$1/check.list" || exit 17
manifest "$1/check" "$1/check.list" || exit 17
emit "$2/manifest.find" "$2/manifest.sha" "$2/manifest.xattr" "$1/check.find" "$1/check.sha" "$1/check.xattr"
)SH";

// $1 older snapshot dir, $2 newer: emits each one's manifest (.find, .sha, .xattr) and packages.
constexpr const char* kPairScript = R"SH(for s in "$1" "$2"; do
  emit "$s/manifest.find" "$s/manifest.sha" "$s/manifest.xattr" "$s/packages" || exit 17
done
)SH";

// $1 dir, $2 path: records the path's current state into every snapshot and tracks it from now on.
constexpr const char* kTrackScript = R"SH(dir=$1; p=$2; t="$dir/late.tmp"
rm -rf -- "$t" && mkdir -- "$t" || exit 18
printf '%s\0' "$p" > "$t/list"
present=0
if [ -e "$p" ] || [ -L "$p" ]; then
  present=1
  tar -c -z -f "$t/extra.tar.gz" --null -T "$t/list" --xattrs --xattrs-include='*' --acls --numeric-owner --one-file-system || exit 18
  manifest "$t/m" "$t/list" || exit 18
fi
for s in "$dir"/snap.*; do
  case $s in *.tmp) continue ;; esac
  [ -d "$s" ] || continue
  if [ $present = 1 ]; then
    n=0; while [ -e "$s/extra.$n.tar.gz" ]; do n=$((n + 1)); done
    cp -- "$t/extra.tar.gz" "$s/extra.$n.tar.gz" || exit 18
    cat -- "$t/list" >> "$s/roots" && cat -- "$t/m.find" >> "$s/manifest.find" &&
      cat -- "$t/m.sha" >> "$s/manifest.sha" && cat -- "$t/m.xattr" >> "$s/manifest.xattr" || exit 18
  else
    cat -- "$t/list" >> "$s/absent" || exit 18
  fi
done
cat -- "$t/list" >> "$dir/tracked" || exit 18
rm -rf -- "$t"
)SH";

constexpr const char* kPackageFormat = "${binary:Package}\\t${Version}\\t${db:Status-Abbrev}\\n";

// Long host-side steps (apt, tar of /etc) get minutes; output is bounded generously for listings.
SandboxLimits JournalLimits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(15);
  l.memory_limit_bytes = 0;
  l.max_output_bytes = std::size_t{128} << 20;
  return l;
}

constexpr std::size_t kMaxReportedProblems = 40;
constexpr const char* kDpkgStatus = "/var/lib/dpkg/status";

std::string Tail(const std::string& s, std::size_t n = 1500) { return s.size() > n ? "…" + s.substr(s.size() - n) : s; }

std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string JoinNul(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += s + '\0';
  return out;
}

// The files a script emitted (see `emit`), in order; nullopt for a missing one.
Result<std::vector<std::optional<std::string>>> SplitEmitted(const std::string& out, std::size_t count) {
  std::vector<std::optional<std::string>> files;
  std::size_t pos = 0;
  while (files.size() < count) {
    std::size_t nl = out.find('\n', pos);
    if (nl == std::string::npos)
      return Status::Internal(fmt::format("undo journal: the host sent {} of {} files", files.size(), count));
    const std::string size = out.substr(pos, nl - pos);
    pos = nl + 1;
    if (size == "-1") {
      files.emplace_back(std::nullopt);
      continue;
    }
    if (size.empty() || size.size() > 12 ||
        !std::all_of(size.begin(), size.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return Status::Internal("undo journal: malformed size line from the host: " + size.substr(0, 40));
    }
    std::size_t n = std::stoull(size);
    if (n > out.size() - pos) return Status::Internal("undo journal: the host's answer was cut short");
    files.emplace_back(out.substr(pos, n));
    pos += n;
  }
  return files;
}

// getfattr writes "\ooo" for bytes it cannot print in a path.
std::string UnescapeOctal(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

Result<UndoManifest> ParseManifest(const std::string& find, const std::string& sha, const std::string& xattr) {
  UndoManifest m;
  for (const std::string& rec : SplitNul(find)) {
    std::vector<std::string> f;
    std::size_t pos = 0;
    for (int i = 0; i < 6; ++i) {
      std::size_t tab = rec.find('\t', pos);
      if (tab == std::string::npos) return Status::Internal("malformed manifest record: " + rec);
      f.push_back(rec.substr(pos, tab - pos));
      pos = tab + 1;
    }
    const std::string path = rec.substr(pos);
    const bool dir = f[0] == "d";
    std::string desc = fmt::format("type={} mode={} uid={} gid={}", f[0], f[1], f[2], f[3]);
    if (!dir) desc += " size=" + f[4];
    if (f[0] == "l") desc += " link=" + f[5];
    m.paths[path] = desc;
  }
  for (const std::string& rec : SplitNul(sha)) {
    std::size_t sep = rec.find("  ");
    if (sep == std::string::npos) return Status::Internal("malformed sha256sum record: " + rec);
    auto it = m.paths.find(rec.substr(sep + 2));
    if (it != m.paths.end()) it->second += " sha256=" + rec.substr(0, sep);
  }
  if (xattr.starts_with("unchecked")) {
    m.xattrs_checked = false;
    return m;
  }
  std::istringstream lines(xattr);
  std::string current;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# file: ")) {
      current = UnescapeOctal(line.substr(8));
    } else if (!line.empty() && !current.empty() && m.paths.count(current)) {
      m.xattrs[current].insert(line);
    }
  }
  for (const auto& [path, set] : m.xattrs) {
    std::string list;
    for (const std::string& a : set) list += (list.empty() ? "" : ",") + a;
    m.paths[path] += " xattrs=" + list;
  }
  return m;
}

struct PackageState {
  std::string version;
  std::string abbrev;  // dpkg's db:Status-Abbrev: want, status, error flag
  char want() const { return abbrev.empty() ? 'u' : abbrev[0]; }
  char status() const { return abbrev.size() < 2 ? 'n' : abbrev[1]; }
  // Unpacked or more (not "not-installed", not "config-files").
  bool installed() const { return status() != 'n' && status() != 'c'; }
  std::string Describe() const { return fmt::format("{} ({})", version, abbrev); }
};

std::map<std::string, PackageState> ParsePackages(const std::string& text) {
  std::map<std::string, PackageState> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::size_t a = line.find('\t');
    std::size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) continue;
    PackageState p{line.substr(a + 1, b - a - 1), line.substr(b + 1)};
    while (!p.abbrev.empty() && p.abbrev.back() == ' ') p.abbrev.pop_back();
    if (p.status() == 'n' && p.want() != 'h') continue;  // purged: as good as never there
    out[line.substr(0, a)] = p;
  }
  return out;
}

// Paths whose recorded state differs between two manifests, sorted; dpkg's status file stands for
// a package list that differs.
std::vector<std::string> DifferingPaths(const UndoManifest& a, const UndoManifest& b,
                                        const std::optional<std::string>& packages_a,
                                        const std::optional<std::string>& packages_b) {
  std::set<std::string> out;
  for (const auto& [path, desc] : a.paths) {
    auto it = b.paths.find(path);
    if (it == b.paths.end() || it->second != desc) out.insert(path);
  }
  for (const auto& [path, desc] : b.paths) {
    if (!a.paths.count(path)) out.insert(path);
  }
  auto described = [](const std::optional<std::string>& text) {
    std::map<std::string, std::string> m;
    if (text) {
      for (const auto& [name, p] : ParsePackages(*text)) m[name] = p.Describe();
    }
    return m;
  };
  if (described(packages_a) != described(packages_b)) out.insert(kDpkgStatus);
  return {out.begin(), out.end()};
}

std::string WantWord(char want) {
  switch (want) {
    case 'i':
      return "install";
    case 'h':
      return "hold";
    case 'r':
      return "deinstall";
    case 'p':
      return "purge";
    default:
      return "unknown";
  }
}

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.starts_with(root) && path[root.size()] == '/');
}

Status CheckAbsolute(const std::string& path, std::string_view what) {
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos ||
      path.find("/../") != std::string::npos || path.ends_with("/..")) {
    return Status::InvalidArgument(
        fmt::format("undo journal: {} '{}' must be an absolute path without '..'", what, path));
  }
  return Status::OK();
}

}  // namespace

std::vector<std::string> DefaultUndoRoots() {
  return {"/etc",
          "/boot/grub",
          "/boot/grub2",
          "/root",
          "/usr/share/pam-configs",
          "/var/spool/cron",
          "/var/lib/dpkg/statoverride",
          "/var/lib/dpkg/diversions",
          "/var/lib/dpkg/alternatives"};
}

Result<ProcessResult> UndoJournal::Script(const char* script, std::vector<std::string> args,
                                          std::string_view stdin_data) {
  std::vector<std::string> argv = {"/bin/sh", "-c", std::string(kPrelude) + script, "temper-undo"};
  argv.insert(argv.end(), args.begin(), args.end());
  return shell_->Exec(argv, stdin_data, JournalLimits());
}

Result<UndoJournal> UndoJournal::Open(RemoteShell& shell, UndoJournalOptions options, const Logger& log, Env& env) {
  TEMPER_RETURN_IF_ERROR(CheckAbsolute(options.dir, "dir"));
  for (const std::string& r : options.roots) TEMPER_RETURN_IF_ERROR(CheckAbsolute(r, "root"));
  if (options.keep_recent < 1) return Status::InvalidArgument("undo journal: keep_recent must be at least 1");
  UndoJournal j(shell, std::move(options), log, env);
  TEMPER_RETURN_IF_ERROR(j.Load());
  if (j.ids_.empty()) {
    log.Info("{}: starting the undo journal in {} (snapshot 0: the host as temper found it)", shell.host_name(),
             j.options_.dir);
    TEMPER_RETURN_IF_ERROR(j.TakeSnapshot(0));
    j.ids_ = {0};
    j.depth_ = 0;
  }
  return j;
}

Status UndoJournal::Load() {
  std::vector<std::string> args = {options_.dir};
  args.insert(args.end(), options_.roots.begin(), options_.roots.end());
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Script(kOpenScript, args));
  if (r.exit_code == 20) {
    std::string tool = r.out.substr(r.out.find('=') + 1);
    while (!tool.empty() && tool.back() == '\n') tool.pop_back();
    return Status::FailedPrecondition(
        fmt::format("{}: the undo journal needs {} on the host, which is missing", shell_->host_name(), tool));
  }
  if (!r.Succeeded()) {
    return Status::Internal(fmt::format("{}: opening the undo journal in {} failed ({}): {}", shell_->host_name(),
                                        options_.dir, r.Describe(), Tail(r.err)));
  }
  std::size_t marker = r.out.find("tracked\n");
  if (marker == std::string::npos)
    return Status::Internal("undo journal: the host's answer has no tracked roots: " + Tail(r.out));
  roots_ = SplitNul(r.out.substr(marker + 8));
  ids_.clear();
  std::istringstream lines(r.out.substr(0, marker));
  bool dpkg = true;
  for (std::string line; std::getline(lines, line);) {
    if (line == "xattrs=no") xattrs_checked_ = false;
    if (line == "dpkg=no") dpkg = false;
    if (line.starts_with("last_id=")) {
      const std::string id = line.substr(8);
      if (id.empty() || id.size() > 9 ||
          !std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        return Status::DataLoss(
            fmt::format("{}: {}/last_id holds '{}', not a snapshot id", shell_->host_name(), options_.dir, id));
      }
      last_id_ = static_cast<std::uint32_t>(std::stoul(id));
    }
    if (line.starts_with("snapshot=")) {
      const std::string id = line.substr(9);
      if (!id.empty() &&
          std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        ids_.push_back(static_cast<std::uint32_t>(std::stoul(id)));
      }
    }
  }
  std::sort(ids_.begin(), ids_.end());
  depth_ = ids_.empty() ? 0 : ids_.back();
  last_id_ = std::max(last_id_, depth_);
  if (!xattrs_checked_) {
    log_->Warning(
        "{}: no getfattr on the host (apt-get install attr): reverts restore xattrs and ACLs but cannot check them",
        shell_->host_name());
  }
  if (!dpkg)
    log_->Warning("{}: no dpkg-query on the host: the undo journal restores files but not packages",
                  shell_->host_name());
  return Status::OK();
}

bool UndoJournal::Covers(const std::string& path) const {
  return std::any_of(roots_.begin(), roots_.end(), [&](const std::string& r) { return IsUnder(path, r); });
}

Status UndoJournal::TakeSnapshot(std::uint32_t id) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Script(kSnapshotScript, {options_.dir, std::to_string(id)}));
  if (!r.Succeeded()) {
    return Status::Internal(fmt::format("{}: recording undo snapshot {} in {} failed ({}): {}", shell_->host_name(), id,
                                        options_.dir, r.Describe(), Tail(r.err)));
  }
  return Status::OK();
}

Status UndoJournal::Drop(const std::vector<std::uint32_t>& ids) {
  if (ids.empty()) return Status::OK();
  std::vector<std::string> argv = {"rm", "-rf", "--"};
  for (std::uint32_t id : ids) argv.push_back(fmt::format("{}/snap.{}", options_.dir, id));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell_->Exec(argv, {}, JournalLimits()));
  if (!r.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: deleting undo snapshots failed ({}): {}", shell_->host_name(), r.Describe(), Tail(r.err)));
  }
  for (std::uint32_t id : ids) ids_.erase(std::remove(ids_.begin(), ids_.end(), id), ids_.end());
  return Status::OK();
}

Result<std::uint32_t> UndoJournal::Snapshot() {
  const std::uint32_t id = last_id_ + 1;
  last_id_ = id;  // TakeSnapshot records it on the host first
  TEMPER_RETURN_IF_ERROR(TakeSnapshot(id));
  TEMPER_DCHECK(ids_.empty() || id > ids_.back(), "snapshot ids grow with every snapshot and are never reused");
  ids_.push_back(id);
  depth_ = id;
  // Keep 0 (the host as found) and the newest keep_recent.
  std::vector<std::uint32_t> old;
  std::size_t recent = 0;
  for (auto it = ids_.rbegin(); it != ids_.rend(); ++it) {
    if (*it == 0) continue;
    if (++recent > options_.keep_recent) old.push_back(*it);
  }
  TEMPER_RETURN_IF_ERROR(Drop(old));
  return id;
}

Status UndoJournal::RevertPackages(const std::string& snap, RevertReport& report, std::vector<std::string>& problems) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult listed, Script(kPackagesScript, {options_.dir, snap}));
  if (!listed.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: dpkg-query failed ({}): {}", shell_->host_name(), listed.Describe(), Tail(listed.err)));
  }
  TEMPER_ASSIGN_OR_RETURN(auto lists, SplitEmitted(listed.out, 2));
  if (!lists[0]) return Status::OK();  // the host had no dpkg at the snapshot
  if (!lists[1]) return Status::Internal(fmt::format("{}: dpkg-query wrote no package list", shell_->host_name()));
  const std::vector<std::string> query = {"dpkg-query", "-W", "-f", kPackageFormat};
  const std::optional<std::string>& before_text = lists[0];
  const std::optional<std::string>& now_text = lists[1];
  const auto before = ParsePackages(*before_text);
  const auto now = ParsePackages(*now_text);

  std::vector<std::string> install, purge, remove;
  for (const auto& [name, b] : before) {
    auto n = now.find(name);
    bool present = n != now.end() && n->second.installed();
    if (b.installed()) {
      if (!present || n->second.version != b.version) install.push_back(name + "=" + b.version);
    } else if (b.status() == 'c') {
      // Only its configuration was left: put the package back if it went entirely, then remove it.
      if (n == now.end() || n->second.status() == 'n') install.push_back(name + "=" + b.version);
      if (n == now.end() || n->second.status() != 'c') remove.push_back(name);
    }
  }
  for (const auto& [name, n] : now) {
    auto b = before.find(name);
    if (n.installed() && (b == before.end() || (!b->second.installed() && b->second.status() != 'c')))
      purge.push_back(name);
  }

  auto run = [&](std::vector<std::string> argv, const std::vector<std::string>& names,
                 std::string_view what) -> Status {
    if (names.empty()) return Status::OK();
    argv.insert(argv.end(), names.begin(), names.end());
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell_->Exec(argv, {}, JournalLimits()));
    if (!r.Succeeded()) {
      problems.push_back(
          fmt::format("{} {} failed ({}): {}", what, Join(names, " "), r.Describe(), Tail(r.err + r.out, 800)));
    }
    return Status::OK();
  };
  const std::vector<std::string> env = {"env", "DEBIAN_FRONTEND=noninteractive"};
  auto with_env = [&](std::vector<std::string> rest) {
    std::vector<std::string> v = env;
    v.insert(v.end(), rest.begin(), rest.end());
    return v;
  };
  TEMPER_RETURN_IF_ERROR(run(
      with_env({"apt-get", "install", "-y", "-q", "--allow-downgrades", "--no-install-recommends", "-o",
                "Dpkg::Use-Pty=0", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}),
      install, "reinstalling"));
  TEMPER_RETURN_IF_ERROR(run(with_env({"dpkg", "--purge"}), purge, "purging"));
  TEMPER_RETURN_IF_ERROR(run(with_env({"dpkg", "--remove"}), remove, "removing"));
  report.packages_installed = install;
  report.packages_purged = purge;

  // Selections (hold, install, ...) as they were.
  TEMPER_ASSIGN_OR_RETURN(ProcessResult mid, shell_->Exec(query, {}, JournalLimits()));
  std::string selections;
  for (const auto& [name, n] : ParsePackages(mid.out)) {
    auto b = before.find(name);
    if (b != before.end() && b->second.want() != n.want()) selections += name + " " + WantWord(b->second.want()) + "\n";
  }
  if (!selections.empty()) {
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r, shell_->Exec({"dpkg", "--set-selections"}, selections, JournalLimits()));
    if (!r.Succeeded())
      problems.push_back(fmt::format("dpkg --set-selections failed ({}): {}", r.Describe(), Tail(r.err)));
  }

  TEMPER_ASSIGN_OR_RETURN(ProcessResult after_run, shell_->Exec(query, {}, JournalLimits()));
  if (!after_run.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: dpkg-query failed ({}): {}", shell_->host_name(), after_run.Describe(), Tail(after_run.err)));
  }
  const auto after = ParsePackages(after_run.out);
  std::set<std::string> names;
  for (const auto& [name, p] : before) names.insert(name);
  for (const auto& [name, p] : after) names.insert(name);
  for (const std::string& name : names) {
    auto b = before.find(name);
    auto a = after.find(name);
    std::string was = b == before.end() ? "absent" : b->second.Describe();
    std::string is = a == after.end() ? "absent" : a->second.Describe();
    if (was != is) problems.push_back(fmt::format("package {}: was {}, is {}", name, was, is));
  }
  return Status::OK();
}

Status UndoJournal::RevertFiles(const std::string& snap, RevertReport& report) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult listed, Script(kListScript, {options_.dir, snap}));
  if (!listed.Succeeded()) {
    return Status::Internal(fmt::format("{}: listing the undo roots failed ({}): {}", shell_->host_name(),
                                        listed.Describe(), Tail(listed.err)));
  }
  TEMPER_ASSIGN_OR_RETURN(auto files, SplitEmitted(listed.out, 2));
  if (!files[0] || !files[1])
    return Status::Internal(fmt::format("{}: snapshot {} has no manifest", shell_->host_name(), snap));
  std::map<std::string, std::string> kept;  // path -> type at the snapshot
  for (const std::string& rec : SplitNul(*files[0])) {
    std::size_t pos = 0;
    for (int i = 0; i < 6 && pos != std::string::npos; ++i) {
      pos = rec.find('\t', pos);
      if (pos != std::string::npos) ++pos;
    }
    if (pos == std::string::npos) return Status::Internal("malformed manifest record in " + snap + ": " + rec);
    kept[rec.substr(pos)] = rec.substr(0, rec.find('\t'));
  }
  std::vector<std::string> doomed;
  for (const std::string& rec : SplitNul(*files[1])) {
    std::size_t tab = rec.find('\t');
    if (tab == std::string::npos) continue;
    const std::string type = rec.substr(0, tab), path = rec.substr(tab + 1);
    auto it = kept.find(path);
    if (it == kept.end() || it->second != type) doomed.push_back(path);
  }
  // A removed directory takes its contents along: name only the topmost.
  std::sort(doomed.begin(), doomed.end());
  std::vector<std::string> top;
  for (const std::string& p : doomed) {
    if (top.empty() || !IsUnder(p, top.back())) top.push_back(p);
  }
  if (!top.empty()) {
    TEMPER_ASSIGN_OR_RETURN(ProcessResult r,
                            shell_->Exec({"xargs", "-0", "-r", "rm", "-rf", "--"}, JoinNul(top), JournalLimits()));
    if (!r.Succeeded()) {
      return Status::Internal(fmt::format("{}: removing paths added since the snapshot failed ({}): {}",
                                          shell_->host_name(), r.Describe(), Tail(r.err)));
    }
  }
  report.paths_removed = top.size();
  TEMPER_ASSIGN_OR_RETURN(ProcessResult x, Script(kExtractScript, {snap}));
  if (!x.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: extracting {} failed ({}): {}", shell_->host_name(), snap, x.Describe(), Tail(x.err)));
  }
  return Status::OK();
}

Status UndoJournal::CheckHeld(std::uint32_t id) const {
  if (id > last_id_) {
    return Status::OutOfRange(
        fmt::format("{}: undo snapshot {} does not exist (the latest taken is {})", shell_->host_name(), id, last_id_));
  }
  if (std::find(ids_.begin(), ids_.end(), id) == ids_.end()) {
    return Status::NotFound(
        fmt::format("{}: undo snapshot {} is gone: a revert went below it, or the journal dropped it "
                    "(it keeps 0 and the newest {}; held: {})",
                    shell_->host_name(), id, options_.keep_recent, fmt::join(ids_, ", ")));
  }
  return Status::OK();
}

Result<std::pair<UndoManifest, UndoManifest>> UndoJournal::SnapshotAndNow(const std::string& snap) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Script(kCheckScript, {options_.dir, snap}));
  if (!r.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: listing the undo roots failed ({}): {}", shell_->host_name(), r.Describe(), Tail(r.err)));
  }
  TEMPER_ASSIGN_OR_RETURN(auto parts, SplitEmitted(r.out, 6));
  for (const auto& p : parts) {
    if (!p) return Status::Internal(fmt::format("{}: a manifest of {} is missing", shell_->host_name(), snap));
  }
  TEMPER_ASSIGN_OR_RETURN(UndoManifest want, ParseManifest(*parts[0], *parts[1], *parts[2]));
  TEMPER_ASSIGN_OR_RETURN(UndoManifest have, ParseManifest(*parts[3], *parts[4], *parts[5]));
  return std::make_pair(std::move(want), std::move(have));
}

Status UndoJournal::CompareFiles(const std::string& snap, std::vector<std::string>& problems) {
  UndoManifest want, have;
  for (int round = 0; round < 2; ++round) {
    TEMPER_ASSIGN_OR_RETURN(auto manifests, SnapshotAndNow(snap));
    want = std::move(manifests.first);
    have = std::move(manifests.second);
    // tar sets the archived xattrs on a directory it finds in place but leaves any others there:
    // remove those (once) and look again.
    std::string extra;
    for (const auto& [path, lines] : have.xattrs) {
      auto w = want.xattrs.find(path);
      for (const std::string& line : lines) {
        std::string name = line.substr(0, line.find('='));
        bool wanted = w != want.xattrs.end() &&
                      std::any_of(w->second.begin(), w->second.end(),
                                  [&](const std::string& l) { return l.substr(0, l.find('=')) == name; });
        if (!wanted && want.paths.count(path)) extra += name + '\0' + path + '\0';
      }
    }
    if (extra.empty() || round == 1) break;
    TEMPER_ASSIGN_OR_RETURN(ProcessResult x, shell_->Exec({"xargs", "-0", "-r", "-n", "2", "setfattr", "-h", "-x"},
                                                          extra, JournalLimits()));
    if (!x.Succeeded())
      problems.push_back(fmt::format("removing xattrs added since the snapshot failed: {}", Tail(x.err)));
  }
  std::set<std::string> paths;
  for (const auto& [p, d] : want.paths) paths.insert(p);
  for (const auto& [p, d] : have.paths) paths.insert(p);
  for (const std::string& p : paths) {
    auto w = want.paths.find(p);
    auto h = have.paths.find(p);
    if (w == want.paths.end())
      problems.push_back(fmt::format("{}: did not exist at the snapshot, still exists ({})", p, h->second));
    else if (h == have.paths.end()) problems.push_back(fmt::format("{}: missing (was {})", p, w->second));
    else if (w->second != h->second) problems.push_back(fmt::format("{}: was {}; is {}", p, w->second, h->second));
  }
  return Status::OK();
}

Result<RevertReport> UndoJournal::Revert(std::uint32_t id) {
  TEMPER_RETURN_IF_ERROR(CheckHeld(id));
  auto start = env_->SteadyNow();
  const std::string snap = fmt::format("{}/snap.{}", options_.dir, id);
  RevertReport report;
  std::vector<std::string> problems;
  // Packages first: their removal and reinstallation change files under the roots, which the
  // snapshot's archive then puts back exactly.
  TEMPER_RETURN_IF_ERROR(RevertPackages(snap, report, problems));
  TEMPER_RETURN_IF_ERROR(RevertFiles(snap, report));
  TEMPER_RETURN_IF_ERROR(CompareFiles(snap, problems));
  report.seconds = std::chrono::duration<double>(env_->SteadyNow() - start).count();
  if (!problems.empty()) {
    std::string list;
    for (std::size_t i = 0; i < problems.size() && i < kMaxReportedProblems; ++i) list += "\n  " + problems[i];
    if (problems.size() > kMaxReportedProblems)
      list += fmt::format("\n  … and {} more", problems.size() - kMaxReportedProblems);
    return Status::DataLoss(
        fmt::format("{}: revert to undo snapshot {} is not exact; {} difference(s) remain, the host "
                    "needs a human:{}",
                    shell_->host_name(), id, problems.size(), list));
  }
  std::vector<std::uint32_t> later;
  for (std::uint32_t s : ids_) {
    if (s > id) later.push_back(s);
  }
  TEMPER_RETURN_IF_ERROR(Drop(later));
  depth_ = id;
  TEMPER_DCHECK(!ids_.empty() && ids_.back() == id, "after Revert(n) the newest snapshot held is n");
  return report;
}

Result<std::vector<std::string>> UndoJournal::ChangedSince(std::uint32_t id) {
  TEMPER_RETURN_IF_ERROR(CheckHeld(id));
  const std::string snap = fmt::format("{}/snap.{}", options_.dir, id);
  TEMPER_ASSIGN_OR_RETURN(auto manifests, SnapshotAndNow(snap));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult listed, Script(kPackagesScript, {options_.dir, snap}));
  if (!listed.Succeeded()) {
    return Status::Internal(
        fmt::format("{}: dpkg-query failed ({}): {}", shell_->host_name(), listed.Describe(), Tail(listed.err)));
  }
  TEMPER_ASSIGN_OR_RETURN(auto packages, SplitEmitted(listed.out, 2));
  return DifferingPaths(manifests.first, manifests.second, packages[0], packages[1]);
}

Result<std::vector<std::string>> UndoJournal::Difference(std::uint32_t older, std::uint32_t newer) {
  TEMPER_RETURN_IF_ERROR(CheckHeld(older));
  TEMPER_RETURN_IF_ERROR(CheckHeld(newer));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Script(kPairScript, {fmt::format("{}/snap.{}", options_.dir, older),
                                                                fmt::format("{}/snap.{}", options_.dir, newer)}));
  if (!r.Succeeded()) {
    return Status::Internal(fmt::format("{}: reading undo snapshots {} and {} failed ({}): {}", shell_->host_name(),
                                        older, newer, r.Describe(), Tail(r.err)));
  }
  TEMPER_ASSIGN_OR_RETURN(auto parts, SplitEmitted(r.out, 8));
  for (int i : {0, 1, 2, 4, 5, 6}) {
    if (!parts[i]) {
      return Status::Internal(
          fmt::format("{}: a manifest of undo snapshot {} is missing", shell_->host_name(), i < 4 ? older : newer));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(UndoManifest a, ParseManifest(*parts[0], *parts[1], *parts[2]));
  TEMPER_ASSIGN_OR_RETURN(UndoManifest b, ParseManifest(*parts[4], *parts[5], *parts[6]));
  return DifferingPaths(a, b, parts[3], parts[7]);
}

Status UndoJournal::Track(const std::string& path) {
  TEMPER_RETURN_IF_ERROR(CheckAbsolute(path, "path"));
  if (Covers(path)) return Status::OK();
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, Script(kTrackScript, {options_.dir, path}));
  if (!r.Succeeded()) {
    return Status::Internal(fmt::format("{}: adding {} to the undo journal failed ({}): {}", shell_->host_name(), path,
                                        r.Describe(), Tail(r.err)));
  }
  roots_.push_back(path);
  return Status::OK();
}

}  // namespace temper::stig
