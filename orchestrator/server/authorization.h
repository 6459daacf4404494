// Authorization: which role may make each call of temper.v1.Temper (access_config.h says what the
// roles are and who holds them). One table for every method: a method missing from it is refused,
// so a new RPC cannot ship open by mistake (tests/orchestrator checks the table against the proto).
// Thread safety: pure functions over a constant table.
#pragma once

#include <span>
#include <string_view>

#include <grpcpp/support/status.h>

#include "orchestrator/config/access_config.h"
#include "orchestrator/server/client_identity.h"

namespace temper {

struct RpcAccess {
  std::string_view method;  // the method's name in temper.v1.Temper, e.g. "SubmitBatch"
  ClientRole least;         // the least role that may call it
  bool acts_on_target;      // an operator may call it only on the targets its grant lists
};

std::span<const RpcAccess> RpcAccessTable();

// OK when `caller` may call `method`; otherwise PERMISSION_DENIED naming the caller, its role, the
// call and the role it needs. A call that acts on a target is checked again, with the target,
// through AuthorizeOnTarget once the method knows which target it is.
grpc::Status Authorize(const ClientIdentity& caller, std::string_view method);
grpc::Status AuthorizeOnTarget(const ClientIdentity& caller, std::string_view method, std::string_view target);
// A batch's own waivers accept a risk on the host (the rule is left failing): an admin's decision,
// like the site-wide waivers of temperd.yaml. PERMISSION_DENIED for anyone else.
grpc::Status AuthorizeWaivers(const ClientIdentity& caller);
// What a fix carries whole (a batch exported as Ansible or sh, the library's entries exported) holds
// the target's file bytes as the fix left them, /etc/shadow's hashes included: an operator's on that
// target, or an admin's, never a viewer's, who sees verdicts and diffs with secrets redacted.
// PERMISSION_DENIED naming the caller and the target otherwise.
grpc::Status AuthorizeFileContents(const ClientIdentity& caller, std::string_view what, std::string_view target);

}  // namespace temper
