// The loop on temper's own engine: temperd with every role mapped to an `inprocess` endpoint. The
// model is a synthetic Gemma 4 (tests/data/gemma4-loop/config.json: three layers, hidden 64, a
// 32K context and the real 262,144-entry vocabulary) with seeded random weights, written by
// `temper-lm synthesize` as a user would, and a chat tokenizer with Gemma's real vocabulary
// (engine/gemma4_vocabulary.h), so the roles' real prompts for real rules are served at their real
// lengths. A random model fixes nothing. What this proves is that the whole system runs on the
// engine: the prompts fit, every call is journalled with its usage, constrained decoding makes
// every answer usable, the prefix cache serves the Worker's growing conversation, the budgets end
// what does not converge; and without constraints the same model's garbage ends cleanly too
// (corrections, then escalation).
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gemma4_vocabulary.h"
#include "engine/real_model.h"
#include "loop/loop_harness.h"

namespace temper::testing {
namespace {

// A model directory: config.json, model.safetensors (seeded random), tokenizer.json.
std::string SyntheticModelDir(const TempDir& dir) {
  Result<std::string> tokenizer = engine::testing::Gemma4VocabularyTokenizerJson();
  REQUIRE(tokenizer.ok());
  const std::string tokenizer_path = dir.Write("gemma4-vocabulary-tokenizer.json", *tokenizer);
  const std::string model = dir.path() + "/gemma4-loop";
  ProcessResult made = RunProcess({std::string(TEMPER_BINARY_DIR) + "/engine/tools/temper-lm", "synthesize", "--config",
                                   std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-loop/config.json", "--seed", "1",
                                   "--tokenizer", tokenizer_path, "--out", model});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  return model;
}

// Every role on one inprocess endpoint. The outputs are short: a random model writes until its
// budget ends it, and constrained decoding closes what it opened within max_output_tokens.
std::string InprocessModelsYaml(const std::string& model_dir, bool constrained) {
  return fmt::format(R"(endpoints:
  local:
    type: inprocess
    model_dir: {}
    tp: 1
    max_context: 32768
    constrained_decoding: {}
roles:
  architect: {{endpoint: local, temperature: 1.0, seed: 11, max_output_tokens: 192, context_tokens: 16384}}
  worker: {{endpoint: local, temperature: 1.0, seed: 12, max_output_tokens: 128, context_tokens: 32768}}
  reflector: {{endpoint: local, temperature: 1.0, seed: 13, max_output_tokens: 256, context_tokens: 16384}}
)",
                     model_dir, constrained ? "true" : "false");
}

struct RoleTally {
  uint64_t calls = 0;
  uint64_t prompt = 0;
  uint64_t cached = 0;
  uint64_t completion = 0;
  uint64_t unusable = 0;  // answers that could not be used (a parse failure, a correction, a fallback)
};

// What the journal says each role spent and how many of its answers were unusable.
std::map<std::string, RoleTally> TallyRoles(const std::vector<temper::v1::JournalEvent>& events) {
  std::map<std::string, RoleTally> t;
  for (const auto& e : events) {
    const nlohmann::json data = nlohmann::json::parse(e.data_json());
    const bool call = e.usage().prompt_tokens() > 0;
    if (call) {
      RoleTally& r = t[e.role()];
      ++r.calls;
      r.prompt += e.usage().prompt_tokens();
      r.cached += e.usage().cached_prompt_tokens();
      r.completion += e.usage().completion_tokens();
    }
    if (e.type() == "worker.unusable_answer") ++t["worker"].unusable;
    if (e.type() == "reflector.failed") ++t["reflector"].unusable;
    if (e.type() == "architect.fallback") ++t["architect"].unusable;
    // The Architect's answers that had to be corrected, each named in `corrections`.
    if (e.role() == "architect" && data.contains("corrections")) t["architect"].unusable += data["corrections"].size();
  }
  return t;
}

uint64_t Count(const std::vector<temper::v1::JournalEvent>& events, const std::string& type) {
  uint64_t n = 0;
  for (const auto& e : events) n += e.type() == type;
  return n;
}

// Per role: the journal's model-call events (an Architect or Reflector event covers its
// corrections too), the unusable answers among them, and tokens per event and per attempt.
void PrintTally(const char* run, const std::map<std::string, RoleTally>& tally, uint64_t attempts) {
  std::printf("inprocess loop (%s), %llu attempts:\n", run, static_cast<unsigned long long>(attempts));
  for (const auto& [role, r] : tally) {
    if (r.calls == 0) continue;
    const double calls = static_cast<double>(r.calls);
    std::printf(
        "  %-9s %3llu events, %3llu unusable answers; per event: prompt %.0f (cached %.0f%%), generated %.0f; "
        "per attempt: prompt %.0f, generated %.0f\n",
        role.c_str(), static_cast<unsigned long long>(r.calls), static_cast<unsigned long long>(r.unusable),
        static_cast<double>(r.prompt) / calls,
        r.prompt ? 100.0 * static_cast<double>(r.cached) / static_cast<double>(r.prompt) : 0.0,
        static_cast<double>(r.completion) / calls,
        attempts ? static_cast<double>(r.prompt) / static_cast<double>(attempts) : 0.0,
        attempts ? static_cast<double>(r.completion) / static_cast<double>(attempts) : 0.0);
  }
}

const BatchSpec kBatch = {
    .rules = {"accounts_tmout", "banner_etc_issue_net"}, .max_attempts = 2, .max_tokens = 60000, .name = "inprocess"};

// What one batch on the synthetic model came to.
struct InprocessRun {
  temper::v1::Batch batch;
  std::vector<temper::v1::JournalEvent> events;
  uint64_t attempts = 0;
  std::map<std::string, RoleTally> tally;
};

// kBatch through temperd on a fresh synthetic model directory, run to its end; REQUIREs that the
// batch completed with every rule in a final state, none fixed but by its reference fix, and the
// daemon still up.
InprocessRun RunBatch(bool constrained) {
  TempDir models;
  LoopDaemon loop(InprocessModelsYaml(SyntheticModelDir(models), constrained));
  InprocessRun run;
  const std::string id = loop.Submit(kBatch);
  run.batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(run.batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(loop.daemon->Alive());
  run.events = loop.JournalEvents(id);
  for (const auto& [name, rule] : RulesByShortName(run.batch)) {
    INFO(name << ": " << rule.detail());
    CHECK(rule.state() != temper::v1::RULE_STATE_PENDING);
    CHECK(rule.state() != temper::v1::RULE_STATE_RUNNING);
    // A random model writes no fix that works; it can only stumble on the one call that needs no
    // arguments, the rule's own reference fix by name. A rule it fixed went through that call.
    if (rule.state() == temper::v1::RULE_STATE_FIXED) {
      bool by_name = false;
      for (const auto& e : run.events) {
        if (e.type() == "worker.tool_call" && e.rule_id() == rule.rule_id() &&
            nlohmann::json::parse(e.data_json()).value("tool", "") == "apply_reference_fix")
          by_name = true;
      }
      CHECK(by_name);
    }
  }
  run.attempts = Count(run.events, "attempt.kept") + Count(run.events, "attempt.reverted");
  run.tally = TallyRoles(run.events);
  PrintTally(constrained ? "constrained" : "unconstrained", run.tally, run.attempts);
  return run;
}

TEST_CASE(
    "the loop on the inprocess engine: a random model under constrained decoding gives only usable answers, "
    "every call journalled with its usage, the Worker's conversation served from the prefix cache") {
  const InprocessRun run = RunBatch(/*constrained=*/true);
  const std::map<std::string, RoleTally>& tally = run.tally;
  // Every role was called, and every call carries its usage.
  for (const char* role : {"architect", "worker"}) {
    INFO(role);
    REQUIRE(tally.count(role));
    CHECK(tally.at(role).calls > 0);
    CHECK(tally.at(role).completion > 0);
  }
  CHECK(run.attempts > 0);
  // The constraint leaves the model nothing unusable to say.
  for (const auto& [role, r] : tally) {
    INFO(role);
    CHECK(r.unusable == 0);
  }
  CHECK(Count(run.events, "worker.tool_call") + Count(run.events, "worker.refused") > 0);
  // The Worker's conversation grows by a tool result a call: after an attempt's first call, most of
  // each prompt comes from the prefix cache.
  std::set<std::pair<std::string, uint64_t>> attempts_seen;
  uint64_t later_prompt = 0, later_cached = 0;
  for (const auto& e : run.events) {
    if (e.type() != "worker.model_call") continue;
    const uint64_t attempt = nlohmann::json::parse(e.data_json())["attempt"].get<uint64_t>();
    if (attempts_seen.insert({e.rule_id(), attempt}).second) continue;
    later_prompt += e.usage().prompt_tokens();
    later_cached += e.usage().cached_prompt_tokens();
    CHECK(e.usage().cached_prompt_tokens() >= 0.8 * static_cast<double>(e.usage().prompt_tokens()));
  }
  std::printf("  the Worker's calls after an attempt's first: %.1f%% of %llu prompt tokens cached\n",
              later_prompt ? 100.0 * static_cast<double>(later_cached) / static_cast<double>(later_prompt) : 0.0,
              static_cast<unsigned long long>(later_prompt));
}

TEST_CASE(
    "the loop on the inprocess engine without constrained decoding: the random model's garbage is corrected, "
    "then escalated, and the batch completes") {
  const InprocessRun run = RunBatch(/*constrained=*/false);
  uint64_t unusable = 0;
  for (const auto& [role, r] : run.tally) unusable += r.unusable;
  CHECK(unusable > 0);
}

// The real model: Gemma 3 270M (the GGUF deploy/setup.sh fetches), every role on it, three rules to
// the end (with one, this base model's Architect skipped it whatever the seed, once its pick prompt
// became one line a candidate: the Worker then never ran). The pretrained base model writes well-formed but senseless
// tool calls; what this proves is that a real checkpoint in a real format runs the whole loop on the CPU: the GGUF
// loads straight from models.yaml, Gemma 3's chat format carries the roles' prompts, its JSON tool calls under the
// grammar are all usable, the budget ends the attempt, and the batch completes. The Architect's and
// Reflector's answers keep to their schemas too, but this model tends to copy the prompt's
// placeholders into them ("<plan for the Worker>"), which the roles refuse and correct: those are
// counted, not held to zero.
TEST_CASE("the loop on the real Gemma 3 270M (GGUF, CPU): a small batch runs to its end with only usable answers") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const std::string models = fmt::format(R"(endpoints:
  local: {{type: inprocess, model_dir: {}, tp: 1, max_context: 16384}}
roles:
  architect: {{endpoint: local, temperature: 0.7, seed: 11, max_output_tokens: 256, context_tokens: 16384}}
  worker: {{endpoint: local, temperature: 0.7, seed: 12, max_output_tokens: 256, context_tokens: 16384}}
  reflector: {{endpoint: local, temperature: 0.7, seed: 13, max_output_tokens: 256, context_tokens: 16384}}
)",
                                         RealGemma3GgufPath().string());
  LoopDaemon loop(models);
  const std::string id = loop.Submit({.rules = {"accounts_tmout", "banner_etc_issue_net", "sshd_disable_root_login"},
                                      .max_attempts = 1,
                                      .max_tokens = 20000,
                                      .name = "real-model"});
  const temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(loop.daemon->Alive());
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    INFO(name << ": " << rule.detail());
    CHECK(rule.state() != temper::v1::RULE_STATE_PENDING);
    CHECK(rule.state() != temper::v1::RULE_STATE_RUNNING);
  }
  const std::vector<temper::v1::JournalEvent> events = loop.JournalEvents(id);
  const std::map<std::string, RoleTally> tally = TallyRoles(events);
  PrintTally("real Gemma 3 270M", tally, Count(events, "attempt.kept") + Count(events, "attempt.reverted"));
  for (const char* role : {"architect", "worker"}) {
    INFO(role);
    REQUIRE(tally.count(role));
    CHECK(tally.at(role).calls > 0);
  }
  CHECK(tally.at("worker").unusable == 0);
  CHECK(Count(events, "worker.tool_call") + Count(events, "worker.refused") > 0);
}

}  // namespace
}  // namespace temper::testing
