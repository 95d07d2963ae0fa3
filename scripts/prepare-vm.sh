#!/bin/sh
# Prepare the throwaway virtual machine some tests run in (tests/vm/): the
# kernel of Debian's linux-image-amd64, the modules the guest needs and a
# static busybox, extracted from their Debian packages (apt-get download:
# nothing is installed, no package script runs) into PVISOR_VM_DIR
# (default /var/cache/pvisor-vm).  qemu-system-x86 runs it (install-deps.sh
# installs that).  Idempotent: does nothing when the directory is complete.
#
# Why a VM: the cgroup v2 leaf's memory and pids limits need a v2 hierarchy
# holding those controllers, which a host whose controllers are bound to
# cgroup v1 cannot give (the development VMs); Debian's kernel under qemu's
# software emulation (no KVM needed) boots in a few seconds with all of them.
set -eu
VM=${PVISOR_VM_DIR:-/var/cache/pvisor-vm}
# The guest mounts the host's root over 9p and a scratch ext4 on a virtio
# disk, and runs FUSE; each module's own dependencies are added below.
MODULES="virtio_pci virtio_blk 9pnet_virtio 9p ext4 crc32c_generic fuse"

[ -f "$VM/ready" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "prepare-vm: $VM is not prepared; run as root: scripts/prepare-vm.sh" >&2
    exit 1
fi
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1; }
kpkg=$(kernel_pkg)
[ -n "$kpkg" ] || { apt-get update -qq && kpkg=$(kernel_pkg); }
[ -n "$kpkg" ] || { echo "prepare-vm: apt-cache does not know linux-image-amd64 (apt-get update?)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "$kpkg" busybox-static 2>/dev/null) || {
    echo "prepare-vm: apt-get download $kpkg busybox-static failed" >&2; exit 1; }
mkdir "$tmp/x"
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done

rm -rf "$VM"
mkdir -p "$VM/modules"
cp "$tmp"/x/boot/vmlinuz-* "$VM/vmlinuz"
cp "$tmp/x/bin/busybox" "$VM/busybox"
mods=$(echo "$tmp"/x/lib/modules/*)
path_of() { find "$mods" -name "$1.ko" | head -n 1; }
# a module after the ones it depends on (its .modinfo "depends=" list)
add() {
    local m f deps
    for m in "$@"; do
        f=$(path_of "$m")
        [ -n "$f" ] || { echo "prepare-vm: no module $m in $kpkg" >&2; exit 1; }
        grep -qx "$m" "$VM/modules/order" 2>/dev/null && continue
        deps=$(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | head -n 1 | tr ',' ' ')
        # shellcheck disable=SC2086
        [ -z "$deps" ] || add $deps
        cp "$f" "$VM/modules/"
        echo "$m" >>"$VM/modules/order"
    done
}
# shellcheck disable=SC2086
add $MODULES
echo "$kpkg" >"$VM/ready"
echo "prepare-vm: $kpkg in $VM" >&2
