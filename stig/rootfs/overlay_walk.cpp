#include "stig/rootfs/overlay_walk.h"

#include <dirent.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "platform/unique_fd.h"
#include "stig/packages/dpkg_status.h"
#include "stig/target_file.h"

namespace temper::stig {
namespace {

using Found = FoundPath;

constexpr std::string_view kDpkgStatus = "/var/lib/dpkg/status";
constexpr std::string_view kSystemdDir = "/etc/systemd/system";

std::string Join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }

Result<std::optional<struct stat>> Lstat(const std::string& host_path) {
  struct stat st;
  if (::lstat(host_path.c_str(), &st) == 0) return std::optional<struct stat>(st);
  if (errno == ENOENT || errno == ENOTDIR) return std::optional<struct stat>();
  return Status::FromErrno(errno, "reading " + host_path);
}

bool IsWhiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0); }

bool IsOpaque(const std::string& host_dir) {
  char v[2];
  ssize_t n = ::lgetxattr(host_dir.c_str(), "trusted.overlay.opaque", v, sizeof v);
  return n == 1 && v[0] == 'y';
}

// Entry names of a host directory, without "." and "..".
Result<std::vector<std::string>> HostEntries(const std::string& host_dir) {
  DIR* d = ::opendir(host_dir.c_str());
  if (!d) return Status::FromErrno(errno, "listing " + host_dir);
  std::vector<std::string> out;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
  }
  int e = errno;
  ::closedir(d);
  if (e != 0) return Status::FromErrno(e, "listing " + host_dir);
  std::sort(out.begin(), out.end());
  return out;
}

Result<bool> SameContent(const Found& a, const Found& b) {
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fa, OpenLayerFile(a.tree, a.path));
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fb, OpenLayerFile(b.tree, b.path));
  constexpr std::size_t kChunk = 65536;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(std::string ca, ReadUpTo(fa.get(), kChunk, a.host_path));
    TEMPER_ASSIGN_OR_RETURN(std::string cb, ReadUpTo(fb.get(), kChunk, b.host_path));
    if (ca != cb) return false;
    if (ca.size() < kChunk) return true;
  }
}

// A tree the change set reads paths from: the lower layers as overlayfs would merge them, or the
// mounted merged tree.
class TreeReader {
 public:
  virtual ~TreeReader() = default;
  virtual Result<std::optional<Found>> Find(const std::string& path) = 0;
  // Sorted entry names of directory `path`; empty when it is not a directory.
  virtual Result<std::vector<std::string>> List(const std::string& path) = 0;
};

class MergedReader : public TreeReader {
 public:
  explicit MergedReader(std::string merged) : merged_(std::move(merged)) {}
  Result<std::optional<Found>> Find(const std::string& path) override {
    std::string host = merged_ + path;
    TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(host));
    if (!st) return std::optional<Found>();
    return std::optional<Found>(Found{merged_, path, host, *st});
  }
  Result<std::vector<std::string>> List(const std::string& path) override {
    TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, Find(path));
    if (!f || !S_ISDIR(f->st.st_mode)) return std::vector<std::string>();
    return HostEntries(f->host_path);
  }

 private:
  std::string merged_;
};

// The lower layers merged as overlayfs does it, without mounting them.
class LowerReader : public TreeReader {
 public:
  explicit LowerReader(std::vector<std::string> lowers) : lowers_(std::move(lowers)) {}

  Result<std::optional<Found>> Find(const std::string& path) override {
    if (path == "/") {
      TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(lowers_.front()));
      if (!st) return Status::IOError("the lower layer " + lowers_.front() + " is missing");
      return std::optional<Found>(Found{lowers_.front(), "/", lowers_.front(), *st});
    }
    TEMPER_ASSIGN_OR_RETURN(const std::vector<LayerDir>* parents, DirLayers(Parent(path)));
    std::string name = Base(path);
    for (const LayerDir& dir : *parents) {
      std::string host = dir.host + "/" + name;
      TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(host));
      if (!st) continue;
      if (IsWhiteout(*st)) return std::optional<Found>();
      return std::optional<Found>(Found{dir.layer, path, host, *st});  // a directory's own metadata is the topmost's
    }
    return std::optional<Found>();
  }

  Result<std::vector<std::string>> List(const std::string& path) override {
    TEMPER_ASSIGN_OR_RETURN(const std::vector<LayerDir>* layers, DirLayers(path));
    std::set<std::string> seen;
    std::vector<std::string> out;
    for (const LayerDir& dir : *layers) {
      TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> names, HostEntries(dir.host));
      for (const std::string& name : names) {
        if (!seen.insert(name).second) continue;  // a layer above decided this name
        TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(dir.host + "/" + name));
        if (st && !IsWhiteout(*st)) out.push_back(name);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  // One layer's directory for a path: the layer, and the directory on the host.
  struct LayerDir {
    std::string layer;
    std::string host;
  };

  // The layer directories whose contents make up directory `path`, topmost first: the topmost
  // layer's directory, then the same directory in each layer below, down to an opaque one or to a
  // layer where the name is a whiteout or not a directory. Empty when `path` is not a directory.
  Result<const std::vector<LayerDir>*> DirLayers(const std::string& path) {
    if (auto it = dirs_.find(path); it != dirs_.end()) return &it->second;
    std::vector<LayerDir> out;
    if (path == "/") {
      for (const std::string& l : lowers_) out.push_back({l, l});
    } else {
      TEMPER_ASSIGN_OR_RETURN(const std::vector<LayerDir>* parents, DirLayers(Parent(path)));
      std::string name = Base(path);
      for (const LayerDir& dir : *parents) {
        std::string host = dir.host + "/" + name;
        TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(host));
        if (!st) continue;
        if (!S_ISDIR(st->st_mode)) break;  // a whiteout or a non-directory hides what is below
        out.push_back({dir.layer, host});
        if (IsOpaque(host)) break;
      }
    }
    return &dirs_.emplace(path, std::move(out)).first->second;
  }

  std::vector<std::string> lowers_;
  std::map<std::string, std::vector<LayerDir>> dirs_;
};

}  // namespace

Result<FileState> StateOf(const Found& f) {
  FileState s;
  s.type = S_ISREG(f.st.st_mode)   ? FileType::kFile
           : S_ISDIR(f.st.st_mode) ? FileType::kDir
           : S_ISLNK(f.st.st_mode) ? FileType::kSymlink
                                   : FileType::kOther;
  s.mode = f.st.st_mode & 07777;
  s.uid = f.st.st_uid;
  s.gid = f.st.st_gid;
  s.size = s.type == FileType::kFile || s.type == FileType::kSymlink ? static_cast<std::uint64_t>(f.st.st_size) : 0;
  if (s.type == FileType::kSymlink) {
    std::string buf(static_cast<std::size_t>(f.st.st_size) + 1, '\0');
    ssize_t n = ::readlink(f.host_path.c_str(), buf.data(), buf.size());
    if (n < 0) return Status::FromErrno(errno, "reading the link " + f.host_path);
    buf.resize(static_cast<std::size_t>(n));
    s.link = std::move(buf);
  }
  return s;
}

Result<std::string> ReadFound(const FoundPath& f, std::size_t max) {
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fd, OpenLayerFile(f.tree, f.path));
  return ReadUpTo(fd.get(), max, f.host_path);
}

class OverlayWalk::Impl {
 public:
  explicit Impl(const OverlayLayers& layers) : layers_(layers), lower_(layers.lowers), merged_(layers.merged) {}

  Result<std::vector<OverlayPathChange>> ChangedPaths() {
    std::vector<OverlayPathChange> out;
    TEMPER_RETURN_IF_ERROR(WalkUpper("/", out));
    std::sort(out.begin(), out.end(),
              [](const OverlayPathChange& a, const OverlayPathChange& b) { return a.path < b.path; });
    return out;
  }

  Result<PackageChanges> Packages(const std::vector<OverlayPathChange>& changes) {
    bool changed =
        std::any_of(changes.begin(), changes.end(), [](const OverlayPathChange& c) { return c.path == kDpkgStatus; });
    if (!changed) return PackageChanges{};
    std::map<std::string, std::string> before, after;
    for (auto [reader, into] : {std::pair<TreeReader*, std::map<std::string, std::string>*>{&lower_, &before},
                                std::pair<TreeReader*, std::map<std::string, std::string>*>{&merged_, &after}}) {
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, reader->Find(std::string(kDpkgStatus)));
      if (!f || !S_ISREG(f->st.st_mode)) continue;
      TEMPER_ASSIGN_OR_RETURN(std::string text, ReadFound(*f, static_cast<std::size_t>(f->st.st_size)));
      *into = InstalledPackages(text);
    }
    return ComparePackages(before, after);
  }

  Result<ServiceChanges> Services(const std::vector<OverlayPathChange>& changes) {
    std::string prefix = std::string(kSystemdDir) + "/";
    bool touched = std::any_of(changes.begin(), changes.end(),
                               [&](const OverlayPathChange& c) { return c.path.starts_with(prefix); });
    if (!touched) return ServiceChanges{};
    TEMPER_ASSIGN_OR_RETURN(Enablement before, EnablementOf(lower_));
    TEMPER_ASSIGN_OR_RETURN(Enablement after, EnablementOf(merged_));
    ServiceChanges out;
    out.enabled = Minus(after.enabled, before.enabled);
    out.disabled = Minus(before.enabled, after.enabled);
    out.masked = Minus(after.masked, before.masked);
    out.unmasked = Minus(before.masked, after.masked);
    return out;
  }

  Result<std::optional<Found>> FindAfter(const std::string& path) { return merged_.Find(path); }
  Result<std::vector<std::string>> ListAfter(const std::string& path) { return merged_.List(path); }

 private:
  Status WalkUpper(const std::string& dir, std::vector<OverlayPathChange>& out) {
    std::string upper_dir = dir == "/" ? layers_.upper : layers_.upper + dir;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> names, HostEntries(upper_dir));
    for (const std::string& name : names) {
      std::string path = Join(dir, name);
      std::string upper_path = upper_dir + "/" + name;
      TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(upper_path));
      if (!st) continue;
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> before, lower_.Find(path));
      if (IsWhiteout(*st)) {
        if (before) TEMPER_RETURN_IF_ERROR(Deleted(path, *before, out));
        continue;
      }
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> after, merged_.Find(path));
      if (!after) return Status::IOError(fmt::format("{} is in the upper layer but not in the merged tree", path));
      TEMPER_RETURN_IF_ERROR(Compare(path, before, *after, out));
      bool is_dir = S_ISDIR(st->st_mode);
      if (before && S_ISDIR(before->st.st_mode) && (!is_dir || IsOpaque(upper_path))) {
        // A non-directory or an opaque directory hides everything the lower layers held below it:
        // what the upper layer does not hold there is gone.
        TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> hidden, lower_.List(path));
        for (const std::string& child : hidden) {
          if (is_dir) {
            TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> in_upper, Lstat(upper_path + "/" + child));
            if (in_upper) continue;
          }
          TEMPER_ASSIGN_OR_RETURN(std::optional<Found> gone, lower_.Find(Join(path, child)));
          if (gone) TEMPER_RETURN_IF_ERROR(Deleted(Join(path, child), *gone, out));
        }
      }
      if (is_dir) TEMPER_RETURN_IF_ERROR(WalkUpper(path, out));
    }
    return Status::OK();
  }

  // `path` and, for a directory, everything below it as the lower layers hold it.
  Status Deleted(const std::string& path, const Found& before, std::vector<OverlayPathChange>& out) {
    OverlayPathChange c{.path = path, .before = before};
    TEMPER_ASSIGN_OR_RETURN(c.before_state, StateOf(before));
    out.push_back(std::move(c));
    if (!S_ISDIR(before.st.st_mode)) return Status::OK();
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> children, lower_.List(path));
    for (const std::string& child : children) {
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, lower_.Find(Join(path, child)));
      if (f) TEMPER_RETURN_IF_ERROR(Deleted(Join(path, child), *f, out));
    }
    return Status::OK();
  }

  Status Compare(const std::string& path, const std::optional<Found>& before, const Found& after,
                 std::vector<OverlayPathChange>& out) {
    OverlayPathChange c{.path = path, .before = before, .after = after};
    TEMPER_ASSIGN_OR_RETURN(c.after_state, StateOf(after));
    if (before) {
      TEMPER_ASSIGN_OR_RETURN(c.before_state, StateOf(*before));
      if (c.before_state->type == c.after_state->type && c.before_state->link == c.after_state->link) {
        if (c.after_state->type == FileType::kFile && c.before_state->size == c.after_state->size) {
          TEMPER_ASSIGN_OR_RETURN(bool same, SameContent(*before, after));
          c.content_changed = !same;
        } else {
          c.content_changed = c.after_state->type == FileType::kFile;
        }
        if (!c.content_changed && *c.before_state == *c.after_state) return Status::OK();  // copied up only
      }
    }
    out.push_back(std::move(c));
    return Status::OK();
  }

  struct Enablement {
    std::set<std::string> enabled, masked;
  };

  static Result<Enablement> EnablementOf(TreeReader& tree) {
    Enablement out;
    std::string dir(kSystemdDir);
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> names, tree.List(dir));
    for (const std::string& name : names) {
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, tree.Find(Join(dir, name)));
      if (!f) continue;
      if (S_ISLNK(f->st.st_mode)) {
        TEMPER_ASSIGN_OR_RETURN(FileState s, StateOf(*f));
        if (s.link == "/dev/null") out.masked.insert(name);
        continue;
      }
      bool dependency_dir = name.ends_with(".wants") || name.ends_with(".requires") || name.ends_with(".upholds");
      if (!S_ISDIR(f->st.st_mode) || !dependency_dir) continue;
      TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> units, tree.List(Join(dir, name)));
      for (const std::string& unit : units) {
        TEMPER_ASSIGN_OR_RETURN(std::optional<Found> link, tree.Find(Join(Join(dir, name), unit)));
        if (link && S_ISLNK(link->st.st_mode)) out.enabled.insert(unit);
      }
    }
    return out;
  }

  static std::vector<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
    std::vector<std::string> out;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
  }

  const OverlayLayers& layers_;
  LowerReader lower_;
  MergedReader merged_;
};

Result<std::unique_ptr<OverlayWalk>> OverlayWalk::Open(const OverlayLayers& layers) {
  if (layers.lowers.empty()) return Status::InvalidArgument("an overlay stack needs at least one lower layer");
  return std::unique_ptr<OverlayWalk>(new OverlayWalk(std::make_unique<Impl>(layers)));
}

OverlayWalk::OverlayWalk(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OverlayWalk::~OverlayWalk() = default;

Result<std::vector<OverlayPathChange>> OverlayWalk::ChangedPaths() { return impl_->ChangedPaths(); }
Result<PackageChanges> OverlayWalk::Packages(const std::vector<OverlayPathChange>& changes) {
  return impl_->Packages(changes);
}
Result<ServiceChanges> OverlayWalk::Services(const std::vector<OverlayPathChange>& changes) {
  return impl_->Services(changes);
}
Result<std::optional<FoundPath>> OverlayWalk::FindAfter(const std::string& path) { return impl_->FindAfter(path); }
Result<std::vector<std::string>> OverlayWalk::ListAfter(const std::string& path) { return impl_->ListAfter(path); }

}  // namespace temper::stig
