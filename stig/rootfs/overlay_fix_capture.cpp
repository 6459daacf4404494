#include "stig/rootfs/overlay_fix_capture.h"

#include <sys/stat.h>

#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/md5.h"
#include "stig/packages/dpkg_status.h"
#include "stig/rootfs/overlay_walk.h"

namespace temper::stig {
namespace {

constexpr std::string_view kDpkgStatus = "/var/lib/dpkg/status";
constexpr std::string_view kDpkgInfo = "/var/lib/dpkg/info";
// dpkg's record of one package is a few megabytes at most (a .list of tens of thousands of paths).
constexpr std::size_t kMaxDpkgRecordBytes = 64 << 20;

// A path a package the fix installed or upgraded ships: the package, and the md5 dpkg recorded
// (empty for what has none: directories, symlinks).
struct PackageFile {
  std::string package;
  std::string md5;
};

// The package's name from "name version" or "name old -> new" (ComparePackages's entries).
std::string PackageKey(const std::string& entry) { return entry.substr(0, entry.find(' ')); }

class Capture {
 public:
  explicit Capture(OverlayWalk& walk) : walk_(walk) {}

  Result<FixBundle> Run() {
    TEMPER_ASSIGN_OR_RETURN(std::vector<OverlayPathChange> changes, walk_.ChangedPaths());
    TEMPER_ASSIGN_OR_RETURN(out_.packages, walk_.Packages(changes));
    TEMPER_ASSIGN_OR_RETURN(out_.services, walk_.Services(changes));
    for (const std::vector<std::string>* list : {&out_.packages.installed, &out_.packages.upgraded}) {
      for (const std::string& entry : *list) TEMPER_RETURN_IF_ERROR(AddPackageFiles(PackageKey(entry)));
    }
    for (const OverlayPathChange& change : changes) {
      if (IsPackageManagerState(change.path)) continue;
      TEMPER_RETURN_IF_ERROR(Add(change));
    }
    if (out_.files.size() > kMaxBundleFiles) {
      return Status::FailedPrecondition(
          fmt::format("the fix changed {} files, more than a bundle's {}", out_.files.size(), kMaxBundleFiles));
    }
    return std::move(out_);
  }

 private:
  // Records the files dpkg lists for `key` ("name" or "name:arch") in the merged tree.
  Status AddPackageFiles(const std::string& key) {
    TEMPER_ASSIGN_OR_RETURN(std::string stem, InfoStem(key));
    TEMPER_ASSIGN_OR_RETURN(std::string list, ReadAfter(fmt::format("{}/{}.list", kDpkgInfo, stem)));
    TEMPER_ASSIGN_OR_RETURN(std::string md5sums, ReadAfter(fmt::format("{}/{}.md5sums", kDpkgInfo, stem)));
    if (!status_) {
      TEMPER_ASSIGN_OR_RETURN(std::string status, ReadAfter(std::string(kDpkgStatus)));
      status_ = std::move(status);
    }
    std::map<std::string, std::string> md5 = PackageMd5sums(md5sums);
    for (auto& [path, sum] : PackageConffiles(*status_, key)) md5[path] = sum;
    std::string name = key.substr(0, key.find(':'));
    std::size_t at = 0;
    while (at < list.size()) {
      std::size_t end = list.find('\n', at);
      if (end == std::string::npos) end = list.size();
      std::string path = list.substr(at, end - at);
      at = end + 1;
      if (path.empty() || path == "/.") continue;  // dpkg lists the root as "/."
      auto sum = md5.find(path);
      package_files_[path] = PackageFile{name, sum == md5.end() ? "" : sum->second};
    }
    return Status::OK();
  }

  // dpkg names a package's records "<name>" or, for a Multi-Arch: same package, "<name>:<arch>".
  Result<std::string> InfoStem(const std::string& key) {
    TEMPER_ASSIGN_OR_RETURN(std::optional<FoundPath> plain, walk_.FindAfter(fmt::format("{}/{}.list", kDpkgInfo, key)));
    if (plain || key.find(':') != std::string::npos) return key;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> names, walk_.ListAfter(std::string(kDpkgInfo)));
    for (const std::string& n : names) {
      if (n.starts_with(key + ":") && n.ends_with(".list")) return n.substr(0, n.size() - 5);
    }
    return Status::IOError(fmt::format("package {} is installed but {} has no list of its files", key, kDpkgInfo));
  }

  // A regular file of the merged tree whole (empty when missing).
  Result<std::string> ReadAfter(const std::string& path) {
    TEMPER_ASSIGN_OR_RETURN(std::optional<FoundPath> f, walk_.FindAfter(path));
    if (!f) return std::string();
    if (!S_ISREG(f->st.st_mode)) return Status::IOError(path + " is not a regular file");
    if (static_cast<std::uint64_t>(f->st.st_size) > kMaxDpkgRecordBytes) {
      return Status::IOError(fmt::format("{} is larger than {} MiB", path, kMaxDpkgRecordBytes >> 20));
    }
    return ReadFound(*f, kMaxDpkgRecordBytes);
  }

  Status Add(const OverlayPathChange& change) {
    BundleFile file{.path = change.path};
    auto owned = package_files_.find(change.path);
    if (owned != package_files_.end() && !owned->second.md5.empty()) {
      if (!change.after) {
        return Status::FailedPrecondition(fmt::format(
            "{}: the fix deleted this file of package {} after installing it; a replay installs the package, so "
            "the bundle cannot carry that",
            change.path, owned->second.package));
      }
      TEMPER_ASSIGN_OR_RETURN(file.after, Image(*change.after, *change.after_state));
      if (Md5Hex(file.after->content) == owned->second.md5) return Status::OK();  // comes with the package
      file.package = owned->second.package;
      file.package_md5 = owned->second.md5;
    } else if (owned != package_files_.end() && change.after && change.after_state->type != FileType::kFile) {
      return Status::OK();  // a package's directory or link: the install makes it
    } else {
      if (change.before) {
        TEMPER_ASSIGN_OR_RETURN(file.before, Image(*change.before, *change.before_state));
      }
      if (change.after) {
        TEMPER_ASSIGN_OR_RETURN(file.after, Image(*change.after, *change.after_state));
      }
    }
    out_.files.push_back(std::move(file));
    return Status::OK();
  }

  Result<std::optional<FileImage>> Image(const FoundPath& found, const FileState& state) {
    FileImage image{.state = state};
    if (state.type == FileType::kOther) {
      return Status::FailedPrecondition(
          fmt::format("{} is a FIFO, socket or device: a bundle cannot replay it", found.path));
    }
    if (state.type != FileType::kFile) return std::optional<FileImage>(std::move(image));
    if (state.size > kMaxBundleFileBytes) {
      return Status::FailedPrecondition(
          fmt::format("{}: {} bytes, more than a bundle's {} per file (kMaxBundleFileBytes)", found.path, state.size,
                      kMaxBundleFileBytes));
    }
    TEMPER_ASSIGN_OR_RETURN(image.content, ReadFound(found, kMaxBundleFileBytes + 1));
    if (image.content.size() != state.size) {
      return Status::IOError(fmt::format("{} changed size while it was read", found.path));
    }
    content_bytes_ += image.content.size();
    if (content_bytes_ > kMaxBundleBytes) {
      return Status::FailedPrecondition(fmt::format(
          "{}: the fix's files pass a bundle's {} bytes in all (kMaxBundleBytes)", found.path, kMaxBundleBytes));
    }
    image.sha256 = ContentSha256(image.content);
    return std::optional<FileImage>(std::move(image));
  }

  OverlayWalk& walk_;
  FixBundle out_;
  std::map<std::string, PackageFile> package_files_;
  std::optional<std::string> status_;  // dpkg's status file now, read once
  std::uint64_t content_bytes_ = 0;
};

}  // namespace

Result<FixBundle> OverlayFixBundle(const OverlayLayers& layers) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<OverlayWalk> walk, OverlayWalk::Open(layers));
  return Capture(*walk).Run();
}

}  // namespace temper::stig
