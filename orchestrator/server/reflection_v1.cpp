#include "orchestrator/server/reflection_v1.h"

#include <atomic>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/server_initializer.h>
#include <grpcpp/server_context.h>

#include "grpc/health/v1/health.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace temper {

namespace {

namespace protobuf = google::protobuf;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // The server's service names; set once it has started, before it takes a call.
  void SetServices(const std::vector<std::string>* services) { services_.store(services); }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) override {
    ServerReflectionRequest request;
    while (stream->Read(&request)) {
      ServerReflectionResponse response;
      // An error is an answer too: the stream goes on with the next request.
      if (grpc::Status status = Answer(request, response); !status.ok()) {
        response.mutable_error_response()->set_error_code(status.error_code());
        response.mutable_error_response()->set_error_message(status.error_message());
      }
      response.set_valid_host(request.host());
      *response.mutable_original_request() = request;
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  grpc::Status Answer(const ServerReflectionRequest& request, ServerReflectionResponse& response) const {
    const protobuf::DescriptorPool& pool = *protobuf::DescriptorPool::generated_pool();
    switch (request.message_request_case()) {
      case ServerReflectionRequest::kFileByFilename:
        return Files(pool.FindFileByName(request.file_by_filename()), "file " + request.file_by_filename(),
                     response);
      case ServerReflectionRequest::kFileContainingSymbol:
        return Files(pool.FindFileContainingSymbol(request.file_containing_symbol()),
                     "symbol " + request.file_containing_symbol(), response);
      case ServerReflectionRequest::kFileContainingExtension: {
        const auto& asked = request.file_containing_extension();
        const protobuf::Descriptor* type = pool.FindMessageTypeByName(asked.containing_type());
        const protobuf::FieldDescriptor* extension =
            type != nullptr ? pool.FindExtensionByNumber(type, asked.extension_number()) : nullptr;
        return Files(extension != nullptr ? extension->file() : nullptr,
                     "extension " + std::to_string(asked.extension_number()) + " of " + asked.containing_type(),
                     response);
      }
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const protobuf::Descriptor* type = pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) {
          return {grpc::StatusCode::NOT_FOUND, "no message type " + request.all_extension_numbers_of_type()};
        }
        std::vector<const protobuf::FieldDescriptor*> extensions;
        pool.FindAllExtensions(type, &extensions);
        auto* numbers = response.mutable_all_extension_numbers_response();
        numbers->set_base_type_name(type->full_name());
        for (const protobuf::FieldDescriptor* e : extensions) numbers->add_extension_number(e->number());
        return grpc::Status::OK;
      }
      case ServerReflectionRequest::kListServices: {
        const std::vector<std::string>* services = services_.load();
        if (services == nullptr) return {grpc::StatusCode::UNAVAILABLE, "the server has not started"};
        auto* list = response.mutable_list_services_response();
        for (const std::string& name : *services) list->add_service()->set_name(name);
        return grpc::Status::OK;
      }
      case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
        break;
    }
    return {grpc::StatusCode::UNIMPLEMENTED, "the request asks for nothing this server knows"};
  }

  // `file` and every file it imports, transitively, each once, `file` first: a client builds its
  // descriptors from them without a local copy of any.
  static grpc::Status Files(const protobuf::FileDescriptor* file, const std::string& asked,
                            ServerReflectionResponse& response) {
    if (file == nullptr) return {grpc::StatusCode::NOT_FOUND, "no " + asked};
    auto* files = response.mutable_file_descriptor_response();
    std::set<const protobuf::FileDescriptor*> sent;
    std::vector<const protobuf::FileDescriptor*> pending{file};
    while (!pending.empty()) {
      const protobuf::FileDescriptor* f = pending.back();
      pending.pop_back();
      if (!sent.insert(f).second) continue;
      protobuf::FileDescriptorProto proto;
      f->CopyTo(&proto);
      proto.SerializeToString(files->add_file_descriptor_proto());
      for (int i = f->dependency_count() - 1; i >= 0; --i) pending.push_back(f->dependency(i));
    }
    return grpc::Status::OK;
  }

  std::atomic<const std::vector<std::string>*> services_{nullptr};
};

// gRPC's hook into one builder: InitServer registers the service, Finish (after the server started
// and registered its default health service) hands it the server's service list.
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "temper_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override {
    // The default health service's messages are upb's, outside the generated pool; naming a
    // descriptor of our compiled health.proto keeps the linker from dropping it from temper_proto,
    // so that reflection can serve grpc.health.v1 too.
    grpc::health::v1::HealthCheckRequest::descriptor();
    si->RegisterService(service_);
  }
  void Finish(grpc::ServerInitializer* si) override { service_->SetServices(si->GetServiceList()); }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}
  bool has_sync_methods() const override { return true; }

 private:
  std::shared_ptr<ReflectionV1Service> service_ = std::make_shared<ReflectionV1Service>();
};

class ReflectionV1BuilderOption final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1Option() {
  return std::make_unique<ReflectionV1BuilderOption>();
}

}  // namespace temper
