#!/bin/sh
# Core dumps through a host helper, under --safe.  kernel.core_pattern is
# one setting for the whole machine: the suite sets it for a few runs (every
# pvisor run meanwhile warns about it), so it runs alone (tests/meson.build),
# apart from the adversarial suite, which runs beside the others.
. "$(dirname "$0")/../lib.sh"

W="$T/ws"; S="$T/stage"
mkdir -p "$W" "$T/home"
export HOME="$T/home"
cd "$W" || exit 1

# Core dumps: a core_pattern that pipes to a host helper (systemd-coredump,
# apport) ignores RLIMIT_CORE 0 and starts the helper as host root with the
# crashed process's memory.  --safe keeps the limit at 1, the value that
# skips the helper, and the command cannot lower it (the second attempt
# tries).  The pattern is the host's: set for these three runs, restored.
if [ "$(id -u)" -eq 0 ] && [ -w /proc/sys/kernel/core_pattern ]; then
    cp /proc/sys/kernel/core_pattern "$T/core_pattern.old"
    at_exit "cat '$T/core_pattern.old' > /proc/sys/kernel/core_pattern"
    printf '#!/bin/sh\necho "$1" >> "%s"\ncat > /dev/null\n' "$T/cores.log" > "$T/corehelper"
    chmod 0755 "$T/corehelper"
    echo "|$T/corehelper %e" > /proc/sys/kernel/core_pattern
    "$PVISOR" run --safe --stage "$S" --workspace "$W" -- python3 -c 'import os; os.abort()' >/dev/null 2>&1
    "$PVISOR" run --safe --stage "$S" --workspace "$W" -- python3 -c '
import os, resource
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.abort()' >/dev/null 2>&1
    "$PVISOR" run -- python3 -c 'import os; os.abort()' >/dev/null 2>&1
    i=0; while ! grep -q . "$T/cores.log" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    # the pattern is the whole machine's: another test run may have set its own meanwhile
    [ "$(cat /proc/sys/kernel/core_pattern)" = "|$T/corehelper %e" ] && core_ours=true || core_ours=false
    # a socket helper ("@path", Linux 6.16) ignores every limit: the run says so
    echo "@$T/core.sock" > /proc/sys/kernel/core_pattern
    out=$("$PVISOR" run --safe --stage "$S" --workspace "$W" -- true 2>&1)
    cat "$T/core_pattern.old" > /proc/sys/kernel/core_pattern
    eq "$(echo "$out" | grep -c 'sends core dumps to a host socket'):$(jq '[.warnings[] | select(test("host socket"))] | length' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
        "1:1" "--safe under a core_pattern that is a socket: the run warns that no limit stops it"
    if $core_ours; then
        eq "$(grep -c . "$T/cores.log" 2>/dev/null)" 1 \
            "--safe: a crash reaches no host core-dump helper (limit 1, and the command cannot lower it); the control's does"
    else
        skip "--safe: a crash reaches no host core-dump helper" "kernel.core_pattern was changed by another process during the test"
    fi
else
    skip "--safe: a crash reaches no host core-dump helper" "needs root to set kernel.core_pattern"
fi

