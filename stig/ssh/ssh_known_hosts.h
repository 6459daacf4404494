// SSH host keys in temper's own known_hosts file: what a host offers, what is recorded, and the
// operator's explicit acceptance.
//
// Connections check host keys strictly (ssh_connection.h) and never learn a key on their own: a
// key enters the file only through AcceptHostKey, with the fingerprint the operator compared out
// of band (the host's console, its provisioning record). Accepting replaces whatever was recorded
// for that host, which is how a legitimately reinstalled host is re-trusted.
// Thread safety: AcceptHostKey serialises writers with a lock file beside known_hosts; readers
// (ssh itself) always see a whole file, as it is replaced by rename.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "stig/ssh/ssh_connection.h"

namespace temper::stig {

struct HostKey {
  std::string type;         // ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa
  std::string fingerprint;  // SHA256:... as ssh-keygen -l prints it
  std::string line;         // the known_hosts line: "name type base64"
};

// The keys the host offers now (ssh-keyscan), for the operator to compare: untrusted until
// accepted. Errors: Unavailable when the host answers with no key (down, no sshd, filtered).
Result<std::vector<HostKey>> ScanHostKeys(const SshEndpoint& endpoint, std::chrono::seconds timeout);

// The keys recorded for the host in `known_hosts` (empty when none, or when the file is missing).
Result<std::vector<HostKey>> RecordedHostKeys(const std::string& known_hosts, const SshEndpoint& endpoint);

// Scans the host and records its key whose fingerprint is `fingerprint`, replacing every key
// recorded before for that host (the file and its directory are created, 0600/0700, when missing).
// Errors: InvalidArgument for a fingerprint that is not "SHA256:..."; NotFound when the host offers
// no key with that fingerprint (the message lists what it offers); ScanHostKeys' errors; IOError.
Result<HostKey> AcceptHostKey(const std::string& known_hosts, const SshEndpoint& endpoint,
                              const std::string& fingerprint, std::chrono::seconds timeout);

}  // namespace temper::stig
