#!/bin/sh
# An mmdebstrap customize hook (deb_package_test.cpp): in the fresh Debian 12 root "$1", installs
# $TEMPER_DEB with apt (its dependencies from the mirror), runs temperd --check-config and
# temper --help there, purges it, and writes each step's output, exit status and time, and what
# the purge left of the package's files, into $TEMPER_RESULTS for the test to judge.
set -u
root=$1
out=$TEMPER_RESULTS
now() { date +%s.%N; }
step() {  # step NAME COMMAND...: runs COMMAND in the root, keeping its output and status
  name=$1
  shift
  start=$(now)
  chroot "$root" "$@" >"$out/$name.out" 2>&1
  echo $? >"$out/$name.rc"
  echo "$start $(now)" >"$out/$name.time"
}
cp "$TEMPER_DEB" "$root/tmp/temper.deb"
step install apt-get install -y --no-install-recommends /tmp/temper.deb
step check-config temperd --check-config
step help temper --help
step group getent group temper
step files dpkg -L temper
step conffiles dpkg-query -W -f='${Conffiles}\n' temper
# What a running temperd leaves (systemd's StateDirectory): the purge must take it too.
mkdir -p "$root/var/lib/temper/journal" && echo state >"$root/var/lib/temper/temper.db"
step purge dpkg --purge temper
: >"$out/left.txt"
while read -r f; do
  [ -e "$root$f" ] && [ ! -d "$root$f" ] && echo "$f" >>"$out/left.txt"
done <"$out/files.out"
for d in /etc/temper /var/lib/temper /usr/libexec/temper; do
  [ -e "$root$d" ] && echo "$d" >>"$out/left.txt"
done
exit 0
