#include "stig/change_set_redaction.h"

#include <array>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace temper::stig {
namespace {

constexpr std::array<std::string_view, 5> kHashFiles = {"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                                                        "/etc/security/opasswd"};

// crypt(5)'s prefixes, so the marker can say which algorithm an account uses (what the hashing
// rules judge) without the hash.
std::string_view AlgorithmOf(std::string_view hash) {
  struct Scheme {
    std::string_view prefix, name;
  };
  static constexpr Scheme kSchemes[] = {{"$y$", "yescrypt"},     {"$gy$", "gost-yescrypt"}, {"$7$", "scrypt"},
                                        {"$2b$", "bcrypt"},      {"$2a$", "bcrypt"},        {"$2y$", "bcrypt"},
                                        {"$6$", "sha512crypt"},  {"$5$", "sha256crypt"},    {"$1$", "md5crypt"},
                                        {"$sha1$", "sha1crypt"}, {"$md5", "sunmd5"}};
  for (const Scheme& s : kSchemes) {
    if (hash.starts_with(s.prefix)) return s.name;
  }
  if (hash.size() == 13 && hash.find('$') == std::string_view::npos) return "descrypt";
  return "password";
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    std::size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace

bool HoldsPasswordHashes(std::string_view path) {
  for (std::string_view file : kHashFiles) {
    if (path == file) return true;
  }
  return false;
}

std::string RedactHash(std::string_view value) {
  std::size_t locks = value.find_first_not_of('!');
  if (locks == std::string_view::npos) return std::string(value);  // "", "!", "!!"
  std::string_view hash = value.substr(locks);
  if (hash.find_first_not_of('*') == std::string_view::npos) return std::string(value);       // "*", "!*"
  if (hash.starts_with('<') && hash.ends_with(" hash redacted>")) return std::string(value);  // done already
  if (hash == "x") return std::string(value);  // passwd(5)'s "in the shadow file"
  return fmt::format("{}<{} hash redacted>", value.substr(0, locks), AlgorithmOf(hash));
}

std::string RedactHashLine(std::string_view path, std::string_view line) {
  if (!HoldsPasswordHashes(path)) return std::string(line);
  std::vector<std::string_view> fields = Split(line, ':');
  // shadow and gshadow: name:HASH:...; opasswd: name:uid:count:HASH,HASH,...
  const bool opasswd = path == "/etc/security/opasswd";
  const std::size_t at = opasswd ? 3 : 1;
  if (fields.size() <= at) return std::string(line);
  std::vector<std::string> out(fields.begin(), fields.end());
  if (opasswd) {
    std::vector<std::string> hashes;
    for (std::string_view h : Split(fields[at], ',')) hashes.push_back(RedactHash(h));
    out[at] = fmt::format("{}", fmt::join(hashes, ","));
  } else {
    out[at] = RedactHash(fields[at]);
  }
  return fmt::format("{}", fmt::join(out, ":"));
}

std::string RedactHashesInDiff(std::string_view path, std::string_view diff) {
  if (!HoldsPasswordHashes(path) || diff.empty()) return std::string(diff);
  std::string out;
  out.reserve(diff.size());
  bool in_hunk = false;  // the ---/+++ labels come before the first @@
  for (std::size_t start = 0; start < diff.size();) {
    std::size_t end = diff.find('\n', start);
    const bool newline = end != std::string_view::npos;
    std::string_view line = diff.substr(start, newline ? end - start : std::string_view::npos);
    start = newline ? end + 1 : diff.size();
    if (line.starts_with("@@")) in_hunk = true;
    if (in_hunk && !line.empty() && (line[0] == ' ' || line[0] == '+' || line[0] == '-')) {
      out += line[0];
      out += RedactHashLine(path, line.substr(1));
    } else {
      out += line;
    }
    if (newline) out += '\n';
  }
  return out;
}

}  // namespace temper::stig
