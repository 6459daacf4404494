// The journal's vocabulary: one table of event types, which the proto's documentation lists as it
// is, and whose fields are the keys the writers write (checked on the journal recorded from the
// end-to-end suites, tests/data/journal).
#include "orchestrator/journal_event_types.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// In the table's order.
std::vector<std::string> Fields(const EventSpec& spec) {
  std::vector<std::string> out;
  std::istringstream words{std::string(spec.fields)};
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

// What temper.proto says above JournalEvent.type: the table, one type a line with what it means,
// then the keys of its data.
std::string ProtoDocumentation() {
  std::string out =
      "  // What happened. temperd writes these types (orchestrator/journal_event_types.cpp defines them;\n"
      "  // tests/orchestrator/journal_event_types_test.cpp keeps this list equal to it), each with the keys\n"
      "  // of data_json under it. A type not listed here (from a later temperd) is shown as it is.\n";
  for (const EventSpec& spec : EventSpecs()) {
    out += fmt::format("  //   {}: {}\n", spec.name, spec.meaning);
    std::string line = "  //       ";
    for (const std::string& field : Fields(spec)) {
      if (line.size() + field.size() + 1 > 110) {
        out += line + "\n";
        line = "  //       ";
      }
      line += (line.ends_with(' ') ? "" : " ") + field;
    }
    out += line + "\n";
  }
  return out;
}

TEST_CASE("every event type has one name, found again by that name, and the names are the stored ones") {
  REQUIRE(EventSpecs().size() == kEventTypeCount);
  std::set<std::string_view> names;
  for (const EventSpec& spec : EventSpecs()) {
    CHECK(names.insert(spec.name).second);
    CHECK(ParseEventType(spec.name) == spec.type);
    CHECK(EventTypeName(spec.type) == spec.name);
    CHECK_FALSE(spec.meaning.empty());
    CHECK(spec.describe != nullptr);
  }
  CHECK(EventTypeName(EventType::kBatchSubmitted) == "batch.submitted");
  CHECK(EventTypeName(EventType::kRebootVerificationFailed) == "reboot.verification_failed");
  CHECK_FALSE(ParseEventType("eval.result").has_value());
  CHECK_FALSE(ParseEventType("rule.skipped").has_value());
  CHECK_FALSE(ParseEventType("").has_value());
}

TEST_CASE("the events that move a rule say which state it ends in, one event per state") {
  CHECK(SpecOf(EventType::kRuleFixed).rule_state == RuleState::kFixed);
  CHECK(SpecOf(EventType::kRuleRebootPending).rule_state == RuleState::kRebootPending);
  CHECK(SpecOf(EventType::kArchitectSkip).rule_state == RuleState::kSkipped);
  CHECK(SpecOf(EventType::kRuleRequeued).rule_state == RuleState::kPending);
  CHECK_FALSE(SpecOf(EventType::kAttemptKept).rule_state.has_value());
  std::set<RuleState> states;
  for (const EventSpec& spec : EventSpecs()) {
    if (spec.rule_state) CHECK(states.insert(*spec.rule_state).second);
  }
}

TEST_CASE("temper.proto documents the event types of the table, and no other") {
  const std::string proto = ReadText(std::string(TEMPER_SOURCE_DIR) + "/proto/temper/v1/temper.proto");
  const std::string field = "  string type = 7;";
  size_t at = proto.find("message JournalEvent {");
  REQUIRE(at != std::string::npos);
  at = proto.find(field, at);
  REQUIRE(at != std::string::npos);
  // The comment lines right above the field.
  size_t begin = at;
  while (begin > 0) {
    size_t line = proto.rfind('\n', begin - 2) + 1;
    if (proto.compare(line, 4, "  //") != 0) break;
    begin = line;
  }
  const std::string documented = proto.substr(begin, at - begin);
  if (documented != ProtoDocumentation()) {
    const std::string written = std::string(TEMPER_BINARY_DIR) + "/JournalEvent.type.proto-comment";
    std::ofstream(written, std::ios::binary) << ProtoDocumentation();
    FAIL("temper.proto's comment above `" << field << "` is not the table's; it should read as " << written);
  }
  CHECK(proto.find("eval.result") == std::string::npos);
}

// The recorded journal holds what the writers wrote: every key of a known type's data is one of the
// fields the table gives it.
TEST_CASE("the fields of each type are the keys its writers write") {
  std::istringstream lines(ReadText(std::string(TEMPER_TEST_DATA_DIR) + "/journal/every_event_type.jsonl"));
  std::set<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json event = nlohmann::json::parse(line);
    std::optional<EventType> type = ParseEventType(event["type"].get<std::string>());
    if (!type || !event["data"].is_object()) continue;
    seen.insert(event["type"].get<std::string>());
    const std::vector<std::string> fields = Fields(SpecOf(*type));
    for (const auto& [key, value] : event["data"].items()) {
      INFO("event " << event["seq"] << " (" << event["type"] << ") has data key " << key);
      CHECK(std::find(fields.begin(), fields.end(), key) != fields.end());
    }
  }
  // Every type is in the recorded journal.
  CHECK(seen.size() == kEventTypeCount);
}

TEST_CASE("an event reads as its type's sentence, and generically outside the vocabulary") {
  const std::string rule = "xccdf_org.ssgproject.content_rule_accounts_tmout";
  CHECK(EventSentence("rule.fixed", rule, "lab", R"({"attempts":2,"tokens":1234})") ==
        "rule.fixed accounts_tmout after 2 attempts (1234 tokens)");
  CHECK(EventSentence("batch.started", "", "lab", "") == "batch.started on target lab");
  CHECK(
      EventSentence("batch.started", "", "lab", R"j({"parallel_attempts":2,"parallel_attempts_why":"auto: 2 (x)"})j") ==
      "batch.started on target lab, 2 attempts at once (auto: 2 (x))");
  CHECK(EventSentence("batch.completed", "", "lab", R"({"rules":{"fixed":2},"remakes":{"total":3}})") ==
        "batch.completed: 2 fixed; 3 attempts made again");
  // Known types without a sentence of their own, unknown types and data that is not an object.
  CHECK(EventSentence("rule.revert_started", rule, "lab", R"({"snapshots":[5]})") ==
        "rule.revert_started " + rule + "  {\"snapshots\":[5]}");
  CHECK(EventSentence("eval.result", rule, "lab", "{}") == "eval.result " + rule);
  CHECK(EventSentence("rule.fixed", rule, "lab", "[1]") == "rule.fixed " + rule + "  [1]");
}

// The journal says exactly which reference fix ran: the rule, the content it came from and the
// script's digest (its first 16 hex digits in the sentence; all of it in the data).
TEST_CASE("an apply_reference_fix call reads as the reference fix it ran or the policy refused") {
  const std::string rule = "xccdf_org.ssgproject.content_rule_accounts_tmout";
  const nlohmann::json fix = {
      {"rule", rule},
      {"source", "ssg-ubuntu2004-ds.xml, benchmark xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04"},
      {"sha256", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}};
  nlohmann::json data = {{"attempt", 1},
                         {"tool", "apply_reference_fix"},
                         {"arguments", nlohmann::json::object()},
                         {"reference_fix", fix},
                         {"detail", "exit status 0"}};
  CHECK(EventSentence("worker.tool_call", rule, "lab", data.dump()) ==
        "worker.tool_call accounts_tmout #1 apply_reference_fix: reference fix accounts_tmout from "
        "ssg-ubuntu2004-ds.xml, benchmark xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 (sha256 "
        "0123456789abcdef…) → exit status 0");
  data["detail"] = "refused by policy: 'reboot' would take the host down";
  data["arguments"] = {{"reason", "SSG's fix fits"}};
  CHECK_THAT(EventSentence("worker.refused", rule, "lab", data.dump()),
             Catch::StartsWith("worker.refused accounts_tmout #1 apply_reference_fix: reference fix accounts_tmout "
                               "from ssg-ubuntu2004-ds.xml") &&
                 Catch::Contains("(sha256 0123456789abcdef…): SSG") &&
                 Catch::EndsWith(" — refused by policy: 'reboot' would take the host down"));
}

}  // namespace
}  // namespace temper
