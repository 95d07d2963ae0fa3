#!/bin/sh
# Red-team regressions (TAP): a credential location --safe keeps from the
# command must stay absent whatever name or projection shows it: HOME by
# another path (a bind mount) as the workspace or in a grant, and the
# stores the user's environment moves. As root and as an ordinary user.
# Needs $PVISOR, $PVAGENT.
. "$(dirname "$0")/../lib.sh"
cd "$T"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR

# as WHO ...: run as root (env) or as uid 65534 with its own state
# directory; returns 1 (and skips) when the ordinary user is not possible.
can_user() { [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; }
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
mkdir -p "$T/state-user"
can_user && chown 65534:65534 "$T/state-user"

# --- HOME by another name: a bind mount of it -------------------------------
# /home/alice also at /srv/alice (or /home at /mnt/data/home, a btrfs
# subvolume reached from the pool's top): the masks and covers named
# HOME's credential locations by HOME's path only, so the workspace view
# at the other name, and a grant of it, showed ~/.ssh (home_credentials
# said enforced). The workspace and grants are compared with HOME and its
# parents by identity; a home found there by another name is kept as the
# passwd home is.
NPMRC=.nvm/versions/node/v20.0.0/etc/npmrc
for who in root user; do
    if [ $who = user ] && ! can_user; then
        skip "HOME by another name as an ordinary user" "needs root to switch to an unprivileged user"
        continue
    fi
    B=$T/bind-$who
    mkdir -p "$B/home/.ssh" "$B/home/proj" "$B/alias" "$B/ws" "$B/up"
    echo "BINDKEY-$who" > "$B/home/.ssh/id_ed25519"
    echo "notes-$who" > "$B/home/notes"
    # a store the environment moves in HOME (a node toolchain's npmrc)
    mkdir -p "$B/home/.nvm/versions/node/v20.0.0/etc"
    echo "NPMKEY-$who" > "$B/home/.nvm/versions/node/v20.0.0/etc/npmrc"
    [ $who = user ] && chown -R 65534:65534 "$B"
    if ! mount --bind "$B/home" "$B/alias" 2>/dev/null || ! mount --bind "$B" "$B/up" 2>/dev/null; then
        skip "HOME by another name ($who)" "cannot bind-mount here"
        continue
    fi
    at_exit "umount '$B/up' '$B/alias'"
    out=$(cd "$B/alias" && as $who HOME="$B/home" "$P" run -- sh -c 'cat .ssh/id_ed25519 notes' 2>&1)
    eq "$(echo $out)" "BINDKEY-$who notes-$who" "control ($who): HOME's key is readable through the bind mount"
    out=$(cd "$B/alias" && as $who HOME="$B/home" "$P" run --safe -- sh -c 'cat .ssh/id_ed25519 2>/dev/null; cat notes; echo end' 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:notes-$who end" \
        "--safe ($who): the workspace that is HOME by another name masks its credential locations"
    out=$(cd "$B/ws" && as $who HOME="$B/home" "$P" run --safe --access "ro:$B/alias" --access "ro:$B/up" -- \
        sh -c "cat $B/alias/.ssh/id_ed25519 $B/up/home/.ssh/id_ed25519 2>/dev/null; cat $B/alias/notes $B/up/home/notes; echo end
               cat $B/alias/$NPMRC $B/up/home/$NPMRC 2>/dev/null" 2>"$B/alias.err"); rc=$?
    eq "$rc:$(echo $out)" "0:notes-$who notes-$who end" \
        "--safe ($who): a grant of HOME, or of a parent of it, by another name covers its credential locations (a moved store's too)"
    # the locations missing at start are not covered there (one the host
    # creates during the run is readable), as in a grant of HOME's own
    # name: partial, said (it said enforced: found by a red-team pass)
    eq "$(jq -r '.dimensions.home_credentials.effective' "$(bundle_of $who)" 2>&1):$(grep -c 'that did not exist at start' "$B/alias.err")" "partial:1" \
        "... and home_credentials is partial, said: the locations missing at start are not covered there"
    out=$(cd "$B/ws" && as $who HOME="$B/home" "$P" run --safe --access "ro:$B/alias/.ssh" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'reaches the credential location')" "2:1" \
        "--safe ($who): a grant of ~/.ssh by another name is refused"
    out=$(cd "$B/alias/.ssh" && as $who HOME="$B/home" "$P" run --safe -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'is in the credential location')" "2:1" \
        "--safe ($who): a workspace in ~/.ssh by another name is refused"
    # HOME by another name below the workspace or a grant (a bind mount of
    # /home/alice at /srv/alice, /srv granted): the walk to the workspace
    # and the grants did not meet it, and ~/.ssh was shown there
    mkdir -p "$B/par/alice" && [ $who = user ] && chown -R 65534:65534 "$B/par"
    if mount --bind "$B/home" "$B/par/alice" 2>/dev/null; then
        at_exit "umount '$B/par/alice'"
        out=$(cd "$B/ws" && as $who HOME="$B/home" "$P" run --safe --access "ro:$B/par" -- \
            sh -c "cat $B/par/alice/.ssh/id_ed25519 $B/par/alice/$NPMRC 2>/dev/null; cat $B/par/alice/notes; echo end" 2>/dev/null); rc=$?
        eq "$rc:$(echo $out)" "0:notes-$who end" \
            "--safe ($who): a grant of a directory holding HOME by another name (a mount) covers its credential locations"
        out=$(cd "$B/par" && as $who HOME="$B/home" "$P" run --safe -- \
            sh -c "cat alice/.ssh/id_ed25519 alice/$NPMRC 2>/dev/null; cat alice/notes; echo end" 2>&1); rc=$?
        eq "$rc:$(echo $out)" "0:notes-$who end" \
            "--safe ($who): a workspace holding HOME by another name (a mount) masks its credential locations"
    else
        skip "HOME by another name below a grant ($who)" "cannot bind-mount here"
    fi
done

# --- RubyGems' API key where RubyGems 3.3 on writes it ----------------------
# `gem signin` writes ~/.local/share/gem/credentials ($XDG_DATA_HOME/gem)
# when ~/.gem/credentials does not exist: the list named only the latter,
# so a fresh account's key was readable in HOME's view.
H3=$T/home-gem W3=$T/ws-gem
mkdir -p "$H3/.local/share/gem/ruby/3.3.0/bin" "$H3/xdata/gem" "$W3"
echo "rubygems_GEMKEY" > "$H3/.local/share/gem/credentials"
echo "rubygems_XDGKEY" > "$H3/xdata/gem/credentials"
echo tool > "$H3/.local/share/gem/ruby/3.3.0/bin/rake"
reads3='cat ~/.local/share/gem/credentials ~/xdata/gem/credentials 2>/dev/null; cat ~/.local/share/gem/ruby/3.3.0/bin/rake; echo end'
out=$(cd "$W3" && HOME="$H3" XDG_DATA_HOME="$H3/xdata" "$P" run -- sh -c "$reads3" 2>&1)
eq "$(echo $out)" "rubygems_GEMKEY rubygems_XDGKEY tool end" "control: both gem credential files are readable without the sandbox"
out=$(cd "$W3" && HOME="$H3" XDG_DATA_HOME="$H3/xdata" "$P" run --safe -- sh -c "$reads3" 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:tool end" \
    "--safe: RubyGems' XDG credentials are absent (by default and where XDG_DATA_HOME moves them); user-installed gems stay"

# --- stores moved by the variables of listed tools --------------------------
# zsh's history under ZDOTDIR (an XDG setup: ZDOTDIR=~/.config/zsh, with
# prezto's .zhistory or grml's .zsh_history there), sops' age key where
# SOPS_AGE_KEY_FILE names it, hub's and glab's tokens, IPython's history,
# Databricks' and Bitwarden CLI's stores: the environment named them, and
# --safe showed them (only HISTFILE and the XDG bases were followed). As
# root and as an ordinary user; one store lies outside HOME, in a grant.
for who in root user; do
    if [ $who = user ] && ! can_user; then
        skip "moved stores as an ordinary user" "needs root to switch to an unprivileged user"
        continue
    fi
    H4=$T/home-mv-$who W4=$T/ws-mv-$who G4=$T/grant-mv-$who
    mkdir -p "$H4/.config/zsh" "$H4/.config/hubx" "$H4/glab" "$H4/ipy/profile_default" "$H4/bw" "$W4" "$G4/keys"
    echo "ZHIST-$who" > "$H4/.config/zsh/.zhistory"
    echo "ZSHHIST-$who" > "$H4/.config/zsh/.zsh_history"
    echo "zshrc-$who" > "$H4/.config/zsh/.zshrc"
    echo "AGEKEY-$who" > "$G4/keys/age.txt"
    echo "other-$who" > "$G4/other"
    echo "HUBTOKEN-$who" > "$H4/.config/hubx/hub"
    echo "GLABTOKEN-$who" > "$H4/glab/config.yml"
    echo "IPYHIST-$who" > "$H4/ipy/profile_default/history.sqlite"
    echo "DBTOKEN-$who" > "$H4/dbcfg"
    echo "BWVAULT-$who" > "$H4/bw/data.json"
    [ $who = user ] && chown -R 65534:65534 "$H4" "$W4" "$G4"
    env4="HOME=$H4 ZDOTDIR=$H4/.config/zsh SOPS_AGE_KEY_FILE=$G4/keys/age.txt HUB_CONFIG=$H4/.config/hubx/hub
          GLAB_CONFIG_DIR=$H4/glab IPYTHONDIR=$H4/ipy DATABRICKS_CONFIG_FILE=$H4/dbcfg BITWARDENCLI_APPDATA_DIR=$H4/bw"
    reads4="cat ~/.config/zsh/.zhistory ~/.config/zsh/.zsh_history $G4/keys/age.txt ~/.config/hubx/hub ~/glab/config.yml \
            ~/ipy/profile_default/history.sqlite ~/dbcfg ~/bw/data.json 2>/dev/null; cat ~/.config/zsh/.zshrc $G4/other; echo end"
    # shellcheck disable=SC2086
    out=$(cd "$W4" && as $who $env4 "$P" run -- sh -c "$reads4" 2>&1)
    eq "$(echo $out)" "ZHIST-$who ZSHHIST-$who AGEKEY-$who HUBTOKEN-$who GLABTOKEN-$who IPYHIST-$who DBTOKEN-$who BWVAULT-$who zshrc-$who other-$who end" \
        "control ($who): every moved store is readable without the sandbox"
    # shellcheck disable=SC2086
    out=$(cd "$W4" && as $who $env4 "$P" run --safe --access "ro:$G4" -- sh -c "$reads4" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:zshrc-$who other-$who end" \
        "--safe ($who): the stores those variables name are absent (in HOME's view and in a grant); zsh's startup files stay"
    eq "$(jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.moved_credential_locations >= 10)"' "$(bundle_of $who)" 2>&1)" \
        "enforced true" "... and the Bundle counts the ten moved locations (ZDOTDIR's three among them)"
done

# --- package managers' and other tools' stores, npm's config in toolchains --
# Poetry's auth.toml, Bundler's global config, sbt's and Ivy's credentials
# (and sbt's global settings, which may hold them inline),
# helm's registry logins and repositories, davfs2's secrets, FileZilla's
# servers, pip's user config, uv's and pyx's credential stores, rclone's
# old config file; the variables that move them (and npm's global config:
# NPM_CONFIG_GLOBALCONFIG, NPM_CONFIG_PREFIX); and npm's global config in
# each version of a node toolchain ($PREFIX/etc/npmrc: nvm's, nodenv's,
# asdf's, volta's, fnm's, mise's in HOME, and NVM_DIR outside HOME, which
# the run projects whole). --safe showed them all. The configuration next
# to them stays. As root and as an ordinary user; some moved stores lie
# outside HOME, in a grant.
for who in root user; do
    if [ $who = user ] && ! can_user; then
        skip "tools' stores as an ordinary user" "needs root to switch to an unprivileged user"
        continue
    fi
    H5=$T/home-tools-$who W5=$T/ws-tools-$who G5=$T/grant-tools-$who N5=$T/nvm-$who
    mkdir -p "$W5" "$G5/uvcred" "$N5/versions/node/v22.0.0/etc" "$N5/versions/node/v22.0.0/bin"
    secrets5=""
    secret() { # PATH: a secret file there (made with its parents), read by the command
        mkdir -p "$(dirname "$1")"; echo "SECRET-$who" > "$1"; secrets5="$secrets5 $1"
    }
    for f in .config/pypoetry/auth.toml .bundle/config .ivy2/.credentials .sbt/.credentials \
        .sbt/1.0/credentials.sbt .sbt/1.0/global.sbt .config/helm/registry/config.json .config/helm/repositories.yaml \
        .davfs2/secrets .config/filezilla/sitemanager.xml .config/filezilla/recentservers.xml \
        .config/pip/pip.conf .pip/pip.conf .local/share/uv/credentials/credentials.toml \
        .local/share/pyx/credentials/0123abcd/tokens.json .rclone.conf .config/rclone/rclone.conf \
        .nvm/versions/node/v20.1.0/etc/npmrc .nodenv/versions/20.1.0/etc/npmrc \
        .asdf/installs/nodejs/20.1.0/etc/npmrc .volta/tools/image/node/20.1.0/etc/npmrc \
        .local/share/fnm/node-versions/v20.1.0/installation/etc/npmrc \
        .local/share/mise/installs/node/20.1.0/etc/npmrc \
        .sdkman/candidates/maven/3.9.6/conf/settings.xml .asdf/installs/maven/3.9.6/conf/settings.xml \
        .local/share/mise/installs/maven/3.9.6/conf/settings.xml nprefix/etc/npmrc mvnhome/conf/settings.xml \
        poetry/auth.toml bundlecfg sbtcreds npmprefix/etc/npmrc; do
        secret "$H5/$f"
    done
    for f in globalnpmrc pip.conf uvcred/credentials.toml helmreg.json; do secret "$G5/$f"; done
    secret "$N5/versions/node/v22.0.0/etc/npmrc"
    keeps5=""
    for f in .config/pypoetry/config.toml .bundle/cache/keep .ivy2/cache/keep .sbt/repositories \
        .davfs2/davfs2.conf .config/filezilla/filezilla.xml .local/share/uv/tools/keep \
        .nvm/versions/node/v20.1.0/bin/node .sdkman/candidates/maven/3.9.6/conf/toolchains.xml; do
        mkdir -p "$(dirname "$H5/$f")"; echo "keep" > "$H5/$f"; keeps5="$keeps5 $H5/$f"
    done
    echo keep > "$N5/versions/node/v22.0.0/bin/node"; echo keep > "$G5/other"
    keeps5="$keeps5 $N5/versions/node/v22.0.0/bin/node $G5/other"
    [ $who = user ] && chown -R 65534:65534 "$H5" "$W5" "$G5" "$N5"
    env5="HOME=$H5 NVM_DIR=$N5 NPM_CONFIG_GLOBALCONFIG=$G5/globalnpmrc PIP_CONFIG_FILE=$G5/pip.conf
          UV_CREDENTIALS_DIR=$G5/uvcred HELM_REGISTRY_CONFIG=$G5/helmreg.json POETRY_CONFIG_DIR=$H5/poetry
          BUNDLE_USER_CONFIG=$H5/bundlecfg SBT_CREDENTIALS=$H5/sbtcreds npm_config_prefix=$H5/npmprefix
          N_PREFIX=$H5/nprefix MAVEN_HOME=$H5/mvnhome"
    reads5="cat $secrets5 2>/dev/null; cat $keeps5; echo end"
    n5=$(echo $secrets5 | wc -w)
    # shellcheck disable=SC2086
    out=$(cd "$W5" && as $who $env5 "$P" run -- sh -c "$reads5" 2>&1)
    eq "$(echo $out | grep -o "SECRET-$who" | wc -l):$(echo $out | grep -o keep | wc -l)" "$n5:11" \
        "control ($who): the $n5 secrets and the configuration next to them are readable without the sandbox"
    # shellcheck disable=SC2086
    out=$(cd "$W5" && as $who $env5 "$P" run --safe --access "ro:$G5" -- sh -c "$reads5" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:keep keep keep keep keep keep keep keep keep keep keep end" \
        "--safe ($who): the tools' stores are absent (in HOME's view, in a grant, in a projected toolchain); their configuration stays"
    eq "$(jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.moved_credential_locations >= 15)"' "$(bundle_of $who)" 2>&1)" \
        "enforced true" "... and the Bundle counts the moved locations and the toolchains' npmrc files"
    # shellcheck disable=SC2086
    out=$(cd "$W5" && as $who $env5 "$P" run --safe --access "ro:$N5/versions/node/v22.0.0/etc" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "npm's global config in a node toolchain")" "0:0" \
        "--safe ($who): a grant of the directory that holds a toolchain's npmrc is allowed (the file is covered)"
    # shellcheck disable=SC2086
    out=$(cd "$W5" && as $who $env5 "$P" run --safe --access "ro:$N5/versions/node/v22.0.0/etc/npmrc" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "npm's global config in a node toolchain")" "2:1" \
        "--safe ($who): a grant of a toolchain's npmrc is refused, saying what it is"
    # shellcheck disable=SC2086
    out=$(cd "$W5" && as $who $env5 "$P" run --safe --access "ro:$H5/.sdkman/candidates/maven/3.9.6/conf/settings.xml" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "Maven's global settings in a Maven toolchain")" "2:1" \
        "--safe ($who): a grant of a Maven toolchain's settings.xml is refused, saying what it is"
done

# --- the caller's home under doas and pkexec --------------------------------
# As root under sudo (and run0), SUDO_UID names the caller whose home is
# kept from the command (often the workspace). doas names the caller in
# DOAS_USER and pkexec in PKEXEC_UID: a run there, in the caller's home,
# showed their keys. With a private /etc/passwd naming the caller's home
# in $T.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    RH=$T/callerhome; mkdir -p "$RH/.ssh"; echo CALLERKEY > "$RH/.ssh/id_rsa"; echo n > "$RH/notes"
    { printf 'pvcaller:x:4322:4322::%s:/bin/sh\n' "$RH"; cat /etc/passwd; } > "$T/passwd-caller"
    callerrun() { # VAR=VALUE: the command's output, run in $RH as root with HOME=/root
        unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/passwd || exit 77
            cd "$2" && env HOME=/root "$3" "$4" run --safe -- sh -c "cat notes; cat .ssh/id_rsa 2>/dev/null || echo absent"' \
            sh "$T/passwd-caller" "$RH" "$1" "$P" 2>&1
    }
    eq "$(echo $(callerrun X=1))" "n CALLERKEY" "control: as root with no caller named, a workspace that is another user's home shows its keys"
    eq "$(echo $(callerrun DOAS_USER=pvcaller))" "n absent" "--safe under doas: the caller's home (DOAS_USER) has its credential locations absent"
    eq "$(echo $(callerrun PKEXEC_UID=4322))" "n absent" "--safe under pkexec: the caller's home (PKEXEC_UID) has its credential locations absent"
else
    skip "--safe under doas and pkexec" "needs root and unshare (a private /etc/passwd)"
fi

# --- a workspace that holds HOME under several names -------------------------
# Each name of HOME in the workspace adds its ~130 credential locations to
# what the workspace view masks: five names passed the view's limit (512)
# and the run was refused with "Argument list too long". The limit holds
# every name pvisor keeps (PLAN_OTHER_HOMES), and past it the refusal says
# why.
if [ "$(id -u)" -eq 0 ]; then
    B6=$T/many; mkdir -p "$B6/home/.ssh" "$B6/ws"; echo MANYKEY > "$B6/home/.ssh/id_rsa"
    ok6=1
    for k in 1 2 3 4 5 6; do
        mkdir -p "$B6/ws/h$k" && mount --bind "$B6/home" "$B6/ws/h$k" || ok6=0
    done
    at_exit "for k in 1 2 3 4 5 6; do umount '$B6/ws/h'\$k 2>/dev/null; done"
    if [ $ok6 = 1 ]; then
        out=$(cd "$B6/ws" && HOME="$B6/home" "$P" run --safe -- sh -c 'cat h1/.ssh/id_rsa h6/.ssh/id_rsa 2>/dev/null; echo end' 2>&1); rc=$?
        eq "$rc:$(echo $out)" "0:end" "--safe in a workspace holding HOME under six names: runs, the keys absent under each"
    else
        not_ok "bind mounts of HOME for the many-names case"
    fi
    for k in 1 2 3 4 5 6; do umount "$B6/ws/h$k" 2>/dev/null; done
else
    skip "a workspace holding HOME under several names" "needs root (bind mounts)"
fi

# --- mounts of credential locations, and of the workspace ----------------------
# A bind mount of ~/.ssh into the workspace or a grant, of ~/.netrc into the
# workspace, of ~/.ssh/id_rsa at ~/k: each showed the key while
# home_credentials said enforced; a bind mount of the workspace in an
# --access rw: grant let the command write the real workspace past the
# stage while workspace_writes said enforced; a grant of a bind mount of
# HOME hid the locations missing at start from --strict (found by a
# red-team pass). Each mount of HOME's file system whose root is or holds
# a credential location, and each of the workspace's, is kept from the
# command where it shows (covered, masked); the grant's missing ones count.
if [ "$(id -u)" -eq 0 ]; then
    for who in root user; do
        if [ $who = user ] && ! can_user; then
            skip "mounts of credential locations as an ordinary user" "needs setpriv"
            continue
        fi
        B=$T/bm-$who
        mkdir -p "$B/h/.ssh" "$B/ws/keys" "$B/g/k" "$B/g/wsalias" "$B/g/hb"
        echo "KEY-$who" > "$B/h/.ssh/id_rsa"; echo "NETRC-$who" > "$B/h/.netrc"; echo orig > "$B/ws/file"
        : > "$B/ws/netrc"; : > "$B/h/k"
        [ $who = user ] && chown -R 65534:65534 "$B"
        if ! mount --bind "$B/h/.ssh" "$B/ws/keys" 2>/dev/null; then
            skip "mounts of credential locations ($who)" "cannot bind-mount here"
            continue
        fi
        mount --bind "$B/h/.netrc" "$B/ws/netrc"; mount --bind "$B/h/.ssh" "$B/g/k"
        mount --bind "$B/h/.ssh/id_rsa" "$B/h/k"; mount --bind "$B/ws" "$B/g/wsalias"; mount --bind "$B/h" "$B/g/hb"
        at_exit "umount '$B/ws/keys' '$B/ws/netrc' '$B/g/k' '$B/h/k' '$B/g/wsalias' '$B/g/hb' 2>/dev/null"
        reads="cat keys/id_rsa netrc ~/k $B/g/k/id_rsa 2>/dev/null; (echo x > $B/g/wsalias/file) 2>/dev/null && echo wrote; echo end"
        out=$(cd "$B/ws" && as $who HOME="$B/h" "$P" run -- sh -c "$reads" 2>&1)
        eq "$(echo $out)" "KEY-$who NETRC-$who KEY-$who KEY-$who wrote end" \
            "control ($who): the mounts show the keys, and the workspace's other name writes it, without the sandbox"
        echo orig > "$B/ws/file"
        out=$(cd "$B/ws" && as $who HOME="$B/h" "$P" run --safe --access "rw:$B/g" -- sh -c "$reads" 2>/dev/null); rc=$?
        eq "$rc:$(echo $out):$(cat "$B/ws/file"):$(jq -r '.dimensions.home_credentials.effective' "$(bundle_of $who)")" \
            "0:end:orig:partial" \
            "--safe ($who): mounts of ~/.ssh, ~/.netrc, ~/.ssh/id_rsa in the workspace, HOME and a grant are absent, the workspace's in the grant is not writable (partial: the grant holds HOME's bind mount)"
        out=$(cd "$B/ws" && as $who HOME="$B/h" "$P" run --safe --strict --access "ro:$B/g/hb" -- true 2>&1); rc=$?
        eq "$rc:$(echo "$out" | grep -c 'home_credentials is partial: a grant of --access/--allow-write holds')" "125:1" \
            "--safe --strict ($who): a grant of a bind mount of HOME, whose missing credential locations nothing covers, is refused"
        umount "$B/ws/keys" "$B/ws/netrc" "$B/g/k" "$B/h/k" "$B/g/wsalias" "$B/g/hb"
    done
else
    skip "mounts of credential locations" "needs root (bind mounts)"
fi
