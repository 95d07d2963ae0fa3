#!/bin/sh
# Integration tests for a user who keeps working while the agent runs: the
# workspace edited, moved and put back on the host, the verbs typed in a
# second terminal on the running stage, a second run on the same
# workspace, the state directory's file system filled by another program,
# and pvisor killed (docs/lifecycle.md, README "Exit statuses").  The
# "agent" is a shell loop that works until the host makes a file named
# 'stop' in the workspace (the view shows the host's changes).  Nothing is
# timed: every wait is a bounded poll for a condition.
# Needs $PVISOR and a working --safe.  TAP.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
P=$PVISOR
RUNS=$XDG_STATE_HOME/pvisor/runs

W=$T/ws
mkdir -p "$W/src"
echo one > "$W/src/f1"; echo two > "$W/src/f2"
if ! (cd "$W" && "$P" run --safe -- true) >/dev/null 2>&1; then
    skip "the user works beside a running agent" "--safe runs do not work here (see pvisor doctor)"
    exit 0
fi
rm -rf "$RUNS"

# wait_for CMD...: until CMD succeeds (at most 20 s)
wait_for() {
    i=0
    while [ $i -lt 400 ]; do
        "$@" && return 0
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
# the agent: marks that it runs (in the stage), then appends to src/f1
# until the host makes 'stop'; STAGE_OF RUN: that run's stage
AGENT='echo up > started; i=0; while [ ! -e stop ] && [ $i -lt 2000 ]; do i=$((i + 1)); echo $i >> src/f1; sleep 0.05; done; echo done > finished || :'
stage_of() { echo "$RUNS/$1/stage"; }
# start_agent DIR OUT [PVISOR ARGS...]: a run in the background, its pid in $pid
start_agent() {
    d=$1 out=$2; shift 2
    before=$(latest_run)
    (cd "$d" && exec "$P" run "$@" -- sh -c "$AGENT" "pvtest-agent-$$") >"$out.out" 2>"$out.err" &
    pid=$!
}
# started: the run start_agent began (not the one before it) is working
started() { [ -n "$(latest_run)" ] && [ "$(latest_run)" != "$before" ] && [ -e "$(stage_of "$(latest_run)")/upper/started" ]; }

# ---------------------------------------------------------------------------
# The verbs from a second terminal while the run holds its stage: status
# and review read it; the verbs that change it refuse (1) and say why;
# another run on the same stage is refused before its command (125); a
# second agent on the same workspace gets a stage of its own.
start_agent "$W" "$T/a1" --safe
check "setup: the agent runs" wait_for started
R1=$(latest_run) S1=$(stage_of "$R1")
out=$(cd "$W" && "$P" status --review "$R1" 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c "^Stage: .*(running)$"):$(echo "$out" | grep -c '^  A started$')" "0:1:1" \
    "second terminal: status --review of the running stage shows it running, with what it wrote so far"
for v in apply "apply --dry-run" drop checkpoint "restore x" "fork $T/fk --run"; do
    (cd "$W" && "$P" $v "$R1") >/dev/null 2>"$T/v.err"
    eq "$?:$(grep -c "refused: the stage $S1 is in use by its run (pid [0-9]*)" "$T/v.err")" "1:1" \
        "second terminal: '$(echo "$v" | sed "s,$T/fk,NEW,")' of the running stage is refused (1), naming the run's pid"
done
check "  the fork made no directory" test ! -e "$T/fk"
(cd "$W" && "$P" run --safe --stage "$S1" -- sh -c 'echo x > intruder') >/dev/null 2>"$T/same.err"
eq "$?:$(grep -c 'another pvisor run is using this stage; the command was not run' "$T/same.err")" "125:1" \
    "a second run on the same --stage is refused (125) while the first runs"
(cd "$W" && "$P" run --safe -- sh -c 'echo second > second') >/dev/null 2>&1
eq "$?:$(cat "$W/second" 2>/dev/null || echo absent)" "0:absent" \
    "a second run on the same workspace (--stage auto) runs on a stage of its own"
out=$("$P" list 2>&1)
eq "$(echo "$out" | grep -c "^$R1 *running *- *running ")" 1 "list: the first run is running, its stage too"
check "the first stage has neither the second run's file nor the refused run's" \
    test ! -e "$S1/upper/second" -a ! -e "$S1/upper/intruder"

# The host edits a file the agent writes: apply refuses it afterwards.
echo "host edit" > "$W/src/f1"
touch "$W/stop"
wait $pid; rc=$?
eq "$rc:$(cat "$S1/upper/finished" 2>/dev/null)" "0:done" "the agent saw the host's 'stop' and ended; pvisor exited 0"
(cd "$W" && "$P" apply "$R1") >/dev/null 2>"$T/ap.err"
eq "$?:$(grep -c '^  src/f1: content changed in the workspace since the run' "$T/ap.err"):$(cat "$W/src/f1")" \
    "1:1:host edit" "apply refuses the file the host edited during the run, and writes nothing"
rm -f "$W/stop"
(cd "$W" && "$P" drop "$R1") >/dev/null 2>&1
eq "$?" 0 "the stage is droppable after the run"

# ---------------------------------------------------------------------------
# The workspace moved during the run: the command goes on in the directory
# it started in, where review and apply find something else, or nothing.
# The run said nothing: review then compared the stage with whatever was at
# the old path, or said "cannot read the changes of stage ...: No such file
# or directory".
M=$T/mv/ws
mkdir -p "$M/src"; echo one > "$M/src/f1"
start_agent "$M" "$T/m" --safe
check "setup: the agent runs" wait_for started
RM=$(latest_run)
mv "$T/mv" "$T/mv-elsewhere"
touch "$T/mv-elsewhere/ws/stop"
wait $pid
eq "$?:$(grep -c "pvisor run: warning: the workspace $M was moved or replaced during the run (No such file or directory): the command worked on the directory that was there when it started, and review, diff and apply compare the stage with what is at $M; put the workspace back there" "$T/m.err")" \
    "0:1" "the workspace's parent moved during the run: the run's end says so on stderr"
eq "$(jq -r '.warnings[] | select(contains("was moved or replaced during the run"))' "$RUNS/$RM/bundle.json" | wc -l)" 1 \
    "  and in the Bundle's warnings"
mkdir -p "$T/mv/ws"
(cd "$T/mv/ws" && "$P" apply "$RM") >/dev/null 2>&1
eq "$?:$(ls -A "$T/mv/ws")" "1:" "  a new directory at the old path: apply refuses (the agent's file is a conflict there), writes nothing"
rm -rf "$T/mv"
mv "$T/mv-elsewhere" "$T/mv"
rm "$M/stop"
(cd "$M" && "$P" apply "$RM") >/dev/null 2>&1
eq "$?:$(tail -n 1 "$M/src/f1"):$(cat "$M/finished")" "0:$(tail -n 1 "$(stage_of "$RM")/upper/src/f1"):done" \
    "  put back, the workspace takes the stage"
# moved away and back during the run: nothing to say
start_agent "$M" "$T/m2" --safe
check "setup: the agent runs" wait_for started
mv "$M" "$T/mv/ws2"; mv "$T/mv/ws2" "$M"
touch "$M/stop"
wait $pid
eq "$?:$(grep -c 'moved or replaced' "$T/m2.err")" "0:0" "the workspace moved and put back during the run: no warning"
rm -f "$M/stop"
# replaced by a symlink to where it moved: the same directory
start_agent "$M" "$T/m3" --safe
check "setup: the agent runs" wait_for started
mv "$M" "$T/mv/real"; ln -s real "$M"
touch "$M/stop"
wait $pid
eq "$?:$(grep -c 'moved or replaced' "$T/m3.err")" "0:0" "the workspace replaced by a symlink to it during the run: no warning"
rm -f "$M" "$T/mv/real/stop"; mv "$T/mv/real" "$M"

# ---------------------------------------------------------------------------
# pvisor killed (SIGKILL) mid-run: the command dies with it; the next
# status says interrupted; drop takes the stage (its lock died with pvisor);
# no FUSE mount of it is left.
start_agent "$W" "$T/k" --safe
check "setup: the agent runs" wait_for started
RK=$(latest_run)
check "setup: the run's HOME view is in its run directory" test -d "$RUNS/$RK/home-stage"
kill -KILL $pid; wait $pid 2>/dev/null
agent_gone() { ! pgrep -f "pvtest-agent-$$" >/dev/null; }
check "pvisor killed: the agent is gone" wait_for agent_gone
eq "$(cd "$W" && "$P" status --json "$RK" | jq -r .display_state)" interrupted "  status says interrupted"
(cd "$W" && "$P" drop "$RK") >/dev/null 2>&1
eq "$?:$(cd "$W" && "$P" status --review --json "$RK" | jq -r .stage.state)" "0:dropped" "  drop takes its stage"
# what the supervisor removes at the run's end (the HOME view's writes,
# said to be discarded then; the agent socket; the Bundle's room) stayed
# in the run directory for good, a drop of the stage too
eq "$(ls -A "$RUNS/$RK" | tr '\n' ' ')" "bundle.json stage " "  and what the killed run left in its run directory (its HOME writes)"
eq "$(awk -v w="$W" '$5 == w' /proc/self/mountinfo | wc -l)" 0 "  no mount is left on the workspace"

# ---------------------------------------------------------------------------
# The state directory's file system filled by another program during the
# run: the seal had room kept for it, the Bundle of the run's end did not,
# so the stage was sealed while its Bundle said "running": status and list
# showed the run interrupted, and the review lost how it ended and that the
# stage refused writes (files may be cut short).
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    FS=$T/fullstate FW=$T/fullws
    mkdir -p "$FS" "$FW/src"; echo one > "$FW/src/f1"
    cat > "$T/full.sh" <<EOF
mount -t tmpfs -o size=2m tmpfs '$FS' || exit 90
export XDG_STATE_HOME='$FS'
cd '$FW'
'$P' run --safe -- sh -c '$AGENT' >'$T/full.out' 2>'$T/full.err' &
pid=\$!
i=0; while [ \$i -lt 400 ] && ! ls '$FS'/pvisor/runs/*/stage/upper/started >/dev/null 2>&1; do sleep 0.05; i=\$((i + 1)); done
head -c 4m /dev/zero > '$FS/filler' 2>/dev/null
touch '$FW/stop'
wait \$pid; echo rc=\$?
echo list=\$('$P' list | awk 'NR == 2 { print \$2 "/" \$4 }')
'$P' status --review > '$T/full.review' 2>&1
rm '$FS/filler'
'$P' status --review --json | jq -r '[.run_exit.status, .stage.quota_refusals > 0] | map(tostring) | join(" ")'
ls -A '$FS'/pvisor/runs/*/ | tr '\n' ' '; echo
EOF
    out=$(unshare -m sh "$T/full.sh" 2>&1)
    eq "$(echo "$out" | sed -n 1,3p | tr '\n' ' ')" "rc=0 list=finished/sealed 0 true " \
        "the state directory filled during the run: the run's end is recorded (finished, sealed; the refused writes counted)"
    eq "$(grep -c 'cannot write the Run Bundle' "$T/full.err")" 0 "  no 'cannot write the Run Bundle'"
    eq "$(grep -c '^Ended: *exit status 0$' "$T/full.review"):$(grep -c '^Note: *the stage refused [0-9]* write' "$T/full.review")" \
        "1:1" "  the review says how the run ended, and that the stage refused writes"
    eq "$(echo "$out" | sed -n 4p)" "bundle.json stage " "  the room kept for the Bundle is gone after the run"
else
    skip "the state directory filled during the run" "needs root and unshare (a private tmpfs mount)"
fi
