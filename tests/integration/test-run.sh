#!/bin/sh
# Integration tests for `pvisor run` (plain, unisolated), status, list, help,
# usage errors.  TAP output.  Needs $PVISOR, $PVAGENT, $SRCDIR.
. "$(dirname "$0")/../lib.sh"
SCHEMA="$SRCDIR/docs/bundle.schema.json"
VALIDATE="/usr/bin/python3 $SRCDIR/tests/validate-bundle.py $SCHEMA"
cd "$T"

# --- exit status propagation ---------------------------------------------
for s in 0 3 42 255; do
    "$PVISOR" run -- "$PVAGENT" exit $s; rc=$?
    eq "$rc" "$s" "exit status $s is propagated"
done
"$PVISOR" run -- "$PVAGENT" signal 15; rc=$?
eq "$rc" 143 "death by SIGTERM gives 128+15"
"$PVISOR" run -- "$PVAGENT" signal 9; rc=$?
eq "$rc" 137 "death by SIGKILL gives 128+9"
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -r '.exit.signal_name + " " + (.exit.status|tostring) + " " + (.exit.pvisor_exit_status|tostring)' "$b")" \
   "KILL null 137" "Bundle records the signal, no exit status, and pvisor's 137"

"$PVISOR" run -- /nonexistent/cmd 2>err; rc=$?
eq "$rc" 127 "missing command exits 127"
check "missing command is explained on stderr" grep -q "command not found" err
# the command's name is the caller's bytes: escaped on stderr, not raw
"$PVISOR" run -- "$(printf 'x\033[31m')" 2>err; rc=$?
eq "$rc:$(grep -c 'x\\x1b\[31m: command not found' err):$(grep -c "$(printf '\033')" err)" "127:1:0" \
    "a missing command's name with an escape sequence is printed escaped"
printf '#!/bin/sh\n' > notexec; chmod 0644 notexec
"$PVISOR" run -- ./notexec 2>err; rc=$?
eq "$rc" 126 "non-executable command exits 126"
eq "$(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" exec_failed "Bundle says exec_failed"
# The probe child is collected, not killed as a leftover, when the command
# could not be exec'd (plain and staged runs).
for how in "" "--stage auto"; do
    # shellcheck disable=SC2086
    "$PVISOR" run $how -- /nonexistent/cmd 2>/dev/null
    eq "$(jq -r '[(.kernel_features | length > 0), (.warnings | map(select(test("leftover|probes failed"))) | length)] | map(tostring) | join(" ")' \
        "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "true 0" \
        "a command that cannot be exec'd${how:+ ($how)}: the Bundle has the probes and no leftover process"
    # ... also when the probes end before the command's exec fails (its
    # execve held back 0.3 s): the run's wait for its command, which reaps
    # any child, must not take the probe child before it is collected
    if command -v strace >/dev/null; then
        # shellcheck disable=SC2086
        no_lsan strace -f -o /dev/null -e trace=execve -e inject=execve:delay_enter=300000:when=1 \
            "$PVISOR" run $how -- /nonexistent/cmd 2>/dev/null
        eq "$(jq -r '[(.kernel_features | length > 0), (.warnings | map(select(test("leftover|probes failed"))) | length)] | map(tostring) | join(" ")' \
            "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "true 0" \
            "... and when the probes end before the exec fails${how:+ ($how)}"
    else
        skip "... and when the probes end before the exec fails" "strace missing (apt-get install strace)"
    fi
done

# --- stdio and tty passthrough --------------------------------------------
out=$(printf 'line1\nline2\n' | "$PVISOR" run -- cat)
eq "$out" "$(printf 'line1\nline2')" "stdin and stdout pass through"
err=$("$PVISOR" run -- sh -c 'echo to-stderr >&2' 2>&1 >/dev/null)
eq "$err" "to-stderr" "stderr passes through"
if command -v script >/dev/null; then
    out=$(script -qec "$PVISOR run -- sh -c 'test -t 0 && test -t 1 && echo HAVE-TTY; ps -o stat= -p \$\$'" /dev/null </dev/null | tr -d '\r')
    case "$out" in *HAVE-TTY*) ok "the terminal passes through";; *) not_ok "the terminal passes through"; diag "$out";; esac
    case "$out" in *+*) ok "the command is the terminal's foreground process group";; *) not_ok "the command is the terminal's foreground process group"; diag "$out";; esac
else
    skip "the terminal passes through" "script(1) missing"
fi

# --- process-group cleanup -------------------------------------------------
"$PVISOR" run -- "$PVAGENT" bg "$T/bg.pid"; rc=$?
eq "$rc" 0 "command that leaves a background child exits 0"
pid=$(cat "$T/bg.pid")
check "background child in the process group is gone after pvisor returns" sh -c "! kill -0 $pid 2>/dev/null"
"$PVISOR" run -- "$PVAGENT" daemon "$T/daemon.pid"; rc=$?
pid=$(cat "$T/daemon.pid")
check "double-forked setsid daemon is gone after pvisor returns" sh -c "! kill -0 $pid 2>/dev/null"
eq "$(jq -r '.warnings | map(test("leftover")) | any' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" true \
   "Bundle warns about the killed leftover"
# the count is of processes, once each: one still listed while being
# reaped was counted again (two leftovers read 3)
"$PVISOR" run -- sh -c 'sleep 30 & sleep 30 & setsid sleep 30 & exit 0'
eq "$(jq -r '.warnings[] | select(test("leftover"))' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
   "3 leftover process(es) killed after the command exited" "Bundle counts three leftovers (two in the group, one setsid) as three"
# ... and a leftover's own children in the command's group too: the group
# kill took them before they were reparented to pvisor and seen (a subshell
# waiting on two jobs read 1, and 3 when run with setsid)
"$PVISOR" run -- sh -c '(sleep 30 & sleep 30 & wait) & sleep 0.3; exit 0'
eq "$(jq -r '.warnings[] | select(test("leftover"))' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
   "3 leftover process(es) killed after the command exited" "Bundle counts a subshell and its two jobs in the command's group as three"

# --- signal forwarding -------------------------------------------------------
# A shell starts a background job with SIGINT ignored, and pvisor does not
# relay what it was started ignoring (below): the jobs sent a signal here
# get its default action back first (env --default-signal); SIGHUP too,
# which a suite run under nohup inherits ignored (the HUP case waited
# for ever for a signal pvisor rightly kept from the command).
for sig in TERM INT HUP; do
    rm -f "$T/sig"
    env --default-signal=INT,HUP,TERM "$PVISOR" run -- "$PVAGENT" wait-signal "$T/sig" &
    pv=$!
    i=0; while [ "$(cat "$T/sig" 2>/dev/null)" != ready ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    kill -$sig $pv
    wait $pv; rc=$?
    num=$(kill -l $sig 2>/dev/null || true)
    expect=$( /usr/bin/python3 -c "import signal; print(int(signal.SIG$sig))")
    eq "$(cat "$T/sig")" "$expect" "SIG$sig to pvisor is forwarded to the command"
    eq "$rc:$(jq -r '.exit.status' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "$((128 + expect)):0" \
        "a command that handled SIG$sig and exited 0: the Bundle has its 0, pvisor ends by SIG$sig ($((128 + expect)))"
done
# ... ends BY the signal, not with 128+N: a shell that was sent the same
# Ctrl-C goes on to a script's next line (pvisor apply) after a child
# that only exited 130 (bash's wait-and-cooperative-exit)
rm -f "$T/sig"
eq "$(/usr/bin/python3 - "$PVISOR" "$PVAGENT" "$T/sig" <<'PYEOF'
import os, signal, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "run", "--", sys.argv[2], "wait-signal", sys.argv[3]])
for _ in range(100):
    if os.path.exists(sys.argv[3]) and open(sys.argv[3]).read().strip() == "ready":
        break
    time.sleep(0.05)
p.send_signal(signal.SIGINT)
print(p.wait())
PYEOF
)" -2 "pvisor interrupted by SIGINT dies by SIGINT (its parent sees WIFSIGNALED), after recording the run"
eq "$(jq -r '.state + " " + .exit.interrupted_by + " " + (.exit.pvisor_exit_status | tostring)' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
    "finished INT 130" "... and the Bundle says so (pvisor_exit_status 130)"

# --- signals pvisor was started ignoring are not relayed -----------------------
# (nohup's SIGHUP, the SIGINT of a background job of a non-interactive
# shell): a blocked signal is queued even while ignored, and pvisor
# relayed it: `nohup pvisor run ...` lost its command when the terminal
# closed
for sig in HUP INT; do
    rm -f "$T/nohup.ready"
    sh -c "trap '' $sig; exec \"\$0\" run -- sh -c 'echo ready > \"$T/nohup.ready\"; sleep 1; echo survived'" "$PVISOR" > "$T/nohup.out" 2>&1 &
    pv=$!
    i=0; while [ ! -s "$T/nohup.ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    kill -$sig $pv; wait $pv; rc=$?
    eq "$rc:$(cat "$T/nohup.out")" "0:survived" "pvisor started with SIG$sig ignored: a SIG$sig to it does not reach the command"
done

# --- usage errors: exit 2, nothing written ----------------------------------
rm -rf "$XDG_STATE_HOME"
touch "$T/afile"
for args in "--bogus -- true" "true" "--" "--stage" "--stage $T/afile -- true" \
            "--workspace $T/afile -- true" "--workspace $T/missing -- true" \
            "--executor bogus -- true" "--stage-max-bytes 12Q --stage x -- true" \
            "--stage-max-bytes 1M -- true" "--safe=yes -- true" \
            "--timeout 5 --timeout 6 -- true" "--workspace $T --workspace=/ -- true" \
            "--stage auto --stage $T/st2 -- true" "--safe --network loopback --network none -- true" \
            "--workspace $T -- true"; do
    # shellcheck disable=SC2086
    "$PVISOR" run $args >out 2>err; rc=$?
    eq "$rc" 2 "usage error exits 2: run $args"
    lines=$(wc -l < err)
    check "usage error is one line plus a hint: run $args" sh -c "[ $lines -eq 2 ] && head -n1 err | grep -q '^pvisor run: '"
done
check "usage errors created no state directory" sh -c "[ ! -e '$XDG_STATE_HOME' ]"
# --workspace names the directory to stage: a plain run stages nothing and
# runs the command in the current directory, so it only changed the
# directory the Bundle named
"$PVISOR" run --workspace "$T" -- true 2>err; rc=$?
eq "$rc:$(grep -c 'add --stage DIR, --stage auto, --safe or --filesystem sandbox' err)" "2:1" \
    "--workspace without a stage is a usage error that says what to add"
"$PVISOR" frobnicate >/dev/null 2>&1; eq $? 2 "unknown verb exits 2"
"$PVISOR" >/dev/null 2>&1; eq $? 2 "no verb exits 2"
planned=$("$PVISOR" help | awk '/\(planned\)/ {print $1; exit}')
if [ -n "$planned" ]; then
    "$PVISOR" "$planned" >/dev/null 2>err; eq $? 2 "planned verb '$planned' exits 2"
    check "planned verb says it is not available" grep -q "not available" err
else
    ok "no verb is left planned (every listed verb is implemented)"
fi

# --- refused policies: exit 125, nothing run --------------------------------
"$PVISOR" run --executor vm -- touch "$T/should-not-exist" 2>err; rc=$?
eq "$rc" 125 "an unavailable executor is refused with 125"
check "refused request did not run the command" test ! -e "$T/should-not-exist"
check "refusal says nothing was run" grep -q "nothing was run" err

# --- help ---------------------------------------------------------------------
for v in run status list doctor version help diff apply; do
    "$PVISOR" help $v > h1; r1=$?
    "$PVISOR" $v --help > h2; r2=$?
    check "help $v and $v --help agree and exit 0" sh -c "[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s h1 h2 && grep -q Usage h1"
done
"$PVISOR" help >/dev/null; eq $? 0 "pvisor help exits 0"
# the bounds the parser enforces are said in help run (before, only the
# error message named them)
"$PVISOR" run --timeout 169h -- true 2>/dev/null; rc=$?
eq "$rc:$("$PVISOR" help run | grep -c 'at most 7 days')" "2:2" \
    "a --timeout over 7 days is a usage error, and help run says the bound (--timeout, --limit cpu)"
# 0 is a duration, refused for being under the bound ("'0' is not a
# duration" did not say so)
eq "$("$PVISOR" run --timeout 0 -- true 2>&1 | head -n 1)" \
    "pvisor run: --timeout: '0' is not a duration from 1 s to 7 days (examples: 90, 30s, 10m, 2h)" \
    "--timeout 0: the usage error names both bounds"
eq "$("$PVISOR" help run | grep -Ec '64 (rules|names)')" 3 "help run says --allow-net, --pass-env and --access take 64 each"
eq "$("$PVISOR" help run | grep -c -- '--safe is sandbox whatever')" 1 "help run says --safe ignores --filesystem host"
check "version prints the version" sh -c "'$PVISOR' version | grep -Eq '^pvisor [0-9]+\.[0-9]+\.[0-9]+'"
# output that could not be written is a failure (it exited 0: 'pvisor
# version > /dev/full && ...' went on without one)
if [ -w /dev/full ]; then
    for a in help "help run" --help version --version; do
        # shellcheck disable=SC2086
        "$PVISOR" $a >/dev/full 2>err; rc=$?
        eq "$rc:$(grep -c 'cannot write' err)" "1:1" "pvisor $a with stdout full exits 1 and says so"
    done
else
    skip "help and version with stdout full" "/dev/full is not writable"
fi
# the verbs are listed by 'pvisor help', not by 'pvisor help help'
"$PVISOR" help nope 2>err; rc=$?
eq "$rc:$(tail -n 1 err)" "2:Try 'pvisor help' for the list of verbs." "help of an unknown verb exits 2 and points to the list of verbs"

# --- Bundles: schema, content, status, list -------------------------------
"$PVISOR" run -- "$PVAGENT" exit 7
id=$(latest_run)
b="$XDG_STATE_HOME/pvisor/runs/$id/bundle.json"
check "every Bundle validates against docs/bundle.schema.json" sh -c "$VALIDATE $XDG_STATE_HOME/pvisor/runs/*/bundle.json"
eq "$(jq -r '[.dimensions[] | .effective] | unique | join(",")' "$b")" "unenforced" "plain run: every dimension is unenforced"
eq "$(jq -r '[.dimensions[] | .requested] | unique | join(",")' "$b")" "none" "plain run: nothing was requested"
eq "$(jq -r '.state + " " + (.exit.status|tostring) + " " + .command[-1] + " " + .workspace' "$b")" "finished 7 7 $T" "Bundle records state, status, command and workspace"
check "Bundle file is private (0600)" sh -c "[ \$(stat -c %a '$b') = 600 ]"
check "no temp files are left next to the Bundle" sh -c "[ \$(ls -A '$(dirname "$b")' | wc -l) -eq 1 ]"
eq "$("$PVISOR" status --json | jq -r .run_id)" "$id" "status --json shows the most recent run"
short=$(echo "$id" | cut -c1-22)
"$PVISOR" status "$id" > st; rc=$?
check "status RUN shows the Safety boundary" sh -c "[ $rc -eq 0 ] && grep -q 'Safety boundary' st && grep -q 'host_writes' st"
"$PVISOR" status no-such-run 2>err; eq $? 1 "status of an unknown run exits 1"
# a runs directory that cannot be read is named (a misplaced XDG_STATE_HOME
# said only "cannot read the runs directory: Not a directory")
mkdir -p "$T/badstate/pvisor"; : > "$T/badstate/pvisor/runs"
for v in status list; do
    XDG_STATE_HOME="$T/badstate" "$PVISOR" $v >/dev/null 2>err; rc=$?
    eq "$rc:$(grep -c "^pvisor $v: cannot read the runs directory $T/badstate/pvisor/runs: Not a directory" err)" "1:1" \
        "$v names the runs directory it cannot read"
done
n=$("$PVISOR" list --json | jq length)
eq "$n" "$(run_count)" "list --json has one entry per run"
eq "$("$PVISOR" list --json | jq -r '.[0].run_id')" "$id" "list is newest first"
check "list prints a table" sh -c "'$PVISOR' list | head -n1 | grep -q '^RUN'"
# which project a run was in: the workspace column ("~/..." under HOME)
eq "$("$PVISOR" list | head -n1 | grep -c ' WORKSPACE  *COMMAND$'):$(HOME=$(dirname "$T") "$PVISOR" list | sed -n 2p | grep -c " ~/$(basename "$T")  *")" "1:1" \
    "list shows each run's workspace, ~ for HOME"
# aligned by a terminal's cells, not bytes (a non-ASCII name; CJK
# characters take two cells), and a long name cut before it is escaped
# (an escape cut in two showed as a bare "x1b")
L1="$T/lw/é-proj" L2="$T/lw/$(printf 'a%.0s' $(seq 45))$(printf 'z\033')b" L3="$T/lw/工作区"
mkdir -p "$L1" "$L2" "$L3"
(cd "$L1" && XDG_STATE_HOME="$T/lwstate" "$PVISOR" run -- true) && (cd "$L2" && XDG_STATE_HOME="$T/lwstate" "$PVISOR" run -- true) &&
    (cd "$L3" && XDG_STATE_HOME="$T/lwstate" "$PVISOR" run -- true) && (cd "$T" && XDG_STATE_HOME="$T/lwstate" "$PVISOR" run -- true)
eq "$(XDG_STATE_HOME="$T/lwstate" "$PVISOR" list | python3 -c '
import sys, unicodedata
cells = lambda s: sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in s)
ls = sys.stdin.buffer.read().decode().splitlines()[1:]
print(len({cells(l[:l.rfind(" true")]) for l in ls}), sum("z\\x1bb" in l for l in ls))')" "1 1" \
    "list: the COMMAND column aligns by a terminal's cells (CJK takes two); a long workspace is cut before it is escaped"
# a character the C library's wcwidth does not know (U+0378, unassigned;
# a newer emoji than its Unicode) takes a cell on a terminal too
L4="$T/lw2/x$(printf '\315\270')y"
mkdir -p "$L4"
(cd "$L4" && XDG_STATE_HOME="$T/lwstate2" "$PVISOR" run -- true) && (cd "$T" && XDG_STATE_HOME="$T/lwstate2" "$PVISOR" run -- true)
eq "$(XDG_STATE_HOME="$T/lwstate2" "$PVISOR" list | python3 -c '
import sys
ls = sys.stdin.buffer.read().decode().splitlines()[1:]
print(len(ls), len({len(l[:l.rfind(" true")]) for l in ls}))')" "2 1" \
    "list: a character wcwidth does not know takes one cell, and COMMAND stays aligned"
# a long workspace is cut to 40 cells, not 40 bytes (30 CJK characters
# are 60 cells; cut at 40 bytes they were 26)
L5="$T/lw3/$(printf '工%.0s' $(seq 30))"
mkdir -p "$L5"
(cd "$L5" && XDG_STATE_HOME="$T/lwstate3" "$PVISOR" run -- true)
eq "$(XDG_STATE_HOME="$T/lwstate3" "$PVISOR" list | python3 -c '
import sys, unicodedata
cells = lambda s: sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
l = sys.stdin.buffer.read().decode().splitlines()[1]
w = l[:l.rfind(" true")].split()[-1]
print(w[:3], 39 <= cells(w) <= 40)')" "... True" "list: a long workspace of wide characters is cut to 40 cells (39: none is cut in two)"
# status and status --review print the workspace and the stage escaped,
# as list does (they printed a directory's name raw)
L6="$T/lw4/$(printf 'w\033[2Jx')"
mkdir -p "$L6"
(cd "$L6" && XDG_STATE_HOME="$T/lwstate4" "$PVISOR" run --stage "$L6.stage" -- true) >/dev/null 2>&1
(cd "$L6" && XDG_STATE_HOME="$T/lwstate4" "$PVISOR" status && XDG_STATE_HOME="$T/lwstate4" "$PVISOR" status --review) > st6 2>&1
eq "$(LC_ALL=C grep -c "$(printf '\033')" st6):$(grep -c '^Workspace: .*/w\\x1b\[2Jx$' st6):$(grep -c '^Stage: .*/w\\x1b\[2Jx\.stage ' st6)" "0:2:2" \
    "status and status --review: the workspace and the stage path with their escapes as \\xNN"
# argv is printed for a terminal: escape sequences (C0, the UTF-8 CSI) and
# invisible characters as \xNN, in status and in list
"$PVISOR" run -- true "$(printf 'a\033[2J\007b')" "$(printf 'c\302\23331m')" "$(printf 'z\342\200\213w')" >/dev/null 2>&1
"$PVISOR" status > st2; "$PVISOR" list | sed -n 2p > ls2
"$PVISOR" run -- true "$(printf 'x%.0s' $(seq 66))" >/dev/null 2>&1
eq "$("$PVISOR" list | sed -n 2p | grep -c '\.\.\.$')" 0 "list: a command of exactly 72 bytes is not marked as cut"
"$PVISOR" run -- true "$(printf 'x%.0s' $(seq 67))" >/dev/null 2>&1
eq "$("$PVISOR" list | sed -n 2p | grep -c '\.\.\.$')" 1 "list: one byte more is cut, with ..."
for f in st2 ls2; do
    eq "$(LC_ALL=C grep -c "$(printf '\033\|\007\|\302\233\|\342\200\213')" $f):$(grep -c 'a\\x1b\[2J\\x07b c\\xc2\\x9b31m z\\xe2\\x80\\x8bw' $f)" "0:1" \
        "$(test $f = st2 && echo status || echo list): the command's argv with its escapes and invisible characters as \\xNN"
done

# --- a running Bundle, and a supervisor killed with -9 ---------------------
"$PVISOR" run -- sleep 3011.$$ & # (this shell's own: the suite runs in both builds at once)
pv=$!
i=0; while [ "$(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" 2>/dev/null)" != running ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
eq "$("$PVISOR" status --json | jq -r .display_state)" running "status shows a live run as running"
kill -9 $pv; wait $pv 2>/dev/null
sleep 0.2
eq "$("$PVISOR" status --json | jq -r .display_state)" interrupted "a run whose supervisor was killed shows as interrupted"
check "the command died with its supervisor (PDEATHSIG)" sh -c "! pgrep -f '^sleep 3011\\.$$\$' >/dev/null"

# --- the state directory's file system full -----------------------------------------
# A run refused because its stage cannot be made there could not write its
# Bundle either: its run directory, left without one, made every later
# verb without a RUN refuse ("the newest run has no readable Bundle ...
# its supervisor died"), the earlier run's stage out of reach by name.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    FW=$T/fullws FS=$T/fullstate
    mkdir -p "$FW" "$FS"; echo keep > "$FW/keep"
    out=$(cd "$FW" && unshare -m sh -c "mount -t tmpfs -o size=1m tmpfs '$FS' &&
        export XDG_STATE_HOME='$FS/st' &&
        '$PVISOR' run --stage auto -- sh -c 'echo first > keep' >/dev/null 2>&1; echo first=\$?
        head -c 2m /dev/zero > '$FS/filler' 2>/dev/null
        '$PVISOR' run --stage auto -- sh -c 'echo second > keep' >/dev/null 2>'$T/full.err'; echo second=\$?
        rm '$FS/filler'; ls '$FS/st/pvisor/runs' | wc -l
        '$PVISOR' status --review 2>&1 | grep -c '^  M keep'" 2>&1)
    eq "$(echo "$out" | tr '\n' ' ')" "first=0 second=125 1 1 " \
        "a run refused with the state directory full leaves no run directory without a Bundle; the earlier stage is still the one reviewed"
    check "the refusal says the state directory's file system is full and what to do" \
        grep -q "the run could not be recorded in .*: No space left on device (free space on the state directory's file system, or set XDG_STATE_HOME to another)" "$T/full.err"
else
    skip "a run refused with the state directory full" "needs root and unshare (a private tmpfs mount)"
fi

# --- unprivileged user ------------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U="$T/user"; mkdir -p "$U"; chown 65534:65534 "$U"
    out=$(cd "$U" && XDG_STATE_HOME="$U/state" setpriv --reuid=65534 --regid=65534 --clear-groups \
          "$PVISOR" run -- sh -c 'id -u; exit 5'); rc=$?
    eq "$rc:$out" "5:65534" "an unprivileged user runs the same command with the same result"
    ub=$(ls "$U"/state/pvisor/runs/*/bundle.json 2>/dev/null | head -n1)
    check "the unprivileged run's Bundle validates and records uid 65534" sh -c "[ -n '$ub' ] && $VALIDATE '$ub' && [ \$(jq .user.uid '$ub') = 65534 ]"
else
    skip "unprivileged run" "needs root to switch to an unprivileged user"
fi

# --- doctor -----------------------------------------------------------------------
"$PVISOR" doctor > doc; rc=$?
check "doctor exits 0 and names every executor" sh -c "[ $rc -eq 0 ] && grep -q '^host:' doc && grep -q '^oci:' doc && grep -q '^vm:' doc"
"$PVISOR" doctor --json > doc.json; rc=$?
eq "$rc:$(jq -r '[.features.fuse.ok, .features.user_namespaces.ok, (.features.landlock.abi > 0)] | map(type) | join(",")' doc.json)" \
   "0:boolean,boolean,boolean" "doctor --json has typed feature probes"
eq "$(jq -r '.executors.host.ready_plain' doc.json)" true "doctor: plain host runs are ready"
eq "$(jq -r '.features.sha256.ok' doc.json)" true "doctor: SHA-256 (libcrypto's, linked in) works"
mkdir -p "$T/safews"
if "$PVISOR" run --safe --workspace "$T/safews" -- true >/dev/null 2>&1; then safe_works=true; else safe_works=false; fi
eq "$(jq -r '.executors.host.ready_safe' doc.json)" "$safe_works" "doctor's host --safe readiness matches whether --safe actually runs here"
# The sandbox launcher (pvisor's own binary again) not executed, or killed
# before its report: the run said "the sandbox launcher ended without a
# report", the reason lost.  strace makes its execve fail (EACCES) or kills
# it there.  Nothing of the command ran (exit 125).
if $safe_works && command -v strace >/dev/null; then
    for how in error=EACCES signal=KILL; do
        (cd "$T/safews" && no_lsan strace -f -o /dev/null -P /proc/self/exe -e trace=execve -e inject=execve:$how \
            "$PVISOR" run --safe -- sh -c 'echo ran > ran') > "$T/launchfail.out" 2>&1
        rc=$?
        out=$(grep '^pvisor run:' "$T/launchfail.out" | sed 's/; the command was not run (run .*)$//')
        case $how in
        error=*) want="pvisor run: cannot execute the sandbox launcher (pvisor's own binary, /proc/self/exe): Permission denied (see 'pvisor doctor')" ;;
        *) want="pvisor run: the sandbox launcher was killed by SIGKILL before its report (see 'pvisor doctor')" ;;
        esac
        eq "$rc:$out:$(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"):$(ls "$T/safews")" "125:$want:setup_failed:" \
            "--safe whose launcher could not start ($how) says why, and the command did not run"
    done
else
    skip "--safe whose launcher could not start says why" "needs --safe and strace"
fi
# doctor's --limit fallback note, for root and for an ordinary user: it
# named mem and pids but not cpu, which is root's cgroup leaf (cpu.stat,
# no controller needed) and a user's per-process RLIMIT_CPU on a hybrid
# host; and there it told the user to delegate (systemd-run ... -p
# Delegate=yes), which cannot give --limit mem/pids a cgroup when the
# cgroup v2 hierarchy has neither controller (bound to cgroup v1)
if $safe_works; then
    for who in self user; do
        if [ $who = user ]; then
            [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null || continue
            mkdir -p "$U/ws" "$U/home"; chown 65534:65534 "$U/ws" "$U/home"
            as() { (cd "$U/ws" && HOME="$U/home" XDG_STATE_HOME="$U/state" setpriv --reuid=65534 --regid=65534 --clear-groups "$@"); }
        else
            as() { (cd "$T/safews" && "$@"); }
        fi
        as "$PVISOR" doctor --json > "$T/doc-$who.json"
        note=$(jq -r '.executors.host.notes[]? | select(test("no delegated cgroup v2"))' "$T/doc-$who.json")
        [ -n "$note" ] || continue
        as "$PVISOR" run --safe --limit cpu=600 -- true > /dev/null 2>&1
        tw=$(as sh -c 'jq -r .dimensions.resources.evidence.limits.cpu.tree_wide "$XDG_STATE_HOME"/pvisor/runs/$(ls "$XDG_STATE_HOME"/pvisor/runs | tail -n1)/bundle.json' 2>/dev/null)
        case $tw in
        true) said=$(printf '%s\n' "$note" | grep -c 'limit cpu stays tree-wide') ;;
        false) said=$(printf '%s\n' "$note" | grep -c 'limit cpu to a per-process RLIMIT_CPU') ;;
        *) said="no Bundle with a cpu limit" ;;
        esac
        eq "$said" 1 "doctor ($who) says what --limit cpu falls back to, as a run has it (tree-wide: $tw)"
        mnt=$(jq -r '.features.cgroup_v2.mount // empty' "$T/doc-$who.json")
        if [ -n "$mnt" ] && ! grep -qw memory "$mnt/cgroup.controllers" 2>/dev/null &&
            [ "$(jq -r '.features.cgroup_v2.delegated.error' "$T/doc-$who.json")" = EACCES ]; then
            eq "$(jq -r '.features.cgroup_v2.delegated.detail' "$T/doc-$who.json" | grep -c 'bound to cgroup v1), so delegation alone gives --limit mem/pids nothing; remedy: a cgroup-v2-only host')" 1 \
                "doctor ($who): a hierarchy without the memory controller is not one delegation would help"
        fi
    done
fi
# a command the host has in a directory the sandbox does not show (a script
# in /tmp, which is the sandbox's own): "command not found" for a file the
# user can see; now it says where it is and how to grant it
if $safe_works; then
    # directly in /tmp: its directory is the sandbox's own /tmp (one in a
    # directory of its own there is projected with that directory)
    x=$(mktemp /tmp/pvisor-test-cmd.XXXXXX); at_exit "rm -f '$x'"
    printf '#!/bin/sh\necho ran\n' > "$x"; chmod 0755 "$x" # readable by all: as root, grants show root's files as 65534's
    out=$(cd "$T/safews" && "$PVISOR" run --safe -- "$x" 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "$x: not found in the sandbox, although the host has it ($x).*--access ro:$x")" \
        "127:1" "--safe: a command the host has where the sandbox shows nothing is named with the way to grant it (127)"
    out=$(cd "$T/safews" && "$PVISOR" run --safe --access "ro:$x" -- "$x" 2>&1); rc=$?
    eq "$rc:$out" "0:ran" "  and the grant it names makes it run"
    out=$(cd "$T/safews" && "$PVISOR" run --safe -- "$x.none" 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c '\.none: command not found')" "127:1" "  a command the host does not have either: command not found"
fi
# started in a directory the sandbox does not show (outside the workspace,
# under /tmp, which is the sandbox's own): said so, not a setup failure
# 'at chdir to the working directory' to take to 'pvisor doctor'
if $safe_works; then
    mkdir -p "$T/notws"
    out=$(cd "$T/notws" && "$PVISOR" run --safe --workspace "$T/safews" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "the current directory $T/notws is not in the sandbox.*: run pvisor from the workspace $T/safews or a directory in it; the command was not run"):$(echo "$out" | grep -c doctor)" \
        "125:1:0" "--safe started outside the workspace, in a directory the sandbox does not show: the message says so"
    # its stage was made ('auto', in the run directory) before the refusal,
    # and nothing wrote to it: it goes, and the Bundle names none (status
    # and list showed a sealed stage of a run that never started)
    r=$(latest_run)
    eq "$(jq -r '[.state, (.stage | type)] | join(" ")' "$XDG_STATE_HOME/pvisor/runs/$r/bundle.json"):$(ls -A "$XDG_STATE_HOME/pvisor/runs/$r" | tr '\n' ' ')" \
        "setup_failed null:bundle.json " "  the empty stage it made is removed, the Bundle names none; the Bundle stays"
    # ... and the verbs that take a stage say so when that run is named
    # (they said it "was not staged", of a --safe run)
    out=$("$PVISOR" diff "$r" 2>&1); rc=$?
    eq "$rc:$out" "1:pvisor diff: run '$r' has no stage: its command never ran (setup_failed), so nothing was staged (see 'pvisor status $r')" \
        "  diff of that run says its command never ran"
    out=$("$PVISOR" run -- true >/dev/null 2>&1; "$PVISOR" diff latest 2>&1); rc=$?
    eq "$rc:$out" "1:pvisor diff: run 'latest' was not staged: it has no stage" "  of a plain run, that it was not staged"
fi
# as root the run's user namespace maps every id to itself (but -1: not
# the initial namespace) and allows setgroups, so other users' files keep
# their owners inside; root's own projected files show as nobody (idmapped)
if $safe_works && [ "$(id -u)" -eq 0 ]; then
    out=$(cd "$T/safews" && "$PVISOR" run --safe -- sh -c 'cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups; stat -c %u:%g /etc/passwd' 2>&1)
    eq "$(echo $out)" "0 0 4294967294 0 0 4294967294 allow 65534:65534" \
        "--safe as root: the run's user namespace maps every id but -1, setgroups allowed; /etc is idmapped"
fi
# the running Bundle of a --safe run says what is installed: `pvisor
# status` during the run (and for good, once the supervisor is killed)
# showed "host, no other isolation" and every dimension unenforced
if $safe_works; then
    (cd "$T/safews" && exec "$PVISOR" run --safe -- sh -c 'touch sr.started; exec sleep 3023') >/dev/null 2>&1 &
    pv=$!
    i=0; while ! (cd "$T/safews" && "$PVISOR" status --review 2>/dev/null | grep -q 'A sr.started') && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    eq "$("$PVISOR" status --json | jq -r '[.display_state, .dimensions.host_writes.effective, .dimensions.reads.effective, .dimensions.network.effective] | join(" ")')" \
        "running enforced enforced enforced" "status during a --safe run: the boundary installed, not 'unenforced'"
    kill -9 $pv; wait $pv 2>/dev/null
    sleep 0.2
    eq "$("$PVISOR" status --json | jq -r '[.display_state, .dimensions.host_writes.effective] | join(" ")')" \
        "interrupted enforced" "status of a --safe run whose supervisor was killed: the boundary it had"
    "$PVISOR" drop "$(latest_run)" >/dev/null 2>&1
fi
if "$PVISOR" run --stage "$T/docstage" --workspace "$T/safews" -- true >/dev/null 2>&1; then stage_works=true; else stage_works=false; fi
eq "$(jq -r '.executors.host.ready_stage' doc.json)" "$stage_works" "doctor's --stage readiness matches whether --stage actually runs here"
eq "$(jq -r '.executors.oci.implemented, .executors.vm.implemented' doc.json | tr '\n' ' ')" "false false " "doctor: oci and vm are reported as not implemented"
eq "$(jq -S .features doc.json | jq -r 'keys | join(",")')" \
   "$(jq -S .kernel_features "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" | jq -r 'keys | join(",")')" \
   "the Bundle's kernel_features are doctor's features"
# A sandboxed run probes in its supervisor, without the user namespace's
# child (a fork of the supervisor and a network namespace made and torn
# down for nothing, the costliest part of its start on this VM kind): the
# namespace features are the ones the run made itself, from its evidence.
if [ "$safe_works" = true ]; then
    kf() { jq -r "$1" "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"; }
    NSK='[.user_namespaces, .mount_namespace, .pid_namespace, .net_namespace, .ipc_namespace, .uts_namespace, .tmpfs_in_userns]'
    "$PVISOR" run --safe --workspace "$T/safews" -- true >/dev/null 2>&1
    eq "$(kf ".kernel_features | $NSK | map(.ok) | map(tostring) | join(\" \")")" "true true true true true true true" \
        "--safe: the Bundle's namespace features are ok"
    eq "$(kf ".kernel_features | $NSK | map(select(.detail | startswith(\"made by this run\"))) | length")" 7 \
        "... each one made by the run itself, and said so"
    eq "$(kf '.kernel_features.user_namespaces.detail')" \
        "made by this run: its supervisor's user namespace (uid_map \"0 0 4294967294\")" \
        "... root's user namespace with the map it has (every id but one)"
    eq "$(kf '[.kernel_features.user_namespaces.sysctls | keys[]] | length')" 3 "... and the user namespace sysctls are still read"
    # compared with pvisor's own as it started, not the namespace the
    # supervisor made for the run (root's command stays in that one: the
    # field said false on every --safe run of root)
    eq "$(kf '[.dimensions.resources.evidence.user_namespace_differs, .sandbox_evidence.namespaces.user != "'"$(readlink /proc/self/ns/user)"'"] | map(tostring) | join(" ")')" \
        "true true" "--safe as root: the resources evidence says the command's user namespace is not the host's"
    eq "$(kf '[.kernel_features.fuse.ok, .kernel_features.landlock.abi > 0, .kernel_features.sha256.ok] | map(tostring) | join(" ")')" \
        "true true true" "... the other probes ran"
    (cd "$T/safews" && "$PVISOR" run --filesystem sandbox --stage auto -- true >/dev/null 2>&1)
    eq "$(kf '[.kernel_features.net_namespace.ok, .kernel_features.net_namespace.error, .kernel_features.net_namespace.detail, .kernel_features.uts_namespace.ok] | map(tostring) | join("|")')" \
        "false|ECANCELED|not tried: this run made none ('pvisor doctor' probes it)|true" \
        "--filesystem sandbox keeps the host's network namespace: net_namespace is not tried, not claimed ok"
    if command -v strace >/dev/null; then
        no_lsan strace -f -o "$T/netns.strace" -e trace=unshare,clone,clone3 "$PVISOR" run --safe --workspace "$T/safews" -- true >/dev/null 2>&1
        eq "$(grep -c 'CLONE_NEWNET' "$T/netns.strace")" 1 "a --safe run makes one network namespace, the sandbox's (no probe makes another)"
        # the hidden launcher is pvisor executed again (a fresh, single-
        # threaded process: the supervisor has its views' threads by then)
        no_lsan strace -f -o "$T/launch.strace" -e trace=execve "$PVISOR" run --safe --workspace "$T/safews" -- true >/dev/null 2>&1
        eq "$(grep -c 'execve("/proc/self/exe", \["/proc/self/exe", "__launch"\]' "$T/launch.strace"):$(grep -c 'execve(' "$T/launch.strace")" "1:3" \
            "a --safe run executes pvisor again as its launcher (pvisor __launch), then the command: three execs in all"
        no_lsan strace -f -o "$T/netns.strace" -e trace=unshare,clone,clone3 "$PVISOR" run -- true >/dev/null 2>&1
        eq "$(grep -c 'CLONE_NEWNET' "$T/netns.strace")" 1 "a plain run still probes namespaces in a child (its one network namespace)"
        eq "$(kf '.kernel_features.net_namespace | [.ok, .detail] | map(tostring) | join(" ")')" "true " \
            "... and records its own probe's result"
    else
        skip "a --safe run makes one network namespace" "strace missing (apt-get install strace)"
    fi
    if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        UW="$T/userprobe"; mkdir -p "$UW/ws"; chown -R 65534:65534 "$UW"
        (cd "$UW/ws" && HOME="$UW" XDG_STATE_HOME="$UW/state" setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$PVISOR" run --safe -- true >/dev/null 2>&1)
        ub=$(ls -d "$UW"/state/pvisor/runs/*/ 2>/dev/null | tail -n1)
        eq "$(jq -r ".kernel_features | [.uid, .user_namespaces.detail, ($NSK | map(.ok) | all)] | map(tostring) | join(\" \")" "$ub/bundle.json" 2>/dev/null)" \
            "65534 made by this run: its supervisor's user namespace (uid_map \"0 65534 1\") true" \
            "an ordinary user's --safe run: the one-ID map the probe used to try, made by the run"
        eq "$(jq -r '.dimensions.resources.evidence.user_namespace_differs' "$ub/bundle.json" 2>/dev/null)" true \
            "... and its resources evidence says the command's user namespace is not the host's"
    else
        skip "an ordinary user's --safe run records its own namespaces" "needs root and setpriv"
    fi
else
    skip "a sandboxed run's namespace features" "--safe does not run here (see doctor)"
fi
"$PVISOR" doctor --bogus 2>/dev/null; eq $? 2 "doctor with an unknown option exits 2"
# SHA-256 is libcrypto's, linked in from libcrypto.a: no pvisor process
# loads libcrypto.so (its relocation cost each one that hashed about a
# millisecond), not the run's probe, not the FUSE server's copy-up (which
# hashes what it copies), not apply; and the Bundle has the probe's result.
eq "$(readelf -d "$PVISOR" | grep -c 'NEEDED.*libcrypto')" 0 "pvisor does not need libcrypto.so"
if [ "$safe_works" = true ] && command -v strace >/dev/null; then
    echo old > "$T/safews/f"
    no_lsan strace -f -o "$T/probe.strace" -e trace=openat "$PVISOR" run --safe --workspace "$T/safews" -- \
        sh -c 'echo new >> "$1"' sh "$T/safews/f" >/dev/null 2>&1
    rc=$?
    eq "$rc:$(grep -c 'libcrypto' "$T/probe.strace")" "0:0" "a --safe run that copies a file up opens no libcrypto"
    eq "$(jq -r '.kernel_features.sha256.ok, .stage.copy_ups' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" | tr '\n' ' ')" \
        "true 1 " "the run's Bundle has the SHA-256 probe's result, and the copy-up"
    no_lsan strace -f -o "$T/apply.strace" -e trace=openat sh -c 'cd "$1" && shift && exec "$@"' sh "$T/safews" "$PVISOR" apply >/dev/null 2>&1
    rc=$?
    eq "$rc:$(cat "$T/safews/f" | tr '\n' ' '):$(grep -c 'libcrypto' "$T/apply.strace")" "0:old new :0" \
        "apply checks and writes the copied-up file without opening libcrypto"
else
    skip "no libcrypto opened by a run or an apply" "needs --safe working here and strace"
fi
# A PATH entry in the workspace (an activated venv's bin) is where the
# agent's links lead: an applied '.venv/bin' -> a host directory made the
# sandbox project that directory as a toolchain (its files readable, its
# sockets below two levels connectable).  Only a toolchain may come of it;
# an entry outside the workspace is still projected.
if [ "$safe_works" = true ] && [ -d /dev/shm ] && DS=$(mktemp -d /dev/shm/pvisor-test.XXXXXX); then
    # the sandbox's own /dev hides a workspace there: refused up front, saying why
    at_exit "rm -rf '$DS'"
    before=$(run_count)
    (cd "$DS" && "$PVISOR" run --safe -- true) 2>"$T/devws.err"; rc=$?
    eq "$rc:$(grep -c "the workspace $DS is under /dev, which the sandbox replaces with its own: use a workspace elsewhere" "$T/devws.err"):$(grep -c chdir "$T/devws.err"):$(( $(run_count) - before ))" \
        "2:1:0:0" "--safe: a workspace under /dev/shm is a usage error, saying why, and records no run (it failed at 'chdir' inside, then was refused with 125 and a run record)"
fi
if [ "$safe_works" = true ]; then
    mkdir -p "$T/pathws/.venv" "$T/pathsecret/a/b" "$T/pathtool/bin"
    echo PATHSECRET > "$T/pathsecret/secret.txt"
    ln -s "$T/pathsecret" "$T/pathws/.venv/bin"
    printf '#!/bin/sh\necho tool-ok\n' > "$T/pathtool/bin/pv-path-tool"; chmod +x "$T/pathtool/bin/pv-path-tool"
    out=$(cd "$T/pathws" && PATH="$T/pathws/.venv/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c PATHSECRET)" 0 "--safe: a PATH entry in the workspace linked to a host directory does not project it"
    out=$(cd "$T/pathws" && PATH="$T/pathtool/bin:$PATH" "$PVISOR" run --safe -- pv-path-tool 2>&1)
    eq "$out" tool-ok "--safe: a PATH entry outside the workspace is still projected as the command's toolchain"
    # The same for a directory granted read-write: the agent writes there
    # on the host directly, so a link it left in an earlier run (the
    # granted tools' bin replaced by a link to a host directory) is its.
    mkdir -p "$T/pathgrant"
    ln -s "$T/pathsecret" "$T/pathgrant/bin"
    out=$(cd "$T/pathws" && PATH="$T/pathgrant/bin:$PATH" "$PVISOR" run --safe --allow-write "$T/pathgrant" -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c PATHSECRET)" 0 "--safe: a PATH entry in a read-write grant linked to a host directory does not project it"
    out=$(cd "$T/pathws" && PATH="$T/pathtool/bin:$PATH" "$PVISOR" run --safe --allow-write "$T/pathtool" -- pv-path-tool 2>&1)
    eq "$out" tool-ok "--safe: a command in a read-write grant still runs"
    # ... and in the workspace of an earlier run whose stage was applied:
    # a monorepo's root, where the agent ran first, with its venv active
    # while the next agent runs in one of its packages (whose workspace
    # does not hold the venv).  An applied '.venv/bin' (or a '.venv') that
    # links to a host directory projected it.  The root's own files on
    # PATH are still shown as they are.
    mkdir -p "$T/mono/pkg" "$T/mono/tools"
    printf '#!/bin/sh\necho mono-tool-ok\n' > "$T/mono/tools/pv-mono-tool"; chmod +x "$T/mono/tools/pv-mono-tool"
    (cd "$T/mono" && "$PVISOR" run --safe -- sh -c "mkdir .venv && ln -s '$T/pathsecret' .venv/bin && ln -s '$T/pathsecret' .venv2" &&
        "$PVISOR" apply >/dev/null)
    out=$(cd "$T/mono/pkg" && PATH="$T/mono/.venv/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    out2=$(cd "$T/mono/pkg" && VIRTUAL_ENV="$T/mono/.venv2" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out$out2" | grep -c PATHSECRET)" 0 \
        "--safe: a PATH entry or VIRTUAL_ENV in an earlier run's applied workspace, linked to a host directory, does not project it"
    out=$(cd "$T/mono/pkg" && PATH="$T/mono/tools:$PATH" "$PVISOR" run --safe -- pv-mono-tool 2>&1)
    eq "$out" mono-tool-ok "--safe: a PATH entry in an earlier run's workspace that leads inside it is still shown"
    # an earlier run's read-write grant, which this run does not name
    mkdir -p "$T/oldgrant"
    (cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/oldgrant" -- ln -s "$T/pathsecret" "$T/oldgrant/bin")
    out=$(cd "$T/pathws" && PATH="$T/oldgrant/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c PATHSECRET)" 0 "--safe: a PATH entry in an earlier run's read-write grant linked to a host directory does not project it"
    # a read-write grant through a link left in an earlier run's grant
    # (~/.cache/pip -> ~/.config/systemd/user, the narrower grant pvisor's
    # own warning suggests): it wrote a unit into the directory the link
    # chose (found by a red-team pass); refused, naming the directory; a
    # grant of a real directory in there, or of the directory itself,
    # still runs
    mkdir -p "$T/oldgrant/realdir" "$T/units"
    (cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/oldgrant" -- ln -s "$T/units" "$T/oldgrant/pip")
    out=$(cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/oldgrant/pip" -- sh -c "echo x > '$T/oldgrant/pip/evil.service'" 2>&1); rc=$?
    eq "$rc:$(ls "$T/units" | wc -l):$(echo "$out" | grep -c "leads to $T/units through the link $T/oldgrant/pip")" "125:0:1" \
        "--safe: a read-write grant through a link in an earlier run's grant is refused, naming where it leads; nothing is written"
    out=$(cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/oldgrant/realdir" --allow-write "$T/units" -- sh -c "echo y > '$T/oldgrant/realdir/f' && echo z > '$T/units/u'" 2>&1); rc=$?
    eq "$rc:$(cat "$T/oldgrant/realdir/f" "$T/units/u" | tr '\n' ' ')" "0:y z " "  a grant of a real directory in there, or of where the link led, runs"
    rm -rf "$T/oldgrant/realdir" "$T/oldgrant/pip" "$T/units"
    # those directories are read from one record (reading every run's
    # Bundle at each start cost a millisecond per ten runs), which a state
    # directory made before it had is built from the Bundles once
    eq "$(tr '\0' '\n' < "$XDG_STATE_HOME/pvisor/agent-written" | grep -c -x -e "$T/mono" -e "$T/oldgrant")" 2 \
        "  the record holds the applied workspace and the earlier grant"
    rm "$XDG_STATE_HOME/pvisor/agent-written"
    out=$(cd "$T/mono/pkg" && PATH="$T/mono/.venv/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c PATHSECRET):$(tr '\0' '\n' < "$XDG_STATE_HOME/pvisor/agent-written" | grep -c -x -e "$T/mono" -e "$T/oldgrant")" "0:2" \
        "  without the record (an older state directory), it is built from the recorded runs, and still nothing is projected"
    # ... also when what finds it missing first is a run with a grant of
    # its own (or an apply): that made the record with its own directory
    # alone, and the earlier runs' were forgotten for good
    rm "$XDG_STATE_HOME/pvisor/agent-written"
    mkdir -p "$T/newgrant"
    (cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/newgrant" -- true)
    out=$(cd "$T/mono/pkg" && PATH="$T/mono/.venv/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c PATHSECRET):$(tr '\0' '\n' < "$XDG_STATE_HOME/pvisor/agent-written" | grep -c -x -e "$T/mono" -e "$T/oldgrant" -e "$T/newgrant")" "0:3" \
        "  a run with a grant that finds no record builds it whole before it adds its grant"
    # a record cut in its last path (a full disk): the next one is still whole
    printf '/cut-short' >> "$XDG_STATE_HOME/pvisor/agent-written"
    mkdir -p "$T/newgrant2"
    (cd "$T/pathws" && "$PVISOR" run --safe --allow-write "$T/newgrant2" -- true)
    eq "$(tr '\0' '\n' < "$XDG_STATE_HOME/pvisor/agent-written" | grep -c -x "$T/newgrant2")" 1 \
        "  a path added after a torn one is recorded whole"
    # a long record (a CI host applies into a fresh workspace each time)
    # still works and still protects (the time it takes to
    # read, once quadratic, is docs/performance.md's, not a test's)
    cp "$XDG_STATE_HOME/pvisor/agent-written" "$T/aw.saved"
    awk -v t="$T" 'BEGIN { for (i = 0; i < 100000; i++) printf "%s/ci/tmp.%08d/checkout%c", t, i, 0 }' \
        >> "$XDG_STATE_HOME/pvisor/agent-written"
    printf '%s\0' "$T/mono" >> "$XDG_STATE_HOME/pvisor/agent-written"
    out=$(cd "$T/mono/pkg" && PATH="$T/mono/.venv/bin:$PATH" "$PVISOR" run --safe -- cat "$T/pathsecret/secret.txt" 2>&1); rc=$?
    mv "$T/aw.saved" "$XDG_STATE_HOME/pvisor/agent-written"
    eq "$rc:$(echo "$out" | grep -c PATHSECRET)" "1:0" "  with 100,000 recorded directories a run works, and an applied workspace still counts"
    # A FIFO the agent made and the user applied, where the next run reads
    # before the sandbox exists ('.git', the command's #! line): that run
    # waited for a writer, silently, forever.
    mkdir -p "$T/fifows"
    (cd "$T/fifows" && "$PVISOR" run --safe -- sh -c 'mkfifo .git run.sh' && "$PVISOR" apply >/dev/null)
    out=$(cd "$T/fifows" && timeout 30 "$PVISOR" run --safe -- sh -c 'echo fifo-run-ok' 2>&1); rc=$?
    (cd "$T/fifows" && timeout 30 "$PVISOR" run --safe -- ./run.sh >/dev/null 2>&1); rc2=$?
    eq "$rc:$out:$rc2" "0:fifo-run-ok:126" "--safe: a FIFO applied as '.git' or named as the command does not hang the next run"
else
    skip "a PATH entry in the workspace does not project where it leads" "needs --safe working here"
fi
# A tool's directory in HOME that is a link to another disk (~/.pyenv ->
# /data/pyenv): the HOME view shows the link, and only the PATH entry
# (its shims) was projected where it leads, so a pyenv shim, which runs
# $PYENV_ROOT/libexec/pyenv, failed with 127.  The tool's whole directory
# where it lives is projected now; not its parent.
if [ "$safe_works" = true ]; then
    mkdir -p "$T/lhome" "$T/ldata/tool/shims" "$T/ldata/tool/libexec" "$T/lws"
    echo LINKSECRET > "$T/ldata/secret.txt"
    ln -s "$T/ldata/tool" "$T/lhome/.tool"
    printf '#!/bin/sh\nexec "$HOME/.tool/libexec/real" "$@"\n' > "$T/ldata/tool/shims/pv-shim"
    printf '#!/bin/sh\necho linked-tool-ok\n' > "$T/ldata/tool/libexec/real"
    chmod +x "$T/ldata/tool/shims/pv-shim" "$T/ldata/tool/libexec/real"
    out=$(cd "$T/lws" && HOME="$T/lhome" PATH="$T/lhome/.tool/shims:$PATH" "$PVISOR" run --safe -- pv-shim 2>&1)
    eq "$out" linked-tool-ok "--safe: a tool whose directory in HOME links elsewhere runs (its whole directory is projected)"
    out=$(cd "$T/lws" && HOME="$T/lhome" PATH="$T/lhome/.tool/shims:$PATH" "$PVISOR" run --safe -- cat "$T/ldata/secret.txt" 2>&1)
    eq "$(echo "$out" | grep -c LINKSECRET)" 0 "... and the directory that holds it is not"
    # a tool manager outside HOME and /opt, named by the environment
    # (PYENV_ROOT=/srv/pyenv; an activated venv): only its shims (the PATH
    # entry) were projected, and the shim failed with 127
    mkdir -p "$T/eroot/shims" "$T/eroot/libexec" "$T/ebad/shims" "$T/ebad/.ssh"
    printf '#!/bin/sh\nexec "%s/eroot/libexec/real" "$@"\n' "$T" > "$T/eroot/shims/pv-eshim"
    printf '#!/bin/sh\necho env-root-ok\n' > "$T/eroot/libexec/real"
    echo EKEY > "$T/ebad/.ssh/id_rsa"; printf '#!/bin/sh\ncat %s/ebad/.ssh/id_rsa\n' "$T" > "$T/ebad/shims/pv-bshim"
    chmod +x "$T/eroot/shims/pv-eshim" "$T/eroot/libexec/real" "$T/ebad/shims/pv-bshim"
    out0=$(cd "$T/lws" && PATH="$T/eroot/shims:$PATH" "$PVISOR" run --safe -- pv-eshim 2>/dev/null)
    out=$(cd "$T/lws" && PYENV_ROOT="$T/eroot" PATH="$T/eroot/shims:$PATH" "$PVISOR" run --safe -- pv-eshim 2>&1)
    out2=$(cd "$T/lws" && VIRTUAL_ENV="$T/ebad" PATH="$T/ebad/shims:$PATH" "$PVISOR" run --safe -- pv-bshim 2>&1)
    eq "$out0:$out:$(echo "$out2" | grep -c EKEY)" ":env-root-ok:0" \
        "--safe: a tool manager's root named by the environment (PYENV_ROOT) is projected whole, not one holding a credential location"
else
    skip "a tool whose directory in HOME links elsewhere runs" "needs --safe working here"
fi
# A directory widened from a PATH entry (/opt/app for /opt/app/bin) that
# holds a home one level down: only ten locations that mark a home were
# looked for there, so a home with only others (.npmrc, a coding agent's
# token) was projected with it (found by a red-team pass). In a private
# mount namespace with its own /opt; the same tool without a home beside
# it is still widened.
if [ "$safe_works" = true ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    cat > "$T/optw.sh" <<EOF
mount -t tmpfs tmpfs /opt || exit 77
for a in ciagent plain; do
    mkdir -p /opt/\$a/bin /opt/\$a/home/.claude
    printf '#!/bin/sh\\necho %s-ok\\n' \$a > /opt/\$a/bin/pv-\$a; chmod +x /opt/\$a/bin/pv-\$a
    echo notes > /opt/\$a/home/notes
done
echo NPMTOKEN > /opt/ciagent/home/.npmrc; echo CLAUDETOKEN > /opt/ciagent/home/.claude/.credentials.json
cd "$T/pathws" || exit 1
PATH=/opt/ciagent/bin:/opt/plain/bin:\$PATH "$PVISOR" run --safe -- sh -c 'pv-ciagent; pv-plain; cat /opt/ciagent/home/.npmrc /opt/ciagent/home/.claude/.credentials.json /opt/ciagent/home/notes /opt/plain/home/notes 2>/dev/null'
EOF
    out=$(unshare -m --propagation private sh "$T/optw.sh" 2>&1); rc=$?
    if [ $rc -eq 77 ]; then
        skip "--safe: a widened tool directory holding a home one level down" "cannot mount a private /opt here"
    else
        eq "$(echo $out)" "ciagent-ok plain-ok notes" \
            "--safe: a tool directory with a home one level down holding any credential location (.npmrc, .claude) is not widened; one without is"
    fi
fi
# A grant on a FUSE file system that also holds a projected system
# directory (a rootless container's fuse-overlayfs root) was taken for one
# of pvisor's own views and not scanned: its host sockets were reachable
# while ipc said enforced.  Here /etc is bound from such a file system in a
# private mount namespace.
if [ "$safe_works" = true ] && [ "$(id -u)" -eq 0 ] && command -v fuse-overlayfs >/dev/null && command -v python3 >/dev/null; then
    mkdir -p "$T/fz/l/grant" "$T/fz/u" "$T/fz/w" "$T/fz/m" "$T/fzws"
    cp -a /etc "$T/fz/l/etc"
    cat > "$T/fz/in.sh" <<EOF
fuse-overlayfs -o lowerdir=$T/fz/l,upperdir=$T/fz/u,workdir=$T/fz/w $T/fz/m 2>/dev/null || exit 77
mount --bind $T/fz/m/etc /etc || exit 77
python3 -c 'import socket,time; s=socket.socket(socket.AF_UNIX); s.bind("$T/fz/m/grant/svc.sock"); s.listen(5); time.sleep(60)' &
sp=\$!
i=0; while [ ! -S $T/fz/m/grant/svc.sock ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done
cd $T/fzws && "$PVISOR" run --safe --access ro:$T/fz/m/grant -- python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect("$T/fz/m/grant/svc.sock"); print("CONNECTED")' 2>/dev/null
kill \$sp; wait \$sp; umount /etc; fusermount -u $T/fz/m 2>/dev/null || umount -l $T/fz/m
EOF
    out=$(unshare -m --propagation private sh "$T/fz/in.sh"); rc=$?
    if [ $rc -eq 77 ]; then
        skip "a grant on the FUSE file system of a projected /etc is scanned" "fuse-overlayfs cannot mount here"
    else
        eq "$out:$(jq -r '.dimensions.ipc.evidence.host_unix_sockets.covered_in_grants' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" ":1" \
            "--safe: a socket in a grant on the FUSE file system of a projected /etc is covered, not taken for pvisor's own view"
    fi
else
    skip "a grant on the FUSE file system of a projected /etc is scanned" "needs --safe, root, fuse-overlayfs and python3"
fi
# qemu: the native system emulator on $PATH (the VM executor runs the
# host's binaries), never a foreign one.
mkdir -p "$T/qemu-native" "$T/qemu-foreign"
m=$(uname -m); case $m in i?86) m=i386;; armv*) m=arm;; ppc64le) m=ppc64;; esac
foreign=$([ "$m" = aarch64 ] && echo x86_64 || echo aarch64)
printf '#!/bin/sh\n' > "$T/qemu-native/qemu-system-$m"; printf '#!/bin/sh\n' > "$T/qemu-foreign/qemu-system-$foreign"
chmod 0755 "$T/qemu-native/qemu-system-$m" "$T/qemu-foreign/qemu-system-$foreign"
eq "$(PATH="$T/qemu-foreign:$T/qemu-native" "$PVISOR" doctor --json | jq -r '.features.qemu.path')" "$T/qemu-native/qemu-system-$m" \
    "doctor: qemu is the native qemu-system-$m on PATH"
eq "$(PATH="$T/qemu-foreign" "$PVISOR" doctor --json | jq -r '.features.qemu.found')" false \
    "doctor: a foreign qemu-system-$foreign alone is not taken for qemu"

# --- a command that ignores SIGTERM is killed after the grace period ------------
rm -f "$T/ign"
PVISOR_KILL_GRACE_MS=300 "$PVISOR" run -- sh -c "trap '' TERM; echo ready > '$T/ign'; while :; do sleep 0.05; done" &
pv=$!
i=0; while [ ! -s "$T/ign" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
kill -TERM $pv; wait $pv; rc=$?
eq "$rc:$(jq -r '.exit.signal_name' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "143:KILL" \
    "a command ignoring SIGTERM is SIGKILLed after the grace period (pvisor ends by the SIGTERM it was sent)"
eq "$(jq -r '.warnings | map(test("did not stop")) | any' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" true \
   "the Bundle says the command was killed after not stopping"
rm -f "$T/ign"
env --default-signal=INT "$PVISOR" run -- sh -c "trap '' INT; echo ready > '$T/ign'; while :; do sleep 0.05; done" &
pv=$!
i=0; while [ ! -s "$T/ign" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
kill -INT $pv; sleep 0.1; kill -INT $pv; wait $pv; rc=$?
eq "$rc:$(jq -r '.exit.signal_name' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "130:KILL" \
    "a second SIGINT kills a command that ignores the first (pvisor ends by SIGINT)"
# a command that exits by itself, 0, on a SIGINT sent to pvisor (Ctrl-C, a
# CI job's cancel) decides the exit status (above), but the run was cut
# short: the Bundle, status and the review showed a run that finished
rm -f "$T/ign"
mkdir -p "$T/intr"; (cd "$T/intr" && exec env --default-signal=INT "$PVISOR" run --stage "$T/intrs" -- sh -c "trap 'exit 0' INT; echo ready > '$T/ign'; sleep 3015 & wait") 2>"$T/intr.err" &
pv=$!
i=0; while [ ! -s "$T/ign" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
kill -INT $pv; wait $pv; rc=$?
eq "$rc:$(grep -c 'interrupted: pvisor was sent SIGINT and forwarded it; the command exited with status 0 on it' "$T/intr.err"):$("$PVISOR" status | grep -c '^Exit: *status 0 (on SIGINT sent to pvisor: the run was interrupted)$'):$(jq -r '.exit.interrupted_by, (.warnings | map(test("interrupted")) | any)' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" | tr '\n' ' ')" \
    "130:1:1:INT true " "a command that exits 0 on a SIGINT sent to pvisor: the run says it was interrupted, pvisor ends by SIGINT"
eq "$("$PVISOR" status --review | grep -c '^Ended: *exit status 0 on SIGINT sent to pvisor (interrupted)')" 1 \
    "... and the review says so"

# --- --timeout --------------------------------------------------------------------
start=$(date +%s)
PVISOR_KILL_GRACE_MS=200 "$PVISOR" run --timeout 1 -- sleep 3012 2>"$T/timeout.err"; rc=$?
el=$(( $(date +%s) - start ))
eq "$rc" 143 "--timeout terminates the command with SIGTERM (128+15)"
eq "$(cat "$T/timeout.err"):$("$PVISOR" status | grep '^Exit:')" \
    "pvisor run: the run's --timeout of 1 s expired; the command was terminated:Exit:        killed by signal 15 (SIGTERM) after its --timeout expired; pvisor exited 143" \
    "--timeout: the run says on stderr that it expired, and so does pvisor status"
check "--timeout ended the run well before the command would have" test "$el" -lt 10
eq "$(jq -r '.exit.timed_out, .requested_policy.timeout_seconds' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" | tr '\n' ' ')" \
   "true 1 " "the Bundle records the timeout and that it expired"
# The sandbox's own host name resolves (Java's getLocalHost(), `hostname
# -f`, git): the run's name server answers no name, and the run then told
# the user to --allow-net its own host name (found by a review). /etc/hosts
# shows it, the host's lines kept; under --network loopback too.
if [ "$safe_works" = true ]; then
    hn='h=$(hostname); getent hosts "$h" >/dev/null && echo "$h resolves"; python3 -c "import socket; socket.getaddrinfo(socket.gethostname(), None); print(\"ok\")"; getent hosts localhost >/dev/null && echo localhost'
    out=$(cd "$T/safews" && "$PVISOR" run --safe -- sh -c "$hn" 2>"$T/hn.err"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'looked up' "$T/hn.err")" "0:pvisor resolves ok localhost:0" \
        "--safe: the sandbox's host name resolves (/etc/hosts), localhost too; no lookup of it recorded"
    out=$(cd "$T/safews" && "$PVISOR" run --safe --network loopback -- sh -c "$hn" 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:pvisor resolves ok localhost" "--safe --network loopback: the same"
fi
# A change to a large sparse file the workspace holds (a VM image): the
# view digests its preimage, every hole as zeros (1 TiB: some ten minutes),
# and the command waits in the kernel for the view's answer, killed or
# not: --timeout (and Ctrl-C) ended the run only when the digest did (found
# by a red-team pass). The copy stops for a process that is killed; one
# that is merely signalled (a handler) gets its chmod done.
if [ "$safe_works" = true ]; then
    SP=$T/sparse; mkdir -p "$SP" && truncate -s 1T "$SP/vm.img" && truncate -s 2G "$SP/small.img"
    (cd "$SP" && timeout -s KILL 300 "$PVISOR" run --safe --timeout 1 -- rm vm.img) >/dev/null 2>&1; rc=$?
    b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
    eq "$rc:$(jq -r '.exit.timed_out' "$b"):$("$PVISOR" status --review --json "$(latest_run)" 2>/dev/null | jq -r .stage.state):$(stat -c %s "$SP/vm.img")" \
        "143:true:sealed:1099511627776" \
        "--safe --timeout 1 -- rm of a 1 TiB sparse file: the run ends on its timeout (not when the digest would), its stage sealed, the file kept"
    (cd "$SP" && timeout -s KILL 300 "$PVISOR" run --safe -- python3 -c '
import os, signal, subprocess
n = [0]
def h(s, f): n[0] += 1
signal.signal(signal.SIGUSR1, h)
p = subprocess.Popen(["sh", "-c", "while kill -USR1 %d 2>/dev/null; do sleep 0.05; done" % os.getpid()])
os.chmod("small.img", 0o600)
p.kill()
print("chmod done")') > "$T/sparse.out" 2>&1; rc=$?
    eq "$rc:$(cat "$T/sparse.out"):$(stat -c %a "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/stage/upper/small.img" 2>&1)" "0:chmod done:600" \
        "  control: a chmod of a 2 GiB sparse file by a process signalled (not killed) meanwhile completes"
    rm -f "$SP/vm.img" "$SP/small.img"
fi
# the termination signal goes to the command's process group, its
# background jobs too, which may clean up before the end kills them; under
# --safe it went to the command alone (the job was killed at the end, its
# trap never ran, and the command, waiting for it, until the grace ran out)
for mode in "" --safe; do
    if [ -n "$mode" ] && [ "$safe_works" != true ]; then
        skip "--timeout (--safe): the background job gets the SIGTERM too" "--safe does not run here"
        continue
    fi
    mkdir -p "$T/tgw$mode"
    (cd "$T/tgw$mode" && PVISOR_KILL_GRACE_MS=5000 "$PVISOR" run $mode --stage "$T/tgs$mode" --timeout 1 -- sh -c '
        trap "wait" TERM; (trap "echo got >> got.txt; exit 0" TERM; while :; do sleep 0.1; done) & wait') >/dev/null 2>&1
    eq "$(cat "$T/tgs$mode/upper/got.txt" 2>/dev/null):$(jq -r '[.warnings[] | select(test("did not stop"))] | length' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
        "got:0" "--timeout${mode:+ ($mode)}: the background job gets the SIGTERM too, and its trap runs (no escalation)"
done
# under --safe the namespace init relayed --timeout's SIGTERM to the
# command's group twice (it got it from the supervisor's signal to the
# launcher's group and again from the launcher's relay; a TERM trap could
# run twice): once now (strace counts init's relays: to the command's
# group, a pid of the namespace's own, 2 or 3; the supervisor's signals go
# to host pids, never one below 10)
if [ "$safe_works" = true ] && command -v strace >/dev/null; then
    mkdir -p "$T/tg2"
    (cd "$T/tg2" && no_lsan strace -f -o "$T/tg2.strace" -e trace=kill -e signal=none "$PVISOR" run --safe --stage "$T/tg2s" --timeout 1 -- sleep 5) >/dev/null 2>&1
    eq "$(grep -cE 'kill\(-[2-9], SIGTERM\)' "$T/tg2.strace")" 1 "--timeout (--safe): the SIGTERM reaches the command's group once (init relays it once)"
else
    skip "--timeout (--safe): the SIGTERM reaches the command's group once" "needs --safe and strace"
fi
PVISOR_KILL_GRACE_MS=200 "$PVISOR" run --timeout 1 -- sh -c "trap '' TERM; sleep 3013"; rc=$?
eq "$rc" 137 "--timeout kills a command that ignores SIGTERM after the grace period"
# a command that exits by itself, 0, on the SIGTERM: its 0 would pass for a
# finished run (`pvisor run ... && pvisor apply` applied a run cut short)
PVISOR_KILL_GRACE_MS=5000 "$PVISOR" run --timeout 1 -- sh -c "trap 'exit 0' TERM; sleep 3014 & wait" 2>"$T/timeout0.err"; rc=$?
eq "$rc:$(grep -c 'exited with status 0 on the SIGTERM: pvisor exits 124' "$T/timeout0.err"):$("$PVISOR" status | grep -c '^Exit: *status 0 (its --timeout expired; pvisor exited 124)$'):$(jq -r .exit.pvisor_exit_status "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
    "124:1:1:124" "--timeout: a command that exits 0 on the SIGTERM makes pvisor exit 124 (as timeout(1)), and says so"
"$PVISOR" run --timeout 0 -- true 2>/dev/null; eq $? 2 "--timeout 0 is a usage error"
"$PVISOR" run --timeout 5x -- true 2>/dev/null; eq $? 2 "--timeout with a bad unit is a usage error"
"$PVISOR" run --timeout 10 -- true; eq $? 0 "a command that finishes in time is unaffected by --timeout"

# --- --network ----------------------------------------------------------------
# --safe: a network namespace of its own (only its loopback) and no TCP at
# all (Landlock), also on that loopback; --network loopback allows TCP
# there (a test suite's local server); the host's loopback services stay
# out of reach either way (tests/adversarial).
mkdir -p "$T/netws"
cat > "$T/netws/lo.py" <<'PYEOF'
import socket, threading
try:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); port = s.getsockname()[1]
    def serve():
        c, _ = s.accept(); c.sendall(b"pong"); c.close()
    threading.Thread(target=serve, daemon=True).start()
    c = socket.create_connection(("127.0.0.1", port)); print("loopback", c.recv(10).decode())
except OSError as e:
    print("loopback refused", e.strerror)
PYEOF
out1=$(cd "$T/netws" && "$PVISOR" run --safe -- /usr/bin/python3 lo.py 2>&1)
abi=$(jq -r .sandbox_evidence.landlock.abi "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")
net1=$(jq -r '"\(.dimensions.network.effective) \(.dimensions.network.evidence.landlock_handled_net) \(.dimensions.network.notes | length)"' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")
out2=$(cd "$T/netws" && "$PVISOR" run --safe --network loopback -- /usr/bin/python3 lo.py 2>&1)
if [ "$abi" -ge 4 ]; then
    eq "$out1|$out2|$net1" "loopback refused Permission denied|loopback pong|enforced 3 0" \
        "--safe: no TCP even on the sandbox's own loopback; --network loopback allows it there"
else
    # Landlock's TCP rights came with ABI 4 (Linux 6.7): before it the
    # sandbox's own loopback takes TCP, and the Bundle's network says so
    eq "$out1|$out2|$net1" "loopback pong|loopback pong|enforced 0 1" \
        "--safe on Landlock ABI $abi (no TCP rights before ABI 4): TCP on the sandbox's own loopback works, and the Bundle notes it"
fi
eq "$(jq -r '.requested_policy.network, .dimensions.network.effective, .dimensions.network.evidence.landlock_handled_net' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json" | tr '\n' ' ')" \
    "loopback enforced 0 " "the Bundle records --network loopback (no Landlock TCP rights; network still enforced)"
"$PVISOR" run --network loopback -- true 2>/dev/null; eq $? 2 "--network without --safe is a usage error"
"$PVISOR" run --safe --network wide -- true 2>/dev/null; eq $? 2 "--network takes none or loopback"

# --- npm prefixes -------------------------------------------------------------
# A command npm installed in a prefix outside HOME, /usr and /opt
# (PREFIX/node_modules/.bin/x, a link into its package) finds the rest of
# its node_modules tree (a platform package beside it), run by its name or
# through a shell (codex failed with 'Missing optional dependency').
nm="$T/npmpfx/node_modules"
mkdir -p "$nm/.bin" "$nm/@scope/tool/bin" "$nm/@scope/tool-linux-x64"
echo TOOL-DEP > "$nm/@scope/tool-linux-x64/data"
printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\ncat "$d/../../tool-linux-x64/data"\n' > "$nm/@scope/tool/bin/tool.sh"
chmod 0755 "$nm/@scope/tool/bin/tool.sh"
ln -s ../@scope/tool/bin/tool.sh "$nm/.bin/pvtool"
out1=$(cd "$T/safews" && PATH="$nm/.bin:$PATH" "$PVISOR" run --safe -- pvtool 2>&1)
out2=$(cd "$T/safews" && PATH="$nm/.bin:$PATH" "$PVISOR" run --safe -- sh -c pvtool 2>&1)
eq "$out1|$out2" "TOOL-DEP|TOOL-DEP" "--safe: an npm-installed command reads its platform package beside it, also run through a shell"

# --- arguments and paths that are not UTF-8 -----------------------------------
# JSON cannot carry them and json_string() refuses them: an argument was
# dropped from the Bundle, and under --safe from the command itself (the
# launch plan), so `echo A B\377 C` ran as `echo A C`; a workspace or cwd
# of such a name made run fail with "out of memory", leaving a run
# directory without a Bundle that then blocked every bare lifecycle verb.
bad=$(printf 'B\377')
"$PVISOR" run -- "$PVAGENT" exit 0 "$bad" x >/dev/null 2>&1
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -c '[.command, .command_hex]' "$b")" "[[\"$PVAGENT\",\"exit\",\"0\",null,\"x\"],[null,null,null,\"42ff\",null]]" \
    "an argument that is not UTF-8 is null in the Bundle's command, its bytes in command_hex at its index"
check "such a Bundle is valid" $VALIDATE "$b"
eq "$("$PVISOR" status | grep '^Command:')" "Command:     $PVAGENT exit 0 B\\xff x" "status prints it escaped"
eq "$("$PVISOR" list | head -2 | tail -1 | sed 's/.* exit 0 //')" 'B\xff x' "list prints it escaped"
mkdir -p "$T/odd/$bad"
(cd "$T/odd/$bad" && "$PVISOR" run -- "$PVAGENT" exit 0 >/dev/null 2>&1); rc=$?
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$rc $(jq -r '.cwd, .cwd_hex, .workspace' "$b" | tr '\n' ' ')" "0 null $(printf '%s' "$T/odd/$bad" | od -An -tx1 | tr -d ' \n') null " \
    "a plain run in a cwd that is not UTF-8 runs, and the Bundle gives it as cwd_hex (its workspace null: never looked up)"
check "  such a Bundle is valid" $VALIDATE "$b"
(cd "$T/odd/$bad" && "$PVISOR" run --stage auto --workspace "$T/odd" -- "$PVAGENT" exit 0 >/dev/null 2>&1); rc=$?
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$rc $(jq -r '.cwd, .cwd_hex, .workspace' "$b" | tr '\n' ' ')" "0 null $(printf '%s' "$T/odd/$bad" | od -An -tx1 | tr -d ' \n') $T/odd " \
    "a staged run in a cwd that is not UTF-8, its workspace a directory above it, runs"
n=$(run_count)
(cd "$T/odd/$bad" && "$PVISOR" run --stage auto -- true) 2>err; rc=$?
eq "$rc $(run_count) $(grep -c . err)" "2 $n 2" "a staged workspace that is not UTF-8 is a usage error, nothing written"
check "  and the message says why" grep -q 'is not valid UTF-8' err
"$PVISOR" run --stage "$T/st$bad" -- true 2>/dev/null; rc=$?
eq "$rc $(run_count)" "2 $n" "a --stage path that is not UTF-8 is a usage error, nothing written"
if [ "$safe_works" = true ]; then
    out=$(cd "$T/safews" && V="$bad" "$PVISOR" run --safe --pass-env V -- sh -c 'printf "%s|%s|%s" "$1" "$V" "$2"' sh "$bad" x | od -An -c | tr -s ' ')
    eq "$out" " B 377 | B 377 | x" "--safe: an argument and a passed variable that are not UTF-8 reach the command byte for byte"
    out=$(cd "$T/odd/$bad" && "$PVISOR" run --safe --workspace "$T/odd" -- pwd)
    eq "$out" "$T/odd/$bad" "--safe: a cwd that is not UTF-8 is the command's"
    # --pass-env of a variable that is not set passed nothing, silently (a
    # misspelt name showed only as the agent's own failure)
    out=$(cd "$T/safews" && env -u PV_UNSET_X "$PVISOR" run --safe --pass-env PV_UNSET_X -- sh -c 'echo ${PV_UNSET_X-unset}' 2>"$T/pe.err")
    eq "$out:$(grep -c '^pvisor run: warning: --pass-env PV_UNSET_X: PV_UNSET_X is not set here' "$T/pe.err"):$(jq '[.warnings[] | select(test("PV_UNSET_X is not set"))] | length' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
        "unset:1:1" "--safe --pass-env NAME with NAME unset: a warning (stderr and Bundle), nothing passed"
    # Build tools' variables the allowlist leaves out went silently (an
    # import error inside, GOPROXY back to its default): one note names
    # them, the Bundle lists every name left out (names only); --pass-env
    # hands one over and it is not named
    out=$(cd "$T/safews" && PYTHONPATH=/pp GOFLAGS=-mod=mod PV_OTHER_VAR=secretvalue "$PVISOR" run --safe --pass-env GOFLAGS -- \
        sh -c 'echo "${PYTHONPATH-unset} ${GOFLAGS-unset} ${PV_OTHER_VAR-unset}"' 2>"$T/drop.err")
    b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
    eq "$out:$(grep -c '^pvisor run: note: the command does not get PYTHONPATH: --safe hands over only an allowlist' "$T/drop.err"):$(jq -r '.dimensions.home_credentials.evidence.environment_dropped | (index("PYTHONPATH") != null), (index("PV_OTHER_VAR") != null), (index("GOFLAGS") == null)' "$b" | tr '\n' ' '):$(grep -c secretvalue "$b")" \
        "unset -mod=mod unset:1:true true true :0" \
        "--safe: build tools' variables left out are named in one note, every name left out is in the Bundle (no value); --pass-env's is handed over"
else
    skip "--safe: arguments that are not UTF-8 reach the command" "--safe does not run here"
    skip "--safe: a cwd that is not UTF-8" "--safe does not run here"
fi

# --safe: the command line travels to the launcher in a plan of at most
# 1 MiB; a larger one is refused with the reason (the launcher failed with
# "Argument list too long" after the set-up); under it, it runs whole
A=$(head -c 100000 /dev/zero | tr '\0' a)
mkdir -p "$T/wsbig"
# shellcheck disable=SC2086
out=$(cd "$T/wsbig" && "$PVISOR" run --safe -- true $A $A $A $A $A $A $A $A $A $A $A $A 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'launch plan, which holds at most 1048576')" "125:1" "--safe with 1.2 MB of arguments is refused, saying why"
# refused before its stage was made: the Bundle names no stage (it said
# one was running, which status and list showed, the stage "missing")
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -r '[.state, (.stage | type)] | join(" ")' "$b")" "setup_failed null" \
    "  its Bundle says setup_failed, with no stage (none was made)"
check "  that Bundle validates" $VALIDATE "$b"
eq "$("$PVISOR" list --json | jq -r '.[0] | [.state, (.stage | type), (.stage_state | type)] | join(" ")')" \
    "setup_failed null null" "  list shows no stage for it"
out=$(cd "$T/wsbig" && "$PVISOR" run --safe -- sh -c 'echo $#:${#9}' x $A $A $A $A $A $A $A $A $A 2>&1); rc=$?
eq "$rc:$out" "0:9:100000" "--safe with 0.9 MB of arguments runs them whole"

# --- a SIGINT in the first milliseconds of a --safe start ------------------------
# Sent to pvisor before the command started, it killed pvisor half-way (a
# run directory without a Bundle, which every bare verb then refused, and
# the run's agent socket left); a Ctrl-C at a terminal, which reaches the
# launcher's process group, gave a setup failure (125, "the sandbox
# launcher ended without a report (see 'pvisor doctor')").  Either way the
# run now ends by the signal (130): its Bundle says interrupted (the
# command never ran), or the command had started and was sent it.  Sent at
# a few points of the start: only that the outcome is one of those is
# checked, not which.
# outcome RC BUNDLE: "ok" when consistent, else what was seen
outcome() {
    if [ ! -f "$2" ]; then echo "rc=$1 no Bundle"; return; fi
    o=$(jq -r '[.state, (.exit.status | tostring), (.exit.signal_name | tostring), (.exit.interrupted_by | tostring)] | join(" ")' "$2")
    case "$1 $o" in
    "130 interrupted null null INT" | "130 finished null INT "* | "130 finished "*" INT") echo ok ;;
    *) echo "rc=$1 $o" ;;
    esac
}
if $safe_works && env --default-signal=INT true 2>/dev/null; then
    IS="$T/intstate"; mkdir -p "$T/intws"
    seen=""
    for d in 0 0.002 0.005 0.01 0.015 0.02 0.03 0.05; do
        # SIGINT at its default, not ignored as in a background job
        (cd "$T/intws" && XDG_STATE_HOME="$IS" exec env --default-signal=INT "$PVISOR" run --safe -- sleep 5) 2>/dev/null &
        pv=$!
        i=0; while [ -z "$(ls "$IS/pvisor/runs" 2>/dev/null)" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
        sleep $d; kill -INT $pv; wait $pv; rc=$?
        r=$(ls "$IS/pvisor/runs"); b="$IS/pvisor/runs/$r/bundle.json"
        o=$(outcome $rc "$b")
        [ "$o" = ok ] && ! $VALIDATE "$b" >/dev/null 2>&1 && o="invalid Bundle"
        left=$(ls -A "$IS/pvisor/runs/$r" | grep -v -x -e bundle.json -e stage | tr '\n' ' ')
        [ -z "$left" ] || o="$o; left: $left"
        [ "$o" = ok ] || seen="$seen [after ${d}s: $o]"
        rm -rf "$IS"
    done
    eq "$seen" "" "--safe: SIGINT to pvisor as it starts ends it by the signal, its Bundle interrupted (or the command's run cut short)"
    seen=""
    for d in 0.01 0.02 0.03 0.04 0.05; do
        out=$(cd "$T/intws" && XDG_STATE_HOME="$IS" /usr/bin/python3 "$SRCDIR/tests/helpers/ptyrun.py" pause=$d 'send=\x03' -- "$PVISOR" run --safe -- sleep 5 2>&1)
        rc=$(echo "$out" | sed -n 's/^## status \([0-9]*\).*/\1/p')
        r=$(ls "$IS/pvisor/runs" 2>/dev/null)
        # before the run directory was made (a slow start: the sanitizers),
        # nothing is recorded and pvisor ends by the signal: as it should
        if [ -z "$r" ] && [ "$rc" = 130 ]; then o=ok; else o=$(outcome "$rc" "$IS/pvisor/runs/$r/bundle.json"); fi
        [ "$o" = ok ] || seen="$seen [after ${d}s: $o]"
        rm -rf "$IS"
    done
    eq "$seen" "" "--safe on a terminal: a Ctrl-C as it starts ends it by SIGINT, never as a setup failure"
else
    skip "--safe: SIGINT to pvisor as it starts" "--safe does not run here, or env lacks --default-signal"
    skip "--safe on a terminal: a Ctrl-C as it starts" "--safe does not run here, or env lacks --default-signal"
fi

# A workspace that is a linked git worktree (its .git a file naming a
# repository outside it) gets a warning before the command runs: the
# sandbox does not show that repository, so git fails there.  Not when a
# grant shows it, nor for a gitdir inside the workspace.
if [ "$safe_works" = true ]; then
    mkdir -p "$T/gitmain/.git/worktrees/wt" "$T/gitwt" "$T/gitin/.git-real"
    echo ../.. > "$T/gitmain/.git/worktrees/wt/commondir"
    printf 'gitdir: %s\n' "$T/gitmain/.git/worktrees/wt" > "$T/gitwt/.git"
    printf 'gitdir: .git-real\n' > "$T/gitin/.git"
    (cd "$T/gitwt" && "$PVISOR" run --safe -- true) 2>err; rc=$?
    b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
    eq "$rc:$(grep -c "warning: the workspace is a linked git worktree.*--access ro:$T/gitmain/.git " err)" "0:1" \
        "--safe in a linked worktree whose repository is outside: a warning naming the repository to grant"
    eq "$(jq -r '.warnings | map(test("linked git worktree")) | any' "$b")" true "  and the Bundle records it"
    (cd "$T/gitwt" && "$PVISOR" run --safe --access "ro:$T/gitmain/.git" -- true) 2>err
    eq "$(grep -c 'linked git worktree' err)" 0 "  no warning when a grant shows the repository"
    (cd "$T/gitin" && "$PVISOR" run --safe -- true) 2>err
    eq "$(grep -c 'linked git worktree' err)" 0 "  no warning for a gitdir inside the workspace"
    # With a terminal the command is its pty's session leader: its end
    # hangs the pty up, and the SIGHUP ends its foreground jobs.  init
    # counted those still exiting (freeing their memory) as leftovers the
    # run's end killed; a plain run counts none that a signal is ending
    # (PF_EXITING, SIGKILL pending: pid_dying)
    if command -v script >/dev/null && [ -x /usr/bin/python3 ]; then
        mkdir -p "$T/hup"
        cat > "$T/hup/jobs.sh" <<'EOS'
for i in 1 2 3 4; do
    /usr/bin/python3 -c 'import sys, time; b = bytearray(300 << 20); open(sys.argv[1], "w"); time.sleep(60)' /tmp/up$i </dev/null >/dev/null 2>&1 &
done
i=0; while [ "$(ls /tmp/up* 2>/dev/null | wc -l)" -lt 4 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
exit 0
EOS
        counts=""
        for i in 1 2 3; do
            # (SIGHUP's default action: under nohup the jobs inherited it ignored)
            (cd "$T/hup" && script -qec "env --default-signal=HUP '$PVISOR' run --safe -- sh jobs.sh" /dev/null) </dev/null >/dev/null 2>&1
            counts="$counts$(jq -r '[.warnings[] | select(test("leftover"))] | length' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")"
        done
        eq "$counts" "000" "--safe with a terminal: the jobs its hangup ends are not counted as leftovers"
        (cd "$T/hup" && script -qec "'$PVISOR' run --safe -- sh -c 'nohup sleep 60 >/dev/null 2>&1 & sleep 0.3; exit 0'" /dev/null) \
            </dev/null >/dev/null 2>&1
        eq "$(jq -r '.warnings[] | select(test("leftover"))' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
            "1 leftover process(es) killed after the command exited" "  one that ignores the hangup is"
    fi
    # a subdirectory of a repository's checkout (no .git of its own): git
    # looks above it, which the sandbox does not show, and fails there too
    # (an agent may then 'git init' a repository nested in the user's)
    mkdir -p "$T/gitsub/.git" "$T/gitsub/pkg/sub"
    (cd "$T/gitsub/pkg/sub" && "$PVISOR" run --safe -- true) 2>err; rc=$?
    b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
    eq "$rc:$(grep -c "warning: the workspace is a subdirectory of the git repository $T/gitsub, .*run in $T/gitsub\$" err):$(jq -r '.warnings | map(test("subdirectory of the git repository")) | any' "$b")" "0:1:true" \
        "--safe in a subdirectory of a repository's checkout: a warning naming the repository's top directory, in the Bundle too"
    (cd "$T/gitsub" && "$PVISOR" run --safe -- true) 2>err
    eq "$(grep -c 'subdirectory of the git repository' err)" 0 "  none in the top directory itself"
    # a grant shows the .git above, but git's search stops at the
    # workspace's own file system (the overlay) before it: git still
    # fails there, and the warning was not given
    if command -v git >/dev/null; then rm -rf "$T/gitsub/.git" && git init -q "$T/gitsub"; fi
    (cd "$T/gitsub/pkg/sub" && GIT_DISCOVERY_ACROSS_FILESYSTEM=1 "$PVISOR" run --safe --access "ro:$T/gitsub/.git" -- \
        sh -c 'test -d ../../.git && echo shown; if command -v git >/dev/null; then git rev-parse --git-dir >/dev/null 2>&1 || echo git-fails; else echo git-fails; fi') >out 2>err
    eq "$(cat out | tr '\n' ' '):$(grep -c 'subdirectory of the git repository' err)" "shown git-fails :1" \
        "  and when a grant shows its .git (git's search stops at the overlay's file system all the same)"
    # a warning naming a path that is not UTF-8 (which JSON cannot carry)
    # was dropped from the Bundle: it is kept, the bytes escaped
    X=$(printf 'gitmain\377')
    mkdir -p "$T/$X/.git/worktrees/wt" "$T/gitwt2"
    echo ../.. > "$T/$X/.git/worktrees/wt/commondir"
    printf 'gitdir: %s\n' "$T/$X/.git/worktrees/wt" > "$T/gitwt2/.git"
    (cd "$T/gitwt2" && "$PVISOR" run --safe -- true) 2>/dev/null
    b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
    eq "$(jq -r '.warnings[] | select(test("linked git worktree")) | test("gitmain\\\\xff/[.]git is outside")' "$b")" true \
        "  a warning naming a path that is not UTF-8 is in the Bundle, its bytes escaped"
    # the .git file is the workspace's (an agent's, once applied): escape
    # sequences in the gitdir it names reached the terminal raw, from 'run'
    # and from 'status' (set the title, erase the lines above, hide the rest)
    mkdir -p "$T/gitesc"
    printf 'gitdir: /nonexistent/\033]0;TITLE\007\033[1A\033[2K\033[8m\n' > "$T/gitesc/.git"
    (cd "$T/gitesc" && "$PVISOR" run --safe -- true) 2>err
    esc=$(printf '\033')
    eq "$(grep -c "$esc" err):$(grep -c 'nonexistent/\\x1b\]0;TITLE\\x07\\x1b\[1A' err)" "0:1" \
        "  a gitdir with escape sequences is printed escaped on stderr"
    "$PVISOR" status "$(latest_run)" > out 2>&1
    eq "$(grep -c "$esc" out):$(grep -c 'nonexistent/\\x1b\]0;TITLE\\x07' out)" "0:1" "  and by 'pvisor status'"
else
    skip "--safe in a linked worktree: a warning" "--safe does not run here"
fi

# The README's first command: scripts/demo.sh, with the pvisor built here
# (PVISOR set: no install, no build) and Python's output buffered as in a
# user's shell (its API stand-in's port line was never read without
# PYTHONUNBUFFERED: the demo stopped at "--allow-net '127.0.0.1:'").
if [ "$safe_works" = true ]; then
    mkdir "$T/demo"
    out=$(cd "$SRCDIR" && env -u PYTHONUNBUFFERED TMPDIR="$T/demo" PVISOR="$PVISOR" sh scripts/demo.sh </dev/null 2>&1); rc=$?
    demo=$(echo "$T"/demo/pvisor-demo.*)
    eq "$rc:$(cat "$demo/project/app.py" 2>&1 | tail -n 1)" '0:    return "hello, agent"' "scripts/demo.sh runs to its apply (Python's output buffered)"
    eq "$(printf '%s\n' "$out" | grep -c "its API .allowed.*use a friendlier greeting"):$(cat "$demo/outside.txt" 2>&1)" "1:secret" \
        "  its agent reached the API stand-in, and the file outside stayed"
else
    skip "scripts/demo.sh" "--safe does not run here"
fi

# A namespace refused by its count limit (user.max_<x>_namespaces: 0, set
# here in a user namespace of the test's own, or used up) is named, with
# its sysctl: a run said "sandbox setup failed at 'unshare(mount, pid,
# ipc, uts, net namespaces)': No space left on device", and a mount
# namespace's refusal was blamed on the user namespace (raise
# user.max_user_namespaces) or on Debian's unprivileged_userns_clone.
# As root and as an ordinary user (uid 65534); the command never runs.
if [ "$safe_works" = true ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && command -v setpriv >/dev/null; then
    # each user's directories its own (a state directory below one others
    # may write in is refused)
    N="$T/nslimit"; mkdir -p "$N/ws"; chmod 0755 "$N" "$N/ws"
    for who in root nobody; do
        mkdir -p "$N/state-$who"; [ $who = root ] || chown 65534:65534 "$N/state-$who"
        for ns in mnt pid net ipc uts; do
            case $ns in mnt) what=mount ;; pid) what=PID ;; net) what=network ;; ipc) what=IPC ;; uts) what=UTS ;; esac
            rm -rf "$N/state-$who/st-$ns"
            set -- env
            [ $who = root ] || set -- setpriv --reuid=65534 --regid=65534 --clear-groups
            out=$(cd "$N/ws" && HOME="$N" XDG_STATE_HOME="$N/state-$who" "$@" unshare -Ur sh -c \
                'echo 0 > /proc/sys/user/max_'$ns'_namespaces || exit 77
                exec "$1" run --safe --stage "$2" -- sh -c "echo RAN > ran"' sh "$PVISOR" "$N/state-$who/st-$ns" 2>&1); rc=$?
            b="$N/state-$who/pvisor/runs/$(ls -t "$N/state-$who/pvisor/runs" | head -n 1)/bundle.json"
            eq "$rc:$(printf '%s\n' "$out" | grep -c .):$(echo "$out" | grep -c "limit on $what namespaces is 0 or used up (user.max_${ns}_namespaces.*sysctl user.max_${ns}_namespaces=15000"):$(echo "$out" | grep -c 'max_user_namespaces\|unprivileged_userns_clone'):$(test -e "$N/state-$who/st-$ns/upper/ran" && echo RAN):$(jq -r '.state' "$b")" \
                "125:1:1:0::setup_failed" "--safe as $who with user.max_${ns}_namespaces=0: exit 125, one message naming that sysctl, the command never ran"
        done
    done
    # A low limit, not 0: the launcher's clones of what it projects (each
    # an anonymous mount namespace until attached) are refused ENOSPC at
    # 'open_tree(OPEN_TREE_CLONE)', which named no limit at all
    for who in root nobody; do
        set -- env
        [ $who = root ] || set -- setpriv --reuid=65534 --regid=65534 --clear-groups
        out=$(cd "$N/ws" && HOME="$N" XDG_STATE_HOME="$N/state-$who" "$@" unshare -Ur sh -c \
            'echo 4 > /proc/sys/user/max_mnt_namespaces || exit 77
            exec "$1" run --safe -- sh -c "echo RAN > ran"' sh "$PVISOR" 2>&1); rc=$?
        eq "$rc:$(printf '%s\n' "$out" | grep -c .):$(echo "$out" | grep -c "No space left.*limit on mount namespaces is too low (user.max_mnt_namespaces.*sysctl user.max_mnt_namespaces=15000"):$(test -e "$N/ws/ran" && echo RAN)" \
            "125:1:1:" "--safe as $who with user.max_mnt_namespaces=4: exit 125, one message naming that sysctl, the command never ran"
    done
    # root's staged run makes no user namespace: its mount namespace's
    # refusal said to set kernel.unprivileged_userns_clone
    out=$(cd "$N/ws" && XDG_STATE_HOME="$N/state-root" unshare -Ur sh -c 'echo 0 > /proc/sys/user/max_mnt_namespaces || exit 77
        exec "$1" run --stage auto -- sh -c "echo RAN > ran"' sh "$PVISOR" 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'mount namespaces are disabled: sysctl user.max_mnt_namespaces=15000'):$(echo "$out" | grep -c 'userns'):$(test -e "$N/ws/ran" && echo RAN)" \
        "125:1:0:" "--stage as root with user.max_mnt_namespaces=0: that sysctl is named, no user namespace one"
else
    skip "namespace count limits are named" "needs --safe, root, unshare and setpriv"
fi

# The final Bundle cannot be written (the run directory made immutable
# while the command runs, as a full or read-only disk would refuse it):
# the command's status stays pvisor's, and one warning says the Bundle was
# not written (three places printed it, each its own spelling to keep in
# step; one now)
if [ "$(id -u)" -eq 0 ] && command -v chattr >/dev/null; then
    IW="$T/immutable-ws"; mkdir -p "$IW"
    (cd "$IW" && exec "$PVISOR" run -- sh -c 'touch started; while [ ! -e go ]; do sleep 0.05; done; exit 3') > "$T/imm.out" 2> "$T/imm.err" &
    ipid=$!
    i=0; while [ ! -e "$IW/started" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
    ird="$XDG_STATE_HOME/pvisor/runs/$(latest_run)"
    if chattr +i "$ird" 2>/dev/null; then
        touch "$IW/go"; wait $ipid; irc=$?
        chattr -i "$ird"
        eq "$irc:$(cat "$T/imm.err")" "3:pvisor run: warning: cannot write the Run Bundle: Operation not permitted" \
            "a final Bundle that cannot be written: the command's status, one warning that says so"
    else
        touch "$IW/go"; wait $ipid
        skip "a final Bundle that cannot be written" "the state directory's file system has no immutable flag (chattr +i)"
    fi
else
    skip "a final Bundle that cannot be written" "needs root and chattr"
fi
