// The tiny Gemma 4 fixture behind a chat engine (with the 512-id chat test tokenizer) and an HTTP
// server on a free loopback port: what the /v1/chat/completions tests talk to.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>
#include <catch2/catch.hpp>

#include "engine/http_test_support.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/http_server.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {

struct ChatServed {
  std::unique_ptr<CpuBackend> backend = ServingBackend();
  std::unique_ptr<ChatEngine> engine;
  std::unique_ptr<HttpServer> server;
  // `with_chat` false: a server without a tokenizer (no /v1/chat/completions).
  explicit ChatServed(std::string model_name = "gemma4-tiny", bool with_chat = true) {
    auto e = ChatEngine::Create(*backend, ChatTokenizer(), {}, QuietLog());
    if (!e.ok()) FAIL(e.status().ToString());
    engine = std::move(*e);
    HttpServerOptions http;
    http.model_name = std::move(model_name);
    if (with_chat) http.chat = engine.get();
    auto s = HttpServer::Start(engine->scheduler(), http, QuietLog());
    if (!s.ok()) FAIL(s.status().ToString());
    server = std::move(*s);
  }
  httplib::Client Client() const { return LocalClient(server->port()); }
};

}  // namespace temper::engine::testing
