// The main every Catch2 suite links: Catch's own session, between two steps of temper's:
//   - before the cases, this process's directories (scratch_space.h) are made and TMPDIR points
//     at the temporary one, so what the cases and the programs they start write is found;
//   - after them, whatever the process left there fails the run, naming it, and is removed
//     (leftovers.h); then the exit status says whether a case skipped (skip.h), so ctest counts
//     skipped cases apart from passed ones.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "scratch_space.h"
#include "skip.h"

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int bad = session.applyCommandLine(argc, argv); bad != 0) return bad;
  const Catch::ConfigData& c = session.configData();
  // A listing's status is the number of names listed (catch_discover_tests reads the list this way).
  if (c.listTests || c.listTestNamesOnly || c.listTags || c.listReporters || c.showHelp || c.libIdentify) {
    return session.run();
  }
  try {
    temper::testing::TestScratchDir();
    ::setenv("TMPDIR", temper::testing::TestTempDir().c_str(), 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "temper tests: %s\n", e.what());
    return 1;
  }
  const int failed = session.run();
  const temper::testing::Leftovers left = temper::testing::EndProcessDirs();
  if (!left.empty()) std::printf("left behind by this test process (now removed): %s\n", left.ToString().c_str());
  return temper::testing::RunExitStatus(left.empty() ? failed : std::max(failed, 1));
}
