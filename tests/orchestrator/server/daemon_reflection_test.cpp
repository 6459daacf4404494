// Server reflection as generic gRPC clients use it, against the real temperd over its unix socket:
// v1 (reflection_v1.h) and v1alpha (grpc++_reflection) list the same services and hand out the
// health service's descriptors; grpcio with no local protos drives a batch through v1 alone.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <google/protobuf/descriptor.pb.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "orchestrator/daemon_process.h"
#include "python_clients.h"

namespace temper::testing {
namespace {

const std::set<std::string> kServices = {"temper.v1.Temper", "grpc.health.v1.Health",
                                         "grpc.reflection.v1.ServerReflection",
                                         "grpc.reflection.v1alpha.ServerReflection"};

// Asks `requests` in order on one stream and returns the answers. Reflection is v1 or v1alpha: the
// same messages in two packages.
template <typename Reflection, typename Request, typename Response>
std::vector<Response> Ask(const std::shared_ptr<grpc::Channel>& channel, const std::vector<Request>& requests) {
  auto stub = Reflection::NewStub(channel);
  auto ctx = CallContext();
  auto stream = stub->ServerReflectionInfo(ctx.get());
  std::vector<Response> answers;
  for (const Request& r : requests) {
    REQUIRE(stream->Write(r));
    Response answer;
    REQUIRE(stream->Read(&answer));
    answers.push_back(answer);
  }
  stream->WritesDone();
  REQUIRE(stream->Finish().ok());
  return answers;
}

// What both versions must answer: the four services; health's file by its service name and by its
// file name; temper.v1's file with what it imports; NOT_FOUND for a symbol nobody defines.
template <typename Reflection, typename Request, typename Response>
void CheckReflection(const std::shared_ptr<grpc::Channel>& channel) {
  std::vector<Request> asks(5);
  asks[0].set_list_services("");
  asks[1].set_file_containing_symbol("grpc.health.v1.Health");
  asks[2].set_file_by_filename("grpc/health/v1/health.proto");
  asks[3].set_file_containing_symbol("temper.v1.Temper.SubmitBatch");
  asks[4].set_file_containing_symbol("temper.v1.NoSuchThing");
  const std::vector<Response> answers = Ask<Reflection, Request, Response>(channel, asks);

  std::set<std::string> services;
  for (const auto& s : answers[0].list_services_response().service()) services.insert(s.name());
  CHECK(services == kServices);

  auto file_names = [](const Response& r) {
    std::vector<std::string> names;
    for (const std::string& blob : r.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      REQUIRE(file.ParseFromString(blob));
      names.push_back(file.name());
    }
    return names;
  };
  for (int i : {1, 2}) {
    INFO("request " << i);
    REQUIRE(answers[i].has_file_descriptor_response());
    // health.proto imports nothing. (gRPC 1.51's v1alpha keeps one response for the whole stream, so
    // its second answer repeats the first one's file: the same file again.)
    const std::vector<std::string> names = file_names(answers[i]);
    REQUIRE_FALSE(names.empty());
    for (const std::string& name : names) CHECK(name == "grpc/health/v1/health.proto");
  }
  const std::vector<std::string> api = file_names(answers[3]);
  CHECK(std::find(api.begin(), api.end(), "temper/v1/temper.proto") != api.end());
  CHECK(std::find(api.begin(), api.end(), "google/protobuf/timestamp.proto") != api.end());
  REQUIRE(answers[4].has_error_response());
  CHECK(answers[4].error_response().error_code() == static_cast<int>(grpc::StatusCode::NOT_FOUND));
  CHECK(answers[4].original_request().file_containing_symbol() == "temper.v1.NoSuchThing");
}

TEST_CASE("temperd's reflection v1 and v1alpha list the API, health and both reflection services, with health's "
          "descriptors") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  auto channel = daemon.Channel();
  {
    INFO("reflection v1");
    namespace v1 = grpc::reflection::v1;
    CheckReflection<v1::ServerReflection, v1::ServerReflectionRequest, v1::ServerReflectionResponse>(channel);
  }
  {
    INFO("reflection v1alpha");
    namespace v1alpha = grpc::reflection::v1alpha;
    CheckReflection<v1alpha::ServerReflection, v1alpha::ServerReflectionRequest, v1alpha::ServerReflectionResponse>(
        channel);
  }
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("grpcio with reflection v1 and no local protos submits, follows the journal to the batch's end, reads "
          "the report and checks health") {
  TEMPER_REQUIRE_PYTHON_CLIENTS();
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  const std::string submit =
      R"({"name": "grpcio", "target": "lab", "datastream": "ssg-test-ds.xml", "profile": "stig",)"
      R"( "rule_ids": ["sshd_disable_root_login", "accounts_tmout"]})";
  ProcessResult run =
      RunProcess({kTestPython, PythonClientScript("grpc_reflection_client.py"), daemon.socket_path(), submit});
  std::printf("%s", run.out.c_str());
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("reflection v1 services: grpc.health.v1.Health "
                                      "grpc.reflection.v1.ServerReflection grpc.reflection.v1alpha.ServerReflection "
                                      "temper.v1.Temper\n"));
  CHECK_THAT(run.out, Catch::Contains("submitted batch 1: BATCH_STATE_QUEUED, 2 rules\n"));
  CHECK_THAT(run.out, Catch::Contains(" batch.submitted\n"));
  CHECK_THAT(run.out, Catch::Contains(" batch.cancelled\n"));
  CHECK_THAT(run.out, Catch::Contains("report: batch 1 BATCH_STATE_CANCELLED, 2 rules,"));
  CHECK_THAT(run.out, Catch::Contains("health '': SERVING\nhealth 'temper.v1.Temper': SERVING\n"));
  CHECK_THAT(run.out, Catch::Contains("reflection v1alpha health methods: Check Watch\n"));
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
