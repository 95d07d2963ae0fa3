#!/bin/sh
# Start-to-exit latency of `pvisor run --safe -- true` next to `true`,
# bubblewrap with an equivalent profile, and `unshare -Urmpn --fork true`,
# in one invocation; plus the supervisor's peak RSS.  Not a test.
#   usage: bench/startup.sh [RUNS]   (default 200)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${1:-200}
PVISOR=${PVISOR:-$PWD/build/src/cli/pvisor}
[ -x "$PVISOR" ] || { echo "build first: meson setup build && ninja -C build" >&2; exit 1; }
T=$(mktemp -d /tmp/pvisor-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/ws"
export XDG_STATE_HOME="$T/state"
cd "$T/ws"

measure() { # LABEL CMD...
    label=$1; shift
    i=0
    while [ $i -lt "$RUNS" ]; do
        a=$(now_ms); "$@" >/dev/null 2>&1 || { echo "$label: command failed: $*" >&2; return 1; }; b=$(now_ms)
        echo "$a $b" | awk '{print $2 - $1}'
        i=$((i + 1))
    done | summarize "$label"
}

echo "startup latency, $RUNS runs each ($(nproc) CPUs, kernel $(uname -r))"
measure "native: true" true
if command -v bwrap >/dev/null; then
    measure "bwrap --unshare-all (ro /usr, ws rw)" bwrap --unshare-all --die-with-parent --ro-bind /usr /usr \
        --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind /etc /etc \
        --proc /proc --dev /dev --tmpfs /tmp --bind "$T/ws" "$T/ws" --chdir "$T/ws" true
else
    echo "bwrap: not installed (apt-get install bubblewrap)"
fi
measure "unshare -Urmpn --fork true" unshare -Urmpn --fork true
measure "pvisor run -- true (plain)" "$PVISOR" run -- true
measure "pvisor run --stage auto -- true" "$PVISOR" run --stage auto -- true
measure "pvisor run --safe -- true" "$PVISOR" run --safe -- true

if [ -x /usr/bin/time ]; then
    rss=$(/usr/bin/time -f %M "$PVISOR" run --safe -- true 2>&1 >/dev/null | tail -n1)
    echo "supervisor peak RSS (--safe -- true): ${rss} KiB"
else
    echo "peak RSS: /usr/bin/time missing (apt-get install time)"
fi
