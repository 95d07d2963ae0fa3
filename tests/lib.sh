# lib.sh: TAP helpers for pvisor's integration tests (sourced).
#
# Every test script gets: a private temp dir $T (removed on exit), an
# isolated state dir (XDG_STATE_HOME=$T/state), $PVISOR (the built binary)
# and $PVAGENT (tests/helpers/pvagent).  In CI (CI=true) a skip is a failure.
set -u
: "${PVISOR:?PVISOR must point at the built pvisor binary}"
: "${PVAGENT:?PVAGENT must point at the built pvagent helper}"

T=$(mktemp -d /tmp/pvisor-test.XXXXXX)
chmod 0755 "$T"
export XDG_STATE_HOME="$T/state"
_n=0
_failed=0
_cleanup_hooks=""
at_exit() { _cleanup_hooks="$1; $_cleanup_hooks"; }
_finish() {
    eval "$_cleanup_hooks" 2>/dev/null || true
    # a mount a test left under $T (killed while a kernel overlay oracle
    # was mounted): detached, not descended into
    awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/self/mounts 2>/dev/null | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null; done
    rm -rf "$T" 2>/dev/null || true
    echo "1..$_n"
}
trap _finish EXIT
# killed by a signal (meson's timeout, Ctrl-C): the cleanup runs too
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

ok() { _n=$((_n + 1)); echo "ok $_n - $*"; }
not_ok() { _n=$((_n + 1)); _failed=$((_failed + 1)); echo "not ok $_n - $*"; }
# check DESCRIPTION COMMAND...: ok when COMMAND succeeds.
check() {
    d=$1; shift
    if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# skip DESCRIPTION REASON: TAP skip, or a failure in CI.
skip() {
    if [ "${CI:-}" = true ]; then
        not_ok "$1 (would skip in CI: $2)"
    else
        _n=$((_n + 1)); echo "ok $_n - $1 # SKIP $2"
    fi
}
diag() { echo "# $*"; }
# eq ACTUAL EXPECTED DESCRIPTION
eq() {
    if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3"; diag "  expected: $2"; diag "  actual:   $1"; fi
}
# eq_todo ACTUAL EXPECTED DESCRIPTION REASON: a known limit, as a TAP TODO
# (a failing TODO does not fail the suite; meson reports an unexpected pass,
# which says the limit is gone and the test should become an eq).
eq_todo() {
    _n=$((_n + 1))
    if [ "$1" = "$2" ]; then
        echo "ok $_n - $3 # TODO $4"
    else
        echo "not ok $_n - $3 # TODO $4"; diag "  expected: $2"; diag "  actual:   $1"
    fi
}
# Newest run id in the state dir.
latest_run() { ls -1 "$XDG_STATE_HOME/pvisor/runs" 2>/dev/null | sort | tail -n 1; }
# nodiscard: the lines of stdin but a --safe run's note on what its command
# wrote in HOME's view (discarded at exit), for tests that read a run's
# stderr whole
nodiscard() { grep -v "^pvisor run: the command wrote .* in HOME's view, discarded at exit" || true; }
run_count() { ls -1 "$XDG_STATE_HOME/pvisor/runs" 2>/dev/null | wc -l; }

# under strace: LeakSanitizer cannot run in a traced process (sanitized build)
no_lsan() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@"; }
