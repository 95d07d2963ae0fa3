#!/bin/sh
# Red-team regressions (TAP): credential locations of browsers and mail
# clients packaged as snaps or flatpaks are absent in HOME's view, and
# pvisor's own state inside a sandboxed run's workspace is refused; what a
# run wrote in HOME's view (discarded at exit) is said and recorded.
# Needs $PVISOR, $PVAGENT, $SRCDIR.
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

# HOME inside the workspace (not the workspace itself): the workspace view
# serves it, as docs/security-model.md says. An empty tmpfs was mounted on
# it instead, hiding that part of the workspace, while the Bundle said HOME
# writes were discarded (they are staged with the workspace's).
W2b=$T/ws2b; H2b=$W2b/home; mkdir -p "$H2b/.ssh"; echo n > "$H2b/notes"; echo WSKEY > "$H2b/.ssh/id_rsa"
out=$(cd "$W2b" && HOME="$H2b" "$P" run --safe --stage "$T/st-homeinws" -- \
    sh -c 'cat ~/notes; cat ~/.ssh/id_rsa 2>/dev/null; mkdir ~/.gnupg 2>/dev/null || echo sealed; echo w > ~/written' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:n sealed" \
    "--safe with HOME inside the workspace: HOME is the workspace view's (its files readable, credentials absent and sealed)"
eq "$(cd "$W2b" && HOME="$H2b" "$P" status --review --json "$T/st-homeinws" 2>/dev/null | jq -r '[.changeset.changes[].path] | join(" ")')" \
    "home/written" "... a write to HOME is staged with the workspace"
b="$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"
eq "$(jq -r '[.dimensions.home_credentials.evidence.home_in_workspace,
              (.dimensions.home_credentials.notes[0] | test("staged")),
              (.dimensions.host_writes.notes[0] | test("discarded at exit\\)$")),
              (.dimensions.reads.notes[0] | test("allowlisted"))] | map(tostring) | join(" ")' "$b")" \
    "true true true false" "... and the Bundle says so (HOME's writes staged, not discarded)"
# ... so a ~/.gitconfig the command writes there reaches the real one on
# apply (before, HOME's writes went to a tmpfs): git reads it in every
# repository (core.fsmonitor, core.hooksPath run commands), and the review
# listed it without a warning
out=$(cd "$W2b" && HOME="$H2b" "$P" run --safe --stage "$T/st-homeinws2" -- \
    sh -c 'printf "[core]\n\tfsmonitor = touch /tmp/x\n" > ~/.gitconfig; mkdir -p ~/.config/git; cp ~/.gitconfig ~/.config/git/config; cp ~/.gitconfig ~/other' 2>&1)
eq "$(cd "$W2b" && HOME="$H2b" "$P" status --review --json "$T/st-homeinws2" 2>/dev/null |
      jq -r '[.changeset.warnings[] | select(.warning == "git_config") | .path] | sort | join(" ")')" \
    "home/.config/git/config home/.gitconfig" "... the review warns of git's global config written in that HOME (git_config)"
# ... and of what a shell, a login or the desktop session runs from there
# (.bashrc, .profile, fish's config, an autostart entry, a systemd user
# unit, environment.d): the next terminal the user opens runs it
out=$(cd "$W2b" && HOME="$H2b" "$P" run --safe --stage "$T/st-homeinws3" -- \
    sh -c 'echo "curl x | sh" >> ~/.bashrc; echo x >> ~/.profile; mkdir -p ~/.config/fish ~/.config/autostart ~/.config/systemd/user ~/.config/environment.d;
           echo x > ~/.config/fish/config.fish; echo x > ~/.config/autostart/a.desktop; echo x > ~/.config/systemd/user/a.service;
           echo LD_PRELOAD=x > ~/.config/environment.d/a.conf; echo x > ~/.bashrc.bak; echo x > ~/notes' 2>&1)
eq "$(cd "$W2b" && HOME="$H2b" "$P" status --review --json "$T/st-homeinws3" 2>/dev/null |
      jq -r '[.changeset.warnings[] | select(.warning == "home_startup") | .path] | sort | join(" ")')" \
    "home/.bashrc home/.config/autostart/a.desktop home/.config/environment.d/a.conf home/.config/fish/config.fish home/.config/systemd/user/a.service home/.profile" \
    "... and of the files a shell, a login or the session runs there (home_startup), not of others"
# ... also ~/.bash_aliases (Debian's .bashrc sources it), fish's autoloaded
# completions, and a startup file that is a link into the workspace (a
# dotfile manager's ~/.bashrc -> dotfiles/bashrc), whose change is listed
# where it leads
mkdir -p "$H2b/dotfiles"; echo "# rc" > "$H2b/dotfiles/bashrc"; ln -s dotfiles/bashrc "$H2b/.bashrc"
out=$(cd "$W2b" && HOME="$H2b" "$P" run --safe --stage "$T/st-homeinws4" -- \
    sh -c 'echo "curl x | sh" >> ~/.bashrc; echo x > ~/.bash_aliases; mkdir -p ~/.config/fish/completions; echo x > ~/.config/fish/completions/git.fish' 2>&1)
eq "$(cd "$W2b" && HOME="$H2b" "$P" status --review --json "$T/st-homeinws4" 2>/dev/null |
      jq -r '[.changeset.warnings[] | select(.warning == "home_startup") | .path] | sort | join(" ")')" \
    "home/.bash_aliases home/.config/fish/completions/git.fish home/dotfiles/bashrc" \
    "... and of ~/.bash_aliases, fish's completions, and a startup file linked into the workspace"
rm "$H2b/.bashrc"

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
eq "$rc:$(echo "$out" | grep -c 'moved there by the environment: KUBECONFIG names it')" "2:1" "a grant of a moved store is refused (usage), naming the variable that moved it"
out=$(cd "$H3" && moved "$P" run --safe --stage "$T/st5" -- sh -c 'cat .xdgconf/gh/hosts.yml cargo/credentials.toml .xdgconf/notes 2>/dev/null; (echo x > .xdgconf/gh/planted) 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out):$(ls "$T/st5/upper/.xdgconf/gh" 2>/dev/null)" "0:notes end:" \
    "--safe with HOME the workspace: the moved stores are absent there too, and nothing can be planted in them"

# A grant inside HOME shows the real directory on top of HOME's view, past
# the view's masks: a moved store in it is covered as a default one is
# (~/.xdgconf granted showed gh's token).
out=$(cd "$W3" && moved "$P" run --safe --access "ro:$H3/.xdgconf" -- sh -c 'cat ~/.xdgconf/gh/hosts.yml ~/.xdgconf/notes 2>/dev/null; echo end' 2>&1); rc=$?
out=$(echo "$out" | grep -v "warning: a grant of --access/--allow-write holds")  # partial: told below
eq "$rc:$(echo $out)" "0:notes end" "a grant inside HOME that holds a moved store: the store is covered there"
mkdir -p "$H3/dot/cfg/gh"; echo GHTOKEN2 > "$H3/dot/cfg/gh/hosts.yml"; ln -s dot/cfg "$H3/cfglink"
out=$(cd "$W3" && env HOME="$H3" XDG_CONFIG_HOME="$H3/cfglink" "$P" run --safe --access "rw:$H3/dot" -- sh -c 'cat ~/cfglink/gh/hosts.yml ~/dot/cfg/gh/hosts.yml 2>/dev/null; echo end' 2>&1); rc=$?
out=$(echo "$out" | grep -v "warning: a grant of --access/--allow-write holds")  # partial: told below
eq "$rc:$(echo $out)" "0:end" "... also when the variable names it through a symlink, and the grant is read-write"
# A value as the tool reads it: GnuPG expands '~/' in GNUPGHOME, and a
# relative value is the starting directory's (both were left unmasked).
out=$(cd "$W3" && env HOME="$H3" GNUPGHOME='~/.local/share/gnupg' "$P" run --safe -- sh -c 'cat ~/.local/share/gnupg/private-keys-v1.d/A.key 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:end" "a moved store named '~/...' is absent"
out=$(cd "$H3/.local/share" && env HOME="$H3" GNUPGHOME=gnupg "$P" run --safe --workspace "$W3" -- sh -c 'cat ~/.local/share/gnupg/private-keys-v1.d/A.key 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$(echo $out)" "0:end" "a moved store named relative to the starting directory is absent"
# More moved locations than the sandbox keeps track of: refused, not the
# ones past the limit dropped (CARGO_HOME's token after 130 kubeconfigs
# was readable in a grant; the limit is 512 now).
mkdir -p "$D3/many"; kc=""
for i in $(seq 515); do echo k > "$D3/many/c$i"; kc="$kc$D3/many/c$i:"; done
out=$(cd "$W3" && env HOME="$H3" KUBECONFIG="$kc" CARGO_HOME="$H3/cargo" "$P" run --safe --access "ro:$H3/cargo" -- sh -c 'cat ~/cargo/credentials.toml 2>/dev/null; echo ran' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c ran):$(echo "$out" | grep -c 'more than 512 credential locations')" "125:0:1" \
    "more than 512 moved credential locations: the run is refused, none dropped"

# --- moved stores named with '~', relatively, or below a missing parent -------
# gpg expands '~' in GNUPGHOME, botocore in AWS_SHARED_CREDENTIALS_FILE
# (a value quoted in a profile keeps it); a relative KUBECONFIG is the
# working directory's: they were readable (only absolute values counted).
# A store whose parents the host creates during the run is masked too.
H4=$T/home4; W4=$T/ws4
mkdir -p "$H4/.gnupg-work/private-keys-v1.d" "$H4/aws" "$W4"
echo GPGWORK > "$H4/.gnupg-work/private-keys-v1.d/A.key"; echo AWSCREDS > "$H4/aws/creds"
echo KUBEREL > "$W4/kubeconfig.yaml"; echo w > "$W4/file"
moved4() { env HOME="$H4" GNUPGHOME='~/.gnupg-work' AWS_SHARED_CREDENTIALS_FILE='~/aws/creds' KUBECONFIG=kubeconfig.yaml \
    PASSWORD_STORE_DIR="$H4/later/store/" "$@"; }
rm -rf "$H4/later" "$W4/go"
(
    i=0; while [ ! -e "$W4/ready" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
    mkdir -p "$H4/later/store"; echo PASSENTRY > "$H4/later/store/e.gpg"; touch "$W4/go"
) &
writer=$!
reads4='touch ready; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
    cat ~/.gnupg-work/private-keys-v1.d/A.key ~/aws/creds kubeconfig.yaml ~/later/store/e.gpg file 2>/dev/null; echo end'
out=$(cd "$W4" && moved4 "$P" run --safe --stage "$T/st6" -- sh -c "$reads4" 2>&1); rc=$?
wait $writer
eq "$rc:$(echo $out)" "0:w end" \
    "--safe: stores moved by '~/...' and relative values, and one whose parents the host creates during the run, are absent"
rm -f "$W4/ready" "$W4/go"
out=$(cd "$W4" && moved4 "$P" run -- sh -c 'cat ~/.gnupg-work/private-keys-v1.d/A.key ~/aws/creds kubeconfig.yaml' 2>&1)
eq "$(echo $out)" "GPGWORK AWSCREDS KUBEREL" "control: they are readable without the sandbox"

# --- a workspace that is or lies in a credential location ----------------------
# The workspace view masked only what lay below the workspace: run in ~/.ssh
# (or where it links, or in GNUPGHOME), the agent read the keys and the
# Bundle said home_credentials enforced; what it wrote reached them on apply.
H5=$T/home5
mkdir -p "$H5/.ssh" "$H5/dotfiles/gnupg" "$H5/gpg2/sub"
echo SSHKEY > "$H5/.ssh/id_ed25519"; echo DOTGPG > "$H5/dotfiles/gnupg/k"; echo GPG2 > "$H5/gpg2/sub/k"
ln -s dotfiles/gnupg "$H5/.gnupg"
n5=$(run_count)
out=$(cd "$H5/.ssh" && HOME="$H5" "$P" run --safe --stage "$T/st7" -- sh -c 'cat id_ed25519; echo k >> authorized_keys' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c SSHKEY):$(echo "$out" | grep -c 'is in the credential location ~/.ssh')" "2:0:1" \
    "--safe in ~/.ssh is refused (usage)"
out=$(cd "$H5/dotfiles/gnupg" && HOME="$H5" "$P" run --safe -- cat k 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c DOTGPG)" "2:0" "--safe in the directory ~/.gnupg links to is refused"
out=$(cd "$H5/gpg2/sub" && HOME="$H5" GNUPGHOME="$H5/gpg2" "$P" run --filesystem sandbox -- cat k 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c GPG2):$(echo "$out" | grep -c 'moved there by the environment: GNUPGHOME names it')" "2:0:1" \
    "--filesystem sandbox in GNUPGHOME is refused"
# a grant of one (as named, or through a link) is a usage error too: it
# was refused with 125 by the planning and left a run directory behind
# ("cannot plan the sandbox"); nothing is recorded now, nor a stage made
out=$(cd "$W" && HOME="$H5" "$P" run --safe --stage "$T/st7b" --access "ro:$H5/.ssh" -- true 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'reaches the credential location ~/.ssh'):$(echo "$out" | grep -c 'cannot plan')" "2:1:0" \
    "--access ro: of ~/.ssh is a usage error (2) naming the credential location"
out=$(cd "$W" && HOME="$H5" "$P" run --safe --allow-write "$H5/dotfiles/gnupg" -- true 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'reaches the credential location ~/.gnupg')" "2:1" \
    "--allow-write of the directory ~/.gnupg links to is a usage error (2)"
eq "$(run_count):$(ls -A "$T/st7" "$T/st7b" 2>/dev/null | wc -l)" "$n5:0" \
    "... and none of these refusals recorded a run or made a stage"
eq "$(ls -A "$H5/.ssh" | tr '\n' ' ')" "id_ed25519 " "... nothing reached ~/.ssh"
out=$(cd "$H5/dotfiles" && HOME="$H5" "$P" run --safe -- sh -c 'cat gnupg/k 2>/dev/null; echo end' 2>&1); rc=$?
eq "$rc:$out" "0:end" "--safe in the dotfiles repository that holds it runs, the store absent"

# --- a grant in HOME that holds a moved store ---------------------------------
# HOME's view was counted as the projection that shows a moved store, and
# its server masks it: but a grant in HOME projects the real tree over the
# view, so GNUPGHOME=~/data/gpg under --access ro:~/data was readable, and
# ~/cfg/gh under --allow-write ~/cfg writable on the host.
H6=$T/home6
mkdir -p "$H6/data/gpg" "$H6/cfg/gh"; echo GPGKEY > "$H6/data/gpg/k"; echo GHTOKEN > "$H6/cfg/gh/hosts.yml"
out=$(cd "$W" && HOME="$H6" GNUPGHOME="$H6/data/gpg" XDG_CONFIG_HOME="$H6/cfg" "$P" run --safe --access "ro:$H6/data" \
    --allow-write "$H6/cfg" -- sh -c 'cat ~/data/gpg/k ~/cfg/gh/hosts.yml 2>/dev/null; (echo x > ~/cfg/gh/new) 2>/dev/null; echo y > ~/cfg/ok; echo end' 2>&1); rc=$?
out=$(echo "$out" | grep -v "warning: a grant of --access/--allow-write holds")  # partial: told below
eq "$rc:$(echo $out):$(ls "$H6/cfg/gh" | tr '\n' ' ')$(cat "$H6/cfg/ok")" "0:end:hosts.yml y" \
    "--safe: moved stores in a grant in HOME are covered (not read, nothing planted); the rest of the grant is writable"

# --- a grant that holds credential locations missing at start -----------------
# A cover needs something to cover: a credential the host creates in the
# grant during the run is readable there (and in a read-write grant one
# the command creates is the host's). The Bundle said home_credentials
# enforced; it is partial now, and --strict refuses such a grant.
H8=$T/home8; W8=$T/ws8
mkdir -p "$H8/.config/tool" "$H8/.cache/pip" "$H8/.ssh" "$W8"; echo key > "$H8/.ssh/id"
(cd "$W8" && HOME="$H8" "$P" run --safe --allow-write "$H8/.config" -- true) >/dev/null 2>&1; rc=$?
b8=$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json
eq "$rc:$(jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.missing_in_grants > 0)"' "$b8"):$(jq '[.warnings[] | select(test("did not exist at start"))] | length' "$b8")" \
    "0:partial true:1" "a grant holding credential locations that do not exist yet: home_credentials partial, with a warning"
out=$(cd "$W8" && HOME="$H8" "$P" run --safe --strict --allow-write "$H8/.config" -- echo ran 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c '^ran')" "125:0" "... --strict refuses it"
out=$(cd "$W8" && HOME="$H8" "$P" run --safe --strict --allow-write "$H8/.config/tool" -- echo ran 2>&1); rc=$?
eq "$rc:$out" "0:ran" "... a grant that holds none runs under --strict"

# The run said nothing about it (the warning was only in the Bundle), and
# --strict's refusal named the dimension alone: neither said which
# location or what to do. Both name it now, and the warning comes once.
out=$(cd "$W8" && HOME="$H8" "$P" run --safe --allow-write "$H8/.cache" -- echo ran 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c '^ran'):$(echo "$out" | grep -c "warning: .*did not exist at start ($H8/.cache/huggingface/token)")" "0:1:1" \
    "a grant holding a missing credential location: the run warns once, naming it"
out=$(cd "$W8" && HOME="$H8" "$P" run --safe --strict --allow-write "$H8/.cache" -- echo ran 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c "strict: home_credentials is partial: .*($H8/.cache/huggingface/token).*grant narrower directories")" "125:1" \
    "... --strict's refusal says which location and what to do"
# A credential location that is a link whose target is missing has nothing
# to cover either: when the grant held both, only the link was looked at.
H9=$T/home9; mkdir -p "$H9/.config/ghtarget"; ln -s ghtarget "$H9/.config/gh"
(cd "$W8" && HOME="$H9" "$P" run --safe --allow-write "$H9/.config" -- true) >/dev/null 2>&1
n9a=$(jq '.dimensions.home_credentials.evidence.missing_in_grants' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")
rmdir "$H9/.config/ghtarget"
(cd "$W8" && HOME="$H9" "$P" run --safe --allow-write "$H9/.config" -- true) >/dev/null 2>&1
n9b=$(jq '.dimensions.home_credentials.evidence.missing_in_grants' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")
eq "$((n9b - n9a))" "1" "a credential location's link in a grant whose target is missing counts as missing"

# Default stores found missing from the list (the X11 and ICE cookies,
# KDE's wallet, atuin's history and sync key, prezto's and neovim's
# histories, Subversion's passwords, Bitwarden's CLI vault, opencode's and
# firebase-tools' tokens, Yarn's, Databricks', Hetzner's, ngrok's,
# Cloudflare's and fly.io's; and those a red-team pass found: git's
# cookies, pnpm's, Bun's, minikube's, Teleport's, Ollama's key, Sentry's,
# CircleCI's, Stripe's, JFrog's, Vercel's, Netlify's, Supabase's,
# Railway's, Mercurial's, Linode's, conda's and anaconda-client's), and
# XAUTHORITY's moved cookie: absent
# in HOME's view; fly's bin/ beside its token and Ollama's models stay.
H10=$T/home10; mkdir -p "$H10"
for f in .Xauthority .ICEauthority .local/share/kwalletd/kdewallet.kwl .kde/share/apps/kwallet/kdewallet.kwl \
    .local/share/atuin/key .zhistory .local/share/nvim/shada/main.shada .local/state/nvim/shada/main.shada \
    .subversion/auth/svn.simple/x ".config/Bitwarden CLI/data.json" .local/share/opencode/auth.json \
    .config/configstore/firebase-tools.json .yarnrc.yml .databrickscfg .config/hcloud/cli.toml \
    .config/ngrok/ngrok.yml .ngrok2/ngrok.yml .cloudflared/cert.pem .fly/config.yml xauth/cookie \
    .gitcookies .yarnrc .config/pnpm/rc .bunfig.toml .minikube/profiles/m/client.key .tsh/keys/x \
    .ollama/id_ed25519 .sentryclirc .circleci/cli.yml .config/stripe/config.toml .jfrog/jfrog-cli.conf.v6 \
    .vercel/auth.json .local/share/com.vercel.cli/auth.json .config/netlify/config.json \
    .supabase/access-token .railway/config.json .hgrc .config/hg/hgrc .config/linode-cli .condarc \
    .local/share/binstar/https%3A%2F%2Fapi.anaconda.org.token; do
    mkdir -p "$(dirname "$H10/$f")"; echo "SECRET:$f" > "$H10/$f"
done
mkdir -p "$H10/.fly/bin"; printf '#!/bin/sh\necho fly-ok\n' > "$H10/.fly/bin/flyctl"; chmod 0755 "$H10/.fly/bin/flyctl"
mkdir -p "$H10/.ollama/models"; echo model > "$H10/.ollama/models/m"
reads10='cd ~ && find . -type f -exec cat {} + 2>/dev/null | grep -c SECRET; ~/.fly/bin/flyctl; cat ~/.ollama/models/m'
eq "$(cd "$W" && HOME="$H10" XAUTHORITY="$H10/xauth/cookie" "$P" run -- sh -c "$reads10" 2>&1 | tr '\n' ' ')" "41 fly-ok model " \
    "control: forty-one more stores are readable without the sandbox"
eq "$(cd "$W" && HOME="$H10" XAUTHORITY="$H10/xauth/cookie" "$P" run --safe --stage "$T/st10" -- sh -c "$reads10" 2>&1 | tr '\n' ' ')" "0 fly-ok model " \
    "--safe: they are absent in HOME's view (XAUTHORITY's too), fly's bin/ and Ollama's models stay"

# Stores a red-team pass (2026-12-05) read in --safe's HOME while the
# Bundle said home_credentials enforced: absent now; the files beside
# those hidden alone (IBM Cloud's plugins, adb's public key, Snowflake's
# logs, dbt's other files) stay.
HR=$T/home-rt; mkdir -p "$HR"
credsR=".dockercfg .python-gitlab.cfg .config/python-gitlab.cfg .aliyun/config.json .tccli/default.credential
    .bluemix/config.json .config/scw/config.yaml .cf/config.json .config/tea/config.yml .travis/config.yml
    .mc/config.json .passwd-s3fs .config/kaggle/kaggle.json .config/dart/pub-credentials.json
    .pub-cache/credentials.json .snowsql/config .snowflake/config.toml .snowflake/connections.toml
    .dbt/profiles.yml .msmtprc .config/msmtp/config .fetchmailrc .mbsyncrc .authinfo .authinfo.gpg .wakatime.cfg
    .android/adbkey .gsutil/credstore .lftp/bookmarks .local/share/lftp/bookmarks .ghstackrc
    .config/gspread/service_account.json .purple/accounts.xml .config/Signal/config.json .config/Slack/Cookies
    .config/discord/Local_Storage"
for f in $credsR; do
    mkdir -p "$(dirname "$HR/$f")"; echo "SECRET:$f" > "$HR/$f"
done
for f in .bluemix/plugins/p .android/adbkey.pub .snowsql/log .dbt/.user.yml; do
    mkdir -p "$(dirname "$HR/$f")"; echo "KEEP:$f" > "$HR/$f"
done
readsR='cd ~ && find . -type f -exec cat {} + 2>/dev/null | grep -c SECRET; find . -type f -exec cat {} + 2>/dev/null | grep -c KEEP'
nR=$(echo $credsR | wc -w)
eq "$(cd "$W" && HOME="$HR" "$P" run -- sh -c "$readsR" 2>&1 | tr '\n' ' ')" "$nR 4 " \
    "control: $nR more stores (Docker's legacy file, python-gitlab, cloud CLIs, mail, chat profiles...) are readable without the sandbox"
eq "$(cd "$W" && HOME="$HR" "$P" run --safe --stage "$T/st-rt" -- sh -c "$readsR" 2>&1 | tr '\n' ' ')" "0 4 " \
    "--safe: they are absent in HOME's view; the files beside those hidden alone stay"
eq "$(jq -r .dimensions.home_credentials.effective "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" enforced \
    "  and the Bundle's home_credentials is enforced"

# HOME set to a fresh directory (as agent harnesses and CI jobs do) while
# the workspace is, or holds, the user's own home as /etc/passwd names it:
# that home's credential locations were readable through the workspace
# view, which masked only HOME's.  As root, with a private /etc/passwd
# naming root's home in $T.
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    RH=$T/realhome; FH=$T/freshhome; mkdir -p "$RH/.ssh" "$RH/proj" "$FH"
    echo REALKEY > "$RH/.ssh/id_rsa"; echo n > "$RH/notes"
    sed "s#^root:\([^:]*\):0:0:\([^:]*\):[^:]*:#root:\1:0:0:\2:$RH:#" /etc/passwd > "$T/passwd"
    pwrun() { # MODE: the command's output, run in $RH with HOME=$FH
        unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/passwd || exit 77
            cd "$2" && HOME="$3" "$4" run $5 --stage "$6" -- sh -c "cat notes; cat .ssh/id_rsa 2>/dev/null; mkdir -p .ssh/x 2>/dev/null || echo sealed"' \
            sh "$T/passwd" "$RH" "$FH" "$P" "$1" "$T/st-pw$1" 2>&1
    }
    eq "$(echo $(pwrun ""))" "n REALKEY" "control: with HOME elsewhere, the workspace that is the user's passwd home shows its keys"
    eq "$(echo $(pwrun --safe))" "n sealed" "--safe: the credential locations of the user's passwd home in the workspace are absent and sealed"
    # the same home reached through a grant from a workspace elsewhere: its
    # keys are covered; a grant of the key store itself, or a workspace in
    # it, is refused (as for HOME's)
    pwgrant() { # DIR ARGS...: run in DIR with HOME=$FH and the private passwd
        d=$1; shift
        unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/passwd || exit 77
            p=$2; d=$3; h=$4; shift 4; cd "$d" && HOME="$h" "$p" "$@"' sh "$T/passwd" "$P" "$d" "$FH" "$@" 2>&1
    }
    mkdir -p "$T/pwws"
    out=$(pwgrant "$T/pwws" run --safe --stage "$T/st-pwg" --access "ro:$RH" -- sh -c "cat '$RH/notes'; cat '$RH/.ssh/id_rsa' 2>/dev/null || echo covered")
    eq "$(echo $(echo "$out" | grep -v 'that did not exist at start'))" \
        "n covered" "--safe: a grant of the user's passwd home (HOME elsewhere) shows its files, not its keys"
    # its locations missing at start are not covered there: partial, said,
    # as for a grant of HOME (it said enforced: found by a red-team pass)
    eq "$(echo "$out" | grep -c "^pvisor run: warning: a grant of --access/--allow-write holds [0-9]* credential location(s) that did not exist at start ($RH/")" 1 \
        "  ... and says that the passwd home's locations missing at start are not covered there"
    out=$(pwgrant "$T/pwws" run --safe --stage "$T/st-pwg2" --access "ro:$RH/.ssh" -- cat "$RH/.ssh/id_rsa"); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'reaches the credential location .*/.ssh (in your home as /etc/passwd names it')" "2:1" \
        "--safe: a grant of the passwd home's .ssh (HOME elsewhere) is refused, naming it"
    out=$(pwgrant "$RH/.ssh" run --safe --stage "$T/st-pwg3" -- cat id_rsa); rc=$?
    eq "$rc:$(echo "$out" | grep -c 'is in the credential location')" "2:1" \
        "--safe: a workspace in the passwd home's .ssh (HOME elsewhere) is refused"
    # the stores found by looking in that home (an nvm node's npmrc, sbt's
    # global settings), not only the fixed list: its node on PATH
    # projected its ~/.nvm whole, npmrc included, and a grant of its .sbt
    # showed the settings (found by a red-team pass)
    NV=$RH/.nvm/versions/node/v20.0.0
    mkdir -p "$NV/bin" "$NV/etc" "$RH/.sbt/1.0"
    printf '#!/bin/sh\necho node-ok\n' > "$NV/bin/pv-node"; chmod 0755 "$NV/bin/pv-node"
    echo NPMTOKEN > "$NV/etc/npmrc"; echo 'credentials += SBTSECRET' > "$RH/.sbt/1.0/global.sbt"
    out=$(pwgrant "$T/pwws" run -- sh -c "PATH='$NV/bin':\$PATH pv-node; cat '$NV/etc/npmrc' '$RH/.sbt/1.0/global.sbt'")
    eq "$(echo $out)" "node-ok NPMTOKEN credentials += SBTSECRET" "control: the passwd home's node toolchain npmrc and sbt settings are readable"
    out=$(PATH="$NV/bin:$PATH" pwgrant "$T/pwws" run --safe --stage "$T/st-pwn" --access "ro:$RH/.sbt" -- \
        sh -c "pv-node; cat '$NV/etc/npmrc' '$RH/.sbt/1.0/global.sbt' 2>/dev/null | grep -c -e NPMTOKEN -e SBTSECRET" | grep -v 'that did not exist at start')
    eq "$(echo $out)" "node-ok 0" "--safe (HOME elsewhere): the passwd home's node on PATH runs, its npmrc and a granted .sbt's settings are covered"
    # under sudo (root, HOME root's own) the caller's home (SUDO_UID) is kept
    # the same way: the workspace that is their home showed their keys
    printf 'pvsudo:x:4321:4321::%s:/bin/sh\n' "$RH" > "$T/passwd2"; cat /etc/passwd >> "$T/passwd2"
    sudorun() { # SUDO_UID: the command's output, run in $RH as root with HOME=/root
        unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/passwd || exit 77
            cd "$2" && HOME=/root SUDO_UID="$3" "$4" run --safe --stage "$5" -- sh -c "cat notes; cat .ssh/id_rsa 2>/dev/null || echo absent"' \
            sh "$T/passwd2" "$RH" "$1" "$P" "$T/st-sudo$1" 2>&1
    }
    eq "$(echo $(sudorun ""))" "n REALKEY" "control: as root without SUDO_UID, a workspace that is another user's home shows its keys"
    eq "$(echo $(sudorun 4321))" "n absent" "--safe under sudo: the caller's home (SUDO_UID) in the workspace has its credential locations absent"
else
    skip "--safe: the user's passwd home in the workspace, HOME elsewhere" "needs root and unshare (a private /etc/passwd)"
fi

# The agent CLIs' own stores found readable by running them under --safe:
# gemini-cli's API key in ~/.gemini/.env and ~/.env, its keychain-less
# token file and its MCP/A2A servers' tokens; claude-code's copies of
# ~/.claude.json (API key included) in ~/.claude/backups/ and
# ~/.claude.json.backup; codex's MCP OAuth tokens. Also where
# CLAUDE_CONFIG_DIR, CODEX_HOME and GEMINI_CLI_HOME move them. The rest of
# ~/.gemini and ~/.claude (settings the CLIs need) stays readable.
H11=$T/home11; mkdir -p "$H11"
for f in .gemini/.env .env .gemini/gemini-credentials.json .gemini/mcp-oauth-tokens.json .gemini/a2a-oauth-tokens.json \
    .claude/backups/.claude.json.backup.1796042193813 .claude.json.backup .codex/.credentials.json \
    cc/backups/.claude.json.backup.1 cx/.credentials.json gh/.env gh/.gemini/.env gh/.gemini/mcp-oauth-tokens.json; do
    mkdir -p "$(dirname "$H11/$f")"; echo "SECRET:$f" > "$H11/$f"
done
echo '{}' > "$H11/.gemini/settings.json"; echo '{}' > "$H11/.claude/settings.json"
reads11='cd ~ && find . -type f -exec cat {} + 2>/dev/null | grep -c SECRET; cat ~/.gemini/settings.json ~/.claude/settings.json'
env11="HOME=$H11 CLAUDE_CONFIG_DIR=$H11/cc CODEX_HOME=$H11/cx GEMINI_CLI_HOME=$H11/gh"
eq "$(cd "$W" && env $env11 "$P" run -- sh -c "$reads11" 2>&1 | tr '\n' ' ')" "13 {} {} " \
    "control: the agent CLIs' thirteen stores are readable without the sandbox"
eq "$(cd "$W" && env $env11 "$P" run --safe --stage "$T/st11" -- sh -c "$reads11" 2>&1 | tr '\n' ' ')" "0 {} {} " \
    "--safe: gemini-cli's .env files and tokens, claude-code's .claude.json backups and codex's MCP tokens are absent (moved ones too); their settings stay"

# A stage the user keeps in HOME (`--stage ~/st`, `fork ... ~/f`) holds
# what an agent wrote: another run's command read it through its HOME view
# (pvisor's state directory is masked, a stage elsewhere was not), and
# through its workspace view when HOME was the workspace. Masked now, and
# sealed in a workspace; a state directory from before the record is
# built from its runs' Bundles.
H12=$T/home12; S12=$T/state12; mkdir -p "$H12/projA" "$H12/projB"; echo a > "$H12/projA/f"
run12() { (cd "$1" && shift && HOME="$H12" XDG_STATE_HOME="$S12" "$P" run "$@" 2>&1); }
run12 "$H12/projA" --safe --stage "$H12/st-a" -- sh -c 'echo STAGEDSECRET > g' >/dev/null
(cd "$H12/projA" && HOME="$H12" XDG_STATE_HOME="$S12" "$P" fork "$H12/forked" --stage "$H12/st-a" >/dev/null 2>&1)
reads12='cat ~/st-a/upper/g ~/forked/upper/g 2>/dev/null; echo end'
eq "$(echo $(run12 "$H12/projB" -- sh -c "$reads12"))" "STAGEDSECRET STAGEDSECRET end" \
    "control: without the sandbox a stage kept in HOME and its fork are readable"
eq "$(echo $(run12 "$H12/projB" --safe -- sh -c "$reads12"))" "end" \
    "--safe: another run's stage kept in HOME, and a fork there, are absent from the HOME view"
eq "$(echo $(run12 "$H12" --safe -- sh -c 'cat st-a/upper/g 2>/dev/null; mkdir st-a forked 2>/dev/null || echo sealed'))" "sealed" \
    "--safe with HOME the workspace: the stages there are absent and sealed in the workspace view"
rm -f "$S12/pvisor/stages-elsewhere"
eq "$(echo $(run12 "$H12/projB" --safe -- sh -c 'cat ~/st-a/upper/g 2>/dev/null; echo end')):$(tr '\0' '\n' < "$S12/pvisor/stages-elsewhere" | grep -c "^$H12/st-a\$")" "end:1" \
    "... a state directory without the record gets it from its runs' Bundles first (a fork made then is not in them)"
# A recorded stage the user removed leaves its path free: a directory of
# the user's made there later was hidden from every later run (absent in
# HOME's view, sealed in a workspace view), with no word why. Only a
# stage (its version file) is hidden; the fork still is.
run12 "$H12/projA" --safe --stage "$H12/st-b" -- sh -c 'echo STAGEDSECRET > g' >/dev/null
rm -rf "$H12/st-a"; mkdir "$H12/st-a"; echo mine > "$H12/st-a/notes"
eq "$(echo $(run12 "$H12/projB" --safe -- sh -c 'cat ~/st-a/notes ~/st-b/upper/g 2>/dev/null; echo end'))" "mine end" \
    "--safe: a directory made where a removed stage was is shown in the HOME view; a stage there still is not"
eq "$(echo $(run12 "$H12" --safe -- sh -c 'cat st-a/notes; touch st-a/new 2>/dev/null && echo made'))" "mine made" \
    "--safe with HOME the workspace: ... and it is not sealed"
# ... also when it holds a 'version' file of its own over 256 bytes (the
# record's check read at most that much, and took a larger one for a
# stage's); a short one, and one that starts as a stage's, are told apart
head -c 300 /dev/zero | tr '\0' 'v' > "$H12/st-a/version"
eq "$(echo $(run12 "$H12/projB" --safe -- sh -c 'cat ~/st-a/notes 2>/dev/null; echo end'))" "mine end" \
    "--safe: ... also with a 'version' file of its own over 256 bytes"
echo 1.0 > "$H12/st-a/version"
eq "$(echo $(run12 "$H12/projB" --safe -- sh -c 'cat ~/st-a/notes 2>/dev/null; echo end'))" "mine end" \
    "--safe: ... and with a short one"
rm "$H12/st-a/version"
# A stage made in HOME while a run goes on (another run's --stage ~/st, a
# fork), or recorded under another XDG_STATE_HOME, is in no list the run
# made at its start: the run's command read the other run's staged files
# through its HOME view. The views hide any lower directory that is a
# stage (its version file), looked up or listed at any time.
mkdir -p "$H12/out12"
(cd "$H12/projB" && HOME="$H12" XDG_STATE_HOME="$S12" "$P" run --safe --allow-write "$H12/out12" -- sh -c '
    i=0; while [ ! -e ~/st-during/version ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
    sleep 1.5
    { ls -A ~ | tr "\n" " "; cat ~/st-during/upper/g ~/st-other/upper/g 2>/dev/null; echo end; } > ~/out12/seen') >/dev/null 2>&1 &
pv=$!
sleep 0.5
run12 "$H12/projA" --stage "$H12/st-during" -- sh -c 'echo STAGEDSECRET > g' >/dev/null
(cd "$H12/projA" && HOME="$H12" XDG_STATE_HOME="$T/state12-other" "$P" run --stage "$H12/st-other" -- sh -c 'echo STAGEDSECRET > g' >/dev/null 2>&1)
wait $pv
eq "$(cat "$H12/out12/seen" 2>&1)" "out12 projA projB st-a end" \
    "--safe: a stage made in HOME during the run, and one recorded under another state directory, are absent from the HOME view"
eq "$(echo $(run12 "$H12/projB" -- sh -c 'cat ~/st-during/upper/g ~/st-other/upper/g'))" "STAGEDSECRET STAGEDSECRET" \
    "  control: without the sandbox both are readable"
# ... also through a directory the command held (its cwd) from before it
# became a stage: its names are looked up, and listed, in the stage
mkdir -p "$H12/st-held"
(cd "$H12/projB" && HOME="$H12" XDG_STATE_HOME="$S12" "$P" run --safe --allow-write "$H12/out12" -- sh -c '
    cd ~/st-held || exit 9
    touch ~/out12/held.in
    i=0; while [ ! -e ~/out12/held.go ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
    sleep 1.5
    { ls -A | tr "\n" " "; cat upper/g 2>/dev/null; echo end; } > ~/out12/held') >/dev/null 2>&1 &
pv=$!
# (the stage is made once the command holds the directory: a fixed 0.5 s
# was too short for a --safe start on a loaded machine)
i=0; while [ ! -e "$H12/out12/held.in" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
run12 "$H12/projA" --stage "$H12/st-held" -- sh -c 'echo STAGEDSECRET > g' >/dev/null
touch "$H12/out12/held.go"
wait $pv
eq "$(cat "$H12/out12/held" 2>&1)" "end" \
    "--safe: a directory the command holds (its cwd) that becomes another run's stage shows nothing of it"
eq "$(cat "$H12/st-held/upper/g")" STAGEDSECRET "  control: the stage holds the file"

# --- a credential location that is a link out of HOME ------------------------
# ~/.aws -> /etc/<dir>, ~/.ssh -> a toolchain's directory: HOME's view hid
# ~/.aws, but the system directory or toolchain projected the target
# read-only, where the command read the keys (home_credentials said
# enforced). Where such a link leads is covered wherever a projection shows
# it (as a moved store is), as root and as an ordinary user.
E13=/etc/pvisor-test-creds.$$
at_exit "rm -rf '$E13'"
for who in root user; do
    H13=$T/home13-$who W13=$T/ws13-$who
    mkdir -p "$H13" "$W13" "$E13/$who/aws" "$E13/$who/ssh"
    echo "AWSKEY-$who" > "$E13/$who/aws/credentials"
    echo "SSHKEY-$who" > "$E13/$who/ssh/id_ed25519"
    echo "other-$who" > "$E13/$who/notes"
    chmod -R a+rX "$E13"
    ln -s "$E13/$who/aws" "$H13/.aws"
    ln -s "$E13/$who/ssh" "$H13/.ssh"
    if [ $who = user ]; then
        if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
            skip "credential links out of HOME as an ordinary user" "needs root to switch to an unprivileged user"
            continue
        fi
        mkdir -p "$T/state13u"
        chown -R 65534:65534 "$H13" "$W13" "$T/state13u"
        as13() { setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_STATE_HOME="$T/state13u" "$@"; }
    else
        as13() { env "$@"; }
    fi
    reads13="cat $E13/$who/aws/credentials $E13/$who/ssh/id_ed25519 ~/.aws/credentials ~/.ssh/id_ed25519 2>/dev/null; cat $E13/$who/notes; echo end"
    out=$(cd "$W13" && as13 HOME="$H13" "$P" run -- sh -c "$reads13" 2>&1)
    eq "$(echo $out)" "AWSKEY-$who SSHKEY-$who AWSKEY-$who SSHKEY-$who other-$who end" \
        "control ($who): the keys are readable by both names without the sandbox"
    out=$(cd "$W13" && as13 HOME="$H13" "$P" run --safe -- sh -c "$reads13" 2>&1); rc=$?
    eq "$rc:$(echo $out)" "0:other-$who end" \
        "--safe ($who): where ~/.aws and ~/.ssh lead in /etc is covered; the rest of /etc stays readable"
    st13=$T/state; [ $who = user ] && st13=$T/state13u
    b="$st13/pvisor/runs/$(XDG_STATE_HOME=$st13 latest_run)/bundle.json"
    eq "$(jq -r '.dimensions.home_credentials | "\(.effective) \(.evidence.link_target_covers)"' "$b" 2>&1)" \
        "enforced 2" "... and the Bundle counts the two covers"
done

# --- what the command wrote in HOME's view, discarded at exit -----------------
# The throwaway stage of HOME's view was removed without a word: settings an
# agent saved under ~/.config, a tool installed with --prefix ~/.local, a
# ~/notes.md were lost and the user never told. The run now counts them
# before the removal, names them on stderr and records them in the Bundle
# (home_discarded); a read-write grant's writes are the host's, not counted.
for who in root user; do
    H14=$T/home14-$who W14=$T/ws14-$who S14=$T/state14-$who
    mkdir -p "$H14/.config/kept" "$H14/.config/agent" "$H14/old" "$W14" "$S14"
    echo kept > "$H14/.config/kept/k"; echo notes > "$H14/notes"; echo o > "$H14/old/o"
    if [ $who = user ]; then
        if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
            skip "HOME's discarded writes as an ordinary user" "needs root to switch to an unprivileged user"
            continue
        fi
        chown -R 65534:65534 "$H14" "$W14" "$S14"
        as14() { setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_STATE_HOME="$S14" HOME="$H14" "$@"; }
    else
        as14() { env XDG_STATE_HOME="$S14" HOME="$H14" "$@"; }
    fi
    b14() { echo "$S14/pvisor/runs/$(XDG_STATE_HOME=$S14 latest_run)/bundle.json"; }
    before=$(cd "$H14" && find . -printf '%p %s\n' | sort)
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'mkdir -p ~/.config/x; echo hello > ~/.config/x/y; echo 12345 > ~/f.txt' \
        >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(grep -c "HOME's view" "$T/err14")" "0:1" "--safe ($who): one note of HOME's discarded writes"
    eq "$(grep "HOME's view" "$T/err14")" \
        "pvisor run: the command wrote 2 files (12 B) and made 1 directory in HOME's view, discarded at exit: ~/.config/x, ~/f.txt (--allow-write PATH keeps a path's writes)" \
        "... which names both places, the number of files and their size"
    eq "$(jq -c '.home_discarded' "$(b14)")" \
        '{"files":2,"directories":1,"deleted":0,"bytes":12,"at_least":false,"paths":[{"files":1,"directories":1,"deleted":0,"bytes":6,"path":".config/x"},{"files":1,"directories":0,"deleted":0,"bytes":6,"path":"f.txt"}],"paths_truncated":false}' \
        "... the Bundle's home_discarded counts them, by place"
    eq "$(cd "$H14" && find . -printf '%p %s\n' | sort)" "$before" "... and the host's HOME is unchanged"
    # a run that writes nothing there: no note, zeros in the Bundle
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'cat ~/notes >/dev/null; echo w > ws-file' >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(cat "$T/err14")" "0:" "--safe ($who): nothing written in HOME, nothing said"
    eq "$(jq -c '.home_discarded | [.files, .directories, .deleted, .bytes, .at_least, .paths]' "$(b14)")" \
        '[0,0,0,0,false,[]]' "... and the Bundle says 0"
    # a read-write grant in HOME keeps its writes: not counted; the rest is
    (cd "$W14" && as14 "$P" run --safe --allow-write "$H14/.config/agent" -- \
        sh -c 'echo s > ~/.config/agent/settings; mkdir ~/.config/agent/d; echo t > ~/.config/agent/d/t; echo other > ~/other' \
        >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(cat "$H14/.config/agent/settings" "$H14/.config/agent/d/t" | tr '\n' ' ')" "0:s t " \
        "--safe --allow-write ($who): the grant's writes reach the host"
    eq "$(jq -c '.home_discarded | [.files, .directories, .deleted, .bytes, [.paths[].path]]' "$(b14)"):$(grep -c 'agent' "$T/err14")" \
        '[1,0,0,6,["other"]]:0' "... and are not counted as discarded; the rest of HOME's writes is"
    rm -r "$H14/.config/agent/settings" "$H14/.config/agent/d"
    # deletions are discarded too: counted as such
    before=$(cd "$H14" && find . -printf '%p %s\n' | sort)
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'rm ~/notes; rm -rf ~/old; mkdir ~/old; rm ~/.config/kept/k' \
        >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(grep "HOME's view" "$T/err14" | sed 's/.*the command //; s/ in HOME.*: / /; s/ (--allow.*//')" \
        "0:deleted 3 names ~/.config/kept, ~/notes, ~/old/o" "--safe ($who): deleted names of HOME are counted as deleted"
    eq "$(jq -c '.home_discarded | [.files, .directories, .deleted, ([.paths[] | "\(.path)=\(.deleted)"] | join(" "))]' "$(b14)")" \
        '[0,0,3,".config/kept=1 notes=1 old/o=1"]' "... in the Bundle too (~/old removed and made again: the name it held is deleted)"
    eq "$(cd "$H14" && find . -printf '%p %s\n' | sort)" "$before" "... and the host's HOME still has them"
    # a directory removed and made again hides HOME's names in it; those
    # the view masked (credential locations) were never the command's to
    # delete, nor to hear of (~/.config/gcloud was named as deleted)
    mkdir -p "$H14/.config/gcloud"; echo c > "$H14/.config/gcloud/creds"
    [ $who = user ] && chown -R 65534:65534 "$H14/.config/gcloud"
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'ls -A ~/.config; rm -rf ~/.config; mkdir ~/.config' >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(tr '\n' ' ' < "$T/out14"):$(jq -c '.home_discarded | [.deleted, [.paths[].path]]' "$(b14)"):$(grep -c gcloud "$T/err14")" \
        '0:agent kept :[2,[".config/agent",".config/kept"]]:0' \
        "--safe ($who): rm -rf ~/.config; mkdir ~/.config: the two names it saw there deleted, not the masked ~/.config/gcloud"
    # ... nor what is in it when the command makes a directory by that
    # name (its own: counted as such), nor when it makes one in HOME's
    # .config where the view masks gcloud (found by a review)
    echo c2 > "$H14/.config/gcloud/more"; [ $who = user ] && chown 65534:65534 "$H14/.config/gcloud/more"
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'rm -rf ~/.config; mkdir -p ~/.config/gcloud; echo x > ~/.config/gcloud/mine' >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(jq -c '.home_discarded | [.files, .deleted]' "$(b14)"):$(grep -c 'creds\|more' "$T/err14")" '0:[1,2]:0' \
        "--safe ($who): rm -rf ~/.config; mkdir -p ~/.config/gcloud: its file counted, HOME's masked files not as deleted"
    (cd "$W14" && as14 "$P" run --safe -- sh -c 'mkdir ~/.config/gcloud; echo x > ~/.config/gcloud/mine' >"$T/out14" 2>"$T/err14"); rc=$?
    eq "$rc:$(jq -c '.home_discarded | [.files, .directories, .deleted]' "$(b14)")" '0:[1,1,0]' \
        "--safe ($who): mkdir ~/.config/gcloud (masked): the command's directory and file counted, nothing deleted"
    rm -r "$H14/.config/gcloud"
done
# The walk is bounded (depth, entries): past a bound, the numbers are lower
# bounds and say so.
H15=$T/home15; mkdir -p "$H15" "$T/ws15"
(cd "$T/ws15" && HOME="$H15" "$P" run --safe -- sh -c 'd=~/deep; for i in $(seq 70); do d=$d/d; done; mkdir -p $d' \
    >"$T/out15" 2>"$T/err15"); rc=$?
eq "$rc:$(jq -c '.home_discarded | [.at_least, .directories >= 64, [.paths[].path]]' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"):$(grep -c 'made at least' "$T/err15")" \
    '0:[true,true,["deep"]]:1' "a tree deeper than the walk's bound: 'at least', in the Bundle and the note"
# Names are the command's: escaped on the terminal, hex in the Bundle when
# they are not UTF-8; the Bundles follow docs/bundle.schema.json.
(cd "$T/ws15" && HOME="$H15" "$P" run --safe -- sh -c 'echo > ~/"$(printf "a\377b")"; echo > ~/"$(printf "e\033[2Jx")"' \
    >"$T/out15" 2>"$T/err15"); rc=$?
eq "$rc:$(grep "HOME's view" "$T/err15" | sed 's/.*at exit: //; s/ (--allow.*//')" '0:~/a\xffb, ~/e\x1b[2Jx' \
    "the note escapes the names for the terminal"
eq "$(jq -c '[.home_discarded.paths[] | .path_hex // .path]' "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json")" \
    "[\"61ff62\",\"e\\u001b[2Jx\"]" "... the Bundle gives a name that is not UTF-8 as path_hex"
check "the Bundles with home_discarded follow the schema" /usr/bin/python3 "$SRCDIR/tests/validate-bundle.py" \
    "$SRCDIR/docs/bundle.schema.json" "$XDG_STATE_HOME"/pvisor/runs/*/bundle.json "$T"/state14-*/pvisor/runs/*/bundle.json
