// The inprocess endpoint on a Gemma 3 model directory: Gemma 3's real tokenizer beside seeded random
// weights of a small Gemma 3 with its 262,144-token vocabulary. The roles get the Worker's
// tool calls from Gemma 3's JSON syntax, under the grammar: a required call is one of the Worker's
// tools with schema-valid arguments, and a reply that may be text or a call is one or the other.
#include <algorithm>
#include <filesystem>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gemma3_synthetic_config.h"
#include "engine/gzip_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/temp_dir.h"
#include "roles/inprocess_client.h"
#include "roles/worker.h"

using namespace temper;
using nlohmann::json;
using temper::engine::testing::TempDir;

namespace {

const std::string kData = TEMPER_TEST_DATA_DIR;

class Gemma3ModelDir {
 public:
  Gemma3ModelDir() {
    const std::string config = engine::testing::Gemma3VocabularyConfigJson();
    dir_.Write("config.json", config);
    Result<engine::ModelConfig> parsed = engine::ParseModelConfig(config, "config.json");
    if (!parsed.ok()) FAIL(parsed.status().ToString());
    Status written = engine::WriteSyntheticCheckpoint(dir_.path() / "model.safetensors", *parsed, 5);
    if (!written.ok()) FAIL(written.ToString());
    Result<std::string> tokenizer = engine::testing::ReadGzipFile(kData + "/tokenizer/gemma3-tokenizer.json.gz");
    if (!tokenizer.ok()) FAIL(tokenizer.status().ToString());
    dir_.Write("tokenizer.json", *tokenizer);
  }
  std::string path() const { return dir_.path().string(); }

 private:
  TempDir dir_;
};

const Logger& QuietLog() {
  static const Logger log(LogLevel::kError);
  return log;
}

void CheckWorkerCall(const std::vector<ToolDeclaration>& tools, const ToolCall& call) {
  INFO(call.name << " " << call.arguments);
  const auto declared =
      std::find_if(tools.begin(), tools.end(), [&](const ToolDeclaration& t) { return t.name == call.name; });
  REQUIRE(declared != tools.end());
  const json args = json::parse(call.arguments);
  for (const auto& required : declared->parameters["required"]) CHECK(args.contains(required.get<std::string>()));
  for (const auto& [key, value] : args.items()) {
    REQUIRE(declared->parameters["properties"].contains(key));
    const std::string type = declared->parameters["properties"][key]["type"];
    CHECK(((type == "string" && value.is_string()) || (type == "array" && value.is_array()) ||
           (type == "boolean" && value.is_boolean())));
  }
}

TEST_CASE("a Gemma 3 model's inprocess replies carry the Worker's tool calls from its JSON syntax",
          "[roles][inprocess][gemma3]") {
  Gemma3ModelDir dir;
  auto made = InprocessClient::Create("local", InprocessEndpoint{.model_dir = dir.path(), .max_context = 4096},
                                      QuietLog(), InprocessClientOptions{.cpu_threads = 2});
  REQUIRE(made.ok());
  InprocessClient& client = **made;
  CHECK(std::string(client.engine().format().family_name()) == "Gemma 3");
  const std::vector<ToolDeclaration> tools = Worker::Tools();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    ChatRequest request;
    request.role_name = "worker";
    request.messages = {{ChatRole::kSystem, "Fix the rule."}, {ChatRole::kUser, "TMOUT is unset."}};
    request.tools = tools;
    request.sampling.temperature = 1.0;
    request.sampling.seed = seed;
    request.max_tokens = 64;

    request.require_tool_call = true;
    auto required = client.Chat(request, nullptr);
    REQUIRE(required.ok());
    INFO(required->text << " " << required->malformed_reply);
    CHECK(required->malformed_reply.empty());
    CHECK(required->finish_reason == FinishReason::kToolCalls);
    REQUIRE_FALSE(required->tool_calls.empty());
    for (const ToolCall& call : required->tool_calls) CheckWorkerCall(tools, call);

    // Text or a call: under the grammar, never a call that breaks off.
    request.require_tool_call = false;
    auto free = client.Chat(request, nullptr);
    REQUIRE(free.ok());
    INFO(free->text << " " << free->malformed_reply);
    CHECK(free->malformed_reply.empty());
    for (const ToolCall& call : free->tool_calls) CheckWorkerCall(tools, call);
    if (free->finish_reason == FinishReason::kToolCalls) CHECK(free->text.empty());
  }
}

}  // namespace
