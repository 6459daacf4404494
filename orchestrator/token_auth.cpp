#include "orchestrator/token_auth.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

namespace temper {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // The length is not secret (tokens have a fixed format); the contents are.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<std::string> ReadTokenFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, fmt::format("token file {}", path));
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied(fmt::format(
        "token file {} is readable by other users (mode {:o}); run chmod 600 on it", path, st.st_mode & 0777));
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const char* space = " \t\r\n";
  size_t begin = line.find_first_not_of(space);
  size_t end = line.find_last_not_of(space);
  if (begin == std::string::npos) return Status::InvalidArgument(fmt::format("token file {} is empty", path));
  return line.substr(begin, end - begin + 1);
}

}  // namespace temper
