#!/bin/sh
# bench/apply.sh: latency of `pvisor apply` (conflict check included) and of
# `pvisor checkpoint` for
# 10, 1,000 and 20,000 changed files, next to a plain `cp -a` of the same
# files as the baseline, measured in the same run: `cp -a` over the
# workspace (overwrites the existing inodes in place: not atomic) and `cp -a`
# into a new directory (allocates new inodes, as apply's temp+rename must).
# Prints P50/P95 (ms) per size and the bytes written.  Not a test.
# Note: apply gives every file a new inode (temp + rename) and frees the
# old one; cp -a over the workspace rewrites the existing inodes.  On ext4
# without a journal (the development VM), allocating an inode scans past
# every inode of the group deleted in the last minute (ext4
# recently_deleted()), and the remove/recreate churn of the rounds leaves
# tens of thousands of them: in steady state that scan is most of apply's
# time at 1,000+ files (~0.1-0.2 ms per file, kernel CPU), and it varies
# with where the file system puts the round's directories.  "cp-new" pays
# it only when its new directory lands in such a group.  Freed blocks are
# discarded synchronously there (-o discard, no journal): apply (renames)
# and cp -a over the workspace (truncation) both pay that.
#
# Usage: bench/apply.sh [PVISOR] [ROUNDS]   (default: build/src/cli/pvisor, 7)
# Env:   SIZES="10 1000 20000"  FILE_BYTES=4096  BENCH_DIR=/var/tmp (same fs as stages)
#        BENCH_FS=ext4: as root, run on a fresh ext4 made with mkfs.ext4's
#        defaults (journaled, as distributions install it), loop-mounted
#        from a sparse image in BENCH_DIR; the flushes then cost a journal
#        commit each, and the inode allocator has no recently freed inodes
#        to scan past (see above).
set -eu
P=${1:-${PVISOR:-build/src/cli/pvisor}}
P=$(realpath "$P")
ROUNDS=${2:-7}
SIZES=${SIZES:-"10 1000 20000"}
FILE_BYTES=${FILE_BYTES:-4096}
MNT=
if [ "${BENCH_FS:-}" = ext4 ]; then
    IMG=$(mktemp "${BENCH_DIR:-/var/tmp}/pvisor-bench-ext4.XXXXXX")
    MNT=$(mktemp -d /tmp/pvisor-bench-mnt.XXXXXX)
    truncate -s 8G "$IMG" && mkfs.ext4 -q -F "$IMG" && mount -o loop "$IMG" "$MNT"
    echo "# on a fresh journaled ext4 (loop image $IMG): $(findmnt -no OPTIONS "$MNT")"
    B=$(mktemp -d "$MNT/pvisor-bench-apply.XXXXXX")
    trap 'rm -rf "$B"; umount "$MNT"; rmdir "$MNT"; rm -f "$IMG"' EXIT
else
    B=$(mktemp -d "${BENCH_DIR:-/var/tmp}/pvisor-bench-apply.XXXXXX")
    echo "# on $(findmnt -no FSTYPE,OPTIONS -T "$B")"
    trap 'rm -rf "$B"' EXIT
fi
export XDG_STATE_HOME="$B/state"
[ "$(id -u)" -ne 0 ] || { [ ! -c /dev/fuse ] || chmod 0666 /dev/fuse; }

now_ns() { date +%s%N; }
# pct FILE P: the P-th percentile (nearest rank) of the numbers in FILE
pct() { sort -n "$1" | awk -v p="$2" '{v[NR]=$1} END {i=int((p/100)*NR+0.999); if(i<1)i=1; if(i>NR)i=NR; printf "%.1f", v[i]}'; }

printf '%-7s %-6s %10s %10s %10s %10s %10s %10s %9s %9s %10s %10s %10s\n' files rounds apply_p50 apply_p95 cp_p50 cp_p95 cpnew_p50 cpnew_p95 vs_cp vs_cpnew bytes ckpt_p50 ckpt_p95
for n in $SIZES; do
    W=$B/ws-$n S=$B/st-$n
    mkdir -p "$W"
    i=0; d=0
    while [ $i -lt "$n" ]; do
        [ $((i % 500)) -eq 0 ] && { d=$((i / 500)); mkdir -p "$W/d$d"; }
        head -c "$FILE_BYTES" /dev/urandom > "$W/d$d/f$i"
        i=$((i + 1))
    done
    # the agent rewrites every file (same size, new bytes); one run per 4
    # directories (2,000 files): the overlay keeps descriptors per inode
    k=0
    while [ $k -le "$d" ]; do
        "$P" run --stage "$S" --workspace "$W" -- sh -c "cd '$W' && for f in d$k/f* d$((k+1))/f* d$((k+2))/f* d$((k+3))/f*; do [ -e \"\$f\" ] || continue; head -c $FILE_BYTES /dev/urandom > \"\$f\"; done" >/dev/null
        k=$((k + 4))
    done
    # stage copies via fork: a cp -a would make the inode-origin map stale
    cp -a "$W" "$W.tmpl"; "$P" fork --stage "$S" "$S.tmpl" >/dev/null
    : > "$B/apply.ms"; : > "$B/cp.ms"; : > "$B/cpnew.ms"; : > "$B/ckpt.ms"; bytes=0
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        rm -rf "$W" "$S"; cp -a "$W.tmpl" "$W"; "$P" fork --stage "$S.tmpl" "$S" >/dev/null; sync
        t0=$(now_ns)
        "$P" checkpoint --stage "$S" --name "bench$r" >/dev/null
        t1=$(now_ns)
        echo "$(( (t1 - t0) / 1000 ))" | awk '{printf "%.3f\n", $1/1000}' >> "$B/ckpt.ms"
        rm -rf "$S/checkpoints"; sync
        t0=$(now_ns)
        out=$("$P" apply --stage "$S")
        t1=$(now_ns)
        echo "$(( (t1 - t0) / 1000 ))" | awk '{printf "%.3f\n", $1/1000}' >> "$B/apply.ms"
        bytes=$(echo "$out" | sed -n 's/.*written (\([0-9]*\) bytes).*/\1/p')
        # baseline: cp -a of the same changed files over a fresh workspace copy
        rm -rf "$W"; cp -a "$W.tmpl" "$W"; sync
        t0=$(now_ns)
        (cd "$S/upper" && cp -a . "$W/")
        t1=$(now_ns)
        echo "$(( (t1 - t0) / 1000 ))" | awk '{printf "%.3f\n", $1/1000}' >> "$B/cp.ms"
        rm -rf "$B/fresh"; mkdir "$B/fresh"; sync
        t0=$(now_ns)
        (cd "$S/upper" && cp -a . "$B/fresh/")
        t1=$(now_ns)
        echo "$(( (t1 - t0) / 1000 ))" | awk '{printf "%.3f\n", $1/1000}' >> "$B/cpnew.ms"
        rm -rf "$B/fresh"
        r=$((r + 1))
    done
    a50=$(pct "$B/apply.ms" 50) a95=$(pct "$B/apply.ms" 95) c50=$(pct "$B/cp.ms" 50) c95=$(pct "$B/cp.ms" 95)
    n50=$(pct "$B/cpnew.ms" 50) n95=$(pct "$B/cpnew.ms" 95)
    ratio=$(awk -v a="$a50" -v c="$c50" 'BEGIN { if (c > 0) printf "%.2fx", a / c; else print "-" }')
    ratio2=$(awk -v a="$a50" -v c="$n50" 'BEGIN { if (c > 0) printf "%.2fx", a / c; else print "-" }')
    k50=$(pct "$B/ckpt.ms" 50) k95=$(pct "$B/ckpt.ms" 95)
    printf '%-7s %-6s %10s %10s %10s %10s %10s %10s %9s %9s %10s %10s %10s\n' "$n" "$ROUNDS" "$a50" "$a95" "$c50" "$c95" "$n50" "$n95" "$ratio" "$ratio2" "$bytes" "$k50" "$k95"
    rm -rf "$W" "$S" "$W.tmpl" "$S.tmpl"
done
echo "# ms; apply includes the conflict check (SHA-256 of every replaced workspace file) and fsyncs;"
echo "# cp -a neither checks nor fsyncs.  ckpt: pvisor checkpoint of the same stage (copy of upper + journal,"
echo "# syncfs; compare with cpnew)."
