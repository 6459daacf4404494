// TokenAuthProcessor: the bearer-token check on temperd's TCP port (TLS encrypts; the token decides
// who may talk). Clients send "authorization: Bearer <token>". The comparison runs in constant time,
// and the token never appears in a log line or an error.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/security/auth_metadata_processor.h>

#include "common/status.h"

namespace temper {

class TokenAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenAuthProcessor(std::string token) : token_(std::move(token)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  const std::string token_;
};

// Whether a token a client sent equals the expected one, in time that does not depend on where
// they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Reads a token file: the first line, surrounding whitespace trimmed. Refuses an empty token and a
// file that other users can read (mode & 077), naming the file.
Result<std::string> ReadTokenFile(const std::string& path);

}  // namespace temper
