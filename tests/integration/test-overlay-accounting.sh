#!/bin/sh
# The stage's byte count (ov->upper_bytes: the Bundle's upper_bytes, what
# --stage-max-bytes is checked against) must follow what upper/ allocates
# (du), also for files written after their last name went away and for one
# file written concurrently through several names (TAP).  Found by
# concurrent workloads over the view, comparing the Bundle with du.
# Needs $PVISOR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
PY=/usr/bin/python3
SLACK=65536 # the documented slack (ext4 extent blocks, directory growth)

if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi

W="$T/ws"
mkdir -p "$W"
printf 'lower\n' > "$W/lower.txt"

# near DU UB: UB within SLACK of DU
near() { [ "$2" -ge $(($1 - SLACK)) ] && [ "$2" -le $(($1 + SLACK)) ]; }
# measured NAME WHAT WHY [run options...]: run $T/NAME.py over the view (a
# stage of its own), which must print "ok"; then the Bundle's upper_bytes
# must be du's for the stage's upper/
measured() {
    m=$1 what=$2 why=$3; shift 3
    "$PVISOR" run --stage "$T/st-$m" --workspace "$W" "$@" -- sh -c "cd '$W' && exec $PY '$T/$m.py'" > "$T/$m.out" 2>&1
    eq "$?:$(cat "$T/$m.out")" "0:ok" "$what"
    du=$(du -s -B1 "$T/st-$m/upper" | cut -f1)
    ub=$(jq -r '.stage.upper_bytes' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")
    check "... and upper_bytes ($ub) matches du ($du)$why" near "$du" "$ub"
}

# --- an unlinked file, written while open, gives its blocks back at close ----
# (tmpfile(3) and Python's TemporaryFile fall back to this, O_TMPFILE being
# unsupported in the view.)  Each round writes 8 MiB into a file whose name
# is gone: the blocks are freed by the last close, so five rounds fit in a
# 16 MiB quota.  They were counted for good, and the fourth round failed
# with ENOSPC on an empty stage.
cat > "$T/orphan.py" <<'PYEOF'
import os
for i in range(5):
    fd = os.open("t", os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink("t")
    os.write(fd, b"x" * (8 << 20))
    os.close(fd)
# renamed over while open, then written through a second descriptor
# opened through /proc after the first one closed
fd = os.open("u", os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"y" * (4 << 20))
fd2 = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
with open("v", "wb") as f:
    f.write(b"v")
os.rename("v", "u")
os.close(fd)
os.write(fd2, b"z" * (4 << 20))
os.close(fd2)
print("ok")
PYEOF
measured orphan "files written after their last name went away fit a quota their blocks fit" \
    ": their blocks were given back at the last close" --stage-max-bytes 16M

# --- ... also when the command exits holding them ------------------------------
# Its descriptors are closed by its exit, and the kernel sends their
# releases to the server in the background: the run's end does not wait
# for them.  The Bundle's figures are taken once the overlay is stopped,
# with every handle it still had closed.
cat > "$T/exit.py" <<'PYEOF'
import os
fds = []
for i in range(4):
    fd = os.open("e%d" % i, os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink("e%d" % i)
    os.write(fd, b"e" * (4 << 20))
    fds.append(fd)
print("ok")
PYEOF
measured exit "a command exits holding files it removed" ""

# --- one file written at once through several names --------------------------
# Each name is its own kernel inode once looked up again (after the entry
# timeout), so the kernel does not serialize their writes: each write's
# allocation change was measured (fstat before and after) with the others'
# growth in it, and counted twice or more.
cat > "$T/names.py" <<'PYEOF'
import os, time
open("a", "wb").close()
for n in "bcd":
    os.link("a", n)
time.sleep(2)  # a later lookup makes each name its own kernel inode
pids = []
for w in range(4):
    pid = os.fork()
    if pid == 0:
        fd = os.open("abcd"[w], os.O_WRONLY | os.O_APPEND)
        for i in range(4000):
            os.write(fd, b"x" * 4096)
        os._exit(0)
    pids.append(pid)
print("ok" if all(os.waitpid(p, 0)[1] == 0 for p in pids) else "writer failed")
PYEOF
measured names "four writers, each through its own name of one file" ""

# --- a write far past the end leaves the gap a hole -----------------------------
# (the usual way to make a sparse file): it reserved the whole gap, so a
# 1-byte pwrite 100 GiB past the end failed with ENOSPC (and the run warned
# of a quota it never reached)
cat > "$T/sparse.py" <<'PYEOF'
import os
fd = os.open("sparse", os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, b"x", 100 << 30)
st = os.fstat(fd)
print("ok" if st.st_size == (100 << 30) + 1 and st.st_blocks <= 64 else "size %d blocks %d" % (st.st_size, st.st_blocks))
PYEOF
measured sparse "a 1-byte write 100 GiB past the end fits a 16 MiB quota (the gap before it is a hole)" "" \
    --stage-max-bytes 16M
# ... while 32 MiB written there still stop at the quota
cat > "$T/sparse2.py" <<'PYEOF'
import os
fd = os.open("sparse2", os.O_WRONLY | os.O_CREAT, 0o644)
try:
    n = os.pwrite(fd, b"y" * (32 << 20), 100 << 30)
except OSError:
    n = 0
print("stopped" if n < (16 << 20) else "wrote %d" % n)
PYEOF
"$PVISOR" run --stage "$T/st-sparse2" --workspace "$W" --stage-max-bytes 16M -- sh -c "cd '$W' && exec $PY '$T/sparse2.py'" > "$T/sparse2.out" 2>/dev/null
eq "$?:$(cat "$T/sparse2.out")" "0:stopped" "  32 MiB written 100 GiB past the end still stop at the 16 MiB quota"
