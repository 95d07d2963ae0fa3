#!/bin/sh
# Integration tests for the command line of staged and sandboxed runs, as a
# new user meets it: odd, huge and conflicting option values are usage
# errors (exit 2, one line naming the option, nothing written), refusals
# say what to do.  TAP.  Needs $PVISOR, $PVAGENT.
. "$(dirname "$0")/../lib.sh"
cd "$T"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi
mkdir ws
cd ws

# usage ARGS...: run with ARGS; "RC LINES RUNS" (exit status, lines on
# stderr, run directories written), the first line of stderr in $T/err1
usage() {
    n0=$(run_count)
    "$PVISOR" run "$@" >/dev/null 2>"$T/err"
    rc=$?
    head -n 1 "$T/err" >"$T/err1"
    echo "$rc $(wc -l <"$T/err") $(($(run_count) - n0))"
}

# --- stage quotas past what the Bundle and the launch plan can carry ---------
# (int64 JSON integers): a value over 2^63 was accepted, then refused by the
# launcher with 125 "see 'pvisor doctor'" under --safe, and recorded as a
# negative number (against the schema) under --stage
for args in "--safe --stage-max-bytes 18446744073709551615" "--stage auto --stage-max-bytes 9223372036854775808" \
            "--safe --stage-max-inodes 9223372036854775808" "--safe --stage-max-bytes 8388608T"; do
    # shellcheck disable=SC2086
    eq "$(usage $args -- true)" "2 2 0" "run $args: a usage error, nothing written"
    opt=$(echo "$args" | sed 's/.* \(--stage-max-[a-z]*\) .*/\1/')
    check "... which names $opt and its bound" grep -q "^pvisor run: $opt: .* from 1 to 1024T" "$T/err1"
done
eq "$(usage --stage auto --stage-max-bytes 1024T --stage-max-inodes 1024T -- true)" "0 0 1" \
    "the largest stage quotas are accepted"
eq "$(jq -c '[.requested_policy.stage_max_bytes, .requested_policy.stage_max_inodes]' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
    "[1125899906842624,1125899906842624]" "... and recorded as given"

# --- two --access rules of different kinds for one path -------------------------
# The mounts stack: rw: won over ro: and deny: over both, whatever the order,
# silently (a write landed on the host with "ro:D" given); which one was meant
# pvisor cannot tell: a usage error naming both, also when the two name the
# path differently (a symlink, a relative path, a trailing slash)
mkdir "$T/grant"
ln -s grant "$T/grant-link"
for pair in "ro:$T/grant rw:$T/grant" "rw:$T/grant ro:$T/grant/" "ro:../grant rw:$T/grant-link" \
            "deny:$T/grant rw:$T/grant"; do
    set -- $pair
    eq "$(usage --safe --access "$1" --access "$2" -- sh -c "echo w > $T/grant/w")" "2 2 0" \
        "--access $1 --access $2: a usage error, nothing run or written"
    check "... which names both rules and the path" \
        grep -qF "pvisor run: --access $1 and --access $2 name the same path $T/grant;" "$T/err1"
done
check "... nothing was written in the grant" test ! -e "$T/grant/w"
mkdir "$T/grant/sub"
eq "$(usage --safe --allow-write "$T/grant" --access "rw:$T/grant-link" --access "ro:$T/grant/sub" -- true)" "0 0 1" \
    "the same rule twice, and rules for a path and one below it, are accepted"

# --- --stage that names no directory, or a symlink ---------------------------------
# '.', '..', '/' said "--stage '.': Invalid argument"; a symlink to a stage
# directory "exists and is not a directory", and with a trailing '/' it was
# used (the Bundle naming the link, which 'pvisor apply --stage' refuses)
mkdir "$T/realstage"
ln -s realstage "$T/stage-link"
for s in . .. / ./ ../. "$T/."; do
    eq "$(usage --stage "$s" -- true)" "2 2 0" "--stage '$s': a usage error, nothing written"
    check "... which says it names no directory and what to give" \
        grep -qF "pvisor run: --stage '$s' names no directory of its own; give the stage's path by its name" "$T/err1"
done
for s in "$T/stage-link" "$T/stage-link/"; do
    eq "$(usage --stage "$s" -- true)" "2 2 0" "--stage '$s' (a symlink to a directory): a usage error, nothing written"
    check "... which says it is a symlink" grep -qF "pvisor run: --stage '$s' is a symbolic link" "$T/err1"
done
check "... nothing was made in the directory it leads to" sh -c "[ -z \"\$(ls -A '$T/realstage')\" ]"
eq "$(usage --stage "$T/realstage/" -- true)" "0 0 1" "--stage DIR/ (an empty directory) is accepted"

# --- the workspace is / ----------------------------------------------------------
# its stage is always inside it: the error said "choose --stage outside the
# workspace (or set XDG_STATE_HOME outside it)", which nothing is
for how in "--safe" "--stage $T/st-root" "--filesystem sandbox"; do
    # shellcheck disable=SC2086
    eq "$(cd / && usage $how -- true)" "2 2 0" "run $how in /: a usage error, nothing written"
    check "... which says / cannot be staged and what to do" \
        grep -qF "pvisor run: the workspace is / (the current directory), which cannot be staged: run pvisor in your project's directory" "$T/err1"
done
eq "$(usage --safe --workspace /tmp/.. -- true)" "2 2 0" "run --safe --workspace /tmp/..: a usage error"
check "... which names --workspace" grep -qF "the workspace is / (--workspace)" "$T/err1"

# --- pvisor's state directory inside a --safe run's workspace (HOME) --------------
# said "the stage .../runs/ID/stage and the workspace must not contain each
# other; choose --stage outside the workspace", to a run that gave no --stage
mkdir "$T/home"
eq "$(cd "$T/home" && env -u XDG_STATE_HOME HOME="$T/home" "$PVISOR" run --safe -- true 2>&1 >/dev/null | head -n 1)" \
    "pvisor run: pvisor's state directory $T/home/.local/state/pvisor/runs is inside the workspace $T/home: the sandboxed command would see other runs' Bundles and stages there; set XDG_STATE_HOME to a directory outside the workspace" \
    "--safe in HOME (the state directory there): the error says to set XDG_STATE_HOME"
eq "$(cd "$T/home" && env XDG_STATE_HOME=rel HOME="$T/home" "$PVISOR" run --safe -- true 2>&1 >/dev/null | grep -c 'XDG_STATE_HOME=rel is relative, which is ignored')" \
    1 "... and that a relative XDG_STATE_HOME is ignored"
check "... nothing was written there" test ! -e "$T/home/.local"

# --- doctor: where runs are recorded -------------------------------------------
# every run writes its Bundle in the state directory first; one that cannot
# be made failed every run with 125 while doctor said all was ready
eq "$("$PVISOR" doctor | grep '^State:')" "State:  $XDG_STATE_HOME/pvisor/runs (runs are recorded there)" \
    "doctor names the state directory runs are recorded in"
touch "$T/not-a-dir"
XDG_STATE_HOME="$T/not-a-dir" "$PVISOR" run -- true 2>/dev/null; rc=$?
eq "$rc:$(XDG_STATE_HOME="$T/not-a-dir" "$PVISOR" doctor | grep -c "^State:  missing: runs cannot be recorded in $T/not-a-dir/pvisor/runs .*: every run fails; set XDG_STATE_HOME to a directory you can write")" \
    "125:1" "XDG_STATE_HOME a file: a run fails with 125, and doctor says so and what to set"
eq "$(XDG_STATE_HOME=rel HOME="$T/home" "$PVISOR" doctor | grep '^State:')" \
    "State:  $T/home/.local/state/pvisor/runs (runs are recorded there) (XDG_STATE_HOME is relative, so ignored)" \
    "doctor says a relative XDG_STATE_HOME is ignored"
check "doctor created nothing" test ! -e "$T/home/.local"
# doctor names the cgroup leaves runs whose supervisor was killed left in
# its cgroup, as the next run with --limit finds them (not locked by a live
# supervisor, a minute old): it said nothing of them, and removed none (the
# next run does); it still removes none.  As root, in a cgroup made for the
# test, as test-limits.sh does.
CG2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
if [ "$(id -u)" -eq 0 ] && [ -n "$CG2" ] && [ -w "$CG2$own" ] && command -v flock >/dev/null &&
    D="$CG2${own%/}/pvisor-test-cli-$$" && mkdir "$D" 2>/dev/null; then
    at_exit "rmdir '$D'/* '$D'"
    mkdir "$D/pvisor-dead" "$D/pvisor-held" "$D/pvisor-live" "$D/pvisor-young" "$D/pvisor-x-supervisor" "$D/other"
    # their output is not the test's: a sleep left holding it kept meson
    # waiting for the test's end (flock's child outlived the kill of flock)
    sh -c "echo \$\$ > '$D/pvisor-held/cgroup.procs' && exec sleep 120" >/dev/null 2>&1 & held=$!
    sh -c "echo \$\$ > '$D/pvisor-x-supervisor/cgroup.procs' && exec sleep 120" >/dev/null 2>&1 & sup=$!
    flock "$D/pvisor-live" sleep 120 >/dev/null 2>&1 & live=$!
    at_exit "pkill -P $live; kill $held $sup $live; wait"
    i=0; while { [ -z "$(cat "$D/pvisor-held/cgroup.procs")" ] || [ -z "$(cat "$D/pvisor-x-supervisor/cgroup.procs")" ] ||
        flock -n "$D/pvisor-live" true; } && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    touch -m -d '2 minutes ago' "$D/pvisor-dead" "$D/pvisor-held" "$D/pvisor-live" "$D/pvisor-x-supervisor" "$D/other"
    sh -c "echo \$\$ > '$D/cgroup.procs' && exec '$PVISOR' doctor" > "$T/doc.out" 2>&1
    sh -c "echo \$\$ > '$D/cgroup.procs' && exec '$PVISOR' doctor --json" > "$T/doc.json" 2>&1
    eq "$(grep -c '^Cgroup: 2 cgroup leaves of runs whose supervisor died' "$T/doc.out"):$(grep -c "^  $D/pvisor-dead: empty$" "$T/doc.out"):$(grep -c "^  $D/pvisor-held: processes of that run are still in it; end them with 'echo 1 > $D/pvisor-held/cgroup.kill'" "$T/doc.out"):$(grep -c -e live -e young -e other -e supervisor: "$T/doc.out")" \
        "1:1:1:0" "doctor names the leaves dead runs left (empty, or with processes), not a live run's, a young one, a live supervisor's or another's"
    eq "$(jq -r '[.stale_cgroup_leaves[] | (.path | sub(".*/"; "")) + "=" + (.populated | tostring)] | sort | join(",")' "$T/doc.json"):$(ls "$D" | grep -c '^pvisor-')" \
        "pvisor-dead=false,pvisor-held=true:5" "  ... in --json too (stale_cgroup_leaves), and removes none"
else
    skip "doctor names the cgroup leaves dead runs left" "needs root and a writable cgroup v2 directory"
fi

# --- help run says what the options do beyond their name ----------------------------
# --stage-max-bytes is also the sandboxed command's RLIMIT_FSIZE: a bigger
# file anywhere (its /tmp too) kills its writer with SIGXFSZ, not ENOSPC,
# which was all help said; --workspace does not move the command there;
# PVISOR_AGENT_SOCKET is refused by --pass-env too
"$PVISOR" run --safe --stage-max-bytes 1M -- sh -c 'head -c 2000000 /dev/zero > /tmp/big' 2>/dev/null; rc=$?
eq "$rc:$("$PVISOR" help run | grep -c 'in /tmp too, gets SIGXFSZ')" "153:1" \
    "a file in the sandbox's /tmp past --stage-max-bytes gets SIGXFSZ (128+25), as help run says"
mkdir -p "$T/parent/proj"
out=$(cd "$T/parent" && "$PVISOR" run --safe --workspace proj -- pwd 2>/dev/null)
eq "$out:$("$PVISOR" help run | grep -c 'in the current directory all the same')" "$T/parent:1" \
    "--workspace DIR: the command starts in the current directory, as help run says"
"$PVISOR" run --safe --pass-env PVISOR_AGENT_SOCKET -- true 2>/dev/null; rc=$?
eq "$rc:$("$PVISOR" help run | grep -c 'PVISOR_AGENT_SOCKET, which pvisor sets')" "2:1" \
    "--pass-env PVISOR_AGENT_SOCKET is refused, as help run says"

# --- doctor: what --limit falls back to, as a run has it ------------------------
# Without a delegated cgroup v2 with the pids controller, doctor said "--limit
# mem/pids fall back to rlimits here" also to root, whose run refuses
# --limit pids (RLIMIT_NPROC does not hold root).
NOTES=$("$PVISOR" doctor --json | jq -r '.executors.host.notes[]?')
if printf '%s\n' "$NOTES" | grep -q 'no delegated cgroup v2'; then
    "$PVISOR" run --stage auto --filesystem sandbox --limit pids=50 -- true > /dev/null 2>&1; rc=$?
    if [ "$(id -u)" -eq 0 ]; then
        eq "$rc:$(printf '%s\n' "$NOTES" | grep -c 'limit pids is refused')" "125:1" \
            "doctor says --limit pids is refused for root where a run refuses it"
    else
        eq "$rc:$(printf '%s\n' "$NOTES" | grep -c 'limit pids to RLIMIT_NPROC')" "0:1" \
            "doctor says --limit pids falls back to RLIMIT_NPROC where a run uses it"
    fi
else
    diag "doctor's fallback note: this host delegates a cgroup v2 with memory and pids (nothing to compare)"
fi

# --- "--OPT=VALUE" for the lifecycle verbs, as run takes it ---------------------
# Only run took it: 'apply --expect=ID' said "unknown option '--expect=ID'",
# naming an option that exists.
WE=$T/eqws
mkdir -p "$WE"
echo one > "$WE/f"
"$PVISOR" run --stage "$T/eqstage" --workspace "$WE" -- sh -c "echo two > '$WE/f'" > /dev/null 2>&1
eq "$?" 0 "--OPT=VALUE: a staged run to work on"
"$PVISOR" checkpoint --stage="$T/eqstage" --name=eqcp > /dev/null 2>&1
eq "$?:$(ls "$T/eqstage/checkpoints")" "0:eqcp" "checkpoint --stage=DIR --name=NAME"
(cd "$WE" && "$PVISOR" diff --stat --stage="$T/eqstage") > "$T/eq.out" 2>&1
eq "$?:$(grep -c '^ f ' "$T/eq.out")" "0:1" "diff --stage=DIR"
ID=$(cd "$WE" && "$PVISOR" status --review --stage="$T/eqstage" --json | jq -r .changeset.id)
(cd "$WE" && "$PVISOR" apply --expect=0123 --stage="$T/eqstage") > /dev/null 2> "$T/eq.err"
eq "$?:$(grep -c "expect '0123' is not a changeset ID" "$T/eq.err")" "2:1" "apply --expect=VALUE is read as --expect VALUE"
(cd "$WE" && "$PVISOR" apply --stage="$T/eqstage" --expect="$ID") > /dev/null 2>&1
eq "$?:$(cat "$WE/f")" "0:two" "apply --stage=DIR --expect=ID applies"
"$PVISOR" status --json=1 > /dev/null 2> "$T/eq.err"
eq "$?:$(grep -c "unknown option '--json=1'" "$T/eq.err")" "2:1" "a flag with a value is still an unknown option"
