#!/bin/sh
# Red-team regressions (TAP): credential locations of browsers and mail
# clients packaged as snaps or flatpaks are absent in HOME's view, and
# pvisor's own state inside a sandboxed run's workspace is refused.
# Needs $PVISOR, $PVAGENT.
. "$(dirname "$0")/../lib.sh"
cd "$T"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR
W=$T/ws; mkdir -p "$W"; echo w > "$W/file"

# --- profiles and keys at their packaged locations --------------------------
H=$T/home
for d in snap/firefox/common/.mozilla/firefox/p.default .var/app/com.google.Chrome/config/google-chrome/Default \
    .config/microsoft-edge/Default .thunderbird/m.default .config/sops/age; do
    mkdir -p "$H/$d"
done
echo FFSNAP > "$H/snap/firefox/common/.mozilla/firefox/p.default/logins.json"
echo CHROMEFLATPAK > "$H/.var/app/com.google.Chrome/config/google-chrome/Default/Cookies"
echo EDGE > "$H/.config/microsoft-edge/Default/Cookies"
echo TBIRD > "$H/.thunderbird/m.default/logins.json"
echo AGEKEY > "$H/.config/sops/age/keys.txt"
echo ZHIST > "$H/.histfile"
echo fine > "$H/snap/firefox/common/notes"
reads='cat ~/snap/firefox/common/.mozilla/firefox/p.default/logins.json ~/.var/app/com.google.Chrome/config/google-chrome/Default/Cookies ~/.config/microsoft-edge/Default/Cookies ~/.thunderbird/m.default/logins.json ~/.config/sops/age/keys.txt ~/.histfile ~/snap/firefox/common/notes 2>/dev/null; echo end'
out=$(cd "$W" && HOME="$H" "$P" run -- sh -c "$reads" 2>&1)
eq "$(echo $out)" "FFSNAP CHROMEFLATPAK EDGE TBIRD AGEKEY ZHIST fine end" "control: the profiles and keys are readable without the sandbox"
out=$(cd "$W" && HOME="$H" "$P" run --safe --stage "$T/st1" -- sh -c "$reads" 2>&1)
eq "$(echo $out)" "fine end" "--safe: snap and flatpak browser and mail profiles, age keys and ~/.histfile are absent; the rest of ~/snap stays readable"

# --- pvisor's state inside the workspace --------------------------------------
H2=$T/home2; mkdir -p "$H2"; echo n > "$H2/notes"
n0=$(run_count)
out=$(cd "$H2" && HOME="$H2" XDG_STATE_HOME="$H2/xstate" "$P" run --safe --stage "$T/st2" -- sh -c 'ls -A ~; echo ran' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c ran):$(echo "$out" | grep -c 'state directory .* is inside the workspace')" "2:0:1" \
    "--safe with XDG_STATE_HOME inside the workspace is refused (the command would see other runs' Bundles and stages)"
out=$(cd "$H2" && env -u XDG_STATE_HOME HOME="$H2" "$P" run --safe --stage "$T/st3" -- sh -c 'echo ran' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c ran):$(echo "$out" | grep -c 'set XDG_STATE_HOME')" "2:0:1" \
    "--safe with HOME the workspace and the default state directory says to set XDG_STATE_HOME (it failed at set-up)"
eq "$(run_count):$(ls -A "$H2" | tr '\n' ' ')" "$n0:notes " "... nothing recorded or created there"
out=$(cd "$H2" && HOME="$H2" "$P" run --safe --stage "$T/st4" -- sh -c 'cat notes' 2>&1); rc=$?
eq "$rc:$out" "0:n" "--safe with HOME the workspace and the state elsewhere runs"

# --- credential stores the environment moves ----------------------------------
# XDG_CONFIG_HOME, GNUPGHOME, CARGO_HOME, KUBECONFIG... name where a tool
# keeps its store: they were readable, as only the default places in HOME
# were masked. In HOME they are absent (also as the workspace); in a grant
# they are covered; a grant that reaches into one is refused.
H3=$T/home3; D3=$T/data3; W3=$T/ws3
mkdir -p "$H3/.xdgconf/gh" "$H3/.local/share/gnupg/private-keys-v1.d" "$H3/cargo" "$D3/kube" "$W3"
echo GHTOKEN > "$H3/.xdgconf/gh/hosts.yml"; echo GPGKEY > "$H3/.local/share/gnupg/private-keys-v1.d/A.key"
echo CARGOTOKEN > "$H3/cargo/credentials.toml"; echo KUBECREDS > "$D3/kube/config"; echo notes > "$H3/.xdgconf/notes"
moved() { env HOME="$H3" XDG_CONFIG_HOME="$H3/.xdgconf" GNUPGHOME="$H3/.local/share/gnupg" CARGO_HOME="$H3/cargo" \
    KUBECONFIG="$D3/kube/config:/nonexistent/config" "$@"; }
reads3='cat ~/.xdgconf/gh/hosts.yml ~/.local/share/gnupg/private-keys-v1.d/A.key ~/cargo/credentials.toml '"$D3"'/kube/config ~/.xdgconf/notes 2>/dev/null; echo end'
out=$(cd "$W3" && moved "$P" run -- sh -c "$reads3" 2>&1)
eq "$(echo $out)" "GHTOKEN GPGKEY CARGOTOKEN KUBECREDS notes end" "control: the moved stores are readable without the sandbox"
out=$(cd "$W3" && moved "$P" run --safe --access "ro:$D3" -- sh -c "$reads3" 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:notes end" "--safe: stores moved by XDG_CONFIG_HOME, GNUPGHOME, CARGO_HOME are absent, KUBECONFIG's in a grant covered"
eq "$(jq '.dimensions.home_credentials.evidence.moved_credential_locations > 3' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" true \
    "... and the Bundle counts the moved locations"
out=$(cd "$W3" && moved "$P" run --safe --access "ro:$D3/kube/config" -- true 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'moved there by the environment')" "125:1" "a grant of a moved store is refused"
out=$(cd "$H3" && moved "$P" run --safe --stage "$T/st5" -- sh -c 'cat .xdgconf/gh/hosts.yml cargo/credentials.toml .xdgconf/notes 2>/dev/null; (echo x > .xdgconf/gh/planted) 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out):$(ls "$T/st5/upper/.xdgconf/gh" 2>/dev/null)" "0:notes end:" \
    "--safe with HOME the workspace: the moved stores are absent there too, and nothing can be planted in them"

# A grant inside HOME shows the real directory on top of HOME's view, past
# the view's masks: a moved store in it is covered as a default one is
# (~/.xdgconf granted showed gh's token).
out=$(cd "$W3" && moved "$P" run --safe --access "ro:$H3/.xdgconf" -- sh -c 'cat ~/.xdgconf/gh/hosts.yml ~/.xdgconf/notes 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:notes end" "a grant inside HOME that holds a moved store: the store is covered there"
mkdir -p "$H3/dot/cfg/gh"; echo GHTOKEN2 > "$H3/dot/cfg/gh/hosts.yml"; ln -s dot/cfg "$H3/cfglink"
out=$(cd "$W3" && env HOME="$H3" XDG_CONFIG_HOME="$H3/cfglink" "$P" run --safe --access "rw:$H3/dot" -- sh -c 'cat ~/cfglink/gh/hosts.yml ~/dot/cfg/gh/hosts.yml 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:end" "... also when the variable names it through a symlink, and the grant is read-write"
# A value as the tool reads it: GnuPG expands '~/' in GNUPGHOME, and a
# relative value is the starting directory's (both were left unmasked).
out=$(cd "$W3" && env HOME="$H3" GNUPGHOME='~/.local/share/gnupg' "$P" run --safe -- sh -c 'cat ~/.local/share/gnupg/private-keys-v1.d/A.key 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:end" "a moved store named '~/...' is absent"
out=$(cd "$H3/.local/share" && env HOME="$H3" GNUPGHOME=gnupg "$P" run --safe --workspace "$W3" -- sh -c 'cat ~/.local/share/gnupg/private-keys-v1.d/A.key 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:end" "a moved store named relative to the starting directory is absent"
# More moved locations than the sandbox keeps track of: refused, not the
# ones past the limit dropped (CARGO_HOME's token after 130 kubeconfigs
# was readable in a grant).
mkdir -p "$D3/many"; kc=""
for i in $(seq 130); do echo k > "$D3/many/c$i"; kc="$kc$D3/many/c$i:"; done
out=$(cd "$W3" && env HOME="$H3" KUBECONFIG="$kc" CARGO_HOME="$H3/cargo" "$P" run --safe --access "ro:$H3/cargo" -- sh -c 'cat ~/cargo/credentials.toml 2>/dev/null; echo ran' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c ran):$(echo "$out" | grep -c 'more than 128 credential locations')" "125:0:1" \
    "more than 128 moved credential locations: the run is refused, none dropped"
