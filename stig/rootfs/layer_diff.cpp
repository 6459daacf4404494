#include "stig/rootfs/layer_diff.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kOverlayXattrPrefix = "trusted.overlay.";

bool IsWhiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0); }

// The xattrs a user set on `path`, without overlayfs's own bookkeeping.
std::map<std::string, std::string> UserXattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t size = ::llistxattr(path.c_str(), nullptr, 0);
  if (size <= 0) return out;
  std::string names(static_cast<size_t>(size), '\0');
  size = ::llistxattr(path.c_str(), names.data(), names.size());
  if (size <= 0) return out;
  names.resize(static_cast<size_t>(size));
  for (size_t at = 0; at < names.size();) {
    std::string name = names.c_str() + at;
    at += name.size() + 1;
    if (name.rfind(kOverlayXattrPrefix, 0) == 0) continue;
    ssize_t len = ::lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    std::string value(static_cast<size_t>(std::max<ssize_t>(len, 0)), '\0');
    if (len > 0) len = ::lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    value.resize(static_cast<size_t>(std::max<ssize_t>(len, 0)));
    out.emplace(std::move(name), std::move(value));
  }
  return out;
}

bool IsOpaque(const std::string& dir) {
  char value[2];
  ssize_t n = ::lgetxattr(dir.c_str(), "trusted.overlay.opaque", value, sizeof value);
  return n == 1 && value[0] == 'y';
}

// The index in `lower` (top first) of the layer overlayfs would show `rel` from, or nullopt.
std::optional<size_t> LayerIndexShowing(const std::vector<std::string>& lower, const fs::path& rel) {
  std::vector<fs::path> parts(rel.begin(), rel.end());
  for (size_t layer = 0; layer < lower.size(); ++layer) {
    const bool is_base = layer + 1 == lower.size();
    fs::path at = lower[layer];
    bool hidden_below = false;  // an opaque directory on the way hides the layers beneath
    for (size_t i = 0; i < parts.size(); ++i) {
      at /= parts[i];
      struct stat st;
      if (::lstat(at.c_str(), &st) != 0) break;  // not in this layer: look further down
      if (!is_base && IsWhiteout(st)) return std::nullopt;
      if (i + 1 == parts.size()) return layer;
      if (!S_ISDIR(st.st_mode)) return std::nullopt;  // a file here hides everything beneath
      if (!is_base && IsOpaque(at.string())) hidden_below = true;
    }
    if (hidden_below) return std::nullopt;
  }
  return std::nullopt;
}

// The entry overlayfs would show for `rel` if the stack were `lower` (top first), or nullopt.
std::optional<std::string> LookupBelow(const std::vector<std::string>& lower, const fs::path& rel) {
  std::optional<size_t> layer = LayerIndexShowing(lower, rel);
  if (!layer) return std::nullopt;
  return (fs::path(lower[*layer]) / rel).string();
}

bool DirectoryChanged(const std::string& path, const struct stat& st, const std::vector<std::string>& lower,
                      const fs::path& rel) {
  if (IsOpaque(path)) return true;
  std::optional<std::string> below = LookupBelow(lower, rel);
  if (!below) return true;
  struct stat bst;
  if (::lstat(below->c_str(), &bst) != 0 || !S_ISDIR(bst.st_mode)) return true;
  if (st.st_mode != bst.st_mode || st.st_uid != bst.st_uid || st.st_gid != bst.st_gid) return true;
  return UserXattrs(path) != UserXattrs(*below);
}

// Calls `visit(relative path, full path, stat)` for every entry under `layer`.
template <typename Visit>
Status Walk(const std::string& layer, Visit visit) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(layer, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) {
      return Status::FromErrno(errno, "reading " + it->path().string());
    }
    visit(it->path().lexically_relative(layer), it->path().string(), st);
  }
  if (ec) return Status::IOError(fmt::format("listing layer {}: {}", layer, ec.message()));
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> LayerChanges(const std::string& layer, const std::vector<std::string>& lower) {
  std::vector<std::string> out;
  TEMPER_RETURN_IF_ERROR(Walk(layer, [&](const fs::path& rel, const std::string& path, const struct stat& st) {
    if (!S_ISDIR(st.st_mode) || DirectoryChanged(path, st, lower, rel)) out.push_back("/" + rel.string());
  }));
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> LayerShowing(const std::vector<std::string>& layers, const std::string& path) {
  const fs::path rel = fs::path(path).relative_path();
  if (rel.empty()) return std::nullopt;
  std::optional<size_t> layer = LayerIndexShowing(layers, rel);
  if (!layer) return std::nullopt;
  return layers[*layer];
}

bool DirectoriesStack(const std::string& upper, const std::string& lower) {
  struct stat u, l;
  if (::lstat(upper.c_str(), &u) != 0 || ::lstat(lower.c_str(), &l) != 0) return false;
  if (!S_ISDIR(u.st_mode) || !S_ISDIR(l.st_mode) || IsOpaque(upper)) return false;
  return u.st_mode == l.st_mode && u.st_uid == l.st_uid && u.st_gid == l.st_gid;
}

Result<std::vector<std::string>> LayerEntries(const std::string& layer) {
  std::vector<std::string> out;
  TEMPER_RETURN_IF_ERROR(Walk(
      layer, [&](const fs::path& rel, const std::string&, const struct stat&) { out.push_back("/" + rel.string()); }));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace temper::stig
