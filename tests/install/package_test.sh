#!/usr/bin/env bash
# The Debian packages (cmake/package.cmake), built from this build tree by
# cpack and installed with dpkg into a throw-away copy of this machine: an
# overlay whose lower layer is / and whose upper layer is a tmpfs, mounted in
# a private mount and PID namespace (unshare) and entered with chroot. The
# machine's own files and dpkg database are never written; the upper layer
# is exactly what the packages changed, which is how "nothing left but
# configuration" is checked after `dpkg --remove`. (A clean bookworm root by
# mmdebstrap would need the mirror and a minute; this machine already has
# every dependency the packages declare, and dpkg checks them.)
#
# In the copy: dpkg -i of the three packages (the postinst creates the memd
# user), man and bash reading the man pages and completions, the installed
# unit's ExecStart run as memd:memd with the directory systemd's
# RuntimeDirectory= would make, the installed memctl as a member of group
# memd (and refused as a user outside it), the README's C example built with
# pkg-config and libmemd-dev, then dpkg --remove and --purge.
# Before that: lintian on the .debs, which must be clean (every warning left
# is overridden, with its reason, in packaging/deb/*/lintian-overrides).
#
#   package_test.sh BUILD_DIR SOURCE_DIR [CPACK]
# Exit 77 (ctest: skipped) when not root, without namespaces or overlayfs,
# or without cpack/lintian, saying why.
source "$(dirname "$0")/package_common.sh"
require_root_tools_namespaces "dpkg into the overlay and unshare need root" lintian dpkg-deb

work=$(mktemp -d "${TMPDIR:-/tmp}/memd-package-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. Build the packages from this tree.
make_packages "$work/packages"

# 2. lintian: no error or warning, and no override that no longer applies.
lintian --fail-on error,warning --no-tag-display-limit "${debs[@]}" >"$work/lintian.log" 2>&1 ||
  { echo "lintian:"; cat "$work/lintian.log"; exit 1; }
if grep -e unused-override -e mismatched-override "$work/lintian.log"; then
  echo "lintian: an override in packaging/deb/ no longer matches"; exit 1
fi
step "lintian clean"

# 3. Install, run, remove in the overlay. inside.sh runs as PID 1's child of
# a private PID namespace (every process it starts dies with it) and mount
# namespace (the overlay and its mounts vanish with it).
mkdir -p "$work/layers"
cat >"$work/inside.sh" <<'EOF'
set -euo pipefail
work=$1
root=$work/merged
# A private network namespace: memd's metrics port (127.0.0.1:9477 in the
# packaged configuration) cannot meet another memd on this machine.
ip link set lo up
mount -t tmpfs -o mode=0755 tmpfs "$work/layers"
mkdir -p "$work/layers/upper" "$work/layers/work" "$root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/layers/upper,workdir=$work/layers/work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
# A fresh /run (no systemd runs in here: the maintainer scripts see no
# /run/systemd/system and leave systemctl alone) and /tmp.
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir -p "$root/tmp/debs"
cp "$work"/packages/*.deb "$root/tmp/debs/"
in_root() { chroot "$root" "$@"; }
# What the upper layer holds: files, links and whiteouts, not directories
# (a directory copied up to create something in it stays behind).
changed() {
  (cd "$work/layers/upper" && find . ! -type d | sed 's|^\./|/|' | sort)
}

echo "--- dpkg -i"
in_root sh -c 'dpkg -i /tmp/debs/*.deb'
in_root dpkg-query -W -f='${Package} ${Version} ${Status}\n' memd libmemd-dev 'libmemd0.*'
in_root getent passwd memd
in_root id memd
echo "--- man pages and completions (tools/clidoc)"
in_root env MANPAGER=cat MANWIDTH=80 man 8 memd | grep -A1 '^NAME'
in_root env MANPAGER=cat MANWIDTH=80 man memctl | grep -A1 '^NAME'
in_root bash -c 'source /usr/share/bash-completion/completions/memctl && complete -p memctl'
in_root test -s /usr/share/zsh/vendor-completions/_memctl
in_root test -s /usr/share/zsh/vendor-completions/_memd

# The unit's ExecStart, as the unit runs it: User=memd, Group=memd,
# SupplementaryGroups=video render, RuntimeDirectory=memd (0750, memd's).
unit=/usr/lib/systemd/system/memd.service
exec_start=$(sed -n 's/^ExecStart=//p' "$root$unit")
echo "--- ExecStart=$exec_start"
install -d -m 0750 -o "$(in_root id -u memd)" -g "$(in_root id -g memd)" "$root/run/memd"
# chroot itself, not the function in_root: $! must be memd (chroot and
# setpriv exec it), not a subshell.
chroot "$root" setpriv --reuid=memd --regid=memd --groups="memd,video,render" \
  --inh-caps=-all $exec_start >"$work/memd.log" 2>&1 &
memd_pid=$!

# A member of group memd, and a user outside it.
in_root useradd --create-home --groups memd alice
in_root useradd --create-home mallory
# No MEMD_SOCKET_DIR: a user's client finds the system memd in /run/memd
# when there is none of the user's own.
as() { local user=$1; shift; in_root setpriv --reuid="$user" --regid="$user" --init-groups \
  env -u MEMD_SOCKET_DIR -u XDG_RUNTIME_DIR HOME="/home/$user" "$@"; }
for _ in $(seq 100); do
  [ -S "$root/run/memd/memd.sock" ] && as alice memctl ping >/dev/null 2>&1 && break
  kill -0 $memd_pid 2>/dev/null || { echo "memd exited:"; cat "$work/memd.log"; exit 1; }
  sleep 0.1
done
echo "--- memctl stats, as alice (groups: $(in_root id -Gn alice))"
as alice memctl stats
echo "--- memctl stats, as mallory (groups: $(in_root id -Gn mallory))"
if as mallory memctl stats >"$work/mallory.log" 2>&1; then
  echo "mallory reached memd:"; cat "$work/mallory.log"; exit 1
fi
echo "refused: $(head -c 300 "$work/mallory.log")"
ls -la "$root/run/memd"

echo "--- a C program built with pkg-config against libmemd-dev"
cp "$work/quickstart.c" "$root/tmp/quickstart.c"
in_root sh -c 'cc -std=c99 -Wall -Werror /tmp/quickstart.c $(pkg-config --cflags --libs memd) -o /tmp/quickstart'
as alice /tmp/quickstart package/greeting "hello from the packages"
as alice memctl ls

kill -TERM $memd_pid
wait $memd_pid || { echo "memd exited $?:"; cat "$work/memd.log"; exit 1; }
echo "memd stopped"

in_root userdel --remove alice
in_root userdel --remove mallory
rm -rf "$root/tmp/debs" "$root/tmp/quickstart" "$root/tmp/quickstart.c"
echo "--- dpkg --remove"
in_root dpkg --remove memd libmemd-dev 'libmemd0.4'
in_root dpkg-query -W -f='${Package} ${Status}\n' memd libmemd-dev libmemd0.4 || true
# What may stay after --remove: the conffile, the memd user and group
# (Debian keeps system users), and the bookkeeping of dpkg, ldconfig and
# man-db (its trigger re-indexes /var/cache/man for the man pages).
# Anything else (a program, the unit, the library, a header) fails.
allowed='^/etc/memd/memd\.toml$|^/etc/(passwd|group|shadow|gshadow|subuid|subgid)-?$|^/etc/\.pwd\.lock$|^/etc/ld\.so\.cache$|^/var/lib/dpkg/|^/var/log/|^/var/cache/(ldconfig|debconf|man)/|^/var/lib/systemd/deb-systemd'
changed >"$work/after-remove"
echo "left after remove:"; sed 's/^/  /' "$work/after-remove"
if grep -Ev "$allowed" "$work/after-remove"; then
  echo "FAILED: the files above are left after dpkg --remove"; exit 1
fi
grep -qx /etc/memd/memd.toml "$work/after-remove" ||
  { echo "FAILED: the conffile went with --remove"; exit 1; }
in_root dpkg --purge memd libmemd-dev libmemd0.4
changed >"$work/after-purge"
if grep -e '^/etc/memd' -e '/memd[^/]*$' "$work/after-purge" | grep -v '^/var/'; then
  echo "FAILED: left after dpkg --purge"; exit 1
fi
echo "--- purged: nothing of memd left but its user and group"
EOF
cp "$source/client/examples/quickstart.c" "$work/quickstart.c"
if ! unshare --mount --pid --net --fork --kill-child --propagation private \
    bash "$work/inside.sh" "$work" >"$work/inside.log" 2>&1; then
  cat "$work/inside.log"
  if grep -q "overlay.*failed\|unknown filesystem type 'overlay'" "$work/inside.log"; then
    skip "overlayfs refused here (see above)"
  fi
  echo "FAILED"; exit 1
fi
cat "$work/inside.log"
step "installed, served memctl and a C client, removed, purged"
echo "PASSED"
