#!/bin/sh
# Build pvisor twice (normal, with gcc; and AddressSanitizer +
# UndefinedBehaviorSanitizer, with clang) and run every test in both.
# Prints "N passed, N failed" last; exits non-zero if anything failed.
# Usage: scripts/test.sh [meson test args...]
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

# The unprivileged tests need /dev/fuse usable by ordinary users, as
# distributions set it up (udev rule in the fuse3 package).
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi

# build DIR CC [meson options...]: configure and build with the compiler CC
# (gcc or clang); 1 (the log on stderr) when either fails.  A directory
# configured with another compiler is made again.  $NICE: a prefix for the
# compilers' priority.
build() {
    dir=$1; cc=$2; shift 2
    if [ -f "$dir/build.ninja" ] &&
        [ "$(jq -r '.host.c.id // ""' "$dir/meson-info/intro-compilers.json" 2>/dev/null)" != "$cc" ]; then
        rm -rf "$dir"
    fi
    if [ -f "$dir/build.ninja" ]; then
        $NICE meson configure "$dir" "$@" >"$dir.ninja.log" 2>&1
    else
        CC=$cc $NICE meson setup "$dir" "$@" >"$dir.ninja.log" 2>&1
    fi && $NICE ninja -C "$dir" >>"$dir.ninja.log" 2>&1 && return 0
    cat "$dir.ninja.log" >&2
    return 1
}
NICE=

# One clang-format configuration (.clang-format) for every C file.
format_failed=0
if command -v clang-format >/dev/null && [ -d .git ]; then
    for f in $(git ls-files '*.c' '*.h'); do
        clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "not clang-formatted: $f (run clang-format -i $f)"; format_failed=1; }
    done
fi

if ! build build gcc -Dbuildtype=debugoptimized; then
    echo "0 passed, 1 failed"
    exit 1
fi
# The sanitizer build is clang's: every file is compiled by both compilers
# with their warnings as errors (clang refuses a goto that jumps over a
# cleanup variable's initialisation, which gcc accepts silently), and
# clang's one sanitizer runtime costs each pvisor process about a quarter
# less CPU than gcc's libasan and libubsan, whose data LeakSanitizer scans
# at every exit (docs/performance.md, "CI time").  It is made at a lower
# priority while the normal build's tests run.
(NICE="nice -n 10" build build-sanitize clang -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false) \
    2>build-sanitize.bg.ninja.log &
sanitize_build=$!
# (stopped with the script: an interrupted run leaves no compiler behind;
# under set -e a failing kill, of a build long done, would be the status)
trap 'rc=$?; kill $sanitize_build 2>/dev/null || :; exit $rc' EXIT

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87

status=0
passed=0
failed=0
todo=0
# tests DIR [meson test args...]: run them, and add up the TAP lines of
# the run.  A TAP TODO is a known limit measured (tests/lib.sh eq_todo):
# its "not ok" fails nothing, and its "ok" fails meson's run (unexpected
# pass).
tests() {
    dir=$1
    shift
    meson test -C "$dir" --print-errorlogs "$@" || status=1
    log="$dir/meson-logs/testlog.txt"
    p=$(grep -E '^ok [0-9]+' "$log" | grep -cvE '# TODO' || true)
    f=$(grep -E '^not ok [0-9]+' "$log" | grep -cvE '# TODO' || true)
    t=$(grep -cE '^not ok [0-9]+ .*# TODO' "$log" || true)
    # a limit now gone: the test should become a plain check
    u=$(grep -cE '^ok [0-9]+ .*# TODO' "$log" || true)
    [ "$u" -eq 0 ] || echo "$u TAP TODO checks passed unexpectedly in $dir (a known limit is gone: make them plain checks)"
    passed=$((passed + p))
    failed=$((failed + f + u))
    todo=$((todo + t))
}
# built PID LOG: did that background build succeed (else its log, counted)
built() {
    wait "$1" && return 0
    cat "$2" >&2
    echo "== a build failed (above): $2"
    status=1
    failed=$((failed + 1))
    return 1
}

for dir in build build-sanitize; do
    if [ "$dir" = build-sanitize ] && ! built $sanitize_build build-sanitize.bg.ninja.log; then
        break
    fi
    echo "== tests in $dir"
    tests "$dir" "$@"
done
if [ "$format_failed" -ne 0 ]; then
    status=1
    failed=$((failed + 1))
else
    passed=$((passed + 1)) # the format check
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # a test binary failed without a TAP line (crash, sanitizer abort)
fi
[ "$todo" -eq 0 ] || echo "$todo known limits measured (TAP TODO: docs/stage-format.md)"
echo "$passed passed, $failed failed"
exit $status
