#!/bin/sh
# seeds.sh STAGE WORKSPACE OUT: seed corpora for the harnesses, from a
# real stage (made as README.md says) and its workspace, into OUT/<harness>/.
set -eu
stage=$1 ws=$2 out=$3
sep='
--8<--
'
mkdir -p "$out/journal" "$out/git_index" "$out/stage" "$out/stage_open" "$out/xattr"
# the header names the stage's upper/ and file system: the harnesses write
# this upper's (fuzz-common.h, fuzz_put_origin)
origin=$(sed -e '1s/^pvisor-origin 2 .* legacy$/@V2L@/' -e '1s/^pvisor-origin 2 .*/@V2@/' -e '1s/dev=[0-9]*/dev=@/' \
  "$stage/origin")
written=$(cat "$stage/apply-written" 2>/dev/null || true)
created=$(tr '\0' '\n' < "$stage/apply-created" 2>/dev/null || true)
intent='{"format":1,"apply_id":"0123456789abcdef","subset":false,"entries":[{"path":"a","old":{"type":"reg","mode":420,"sha256":"'$(printf 'old a\n' | sha256sum | cut -c1-64)'"},"new":{"type":"reg","mode":420,"atime":[1,0],"mtime":[1,0]}},{"path":"d/g","old":null,"new":{"type":"dir","mode":493,"atime":[1,0],"mtime":[1,0]}},{"path":"l","old":{"type":"lnk","mode":511},"new":{"type":"lnk","mode":511,"atime":[1,0],"mtime":[1,0],"target":"n"}},{"path":"b","old":{"type":"reg","mode":420},"new":null},{"path":null,"path_hex":"ff79","old":null,"new":{"type":"reg","mode":420,"atime":[1,0],"mtime":[1,0]}}],"unlocked":[{"path":".","mode":365,"dev":0,"ino":0}]}'
reviewed=$(cat "$stage/reviewed" 2>/dev/null || true)
journal=$(cat "$stage/journal")
printf '%s' "$journal$sep$written" > "$out/journal/real"
printf '%s' "$journal$sep$sep$origin" > "$out/journal/origin"
printf '%s' "$journal$sep$origin$sep$written$sep$created$sep$intent$sep$reviewed" > "$out/stage/real"
printf '%s' "$sep$sep$sep$sep$intent" > "$out/stage/intent"
printf '%s' "pvisor-stage 1
$sep{\"format\":1,\"workspace\":\"@WS@\",\"created\":\"2025-01-01T00:00:00Z\",\"runs\":[\"r\"]}$sep$journal$sep$origin$sep" > "$out/stage_open/real"
printf '\001' >> "$out/stage_open/real"
for f in "$stage/upper/.git/index" "$ws/.git/index"; do
  [ -f "$f" ] || continue
  { cat "$stage/upper/.git/index"; printf '%s' "$sep"; cat "$ws/.git/index"; } > "$out/git_index/pair"
  cp "$f" "$out/git_index/$(echo "$f" | tr / _)"
done
printf 'k=v\000overlay.opaque=y\000overlay.overlay.x=1\000overlay.owner=0:0\000overlay.protattr=ai' > "$out/xattr/seed"
