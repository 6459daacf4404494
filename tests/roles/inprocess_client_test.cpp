// The inprocess endpoint on real files: the tiny Gemma 4 fixture model with the 512-id chat
// tokenizer, laid out as a model directory (config.json, model.safetensors, tokenizer.json). The
// client must report what the engine did (prompt tokens as rendered, cached prompt tokens on a
// conversation's next turn, the generated text as streamed), serve concurrent calls, convert the
// roles' tool protocol both ways, and refuse bad endpoint configs naming the endpoint and the file.
#include "roles/inprocess_client.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/temp_dir.h"
#include "roles/architect.h"
#include "roles/client_factory.h"
#include "roles/prompt_library.h"
#include "roles/tool_calls.h"
#include "roles/worker.h"

using namespace temper;
using nlohmann::json;
using temper::engine::testing::TempDir;

namespace {

const std::string kData = TEMPER_TEST_DATA_DIR;
const std::string kTinyModel = kData + "/gemma4-tiny";
const std::string kTinyTokenizer = kData + "/tokenizer/gemma4-chat-tiny-tokenizer.json";

// A model directory of the tiny fixture: its config and weights, plus the chat tokenizer whose 512
// ids are exactly the model's vocabulary (tests/data/tokenizer/README.md).
class TinyModelDir {
 public:
  TinyModelDir() {
    std::filesystem::create_symlink(kTinyModel + "/config.json", dir_.path() / "config.json");
    std::filesystem::create_symlink(kTinyModel + "/model.safetensors", dir_.path() / "model.safetensors");
    std::filesystem::create_symlink(kTinyTokenizer, dir_.path() / "tokenizer.json");
  }
  std::string path() const { return dir_.path().string(); }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

const Logger& QuietLog() {
  static const Logger log(LogLevel::kError);
  return log;
}

InprocessEndpoint Endpoint(const std::string& dir) { return InprocessEndpoint{.model_dir = dir, .max_context = 512}; }

std::unique_ptr<InprocessClient> MakeClient(const std::string& dir, uint32_t tp = 1) {
  InprocessEndpoint endpoint = Endpoint(dir);
  endpoint.tp = tp;
  auto client = InprocessClient::Create("local", endpoint, QuietLog(), InprocessClientOptions{.cpu_threads = 2});
  if (!client.ok()) FAIL(client.status().ToString());
  return std::move(*client);
}

ChatRequest Ask(const std::string& question, uint32_t max_tokens = 8) {
  ChatRequest r;
  r.role_name = "architect";
  r.messages = {{ChatRole::kSystem, "Be brief."}, {ChatRole::kUser, question}};
  r.max_tokens = max_tokens;
  return r;
}

ChatResponse MustChat(ModelClient& client, const ChatRequest& request, const StreamCallbacks* stream = nullptr) {
  auto response = client.Chat(request, stream);
  if (!response.ok()) FAIL(response.status().ToString());
  return std::move(*response);
}

size_t RenderedPromptTokens(const InprocessClient& client, const ChatRequest& request) {
  auto converted = ToEngineRequest(request, 0);
  REQUIRE(converted.ok());
  auto prompt = client.engine().RenderPrompt(converted->conversation);
  REQUIRE(prompt.ok());
  return prompt->ids.size();
}

// The Worker's tools, as the roles declare them to every endpoint.
ToolDeclaration RunCommandTool() {
  return {"run_command", "Run a shell command on the target.",
          json::parse(R"({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})")};
}

TEST_CASE("a greedy chat returns the model's text with usage counted from the rendered prompt", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  const ChatRequest request = Ask("What is 2+2?");
  const ChatResponse r = MustChat(*client, request);
  CHECK_FALSE(r.text.empty());
  CHECK(r.usage.prompt_tokens == RenderedPromptTokens(*client, request));
  CHECK(r.usage.cached_prompt_tokens == 0);  // nothing was served before
  CHECK(r.usage.completion_tokens >= 1);
  CHECK(r.usage.completion_tokens <= request.max_tokens);
  CHECK((r.finish_reason == FinishReason::kStop || r.finish_reason == FinishReason::kLength));
  CHECK(r.model == std::filesystem::path(dir.path()).filename().string());
  CHECK(client->endpoint_name() == "local");
  // Greedy decoding is a function of the prompt.
  const ChatResponse again = MustChat(*client, request);
  CHECK(again.text == r.text);
  CHECK(again.usage.completion_tokens == r.usage.completion_tokens);
}

TEST_CASE("an answer schema constrains the inprocess reply to the Architect's answer shapes", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  const std::vector<RuleInfo> candidates = {{.id = "xccdf_org.ssgproject.content_rule_accounts_tmout"},
                                            {.id = "xccdf_org.ssgproject.content_rule_no_empty_passwords"}};
  auto grammar = engine::JsonSchemaGrammar(PickSchema(candidates));
  REQUIRE(grammar.ok());
  int whole = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ChatRequest request = Ask("Pick a rule.");
    request.answer_schema = PickSchema(candidates);
    request.sampling.temperature = 1.0;
    request.sampling.seed = seed;
    request.max_tokens = 200;
    const ChatResponse r = MustChat(*client, request);
    INFO(r.text);
    // The random model's text is on the schema's path; when it ends, it is a pick of a candidate.
    engine::GrammarState state = engine::GrammarState::Start(*grammar);
    for (char c : r.text) state = state.Advance(*grammar, static_cast<uint8_t>(c));
    CHECK_FALSE(state.Dead());
    if (r.finish_reason == FinishReason::kStop) {
      ++whole;
      json pick = json::parse(r.text);
      CHECK((pick["decision"] == "attempt" || pick["decision"] == "skip"));
      CHECK((pick["rule_id"] == candidates[0].id || pick["rule_id"] == candidates[1].id));
    }
  }
  // 200 tokens leave room for the pick's shortest text (a rule id is some 50 tokens of this
  // one-character-a-token tokenizer): every reply ends whole.
  CHECK(whole == 6);
  // A schema the grammar cannot honour is named before anything runs.
  ChatRequest bad = Ask("x");
  bad.answer_schema = nlohmann::ordered_json::parse(R"({"type": "integer", "multipleOf": 5})");
  auto refused = client->Chat(bad, nullptr);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("answer_schema") && Catch::Contains("'multipleOf'"));
}

TEST_CASE("a required tool call makes every inprocess reply calls of the Worker's tools with schema-valid arguments",
          "[roles][inprocess]") {
  TinyModelDir dir;
  // The Worker's tool declarations are about 1,750 tokens of this one-character-a-token tokenizer.
  InprocessEndpoint endpoint = Endpoint(dir.path());
  endpoint.max_context = 4096;
  auto made = InprocessClient::Create("local", endpoint, QuietLog(), InprocessClientOptions{.cpu_threads = 2});
  REQUIRE(made.ok());
  InprocessClient& client = **made;
  const std::vector<ToolDeclaration> tools = Worker::Tools();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ChatRequest request = Ask("Fix the rule.");
    request.tools = tools;
    request.require_tool_call = true;
    request.sampling.temperature = 1.0;
    request.sampling.seed = seed;
    request.max_tokens = 96;
    const ChatResponse r = MustChat(client, request);
    INFO(r.text << " " << r.malformed_reply);
    CHECK(r.malformed_reply.empty());
    CHECK(r.finish_reason == FinishReason::kToolCalls);
    REQUIRE_FALSE(r.tool_calls.empty());
    for (const ToolCall& call : r.tool_calls) {
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
  }
}

TEST_CASE("a sampling seed makes the reply repeatable", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  ChatRequest request = Ask("Name a colour.", 6);
  request.sampling.temperature = 0.9;
  request.sampling.top_k = 40;
  request.sampling.seed = 7;
  const ChatResponse a = MustChat(*client, request);
  const ChatResponse b = MustChat(*client, request);
  CHECK(a.text == b.text);
  CHECK(a.usage.completion_tokens == b.usage.completion_tokens);
  CHECK(a.finish_reason == b.finish_reason);
}

TEST_CASE("the next turn of a conversation is served partly from the prefix cache", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  ChatRequest request = Ask("Which service runs sshd?");
  const ChatResponse first = MustChat(*client, request);
  CHECK(first.usage.cached_prompt_tokens == 0);
  request.messages.push_back({ChatRole::kAssistant, first.text});
  request.messages.push_back({ChatRole::kUser, "And which file configures it?"});
  const ChatResponse second = MustChat(*client, request);
  CHECK(second.usage.prompt_tokens == RenderedPromptTokens(*client, request));
  CHECK(second.usage.cached_prompt_tokens > 0);
  // What is cached is the first turn's prompt (up to a message boundary), never the new part.
  CHECK(second.usage.cached_prompt_tokens <= first.usage.prompt_tokens + first.usage.completion_tokens);
  CHECK(second.usage.cached_prompt_tokens < second.usage.prompt_tokens);
}

TEST_CASE("streaming callbacks deliver the reply's text as it is generated", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  const ChatRequest request = Ask("What is 2+2?", 16);
  std::string streamed_text, streamed_reasoning;
  int pieces = 0;
  StreamCallbacks stream;
  stream.on_text = [&](std::string_view piece) {
    CHECK_FALSE(piece.empty());
    streamed_text += piece;
    ++pieces;
  };
  stream.on_reasoning = [&](std::string_view piece) { streamed_reasoning += piece; };
  const ChatResponse r = MustChat(*client, request, &stream);
  CHECK(pieces >= 1);
  CHECK(streamed_text == r.text);
  CHECK(streamed_reasoning == r.reasoning);
  // Streaming does not change the reply.
  CHECK(MustChat(*client, request).text == r.text);
}

TEST_CASE("max_tokens cuts the reply with finish reason length", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  const ChatResponse r = MustChat(*client, Ask("What is 2+2?", 3));
  CHECK(r.finish_reason == FinishReason::kLength);
  CHECK(r.usage.completion_tokens == 3);
}

TEST_CASE("concurrent Chat calls share one engine and each gets its own reply", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  const std::vector<ChatRequest> requests = {Ask("What is 2+2?"), Ask("Which service runs sshd?"),
                                             Ask("Name a colour.")};
  std::vector<ChatResponse> alone;
  for (const ChatRequest& r : requests) alone.push_back(MustChat(*client, r));

  std::vector<Result<ChatResponse>> together(requests.size(), Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = client->Chat(requests[i], nullptr); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    REQUIRE(together[i].ok());
    CHECK(together[i]->text == alone[i].text);
    CHECK(together[i]->usage.prompt_tokens == alone[i].usage.prompt_tokens);
    CHECK(together[i]->usage.completion_tokens == alone[i].usage.completion_tokens);
  }
}

TEST_CASE("CPU tensor-parallel ranks (tp 2) serve the same greedy reply", "[roles][inprocess]") {
  TinyModelDir dir;
  const ChatRequest request = Ask("What is 2+2?");
  const ChatResponse one = MustChat(*MakeClient(dir.path(), 1), request);
  const ChatResponse two = MustChat(*MakeClient(dir.path(), 2), request);
  CHECK(two.text == one.text);
  CHECK(two.usage.completion_tokens == one.usage.completion_tokens);
}

TEST_CASE("an endpoint with the model's MTP drafter serves the same greedy reply", "[roles][inprocess][drafter]") {
  TinyModelDir dir;
  const ChatRequest request = Ask("What is 2+2?", 24);
  const ChatResponse plain = MustChat(*MakeClient(dir.path()), request);
  InprocessEndpoint endpoint = Endpoint(dir.path());
  endpoint.drafter_dir = kData + "/gemma4-tiny-assistant";
  auto client = InprocessClient::Create("local", endpoint, QuietLog(), InprocessClientOptions{.cpu_threads = 2});
  if (!client.ok()) FAIL(client.status().ToString());
  const ChatResponse drafted = MustChat(**client, request);
  CHECK(drafted.text == plain.text);
  CHECK(drafted.usage.completion_tokens == plain.usage.completion_tokens);
}

TEST_CASE("prompts counted with the endpoint's own tokenizer fit its context, where a byte estimate would not",
          "[roles][inprocess]") {
  TinyModelDir dir;
  InprocessEndpoint endpoint = Endpoint(dir.path());
  endpoint.max_context = 2048;
  auto made = InprocessClient::Create("local", endpoint, QuietLog(), InprocessClientOptions{.cpu_threads = 2});
  REQUIRE(made.ok());
  InprocessClient& client = **made;
  REQUIRE(client.token_counter() != nullptr);
  const std::string text = "PermitRootLogin no in /etc/ssh/sshd_config";
  CHECK(client.token_counter()->Count(text) == static_cast<size_t>(client.engine().CountTokens(text)));

  // A rule whose text is far longer than the context: the prompt must be cut to fit.
  auto prose = [](size_t bytes, uint32_t seed) {
    std::string out;
    while (out.size() < bytes) {
      seed = seed * 1664525u + 1013904223u;
      out += (seed >> 28) < 3 ? ' ' : static_cast<char>('a' + (seed >> 24) % 26);
      if (out.size() % 80 == 0) out += '\n';
    }
    return out + "\n";
  };
  RuleInfo rule{"xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
                "Disable SSH Root Login",
                "medium",
                prose(6000, 1),
                "",
                "Run: sshd -T | grep permitrootlogin\n",
                "Set PermitRootLogin no.\n" + prose(4000, 2),
                {}};
  RoleConfig config;
  config.role = "architect";
  config.context_tokens = 2048;
  config.max_output_tokens = 64;
  const PromptLibrary prompts = PromptLibrary::Embedded();
  // The re-engagement prompt carries the rule's details (a pick prompt has one line a rule).
  const std::string plan = "Apply the reference fix.";

  // The tiny tokenizer spends about a token per byte, three times what the byte estimate assumes.
  const BytesTokenEstimator bytes;
  auto by_bytes = Architect(prompts, config, bytes).BuildReengage(rule, plan, {}, {});
  REQUIRE(by_bytes.ok());
  by_bytes->request.max_tokens = 8;
  const size_t over = RenderedPromptTokens(client, by_bytes->request);
  CHECK(over + config.max_output_tokens > config.context_tokens);
  auto refused = client.Chat(by_bytes->request, nullptr);
  CHECK(refused.status().code() == StatusCode::kOutOfRange);

  auto counted = Architect(prompts, config, *client.token_counter()).BuildReengage(rule, plan, {}, {});
  REQUIRE(counted.ok());
  CHECK_FALSE(counted->trimmed.empty());  // what was cut to fit is reported
  const size_t fits = RenderedPromptTokens(client, counted->request);
  std::printf(
      "re-engagement prompt of a 10 KB rule in a 2,048-token context: %zu tokens counted with the tokenizer, "
      "%zu with a byte estimate\n",
      fits, over);
  CHECK(fits + config.max_output_tokens <= config.context_tokens);
  counted->request.max_tokens = 8;
  auto answered = client.Chat(counted->request, nullptr);
  INFO(answered.status().ToString());
  CHECK(answered.ok());
}

TEST_CASE("the factory builds an inprocess client that owns its engine", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeModelClient({"local", Endpoint(dir.path())}, QuietLog());
  REQUIRE(client.ok());
  CHECK((*client)->endpoint_name() == "local");
  auto r = (*client)->Chat(Ask("What is 2+2?", 4), nullptr);
  REQUIRE(r.ok());
  CHECK(r->usage.prompt_tokens > 0);
}

TEST_CASE("tool declarations, assistant tool calls and tool results render in Gemma's format", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  ChatRequest request = Ask("Harden sshd.", 2);
  request.role_name = "worker";
  request.tools = {RunCommandTool()};
  ChatMessage assistant{ChatRole::kAssistant, ""};
  assistant.tool_calls = {{"call_0", "run_command", R"({"command": "sshd -t"})"}};
  request.messages.push_back(assistant);
  ChatMessage result{ChatRole::kTool, "exit status 0"};
  result.tool_call_id = "call_0";
  result.name = "run_command";
  request.messages.push_back(result);
  ChatMessage structured{ChatRole::kTool, R"({"exit": 0})"};
  structured.name = "run_command";  // no id: matched by name
  request.messages.push_back(structured);

  auto converted = ToEngineRequest(request, 0);
  REQUIRE(converted.ok());
  REQUIRE(converted->conversation.messages.size() == 3);  // the tool results joined the assistant message
  auto prompt = client->engine().RenderPrompt(converted->conversation);
  REQUIRE(prompt.ok());
  CHECK_THAT(prompt->text, Catch::Contains("<|tool>declaration:run_command{"));
  CHECK_THAT(prompt->text,
             Catch::Contains("<|tool_call>call:run_command{command:<|\"|>sshd -t<|\"|>}<tool_call|>"
                             "<|tool_response>response:run_command{value:<|\"|>exit status 0<|\"|>}"
                             "<tool_response|><|tool_response>response:run_command{exit:0}<tool_response|>"));
  // The model continues the turn its tool results left open (thinking off: an empty thought).
  CHECK(prompt->text.ends_with("<tool_response|><|channel>thought\n<channel|>"));

  // And the client serves it (the reply may be anything; the request must be accepted).
  auto r = client->Chat(request, nullptr);
  REQUIRE(r.ok());  // a reply that breaks the format is text with a note (malformed_reply), not an error
  CHECK(r->usage.prompt_tokens == prompt->ids.size());
}

TEST_CASE("malformed tool protocol in a request is refused naming the message", "[roles][inprocess]") {
  TinyModelDir dir;
  auto client = MakeClient(dir.path());
  auto refused = [&](ChatRequest request) {
    auto r = client->Chat(request, nullptr);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("endpoint 'local' (inprocess, worker role)"));
    return r.status().message();
  };
  ChatRequest base = Ask("Harden sshd.");
  base.role_name = "worker";
  base.tools = {RunCommandTool()};

  ChatRequest orphan = base;
  orphan.messages.push_back({ChatRole::kTool, "exit status 0"});
  CHECK_THAT(refused(orphan), Catch::Contains("messages[2] (tool): a tool message must follow an assistant message"));

  ChatRequest unknown_id = base;
  ChatMessage assistant{ChatRole::kAssistant, ""};
  assistant.tool_calls = {{"call_0", "run_command", R"({"command": "ls"})"}};
  unknown_id.messages.push_back(assistant);
  ChatMessage result{ChatRole::kTool, "ok"};
  result.tool_call_id = "call_9";
  unknown_id.messages.push_back(result);
  CHECK_THAT(refused(unknown_id),
             Catch::Contains("messages[3] (tool): tool_call_id 'call_9' names no tool call of messages[2]"));

  ChatRequest bad_arguments = base;
  assistant.tool_calls = {{"call_0", "run_command", "ls -l"}};
  bad_arguments.messages.push_back(assistant);
  CHECK_THAT(refused(bad_arguments),
             Catch::Contains("messages[2] (assistant).tool_calls[0] 'run_command': arguments are not a JSON object"));

  ChatRequest bad_tool = base;
  bad_tool.tools[0].name = "run command";
  CHECK_THAT(refused(bad_tool), Catch::Contains("tools[0]"));
}

TEST_CASE("tool calls the engine parsed become the roles' tool calls, ids and JSON arguments", "[roles][inprocess]") {
  const std::vector<engine::ToolCall> parsed = {
      {"run_command", json{{"command", "grep -n PermitRootLogin /etc/ssh/sshd_config"}}},
      {"finish", json{{"summary", "set \"PermitRootLogin no\""}}},
  };
  const std::vector<ToolCall> calls = ToolCallsFromEngine(parsed);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].id == "call_0");
  CHECK(calls[1].id == "call_1");
  CHECK(calls[0].name == "run_command");
  CHECK(calls[0].arguments == R"({"command":"grep -n PermitRootLogin /etc/ssh/sshd_config"})");
  CHECK(json::parse(calls[1].arguments) == parsed[1].arguments);
  CHECK(ToolCallsFromEngine({}).empty());
  // A model can put bytes that are not UTF-8 in an argument: replaced, never thrown on.
  const std::vector<engine::ToolCall> binary = {{"write_file", json{{"content", std::string("a\xff")}}}};
  CHECK(ToolCallsFromEngine(binary)[0].arguments == "{\"content\":\"a\xEF\xBF\xBD\"}");

  // The Worker resolves them like any server's tool calls, and they round-trip into the next
  // request's assistant message.
  ChatResponse response;
  response.tool_calls = {calls[0]};
  auto resolved = ResolveToolCalls(response, {RunCommandTool()});
  REQUIRE(resolved.ok());
  REQUIRE(resolved->size() == 1);
  CHECK((*resolved)[0].id == "call_0");
  CHECK((*resolved)[0].arguments == parsed[0].arguments);
  ChatRequest next = Ask("go on");
  ChatMessage assistant{ChatRole::kAssistant, ""};
  assistant.tool_calls = {calls[0]};
  next.messages.push_back(assistant);
  auto converted = ToEngineRequest(next, 0);
  REQUIRE(converted.ok());
  CHECK(converted->conversation.messages.back().tool_calls[0].arguments == parsed[0].arguments);
}

TEST_CASE("the request's sampling, limits and stop strings reach the engine", "[roles][inprocess]") {
  ChatRequest request = Ask("hi", 77);
  request.sampling = SamplingConfig{.temperature = 0.5, .top_p = 0.9, .top_k = 40, .min_p = 0.05, .seed = 11};
  request.stop = {"\n\n"};
  auto converted = ToEngineRequest(request, 99);
  REQUIRE(converted.ok());
  CHECK(converted->sampling.temperature == 0.5f);
  CHECK(converted->sampling.top_p == 0.9f);
  CHECK(converted->sampling.top_k == 40);
  CHECK(converted->sampling.min_p == 0.05f);
  CHECK(converted->sampling.seed == 11);
  CHECK(converted->max_tokens == 77);
  CHECK(converted->stop_strings == std::vector<std::string>{"\n\n"});
  CHECK_FALSE(converted->conversation.enable_thinking);
  // constrained_decoding: false leaves Gemma 3's text-or-call replies unconstrained too.
  CHECK(converted->constrain_auto_tool_calls);
  CHECK_FALSE(ToEngineRequest(request, 99, /*constrain=*/false)->constrain_auto_tool_calls);
  request.sampling.seed.reset();
  CHECK(ToEngineRequest(request, 99)->sampling.seed == 99);
}

TEST_CASE("bad inprocess endpoint configs are refused naming the endpoint and the file", "[roles][inprocess]") {
  const Logger& log = QuietLog();
  auto error = [&](const InprocessEndpoint& endpoint) {
    auto client = InprocessClient::Create("local", endpoint, log, InprocessClientOptions{.cpu_threads = 2});
    REQUIRE_FALSE(client.ok());
    CHECK_THAT(client.status().message(), Catch::Contains("endpoint 'local' (inprocess)"));
    return client.status();
  };

  Status missing = error(Endpoint("/nonexistent/gemma"));
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("model directory /nonexistent/gemma does not exist"));

  // The fixture directory has config.json and weights but no tokenizer.json.
  Status no_tokenizer = error(Endpoint(kTinyModel));
  CHECK(no_tokenizer.code() == StatusCode::kNotFound);
  CHECK_THAT(no_tokenizer.message(), Catch::Contains(kTinyModel + "/tokenizer.json does not exist"));

  CHECK(error(Endpoint("")).code() == StatusCode::kInvalidArgument);

  TinyModelDir dir;
  // GPU 7 exists on no test machine; without the CUDA backend in the build, the answer says so.
  InprocessEndpoint gpus = Endpoint(dir.path());
  gpus.gpus = {0, 7};
  gpus.tp = 2;
  Status cuda = error(gpus);
  CHECK(cuda.code() == (engine::cuda::CudaBackendBuilt() ? StatusCode::kInvalidArgument : StatusCode::kUnimplemented));
  CHECK_THAT(cuda.message(), Catch::Contains("gpus [0, 7]") && Catch::Contains("CUDA"));
  InprocessEndpoint tp3 = Endpoint(dir.path());
  tp3.tp = 3;
  CHECK_THAT(error(tp3).message(), Catch::Contains("tp 3"));

  // A drafter directory that is not there, or one made for another model, is named.
  InprocessEndpoint no_drafter = Endpoint(dir.path());
  no_drafter.drafter_dir = "/nonexistent/assistant";
  Status missing_drafter = error(no_drafter);
  CHECK(missing_drafter.code() == StatusCode::kNotFound);
  CHECK_THAT(missing_drafter.message(), Catch::Contains("drafter directory /nonexistent/assistant does not exist"));
  InprocessEndpoint model_as_drafter = Endpoint(dir.path());
  model_as_drafter.drafter_dir = kTinyModel;
  CHECK_THAT(error(model_as_drafter).message(),
             Catch::Contains(kTinyModel + "/config.json: key 'model_type' is 'gemma4_text'"));

  // A tokenizer with ids past the model's 512-entry vocabulary belongs to another model.
  TempDir other;
  std::filesystem::create_symlink(kTinyModel + "/config.json", other.path() / "config.json");
  std::filesystem::create_symlink(kTinyModel + "/model.safetensors", other.path() / "model.safetensors");
  std::ifstream in(kTinyTokenizer);
  json tokenizer = json::parse(in);
  tokenizer["model"]["vocab"]["zzzz"] = 512;
  other.Write("tokenizer.json", tokenizer.dump());
  Status mismatch = error(Endpoint(other.path().string()));
  CHECK(mismatch.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(mismatch.message(), Catch::Contains("token 'zzzz' at id 512, outside the model's vocabulary of 512"));

  // A config.json that is not JSON is named.
  TempDir broken;
  broken.Write("config.json", "{");
  Status bad_config = error(Endpoint(broken.path().string()));
  CHECK_THAT(bad_config.message(), Catch::Contains((broken.path() / "config.json").string()));
}

}  // namespace
