// What the SSH test cases share: the cached test root, a skip when hosts cannot be made here, a
// started host, and a known_hosts file holding its key as an operator would accept it.
#pragma once

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "common/log.h"
#include "skip.h"
#include "stig/ssh/netns_ssh_host.h"
#include "stig/ssh/ssh_known_hosts.h"
#include "stig/ssh/ssh_test_root.h"

namespace temper::testing {

inline const Logger& QuietSshLog() {
  static const Logger log(LogLevel::kWarning);
  return log;
}

inline const SshTestRoot& TestRoot() {
  static const Result<SshTestRoot> root = EnsureSshTestRoot(QuietSshLog());
  INFO(root.status().ToString());
  REQUIRE(root.ok());
  return *root;
}

// Cases start with this: without root or network namespaces they report themselves skipped.
#define TEMPER_SKIP_WITHOUT_SSH_HOSTS()                                       \
  do {                                                                        \
    std::string temper_why_ = ::temper::testing::NetnsSshHost::Unavailable(); \
    if (!temper_why_.empty()) TEMPER_SKIP("SSH test hosts " + temper_why_);   \
  } while (0)

inline std::unique_ptr<NetnsSshHost> StartHost(const std::string& name) {
  auto host = NetnsSshHost::Start(TestRoot(), name);
  INFO(host.status().ToString());
  REQUIRE(host.ok());
  return std::move(*host);
}

// known_hosts in the host's directory with its key, accepted by its fingerprint.
inline std::string AcceptedKnownHosts(const NetnsSshHost& host) {
  std::string file = host.dir() + "/files/known_hosts";
  auto accepted = stig::AcceptHostKey(file, host.Endpoint("root"), host.fingerprint(), std::chrono::seconds(5));
  INFO(accepted.status().ToString());
  REQUIRE(accepted.ok());
  return file;
}

inline temper::SandboxLimits Limits(int seconds = 60) {
  temper::SandboxLimits l;
  l.timeout = std::chrono::seconds(seconds);
  return l;
}

}  // namespace temper::testing
