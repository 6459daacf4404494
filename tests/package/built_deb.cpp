#include "package/built_deb.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include "orchestrator/daemon_process.h"
#include "scratch_space.h"

namespace temper::testing {

std::string DebFileName() { return fmt::format("temper_{}_amd64.deb", TEMPER_DEB_VERSION); }

BuiltDeb BuildDeb() {
  auto work = std::make_unique<ScratchPath>("built-deb");
  std::filesystem::create_directories(work->path());
  ProcessResult pack = RunProcess({TEMPER_CPACK_COMMAND, "-G", "DEB", "--config",
                                   std::string(TEMPER_BINARY_DIR) + "/CPackConfig.cmake", "-B", work->path() + "/pkg"});
  INFO(pack.out << pack.err);
  REQUIRE(pack.exit_code == 0);
  const std::string deb = work->path() + "/pkg/" + DebFileName();
  REQUIRE(std::filesystem::exists(deb));
  const std::string tree = work->path() + "/tree";
  ProcessResult unpack = RunProcess({"/usr/bin/dpkg-deb", "-x", deb, tree});
  INFO(unpack.out << unpack.err);
  REQUIRE(unpack.exit_code == 0);
  return {std::move(work), deb, tree};
}

std::vector<std::string> ElfFilesUnder(const std::string& tree) {
  std::vector<std::string> elves;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tree)) {
    if (!e.is_regular_file() || e.is_symlink()) continue;
    char magic[4] = {};
    std::ifstream in(e.path(), std::ios::binary);
    if (in.read(magic, 4) && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F') {
      elves.push_back(std::filesystem::relative(e.path(), tree).string());
    }
  }
  std::sort(elves.begin(), elves.end());
  return elves;
}

}  // namespace temper::testing
