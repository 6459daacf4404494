// Debian's hardening on every ELF file the package ships (the top-level CMakeLists.txt's flags, and
// gcc's default PIE): what lintian's hardening-* tags and devscripts' hardening-check look for, read
// from each binary with readelf. temperd runs as root and parses what clients, models and SCAP
// content send it, so a binary that lost these (a target linked by another toolchain, a CUDA link
// step that drops the flags) fails here.
//   - PIE: an ET_DYN executable with DF_1_PIE, so ASLR moves its code too;
//   - full RELRO: a PT_GNU_RELRO segment and BIND_NOW, so the GOT is read-only once started;
//   - a non-executable stack (PT_GNU_STACK without X);
//   - the stack protector (__stack_chk_fail imported) and _FORTIFY_SOURCE (some __*_chk imported).
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include "orchestrator/daemon_process.h"
#include "package/built_deb.h"
#include "skip.h"

namespace temper::testing {
namespace {

TEST_CASE("every ELF file in the Debian package is PIE, full RELRO, NX stack, stack-protected and fortified",
          "[package]") {
  if (!std::filesystem::exists("/usr/bin/readelf")) TEMPER_SKIP("readelf is missing (binutils)");
  const BuiltDeb built = BuildDeb();
  const std::vector<std::string> elves = ElfFilesUnder(built.tree);
  // The four programs at least: a binary that moved or vanished is not silently unchecked.
  for (const char* program :
       {"usr/sbin/temperd", "usr/bin/temper", "usr/bin/temper-lm", "usr/libexec/temper/temper-stig-eval"}) {
    CHECK(std::find(elves.begin(), elves.end(), program) != elves.end());
  }
  for (const std::string& elf : elves) {
    INFO(elf);
    const std::string path = built.tree + "/" + elf;
    ProcessResult header = RunProcess({"/usr/bin/readelf", "-W", "--file-header", path});
    ProcessResult segments = RunProcess({"/usr/bin/readelf", "-W", "--program-headers", path});
    ProcessResult dynamic = RunProcess({"/usr/bin/readelf", "-W", "--dynamic", path});
    ProcessResult symbols = RunProcess({"/usr/bin/readelf", "-W", "--dyn-syms", path});
    REQUIRE(header.exit_code == 0);
    REQUIRE(segments.exit_code == 0);
    REQUIRE(dynamic.exit_code == 0);
    REQUIRE(symbols.exit_code == 0);

    CHECK(std::regex_search(header.out, std::regex(R"(Type:\s+DYN )")));
    CHECK(std::regex_search(dynamic.out, std::regex(R"(\(FLAGS_1\)\s+Flags:.* PIE\b)")));
    CHECK(std::regex_search(segments.out, std::regex(R"(\n\s*GNU_RELRO\s)")));
    // -z now writes DF_BIND_NOW into FLAGS and DF_1_NOW into FLAGS_1; the loader honours either.
    CHECK((std::regex_search(dynamic.out, std::regex(R"(\(FLAGS\)\s+.*\bBIND_NOW\b)")) ||
           std::regex_search(dynamic.out, std::regex(R"(\(FLAGS_1\)\s+Flags:.* NOW\b)"))));
    std::smatch stack;
    REQUIRE(std::regex_search(segments.out, stack, std::regex(R"(\n\s*GNU_STACK(\s+\S+){5}\s+(RWE|RW|R) )")));
    CHECK(stack[2] == "RW");
    CHECK(std::regex_search(symbols.out, std::regex(R"(\b__stack_chk_fail\b)")));
    // Any fortified libc call (__memcpy_chk, __snprintf_chk, __fprintf_chk, ...) other than the
    // stack protector's: glibc links them only under _FORTIFY_SOURCE.
    CHECK(std::regex_search(symbols.out, std::regex(R"(\b__(?!stack_chk)[a-z0-9_]+_chk\b)")));
  }
}

}  // namespace
}  // namespace temper::testing
