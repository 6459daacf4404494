// PackageCache: the host-side store of .deb files that network-less targets install from.
//
// A target's sandbox has no network, yet STIG fixes install packages (aide, vlock, chrony, ...), as
// an operator would from a mirror. The cache runs the host's own apt, isolated from the host's apt
// configuration, against its own sources (Debian's archive by default; a local mirror or a flat
// repository of .debs given as `file:` sources), and resolves dependencies against the TARGET's
// dpkg status, so exactly the files that target lacks are fetched. A sandbox then gets the fetched
// files and the cache's package indexes as read-only mounts over a tmpfs at /var/cache/apt, with
// APT_CONFIG pointing the target's own apt at them: `apt-get install` inside the target resolves
// the same way and finds every file locally, so it installs with no network and leaves nothing of
// the cache behind in the target's tree (SandboxFor).
//
// Layout of `dir`: sources.list and apt.conf (written from the options), lists/ (indexes),
// archives/ (the .debs), apt-cache/ (apt's binary caches), work/ (per-call copies of targets'
// dpkg status), lock. The host's apt runs as root with a configuration of ours alone: nothing the
// target controls (its apt.conf.d, its sources) is read on the host; its dpkg status is passed as
// text, copied into work/.
//
// Thread safety: every operation holds an flock on `dir`/lock, so any number of PackageCache
// objects, in one process or several (temperd, `temper baseline`), may share a directory, given
// the same sources (Open writes them; the last one opened wins).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "platform/sandbox.h"

namespace temper::stig {

struct PackageCacheOptions {
  // Where the cache lives; empty means no cache (targets then cannot install packages).
  std::string dir;
  // apt one-line sources, e.g. "deb http://deb.debian.org/debian bookworm main" (the default, the
  // suite rootfs targets are built from), a local mirror "deb file:/srv/debian bookworm main", or
  // a flat repository with a Packages index "deb [trusted=yes] file:/srv/debs ./".
  std::vector<std::string> sources = DefaultSources();
  // Indexes older than this are refreshed before resolving (if the refresh fails for lack of
  // network, the older indexes are used).
  std::chrono::seconds max_index_age{std::chrono::hours(24)};
  // For each apt run on the host.
  std::chrono::seconds apt_timeout{std::chrono::minutes(15)};
  // What archives/ may hold: the .debs fetched for targets (a STIG profile's packages take a few
  // hundred MiB). A fetch that would take it past this is refused, naming the sizes; `apt-get clean`
  // with the cache's apt.conf, or a larger cap, makes room. temperd.yaml: package_cache.max_size.
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
  // What a fetch leaves free on the host file system holding `dir`, for temperd's state store
  // (host_disk.h); 0: max(1 GiB, 5% of that file system).
  std::uint64_t host_reserve_bytes = 0;

  static std::vector<std::string> DefaultSources();
  // InvalidArgument naming the field: a source that is not a one-line "deb ..." entry, a
  // directory with characters apt's configuration cannot quote, a max_bytes of 0.
  Status Validate() const;
};

// One .deb a target needs, as apt names it in its archives directory.
struct PackageFile {
  std::string file_name;  // e.g. vlock_2.2.2-11+b1_amd64.deb
  std::string host_path;  // in the cache's archives/, or in a file: mirror
  std::uint64_t size = 0;
};

// What installing some packages into one target takes: every file apt would fetch for them given
// the target's dpkg status (empty when all are installed already).
struct ResolvedPackages {
  std::vector<std::string> requested;
  std::vector<PackageFile> files;
  std::string notes;  // e.g. indexes kept after a failed refresh; empty normally
};

class PackageCache {
 public:
  // Creates the directory layout and writes the configuration. Errors: InvalidArgument as
  // PackageCacheOptions::Validate; IOError when `dir` cannot be made; FailedPrecondition when
  // /usr/bin/apt-get is missing.
  static Result<PackageCache> Open(PackageCacheOptions options);

  const PackageCacheOptions& options() const { return options_; }

  // Resolves `packages` against `dpkg_status` (the text of a target's /var/lib/dpkg/status) with
  // Recommends, as the target's apt does by default, and fetches every needed file the cache lacks.
  // Errors (messages end with apt's own lines):
  //   InvalidArgument  a name that is not a Debian package name (only names, no options or patterns)
  //   NotFound         a package the sources do not have ("not in the archive")
  //   FailedPrecondition  dependencies that cannot be satisfied: conflicts, missing versions
  //   Unavailable      the sources cannot be reached (no network) and the cache cannot serve it
  //   ResourceExhausted  the files to fetch would take archives/ past max_bytes, or the host file
  //                    system holding the cache below its reserve (naming the sizes)
  //   IOError / Internal  the cache directory or apt itself failed
  Result<ResolvedPackages> Fetch(std::string_view dpkg_status, const std::vector<std::string>& packages) const;

  // Refreshes the indexes now (`apt-get update`), then drops cached files of versions no source
  // lists any more (`apt-get autoclean`). Unavailable when a source cannot be reached.
  Status Update() const;

  // The mounts and environment under which a target's own apt installs `resolved` with no
  // network (see the header comment). Needs /var/cache/apt to exist in the target. The indexes
  // mounted are those of the moment of the call: run the sandbox soon after Fetch, since a refresh
  // in between could list versions newer than the files resolved. IOError when lists/ is unreadable.
  Result<SandboxExtras> SandboxFor(const ResolvedPackages& resolved) const;

 private:
  explicit PackageCache(PackageCacheOptions options) : options_(std::move(options)) {}

  PackageCacheOptions options_;
};

// OK for a one-line apt source "deb [options] URI SUITE [COMPONENT...]"; InvalidArgument quoting it.
Status ValidateAptSource(std::string_view line);

// True for a Debian package name (policy §5.6.1: lower-case letters, digits, '+', '-', '.', at
// least two characters, starting with a letter or digit).
bool IsPackageName(std::string_view name);

}  // namespace temper::stig
