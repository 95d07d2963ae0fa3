#!/bin/sh
# A rename of a workspace directory that fails part way leaves the stage as
# it was (TAP).  The view copies the whole tree up before it renames it in
# the stage; when the stage quota (or a full disk) stopped that copy, or
# the rename failed after it, the copies stayed: the command had changed
# nothing, but the review then listed a file the user edited after the run
# as the command's change (the stale copy) and apply refused it as a
# conflict, and the copy hid the user's later edits from the view.  The
# failed rename's copies, journal records, opaque marks and dropped
# whiteouts are now taken back (src/overlay/undo.c).  Checked against the
# stage's files, the Bundle's byte count, the review's JSON and the
# workspace's bytes after apply; as root and, where it can, as an ordinary
# user.  Needs $PVISOR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C
export LC_ALL

if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi

# mkws DIR: a workspace with a 2.4 MB directory to move; dir/f8 has a
# second name outside it (its copy-up links that name in the stage too)
mkws() {
    mkdir -p "$1/dir/sub" "$1/other/deep/x"
    for i in 1 2 3 4 5 6 7 8; do head -c 300000 /dev/urandom > "$1/dir/f$i"; done
    ln "$1/dir/f8" "$1/other/hl"
    echo hello > "$1/dir/sub/a.txt"
    echo bee > "$1/dir/sub/b.txt"
    echo keep > "$1/dir/z.txt"
}
# upper_state STAGE: what upper/ holds: names, types, sizes, user xattrs
upper_state() {
    (cd "$1/upper" && find . -mindepth 1 -printf '%P %y %s\n' | sort &&
        getfattr -R -h -d -m '^user\.' . 2>/dev/null | grep -v '^$')
}

# scenario WHO AS...: the cases, each a run (the command AS...) over a
# workspace and stages in $T/WHO
scenario() {
    who=$1; shift
    D="$T/$who"
    mkdir -p "$D/state"
    mkws "$D/ws"
    [ "$who" = root ] || chown -R 65534:65534 "$D"
    W="$D/ws"
    st_json() { "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" status --review "$S" --json; }

    # --- a byte quota stops the tree's copy-up part way ------------------
    S="$D/st-a"
    "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --workspace "$W" --stage-max-bytes 1M -- \
        sh -c "cd '$W' && exec 3<dir/f1 && { mv dir dir2 2>'$D/a.err'; echo mv=\$?; ls dir | wc -l; ls; wc -c <&3; }" \
        > "$D/a.out" 2>/dev/null
    eq "$?:$(tr '\n' ' ' < "$D/a.out")" "0:mv=1 10 dir other 300000 " \
        "$who: mv of a directory the byte quota cannot hold fails, and the view shows the directory as it was"
    check "$who: ... with ENOSPC" grep -q "No space left on device" "$D/a.err"
    eq "$(upper_state "$S")" "" "$who: ... and the stage holds no copy of it"
    eq "$(wc -c < "$S/journal")" 0 "$who: ... nor a journal record"
    du=$(du -s -B1 "$S/upper" | cut -f1)
    ub=$(jq -r '.stage.upper_bytes' "$D/state/pvisor/runs/$(ls "$D/state/pvisor/runs" | sort | tail -n 1)/bundle.json")
    eq "$ub" "$du" "$who: ... and the Bundle's upper_bytes is du's for upper/ (the copies' blocks were given back)"
    cu=$(jq -r '.stage.copy_ups' "$D/state/pvisor/runs/$(ls "$D/state/pvisor/runs" | sort | tail -n 1)/bundle.json")
    eq "$cu" 0 "$who: ... and the Bundle's copy_ups counts none (the undone copies are not the run's)"
    printf 'edited by the user\n' > "$W/dir/f1"
    [ "$who" = root ] || chown 65534:65534 "$W/dir/f1"
    st_json "$@" > "$D/a.json"
    eq "$(jq -c '[(.changeset.changes | length), .changeset.summary.conflicts]' "$D/a.json")" "[0,0]" \
        "$who: after the user edits dir/f1, review lists no change and no conflict"
    (cd "$W" && "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" apply --stage "$S") > "$D/a.apply" 2>&1
    eq "$?:$(cat "$W/dir/f1")" "0:edited by the user" "$who: ... apply succeeds and keeps the user's edit"

    # --- the rename fails after the whole tree was copied -----------------
    # An inode quota that holds the tree but not the destination's parents
    # (other/deep/ and other/deep/x/, copied up after the tree).  The
    # command first removed dir/sub/a.txt and wrote dir/z.txt: dir and
    # dir/sub were in the stage before the mv, which made them opaque and
    # dropped the whiteout.  The tree's copy takes f1..f8, sub/b.txt and
    # other/ (to hold f8's other name) and gives the whiteout back: at most
    # 10 more inodes, 9 at its end; other/deep/ fits, other/deep/x/ not.
    S="$D/st-b"
    "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --workspace "$W" -- \
        sh -c "cd '$W' && rm dir/sub/a.txt && echo agent > dir/z.txt" > /dev/null 2>&1
    upper_state "$S" > "$D/b.before"
    cp "$S/journal" "$D/b.journal"
    n=$(($(find "$S/upper" -mindepth 1 | wc -l) + 10))
    "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --workspace "$W" --stage-max-inodes $n -- \
        sh -c "cd '$W' && { mv dir other/deep/x/dir2 2>'$D/b.err'; echo mv=\$?; ls dir/sub; cat dir/z.txt; ls other/deep/x; }" \
        > "$D/b.out" 2>/dev/null
    eq "$?:$(tr '\n' ' ' < "$D/b.out")" "0:mv=1 b.txt agent " \
        "$who: mv that fails after the tree's copy-up (EDQUOT): the view keeps the command's earlier changes in it"
    check "$who: ... with EDQUOT" grep -q "quota exceeded" "$D/b.err"
    upper_state "$S" > "$D/b.after"
    if cmp -s "$D/b.before" "$D/b.after"; then
        ok "$who: ... upper/ is as before the mv (no copies, the whiteout back, no opaque mark)"
    else
        not_ok "$who: ... upper/ is as before the mv (no copies, the whiteout back, no opaque mark)"
        diff "$D/b.before" "$D/b.after" | head -20 | sed 's/^/# /'
    fi
    check "$who: ... the journal is as before the mv" cmp -s "$D/b.journal" "$S/journal"
    printf 'edited by the user\n' > "$W/dir/f2"
    [ "$who" = root ] || chown 65534:65534 "$W/dir/f2"
    st_json "$@" > "$D/b.json"
    eq "$(jq -c '[.changeset.summary.conflicts, [.changeset.changes[] | .path] ]' "$D/b.json")" \
        '[0,["dir/sub/a.txt","dir/z.txt"]]' "$who: ... review lists the command's two changes only, no conflict"
    (cd "$W" && "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" apply --stage "$S") > "$D/b.apply" 2>&1
    eq "$?:$(cat "$W/dir/f2"):$(cat "$W/dir/z.txt"):$(ls "$W/dir/sub" | tr "\n" " ")" "0:edited by the user:agent:b.txt " \
        "$who: ... apply keeps the user's edit and writes the command's changes"

    # --- a rename that succeeds still moves the tree ----------------------
    S="$D/st-c"
    (cd "$W/dir" && find . -type f -exec sha256sum {} + | sort -k2) > "$D/c.want"
    "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --workspace "$W" --stage-max-bytes 16M -- \
        sh -c "cd '$W' && exec 3<dir/f3 && mv dir other/dir2 && ls other/dir2 | wc -l && wc -c <&3" > "$D/c.out" 2>&1
    eq "$?:$(tr '\n' ' ' < "$D/c.out")" "0:10 300000 " "$who: a rename of the directory that fits succeeds"
    st_json "$@" > "$D/c.json"
    eq "$(jq -c '[.changeset.summary.renamed, .changeset.summary.conflicts]' "$D/c.json")" "[1,0]" \
        "$who: ... review lists it as renamed"
    (cd "$W" && "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" apply --stage "$S") > "$D/c.apply" 2>&1
    eq "$?:$(ls "$W")" "0:other" "$who: ... apply moves it"
    (cd "$W/other/dir2" && find . -type f -exec sha256sum {} + | sort -k2) > "$D/c.got"
    check "$who: ... with every file's bytes" cmp -s "$D/c.want" "$D/c.got"

    # --- the whiteout a rename leaves is within the inode quota -----------
    # (RENAME_WHITEOUT made it past --stage-max-inodes unchecked: the copy
    # of f took the one inode, its whiteout a second)
    W="$D/ws-wo"; S="$D/st-d"
    mkdir -p "$W" && echo eff > "$W/f"
    [ "$who" = root ] || chown -R 65534:65534 "$W"
    "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --workspace "$W" --stage-max-inodes 1 -- \
        sh -c "cd '$W' && { mv f g 2>'$D/d.err'; echo mv=\$?; ls; }" > "$D/d.out" 2>/dev/null
    eq "$?:$(tr '\n' ' ' < "$D/d.out")" "0:mv=1 f " "$who: mv of a lower file with one inode of quota left for its copy fails, and f is still there"
    check "$who: ... with EDQUOT" grep -q "quota exceeded" "$D/d.err"
    eq "$(upper_state "$S"):$(wc -c < "$S/journal")" ":0" "$who: ... and the stage holds neither its copy nor a whiteout, nor a journal record"
    (cd "$W" && "$@" env XDG_STATE_HOME="$D/state" "$PVISOR" run --stage "$S" --stage-max-inodes 2 -- mv f g) > /dev/null 2>&1
    eq "$?:$(ls "$S/upper" | tr '\n' ' ')" "0:f g " "$who: ... with two, it moves (the copy and the whiteout)"
}

scenario root
if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
    scenario user setpriv --reuid=65534 --regid=65534 --clear-groups
else
    skip "the same as an ordinary user" "needs root to switch to uid 65534"
fi
