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
