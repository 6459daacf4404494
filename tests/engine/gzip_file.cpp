#include "gzip_file.h"

#include <cerrno>

#include <zlib.h>

#include <fmt/format.h>

namespace temper::engine::testing {

Result<std::string> ReadGzipFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno(errno, fmt::format("opening {}", path));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int err = Z_OK;
  std::string message = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) return Status::DataLoss(fmt::format("decompressing {}: {}", path, message));
  return out;
}

}  // namespace temper::engine::testing
