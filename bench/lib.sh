# bench/lib.sh: helpers shared by the benchmarks (sourced).
# Timing is wall clock in milliseconds; distributions, never one number.
now_ms() { date +%s%N | awk '{printf "%.3f\n", $1 / 1000000}'; }

# summarize LABEL < samples(ms, one per line): N, P50, P95, P99, mean
summarize() {
    sort -n | awk -v label="$1" '
        { v[NR] = $1; s += $1 }
        END {
            if (NR == 0) { printf "%-34s no samples\n", label; exit }
            p50 = v[int((NR - 1) * 0.50) + 1]; p95 = v[int((NR - 1) * 0.95) + 1]; p99 = v[int((NR - 1) * 0.99) + 1]
            printf "%-34s n=%-4d p50=%9.2f ms  p95=%9.2f ms  p99=%9.2f ms  mean=%9.2f ms\n", label, NR, p50, p95, p99, s / NR
        }'
}

# p50 of samples on stdin (for ratios)
p50() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR - 1) * 0.5) + 1]; else print 0 }'; }

# bench_workdir NAME: W, a scratch directory (removed at exit: the EXIT
# trap), and T, where the workspace T/ws (made) and the state go: W itself,
# or with BENCH_FS=ext4 (root) a fresh journaled ext4, as distributions
# install it, loop-mounted at W/mnt from a sparse image in BENCH_DIR
# (default /var/tmp).
bench_workdir() {
    W=$(mktemp -d "/tmp/pvisor-$1.XXXXXX")
    if [ "${BENCH_FS:-}" = ext4 ]; then
        IMG=$(mktemp "${BENCH_DIR:-/var/tmp}/pvisor-bench-ext4.XXXXXX")
        truncate -s 2G "$IMG" && mkfs.ext4 -q -F "$IMG" && mkdir "$W/mnt" && mount -o loop "$IMG" "$W/mnt"
        trap 'cd /; umount "$W/mnt"; rm -f "$IMG"; rm -rf "$W"' EXIT
        T=$W/mnt
    else
        trap 'rm -rf "$W"' EXIT
        T=$W
    fi
    mkdir -p "$T/ws"
}
