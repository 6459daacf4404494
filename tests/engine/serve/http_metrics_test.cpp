// `temper-lm serve`'s GET /metrics over loopback as Prometheus's tools read it: promtool's linter
// passes it, and the request latency histograms count exactly the requests served.
#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/http_test_support.h"
#include "engine/serve/http_server.h"
#include "engine/serving_fixture.h"
#include "promtool.h"

namespace temper::engine::testing {
namespace {

using nlohmann::json;
using ::temper::testing::PromtoolCheckMetrics;

// The value of the unlabelled sample `name` in a /metrics body; -1 when there is none.
double Sample(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("(^|\n)" + name + " ([-0-9.e+]+)\n"))) return -1;
  return std::stod(m[2].str());
}

TEST_CASE("temper-lm serve's /metrics passes promtool, its latency histograms counting every request",
          "[engine][http]") {
  TEMPER_REQUIRE_PROMTOOL();
  std::unique_ptr<CpuBackend> backend = ServingBackend();
  std::unique_ptr<Scheduler> scheduler = MakeScheduler(*backend);
  HttpServerOptions options;
  options.model_name = "gemma4-tiny";
  auto server = HttpServer::Start(*scheduler, options, QuietLog());
  REQUIRE(server.ok());
  httplib::Client c = LocalClient((*server)->port());

  constexpr int kRequests = 3;
  int64_t gaps = 0;  // between consecutive tokens of one request: its completion tokens - 1
  for (int i = 0; i < kRequests; ++i) {
    const json request = {{"model", "gemma4-tiny"},
                          {"prompt", RandomPrompt(static_cast<uint64_t>(i), 6)},
                          {"max_tokens", 3 + i},
                          {"temperature", 0}};
    auto reply = c.Post("/v1/completions", request.dump(), "application/json");
    REQUIRE(reply);
    REQUIRE(reply->status == 200);
    gaps += json::parse(reply->body)["usage"]["completion_tokens"].get<int64_t>() - 1;
  }

  // The scheduler publishes its metrics after the step that finished a request, a moment after the
  // reply may have left.
  std::string body;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    auto metrics = c.Get("/metrics");
    REQUIRE(metrics);
    body = metrics->body;
    if (Sample(body, "temper_engine_e2e_request_latency_seconds_count") == kRequests) break;
  }
  const ::temper::testing::PromtoolResult lint = PromtoolCheckMetrics(body);
  INFO(lint.output << "\n" << body);
  CHECK(lint.exit_code == 0);
  CHECK(lint.output.empty());

  CHECK(Sample(body, "temper_engine_e2e_request_latency_seconds_count") == kRequests);
  CHECK(Sample(body, "temper_engine_time_to_first_token_seconds_count") == kRequests);
  CHECK(Sample(body, "temper_engine_inter_token_latency_seconds_count") == static_cast<double>(gaps));
  CHECK(Sample(body, "temper_engine_requests_finished_total") == kRequests);
  // Each request's first token came before its end.
  CHECK(Sample(body, "temper_engine_time_to_first_token_seconds_sum") <=
        Sample(body, "temper_engine_e2e_request_latency_seconds_sum"));
  CHECK_THAT(body, Catch::Contains("temper_engine_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
  CHECK(Sample(body, "temper_engine_kv_blocks") == 256);

  CHECK(Sample(body, "process_resident_memory_bytes") > 0);
  CHECK(Sample(body, "process_open_fds") >= 3);
  const double started = Sample(body, "process_start_time_seconds");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(started <= now);
  CHECK(started > now - 3600);  // this test process began within the hour
  CHECK(std::regex_search(body, std::regex("\ntemper_build_info\\{version=\"[0-9]+\\.[0-9]+\\.[0-9]+\"\\} 1\n")));
}

}  // namespace
}  // namespace temper::engine::testing
