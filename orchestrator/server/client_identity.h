// ClientIdentity: who is making a gRPC call, as temperd's listeners established it.
//
// gRPC tells a method nothing about the connection a call came on, so the listeners stamp the
// caller on each call's auth context (an AuthMetadataProcessor runs before the method): the unix
// socket from the kernel's peer credentials (local_callers.h), TCP from the bearer token or the
// client certificate (orchestrator/token_auth.h). Clients cannot set auth-context properties; only
// the server's processors can, so the stamp is as trustworthy as the check that made it.
// Thread safety: values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/security/auth_context.h>
#include <grpcpp/server_context.h>

#include "orchestrator/config/access_config.h"

namespace temper {

struct ClientIdentity {
  // Stable for one client across connections and restarts, for per-client limits and logs:
  // "unix:1000", "token:ci", "tls:ci.example.com". Empty: nobody (a call without a stamp).
  std::string key;
  std::string name;  // for messages: "alice (uid 1000)", "token 'ci'", "TLS client ci.example.com"
  ClientRole role = ClientRole::kViewer;
  std::vector<std::string> targets;  // an operator's targets; empty: all (admin: always all)

  bool MayActOn(std::string_view target) const;
  bool operator==(const ClientIdentity&) const = default;
};

// Records `identity` as the caller of the calls on the connection whose auth context this is (gRPC
// keeps one per connection). UNAUTHENTICATED when the connection already speaks for another client.
// Safe to call from the processors of concurrent calls.
grpc::Status StampCaller(const ClientIdentity& identity, grpc::AuthContext& context);

// The caller stamped on a call; an identity with an empty key when there is none (every listener
// stamps, so that is a bug, and Authorize refuses it).
ClientIdentity CallerOf(const grpc::ServerContextBase& context);

}  // namespace temper
