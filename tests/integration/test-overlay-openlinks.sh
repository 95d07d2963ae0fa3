#!/bin/sh
# Open descriptors of hard-linked lower files in the staged view (TAP).
#
# Each name of a file is its own kernel inode in the view (one node per
# name), and a descriptor opened on the lower file is switched to the upper
# copy when another name copies the file up.  fstat(2) of such a descriptor
# must still show the one file, as on a plain file system: after its name
# was unlinked, and after writes through another name.  Found by a
# differential op driver (native directory vs `pvisor run --stage`).
# Needs $PVISOR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
PY=/usr/bin/python3

W="$T/ws"
mkdir -p "$W/d0" "$W/d2"
printf 'hello\n' > "$W/h0"
ln "$W/h0" "$W/d0/h0"
ln "$W/h0" "$W/d2/h1" # three names

# A descriptor opened read-only on h0 (the lower file); the file is copied
# up through d0/h0 (its descriptor is switched to the copy), then the name
# h0 goes away: fstat of the descriptor shows the copy, with its two names.
cat > "$T/unlinked.py" <<'PYEOF'
import os
fd = os.open("h0", os.O_RDONLY)
fd2 = os.open("d0/h0", os.O_RDWR | os.O_APPEND)
os.write(fd2, b"x")
os.unlink("h0")
try:
    st = os.fstat(fd)
    print("fstat", st.st_nlink, st.st_size, st.st_ino == os.stat("d0/h0").st_ino)
except OSError as e:
    print("fstat", e.strerror)
print("read", os.pread(fd, 100, 0))
PYEOF
"$PVISOR" run --stage "$T/s1" --workspace "$W" -- sh -c "cd '$W' && exec $PY '$T/unlinked.py'" > "$T/out1" 2>&1
eq "$?" 0 "the run unlinks one name of a hard-linked file open through it"
eq "$(sed -n 1p "$T/out1")" "fstat 2 7 True" \
    "fstat of a descriptor whose name was unlinked after a copy-up through another name shows the file"
eq "$(sed -n 2p "$T/out1")" "read b'hello\\nx'" "the descriptor reads what was written through the other name"

# Two names a and b, each open (two kernel inodes); a is unlinked (the
# file is copied up first), leaving one name.  A write through either
# descriptor must show at once in fstat of the other: the kernel must not
# answer from attributes it cached for the other inode.  Likewise for q,
# first looked up when p, still open, was already unlinked.
W2="$T/ws2"
mkdir -p "$W2"
printf 'pair\n' > "$W2/a"
ln "$W2/a" "$W2/b"
printf 'pair2\n' > "$W2/p"
ln "$W2/p" "$W2/q"
cat > "$T/shared.py" <<'PYEOF'
import os
fq = os.open("p", os.O_RDWR)
os.unlink("p")
print("q first seen with one name", os.stat("q").st_size)
os.pwrite(fq, b"z", 20000)
print("written through p", os.stat("q").st_size)
fa = os.open("a", os.O_RDWR)
fb = os.open("b", os.O_RDWR)
os.unlink("a")
print("before", os.fstat(fa).st_nlink, os.fstat(fa).st_size, os.fstat(fb).st_size)
os.ftruncate(fb, 5000)
print("grown through b", os.fstat(fa).st_size)
os.pwrite(fa, b"z", 9999)
print("written through a", os.fstat(fb).st_size, os.stat("b").st_size)
PYEOF
"$PVISOR" run --stage "$T/s2" --workspace "$W2" -- sh -c "cd '$W2' && exec $PY '$T/shared.py'" > "$T/out2" 2>&1
eq "$?" 0 "the run writes a file through two names, one of them unlinked"
eq "$(cat "$T/out2" | tr '\n' ';')" "q first seen with one name 6;written through p 20001;before 1 5 5;grown through b 5000;written through a 10000 10000;" \
    "fstat through either name shows the size written through the other"

# Coherence of the names of one file (docs/stage-format.md, "Where the view
# differs"): each name is its own kernel inode, with its own page cache and
# locks.  What holds: an open after a write through another name reads the
# write, and a descriptor kept open reads bytes appended through another
# name (a read past the size it knows refreshes the attributes; the new
# size drops its cache).  What does not (TODO: the known limit, measured
# here so that a fix shows as an unexpected pass): a descriptor kept open
# reads bytes it read before a write inside the file through another name,
# and flock and fcntl locks taken through different names do not conflict.
# Pairs: a lower hard link (a descriptor opened before the copy-up), and a
# link made in an earlier run of the stage (both names in upper/).
W3="$T/ws3"
mkdir -p "$W3"
printf 'lower file\n' > "$W3/a"
ln "$W3/a" "$W3/b"
cat > "$T/coherent.py" <<'PYEOF'
import fcntl, os, sys
x, y = sys.argv[1], sys.argv[2]
fy = os.open(y, os.O_RDONLY)
size = os.fstat(fy).st_size
os.pread(fy, size, 0)  # y's page cache holds the file
fx = os.open(x, os.O_RDWR)
os.pwrite(fx, b"W", 0)  # inside the file: the size stays
print("kept", os.pread(fy, 1, 0).decode())
fresh = os.open(y, os.O_RDONLY)
print("reopened", os.pread(fresh, 1, 0).decode())
os.pwrite(fx, b"TAIL", size)  # the size grows
print("appended", os.pread(fy, size + 100, 0)[size:].decode())
fcntl.flock(fx, fcntl.LOCK_EX)
try:
    fcntl.flock(fresh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("flock", "none")
except BlockingIOError:
    print("flock", "conflict")
fcntl.lockf(fx, fcntl.LOCK_EX)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    fz = os.open(y, os.O_RDWR)
    try:
        fcntl.lockf(fz, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(w, b"none")
    except OSError:
        os.write(w, b"conflict")
    os._exit(0)
os.waitpid(pid, 0)
print("fcntl", os.read(r, 16).decode())
PYEOF
"$PVISOR" run --stage "$T/s3" --workspace "$W3" -- sh -c "cd '$W3' && $PY '$T/coherent.py' a b && printf 'stage file\\n' > g && ln g h" > "$T/out3" 2>&1
eq "$?" 0 "the run writes a lower hard-linked file through one name while a descriptor of the other is open"
"$PVISOR" run --stage "$T/s3" --workspace "$W3" -- sh -c "cd '$W3' && exec $PY '$T/coherent.py' g h" > "$T/out4" 2>&1
eq "$?" 0 "a later run of the stage does the same with a link made in the earlier one"
for pair in "lower:$T/out3" "upper:$T/out4"; do
    k=${pair%%:*} f=${pair#*:}
    eq "$(grep '^reopened' "$f")" "reopened W" "$k pair: an open after a write through the other name reads it"
    eq "$(grep '^appended' "$f")" "appended TAIL" "$k pair: a kept descriptor reads bytes appended through the other name"
    eq_todo "$(grep '^kept' "$f")" "kept W" "$k pair: a kept descriptor reads a write inside the file through the other name" \
        "page cache per name (stage-format.md)"
    eq_todo "$(grep '^flock' "$f")" "flock conflict" "$k pair: flock through the two names conflicts" "locks per name"
    eq_todo "$(grep '^fcntl' "$f")" "fcntl conflict" "$k pair: fcntl locks through the two names conflict" "locks per name"
done

# A workspace tree deeper than PATH_MAX: a path from the workspace root to
# its bottom is longer than 4096 bytes, which the kernel refuses whole, but
# natively a command reaches it with descriptors (openat from each
# directory, as find, rm -rf and fts do).  The view opened lower objects by
# their whole path and gave ENAMETOOLONG from about the 4096th byte on:
# listing, reading and stat'ing the workspace's own files there failed.
# Changing one still fails (review and apply read no longer path: a
# journal record of one would make the stage unreadable to them); a new
# file there is the agent's deep tree, which review names.  Found by an
# overlay red team.
W3="$T/ws3"
mkdir -p "$W3"
(cd "$W3" && $PY -c '
import os
d = os.open(".", os.O_RDONLY)
for i in range(130):
    n = "d%03d_" % i + "x" * 30
    os.mkdir(n, dir_fd=d)
    nd = os.open(n, os.O_RDONLY, dir_fd=d); os.close(d); d = nd
fd = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d); os.write(fd, b"bottom\n"); os.close(fd)
os.symlink("leaf", "lnk", dir_fd=d)
')
cat > "$T/deep.py" <<'PYEOF'
import os
d = os.open(".", os.O_RDONLY)
depth = 0
try:
    while True:
        sub = [e for e in os.listdir(d) if e.startswith("d")]
        if not sub:
            break
        nd = os.open(sub[0], os.O_RDONLY, dir_fd=d)
        os.close(d)
        d = nd
        depth += 1
except OSError as e:
    print("walk", e.strerror)
print("depth", depth)
os.fchdir(d)
for what, f in [("read", lambda: open("leaf").read().strip()),
                ("stat", lambda: os.stat("leaf").st_size),
                ("readlink", lambda: os.readlink("lnk")),
                ("append", lambda: os.close(os.open("leaf", os.O_WRONLY | os.O_APPEND))),
                ("create", lambda: os.close(os.open("new", os.O_WRONLY | os.O_CREAT, 0o644)))]:
    try:
        print(what, f())
    except OSError as e:
        print(what, e.strerror)
PYEOF
"$PVISOR" run --stage "$T/s3" --workspace "$W3" -- sh -c "cd '$W3' && exec $PY '$T/deep.py'" > "$T/out3" 2>&1
eq "$?" 0 "the run walks a workspace tree deeper than PATH_MAX with descriptors"
eq "$(tr '\n' ';' < "$T/out3")" "depth 130;read bottom;stat 7;readlink leaf;append File name too long;create None;" \
    "the workspace's files below PATH_MAX are listed, read and stat'ed; changing one fails, a new one is made"
(cd "$W3" && "$PVISOR" status --review) > "$T/review3" 2>&1
eq "$(grep -c 'longer than 4095 bytes' "$T/review3"):$(grep -c 'malformed' "$T/review3")" "1:0" \
    "review says where the path bound stops it (the journal stays readable)"
