// constrain_bench: what a token mask costs at Gemma's 262,144-token vocabulary (issue 23's goal: at
// most 5% of a 31B decode step on the reference box, about 3 ms, and far less where possible).
//
// A Worker-like tool call's arguments are generated token by token as the tokenizer splits them,
// under the grammar of their JSON schema; each step asks for the mask of the state reached. Printed:
// the vocabulary trie's build time, each step's mask time split into first visits of a state (a
// walk of the trie) and repeats (a cache lookup), and the worst single mask (inside a free string,
// where most of the vocabulary stays possible).
//
//   constrain_bench TOKENIZER.json
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "engine/constrain/json_schema_grammar.h"
#include "engine/constrain/token_mask.h"

using temper::bench::Clock;
using temper::bench::Seconds;
using namespace temper::engine;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER.json\n", argv[0]);
    return 2;
  }
  auto tok = Tokenizer::FromFile(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const int32_t end = *tok->TokenToId("<end_of_turn>");
  auto t0 = Clock::now();
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(*tok, {end}).value());
  const double build = Seconds(t0, Clock::now());
  const auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "command": {"type": "string"},
      "timeout": {"type": "integer"},
      "sudo": {"type": "boolean"},
      "mode": {"enum": ["check", "apply"]}
    },
    "required": ["command", "mode"]})");
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(schema));
  const std::string text =
      R"({"command": "sed -i 's/^#\\?\\s*TMOUT=.*/TMOUT=600/' /etc/profile.d/99-terminal_tmout.sh && grep -n TMOUT )"
      R"(/etc/profile.d/99-terminal_tmout.sh", "timeout": 120, "sudo": true, "mode": "apply"})";
  const std::vector<int32_t> ids = tok->Encode(text);

  // The first pass meets each state for the first time (or again, within the text: each character
  // of a string leaves the same state); the second pass, on a masker that has seen them all, costs
  // what a long generation costs once its states repeat.
  std::vector<double> first, repeat;
  TokenMasker masker(*grammar, *vocabulary);
  for (int pass = 0; pass < 2; ++pass) {
    GrammarState state = GrammarState::Start(*grammar);
    for (int32_t id : ids) {
      auto t = Clock::now();
      const TokenBits& bits = masker.Allowed(state);
      const double ms = Seconds(t, Clock::now()) * 1e3;
      if (!TokenAllowed(bits, id)) {
        std::fprintf(stderr, "token %d was masked out\n", id);
        return 1;
      }
      (pass == 0 ? first : repeat).push_back(ms);
      for (char ch : *vocabulary->bytes(id)) state = state.Advance(*grammar, static_cast<uint8_t>(ch));
    }
  }
  auto summary = [](const char* name, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    std::printf("%-34s mean %8.3f ms  median %8.3f ms  p90 %8.3f ms  max %8.3f ms  (%zu masks)\n", name, mean,
                v[v.size() / 2], v[v.size() * 9 / 10], v.back(), v.size());
  };
  std::printf("vocabulary %zu ids, trie built in %.2f s; %zu tokens of tool-call arguments\n", vocabulary->size(),
              build, ids.size());
  std::printf("distinct states walked: %llu of %llu masks\n", static_cast<unsigned long long>(masker.stats().misses),
              static_cast<unsigned long long>(masker.stats().lookups));
  summary("per token, first generation", first);
  summary("per token, states all met before", repeat);
  return 0;
}
