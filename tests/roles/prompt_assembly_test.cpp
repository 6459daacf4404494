// Prompt assembly: the budget is never exceeded, priorities decide what stays, truncation is at
// line boundaries, and every drop is reported.
#include "roles/prompt_assembly.h"
#include "roles/prompt_sections.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

std::string Lines(const std::string& prefix, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += prefix + " line " + std::to_string(i) + "\n";
  return s;
}

}  // namespace

TEST_CASE("everything fits: all sections in order, nothing reported") {
  BytesTokenEstimator est;
  auto p = AssemblePrompt({{"a", "alpha", 0, true}, {"b", "beta", 5}, {"c", "gamma", 1}}, 1000, est);
  REQUIRE(p.ok());
  CHECK(p->text == "alpha\n\nbeta\n\ngamma");
  CHECK(p->trimmed.empty());
  CHECK(p->tokens == est.Count(p->text));
}

TEST_CASE("optional sections are kept by priority and the rest reported as dropped") {
  BytesTokenEstimator est(1);  // one token per byte makes sizes easy to reason about
  std::vector<PromptSection> s = {
      {"instructions", std::string(100, 'i'), 0, true},
      {"old attempt", std::string(100, 'o'), 1},
      {"lesson", std::string(100, 'l'), 9},
      {"similar rule", std::string(100, 's'), 5},
  };
  auto p = AssemblePrompt(s, 310, est);  // room for required + two optional (each 102 with separator)
  REQUIRE(p.ok());
  CHECK(p->tokens <= 310);
  CHECK(p->text.find('l') != std::string::npos);
  CHECK(p->text.find('s') != std::string::npos);
  CHECK(p->text.find('o') == std::string::npos);
  REQUIRE(p->trimmed.size() == 1);
  CHECK(p->trimmed[0].name == "old attempt");
  CHECK(p->trimmed[0].tokens == 102);
  CHECK(p->trimmed[0].kept_tokens == 0);
  // Order of the kept text follows the given order, not the priority.
  CHECK(p->text.find('i') < p->text.find('l'));
  CHECK(p->text.find('l') < p->text.find('s'));
}

TEST_CASE("a truncatable section is cut at a line boundary, with a marker, within the budget") {
  BytesTokenEstimator est;
  std::vector<PromptSection> s = {{"system", "You are the Worker.", 0, true},
                                  {"evaluator output", Lines("oscap", 200), 1, false, true}};
  for (size_t budget : {100u, 250u, 800u}) {
    INFO(budget);
    auto p = AssemblePrompt(s, budget, est);
    REQUIRE(p.ok());
    CHECK(p->tokens <= budget);
    REQUIRE(p->trimmed.size() == 1);
    CHECK(p->trimmed[0].kept_tokens > 0);
    CHECK(p->trimmed[0].kept_tokens < p->trimmed[0].tokens);
    CHECK_THAT(p->text, Catch::Contains("lines kept]"));
    // Every kept line is whole.
    size_t marker = p->text.find("[… truncated");
    std::string body = p->text.substr(0, marker);
    CHECK(body.back() == '\n');
    CHECK(body.substr(body.rfind("oscap")).find(" line ") != std::string::npos);
  }
}

TEST_CASE("required sections beyond the budget are an error naming them") {
  BytesTokenEstimator est(1);
  auto p = AssemblePrompt({{"rule text", std::string(500, 'r'), 0, true}, {"memo", "m", 1}}, 100, est);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(p.status().message(), Catch::Contains("rule text (502 tokens)"));
  CHECK_THAT(p.status().message(), Catch::Contains("budget is 100"));
}

TEST_CASE("a lesson's provenance comes before its text, so the model reads it as a note from that target") {
  std::vector<Lesson> lessons = {
      {"xccdf_org.ssgproject.content_rule_a", "check sshd_config.d first", 0.5, true,
       "learnt on rootfs target lab in batch 3 at 2026-11-29 10:02 UTC by the reflector (endpoint local)"},
      {"xccdf_org.ssgproject.content_rule_b", "neighbour's note", 0.9, false, ""}};
  std::vector<PromptSection> sections = LessonSections(lessons);
  REQUIRE(sections.size() == 2);
  CHECK(sections[0].text ==
        "## Lesson (this rule, utility 0.50)\n"
        "Provenance: learnt on rootfs target lab in batch 3 at 2026-11-29 10:02 UTC by the reflector (endpoint local)\n"
        "check sshd_config.d first");
  // A caller that does not know where a lesson came from shows none.
  CHECK(sections[1].text ==
        "## Lesson (similar rule xccdf_org.ssgproject.content_rule_b, utility 0.90)\nneighbour's note");
}
