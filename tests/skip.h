// Skipped means skipped: a case that cannot run here (no CUDA device, not root, no network
// namespaces) says so to ctest instead of passing, so a green run is told apart from a tested one.
//
// Catch2 v2 has no SKIP, so the verdict travels in the test process's exit status, decided by the
// shared main (catch_main.cpp) once every selected case has run:
//   - a failed assertion anywhere: Catch's own status (the failure count, never kSkippedExitStatus);
//   - else, a case that called TEMPER_SKIP: kSkippedExitStatus, which every suite's ctest entries
//     take as SKIP_RETURN_CODE (tests/CMakeLists.txt), so ctest lists them as "Skipped";
//   - else 0.
// So a case that failed before it skipped is reported failed, and a skip can never pass silently:
// a test registered without SKIP_RETURN_CODE sees a non-zero status and fails.
#pragma once

#include <catch2/catch.hpp>

namespace temper::testing {

// 77, as automake's test drivers use it; defined once, in tests/CMakeLists.txt.
inline constexpr int kSkippedExitStatus = TEMPER_SKIPPED_EXIT_STATUS;

// Records that the running case skips. Call it through TEMPER_SKIP, which first prints why as a
// Catch warning at the caller's line ("SKIPPED: <why>"; the console reporter shows warnings also
// for a case that passed) and then returns from the case. Not thread-safe: call it from the
// case's own thread, like Catch's macros.
void MarkSkipped();

// The exit status of a run whose cases Catch counted `failed` failed assertions for (see above).
// Prints which cases skipped, when some did.
int RunExitStatus(int failed);

}  // namespace temper::testing

// Ends the running case as skipped. Skip before checking anything: a case that skipped is reported
// skipped as a whole, whatever passed before; split a case rather than skip one SECTION of it.
#define TEMPER_SKIP(why)              \
  do {                                \
    WARN("SKIPPED: " << (why));       \
    ::temper::testing::MarkSkipped(); \
    return;                           \
  } while (0)
