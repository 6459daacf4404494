// The command policy's rules for one simple command, one case per kind of program the rules judge
// (and the look-alikes they let through), as a table: the command line, the rule's context, and the
// refusal expected ("" when it runs). The expected texts were taken from the rules as they were
// before they became a table of judges (policy/command_rules.cpp), so this also shows the table
// decides as the if-chain did.
#include "policy/command_rules.h"

#include <catch2/catch.hpp>

#include "policy/shell_split.h"

namespace temper {
namespace {

constexpr PolicyContext kPlain{};
constexpr PolicyContext kBootloaderRule{.bootloader_rule = true};
constexpr PolicyContext kRemovalAllowed{.allow_package_removal = true};

struct Case {
  const char* command;
  PolicyContext context;
  const char* refused;  // the refusal's why; "" when the command may run
};

TEST_CASE("each kind of program is judged by its own rule, and look-alikes run") {
  const Case cases[] = {
      {"reboot", kPlain, "'reboot' would take the host down"},
      {"/sbin/shutdown -h now", kPlain, "'shutdown' would take the host down"},
      {"init 6", kPlain, "'init 6' changes the runlevel and takes the host down"},
      {"telinit 3", kPlain, ""},
      {"init", kPlain, ""},
      {"systemctl isolate rescue.target", kPlain,
       "'systemctl isolate' switches the system's state and would take the host down or cut it off"},
      {"service sshd stop", kPlain, "'service stop sshd' would cut off remote access to the host"},
      {"systemctl reload sshd", kPlain, ""},
      {"systemd-run --on-active=60 touch /x", kPlain,
       "'systemd-run' schedules a command to run later, outside the command the policy judges"},
      {"at now + 1 minute", kPlain, "'at' schedules a command to run later, outside the command the policy judges"},
      {"at -l", kPlain, ""},
      {"crontab /tmp/cron", kPlain,
       "'crontab /tmp/cron' installs a cron table, whose commands would run later unjudged"},
      {"crontab -l", kPlain, ""},
      {"loginctl terminate-session 3", kPlain,
       "'loginctl terminate-session 3' ends login sessions, temper's own among them"},
      {"loginctl list-sessions", kPlain, ""},
      {"busctl call org.freedesktop.login1 /org/freedesktop/login1", kPlain,
       "'busctl' calls systemd or logind over D-Bus, where it can stop units or power the host off unjudged"},
      {"sysctl -w kernel.sysrq=1", kPlain,
       "'sysctl -w kernel.sysrq=1' sets a kernel parameter that can take the host down or hand it to a program (sysctl "
       "line 1: kernel.sysrq other than 0 lets a write to /proc/sysrq-trigger reboot or halt the host)"},
      {"sysctl -w kernel.dmesg_restrict=1", kPlain, ""},
      {"apt-get -o APT::Update::Pre-Invoke::=x update", kPlain,
       "'apt-get -o APT::Update::Pre-Invoke::=x update' gives apt a hook or a program to run"},
      {"apt-get -c /tmp/apt.conf install aide", kPlain,
       "'apt-get -c /tmp/apt.conf install aide' reads an apt configuration the policy did not judge"},
      {"apt-get remove telnet", kPlain,
       "removing packages (telnet) is a disruptive change and this batch does not allow disruptive changes"},
      {"apt-get remove telnet", kRemovalAllowed, ""},
      {"apt purge openssh-server", kRemovalAllowed,
       "removing the package openssh-server would cut off access to the host or leave it unable to boot, log in or "
       "install packages"},
      {"apt-get install ./x.deb", kPlain,
       "'apt-get install ./x.deb' installs the package file ./x.deb, whose maintainer scripts the policy cannot judge"},
      {"apt-get install aide", kPlain, ""},
      {"dpkg -i /tmp/x.deb", kPlain,
       "'dpkg -i /tmp/x.deb' installs a package file or adds hooks, whose scripts the policy cannot judge"},
      {"dpkg -P sudo", kRemovalAllowed,
       "removing the package sudo would cut off access to the host or leave it unable to boot, log in or install "
       "packages"},
      {"dpkg -r telnet", kRemovalAllowed, ""},
      {"dpkg -l", kPlain, ""},
      {"xargs kill", kPlain, "'xargs kill' signals processes named by xargs's input, which the policy cannot see"},
      {"pkill sshd", kPlain, "'pkill sshd' would kill sshd and cut off access"},
      {"kill -9 1", kPlain, "'kill -9 1' would kill init or every process"},
      {"kill 1234", kPlain, ""},
      {"rm -rf /etc", kPlain, "'rm -rf /etc' would delete the system directory /etc"},
      {"rm -rf \"$DIR\"/", kPlain, "'rm -rf $DIR/' deletes '$DIR/'; if that variable is empty this removes /"},
      {"rm -rf /tmp/x", kPlain, ""},
      {"rm --no-preserve-root -rf /", kPlain, "it asks rm not to preserve /"},
      {"rm /boot/vmlinuz", kPlain, "'rm /boot/vmlinuz' removes the bootloader file /boot/vmlinuz"},
      {"rm /boot/vmlinuz", kBootloaderRule, ""},
      {"shred /usr", kPlain, "'shred /usr' would delete the system directory /usr"},
      {"mkfs.ext4 /dev/sdb1", kPlain, "'mkfs.ext4' rewrites disks or partitions"},
      {"cryptsetup luksFormat /dev/sdb", kPlain, "'cryptsetup' rewrites disks or partitions"},
      {"dd if=/dev/zero of=/dev/sda", kPlain, "'dd if=/dev/zero of=/dev/sda' writes raw data to the device /dev/sda"},
      {"dd if=/x of=/proc/sysrq-trigger", kPlain,
       "'dd if=/x of=/proc/sysrq-trigger' writes to /proc/sysrq-trigger: it makes the kernel reboot, halt or crash the "
       "host at once"},
      {"dd if=/x of=/tmp/y", kPlain, ""},
      {"mount --bind /tmp/x /etc", kPlain,
       "'mount --bind /tmp/x /etc' replaces what a directory holds with files the policy never judged"},
      {"mount /dev/sdb1 /mnt", kPlain, ""},
      {"mount -t cgroup -o memory none /mnt", kPlain,
       "'mount -t cgroup -o memory none /mnt' mounts a cgroup file system: the sandbox forbids a command to change "
       "its own namespaces or limits"},
      {"mount -tcgroup2 none /mnt", kPlain,
       "'mount -tcgroup2 none /mnt' mounts a cgroup2 file system: the sandbox forbids a command to change its own "
       "namespaces or limits"},
      {"mount -t $T none /mnt", kPlain,
       "'mount -t $T none /mnt' mounts a file system whose type is computed when it runs, so it may be a cgroup, proc, "
       "sysfs or bpf file system: the sandbox forbids a command to change its own namespaces or limits"},
      {"mount -o remount,hidepid=2 /proc", kPlain, ""},
      {"mount -t ext4 /dev/sdb1 /mnt", kPlain, ""},
      {"unshare -UrmC sh", kPlain,
       "'unshare -UrmC sh' runs in namespaces or a cgroup other than its own (unshare): the sandbox forbids a command "
       "to change its own namespaces or limits"},
      {"sudo nsenter -t 1 -m true", kPlain,
       "'sudo nsenter -t 1 -m true' runs in namespaces or a cgroup other than its own (nsenter): the sandbox forbids a "
       "command to change its own namespaces or limits"},
      {"cgexec -g memory:/ sh", kPlain,
       "'cgexec -g memory:/ sh' runs in namespaces or a cgroup other than its own (cgexec): the sandbox forbids a "
       "command to change its own namespaces or limits"},
      {"ip netns exec other true", kPlain,
       "'ip netns exec other true' runs in namespaces or a cgroup other than its own (ip): the sandbox forbids a "
       "command to change its own namespaces or limits"},
      {"chown -R root /usr", kPlain, "'chown -R root /usr' changes ownership or permissions of a whole system tree"},
      {"chmod 600 /etc/shadow", kPlain, ""},
      {"update-grub", kPlain, "'update-grub' changes the bootloader and this rule is not a bootloader rule"},
      {"update-grub", kBootloaderRule, ""},
      {"sed -i s/a/b/ /etc/default/grub", kPlain,
       "'sed' edits the bootloader file /etc/default/grub and this rule is not a bootloader rule"},
      {"sed -i s/a/b/ /etc/default/grub", kBootloaderRule, ""},
      {"sed -e 1e /etc/x", kPlain, "'sed -e 1e /etc/x' runs commands through sed's e command"},
      {"sed s/x/y/w /etc/cron.d/x /etc/x", kPlain, ""},
      {"sed -i s/a/b/ /etc/ssh/sshd_config", kPlain, ""},
      {"cp /tmp/x /dev/sda", kPlain, "'cp' writes to the device /dev/sda"},
      {"ln -s /tmp/x /proc/sys/kernel/modprobe", kPlain,
       "'ln -s /tmp/x /proc/sys/kernel/modprobe' writes to /proc/sys/kernel/modprobe: it names a program the kernel "
       "runs as root"},
      {"tee /boot/grub/grub.cfg", kPlain,
       "'tee' edits the bootloader file /boot/grub/grub.cfg and this rule is not a bootloader rule"},
      {"touch /etc/x", kPlain, ""},
      {"perl -i -pe s/a/b/ /boot/grub/grub.cfg", kPlain,
       "'perl' edits the bootloader file /boot/grub/grub.cfg and this rule is not a bootloader rule"},
      {"perl -e 'print 1'", kPlain,
       "'perl -e print 1' runs perl code, which the policy cannot judge (it judges shell commands only)"},
      {"perl --version", kPlain, ""},
      {"python3 -c 'import os'", kPlain,
       "'python3 -c import os' runs python3 code, which the policy cannot judge (it judges shell commands only)"},
      {"python3-config --includes", kPlain, ""},
      {"node x.js", kPlain,
       "'node x.js' runs node code, which the policy cannot judge (it judges shell commands only)"},
      {"awk 'BEGIN{system(\"reboot\")}'", kPlain,
       "'awk BEGIN{system(\"reboot\")}' runs commands through awk's system()"},
      {"awk -F: '{print $1}' /etc/passwd", kPlain, ""},
      {"gawk '{print > \"/tmp/x\"}'", kPlain,
       "'gawk {print > \"/tmp/x\"}' writes files from inside awk, which the policy cannot follow"},
      {"ifdown eth0", kPlain, "'ifdown eth0' takes a network interface down"},
      {"ifconfig eth0 down", kPlain, "'ifconfig eth0 down' takes a network interface down"},
      {"ifconfig eth0", kPlain, ""},
      {"ip link set eth0 down", kPlain, "'ip link set eth0 down' takes a network interface down"},
      {"ip route del default", kPlain, "'ip route del default' removes the host's addresses or routes"},
      {"ip addr show", kPlain, ""},
      {"nmcli networking off", kPlain, "'nmcli networking off' disconnects the host"},
      {"nmcli general status", kPlain, ""},
      {"iptables -F", kPlain, "'iptables -F' flushes the firewall"},
      {"ip6tables -P INPUT DROP", kPlain, "'ip6tables -P INPUT DROP' drops all traffic, ssh included"},
      {"iptables -A INPUT -p tcp --dport 22 -j ACCEPT", kPlain, ""},
      {"nft flush ruleset", kPlain, "'nft flush ruleset' flushes the firewall"},
      {"nft list ruleset", kPlain, ""},
      {"echo hi > /dev/sda", kPlain, "it writes to the device /dev/sda"},
      {"echo 1 > /proc/sysrq-trigger", kPlain,
       "it writes to /proc/sysrq-trigger: it makes the kernel reboot, halt or crash the host at once"},
      {"echo x > /boot/grub/grub.cfg", kPlain,
       "it writes the bootloader file /boot/grub/grub.cfg and this rule is not a bootloader rule"},
      {"echo x > /boot/grub/grub.cfg", kBootloaderRule, ""},
      {"grep root /etc/passwd", kPlain, ""},
      {"> /proc/sysrq-trigger", kPlain,
       "it writes to /proc/sysrq-trigger: it makes the kernel reboot, halt or crash the host at once"},
  };
  for (const Case& c : cases) {
    INFO(c.command << (c.context.bootloader_rule ? " (a bootloader rule)" : "")
                   << (c.context.allow_package_removal ? " (removals allowed)" : ""));
    Result<ParsedShell> parsed = SplitShellCommand(c.command);
    REQUIRE(parsed.ok());
    REQUIRE(parsed->commands.size() == 1);
    std::optional<Refusal> r = JudgeSimpleCommand(parsed->commands[0], c.context);
    CHECK((r ? r->why : "") == std::string(c.refused));
    if (r) CHECK_FALSE(r->instead.empty());
  }
}

}  // namespace
}  // namespace temper
