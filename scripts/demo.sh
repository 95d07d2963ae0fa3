#!/bin/sh
# Build pvisor and show its main job on a throw-away demo workspace:
# an "agent" runs under `pvisor run --safe`, every write is staged, the
# user reviews (status --review, diff) and applies.
set -eu
cd "$(dirname "$0")/.."
if [ -n "${PVISOR:-}" ]; then
    # the suite's check of this script (tests/integration/test-run.sh):
    # the pvisor it built, no install or build here
    PVISOR=$(realpath "$PVISOR")
else
    ./scripts/install-deps.sh
    if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then chmod 0666 /dev/fuse; fi
    [ -f build/build.ninja ] || meson setup build >/dev/null
    ninja -C build >/dev/null
    PVISOR="$PWD/build/src/cli/pvisor"
fi

demo=$(mktemp -d "${TMPDIR:-/tmp}/pvisor-demo.XXXXXX")
export XDG_STATE_HOME="$demo/state"
mkdir -p "$demo/project"
cd "$demo/project"
printf 'def greet():\n    return "hello"\n' > app.py
printf '# Demo project\n' > README.md
printf 'secret\n' > "$demo/outside.txt"
# bold headings on a terminal only (a log gets plain text)
if [ -t 1 ]; then step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }; else step() { printf '\n== %s\n' "$*"; }; fi

step "the workspace: $demo/project"
ls -l

# a stand-in for the agent's API, on this machine's loopback
mkdir -p "$demo/api"; echo '{"reply": "use a friendlier greeting"}' > "$demo/api/v1"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$demo/api" > "$demo/api.log" 2>&1 &
api_pid=$!
trap 'kill $api_pid 2>/dev/null' EXIT
trap 'exit 129' HUP PIPE; trap 'exit 130' INT; trap 'exit 143' TERM
port=
for _ in $(seq 50); do
    port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$demo/api.log" | head -n 1)
    [ -n "$port" ] && break; sleep 0.1
done

step "pvisor run --safe --allow-net 127.0.0.1:$port -- <agent>: asks its API, edits, creates, deletes; tries to escape"
"$PVISOR" run --safe --allow-net "127.0.0.1:$port" -- sh -c "
    echo \"-- its API (allowed, through pvisor's egress broker): \$(python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:$port/v1\").read().decode().strip())' 2>&1)\"
    echo \"-- another host (not allowed): \$(python3 -c 'import urllib.request; urllib.request.urlopen(\"https://example.com/\")' 2>&1 | tail -n 1)\"
    printf 'def greet():\n    return \"hello, agent\"\n' > app.py
    echo 'new notes' > notes.txt
    rm README.md
    echo '-- inside the sandbox the workspace shows:'; ls
    echo '-- escape attempts:'
    cat $demo/outside.txt 2>&1 | sed 's/^/   read outside: /'
    if echo pwned 2>/dev/null > $demo/outside.txt; then
        echo '   write outside: landed in the sandbox'\''s private /tmp (discarded at exit; the host file stays)'
    else
        echo '   write outside: refused'
    fi
    ls ~/.ssh 2>&1 | sed 's/^/   ~\/.ssh: /'
    echo \"   network interfaces: \$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')\"
    echo \"   processes visible: \$(ls /proc | grep -c '^[0-9]')\"
" || true

step "the real workspace is untouched so far"
ls -l; cat "$demo/outside.txt"

step "pvisor status --review: what changed, and what boundary held"
"$PVISOR" status --review | tee "$demo/review.txt"
id=$(sed -n 's/^Changeset: *\([0-9a-f]*\).*/\1/p' "$demo/review.txt" | head -n 1)

step "pvisor diff"
"$PVISOR" diff || true

step "pvisor apply --expect $id: exactly the changeset reviewed"
"$PVISOR" apply --expect "$id"
ls -l; cat app.py

echo
echo "demo files are in $demo (remove with: rm -rf $demo)"
