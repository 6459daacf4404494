// The OpenAI Python SDK (tests/python/openai_sdk_client.py, in the test venv) against a real
// `temper-lm serve` on the tiny Gemma 4 fixture with its chat tokenizer: models, chat whole and
// streamed, logprobs, tools (required, named, one at a time, streamed deltas), `chat.completions.parse()` with
// nested pydantic models, completions, and errors raised as the SDK's own exception classes; and the
// same against a small Gemma 3 with the real Gemma 3 tokenizer, whose tool calls are JSON.
#include <cstdio>

#include <catch2/catch.hpp>

#include "engine/gemma3_synthetic_config.h"
#include "engine/gzip_file.h"
#include "engine/real_model.h"
#include "orchestrator/daemon_process.h"
#include "python_clients.h"
#include "security/lm_serve_process.h"

namespace temper::testing {
namespace {

constexpr const char* kApiKey = "sk-temper-test";

// `temper-lm serve` as the clients meet it: the tiny fixture, its chat tokenizer, an API key.
std::vector<std::string> ServeFlags() {
  return {"--tokenizer", std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json",
          "--api-key",   kApiKey,
          "--context",   "4096"};
}

// Runs the SDK script against `serve`, which serves `model`, and checks that every part passed.
void RunSdkScript(LmServeProcess& serve, const std::string& model) {
  const std::string base_url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1";
  ProcessResult r = RunProcess({kTestPython, PythonClientScript("openai_sdk_client.py"), base_url, model, kApiKey});
  INFO(r.out);
  INFO(r.err);
  INFO(serve.Log());
  CHECK(r.exit_code == 0);
  for (const char* check :
       {"models.list and models.retrieve", "chat.completions.create",
        "chat.completions.create(stream=True) with include_usage", "logprobs and top_logprobs", "tool_choice required",
        "tool_choice naming a function", "parallel_tool_calls=False", "streamed tool-call deltas",
        "chat.completions.parse with nested pydantic models", "completions.create",
        "errors raise NotFoundError, BadRequestError and AuthenticationError"}) {
    CHECK_THAT(r.out, Catch::Contains(std::string("ok: ") + check + "\n"));
  }
}

TEST_CASE("the OpenAI Python SDK drives temper-lm serve: chat, tools, parse(), completions, errors", "[clients]") {
  TEMPER_REQUIRE_PYTHON_CLIENTS();
  TempDir dir;
  LmServeProcess serve(dir, ServeFlags());
  Status started = serve.Start();
  REQUIRE(started.ok());
  RunSdkScript(serve, "gemma4-tiny");
  CHECK(serve.Stop() == 0);
}

TEST_CASE(
    "the OpenAI Python SDK drives temper-lm serve in Gemma 3's chat format, its tool calls JSON under the "
    "grammar",
    "[clients][gemma3]") {
  TEMPER_REQUIRE_PYTHON_CLIENTS();
  TempDir dir;
  // The real Gemma 3 tokenizer beside seeded weights of a small Gemma 3 at its vocabulary.
  Result<std::string> tokenizer =
      engine::testing::ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
  REQUIRE(tokenizer.ok());
  LmServeProcess serve(dir, {"--synthetic", dir.Write("gemma3.json", engine::testing::Gemma3VocabularyConfigJson()),
                             "--tokenizer", dir.Write("tokenizer.json", *tokenizer), "--model-name", "gemma3-synthetic",
                             "--api-key", kApiKey, "--context", "4096"});
  Status started = serve.Start();
  INFO(serve.Log());
  REQUIRE(started.ok());
  RunSdkScript(serve, "gemma3-synthetic");
  CHECK(serve.Stop() == 0);
}

// The real model: the Gemma 3 270M GGUF that deploy/setup.sh fetches, served from the file itself.
TEST_CASE("the OpenAI Python SDK gets readable text from temper-lm serve on the real Gemma 3 270M",
          "[clients][gemma3]") {
  TEMPER_REQUIRE_PYTHON_CLIENTS();
  TEMPER_REQUIRE_REAL_GEMMA3();
  TempDir dir;
  LmServeProcess serve(dir, {"--model", RealGemma3GgufPath().string(), "--api-key", kApiKey, "--context", "4096"});
  Status started = serve.Start();
  INFO(serve.Log());
  REQUIRE(started.ok());
  const std::string base_url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1";
  ProcessResult r = RunProcess(
      {kTestPython, PythonClientScript("openai_sdk_real_model.py"), base_url, "gemma-3-270m-q4_k_m.gguf", kApiKey});
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  for (const char* check :
       {"chat.completions.create gives readable text", "streamed text is the same text",
        "completions.create continues the text readably", "a required tool call is a call of the offered function"}) {
    CHECK_THAT(r.out, Catch::Contains(std::string("ok: ") + check + "\n"));
  }
  std::printf("%s", r.out.c_str());
  CHECK(serve.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
