#include "orchestrator/server/daemon_metrics.h"

#include <filesystem>

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/config/models_config.h"
#include "orchestrator/daemon_process.h"
#include "orchestrator/prometheus_parser.h"
#include "orchestrator/temp_dir.h"
#include "promtool.h"
#include "skip.h"

namespace temper {
namespace {

using testing::ParsePrometheusText;
using testing::TempDir;

NewEvent Event(const char* type, const std::string& role, const nlohmann::json& data, TokenUsage usage = {}) {
  return NewEvent{.batch_id = 1,
                  .rule_id = "xccdf_org.ssgproject.content_rule_a",
                  .role = role,
                  .type = type,
                  .data_json = data.dump(),
                  .usage = usage};
}

NewBatch Batch() {
  NewBatch b;
  b.target = "lab";
  b.datastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
  b.profile = "stig";
  b.rule_ids = {"xccdf_org.ssgproject.content_rule_a", "xccdf_org.ssgproject.content_rule_b"};
  return b;
}

TEST_CASE("temperd's metrics: states from the store, attempts and role calls folded from the journal") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  REQUIRE(store->SubmitBatch(Batch()).ok());
  DaemonMetrics metrics(*store, nullptr);
  REQUIRE(store
              ->AppendEvent(Event("architect.pick", "architect",
                                  {{"approach", "x"}, {"corrections", {"not JSON"}}, {"latency_ms", 1500}},
                                  {.prompt_tokens = 900, .completion_tokens = 40, .cached_prompt_tokens = 100}))
              .ok());
  REQUIRE(store
              ->AppendEvent(Event("worker.model_call", "worker", {{"attempt", 1}, {"latency_ms", 30000}},
                                  {.prompt_tokens = 5000, .completion_tokens = 300}))
              .ok());
  REQUIRE(store
              ->AppendEvent(Event("attempt.kept", "evaluator",
                                  {{"number", 1}, {"changes_ms", 100}, {"verify_ms", 800}, {"snapshot_ms", 20}}))
              .ok());

  auto first = metrics.Render();
  REQUIRE(first.ok());
  auto samples = ParsePrometheusText(dir, *first);
  if (!samples) TEMPER_SKIP("python3-prometheus-client is not installed (deploy/setup.sh installs it)");
  auto& s = *samples;
  CHECK(s.at(R"(temper_batches{state="queued"})") == 1);
  CHECK(s.at(R"(temper_batches{state="running"})") == 0);
  CHECK(s.at(R"(temper_rules{state="pending"})") == 2);
  CHECK(s.at(R"(temper_attempts_total{outcome="kept"})") == 1);
  CHECK(s.at(R"(temper_attempts_total{outcome="reverted"})") == 0);
  CHECK(s.at(R"(temper_attempt_verification_seconds_sum{})") == Approx(0.8));
  CHECK(s.at(R"(temper_attempt_harness_seconds_sum{})") == Approx(0.92));
  CHECK(s.at(R"(temper_attempt_harness_seconds_bucket{le="1"})") == 1);
  CHECK(s.at(R"(temper_attempt_harness_seconds_bucket{le="0.5"})") == 0);
  CHECK(s.at(R"(temper_model_calls_total{endpoint="",role="architect"})") == 2);  // one correction
  CHECK(s.at(R"(temper_model_calls_total{endpoint="",role="worker"})") == 1);
  CHECK(s.at(R"(temper_model_prompt_tokens_total{endpoint="",role="worker"})") == 5000);
  CHECK(s.at(R"(temper_model_cached_prompt_tokens_total{endpoint="",role="architect"})") == 100);
  CHECK(s.at(R"(temper_model_completion_tokens_total{endpoint="",role="architect"})") == 40);
  CHECK(s.at(R"(temper_model_call_errors_total{endpoint="",role="worker"})") == 0);
  CHECK(s.at(R"(temper_model_call_seconds_bucket{endpoint="",le="20",role="worker"})") == 0);
  CHECK(s.at(R"(temper_model_call_seconds_bucket{endpoint="",le="40",role="worker"})") == 1);
  CHECK(s.at(R"(temper_journal_events_total{})") == 4);  // batch.submitted and the three above

  // The next scrape folds only what came since: nothing is counted twice.
  REQUIRE(store->AppendEvent(Event("attempt.reverted", "evaluator", {{"number", 2}, {"verify_ms", 1200}})).ok());
  REQUIRE(store->AppendEvent(Event("attempt.conflict", "daemon", {{"number", 3}})).ok());
  REQUIRE(store->AppendEvent(Event("reflector.lesson", "reflector", {{"error", "timed out"}, {"latency_ms", 120000}}))
              .ok());
  REQUIRE(store->AppendEvent(Event("some.future_event", "worker", {{"latency_ms", "not a number"}})).ok());
  auto second = ParsePrometheusText(dir, *metrics.Render());
  REQUIRE(second);
  CHECK(second->at(R"(temper_attempts_total{outcome="kept"})") == 1);
  CHECK(second->at(R"(temper_attempts_total{outcome="reverted"})") == 1);
  CHECK(second->at(R"(temper_attempts_total{outcome="conflict"})") == 1);
  CHECK(second->at(R"(temper_attempt_verification_seconds_count{})") == 2);
  CHECK(second->at(R"(temper_model_call_errors_total{endpoint="",role="reflector"})") == 1);
  CHECK(second->at(R"(temper_model_calls_total{endpoint="",role="worker"})") == 1);  // the unknown type: not a call
  CHECK(second->at(R"(temper_journal_events_total{})") == 8);
}

TEST_CASE("temperd's metrics label role calls with the endpoint models.yaml maps each role to") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  auto config = ParseModelsConfig(
      "endpoints:\n"
      "  big: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: m}\n"
      "  small: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: s}\n"
      "roles:\n"
      "  architect: {endpoint: big}\n  worker: {endpoint: big}\n  reflector: {endpoint: small}\n",
      "models.yaml");
  REQUIRE(config.ok());
  Logger log(LogLevel::kError);
  auto models = RoleModels::Create(*config, log);
  REQUIRE(models.ok());
  REQUIRE(store->SubmitBatch(Batch()).ok());
  DaemonMetrics metrics(*store, models->get());
  REQUIRE(store->AppendEvent(Event("reflector.lesson", "reflector", {{"latency_ms", 900}})).ok());
  REQUIRE(store->AppendEvent(Event("worker.model_call", "worker", {{"latency_ms", 900}})).ok());
  auto samples = ParsePrometheusText(dir, *metrics.Render());
  if (!samples) TEMPER_SKIP("python3-prometheus-client is not installed (deploy/setup.sh installs it)");
  CHECK(samples->at(R"(temper_model_calls_total{endpoint="small",role="reflector"})") == 1);
  CHECK(samples->at(R"(temper_model_calls_total{endpoint="big",role="worker"})") == 1);
  // Remote endpoints have no engine in this process: no temper_engine_* families.
  for (const auto& [key, value] : *samples) CHECK(key.rfind("temper_engine_", 0) != 0);
}

TEST_CASE("temperd's metrics count the whole journal: a new reader (a restart) starts from its first event") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  REQUIRE(store->SubmitBatch(Batch()).ok());
  // More events than one page of reads.
  for (int i = 0; i < 2500; ++i) {
    REQUIRE(store->AppendEvent(Event("attempt.kept", "evaluator", {{"number", i}, {"verify_ms", 500}})).ok());
  }
  DaemonMetrics metrics(*store, nullptr);
  auto samples = ParsePrometheusText(dir, *metrics.Render());
  if (!samples) TEMPER_SKIP("python3-prometheus-client is not installed (deploy/setup.sh installs it)");
  CHECK(samples->at(R"(temper_attempts_total{outcome="kept"})") == 2500);
  CHECK(samples->at(R"(temper_journal_events_total{})") == 2501);
}

TEST_CASE("temperd's GET /metrics passes promtool check metrics, an in-process engine's families included") {
  TEMPER_REQUIRE_PROMTOOL();
  TempDir dir;
  // The tiny fixture as a model directory: its config and weights, and the chat tokenizer whose 512
  // ids are its vocabulary (tests/data/tokenizer/README.md).
  const std::string data = TEMPER_TEST_DATA_DIR;
  const std::string model = dir / "model";
  std::filesystem::create_directories(model);
  std::filesystem::create_symlink(data + "/gemma4-tiny/config.json", model + "/config.json");
  std::filesystem::create_symlink(data + "/gemma4-tiny/model.safetensors", model + "/model.safetensors");
  std::filesystem::create_symlink(data + "/tokenizer/gemma4-chat-tiny-tokenizer.json", model + "/tokenizer.json");
  testing::DaemonProcess daemon(
      dir, {.metrics_listen = "127.0.0.1:0",
            .models_yaml = fmt::format("endpoints:\n  local: {{type: inprocess, model_dir: {}, max_context: 512}}\n"
                                       "roles:\n  architect: {{endpoint: local}}\n  worker: {{endpoint: local}}\n"
                                       "  reflector: {{endpoint: local}}\n",
                                       model)});
  const Status started = daemon.Start();
  INFO(started.ToString());
  REQUIRE(started.ok());
  httplib::Client http("127.0.0.1", testing::NotifiedPort(daemon, "metrics http://127.0.0.1:"));
  auto got = http.Get("/metrics");
  REQUIRE(got);
  REQUIRE(got->status == 200);
  const testing::PromtoolResult lint = testing::PromtoolCheckMetrics(got->body);
  INFO(lint.output << "\n" << got->body);
  CHECK(lint.exit_code == 0);
  CHECK(lint.output.empty());
  // The engine's gauges and latency histograms, labelled with their endpoint; the process's own.
  CHECK_THAT(got->body, Catch::Contains("temper_engine_kv_blocks{endpoint=\"local\"} "));
  for (const char* histogram : {"time_to_first_token", "inter_token_latency", "e2e_request_latency"}) {
    CHECK_THAT(got->body, Catch::Contains(fmt::format("# TYPE temper_engine_{}_seconds histogram", histogram)));
    CHECK_THAT(got->body, Catch::Contains(fmt::format("temper_engine_{}_seconds_count{{endpoint=\"local\"}} 0", histogram)));
  }
  CHECK_THAT(got->body, Catch::Contains("\nprocess_resident_memory_bytes "));
  CHECK_THAT(got->body, Catch::Contains("\nprocess_start_time_seconds "));
  CHECK_THAT(got->body, Catch::Contains("\ntemper_build_info{version=\""));
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper
