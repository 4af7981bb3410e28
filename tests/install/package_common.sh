# Sourced by package_test.sh and image_test.sh: their arguments, skipping,
# timing, and the packages built from the build tree.
#   BUILD_DIR SOURCE_DIR [CPACK]
set -euo pipefail

build=$1
source=$2
cpack=${3:-cpack}
skip() { echo "SKIPPED: $*"; exit 77; }  # ctest: SKIP_RETURN_CODE 77
step_start=$SECONDS
step() { echo "[ step ] $* ($((SECONDS - step_start)) s)"; step_start=$SECONDS; }

# require_root_tools_namespaces WHY TOOLS...: root, the tools, and the private mount, PID and
# network namespaces both tests run in, or a skip that says which is missing.
require_root_tools_namespaces() {
  local why=$1; shift
  [ "$(id -u)" -eq 0 ] || skip "not root: $why"
  local tool
  for tool in "$cpack" unshare setpriv ip "$@"; do
    command -v "$tool" >/dev/null || skip "$tool not found (tools/dev deps installs it)"
  done
  unshare --mount --pid --net --fork true 2>/dev/null ||
    skip "unshare --mount --pid --net refused: $(unshare --mount --pid --net --fork true 2>&1 | tail -1)"
}

# make_packages DIR: cpack of the build tree into DIR; sets debs.
make_packages() {
  "$cpack" --config "$build/CPackConfig.cmake" -B "$1" >"$1.log" 2>&1 ||
    { cat "$1.log"; exit 1; }
  debs=("$1"/*.deb)
  [ ${#debs[@]} -eq 3 ] || { echo "want 3 packages, cpack made: ${debs[*]}"; exit 1; }
  step "cpack: $(cd "$1" && echo *.deb)"
}
