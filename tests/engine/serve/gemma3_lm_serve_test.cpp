// The real `temper-lm serve` binary with Gemma 3's tokenizer (--tokenizer) beside synthetic weights
// of a small Gemma 3 with its vocabulary (--synthetic): a tool-carrying request gets an
// OpenAI-format tool call, the grammar writing it in Gemma 3's JSON syntax.
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gemma3_synthetic_config.h"
#include "engine/gzip_file.h"
#include "engine/http_test_support.h"
#include "orchestrator/temp_dir.h"
#include "security/lm_serve_process.h"

namespace temper::testing {
namespace {

using nlohmann::json;

TEST_CASE("temper-lm serve with Gemma 3's tokenizer answers a tool-carrying request with an OpenAI tool call",
          "[engine][http][chat][gemma3][temper-lm]") {
  TempDir dir;
  const std::string config_path = dir.Write("config.json", engine::testing::Gemma3VocabularyConfigJson());
  Result<std::string> tokenizer =
      engine::testing::ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
  REQUIRE(tokenizer.ok());
  const std::string tokenizer_path = dir.Write("tokenizer.json", *tokenizer);

  LmServeProcess serve(dir, {"--synthetic", config_path, "--tokenizer", tokenizer_path, "--context", "1024",
                             "--model-name", "gemma3-synthetic"});
  Status started = serve.Start();
  INFO(serve.Log());
  REQUIRE(started.ok());
  httplib::Client c = engine::testing::LocalClient(serve.port());
  const json body = {{"model", "gemma3-synthetic"},
                     {"messages", json::array({{{"role", "user"}, {"content", "Check sshd."}}})},
                     {"tools", json::array({{{"type", "function"},
                                             {"function",
                                              {{"name", "run_command"},
                                               {"parameters",
                                                {{"type", "object"},
                                                 {"properties", {{"command", {{"type", "string"}, {"maxLength", 30}}}}},
                                                 {"required", {"command"}}}}}}}})},
                     {"tool_choice", "required"},
                     {"max_tokens", 32},
                     {"temperature", 1.0},
                     {"seed", 1}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  const json choice = json::parse(r->body)["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  REQUIRE(choice["message"]["tool_calls"].size() >= 1);
  const json& call = choice["message"]["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["function"]["name"] == "run_command");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  CHECK(args["command"].is_string());
  CHECK(serve.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
