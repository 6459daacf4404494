// The dashboard in a real browser (Debian's Chromium, headless, driven over DevTools): temperd runs a
// batch on a rootfs target with a scripted model paced like a slow one, the page opened with the
// token follows it live from its journal, shows the rules' states, a kept fix's diff and the
// reflection of a reverted attempt, a journal pane that wraps and shows each event's data whole with
// UTC times, and a screenshot is kept in <build>/test-output/.
#include <fmt/format.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "loop/headless_browser.h"
#include "loop/loop_harness.h"
#include "scratch_space.h"
#include "scripted_model/scripted_answers.h"
#include "skip.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

// Where READY says the dashboard listens.
constexpr const char* kDashboardAt = "dashboard http://127.0.0.1:";
constexpr const char* kToken = "browser-dashboard-token";

TEST_CASE("the dashboard in headless Chromium follows a running batch live and shows a kept fix's diff",
          "[consumers]") {
  if (!std::filesystem::exists(kChromium)) TEMPER_SKIP("Debian's chromium is not installed (deploy/setup.sh)");
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;  // a reverted attempt with a reflection
  // Decoding at 150 tokens/s: the batch runs for seconds, so the page sees it move.
  scripted::ScriptedModelOptions model_options;
  model_options.latency = scripted::LatencyModel{.batch_curve = {{1, 150.0}}};
  auto server = ScriptedModelServer::Start(script, model_options);
  REQUIRE(server.ok());
  TempDir secrets;
  std::string token_file = secrets.Write("dashboard.token", std::string(kToken) + "\n");
  chmod(token_file.c_str(), 0600);
  LoopDaemon loop(**server, {.dashboard_yaml = fmt::format("{{address: '127.0.0.1:0', token_file: {}}}", token_file)});
  INFO(loop.daemon->Log());
  const int port = NotifiedPort(*loop.daemon, kDashboardAt);

  std::string id = loop.Submit(
      {.rules = {"accounts_tmout", "banner_etc_issue_net", "no_duplicate_uids"}, .max_attempts = 2, .name = "live"});
  ScratchPath profile("chromium-profile");
  auto browser = HeadlessBrowser::Open(fmt::format("http://127.0.0.1:{}/?token={}", port, kToken), profile.path());
  REQUIRE(browser.ok());
  HeadlessBrowser& page = **browser;

  REQUIRE(page.WaitFor("document.body.dataset.firstPaintMs !== undefined", std::chrono::seconds(30)));
  const std::string first_paint = page.Evaluate("document.body.dataset.firstPaintMs")->get<std::string>();
  // It follows the batch: journal events that happen after the page opened arrive on their own.
  REQUIRE(page.WaitFor("Number(document.body.dataset.liveEvents || 0) >= 3", std::chrono::minutes(5)));
  CHECK(loop.GetBatch(id).state() == temper::v1::BATCH_STATE_RUNNING);  // it was live, not a replay
  // A batch submitted meanwhile for the same target is told what it waits on.
  const ProcessResult behind =
      loop.Cli({"submit", "-t", "lab", "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig", "-r", "accounts_tmout", "--json"});
  INFO(behind.err);
  REQUIRE(behind.exit_code == 0);
  const nlohmann::json queued = nlohmann::json::parse(behind.out);
  CHECK(queued["waiting_reason"] == fmt::format("batch {} is running on target lab; this batch starts after it", id));
  CHECK(loop.Cli({"cancel", queued["id"].get<std::string>()}).exit_code == 0);
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  const auto ended = std::chrono::steady_clock::now();
  REQUIRE(page.WaitFor("document.getElementById('batch-title').textContent.endsWith('completed')",
                       std::chrono::seconds(30)));
  const auto shown = std::chrono::steady_clock::now();
  CHECK(page.Evaluate("document.querySelectorAll('#rules tr[data-rule]').length")->get<int>() == 3);
  CHECK(page.Evaluate("document.querySelector('#rules tr[data-rule$=\"accounts_tmout\"] .state').textContent")
            ->get<std::string>() == "fixed");
  CHECK(page.Evaluate("document.querySelectorAll('#journal .event[data-type=\"attempt.kept\"]').length")->get<int>() >=
        2);

  // A rule's panel: the kept fix's diff, and the reflection on the reverted attempt.
  REQUIRE(page.Evaluate("document.querySelector('#rules tr[data-rule$=\"accounts_tmout\"]').click(), true").ok());
  CHECK(page.WaitFor("document.getElementById('rule').textContent.includes('TMOUT')", std::chrono::seconds(10)));
  REQUIRE(page.Evaluate("document.querySelector('#rules tr[data-rule$=\"banner_etc_issue_net\"]').click(), true").ok());
  CHECK(page.WaitFor("document.getElementById('rule').textContent.includes('Attempt 1: reverted')",
                     std::chrono::seconds(10)));
  CHECK(page.WaitFor("document.getElementById('rule').textContent.includes('Reflection:')", std::chrono::seconds(10)));
  // Model and file text are shown as text: no element came from the data.
  CHECK(page.Evaluate("document.querySelectorAll('#rule script, #journal script').length")->get<int>() == 0);

  // Whole reflections, word for word as the journal and the report hold them: the reverted attempt's
  // in the rule's panel, and the Reflector's event in the journal pane field by field (the pane used
  // to show the first 300 characters of the event's raw JSON).
  const temper::v1::BatchReport report = loop.Report(id);
  std::string reflection;
  for (const temper::v1::Attempt& a : report.attempts()) {
    if (!a.reflection().empty()) reflection = a.reflection();
  }
  REQUIRE_FALSE(reflection.empty());
  CHECK(page.Evaluate("document.getElementById('rule').textContent")->get<std::string>().find(reflection) !=
        std::string::npos);
  std::string lesson_json;
  for (const temper::v1::JournalEvent& e : loop.JournalEvents(id)) {
    if (e.type() == "reflector.lesson") lesson_json = e.data_json();
  }
  INFO(lesson_json);
  REQUIRE(lesson_json.size() > 300);
  const nlohmann::json lesson = nlohmann::json::parse(lesson_json);
  for (const char* key : {"lesson", "why_failed", "next"}) {
    CHECK(page.Evaluate(fmt::format("(f => f ? f.textContent : '')(document.querySelector('#journal "
                                    ".event[data-type=\"reflector.lesson\"] .field[data-key=\"{}\"] > "
                                    "span:not(.key)'))",
                                    key))
              ->get<std::string>() == lesson[key].get<std::string>());
  }
  // Long lines wrap inside the pane: nothing runs off its right edge.
  CHECK(page.Evaluate("getComputedStyle(document.querySelector('#journal .event')).whiteSpace")->get<std::string>() ==
        "pre-wrap");
  CHECK(page.Evaluate("getComputedStyle(document.querySelector('#journal .event')).overflowWrap")->get<std::string>() ==
        "anywhere");
  CHECK(page.Evaluate("(s => s.scrollWidth <= s.clientWidth)(document.getElementById('journal').parentElement)")
            ->get<bool>());
  // Times in UTC with the zone marked, as the CLI prints them.
  const std::string utc = "\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ";
  CHECK(page.Evaluate(fmt::format("[...document.querySelectorAll('#journal .event .time')].every(t => "
                                  "/^{} $/.test(t.textContent))",
                                  utc))
            ->get<bool>());
  CHECK(page.Evaluate(fmt::format("/started {}/.test(document.getElementById('batch-summary').textContent)", utc))
            ->get<bool>());
  // The CLI's watch of the ended batch exits at once, its status the batch's outcome (0: completed).
  CHECK(loop.Cli({"watch", id}).exit_code == 0);

  const std::string out_dir = std::string(TEMPER_BINARY_DIR) + "/test-output";
  std::filesystem::create_directories(out_dir);
  // The screenshot shows the Reflector's event in the journal pane, for a person to read.
  REQUIRE(
      page.Evaluate("(e => { const pane = e.closest('section'); pane.scrollTop = e.offsetTop - pane.offsetTop - "
                    "40; return true; })(document.querySelector('#journal .event[data-type=\"reflector.lesson\"]'))")
          .ok());
  const std::string shot = out_dir + "/dashboard.png";
  REQUIRE(page.Screenshot(shot).ok());
  CHECK(std::filesystem::file_size(shot) > 10'000);
  const std::string latency = page.Evaluate("document.body.dataset.maxLatencyMs || ''")->get<std::string>();
  const std::string events = page.Evaluate("document.body.dataset.liveEvents || ''")->get<std::string>();
  std::printf(
      "dashboard: first contentful paint %s ms; %s live events, the slowest shown %s ms after the journal wrote it; "
      "the completed batch shown %.0f ms after temperd reported it ended (polling every 100 ms); screenshot %s\n",
      first_paint.c_str(), events.c_str(), latency.c_str(),
      std::chrono::duration<double, std::milli>(shown - ended).count(), shot.c_str());
}

}  // namespace
}  // namespace temper::testing
