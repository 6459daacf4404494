#include "leftovers.h"

#include <signal.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

// mountinfo writes a space, tab, newline and backslash in a path as \ and three octal digits.
std::string Unescape(const std::string& field) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(field[i + 1]) && octal(field[i + 2]) && octal(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// Mount points at or below `dir`, deepest first.
std::vector<std::string> MountsAtOrBelow(const std::string& dir) {
  std::ifstream info("/proc/self/mountinfo");
  std::vector<std::string> points;
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    point = Unescape(point);
    if (point == dir || point.rfind(dir + "/", 0) == 0) points.push_back(point);
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return points;
}

bool Running(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::string Leftovers::ToString(size_t max_entries) const {
  std::string out;
  auto add = [&out](const std::string& item) { out += (out.empty() ? "" : "; ") + item; };
  for (const std::string& m : mounts) add("mount " + m);
  for (size_t i = 0; i < entries.size() && i < max_entries; ++i) add(entries[i]);
  if (entries.size() > max_entries) add(fmt::format("and {} more", entries.size() - max_entries));
  return out;
}

Leftovers FindLeftovers(const std::string& dir) {
  Leftovers found;
  found.mounts = MountsAtOrBelow(dir);
  std::error_code ec;
  // Not into mounts: what a mount holds is the mount's, and it is named already.
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    found.entries.push_back(path);
    if (std::find(found.mounts.begin(), found.mounts.end(), path) != found.mounts.end()) it.disable_recursion_pending();
  }
  std::sort(found.entries.begin(), found.entries.end());
  return found;
}

Status RemoveWithMounts(const std::string& dir) {
  for (const std::string& point : MountsAtOrBelow(dir)) ::umount2(point.c_str(), MNT_DETACH);
  std::vector<std::string> still = MountsAtOrBelow(dir);
  if (!still.empty()) return Status::IOError(fmt::format("{} stays mounted after a detach", still.front()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Status::IOError(fmt::format("removing {}: {}", dir, ec.message()));
  return Status::OK();
}

std::vector<std::string> DeadProcessDirs(const std::string& root) {
  std::vector<std::string> dead;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    pid_t pid = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), pid);
    const bool a_pid = err == std::errc() && end == name.data() + name.size() && pid > 0;
    if (!a_pid || !Running(pid)) dead.push_back(it->path().string());
  }
  std::sort(dead.begin(), dead.end());
  return dead;
}

}  // namespace temper::testing
