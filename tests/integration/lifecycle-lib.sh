# lifecycle-lib.sh: the set-up and helpers of the lifecycle suites
# (test-lifecycle.sh, test-lifecycle-edge.sh), sourced after ../lib.sh.
# Ground truth for apply is the kernel's own overlayfs: the sealed upper
# mounted read-only over the workspace (docs/stage-format.md, "oracle") must
# show exactly what the workspace holds after apply.
cd "$T"
LC_ALL=C; export LC_ALL
[ -z "${PVISOR_TEST_KEEP:-}" ] || at_exit "cp -a '$T' '$PVISOR_TEST_KEEP'"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR
have_xattr=false
command -v setfattr >/dev/null && command -v getfattr >/dev/null && have_xattr=true

# ---------------------------------------------------------------------------
# helpers

wait_for() {
    i=0
    while [ ! -e "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    [ -e "$1" ]
}

# manifest DIR: every object with type, mode, size (files), link target,
# file mtime, SHA-256 of files, user xattrs.  Directory sizes/times excluded.
manifest() {
    (
        cd "$1" || exit 1
        find . -printf '%p %y %m %l\n' | sort
        find . ! -type d -printf '%p %s %T@\n' | sort
        find . -type f -exec sha256sum {} + | sort -k2
        if $have_xattr; then
            find . | sort | while IFS= read -r f; do getfattr -h -d -m '^user\.' "$f" 2>/dev/null; done | grep -v '^$'
        fi
    )
}

# wait_apply_temp: until apply's temp file appears in the current
# directory (at most 6 s)
wait_apply_temp() {
    _i=0
    while [ $_i -lt 600 ]; do
        for _t in .pvisor-apply-*; do [ -e "$_t" ] && return 0; done
        sleep 0.01; _i=$((_i + 1))
    done
    return 1
}

# stage_run WS STAGE SCRIPT: a staged run of sh -c SCRIPT in WS
stage_run() {
    "$P" run --stage "$2" --workspace "$1" -- sh -c "cd '$1' && $3"
}

# oracle WS STAGE OUT: manifest of the kernel overlay (STAGE/upper over WS)
have_oracle=false
mkdir -p "$T/probe-lo" "$T/probe-up" "$T/probe-mnt"
if mount -t overlay overlay -o ro,userxattr,lowerdir="$T/probe-up:$T/probe-lo" "$T/probe-mnt" 2>/dev/null; then
    umount "$T/probe-mnt"
    have_oracle=true
fi
oracle() {
    mkdir -p "$T/mnt"
    mount -t overlay overlay -o ro,userxattr,lowerdir="$2/upper:$1" "$T/mnt" || return 1
    manifest "$T/mnt" > "$3"
    umount "$T/mnt"
}

# apply_matches_oracle NAME WS STAGE [APPLY ARGS...]
apply_matches_oracle() {
    name=$1 ws=$2 st=$3; shift 3
    if $have_oracle; then oracle "$ws" "$st" "$T/$name.want"; fi
    # from inside the workspace: a stage that no run's Bundle names (a
    # fork) is applied only there
    (cd "$ws" && "$P" apply --stage "$st" "$@") >"$T/$name.out" 2>"$T/$name.err"; rc=$?
    eq "$rc" 0 "$name: apply exits 0"
    [ $rc -eq 0 ] || diag "$(cat "$T/$name.err")"
    if $have_oracle; then
        manifest "$ws" > "$T/$name.got"
        if cmp -s "$T/$name.want" "$T/$name.got"; then ok "$name: workspace equals the kernel overlay view, bytes and metadata"
        else not_ok "$name: workspace equals the kernel overlay view, bytes and metadata"; diff "$T/$name.want" "$T/$name.got" | head -20 | sed 's/^/# /'; fi
    else
        skip "$name: workspace equals the kernel overlay view" "cannot mount overlayfs here"
    fi
}

review_json() { "$P" status --review "$1" --json; }
