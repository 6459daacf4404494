// The edges of the OpenAI API that clients lean on: /v1/models/{id}, JSON error bodies for every
// status (unknown routes, wrong methods), every parameter implemented or refused by name (never
// ignored), parallel_tool_calls, and the published OpenAPI document listing exactly the parameters
// the server takes.
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "engine/chat_served.h"
#include "engine/http_test_support.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/http_server.h"
#include "engine/serve/openai_parameters.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

using nlohmann::json;

// The tiny model, made to reply with chosen tokens: the row that predicts position P + k of a
// sequence whose prompt is P tokens long gets reply[k] as its argmax. Keyed by position, so a reply
// may repeat tokens (two tool calls share most of theirs).
class ReplyAtPositionsBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Script(int64_t prompt_tokens, std::vector<int32_t> reply) {
    prompt_tokens_ = prompt_tokens;
    reply_ = std::move(reply);
  }
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    std::vector<int64_t> starts;
    for (const ForwardItem& item : batch) {
      TEMPER_ASSIGN_OR_RETURN(int64_t length, inner_.SequenceLength(item.seq));
      starts.push_back(length);
    }
    TEMPER_ASSIGN_OR_RETURN(ForwardResult r, inner_.Forward(batch, options));
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    size_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto rows = static_cast<size_t>(LogitRows(batch[i]));
      for (size_t j = 0; j < rows; ++j, ++row) {
        // The row of the token at `position` predicts position + 1.
        const int64_t position = starts[i] + static_cast<int64_t>(batch[i].tokens.size() - rows + j);
        const int64_t k = position + 1 - prompt_tokens_;
        if (k < 0 || k >= static_cast<int64_t>(reply_.size())) continue;
        std::span<float> logits(r.logits.data() + row * vocab, vocab);
        logits[static_cast<size_t>(reply_[static_cast<size_t>(k)])] =
            *std::max_element(logits.begin(), logits.end()) + 100;
      }
    }
    return r;
  }

 private:
  int64_t prompt_tokens_ = 0;
  std::vector<int32_t> reply_;
};

// A model id with a '/', as Hugging Face names go.
constexpr const char* kModel = "google/gemma4-tiny";

json ToolsJson() {
  json tool = {{"type", "function"},
               {"function",
                {{"name", "run_command"},
                 {"parameters",
                  {{"type", "object"}, {"properties", {{"cmd", {{"type", "string"}}}}}, {"required", {"cmd"}}}}}}};
  return json::array({tool});
}

json UserTurn() { return json::array({{{"role", "user"}, {"content", "Check sshd."}}}); }

TEST_CASE("parallel_tool_calls false ends the reply at its first tool call, whole and streamed",
          "[engine][http][chat]") {
  std::unique_ptr<CpuBackend> tiny = ServingBackend();
  ReplyAtPositionsBackend backend(*tiny);
  const Tokenizer& tok = ChatTokenizer();
  auto engine = ChatEngine::Create(backend, tok, {}, QuietLog());
  REQUIRE(engine.ok());
  Conversation conversation;
  conversation.messages.push_back({.role = ChatRole::kUser, .content = "Check sshd."});
  conversation.tools.push_back({"run_command", "", json{{"type", "object"},
                                                        {"properties", {{"cmd", {{"type", "string"}}}}},
                                                        {"required", {"cmd"}}}});
  auto prompt = (*engine)->RenderPrompt(conversation);
  REQUIRE(prompt.ok());
  // The model calls run_command twice, then ends its turn.
  backend.Script(static_cast<int64_t>(prompt->ids.size()),
                 tok.Encode("<|tool_call>call:run_command{cmd:<|\"|>ls<|\"|>}<tool_call|>"
                            "<|tool_call>call:run_command{cmd:<|\"|>id<|\"|>}<tool_call|><turn|>"));
  HttpServerOptions http;
  http.model_name = "gemma4-tiny";
  http.chat = engine->get();
  auto server = HttpServer::Start((*engine)->scheduler(), http, QuietLog());
  REQUIRE(server.ok());
  httplib::Client c = LocalClient((*server)->port());

  json body = {{"model", "gemma4-tiny"}, {"messages", UserTurn()}, {"tools", ToolsJson()},
               {"max_tokens", 60},       {"temperature", 0}};
  auto both = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(both);
  INFO(both->body);
  REQUIRE(both->status == 200);
  json calls = json::parse(both->body)["choices"][0]["message"]["tool_calls"];
  REQUIRE(calls.size() == 2);  // by default, every call the model makes
  CHECK(calls[1]["function"]["arguments"] == R"({"cmd":"id"})");

  body["parallel_tool_calls"] = false;
  auto one = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(one);
  INFO(one->body);
  REQUIRE(one->status == 200);
  const json choice = json::parse(one->body)["choices"][0];
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  CHECK(choice["message"]["tool_calls"][0]["function"]["arguments"] == R"({"cmd":"ls"})");
  CHECK(choice["finish_reason"] == "tool_calls");
  // Generation stopped at the call, not at max_tokens or the model's own end.
  CHECK(json::parse(one->body)["usage"]["completion_tokens"].get<int64_t>() <
        json::parse(both->body)["usage"]["completion_tokens"].get<int64_t>());

  body["stream"] = true;
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  const std::vector<std::string> data = SseData(streamed->body);
  REQUIRE(data.back() == "[DONE]");
  int streamed_calls = 0;
  std::string finish;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json chunk_choice = json::parse(data[i])["choices"][0];
    if (chunk_choice["delta"].contains("tool_calls")) streamed_calls += chunk_choice["delta"]["tool_calls"].size();
    if (chunk_choice["finish_reason"].is_string()) finish = chunk_choice["finish_reason"];
  }
  CHECK(streamed_calls == 1);
  CHECK(finish == "tool_calls");

  body["parallel_tool_calls"] = "no";
  body.erase("stream");
  CheckOpenAIError(c, "/v1/chat/completions", body.dump(), 400, "", "parallel_tool_calls", "must be a boolean");
}

TEST_CASE("every parameter is implemented or refused by name, and neutral values of unimplemented ones are taken",
          "[engine][http][chat]") {
  ChatServed s(kModel);
  httplib::Client c = s.Client();
  auto chat = [](json extra) {
    json body = {{"model", "google/gemma4-tiny"}, {"messages", UserTurn()}, {"max_tokens", 2}};
    body.update(extra);
    return body.dump();
  };
  auto completion = [](json extra) {
    json body = {{"model", "google/gemma4-tiny"}, {"prompt", "hi"}, {"max_tokens", 2}};
    body.update(extra);
    return body.dump();
  };
  // Refused, naming the parameter: unknown ones, and unimplemented ones at a value that asks for something.
  const std::vector<std::pair<json, std::string>> refused_chat = {
      {{{"logit_bias", {{"5", 10}}}}, "'logit_bias' is not implemented by this server: it accepts only {}, got"},
      {{{"presence_penalty", 0.5}}, "'presence_penalty' is not implemented"},
      {{{"frequency_penalty", -1}}, "'frequency_penalty' is not implemented"},
      {{{"store", true}}, "nothing is stored"},
      {{{"service_tier", "flex"}}, "'service_tier' is not implemented"},
      {{{"prediction", {{"type", "content"}, {"content", "x"}}}}, "'prediction' is not supported by this server"},
      {{{"reasoning_effort", "low"}}, "'reasoning_effort' is not supported"},
      {{{"functions", json::array()}}, "'functions' is not supported"},
  };
  for (const auto& [extra, text] : refused_chat) {
    CheckOpenAIError(c, "/v1/chat/completions", chat(extra), 400, "", extra.begin().key(), text);
  }
  const std::vector<std::pair<json, std::string>> refused_completion = {
      {{{"echo", true}}, "'echo' is not implemented"},
      {{{"best_of", 3}}, "'best_of' is not implemented"},
      {{{"suffix", "}"}}, "'suffix' is not implemented"},
      {{{"messages", UserTurn()}}, "'messages' is not supported by this server; it takes: model, prompt,"},
  };
  for (const auto& [extra, text] : refused_completion) {
    CheckOpenAIError(c, "/v1/completions", completion(extra), 400, "", extra.begin().key(), text);
  }
  // Taken: the neutral values, and null for any of them (clients send unset fields as null).
  for (const json& extra :
       {json{{"logit_bias", json::object()}, {"presence_penalty", 0},
             {"frequency_penalty", 0.0}, {"store", false}, {"user", "alice"}, {"metadata", {{"ticket", "T-1"}}},
             {"service_tier", "auto"}, {"n", 1}, {"parallel_tool_calls", true}},
        json{{"logprobs", nullptr}, {"top_logprobs", nullptr}, {"logit_bias", nullptr}, {"seed", nullptr}},
        json{{"logprobs", false}, {"top_logprobs", 0}}}) {
    auto r = c.Post("/v1/chat/completions", chat(extra), "application/json");
    REQUIRE(r);
    INFO(extra.dump() << " -> " << r->body);
    CHECK(r->status == 200);
  }
  auto r = c.Post("/v1/completions",
                  completion({{"echo", false}, {"best_of", 1}, {"suffix", ""}, {"logprobs", nullptr}, {"user", "bob"}}),
                  "application/json");
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 200);
}

TEST_CASE("fields of the wrong type are refused naming them, never answered with a 500 (found by schemathesis)",
          "[engine][http][chat]") {
  ChatServed s(kModel);
  httplib::Client c = s.Client();
  const std::string model = R"("model": "google/gemma4-tiny", )";
  CheckOpenAIError(c, "/v1/chat/completions", "{" + model + R"("messages": [{"role": {}, "content": "hi"}]})", 400,
                   "", "messages[0].role", "got '{}'");
  CheckOpenAIError(c, "/v1/chat/completions",
                   "{" + model + R"("messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})", 400, "",
                   "messages[0].content[0]", "must be a text part");
  CheckOpenAIError(c, "/v1/chat/completions",
                   "{" + model + R"("messages": [{"role": "user", "content": "hi"}], "tools": [{"type": []}]})", 400,
                   "", "tools[0]", "must be");
  CheckOpenAIError(c, "/v1/chat/completions",
                   "{" + model + R"("messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": 1}})",
                   400, "", "tool_choice", "must be");
  CheckOpenAIError(c, "/v1/completions", "{" + model + R"("prompt": "hi", "stream_options": {"include_usage": {}}})",
                   400, "", "stream_options", "'include_usage' is a boolean");
  CheckOpenAIError(c, "/v1/completions", "{" + model + R"("prompt": "hi", "stream_options": 3})", 400, "",
                   "stream_options", "must be an object");
}

TEST_CASE("models by id, and JSON errors for unknown routes and wrong methods", "[engine][http]") {
  ChatServed s(kModel);
  httplib::Client c = s.Client();
  auto model = c.Get("/v1/models/google/gemma4-tiny");
  REQUIRE(model);
  REQUIRE(model->status == 200);
  const json m = json::parse(model->body);
  CHECK(m["id"] == "google/gemma4-tiny");
  CHECK(m["object"] == "model");

  auto error_of = [](const httplib::Result& res, int status, const std::string& code) {
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == status);
    CHECK_THAT(res->get_header_value("Content-Type"), Catch::StartsWith("application/json"));
    const json e = json::parse(res->body, nullptr, false);
    REQUIRE(e.is_object());
    CHECK(e["error"]["code"] == code);
    return e["error"]["message"].get<std::string>();
  };
  CHECK_THAT(error_of(c.Get("/v1/models/gpt-4"), 404, "model_not_found"), Catch::Contains("'gpt-4' does not exist"));
  CHECK_THAT(error_of(c.Get("/v1/embeddings"), 404, "not_found"),
             Catch::Contains("no route GET /v1/embeddings; this server serves POST /v1/chat/completions"));
  CHECK_THAT(error_of(c.Post("/v1/models", "{}", "application/json"), 405, "method_not_allowed"),
             Catch::Contains("/v1/models takes GET, not POST"));
  auto wrong_method = c.Get("/v1/chat/completions");
  CHECK_THAT(error_of(wrong_method, 405, "method_not_allowed"), Catch::Contains("takes POST"));
  CHECK(wrong_method->get_header_value("Allow") == "POST");
}

// The OpenAPI document's request properties, per operation.
std::set<std::string> DocumentedParameters(const json& document, const std::string& path) {
  const json& ref = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"];
  const std::string name = ref.get<std::string>().substr(std::string("#/components/schemas/").size());
  std::set<std::string> names;
  for (const auto& [key, value] : document["components"]["schemas"][name]["properties"].items()) names.insert(key);
  return names;
}

std::set<std::string> ServerParameters(OpenAiEndpoint endpoint) {
  std::set<std::string> names;
  for (const OpenAiParameter& p : OpenAiParameters(endpoint)) names.emplace(p.name);
  return names;
}

TEST_CASE("GET /openapi.json publishes exactly the parameters the server takes", "[engine][http]") {
  ChatServed s(kModel);
  httplib::Client c = s.Client();
  auto res = c.Get("/openapi.json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json document = json::parse(res->body, nullptr, false);
  REQUIRE(document.is_object());
  CHECK(document["openapi"] == "3.1.0");
  CHECK(document["info"]["version"] == TEMPER_VERSION);
  CHECK(DocumentedParameters(document, "/v1/chat/completions") == ServerParameters(OpenAiEndpoint::kChatCompletions));
  CHECK(DocumentedParameters(document, "/v1/completions") == ServerParameters(OpenAiEndpoint::kCompletions));
  // Every route the server answers is documented, and no other.
  std::set<std::string> paths;
  for (const auto& [path, operations] : document["paths"].items()) paths.insert(path);
  CHECK(paths == std::set<std::string>{"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/{model}",
                                       "/health", "/metrics", "/openapi.json"});
}

// Each row's log-softmax for `ids` fed at once, on a backend of its own (the server's is busy).
std::vector<std::vector<double>> ReferenceLogprobs(const std::vector<int32_t>& ids) {
  std::unique_ptr<CpuBackend> backend = ServingBackend();
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, ids, /*all_logits=*/true};
  auto out = backend->Forward(std::span<const ForwardItem>(&item, 1), {});
  REQUIRE(out.ok());
  const size_t vocab = static_cast<size_t>(backend->config().vocab_size);
  std::vector<std::vector<double>> rows;
  for (size_t r = 0; r < ids.size(); ++r) {
    std::span<const float> row(out->logits.data() + r * vocab, vocab);
    const double max = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float x : row) sum += std::exp(x - max);
    std::vector<double> lp;
    for (float x : row) lp.push_back(x - max - std::log(sum));
    rows.push_back(std::move(lp));
  }
  return rows;
}

TEST_CASE("logprobs are the model's own log-softmax, with the most likely alternatives, on both APIs",
          "[engine][http][chat]") {
  ChatServed s(kModel);
  httplib::Client c = s.Client();
  const std::vector<int32_t> prompt = RandomPrompt(7, 12);
  json body = {{"model", "google/gemma4-tiny"}, {"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0},
               {"logprobs", 3}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  const json choice = json::parse(res->body)["choices"][0];
  const std::vector<int32_t> generated = choice["token_ids"];
  REQUIRE(generated.size() == 6);
  const json& lp = choice["logprobs"];
  REQUIRE(lp["token_logprobs"].size() == 6);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::vector<std::vector<double>> reference = ReferenceLogprobs(all);
  size_t offset = 0;
  for (size_t i = 0; i < generated.size(); ++i) {
    // Token i was sampled from the row of the token before it.
    const std::vector<double>& row = reference[prompt.size() - 1 + i];
    CHECK(lp["token_logprobs"][i].get<double>() == Approx(row[static_cast<size_t>(generated[i])]).margin(1e-3));
    CHECK(lp["text_offset"][i] == offset);
    offset += lp["tokens"][i].get<std::string>().size();
    // Greedy took the most likely token, so it leads its top 3, which are sorted.
    REQUIRE(lp["top_logprobs"][i].size() == 3);
    double best = -1e9;
    for (const auto& [token, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    CHECK(best == Approx(lp["token_logprobs"][i].get<double>()));
  }
  CHECK(offset == choice["text"].get<std::string>().size());

  // Chat: OpenAI's content entries, whole and streamed alike.
  json chat = {{"model", "google/gemma4-tiny"}, {"messages", UserTurn()}, {"max_tokens", 8}, {"temperature", 0},
               {"logprobs", true}, {"top_logprobs", 2}};
  auto whole = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  REQUIRE(whole);
  INFO(whole->body);
  REQUIRE(whole->status == 200);
  const json reply = json::parse(whole->body);
  const json content = reply["choices"][0]["logprobs"]["content"];
  const int64_t completion_tokens = reply["usage"]["completion_tokens"];
  // Every generated token but a stop token that ended the turn.
  CHECK(static_cast<int64_t>(content.size()) ==
        completion_tokens - (reply["choices"][0]["finish_reason"] == "length" ? 0 : 1));
  for (const json& entry : content) {
    CHECK(entry["logprob"].get<double>() <= 0);
    REQUIRE(entry["top_logprobs"].size() == 2);
    CHECK(entry["top_logprobs"][0]["logprob"].get<double>() >= entry["top_logprobs"][1]["logprob"].get<double>());
    CHECK(entry["top_logprobs"][0]["logprob"] == entry["logprob"]);  // greedy
    std::string bytes;
    for (const json& b : entry["bytes"]) bytes += static_cast<char>(b.get<int>());
    CHECK_FALSE(bytes.empty());
  }
  chat["stream"] = true;
  auto streamed = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  json streamed_content = json::array();
  const std::vector<std::string> data = SseData(streamed->body);
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json chunk = json::parse(data[i]);
    const json& l = chunk["choices"][0]["logprobs"];
    if (!l.is_null()) {
      for (const json& entry : l["content"]) streamed_content.push_back(entry);
    }
  }
  CHECK(streamed_content == content);

  json too_many = chat;
  too_many["top_logprobs"] = 21;
  CheckOpenAIError(c, "/v1/chat/completions", too_many.dump(), 400, "", "top_logprobs", "must be in [0, 20], got 21");
  json no_logprobs = chat;
  no_logprobs.erase("logprobs");
  CheckOpenAIError(c, "/v1/chat/completions", no_logprobs.dump(), 400, "", "top_logprobs", "needs 'logprobs': true");
  body["logprobs"] = 21;
  CheckOpenAIError(c, "/v1/completions", body.dump(), 400, "", "logprobs", "must be in [0, 20], got 21");
}

}  // namespace
}  // namespace temper::engine::testing
