#!/bin/sh
# Install every Debian package pvisor's build, tests and benchmarks need.
# Idempotent: does nothing (and needs no network) when all are present.
set -eu

PKGS="build-essential meson ninja-build pkg-config
libfuse3-dev fuse3 libseccomp-dev libcap-dev libssl-dev libjansson-dev zlib1g-dev
python3 python3-jsonschema jq attr acl libcap2-bin git sqlite3 make tar util-linux procps psmisc
iproute2 strace valgrind fuse-overlayfs bubblewrap hyperfine time clang-format clang less
qemu-system-x86 e2fsprogs gzip xfsprogs btrfs-progs squashfs-tools"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# The test VM (tests/vm): Debian's kernel and busybox, extracted, not
# installed.  A failure is reported, not fatal: the VM's tests say why.
prepare_vm() {
    [ "$(id -u)" -eq 0 ] || return 0
    "$(dirname "$0")/prepare-vm.sh" || echo "install-deps: the test VM could not be prepared (see above)" >&2
}
if [ -z "$missing" ]; then
    prepare_vm
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run as root (or: sudo apt-get install -y --no-install-recommends$missing)" >&2
    exit 1
fi
echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
prepare_vm
