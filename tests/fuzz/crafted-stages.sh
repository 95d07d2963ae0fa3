#!/bin/sh
# crafted-stages.sh BASE: stages made by hand that try to make pvisor's
# verbs read or write outside the workspace or the stage (README.md).
# Each verb runs confined (bwrap: only BASE writable), under a time
# bound; after each, everything under BASE but the workspace and the
# stage (and, for verbs other than apply and restore, the workspace too)
# must be as it was.  Prints one line per case and verb; "LEAK" or
# "HANG" lines are findings.  PVISOR: the pvisor binary.
set -u
BASE=$(realpath "$1")
PV=${PVISOR:?}
export XDG_STATE_HOME=$BASE/state
O=$BASE/outside
W=$BASE/ws
S=$BASE/stage
F=$BASE/fork
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
rec() { # path type mode sha
  printf '{"path":"%s","type":"%s","mode":%s,"size":1,%s"ino":%s,"op":"open"}\n' "$1" "$2" "$3" \
    "${4:+\"sha256\":\"$4\",}" "$(stat -c %i "$W/$1" 2>/dev/null || echo 1)"
}
snap() { # everything under BASE but the workspace and the stage (and fork)
  ( cd "$BASE" && find . -mindepth 1 -path ./ws -prune -o -path ./stage -prune -o -path ./fork -prune -o -path ./state -prune \
      -o -path ./out -prune -o -printf '%p %y %m %s %T@ %U:%G %l\n' | sort
    find outside -type f -exec sha256sum {} + 2>/dev/null | sort )
}
wsnap() { ( cd "$W" && find . -printf '%p %y %m %s %T@ %l\n' | sort; find . -type f -exec sha256sum {} + | sort ); }
fresh() {
  rm -rf "$W" "$S" "$F" "$O" "$BASE/state"
  mkdir -p "$O" "$W/d" "$S/upper" "$S/work"
  echo secret > "$O/secret"; mkdir "$O/dir"; echo inner > "$O/dir/inner"
  echo 'old a' > "$W/a"; echo b > "$W/b"; echo c > "$W/d/c"; ln -s a "$W/l"
  echo 'pvisor-stage 1' > "$S/version"
  printf '{"format":1,"workspace":"%s","created":"2025-01-01T00:00:00Z","runs":["r"]}\n' "$W" > "$S/meta.json"
  printf 'pvisor-origin 1 dev=%s\n' "$(stat -c %d "$S/upper")" > "$S/origin"
  : > "$S/lock"
  { rec a reg 420 "$(sha 'old a
')"; rec b reg 420 "$(sha 'b
')"; } > "$S/journal"
  echo 'new a' > "$S/upper/a"
  echo 2025-01-01T00:00:00Z > "$S/sealed"
}
bw() { # verb args...: run confined, bounded
  ( cd "$W" 2>/dev/null || cd "$BASE"
    timeout 20 bwrap --unshare-pid --ro-bind / / --bind "$BASE" "$BASE" --dev /dev --dev-bind /dev/fuse /dev/fuse \
      --proc /proc -- "$PV" "$@" ) \
    > "$BASE/out" 2>&1
}
verbs() { # case name
  for v in run review diff dry checkpoint restore fork apply drop; do
    before=$(snap); wbefore=$(wsnap)
    case $v in
    run) bw run --stage "$S" -- sh -c 'echo run >> a' ;;
    review) bw status --review --stage "$S" ;;
    diff) bw diff --stage "$S" ;;
    dry) bw apply --dry-run --stage "$S" ;;
    apply) # the ID the review recorded; none (an interrupted apply): a plain apply
      id=$(sed -n 's/^pvisor-reviewed 1 \([0-9a-f]*\) .*/\1/p' "$S/reviewed" 2>/dev/null)
      bw apply --stage "$S" ${id:+--expect "$id"} ;;
    checkpoint) bw checkpoint --name c1 --stage "$S" ;;
    restore) bw restore c1 --stage "$S" ;;
    fork) bw fork "$F" --stage "$S" ;;
    drop) bw drop --stage "$S" ;;
    esac
    rc=$?
    verdict=ok
    [ $rc = 124 ] && verdict=HANG
    [ "$(snap)" = "$before" ] || verdict="LEAK(outside)"
    case $v in apply | restore) ;; *) [ "$(wsnap)" = "$wbefore" ] || verdict="$verdict LEAK(workspace)" ;; esac
    grep -q 'AddressSanitizer\|runtime error' "$BASE/out" && verdict="$verdict SANITIZER"
    printf '%-22s %-10s rc=%-3s %-8s %s\n' "$1" "$v" "$rc" "$verdict" "$(tail -1 "$BASE/out" | cut -c1-110)"
  done
}
case_() { fresh; "c_$1"; verbs "$1"; }

c_baseline() { :; }
c_upper_symlinks() { ln -s "$O" "$S/upper/x"; ln -s "$O/secret" "$S/upper/y"; ln -s ../../outside "$S/upper/z"; }
c_upper_hardlink() { ln "$O/secret" "$S/upper/h"; ln "$O/secret" "$S/upper/a" 2>/dev/null || { rm "$S/upper/a"; ln "$O/secret" "$S/upper/a"; }; }
c_upper_special() {
  mkfifo "$S/upper/fifo"; mknod "$S/upper/null" c 1 3; mknod "$S/upper/loop" b 7 0
  python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$S/upper/sock"
  mkfifo "$S/upper/d"; mkfifo "$W/pipe"; mkfifo "$S/upper/pipe"
}
c_journal_dotdot() { rec ../outside/secret reg 420 >> "$S/journal"; }
c_journal_abs() { printf '{"path":"%s","type":"reg","mode":420,"size":1,"ino":1,"op":"open"}\n' "$O/secret" >> "$S/journal"; }
c_journal_hexdotdot() { printf '{"path_hex":"%s","type":"reg","mode":420,"size":1,"ino":1,"op":"open"}\n' "$(printf '../outside/secret' | od -An -tx1 | tr -d ' \n')" >> "$S/journal"; }
c_journal_missing() { rec z/y/x reg 420 >> "$S/journal"; rec d reg 420 >> "$S/journal"; mknod "$S/upper/zz" c 0 0; }
c_xattr_redirect() {
  mkdir "$S/upper/d"; setfattr -n user.overlay.redirect -v "$O" "$S/upper/d"
  setfattr -n user.overlay.origin -v "$O" "$S/upper/d"; echo x > "$S/upper/d/new"
  setfattr -n user.overlay.opaque -v y "$S/upper"
}
c_upper_is_symlink() { rm -rf "$S/upper"; ln -s "$O" "$S/upper"; }
c_stage_files_symlinks() {
  mkdir -p "$O/cps"; ln -s "$O/cps" "$S/checkpoints"; ln -s "$O" "$S/preimages"
  ln -s "$O/secret" "$S/reviewed"; ln -s "$O/secret" "$S/apply-written"; ln -s "$O/secret" "$S/apply-created"
  ln -s "$O/secret" "$S/cookie-key"; rm -rf "$S/work"; ln -s "$O/dir" "$S/work"
}
c_tmp_hardlinks() { ln "$O/secret" "$S/meta.json.tmp"; ln "$O/dir/inner" "$S/sealed.tmp"; }
c_origin_hardlink() { rm "$S/origin"; ln "$O/secret" "$S/origin"; }
c_journal_hardlink() { cp "$S/journal" "$O/journal"; rm "$S/journal"; ln "$O/journal" "$S/journal"; }
c_lock_symlink() { rm "$S/lock"; ln -s "$O/secret" "$S/lock"; }
c_lock_fifo() { rm "$S/lock"; mkfifo "$S/lock"; }
c_markers_fifo() { mkfifo "$S/dropped.tmp" "$S/applied.tmp" "$S/reviewed.tmp" "$S/sealed.tmp"; }
c_ws_symlink_dir() { # the workspace's s -> outside; the stage a directory there
  ln -s "$O/dir" "$W/s"; rec s lnk 511 "$(sha "$O/dir")" >> "$S/journal"
  mkdir "$S/upper/s"; echo evil > "$S/upper/s/inner"; echo evil > "$S/upper/s/new"
}
c_ws_delete_symlinked() { ln -s "$O/dir" "$W/d/link"; mknod "$S/upper/d" c 0 0; }
c_deep() {
  p=$S/upper; for i in $(seq 300); do p=$p/q; done; mkdir -p "$p"; echo x > "$p/f"
}
c_many() { mkdir "$S/upper/m"; ( cd "$S/upper/m" && seq 20000 | xargs touch ); }
c_journal_huge() { awk 'BEGIN{for(i=0;i<200000;i++) printf "{\"path\":\"j%d\",\"type\":\"reg\",\"mode\":420,\"size\":1,\"ino\":%d,\"op\":\"open\"}\n",i,i+5}' >> "$S/journal"; }
c_meta_ws_outside() { printf '{"format":1,"workspace":"%s","created":"x","runs":["r"]}\n' "$O" > "$S/meta.json"; }
c_meta_ws_dotdot() { printf '{"format":1,"workspace":"%s/../outside","created":"x","runs":["r"]}\n' "$W" > "$S/meta.json"; }
c_intent_unlock() {
  printf '{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"a","old":{"type":"reg","mode":420},"new":{"type":"reg","mode":420,"atime":[1,0],"mtime":[1,0]}}],"unlocked":[{"path":".","mode":4095,"dev":0,"ino":0},{"path":"s","mode":4095,"dev":0,"ino":0}]}' > "$S/apply-intent"
  ln -s "$O/dir" "$W/s"
}
c_intent_symlinked_parent() {
  ln -s "$O/dir" "$W/s"; : > "$O/dir/.pvisor-apply-0123456789abcdef-0"
  printf '{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"s/inner","old":null,"new":{"type":"reg","mode":420,"atime":[1,0],"mtime":[1,0]}}]}' > "$S/apply-intent"
}
c_checkpoint_evil() { # a checkpoint whose upper holds links out, and one that is a symlink
  mkdir -p "$S/checkpoints/c1/upper"; cp "$S/version" "$S/meta.json" "$S/journal" "$S/origin" "$S/checkpoints/c1/"
  ln -s "$O/secret" "$S/checkpoints/c1/upper/a"; ln "$O/secret" "$S/checkpoints/c1/upper/h"
  ln -s "$O/dir" "$S/checkpoints/c2"; echo 2025 > "$S/checkpoints/c1/sealed"
}

for c in ${CASES:-baseline upper_symlinks upper_hardlink upper_special journal_dotdot journal_abs journal_hexdotdot \
  journal_missing xattr_redirect upper_is_symlink stage_files_symlinks lock_symlink lock_fifo markers_fifo \
  tmp_hardlinks origin_hardlink journal_hardlink ws_symlink_dir ws_delete_symlinked deep many journal_huge meta_ws_outside meta_ws_dotdot intent_unlock \
  intent_symlinked_parent checkpoint_evil}; do
  case_ "$c"
done
