#include "orchestrator/store/journal_file_scan.h"

#include <chrono>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

namespace temper {
namespace {

JournalFileScan Scan(const std::string& bytes) {
  std::istringstream in(bytes);
  Result<JournalFileScan> scan = ScanJournal(in);
  REQUIRE(scan.ok());
  return *scan;
}

std::string Event(uint64_t seq, const std::string& extra = "") {
  return fmt::format("{{\"batch_id\":\"1\",\"data\":{{{}}},\"seq\":{},\"type\":\"t\"}}\n", extra, seq);
}

TEST_CASE("journal scan: complete event lines give the last seq and the complete size") {
  std::string text = Event(1) + Event(2) + Event(7);
  JournalFileScan s = Scan(text);
  CHECK(s.last_seq == 7);
  CHECK(s.events == 3);
  CHECK(s.lines == 3);
  CHECK(s.complete_bytes == text.size());
  CHECK(s.torn_bytes == 0);
  CHECK(s.problems.empty());
  CHECK(Scan("").last_seq == 0);
}

TEST_CASE("journal scan: bytes after the last newline are a torn tail, even when they parse") {
  std::string whole = Event(1);
  JournalFileScan s = Scan(whole + "{\"seq\":2,\"da");
  CHECK(s.last_seq == 1);
  CHECK(s.complete_bytes == whole.size());
  CHECK(s.torn_bytes == 12);
  s = Scan(whole + "{\"seq\":2}");  // whole JSON, but its newline never made it
  CHECK(s.last_seq == 1);
  CHECK(s.torn_bytes == 9);
  s = Scan("{\"seq\":1");
  CHECK(s.complete_bytes == 0);
  CHECK(s.torn_bytes == 8);
}

TEST_CASE("journal scan: a line far longer than the read buffer is read whole, seq after the data") {
  std::string big = Event(5, fmt::format("\"text\":\"{}\"", std::string(3 << 20, 'x')));
  JournalFileScan s = Scan(Event(4) + big + Event(6));
  CHECK(s.last_seq == 6);
  CHECK(s.events == 3);
  CHECK(s.longest_line == big.size() - 1);
  // Torn in the middle of the long line.
  s = Scan(Event(4) + big.substr(0, big.size() / 2));
  CHECK(s.last_seq == 4);
  CHECK(s.torn_bytes == big.size() / 2);
}

TEST_CASE(
    "journal scan: lines that are not events are problems with line, offset and length, and do not stop the scan") {
  std::string one = Event(1);
  std::string text = one + "garbage\n" + "\n" + "[1,2]\n" + "{\"seq\":\"3\"}\n" + "{\"data\":{\"seq\":9}}\n" +
                     Event(2) + Event(2) + "{\"seq\":3} trailing\n" + Event(4);
  JournalFileScan s = Scan(text);
  CHECK(s.last_seq == 4);
  CHECK(s.events == 3);
  REQUIRE(s.problem_count == 7);
  REQUIRE(s.problems.size() == 7);
  CHECK(s.problems[0].line == 2);
  CHECK(s.problems[0].offset == one.size());
  CHECK(s.problems[0].bytes == 7);
  CHECK_THAT(s.problems[0].what, Catch::StartsWith("not JSON: "));
  CHECK(s.problems[1].line == 3);                                                      // an empty line
  CHECK(s.problems[2].what == "not a journal event (no positive top-level \"seq\")");  // an array
  CHECK(s.problems[3].line == 5);                                                      // seq as a string
  CHECK(s.problems[4].line == 6);                                                      // seq only nested
  CHECK(s.problems[5].what == "seq 2 does not follow seq 2");
  CHECK_THAT(s.problems[6].what, Catch::StartsWith("not JSON: "));
}

TEST_CASE("journal scan: deep nesting costs no stack, and bytes that are not UTF-8 are a problem, not a crash") {
  const int depth = 1000000;
  std::string deep = "{\"seq\":8,\"data\":" + std::string(depth, '[') + std::string(depth, ']') + "}\n";
  JournalFileScan s = Scan(deep);
  CHECK(s.last_seq == 8);
  s = Scan(std::string("{\"seq\":1,\"data\":\"\xff\xfe\"}\n") + Event(2));
  CHECK(s.last_seq == 2);
  CHECK(s.problem_count == 1);
}

TEST_CASE("journal scan: only the first problems are kept, all are counted, and descriptions stay short") {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "not an event " + std::string(10000, 'z') + "\n";
  JournalFileScan s = Scan(text);
  CHECK(s.problem_count == 100);
  CHECK(s.problems.size() == kMaxReportedProblems);
  for (const JournalLineProblem& p : s.problems) CHECK(p.what.size() <= 240);
}

TEST_CASE("journal scan: reads 64 MiB of events at a rate the start-up can afford") {
  std::string text;
  const std::string data = fmt::format("\"detail\":\"{}\"", std::string(900, 'd'));
  for (uint64_t seq = 1; text.size() < (64u << 20); ++seq) text += Event(seq, data);
  auto start = std::chrono::steady_clock::now();
  JournalFileScan s = Scan(text);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN(fmt::format("scanned {:.0f} MiB in {:.2f} s: {:.0f} MiB/s", text.size() / 1048576.0, seconds,
                   text.size() / 1048576.0 / seconds));
  CHECK(s.problem_count == 0);
  CHECK(seconds < 10);
}

}  // namespace
}  // namespace temper
