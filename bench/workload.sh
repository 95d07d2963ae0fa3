#!/bin/sh
# bench/workload.sh DIR: the file-system workload every overlay variant runs,
# inside the view being measured.  Prints "op milliseconds" lines.
# Sizes: SEQ_MB (sequential I/O), NFILES (small files), RAND_READS.
set -eu
D=$1
SEQ_MB=${SEQ_MB:-1024}
NFILES=${NFILES:-20000}
RAND_READS=${RAND_READS:-2000}
now() { date +%s%N; }
t() { echo "$1 $(( ($(now) - $2) / 1000 ))" | awk '{printf "%s %.3f\n", $1, $2 / 1000}'; }
cd "$D"
a=$(now); dd if=/dev/zero of=seq.bin bs=1M count="$SEQ_MB" conv=fsync status=none; t seq_write_ms $a
sync; a=$(now); dd if=seq.bin of=/dev/null bs=1M status=none; t seq_read_ms $a
a=$(now); /usr/bin/python3 - "$RAND_READS" <<'PY'
import os, random, sys
n = int(sys.argv[1]); fd = os.open("seq.bin", os.O_RDONLY); size = os.fstat(fd).st_size
r = random.Random(7)
for _ in range(n):
    os.pread(fd, 4096, r.randrange(0, size // 4096) * 4096)
PY
t rand_4k_read_ms $a
rm -f seq.bin
mkdir -p small
a=$(now); i=0; (cd small && seq 1 "$NFILES" | xargs -n 500 touch); t small_create_ms $a
a=$(now); find small -type f -printf '' ; ls -l small >/dev/null; t small_stat_ms $a
a=$(now); find small -type f -exec cat {} + >/dev/null; t small_read_ms $a
a=$(now); rm -rf small; t small_unlink_ms $a
if [ -d repo/.git ]; then
    a=$(now); git -C repo status --porcelain >/dev/null; t git_status_ms $a
fi
if [ -d copyup ]; then
    a=$(now); for f in copyup/*; do printf x >> "$f"; done; t copyup_1000_ms $a
fi
