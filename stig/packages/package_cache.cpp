#include "stig/packages/package_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platform/host_disk.h"
#include "platform/process.h"
#include "platform/sandbox_caps.h"
#include "stig/packages/apt_output.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// Where a sandbox sees the cache: inside a tmpfs over the target's own /var/cache/apt, which apt
// only uses for downloads and its binary caches, so hiding it for one command loses nothing.
constexpr const char* kSandboxAptCache = "/var/cache/apt";
constexpr const char* kSandboxArchives = "/var/cache/apt/archives";
constexpr const char* kSandboxConf = "/var/cache/apt/temper";

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

Status WriteText(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) return Status::IOError("writing " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError("renaming " + tmp.string() + ": " + ec.message());
  return Status::OK();
}

std::string ReadText(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An flock on `dir`/lock for the lifetime of the object.
class DirLock {
 public:
  static Result<DirLock> Acquire(const fs::path& dir) {
    std::string path = (dir / "lock").string();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "opening " + path);
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        int e = errno;
        ::close(fd);
        return Status::FromErrno(e, "locking " + path);
      }
    }
    return DirLock(fd);
  }
  DirLock(DirLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

// A file in work/ holding one target's dpkg status for the length of one call.
class StatusCopy {
 public:
  static Result<StatusCopy> Write(const fs::path& work, std::string_view status) {
    std::string path = (work / "status-XXXXXX").string();
    int fd = ::mkstemp(path.data());
    if (fd < 0) return Status::FromErrno(errno, "creating a file in " + work.string());
    std::size_t off = 0;
    while (off < status.size()) {
      ssize_t n = ::write(fd, status.data() + off, status.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = errno;
        ::close(fd);
        ::unlink(path.c_str());
        return Status::FromErrno(e, "writing " + path);
      }
      off += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return StatusCopy(std::move(path));
  }
  StatusCopy(StatusCopy&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  StatusCopy& operator=(StatusCopy&&) = delete;
  StatusCopy(const StatusCopy&) = delete;
  ~StatusCopy() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  explicit StatusCopy(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// apt's own explanation: its E:/W:/Err: lines (with an Err line's indented detail) and the
// unmet-dependency report, at most ~2 KB.
std::string AptExplanation(const ProcessResult& r) {
  std::string out;
  bool in_report = false, after_err = false;
  for (const std::string& line : OutputLines(r.out + "\n" + r.err)) {
    if (Contains(line, "The following packages have unmet dependencies")) in_report = true;
    bool detail = after_err && line.starts_with("  ");
    after_err = line.starts_with("Err:") || detail;
    if (line.starts_with("E: ") || line.starts_with("W: ") || line.starts_with("Err:") || detail ||
        (in_report && !line.empty())) {
      out += line + "\n";
    }
    if (line.starts_with("E: ")) in_report = false;
  }
  if (out.empty()) out = r.err.empty() ? r.out : r.err;
  if (out.size() > 2000) out = "…" + out.substr(out.size() - 2000);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsNetworkFailure(const std::string& text) {
  for (const char* s : {"Could not resolve", "Temporary failure resolving", "Could not connect", "Connection failed",
                        "Network is unreachable", "No route to host", "Connection timed out", "Failed to fetch"}) {
    if (Contains(text, s)) return true;
  }
  return false;
}

// Names the packages apt could not find, if that is why it failed.
std::vector<std::string> UnknownPackages(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : OutputLines(text)) {
    for (std::string_view prefix : {"E: Unable to locate package ", "E: Package '"}) {
      if (!line.starts_with(prefix)) continue;
      std::string rest = line.substr(prefix.size());
      if (prefix == "E: Package '") {
        if (!Contains(rest, "has no installation candidate")) continue;
        rest = rest.substr(0, rest.find('\''));
      }
      out.push_back(rest);
    }
  }
  return out;
}

// "%2b" -> "+": apt percent-encodes file: URIs.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One line of `apt-get --print-uris`: 'URI' FILE SIZE HASH.
struct PrintedUri {
  std::string uri;
  std::string file_name;
  std::uint64_t size = 0;
};

std::vector<PrintedUri> ParsePrintUris(const std::string& out) {
  std::vector<PrintedUri> uris;
  for (const std::string& line : OutputLines(out)) {
    if (!line.starts_with("'")) continue;
    std::size_t close = line.find('\'', 1);
    if (close == std::string::npos) continue;
    PrintedUri u;
    u.uri = line.substr(1, close - 1);
    std::istringstream rest(line.substr(close + 1));
    rest >> u.file_name >> u.size;
    if (!u.file_name.empty()) uris.push_back(std::move(u));
  }
  return uris;
}

// Bytes of the .debs in the cache's archives/ (apt's partial/ downloads left out).
std::uint64_t ArchivesBytes(const fs::path& archives) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(archives, ec)) {
    if (e.path().extension() == ".deb" && e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

// OK when the files of `files` the cache lacks fit under its cap and on its host file system
// beside the reserve; ResourceExhausted naming the sizes otherwise. apt would otherwise download
// whatever the archive lists, for any number of targets, until the disk is full.
Status CheckRoomToFetch(const PackageCacheOptions& o, const std::vector<std::string>& packages,
                        const std::vector<PackageFile>& files) {
  const fs::path archives = fs::path(o.dir) / "archives";
  std::uint64_t needed = 0;
  for (const PackageFile& f : files) {
    std::error_code ec;
    if (!f.host_path.starts_with(archives.string() + "/")) continue;  // a file: mirror's, used in place
    if (fs::is_regular_file(f.host_path, ec) && fs::file_size(f.host_path, ec) == f.size) continue;
    needed += f.size;
  }
  const std::uint64_t held = ArchivesBytes(archives);
  if (held + needed > o.max_bytes) {
    return Status::ResourceExhausted(fmt::format(
        "fetching {} for {} would take the package cache {} to {}, past its cap of {} (package_cache.max_size in "
        "temperd.yaml; `apt-get -c {}/apt.conf clean` empties it)",
        FormatBytes(needed), Join(packages, " "), archives.string(), FormatBytes(held + needed),
        FormatBytes(o.max_bytes), o.dir));
  }
  TEMPER_ASSIGN_OR_RETURN(HostDiskSpace space, HostDiskSpaceOf(o.dir, o.host_reserve_bytes));
  return CheckRoomFor(space, fmt::format("fetching {} into the package cache", Join(packages, " ")), needed);
}

}  // namespace

std::vector<std::string> PackageCacheOptions::DefaultSources() {
  return {"deb http://deb.debian.org/debian bookworm main"};
}

Status PackageCacheOptions::Validate() const {
  if (dir.empty() || dir[0] != '/')
    return Status::InvalidArgument("package cache dir must be an absolute path: \"" + dir + "\"");
  if (dir.find_first_of("\"\n\\;{}") != std::string::npos) {
    return Status::InvalidArgument("package cache dir \"" + dir +
                                   "\" contains a character apt's configuration cannot quote");
  }
  if (sources.empty()) return Status::InvalidArgument("package cache sources: at least one apt source is needed");
  for (std::size_t i = 0; i < sources.size(); ++i) {
    Status valid = ValidateAptSource(sources[i]);
    if (!valid.ok()) return Status::InvalidArgument(fmt::format("package cache sources[{}]: {}", i, valid.message()));
  }
  if (max_bytes == 0) return Status::InvalidArgument("package cache max_size must be more than 0 bytes");
  if (max_index_age.count() < 0 || apt_timeout.count() <= 0) {
    return Status::InvalidArgument("package cache max_index_age must be >= 0 and apt_timeout > 0");
  }
  return Status::OK();
}

Status ValidateAptSource(std::string_view line) {
  std::istringstream words{std::string(line)};
  int n = 0;
  for (std::string w; words >> w;) ++n;
  // "deb", URI and SUITE at least (options in [...] add words, which only makes n larger).
  if (!line.starts_with("deb ") || line.find_first_of("\n\r") != std::string_view::npos || n < 3) {
    return Status::InvalidArgument(
        fmt::format("\"{}\" is not a one-line apt source (\"deb [options] URI SUITE [COMPONENT...]\")", line));
  }
  return Status::OK();
}

bool IsPackageName(std::string_view name) {
  if (name.size() < 2 || name.size() > 128) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

Result<PackageCache> PackageCache::Open(PackageCacheOptions options) {
  TEMPER_RETURN_IF_ERROR(options.Validate());
  if (::access("/usr/bin/apt-get", X_OK) != 0) {
    return Status::FailedPrecondition("the package cache needs the host's /usr/bin/apt-get (Debian's apt)");
  }
  fs::path d = options.dir;
  std::error_code ec;
  for (const char* sub : {"lists/partial", "archives/partial", "apt-cache", "work/resolve/partial", "empty.d", "log"}) {
    fs::create_directories(d / sub, ec);
    if (ec) return Status::IOError(fmt::format("creating {}: {}", (d / sub).string(), ec.message()));
  }
  // apt downloads as its unprivileged _apt user, which must reach partial/ through these.
  for (const char* sub : {"", "lists", "archives"}) {
    fs::permissions(d / sub,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                        fs::perms::others_exec,
                    fs::perm_options::replace, ec);
  }
  TEMPER_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(d));
  TEMPER_RETURN_IF_ERROR(WriteText(d / "sources.list", Join(options.sources, "\n") + "\n"));
  const std::string dir = d.string();
  // Nothing of the host's apt configuration: its sources, proxies, hooks and pins are not ours.
  // One retry (apt's default is three, with back-off): an offline host answers in about a second.
  TEMPER_RETURN_IF_ERROR(
      WriteText(d / "apt.conf", fmt::format(R"(// Written by temper (stig/packages/package_cache.cpp).
Dir::Etc::Parts "{0}/empty.d";
Dir::Etc::SourceList "{0}/sources.list";
Dir::Etc::SourceParts "{0}/empty.d";
Dir::Etc::Preferences "{0}/empty.d/none";
Dir::Etc::PreferencesParts "{0}/empty.d";
Dir::State::Lists "{0}/lists";
Dir::State::extended_states "{0}/empty.d/none";
Dir::Cache "{0}/apt-cache";
Dir::Cache::Archives "{0}/archives";
Dir::Log "{0}/log";
Acquire::Languages "none";
Acquire::Retries "1";
APT::Install-Recommends "true";
APT::Install-Suggests "false";
)",
                                            dir)));
  // What the target's apt reads inside the sandbox, at the paths SandboxFor mounts.
  TEMPER_RETURN_IF_ERROR(
      WriteText(d / "sandbox-apt.conf", fmt::format(R"(// Written by temper: the host-side package cache.
Dir::Etc::SourceList "{0}/sources.list";
Dir::Etc::SourceParts "{0}/empty.d";
Dir::State::Lists "{0}/lists";
Dir::Cache::Archives "{1}";
)",
                                                    kSandboxConf, kSandboxArchives)));
  return PackageCache(std::move(options));
}

namespace {

Result<ProcessResult> RunApt(const PackageCacheOptions& o, std::vector<std::string> args) {
  ProcessSpec p;
  p.argv = {"/usr/bin/apt-get"};
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  p.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "APT_CONFIG=" + o.dir + "/apt.conf", "LC_ALL=C",
           "DEBIAN_FRONTEND=noninteractive"};
  // An operator's proxy for reaching the archive is the daemon's environment's.
  for (const char* name : {"http_proxy", "https_proxy", "no_proxy"}) {
    if (const char* v = std::getenv(name)) p.env.push_back(fmt::format("{}={}", name, v));
  }
  p.timeout = o.apt_timeout;
  p.max_output_bytes = 8 << 20;
  return RunProcess(p);
}

std::string SourcesText(const PackageCacheOptions& o) { return Join(o.sources, "\n") + "\n"; }

Status UpdateLocked(const PackageCacheOptions& o) {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunApt(o, {"update", "-q", "--error-on=any"}));
  if (!r.Succeeded()) {
    std::string why = AptExplanation(r);
    std::string msg = fmt::format("updating the package indexes of {} from {} failed ({}):\n{}", o.dir,
                                  Join(o.sources, "; "), r.Describe(), why);
    if (r.timed_out || IsNetworkFailure(why)) return Status::Unavailable("no network to the package sources: " + msg);
    return Status::FailedPrecondition(msg);
  }
  // Drop the files of versions the archive no longer has, so the cache does not grow forever.
  TEMPER_ASSIGN_OR_RETURN(ProcessResult clean, RunApt(o, {"autoclean", "-q"}));
  if (!clean.Succeeded()) {
    return Status::Internal(
        fmt::format("apt-get autoclean in {} failed ({}): {}", o.dir, clean.Describe(), AptExplanation(clean)));
  }
  return WriteText(fs::path(o.dir) / "indexes.stamp", SourcesText(o));
}

// Refreshes the indexes when they are missing, for other sources, or older than max_index_age.
// Returns a note when stale indexes had to be used.
Result<std::string> EnsureIndexes(const PackageCacheOptions& o) {
  fs::path stamp = fs::path(o.dir) / "indexes.stamp";
  std::error_code ec;
  bool current = ReadText(stamp) == SourcesText(o);
  if (current) {
    auto age = fs::file_time_type::clock::now() - fs::last_write_time(stamp, ec);
    if (!ec && age <= o.max_index_age) return std::string();
  }
  Status updated = UpdateLocked(o);
  if (updated.ok()) return std::string();
  if (current && updated.code() == StatusCode::kUnavailable) {
    return "the package indexes could not be refreshed, so older ones were used: " + updated.message();
  }
  return updated;
}

Status ResolutionError(const PackageCacheOptions& o, const std::vector<std::string>& packages, const ProcessResult& r) {
  std::string why = AptExplanation(r);
  std::string all = r.out + "\n" + r.err;
  std::vector<std::string> unknown = UnknownPackages(all);
  if (!unknown.empty()) {
    return Status::NotFound(fmt::format("{} {} not in the archive ({}):\n{}", Join(unknown, ", "),
                                        unknown.size() == 1 ? "is" : "are", Join(o.sources, "; "), why));
  }
  if (Contains(all, "unmet dependencies") || Contains(all, "Unable to correct problems") ||
      Contains(all, "Broken packages") || Contains(all, "Conflicts")) {
    return Status::FailedPrecondition(
        fmt::format("the dependencies of {} cannot be satisfied on this target:\n{}", Join(packages, " "), why));
  }
  if (r.timed_out || IsNetworkFailure(why)) {
    return Status::Unavailable(fmt::format("no network to the package sources ({}): {}", Join(o.sources, "; "), why));
  }
  return Status::Internal(
      fmt::format("apt-get could not resolve {} ({}):\n{}", Join(packages, " "), r.Describe(), why));
}

}  // namespace

Status PackageCache::Update() const {
  TEMPER_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(options_.dir));
  return UpdateLocked(options_);
}

Result<ResolvedPackages> PackageCache::Fetch(std::string_view dpkg_status,
                                             const std::vector<std::string>& packages) const {
  if (packages.empty()) return Status::InvalidArgument("no package names given");
  for (const std::string& name : packages) {
    if (!IsPackageName(name)) {
      return Status::InvalidArgument(fmt::format(
          "\"{}\" is not a Debian package name (lower-case letters, digits, '+', '-', '.'; no options or patterns)",
          name));
    }
  }
  const fs::path d = options_.dir;
  TEMPER_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(d));
  ResolvedPackages out;
  out.requested = packages;
  TEMPER_ASSIGN_OR_RETURN(out.notes, EnsureIndexes(options_));
  TEMPER_ASSIGN_OR_RETURN(StatusCopy status, StatusCopy::Write(d / "work", dpkg_status));

  for (int round = 0;; ++round) {
    // Resolving against an empty archives directory makes apt list every file, cached or not.
    std::vector<std::string> args = {"install", "-y",
                                     "-q",      "--print-uris",
                                     "-o",      "Dir::State::status=" + status.path(),
                                     "-o",      "Dir::Cache::Archives=" + (d / "work/resolve").string()};
    args.insert(args.end(), packages.begin(), packages.end());
    TEMPER_ASSIGN_OR_RETURN(ProcessResult resolved, RunApt(options_, args));
    if (!resolved.Succeeded()) return ResolutionError(options_, packages, resolved);
    out.files.clear();
    bool missing = false;
    for (const PrintedUri& u : ParsePrintUris(resolved.out)) {
      PackageFile f{u.file_name, "", u.size};
      if (u.uri.starts_with("file:")) {
        std::string path = PercentDecode(u.uri.substr(5));
        if (path.starts_with("//")) path = path.substr(2);  // file:///srv/x
        f.host_path = fs::path(path).lexically_normal().string();
        std::error_code ec;
        if (!fs::is_regular_file(f.host_path, ec)) {
          return Status::NotFound(
              fmt::format("{} is listed in the mirror's index but missing: {}", u.file_name, f.host_path));
        }
      } else {
        f.host_path = (d / "archives" / u.file_name).string();
        std::error_code ec;
        const bool cached = fs::is_regular_file(f.host_path, ec) && fs::file_size(f.host_path, ec) == u.size;
        missing = missing || !cached;
      }
      out.files.push_back(std::move(f));
    }
    if (!missing) return out;
    TEMPER_RETURN_IF_ERROR(CheckRoomToFetch(options_, packages, out.files));

    std::vector<std::string> download = {"install",         "-y", "-q",
                                         "--download-only", "-o", "Dir::State::status=" + status.path()};
    download.insert(download.end(), packages.begin(), packages.end());
    TEMPER_ASSIGN_OR_RETURN(ProcessResult fetched, RunApt(options_, download));
    if (fetched.Succeeded()) {
      for (const PackageFile& f : out.files) {
        std::error_code ec;
        if (!fs::is_regular_file(f.host_path, ec)) {
          return Status::Internal(fmt::format("apt-get --download-only succeeded but {} is not in {}", f.file_name,
                                              (d / "archives").string()));
        }
      }
      return out;
    }
    std::string why = AptExplanation(fetched);
    // The archive dropped a version our indexes still list: refresh them once and resolve again.
    if (round == 0 && Contains(why, "404")) {
      TEMPER_RETURN_IF_ERROR(UpdateLocked(options_));
      continue;
    }
    if (fetched.timed_out || IsNetworkFailure(why)) {
      return Status::Unavailable(fmt::format("no network to fetch {} from the package sources ({}): {}",
                                             Join(packages, " "), Join(options_.sources, "; "), why));
    }
    return ResolutionError(options_, packages, fetched);
  }
}

Result<SandboxExtras> PackageCache::SandboxFor(const ResolvedPackages& resolved) const {
  const fs::path d = options_.dir;
  TEMPER_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(d));
  const std::string conf = kSandboxConf;
  SandboxExtras e;
  e.tmpfs = {kSandboxAptCache};
  e.dirs = {std::string(kSandboxArchives) + "/partial", conf, conf + "/lists", conf + "/lists/partial",
            conf + "/empty.d"};
  e.read_only_mounts.push_back({(d / "sandbox-apt.conf").string(), conf + "/apt.conf"});
  e.read_only_mounts.push_back({(d / "sources.list").string(), conf + "/sources.list"});
  // The indexes file by file (lists/ itself holds apt's lock and its _apt-owned partial/).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(d / "lists", ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_ec;
    if (name == "lock" || !fs::is_regular_file(entry.path(), type_ec)) continue;  // follows file: symlinks
    e.read_only_mounts.push_back({entry.path().string(), conf + "/lists/" + name});
  }
  if (ec) return Status::IOError(fmt::format("listing {}: {}", (d / "lists").string(), ec.message()));
  for (const PackageFile& f : resolved.files) {
    e.read_only_mounts.push_back({f.host_path, std::string(kSandboxArchives) + "/" + f.file_name});
  }
  e.env.push_back({"APT_CONFIG", conf + "/apt.conf"});
  return e;
}

}  // namespace temper::stig
