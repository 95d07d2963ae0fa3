#!/bin/sh
# `pvisor diff --binary` (TAP): a binary file the agent changed, added or
# removed prints as git's binary patch, so that `git apply` of the diff
# gives the same workspace as `pvisor apply`, byte for byte (and `git apply
# -R` the workspace before it); without --binary, and on a terminal, it
# stays "Binary files ... differ".  Needs $PVISOR and git.
. "$(dirname "$0")/../lib.sh"
cd "$T"
command -v git >/dev/null || { skip "binary patches" "git is not installed"; exit 0; }

W="$T/ws"
mkdir -p "$W/d"
printf 'text\n' > "$W/t"
# binary: NUL bytes in the first 8000 bytes
head -c 3000 /dev/urandom > "$W/changed.bin"
printf '\0\0\0' >> "$W/changed.bin"
printf 'gone\0away' > "$W/gone.bin"
printf 'mode\0bits' > "$W/d/mode.bin"
printf 'was text\n' > "$W/becomes-binary"
cp -a "$W" "$T/orig"

"$PVISOR" run --stage auto --workspace "$W" -- sh -c "cd '$W' &&
    head -c 70000 /dev/urandom > changed.bin && printf 'x\\0' >> changed.bin &&
    rm gone.bin && printf 'new\\0file\\0' > new.bin && : > empty.bin && printf '\\0' >> empty.bin &&
    printf 'mode\\0bits more' > d/mode.bin && chmod 0755 d/mode.bin &&
    printf 'now\\0binary' > becomes-binary && echo more >> t" > "$T/run.out" 2>&1
eq "$?" 0 "the run changes, adds and removes binary files"

cd "$W"
"$PVISOR" diff > "$T/plain.patch" 2> "$T/plain.err"
eq "$?" 0 "diff without --binary"
eq "$(grep -c '^Binary files' "$T/plain.patch")" 6 "without --binary, binary files are reported, not dumped"
eq "$(grep -c 'GIT binary patch' "$T/plain.patch")" 0 "without --binary, no binary patch"

"$PVISOR" diff --binary > "$T/bin.patch" 2> "$T/bin.err"
eq "$?" 0 "diff --binary"
eq "$(grep -c '^GIT binary patch' "$T/bin.patch")" 6 "each of the six binary files is a binary patch"
eq "$(grep -c '^index [0-9a-f]\{40\}\.\.[0-9a-f]\{40\}$' "$T/bin.patch")" 6 "with a full index line each"
eq "$(grep -c '^Binary files' "$T/bin.patch")" 0 "none is only reported"

# git apply of the diff on a copy of the workspace, pvisor apply on the workspace
cp -a "$T/orig" "$T/gitws"
(cd "$T/gitws" && git init -q . && git apply "$T/bin.patch") > "$T/gitapply.out" 2>&1
eq "$?" 0 "git apply takes the diff whole: $(head -c 300 "$T/gitapply.out")"
"$PVISOR" apply > "$T/apply.out" 2>&1
eq "$?" 0 "pvisor apply"
for f in t changed.bin new.bin empty.bin d/mode.bin becomes-binary; do
    eq "$(sha256sum < "$T/gitws/$f")" "$(sha256sum < "$W/$f")" "git apply wrote $f as pvisor apply did"
done
eq "$(stat -c %a "$T/gitws/d/mode.bin")" "$(stat -c %a "$W/d/mode.bin")" "the mode change too"
eq "$(test -e "$T/gitws/gone.bin" && echo present || echo absent)" absent "the removed binary file is removed"

# and back: git apply -R of the same patch gives the workspace before the run
(cd "$T/gitws" && git apply -R "$T/bin.patch") > "$T/gitrev.out" 2>&1
eq "$?" 0 "git apply -R takes it back: $(head -c 300 "$T/gitrev.out")"
rm -rf "$T/gitws/.git"
eq "$(cd "$T/gitws" && find . -type f | sort | xargs sha256sum)" "$(cd "$T/orig" && find . -type f | sort | xargs sha256sum)" \
    "git apply -R restores every file's bytes"

# a patch for another starting point is refused by git apply (the index
# line's blob names are checked), not applied over it
cp -a "$T/orig" "$T/other"
printf 'someone else\0' > "$T/other/changed.bin"
(cd "$T/other" && git init -q . && git apply "$T/bin.patch") > "$T/other.out" 2>&1
rc=$?
check "git apply refuses the patch over another version of a binary file (rc $rc)" [ "$rc" -ne 0 ]
eq "$(printf 'someone else\0' | sha256sum)" "$(sha256sum < "$T/other/changed.bin")" "and leaves that file as it was"

# on a terminal: reported only (the bytes are for a pipe or a file)
if command -v script >/dev/null; then
    cd "$T/orig"
    "$PVISOR" run --stage auto --workspace "$T/orig" -- sh -c "printf 'a\\0b' > '$T/orig/tty.bin'" > /dev/null 2>&1
    script -qec "'$PVISOR' diff --binary" /dev/null > "$T/tty.out" 2>&1
    eq "$(grep -c 'Binary files' "$T/tty.out")" 1 "on a terminal, --binary still only reports a binary file"
    eq "$(grep -c 'GIT binary patch' "$T/tty.out")" 0 "and prints none of its bytes"
fi
