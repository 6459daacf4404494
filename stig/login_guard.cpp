#include "stig/login_guard.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace temper::stig {
namespace {

using Words = std::vector<std::string>;

// The simple commands of a command line: words with quotes removed, split at ; & | ( ) ` < > $(
// and newlines. A redirection target comes out as a command of its own, so `> file` names file.
std::vector<Words> SimpleCommands(std::string_view s) {
  std::vector<Words> cmds(1);
  std::string word;
  bool in_word = false;
  char quote = 0;
  auto end_word = [&] {
    if (in_word) cmds.back().push_back(word);
    word.clear();
    in_word = false;
  };
  auto end_cmd = [&] {
    end_word();
    if (!cmds.back().empty()) cmds.emplace_back();
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < s.size()) word += s[++i];
      else word += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      word += s[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      end_word();
    } else if (std::strchr(";&|()`<>\n", c)) {
      end_cmd();
    } else if (c == '$' && i + 1 < s.size() && s[i + 1] == '(') {
      end_cmd();
      ++i;
    } else {
      word += c;
      in_word = true;
    }
  }
  end_cmd();
  cmds.pop_back();
  return cmds;
}

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
      if (f.size() == 2 && f[0] == '-' && w.size() > 2 && w[0] == '-' && w[1] != '-' && w.find(f[1]) != std::string::npos &&
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

bool ReadOnly(const std::string& program) {
  static const char* kReaders[] = {"cat",  "grep", "egrep",     "fgrep",  "ls",   "stat", "head", "tail", "wc",
                                   "test", "[",    "sha256sum", "md5sum", "file", "less", "diff", "ssh-keygen"};
  return std::any_of(std::begin(kReaders), std::end(kReaders), [&](const char* r) { return program == r; });
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

std::string Check(const Words& words, const LoginIdentity& login, int depth);

std::string CheckText(std::string_view text, const LoginIdentity& login, int depth) {
  if (depth > 4) return "";
  for (const Words& cmd : SimpleCommands(text)) {
    std::string why = Check(cmd, login, depth);
    if (!why.empty()) return why;
  }
  return "";
}

std::string Check(const Words& words, const LoginIdentity& login, int depth) {
  // Peel prefixes that only change how the program runs.
  std::size_t k = 0;
  while (k < words.size()) {
    const std::string p = Base(words[k]);
    static const char* kPrefixes[] = {"sudo", "env",   "nohup",   "nice",    "timeout", "command",
                                      "exec", "time",  "stdbuf",  "ionice",  "xargs",   "builtin"};
    bool prefix = std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](const char* x) { return p == x; });
    if (prefix) {
      ++k;
      while (k < words.size() && (words[k].starts_with("-") || words[k].find('=') != std::string::npos ||
                                  ((p == "timeout" || p == "nice" || p == "ionice") && !words[k].empty() &&
                                   std::isdigit(static_cast<unsigned char>(words[k][0]))))) {
        ++k;
      }
      continue;
    }
    if (words[k].find('=') != std::string::npos && words[k].find('/') == std::string::npos) {
      ++k;  // VAR=value before the program
      continue;
    }
    break;
  }
  if (k >= words.size()) return "";
  const std::string program = Base(words[k]);
  const Words args(words.begin() + static_cast<std::ptrdiff_t>(k) + 1, words.end());
  const std::string& user = login.user;
  const bool root = user == "root";
  const std::string line = [&] {
    std::string s;
    for (std::size_t i = k; i < words.size(); ++i) s += (s.empty() ? "" : " ") + words[i];
    return s;
  }();
  auto refuse = [&](std::string_view what) {
    return fmt::format("'{}' {}; temper logs in to this host as {} on port {} and would be locked out. Leave this "
                       "change to a human, or make it for other accounts only",
                       line, what, user, login.port);
  };

  if (program == "sh" || program == "bash" || program == "dash" || program == "zsh" || program == "eval" ||
      program == "su") {
    for (const std::string& a : args) {
      std::string why = CheckText(a, login, depth + 1);
      if (!why.empty()) return why;
    }
    return "";
  }
  if (program.find("authorized_keys") != std::string::npos) {
    return refuse("writes an authorized_keys file");
  }
  for (const std::string& a : args) {
    if (a.find("authorized_keys") != std::string::npos && !ReadOnly(program)) {
      return refuse("changes an authorized_keys file, which holds the key temper logs in with");
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
    if (Has(args, {"-s", "--shell"}) && ClosingShell(args)) return refuse(fmt::format("takes the shell away from {}", user));
    if (!root && Has(args, {"-G", "--groups"}) && !Has(args, {"-a", "--append"})) {
      return refuse(fmt::format("replaces the groups of {}, which may take away its sudo", user));
    }
  }
  if (program == "chage" && targets_login && !Has(args, {"-l", "--list"})) {
    return refuse(fmt::format("changes the password ageing of {}: an expired password blocks its key logins through PAM", user));
  }
  if ((program == "userdel" || program == "deluser" || program == "groupdel") && Names(args, user)) {
    return refuse(fmt::format("deletes {} or its group membership", user));
  }
  if (program == "gpasswd" && Names(args, user) && Has(args, {"-d", "--delete", "-M", "--members"})) {
    return refuse(fmt::format("removes {} from a group, which may take away its sudo", user));
  }
  if (program == "chsh" && targets_login && ClosingShell(args)) return refuse(fmt::format("takes the shell away from {}", user));

  if (program == "ufw" && AnySshPort(args, login.port) &&
      (HasWord(args, {"deny", "reject", "delete"}))) {
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

std::string LockoutRisk(std::string_view command, const LoginIdentity& login) { return CheckText(command, login, 0); }

std::string WriteLockoutRisk(std::string_view path, const LoginIdentity& login) {
  std::string p(path);
  std::string name = Base(p);
  if (!name.starts_with("authorized_keys")) return "";
  bool home = !login.home.empty() && p.starts_with(login.home + "/.ssh/");
  bool system = p.starts_with("/etc/ssh/");
  if (!home && !system) return "";
  return fmt::format("writing {} changes the keys {} logs in with (temper connects as {} on port {}) and could lock "
                     "temper out; leave this change to a human",
                     p, login.user, login.user, login.port);
}

}  // namespace temper::stig
