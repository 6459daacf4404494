// Keeping web pages out of `temper-lm serve`: a page the operator opens in a browser can send
// requests to the server's port, so the server must tell a browser's cross-site request from its
// own clients' requests. Two checks do it, both before any route runs:
//
//  - Host (DNS rebinding). A page at evil.example can have its DNS answer turn evil.example into
//    127.0.0.1; the browser then lets the page read what 127.0.0.1:PORT answers, but it still sends
//    "Host: evil.example:PORT". HostAllowList answers only the names the server is reached by:
//      * the bind address itself, as an IP literal (IPv6 in brackets), compared as an address;
//      * "localhost" when the bind address is loopback or all interfaces (which include loopback);
//      * when bound to all interfaces (0.0.0.0, :: or an empty host), any IP literal: clients reach
//        the server through addresses it cannot list, and an IP literal is never a rebinding (the
//        page's origin is a name, so its Host is that name). Names are not relaxed: a deployment
//        reached by a name lists it (--allowed-host), so a rebinding name is refused there too;
//      * the bind host when it is a name, and every name given as allowed (--allowed-host).
//    The port after the name is not compared: a forwarded port (ssh -L, docker -p) arrives with
//    its own, and the attacker's page would use the server's port anyway.
//
//  - Content-Type (CORS "simple requests"). A page may POST cross-origin without asking the server
//    first only with text/plain, application/x-www-form-urlencoded or multipart/form-data; any
//    other type makes the browser send an OPTIONS preflight, which this server never approves (it
//    sends no Access-Control-* header at all). So the API's POST routes take application/json
//    alone (parameters such as "; charset=utf-8" allowed) and a page cannot start a generation.
//
// Thread safety: HostAllowList is immutable once built; the functions are stateless.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::engine {

// Whether `bind_host` (what --host names) is a loopback address (127.0.0.0/8, ::1) or "localhost".
// Any other name counts as not loopback: the server cannot know where a name will resolve.
bool IsLoopbackBindHost(std::string_view bind_host);
// Whether `bind_host` means all interfaces: empty, 0.0.0.0 or ::.
bool IsWildcardBindHost(std::string_view bind_host);

class HostAllowList {
 public:
  // The Host values a server bound to `bind_host` answers, plus `allowed_names` (host names or IP
  // literals, without a port). InvalidArgument naming the entry when one is empty, carries a port,
  // a path or characters no host name has.
  static Result<HostAllowList> For(std::string_view bind_host, const std::vector<std::string>& allowed_names);

  // Whether a request whose Host header is `host` (name or IP literal, optionally ":port") is
  // answered. An empty or malformed Host is not.
  bool Allows(std::string_view host) const;
  // What is allowed, for the refusal's message and the start log: "127.0.0.1, localhost".
  std::string Describe() const;

 private:
  std::set<std::string> hosts_;  // canonical: IP literals as inet_ntop writes them, names in lower case
  bool any_ip_literal_ = false;
};

// Whether a Content-Type header value is application/json (case-insensitive, parameters allowed).
bool IsJsonContentType(std::string_view content_type);

}  // namespace temper::engine
