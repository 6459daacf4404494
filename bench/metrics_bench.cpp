// metrics_bench: what a Prometheus scrape of temperd costs (orchestrator/server/daemon_metrics.h).
// A state store in a scratch directory gets one batch and N journal events shaped as a loop writes
// them (each attempt: an Architect pick, three Worker calls, its verdict; every fifth one reverted
// with a Reflector lesson), then: the first scrape (it folds every event: a daemon just started),
// a scrape with nothing new, and one after 100 new events. Medians of --reps runs, on real SQLite.
//
//   build/bench/metrics_bench [--events 10000] [--reps 5]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "orchestrator/server/daemon_metrics.h"

namespace {

using temper::bench::Clock;
using temper::bench::Median;
using temper::bench::Ms;

temper::Status AppendLoopEvents(temper::StateStore& store, int count, int& attempt) {
  auto append = [&](const char* type, const char* role, const nlohmann::json& data, temper::TokenUsage usage = {}) {
    return store
        .AppendEvent({.batch_id = 1,
                      .rule_id = fmt::format("xccdf_org.ssgproject.content_rule_r{}", attempt % 191),
                      .role = role,
                      .type = type,
                      .data_json = data.dump(),
                      .usage = usage})
        .status();
  };
  for (int written = 0; written < count; ++attempt) {
    TEMPER_RETURN_IF_ERROR(append("architect.pick", "architect", {{"approach", "fix"}, {"latency_ms", 4000}},
                                  {.prompt_tokens = 20000, .completion_tokens = 80, .cached_prompt_tokens = 15000}));
    for (int call = 0; call < 3; ++call) {
      TEMPER_RETURN_IF_ERROR(append("worker.model_call", "worker", {{"attempt", 1}, {"latency_ms", 30000}},
                                    {.prompt_tokens = 6000, .completion_tokens = 500}));
    }
    const bool kept = attempt % 5 != 0;
    TEMPER_RETURN_IF_ERROR(append(kept ? "attempt.kept" : "attempt.reverted", "evaluator",
                                  {{"number", 1}, {"changes_ms", 40}, {"verify_ms", 900}, {"snapshot_ms", 12}}));
    written += 5;
    if (!kept) {
      TEMPER_RETURN_IF_ERROR(append("reflector.lesson", "reflector", {{"lesson", "x"}, {"latency_ms", 8000}},
                                    {.prompt_tokens = 4000, .completion_tokens = 200}));
      ++written;
    }
  }
  return temper::Status::OK();
}

int Fail(const temper::Status& s) {
  std::fprintf(stderr, "metrics_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int events = 10000, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--events") events = std::atoi(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else return Fail(temper::Status::InvalidArgument("unknown flag " + flag + " (--events N, --reps N)"));
  }
  if (events < 1 || reps < 1) return Fail(temper::Status::InvalidArgument("--events and --reps must be positive"));
  std::vector<double> first, idle, after_100;
  size_t body_bytes = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / fmt::format("temper-metrics-bench-{}-{}", ::getpid(), rep);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    {
      auto store = temper::StateStore::Open((dir / "t.db").string());
      if (!store.ok()) return Fail(store.status());
      temper::NewBatch batch{.target = "lab", .datastream = "/ds.xml", .profile = "stig"};
      for (int r = 0; r < 191; ++r) batch.rule_ids.push_back(fmt::format("xccdf_org.ssgproject.content_rule_r{}", r));
      if (auto s = (*store)->SubmitBatch(batch); !s.ok()) return Fail(s.status());
      int attempt = 0;
      if (auto s = AppendLoopEvents(**store, events - 1, attempt); !s.ok()) return Fail(s);
      temper::DaemonMetrics metrics(**store, nullptr);
      auto timed = [&](std::vector<double>& out) -> temper::Status {
        const Clock::time_point t0 = Clock::now();
        TEMPER_ASSIGN_OR_RETURN(std::string body, metrics.Render());
        out.push_back(Ms(t0, Clock::now()));
        body_bytes = body.size();
        return temper::Status::OK();
      };
      if (auto s = timed(first); !s.ok()) return Fail(s);
      if (auto s = timed(idle); !s.ok()) return Fail(s);
      if (auto s = AppendLoopEvents(**store, 100, attempt); !s.ok()) return Fail(s);
      if (auto s = timed(after_100); !s.ok()) return Fail(s);
    }
    std::filesystem::remove_all(dir);
  }
  std::printf(
      "metrics scrape, %d journal events (median of %d): first %.1f ms (folds them all), "
      "next with nothing new %.2f ms, after 100 more %.2f ms; body %zu bytes\n",
      events, reps, Median(first), Median(idle), Median(after_100), body_bytes);
  return 0;
}
