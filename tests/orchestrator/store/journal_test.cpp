#include "orchestrator/store/journal.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::ReadFileOrEmpty;
using testing::TempDir;

std::vector<uint64_t> FileSeqs(const std::string& path) {
  std::vector<uint64_t> seqs;
  std::string text = ReadFileOrEmpty(path);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    REQUIRE(end != std::string::npos);
    seqs.push_back(nlohmann::json::parse(text.substr(start, end - start))["seq"].get<uint64_t>());
    start = end + 1;
  }
  return seqs;
}

TEST_CASE("events committed from many threads at once reach the journal file in seq order") {
  TempDir dir;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  std::unique_ptr<JournalFiles> files = *JournalFiles::Open(dir / "journal");
  Logger log(LogLevel::kError, Logger::Style::kPlain, 2);
  std::unique_ptr<Journal> journal = *Journal::Open(*store, *files, log);
  Result<StateStore::Submitted> batch = journal->SubmitBatch(
      NewBatch{.target = "lab", .datastream = "/ds.xml", .profile = "stig", .rule_ids = {"xccdf_a_rule_b"}});
  REQUIRE(batch.ok());

  // Loops on several targets and the service's clients commit concurrently in temperd.
  constexpr int kThreads = 6, kEach = 60;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Result<EventRecord> e = journal->Append(NewEvent{.batch_id = batch->batch.id,
                                                         .rule_id = "xccdf_a_rule_b",
                                                         .role = "worker",
                                                         .type = "tool.call",
                                                         .data_json = nlohmann::json{{"t", t}, {"i", i}}.dump()});
        if (!e.ok()) ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(failed == 0);

  std::vector<uint64_t> seqs = FileSeqs(files->PathFor(batch->batch.id));
  REQUIRE(seqs.size() == 1 + kThreads * kEach);
  for (size_t i = 1; i < seqs.size(); ++i) {
    INFO("line " << i + 1);
    REQUIRE(seqs[i] == seqs[i - 1] + 1);
  }
  CHECK(journal->last_seq() == seqs.back());
}

}  // namespace
}  // namespace temper
