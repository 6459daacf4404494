// The real `temper-lm serve` binary with Gemma 3's tokenizer (--tokenizer) beside synthetic weights
// of the tiny geometry with Gemma 3's vocabulary (--synthetic): a tool-carrying request gets an
// OpenAI-format tool call, the grammar writing it in Gemma 3's JSON syntax.
#include <fstream>
#include <sstream>

#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-tiny/config.json");
  std::stringstream text;
  text << in.rdbuf();
  json config = json::parse(text.str());
  config["vocab_size"] = 262144;  // Gemma 3's checkpoints' vocabulary
  const std::string config_path = dir.Write("gemma3-vocab.json", config.dump(2));
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
