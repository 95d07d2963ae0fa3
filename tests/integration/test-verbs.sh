#!/bin/sh
# Integration tests for the lifecycle verbs' edges (docs/lifecycle.md):
# what checkpoint, fork, restore, diff, drop, status and list say and
# leave when the input is wrong or the stage is busy, cut short or gone.
# Every refusal is one line on stderr with exit status 1 (2: usage).
# Needs $PVISOR.  TAP.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
P=$PVISOR
RUNS=$XDG_STATE_HOME/pvisor/runs

# A stage of 20,000 small files (a fork or restore of it takes a moment:
# long enough to be caught half-way), made by a staged run.
W=$T/ws
mkdir -p "$W"
echo base > "$W/a"
"$P" run --stage "$T/big" --workspace "$W" -- sh -c \
    'cd "$1" && echo changed > a && mkdir d && i=0 && while [ $i -lt 20000 ]; do echo $i > d/f$i; i=$((i + 1)); done' \
    sh "$W" >/dev/null 2>&1
eq "$?:$(ls "$T/big/upper/d" | wc -l)" "0:20000" "setup: a staged run made a stage of 20,000 files"
RUN=$(latest_run)

# wait_glob PATTERN: until a path matches (at most 4 s)
wait_glob() {
    i=0
    while [ $i -lt 400 ]; do
        for f in $1; do [ -e "$f" ] && return 0; done
        sleep 0.01; i=$((i + 1))
    done
    return 1
}

# ---------------------------------------------------------------------------
# A fork killed half-way leaves no directory at NEW_STAGE: built there, it
# left a half-copied one (no 'version') that review, drop and run called
# "not a pvisor stage", and a retry refused.
"$P" fork "$T/fk" --stage "$T/big" >/dev/null 2>&1 &
pid=$!
wait_glob "$T/.pvisor-fork-*/upper/d/f1 $T/fk/upper/d/f1"
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -e "$T/fk/version" ]; then
    skip "fork: killed half-way, it leaves nothing at NEW_STAGE" "the fork finished before it was killed"
else
    eq "$(ls -A "$T/fk" 2>&1 | head -1)" "ls: cannot access '$T/fk': No such file or directory" \
        "fork: killed half-way, it leaves nothing at NEW_STAGE"
fi
"$P" fork "$T/fk" --stage "$T/big" >/dev/null 2>"$T/fk.err"
eq "$?:$(ls "$T/fk/upper/d" 2>/dev/null | wc -l):$(cat "$T/fk/version" 2>/dev/null)" "0:20000:pvisor-stage 1" \
    "fork: the retry succeeds, a whole stage"
eq "$(ls -A "$T" | grep -c pvisor-fork)" 0 "fork: the retry removed what the killed fork left"

# Each fork builds in a temporary directory of its own: a directory with
# that name's prefix and no lock yet may be a fork's between its mkdir and
# its lock, and is left alone while it is young (removed then, that fork's
# copy went on into a half-removed directory and was renamed into place
# with files missing); an old one is a leftover, removed.
pre=.pvisor-fork-$(printf %s fk2 | sha256sum | cut -c1-16)
mkdir "$T/$pre" "$T/$pre-1-0000abcd"
echo in-use > "$T/$pre/marker"; echo in-use > "$T/$pre-1-0000abcd/marker"
mkdir "$T/$pre-2-old"; touch -d '5 minutes ago' "$T/$pre-2-old"
"$P" fork "$T/fk2" --stage "$T/big" >/dev/null 2>&1
eq "$?:$(cat "$T/$pre/marker" "$T/$pre-1-0000abcd/marker" 2>&1 | tr '\n' ' '):$(test -e "$T/$pre-2-old" && echo kept || echo removed)" \
    "0:in-use in-use :removed" "fork: a young lockless temp directory of the same name is left alone, an old one removed"
eq "$(ls "$T/fk2/upper/d" | wc -l):$(ls -A "$T" | grep -c "^$pre-[0-9]*-[0-9a-f]*\$")" "20000:1" \
    "fork: the new stage is whole, and its own temp directory is gone"
rm -rf "$T/$pre" "$T/$pre-1-0000abcd"

# into an existing empty directory: a stage, 0700 (its upper/ holds the
# command's files, set-id programs among them: test-checkpoint.sh)
mkdir -m 0750 "$T/empty"
"$P" fork "$T/empty" --stage "$T/big" >/dev/null 2>&1
eq "$?:$(stat -c %a "$T/empty"):$(cat "$T/empty/version" 2>/dev/null)" "0:700:pvisor-stage 1" \
    "fork: into an empty directory, made 0700"
# onto a file, into a non-empty directory: refused, left alone
echo keep > "$T/afile"
"$P" fork "$T/afile" --stage "$T/big" >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(cat "$T/afile"):$(wc -l < "$T/err")" "1:keep:1" "fork: onto a file: refused in one line, the file kept"

# ---------------------------------------------------------------------------
# A restore holds the stage's lock: the verbs refused meanwhile said
# "stop its run first", of a stage no run was using.
"$P" checkpoint --name b1 --stage "$T/big" >/dev/null 2>&1
"$P" restore b1 --stage "$T/big" >/dev/null 2>&1 &
pid=$!
wait_glob "$T/big/.restore/upper/d/f1"
"$P" checkpoint --stage "$T/big" >/dev/null 2>"$T/cp.err"; r1=$?
"$P" fork "$T/f2" --stage "$T/big" >/dev/null 2>"$T/fork.err"; r2=$?
wait $pid
if grep -q "in use" "$T/cp.err"; then
    eq "$r1:$r2:$(grep -c "a 'pvisor restore' (pid" "$T/cp.err" "$T/fork.err" | tr '\n' ' ')$(grep -c 'run first' "$T/cp.err" "$T/fork.err" | tr '\n' ' ')" \
        "1:1:$T/cp.err:1 $T/fork.err:1 $T/cp.err:0 $T/fork.err:0 " \
        "busy: during a restore, checkpoint and fork name the restore, not a run"
else
    skip "busy: during a restore, checkpoint and fork name the restore, not a run" "the restore ended first"
fi

# A checkpoint holds the stage's lock (its syncfs slowed down): a second
# checkpoint names it; apply said "its run is still going, or another
# apply holds it", of neither.
if command -v strace >/dev/null; then
    W9=$T/ws9
    mkdir -p "$W9" && echo a > "$W9/a"
    "$P" run --stage "$T/s9" --workspace "$W9" -- sh -c "echo b > '$W9/a'" >/dev/null 2>&1
    no_lsan strace -f -qq -o /dev/null -e trace=syncfs -e inject=syncfs:delay_enter=1500000 \
        "$P" checkpoint --name slow --stage "$T/s9" >/dev/null 2>&1 &
    pid=$!
    wait_glob "$T/s9/checkpoints/.tmp-slow/version"
    "$P" checkpoint --stage "$T/s9" >/dev/null 2>"$T/cp.err"; r1=$?
    (cd "$W9" && "$P" apply --stage "$T/s9") >/dev/null 2>"$T/ap.err"; r2=$?
    wait $pid
    if grep -q "in use" "$T/cp.err"; then
        eq "$r1:$r2:$(grep -c "is in use by a 'pvisor checkpoint' (pid [0-9]*); run this again once it has finished" "$T/cp.err" "$T/ap.err" | tr '\n' ' ')" \
            "1:1:$T/cp.err:1 $T/ap.err:1 " "busy: during a checkpoint, checkpoint and apply name the checkpoint"
    else
        skip "busy: during a checkpoint, checkpoint and apply name the checkpoint" "the checkpoint ended first"
    fi
else
    skip "busy: during a checkpoint, checkpoint and apply name the checkpoint" "needs strace"
fi

# ---------------------------------------------------------------------------
# checkpoint --list lists every checkpoint: it stopped at 4,096, silently.
S=$T/big
"$P" checkpoint --name real --stage "$S" >/dev/null 2>&1
n=$(($(ls "$S/checkpoints" | wc -l) + 4100))
i=0
while [ $i -lt 4100 ]; do
    mkdir "$S/checkpoints/m$i" && echo '{"format":1,"created":"2026-01-01T00:00:00.000Z","bytes":0,"copy":"copy"}' \
        > "$S/checkpoints/m$i/checkpoint.json"
    i=$((i + 1))
done
eq "$("$P" checkpoint --list --stage "$S" 2>/dev/null | wc -l)" "$n" "list: checkpoint --list shows all $n checkpoints"
rm -rf "$S"/checkpoints/m* "$S/checkpoints/real"

# A checkpoints directory that cannot be read listed as "no checkpoints"
# with exit status 0 (here: not a directory).
mv "$S/checkpoints" "$T/cps.saved" && echo x > "$S/checkpoints"
"$P" checkpoint --list --stage "$S" >"$T/out" 2>"$T/err"; rc=$?
eq "$rc:$(wc -l < "$T/out"):$(wc -l < "$T/err"):$(grep -c 'has no checkpoints' "$T/err")" "1:0:1:0" \
    "list: an unreadable checkpoints directory is an error, not an empty list"
rm "$S/checkpoints" && mv "$T/cps.saved" "$S/checkpoints"

# ---------------------------------------------------------------------------
# diff of a stage whose workspace is gone: "it holds no changes
# (dropped?)" was said of a stage that holds them.
mv "$W" "$T/ws.moved"
"$P" diff "$RUN" >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(grep -c 'dropped?' "$T/err"):$(grep -c "workspace $W is gone" "$T/err")" "1:0:1" \
    "diff: a workspace gone is said as such"
# ... and by the review, which said "cannot read the changes of stage ...:
# No such file or directory", as if the stage were broken
"$P" status --review "$RUN" >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(grep -c 'No such file' "$T/err"):$(grep -c "workspace $W is gone (moved or removed?).*the stage still holds the changes" "$T/err")" \
    "1:0:1" "status --review: a workspace gone is said as such"
mv "$T/ws.moved" "$W"

# A Bundle of another (newer) schema: said as "its supervisor died ... or
# a power loss", with the advice to remove the run's directory, which
# holds the stage of a --stage auto run.
(cd "$W" && "$P" run --stage auto -- sh -c 'echo new > n') >/dev/null 2>&1
RUN2=$(latest_run)
B=$RUNS/$RUN2/bundle.json
cp "$B" "$T/bundle.saved"
sed 's|"schema": *"pvisor.bundle/1"|"schema": "pvisor.bundle/9"|' "$T/bundle.saved" > "$B"
for v in "status" "status --review" "diff" "drop"; do
    # shellcheck disable=SC2086
    "$P" $v "$RUN2" >/dev/null 2>"$T/err"; rc=$?
    eq "$rc:$(grep -c 'supervisor died\|remove that run' "$T/err"):$(grep -c 'another pvisor' "$T/err"):$(wc -l < "$T/err")" \
        "1:0:1:1" "schema: '$v RUN' of a newer pvisor's run says so"
done
(cd "$W" && "$P" diff >/dev/null 2>"$T/err"); rc=$?
eq "$rc:$(grep -c 'supervisor died\|remove that run' "$T/err"):$(grep -c 'another pvisor' "$T/err")" "1:0:1" \
    "schema: 'diff' past a newer pvisor's newest run says so"
eq "$(ls "$RUNS/$RUN2/stage/upper")" n "schema: the run's stage is untouched"
cp "$T/bundle.saved" "$B"

# A Bundle whose strings hold escape sequences (a damaged or hostile file):
# status and the review's boundary table printed run_id, the executor's
# mechanism and the table's columns raw (found by a red-team pass); and
# status named the run by the Bundle's run_id, not by the run asked for
cp "$B" "$T/bundle.saved"
jq --arg e "$(printf '\033')" '.run_id = ($e + "[31mFAKE") | .executor.mechanism = ($e + "]52;c;QUFB" + "\u0007") |
    .dimensions.network.effective = ($e + "[8menforced") | .dimensions.reads.mechanism = ($e + "[2Kfake")' "$T/bundle.saved" > "$B"
"$P" status "$RUN2" > "$T/out" 2>&1; rc=$?
"$P" status --review "$RUN2" > "$T/rv" 2>&1
eq "$rc:$(cat "$T/out" "$T/rv" | grep -c "$(printf '\033')"):$(grep -c "^Run: *$RUN2 (its Bundle says .x1b\[31mFAKE)$" "$T/out"):$(grep -c 'x1b\[2Kfake' "$T/rv")" \
    "0:0:1:1" "status and status --review: a Bundle's strings are shown escaped; the run is named by its directory"
cp "$T/bundle.saved" "$B"

# ---------------------------------------------------------------------------
# A RUN with a newline or an escape sequence is echoed escaped, in one
# line: status printed it raw (two lines; the terminal acted on it).
"$P" status "$(printf 'a\nb\033[31m')" >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(wc -l < "$T/err"):$(grep -c 'a\\x0ab\\x1b\[31m' "$T/err")" "1:1:1" "status: a RUN with a newline and an escape is shown escaped"
# and so do the verbs that take a RUN or a stage directory (lc_cli_target)
for v in drop checkpoint apply; do # (diff takes such an argument for a PATH)
    "$P" $v "$(printf 'a\nb\033[31m')" >/dev/null 2>"$T/err"; rc=$?
    eq "$rc:$(wc -l < "$T/err"):$(grep -c 'a\\x0ab\\x1b\[31m' "$T/err")" "1:1:1" "$v: a RUN with a newline and an escape is shown escaped"
done
mkdir -p "$T/$(printf 'not\033[2Jstage')"
"$P" diff --stage "$T/$(printf 'not\033[2Jstage')" >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(grep -c 'not\\x1b\[2Jstage' "$T/err"):$(grep -c "$(printf '\033')" "$T/err")" "1:1:0" \
    "diff --stage: a stage directory's name with an escape is shown escaped"

# A runs directory the user cannot read: the lifecycle verbs said "cannot
# find the stage: Permission denied", naming no directory (status and
# list name it, and XDG_STATE_HOME).
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    for v in diff drop "checkpoint --list"; do
        # shellcheck disable=SC2086
        setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$T" "$P" $v >/dev/null 2>"$T/err"; rc=$?
        eq "$rc:$(grep -c "cannot read the runs directory $RUNS: Permission denied" "$T/err")" "1:1" \
            "runs dir: '$v' of an unreadable runs directory names it"
    done
else
    skip "runs dir: the verbs name an unreadable runs directory" "needs root and setpriv"
fi
# A stage directory the user cannot open (root's, mode 0700) was "not a
# pvisor stage directory" (lc_resolve_target's EINVAL for any failure to
# open it): the error is named.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    for v in "status --review" drop; do
        # shellcheck disable=SC2086
        setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$T" "$P" $v --stage "$T/big" >/dev/null 2>"$T/err"
        eq "$?:$(grep -c "cannot read the stage directory '$T/big': Permission denied" "$T/err")" "1:1" \
            "$v --stage of another user's stage names the error, not 'not a pvisor stage directory'"
    done
else
    skip "another user's stage directory: its error is named" "needs root and setpriv"
fi

# ---------------------------------------------------------------------------
# A review that cannot record the changeset ID it shows (STAGE/reviewed,
# which a plain apply compares with) says so, in diff as in status --review;
# and apply, finding no readable record, refuses rather than apply unchecked.
W5=$T/ws5
mkdir -p "$W5"
echo base > "$W5/a"
"$P" run --stage "$T/s5" --workspace "$W5" -- sh -c "echo changed > '$W5/a'" >/dev/null 2>&1
mkdir -p "$T/s5/reviewed/in-the-way"
(cd "$W5" && "$P" diff --stat --stage "$T/s5") >/dev/null 2>"$T/err"
eq "$(grep -c "pvisor diff: note: this review could not be recorded in the stage" "$T/err")" 1 \
    "diff --stat whose review cannot be recorded says so"
(cd "$W5" && "$P" status --review --stage "$T/s5") >/dev/null 2>"$T/err"
eq "$(grep -c "pvisor status: note: this review could not be recorded in the stage" "$T/err")" 1 \
    "status --review whose review cannot be recorded says so"
(cd "$W5" && "$P" apply --stage "$T/s5") >/dev/null 2>"$T/err"; rc=$?
eq "$rc:$(cat "$W5/a")" "1:base" "apply with an unreadable review record refuses and writes nothing"

# A review that could not compute the changeset ID (a read of the stage
# failed: here lseek, which the ID's read of a sparse file takes) recorded
# nothing: a stage never reviewed before stayed unchecked, and after a run
# on it a plain apply wrote what no review showed.  It records "unknown"
# now, which a plain apply refuses until a review names the changeset.
if [ -n "${SYSDENY:-}" ]; then
    W7=$T/ws7
    mkdir -p "$W7"
    echo base > "$W7/a"
    "$P" run --stage "$T/s7" --workspace "$W7" -- sh -c "echo changed > '$W7/a'; truncate -s 1M '$W7/sparse'" >/dev/null 2>&1
    out=$(cd "$W7" && "$SYSDENY" 5 lseek -- "$P" status --review --stage "$T/s7" 2>&1)
    eq "$(echo "$out" | grep -c "^Changeset:   unknown: Input/output error (a plain 'pvisor apply' refuses until a review names it)"):$(cut -d' ' -f3 "$T/s7/reviewed" 2>/dev/null)" \
        "1:unknown" "a review whose changeset ID fails (EIO) says so and records that it has none"
    "$P" run --stage "$T/s7" --workspace "$W7" -- sh -c "echo unreviewed > '$W7/a'" >/dev/null 2>&1
    (cd "$W7" && "$P" apply --stage "$T/s7") >/dev/null 2>"$T/err"; rc=$?
    eq "$rc:$(cat "$W7/a"):$(grep -c 'could not name its changeset .*or apply with --expect ID' "$T/err")" "1:base:1" \
        "... a run on the stage after it, then a plain apply: refused, nothing written, --expect named"
    (cd "$W7" && "$P" status --review --stage "$T/s7" && "$P" apply --stage "$T/s7") >/dev/null 2>&1; rc=$?
    eq "$rc:$(cat "$W7/a")" "0:unreviewed" "... reviewed again, it applies"
else
    skip "a review whose changeset ID fails records that it has none" "needs \$SYSDENY"
fi

# ---------------------------------------------------------------------------
# The helper programs the verbs start (git for the review, diff(1) for
# diff) start with no signal blocked and SIGPIPE's default action, whatever
# pvisor was started with: a SIGURG blocked (the supervisor's views block
# it) or SIGPIPE ignored reached git, and what git runs.  A wrapper of each
# (perl: a shell resets its mask) records its masks.
W6=$T/ws6 F6=$T/fake6
if command -v git >/dev/null && command -v perl >/dev/null && env --block-signal=URG true 2>/dev/null; then
    mkdir -p "$W6" "$F6"
    (cd "$W6" && git init -q && echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm i)
    "$P" run --stage "$T/s6" --workspace "$W6" -- sh -c "echo b > '$W6/a'" >/dev/null 2>&1
    for tool in git diff; do
        real=$(command -v $tool)
        cat > "$F6/$tool" <<EOF
#!/usr/bin/perl
open(my \$s, "<", "/proc/self/status"); open(my \$o, ">>", "$T/masks");
while (<\$s>) { print \$o "$tool \$1 \$2\n" if /^(SigBlk|SigIgn):\s*(\S+)/ }
close(\$o); exec("$real", @ARGV) or exit 127;
EOF
        chmod +x "$F6/$tool"
    done
    (cd "$W6" && PATH="$F6:$PATH" env --block-signal=URG --ignore-signal=PIPE "$P" status --review --stage "$T/s6" &&
        PATH="$F6:$PATH" env --block-signal=URG --ignore-signal=PIPE "$P" diff --stage "$T/s6") >/dev/null 2>&1
    # (perl itself ignores SIGFPE: only SIGPIPE's bit, 13, is looked at)
    bad=$(while read -r tool what mask; do
        case $what in
        SigBlk) [ "$mask" = 0000000000000000 ] || echo "$tool blocks $mask" ;;
        SigIgn) [ $(((0x$mask >> 12) & 1)) -eq 0 ] || echo "$tool ignores SIGPIPE" ;;
        esac
    done < "$T/masks" | sort -u | tr '\n' ' ')
    eq "$(grep -c '^git SigBlk' "$T/masks" | awk '{ print ($1 > 0) }'):$(grep -c '^diff SigBlk' "$T/masks"):$bad" \
        "1:1:" "the review's git and diff's diff(1) start with no signal blocked, SIGPIPE not ignored (pvisor started with SIGURG blocked, SIGPIPE ignored)"
else
    skip "the review's git and diff's diff(1) start with no signal blocked" "needs git, perl and env --block-signal"
fi

# ---------------------------------------------------------------------------
# Output that cannot be written (stdout a full disk): the verbs exited 0,
# so 'pvisor status --json > f && ...' went on with an empty f.  A verb
# whose output is its purpose exits 1, naming the error; one that did its
# work (apply, drop, checkpoint, restore, fork) says what it did and exits
# 3, not 1: the work is done (a script retrying the apply, or dropping the
# stage it took for unapplied, would do harm).
if [ -w /dev/full ]; then
    W8=$T/ws8
    mkdir -p "$W8" && echo a > "$W8/a"
    "$P" run --stage "$T/s8" --workspace "$W8" -- sh -c "echo changed > '$W8/a'" >/dev/null 2>&1
    for v in list "list --json" status "status --json" "status --review --stage $T/s8" \
        "status --review --json --stage $T/s8" "diff --stat --stage $T/s8" "apply --dry-run --stage $T/s8" "apply --help" doctor; do
        # shellcheck disable=SC2086
        (cd "$W8" && "$P" $v) >/dev/full 2>"$T/err"
        eq "$?:$(grep -c "^pvisor ${v%% *}: cannot write the output: No space left on device$" "$T/err")" "1:1" \
            "${v%% --stage*} with stdout full exits 1 and says so"
    done
    "$P" checkpoint --name k --stage "$T/s8" >/dev/full 2>"$T/err"
    eq "$?:$(cat "$T/err"):$("$P" checkpoint --list --stage "$T/s8" | grep -c '^k ')" \
        "3:pvisor checkpoint: checkpoint k of stage $T/s8 was made, but its report could not be written: No space left on device (exit status 3: done, not reported):1" \
        "checkpoint with stdout full: made, exit 3, says so"
    "$P" checkpoint --list --stage "$T/s8" >/dev/full 2>"$T/err"
    eq "$?:$(cat "$T/err")" "1:pvisor checkpoint: cannot write the output: No space left on device" \
        "checkpoint --list with stdout full exits 1 and says so"
    "$P" restore k --stage "$T/s8" >/dev/full 2>"$T/err"
    eq "$?:$(grep -c 'was restored from checkpoint k, but its report could not be written' "$T/err")" "3:1" \
        "restore with stdout full: exit 3, says it restored"
    "$P" fork --stage "$T/s8" "$T/f8" >/dev/full 2>"$T/err"
    eq "$?:$(grep -c "the new stage $T/f8 was made, but its report" "$T/err"):$(cat "$T/f8/version")" "3:1:pvisor-stage 1" \
        "fork with stdout full: exit 3, says it forked"
    (cd "$W8" && "$P" apply --stage "$T/s8") >/dev/full 2>"$T/err"
    eq "$?:$(cat "$T/err"):$(cat "$W8/a")" \
        "3:pvisor apply: the stage $T/s8 was applied to $W8, but its report could not be written: No space left on device (exit status 3: done, not reported):changed" \
        "apply with stdout full: applied, exit 3 (not 1: failed), says so"
    "$P" drop --stage "$T/f8" >/dev/full 2>"$T/err"
    eq "$?:$(grep -c "the stage $T/f8 was dropped, but its report" "$T/err"):$([ -e "$T/f8/dropped" ] && echo dropped)" \
        "3:1:dropped" "drop with stdout full: exit 3, says it dropped"
else
    skip "verbs with stdout full" "/dev/full is not writable"
fi

exit $((_failed > 0))
