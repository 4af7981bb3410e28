#!/usr/bin/env bash
# The container image (tools/build-image) the DaemonSet runs: built from the
# packages of this build (cpack), unpacked with umoci as a container runtime
# would; no setuid programs in it, and memd with cap_ipc_lock=ep. Then the
# DaemonSet's init container and memd run as deploy/kubernetes/daemonset.yaml
# says (user, group, capabilities), each in private PID, mount and network
# namespaces (unshare), chrooted into the read-only root file system, with a
# directory of this machine made as the kubelet makes a hostPath (root's,
# 0755) mounted at /run/memd: the init container gives it to memd's user,
# memd serves there. From outside, this build's memctl answers `stats`
# through that directory, as a client pod would, and puts 1 MiB of pinned
# memory beyond memd's 64 KiB memlock limit (the file capability); inside,
# the image's memctl answers the DaemonSet's probe command.
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
# Ends memd's container: memd, unshare's child, is its PID namespace's
# first process, so killing it kills everything in it. unshare
# --kill-child alone let memd outlive every run: the parent-death signal
# it sets is cleared when setpriv changes the user, and again by the exec
# of a program with file capabilities.
end_container() {
  [ -n "$unshare_pid" ] || return 0
  pkill -KILL -P "$unshare_pid" 2>/dev/null || true
  kill -KILL "$unshare_pid" 2>/dev/null || true
  wait "$unshare_pid" 2>/dev/null || true
  unshare_pid=
}
cleanup() {
  end_container
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

# What the DaemonSet runs: its pod's user and group, its init container
# (command, mount point, capabilities) and memd's capabilities. Debian's
# python3, which has python3-yaml (tools/dev installs it).
read -r pod_uid pod_gid init_caps memd_caps memd_nnp init_mount init_command < <(/usr/bin/python3 -c '
import shlex, sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]
init = next(c for c in spec["initContainers"] if c["name"] == "socket-dir")
memd = next(c for c in spec["containers"] if c["name"] == "memd")
def caps(c):
    return ",".join(["-all"] + ["+" + cap.lower() for cap in c["securityContext"]["capabilities"]["add"]])
context = spec["securityContext"]
nnp = "no_new_privs" if memd["securityContext"].get("allowPrivilegeEscalation") is False else "-"
print(context["runAsUser"], context["runAsGroup"], caps(init), caps(memd), nnp,
      init["volumeMounts"][0]["mountPath"], shlex.join(init["command"]))' \
  "$source/deploy/kubernetes/daemonset.yaml")
[ "$pod_uid:$pod_gid" = "$uid:$gid" ] ||
  { echo "FAILED: the DaemonSet runs memd as $pod_uid:$pod_gid, the image's user is $uid:$gid"; exit 1; }
setuid=$(find "$rootfs" -xdev -type f -perm /6000)
[ -z "$setuid" ] || { echo "FAILED: setuid or setgid programs in the image: $setuid"; exit 1; }
getcap "$rootfs/usr/bin/memd" | grep -q 'cap_ipc_lock=ep' ||
  { echo "FAILED: the image's memd lacks cap_ipc_lock=ep: $(getcap "$rootfs/usr/bin/memd")"; exit 1; }

# The node's /run/memd as the kubelet creates a hostPath (root:root 0755),
# holding a lock file an earlier memd running as root left.
host_dir=$work/node-run-memd
install -d -m 0755 -o 0 -g 0 "$host_dir"
install -m 0644 -o 0 -g 0 /dev/null "$host_dir/memd.lock"

# container.sh ROOTFS HOST_DIR MOUNT UID GID CAPS NNP MEMLOCK_KIB ARGV...:
# ARGV in the image as a runtime runs a container: private namespaces, the
# root file system read-only, HOST_DIR at MOUNT, as UID:GID with no
# capabilities but CAPS in its bounding set (all a process that is not root
# can gain, from a file capability, under Kubernetes' capabilities.add), with
# the no_new_privs flag where NNP says so (allowPrivilegeEscalation: false),
# and an RLIMIT_MEMLOCK a pod cannot raise.
cat >"$work/container.sh" <<'EOF'
set -euo pipefail
rootfs=$1 host_dir=$2 mount=$3 uid=$4 gid=$5 caps=$6 nnp=$7 memlock=$8
shift 8
flags=()
[ "$nnp" = no_new_privs ] && flags+=(--no-new-privs)
ip link set lo up
mount --bind "$rootfs" "$rootfs"
mount -o remount,bind,ro "$rootfs"
mount -t proc proc "$rootfs/proc"
mount --rbind /dev "$rootfs/dev"
mount -t tmpfs -o mode=1777 tmpfs "$rootfs/tmp"
mount --bind "$host_dir" "$rootfs$mount"
ulimit -l "$memlock"
# Two setprivs: the first exec as UID leaves a user that is not root no
# permitted capabilities, as the strictest runtime would, so that only the
# file capability can give memd IPC_LOCK, and no_new_privs takes it away.
exec chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all \
  --bounding-set="$caps" setpriv "${flags[@]}" "$@"
EOF
eval "init_argv=($init_command)"
unshare --mount --pid --net --fork --kill-child --propagation private \
  bash "$work/container.sh" "$rootfs" "$host_dir" "$init_mount" 0 0 "$init_caps" - 64 \
  "${init_argv[@]}" >"$work/init.log" 2>&1 ||
  { echo "FAILED: the init container:"; cat "$work/init.log"; exit 1; }
for path in "$host_dir" "$host_dir/memd.lock"; do
  [ "$(stat -c %u:%g "$path")" = "$uid:$gid" ] ||
    { echo "FAILED: after the init container $path is $(stat -c %u:%g "$path")"; exit 1; }
done
step "init container: $init_command, as root with $init_caps"

# memd as the DaemonSet runs it, with a memlock limit of 64 KiB (a container
# runtime's usual default).
# shellcheck disable=SC2086 # args: the image's entrypoint and command, split.
unshare --mount --pid --net --fork --kill-child --propagation private \
  bash "$work/container.sh" "$rootfs" "$host_dir" /run/memd "$uid" "$gid" "$memd_caps" "$memd_nnp" 64 \
  $args >"$work/memd.log" 2>&1 &
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
# Pinned memory beyond the memlock limit: memd's file capability at work.
head -c 1048576 /dev/urandom >"$work/one-mib"
"$memctl" --socket-dir "$host_dir" put --location pinned memlock-probe "$work/one-mib" || {
  echo "FAILED: 1 MiB pinned beyond a 64 KiB memlock limit as uid $uid with $memd_caps"
  cat "$work/memd.log"; exit 1
}
"$memctl" --socket-dir "$host_dir" get memlock-probe -o - | cmp - "$work/one-mib" ||
  { echo "FAILED: the pinned buffer's bytes"; exit 1; }
step "1 MiB pinned beyond the 64 KiB memlock limit, as uid $uid with $memd_caps"
grep -q "serving with the host backend" "$work/memd.log" ||
  { echo "FAILED: memd's log:"; cat "$work/memd.log"; exit 1; }

# Nothing of the container outlives the test (a zombie waiting for the
# host's init to reap it counts as gone).
end_container
alive() {
  local state
  state=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ]
}
for _ in $(seq 50); do alive "$memd_pid" || break; sleep 0.1; done
if alive "$memd_pid"; then
  echo "FAILED: memd (pid $memd_pid) outlived its container"
  exit 1
fi
step "memd gone with its container"
echo "PASSED"
