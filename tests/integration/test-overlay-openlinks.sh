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
