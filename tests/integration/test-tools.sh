#!/bin/sh
# Real tools over the staged workspace view (`pvisor run --stage`): git,
# tar, make + cc, sqlite3.  Each case checks the result inside the view and
# that the lower is unchanged, byte for byte and in metadata.  A tool missing
# from PATH is a skip (a failure in CI, which has them).  TAP.
# Needs $PVISOR, $PVAGENT, $SRCDIR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
[ -z "${PVISOR_TEST_KEEP:-}" ] || at_exit "cp -a '$T' '$PVISOR_TEST_KEEP'"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi

manifest() {
    (cd "$1" && find . -printf '%y %m %s %n %U:%G %l %p\n' | sort &&
     find . -type f -exec sha256sum {} + | sort -k2)
}
unchanged() { # DIR MANIFEST
    manifest "$1" > "$T/now.manifest"
    cmp -s "$2" "$T/now.manifest" && return 0
    diff "$2" "$T/now.manifest" | head -n 20 | sed 's/^/# /'
    return 1
}
have() { command -v "$1" >/dev/null 2>&1; }
n=0
# staged WORKSPACE SCRIPT: run SCRIPT with sh in WORKSPACE over a new stage;
# output in $T/out, status in $rc, stage in $S
staged() {
    n=$((n + 1)); S="$T/stage$n"
    "$PVISOR" run --stage "$S" --workspace "$1" -- sh -c "cd '$1' && $2" > "$T/out" 2>&1
    rc=$?
}
show_out() { sed 's/^/# /' "$T/out" | tail -n 15; }

# --- git: status and commit in a repo ---------------------------------------------
if have git; then
    G="$T/repo"
    mkdir -p "$G/src"
    printf 'hello\n' > "$G/README"
    printf 'int main(void) { return 0; }\n' > "$G/src/main.c"
    (cd "$G" && git init -q -b main && git add -A &&
     git -c user.name=t -c user.email=t@t commit -q -m initial) || not_ok "preparing the git repository"
    manifest "$G" > "$T/git.manifest"
    staged "$G" "git status --porcelain | wc -l &&
        printf 'changed\n' >> README && echo new > new.txt &&
        git status --porcelain &&
        git add -A && git -c user.name=t -c user.email=t@t commit -q -m 'change inside the view' &&
        git status --porcelain | wc -l &&
        git log --format=%s | head -n 2 &&
        git fsck --no-progress 2>&1 | grep -c . || true"
    eq "$rc:$(cat "$T/out")" "0:0
 M README
?? new.txt
0
change inside the view
initial
0" "git: status is clean, shows the changes, commit succeeds, status clean again, log and fsck good inside the view"
    [ $rc -eq 0 ] || show_out
    check "git: the lower repository is unchanged" unchanged "$G" "$T/git.manifest"
    eq "$(cd "$G" && git log --format=%s | head -n 1)" initial "git: the lower repository has no new commit"
    # a second run on the same stage sees the commit
    "$PVISOR" run --stage "$S" --workspace "$G" -- sh -c "cd '$G' && git log --format=%s | head -n 1 && git status --porcelain | wc -l" > "$T/out" 2>&1
    eq "$?:$(tr '\n' ' ' < "$T/out")" "0:change inside the view 0 " "git: a second run on the stage sees the commit and a clean tree"
else
    skip "git status and commit over the staged view" "git missing"
fi

# --- tar x of an archive into the workspace ----------------------------------------
if have tar; then
    A="$T/tarsrc"
    mkdir -p "$A/pkg/sub/deeper" "$A/pkg/empty"
    printf 'one\n' > "$A/pkg/one.txt"
    head -c 300000 /dev/urandom > "$A/pkg/sub/blob.bin"
    printf '#!/bin/sh\necho x\n' > "$A/pkg/sub/tool.sh"; chmod 0755 "$A/pkg/sub/tool.sh"
    ln -s sub/blob.bin "$A/pkg/blob-link"
    ln "$A/pkg/one.txt" "$A/pkg/sub/deeper/one-hard"
    (cd "$A" && tar cf "$T/pkg.tar" pkg)
    # directories without size and st_nlink (a merged directory may report 1, as kernel overlayfs does)
    LIST="{ find . ! -type d -printf '%y %m %s %n %l %p\\n'; find . -type d -printf '%y %m %p\\n'; } | sort; find . -type f -exec sha256sum {} + | sort -k2"
    (cd "$A/pkg" && eval "$LIST") > "$T/tar.expected"
    X="$T/tarws"; mkdir -p "$X/pkg"; printf 'lower version\n' > "$X/pkg/one.txt"; printf 'keep\n' > "$X/keep.txt"
    manifest "$X" > "$T/tar.manifest"
    staged "$X" "tar xf '$T/pkg.tar' && cd pkg && { $LIST; } > '$T/tar.seen'"
    eq "$rc" 0 "tar: extracting an archive into the view succeeds"
    [ $rc -eq 0 ] || show_out
    check "tar: the view has exactly the archive's tree (types, modes, sizes, links, targets, contents)" cmp -s "$T/tar.expected" "$T/tar.seen"
    cmp -s "$T/tar.expected" "$T/tar.seen" || diff "$T/tar.expected" "$T/tar.seen" | head -n 10 | sed 's/^/# /'
    check "tar: the lower is unchanged (the overwritten lower file too)" unchanged "$X" "$T/tar.manifest"
else
    skip "tar x into the staged view" "tar missing"
fi

# --- a C build with make ----------------------------------------------------------
if have make && have cc; then
    C="$T/cproj"
    mkdir -p "$C/src" "$C/include"
    printf '#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\n#endif\n' > "$C/include/util.h"
    printf '#include "util.h"\nint add(int a, int b) { return a + b; }\n' > "$C/src/util.c"
    printf '#include <stdio.h>\n#include "util.h"\nint main(void) { printf("%%d\\n", add(40, 2)); return 0; }\n' > "$C/src/main.c"
    printf 'CFLAGS = -O2 -Iinclude\nOBJS = build/main.o build/util.o\n\nbuild/app: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\nbuild/%%.o: src/%%.c include/util.h | build\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\nbuild:\n\tmkdir -p build\n\nclean:\n\trm -rf build\n.PHONY: clean\n' > "$C/Makefile"
    manifest "$C" > "$T/c.manifest"
    staged "$C" "make -s && ./build/app && make -q build/app && echo up-to-date &&
        sleep 1 && touch src/util.c && make -s 2>&1 | grep -c . ; ./build/app && make -s clean && test ! -e build && echo cleaned && make -s && ./build/app"
    eq "$rc:$(cat "$T/out")" "0:42
up-to-date
0
42
cleaned
42" "make: builds, is up to date, rebuilds after touch, cleans, and rebuilds inside the view"
    [ $rc -eq 0 ] || show_out
    check "make: the lower is unchanged (no build/ directory)" unchanged "$C" "$T/c.manifest"
    check "make: the built program is in the stage" test -x "$S/upper/build/app"
else
    skip "make + cc over the staged view" "make or cc missing"
fi

# --- sqlite3 creating and querying a database ---------------------------------------
if have sqlite3; then
    Q="$T/dbws"; mkdir -p "$Q"
    printf 'a placeholder so the workspace is not empty\n' > "$Q/notes.txt"
    sqlite3 "$Q/existing.db" "CREATE TABLE k(v INTEGER); INSERT INTO k VALUES (1),(2),(3);"
    manifest "$Q" > "$T/db.manifest"
    staged "$Q" "sqlite3 test.db 'CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, blob BLOB);
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)
        INSERT INTO t(name, blob) SELECT hex(x), randomblob(200) FROM c;' &&
        sqlite3 test.db 'SELECT count(*), sum(id) FROM t; PRAGMA integrity_check;' &&
        sqlite3 existing.db 'PRAGMA journal_mode=WAL; INSERT INTO k VALUES (4); SELECT count(*) FROM k;' &&
        sqlite3 existing.db 'PRAGMA journal_mode=DELETE; PRAGMA integrity_check;'"
    eq "$rc:$(cat "$T/out")" "0:1000|500500
ok
wal
4
delete
ok" "sqlite3: inserting 1000 rows gives count 1000; an existing database is modified (WAL, shared mmap) and passes integrity_check"
    [ $rc -eq 0 ] || show_out
    check "sqlite3: the lower is unchanged (the existing database too)" unchanged "$Q" "$T/db.manifest"
    eq "$(sqlite3 "$Q/existing.db" 'SELECT count(*) FROM k;')" 3 "sqlite3: the lower database still has its 3 rows"
    "$PVISOR" run --stage "$S" --workspace "$Q" -- sh -c "cd '$Q' && sqlite3 test.db 'SELECT count(*) FROM t;' && sqlite3 existing.db 'SELECT count(*) FROM k;'" > "$T/out" 2>&1
    eq "$?:$(tr '\n' ' ' < "$T/out")" "0:1000 4 " "sqlite3: a second run on the stage sees both databases as left"
else
    skip "sqlite3 over the staged view" "sqlite3 missing"
fi

check "no FUSE mount of any test workspace is left on the host" sh -c "! grep -h '$T' /proc/[0-9]*/mountinfo 2>/dev/null | grep -q fuse"
