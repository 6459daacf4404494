#include "stig/ssh/login_guard.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

const LoginIdentity kAdmin{"admin", "/home/admin", 22};
const LoginIdentity kRoot{"root", "/root", 2222};

TEST_CASE("The login guard refuses what locks the login user out", "[stig][login_guard]") {
  for (const char* c : {"usermod -L admin",
                        "passwd -l admin",
                        "sudo passwd --lock admin",
                        "chage -E 0 admin",
                        "chage -M 60 admin",
                        "usermod -s /usr/sbin/nologin admin",
                        "userdel -r admin",
                        "gpasswd -d admin sudo",
                        "usermod -G audio admin",
                        "chsh -s /bin/false admin",
                        "true && env X=1 usermod --expiredate 1 admin",
                        "bash -c 'passwd -l admin'",
                        "echo ssh-ed25519 AAAA > /home/admin/.ssh/authorized_keys",
                        "rm -f ~/.ssh/authorized_keys",
                        "sed -i d /etc/ssh/authorized_keys/admin",
                        "ufw deny 22/tcp",
                        "ufw delete allow ssh",
                        "iptables -A INPUT -p tcp --dport 22 -j DROP",
                        "iptables -P INPUT DROP",
                        "firewall-cmd --permanent --remove-service=ssh",
                        "nft add rule inet filter input tcp dport 22 drop",
                        "env -S 'usermod -L admin'",
                        "flock /run/x -c 'passwd -l admin'",
                        "busybox passwd -l admin",
                        "touch /etc/nologin",
                        "echo maintenance > /run/nologin"}) {
    INFO(c);
    std::string why = LockoutRisk(c, kAdmin);
    CHECK_FALSE(why.empty());
    CHECK(why.find("admin") != std::string::npos);
  }
  // root: a bare `passwd -l` locks root itself; the port is the configured one.
  CHECK_FALSE(LockoutRisk("passwd -l", kRoot).empty());
  CHECK_FALSE(LockoutRisk("ufw deny 2222", kRoot).empty());
}

TEST_CASE("The login guard lets other accounts and read-only looks through", "[stig][login_guard]") {
  for (const char* c :
       {"usermod -L games", "passwd -l nobody", "chage -M 60 clerk", "chage -l admin",
        "grep ssh-ed25519 /home/admin/.ssh/authorized_keys", "cat ~/.ssh/authorized_keys", "usermod -a -G audit admin",
        "ufw allow 22/tcp", "ufw deny 23", "iptables -A INPUT -p tcp --dport 80 -j DROP",
        "sed -i 's/^PASS_MAX_DAYS.*/PASS_MAX_DAYS 60/' /etc/login.defs", "systemctl reload ssh",
        "usermod -s /bin/bash admin"}) {
    INFO(c);
    CHECK(LockoutRisk(c, kAdmin).empty());
  }
  CHECK(LockoutRisk("ufw deny 22", kRoot).empty());  // root logs in on 2222
}

TEST_CASE("The login guard refuses writes to the login's authorized_keys", "[stig][login_guard]") {
  CHECK_FALSE(WriteLockoutRisk("/home/admin/.ssh/authorized_keys", kAdmin).empty());
  CHECK_FALSE(WriteLockoutRisk("/home/admin/.ssh/authorized_keys2", kAdmin).empty());
  CHECK_FALSE(WriteLockoutRisk("/etc/ssh/authorized_keys", kAdmin).empty());
  CHECK(WriteLockoutRisk("/home/clerk/.ssh/authorized_keys", kAdmin).empty());
  CHECK(WriteLockoutRisk("/etc/ssh/sshd_config", kAdmin).empty());
  CHECK_FALSE(WriteLockoutRisk("/root/.ssh/authorized_keys", kRoot).empty());
  // /etc/nologin keeps every login but root's out.
  CHECK_FALSE(WriteLockoutRisk("/etc/nologin", kAdmin).empty());
  CHECK(WriteLockoutRisk("/etc/nologin", kRoot).empty());
}

TEST_CASE("The login guard refuses what it cannot parse", "[stig][login_guard]") {
  CHECK_THAT(LockoutRisk("echo 'unterminated", kAdmin), Catch::Contains("cannot read it"));
}

}  // namespace
}  // namespace temper::stig
