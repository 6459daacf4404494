#include "orchestrator/config/models_config.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("the example models.yaml maps every role to a defined endpoint") {
  auto config = LoadModelsConfig(std::string(TEMPER_SOURCE_DIR) + "/config/models.yaml");
  REQUIRE(config.ok());
  REQUIRE(config->endpoints.size() == 3);
  const auto& local = std::get<InprocessEndpoint>(config->endpoints.at("local").spec);
  CHECK(local.tp == 4);
  CHECK(local.gpus == std::vector<uint32_t>{0, 1, 2, 3});  // the reference box: 4 GPUs, one rank each
  const auto& vllm = std::get<OpenAIEndpoint>(config->endpoints.at("vllm").spec);
  CHECK(vllm.base_url == "http://127.0.0.1:8000/v1");
  CHECK(vllm.api_key_env == "TEMPER_VLLM_API_KEY");
  CHECK(vllm.timeout.count() == 300);
  CHECK(std::holds_alternative<ReplayEndpoint>(config->endpoints.at("tape").spec));
  CHECK(config->roles.at("worker").context_tokens == 32768);
  CHECK(config->roles.at("architect").sampling.temperature == Approx(0.3));
}

constexpr const char* kRoles = R"(roles:
  architect: {endpoint: e}
  worker: {endpoint: e}
  reflector: {endpoint: e}
)";

TEST_CASE("an openai endpoint may state max_seqs, 1 to 1024, for sizing parallel attempts") {
  const std::string endpoint = "endpoints:\n  e: {type: openai, base_url: http://h:8000/v1, model: m";
  auto unset = ParseModelsConfig(endpoint + "}\n" + kRoles, "m.yaml");
  REQUIRE(unset.ok());
  CHECK_FALSE(std::get<OpenAIEndpoint>(unset->endpoints.at("e").spec).max_seqs.has_value());
  auto set = ParseModelsConfig(endpoint + ", max_seqs: 8}\n" + kRoles, "m.yaml");
  REQUIRE(set.ok());
  CHECK(std::get<OpenAIEndpoint>(set->endpoints.at("e").spec).max_seqs == 8u);
  for (const char* wrong : {"0", "1025", "many"}) {
    INFO(wrong);
    auto bad = ParseModelsConfig(endpoint + ", max_seqs: " + wrong + "}\n" + kRoles, "m.yaml");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find("m.yaml:2:") == 0);
    CHECK(bad.status().message().find("endpoints.e.max_seqs") != std::string::npos);
  }
}

TEST_CASE("an inprocess endpoint constrains decoding unless told not to") {
  auto on = ParseModelsConfig(std::string("endpoints:\n  e: {type: inprocess, model_dir: /m}\n") + kRoles, "m.yaml");
  REQUIRE(on.ok());
  CHECK(std::get<InprocessEndpoint>(on->endpoints.at("e").spec).constrained_decoding);
  auto off = ParseModelsConfig(
      std::string("endpoints:\n  e: {type: inprocess, model_dir: /m, constrained_decoding: false}\n") + kRoles,
      "m.yaml");
  REQUIRE(off.ok());
  CHECK_FALSE(std::get<InprocessEndpoint>(off->endpoints.at("e").spec).constrained_decoding);
}

TEST_CASE("an inprocess endpoint may name its model's MTP drafter") {
  auto none = ParseModelsConfig(std::string("endpoints:\n  e: {type: inprocess, model_dir: /m}\n") + kRoles, "m.yaml");
  REQUIRE(none.ok());
  CHECK(std::get<InprocessEndpoint>(none->endpoints.at("e").spec).drafter_dir.empty());
  auto with = ParseModelsConfig(
      std::string("endpoints:\n  e: {type: inprocess, model_dir: /m, drafter_dir: /m-assistant}\n") + kRoles, "m.yaml");
  REQUIRE(with.ok());
  CHECK(std::get<InprocessEndpoint>(with->endpoints.at("e").spec).drafter_dir == "/m-assistant");
}

TEST_CASE("models.yaml errors name file, line, column and field") {
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {std::string("endpoints:\n  e: {type: grpc}\n") + kRoles,
       "m.yaml:2:13: endpoints.e.type: unknown endpoint type 'grpc' (expected inprocess, openai or replay)"},
      {std::string("endpoints:\n  e: {type: inprocess, model_dir: /m, tp: 3}\n") + kRoles,
       "m.yaml:2:43: endpoints.e.tp: tp must be 1, 2, 4 or 8, not 3"},
      {std::string("endpoints:\n  e: {type: inprocess, model_dir: /m, tp: 2, gpus: [0]}\n") + kRoles,
       "m.yaml:2:52: endpoints.e.gpus: lists 1 GPUs but tp is 2; give one GPU per rank"},
      {std::string("endpoints:\n  e: {type: inprocess, model_dir: /m, constrained_decoding: maybe}\n") + kRoles,
       "m.yaml:2:61: endpoints.e.constrained_decoding: expected true or false"},
      {std::string("endpoints:\n  e: {type: openai, base_url: ftp://x, model: m}\n") + kRoles,
       "m.yaml:2:31: endpoints.e.base_url: 'ftp://x' is not an http:// or https:// URL"},
      {std::string("endpoints:\n  e: {type: openai, base_url: http://x, model: m, api_key_env: A, api_key_file: f}\n") +
           kRoles,
       "m.yaml:2:81: endpoints.e.api_key_file: set api_key_env or api_key_file, not both"},
      {std::string("endpoints:\n  e: {type: replay, transcript: t, speed: 2}\n") + kRoles,
       "m.yaml:2:36: endpoints.e.speed: unknown key (valid keys here: type, transcript)"},
      {"endpoints:\n  e: {type: replay, transcript: t}\nroles:\n  architect: {endpoint: x}\n  worker: {endpoint: e}\n  "
       "reflector: {endpoint: e}\n",
       "m.yaml:4:25: roles.architect.endpoint: no endpoint named 'x' (defined: e)"},
      {"endpoints:\n  e: {type: replay, transcript: t}\nroles:\n  architect: {endpoint: e}\n  worker: {endpoint: e}\n",
       "m.yaml:4:3: roles: missing required key 'reflector'"},
      {"endpoints:\n  e: {type: replay, transcript: t}\nroles:\n  architect: {endpoint: e, temperature: 3}\n  worker: "
       "{endpoint: e}\n  reflector: {endpoint: e}\n",
       "m.yaml:4:41: roles.architect.temperature: 3 is out of range [0, 2]"},
      {"endpoints:\n  e: {type: replay, transcript: t}\nroles:\n  architect: {endpoint: e, max_output_tokens: 4096, "
       "context_tokens: 1024}\n  worker: {endpoint: e}\n  reflector: {endpoint: e}\n",
       "m.yaml:4:69: roles.architect.context_tokens: context_tokens (1024) must exceed max_output_tokens (4096)"},
      {"endpoints:\n  e: {type: replay, transcript: t}\nroles:\n  architekt: {endpoint: e}\n",
       "m.yaml:4:3: roles.architekt: unknown key (did you mean 'architect'?) (valid keys here: architect, worker, "
       "reflector)"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto config = ParseModelsConfig(c.text, "m.yaml");
    REQUIRE_FALSE(config.ok());
    CHECK(config.status().message() == c.message);
  }
}

}  // namespace
}  // namespace temper
