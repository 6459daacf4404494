// The dashboard in a real browser (Debian's Chromium, headless, driven over DevTools): temperd runs a
// batch on a rootfs target with a scripted model paced like a slow one, the page opened with the
// token follows it live from its journal, shows the rules' states, a kept fix's diff and the
// reflection of a reverted attempt, and a screenshot is kept in <build>/test-output/.
#include <fmt/format.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

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

  const std::string out_dir = std::string(TEMPER_BINARY_DIR) + "/test-output";
  std::filesystem::create_directories(out_dir);
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
