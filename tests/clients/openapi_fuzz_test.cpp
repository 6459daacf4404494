// schemathesis against `temper-lm serve`'s own OpenAPI document (GET /openapi.json): every operation
// fuzzed for a bounded time with valid and invalid requests; no reply may be a 5xx, hang past the
// request timeout, carry an undocumented status or content type, or break its documented schema.
#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>

#include "orchestrator/daemon_process.h"
#include "python_clients.h"
#include "security/lm_serve_process.h"

namespace temper::testing {
namespace {

TEST_CASE("schemathesis finds no 5xx, no hang and no reply off its schema in temper-lm serve's OpenAPI document",
          "[clients]") {
  TEMPER_REQUIRE_PYTHON_CLIENTS();
  TempDir dir;
  LmServeProcess serve(dir, {"--tokenizer",
                             std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json",
                             "--api-key", "sk-fuzz", "--context", "1024"});
  Status started = serve.Start();
  REQUIRE(started.ok());
  const std::string schemathesis = std::filesystem::path(kTestPython).parent_path() / "schemathesis";
  // A fixed seed, so a failure is reproduced by running the same command; 90 s for all operations
  // together, 30 s for any one request (the tiny model writes its whole context in a few seconds).
  // Run in `dir`, where schemathesis and hypothesis keep their caches, so nothing is left behind.
  ProcessResult r = RunProcess({"/usr/bin/env", "-C", dir.path(), schemathesis, "run", fmt::format("http://127.0.0.1:{}/openapi.json", serve.port()),
                                "--header", "Authorization: Bearer sk-fuzz", "--checks",
                                "not_a_server_error,status_code_conformance,content_type_conformance,"
                                "response_schema_conformance",
                                "--max-time", "90", "--request-timeout", "30", "--seed", "1",
                                "--no-color", "--suppress-health-check", "all", "--report", "junit",
                                "--report-dir", dir / "report"});
  INFO(r.out);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Operations:       6 selected / 6 total"));
  // It ran every operation of the document (all but the document's own).
  std::string report;
  for (const auto& file : std::filesystem::directory_iterator(dir / "report")) report += ReadFileOrEmpty(file.path());
  for (const char* op : {"POST /v1/chat/completions", "POST /v1/completions", "GET /v1/models",
                         "GET /v1/models/{model}", "GET /health", "GET /metrics"}) {
    CHECK_THAT(report, Catch::Contains(fmt::format("testcase name=\"{}\"", op)));
  }
  CHECK_THAT(report, !Catch::Contains("<failure"));
  INFO(serve.Log());
  CHECK(serve.Alive());
  CHECK(serve.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
