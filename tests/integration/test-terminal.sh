#!/bin/sh
# The terminal of a sandboxed command (TAP).
#
# Run from a terminal, `pvisor run --safe` gives the command a pty of the
# sandbox's own devpts: a controlling terminal (job control, Ctrl-C to the
# foreground job, SIGWINCH on resize) that holds no descriptor of the
# user's terminal, whose modes are restored afterwards.  Each case runs
# pvisor on a new pty (tests/helpers/ptyrun.py) and checks what that
# terminal saw: the command's output, its modes, its size.
. "$(dirname "$0")/../lib.sh"
: "${SRCDIR:?}"
PTYRUN="/usr/bin/python3 $SRCDIR/tests/helpers/ptyrun.py"
mkdir -p "$T/ws" "$T/home"
export HOME="$T/home"
cd "$T/ws"
bundle() { echo "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"; }
pty_evidence() { jq -r '.dimensions.devices.evidence.private_pty' "$(bundle)"; }
# the helper's report lines, without the command's output
report() { grep '^## ' "$1" | tr '\n' ' '; }

# 1. a controlling terminal of its own, at the user's terminal's size
$PTYRUN -- "$PVISOR" run --safe -- sh -c 'tty; stty size; ps -o tty= -p $$' >"$T/o1" 2>&1
eq "$(tr -d '\r' <"$T/o1" | head -n 3 | tr '\n' ' ')$(report "$T/o1")" \
    "/dev/pts/0 30 100 pts/0 ## status 0 ## termios same ## size 30 100 " \
    "--safe on a terminal: the command's terminal is /dev/pts/0 of its own devpts, controlling, at the user's size"
eq "$(pty_evidence)" true "... the Bundle says so (devices.evidence.private_pty)"

# 2. Ctrl-C reaches the foreground job inside (here: sleep under an
# interactive bash, which itself ignores SIGINT); the rest of the line is
# abandoned, the shell goes on
$PTYRUN 'wait=bash-' 'send=echo ready-$((1+1)); sleep 30; echo after-$((2+2))\r' wait=ready-2 pause=0.3 \
    'send=\x03' 'send=echo alive-$((6*7)); exit\r' wait=alive-42 -- "$PVISOR" run --safe -- bash --norc -i >"$T/o2" 2>&1
rc=$?
eq "$rc:$(grep -c 'after-4' "$T/o2"):$(report "$T/o2")" "0:0:## status 0 ## termios same ## size 30 100 " \
    "Ctrl-C interrupts the foreground job of an interactive shell inside, which goes on"

# 3. a resize of the user's terminal reaches the command as SIGWINCH with
# the new size
$PTYRUN wait=ready 'size=20x80' wait='20 80' -- "$PVISOR" run --safe -- \
    sh -c 'trap "stty size; exit 0" WINCH; echo ready; while :; do sleep 0.1; done' >"$T/o3" 2>&1
rc=$?
eq "$rc:$(report "$T/o3")" "0:## status 0 ## termios same ## size 20 80 " \
    "resizing the user's terminal sends the command SIGWINCH and the new size"

# 4. the escape attempt: change the user's terminal from inside.  Its modes
# could be restored afterwards, its size is not: both must be unchanged.
$PTYRUN -- "$PVISOR" run --safe -- sh -c 'stty raw -echo; stty rows 7 cols 9; stty size' >"$T/o4" 2>&1
eq "$(tr -d '\r' <"$T/o4" | head -n 1)|$(report "$T/o4")" "7 9|## status 0 ## termios same ## size 30 100 " \
    "the command changes its own terminal's modes and size, not the user's"

# 5. only the descriptors that are the terminal get the pty
$PTYRUN -- sh -c "'$PVISOR' run --safe -- sh -c 'echo out; tty; echo err >&2' >'$T/file5'" >"$T/o5" 2>&1
eq "$(tr '\n' ' ' <"$T/file5")|$(tr -d '\r' <"$T/o5" | head -n 1)|$(report "$T/o5")" \
    "out /dev/pts/0 |err|## status 0 ## termios same ## size 30 100 " \
    "stdout to a file stays that file; stdin and stderr get the pty"

# 6. without a terminal nothing changes: no pty
"$PVISOR" run --safe -- sh -c 'tty' </dev/null >"$T/o6" 2>&1
eq "$?:$(cat "$T/o6"):$(pty_evidence)" "1:not a tty:false" "without a terminal the command gets none (and the Bundle says so)"

# 7. as an ordinary user: the same
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/unpriv
    mkdir -p "$U/ws"
    chown -R 65534:65534 "$U"
    chmod 0666 /dev/fuse 2>/dev/null # as distributions set it up (see scripts/test.sh)
    (cd "$U/ws" && $PTYRUN -- setpriv --reuid=65534 --regid=65534 --clear-groups \
        env HOME="$U" XDG_STATE_HOME="$U/state" "$PVISOR" run --safe -- sh -c 'tty; id -u; stty rows 5 cols 5') \
        >"$T/o7" 2>&1
    eq "$(tr -d '\r' <"$T/o7" | head -n 2 | tr '\n' ' ')$(report "$T/o7")" \
        "/dev/pts/0 65534 ## status 0 ## termios same ## size 30 100 " \
        "as uid 65534: a pty of its own, the user's terminal untouched"
else
    skip "the terminal as an unprivileged user" "needs root to switch to an unprivileged user"
fi

# 8. something the command left behind that keeps writing does not keep the
# run alive once the command has ended
$PTYRUN -- "$PVISOR" run --safe -- \
    sh -c '(trap "" HUP INT QUIT; while :; do echo tick; sleep 0.05; done) & sleep 0.5; echo done-here' >"$T/o8" 2>&1
eq "$(grep -c done-here "$T/o8"):$(report "$T/o8")" "1:## status 0 ## termios same ## size 30 100 " \
    "a leftover process that keeps writing to the pty does not keep the run alive"

# 9. whenever one of its descriptors is a terminal, the command gets a pty:
# stdout and stderr to a file, or pvisor in the background of the terminal
$PTYRUN -- sh -c "'$PVISOR' run --safe -- sh -c 'stty raw -echo; stty rows 7 cols 9; tty' >'$T/o9.log' 2>&1" >"$T/o9" 2>&1
eq "$(cat "$T/o9.log"):$(report "$T/o9")" "/dev/pts/0:## status 0 ## termios same ## size 30 100 " \
    "stdin a terminal, stdout and stderr a file: the command's terminal is its own pty; the user's is untouched"
BG='import os, sys
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.execvp(sys.argv[1], sys.argv[1:])
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))'
$PTYRUN -- /usr/bin/python3 -c "$BG" "$PVISOR" run --safe -- \
    sh -c 'stty -F /dev/tty -echo rows 7 cols 9; readlink /proc/self/fd/1; [ -t 0 ] || echo stdin-not-a-terminal' >"$T/o10" 2>&1
eq "$(tr -d '\r' <"$T/o10" | head -n 2 | tr '\n' ' '):$(report "$T/o10")" \
    "/dev/pts/0 stdin-not-a-terminal :## status 0 ## termios same ## size 30 100 " \
    "pvisor in the background: the command's terminal is its own pty (stdin /dev/null: a background job reads no keys); the user's is untouched"

# 10. a non-blocking terminal (left so by another program) loses no output
PTYRUN_NONBLOCK=1 $PTYRUN hold=3 -- "$PVISOR" run --safe -- sh -c 'seq 1 100000; echo END' >"$T/o11" 2>&1
eq "$(tr -d '\r' <"$T/o11" | grep -c -x -e '[0-9][0-9]*' -e END):$(report "$T/o11")" "100001:## status 0 ## termios same ## size 30 100 " \
    "the user's terminal non-blocking and full: every line of the command's output arrives"

# 11. stdin the terminal, stdout and stderr files: a prompt written to
# /dev/tty and the echo of the keys show on the user's terminal
$PTYRUN wait=pw: 'send=secret\r' wait=got -- sh -c "'$PVISOR' run --safe -- sh -c 'printf pw: >/dev/tty; read x; echo got \$x >/dev/tty' >'$T/o12.log' 2>&1" >"$T/o12" 2>&1
eq "$(tr -d '\r' <"$T/o12" | grep -c -e '^pw:secret' -e '^got secret'):$(report "$T/o12")" \
    "2:## status 0 ## termios same ## size 30 100 " \
    "stdout and stderr to a file: a prompt on /dev/tty and the typed keys show on the user's terminal"

# 12. in a pipeline another member may read the terminal (a pager): pvisor
# does not take it when its stdin is not the terminal
$PTYRUN pause=2 send=q -- env TERM=xterm LESS= bash --norc -i -c "seq 1 200 | '$PVISOR' run --safe -- cat | less; echo LESSDONE \$?" >"$T/o13" 2>&1
eq "$(tr -d '\r' <"$T/o13" | grep -c 'LESSDONE 0'):$(report "$T/o13")" "1:## status 0 ## termios same ## size 30 100 " \
    "seq | pvisor run --safe -- cat | less: the pager keeps the terminal and quits on q"

# 13. Ctrl-Z of a command run without a sandbox (it holds the terminal):
# pvisor stops with it, the shell gets its prompt back, fg continues both
# (pvisor used to wait for the stopped command forever)
$PTYRUN 'wait=bash-' "send='$PVISOR' run -- sh -c 'sleep 2; echo slept-\$((1+1))'\\r" pause=0.7 'send=\x1a' wait=Stopped \
    'send=fg\r' wait=slept-2 'send=echo rc-$((40+2)); exit\r' wait=rc-42 -- env TERM=xterm bash --norc -i >"$T/o14" 2>&1
eq "$(tr -d '\r' <"$T/o14" | grep -c -e 'Stopped' -e 'slept-2' -e 'rc-42'):$(report "$T/o14")" \
    "3:## status 0 ## termios same ## size 30 100 " \
    "Ctrl-Z stops a plain run (the shell's prompt comes back) and fg continues it"

# 14. without a terminal, a command that stops itself does not stop pvisor:
# a SIGTERM to pvisor still ends the run (forwarded, then escalated)
PVISOR_KILL_GRACE_MS=300 setsid "$PVISOR" run -- sh -c 'kill -STOP $$; echo continued' </dev/null >"$T/o15" 2>&1 &
pv=$!
sleep 1
st=$(ps -o stat= -p $pv 2>/dev/null | cut -c1)
kill -TERM $pv 2>/dev/null
wait $pv; rc=$?
eq "$st:$rc" "S:143" "no terminal: a stopped command leaves pvisor running, and SIGTERM ends the run (killed after the grace; pvisor ends by SIGTERM)"

# 15. Ctrl-Z, then bg: the shell keeps its terminal while the job finishes
# (pvisor took it back at the end, and the shell read EOF and exited)
$PTYRUN 'wait=bash-' "send='$PVISOR' run -- sh -c 'sleep 1.5; echo slept-\$((1+1))'\\r" pause=0.7 'send=\x1a' wait=Stopped \
    'send=bg\r' wait=slept-2 pause=0.5 'send=echo alive-$((40+2)); exit\r' wait=alive-42 -- env TERM=xterm bash --norc -i >"$T/o16" 2>&1
eq "$(tr -d '\r' <"$T/o16" | grep -c -e 'alive-42'):$(report "$T/o16")" "1:## status 0 ## termios same ## size 30 100 " \
    "Ctrl-Z then bg: the job finishes in the background and the shell keeps the terminal"

# 16. what reaches the user's terminal after the command ended, before pvisor
# restores it (keys typed then, or the terminal's answer to a query the
# agent wrote last: a title report can carry text the agent chose) is
# discarded, not left for the shell to read as typed.  A leftover writer
# (here one that ignores the SIGHUP of the command's end) keeps the relay
# up for its last second; the line sent then must not reach the cat that
# runs after pvisor.
$PTYRUN wait=gone pause=0.3 'send=echo INJECTED-$((6*7))\n' -- sh -c \
    "'$PVISOR' run --safe -- sh -c '(trap \"\" HUP; while :; do echo late; sleep 0.05; done) & echo gone; sleep 0.05; exit 0'; timeout --foreground 1.5 cat; echo after-\$?" >"$T/o17" 2>&1
eq "$(tr -d '\r' <"$T/o17" | grep -c 'INJECTED'):$(tr -d '\r' <"$T/o17" | grep -c 'after-124')" "0:1" \
    "input the terminal received after the command ended is discarded when pvisor gives the terminal back"

# 17. pvisor killed with SIGKILL (nothing of it runs: the OOM killer, a kill
# -9) while the terminal is raw: the terminal was left raw (no echo, no line
# editing) for the shell the user returns to; a guardian process puts the
# modes back, and the sandbox is gone (its processes die with pvisor)
# (the sleeps' numbers are this suite's own, and their fractions this
# shell's pid: pgrep counts them host-wide while other suites, and this one
# in the other build, run beside it)
$PTYRUN wait=ready-k9 kill=9 pause=0.5 -- "$PVISOR" run --safe -- sh -c "echo ready-k\$((3*3)); exec sleep 3043.$$" >"$T/o18" 2>&1
sleep 0.3
eq "$(report "$T/o18"):$(pgrep -fc "^sleep 3043\\.$$\$")" "## status 137 ## termios same ## size 30 100 :0" \
    "pvisor killed with SIGKILL on a terminal: the terminal's modes are put back, and the sandboxed command is gone"
# ... and with SIGKILL to pvisor's process group (kill -9 %1 from the
# shell, kill -9 -PGID): the guardian was in that group and died with
# pvisor, leaving the terminal raw; it keeps a group of its own
$PTYRUN wait=ready-kg kill=-9 pause=0.5 -- "$PVISOR" run --safe -- sh -c "echo ready-kg; exec sleep 3045.$$" >"$T/o18g" 2>&1
sleep 0.3
eq "$(report "$T/o18g"):$(pgrep -fc "^sleep 3045\\.$$\$")" "## status 137 ## termios same ## size 30 100 :0" \
    "pvisor's process group killed with SIGKILL on a terminal: the terminal's modes are put back too"
# the guardian has a name of its own (ps shows what it is; 'pkill -x
# pvisor' leaves it to do its work), and goes with the run
$PTYRUN -- "$PVISOR" run --safe -- sh -c "exec sleep 3046.$$" >"$T/o18n" 2>&1 &
ptyrun=$!
guard=
i=0; while [ -z "$guard" ] && [ $i -lt 200 ]; do
    sleep 0.05; i=$((i + 1))
    pgrep -f "^sleep 3046\\.$$\$" >/dev/null || continue
    for sup in $(pgrep -f "pvisor run --safe -- sh -c exec sleep 3046\\.$$\$"); do
        guard=$(pgrep -x -P "$sup" pvisor-tty | head -n1)
        [ -n "$guard" ] && break
    done
done
pkill -f "^sleep 3046\\.$$\$"; wait $ptyrun
eq "$([ -n "$guard" ] && echo named):$(ps -p "${guard:-1}" -o comm= 2>/dev/null | grep -c pvisor-tty)" "named:0" \
    "the terminal's guardian is named pvisor-tty, and is gone when the run is"
# ... and a SIGTERM to pvisor's process group (the shell's kill %1) ends the
# run as a SIGTERM to pvisor does: the guardian, in that group, stays out of it
$PTYRUN wait=ready-kt kill=-15 -- "$PVISOR" run --safe -- sh -c 'echo ready-kt; exec sleep 3044' >"$T/o19" 2>&1
eq "$(report "$T/o19")" "## status 143 ## termios same ## size 30 100 " \
    "a SIGTERM to pvisor's process group on a terminal: the run ends (143) and the terminal's modes are restored"
