// The daemon end to end: the real temperd binary, its real unix socket, a real gRPC client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "orchestrator/daemon_process.h"
#include "orchestrator/prometheus_parser.h"
#include "skip.h"

namespace temper::testing {
namespace {

using temper::v1::Batch;

TEST_CASE("submit, list, status and cancel over the unix socket") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  auto stub = daemon.Stub();

  Batch first = SubmitOk(*stub, ValidSubmit("first"));
  CHECK(first.id() == "1");
  CHECK(first.state() == temper::v1::BATCH_STATE_QUEUED);
  CHECK(first.counts().total() == 2);
  CHECK(first.rules(0).rule_id() == "xccdf_org.ssgproject.content_rule_sshd_disable_root_login");
  CHECK(first.rules(0).state() == temper::v1::RULE_STATE_PENDING);
  CHECK(first.budgets().max_attempts() == 5);
  Batch second = SubmitOk(*stub, ValidSubmit("second"));

  temper::v1::ListBatchesRequest list_req;
  temper::v1::ListBatchesResponse list;
  REQUIRE(stub->ListBatches(CallContext().get(), list_req, &list).ok());
  REQUIRE(list.batches_size() == 2);
  CHECK(list.batches(0).id() == second.id());
  CHECK(list.batches(0).rules_size() == 0);
  CHECK(list.batches(0).counts().pending() == 2);

  temper::v1::CancelBatchRequest cancel;
  cancel.set_batch_id(first.id());
  cancel.set_reason("wrong target");
  Batch cancelled;
  REQUIRE(stub->CancelBatch(CallContext().get(), cancel, &cancelled).ok());
  CHECK(cancelled.state() == temper::v1::BATCH_STATE_CANCELLED);
  CHECK(cancelled.error() == "wrong target");
  CHECK(cancelled.counts().cancelled() == 2);
  grpc::Status again = stub->CancelBatch(CallContext().get(), cancel, &cancelled);
  CHECK(again.error_code() == grpc::StatusCode::FAILED_PRECONDITION);

  temper::v1::GetBatchRequest get;
  get.set_batch_id(first.id());
  Batch fetched;
  REQUIRE(stub->GetBatch(CallContext().get(), get, &fetched).ok());
  CHECK(fetched.state() == temper::v1::BATCH_STATE_CANCELLED);
  get.set_batch_id("99");
  grpc::Status missing = stub->GetBatch(CallContext().get(), get, &fetched);
  CHECK(missing.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(missing.error_message() == "batch 99 does not exist");

  auto bad = ValidSubmit();
  bad.set_target("prod");
  Batch unused;
  grpc::Status invalid = stub->SubmitBatch(CallContext().get(), bad, &unused);
  CHECK(invalid.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(invalid.error_message().rfind("target: 'prod' is not configured", 0) == 0);

  // A mistyped rule is refused at submit, nothing queued.
  auto typo = ValidSubmit();
  typo.set_rule_ids(1, "acounts_tmout");
  grpc::Status unknown = stub->SubmitBatch(CallContext().get(), typo, &unused);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(unknown.error_message() ==
        "rule_ids[1]: 'acounts_tmout' is not a rule of ssg-test-ds.xml (did you mean 'accounts_tmout'?)");
  REQUIRE(stub->ListBatches(CallContext().get(), list_req, &list).ok());
  CHECK(list.batches_size() == 2);

  CHECK(daemon.Stop() == 0);
}

TEST_CASE("the journal streams in seq order, filters by batch, resumes from a seq and follows live") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  auto stub = daemon.Stub();
  Batch a = SubmitOk(*stub, ValidSubmit("a"));
  Batch b = SubmitOk(*stub, ValidSubmit("b"));
  temper::v1::CancelBatchRequest cancel;
  cancel.set_batch_id(a.id());
  Batch unused;
  REQUIRE(stub->CancelBatch(CallContext().get(), cancel, &unused).ok());

  auto all = ReadJournal(*stub, "", 0);
  REQUIRE(all.size() == 3);
  CHECK(all[0].seq() == 1);
  CHECK(all[0].type() == "batch.submitted");
  CHECK(all[2].seq() == 3);
  CHECK(all[2].type() == "batch.cancelled");
  CHECK(all[2].batch_id() == a.id());
  CHECK(all[2].data_json().find("\"rules_cancelled\":2") != std::string::npos);

  auto resumed = ReadJournal(*stub, "", 1);
  REQUIRE(resumed.size() == 2);
  CHECK(resumed[0].seq() == 2);
  auto only_a = ReadJournal(*stub, a.id(), 0);
  REQUIRE(only_a.size() == 2);
  CHECK(only_a[1].seq() == 3);

  // Follow: a watcher of batch b sees nothing of a's, then b's new event as it is committed.
  temper::v1::WatchJournalRequest follow;
  follow.set_after_seq(3);
  follow.set_follow(true);
  auto ctx = CallContext(20);
  auto reader = stub->WatchJournal(ctx.get(), follow);
  std::atomic<uint64_t> seen{0};
  std::thread watcher([&] {
    temper::v1::JournalEvent e;
    if (reader->Read(&e)) seen = e.seq();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(seen == 0);
  cancel.set_batch_id(b.id());
  REQUIRE(stub->CancelBatch(CallContext().get(), cancel, &unused).ok());
  watcher.join();
  CHECK(seen == 4);
  ctx->TryCancel();
  reader->Finish();

  temper::v1::WatchJournalRequest unknown;
  unknown.set_batch_id("77");
  auto ctx2 = CallContext();
  auto r2 = stub->WatchJournal(ctx2.get(), unknown);
  temper::v1::JournalEvent e;
  CHECK_FALSE(r2->Read(&e));
  CHECK(r2->Finish().error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("health is SERVING and reflection lists temper.v1.Temper") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  auto channel = daemon.Channel();

  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* service : {"", "temper.v1.Temper"}) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    REQUIRE(health->Check(CallContext().get(), req, &resp).ok());
    CHECK(resp.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  }

  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  auto ctx = CallContext();
  auto stream = reflection->ServerReflectionInfo(ctx.get());
  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("*");
  REQUIRE(stream->Write(list));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  REQUIRE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  CHECK(std::find(names.begin(), names.end(), "temper.v1.Temper") != names.end());
  CHECK(std::find(names.begin(), names.end(), "grpc.health.v1.Health") != names.end());
  grpc::reflection::v1alpha::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("temper.v1.Temper");
  REQUIRE(stream->Write(describe));
  REQUIRE(stream->Read(&resp));
  CHECK(resp.file_descriptor_response().file_descriptor_proto_size() >= 1);
  stream->WritesDone();
  CHECK(stream->Finish().ok());
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("peer credentials decide who may use the socket") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  // The other users reach the socket file and the client through `dir`, wherever the build tree lies.
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  // nogroup (65534) exists on every Debian system.
  DaemonProcess daemon(dir, {.unix_group = "nogroup"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);

  ProcessResult member = RunProcess({client, "--socket", daemon.socket_path(), "list"}, 65534, 65534);
  INFO(member.err);
  CHECK(member.exit_code == 0);
  CHECK(member.out == "no batches\n");

  ProcessResult outsider = RunProcess({client, "--socket", daemon.socket_path(), "list"}, 65534, 2);
  CHECK(outsider.exit_code == 1);
  CHECK(outsider.err ==
        "temper: temperd accepts only root, its own user and members of group 'nogroup' on this socket\n");
  CHECK(daemon.Log().find("uid 65534") != std::string::npos);

  ProcessResult root = RunProcess({TemperBinary(), "--socket", daemon.socket_path(), "list"});
  CHECK(root.exit_code == 0);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("listen.metrics: Prometheus's parser reads temperd's GET /metrics, and nothing else is served") {
  TempDir dir;
  DaemonProcess daemon(dir, {.metrics_listen = "127.0.0.1:0"});
  REQUIRE(daemon.Start().ok());
  SubmitOk(*daemon.Stub(), ValidSubmit("counted"));
  const int port = NotifiedPort(daemon, "metrics http://127.0.0.1:");
  httplib::Client http("127.0.0.1", port);
  auto got = http.Get("/metrics");
  REQUIRE(got);
  CHECK(got->status == 200);
  CHECK(got->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0) == 0);
  auto samples = ParsePrometheusText(dir, got->body);
  if (!samples) TEMPER_SKIP("python3-prometheus-client is not installed (deploy/setup.sh installs it)");
  CHECK(samples->at(R"(temper_batches{state="queued"})") == 1);  // no models: the batch waits
  CHECK(samples->at(R"(temper_rules{state="pending"})") == 2);
  CHECK(samples->at(R"(temper_journal_events_total{})") == 1);
  CHECK(samples->count(R"(temper_attempt_harness_seconds_count{})") == 1);

  // A scraper reads; nothing else is answered.
  CHECK(http.Get("/v1/batches")->status == 404);
  auto posted = http.Post("/metrics", std::string(4096, 'x'), "text/plain");
  REQUIRE(posted);
  CHECK(posted->status >= 400);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("listen.metrics on an address already taken: temperd does not start, and says which") {
  TempDir dir;
  DaemonProcess first(dir, {.metrics_listen = "127.0.0.1:0"});
  REQUIRE(first.Start().ok());
  TempDir other;
  DaemonProcess second(
      other, {.metrics_listen = fmt::format("127.0.0.1:{}", NotifiedPort(first, "metrics http://127.0.0.1:"))});
  Status started = second.Start();
  REQUIRE_FALSE(started.ok());
  CHECK_THAT(second.Log(), Catch::Contains("listen.metrics"));
  CHECK(first.Stop() == 0);
}

TEST_CASE("a restart keeps every batch and event, and seqs continue") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  {
    auto stub = daemon.Stub();
    SubmitOk(*stub, ValidSubmit("before restart"));
    SubmitOk(*stub, ValidSubmit("also before"));
  }
  CHECK(daemon.Stop(SIGTERM) == 0);
  auto notes = daemon.Notifications();
  CHECK(std::any_of(notes.begin(), notes.end(),
                    [](const std::string& n) { return n.find("READY=1") != std::string::npos; }));
  CHECK(std::any_of(notes.begin(), notes.end(),
                    [](const std::string& n) { return n.find("STOPPING=1") != std::string::npos; }));
  CHECK(daemon.Log().find("shut down cleanly") != std::string::npos);

  REQUIRE(daemon.Start().ok());
  auto stub = daemon.Stub();
  temper::v1::ListBatchesResponse list;
  REQUIRE(stub->ListBatches(CallContext().get(), {}, &list).ok());
  REQUIRE(list.batches_size() == 2);
  CHECK(list.batches(1).name() == "before restart");
  Batch third = SubmitOk(*stub, ValidSubmit("after restart"));
  CHECK(third.id() == "3");
  auto events = ReadJournal(*stub, "", 0);
  REQUIRE(events.size() == 3);
  CHECK(events[2].seq() == 3);
  CHECK(daemon.Stop() == 0);
  // The JSON Lines mirror holds each batch's events too.
  std::string file = ReadFileOrEmpty(dir / "state/journal/batch-3.jsonl");
  CHECK(file.rfind("{\"batch_id\":\"3\"", 0) == 0);
  CHECK(std::count(file.begin(), file.end(), '\n') == 1);
}

TEST_CASE("kill -9 loses nothing acknowledged and leaves a socket the next start replaces") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  SubmitOk(*daemon.Stub(), ValidSubmit("acknowledged"));
  CHECK(daemon.Stop(SIGKILL) == 128 + SIGKILL);
  struct stat st {};
  CHECK(lstat(daemon.socket_path().c_str(), &st) == 0);  // stale socket left behind
  REQUIRE(daemon.Start().ok());
  INFO(daemon.Log());
  CHECK(daemon.Log().find("removing stale socket") != std::string::npos);
  auto events = ReadJournal(*daemon.Stub(), "1", 0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type() == "batch.submitted");
  CHECK(daemon.Stop() == 0);
}

TEST_CASE(
    "kill -9 while journal lines are being appended: the next start serves every committed event, each file holds each "
    "once") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  std::atomic<bool> stop{false};
  std::thread submitter([&] {
    auto stub = daemon.Stub();
    while (!stop.load()) {
      Batch b;
      auto ctx = CallContext(2);
      if (!stub->SubmitBatch(ctx.get(), ValidSubmit("busy"), &b).ok()) return;  // the daemon died
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  CHECK(daemon.Stop(SIGKILL) == 128 + SIGKILL);
  stop = true;
  submitter.join();
  // Whatever the kill hit, a crash mid-append leaves the newest file's last line torn: make it so.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir / "state/journal")) files.push_back(e.path());
  REQUIRE_FALSE(files.empty());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return std::stoi(a.stem().string().substr(6)) < std::stoi(b.stem().string().substr(6));
  });
  std::string newest = ReadFileOrEmpty(files.back());
  std::filesystem::resize_file(files.back(), newest.size() - newest.size() / 3);

  REQUIRE(daemon.Start().ok());
  auto stub = daemon.Stub();
  temper::v1::ListBatchesRequest all;
  all.set_page_size(1000);
  temper::v1::ListBatchesResponse list;
  REQUIRE(stub->ListBatches(CallContext().get(), all, &list).ok());
  REQUIRE(list.batches_size() >= 2);
  for (const Batch& b : list.batches()) {
    std::vector<uint64_t> served;
    for (const auto& e : ReadJournal(*stub, b.id(), 0)) served.push_back(e.seq());
    std::vector<uint64_t> in_file;
    std::istringstream lines(ReadFileOrEmpty(dir / fmt::format("state/journal/batch-{}.jsonl", b.id())));
    for (std::string line; std::getline(lines, line);)
      in_file.push_back(nlohmann::json::parse(line)["seq"].get<uint64_t>());
    INFO("batch " << b.id());
    CHECK(in_file == served);
    CHECK(served.size() == 1);
  }
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("a second daemon on a live socket refuses to start") {
  TempDir dir;
  DaemonProcess first(dir);
  REQUIRE(first.Start().ok());
  ProcessResult second = RunProcess({TemperdBinary(), "--config", first.config_path()});
  CHECK(second.exit_code == 1);
  CHECK(second.err.find("another temperd is already serving on " + first.socket_path()) != std::string::npos);
  CHECK(first.Stop() == 0);
}

TEST_CASE("a bad config stops temperd before it opens anything, naming file and line") {
  TempDir dir;
  std::string config = dir.Write("bad.yaml", "state_dir: s\nlisten:\n  unix:\n    pth: /x\n");
  ProcessResult r = RunProcess({TemperdBinary(), "--config", config});
  CHECK(r.exit_code == 1);
  CHECK(r.err == fmt::format("temperd: {}:4:5: listen.unix.pth: unknown key (did you mean 'path'?) "
                             "(valid keys here: path, group)\n",
                             config));
  CHECK_FALSE(std::filesystem::exists(dir / "s"));
  ProcessResult check = RunProcess({TemperdBinary(), "--check-config", "--config", config});
  CHECK(check.exit_code == 1);
}

TEST_CASE("a models file that is missing or maps a role to nothing stops temperd, naming file, line and field") {
  TempDir dir;
  std::string config = dir.Write("c.yaml", fmt::format("state_dir: {}\nmodels: m.yaml\n", dir / "s"));
  const std::string endpoint = "endpoints:\n  a: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: x}\n";
  for (const auto& [models, error] : std::vector<std::pair<std::string, std::string>>{
           {"", fmt::format("models: {}: no such file", dir / "m.yaml")},
           {endpoint + "roles:\n  architect: {endpoint: a}\n  worker: {endpoint: a}\n",
            fmt::format("models: {}:4:3: roles: missing required key 'reflector'", dir / "m.yaml")},
           {endpoint + "roles:\n  architect: {endpoint: a}\n  worker: {endpoint: b}\n  reflector: {endpoint: a}\n",
            fmt::format("models: {}:5:22: roles.worker.endpoint: no endpoint named 'b' (defined: a)",
                        dir / "m.yaml")}}) {
    std::filesystem::remove(dir / "m.yaml");
    if (!models.empty()) dir.Write("m.yaml", models);
    for (bool check_only : {true, false}) {
      std::vector<std::string> argv = {TemperdBinary(), "--config", config};
      if (check_only) argv.push_back("--check-config");
      ProcessResult r = RunProcess(argv);
      INFO(r.err);
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.err, Catch::Contains(error));
    }
  }
  CHECK_FALSE(std::filesystem::exists(dir / "s"));
  // Without models the config is valid, and --check-config says what that means for batches.
  std::string bare = dir.Write("bare.yaml", fmt::format("state_dir: {}\n", dir / "s"));
  ProcessResult ok = RunProcess({TemperdBinary(), "--check-config", "--config", bare});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out == bare + ": OK\n");
  CHECK_THAT(ok.err, Catch::Contains("has no `models:` entry") && Catch::Contains("stay queued"));
}

TEST_CASE("a disa_stigs: directory with a file that is not DISA's STIG stops temperd, naming the file") {
  TempDir dir;
  std::string stigs = dir / "disa";
  std::filesystem::create_directories(stigs);
  std::filesystem::copy_file(std::string(TEMPER_TEST_DATA_DIR) + "/stig/xccdf-only.xml", stigs + "/ssg.xml");
  std::string config = dir.Write("c.yaml", fmt::format("state_dir: {}\ndisa_stigs: {}\n", dir / "s", stigs));
  for (bool check_only : {true, false}) {
    std::vector<std::string> argv = {TemperdBinary(), "--config", config};
    if (check_only) argv.push_back("--check-config");
    ProcessResult r = RunProcess(argv);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err,
               Catch::Contains("disa_stigs: " + stigs + "/ssg.xml: ") && Catch::Contains("this is not a DISA STIG"));
  }
  CHECK_FALSE(std::filesystem::exists(dir / "s"));
  std::filesystem::remove(stigs + "/ssg.xml");
  std::filesystem::copy_file(
      std::string(TEMPER_TEST_DATA_DIR) + "/stig/U_CAN_Ubuntu_20-04_LTS_STIG_V1R12_Manual-xccdf.xml", stigs + "/u.xml");
  ProcessResult ok = RunProcess({TemperdBinary(), "--check-config", "--config", config});
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("TCP serves only with TLS and the right bearer token") {
  TempDir dir;
  ProcessResult gen = RunProcess({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                  "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                                  "-keyout", dir / "key.pem", "-out", dir / "cert.pem"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  std::string token_file = dir.Write("token", "s3cret-token\n");
  chmod(token_file.c_str(), 0600);
  const int port = FreeLoopbackPort();

  DaemonProcess daemon(dir, {.tcp_yaml = fmt::format("address: 127.0.0.1:{}\ntls_cert: cert.pem\n"
                                                     "tls_key: key.pem\ntoken_file: token",
                                                     port)});
  REQUIRE(daemon.Start().ok());

  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFileOrEmpty(dir / "cert.pem");
  std::string target = fmt::format("localhost:{}", port);
  auto call = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel(target, creds));
    temper::v1::ListBatchesResponse list;
    return stub->ListBatches(CallContext().get(), {}, &list);
  };
  CHECK(call(grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl), grpc::AccessTokenCredentials("s3cret-token")))
            .ok());
  grpc::Status wrong =
      call(grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl), grpc::AccessTokenCredentials("guess")));
  CHECK(wrong.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(wrong.error_message() == "the bearer token was not accepted");
  CHECK(call(grpc::SslCredentials(ssl)).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_FALSE(call(grpc::InsecureChannelCredentials()).ok());

  ProcessResult cli = RunProcess(
      {TemperBinary(), "--address", target, "--tls-ca", dir / "cert.pem", "--token-file", token_file, "list"});
  INFO(cli.err);
  CHECK(cli.exit_code == 0);
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
