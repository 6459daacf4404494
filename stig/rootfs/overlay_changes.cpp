#include "stig/rootfs/overlay_changes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "platform/process.h"
#include "platform/scratch_dir.h"
#include "stig/change_set_redaction.h"
#include "stig/packages/dpkg_status.h"
#include "stig/target_file.h"

namespace temper::stig {
namespace {

// Diff text kept per change set: a fix that rewrites hundreds of text files (a package's docs)
// should not turn one attempt's record into tens of megabytes.
constexpr std::uint64_t kMaxDiffBytesTotal = 2 << 20;
// git's heuristic: a NUL byte in the first 8000 bytes makes a file binary.
constexpr std::size_t kBinarySniffBytes = 8000;
constexpr std::string_view kDpkgStatus = "/var/lib/dpkg/status";
constexpr std::string_view kSystemdDir = "/etc/systemd/system";

std::string Join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A path as it is found in one tree: the tree (a layer directory or the merged mount) and the
// path in it, where that is on the host, and its lstat.
struct Found {
  std::string tree;
  std::string path;
  std::string host_path;
  struct stat st;
};

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

// Up to `max` bytes of a regular file a tree holds, opened without following a link and checked
// to be a regular file before it is opened (target_file.h): a FIFO swapped in never blocks us.
Result<std::string> ReadHead(const Found& f, std::size_t max) {
  TEMPER_ASSIGN_OR_RETURN(UniqueFd fd, OpenLayerFile(f.tree, f.path));
  return ReadUpTo(fd.get(), max, f.host_path);
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

Status WriteWhole(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::FromErrno(errno, "creating " + path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::FromErrno(errno, "writing " + path);
  }
  return Status::OK();
}

// What `diff -u --label a/REL --label b/REL` prints for a file that is all added (or all
// deleted): every line on one side, one hunk, and diff's note for a last line without a newline.
// Empty content has no diff, as with diff.
std::string OneSidedDiff(const std::string& rel, const std::string& content, bool added) {
  if (content.empty()) return "";
  std::size_t lines = static_cast<std::size_t>(std::count(content.begin(), content.end(), '\n'));
  bool no_newline_at_end = content.back() != '\n';
  if (no_newline_at_end) ++lines;
  std::string range = lines == 1 ? "1" : fmt::format("1,{}", lines);
  std::string out =
      fmt::format("--- a/{}\n+++ b/{}\n@@ {} @@\n", rel, rel, added ? "-0,0 +" + range : "-" + range + " +0,0");
  out.reserve(out.size() + content.size() + lines + 32);
  char sign = added ? '+' : '-';
  std::size_t at = 0;
  while (at < content.size()) {
    std::size_t end = content.find('\n', at);
    out += sign;
    if (end == std::string::npos) {
      out.append(content, at, std::string::npos);
      out += "\n\\ No newline at end of file\n";
      break;
    }
    out.append(content, at, end + 1 - at);
    at = end + 1;
  }
  return out;
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

class Collector {
 public:
  explicit Collector(const OverlayLayers& layers) : layers_(layers), lower_(layers.lowers), merged_(layers.merged) {}

  Result<ChangeSet> Run() {
    TEMPER_RETURN_IF_ERROR(WalkUpper("/"));
    std::sort(out_.files.begin(), out_.files.end(),
              [](const FileChange& a, const FileChange& b) { return a.path < b.path; });
    TEMPER_RETURN_IF_ERROR(Packages());
    TEMPER_RETURN_IF_ERROR(Services());
    return std::move(out_);
  }

 private:
  Status WalkUpper(const std::string& dir) {
    std::string upper_dir = dir == "/" ? layers_.upper : layers_.upper + dir;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> names, HostEntries(upper_dir));
    for (const std::string& name : names) {
      std::string path = Join(dir, name);
      std::string upper_path = upper_dir + "/" + name;
      TEMPER_ASSIGN_OR_RETURN(std::optional<struct stat> st, Lstat(upper_path));
      if (!st) continue;
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> before, lower_.Find(path));
      if (IsWhiteout(*st)) {
        if (before) TEMPER_RETURN_IF_ERROR(Deleted(path, *before));
        continue;
      }
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> after, merged_.Find(path));
      if (!after) return Status::IOError(fmt::format("{} is in the upper layer but not in the merged tree", path));
      TEMPER_RETURN_IF_ERROR(Compare(path, before, *after));
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
          if (gone) TEMPER_RETURN_IF_ERROR(Deleted(Join(path, child), *gone));
        }
      }
      if (is_dir) TEMPER_RETURN_IF_ERROR(WalkUpper(path));
    }
    return Status::OK();
  }

  // `path` and, for a directory, everything below it as the lower layers hold it.
  Status Deleted(const std::string& path, const Found& before) {
    FileChange c{.path = path, .change = FileChangeKind::kDeleted};
    TEMPER_ASSIGN_OR_RETURN(c.before, StateOf(before));
    if (S_ISREG(before.st.st_mode)) TEMPER_RETURN_IF_ERROR(Diff(c, &before, nullptr));
    out_.files.push_back(std::move(c));
    if (!S_ISDIR(before.st.st_mode)) return Status::OK();
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> children, lower_.List(path));
    for (const std::string& child : children) {
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, lower_.Find(Join(path, child)));
      if (f) TEMPER_RETURN_IF_ERROR(Deleted(Join(path, child), *f));
    }
    return Status::OK();
  }

  Status Compare(const std::string& path, const std::optional<Found>& before, const Found& after) {
    FileChange c{.path = path};
    TEMPER_ASSIGN_OR_RETURN(c.after, StateOf(after));
    bool content_changed = true;
    if (!before) {
      c.change = FileChangeKind::kAdded;
    } else {
      TEMPER_ASSIGN_OR_RETURN(c.before, StateOf(*before));
      if (c.before->type != c.after->type || c.before->link != c.after->link) {
        c.change = FileChangeKind::kModified;
      } else if (c.after->type == FileType::kFile) {
        content_changed = c.before->size != c.after->size;
        if (!content_changed) {
          TEMPER_ASSIGN_OR_RETURN(bool same, SameContent(*before, after));
          content_changed = !same;
        }
        c.change = content_changed ? FileChangeKind::kModified : FileChangeKind::kMetadata;
      } else {
        content_changed = false;
        c.change = FileChangeKind::kMetadata;
      }
      if (c.change == FileChangeKind::kMetadata && *c.before == *c.after) return Status::OK();  // copied up only
    }
    bool before_file = before && S_ISREG(before->st.st_mode);
    bool after_file = S_ISREG(after.st.st_mode);
    if (content_changed && (before_file || after_file)) {
      TEMPER_RETURN_IF_ERROR(Diff(c, before_file ? &*before : nullptr, after_file ? &after : nullptr));
    }
    out_.files.push_back(std::move(c));
    return Status::OK();
  }

  // Fills c.diff, c.binary or c.diff_skipped for the regular files `before` and `after` (null: that
  // side has none).
  Status Diff(FileChange& c, const Found* before, const Found* after) {
    bool large = false;
    std::string text[2];  // the sides' contents, when they are small enough to diff
    const std::pair<const Found*, const std::optional<FileState>&> sides[] = {{before, c.before}, {after, c.after}};
    for (int i = 0; i < 2; ++i) {
      const auto& [found, state] = sides[i];
      if (found == nullptr) continue;
      bool big = state->size > kMaxDiffFileBytes;
      large = large || big;
      TEMPER_ASSIGN_OR_RETURN(text[i], ReadHead(*found, big ? kBinarySniffBytes : kMaxDiffFileBytes));
      if (text[i].find('\0') != std::string::npos) c.binary = true;
    }
    if (c.binary) return Status::OK();
    if (large) {
      c.diff_skipped = fmt::format("larger than {} KiB", kMaxDiffFileBytes / 1024);
      return Status::OK();
    }
    if (diff_bytes_ >= kMaxDiffBytesTotal) {
      c.diff_skipped = fmt::format("this change set's diffs already reached {} MiB", kMaxDiffBytesTotal >> 20);
      return Status::OK();
    }
    std::string rel = c.path.substr(1);
    if (before == nullptr || after == nullptr) {
      // A file added or deleted whole: the diff is every line on one side, written here rather than
      // by a diff process per file (a package install adds thousands).
      c.diff = OneSidedDiff(rel, before == nullptr ? text[1] : text[0], /*added=*/before == nullptr);
    } else {
      // diff reads the copies read here, never the layers: nothing in them is opened by a program
      // that follows links or blocks on FIFOs.
      if (!copies_) {
        TEMPER_ASSIGN_OR_RETURN(ScratchDir made, ScratchDir::Create("", "diff"));
        copies_.emplace(std::move(made));
      }
      const std::string a = copies_->path() + "/a", b = copies_->path() + "/b";
      TEMPER_RETURN_IF_ERROR(WriteWhole(a, text[0]));
      TEMPER_RETURN_IF_ERROR(WriteWhole(b, text[1]));
      ProcessSpec spec;
      spec.argv = {"diff", "-u", "--label", "a/" + rel, "--label", "b/" + rel, a, b};
      spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
      spec.timeout = std::chrono::seconds(30);
      spec.max_output_bytes = 4 * kMaxDiffFileBytes + 4096;
      TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
      // diff exits 0 when the files are the same, 1 when they differ, 2 on trouble.
      if (r.timed_out || r.term_signal != 0 || r.exit_code > 1) {
        return Status::IOError(fmt::format("diff of {} failed ({}): {}", c.path, r.Describe(), r.err));
      }
      c.diff = std::move(r.out);
    }
    // Password hashes never leave the host (change_set_redaction.h): the store, prompts and exports
    // all take the diff from here.
    c.diff = RedactHashesInDiff(c.path, c.diff);
    diff_bytes_ += c.diff.size();
    return Status::OK();
  }

  Status Packages() {
    auto changed =
        std::find_if(out_.files.begin(), out_.files.end(), [](const FileChange& f) { return f.path == kDpkgStatus; });
    if (changed == out_.files.end()) return Status::OK();
    std::map<std::string, std::string> before, after;
    for (auto [reader, into] : {std::pair<TreeReader*, std::map<std::string, std::string>*>{&lower_, &before},
                                std::pair<TreeReader*, std::map<std::string, std::string>*>{&merged_, &after}}) {
      TEMPER_ASSIGN_OR_RETURN(std::optional<Found> f, reader->Find(std::string(kDpkgStatus)));
      if (!f || !S_ISREG(f->st.st_mode)) continue;
      TEMPER_ASSIGN_OR_RETURN(std::string text, ReadHead(*f, static_cast<std::size_t>(f->st.st_size)));
      *into = InstalledPackages(text);
    }
    out_.packages = ComparePackages(before, after);
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

  Status Services() {
    std::string prefix = std::string(kSystemdDir) + "/";
    bool touched = std::any_of(out_.files.begin(), out_.files.end(),
                               [&](const FileChange& f) { return f.path.starts_with(prefix); });
    if (!touched) return Status::OK();
    TEMPER_ASSIGN_OR_RETURN(Enablement before, EnablementOf(lower_));
    TEMPER_ASSIGN_OR_RETURN(Enablement after, EnablementOf(merged_));
    out_.services.enabled = Minus(after.enabled, before.enabled);
    out_.services.disabled = Minus(before.enabled, after.enabled);
    out_.services.masked = Minus(after.masked, before.masked);
    out_.services.unmasked = Minus(before.masked, after.masked);
    return Status::OK();
  }

  const OverlayLayers& layers_;
  LowerReader lower_;
  MergedReader merged_;
  ChangeSet out_;
  std::uint64_t diff_bytes_ = 0;
  std::optional<ScratchDir> copies_;  // the two sides of the diff being made
};

}  // namespace

Result<ChangeSet> OverlayChanges(const OverlayLayers& layers) {
  if (layers.lowers.empty()) return Status::InvalidArgument("an overlay stack needs at least one lower layer");
  return Collector(layers).Run();
}

}  // namespace temper::stig
