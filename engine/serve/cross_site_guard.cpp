#include "engine/serve/cross_site_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace temper::engine {

namespace {

// A host as the allow list compares it.
struct CanonicalHost {
  std::string key;  // an IP literal as inet_ntop writes it, or a name in lower case without a trailing '.'
  bool ip_literal = false;
  bool loopback = false;
  bool wildcard = false;
};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<CanonicalHost> FromIpv4(std::string_view text) {
  in_addr a{};
  if (inet_pton(AF_INET, std::string(text).c_str(), &a) != 1) return std::nullopt;
  char out[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, out, sizeof out);
  const uint32_t host_order = ntohl(a.s_addr);
  return CanonicalHost{out, true, (host_order >> 24) == 127, host_order == INADDR_ANY};
}

std::optional<CanonicalHost> FromIpv6(std::string_view text) {
  in6_addr a{};
  if (inet_pton(AF_INET6, std::string(text).c_str(), &a) != 1) return std::nullopt;
  char out[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &a, out, sizeof out);
  const bool mapped_loopback = IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  return CanonicalHost{out, true, IN6_IS_ADDR_LOOPBACK(&a) || mapped_loopback, IN6_IS_ADDR_UNSPECIFIED(&a)};
}

// A DNS name: letters, digits, '-', '_' and '.', at most 253 characters; one trailing '.' (the
// fully qualified form) is dropped.
std::optional<CanonicalHost> FromName(std::string_view text) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  if (text.empty() || text.size() > 253) return std::nullopt;
  const bool valid = std::all_of(text.begin(), text.end(),
                                 [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
  if (!valid) return std::nullopt;
  std::string key = Lower(text);
  const bool loopback = key == "localhost";
  return CanonicalHost{std::move(key), false, loopback, false};
}

// A host without a port: an IPv4 literal, an IPv6 literal (bracketed, or bare when `bare_ipv6`),
// or a name.
std::optional<CanonicalHost> FromHost(std::string_view text, bool bare_ipv6) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') return FromIpv6(text.substr(1, text.size() - 2));
  if (bare_ipv6 && text.find(':') != std::string_view::npos) return FromIpv6(text);
  if (std::optional<CanonicalHost> v4 = FromIpv4(text)) return v4;
  return FromName(text);
}

// A Host header's value: a host, then optionally ':' and a port of 1 to 5 digits.
std::optional<CanonicalHost> FromHostHeader(std::string_view value) {
  const size_t host_end = value.starts_with('[') ? value.find(']') + 1 : value.find(':');
  if (host_end == 0) return std::nullopt;  // '[' without ']'
  if (host_end != std::string_view::npos && host_end < value.size()) {
    const std::string_view port = value.substr(host_end);
    if (port.size() < 2 || port.size() > 6 || port.front() != ':' ||
        !std::all_of(port.begin() + 1, port.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return std::nullopt;
    }
  }
  return FromHost(value.substr(0, host_end), /*bare_ipv6=*/false);
}

std::optional<CanonicalHost> FromBindHost(std::string_view bind_host) {
  if (bind_host.empty()) return CanonicalHost{"", false, false, true};
  return FromHost(bind_host, /*bare_ipv6=*/true);
}

}  // namespace

bool IsLoopbackBindHost(std::string_view bind_host) {
  std::optional<CanonicalHost> h = FromBindHost(bind_host);
  return h && h->loopback;
}

bool IsWildcardBindHost(std::string_view bind_host) {
  std::optional<CanonicalHost> h = FromBindHost(bind_host);
  return h && h->wildcard;
}

Result<HostAllowList> HostAllowList::For(std::string_view bind_host, const std::vector<std::string>& allowed_names) {
  HostAllowList list;
  std::optional<CanonicalHost> bound = FromBindHost(bind_host);
  if (!bound)
    return Status::InvalidArgument(fmt::format("--host '{}' is neither an IP address nor a host name", bind_host));
  if (bound->wildcard) {
    list.any_ip_literal_ = true;
    list.hosts_.insert("localhost");
  } else {
    list.hosts_.insert(bound->key);
    if (bound->loopback) list.hosts_.insert("localhost");
  }
  for (const std::string& name : allowed_names) {
    std::optional<CanonicalHost> allowed = FromHost(name, /*bare_ipv6=*/true);
    if (!allowed) {
      return Status::InvalidArgument(
          fmt::format("--allowed-host '{}' is neither a host name nor an IP address (give it without a port, scheme "
                      "or path)",
                      name));
    }
    list.hosts_.insert(allowed->key);
  }
  return list;
}

bool HostAllowList::Allows(std::string_view host) const {
  std::optional<CanonicalHost> h = FromHostHeader(host);
  if (!h) return false;
  return (h->ip_literal && any_ip_literal_) || hosts_.contains(h->key);
}

std::string HostAllowList::Describe() const {
  std::vector<std::string> parts;
  if (any_ip_literal_) parts.push_back("any IP address");
  for (const std::string& h : hosts_) parts.push_back(h.find(':') != std::string::npos ? "[" + h + "]" : h);
  return fmt::format("{}", fmt::join(parts, ", "));
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  return Lower(media) == "application/json";
}

}  // namespace temper::engine
