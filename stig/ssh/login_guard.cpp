#include "stig/ssh/login_guard.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace temper::stig {
namespace {

using Words = std::vector<std::string>;

std::string Base(const std::string& w) {
  std::size_t slash = w.rfind('/');
  return slash == std::string::npos ? w : w.substr(slash + 1);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Has(const Words& a, std::initializer_list<std::string_view> flags) {
  for (const std::string& w : a) {
    for (std::string_view f : flags) {
      if (w == f || (f.size() > 2 && f.starts_with("--") && w.starts_with(std::string(f) + "="))) return true;
      // Combined short options: -lf has -l.
      if (f.size() == 2 && f[0] == '-' && w.size() > 2 && w[0] == '-' && w[1] != '-' &&
          w.find(f[1]) != std::string::npos &&
          std::all_of(w.begin() + 1, w.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
        return true;
      }
    }
  }
  return false;
}

bool Names(const Words& a, const std::string& user) { return std::find(a.begin(), a.end(), user) != a.end(); }

bool NoOperand(const Words& a) {
  return std::all_of(a.begin(), a.end(), [](const std::string& w) { return w.starts_with("-"); });
}

bool ClosingShell(const Words& a) {
  return std::any_of(a.begin(), a.end(), [](const std::string& w) {
    return w.find("nologin") != std::string::npos || Base(w) == "false" || w == "/dev/null";
  });
}

// `word` names the SSH port: 22, 22/tcp, ssh, OpenSSH.
bool SshPort(const std::string& word, std::uint16_t port) {
  std::string p = std::to_string(port);
  std::string w = Lower(word);
  return w == p || w.starts_with(p + "/") || w.ends_with("=" + p) || w.ends_with("=" + p + "/tcp") || w == "ssh" ||
         w == "openssh" || w.ends_with("=ssh");
}

bool AnySshPort(const Words& a, std::uint16_t port) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& w) { return SshPort(w, port); });
}

bool HasWord(const Words& a, std::initializer_list<std::string_view> words) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& w) {
    std::string l = Lower(w);
    return std::any_of(words.begin(), words.end(), [&](std::string_view x) { return l == x; });
  });
}

bool IsNologin(const std::string& path) { return path == "/etc/nologin" || path == "/run/nologin"; }

std::string Check(const SimpleCommand& c, const LoginIdentity& login) {
  const std::string& program = c.program;
  const Words& args = c.args;
  const std::string& user = login.user;
  const bool root = user == "root";
  const std::string& line = c.text;
  auto refuse = [&](std::string_view what) {
    return fmt::format(
        "'{}' {}; temper logs in to this host as {} on port {} and would be locked out. Leave this "
        "change to a human, or make it for other accounts only",
        line, what, user, login.port);
  };
  for (const Redirect& r : c.redirects) {
    if (r.op.find('>') == std::string::npos) continue;
    if (r.target.find("authorized_keys") != std::string::npos) return refuse("writes an authorized_keys file");
    if (!root && IsNologin(r.target))
      return refuse("creates a nologin file, which makes sshd refuse every login but root's");
  }
  if (program.empty()) return "";
  if (program.find("authorized_keys") != std::string::npos) {
    return refuse("writes an authorized_keys file");
  }
  for (const std::string& a : args) {
    if (a.find("authorized_keys") != std::string::npos && !OnlyReads(c)) {
      return refuse("changes an authorized_keys file, which holds the key temper logs in with");
    }
    if (!root && IsNologin(a) && !OnlyReads(c)) {
      return refuse("creates a nologin file, which makes sshd refuse every login but root's");
    }
  }
  const bool targets_login = Names(args, user) || (root && NoOperand(args));
  if (program == "passwd" && targets_login && Has(args, {"-l", "--lock", "-d", "--delete", "-e", "--expire"})) {
    return refuse(fmt::format("locks, expires or empties the password of {}", user));
  }
  if (program == "usermod" && Names(args, user)) {
    if (Has(args, {"-L", "--lock", "-e", "--expiredate", "-l", "--login", "-p", "--password", "-u", "--uid"})) {
      return refuse(fmt::format("locks, expires, renames or re-keys {}", user));
    }
    if (Has(args, {"-s", "--shell"}) && ClosingShell(args))
      return refuse(fmt::format("takes the shell away from {}", user));
    if (!root && Has(args, {"-G", "--groups"}) && !Has(args, {"-a", "--append"})) {
      return refuse(fmt::format("replaces the groups of {}, which may take away its sudo", user));
    }
  }
  if (program == "chage" && targets_login && !Has(args, {"-l", "--list"})) {
    return refuse(
        fmt::format("changes the password ageing of {}: an expired password blocks its key logins through PAM", user));
  }
  if ((program == "userdel" || program == "deluser" || program == "groupdel") && Names(args, user)) {
    return refuse(fmt::format("deletes {} or its group membership", user));
  }
  if (program == "gpasswd" && Names(args, user) && Has(args, {"-d", "--delete", "-M", "--members"})) {
    return refuse(fmt::format("removes {} from a group, which may take away its sudo", user));
  }
  if (program == "chsh" && targets_login && ClosingShell(args))
    return refuse(fmt::format("takes the shell away from {}", user));

  if (program == "ufw" && AnySshPort(args, login.port) && (HasWord(args, {"deny", "reject", "delete"}))) {
    return refuse("closes the SSH port in the firewall");
  }
  if (program.starts_with("iptables") || program.starts_with("ip6tables")) {
    bool drops = HasWord(args, {"drop", "reject"});
    bool port = Has(args, {"--dport", "--destination-port", "--dports"}) && AnySshPort(args, login.port);
    bool policy = Has(args, {"-P", "--policy"}) && HasWord(args, {"input"});
    if (drops && (port || policy)) return refuse("makes the firewall drop the SSH port");
  }
  if (program == "nft" && HasWord(args, {"drop", "reject"}) &&
      (AnySshPort(args, login.port) || HasWord(args, {"policy"}))) {
    return refuse("makes the firewall drop the SSH port");
  }
  if (program == "firewall-cmd") {
    for (const std::string& a : args) {
      std::string l = Lower(a);
      if ((l.starts_with("--remove-service") || l.starts_with("--remove-port")) && AnySshPort(args, login.port)) {
        return refuse("removes SSH from the firewall's allowed services");
      }
      if (l.starts_with("--set-default-zone") && (l.ends_with("drop") || l.ends_with("block"))) {
        return refuse("makes the firewall's default zone drop everything, SSH included");
      }
    }
  }
  return "";
}

}  // namespace

bool OnlyReads(const SimpleCommand& c) {
  static constexpr std::string_view kReaders[] = {
      "cat",  "grep",   "egrep", "fgrep",      "zgrep",    "ls",        "stat",    "head",     "tail",   "wc",
      "test", "[",      "[[",    "sha256sum",  "sha1sum",  "sha512sum", "md5sum",  "cksum",    "file",   "less",
      "more", "diff",   "cmp",   "ssh-keygen", "readlink", "realpath",  "dirname", "basename", "lsattr", "getfacl",
      "echo", "printf", "cut",   "uniq",       "tr",       "id",        "getent",  "true",     "false",  ":"};
  const std::string& p = c.program;
  if (p == "ssh-keygen") {
    // -l and -F only read; -R and -f with a key type write.
    return std::find(c.args.begin(), c.args.end(), "-l") != c.args.end() ||
           std::find(c.args.begin(), c.args.end(), "-F") != c.args.end() ||
           std::find(c.args.begin(), c.args.end(), "-lf") != c.args.end();
  }
  if (p == "sort")
    return std::none_of(c.args.begin(), c.args.end(), [](const std::string& a) { return a.starts_with("-o"); });
  if (p == "sed") {
    return std::none_of(c.args.begin(), c.args.end(), [](const std::string& a) {
      return a.starts_with("-i") || a.starts_with("--in-place") ||
             (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('i') != std::string::npos &&
              a.find('e') == std::string::npos);
    });
  }
  if (p == "find") {
    return std::none_of(c.args.begin(), c.args.end(), [](const std::string& a) {
      return a == "-delete" || a.starts_with("-exec") || a.starts_with("-ok") || a.starts_with("-fprint") ||
             a == "-fls";
    });
  }
  return std::find(std::begin(kReaders), std::end(kReaders), p) != std::end(kReaders);
}

std::string LockoutRisk(std::string_view command, const LoginIdentity& login) {
  Result<ParsedShell> parsed = SplitShellCommand(command);
  if (!parsed.ok()) return fmt::format("the lock-out guard cannot read it ({})", parsed.status().message());
  for (const SimpleCommand& c : parsed->commands) {
    std::string why = Check(c, login);
    if (!why.empty()) return why;
  }
  return "";
}

std::string WriteLockoutRisk(std::string_view path, const LoginIdentity& login) {
  std::string p(path);
  std::string name = Base(p);
  if (login.user != "root" && IsNologin(p)) {
    return fmt::format(
        "writing {} makes sshd refuse every login but root's, and temper logs in as {}; leave this "
        "change to a human",
        p, login.user);
  }
  if (!name.starts_with("authorized_keys")) return "";
  bool home = !login.home.empty() && p.starts_with(login.home + "/.ssh/");
  bool system = p.starts_with("/etc/ssh/");
  if (!home && !system) return "";
  return fmt::format(
      "writing {} changes the keys {} logs in with (temper connects as {} on port {}) and could lock "
      "temper out; leave this change to a human",
      p, login.user, login.user, login.port);
}

}  // namespace temper::stig
