#!/bin/sh
# Start-to-exit latency of `pvisor run --safe -- true` next to `true`,
# bubblewrap with an equivalent profile (and the same over a workspace
# staged by fuse-overlayfs), and `unshare -Urmpn --fork true`,
# in one invocation; plus the supervisor's peak RSS.  Not a test.
#   usage: bench/startup.sh [RUNS]   (default 200)
#   BENCH_FS=ext4: as root, the workspace and the state directory on a
#   fresh ext4 made with mkfs.ext4's defaults (journaled, as distributions
#   install it), loop-mounted from a sparse image in BENCH_DIR (/var/tmp):
#   there a flush costs a journal commit, which a file system without a
#   journal (this project's development VMs) does not show.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${1:-200}
PVISOR=${PVISOR:-$PWD/build/src/cli/pvisor}
[ -x "$PVISOR" ] || { echo "build first: meson setup build && ninja -C build" >&2; exit 1; }
if [ "${BENCH_FS:-}" = ext4 ]; then
    IMG=$(mktemp "${BENCH_DIR:-/var/tmp}/pvisor-bench-ext4.XXXXXX")
    T=$(mktemp -d /tmp/pvisor-bench-mnt.XXXXXX)
    truncate -s 2G "$IMG" && mkfs.ext4 -q -F "$IMG" && mount -o loop "$IMG" "$T"
    trap 'cd /; umount "$T"; rmdir "$T"; rm -f "$IMG"' EXIT
    echo "on a fresh journaled ext4 (loop image $IMG): $(findmnt -no OPTIONS "$T")"
else
    T=$(mktemp -d /tmp/pvisor-bench.XXXXXX)
    trap 'rm -rf "$T"' EXIT
    echo "on $(findmnt -no FSTYPE,OPTIONS -T "$T")"
fi
mkdir -p "$T/ws"
export XDG_STATE_HOME="$T/state"
cd "$T/ws"

# The variants run round-robin (one run of each, RUNS times), so a slow
# phase of a shared machine hits all of them alike.
BWRAP="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib
 --symlink usr/lib64 /lib64 --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp
 --bind $T/ws $T/ws --chdir $T/ws true"
set -- "native: true|true" \
    "unshare -Urmpn --fork true|unshare -Urmpn --fork true" \
    "pvisor run -- true (plain)|$PVISOR run -- true" \
    "pvisor run --stage auto -- true|$PVISOR run --stage auto -- true" \
    "pvisor run --safe -- true|$PVISOR run --safe -- true"
if command -v bwrap >/dev/null; then
    set -- "$1" "bwrap --unshare-all (ro /usr, ws rw)|$(echo $BWRAP)" "$2" "$3" "$4" "$5"
    # The same profile over a staged workspace, as peers from Debian make
    # one: a fresh fuse-overlayfs upper each run, mounted, bwrap binding it
    # over the workspace, unmounted and discarded.  A shell script: its own
    # start (about a millisecond) is in the number.
    if command -v fuse-overlayfs >/dev/null && command -v fusermount3 >/dev/null; then
        {
            echo '#!/bin/sh'
            echo "D='$T/fo'"
            echo 'rm -rf "$D/upper" "$D/work" && mkdir -p "$D/upper" "$D/work" "$D/merged" || exit 1'
            echo "fuse-overlayfs -o 'lowerdir=$T/ws,upperdir=$T/fo/upper,workdir=$T/fo/work' \"\$D/merged\" || exit 1"
            echo "$BWRAP" | tr '\n' ' ' | sed "s|--bind $T/ws $T/ws|--bind $T/fo/merged $T/ws|"
            echo
            echo 'st=$?; fusermount3 -u "$D/merged"; exit $st'
        } > "$T/bwrap-fo"
        chmod +x "$T/bwrap-fo"
        set -- "$@" "bwrap over fuse-overlayfs (staged ws)|$T/bwrap-fo"
    else
        echo "fuse-overlayfs: not installed (apt-get install fuse-overlayfs): no staged bwrap row"
    fi
else
    echo "bwrap: not installed (apt-get install bubblewrap)"
fi
echo "startup latency, $RUNS runs each, round-robin ($(nproc) CPUs, kernel $(uname -r))"
i=0
while [ $i -lt "$RUNS" ]; do
    k=0
    for v in "$@"; do
        cmd=${v#*|}
        a=$(now_ms)
        # shellcheck disable=SC2086
        $cmd >/dev/null 2>&1 || { echo "command failed: $cmd" >&2; exit 1; }
        b=$(now_ms)
        echo "$a $b" | awk '{print $2 - $1}' >> "$T/v$k"
        k=$((k + 1))
    done
    i=$((i + 1))
done
k=0
for v in "$@"; do
    summarize "${v%%|*}" < "$T/v$k"
    k=$((k + 1))
done

if [ -x /usr/bin/time ]; then
    rss=$(/usr/bin/time -f %M "$PVISOR" run --safe -- true 2>&1 >/dev/null | tail -n1)
    echo "supervisor peak RSS (--safe -- true): ${rss} KiB"
else
    echo "peak RSS: /usr/bin/time missing (apt-get install time)"
fi
