// Server reflection v1 (grpc.reflection.v1.ServerReflection) for temperd, beside the v1alpha service
// that Debian 12's grpc++_reflection (gRPC 1.51) serves alone: a client that speaks only v1, the
// protocol's stable version, finds nothing on v1alpha.
//
// The service answers as grpc's own v1alpha one does (src/cpp/ext/proto_server_reflection.cc):
// files and symbols from protobuf's generated descriptor pool, which holds every .proto compiled into
// the binary (temper.v1, grpc.health.v1, both reflection protocols), each file with the files it
// imports; the service list is the server's own, its default health service included.
//
//   grpc::ServerBuilder builder;
//   builder.SetOption(ReflectionV1Option());
//
// The option adds the service to that one builder's server, unlike grpc's process-wide plugin
// registry: a server built without it (the refusal server) offers no reflection.
// Thread safety: the service takes calls on any of gRPC's threads; it only reads.
#pragma once

#include <memory>

#include <grpcpp/impl/server_builder_option.h>

namespace temper {

std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1Option();

}  // namespace temper
