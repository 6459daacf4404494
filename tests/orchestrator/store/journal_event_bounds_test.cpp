#include "orchestrator/store/journal_event_bounds.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/store/journal_files.h"
#include "orchestrator/store/state_store.h"
#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using nlohmann::json;
using testing::TempDir;

NewEvent WithData(const json& data) {
  return NewEvent{.batch_id = std::nullopt,
                  .target = "lab",
                  .rule_id = "xccdf_a_rule_b",
                  .role = "worker",
                  .type = "worker.tool_call",
                  .data_json = data.dump()};
}

// The line the event's file gets, as if committed with the widest seq and time.
size_t LineBytes(const NewEvent& e) {
  return JournalFiles::ToJsonLine(EventRecord{.seq = 18446744073709551615ull,
                                              .time = 9223372036854775807,
                                              .batch_id = 9223372036854775807,
                                              .target = e.target,
                                              .rule_id = e.rule_id,
                                              .role = e.role,
                                              .type = e.type,
                                              .data_json = e.data_json})
      .size();
}

TEST_CASE("an event within the bounds passes byte for byte") {
  NewEvent e = WithData({{"tool", "run_command"}, {"arguments", {{"command", "sshd -t"}}}});
  NewEvent bounded = BoundJournalEvent(e);
  CHECK(bounded.data_json == e.data_json);
  CHECK(bounded.type == e.type);
}

TEST_CASE("a huge tool argument is cut with a marker, and the line stays within the documented bound") {
  NewEvent e =
      WithData({{"tool", "write_file"}, {"arguments", {{"path", "/etc/x"}, {"content", std::string(5 << 20, 'c')}}}});
  NewEvent bounded = BoundJournalEvent(e);
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
  json data = json::parse(bounded.data_json);
  CHECK(data["tool"] == "write_file");
  CHECK(data["arguments"]["path"] == "/etc/x");
  std::string content = data["arguments"]["content"];
  CHECK(content.size() <= kMaxEventStringBytes);
  CHECK_THAT(content, Catch::Contains(fmt::format("of {} bytes left out]", 5 << 20)));
}

TEST_CASE("many long strings are cut shorter until the line fits") {
  json outputs = json::array();
  for (int i = 0; i < 40; ++i) outputs.push_back(std::string(20000, 'o'));
  NewEvent bounded = BoundJournalEvent(WithData({{"outputs", outputs}}));
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
  json data = json::parse(bounded.data_json);
  REQUIRE(data["outputs"].size() == 40);  // every output kept, each shorter
  CHECK_THAT(data["outputs"][39].get<std::string>(), Catch::Contains("bytes left out]"));
}

TEST_CASE("strings that escape to six bytes each still fit the line") {
  NewEvent bounded = BoundJournalEvent(WithData({{"output", std::string(100000, '\x01')}}));
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
}

TEST_CASE("long lists keep their first items and say how many were left out") {
  json many = json::array();
  for (int i = 0; i < 100000; ++i) many.push_back(fmt::format("xccdf_org.ssgproject.content_rule_{}", i));
  NewEvent bounded = BoundJournalEvent(WithData({{"not_in_datastream", many}, {"rules", 100000}}));
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
  json data = json::parse(bounded.data_json);
  CHECK(data["rules"] == 100000);
  const json& kept = data["not_in_datastream"];
  REQUIRE(kept.size() >= 5);
  CHECK(kept[0] == "xccdf_org.ssgproject.content_rule_0");
  CHECK(kept.back() == fmt::format("…[cut by temper: {} of 100000 items left out]", 100000 - (kept.size() - 1)));
}

TEST_CASE("data that neither cut can shrink enough becomes a truncation note with its prefix") {
  json wide = json::object();
  for (int i = 0; i < 20000; ++i) wide[fmt::format("key{}", i)] = i;
  NewEvent e = WithData({{"wide", wide}});
  NewEvent bounded = BoundJournalEvent(e);
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
  json data = json::parse(bounded.data_json);
  CHECK(data["truncated"]["original_bytes"] == e.data_json.size());
  CHECK_THAT(data["truncated"]["prefix"].get<std::string>(), Catch::StartsWith("{\"wide\":{\"key0\":0,"));
}

TEST_CASE("long object keys and envelope fields are cut too") {
  NewEvent e = WithData({{std::string(100000, 'k'), 1}});
  e.type = std::string(1000, 't');
  e.rule_id = std::string(1000, 'r');
  NewEvent bounded = BoundJournalEvent(e);
  CHECK(bounded.type.size() <= kMaxEventFieldBytes);
  CHECK(bounded.rule_id.size() <= kMaxEventFieldBytes);
  CHECK(LineBytes(bounded) <= kMaxJournalLineBytes);
}

TEST_CASE("the state store bounds every event it commits") {
  TempDir dir;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  Result<EventRecord> stored = store->AppendEvent(WithData({{"detail", std::string(3 << 20, 'd')}}));
  REQUIRE(stored.ok());
  CHECK(JournalFiles::ToJsonLine(*stored).size() <= kMaxJournalLineBytes);
  std::vector<EventRecord> read = *store->ReadEvents(0, std::nullopt, 10);
  REQUIRE(read.size() == 1);
  CHECK(read[0].data_json == stored->data_json);
}

}  // namespace
}  // namespace temper
