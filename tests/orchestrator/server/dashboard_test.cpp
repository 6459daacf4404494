// temperd's dashboard over a real socket: who may read it (the token, the cookie it becomes, the Host
// check against DNS rebinding), what its JSON says, and the journal as server-sent events. The
// page in a real browser: tests/loop/dashboard_browser_e2e_test.cpp.
#include <sys/stat.h>

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "orchestrator/daemon_process.h"
#include "orchestrator/temp_dir.h"

namespace temper::testing {
namespace {

// Where READY says the dashboard listens.
constexpr const char* kDashboardAt = "dashboard http://127.0.0.1:";
constexpr const char* kToken = "dashboard-token-7f3a";

std::string TokenFile(const TempDir& dir) {
  std::string path = dir.Write("dashboard.token", std::string(kToken) + "\n");
  chmod(path.c_str(), 0600);
  return path;
}

httplib::Headers WithCookie() { return {{"Cookie", fmt::format("temper_dashboard={}", kToken)}}; }

TEST_CASE("the dashboard admits only its token, addressed to the loopback, and says why it refuses") {
  TempDir dir;
  DaemonProcess daemon(dir,
                       {.dashboard_yaml = fmt::format("{{address: '127.0.0.1:0', token_file: {}}}", TokenFile(dir))});
  REQUIRE(daemon.Start().ok());
  httplib::Client http("127.0.0.1", NotifiedPort(daemon, kDashboardAt));

  auto page = http.Get("/");
  REQUIRE(page);
  CHECK(page->status == 401);
  CHECK_THAT(page->body, Catch::Contains("?token="));
  CHECK(http.Get("/api/batches")->status == 401);
  CHECK(http.Get("/?token=wrong")->status == 401);
  CHECK(http.Get("/api/batches", {{"Cookie", "temper_dashboard=wrong"}})->status == 401);

  // The token in the URL becomes an HttpOnly cookie, and the URL loses it.
  auto login = http.Get(fmt::format("/?token={}", kToken));
  REQUIRE(login);
  CHECK(login->status == 303);
  CHECK(login->get_header_value("Location") == "/");
  CHECK(login->get_header_value("Set-Cookie") ==
        fmt::format("temper_dashboard={}; Path=/; HttpOnly; SameSite=Strict", kToken));
  auto admitted = http.Get("/", WithCookie());
  REQUIRE(admitted);
  CHECK(admitted->status == 200);
  CHECK_THAT(admitted->body, Catch::StartsWith("<!DOCTYPE html>"));
  // Self-contained: nothing is loaded from anywhere else, and the policy says so to the browser.
  CHECK_THAT(admitted->body, !Catch::Contains("src=\"http") && !Catch::Contains("href=\"http"));
  CHECK_THAT(admitted->get_header_value("Content-Security-Policy"),
             Catch::StartsWith("default-src 'none'") && Catch::Contains("connect-src 'self'"));
  CHECK(http.Get("/api/batches", {{"Authorization", fmt::format("Bearer {}", kToken)}})->status == 200);

  // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends its own Host.
  httplib::Headers rebound = WithCookie();
  rebound.emplace("Host", "evil.example:80");
  auto refused = http.Get("/api/batches", rebound);
  REQUIRE(refused);
  CHECK(refused->status == 403);
  rebound = {{"Host", "evil.example"}};
  CHECK(http.Get(fmt::format("/?token={}", kToken), rebound)->status == 403);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("the dashboard's JSON carries the batch and its rules, and the journal streams as events") {
  TempDir dir;
  DaemonProcess daemon(dir,
                       {.dashboard_yaml = fmt::format("{{address: '127.0.0.1:0', token_file: {}}}", TokenFile(dir))});
  REQUIRE(daemon.Start().ok());
  temper::v1::Batch submitted = SubmitOk(*daemon.Stub(), ValidSubmit("watched"));
  httplib::Client http("127.0.0.1", NotifiedPort(daemon, kDashboardAt));

  auto list = http.Get("/api/batches", WithCookie());
  REQUIRE(list);
  REQUIRE(list->status == 200);
  nlohmann::json batches = nlohmann::json::parse(list->body)["batches"];
  REQUIRE(batches.size() == 1);
  CHECK(batches[0]["id"] == submitted.id());
  CHECK(batches[0]["name"] == "watched");
  // This daemon has no models: the page shows why the batch waits, as `temper status` does.
  CHECK_THAT(batches[0]["waiting_reason"].get<std::string>(),
             Catch::StartsWith("no model is configured for the roles architect, worker, reflector ("));

  auto one = http.Get("/api/batches/" + submitted.id(), WithCookie());
  REQUIRE(one);
  REQUIRE(one->status == 200);
  nlohmann::json report = nlohmann::json::parse(one->body);
  CHECK(report["batch"]["id"] == submitted.id());
  CHECK(report["batch"]["rules"].size() == static_cast<size_t>(submitted.rules_size()));
  CHECK(report["batch"]["waiting_reason"] == batches[0]["waiting_reason"]);
  CHECK(report.contains("attempts"));
  CHECK(http.Get("/api/batches/999999", WithCookie())->status == 404);
  CHECK(http.Get("/api/batches/0", WithCookie())->status == 404);
  CHECK(http.Get("/api/events?batch=x", WithCookie())->status == 400);

  // The stream from the start: the batch's first event arrives as an SSE "journal" event with its
  // seq as id; the client ends the stream once it has it.
  std::string received;
  httplib::Client stream("127.0.0.1", NotifiedPort(daemon, kDashboardAt));
  stream.set_read_timeout(10, 0);
  auto streamed = stream.Get("/api/events?batch=" + submitted.id(), WithCookie(), [&](const char* data, size_t n) {
    received.append(data, n);
    return received.find("\n\n") == std::string::npos;  // stop after the first whole event
  });
  CHECK_THAT(received, Catch::StartsWith("id: ") && Catch::Contains("\nevent: journal\ndata: {"));
  const size_t data_at = received.find("data: ") + 6;
  nlohmann::json event = nlohmann::json::parse(received.substr(data_at, received.find('\n', data_at) - data_at));
  CHECK(event["batch_id"] == submitted.id());
  CHECK(event["type"] == "batch.submitted");
  // Resumed after that event, the stream does not repeat it.
  httplib::Headers resume = WithCookie();
  resume.emplace("Last-Event-ID", event["seq"].get<std::string>());
  std::string after;
  stream.Get("/api/events?batch=" + submitted.id(), resume, [&](const char* data, size_t n) {
    after.append(data, n);
    return after.find("\n\n") == std::string::npos;
  });
  CHECK_THAT(after, !Catch::Contains("\"type\":\"batch.submitted\""));
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("a dashboard on an address other machines reach, or without a token, is refused at start") {
  TempDir dir;
  for (const auto& [yaml, message] : std::vector<std::pair<std::string, std::string>>{
           {fmt::format("{{address: '0.0.0.0:9465', token_file: {}}}", TokenFile(dir)),
            "0.0.0.0 is not a loopback address"},
           {"{address: '127.0.0.1:9465'}", "token_file is required"}}) {
    std::string config = dir.Write("c.yaml", fmt::format("state_dir: {}\nlisten:\n  dashboard: {}\n", dir / "s", yaml));
    ProcessResult r = RunProcess({TemperdBinary(), "--check-config", "--config", config});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("listen.dashboard") && Catch::Contains(message));
  }
  // A token file others can read is refused by --check-config and when temperd starts, naming it.
  std::string loose = dir.Write("loose.token", "abc\n");
  chmod(loose.c_str(), 0644);
  std::string config = dir.Write(
      "loose.yaml", fmt::format("state_dir: {}\nlisten:\n  dashboard: {{address: '127.0.0.1:0', token_file: {}}}\n",
                                dir / "s", loose));
  ProcessResult checked = RunProcess({TemperdBinary(), "--check-config", "--config", config});
  CHECK(checked.exit_code == 1);
  CHECK_THAT(checked.err, Catch::Contains("listen.dashboard.token_file") && Catch::Contains(loose));
  DaemonProcess daemon(dir, {.dashboard_yaml = fmt::format("{{address: '127.0.0.1:0', token_file: {}}}", loose)});
  CHECK_FALSE(daemon.Start().ok());
  CHECK_THAT(daemon.Log(), Catch::Contains("listen.dashboard.token_file") && Catch::Contains(loose));
}

}  // namespace
}  // namespace temper::testing
