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
