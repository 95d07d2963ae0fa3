#!/bin/sh
# run-in-vm.sh SCRIPT [ARGS...]: run one of the suite's test scripts inside
# a throwaway virtual machine and pass its output and exit status on.
#
# The VM boots Debian's own kernel (prepared by scripts/prepare-vm.sh into
# PVISOR_VM_DIR) under qemu's software emulation, so no KVM is needed.  Its
# root is the host's, read-only over 9p (the same pvisor binaries, tools
# and paths), with a fresh ext4 at /tmp and a cgroup v2 hierarchy that holds
# every controller: what a host whose memory and pids controllers are bound
# to cgroup v1 cannot give a test.  The test's environment (PVISOR,
# PVAGENT, SRCDIR, PROBE, SYSDENY, FSOPS, CI and the sanitizers' options)
# and working directory are passed in; directories below /tmp that those
# name are bound over the scratch /tmp from the host's.
#
# When the VM is not prepared, or qemu is missing, it prints one TAP skip
# saying why (a failure in CI, where scripts/install-deps.sh prepares it).
set -u
VM=${PVISOR_VM_DIR:-/var/cache/pvisor-vm}
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: run-in-vm.sh SCRIPT [ARGS...]" >&2; exit 2; }

skip_all() {
    if [ "${CI:-}" = true ]; then
        echo "not ok 1 - the test VM runs (CI needs it): $1"
        echo "1..1"
        exit 1
    fi
    echo "1..0 # SKIP $1"
    exit 0
}
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
[ -f "$VM/ready" ] || skip_all "no test VM in $VM (as root: scripts/prepare-vm.sh)"
[ "$(uname -m)" = x86_64 ] || skip_all "the test VM is x86_64 only"

W=$(mktemp -d /tmp/pvisor-vm.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the initramfs: busybox, the modules in load order, init
mkdir -p "$W/ir/bin" "$W/ir/lib/modules" "$W/ir/proc" "$W/ir/sys" "$W/ir/dev" "$W/ir/newroot"
cp "$VM/busybox" "$W/ir/bin/busybox"
cp "$VM"/modules/* "$W/ir/lib/modules/"
cp "$HERE/init.sh" "$W/ir/init"
chmod 0755 "$W/ir/init"
(cd "$W/ir" && find . | "$VM/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$W/initrd" || {
    echo "run-in-vm: cannot build the initramfs" >&2; exit 1; }

# the job, on the scratch disk: the test's environment, then the script
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
mkdir "$W/disk"
{
    echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/vm-home LANG=C.UTF-8"
    echo "mkdir -p /tmp/vm-home"
    for v in PVISOR PVAGENT SRCDIR PROBE SYSDENY FSOPS CI ASAN_OPTIONS UBSAN_OPTIONS; do
        eval "val=\${$v-}"
        [ -z "$val" ] || echo "export $v=$(q "$val")"
    done
    # a directory of the test below /tmp: the host's, bound over the scratch
    for p in "$PWD" "${SRCDIR:-}" "${PVISOR:-}" "$1"; do
        case "$p" in /tmp/?*) top=/tmp/$(echo "${p#/tmp/}" | cut -d/ -f1); echo "$top" ;; esac
    done | sort -u | while read -r top; do
        echo "mkdir -p $(q "$top") && mount --bind $(q "/run/host$top") $(q "$top")"
    done
    echo "cd $(q "$PWD") || exit 1"
    printf 'exec sh'
    for a in "$@"; do printf ' %s' "$(q "$a")"; done
    echo
} >"$W/disk/vm-job.sh"
mkfs.ext4 -q -F -d "$W/disk" "$W/scratch.img" 3G >/dev/null 2>&1 || {
    echo "run-in-vm: mkfs.ext4 -d failed" >&2; exit 1; }

# Its output: the job's on the second serial port (stdout here: TAP); its
# errors and the kernel's messages on the console, a file, shown on stderr
# after (meson keeps them in the log, apart from the TAP).
timeout "${PVISOR_VM_TIMEOUT:-1500}" qemu-system-x86_64 -nodefaults -display none -no-reboot \
    -m 2048 -smp 2 -accel tcg,thread=multi -cpu max \
    -kernel "$VM/vmlinuz" -initrd "$W/initrd" -append "console=ttyS0 panic=-1 loglevel=4" \
    -serial "file:$W/console" -serial stdio \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -drive "file=$W/scratch.img,if=virtio,format=raw" </dev/null >"$W/out" 2>"$W/qemu.err"
qrc=$?
rc=$(sed -n 's/^VM-EXIT \([0-9]*\).*/\1/p' "$W/out" | tail -n 1)
grep -v '^VM-EXIT ' "$W/out"
tr -d '\r' <"$W/console" >&2
cat "$W/qemu.err" >&2
if [ -z "$rc" ]; then
    echo "not ok - run-in-vm: the VM ended without the job's status (qemu exit $qrc; its console is on stderr)"
    exit 1
fi
exit "$rc"
