// Constrained decoding through the scheduler on the tiny fixture (random weights, 512 ids): with a
// JSON schema's grammar every reply it finishes parses and keeps to the schema, sampled or greedy;
// without the grammar the same model writes text that does not.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/drafter_fixture.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int32_t kEnd = 1;  // the fixture's end-of-text id stands for the format's stop token

// A vocabulary for the fixture's 512 ids: every printable ASCII byte (as a real tokenizer has every
// byte), JSON punctuation and the schema's words, then letters and digits in pieces of two and
// three bytes, so the model has many ways to write (and to break) JSON.
std::shared_ptr<const TokenVocabulary> FixtureVocabulary() {
  const std::vector<std::string> pieces = {"{",     "}",       "\"",      ":",    ",",     " ",    "[",    "]",
                                           "\":",   "\",",     "{\"",     "true", "false", "null", "mode", "check",
                                           "apply", "command", "timeout", "sudo", "ls",    " -l",  "/etc", "0",
                                           "1",     "2",       "-",       ".",    "\\",    "\\\"", "e",    "x"};
  std::vector<std::optional<std::string>> bytes(512);
  int32_t id = 3;
  for (char c = ' '; c <= '~'; ++c) bytes[static_cast<size_t>(id++)] = std::string(1, c);
  for (const std::string& p : pieces) bytes[static_cast<size_t>(id++)] = p;
  for (size_t i = 0; id < 512; ++i) {
    std::string s;
    for (size_t n = 0; n <= 1 + i % 2; ++n) s += "abcdefghijklmnopqrstuvwxyz0123456789"[(i * 7 + n * 13) % 36];
    bytes[static_cast<size_t>(id++)] = s;
  }
  return std::make_shared<const TokenVocabulary>(bytes, std::vector<int32_t>{kEnd});
}

const ordered_json kSchema = ordered_json::parse(R"({
  "type": "object",
  "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}, "mode": {"enum": ["check", "apply"]}},
  "required": ["command", "mode"]})");

std::string TextOf(const TokenVocabulary& v, const std::vector<int32_t>& tokens) {
  std::string out;
  for (int32_t id : tokens) {
    if (id != kEnd && v.bytes(id)) out += *v.bytes(id);
  }
  return out;
}

TEST_CASE("with a schema's grammar the random model writes only JSON that keeps to the schema",
          "[engine][scheduler][constrain]") {
  auto vocabulary = FixtureVocabulary();
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(kSchema));
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  auto backend = ServingBackend(4096);
  auto scheduler = MakeScheduler(*backend);
  int finished = 0, parse_failures = 0;
  for (int i = 0; i < 12; ++i) {
    GenerateRequest r = Greedy(RandomPrompt(300 + i, 8), 80);
    if (i % 3 != 0) {
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 77 + i;
    }
    r.sampling.stop_tokens = {kEnd};
    r.grammar = masks;
    const StreamEvent out = RunOne(*scheduler, r);
    INFO(out.error.ToString());
    REQUIRE(out.finish != FinishReason::kError);
    const std::string text = TextOf(*vocabulary, out.tokens);
    INFO(i << ": " << text);
    // Every prefix is on the grammar's path, finished or cut by max_tokens.
    GrammarState s = GrammarState::Start(*grammar);
    for (char c : text) s = s.Advance(*grammar, static_cast<uint8_t>(c));
    CHECK_FALSE(s.Dead());
    if (out.finish == FinishReason::kStop) {
      ++finished;
      ordered_json parsed = ordered_json::parse(text, nullptr, false);
      if (parsed.is_discarded() || !parsed.contains("command") || !parsed.contains("mode")) ++parse_failures;
    }
  }
  CHECK(parse_failures == 0);
  std::printf("constrained: %d of 12 replies finished within 80 tokens, %d failed to parse\n", finished,
              parse_failures);

  // The same model and prompts without the grammar: its text is no JSON at all.
  int unconstrained_json = 0;
  for (int i = 0; i < 12; ++i) {
    GenerateRequest r = Greedy(RandomPrompt(300 + i, 8), 80);
    r.sampling.stop_tokens = {kEnd};
    const StreamEvent out = RunOne(*scheduler, r);
    unconstrained_json += !ordered_json::parse(TextOf(*vocabulary, out.tokens), nullptr, false).is_discarded();
  }
  CHECK(unconstrained_json == 0);
}

TEST_CASE("speculation under a grammar gives the tokens plain constrained decoding gives, greedy and seeded",
          "[engine][scheduler][constrain][spec]") {
  // Each row of a verification pass is sampled under the mask of the state the drafts before it
  // reach, near max_tokens under the budget masks too: the same draws as one token a pass.
  auto vocabulary = FixtureVocabulary();
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(kSchema));
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = Greedy(RandomPrompt(500 + i, 8), 60);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 5 + i;
    }
    r.sampling.stop_tokens = {kEnd};
    requests.push_back(r);
  }
  auto run = [&](int max_draft_tokens, SchedulerMetrics& metrics,
                 std::shared_ptr<const DrafterWeights> drafter = nullptr) {
    auto backend = ServingBackend(4096, 8, 16, std::move(drafter));
    SchedulerOptions options;
    options.speculation.max_draft_tokens = max_draft_tokens;
    auto scheduler = MakeScheduler(*backend, options);
    std::vector<std::vector<int32_t>> tokens;
    for (GenerateRequest r : requests) {
      r.grammar = std::make_shared<GrammarMasks>(grammar, vocabulary);
      const StreamEvent out = RunOne(*scheduler, r);
      INFO(out.error.ToString());
      REQUIRE(out.finish != FinishReason::kError);
      tokens.push_back(out.tokens);
    }
    metrics = SettledMetrics(*scheduler, [&](const SchedulerMetrics& m) {
      return m.finished_requests == static_cast<int64_t>(requests.size());
    });
    return tokens;
  };
  SchedulerMetrics plain_metrics, drafted_metrics;
  const auto plain = run(0, plain_metrics);
  const auto drafted = run(kMaxDraftTokens, drafted_metrics);
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i << ": " << TextOf(*vocabulary, plain[i]));
    CHECK(drafted[i] == plain[i]);
  }
  std::printf("constrained speculation: %lld drafts, %lld accepted, %lld forward passes (plain: %lld)\n",
              static_cast<long long>(drafted_metrics.draft_tokens),
              static_cast<long long>(drafted_metrics.accepted_draft_tokens),
              static_cast<long long>(drafted_metrics.forward_passes),
              static_cast<long long>(plain_metrics.forward_passes));
  CHECK(drafted_metrics.accepted_draft_tokens > 0);
  CHECK(drafted_metrics.forward_passes < plain_metrics.forward_passes);

  // The same with the MTP drafter's guesses, which the grammar does not shape: the masks refuse
  // the ones that break the JSON, and the output stays the plain one.
  SchedulerMetrics mtp_metrics;
  const auto mtp = run(kMaxDraftTokens, mtp_metrics, TinyDrafter());
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i << " with the MTP drafter");
    CHECK(mtp[i] == plain[i]);
  }
  CHECK(mtp_metrics.drafter_tokens > 0);
}

TEST_CASE("a grammar whose vocabulary is larger than the model's is refused", "[engine][scheduler][constrain]") {
  auto backend = ServingBackend();
  auto scheduler = MakeScheduler(*backend);
  GenerateRequest r = Greedy(RandomPrompt(1, 4), 4);
  std::vector<std::optional<std::string>> bytes(600, std::string("a"));
  r.grammar = std::make_shared<GrammarMasks>(std::make_shared<const Grammar>(*JsonSchemaGrammar(kSchema)),
                                             std::make_shared<const TokenVocabulary>(bytes, std::vector<int32_t>{1}));
  auto s = scheduler->Submit(r);
  CHECK(s.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.status().message(), Catch::Contains("the grammar's vocabulary has 600 tokens, the model 512"));
}

}  // namespace
}  // namespace temper::engine::testing
