#!/bin/sh
# Build pvisor and show its main job on a throw-away demo workspace:
# a run whose writes are staged, then its review.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
PVISOR="$PWD/build/src/cli/pvisor"

demo=$(mktemp -d /tmp/pvisor-demo.XXXXXX)
export XDG_STATE_HOME="$demo/state"
mkdir -p "$demo/project"
cd "$demo/project"
printf 'print("hello")\n' > app.py
printf '# Demo project\n' > README.md
echo "== demo workspace: $demo/project"
ls -l

if "$PVISOR" run --stage "$demo/stage" -- true 2>/dev/null; then
    echo "== pvisor run --stage: the 'agent' edits, creates and deletes files"
    "$PVISOR" run --stage "$demo/stage" -- sh -c '
        echo "print(\"hello, agent\")" > app.py
        echo "new file" > notes.txt
        rm README.md
        echo "inside the run the workspace shows:"; ls -l'
    echo "== after the run, the real workspace is untouched:"
    ls -l
    echo "== the staged changes (upper layer of the stage):"
    (cd "$demo/stage/upper" && find . -mindepth 1 -printf '%y %p\n' | sort)
else
    echo "== this build cannot stage yet; showing a plain (unisolated) run"
    "$PVISOR" run -- sh -c 'echo "the agent runs in $(pwd)"'
fi
echo "== pvisor status (the Run Bundle: what was requested, what was enforced)"
"$PVISOR" status
echo "== demo files are in $demo (remove with: rm -rf $demo)"
