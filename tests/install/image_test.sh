#!/usr/bin/env bash
# The container image (tools/build-image) the DaemonSet runs: built from the
# packages of this build (cpack), unpacked with umoci as a container runtime
# would, and its entrypoint run as the image's user in private PID, mount
# and network namespaces (unshare), chrooted into its root file system
# mounted read-only (the DaemonSet's readOnlyRootFilesystem), with a
# directory of this machine mounted at /run/memd (the DaemonSet's hostPath).
# Then, from outside, this build's memctl answers `stats` through that
# directory, as a client pod would; inside, the image's memctl answers the
# DaemonSet's probe command.
#
#   image_test.sh BUILD_DIR SOURCE_DIR [CPACK]
# Exit 77 (ctest: skipped) when not root, without namespaces, mmdebstrap or
# umoci, or when the Debian mirror (deb.debian.org) is unreachable, saying
# why. Downloaded packages stay in BUILD_DIR/image-cache for the next run.
source "$(dirname "$0")/package_common.sh"
require_root_tools_namespaces "mmdebstrap (root mode), umoci unpack and unshare need root" \
  mmdebstrap umoci python3
timeout 10 bash -c 'exec 3<>/dev/tcp/deb.debian.org/80' 2>/dev/null ||
  skip "the Debian mirror deb.debian.org:80 is unreachable: mmdebstrap cannot build the image"

work=$(mktemp -d "${TMPDIR:-/tmp}/memd-image-test.XXXXXX")
unshare_pid=
cleanup() {
  if [ -n "$unshare_pid" ]; then kill -KILL "$unshare_pid" 2>/dev/null || true; wait "$unshare_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

make_packages "$work/packages"
reference=$(MEMD_IMAGE_CACHE="$build/image-cache" \
  "$source/tools/build-image" "$work/packages" "$work/image" 2>"$work/build-image.log") ||
  { cat "$work/build-image.log"; exit 1; }
grep '^build-image:' "$work/build-image.log"
step "image built: $reference"

umoci unpack --image "${reference#oci:}" "$work/bundle" >"$work/unpack.log" 2>&1 ||
  { cat "$work/unpack.log"; exit 1; }
rootfs=$work/bundle/rootfs
# What the runtime would run, from the image's configuration.
read -r uid gid args < <(python3 -c '
import json, shlex, sys
p = json.load(open(sys.argv[1]))["process"]
print(p["user"]["uid"], p["user"]["gid"], shlex.join(p["args"]))' "$work/bundle/config.json")
echo "image: user $uid:$gid, runs: $args, $(du -sm "$rootfs" | cut -f1) MiB unpacked"
[ "$uid" -ne 0 ] || { echo "FAILED: the image runs memd as root"; exit 1; }
[ -x "$rootfs/usr/bin/memd" ] && [ -x "$rootfs/usr/bin/memctl" ] ||
  { echo "FAILED: memd and memctl are not in the image's /usr/bin"; exit 1; }

# The node's /run/memd, made for memd's user before the pod starts (root's
# directory above it, so clients trust its owner, docs/kubernetes.md).
host_dir=$work/node-run-memd
install -d -m 0750 -o "$uid" -g "$gid" "$host_dir"

cat >"$work/container.sh" <<'EOF'
set -euo pipefail
rootfs=$1 host_dir=$2 uid=$3 gid=$4
shift 4
ip link set lo up
mount --bind "$rootfs" "$rootfs"
mount -o remount,bind,ro "$rootfs"
mount -t proc proc "$rootfs/proc"
mount --rbind /dev "$rootfs/dev"
mount -t tmpfs -o mode=1777 tmpfs "$rootfs/tmp"
mount --bind "$host_dir" "$rootfs/run/memd"
exec chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all "$@"
EOF
# shellcheck disable=SC2086 # args: the image's entrypoint and command, split.
unshare --mount --pid --net --fork --kill-child --propagation private \
  bash "$work/container.sh" "$rootfs" "$host_dir" "$uid" "$gid" $args >"$work/memd.log" 2>&1 &
unshare_pid=$!

memctl=$build/bin/memctl
for _ in $(seq 100); do
  [ -S "$host_dir/memd.sock" ] && "$memctl" --socket-dir "$host_dir" ping >/dev/null 2>&1 && break
  kill -0 "$unshare_pid" 2>/dev/null || { echo "FAILED: memd exited:"; cat "$work/memd.log"; exit 1; }
  sleep 0.1
done
step "memd up in the image"
echo "--- memctl stats from outside, through $host_dir"
"$memctl" --socket-dir "$host_dir" stats || { echo "FAILED"; cat "$work/memd.log"; exit 1; }
ls -ln "$host_dir"
echo "--- the DaemonSet's probe, inside the container"
# unshare's child: container.sh, which became memd by exec.
memd_pid=$(pgrep -P "$unshare_pid")
nsenter -t "$memd_pid" -m -n -r -S "$uid" -G "$gid" memctl --socket-dir /run/memd ping ||
  { echo "FAILED: the probe"; cat "$work/memd.log"; exit 1; }
grep -q "serving with the host backend" "$work/memd.log" ||
  { echo "FAILED: memd's log:"; cat "$work/memd.log"; exit 1; }
echo "PASSED"
