#!/bin/sh
# Red-team regressions (TAP): credential locations --safe keeps from the
# command, reached in HOME's own view by another home's name or HOME's
# other name, and stores a tool finds where the default list did not
# look: the user's passwd home below HOME (HOME a parent of it), HOME
# bound again below itself (~/mirror), a virtualenv's or conda
# environment's pip.conf, npm's moved stores named by npm_config_* in any
# letter case, sbt's global settings with credentials inline, git's global
# config holding a token (in a file it includes, on a continued line, as a
# URL's user name too). As root and
# as an ordinary user; each with a control run without --safe that reads
# the bytes. Needs $PVISOR, $PVAGENT.
. "$(dirname "$0")/../lib.sh"
cd "$T"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR

can_user() { [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; }
# no_user WHO WHAT: WHO is the ordinary user, whom this test cannot become:
# WHAT is skipped (say so)
no_user() {
    [ "$1" = user ] && ! can_user || return 1
    skip "$2" "needs root to switch to an unprivileged user"
}
# as WHO CMD...: as root (env) or as uid 65534 with its own state directory
as() {
    who=$1; shift
    if [ "$who" = user ]; then
        setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_STATE_HOME="$T/state-user" "$@"
    else
        env "$@"
    fi
}
bundle_of() { # WHO: the newest run's Bundle of that user
    st=$T/state; [ "$1" = user ] && st=$T/state-user
    echo "$st/pvisor/runs/$(XDG_STATE_HOME=$st latest_run)/bundle.json"
}
evidence_of() { # WHO: home_credentials' level, HOME's view, the other homes masked in it
    jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.home_view) \(.evidence.other_homes_in_view)"' \
        "$(bundle_of "$1")" 2>&1
}
mkdir -p "$T/state-user"
can_user && chown 65534:65534 "$T/state-user"

# --- 1. the passwd home below HOME --------------------------------------------
# HOME names a parent of the user's home as /etc/passwd names it (HOME=/home,
# the passwd home /home/alice): the passwd home's credential locations were
# kept from the workspace and the grants, not from HOME's own view, where
# ~/alice/.ssh was read (home_credentials said enforced). With a private
# /etc/passwd naming root's and uid 65534's homes in $T.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    sed -e "s#^root:\([^:]*\):0:0:\([^:]*\):[^:]*:#root:\1:0:0:\2:$T/pw-root/parent/alice:#" \
        -e "s#^nobody:\([^:]*\):65534:65534:\([^:]*\):[^:]*:#nobody:\1:65534:65534:\2:$T/pw-user/parent/alice:#" \
        /etc/passwd > "$T/passwd"
    grep -q "$T/pw-user/parent/alice" "$T/passwd" || printf 'nobody:x:65534:65534:nobody:%s:/bin/sh\n' "$T/pw-user/parent/alice" >> "$T/passwd"
    pwas() { # WHO DIR CMD...: in DIR, as WHO (see as), with the private /etc/passwd
        who=$1 d=$2; shift 2
        if [ "$who" = user ]; then
            set -- setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_STATE_HOME="$T/state-user" "$@"
        else
            set -- env "$@"
        fi
        unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/passwd || exit 77
            cd "$2" && shift 2 && exec "$@"' sh "$T/passwd" "$d" "$@"
    }
    for who in root user; do
        if [ $who = user ] && ! can_user; then
            skip "the passwd home below HOME as an ordinary user" "needs root to switch to an unprivileged user"
            continue
        fi
        B=$T/pw-$who; A=$B/parent/alice
        mkdir -p "$A/.ssh" "$A/.config/gh" "$B/parent/shared-aws" "$B/ws"
        echo "PWKEY-$who" > "$A/.ssh/id_rsa"
        echo "PWGH-$who" > "$A/.config/gh/hosts.yml"
        echo "PWAWS-$who" > "$B/parent/shared-aws/credentials"
        ln -s ../shared-aws "$A/.aws"  # a link of the passwd home's leading elsewhere in HOME
        echo "notes-$who" > "$A/notes"
        [ $who = user ] && chown -R 65534:65534 "$B"
        reads1='cat ~/alice/.ssh/id_rsa ~/alice/.config/gh/hosts.yml ~/alice/.aws/credentials ~/shared-aws/credentials 2>/dev/null; cat ~/alice/notes; echo end'
        out=$(pwas $who "$B/ws" HOME="$B/parent" "$P" run -- sh -c "$reads1" 2>&1)
        eq "$(echo $out)" "PWKEY-$who PWGH-$who PWAWS-$who PWAWS-$who notes-$who end" \
            "control ($who): with HOME a parent of the passwd home, its keys are readable below HOME"
        out=$(pwas $who "$B/ws" HOME="$B/parent" "$P" run --safe -- sh -c "$reads1" 2>&1); rc=$?
        eq "$rc:$(echo $out)" "0:notes-$who end" \
            "--safe ($who): the passwd home's credential locations are absent in HOME's view (and where its link leads there)"
        eq "$(evidence_of $who)" "enforced true 1" \
            "... and home_credentials is enforced, the Bundle counting the passwd home in HOME's view"
    done
else
    skip "the passwd home below HOME" "needs root and unshare (a private /etc/passwd)"
fi

# --- 2. HOME by another name inside HOME ---------------------------------------
# A bind mount of HOME below HOME itself (~/mirror, a backup tool's or a
# container's mount), or of a parent of HOME (~/up showing HOME's parent):
# the other names of HOME were looked for around the workspace and the
# grants, not inside HOME, and HOME's view showed ~/mirror/.ssh.
for who in root user; do
    no_user $who "HOME by another name inside HOME as an ordinary user" && continue
    if [ "$(id -u)" -ne 0 ]; then
        skip "HOME by another name inside HOME ($who)" "needs root (bind mounts)"
        continue
    fi
    B=$T/mirror-$who; H=$B/home
    mkdir -p "$H/.ssh" "$H/mirror" "$H/up" "$H/gpg2/private-keys-v1.d" "$B/ws"
    echo "MKEY-$who" > "$H/.ssh/id_ed25519"
    echo "MGPG-$who" > "$H/gpg2/private-keys-v1.d/k.key"
    echo "notes-$who" > "$H/notes"
    [ $who = user ] && chown -R 65534:65534 "$B"
    if ! mount --bind "$H" "$H/mirror" 2>/dev/null || ! mount --bind "$B" "$H/up" 2>/dev/null; then
        skip "HOME by another name inside HOME ($who)" "cannot bind-mount here"
        continue
    fi
    at_exit "umount '$H/up' '$H/mirror'"
    reads2='cat ~/mirror/.ssh/id_ed25519 ~/up/home/.ssh/id_ed25519 ~/mirror/gpg2/private-keys-v1.d/k.key 2>/dev/null; cat ~/mirror/notes ~/up/home/notes; echo end'
    out=$(cd "$B/ws" && as $who HOME="$H" GNUPGHOME="$H/gpg2" "$P" run -- sh -c "$reads2" 2>&1)
    eq "$(echo $out)" "MKEY-$who MKEY-$who MGPG-$who notes-$who notes-$who end" \
        "control ($who): HOME's keys are readable through its other names inside HOME"
    out=$(cd "$B/ws" && as $who HOME="$H" GNUPGHOME="$H/gpg2" "$P" run --safe -- sh -c "$reads2" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:notes-$who notes-$who end" \
        "--safe ($who): HOME's credential locations (a moved store's too) are absent by its other names inside HOME"
    eq "$(evidence_of $who)" "enforced true 2" \
        "... and home_credentials is enforced, the Bundle counting HOME's two other names in its view"
    # the workspace by such a name (~/mirror/proj): its view masks them too
    mkdir -p "$H/proj"; echo p > "$H/proj/f"; [ $who = user ] && chown 65534:65534 "$H/proj" "$H/proj/f"
    out=$(cd "$H/mirror/proj" && as $who HOME="$H" "$P" run --safe -- sh -c 'cat f; cat ../.ssh/id_ed25519 ~/mirror/.ssh/id_ed25519 2>/dev/null; echo end' 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:p end" "--safe ($who): run in HOME's other name inside HOME, the keys are absent there too"
done

# --- 3. pip.conf in a virtualenv or conda environment --------------------------
# pip reads sys.prefix/pip.conf (the "site" file: an index-url with a
# password). A venv that VIRTUAL_ENV names, or whose bin/ is on PATH, and a
# conda environment (CONDA_PREFIX) outside HOME are projected whole as
# toolchains, and one in HOME is in its view: that pip.conf was readable.
for who in root user; do
    no_user $who "a virtualenv's pip.conf as an ordinary user" && continue
    B=$T/venv-$who; H=$B/home
    for v in "$B/venv" "$B/pathvenv" "$B/conda" "$H/.venvs/tool"; do
        mkdir -p "$v/bin"; echo "SECRET-$who" > "$v/pip.conf"
        printf '#!/bin/sh\necho ran\n' > "$v/bin/tool"; chmod 0755 "$v/bin/tool"
    done
    echo "home = /usr/bin" > "$B/venv/pyvenv.cfg"; echo "home = /usr/bin" > "$B/pathvenv/pyvenv.cfg"
    echo "home = /usr/bin" > "$H/.venvs/tool/pyvenv.cfg"; mkdir -p "$B/conda/conda-meta"
    echo "keep" > "$B/conda/conda-meta/history"; mkdir -p "$B/ws"
    [ $who = user ] && chown -R 65534:65534 "$B"
    env3="HOME=$H VIRTUAL_ENV=$B/venv CONDA_PREFIX=$B/conda PATH=$B/venv/bin:$H/.venvs/tool/bin:/usr/bin:/bin"
    reads3="cat $B/venv/pip.conf $B/conda/pip.conf ~/.venvs/tool/pip.conf $B/pathvenv/pip.conf 2>/dev/null; cat $B/venv/pyvenv.cfg $B/conda/conda-meta/history; tool; echo end"
    # shellcheck disable=SC2086
    out=$(cd "$B/ws" && as $who $env3 "$P" run -- sh -c "$reads3" 2>&1)
    eq "$(echo $out)" "SECRET-$who SECRET-$who SECRET-$who SECRET-$who home = /usr/bin keep ran end" \
        "control ($who): the environments' pip.conf files are readable without the sandbox"
    # shellcheck disable=SC2086
    out=$(cd "$B/ws" && as $who $env3 "$P" run --safe -- sh -c "$reads3" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:home = /usr/bin keep ran end" \
        "--safe ($who): VIRTUAL_ENV's, CONDA_PREFIX's and HOME's venv's pip.conf are absent; the environments run"
    # a venv whose bin/ is on PATH without VIRTUAL_ENV, granted whole
    out=$(cd "$B/ws" && as $who HOME="$H" PATH="$B/pathvenv/bin:/usr/bin:/bin" "$P" run --safe --access "ro:$B/pathvenv" -- \
        sh -c "cat $B/pathvenv/pip.conf 2>/dev/null; cat $B/pathvenv/pyvenv.cfg; echo end" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:home = /usr/bin end" "--safe ($who): a venv on PATH, granted: its pip.conf is covered"
    eq "$(jq -r '.dimensions.home_credentials.effective' "$(bundle_of $who)" 2>&1)" enforced "... and home_credentials is enforced"
    out=$(cd "$B/ws" && as $who $env3 "$P" run --safe --access "ro:$B/venv/pip.conf" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'reaches the credential location')" "2:1" "--safe ($who): a grant of VIRTUAL_ENV's pip.conf is refused"
done

# --- 4. npm's moved stores named in any letter case -----------------------------
# npm reads npm_config_* in any case (Npm_Config_Userconfig is userconfig):
# only NPM_CONFIG_USERCONFIG and npm_config_userconfig (and the same two of
# globalconfig and prefix) were followed, and the store another spelling
# named was readable in a grant.
for who in root user; do
    no_user $who "npm's variables in any case as an ordinary user" && continue
    B=$T/npm-$who; G=$B/grant
    mkdir -p "$B/home" "$B/ws" "$G/pfx/etc"
    echo "USERRC-$who" > "$G/userrc"; echo "GLOBALRC-$who" > "$G/globalrc"; echo "PFXRC-$who" > "$G/pfx/etc/npmrc"
    echo keep > "$G/other"
    [ $who = user ] && chown -R 65534:65534 "$B"
    env4="HOME=$B/home Npm_Config_Userconfig=$G/userrc NPM_config_GLOBALCONFIG=$G/globalrc nPm_CoNfIg_PrEfIx=$G/pfx"
    reads4="cat $G/userrc $G/globalrc $G/pfx/etc/npmrc 2>/dev/null; cat $G/other; echo end"
    # shellcheck disable=SC2086
    out=$(cd "$B/ws" && as $who $env4 "$P" run -- sh -c "$reads4" 2>&1)
    eq "$(echo $out)" "USERRC-$who GLOBALRC-$who PFXRC-$who keep end" "control ($who): npm's stores are readable without the sandbox"
    # shellcheck disable=SC2086
    out=$(cd "$B/ws" && as $who $env4 "$P" run --safe --access "ro:$G" -- sh -c "$reads4" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:keep end" "--safe ($who): the stores npm_config_* names in any letter case are covered in a grant"
    # shellcheck disable=SC2086
    eq "$(jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.moved_credential_locations >= 3)"' "$(bundle_of $who)" 2>&1)" \
        "enforced true" "... and the Bundle counts them as moved"
    # shellcheck disable=SC2086
    out=$(cd "$B/ws" && as $who $env4 "$P" run --safe --access "ro:$G/userrc" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'Npm_Config_Userconfig names it')" "2:1" \
        "--safe ($who): a grant of it is refused, naming the variable as spelled"
done

# --- 5. sbt's global settings with credentials inline ---------------------------
# sbt applies every *.sbt in ~/.sbt/<version>/ (global.sbt, sonatype.sbt)
# and builds ~/.sbt/<version>/plugins/ as a project: sbt's documentation
# and publishing guides put `credentials += Credentials(realm, host,
# user, password)` there. Only credentials.sbt and .credentials were kept.
for who in root user; do
    no_user $who "sbt's global settings as an ordinary user" && continue
    B=$T/sbt-$who; H=$B/home
    mkdir -p "$H/.sbt/1.0/plugins" "$H/.sbt/0.13" "$H/.sbt/boot" "$B/ws"
    for f in 1.0/global.sbt 1.0/sonatype.sbt 1.0/plugins/credentials.sbt 1.0/plugins/Creds.scala 0.13/global.sbt; do
        echo "credentials += Credentials(\"Realm\", \"host\", \"user\", \"SBTPW-$who\")" > "$H/.sbt/$f"
    done
    echo keep > "$H/.sbt/repositories"; echo keep > "$H/.sbt/boot/sbt.boot.lock"
    mkdir -p "$B/state"
    [ $who = user ] && chown -R 65534:65534 "$B"
    reads5='cat ~/.sbt/1.0/global.sbt ~/.sbt/1.0/sonatype.sbt ~/.sbt/1.0/plugins/credentials.sbt ~/.sbt/1.0/plugins/Creds.scala ~/.sbt/0.13/global.sbt 2>/dev/null; cat ~/.sbt/repositories ~/.sbt/boot/sbt.boot.lock; echo end'
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run -- sh -c "$reads5" 2>&1)
    eq "$(echo "$out" | grep -c "SBTPW-$who"):$(echo "$out" | grep -c keep)" "5:2" "control ($who): sbt's global settings are readable without the sandbox"
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run --safe -- sh -c "$reads5" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:keep keep end" \
        "--safe ($who): sbt's global settings and plugin definitions are absent; its launcher's files stay"
    # HOME as the workspace: absent and sealed there
    out=$(cd "$H" && as $who HOME="$H" XDG_STATE_HOME="$B/state" "$P" run --safe --stage "$B/st" -- \
        sh -c 'cat .sbt/1.0/global.sbt 2>/dev/null; (echo x > .sbt/1.0/global.sbt) 2>/dev/null || echo sealed' 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:sealed" "--safe ($who): with HOME the workspace, they are absent and sealed"
done

# --- 6. a credential file under another name: a hard link in HOME ---------------
# ~/.netrc and ~/.git-credentials hard-linked as ~/notes/n and ~/g (one
# file each, two names), ~/.ssh/id_rsa as ~/notes/key: HOME's view masked
# the names it knows and showed the same bytes under the others. What a
# mask names when the run starts is hidden under any name now (its device
# and inode): not read, not listed, not carried along when the directory
# holding the link is renamed; so is a file inside a masked directory
# under another name. A pair of hard links that is not a credential
# stays readable.
for who in root user; do
    no_user $who "hard links of credential files as an ordinary user" && continue
    B=$T/hl-$who; H=$B/home
    mkdir -p "$H/notes" "$H/.ssh" "$B/ws" "$B/state"
    echo "machine example.org login u password NETRC-$who" > "$H/.netrc"
    echo "https://u:GITCRED-$who@example.org" > "$H/.git-credentials"
    echo "SSHKEY-$who" > "$H/.ssh/id_rsa"
    ln "$H/.netrc" "$H/notes/n"; ln "$H/.git-credentials" "$H/g"; ln "$H/.ssh/id_rsa" "$H/notes/key"
    echo keep > "$H/notes/other"; echo pair > "$H/notes/p1"; ln "$H/notes/p1" "$H/p2"
    [ $who = user ] && chown -R 65534:65534 "$B"
    reads6='cat ~/notes/n ~/g ~/notes/key 2>/dev/null; cat ~/p2; ls ~/notes; mv ~/notes ~/moved && cat ~/moved/n ~/moved/key 2>/dev/null; ls ~/moved; echo end'
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run -- sh -c 'cat ~/notes/n ~/g ~/notes/key' 2>&1)
    eq "$(echo "$out" | grep -c -e "NETRC-$who" -e "GITCRED-$who" -e "SSHKEY-$who")" 3 "control ($who): the hard links read the credentials without the sandbox"
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run --safe -- sh -c "$reads6" 2>&1); rc=$?
    eq "$rc:$(echo $(echo "$out" | nodiscard))" "0:pair other p1 other p1 end" \
        "--safe ($who): hard links of credential files are absent from HOME's view, and stay so when their directory is renamed"
    # HOME as the workspace: the workspace view's masks, the same way
    out=$(cd "$H" && as $who HOME="$H" XDG_STATE_HOME="$B/state" "$P" run --safe --stage "$B/st" -- sh -c "$reads6" 2>&1); rc=$?
    eq "$rc:$(echo $(echo "$out" | nodiscard))" "0:pair other p1 other p1 end" "--safe ($who): with HOME the workspace, the same"
    eq "$(cat "$H/notes/n" "$H/g" "$H/notes/key" | grep -c -e NETRC -e GITCRED -e SSHKEY):$(ls "$B/st/upper/moved" 2>/dev/null | tr '\n' ' ')" "3:other p1 " \
        "... the host's files untouched; the stage's renamed directory holds no copy of them"
    # the masked directories not looked through completely (here: a
    # budget of no entry): every file with other names is taken for a
    # credential's (fail closed), the pair too; the rest stays
    out=$(cd "$B/ws" && as $who HOME="$H" PVISOR_TEST_MLINK_BUDGET=0 "$P" run --safe -- sh -c 'cat ~/p2 ~/notes/key 2>/dev/null; cat ~/notes/other; echo end' 2>"$B/fc.err"); rc=$?
    eq "$rc:$(echo $out)" "0:keep end" "--safe ($who): masked directories not looked through: every file with other names is hidden"
    # ... and said (it was silent: a local git clone in the workspace
    # failed with 'bad object', found by a red-team pass)
    eq "$(grep -c 'could not be looked through for hard links of their files (more than 200,000 entries)' "$B/fc.err"):$(jq '[.warnings[] | select(test("looked through for hard links"))] | length' "$(bundle_of $who)")" \
        "1:1" "... with a warning on stderr and in the Bundle"
    # pvisor's state in HOME (the default, ~/.local/state/pvisor: masked)
    # holding 60 runs, and a stage of 300 files kept elsewhere in HOME
    # (also masked): neither is looked through (a budget of 100 entries is
    # enough), and the walk meets none of the run's own mounts (its HOME
    # view's mount point is in that state directory): no hang, the same
    # answers
    out=$(cd "$B/ws" && as $who env -u XDG_STATE_HOME HOME="$H" "$P" run --safe --stage "$H/kept" -- sh -c 'mkdir d && for i in $(seq 300); do : > d/f$i; done' 2>&1); rc=$?
    for i in $(seq 60); do mkdir -p "$H/.local/state/pvisor/runs/fake$i"; echo '{}' > "$H/.local/state/pvisor/runs/fake$i/bundle.json"; done
    [ $who = user ] && chown -R 65534:65534 "$H/.local"
    eq "$rc:$(ls "$H"/kept/upper/d 2>/dev/null | wc -l):$(ls "$H/.local/state/pvisor/runs" | wc -l)" "0:300:61" "... a stage of 300 files kept in HOME, 61 runs in HOME's default state directory"
    out=$(cd "$B/ws" && as $who env -u XDG_STATE_HOME HOME="$H" PVISOR_TEST_MLINK_BUDGET=100 timeout 120 "$P" run --safe -- sh -c "$reads6" 2>&1); rc=$?
    eq "$rc:$(echo $(echo "$out" | nodiscard))" "0:pair other p1 other p1 end" \
        "--safe ($who): with pvisor's state in HOME, neither it nor a stage kept in HOME is looked through, and the links are hidden the same"
    # a browser profile in daily use: hundreds of thousands of entries in
    # its caches (here 300 against a budget of 100) made every file with
    # other names hidden, with the warning; the caches are not looked
    # through (a link out of one stays readable: the profile's own files
    # are still looked for)
    C=$H/.config/google-chrome/Default
    mkdir -p "$C/Cache/Cache_Data" "$C/Code Cache/js" "$C/Service Worker/CacheStorage/ab"
    for i in $(seq 100); do : > "$C/Cache/Cache_Data/f$i"; : > "$C/Code Cache/js/f$i"; : > "$C/Service Worker/CacheStorage/ab/f$i"; done
    echo "COOKIE-$who" > "$C/Cookies"; ln "$C/Cookies" "$H/notes/cookies"
    echo "cached-$who" > "$C/Cache/Cache_Data/entry"; ln "$C/Cache/Cache_Data/entry" "$H/notes/cached"
    [ $who = user ] && chown -R 65534:65534 "$H/.config" "$H/notes"
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run -- sh -c 'cat ~/notes/cookies ~/notes/cached' 2>&1)
    eq "$(echo $out)" "COOKIE-$who cached-$who" "control ($who): a browser profile's cookies and a cache entry under other names are readable"
    out=$(cd "$B/ws" && as $who env -u XDG_STATE_HOME HOME="$H" PVISOR_TEST_MLINK_BUDGET=100 "$P" run --safe -- sh -c 'cat ~/notes/cookies ~/notes/key 2>/dev/null; cat ~/p2 ~/notes/cached; echo end' 2>"$B/cache.err"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'looked through for hard links' "$B/cache.err")" "0:pair cached-$who end:0" \
        "--safe ($who): a browser profile's caches are not looked through: no warning past the budget, the cookies' and the key's links hidden, a pair shown"
    rm -rf "$H/.config/google-chrome" "$H/notes/cookies" "$H/notes/cached"
    # the host renames ~/.ssh once the run has started, before the command
    # looks anything up (a backup of old keys): the walk opened the masked
    # directories by name when it ran, found none, and the links of the
    # keys were read (found by a red-team pass); it looks through what the
    # masks named at the start
    rm -rf "$B/stmv"
    (cd "$B/ws" && as $who HOME="$H" "$P" run --safe --stage "$B/stmv" -- sh -c 'touch started; sleep 2; cat ~/notes/key 2>/dev/null; echo end' > "$B/mv.out" 2>&1) &
    i=0; while [ ! -e "$B/stmv/upper/started" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    mv "$H/.ssh" "$H/.ssh.old"; wait; mv "$H/.ssh.old" "$H/.ssh"
    eq "$(echo $(cat "$B/mv.out"))" "end" "--safe ($who): a credential directory renamed by the host after the start: the links of its files stay hidden"
    # the host renames a credential onto a name the command has looked up
    # (~/.netrc over ~/notes/x, ~/.git-credentials' directory... here
    # ~/.aws over the directory the command is in): the kernel kept the
    # name's inode a while and the server opened what the path led to
    # (found by a red-team pass); what is opened is checked by identity
    mkdir -p "$H/.aws" "$H/cwd"; echo "AWS-$who" > "$H/.aws/credentials"; echo plain > "$H/notes/x"
    [ $who = user ] && chown -R 65534:65534 "$H/.aws" "$H/cwd" "$H/notes/x"
    rm -rf "$B/stmv2"
    (cd "$B/ws" && as $who HOME="$H" "$P" run --safe --stage "$B/stmv2" -- sh -c 'touch started; cd ~/cwd; i=0
        while [ $i -lt 40 ]; do cat ~/notes/x credentials 2>/dev/null; sleep 0.05; i=$((i + 1)); done' > "$B/mv2.out" 2>&1) &
    i=0; while [ ! -e "$B/stmv2/upper/started" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    sleep 0.3; cp -p "$H/.netrc" "$B/netrc.saved"
    mv -f "$H/.netrc" "$H/notes/x"; rmdir "$H/cwd" && mv -T "$H/.aws" "$H/cwd"; wait
    eq "$(grep -c -e "NETRC-$who" -e "AWS-$who" "$B/mv2.out"):$(grep -c plain "$B/mv2.out" | sed 's/^[1-9][0-9]*$/some/')" "0:some" \
        "--safe ($who): a credential the host renames onto a name the command looked up is not read through it"
    mv "$B/netrc.saved" "$H/.netrc"; echo plain > "$H/notes/x"; mv -T "$H/cwd" "$H/.aws"; mkdir -p "$H/cwd"
    ln -f "$H/.netrc" "$H/notes/n"
    # the workspace in HOME (~/proj, the usual layout) holding hard links of
    # ~/.netrc and ~/.ssh/id_rsa: its view hides them as HOME's does; a pair
    # of links of the workspace's own stays
    mkdir -p "$H/proj/sub"; ln "$H/.netrc" "$H/proj/n"; ln "$H/.ssh/id_rsa" "$H/proj/sub/key"
    echo own > "$H/proj/o1"; ln "$H/proj/o1" "$H/proj/sub/o2"
    [ $who = user ] && chown -R 65534:65534 "$H/proj"
    readsw='cat n sub/key 2>/dev/null; cat sub/o2; ls . sub | tr "\n" " "; mv sub moved && cat moved/key 2>/dev/null; ls moved; echo end'
    out=$(cd "$H/proj" && as $who HOME="$H" "$P" run -- sh -c 'cat n sub/key' 2>&1)
    eq "$(echo "$out" | grep -c -e "NETRC-$who" -e "SSHKEY-$who")" 2 "control ($who): hard links of HOME's credentials in the workspace are readable without the sandbox"
    out=$(cd "$H/proj" && as $who HOME="$H" "$P" run --safe --stage "$B/stw" -- sh -c "$readsw" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:own .: o1 sub sub: o2 o2 end" \
        "--safe ($who): hard links of HOME's credentials in the workspace (~/proj) are absent from its view, and stay so when their directory is renamed"
    eq "$(ls "$B/stw/upper/moved" 2>/dev/null | tr '\n' ' ')" "o2 " "... the stage's renamed directory holds no copy of them"
done

# --- git's global config holding a credential ---------------------------------
# A token in ~/.gitconfig (url."https://TOKEN@github.com/".insteadOf, as
# GitHub's advice for CI has it; an http.extraHeader; a helper echoing a
# password) was readable (found by a red-team pass). Such a file is kept
# from the command whole, with a warning (stderr and the Bundle) that says
# the user's git settings go with it; a config without one (an ssh://git@
# URL, a token in a comment) stays, user.name and all.
for who in root user; do
    no_user $who "git's global config holding a credential as an ordinary user" && continue
    B=$T/gitcfg-$who; H=$B/home
    mkdir -p "$H/.config/git" "$B/ws" "$B/g"
    printf '[user]\n\tname = Alice\n[url "https://x-access-token:GHTOKEN-%s@github.com/"]\n\tinsteadOf = https://github.com/\n' $who > "$H/.gitconfig"
    printf '[http "https://git.example/"]\n\textraHeader = Authorization: Bearer XDGTOKEN-%s\n' $who > "$H/.config/git/config"
    printf '[credential]\n\thelper = "!f() { echo username=u; echo password=HELPERPW-%s; }; f"\n' $who > "$H/gcfg"
    printf '[user]\n\tname = Bob\n[url "ssh://git@github.com/"]\n\tinsteadOf = https://github.com/\n# token = not-one\n' > "$B/g/plain"
    [ $who = user ] && chown -R 65534:65534 "$B"
    reads='cat ~/.gitconfig ~/.config/git/config 2>/dev/null; echo end'
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run -- sh -c "$reads" 2>&1)
    eq "$(echo "$out" | grep -c -e "GHTOKEN-$who" -e "XDGTOKEN-$who")" 2 "control ($who): the tokens in git's global config files are readable without the sandbox"
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run --safe -- sh -c "$reads" 2>"$B/err"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'holds a credential .*: it is kept from the command, and your git settings there with it' "$B/err"):$(jq '[.warnings[] | select(test("holds a credential"))] | length' "$(bundle_of $who)")" \
        "0:end:2:2" "--safe ($who): ~/.gitconfig and XDG's git/config holding a token are absent, each said on stderr and in the Bundle"
    out=$(cd "$B/ws" && as $who HOME="$H" "$P" run --safe -- sh -c "cat ~/gcfg; echo end" 2>/dev/null); rc=$?
    eq "$rc:$(echo $out | grep -c HELPERPW)" "0:1" "control ($who): a file in HOME with a helper echoing a password, not named by GIT_CONFIG_GLOBAL, is shown"
    out=$(cd "$B/ws" && as $who HOME="$H" GIT_CONFIG_GLOBAL="$H/gcfg" "$P" run --safe -- sh -c "cat ~/gcfg 2>/dev/null; echo end" 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): the file GIT_CONFIG_GLOBAL names (here in HOME) is absent"
    mkdir -p "$B/h2" && cp "$B/g/plain" "$B/h2/.gitconfig" && [ $who = user ] && chown -R 65534:65534 "$B/h2"
    out=$(cd "$B/ws" && as $who HOME="$B/h2" "$P" run --safe -- sh -c 'git config --global user.name; echo end' 2>"$B/err2"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'holds a credential' "$B/err2")" "0:Bob end:0" \
        "--safe ($who): a global config without a credential (an ssh://git@ URL, a token in a comment) stays, no warning"
    # a dotfiles manager's symlink to the file (it was not followed: the
    # token was shown), a key on its section's line; and a URL with a user
    # name alone (Azure DevOps' clone URL) is no credential
    mkdir -p "$B/h3/dotfiles" "$B/h4"
    printf '[user]\n\tname = Carol\n[url "https://ghp_DOTTOKEN@github.com/"]\n\tinsteadOf = https://github.com/\n' > "$B/h3/dotfiles/gitconfig"
    ln -s dotfiles/gitconfig "$B/h3/.gitconfig"
    printf '[user]\n\tname = Dan\n[url "https://alice@dev.azure.com/"]\n\tinsteadOf = https://dev.azure.com/\n' > "$B/h4/.gitconfig"
    mkdir -p "$B/h4/.config/git" && printf '[http] extraheader = AUTHORIZATION: basic SAMELINE\n' > "$B/h4/.config/git/config"
    [ $who = user ] && chown -R 65534:65534 "$B/h3" "$B/h4"
    out=$(cd "$B/ws" && as $who HOME="$B/h3" "$P" run --safe -- sh -c 'cat ~/.gitconfig 2>/dev/null; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): a symlinked ~/.gitconfig holding a token is absent"
    out=$(cd "$B/ws" && as $who HOME="$B/h4" "$P" run --safe -- sh -c 'git config --global user.name; cat ~/.config/git/config 2>/dev/null; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:Dan end" "--safe ($who): a URL with a user name alone is no credential (the config stays); a key on its section's line is one"
done

# --- git's global config: a credential in an included file, on a continued
# line, as a URL's user name -----------------------------------------------
# Three ways a token in git's global config reached the command (found by a
# red-team pass): a file it includes ([include] path = ~/.gitconfig-work;
# includeIf, a relative path, nested), a value continued with a trailing
# backslash ("url = https://alice:\" then "s3cret@..."), a token as a URL's
# user name without a known prefix (a classic 40-hex GitHub token). Each such
# file is kept from the command, the including ones too; an include of a
# harmless file, a continued alias, user names (first.last, a long one with a
# number) stay, no warning.
HEXTOK=3f9c2d7e8a1b4c6d0e5f7a9b8c2d4e6f1a3b5c7d
for who in root user; do
    no_user $who "git's global config: includes, continued lines, token user names as an ordinary user" && continue
    B=$T/gitinc-$who
    mkdir -p "$B/ws" "$B/inc" "$B/nest/dot" "$B/cont" "$B/hex" "$B/plain"
    printf '[user]\n\tname = Eve\n[include]\n\tpath = ~/.gitconfig-work\n' > "$B/inc/.gitconfig"
    printf '[url "https://x-access-token:INCTOKEN-%s@github.com/"]\n\tinsteadOf = https://github.com/\n' $who > "$B/inc/.gitconfig-work"
    # includeIf, a relative path (against the including file's directory),
    # nested, and a loop back to the top
    printf '[user]\n\tname = Fay\n[includeIf "gitdir:/"]\n\tpath = dot/a\n' > "$B/nest/.gitconfig"
    printf '[alias]\n\tst = status\n[include]\n\tpath = b\n' > "$B/nest/dot/a"
    printf '[http]\n\textraHeader = Authorization: Bearer NESTTOKEN-%s\n[include]\n\tpath = ../.gitconfig\n' $who > "$B/nest/dot/b"
    printf '[user]\n\tname = Gus\n[remote "backup"]\n\turl = https://alice:\\\nCONTPW-%s@example.com/r.git\n' $who > "$B/cont/.gitconfig"
    printf '[user]\n\tname = Hal\n[url "https://%s@github.com/"]\n\tinsteadOf = https://github.com/\n' $HEXTOK > "$B/hex/.gitconfig"
    # the negative controls: an include of a harmless file, a continued
    # alias, user names that are names
    printf '[user]\n\tname = Ida\n[include]\n\tpath = ~/.gitconfig-aliases\n[alias]\n\tlg = log --graph \\\n\t\t--oneline\n' > "$B/plain/.gitconfig"
    printf '[alias]\n\tst = status\n[url "https://first.last@git.example/"]\n\tinsteadOf = https://git.example/\n' > "$B/plain/.gitconfig-aliases"
    printf '[url "https://build-agent-2024-prod-eu@ci.example/"]\n\tinsteadOf = https://ci.example/\n[url "https://alice@dev.azure.com/"]\n\tinsteadOf = https://dev.azure.com/\n' >> "$B/plain/.gitconfig-aliases"
    # a file in the workspace that ~/.gitconfig includes (a project's own)
    mkdir -p "$B/wsinc" && printf '[include]\n\tpath = %s/ws/.gitconfig-local\n' "$B" > "$B/wsinc/.gitconfig"
    printf '[github]\n\ttoken = WSTOKEN-%s\n' $who > "$B/ws/.gitconfig-local"
    [ $who = user ] && chown -R 65534:65534 "$B"
    for h in inc nest cont hex wsinc; do
        out=$(cd "$B/ws" && as $who HOME="$B/$h" "$P" run -- sh -c 'cat ~/.gitconfig ~/.gitconfig-work ~/dot/a ~/dot/b 2>/dev/null; [ ~/.gitconfig -ef ~/../wsinc/.gitconfig ] && cat .gitconfig-local' 2>&1)
        eq "$(echo "$out" | grep -c -e "INCTOKEN-$who" -e "NESTTOKEN-$who" -e "CONTPW-$who" -e "$HEXTOK" -e "WSTOKEN-$who")" 1 "control ($who, $h): the token is readable without the sandbox"
    done
    out=$(cd "$B/ws" && as $who HOME="$B/inc" "$P" run --safe -- sh -c 'cat ~/.gitconfig ~/.gitconfig-work 2>/dev/null; git config --global user.name; echo end' 2>"$B/err"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'holds a credential .*, or includes a file that does: it is kept from the command' "$B/err"):$(jq '[.warnings[] | select(test("holds a credential"))] | length' "$(bundle_of $who)")" \
        "0:end:2:2" "--safe ($who): a file ~/.gitconfig includes (~/) holding a token is absent, and ~/.gitconfig with it, each said"
    out=$(cd "$B/ws" && as $who HOME="$B/nest" "$P" run --safe -- sh -c 'cat ~/.gitconfig ~/dot/a ~/dot/b 2>/dev/null; git config --global user.name; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): a token two includes deep (includeIf, relative paths, a loop back) is absent, and each file that includes it"
    out=$(cd "$B/ws" && as $who HOME="$B/cont" "$P" run --safe -- sh -c 'cat ~/.gitconfig 2>/dev/null; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): a password on a continued line (url = https://alice:\\ then the rest) is found, the file absent"
    out=$(cd "$B/ws" && as $who HOME="$B/hex" "$P" run --safe -- sh -c 'cat ~/.gitconfig 2>/dev/null; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): a URL whose user is a classic 40-hex GitHub token is found, the file absent"
    out=$(cd "$B/ws" && as $who HOME="$B/wsinc" "$P" run --safe -- sh -c 'cat .gitconfig-local 2>/dev/null; ls -A; echo end' 2>/dev/null); rc=$?
    eq "$rc:$(echo $out)" "0:end" "--safe ($who): a file in the workspace that ~/.gitconfig includes, holding a token, is absent from the workspace's view"
    out=$(cd "$B/ws" && as $who HOME="$B/plain" "$P" run --safe -- sh -c 'git config --global user.name; git config --includes --global alias.st; git config --global alias.lg; git config --includes --global --get-regexp "^url\..*\.insteadof$" | wc -l' 2>"$B/err2"); rc=$?
    eq "$rc:$(echo $out):$(grep -c 'holds a credential' "$B/err2")" "0:Ida status log --graph --oneline 3:0" \
        "--safe ($who): an include of a harmless file, a continued alias, URLs with user names (first.last, build-agent-2024-prod-eu, alice) stay, no warning"
done

# A token in the workspace's own .git/config (a clone made with one, a CI
# checkout's remote URL): the workspace is the command's to read, git
# needs the file, so it is not hidden, but said (stderr and the Bundle),
# naming what to do; a config without one says nothing (found by a
# red-team pass: the same line was hidden in ~/.gitconfig, silently
# readable here).
if command -v git >/dev/null; then
    for who in root user; do
        no_user $who "the workspace's .git/config holding a credential as an ordinary user" && continue
        B=$T/wsgit-$who; mkdir -p "$B/tok" "$B/plain" "$B/home"
        (cd "$B/tok" && git init -q . && git remote add origin "https://x-access-token:WSTOKEN-$who@github.com/o/r.git")
        (cd "$B/plain" && git init -q . && git remote add origin https://github.com/o/r.git && git remote add up ssh://git@github.com/o/r.git)
        [ $who = user ] && chown -R 65534:65534 "$B"
        out=$(cd "$B/tok" && as $who HOME="$B/home" "$P" run --safe -- git remote get-url origin 2>"$B/err"); rc=$?
        eq "$rc:$(echo "$out" | grep -c "WSTOKEN-$who"):$(grep -c "^pvisor run: warning: $B/tok/.git/config holds a credential .*the command can read it, as it reads everything in the workspace; .*git remote set-url" "$B/err"):$(jq '[.warnings[] | select(test("git/config holds a credential"))] | length' "$(bundle_of $who)")" \
            "0:1:1:1" "--safe ($who): a token in the workspace's .git/config is readable (the workspace is the command's), and said on stderr and in the Bundle"
        out=$(cd "$B/plain" && as $who HOME="$B/home" "$P" run --safe -- git remote get-url origin 2>"$B/err"); rc=$?
        eq "$rc:$out:$(grep -c 'holds a credential' "$B/err")" "0:https://github.com/o/r.git:0" \
            "--safe ($who): a workspace whose remotes hold no credential: no warning"
    done
else
    skip "the workspace's .git/config holding a credential" "git is not installed"
fi
