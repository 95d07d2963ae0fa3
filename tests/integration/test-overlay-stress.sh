#!/bin/sh
# Multi-process stress of the staged view (the FUSE server's concurrency),
# TAP.  tests/helpers/fsstress drives 8 processes at once against one small
# tree: concurrent first writes (copy-ups) of the same lower files,
# write/truncate/read, rename storms, hard links made and removed while
# written through the other name, files unlinked while open, mkdir/rmdir/
# readdir in one directory, fsync, mmap writers, renameat2 flags, xattrs,
# chmod/utimens, and enough files to take the server past its descriptor
# budget (a low RLIMIT_NOFILE); workers are killed -9 and replaced at
# random.  Every errno must be one a native file system gives for that race
# and every byte read one some writer wrote.  Then: the lower is unchanged,
# the reopened stage shows what the run left, apply gives that tree; the
# same after SIGTERM to pvisor mid-storm (--safe), and as an ordinary user.
# The interleavings differ from run to run; the outcome must not.
# Needs $PVISOR, $PVAGENT, $SRCDIR; $FSSTRESS (built by meson) or a C compiler.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
[ -z "${PVISOR_TEST_KEEP:-}" ] || at_exit "cp -a '$T' '$PVISOR_TEST_KEEP'"
if [ -z "${FSSTRESS:-}" ] || [ ! -x "$FSSTRESS" ]; then
    FSSTRESS="$T/fsstress"
    cc -std=c17 -D_GNU_SOURCE -O2 -o "$FSSTRESS" "$SRCDIR/tests/helpers/fsstress.c" || {
        not_ok "fsstress helper builds"; exit 1; }
fi
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi
# O_TMPFILE and RENAME_WHITEOUT fail in the view (docs/stage-format.md);
# --safe passes no such variable: the commands set it again
export FSSTRESS_SKIP=tmpfile,whiteout
SEED=${SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
diag "seed $SEED (SEED=N to repeat the workers' choices; the interleavings are the scheduler's)"

# the manifest of the current directory (names, types, modes, sizes, targets,
# contents, user xattrs; not .t/): of the view, and of apply's result
cat > "$T/man.sh" <<'EOF'
find . -path ./.t -prune -o -printf '%y %m %s %l %p\n' | sort
find . -path ./.t -prune -o -type f -exec sha256sum {} + | sort -k2
if command -v getfattr >/dev/null; then getfattr -R -h -d -m '^user\.' -e hex . 2>/dev/null; fi
EOF
hashed() { # DIR: everything, with mtimes and link counts
    (cd "$1" && find . -printf '%y %m %s %n %U:%G %T@ %l %p\n' | sort && find . -type f -exec sha256sum {} + | sort -k2 &&
     if command -v getfattr >/dev/null; then getfattr -R -h -d -m - -e hex . 2>/dev/null; fi) | sha256sum
}
# mkws DIR: the starting tree, with the helper inside (a --safe sandbox
# does not show the test's /tmp)
mkws() {
    mkdir -p "$1/.t" && cp "$FSSTRESS" "$1/.t/fsstress" && "$FSSTRESS" setup "$1"
}
bad_lines() { grep -E 'BAD|ERROR|runtime error|AddressSanitizer' "$1" | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/# /'; }

# sanity: the same storm on a plain directory finds nothing
mkws "$T/native"
out=$("$FSSTRESS" run "$T/native" 8 3000 "$SEED" 300 2>&1 && "$FSSTRESS" verify "$T/native" 2>&1); rc=$?
eq "$rc" 0 "fsstress finds nothing on a plain directory (self-check)"
[ $rc -eq 0 ] || echo "$out" | head -n 8 | sed 's/^/# /'

# --- the storm under a 256-descriptor limit -----------------------------------
W="$T/ws"; mkws "$W"; H0=$(hashed "$W")
S="$T/stage1"
start=$(date +%s)
(cd "$W" && timeout 120 prlimit --nofile=256:256 "$PVISOR" run --stage "$S" --workspace "$W" -- \
    sh -c '.t/fsstress run . 8 12000 "$1" 400 && .t/fsstress verify .' sh "$SEED") > "$T/run1.out" 2>&1
rc=$?
eq "$rc" 0 "8 processes for 12 s (workers killed -9 at random), 256 descriptors: no unexpected error, no wrong byte ($(( $(date +%s) - start ))s)"
[ $rc -eq 0 ] || bad_lines "$T/run1.out"
eq "$(hashed "$W")" "$H0" "the lower is unchanged, byte for byte and in metadata"
out=$(cd "$W" && timeout 60 "$PVISOR" run --stage "$S" --workspace "$W" -- .t/fsstress verify . 2>&1)
eq "$?:$out" "0:fsstress: verify: 0 problems" "the reopened stage holds what the run left (the invariants hold)"
(cd "$W" && timeout 60 "$PVISOR" run --stage "$S" --workspace "$W" -- sh "$T/man.sh" > "$T/view.man" 2>"$T/view.err")
A="$T/applied"
cp -a "$W" "$A" && "$PVISOR" fork --stage "$S" "$S.a" >/dev/null && sed -i "s|\"$W\"|\"$A\"|" "$S.a/meta.json"
(cd "$A" && "$PVISOR" apply --stage "$S.a") > "$T/apply.out" 2>&1
r=$?
(cd "$A" && sh "$T/man.sh") > "$T/applied.man"
eq "$r:$(cmp -s "$T/view.man" "$T/applied.man" && echo same)" "0:same" "pvisor apply onto a copy of the workspace gives the tree the view showed"
[ -s "$T/view.man" ] || diag "the view's manifest is empty: $(head -n 3 "$T/view.err")"
eq "$(cd "$W" && "$PVISOR" diff --stage "$S" >/dev/null 2>&1; echo $?):$("$PVISOR" status >/dev/null 2>&1; echo $?)" "0:0" \
    "pvisor diff and status work on the stage"

# --- SIGTERM to pvisor mid-storm (--safe) --------------------------------------------
W="$T/ws2"; mkws "$W"; H0=$(hashed "$W")
S="$T/stage2"
(cd "$W" && exec timeout 120 "$PVISOR" run --safe --stage "$S" -- sh -c 'FSSTRESS_SKIP=tmpfile,whiteout exec .t/fsstress run . 8 30000 "$1" 300' sh "$SEED") > "$T/run2.out" 2>&1 &
bg=$!
sleep 4
pv=$(pgrep -P $bg -x pvisor)
[ -n "$pv" ] && kill -TERM "$pv"
t0=$(date +%s)
wait $bg 2>/dev/null
rc=$?
eq "$rc:$(( $(date +%s) - t0 < 10 ))" "143:1" "SIGTERM to pvisor mid-storm: it ends at once with 143"
check "  no sanitizer report or crash of the server" sh -c "! grep -qE 'ERROR: |runtime error|pvisor: .*(crash|signal)' '$T/run2.out'"
eq "$(hashed "$W")" "$H0" "  the lower is unchanged"
check "  the stage is sealed" test -e "$S/sealed"
out=$(cd "$W" && timeout 60 "$PVISOR" run --stage "$S" --workspace "$W" -- .t/fsstress verify . 2>&1)
eq "$?:$out" "0:fsstress: verify: 0 problems" "  the reopened stage is consistent"
(cd "$W" && timeout 60 "$PVISOR" run --stage "$S" --workspace "$W" -- sh "$T/man.sh" > "$T/view2.man" 2>/dev/null)
A="$T/applied2"
cp -a "$W" "$A" && "$PVISOR" fork --stage "$S" "$S.a" >/dev/null && sed -i "s|\"$W\"|\"$A\"|" "$S.a/meta.json"
(cd "$A" && "$PVISOR" apply --stage "$S.a") > "$T/apply2.out" 2>&1
r=$?
(cd "$A" && sh "$T/man.sh") > "$T/applied2.man"
eq "$r:$(cmp -s "$T/view2.man" "$T/applied2.man" && echo same)" "0:same" "  apply onto a copy gives the tree the view showed"

# --- the supervisor's own resources ---------------------------------------------------
# The FUSE server runs in the supervisor, outside every limit of the run:
# what the command makes it do must stay in proportion to what the command
# does.  tests/helpers/dirops: "thrash" lists a directory a few entries at
# a time through one handle, creating and removing a file in it between
# two reads; "holdfds" keeps open as many files of it as it can.
if [ -z "${DIROPS:-}" ] || [ ! -x "$DIROPS" ]; then
    DIROPS="$T/dirops"
    cc -std=c17 -D_GNU_SOURCE -O2 -static -o "$DIROPS" "$SRCDIR/tests/helpers/dirops.c" 2>/dev/null ||
        cc -std=c17 -D_GNU_SOURCE -O2 -o "$DIROPS" "$SRCDIR/tests/helpers/dirops.c" || {
        not_ok "dirops helper builds"; exit 1; }
fi
# cpu_of FILE: the user+sys hundredths of a second of the children in
# FILE, the output of 'times' (not in a subshell: its children are not ours)
cpu_of() {
    tail -n 1 "$1" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%d\n", s * 100 }'
}
W="$T/ws-dirs"; mkdir -p "$W/big"; cp "$DIROPS" "$W/dirops"; "$DIROPS" fill "$W/big" 20000
sleep 2 # not changed within the last seconds: the kept listing of a lower directory stands (OV_LISTING_QUIET)
# Every READDIR after a change read both directories again, merged and
# sorted the whole listing: 2,000 rounds on 20,000 names took the
# supervisor 27 s of CPU (the command 0.2 s); natively they take 0.1 s.
# The server now patches the directory's kept listing for the changes it
# made itself (the Bundle counts the listings read from the directories).
times > "$T/times0"
(cd "$W" && exec timeout 120 "$PVISOR" run --safe --stage "$T/st-dirs" -- ./dirops thrash big 2000) > "$T/thrash.out" 2>&1
rc=$?
times > "$T/times1"
out=$(cat "$T/thrash.out")
own=$(echo "$out" | awk '/^thrash / { printf "%d\n", $3 * 100 }')
sup=$(( $(cpu_of "$T/times1") - $(cpu_of "$T/times0") - ${own:-0} ))
rb="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
diag "supervisor CPU $((sup / 100)).$((sup % 100 / 10)) s, listings read: $(jq -r .stage.dir_listings "$rb")"
eq "$rc:$(echo "$out" | cut -d' ' -f1-2)" "0:thrash 2000" "--safe: 2,000 rounds of a small getdents64, a create and an unlink in a directory of 20,000 names"
limit=5; [ "${PVISOR_SANITIZED:-0}" = 1 ] && limit=20 # (1.8 s sanitized here)
check "  the supervisor's CPU for them stays under $limit s (no full listing per READDIR)" [ "$sup" -lt $((limit * 100)) ]
eq "$(jq -r '.stage.dir_listings | type == "number" and . < 50' "$rb")" true \
    "  the directories are read a few times, not at every READDIR"

# Every file the command holds open in a view holds one of the
# supervisor's descriptors: the command's processes could take them all,
# and the supervisor's own work then failed with EMFILE (here: the view's
# mkdir and stat).  The view keeps a reserve: past it the command's opens
# fail with EMFILE, as at a limit of its own.
out=$(cd "$W" && prlimit --nofile=512:512 timeout 60 "$PVISOR" run --stage "$T/st-fds" --workspace "$W" -- sh -c '
mkfifo .go .r1
./dirops holdfds big 600 < .go > .r1 &
exec 3> .go
read a < .r1
echo "$a"
mkdir nd && stat -c %s big/f000599 && mv big/f000599 nd/ && echo "view works"
exec 3>&-
wait
cat big/f000598 nd/f000599 && echo "opens again"' 2>&1)
diag "$(echo "$out" | head -n 1)"
eq "$(echo "$out" | sed 1d)" "0
view works
opens again" "a command holding every file it can open leaves the supervisor descriptors of its own (512 in all)"
case "$out" in
"held "*" EMFILE"*) ok "  the command's next open failed with EMFILE" ;;
*) not_ok "  the command's next open failed with EMFILE"; diag "$(echo "$out" | head -n 1)" ;;
esac

# --- an ordinary user (--safe) ---------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U="$T/user"; mkdir -p "$U"; mkws "$U/ws"; chown -R 65534:65534 "$U"
    H0=$(hashed "$U/ws")
    (cd "$U/ws" && timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" \
        "$PVISOR" run --safe -- sh -c 'FSSTRESS_SKIP=tmpfile,whiteout .t/fsstress run . 8 8000 "$1" 200 && .t/fsstress verify .' sh "$SEED") > "$T/run3.out" 2>&1
    rc=$?
    eq "$rc" 0 "as uid 65534 under --safe: no unexpected error, no wrong byte"
    [ $rc -eq 0 ] || bad_lines "$T/run3.out"
    eq "$(hashed "$U/ws")" "$H0" "  the lower is unchanged"
else
    skip "the storm as an ordinary user" "needs root and setpriv"
fi
check "no FUSE mount of a test workspace is left on the host" sh -c "! grep -h '$T' /proc/[0-9]*/mountinfo 2>/dev/null | grep -q fuse"
