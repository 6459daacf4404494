// Which Host and Content-Type values `temper-lm serve` answers (cross_site_guard.h), case by case;
// tests/security/lm_serve_attacks_test.cpp sends the attacks to the real server.
#include "engine/serve/cross_site_guard.h"

#include <catch2/catch.hpp>

namespace temper::engine {
namespace {

HostAllowList ListFor(std::string_view bind_host, const std::vector<std::string>& allowed = {}) {
  Result<HostAllowList> list = HostAllowList::For(bind_host, allowed);
  INFO(list.status().message());
  REQUIRE(list.ok());
  return *list;
}

TEST_CASE("bound to 127.0.0.1: its own IP and localhost, with or without a port, and nothing else", "[engine][http]") {
  HostAllowList list = ListFor("127.0.0.1");
  for (const char* host : {"127.0.0.1", "127.0.0.1:8000", "localhost", "localhost:8000", "LOCALHOST", "localhost."}) {
    INFO(host);
    CHECK(list.Allows(host));
  }
  for (const char* host : {"", "evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io",
                           "127.0.0.2", "[::1]", "127.0.0.1:", "127.0.0.1:80x", "127.0.0.1:8000:1", "127.1",
                           "localhost:1234567", "[::1", "local host", "localhost/x"}) {
    INFO(host);
    CHECK_FALSE(list.Allows(host));
  }
  CHECK(list.Describe() == "127.0.0.1, localhost");
}

TEST_CASE("bound to ::1: the bracketed address in any spelling and localhost", "[engine][http]") {
  HostAllowList list = ListFor("::1");
  CHECK(list.Allows("[::1]"));
  CHECK(list.Allows("[::1]:8000"));
  CHECK(list.Allows("[0:0:0:0:0:0:0:1]:8000"));
  CHECK(list.Allows("localhost:8000"));
  CHECK_FALSE(list.Allows("::1"));  // an unbracketed IPv6 literal is no Host
  CHECK_FALSE(list.Allows("127.0.0.1"));
  CHECK(list.Describe() == "[::1], localhost");
}

TEST_CASE("bound to a non-loopback address: that address and the allowed names, never localhost", "[engine][http]") {
  HostAllowList list = ListFor("192.0.2.7", {"LLM.internal", "2001:db8::1"});
  CHECK(list.Allows("192.0.2.7:8000"));
  CHECK(list.Allows("llm.internal:8000"));
  CHECK(list.Allows("Llm.Internal"));
  CHECK(list.Allows("[2001:db8:0::1]"));
  CHECK_FALSE(list.Allows("localhost"));
  CHECK_FALSE(list.Allows("127.0.0.1"));
  CHECK_FALSE(list.Allows("192.0.2.8"));
  CHECK_FALSE(list.Allows("llm.internal.evil.example"));
}

TEST_CASE("bound to all interfaces: any IP literal, localhost and the allowed names, no other name", "[engine][http]") {
  for (const char* bind : {"0.0.0.0", "::", ""}) {
    INFO("bound to '" << bind << "'");
    HostAllowList list = ListFor(bind, {"llm.internal"});
    for (const char* host : {"192.0.2.7:8000", "10.1.2.3", "[2001:db8::7]:8000", "127.0.0.1", "[::1]", "localhost",
                             "llm.internal"}) {
      INFO(host);
      CHECK(list.Allows(host));
    }
    CHECK_FALSE(list.Allows("evil.example:8000"));
    CHECK_FALSE(list.Allows("llm.internal.evil.example"));
    CHECK(list.Describe() == "any IP address, llm.internal, localhost");
  }
}

TEST_CASE("an allowed host with a port, scheme or path is refused naming it", "[engine][http]") {
  for (const char* bad : {"", "llm.internal:8000", "http://llm.internal", "llm.internal/v1", "two words"}) {
    Result<HostAllowList> list = HostAllowList::For("127.0.0.1", {bad});
    INFO(bad);
    REQUIRE_FALSE(list.ok());
    CHECK(list.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(list.status().message(), Catch::Contains("--allowed-host '" + std::string(bad) + "'"));
  }
}

TEST_CASE("loopback and wildcard bind hosts are told apart", "[engine][http]") {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "LocalHost", "::ffff:127.0.0.1"}) {
    INFO(host);
    CHECK(IsLoopbackBindHost(host));
    CHECK_FALSE(IsWildcardBindHost(host));
  }
  for (const char* host : {"0.0.0.0", "::", ""}) {
    INFO(host);
    CHECK(IsWildcardBindHost(host));
    CHECK_FALSE(IsLoopbackBindHost(host));
  }
  for (const char* host : {"192.0.2.7", "2001:db8::1", "llm.internal", "localhost.evil.example"}) {
    INFO(host);
    CHECK_FALSE(IsLoopbackBindHost(host));
    CHECK_FALSE(IsWildcardBindHost(host));
  }
}

TEST_CASE("only application/json is a JSON content type, parameters allowed", "[engine][http]") {
  for (const char* type : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                           " application/json ;charset=UTF-8"}) {
    INFO(type);
    CHECK(IsJsonContentType(type));
  }
  for (const char* type : {"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "application/jsonp", "application/json-seq",
                           "text/json", "application/ json"}) {
    INFO(type);
    CHECK_FALSE(IsJsonContentType(type));
  }
}

}  // namespace
}  // namespace temper::engine
