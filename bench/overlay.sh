#!/bin/sh
# The WorkspaceOverlay next to its peers, in one invocation: a native
# directory, kernel overlayfs, fuse-overlayfs (Debian) and the pVisor staged
# view, each running bench/workload.sh REPS times.  Prints P50/P95 per
# operation and the ratio to native.  Not a test.  Run as root.
#   usage: bench/overlay.sh [REPS]     env: SEQ_MB NFILES RAND_READS REPO_FILES
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
REPS=${1:-5}
REPO_FILES=${REPO_FILES:-20000}
PVISOR=${PVISOR:-$PWD/build/src/cli/pvisor}
W=$PWD/bench/workload.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (kernel overlayfs mounts)" >&2; exit 1; }
T=$(mktemp -d /var/tmp/pvisor-bench.XXXXXX)
trap 'umount -l "$T/mnt" 2>/dev/null; rm -rf "$T"' EXIT
export XDG_STATE_HOME="$T/state"

make_lower() { # DIR: a git repo with REPO_FILES files and 1000 copy-up files
    mkdir -p "$1/repo" "$1/copyup"
    (cd "$1/repo" && seq 1 "$REPO_FILES" | awk '{d = int($1 / 500); printf "d%d/f%d\n", d, $1}' |
        while read -r f; do mkdir -p "${f%/*}"; echo "$f" > "$f"; done &&
        git init -q . && git add -A && git -c user.name=b -c user.email=b@b commit -qm init)
    (cd "$1/copyup" && seq 1 1000 | xargs -n 500 touch)
}

run_variant() { # NAME: echoes "op ms" lines for one repetition
    rm -rf "$T/lower" "$T/upper" "$T/work" "$T/stage" "$T/mnt"
    cp -a "$T/template" "$T/lower"
    mkdir -p "$T/upper" "$T/work" "$T/mnt"
    case $1 in
    native) sh "$W" "$T/lower" ;;
    kernel-overlayfs)
        unshare -m sh -c "mount -t overlay overlay -o lowerdir=$T/lower,upperdir=$T/upper,workdir=$T/work $T/mnt && sh $W $T/mnt" ;;
    fuse-overlayfs)
        fuse-overlayfs -o "lowerdir=$T/lower,upperdir=$T/upper,workdir=$T/work" "$T/mnt"
        sh "$W" "$T/mnt"; fusermount3 -u "$T/mnt" ;;
    pvisor)
        "$PVISOR" run --stage "$T/stage" --workspace "$T/lower" -- sh "$W" "$T/lower" ;;
    esac
}

echo "building the lower template ($REPO_FILES-file git repo, 1000 copy-up files)..."
mkdir -p "$T/template"
make_lower "$T/template"
variants="native kernel-overlayfs pvisor"
command -v fuse-overlayfs >/dev/null && variants="native kernel-overlayfs fuse-overlayfs pvisor"
for v in $variants; do
    r=0
    while [ $r -lt "$REPS" ]; do run_variant "$v" | sed "s/^/$v /" >> "$T/results"; r=$((r + 1)); done
done
echo
echo "SEQ_MB=${SEQ_MB:-1024} NFILES=${NFILES:-20000} REPS=$REPS ($(nproc) CPUs, kernel $(uname -r))"
for op in $(awk '{print $2}' "$T/results" | sort -u); do
    native=$(awk -v o="$op" '$1 == "native" && $2 == o {print $3}' "$T/results" | p50)
    for v in $variants; do
        awk -v o="$op" -v v="$v" '$1 == v && $2 == o {print $3}' "$T/results" | summarize "$op $v" | tr -d '\n'
        p=$(awk -v o="$op" -v v="$v" '$1 == v && $2 == o {print $3}' "$T/results" | p50)
        echo " $p $native" | awk '{ if ($2 > 0) printf "  x%.2f of native\n", $1 / $2; else print "" }'
    done
done
if [ -x /usr/bin/time ]; then
    rm -rf "$T/stage"
    rss=$(/usr/bin/time -f %M "$PVISOR" run --stage "$T/stage" --workspace "$T/template" -- git -C "$T/template/repo" status --porcelain 2>&1 >/dev/null | tail -n1)
    echo "pvisor supervisor peak RSS, git status over $REPO_FILES files: ${rss} KiB"
fi
