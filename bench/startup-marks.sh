#!/bin/sh
# Where a `pvisor run --safe -- true` spends its time, step by step: a
# build with -Dstartup_marks=true (build-marks/, made here when missing)
# prints "MARK <CLOCK_MONOTONIC us> <name>" on stderr at each step of the
# supervisor (S_, P_, Q_, E_), its HOME-view thread (H_), the launcher
# (L_), the namespace's init (I_) and the command's process (C_).  Each
# mark's P25/P50/P75 from the supervisor's start (S0, in main: the
# dynamic loader's start before it is not counted), in order of median.
# The marks cost a write each; compare builds with bench/startup-ab.sh,
# not with this.  Not a test.
#   usage: bench/startup-marks.sh [RUNS]   (default 40)
#   BENCH_FS=ext4: as bench/startup.sh (root; a fresh journaled ext4 on a
#   loop image in BENCH_DIR, default /var/tmp)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${1:-40}
if [ ! -x build-marks/src/cli/pvisor ]; then
    meson setup build-marks -Dbuildtype=debugoptimized -Dstartup_marks=true >/dev/null
fi
ninja -C build-marks >/dev/null
PV=$PWD/build-marks/src/cli/pvisor
bench_workdir marks
export XDG_STATE_HOME="$T/state"
cd "$T/ws"
for _ in 1 2 3; do "$PV" run --safe -- true 2>/dev/null; done # warm caches
i=0
while [ $i -lt "$RUNS" ]; do
    "$PV" run --safe -- true 2>>"$W/marks" >/dev/null
    i=$((i + 1))
done
python3 - "$W/marks" <<'EOF'
import sys
runs, cur = [], None
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 3 or f[0] != "MARK":
        continue
    t, name = int(f[1]), f[2]
    if name == "S0":
        cur = {"S0": t}
        runs.append(cur)
    elif cur is not None and name not in cur:
        cur[name] = t
names = {n for r in runs for n in r}
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
rows = []
for n in names:
    v = [(r[n] - r["S0"]) / 1000.0 for r in runs if n in r]
    rows.append((q(v, 0.5), n, len(v), q(v, 0.25), q(v, 0.75)))
rows.sort()
print(f"{len(runs)} runs of 'run --safe -- true'; ms from S0 (the supervisor's main)")
print(f"{'mark':<18} {'n':>3} {'p25':>7} {'p50':>7} {'p75':>7} {'step':>6}")
prev = 0.0
for med, n, cnt, lo, hi in rows:
    print(f"{n:<18} {cnt:>3} {lo:7.2f} {med:7.2f} {hi:7.2f} {med - prev:6.2f}")
    prev = med
EOF
