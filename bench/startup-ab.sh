#!/bin/sh
# Two pvisor binaries' `run --safe -- true`, alternating run by run (A B,
# then B A), for comparing a change on a machine others share: each round
# prints both distributions and the median of the paired differences
# (B - A, one pair per round of the loop) with its 95% confidence
# interval, which a slow phase of the machine hits on both sides.  With
# END=1 (needs perf, as root), also the time from `true`'s exit
# (sched_process_exit) to pvisor's return: the end of the run alone.
# Not a test.
#   usage: bench/startup-ab.sh BIN_A BIN_B [RUNS] [ROUNDS]   (default 200, 3)
#   BENCH_FS=ext4: as bench/startup.sh (root; a fresh journaled ext4 on a
#   loop image in BENCH_DIR, default /var/tmp)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 2 ] || { echo "usage: bench/startup-ab.sh BIN_A BIN_B [RUNS] [ROUNDS]" >&2; exit 2; }
A=$(realpath "$1"); B=$(realpath "$2"); RUNS=${3:-200}; ROUNDS=${4:-3}
command -v cc >/dev/null || { echo "needs a C compiler (cc)" >&2; exit 1; }
bench_workdir ab
# The timer: marks each run's start (close(1000080 + binary)) and end
# (close(1000099)) for perf; the paired statistics itself.
cat > "$W/ab.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double at(double *v, int n, double q) { return v[(int)((n - 1) * q)]; }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    char *bin[2] = {argv[2], argv[3]};
    double *t[2] = {calloc(n, sizeof(double)), calloc(n, sizeof(double))}, *d = calloc(n, sizeof(double));
    int null = open("/dev/null", O_RDWR);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, null, 1);
    posix_spawn_file_actions_adddup2(&fa, null, 2);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 2; k++) {
            int b = r & 1 ? 1 - k : k;
            char *av[] = {bin[b], "run", "--safe", "--", "true", NULL};
            struct timespec s, e;
            pid_t p;
            int st;
            close(1000080 + b);
            clock_gettime(CLOCK_MONOTONIC, &s);
            if (posix_spawn(&p, bin[b], &fa, NULL, av, environ) != 0 || waitpid(p, &st, 0) < 0 || st != 0) {
                fprintf(stderr, "%s failed\n", bin[b]);
                return 1;
            }
            clock_gettime(CLOCK_MONOTONIC, &e);
            close(1000099);
            t[b][r] = (e.tv_sec - s.tv_sec) * 1e3 + (e.tv_nsec - s.tv_nsec) / 1e6;
        }
    for (int r = 0; r < n; r++)
        d[r] = t[1][r] - t[0][r];
    qsort(d, n, sizeof(double), cmp);
    int lo = (int)(n / 2 - 0.98 * sqrt(n)), hi = (int)(n / 2 + 0.98 * sqrt(n));
    lo = lo < 0 ? 0 : lo;
    hi = hi >= n ? n - 1 : hi;
    for (int b = 0; b < 2; b++) {
        qsort(t[b], n, sizeof(double), cmp);
        printf("  %s: n=%d p10=%.2f p50=%.2f p90=%.2f p99=%.2f ms\n", b ? "B" : "A", n, at(t[b], n, .1),
               at(t[b], n, .5), at(t[b], n, .9), at(t[b], n, .99));
    }
    printf("  B - A, paired: median %.3f ms (95%% CI %.3f .. %.3f)\n", d[n / 2], d[lo], d[hi]);
    return 0;
}
EOF
cc -O2 -o "$W/ab" "$W/ab.c" -lm
export XDG_STATE_HOME="$T/state"
cd "$T/ws"
echo "A: $A"
echo "B: $B"
echo "($(nproc) CPUs, kernel $(uname -r))"
i=1
while [ $i -le "$ROUNDS" ]; do
    echo "round $i (load $(cut -d' ' -f1-3 /proc/loadavg)):"
    if [ "${END:-}" = 1 ]; then
        perf record -q -o "$W/perf.data" -e syscalls:sys_enter_close --filter 'fd >= 1000000' \
            -e sched:sched_process_exit -- "$W/ab" "$RUNS" "$A" "$B"
        # the end: from the exit of a process named true to the timer's mark
        perf script -i "$W/perf.data" -F comm,time,event,trace 2>/dev/null | awk '
            function hex(s,   i, v) { v = 0; s = tolower(substr(s, 3))
                                      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
                                      return v }
            /sys_enter_close/ { fd = 0; for (k = 1; k <= NF; k++) if ($k == "fd:") fd = hex($(k + 1)) - 1000000
                                t = $2 + 0
                                if (fd == 80 || fd == 81) { b = fd - 80; te = -1 }
                                else if (fd == 99 && te >= 0) print b, (t - te) * 1000 }
            /sched_process_exit/ && $1 == "true" { te = $2 + 0 }' > "$W/end"
        for b in 0 1; do
            awk -v b=$b '$1 == b { print $2 }' "$W/end" | sort -n |
                awk -v l="$( [ $b = 0 ] && echo A || echo B)" '{ v[NR] = $1 } END {
                    if (NR) printf "  %s: end (true exit -> pvisor return): p10=%.2f p50=%.2f p90=%.2f ms\n", l,
                        v[int((NR - 1) * .1) + 1], v[int((NR - 1) * .5) + 1], v[int((NR - 1) * .9) + 1] }'
        done
    else
        "$W/ab" "$RUNS" "$A" "$B"
    fi
    rm -rf "$XDG_STATE_HOME"
    i=$((i + 1))
done
