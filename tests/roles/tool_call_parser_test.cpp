// Text-level tool-call extraction on a corpus of realistic model outputs (tests/data/roles/
// text_tool_calls/: thinking, fences, tags, trailing commentary, several calls, truncation), each
// with its expected calls or error in expected.json.
#include "roles/tool_call_parser.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace temper;
using nlohmann::json;

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kCorpus = std::string(TEMPER_TEST_DATA_DIR) + "/roles/text_tool_calls";

TEST_CASE("an error quoting a reply cuts it between characters, so the journal can record it") {
  // A random model's reply: multi-byte characters everywhere, no JSON. The quote in the error
  // used to end inside a character, and temperd died dumping the journal event that held it.
  std::string reply;
  while (reply.size() < 400) reply += "Pie \xe2\x80\x94 calibr\xe0\xb7\x80 ";
  for (size_t shift = 0; shift < 6; ++shift) {
    Result<std::string> found = ExtractJsonObject(std::string(shift, 'x') + reply);
    REQUIRE_FALSE(found.ok());
    const nlohmann::json event = {{"error", found.status().message()}};
    CHECK_NOTHROW(event.dump());
  }
}

}  // namespace

TEST_CASE("every corpus output gives its expected calls or error") {
  json expected = json::parse(Slurp(kCorpus + "/expected.json"));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    if (entry.path().extension() != ".txt") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    INFO(name);
    REQUIRE(expected.contains(name));
    const json& want = expected[name];
    auto got = ExtractToolCallsFromText(Slurp(entry.path().string()));
    if (want.contains("error")) {
      REQUIRE_FALSE(got.ok());
      CHECK(got.status().code() == StatusCode::kInvalidArgument);
      CHECK_THAT(got.status().message(), Catch::Contains(want["error"].get<std::string>()));
      continue;
    }
    REQUIRE(got.ok());
    REQUIRE(got->calls.size() == want["calls"].size());
    for (size_t i = 0; i < got->calls.size(); ++i) {
      CHECK(got->calls[i].name == want["calls"][i]["name"]);
      CHECK(json::parse(got->calls[i].arguments) == want["calls"][i]["arguments"]);
      CHECK(got->calls[i].id == "text-" + std::to_string(i + 1));
    }
    if (want.contains("prose")) CHECK(got->prose == want["prose"]);
    if (want.contains("prose_contains")) {
      for (const json& p : want["prose_contains"]) CHECK_THAT(got->prose, Catch::Contains(p.get<std::string>()));
    }
    CHECK(got->prose.find("```") == std::string::npos);
    CHECK(got->prose.find("<tool_call>") == std::string::npos);
  }
  CHECK(files == expected.size());  // no expectation without its file
}

TEST_CASE("thinking is removed in all its spellings, including an unterminated one") {
  CHECK(StripThinking("<think>a</think>b") == "b");
  CHECK(StripThinking("<thinking>x</thinking>y<thinking>z</thinking>") == "y");
  CHECK(StripThinking("reasoning</think>answer") == "answer");
  CHECK(StripThinking("answer<think>cut off mid-thou") == "answer");
  CHECK(StripThinking("<|channel>thought\nhmm<channel|>done") == "done");
  CHECK(StripThinking("no thinking here") == "no thinking here");
}

TEST_CASE("a JSON object is found around prose, fences and thinking") {
  auto a = ExtractJsonObject(
      "<think>{not this}</think>Here:\n```json\n{\"decision\": \"skip\", \"x\": {\"y\": [1]}}\n```\nDone.");
  REQUIRE(a.ok());
  CHECK(json::parse(*a) == json{{"decision", "skip"}, {"x", {{"y", {1}}}}});
  auto b = ExtractJsonObject("The plan is {\"decision\": \"attempt\", \"rule_id\": \"xccdf_org");
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.status().message(), Catch::Contains("never closes"));
  auto c = ExtractJsonObject("no object at all");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.status().message(), Catch::Contains("holds no JSON object"));
  auto d = ExtractJsonObject("{bad: json}");
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Catch::Contains("is not valid JSON"));
}

TEST_CASE("pathological inputs are refused quickly, without a crash") {
  std::string deep(10000, '[');
  CHECK(ExtractToolCallsFromText(deep).ok());  // no call-like key: simply no calls
  std::string deep_call = "{\"name\": \"x\", \"arguments\": " + std::string(200, '[') + std::string(200, ']') + "}";
  auto r = ExtractToolCallsFromText(deep_call);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("nested too deeply"));
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "{\"name\": 1} ";
  auto m = ExtractToolCallsFromText(many);
  REQUIRE(m.ok());
  CHECK(m->calls.empty());
  CHECK(ExtractToolCallsFromText("").ok());
  CHECK(ExtractToolCallsFromText(std::string("\0{\"\\", 4)).ok());
}
