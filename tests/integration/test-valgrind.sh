#!/bin/sh
# The CLI paths under valgrind: no invalid accesses, no leaks.
# (Registered only for the non-sanitized build.)
. "$(dirname "$0")/../lib.sh"
cd "$T"
VG="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --trace-children=no"
if ! command -v valgrind >/dev/null; then
    skip "valgrind runs" "valgrind is not installed"
    exit 0
fi
vg() { # DESCRIPTION EXPECTED-STATUS ARGS...
    d=$1; want=$2; shift 2
    $VG "$PVISOR" "$@" >out 2>err; rc=$?
    if [ "$rc" -eq "$want" ]; then ok "valgrind clean: $d"; else not_ok "valgrind clean: $d (status $rc, want $want)"; sed 's/^/# /' err | head -40; fi
}
vg "run of a command" 3 run -- "$PVAGENT" exit 3
vg "run of a missing command" 127 run -- /nonexistent
vg "run with a usage error" 2 run --bogus -- true
vg "status" 0 status
vg "status --json" 0 status --json
vg "list" 0 list
vg "list --json" 0 list --json
vg "doctor --json" 0 doctor --json
vg "help run" 0 help run

# The lifecycle verbs over a stage (made without valgrind: the overlay's
# server uses system calls valgrind does not know, openat2 among them, and
# sees them fail ENOSYS).  Each verb's success and its error paths.
if "$PVISOR" help diff | grep -q 'not in this build'; then
    skip "valgrind runs of the lifecycle verbs" "built without the stage overlay"
    exit 0
fi
W="$T/vws"; mkdir -p "$W/d"; echo one > "$W/a.txt"; echo two > "$W/b.txt"
cd "$W"
if ! "$PVISOR" run --stage "$T/vst" -- sh -c 'echo changed > a.txt; rm b.txt; echo new > d/n.txt; ln -s a.txt l' >/dev/null 2>&1; then
    skip "valgrind runs of the lifecycle verbs" "--stage does not run here"
    exit 0
fi
vg "status --review" 0 status --review
vg "status --review --json" 0 status --review --json
vg "status --review of a missing stage" 1 status --review "$T/nostage"
vg "diff" 0 diff
vg "diff --stat of a path" 0 diff --stat -- d
vg "diff of a path with no change" 1 diff -- nosuch
vg "apply --dry-run" 0 apply --dry-run
vg "apply --path --dry-run" 0 apply --path a.txt --dry-run
vg "apply --path with no value" 2 apply --path
vg "checkpoint --name" 0 checkpoint --name c1
vg "checkpoint --list" 0 checkpoint --list
vg "checkpoint of a name taken" 1 checkpoint --name c1
vg "checkpoint with a bad name" 2 checkpoint --name a/b
vg "fork of a checkpoint" 0 fork c1 "$T/vfork"
vg "fork into the workspace" 1 fork c1 "$W/inside"
vg "restore" 0 restore c1
vg "restore of a missing checkpoint" 1 restore nosuch
vg "apply --stage of a fork (from inside its workspace)" 0 apply --stage "$T/vfork"
echo user-edit > a.txt # neither what the agent saw nor what it wrote
vg "apply of a stage whose paths changed since (conflicts)" 1 apply
vg "drop" 0 drop
vg "apply of a dropped stage" 1 apply
vg "drop --stage of a directory that is no stage" 1 drop --stage "$T"
