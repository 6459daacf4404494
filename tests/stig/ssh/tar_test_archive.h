// TarTestArchive: builds ustar archives by hand, member by member, for tests that need an archive a
// real tar would never write (a hostile host's) or one with members this machine cannot make (a
// device node: mknod is refused here).
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

namespace temper::testing {

class TarTestArchive {
 public:
  // `type`: '0' file, '2' symlink (`link` its target), '3' character device, '5' directory,
  // '6' FIFO, 'x' pax header (`data` its records).
  TarTestArchive& Add(char type, const std::string& name, const std::string& data = "", const std::string& link = "",
                      unsigned mode = 0644) {
    char header[512] = {};
    std::snprintf(header, 100, "%s", name.c_str());
    std::snprintf(header + 100, 8, "%07o", mode);
    std::snprintf(header + 108, 8, "%07o", 0u);
    std::snprintf(header + 116, 8, "%07o", 0u);
    std::snprintf(header + 124, 12, "%011o", static_cast<unsigned>(data.size()));
    std::snprintf(header + 136, 12, "%011o", 1700000000u);
    header[156] = type;
    std::snprintf(header + 157, 100, "%s", link.c_str());
    std::memcpy(header + 257, "ustar", 6);
    std::memcpy(header + 263, "00", 2);
    std::memset(header + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : header) sum += c;
    std::snprintf(header + 148, 8, "%06o", sum);
    bytes_.append(header, 512);
    bytes_ += data;
    bytes_.append((512 - data.size() % 512) % 512, '\0');
    return *this;
  }
  // The archive with its two end-of-archive blocks.
  std::string Finish() const { return bytes_ + std::string(1024, '\0'); }

 private:
  std::string bytes_;
};

}  // namespace temper::testing
