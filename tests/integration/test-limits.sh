#!/bin/sh
# Integration tests for `pvisor run --limit` (resources): what the command
# really gets inside the sandbox (its /proc/self/limits, a memory hog, a CPU
# spinner, a bounded fork bomb), what the Bundle says about it (mechanism
# per limit, the resources level), and --strict.  TAP output.
#
# Which mechanism holds a limit depends on the host: a delegated cgroup v2
# with memory/pids (not on the development machines, whose memory and pids
# controllers are bound to cgroup v1), the writable cgroup2 hierarchy root
# as root (the CPU-time budget needs no controller), or rlimits.  Every
# check below asserts the outcome of the mechanism the Bundle names, so a
# host cannot make a test pass by reporting the weaker one.
. "$(dirname "$0")/../lib.sh"
SCHEMA="$SRCDIR/docs/bundle.schema.json"
VALIDATE="/usr/bin/python3 $SRCDIR/tests/validate-bundle.py $SCHEMA"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then chmod 0666 /dev/fuse; fi
W="$T/ws"; mkdir -p "$W"; cd "$W"
bundle() { echo "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"; }
mech() { jq -r ".dimensions.resources.evidence.limits.$1.mechanism" "$(bundle)"; }
safe() { timeout 120 "$PVISOR" run --safe --workspace "$W" "$@"; }

# --- usage errors: exit 2, one line and a hint, nothing written ---------------
rm -rf "$XDG_STATE_HOME"
for args in "--safe --limit mem -- true" "--safe --limit disk=1G -- true" "--safe --limit mem=1G,mem=2G -- true" \
            "--safe --limit pids=0 -- true" "--safe --limit cpu=soon -- true" "--safe --limit mem=12Q -- true" \
            "--limit pids=5 -- true" "--stage auto --limit pids=5 -- true"; do
    # shellcheck disable=SC2086
    "$PVISOR" run $args >out 2>err; rc=$?
    eq "$rc" 2 "usage error exits 2: run $args"
    check "usage error is one line plus a hint: run $args" sh -c "[ \$(wc -l < err) -eq 2 ] && head -n1 err | grep -q '^pvisor run: '"
done
eq "$(run_count)" 0 "usage errors wrote no run"
check "help documents --limit" sh -c "'$PVISOR' help run | grep -q -- '--limit mem=SIZE,pids=N,cpu=DURATION'"

# --- no --limit: resources not requested, honest ------------------------------
safe -- true; rc=$?
eq "$rc:$(jq -r '.dimensions.resources | .requested + " " + .effective' "$(bundle)")" "0:none unenforced" \
   "--safe without --limit: resources not requested, recorded unenforced"
check "  its evidence shows the baseline rlimits from inside (core 1: no dump, not even to a pipe helper)" \
    sh -c "[ \"\$(jq -r '.dimensions.resources.evidence.rlimits_inside.core | [.soft, .hard] | join(\" \")' '$(bundle)')\" = '1 1' ]"

# --- the private /tmp and /dev/shm: their size, and a run that filled one ------
# Both are tmpfs mounts of the sandbox's own (1 GiB and 64 MiB, one inode per
# 2 KiB); --limit tmp=/shm= sizes them.  At the run's end the supervisor
# reads each one's use (fstatfs on a descriptor init handed over) into the
# resources evidence, and says on stderr (and in the Bundle's warnings) which
# was full or nearly: a tool that got ENOSPC there reports it as its own
# failure.  As root and as an unprivileged user (tmpfs_runs twice).
tmpfs() { jq -r ".dimensions.resources.evidence.private_tmpfs[\"$1\"].$2" "$(bundle)"; }
n0=$(run_count)
"$PVISOR" run --safe --limit tmp=bad -- true >out 2>err; rc=$?
eq "$rc:$(head -n1 err)" "2:pvisor run: --limit tmp: 'bad' is not a size of at least 1M for the sandbox's /tmp (examples: 512M, 4G)" \
   "--limit tmp=bad: exit 2, saying what a size is"
"$PVISOR" run --safe --limit shm=0 -- true >out 2>err; rc=$?
eq "$rc:$(grep -c "^pvisor run: --limit shm: '0' is not a size of at least 1M" err)" "2:1" "--limit shm=0: exit 2"
memk=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
"$PVISOR" run --safe --limit "tmp=${memk}K" -- true >out 2>err; rc=$?
eq "$rc:$(grep -c "^pvisor run: --limit tmp: .* is more than half of this host's memory .*give at most tmp=[0-9]*M" err)" "2:1" \
   "--limit tmp= of all this host's memory: exit 2, saying the most it takes"
"$PVISOR" run --stage auto --limit tmp=8M -- true >out 2>err; rc=$?
eq "$rc:$(grep -c "^pvisor run: --limit only applies to --safe or --filesystem sandbox" err)" "2:1" \
   "--limit tmp= without a sandbox (no private /tmp): exit 2"
# a rule for /dev/shm (or /tmp) puts the host's in place of the private
# tmpfs, or hides it: a size for it would size nothing (it was taken and
# did nothing)
for kind in rw ro deny; do
    "$PVISOR" run --safe --access "$kind:/dev/shm" --limit shm=8M -- true >out 2>err; rc=$?
    eq "$rc:$(head -n1 err)" "2:pvisor run: --limit shm= sizes the sandbox's private /dev/shm, which --access $kind:/dev/shm $([ $kind = deny ] && echo hides || echo "replaces with the host's"); give one of them" \
       "--limit shm= with --access $kind:/dev/shm: exit 2, naming both"
done
eq "$(run_count)" "$n0" "  none of them wrote a run"
"$PVISOR" run --safe --access deny:/dev/shm --limit tmp=8M -- true >out 2>err; rc=$?
eq "$rc" 0 "  --limit tmp= beside --access deny:/dev/shm runs (the rule is /dev/shm's, the size /tmp's)"
# without tmp=, /tmp is 1 GiB, or half of the host's memory when that is
# less (the VM suite's 2 GiB machine: 1 GiB was more than half of it)
want=$((1 << 30)); [ $((memk * 512)) -lt $want ] && want=$((memk * 512))
out=$(safe -- stat -f -c '%b %S' /tmp 2>err); rc=$?
eq "$rc:$out" "0:$(( (want + 4095) / 4096 )) 4096" \
   "without --limit tmp=, the private /tmp is 1 GiB or half of the host's memory, the less ($((want >> 20)) MiB here)"
check "help documents --limit tmp= and shm=" sh -c "'$PVISOR' help run | grep -q -- '--limit tmp=SIZE,shm=SIZE'"

# in a cgroup with a memory limit (a container's), the half is of that
# limit when it is less than the host's memory: the tmpfs's pages count
# against it, and a 1 GiB /tmp in a 600 MiB container could be filled
# only by OOM-killing what runs there.  cgroup v2's memory.max where the
# memory controller is there (the VM suite), v1's memory.limit_in_bytes
# on a hybrid host (the development machines).
memcg=
if [ "$(id -u)" -eq 0 ]; then
    if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
        memcg=/sys/fs/cgroup/pvisor-test-memcg-$$ memfile=memory.max
    elif [ "$(stat -f -c %T /sys/fs/cgroup/memory 2>/dev/null)" = cgroupfs ]; then
        memcg=/sys/fs/cgroup/memory/pvisor-test-memcg-$$ memfile=memory.limit_in_bytes
    fi
    if [ -n "$memcg" ] && ! { mkdir "$memcg" && echo $((600 << 20)) > "$memcg/$memfile"; }; then
        rmdir "$memcg" 2>/dev/null; memcg=
    fi
fi
if [ -n "$memcg" ]; then
    # in_memcg CMD...: CMD as a process of that cgroup
    in_memcg() { sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$memcg" "$@"; }
    out=$(in_memcg timeout 120 "$PVISOR" run --safe --workspace "$W" -- stat -f -c '%b %S' /tmp 2>err); rc=$?
    eq "$rc:$out" "0:$((300 << 8)) 4096" "in a cgroup limited to 600 MiB ($memfile), the private /tmp is 300 MiB"
    in_memcg "$PVISOR" run --safe --workspace "$W" --limit tmp=400M -- true >out 2>err; rc=$?
    eq "$rc:$(head -n1 err)" "2:pvisor run: --limit tmp: 400 MiB is more than half of the memory limit of pvisor's cgroup (600 MiB): the sandbox's /tmp is a tmpfs, whose files are kept in memory; give at most tmp=300M" \
       "  --limit tmp=400M there: exit 2, naming the cgroup's limit"
    out=$(in_memcg timeout 120 "$PVISOR" run --safe --workspace "$W" --limit tmp=300M -- sh -c 'head -c 310M /dev/zero > /tmp/fill; stat -f -c %b /tmp' 2>err); rc=$?
    eq "$rc:$out:$(grep -c "^pvisor run: note: the sandbox's /tmp was full when the run ended .*; at most half of the memory limit of pvisor's cgroup, 300.0 MiB)" err)" \
       "0:$((300 << 8)):1" "  --limit tmp=300M there runs; filled, the note names the cgroup's limit as the most it takes"
    if command -v setpriv >/dev/null; then
        TM="$T/memcg-u"; mkdir -p "$TM/ws" "$TM/state" "$TM/home"; chown -R 65534:65534 "$TM"
        out=$(cd "$TM/ws" && in_memcg env HOME="$TM/home" XDG_STATE_HOME="$TM/state" timeout 120 \
              setpriv --reuid=65534 --regid=65534 --clear-groups "$PVISOR" run --safe -- stat -f -c '%b %S' /tmp 2>err); rc=$?
        eq "$rc:$out" "0:$((300 << 8)) 4096" "  as uid 65534 in that cgroup: the same 300 MiB /tmp"
    else
        skip "the private /tmp in a cgroup with a memory limit as an unprivileged user" "needs setpriv"
    fi
    rmdir "$memcg"
elif [ "${CI:-}" = true ]; then
    not_ok "a cgroup with a memory limit to run pvisor in (as root, cgroup v2 with memory or v1's memory hierarchy)"
else
    skip "the private /tmp in a cgroup with a memory limit" "needs root and a memory cgroup (v2 with the memory controller, or v1's)"
fi

# --limit mem= bounds them too: under a cgroup leaf the tmpfs's pages
# count against its memory.max, and a /tmp larger than half of it could be
# filled only by OOM-killing the command; with the rlimit fallback the
# files are still the tree's memory.  mem=64M: /tmp and /dev/shm 32 MiB.
out=$(safe --limit mem=64M -- stat -f -c '%b %S' /tmp /dev/shm 2>err); rc=$?
eq "$rc:$(echo $out)" "0:8192 4096 8192 4096" "--limit mem=64M: the private /tmp and /dev/shm are 32 MiB, half of it"
safe --limit mem=200M,tmp=150M -- true >out 2>err; rc=$?
eq "$rc:$(head -n1 err)" "2:pvisor run: --limit tmp: 150 MiB is more than half of --limit mem (200 MiB): the sandbox's /tmp is a tmpfs, whose files are kept in memory; give at most tmp=100M" \
   "  --limit mem=200M,tmp=150M: exit 2, naming mem"
safe --limit mem=1M,tmp=1M -- true >out 2>err; rc=$?
eq "$rc:$(head -n1 err)" "2:pvisor run: --limit tmp: a size needs at least 2 MiB of --limit mem (1 MiB): the sandbox's /tmp is a tmpfs, whose files are kept in memory, of at most half of it; leave tmp= out (a 512 KiB /tmp)" \
   "  --limit mem=1M,tmp=1M: exit 2, saying what can be given (not 'at most tmp=0M')"
safe --limit mem=64M -- sh -c 'head -c 33M /dev/zero > /tmp/fill' >out 2>err; rc=$?
eq "$rc:$(grep -c "^pvisor run: note: the sandbox's /tmp was full when the run ended (32.0 MiB of its 32.0 MiB used; .*(now 32.0 MiB; at most half of --limit mem, 32.0 MiB)$" err)" "1:1" \
   "  filled under mem=64M: the note names mem as what bounds it"

# tmpfs_runs WHO RUN...: the runs, RUN the command that starts pvisor run
# --safe in a workspace of the user's
tmpfs_runs() {
    who=$1; shift
    out=$("$@" --limit tmp=8M,shm=16M -- stat -f -c '%b %S %c' /tmp /dev/shm 2>err); rc=$?
    eq "$rc:$(echo $out)" "0:2048 4096 4096 4096 4096 8192" \
       "$who: --limit tmp=8M,shm=16M: statfs inside shows an 8 MiB /tmp with 4,096 inodes and a 16 MiB /dev/shm"
    eq "$(jq -c .requested_policy.limits "$(bundle)")" \
       '{"mem_bytes":null,"pids":null,"cpu_seconds":null,"tmp_bytes":8388608,"shm_bytes":16777216}' \
       "  the Bundle records the sizes asked for"
    eq "$(jq -r '.dimensions.resources.requested' "$(bundle)"):$(grep -c "^pvisor run: note: the sandbox's" err)" "none:0" \
       "  sizes are not limits of the tree (no resources requested), and a run that filled nothing says nothing"

    # blocks: a 5 MiB file in a 4 MiB /tmp
    "$@" --limit tmp=4M -- sh -c 'head -c 5M /dev/zero > /tmp/big' >out 2>err; rc=$?
    b=$(bundle)
    eq "$rc:$(tmpfs /tmp size_bytes):$(tmpfs /tmp used_bytes):$(tmpfs /tmp blocks_full):$(tmpfs /tmp inodes_full)" \
       "1:4194304:4194304:true:false" "$who: a command that filled a 4 MiB /tmp: the Bundle says 4 MiB of 4 MiB used, blocks full"
    check "  its Bundle validates" $VALIDATE "$b"
    eq "$(grep -c '^pvisor run: note: ' err):$(grep -c "^pvisor run: note: the sandbox's /tmp was full when the run ended (4.0 MiB of its 4.0 MiB used; a private tmpfs): .*No space left on device.*--limit tmp=SIZE (now 4.0 MiB" err)" "1:1" \
       "  one note on stderr names /tmp, its size, what filled it and --limit tmp=SIZE"
    eq "$(jq '[.warnings[] | select(startswith("the sandbox'"'"'s /tmp was full"))] | length' "$b")" 1 "  and the Bundle's warnings have it"

    # inodes: 2,048 files in a 4 MiB /tmp (one per 2 KiB), each empty
    "$@" --limit tmp=4M -- sh -c 'i=0; while [ $i -lt 2100 ]; do echo -n > /tmp/f$i; i=$((i+1)); done 2>/dev/null; exit 0' >out 2>err; rc=$?
    eq "$rc:$(tmpfs /tmp used_bytes):$(tmpfs /tmp inodes):$(tmpfs /tmp used_inodes):$(tmpfs /tmp blocks_full):$(tmpfs /tmp inodes_full)" \
       "0:0:2048:2048:false:true" "$who: a command that made files until /tmp had no inode left: the Bundle says 2048 of 2048 inodes used"
    eq "$(grep -c "^pvisor run: note: the sandbox's /tmp was full when the run ended (2048 of its 2048 files used: it holds one per 2 KiB of its 4.0 MiB; .*--limit tmp=SIZE, a larger size for more files" err)" 1 \
       "  the note says it was its files, and that a larger size gives more"

    # /dev/shm at its default 64 MiB
    "$@" -- sh -c 'head -c 65M /dev/zero > /dev/shm/big' >out 2>err; rc=$?
    eq "$rc:$(tmpfs /dev/shm size_bytes):$(tmpfs /dev/shm used_bytes):$(tmpfs /dev/shm blocks_full):$(tmpfs /tmp blocks_full)" \
       "1:67108864:67108864:true:false" "$who: a command that filled /dev/shm (64 MiB): the Bundle says so, and /tmp was not"
    eq "$(grep -c '^pvisor run: note: ' err):$(grep -c "^pvisor run: note: the sandbox's /dev/shm was full when the run ended (64.0 MiB of its 64.0 MiB used; .*--limit shm=SIZE" err)" "1:1" \
       "  one note, naming /dev/shm and --limit shm=SIZE"

    # a quarter used: no note
    "$@" --limit tmp=4M -- sh -c 'head -c 1M /dev/zero > /tmp/some' >out 2>err; rc=$?
    eq "$rc:$(tmpfs /tmp used_bytes):$(tmpfs /tmp blocks_full):$(grep -c "^pvisor run: note: the sandbox's" err):$(jq '[.warnings[] | select(startswith("the sandbox'"'"'s"))] | length' "$(bundle)")" "0:1048576:false:0:0" \
       "$who: a command that used 1 MiB of a 4 MiB /tmp: recorded, no note, no warning"
}
tmpfs_runs "as $(id -un)" safe
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    TU="$T/tmpfs-u"; mkdir -p "$TU/ws" "$TU/state" "$TU/home"; chown -R 65534:65534 "$TU"
    XDG_STATE_HOME_ROOT=$XDG_STATE_HOME
    export XDG_STATE_HOME="$TU/state"
    asnobody() { (cd "$TU/ws" && HOME="$TU/home" timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups "$PVISOR" run --safe "$@"); }
    tmpfs_runs "uid 65534" asnobody
    export XDG_STATE_HOME="$XDG_STATE_HOME_ROOT"
else
    skip "the private /tmp and /dev/shm as an unprivileged user" "needs root to switch to an unprivileged user"
fi

# --- as root -----------------------------------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
    # mem: the hog is stopped; the mechanism named is the one that acted.
    out=$(safe --limit mem=64M -- "$PVAGENT" alloc 256 2>/dev/null); rc=$?
    b=$(bundle)
    check "mem run's Bundle validates" $VALIDATE "$b"
    case "$(mech mem)" in
    cgroup)
        eq "$rc" 137 "mem=64M (cgroup): a 256 MiB hog is killed by the kernel's OOM killer"
        check "  memory.events says oom_kill" sh -c "[ \$(jq .dimensions.resources.evidence.observed.oom_kill_events '$b') -ge 1 ]";;
    rlimit-per-process)
        eq "$rc:$out" "3:alloc-failed" "mem=64M (RLIMIT_AS): a 256 MiB allocation fails with ENOMEM"
        eq "$(jq -r .dimensions.resources.evidence.rlimits_inside.as.hard "$b")" 67108864 "  the command's RLIMIT_AS is 64 MiB"
        # --strict refuses it; the refusal named the dimension alone ("'resources'
        # was requested but is not enforced here"): now its level, why and
        # what to do, from the Bundle
        out=$(safe --strict --limit mem=64M -- echo RAN 2>err); rc=$?
        eq "$rc:$out:$(grep -c "^pvisor run: --strict: requested but not enforced here: resources is partial: per-process rlimits .*delegated cgroup v2" err)" "125::1" \
            "  --strict refuses it, saying which dimension, its level, why and what to do";;
    *) not_ok "mem=64M has a mechanism (got '$(mech mem)')";;
    esac
    out=$(safe --limit mem=64M -- "$PVAGENT" alloc 16 2>/dev/null); rc=$?
    eq "$rc:$out" "0:allocated" "mem=64M: a 16 MiB allocation still works"
    out=$(safe --limit mem=64M -- sh -c 'grep "Max address space" /proc/self/limits' 2>/dev/null)
    case "$(mech mem)" in
    rlimit-per-process) case "$out" in *67108864*67108864*) ok "inside: /proc/self/limits shows the 64 MiB address space";; *) not_ok "inside: /proc/self/limits shows the 64 MiB address space"; diag "$out";; esac;;
    *) case "$out" in *unlimited*) ok "inside: no RLIMIT_AS when the cgroup holds mem";; *) not_ok "inside: no RLIMIT_AS when the cgroup holds mem"; diag "$out";; esac;;
    esac

    # cpu: two spinners; the budget is for the whole tree when a cgroup
    # holds it (killed at 2 s of CPU in total), per process otherwise
    # (each gets SIGXCPU at 2 s of its own).
    start=$(date +%s)
    safe --limit cpu=2s -- "$PVAGENT" spin 60 2 2>err; rc=$?
    took=$(( $(date +%s) - start ))
    b=$(bundle)
    check "cpu run's Bundle validates" $VALIDATE "$b"
    case "$(mech cpu)" in
    cgroup)
        eq "$rc" 137 "cpu=2s (cgroup): the whole tree is killed when it used 2 s of CPU together"
        # the sandbox's init, doomed by that kill and left to the
        # supervisor, read as a leftover of the command
        eq "$(jq '[.warnings[] | select(test("leftover"))] | length' "$b")" 0 "  the Bundle warns of no leftover (the kill was of the whole tree)"
        usage=$(jq .dimensions.resources.evidence.observed.cpu_usage_usec "$b")
        # Per process, the two would use 4 s; the slack is the watch's
        # wake-up latency on a loaded machine.
        check "  the tree's CPU time is the budget (2.0 s <= $usage us < 3.5 s)" sh -c "[ $usage -ge 2000000 ] && [ $usage -lt 3500000 ]"
        eq "$(jq .dimensions.resources.evidence.observed.cpu_budget_exhausted "$b")" true "  the evidence says the budget was used up"
        check "  pvisor says so on stderr" grep -q "used up its CPU time" err
        leaf=$(jq -r .dimensions.resources.evidence.cgroup.leaf "$b")
        eq "$(jq -r .dimensions.resources.evidence.cgroup.command_in_leaf "$b")" true "  the command ran in the run's leaf ($leaf)"
        check "  the leaf is removed after the run" test ! -e "$leaf";;
    rlimit-per-process)
        eq "$rc" 152 "cpu=2s (RLIMIT_CPU): the spinner gets SIGXCPU";;
    *) not_ok "cpu=2s has a mechanism (got '$(mech cpu)')";;
    esac
    check "  and the run ended well before the spinners' 60 s (took ${took}s)" test "$took" -lt 40

    # The budget holds when the command has used up the supervisor's
    # descriptors (one per file it holds open in the view): the watch read
    # cpu.stat, and the kill wrote cgroup.kill, through new descriptors,
    # and at EMFILE the check waited for the whole budget's time and found
    # nothing spent: a tree holding 1,000 opens spun on unchecked.
    if [ "$(mech cpu)" = cgroup ]; then
        echo x > "$W/held"
        start=$(date +%s)
        (ulimit -n 512 && safe --limit cpu=2s -- /usr/bin/python3 -c '
import os, time
r, w = os.pipe()
for _ in range(2):
    if os.fork() == 0:
        fds = []
        try:
            while True:
                fds.append(os.open("held", os.O_RDONLY))
        except OSError:
            pass
        os.write(w, b"%d\n" % len(fds))
        time.sleep(120)
        os._exit(0)
rf = os.fdopen(r)
print("held", sum(int(rf.readline()) for _ in range(2)), flush=True)
end = time.time() + 30
while time.time() < end:
    pass
print("spun")
' >out 2>err); rc=$?
        took=$(( $(date +%s) - start ))
        b=$(bundle)
        eq "$rc:$(jq .dimensions.resources.evidence.observed.cpu_budget_exhausted "$b")" "137:true" \
           "cpu=2s: the tree is killed at its budget while it holds every descriptor the supervisor may open ($(tr "\n" " " <out))"
        check "  well before the spinner's 30 s (took ${took}s)" test "$took" -lt 25
    fi

    # pids as root: RLIMIT_NPROC never applies to host uid 0.  A limit
    # nothing here can install is refused, never dropped.
    out=$(safe --limit pids=20 -- "$PVAGENT" forks 40 10 2>err); rc=$?
    b=$(bundle)
    check "pids run's Bundle validates" $VALIDATE "$b"
    case "$(mech pids)" in
    cgroup)
        eq "$rc:$out" "0:forked=19 failed=21" "pids=20 (cgroup): the fork bomb gets 19 children besides itself";;
    unavailable)
        eq "$rc:$out" "125:" "pids=20 as root without a cgroup: refused before the command runs (125; RLIMIT_NPROC exempts uid 0)"
        eq "$(jq -r '.state + " " + .dimensions.resources.effective' "$b")" "setup_failed unavailable" "  Bundle: setup_failed, resources unavailable"
        check "  a note says why" sh -c "jq -r '.dimensions.resources.notes[]' '$b' | grep -q 'does not apply to processes of host uid 0'"
        check "  one actionable line on stderr" sh -c "[ \$(wc -l < err) -eq 1 ] && grep -q 'limit pids cannot be installed here.*pvisor doctor' err"
        out=$(safe --strict --limit pids=20 -- echo RAN 2>err); rc=$?
        eq "$rc:$out" "125:" "  with --strict too"
        check "  the refusal names pids" grep -q "limit pids" err;;
    *) not_ok "pids=20 as root has a mechanism (got '$(mech pids)')";;
    esac

    # The command cannot leave its leaf: no /sys, no mount.
    out=$(safe --limit cpu=30s -- sh -c 'for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do
              (echo $$ > "$f") 2>/dev/null && echo "MOVED via $f"; done; grep "^0::" /proc/self/cgroup' 2>/dev/null)
    case "$out" in
    *MOVED*) not_ok "the command cannot move itself out of its cgroup"; diag "$out";;
    *"0::$(jq -r .dimensions.resources.evidence.cgroup.command_cgroup "$(bundle)")"*) ok "the command cannot move itself out of its cgroup (no cgroupfs inside)";;
    *) if [ "$(mech cpu)" = cgroup ]; then not_ok "the command stays in its leaf"; diag "$out"; else ok "the command cannot reach a cgroupfs (no leaf here)"; fi;;
    esac

    # --strict with cpu only: runs exactly when the cgroup holds it.
    out=$(safe --strict --limit cpu=30s -- echo RAN 2>err); rc=$?
    if [ "$(mech cpu)" = cgroup ] && [ "$rc" = 125 ] && ! grep -q "resources is" err &&
       [ "$(jq -r .dimensions.resources.effective "$(bundle)")" = enforced ]; then
        # another dimension is not enforced on this host (the test VM's
        # 9p root cannot be idmapped: reads partial as root)
        ok "--strict --limit cpu=30s: resources enforced by the cgroup (refused for another dimension: $(head -c 80 err | tr "\n" " "))"
    elif [ "$(mech cpu)" = cgroup ]; then
        eq "$rc:$out" "0:RAN" "--strict --limit cpu=30s runs when the cgroup holds the budget (resources enforced)"
    else
        eq "$rc:$out" "125:" "--strict --limit cpu=30s refuses a per-process budget"
    fi
else
    skip "--limit as root" "the suite is not running as root"
fi

# --- as an unprivileged user ----------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U="$T/user"; mkdir -p "$U/ws"; chown -R 65534:65534 "$U"
    as() { (cd "$U/ws" && timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
            env HOME="$U" XDG_STATE_HOME="$U/state" "$@"); }
    ubundle() { echo "$U/state/pvisor/runs/$(ls -1 "$U/state/pvisor/runs" | sort | tail -n 1)/bundle.json"; }
    umech() { jq -r ".dimensions.resources.evidence.limits.$1.mechanism" "$(ubundle)"; }

    # Host processes of the same uid: 30 sleepers.  If RLIMIT_NPROC counted
    # the uid host-wide, pids=20 would refuse every fork of the run.
    HOSTPIDS=""
    for i in $(seq 30); do setpriv --reuid=65534 --regid=65534 --clear-groups sleep 120 & HOSTPIDS="$HOSTPIDS $!"; done
    at_exit "kill $HOSTPIDS"
    out=$(as "$PVISOR" run --safe --limit pids=20 -- "$PVAGENT" forks 40 10 2>/dev/null); rc=$?
    b=$(ubundle)
    check "uid 65534 pids run's Bundle validates" $VALIDATE "$b"
    case "$(umech pids)" in
    rlimit-nproc-userns)
        eq "$rc:$out" "0:forked=19 failed=21" \
           "uid 65534, pids=20 (RLIMIT_NPROC in the run's user namespace): a bounded fork bomb gets 19 children, 30 host processes of the same uid do not count"
        eq "$(jq -r .dimensions.resources.effective "$b")" enforced "  resources enforced (the count is the run's tree)";;
    cgroup) eq "$rc:$out" "0:forked=19 failed=21" "uid 65534, pids=20 (cgroup): the fork bomb gets 19 children";;
    *) not_ok "uid 65534 pids=20 has a tree-wide mechanism (got '$(umech pids)')";;
    esac
    out=$(as "$PVISOR" run --safe --limit pids=20 -- /usr/bin/python3 -c '
import resource
try:
    resource.setrlimit(resource.RLIMIT_NPROC, (100000, 100000)); print("RAISED")
except (ValueError, OSError) as e:
    print("refused")
print(resource.getrlimit(resource.RLIMIT_NPROC))' 2>/dev/null)
    eq "$out" "$(printf 'refused\n(20, 20)')" "  the command cannot raise its RLIMIT_NPROC"
    alive=0; for p in $HOSTPIDS; do kill -0 "$p" 2>/dev/null && alive=$((alive+1)); done
    eq "$alive" 30 "  the host's processes of that uid are untouched"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'sh -c "echo forked" & wait'); 
    eq "$out" forked "  and the host uid can still fork"
    out=$(as "$PVISOR" run --safe --strict --limit pids=20 -- "$PVAGENT" exit 0 2>&1); rc=$?
    if [ "$(umech pids)" = rlimit-nproc-userns ] || [ "$(umech pids)" = cgroup ]; then
        eq "$rc" 0 "  --strict --limit pids=20 runs as uid 65534 (pids is tree-wide)"
    else
        not_ok "  --strict --limit pids=20 runs as uid 65534"; diag "$out"
    fi

    # cpu without a cgroup: RLIMIT_CPU, per process, partial; --strict refuses.
    as "$PVISOR" run --safe --limit cpu=1s -- "$PVAGENT" spin 60 2>"$T/ucpu.err"; rc=$?
    b=$(ubundle)
    case "$(umech cpu)" in
    rlimit-per-process)
        eq "$rc" 152 "uid 65534, cpu=1s (RLIMIT_CPU): the spinner gets SIGXCPU"
        eq "$(grep -c 'used up its CPU time (--limit cpu=1s, per process here' "$T/ucpu.err"):$(jq '[.warnings[] | select(test("used up its CPU time"))] | length' "$b")" \
           "1:1" "  and is told why, on stderr and in the Bundle (it was a bare 152)"
        eq "$(jq -r .exit.signal_name "$b")" XCPU "  the Bundle records SIGXCPU"
        eq "$(jq -r .dimensions.resources.effective "$b")" partial "  resources partial (per process, not the tree)"
        eq "$(jq -r .dimensions.resources.evidence.rlimits_inside.cpu.soft "$b"):$(jq -r .dimensions.resources.evidence.rlimits_inside.cpu.hard "$b")" \
           "1:2" "  the command's RLIMIT_CPU is 1 s soft, 2 s hard"
        out=$(as "$PVISOR" run --safe --strict --limit cpu=1s -- echo RAN 2>/dev/null); rc=$?
        eq "$rc:$out" "125:" "  --strict refuses resources that are only partial";;
    cgroup) eq "$rc" 137 "uid 65534, cpu=1s (cgroup): the tree is killed at its budget";;
    *) not_ok "uid 65534 cpu=1s has a mechanism (got '$(umech cpu)')";;
    esac

    # Not delegated: the warning says whether delegating would help (on a
    # hybrid host the hierarchy has no memory or pids controller at all).
    out=$(as "$PVISOR" run --safe --limit mem=64M -- true 2>&1 >/dev/null)
    if [ "$(umech mem)" != cgroup ]; then
        cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
        own="$cg2$(sed -n 's/^0:://p' /proc/self/cgroup)"
        top=$(cat "$cg2/cgroup.controllers" 2>/dev/null); mine=$(cat "$own/cgroup.controllers" 2>/dev/null)
        case " $mine " in *" memory "*|*" pids "*) hybrid=no ;;
        *) case " $top " in *" memory "*" pids "*|*" pids "*" memory "*) hybrid=no ;; *) hybrid=yes ;; esac ;; esac
        eq "$(printf '%s' "$out" | grep -c 'is not delegated'):$(printf '%s' "$out" | grep -c 'bound to cgroup v1')" \
           "1:$([ $hybrid = yes ] && echo 1 || echo 0)" \
           "uid 65534, mem without a delegated cgroup: the warning says so, and that delegation would not help on a hybrid host ($hybrid here)"
    fi

    # mem without a cgroup: RLIMIT_AS.
    out=$(as "$PVISOR" run --safe --limit mem=64M -- "$PVAGENT" alloc 256 2>/dev/null); rc=$?
    case "$(umech mem)" in
    rlimit-per-process) eq "$rc:$out" "3:alloc-failed" "uid 65534, mem=64M (RLIMIT_AS): a 256 MiB allocation fails";;
    cgroup) eq "$rc" 137 "uid 65534, mem=64M (cgroup): a 256 MiB hog is OOM-killed";;
    *) not_ok "uid 65534 mem=64M has a mechanism (got '$(umech mem)')";;
    esac
    check "uid 65534 mem run's Bundle validates" $VALIDATE "$(ubundle)"
    check "  its evidence says why no cgroup was used" \
        sh -c "[ \"\$(jq -r '.dimensions.resources.evidence.cgroup.not_used_because // \"\"' '$(ubundle)')\" != '' ] || [ \"\$(jq -r '.dimensions.resources.evidence.limits.mem.mechanism' '$(ubundle)')\" = cgroup ]"

    # A delegated cgroup: a child of ours, owned by uid 65534, the way
    # systemd delegates a scope.  Moved into it by root (a process may only
    # be moved by someone who can write the common ancestor).
    CG2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    if [ -n "$CG2" ] && [ -w "$CG2$own" ]; then
        D="$CG2${own%/}/pvisor-test-$$"
        # memory and pids for the delegated cgroup, as systemd's Delegate=yes
        # gives them, where this hierarchy has them (the test VM, a cgroup
        # v2 host; not a hybrid one's unified hierarchy)
        P="$CG2${own%/}"
        for c in memory pids; do
            if grep -qw "$c" "$P/cgroup.controllers" && ! grep -qw "$c" "$P/cgroup.subtree_control" &&
               echo "+$c" > "$P/cgroup.subtree_control" 2>/dev/null; then
                at_exit "echo -$c > '$P/cgroup.subtree_control'"
            fi
        done
        mkdir "$D" && chown 65534:65534 "$D" "$D/cgroup.procs" "$D/cgroup.subtree_control" "$D/cgroup.threads"
        at_exit "rmdir '$D'"
        # pvisor alone in it, as in a systemd scope: every process in
        # between execs (a process sharing the cgroup keeps its controllers)
        indelegated() { timeout 120 sh -c "echo \$\$ > '$D/cgroup.procs'; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
               env HOME='$U' XDG_STATE_HOME='$U/state' sh -c 'cd $U/ws && exec $PVISOR run --safe $*'"; }
        sh -c "echo \$\$ > '$D/cgroup.procs'; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
               env HOME='$U' XDG_STATE_HOME='$U/state' sh -c 'cd $U/ws && timeout 120 $PVISOR run --safe --limit cpu=1s,pids=50 -- $PVAGENT spin 60 2'" 2>/dev/null; rc=$?
        b=$(ubundle)
        check "uid 65534 in a delegated cgroup: the Bundle validates" $VALIDATE "$b"
        eq "$(umech cpu):$rc" "cgroup:137" "uid 65534 in a delegated cgroup: cpu=1s uses a leaf in it, and two spinners are killed together"
        leaf=$(jq -r .dimensions.resources.evidence.cgroup.leaf "$b")
        case "$leaf" in "$D"/pvisor-*) ok "  the leaf is a child of the delegated cgroup";; *) not_ok "  the leaf is a child of the delegated cgroup"; diag "$leaf";; esac
        eq "$(jq -r .dimensions.resources.effective "$b")" enforced "  resources enforced (cpu in the leaf, pids in the run's user namespace)"
        eq "$(find "$D" -mindepth 1 -type d | wc -l)" 0 "  nothing is left in the delegated cgroup (leaf removed; no controller needed, so the supervisor never moved)"
        # kill -9 of the supervisor: its launcher and command die with it
        # (PR_SET_PDEATHSIG), its leaf stayed behind, empty, one per killed
        # run.  The next run removes the leaves of runs that are gone (not
        # locked by a live supervisor, empty, a minute old), not a live
        # run's, not another's directory.
        sh -c "echo \$\$ > '$D/cgroup.procs'; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
               env HOME='$U' XDG_STATE_HOME='$U/state' sh -c 'cd $U/ws && exec $PVISOR run --safe --limit cpu=60s -- sleep 300'" \
            >/dev/null 2>&1 &
        pv=$!
        i=0; while [ -z "$(cat "$D"/pvisor-*/cgroup.procs 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
        kill -9 $pv; wait $pv 2>/dev/null
        i=0; while [ -n "$(cat "$D"/pvisor-*/cgroup.procs 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
        dead=$(find "$D" -mindepth 1 -maxdepth 1 -type d -name 'pvisor-*')
        eq "$(echo "$dead" | grep -c .):$(cat "$dead/cgroup.procs" 2>/dev/null | wc -l)" "1:0" \
            "  (setup) kill -9 of the supervisor left its leaf, empty"
        mkdir "$D/pvisor-young" "$D/other"  # an empty leaf of a run just starting; a directory not ours
        touch -m -d '2 minutes ago' "$dead" "$D/other"
        # a live run (its leaf older than a minute too) while the next one
        # starts; it ends (status 0) when its sleep is killed below, not by
        # a time that a loaded machine (the VM's emulation) can outrun
        sh -c "echo \$\$ > '$D/cgroup.procs'; exec setpriv --reuid=65534 --regid=65534 --clear-groups \
               env HOME='$U' XDG_STATE_HOME='$U/state' sh -c 'cd $U/ws && exec $PVISOR run --safe --limit cpu=60s -- sh -c \"sleep 3017; exit 0\"'" \
            >/dev/null 2>&1 &
        live=$!
        leaf=""
        i=0; while [ -z "$leaf" ] && [ $i -lt 200 ]; do
            for l in "$D"/pvisor-2*; do [ "$l" != "$dead" ] && [ -n "$(cat "$l/cgroup.procs" 2>/dev/null)" ] && leaf=$l; done
            sleep 0.05; i=$((i + 1))
        done
        touch -m -d '2 minutes ago' "$leaf"
        indelegated "--limit cpu=60s -- true" >/dev/null 2>&1; rc=$?
        left=$(cd "$D" && find . -mindepth 1 -maxdepth 1 -type d | sort | tr '\n' ' ')
        pkill -f '^sleep 3017$'; wait $live; lrc=$?
        eq "$rc:$lrc:$([ -d "$dead" ] && echo kept || echo removed):$(echo "$left" | wc -w)" "0:0:removed:3" \
            "  the next run removed the dead run's leaf, left the live run's, a young one and another's ($left)"
        rmdir "$D/pvisor-young" "$D/other"
        # mem and pids in the delegated cgroup: the supervisor moves itself
        # to a sibling leaf so the delegated cgroup may distribute them
        if grep -qw memory "$D/cgroup.controllers" && grep -qw pids "$D/cgroup.controllers"; then
            out=$(indelegated "--limit mem=64M -- $PVAGENT alloc 256" 2>/dev/null); rc=$?
            b=$(ubundle)
            check "uid 65534 in a delegated cgroup: mem run's Bundle validates" $VALIDATE "$b"
            eq "$(umech mem):$rc:$(jq -r .dimensions.resources.effective "$b")" "cgroup:137:enforced" \
               "uid 65534 in a delegated cgroup: mem=64M uses its leaf, a 256 MiB hog is OOM-killed, resources enforced"
            check "  memory.events says oom_kill" sh -c "[ \$(jq .dimensions.resources.evidence.observed.oom_kill_events '$b') -ge 1 ]"
            out=$(indelegated "--limit mem=64M -- $PVAGENT alloc 16" 2>/dev/null); rc=$?
            eq "$rc:$out" "0:allocated" "  a 16 MiB allocation still works"
            out=$(indelegated "--limit pids=20 -- $PVAGENT forks 40 10" 2>/dev/null); rc=$?
            b=$(ubundle)
            eq "$(umech pids):$rc:$out" "cgroup:0:forked=19 failed=21" \
               "uid 65534 in a delegated cgroup: pids=20 uses its leaf, the fork bomb gets 19 children"
            eq "$(jq -r .dimensions.resources.evidence.cgroup.command_in_leaf "$b")" true "  the command ran in the leaf"
            out=$(indelegated "--strict --limit mem=64M,pids=20,cpu=30s -- echo RAN" 2>err); rc=$?
            b=$(ubundle)
            eq "$(jq -r .dimensions.resources.effective "$b"):$(grep -c "resources is" err)" "enforced:0" \
               "  --strict --limit mem,pids,cpu: resources enforced ($rc: $(head -c 60 err | tr "\n" " "))"
            eq "$(find "$D" -mindepth 1 -type d | wc -l):$(cat "$D/cgroup.subtree_control")" "0:" \
               "  nothing is left in the delegated cgroup: no leaf, no sibling, its controllers handed back"
            check "  no process is left in it" sh -c "[ ! -s '$D/cgroup.procs' ]"
        else
            echo "# the delegated cgroup has no memory and pids controllers here (a hybrid host's unified hierarchy): those runs need the test VM (tests/vm)"
        fi
    else
        eq "$(jq -r .dimensions.resources.evidence.cgroup.not_used_because "$(ubundle)" | grep -c .)" 1 \
           "no writable cgroup2 here: the evidence says why none was used"
    fi
else
    skip "--limit as an unprivileged user" "needs root to switch to an unprivileged user"
fi

# --- the OOM killer picks the run before its supervisor -----------------------
# The supervisor serves the views: killed by the OOM killer (its score like
# the command's), the command's writes in flight were lost.  The run's
# processes get oom_score_adj 500 (or the caller's, if higher), and cannot
# lower it; a plain run (no sandbox) is the control.
oomcmd='cat /proc/self/oom_score_adj; echo 0 > /proc/self/oom_score_adj 2>/dev/null; sh -c "cat /proc/self/oom_score_adj"'
out=$(cd "$W" && "$PVISOR" run -- sh -c "$oomcmd" 2>/dev/null)
if [ "$(id -u)" -eq 0 ]; then
    eq "$(echo $out)" "0 0" "control: without the sandbox the command's oom_score_adj is the caller's, and root lowers it"
fi
out=$(safe -- sh -c "$oomcmd" 2>/dev/null); rc=$?
eq "$rc:$(echo $out)" "0:500 500" "--safe: the run's oom_score_adj is 500, and a child of a command that tried to lower it has 500"
out=$( (echo 700 > /proc/self/oom_score_adj && exec timeout 120 "$PVISOR" run --safe --workspace "$W" -- cat /proc/self/oom_score_adj) 2>/dev/null)
eq "$out" 700 "--safe: a caller's higher oom_score_adj is kept"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    out=$(as "$PVISOR" run --safe -- sh -c "$oomcmd" 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:500 500" "--safe (uid 65534): the run's oom_score_adj is 500 and cannot be lowered"
fi
