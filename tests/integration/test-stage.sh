#!/bin/sh
# Integration tests for `pvisor run --stage` (the FUSE copy-on-write view of
# the workspace and the stage format), end to end through the CLI.  TAP.
# Each check asserts what the command saw, the final host bytes (the lower
# is unchanged byte for byte and in metadata), the staged bytes, exit
# statuses and the Bundle.  Needs $PVISOR, $PVAGENT, $SRCDIR.
# Debugging: PVISOR_TEST_KEEP=DIR keeps a copy of the test's files there.
. "$(dirname "$0")/../lib.sh"
SCHEMA="$SRCDIR/docs/bundle.schema.json"
VALIDATE="/usr/bin/python3 $SRCDIR/tests/validate-bundle.py $SCHEMA"
cd "$T"
LC_ALL=C; export LC_ALL
[ -z "${PVISOR_TEST_KEEP:-}" ] || at_exit "cp -a '$T' '$PVISOR_TEST_KEEP'"

if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi
have_xattr=false
command -v setfattr >/dev/null && command -v getfattr >/dev/null && have_xattr=true
$have_xattr || skip "user xattrs in the lower and the stage" "setfattr/getfattr (package attr) missing"
PY=/usr/bin/python3

# ---------------------------------------------------------------------------
# helpers

# wait_for FILE: up to 10 s for FILE to exist
wait_for() {
    i=0
    while [ ! -e "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    [ -e "$1" ]
}

# make_lower DIR: a workspace with files, subdirectories, a symlink, an
# executable, a hard-linked pair, user xattrs, and names and xattrs that look
# like overlay metadata (they must round-trip untouched).
make_lower() {
    w=$1
    mkdir -p "$w/src/lib" "$w/docs" "$w/bin" "$w/d/sub" "$w/tree/a/b" "$w/tree/c"
    printf 'original readme\n' > "$w/README"
    printf 'int main(void) { return 0; }\n' > "$w/src/main.c"
    printf 'int util(void) { return 1; }\n' > "$w/src/lib/util.c"
    printf '# guide\nnever touched\n' > "$w/docs/guide.md"
    printf '#!/bin/sh\necho run\n' > "$w/bin/run.sh"; chmod 0755 "$w/bin/run.sh"
    ln -s README "$w/link"
    printf 'hard content\n' > "$w/hard1"; ln "$w/hard1" "$w/hard2"
    printf 'with xattr\n' > "$w/attr.txt"
    printf 'to be deleted\n' > "$w/gone.txt"
    printf 'old name\n' > "$w/old-name.txt"
    printf 'mode file\n' > "$w/mode.txt"
    printf 'd child\n' > "$w/d/child"; printf 'd grandchild\n' > "$w/d/sub/gc"
    printf 'abc\n' > "$w/tree/a/b/c.txt"; printf 'a1\n' > "$w/tree/a/a1"; printf 'c1\n' > "$w/tree/c/c1"
    printf 'looks like a whiteout name\n' > "$w/.wh.lookalike"
    printf 'has overlay-looking xattr\n' > "$w/ovx.txt"
    head -c 200000 /dev/urandom > "$w/binary.bin"
    if $have_xattr; then
        setfattr -n user.note -v lower-note "$w/attr.txt"
        setfattr -n user.dirnote -v on-a-dir "$w/docs"
        setfattr -n user.overlay.x -v lower-overlay-x "$w/ovx.txt"
    fi
}

# manifest DIR: names, types, modes, sizes, link counts, owners, symlink
# targets, contents and user xattrs; the "byte for byte and metadata" record.
manifest() {
    (cd "$1" && find . -printf '%y %m %s %n %U:%G %l %p\n' | LC_ALL=C sort &&
     find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2 &&
     if $have_xattr; then getfattr -R -h -d -m '^user\.' -e hex . 2>/dev/null; fi)
}
# unchanged DIR MANIFEST: DIR still has MANIFEST (prints the difference)
unchanged() {
    manifest "$1" > "$T/now.manifest"
    cmp -s "$2" "$T/now.manifest" && return 0
    diff "$2" "$T/now.manifest" | head -n 20 | sed 's/^/# /'
    return 1
}

# The view manifest (for the kernel overlayfs oracle): what a reader of the
# tree sees, without link counts (kernel overlayfs keeps no hard links across
# copy-up) and without user.overlay.* (kernel overlayfs hides them).
cat > "$T/viewman.sh" <<'EOF'
cd "$1" || exit 1
{
find . ! -type d -printf '%y %m %s %U:%G %l %p\n'
find . -type d -printf '%y %m %U:%G %p\n'
} | LC_ALL=C sort
find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2
if command -v getfattr >/dev/null; then
    # one line per attribute, sorted: getfattr -R walks in readdir order,
    # which is the view's (its keyed cookies) or the kernel's
    getfattr -R -h -d -m '^user\.' -e hex . 2>/dev/null |
        awk '/^# file:/ { hdr = substr($0, 9); next } /^user\.overlay\./ { next } /^user\./ { print hdr ": " $0 }' |
        LC_ALL=C sort
fi
EOF

# oracle STAGE LOWER VIEWMANIFEST LABEL: mount the sealed stage read-only
# with kernel overlayfs and compare with what the FUSE view showed
oracle() {
    if [ "$(id -u)" -ne 0 ] || ! grep -qw overlay /proc/filesystems || ! command -v unshare >/dev/null; then
        skip "$4: kernel overlayfs oracle" "needs root and overlayfs"
        return
    fi
    mkdir -p "$T/oracle-mnt"
    unshare -m sh -c "mount --make-rprivate / && mount -t overlay overlay -o ro,userxattr,lowerdir='$1/upper':'$2' '$T/oracle-mnt' && sh '$T/viewman.sh' '$T/oracle-mnt'" \
        > "$T/oracle.manifest" 2> "$T/oracle.err"
    # find(1) reports names that readdir lists but lookup cannot find on stderr
    if cmp -s "$3" "$T/oracle.manifest" && [ ! -s "$T/oracle.err" ]; then
        ok "$4: kernel overlayfs shows the sealed stage exactly as the FUSE view did (oracle)"
    else
        not_ok "$4: kernel overlayfs shows the sealed stage exactly as the FUSE view did (oracle)"
        head -n 5 "$T/oracle.err" | sed 's/^/# oracle stderr: /'
        diff "$3" "$T/oracle.manifest" | head -n 20 | sed 's/^/# /'
    fi
}

whiteout() { [ "$(stat -c '%F %t:%T' "$1" 2>/dev/null)" = "character special file 0:0" ]; }
opaque() { [ "$(getfattr --only-values -h -n user.overlay.opaque "$1" 2>/dev/null)" = y ]; }
bundle_of() { echo "$1/pvisor/runs/$(ls -1 "$1/pvisor/runs" | sort | tail -n 1)/bundle.json"; }
no_fuse_mount_of() { # DIR: no FUSE mount of DIR in any mount namespace on the host
    ! grep -h " $1 " /proc/[0-9]*/mountinfo 2>/dev/null | grep -q fuse
}

# ---------------------------------------------------------------------------
# The main scenario, run as root and as an unprivileged user.
# scenario LABEL BASE [setpriv args...]: BASE holds ws/, stage/, state/.

scenario() {
    L=$1; B=$2; shift 2
    W="$B/ws"; S="$B/stage"; ST="$B/state"
    make_lower "$W"
    if [ $# -gt 0 ]; then chown -R 65534:65534 "$B"; fi
    manifest "$W" > "$B/lower.manifest"
    as() { if [ $# -gt 0 ] && [ -n "$RUNAS" ]; then setpriv $RUNAS env XDG_STATE_HOME="$ST" HOME="$B" "$@"; else env XDG_STATE_HOME="$ST" "$@"; fi; }
    RUNAS="$*"

    # --- run 1: write, create, delete, rename, chmod, xattr; exit 7 -----------
    cat > "$B/agent1.sh" <<'EOF'
B=$1
{
echo "pwd=$(pwd)"
cat README
ino_before=$(stat -c %i README)
printf 'changed by agent\n' > README
[ "$ino_before" = "$(stat -c %i README)" ] && echo "README st_ino stable across copy-up" || echo "README st_ino changed on copy-up"
echo "$ino_before" > "$B/ino1"
echo appended >> src/main.c
printf 'brand new\n' > new.txt
rm gone.txt
mv old-name.txt renamed.txt
chmod 0600 mode.txt
mkdir -p newdir/sub && echo leaf > newdir/sub/leaf.txt
ln -s newdir/sub/leaf.txt newlink
if command -v setfattr >/dev/null; then setfattr -n user.added -v agent attr.txt; fi
echo "links before append: $(stat -c %h hard1) $(stat -c %h hard2)"
echo more >> hard1
echo "links after append: $(stat -c %h hard1) $(stat -c %h hard2)"
[ "$(stat -c %i hard1)" = "$(stat -c %i hard2)" ] && echo "hard1 and hard2 one inode" || echo "hard1 and hard2 two inodes"
cat hard2
ln new.txt new-hard
echo "new links: $(stat -c %h new.txt)"
echo "duplicates: $(ls -A | sort | uniq -d | tr '\n' ' ')"
ls -A | tr '\n' ' '; echo
test -e gone.txt && echo gone-visible || echo gone-hidden
test -e old-name.txt && echo old-name-visible || echo old-name-hidden
cat renamed.txt
stat -c '%a' mode.txt
cat link
cat .wh.lookalike
if command -v getfattr >/dev/null; then
    getfattr --only-values -n user.note attr.txt; echo
    getfattr --only-values -n user.added attr.txt; echo
    getfattr --only-values -n user.overlay.x ovx.txt; echo
fi
sha256sum binary.bin | cut -c1-64
} > "$B/seen1" 2>&1
sh "$B/viewman.sh" . > "$B/view1.manifest"
exit 7
EOF
    cp "$T/viewman.sh" "$B/viewman.sh"
    [ -n "$RUNAS" ] && chown 65534:65534 "$B/agent1.sh" "$B/viewman.sh"
    (cd "$W" && as "$PVISOR" run --stage "$S" -- sh "$B/agent1.sh" "$B") > "$B/run1.out" 2>&1
    rc=$?
    eq "$rc" 7 "$L: the command's exit status (7) propagates"
    [ $rc -eq 7 ] || sed 's/^/# /' "$B/run1.out" | head -n 5
    xa=""; $have_xattr && xa="lower-note
agent
lower-overlay-x
"
    eq "$(cat "$B/seen1" 2>/dev/null)" "pwd=$W
original readme
README st_ino stable across copy-up
links before append: 2 2
links after append: 2 2
hard1 and hard2 one inode
hard content
more
new links: 2
duplicates: 
.wh.lookalike README attr.txt bin binary.bin d docs hard1 hard2 link mode.txt new-hard new.txt newdir newlink ovx.txt renamed.txt src tree 
gone-hidden
old-name-hidden
old name
600
changed by agent
looks like a whiteout name
${xa}$(sha256sum "$W/binary.bin" | cut -c1-64)" "$L: the command saw its own writes, deletions, renames, chmod, xattrs and hard links"
    check "$L: the lower is unchanged, byte for byte and in metadata" unchanged "$W" "$B/lower.manifest"
    check "$L: no FUSE mount of the workspace is left on the host" no_fuse_mount_of "$W"

    # the stage on disk
    eq "$(cat "$S/upper/README" 2>/dev/null)" "changed by agent" "$L: the new bytes of README are in stage/upper"
    eq "$(cat "$S/upper/new.txt" 2>/dev/null)" "brand new" "$L: a created file is in stage/upper"
    eq "$(cat "$S/upper/src/main.c" 2>/dev/null)" "$(cat "$W/src/main.c")
appended" "$L: an appended file is copied up whole, with the appended bytes"
    eq "$(cat "$S/upper/renamed.txt" 2>/dev/null)" "old name" "$L: a renamed file is in stage/upper under its new name"
    eq "$(stat -c '%a %s' "$S/upper/mode.txt" 2>/dev/null):$(cat "$S/upper/mode.txt" 2>/dev/null)" "600 10:mode file" \
       "$L: chmod copies up the content unchanged with the new mode"
    check "$L: the deleted lower file is a 0/0 character-device whiteout in stage/upper" whiteout "$S/upper/gone.txt"
    check "$L: the renamed-away lower name is a 0/0 character-device whiteout" whiteout "$S/upper/old-name.txt"
    check "$L: untouched lower files are not copied up" test ! -e "$S/upper/docs/guide.md" -a ! -e "$S/upper/binary.bin"
    if $have_xattr; then
        eq "$(getfattr --only-values -n user.added "$S/upper/attr.txt" 2>/dev/null)" agent "$L: a user xattr set by the command is on the staged file"
        eq "$(getfattr --only-values -n user.note "$S/upper/attr.txt" 2>/dev/null)" lower-note "$L: copy-up keeps the lower file's user xattrs"
    fi
    check "$L: the stage has version, meta.json, journal and the sealed marker" \
        sh -c "grep -q '^pvisor-stage 1' '$S/version' && jq -e '.workspace == \"$W\"' '$S/meta.json' >/dev/null && test -f '$S/journal' -a -e '$S/sealed'"
    # stage-format.md: files 0600, directories 0700, but upper/ (before,
    # meta.json, version and sealed were 0644, less the umask)
    eq "$(find "$S" -mindepth 1 -maxdepth 1 ! -name upper \( -type f ! -perm 0600 -o -type d ! -perm 0700 \) -printf '%f %m\n')" "" \
       "$L: every file of the stage directory is 0600 and every directory 0700, but upper/"

    # the journal: one record per first-mutated lower object, with the original content's hash
    J="$S/journal"
    check "$L: every journal line is a JSON record with path, type, mode, size, ino, op" \
        sh -c "jq -e 'has(\"path\") and has(\"type\") and has(\"mode\") and has(\"size\") and has(\"ino\") and has(\"op\")' '$J' >/dev/null"
    eq "$(jq -r .path "$J" | sort | uniq -d | tr '\n' ' ')" "" "$L: the journal has at most one record per path"
    for p in README src/main.c gone.txt old-name.txt mode.txt hard1; do
        eq "$(jq -r --arg p "$p" 'select(.path == $p) | .path' "$J" | wc -l)" 1 "$L: the journal records $p once"
    done
    eq "$(jq -r 'select(.path == "README") | "\(.type) \(.mode) \(.size) \(.sha256) \(.ino)"' "$J")" \
       "reg 420 16 $(sha256sum < "$W/README" | cut -c1-64) $(stat -c %i "$W/README")" \
       "$L: README's record has the original type, mode, size, SHA-256 and inode"
    jq -r 'select(.type == "reg" and .sha256 != null) | "\(.sha256)  \(.path)"' "$J" > "$B/journal.sums"
    check "$L: every regular-file record's SHA-256 is that of the ORIGINAL lower content" \
        sh -c "[ -s '$B/journal.sums' ] && cd '$W' && sha256sum --quiet -c '$B/journal.sums'"
    eq "$(jq -r 'select(.path == "docs/guide.md" or .path == "binary.bin" or .path == "new.txt") | .path' "$J")" "" \
       "$L: files only read, and objects created by the command, are not journaled"

    # the Bundle
    b=$(bundle_of "$ST")
    check "$L: the Bundle validates against the schema" sh -c "$VALIDATE '$b'"
    # (as its user: root refuses another user's state directory, whose
    # owner could replace what it shows)
    sj=$(as "$PVISOR" status --json)
    eq "$(echo "$sj" | jq -r '[.dimensions.workspace_writes.effective, .dimensions.host_writes.effective, .dimensions.reads.effective, .stage.path, .stage.state, .display_state, (.exit.status|tostring)] | join(" ")')" \
       "cooperative unenforced unenforced $S sealed finished 7" \
       "$L: status --json: workspace_writes cooperative (no sandbox), host_writes and reads unenforced, stage sealed"

    # the oracle: kernel overlayfs over the sealed stage shows the same tree
    oracle "$S" "$W" "$B/view1.manifest" "$L run 1"

    # --- run 2: reopen the sealed stage; continue; dir cases ------------------
    cat > "$B/agent2.sh" <<'EOF'
B=$1
cd "$2" || exit 99
{
cat new.txt README
test -e gone.txt && echo gone-visible || echo gone-hidden
ls -A | tr '\n' ' '; echo
[ "$(cat "$B/ino1")" = "$(stat -c %i README)" ] && echo "README st_ino stable across reopening" || echo "README st_ino changed on reopening"
echo reborn > gone.txt
cat gone.txt
printf 'second run\n' > README
rm -rf d; mkdir d
echo "d after rm -rf and mkdir: [$(ls -A d | tr '\n' ' ')]"
/usr/bin/python3 -c 'import os; os.rename("tree", "tree2")' && echo "renamed tree"
test -e tree && echo tree-visible || echo tree-hidden
find tree2 | sort | tr '\n' ' '; echo
cat tree2/a/b/c.txt tree2/c/c1
} > "$B/seen2" 2>&1
exit 0
EOF
    [ -n "$RUNAS" ] && chown 65534:65534 "$B/agent2.sh"
    as "$PVISOR" run --stage "$S" --workspace "$W" -- sh "$B/agent2.sh" "$B" "$W" > "$B/run2.out" 2>&1
    eq "$?" 0 "$L: a second run on the sealed stage succeeds"
    eq "$(cat "$B/seen2" 2>/dev/null)" "brand new
changed by agent
gone-hidden
.wh.lookalike README attr.txt bin binary.bin d docs hard1 hard2 link mode.txt new-hard new.txt newdir newlink ovx.txt renamed.txt src tree 
README st_ino stable across reopening
reborn
d after rm -rf and mkdir: []
renamed tree
tree-hidden
tree2 tree2/a tree2/a/a1 tree2/a/b tree2/a/b/c.txt tree2/c tree2/c/c1 
abc
c1" "$L: the reopened stage continues from run 1; rm -rf + mkdir is empty; os.rename of a lower dir with nested children"
    check "$L: the re-created name replaced its whiteout in stage/upper" sh -c "[ -f '$S/upper/gone.txt' ] && [ \"\$(cat '$S/upper/gone.txt')\" = reborn ]"
    if $have_xattr; then
        check "$L: the re-created directory is opaque in stage/upper (user.overlay.opaque=y)" opaque "$S/upper/d"
    fi
    eq "$(jq -r .path "$S/journal" | sort | uniq -d | tr '\n' ' ')" "" "$L: reopening records nothing twice (README is still journaled once)"
    check "$L: the lower is unchanged after run 2" unchanged "$W" "$B/lower.manifest"
    check "$L: the stage is sealed again" test -e "$S/sealed"

    # --- run 3: run 2's directory changes survive reopening --------------------
    as "$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "cd '$W' && ls -A d | wc -l && ls tree2/a && test ! -e tree && test ! -e d/child && cat README && sh '$B/viewman.sh' . > '$B/view3.manifest'" > "$B/seen3" 2>&1
    eq "$?:$(tr '\n' ' ' < "$B/seen3")" "0:0 a1 b second run " "$L: a third run still sees the empty re-created dir and the renamed tree"
    oracle "$S" "$W" "$B/view3.manifest" "$L run 3"
    check "$L: the lower is unchanged after run 3" unchanged "$W" "$B/lower.manifest"
}

scenario "root" "$T/root"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    mkdir -p "$T/user"
    scenario "uid 65534" "$T/user" --reuid=65534 --regid=65534 --clear-groups
    check "uid 65534: the runs' Bundles record uid 65534" \
        sh -c "[ \"\$(jq -r .user.uid $T/user/state/pvisor/runs/*/bundle.json | sort -u)\" = 65534 ]"
else
    skip "unprivileged staged runs" "needs root to switch to an unprivileged user"
fi

# ---------------------------------------------------------------------------
# Root-only cases in a fresh workspace.
W="$T/ws"; mkdir -p "$T/ws"
make_lower "$W"
manifest "$W" > "$T/lower.manifest"
n=0
next_stage() { n=$((n + 1)); S="$T/stage$n"; } # sets $S (no subshell: the counter must advance)

# --- exit statuses ------------------------------------------------------------
for s in 0 3 125; do
    next_stage; "$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "exit $s"
    eq "$?" "$s" "exit status $s of a staged command propagates"
done
next_stage; "$PVISOR" run --stage "$S" --workspace "$W" -- sh -c 'kill -KILL $$'
eq "$?" 137 "a staged command killed by SIGKILL gives 137"

# --- directory link counts --------------------------------------------------------
next_stage; out=$("$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "cd '$W' && stat -c %h tree tree/a src && mkdir tree/new && stat -c %h tree")
# each count must be exact or 1 ("unknown": kernel overlayfs reports 1 for a
# merged directory); 2 for a directory with subdirectories is wrong (it says
# "no subdirectories", which leaf-optimising tree walkers trust)
nl_ok=true; set -- 4 3 3 5
for got in $out; do
    [ "$got" = "$1" ] || [ "$got" = 1 ] || nl_ok=false
    shift
done
[ $# -eq 0 ] || nl_ok=false
if $nl_ok; then
    ok "directory st_nlink is 2 + subdirectories, or 1 (unknown), also after mkdir in a lower dir"
else
    not_ok "directory st_nlink is 2 + subdirectories, or 1 (unknown), also after mkdir in a lower dir"
    diag "tree, tree/a, src, tree after mkdir tree/new: expected 4 3 3 5 (each may be 1), got" $out
fi

# --- hard-linked lower files: a change through one name is seen at once through the other
next_stage
out=$("$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "cd '$W' && echo more >> hard1 && stat -c '%s %a %h' hard1 hard2 &&
    truncate -s 1000 hard2 && chmod 0600 hard2 && stat -c '%s %a %h' hard1 hard2 && echo x >> hard1 && stat -c '%s %h' hard2 &&
    rm hard1 && stat -c '%h' hard2" 2>&1)
eq "$(echo $out)" "18 644 2 18 644 2 1000 600 2 1000 600 2 1002 2 1" \
   "hard-linked lower files: append, truncate, chmod and unlink through one name show at once through the other (size, mode, st_nlink)"

# --- open(O_NOFOLLOW) of staged regular files -------------------------------------
next_stage; out=$("$PVISOR" run --stage "$S" --workspace "$W" -- $PY -c "
import os
os.chdir('$W')
open('nf-new', 'w').write('new')
with open('README', 'a') as f: f.write('x')
for n in ('nf-new', 'README', 'docs/guide.md'):
    try:
        fd = os.open(n, os.O_RDONLY | os.O_NOFOLLOW); os.close(fd); print(n, 'ok')
    except OSError as e: print(n, e.strerror)
try: os.open('link', os.O_RDONLY | os.O_NOFOLLOW); print('link opened')
except OSError as e: print('link', e.strerror)
" 2>&1)
eq "$out" "nf-new ok
README ok
docs/guide.md ok
link Too many levels of symbolic links" "open(O_NOFOLLOW) works on created, copied-up and lower files and gives ELOOP on a symlink"

# --- rmdir of a non-empty dir and rename over a non-empty dir: ENOTEMPTY ------------
next_stage
out=$("$PVISOR" run --stage "$S" --workspace "$W" -- $PY -c "
import os
os.chdir('$W')
open('README', 'a').write('x')   # a copy-up first
for f, a in ((os.rmdir, ('tree',)), (os.rename, ('tree', 'src')), (os.rename, ('d', 'tree/a')), (os.rmdir, ('src',))):
    try: f(*a); print('no error')
    except OSError as e: print(e.strerror)
print(sorted(os.listdir('tree')))
" 2>&1); rc=$?
eq "$rc:$out" "0:Directory not empty
Directory not empty
Directory not empty
Directory not empty
['a', 'c']" "rmdir of a non-empty dir and rename over a non-empty dir fail with ENOTEMPTY (after a copy-up)"
check "the stage is sealed after the ENOTEMPTY cases (the server survived)" test -e "$S/sealed"

# --- stage quota: --stage-max-bytes 1M, then 4 MiB -> ENOSPC ------------------------
next_stage
"$PVISOR" run --stage "$S" --workspace "$W" --stage-max-bytes 1M -- sh -c \
    "cd '$W' && head -c 4194304 /dev/urandom > big.bin 2> '$T/enospc.err'; echo \$? > '$T/enospc.rc'; rm -f big.bin; echo small > small.txt && cat small.txt" > "$T/q.out" 2>&1
rc=$?
check "--stage-max-bytes 1M: writing 4 MiB fails with ENOSPC (No space left on device)" \
    sh -c "[ \"\$(cat '$T/enospc.rc')\" != 0 ] && grep -q 'No space left on device' '$T/enospc.err'"
eq "$rc:$(grep -v '^pvisor run: warning: ' "$T/q.out")" "0:small" "--stage-max-bytes 1M: after ENOSPC the view is usable (delete, then create and read a small file)"
check "--stage-max-bytes 1M: the stage is sealed" test -e "$S/sealed"
# the refused write may have left a file cut short (here the command went
# on and exited 0): the run says so, the Bundle counts it, the review notes it
"$PVISOR" status --review "$S" > "$T/q.review" 2>&1
eq "$(grep -c "^pvisor run: warning: the stage refused [1-9][0-9]* writes\{0,1\} (ENOSPC/EDQUOT: --stage-max-bytes" "$T/q.out"):$(jq -r '.stage.quota_refusals > 0' "$(bundle_of "$XDG_STATE_HOME")"):$(grep -c '^Note: .*the stage refused [1-9][0-9]* write.*may be cut short' "$T/q.review"):$("$PVISOR" status --review "$S" --json | jq -r '.stage.quota_refusals > 0')" \
    "1:true:1:true" "--stage-max-bytes 1M: the run warns that the stage refused writes, the Bundle counts them (quota_refusals), the review notes it"
"$PVISOR" run --stage "$S" --workspace "$W" --stage-max-bytes 1M -- sh -c "cd '$W' && cat small.txt && echo again >> small.txt && cat small.txt" > "$T/q2.out" 2>&1
eq "$?:$(tr '\n' ' ' < "$T/q2.out")" "0:small small again " "--stage-max-bytes 1M: the stage is reusable in a second run"
"$PVISOR" status --review "$S" > "$T/q2.review" 2>&1
"$PVISOR" status --review "$S" --json > "$T/q2.json" 2>&1
eq "$(jq -r '.stage.quota_refusals' "$(bundle_of "$XDG_STATE_HOME")"):$(grep -c '^Note: *the stage refused' "$T/q2.review"):$(jq -r '.stage.quota_refusals' "$T/q2.json")" "0:0:0" \
    "... a run the quota refused nothing: quota_refusals 0, no note of its own in the review"
# what the first run left cut short is still in the stage: the review of
# the second names that run
eq "$(grep -c '^Note: *an earlier run of this stage, [0-9A-Za-z.-]*, had [1-9][0-9]* writes\{0,1\} refused by the stage (quota or free-space reserve): files it was writing may be cut short$' "$T/q2.review"):$(jq -r '[.earlier_runs[] | select(.quota_refusals > 0)] | length' "$T/q2.json"):$(jq -r '.earlier_runs | length' "$T/q2.json")" \
    "1:1:1" "... the review notes the refusals of the earlier run of the stage (human and JSON earlier_runs)"
eq "$(jq -r '.requested_policy.stage_max_bytes' "$(bundle_of "$XDG_STATE_HOME")")" 1048576 "the Bundle records stage_max_bytes"

# --- the stage quotas bound the HOME view's throwaway stage too --------------------
# Otherwise HOME would be the way around them: its writes are discarded,
# but take the same file system until the run ends.
QH="$T/quota-home"; QHW="$T/quota-home-ws"; mkdir -p "$QH" "$QHW"
next_stage
out=$(cd "$QHW" && HOME="$QH" "$PVISOR" run --safe --stage "$S" --stage-max-bytes 1M --stage-max-inodes 50 -- sh -c '
    cd || exit 9
    for i in 1 2 3 4; do head -c 500000 /dev/zero > f$i 2>/dev/null || { echo bytes-stop $i; break; }; done
    rm -f f*; mkdir d; i=0
    while [ $i -lt 100 ]; do touch d/$i 2>/dev/null || break; i=$((i + 1)); done
    echo inodes-stop $i' 2>&1); rc=$?
eq "$rc:$(echo "$out" | nodiscard | sed 's/inodes-stop 4[0-9]/inodes-stop 4x/' | tr '\n' ' ')" "0:bytes-stop 3 inodes-stop 4x " \
    "--safe: --stage-max-bytes and --stage-max-inodes hold for writes to HOME as well"

# --- the byte quota counts every object, not only file data --------------------------
# Directories, long symlinks and copy-ups with their whiteouts take blocks
# too (4 KiB each on ext4): past --stage-max-bytes they fail with ENOSPC,
# what they free is given back, and the upper's real size (du) and the
# Bundle's upper_bytes stay within the documented slack (64 KiB) of it.
QW="$T/quota-ws"; mkdir -p "$QW"
i=0; while [ $i -lt 600 ]; do echo lower > "$QW/l$i"; i=$((i + 1)); done
next_stage
"$PVISOR" run --stage "$S" --workspace "$QW" --stage-max-bytes 1M -- "$PY" -c "
import errno, os
os.chdir('$QW')
def until(what, f, n):  # the first error, and whether some succeeded before it
    for i in range(n):
        try: f(i)
        except OSError as e:
            print(what, errno.errorcode[e.errno], i > 0); return i
    print(what, 'never failed'); return n
n = until('mkdir', lambda i: os.mkdir('d%d' % i), 40000)
for i in range(n): os.rmdir('d%d' % i)
n = until('symlink', lambda i: os.symlink('y' * 4000, 's%d' % i), 20000)
for i in range(n): os.unlink('s%d' % i)
n = until('rename', lambda i: os.rename('l%d' % i, 'r%d' % i), 600)
print('kept at its old name', os.path.exists('l%d' % n) and not os.path.exists('r%d' % n))
" > "$T/qobj.out" 2>&1
eq "$?:$(cat "$T/qobj.out")" "0:mkdir ENOSPC True
symlink ENOSPC True
rename ENOSPC True
kept at its old name True
pvisor run: warning: the stage refused 3 writes (ENOSPC/EDQUOT: --stage-max-bytes/--stage-max-inodes, or the file system's reserve): files the command was writing may be cut short" \
    "--stage-max-bytes 1M: mkdir, symlink and rename (copy-up + whiteout) fail with ENOSPC past the quota, after freeing what came before (the run counts the three refusals)"
qdu=$(du -s -B1 "$S/upper" | cut -f1)
qub=$(jq -r '.stage.upper_bytes' "$(bundle_of "$XDG_STATE_HOME")")
check "--stage-max-bytes 1M: the upper's real size stays near the quota (du: $qdu bytes)" \
    test "$qdu" -ge $((1048576 - 65536)) -a "$qdu" -le $((1048576 + 65536))
check "--stage-max-bytes 1M: the Bundle's upper_bytes is within the slack of the quota and of du ($qub)" \
    test "$qub" -le $((1048576 + 65536)) -a "$qub" -ge $((qdu - 65536)) -a "$qub" -le $((qdu + 65536))

# --- --stage-durability strict ------------------------------------------------------
next_stage
"$PVISOR" run --stage "$S" --workspace "$W" --stage-durability strict -- sh -c "cd '$W' && echo strict > README && rm gone.txt && cat README"  > "$T/strict.out" 2>&1
eq "$?:$(cat "$T/strict.out")" "0:strict" "--stage-durability strict: the run works"
eq "$(jq -r 'select(.path == "README" or .path == "gone.txt") | .path' "$S/journal" | sort | tr '\n' ' ')" "README gone.txt " \
   "--stage-durability strict: the journal records the mutated objects"
eq "$(jq -r '.requested_policy.stage_durability + " " + .stage.state' "$(bundle_of "$XDG_STATE_HOME")")" "strict sealed" \
   "--stage-durability strict: the Bundle records strict durability and a sealed stage"

# --- what is flushed, and when ------------------------------------------------------
# Checkpoint durability (the default) flushes nothing before the command
# runs: a new stage's layout and the Bundles are not flushed; the seal makes
# the stage durable (syncfs of its file system), then renames 'sealed' into
# place and fsyncs the stage directory.  Strict flushes the layout and the
# Bundle before the command runs.
# flushes TRACE: "before after" counts of fsync/fdatasync/syncfs around the command's exec
flushes() {
    awk '/execve\("\/bin\/sh"/ && !c { c = NR } /(fsync|fdatasync|syncfs)\(/ { if (c) a++; else b++ } END { print b + 0, a + 0 }' "$1"
}
if command -v strace >/dev/null; then
    for mode in checkpoint strict; do
        next_stage
        no_lsan strace -f -y -o "$T/flush-$mode.strace" -e trace=execve,fsync,fdatasync,syncfs,renameat,renameat2 \
            "$PVISOR" run --stage "$S" --workspace "$W" --stage-durability $mode -- /bin/sh -c "echo flushed > '$W/README'" >/dev/null 2>&1
        eq "$?:$(cat "$S/upper/README")" "0:flushed" "--stage-durability $mode under strace: the run works"
        grep -v ' = -1 ' "$T/flush-$mode.strace" > "$T/flush-$mode.ok"
        case $mode in
            checkpoint)
                eq "$(flushes "$T/flush-$mode.ok" | cut -d' ' -f1)" 0 "checkpoint durability: nothing is flushed before the command runs"
                order=$(awk -v s="$S" '
                    index($0, "syncfs(") && index($0, s) { if (!sy) sy = NR }
                    /renameat2?\(/ && /"sealed.tmp"/ { rn = NR }
                    index($0, "fsync(") && index($0, "<" s ">") { fs = NR }
                    END { print (sy && rn && fs && sy < rn && rn < fs) ? "in order" : "sy=" sy " rn=" rn " fs=" fs }' "$T/flush-$mode.ok")
                eq "$order" "in order" "checkpoint durability: the seal flushes the stage, then renames 'sealed' into place and fsyncs the directory"
                eq "$(grep -c 'fsync(.*bundle\.json' "$T/flush-$mode.ok")" 0 "checkpoint durability: the Bundle is not flushed"
                ;;
            strict)
                pre=$(awk '/execve\("\/bin\/sh"/ { exit } /fsync\(/ && /meta\.json\.tmp>/ { m++ } /fsync\(/ && /version\.tmp>/ { v++ } /fsync\(/ && /bundle\.json/ { b++ } END { print m + 0, v + 0, b + 0 }' "$T/flush-$mode.ok")
                eq "$pre" "1 1 1" "strict durability: meta.json, version and the Bundle are flushed before the command runs"
                ;;
        esac
    done
    # A run that changes nothing in a stage it created flushes nothing (the
    # stage holds nothing to lose); reopened, the stage had content, and
    # its new marker is flushed.
    next_stage
    for k in created reopened; do
        no_lsan strace -f -y -o "$T/flush-$k.strace" -e trace=execve,fsync,fdatasync,syncfs,renameat,renameat2 \
            "$PVISOR" run --stage "$S" --workspace "$W" -- /bin/sh -c true >/dev/null 2>&1
        eq "$?:$(test -e "$S/sealed" && echo sealed)" "0:sealed" "an unchanged run ($k stage): sealed"
        grep -v ' = -1 ' "$T/flush-$k.strace" > "$T/flush-$k.ok"
        eq "$(awk '/(fsync|fdatasync|syncfs)\(/ { print $2 }' "$T/flush-$k.ok" | sed 's/(.*<\(.*\)>.*/ \1/' | tr '\n' ' ')" \
            "$([ $k = created ] || echo "fsync $S fsync $S/meta.json.tmp fsync $S fsync $S ")" \
            "an unchanged run ($k stage): flushes $([ $k = created ] && echo nothing || echo "the reopening ('sealed' removed, meta.json), then only the marker")"
    done
else
    skip "what is flushed, and when" "strace missing (apt-get install strace)"
fi

# --- invalid stage locations: usage errors, nothing written --------------------------
touch "$T/afile"
before=$(run_count)
"$PVISOR" run --stage "$T/afile" --workspace "$W" -- true 2> "$T/err"
eq "$?" 2 "a stage path that is a file is a usage error (exit 2)"
eq "$(run_count)" "$before" "a stage path that is a file creates no run directory"
"$PVISOR" run --stage "$W/stage-inside" --workspace "$W" -- true 2> "$T/err"
eq "$?" 2 "a stage inside the workspace is a usage error (exit 2)"
check "a refused stage inside the workspace was not created" test ! -e "$W/stage-inside"
"$PVISOR" run --stage "$T" --workspace "$W" -- true 2> "$T/err"
eq "$?" 2 "a stage that contains the workspace is a usage error (exit 2)"
eq "$(run_count)" "$before" "refused stage locations create no run directory"
mkdir -p "$T/notastage"; echo x > "$T/notastage/file"
"$PVISOR" run --stage "$T/notastage" --workspace "$W" -- true 2> "$T/err"
eq "$?" 125 "a non-empty directory that is not a stage is refused (125)"
check "the non-stage directory is left alone" sh -c "[ \"\$(ls -A '$T/notastage')\" = file ]"
# A FIFO in the place of a stage file is refused, not waited on (the open
# of version, journal or origin blocked until a writer came).
"$PVISOR" run --stage "$T/fifobase" --workspace "$W" -- true >/dev/null 2>&1
for f in version meta.json journal origin; do
    cp -a "$T/fifobase" "$T/fifostage-$f"
    rm -f "$T/fifostage-$f/$f"; mkfifo "$T/fifostage-$f/$f"
    timeout 60 "$PVISOR" run --stage "$T/fifostage-$f" --workspace "$W" -- true 2> "$T/err"
    eq "$?:$(grep -c 'is not a pvisor stage' "$T/err")" "125:1" "a stage whose $f is a FIFO is refused (125), not waited on"
done

# --- --stage alone is cooperative: the command keeps other ways to the lower -------
# Another process's /proc/PID/cwd (a host process in the workspace) leads to
# the real workspace: a write through it is not staged.  So the Bundle says
# cooperative, not enforced, and --strict refuses --stage without the
# sandbox (it ran, and the Bundle claimed enforced).
next_stage
echo orig > "$W/alias.txt"
(cd "$W" && exec sleep 3079) &
hostpid=$!
"$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "echo via-proc > /proc/$hostpid/cwd/alias.txt" 2>/dev/null
eq "$?:$(cat "$W/alias.txt"):$(jq -r .dimensions.workspace_writes.effective "$(bundle_of "$XDG_STATE_HOME")")" \
    "0:via-proc:cooperative" "--stage alone: a write through another process's /proc/PID/cwd reaches the workspace, and the Bundle says cooperative"
echo orig > "$W/alias.txt"
before=$(cat "$W/alias.txt")
"$PVISOR" run --stage auto --strict --workspace "$W" -- sh -c "echo strict-ran > /proc/$hostpid/cwd/alias.txt" 2> "$T/err"
eq "$?:$(cat "$W/alias.txt"):$(grep -c 'workspace_writes is cooperative: .*--filesystem sandbox' "$T/err")" "125:$before:1" \
    "--stage --strict is refused (125) before the command runs, naming --filesystem sandbox"
kill $hostpid; wait $hostpid 2>/dev/null
rm -f "$W/alias.txt"

# --- the view outlives its unmount: the run still ends ------------------------
# A host process holding a file of the view open (here through the
# command's /proc/PID/cwd) keeps the FUSE connection alive past the
# unmount, so only the wake signal stops the view's workers; pvisor started
# with that signal blocked (a parent's mask is inherited) waited for them
# for good, deaf to SIGTERM.  The holder's descriptor ends ENOTCONN.
if [ "$(id -u)" -eq 0 ]; then
    next_stage; rm -f "$W/go" "$T/hold.pid"
    (cd "$W" && exec timeout -s KILL 60 python3 -c 'import signal,os,sys; signal.pthread_sigmask(signal.SIG_BLOCK,[signal.SIGURG]); os.execv(sys.argv[1], sys.argv[1:])' \
        "$PVISOR" run --stage "$S" -- sh -c "echo \$\$ > '$T/hold.pid'; while [ ! -e go ]; do sleep 0.05; done") &
    pv=$!
    i=0; while [ ! -s "$T/hold.pid" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
    sleep 3078 < "/proc/$(cat "$T/hold.pid")/cwd/README" &
    holder=$!
    # the holder's shell opens README after its fork: the command must not
    # end before it has (on a loaded machine the run ended first, and
    # there was no holder)
    i=0; while ! readlink "/proc/$holder/fd/0" 2>/dev/null | grep -q 'README$' && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
    touch "$W/go"
    wait $pv; rc=$?
    held=$(cat "/proc/$holder/fd/0" 2>&1)
    kill $holder; wait $holder 2>/dev/null
    eq "$rc:$(echo "$held" | grep -c 'not connected')" "0:1" \
        "a run whose view a host process holds past the unmount ends (pvisor started with the views' wake signal blocked); the holder gets ENOTCONN"
    rm -f "$W/go"
fi

# --- a second concurrent run on the same stage -> 125 --------------------------------
next_stage
rm -f "$T/c.started" "$T/c.go"
"$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "touch '$T/c.started'; while [ ! -e '$T/c.go' ]; do sleep 0.05; done; echo first > '$W/README'" &
pv=$!
if wait_for "$T/c.started"; then
    "$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "echo second > '$W/README'" 2> "$T/c.err"
    rc=$?
    eq "$rc" 125 "a second run on a stage in use is refused (125) while the first runs"
    check "the refusal says another run uses the stage" grep -qi 'another' "$T/c.err"
else
    not_ok "the first run on the stage started"
fi
touch "$T/c.go"; wait $pv
eq "$?:$(cat "$S/upper/README" 2>/dev/null)" "0:first" "the first run finishes normally and its write is staged"
check "the lower is unchanged after the concurrent runs" unchanged "$W" "$T/lower.manifest"

# --- kill -9 of the supervisor mid-run -----------------------------------------------
next_stage
rm -f "$T/k.started"
"$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "echo killed-run > '$W/README'; rm '$W/gone.txt'; touch '$T/k.started'; exec sleep 3077.$$" & # (this shell's own: the suite runs in both builds at once)
pv=$!
wait_for "$T/k.started"; sleep 0.2
kill -9 $pv; wait $pv 2>/dev/null
sleep 0.3
check "kill -9 of pvisor: no FUSE mount of the workspace is left anywhere on the host" no_fuse_mount_of "$W"
i=0; while pgrep -f "^sleep 3077\\.$$\$" >/dev/null && [ $i -lt 60 ]; do sleep 0.05; i=$((i + 1)); done
check "kill -9 of pvisor: the command died with it" sh -c "! pgrep -f '^sleep 3077\\.$$\$' >/dev/null"
check "kill -9 of pvisor: the lower is unchanged" unchanged "$W" "$T/lower.manifest"
check "kill -9 of pvisor: the stage has no sealed marker" test ! -e "$S/sealed"
sj=$("$PVISOR" status --json)
st="$(echo "$sj" | jq -r '.stage.state') $(echo "$sj" | jq -r '.display_state')"
case "$st" in
    interrupted*|*interrupted) ok "kill -9 of pvisor: status shows the run/stage interrupted ($st)";;
    *) not_ok "kill -9 of pvisor: status shows the run/stage interrupted"; diag "stage.state display_state: $st";;
esac
diag "after kill -9: status --json .stage.state is '$(echo "$sj" | jq -r '.stage.state')', .display_state '$(echo "$sj" | jq -r '.display_state')'"
# its review listed the changes as any other, with nothing but the state
# in the Stage line to say that apply refuses them and what to do instead
"$PVISOR" status --review > "$T/k.review" 2>/dev/null
eq "$(grep -c "^Note:        the stage was never sealed (its run was killed, or the seal could not be written): writes may be cut short, and it cannot be applied; 'pvisor drop' discards it$" "$T/k.review"):$(grep -c '^  M README' "$T/k.review")" \
    "1:1" "kill -9 of pvisor: the review of the interrupted stage says it cannot be applied and what to do"
"$PVISOR" run --stage "$S" --workspace "$W" -- true 2> "$T/k.err"
eq "$?" 125 "a new run on the interrupted stage is refused (125)"
check "the refusal says the stage was interrupted" grep -q interrupted "$T/k.err"
# The same under --safe, where the stage is opened after the launcher was
# started: refused with one message, the command never ran, no mount left,
# the launcher gone, a setup_failed Bundle without a stage.
"$PVISOR" run --safe --stage "$S" --workspace "$W" -- touch "$T/k.safe-ran" 2> "$T/k2.err"
eq "$?" 125 "--safe: a run on the interrupted stage is refused (125)"
check "--safe: the refusal is one line that says the stage was interrupted" \
    sh -c "[ \$(grep -c . '$T/k2.err') -eq 1 ] && grep -q interrupted '$T/k2.err'"
check "--safe: the refused command never ran" test ! -e "$T/k.safe-ran"
check "--safe: no FUSE mount of the workspace is left" no_fuse_mount_of "$W"
# (other suites may be running --safe runs meanwhile: a launcher, or its
# namespace init or command before the exec, with a live supervisor among
# its ancestors is theirs; one left behind has lost it)
orphan_launchers() {
    for p in $(pgrep -f '^/proc/self/exe __launc[h]'); do
        a=$p n=0 owned=
        while [ $n -lt 4 ] && [ -z "$owned" ]; do
            a=$(awk '/^PPid:/ { print $2 }' "/proc/$a/status" 2>/dev/null)
            [ -n "$a" ] && [ "$a" -gt 1 ] || break
            tr '\0' ' ' < "/proc/$a/cmdline" 2>/dev/null | grep -q ' run ' && owned=1
            n=$((n + 1))
        done
        [ -n "$owned" ] || ! [ -d "/proc/$p" ] || echo "$p"
    done
}
eq "$(orphan_launchers)" "" "--safe: no launcher is left"
kb="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -r '[.state, (.stage | type)] | join(" ")' "$kb")" "setup_failed null" "--safe: the Bundle says setup_failed, with no stage"
check "--safe: that Bundle validates" $VALIDATE "$kb"

# kill -9 in the middle of a large copy-up
head -c 67108864 /dev/urandom > "$T/big64"
mkdir -p "$T/ws-big"; cp "$T/big64" "$T/ws-big/big.bin"
next_stage
rm -f "$T/kb.started"
"$PVISOR" run --stage "$S" --workspace "$T/ws-big" -- sh -c "touch '$T/kb.started'; exec dd if=/dev/zero of='$T/ws-big/big.bin' bs=1 count=1 seek=7 conv=notrunc" 2>/dev/null &
pv=$!
wait_for "$T/kb.started"; sleep 0.02
kill -9 $pv; wait $pv 2>/dev/null
sleep 0.3
check "kill -9 during a 64 MiB copy-up: no FUSE mount left" no_fuse_mount_of "$T/ws-big"
check "kill -9 during a 64 MiB copy-up: the lower file is unchanged" cmp -s "$T/big64" "$T/ws-big/big.bin"
check "kill -9 during a 64 MiB copy-up: the stage is not sealed" test ! -e "$S/sealed"
"$PVISOR" run --stage "$S" --workspace "$T/ws-big" -- true 2>/dev/null
rc=$?
case $rc in
    125) ok "kill -9 during a copy-up: the stage is refused afterwards (125)";;
    0) if [ -e "$S/sealed" ]; then ok "kill -9 during a copy-up (killed before anything was recorded): the stage is reusable"; else not_ok "kill -9 during a copy-up: a reused stage is sealed"; fi;;
    *) not_ok "kill -9 during a copy-up: the stage is refused afterwards (125)"; diag "rc=$rc";;
esac
rm -f "$T/big64"

# --- SIGTERM to pvisor: forwarded, stage sealed ---------------------------------------
next_stage
rm -f "$T/t.ready" "$T/t.got"
"$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "echo pre-term > '$W/README'; trap 'echo got-term > \"$T/t.got\"; exit 0' TERM; touch '$T/t.ready'; while :; do sleep 0.05; done" 2> "$T/t.err" &
pv=$!
wait_for "$T/t.ready"
kill -TERM $pv; wait $pv; rc=$?
eq "$rc:$(cat "$T/t.got" 2>/dev/null):$(jq -r .exit.status "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" "143:got-term:0" \
    "SIGTERM to pvisor reaches the command (its exit status 0 recorded); pvisor then ends by SIGTERM"
check "after SIGTERM the stage is sealed" test -e "$S/sealed"
eq "$(cat "$S/upper/README" 2>/dev/null)" pre-term "after SIGTERM the command's write is staged"
eq "$("$PVISOR" status --json | jq -r '.stage.state + " " + .display_state')" "sealed finished" "after SIGTERM status shows the stage sealed"
check "after SIGTERM no FUSE mount is left" no_fuse_mount_of "$W"

# --- a termination signal after the command ended, before the seal -------------------
# (a second SIGHUP as the terminal closes, a process manager's SIGTERM):
# nothing is left to forward it to; it must not kill pvisor half-way,
# which left the stage interrupted (the finished work could not be
# applied) and the Bundle saying "running"
next_stage
rm -f "$T/sw.wait"
PVISOR_TEST_SEAL_WAIT="$T/sw.wait" "$PVISOR" run --stage "$S" --workspace "$W" -- sh -c "echo done-work > '$W/README'; exit 3" 2> "$T/sw.err" &
pv=$!
wait_for "$T/sw.wait"
kill -TERM $pv; kill -HUP $pv; kill -INT $pv
rm -f "$T/sw.wait"
wait $pv; rc=$?
eq "$rc" 3 "signals to pvisor after the command ended: pvisor finishes, with the command's exit status"
check "... the stage is sealed" test -e "$S/sealed"
eq "$(jq -r '.state + " " + .stage.state + " " + (.exit.status | tostring)' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
    "finished sealed 3" "... the Bundle records the finished run"
eq "$(cat "$S/upper/README" 2>/dev/null)" done-work "... and its write is staged"

# --- pvisor fails to start the command, or to wait for it ----------------------------
# Starting it failed (signalfd here; fork or pipe2 under a process or
# descriptor limit): a stage the run reopened was left unsealed, so the
# earlier run's work could no longer be applied, and two messages said so
# (the seal "failed: Operation canceled").
: "${SYSDENY:?SYSDENY must point at the built sysdeny helper}"
W9="$T/ws-fail"; mkdir -p "$W9"
next_stage
"$PVISOR" run --stage "$S" --workspace "$W9" -- sh -c "echo earlier-work > '$W9/earlier'"
"$SYSDENY" 5 signalfd4 -- "$PVISOR" run --stage "$S" --workspace "$W9" -- touch "$W9/ran" 2> "$T/fs.err"; rc=$?
eq "$rc:$(grep -c . "$T/fs.err"):$(grep -c 'cannot start the command' "$T/fs.err")" "125:1:1" \
    "pvisor cannot start the command on a reopened stage: 125, one message"
eq "$(jq -r '.state + " " + .stage.state' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"):$(ls "$S/upper")" \
    "setup_failed sealed:earlier" "  the Bundle says setup_failed, the stage is sealed, the command did not run"
"$PVISOR" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W9/earlier" 2>/dev/null)" "0:earlier-work" "  the earlier run's work is applied"
# Waiting for it failed (poll): pvisor killed it, and said "cannot start
# the command" of a command that had run, with the seal's message too.
next_stage
"$SYSDENY" 5 poll -- "$PVISOR" run --stage "$S" --workspace "$W9" -- true 2> "$T/fp.err"
eq "$(grep -c . "$T/fp.err"):$(grep -c 'could no longer wait for the command' "$T/fp.err")" "1:1" \
    "poll failing while pvisor waits for the command: one message, which says so"
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -r '[.state, .stage.state, (.warnings | map(select(test("could no longer wait"))) | length)] | map(tostring) | join(" ")' "$b")" \
    "finished sealed 1" "  the Bundle: the command ran, its stage sealed, the warning recorded"
check "  that Bundle validates" $VALIDATE "$b"

# --- the user edits the lower while a run is live --------------------------------------
L2="$T/ws-live"; mkdir -p "$L2"
printf 'v1\n' > "$L2/edit.txt"
printf 'v1\n' > "$L2/agent-writes.txt"
printf 'will go\n' > "$L2/del.txt"
next_stage
rm -f "$T/l.ready" "$T/l.go"
cat > "$T/live.sh" <<EOF
cd '$L2' || exit 99
cat edit.txt
test -e new.txt && echo new-present || echo new-absent
echo agent >> agent-writes.txt
touch '$T/l.ready'
while [ ! -e '$T/l.go' ]; do sleep 0.05; done
cat edit.txt
cat new.txt 2>/dev/null || echo new-absent
test -e del.txt && echo del-present || echo del-absent
cat agent-writes.txt
echo mine > edit.txt
cat edit.txt
EOF
"$PVISOR" run --stage "$S" --workspace "$L2" -- sh "$T/live.sh" > "$T/live.out" 2>&1 &
pv=$!
if wait_for "$T/l.ready"; then
    printf 'v2 from the host\n' > "$L2/edit.txt"
    printf 'added by the host\n' > "$L2/new.txt"
    rm "$L2/del.txt"
    printf 'host changed it\n' > "$L2/agent-writes.txt"
    touch "$T/l.go"
fi
wait $pv; rc=$?
eq "$rc:$(cat "$T/live.out")" "0:v1
new-absent
v2 from the host
added by the host
del-absent
v1
agent
mine" "lower files edited, added and deleted by the user while a run is live are seen as the host has them until the command writes them"
eq "$(cat "$L2/edit.txt")" "v2 from the host" "the command's write after the user's edit went to the stage, not the lower"
eq "$(cat "$S/upper/edit.txt" 2>/dev/null)" mine "the command's version of the edited file is staged"

# --- kernel overlayfs agrees on a renamed lower dir that had a deleted child --------
# (whiteouts left inside an opaque directory: the kernel lists them in readdir
# of a pure-upper directory but its lookup says ENOENT)
R="$T/ws-ren"; mkdir -p "$R/d/sub"; echo 1 > "$R/d/f"; echo 2 > "$R/d/g"; echo 3 > "$R/d/sub/h"
manifest "$R" > "$T/ren.manifest"
next_stage
"$PVISOR" run --stage "$S" --workspace "$R" -- sh -c "cd '$R' && rm d/f d/sub/h && $PY -c 'import os; os.rename(\"d\", \"e\")' && ls -A e e/sub | tr '\n' ' ' && sh '$T/viewman.sh' . > '$T/ren.view'" > "$T/ren.out" 2>&1
eq "$?:$(cat "$T/ren.out")" "0:e: g sub  e/sub: " "deleting children of a lower dir, then renaming it: the view shows neither the deleted children nor the old name"
check "the lower is unchanged after renaming a dir with deleted children" unchanged "$R" "$T/ren.manifest"
oracle "$S" "$R" "$T/ren.view" "renamed dir with deleted children"

# --- more files than the descriptor limit ------------------------------------------
# The server caches a descriptor per upper object up to a budget under its
# RLIMIT_NOFILE; past it, descriptors are reopened on demand, so a run that
# copies up and lists more files than the limit sees no EMFILE.
E="$T/ws-many"; mkdir -p "$E"
for d in a b c d; do mkdir "$E/$d"; (cd "$E/$d" && seq 1 400 | sed 's/^/f/' | xargs touch); done
next_stage
out=$(prlimit --nofile=512:512 "$PVISOR" run --stage "$S" --workspace "$E" -- sh -c "
    cd '$E' || exit 9
    for f in */f*; do echo x >> \"\$f\" || exit 1; done
    bad=0; for f in */f*; do [ \"\$(cat \"\$f\")\" = x ] || bad=\$((bad + 1)); done
    ls -lR . > /dev/null || bad=\$((bad + 1)); echo bad=\$bad" 2>&1)
eq "$?:$out" "0:bad=0" "1,600 files copied up, read back and listed under a 512-descriptor limit: no EMFILE"
eq "$(cat "$S/upper/d/f400" 2>/dev/null):$(find "$S/upper" -type f | wc -l):$(cat "$E/d/f400" | wc -c)" "x:1600:0" \
    "all 1,600 copies are staged; the lower files are untouched"
# A file removed while open (unlinked, or renamed over; created in the run,
# or a lower file copied up) is reachable only through the node's cached
# descriptor: past the budget (the server closes every cached one, or
# caches none) fstat, ftruncate, fchmod, utimens and xattrs through the
# open descriptor failed with ESTALE, as a filesystem never does.
cat > "$T/orphans.py" <<'EOF'
import os
fds = []
for name, how in (("new-unlinked", "unlink"), ("new-replaced", "rename"), ("a/f1", "unlink"), ("b/f1", "rename")):
    if name.startswith("new"):
        open(name, "w").write("x" * 1000)
    fd = os.open(name, os.O_RDWR)
    os.pwrite(fd, b"y" * 1000, 0)
    if how == "unlink":
        os.unlink(name)
    else:
        open("over", "w").write("o")
        os.rename("over", name)
    fds.append((name, fd))
for i in range(300):  # more upper objects than the budget (prlimit below)
    open("c/new%d" % i, "w").write("n")
for name, fd in fds:
    res = []
    for what, op in (("fstat", lambda: os.fstat(fd).st_size == 1000 or 1 / 0),
                     ("ftruncate", lambda: os.ftruncate(fd, 10)),
                     ("fchmod", lambda: os.fchmod(fd, 0o600)),
                     ("futimens", lambda: os.utime(fd, (1, 2))),
                     ("fsetxattr", lambda: os.setxattr(fd, "user.k", b"v")),
                     ("fstat-again", lambda: os.fstat(fd).st_size == 10 or 1 / 0)):
        try:
            op()
        except Exception as e:
            res.append("%s: %s" % (what, e))
    print(name, "; ".join(res) or "ok")
EOF
next_stage
out=$(prlimit --nofile=512:512 "$PVISOR" run --stage "$S" --workspace "$E" -- sh -c "cd '$E' && $PY '$T/orphans.py'" 2>&1)
eq "$?:$(echo "$out" | tr '\n' ' ')" "0:new-unlinked ok new-replaced ok a/f1 ok b/f1 ok " \
    "files removed while open, then more upper objects than the descriptor budget: fstat, ftruncate, fchmod, utimens, fsetxattr through the descriptor work"

# --- disk exhaustion: the agent cannot fill the stage's file system ---------------------
# The overlay keeps 2% of it free (at most 128 MiB): on a 32 MiB tmpfs that
# holds the stage and the run records, a writer that never stops gets ENOSPC,
# and the seal and the Bundle still find room.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    D="$T/small"; mkdir -p "$D"
    out=$(unshare -m sh -c "mount -t tmpfs -o size=32m tmpfs '$D' && mkdir '$D/ws' '$D/state' && echo hi > '$D/ws/a' &&
        XDG_STATE_HOME='$D/state' '$PVISOR' run --stage '$D/st' --workspace '$D/ws' -- sh -c 'cd $D/ws; dd if=/dev/zero of=big bs=1M count=64 2>&1 | grep -c \"No space left\"' 2>'$T/small.err'
        echo rc=\$? free_kib=\$(df -k --output=avail '$D' | tail -1 | tr -d ' ') sealed=\$(test -e '$D/st/sealed' && echo yes) state=\$(jq -r .state '$D'/state/pvisor/runs/*/bundle.json)" 2>&1)
    eq "$(echo "$out" | sed 's/free_kib=[0-9]*//' | tr '\n' ' ')" "1 rc=0  sealed=yes state=finished " \
        "disk exhaustion: the writer gets ENOSPC; the run is sealed and its Bundle written"
    check "disk exhaustion: a run starting with little room says so on stderr" grep -q "pvisor: warning: the stage's file system has [0-9]* MiB left for the command" "$T/small.err"
    free=$(echo "$out" | sed -n 's/.*free_kib=\([0-9]*\).*/\1/p')
    check "disk exhaustion: 2% of the file system is still free afterwards ($free KiB)" test "${free:-0}" -ge 600
    # A sparse file costs nothing until its holes are written: writes into
    # them (no growth beyond EOF) are held to the same reserve.
    out=$(unshare -m sh -c "mount -t tmpfs -o size=32m tmpfs '$D' && mkdir '$D/ws' '$D/state' && echo hi > '$D/ws/a' &&
        XDG_STATE_HOME='$D/state' '$PVISOR' run --stage '$D/st' --workspace '$D/ws' -- sh -c 'cd $D/ws; truncate -s 1G sparse; dd if=/dev/zero of=sparse bs=1M count=64 conv=notrunc 2>&1 | grep -c \"No space left\"' 2>/dev/null
        echo rc=\$? free_kib=\$(df -k --output=avail '$D' | tail -1 | tr -d ' ') state=\$(jq -r .state '$D'/state/pvisor/runs/*/bundle.json)" 2>&1)
    free=$(echo "$out" | sed -n 's/.*free_kib=\([0-9]*\).*/\1/p')
    eq "$(echo "$out" | sed 's/free_kib=[0-9]*//' | tr '\n' ' ')" "1 rc=0  state=finished " \
        "disk exhaustion: writes into the holes of a sparse file get ENOSPC; the Bundle is written"
    check "disk exhaustion: writing into holes leaves 2% of the file system free ($free KiB)" test "${free:-0}" -ge 600
else
    skip "disk exhaustion on a small tmpfs" "needs root and unshare (a private tmpfs mount)"
fi

# --- a descriptor opened on a lower file sees what is written after it -----------
# POSIX: every descriptor of a file sees its writes.  The first write copies
# the file up; descriptors still open on the lower file are switched to the
# copy then (the way `tail -f` follows a log the command appends to).  A
# name replaced by rename keeps its old object behind old descriptors.
D="$T/fdcu"; mkdir -p "$D/ws"; printf 'line1\n' > "$D/ws/log"; printf 'old\n' > "$D/ws/cfg"; printf 'v1\n' > "$D/ws/rep"
(cd "$D/ws" && "$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- "$PY" -c "
import os
a = open('log', 'rb'); a.read()
with open('log', 'ab') as w: w.write(b'line2\n')
print(a.read(), end=' ')
a.seek(0); print(a.read(), end=' ')
c = open('cfg', 'rb')
with open('cfg', 'wb') as w: w.write(b'truncated and rewritten\n')
print(c.read(), end=' ')
r = open('rep', 'rb')
with open('rep.new', 'wb') as w: w.write(b'v2\n')
os.rename('rep.new', 'rep')
print(r.read(), open('rep', 'rb').read())
" > "$T/fdcu.out" 2>&1 </dev/null)
eq "$(cat "$T/fdcu.out")" "b'line2\\n' b'line1\\nline2\\n' b'truncated and rewritten\\n' b'v1\\n' b'v2\\n'" \
    "a descriptor opened before a copy-up reads the copy (append, truncate); one of a replaced name keeps the old file"

# The same through another name of a hard-linked lower file, and for a
# file inside a lower directory that is renamed (its subtree is copied up
# by the rename).
D="$T/fdhl"; mkdir -p "$D/ws/dir"; printf 'line1\n' > "$D/ws/log"; ln "$D/ws/log" "$D/ws/log2"; printf 'in dir\n' > "$D/ws/dir/f"
(cd "$D/ws" && "$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- "$PY" -c "
import os
a = open('log2', 'rb'); a.read()
with open('log', 'ab') as w: w.write(b'line2\\n')
print(a.read(), end=' ')
d = open('dir/f', 'rb'); d.read()
os.rename('dir', 'dir2')
with open('dir2/f', 'ab') as w: w.write(b'more\\n')
print(d.read())
" > "$T/fdhl.out" 2>&1 </dev/null)
eq "$(cat "$T/fdhl.out")" "b'line2\\n' b'more\\n'" \
    "a descriptor opened through another hard-link name, or below a renamed directory, reads the copy too"

# The host replaces a file the command holds open: by rename (an editor's
# save), then the command changes the name's mode (a copy-up of the new
# file): the old descriptor keeps the old file.  And for a fifo swapped in:
# the copy-up must not wait for a writer (it once hung the whole view).
D="$T/fdsw"; mkdir -p "$D/ws"; printf 'ORIGINAL\n' > "$D/ws/f"; printf 'plain\n' > "$D/ws/p"; printf 'q\n' > "$D/ws/q"
(cd "$D/ws" && timeout 20 "$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- "$PY" -c "
import os, time
a = open('f', 'rb'); a.read()
b = open('p', 'rb'); b.read()
os.stat('q')
open('$D/ready', 'w').close()
while not os.path.exists('$D/go'): time.sleep(0.02)
os.chmod('f', 0o600)
a.seek(0); print(a.read(), end=' ')
try: os.fchmod(b.fileno(), 0o600)
except OSError: pass  # the object changed type under the name: an error is fine, a hang is not
try: os.close(os.open('q', os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))  # never waits, whoever opens it
except OSError: pass
print(sorted(os.listdir('.')))
" > "$T/fdsw.out" 2>&1 </dev/null) &
swpid=$!
wait_for "$D/ready"
printf 'HOST-REPLACED\n' > "$D/ws/f.new" && mv "$D/ws/f.new" "$D/ws/f"
rm "$D/ws/p" "$D/ws/q" && mkfifo "$D/ws/p" "$D/ws/q"
: > "$D/go"
wait $swpid; rc=$?
eq "$rc $(cat "$T/fdsw.out")" "0 b'ORIGINAL\\n' ['f', 'p', 'q']" \
    "a descriptor of a file the host replaced keeps it through a copy-up; a fifo swapped in hangs no copy-up (chmod, open for writing)"

# --- a tree deeper than review goes -------------------------------------------------
# The seal's walk held two descriptors per level: an agent's tree some
# hundreds of levels deep (under a 1024-descriptor limit) made it fail,
# and the stage read 'interrupted' ("its run died"). Now it is sealed, and
# review says why it stops there.
if command -v prlimit >/dev/null; then
    D=$T/deep; mkdir -p "$D/ws"
    (cd "$D/ws" && prlimit --nofile=1024:1024 "$PVISOR" run --stage "$D/st" -- sh -c \
        'd=d; i=1; while [ $i -lt 400 ]; do d=$d/d; i=$((i + 1)); done; mkdir -p $d') >/dev/null 2>"$D/run.err"; rc=$?
    "$PVISOR" status --review "$D/st" >/dev/null 2>"$D/st.err"
    eq "$rc:$(cat "$D/st/sealed" >/dev/null 2>&1 && echo sealed):$(grep -c 'nested deeper than 256 levels' "$D/st.err")" "0:sealed:1" \
        "an agent's tree 400 levels deep is sealed under a 1024-descriptor limit, and review says why it stops"
    "$PVISOR" drop --stage "$D/st" >/dev/null 2>&1
    eq "$?" 0 "... and drop removes it"
else
    skip "a tree deeper than review goes" "needs prlimit"
fi

# --- where review stops, and how to keep the rest of the stage ---------------------
# A tree deeper than review goes (LC_MAX_DEPTH), or a path longer than it
# reads (LC_MAX_PATH), made apply fail with "Too many levels of symbolic
# links" or "File name too long", naming no path, and every message named
# drop as the only way out: the rest of the agent's work was lost.  Now
# status, diff and apply name the directory where they stopped, and
# removing it in a run on the stage makes the rest appliable.
D=$T/bound; mkdir -p "$D/ws"; printf 'keep\n' > "$D/ws/keep.txt"
(cd "$D/ws" && "$PVISOR" run --stage "$D/st" -- $PY -c '
import os
os.makedirs("/".join(["t"] * 300))
open("other.txt", "w").write("other\n")') >/dev/null 2>&1
deep=$(printf 't/%.0s' $(seq 1 257)); deep=${deep%/}
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply.err"; rc=$?
eq "$rc:$(grep -c 'nested deeper than 256 levels' "$D/apply.err"):$(grep -Fc "it stopped at $deep. " "$D/apply.err"):$(grep -c 'symbolic links' "$D/apply.err"):$(ls "$D/ws")" \
    "1:1:1:0:keep.txt" "apply of a stage with a tree deeper than 256 levels names where it stopped, and writes nothing"
"$PVISOR" status --review "$D/st" >/dev/null 2>"$D/st.err"; rc=$?
"$PVISOR" diff "$D/st" >/dev/null 2>"$D/diff.err"; rc2=$?
eq "$rc:$rc2:$(grep -Fc "it stopped at $deep. " "$D/st.err"):$(grep -Fc "it stopped at $deep. " "$D/diff.err")" "1:1:1:1" \
    "... status --review and diff name it too"
"$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- rm -rf "$D/ws/$deep" >/dev/null 2>&1
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply2.err"; rc=$?
eq "$rc:$(cat "$D/ws/other.txt" 2>/dev/null):$(find "$D/ws/t" -type d | wc -l)" "0:other:256" \
    "... and once a run on the stage removed that directory, the rest of the stage applies"
D=$T/bound2; mkdir -p "$D/ws"
(cd "$D/ws" && "$PVISOR" run --stage "$D/st" -- $PY -c '
import os
n = "n" * 250
for i in range(17):
    os.mkdir(n); os.chdir(n)') >/dev/null 2>&1
long=$(printf "$(printf 'n%.0s' $(seq 1 250))/%.0s" $(seq 1 16)); long=${long%/}
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply.err"; rc=$?
eq "$rc:$(grep -c 'a path longer than 4095 bytes' "$D/apply.err"):$(grep -Fc "it stopped at $long. " "$D/apply.err"):$(ls "$D/ws" | wc -l)" "1:1:1:0" \
    "apply of a stage with a path longer than 4095 bytes names the directory where it stopped, and writes nothing"
# The deep tree is the workspace's and the command deleted it: it is not in
# the stage, so removing it in a run on the stage cannot help; the messages
# say to delete it in the workspace, which makes the rest appliable.
D=$T/bound3; mkdir -p "$D/ws"; printf 'old\n' > "$D/ws/other.txt"
(cd "$D/ws" && $PY -c 'import os; os.makedirs("/".join(["t"] * 300))')
"$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- sh -c "rm -rf '$D/ws/t' && echo new > '$D/ws/other.txt'" >/dev/null 2>&1
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply.err"; rc=$?
"$PVISOR" status --review "$D/st" >/dev/null 2>"$D/st.err"; rc2=$?
deep3=$(printf 't/%.0s' $(seq 1 258)); deep3=${deep3%/} # a deleted tree is listed one level further
eq "$rc:$rc2:$(grep -Fc "it stopped at $deep3, in a directory of the workspace the command deleted" "$D/apply.err"):$(grep -Fc "it stopped at $deep3, in a directory of the workspace the command deleted" "$D/st.err"):$(grep -c 'in a run on the stage' "$D/apply.err"):$(cat "$D/ws/other.txt")" \
    "1:1:1:1:0:old" "a deep workspace tree the command deleted: apply and status say to delete it in the workspace, not in a run"
rm -rf "$D/ws/t"
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply2.err"; rc=$?
eq "$rc:$(cat "$D/ws/other.txt")" "0:new" "... and once it is deleted in the workspace, the rest of the stage applies"

# --- the user's own files whose group is another (a setgid team directory) --------
# The sandbox's user namespace maps one uid and one gid: an unmapped group
# made the kernel refuse every write (EACCES) and removal (EOVERFLOW) of
# such a file, which the user may change on the host.
# own_group_case LABEL UID GID SUPP SHOWN [setpriv args...]: files
# UID:SUPP in a setgid directory of group SUPP; the command writes, edits,
# removes and renames them (and sees them as UID:SHOWN); apply writes the
# result.
own_group_case() {
    L=$1; OU=$2; OG=$3; SG=$4; SHOWN=$5; shift 5
    D="$T/owngrp-$OU"; rm -rf "$D"; mkdir -p "$D/ws/sub" "$D/ws/plain" "$D/state"
    echo hello > "$D/ws/team.txt"; echo x > "$D/ws/sub/f"; echo old > "$D/ws/gone.txt"; echo m > "$D/ws/mv.txt"
    echo p > "$D/ws/plain/p"
    chown -R "$OU:$SG" "$D/ws"; chown "$OU:$OG" "$D" "$D/state"; chmod 2775 "$D/ws" "$D/ws/sub"; chmod 0775 "$D/ws/plain"
    out=$(cd "$D/ws" && env XDG_STATE_HOME="$D/state" HOME="$D" "$@" "$PVISOR" run --safe --stage "$D/st" -- sh -c '
        echo agent >> team.txt && echo w=ok; sed -i s/x/y/ sub/f && echo sed=ok
        rm gone.txt && echo rm=ok; mv mv.txt moved.txt && echo mv=ok; echo n > sub/new && echo new=ok
        echo q >> plain/p; stat -c "%u:%g" team.txt' 2>&1)
    eq "$(echo $out)" "w=ok sed=ok rm=ok mv=ok new=ok $OU:$SHOWN" \
        "$L: the user's own files of group $SG in a setgid directory can be written, edited, removed and renamed under --safe (shown as group $SHOWN)"
    (cd "$D/ws" && env XDG_STATE_HOME="$D/state" HOME="$D" "$@" "$PVISOR" apply --stage "$D/st") >/dev/null 2>&1
    eq "$(cat "$D/ws/team.txt" "$D/ws/sub/f" "$D/ws/moved.txt" "$D/ws/sub/new" | tr '\n' ' '; ls "$D/ws" | tr '\n' ' '; stat -c %g "$D/ws/sub/new")" \
        "hello agent y m n moved.txt plain sub team.txt $SG" "$L: ... and apply writes them, new files in the directory's group"
    # a file apply replaces keeps its group, as an in-place write does: in
    # a directory that is not set-gid it took the user's own group, and
    # the team its group gave write access lost it
    eq "$(cat "$D/ws/plain/p" | tr '\n' ' '):$(stat -c %g "$D/ws/plain/p")" "p q :$SG" \
        "$L: ... a file apply replaces in a directory that is not set-gid keeps its group"
}
# root's namespace maps every id: the group as it is
own_group_case "root" 0 0 100 100
if command -v setpriv >/dev/null; then
    # (not uid 65534: its gid is the overflow gid an unmapped group shows as)
    own_group_case "uid 4242 (supplementary group 100)" 4242 4242 100 4242 setpriv --reuid=4242 --regid=4242 --groups=100
    # a plain --stage run without root: its overlay is in a user namespace
    # that maps one uid and one gid too (the user's own files of group 100
    # were refused: 'Permission denied', as under --safe before)
    D="$T/owngrp-plain"; rm -rf "$D"; mkdir -p "$D/ws" "$D/state"
    echo hello > "$D/ws/team.txt"; echo x > "$D/ws/f"
    # (not uid 65534: its gid is the overflow gid an unmapped group shows as)
    chown -R 4242:100 "$D/ws"; chown 4242:4242 "$D" "$D/state"; chmod 0775 "$D/ws"
    out=$(cd "$D/ws" && env XDG_STATE_HOME="$D/state" HOME="$D" setpriv --reuid=4242 --regid=4242 --groups=100 \
        "$PVISOR" run --stage "$D/st" -- sh -c 'echo agent >> team.txt && echo w=ok; rm f && echo rm=ok' 2>&1)
    eq "$(echo $out)" "w=ok rm=ok" "a plain --stage run without root: the user's own files of a supplementary group can be written and removed"
fi
# As root, other users' files keep their owners: the command (uid 0 without
# capabilities) removes and renames them in a directory it may write, as
# on the host, and may not write into one whose mode does not let it.
# Unmapped (a one-id map), the kernel refused all three (EOVERFLOW, EACCES).
D="$T/otheruser"; rm -rf "$D"; mkdir -p "$D/ws"
echo theirs > "$D/ws/theirs"; echo gone > "$D/ws/gone"; echo mv > "$D/ws/mv"; echo rw > "$D/ws/rw"
chown 1001:1001 "$D/ws/theirs" "$D/ws/gone" "$D/ws/mv" "$D/ws/rw"; chmod 0666 "$D/ws/rw"
out=$(cd "$D/ws" && "$PVISOR" run --safe --stage "$D/st" -- sh -c '
    stat -c "%u:%g" theirs; rm gone && echo rm=ok; mv mv moved && echo mv=ok; echo agent >> rw && echo rw=ok
    (echo x >> theirs) 2>/dev/null || echo w=refused' 2>&1)
eq "$(echo $out)" "1001:1001 rm=ok mv=ok rw=ok w=refused" \
    "root: other users' files keep their owners under --safe, and are removed, renamed and written as their modes allow"
(cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>&1
eq "$(ls "$D/ws" | tr '\n' ' ')$(cat "$D/ws/rw" "$D/ws/theirs" | tr '\n' ' ')$(stat -c %u:%g "$D/ws/rw")" "moved rw theirs rw agent theirs 1001:1001" \
    "  ... and apply writes that, the changed file still its owner's (as a write in place; it became root's)"

# Two different files never share an inode number, also when the host
# links to or moves a file between runs after the command changed it: the
# upper copy reports the lower file's number (origin map), and so did the
# host's other name of that lower file (a link it made, or the name it
# moved the original to, as an editor's backup does), and the copy-up of
# that name mapped a second upper file to the same number.  tar stored the
# other file as a hard link to the first (its content lost), cp refused
# "are the same file".
D="$T/inoalias"; rm -rf "$D"; mkdir -p "$D/ws"
echo one > "$D/ws/a"; ln "$D/ws/a" "$D/ws/b"; echo orig > "$D/ws/f"
"$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- sh -c "cd '$D/ws' && echo A >> a && echo agent >> f" >/dev/null 2>&1
ln "$D/ws/a" "$D/ws/c"; mv "$D/ws/f" "$D/ws/f~"; echo host > "$D/ws/f"
out=$("$PVISOR" run --stage "$D/st" --workspace "$D/ws" -- sh -c "cd '$D/ws' &&
    [ \$(stat -c %i a) = \$(stat -c %i b) ] && echo ab=one
    [ \$(stat -c %i a) != \$(stat -c %i c) ] && echo ac=two
    [ \$(stat -c %i f) != \$(stat -c %i f~) ] && echo ff=two
    [ \$(ls -i c | cut -d' ' -f1) = \$(stat -c %i c) ] && echo c-dino
    tar cf - a b c | tar tvf - | grep -c 'link to'
    echo C >> c; [ \$(stat -c %i a) != \$(stat -c %i c) ] && echo ac-copied=two
    cp f~ f && cat f" 2>&1)
eq "$(echo $out)" "ab=one ac=two ff=two c-dino 1 ac-copied=two orig" \
    "a name the host linked to or moved from a changed file is another file in the view: its own inode number (stat, readdir), before and after its copy-up"
# --- the seal when another program filled the stage's file system -------------------
# The marker's file took an inode and a block at the run's end: with the
# file system full by then (the host's programs; here the command, which a
# plain --stage run does not keep from the state directory), the seal
# failed with ENOSPC and the stage stayed interrupted for good, its work out
# of apply's reach.  The marker's room is taken when the stage opens.
if [ "$(id -u)" -eq 0 ]; then
    SM=$T/small-state; mkdir -p "$SM"
    if mount -t tmpfs -o size=4m pvisor-test "$SM"; then
        at_exit "umount '$SM' 2>/dev/null"
        next_stage
        XDG_STATE_HOME="$SM" "$PVISOR" run --stage "$SM/st" --workspace "$W" -- sh -c "echo finished-work > '$W/sealed-full'; dd if=/dev/zero of='$SM/fill' bs=64k 2>/dev/null; true" >/dev/null 2>"$T/full.err"
        rc=$?
        eq "$rc:$(test -e "$SM/st/sealed" && echo sealed):$(grep -c 'could not be sealed' "$T/full.err")" "0:sealed:0" \
            "a file system the command filled before its end: the stage is sealed all the same (its marker's room was taken at open)"
        rm -f "$SM/fill"
        XDG_STATE_HOME="$SM" "$PVISOR" apply --stage "$SM/st" >/dev/null 2>&1
        eq "$?:$(cat "$W/sealed-full" 2>&1)" "0:finished-work" "  and, room made again, it applies"
        rm -f "$W/sealed-full"
    else
        skip "the seal when another program filled the stage's file system" "cannot mount a tmpfs"
    fi
else
    skip "the seal when another program filled the stage's file system" "needs root to mount a small tmpfs"
fi

# What the user's kernel keeps from change, the view lets the command change
# (its writes go to the stage, as kernel overlayfs's go to its upper): a
# tmpfs mounted on node_modules it deletes, a read-only bind mount it writes
# in, an immutable file (chattr +i) it edits, a file it deletes in an
# immutable directory.  Apply met each refusal (EBUSY, EROFS, EPERM) only
# after it had deleted other paths: the tmpfs's files were gone, the rest
# never applied, the stage half-applied for good (its resume failed the
# same way), and an EBUSY read "the stage is in use ... wait for it".  Each
# is a conflict now: review names it, apply writes nothing.
if [ "$(id -u)" -eq 0 ]; then
    D=$T/unappliable; mkdir -p "$D/ws/nm" "$D/ws/ro" "$D/ws/imm" "$D/rosrc"
    echo top > "$D/ws/top"; echo v > "$D/rosrc/lib.c"; echo f > "$D/ws/imm/f"; echo i > "$D/ws/ifile"
    echo nm > "$D/ws/nm/pkg.js"
    # The view refuses what the host's kernel refuses (EBUSY for a mount
    # root, EPERM for immutable objects: tests/overlay/semantics.sh), so the
    # tmpfs and the flags come on the host after the run, before apply.
    if mount --bind "$D/rosrc" "$D/ws/ro" && mount -o remount,bind,ro "$D/ws/ro"; then
        at_exit "umount '$D/ws/nm' '$D/ws/ro' 2>/dev/null"
        (cd "$D/ws" && "$PVISOR" run --stage "$D/st" -- sh -c \
            'rm -rf nm && echo x >> ro/lib.c && echo w >> ifile && rm imm/f && echo t2 >> top') >/dev/null 2>&1
        rc=$?
        mkdir -p "$D/ws/nm" && mount -t tmpfs -o mode=0755 pvisor-test "$D/ws/nm" && echo nm > "$D/ws/nm/pkg.js"
        imm=false
        if command -v chattr >/dev/null && chattr +i "$D/ws/ifile" "$D/ws/imm" 2>/dev/null; then
            imm=true
            at_exit "chattr -i '$D/ws/ifile' '$D/ws/imm' 2>/dev/null"
        fi
        eq "$rc" 0 "a workspace with a read-only bind mount: the command changes it, a directory that becomes a mount point and files that become immutable on the host after the run"
        "$PVISOR" status --review "$D/st" > "$D/review" 2>&1
        (cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply.err"; rc=$?
        eq "$rc:$(cat "$D/ws/nm/pkg.js" "$D/ws/ro/lib.c" "$D/ws/top" | tr '\n' ' '):$(test -e "$D/st/apply-intent" && echo pending)" \
            "1:nm v top :" "  apply refuses it before it writes anything (the tmpfs keeps its files; no half-applied stage)"
        eq "$(grep -c '^  x nm: a mount point in the workspace' "$D/review"):$(grep -c '^  x ro/lib.c: on a read-only mount' "$D/review"):$(grep -c '^  nm: a mount point in the workspace (another file system is mounted here): apply cannot delete or replace it; unmount it' "$D/apply.err"):$(grep -c 'in use' "$D/apply.err")" \
            "1:1:1:0" "  review and apply name the mount point and the read-only mount, and what to do"
        if $imm; then
            eq "$(grep -c '^  ifile: immutable in the workspace (chattr +i)' "$D/apply.err"):$(grep -c '^  imm/f: in an immutable directory' "$D/apply.err"):$(cat "$D/ws/ifile" "$D/ws/imm/f" | tr '\n' ' ')" \
                "1:1:i f " "  ... and the immutable file and the file in an immutable directory"
        else
            skip "apply's conflict for immutable objects" "chattr +i unsupported here"
        fi
        (cd "$D/ws" && "$PVISOR" apply --stage "$D/st" --path top) >/dev/null 2>&1; rc=$?
        eq "$rc:$(cat "$D/ws/top" | tr '\n' ' ')" "0:top t2 " "  the rest applies with --path"
    else
        skip "apply of changes to a mount point or a read-only mount in the workspace" "cannot mount a tmpfs or a bind mount"
    fi
else
    skip "apply of changes to a mount point or a read-only mount in the workspace" "needs root to mount"
fi
# Two file systems mounted in the workspace (two tmpfs: both roots are
# inode 1).  The origin map keys the lower by inode number, and the
# overlay records one origin per number: the second root the command
# copied up (to add a file in it) got none, so review took it for a
# directory the command created that the workspace now also has, a
# conflict, and apply refused the run's work for good.
if [ "$(id -u)" -eq 0 ]; then
    D=$T/twomounts; mkdir -p "$D/ws/a" "$D/ws/b"
    if mount -t tmpfs pvisor-test "$D/ws/a" && mount -t tmpfs pvisor-test "$D/ws/b"; then
        at_exit "umount '$D/ws/a' '$D/ws/b' 2>/dev/null"
        echo g > "$D/ws/b/g"
        (cd "$D/ws" && "$PVISOR" run --stage "$D/st" -- sh -c 'rm b/g && echo n > a/new') >/dev/null 2>&1
        "$PVISOR" status --review "$D/st" > "$D/review" 2>&1
        (cd "$D/ws" && "$PVISOR" apply --stage "$D/st") >/dev/null 2>"$D/apply.err"; rc=$?
        eq "$rc:$(grep -c '^Conflicts' "$D/review"):$(cat "$D/ws/a/new"):$(ls "$D/ws/b" | wc -l)" "0:0:n:0" \
            "two tmpfs mounted in the workspace (the same inode numbers): a file added in one after a deletion in the other is no conflict, and applies"
    else
        skip "two file systems mounted in the workspace" "cannot mount a tmpfs"
    fi
else
    skip "two file systems mounted in the workspace" "needs root to mount"
fi

# ... but on the workspace's own file system an inode number is one
# object's: a directory the user made after the run that has the number of
# a file the agent copied up (freed by the user since, and reused) is not
# a copied-up parent.  The reuse, which the file system may or may not do,
# is made certain here by the origin map's line for that number.
W11="$T/ws-reuse"; mkdir -p "$W11"; echo a > "$W11/keep.txt"
"$PVISOR" run --stage "$T/st-reuse" --workspace "$W11" -- sh -c "echo agent > '$W11/keep.txt'; mkdir '$W11/newdir'; echo f > '$W11/newdir/f'" >/dev/null 2>&1
mkdir "$W11/newdir"
echo "987654321 $(stat -c %i "$W11/newdir")" >> "$T/st-reuse/origin"
"$PVISOR" status --review --stage "$T/st-reuse" --json > "$T/reuse.json" 2>/dev/null
eq "$(jq -r '.changeset.changes[] | select(.path == "newdir") | .conflict // "none"' "$T/reuse.json" | grep -c 'exists in the workspace')" 1 \
    "review: a directory the user made after the run is a conflict, also when its inode number is a copied-up file's origin"

# The cookies' key is kept in the stage: its directories list in the same
# order in every run; a key a crash left empty is written again.
W12="$T/ws-order"; mkdir -p "$W12"; for f in a b c d e f g h; do : > "$W12/$f"; done
"$PVISOR" run --stage "$T/st-order" --workspace "$W12" -- ls -f "$W12" > "$T/order1" 2>/dev/null
"$PVISOR" run --stage "$T/st-order" --workspace "$W12" -- ls -f "$W12" > "$T/order2" 2>/dev/null
k1=$(wc -c < "$T/st-order/cookie-key"); : > "$T/st-order/cookie-key"
"$PVISOR" run --stage "$T/st-order" --workspace "$W12" -- ls -f "$W12" >/dev/null 2>&1
"$PVISOR" run --stage "$T/st-order" --workspace "$W12" -- ls -f "$W12" > "$T/order3" 2>/dev/null
"$PVISOR" run --stage "$T/st-order" --workspace "$W12" -- ls -f "$W12" > "$T/order4" 2>/dev/null
eq "$k1:$(cmp -s "$T/order1" "$T/order2" && echo same):$(wc -c < "$T/st-order/cookie-key"):$(cmp -s "$T/order3" "$T/order4" && echo same):$(wc -l < "$T/order1")" \
    "16:same:16:same:10" "a stage's directories list in the same order in every run (STAGE/cookie-key); an empty key is written again"

# An EBUSY at a path while apply writes (a mount point mounted there since
# the review, which the changeset's check could not see) is the
# workspace's, not the stage's lock: it read "the stage is in use ...; wait
# for it to finish", a wait that never ends.
W10="$T/ws-ebusy"; mkdir -p "$W10"; echo a > "$W10/gone"
"$PVISOR" run --stage "$T/st-ebusy" --workspace "$W10" -- rm "$W10/gone" >/dev/null 2>&1
(cd "$W10" && "$SYSDENY" 16 unlinkat -- "$PVISOR" apply --stage "$T/st-ebusy") >/dev/null 2>"$T/eb.err"; rc=$?
eq "$rc:$(grep -c 'at gone:' "$T/eb.err"):$(grep -c 'Device or resource busy' "$T/eb.err"):$(grep -c 'in use' "$T/eb.err")" \
    "1:1:1:0" "apply: an EBUSY from the workspace at a path is named as a failure there, not as the stage in use"

check "every Bundle validates against docs/bundle.schema.json" sh -c "$VALIDATE $XDG_STATE_HOME/pvisor/runs/*/bundle.json"
# the schema describes the launcher's self-check: a wrong one does not pass
sb=$(grep -l '"sandbox_evidence"' "$XDG_STATE_HOME"/pvisor/runs/*/bundle.json | head -n 1)
for mut in '.sandbox_evidence.CapEff = "ffff"' '.sandbox_evidence.landlock.abi = "7"' \
           '.sandbox_evidence.rlimits |= del(.nofile)' '.sandbox_evidence.extra = 1'; do
    [ -n "$sb" ] && jq "$mut" "$sb" > "$T/mut.json" || : > "$T/mut.json"
    check "a Bundle whose sandbox_evidence is altered ($mut) does not validate" sh -c "! $VALIDATE '$T/mut.json' 2>/dev/null && [ -s '$T/mut.json' ]"
done
# ... and its exit and stage objects, key by key (before, any key passed:
# exit.interrupted_by and the stage's counters were described nowhere)
for mut in '.exit.extra = 1' '.exit.interrupted_by = "USR1"' '.stage.extra = 1' '.stage.state = "applied"' \
           '.stage.upper_bytes = "1"'; do
    [ -n "$sb" ] && jq "$mut" "$sb" > "$T/mut.json" || : > "$T/mut.json"
    check "a Bundle whose exit or stage is altered ($mut) does not validate" sh -c "! $VALIDATE '$T/mut.json' 2>/dev/null && [ -s '$T/mut.json' ]"
done
# status --json is the Bundle plus display_state and stage.current_state
for r in $(ls "$XDG_STATE_HOME/pvisor/runs"); do "$PVISOR" status --json "$r" > "$T/sj-$r.json" 2>/dev/null; done
check "status --json of every run validates against docs/bundle.schema.json" sh -c "$VALIDATE $T/sj-*.json"
check "no FUSE mount of any test workspace is left on the host" sh -c "! grep -h '$T' /proc/[0-9]*/mountinfo 2>/dev/null | grep -q fuse"
