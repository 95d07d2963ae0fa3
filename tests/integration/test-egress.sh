#!/bin/sh
# The egress broker (TAP): `pvisor run --safe --allow-net HOST[:PORT]`.
# Servers run on the host's loopback (tests/helpers/egress-server.py);
# the command inside the sandbox is tests/helpers/egress-client.py.
# Every bypass attempt has a control run without the sandbox that must
# get through (an attempt the control blocks proves nothing), and the
# host-side servers' logs say what actually reached them.
# Needs $PVISOR, $PVAGENT, $SRCDIR.
. "$(dirname "$0")/../lib.sh"
cd "$T"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse
fi
P=$PVISOR
SCHEMA="$SRCDIR/docs/bundle.schema.json"
VALIDATE="/usr/bin/python3 $SRCDIR/tests/validate-bundle.py $SCHEMA"
W=$T/ws; mkdir -p "$W"
cp "$SRCDIR/tests/helpers/egress-client.py" "$W/client.py"
C="python3 $W/client.py"

# host side: a file server (allowed), another (never allowed), an echo server
mkdir -p "$T/files"
head -c 3000000 /dev/urandom > "$T/files/big"
echo small > "$T/files/small"
BIG_SHA=$(sha256sum < "$T/files/big" | cut -d' ' -f1)
SMALL_SHA=$(sha256sum < "$T/files/small" | cut -d' ' -f1)
start_server() { # NAME MODE [DIR]
    python3 "$SRCDIR/tests/helpers/egress-server.py" "$T/$1.port" "$T/$1.log" "$2" ${3:-} &
    echo $! > "$T/$1.pid"
    at_exit "kill $(cat "$T/$1.pid") 2>/dev/null"
    i=0; while [ ! -s "$T/$1.port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    : > "$T/$1.log"
}
start_server files files "$T/files"
start_server secret files "$T/files"
start_server echo echo
FP=$(cat "$T/files.port"); SP=$(cat "$T/secret.port"); EP=$(cat "$T/echo.port")
conns() { grep -c '^conn' "$T/$1.log"; }
bundle() { echo "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/bundle.json"; }

# --- usage ----------------------------------------------------------------
for bad in '::1' 'example.com:0' 'exa mple.com' '*.com' 'http://example.com/' ''; do
    out=$(cd "$W" && "$P" run --safe --allow-net "$bad" -- true 2>&1); rc=$?
    eq "$rc:$(echo "$out" | grep -c "allow-net")" "2:1" "--allow-net '$bad' is a usage error naming the option"
done
out=$(cd "$W" && "$P" run --allow-net example.com -- true 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'only applies to --safe')" "2:1" "--allow-net without --safe is a usage error"
out=$(cd "$W" && "$P" help run 2>&1)
eq "$(echo "$out" | grep -c -- '--allow-net HOST\[:PORT\]')" "1" "'pvisor help run' documents --allow-net"

# --- the allowed destination, byte for byte ---------------------------------
n0=$(conns files)
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- $C get "127.0.0.1:$FP" big 2>&1); rc=$?
eq "$rc:$out" "0:200 $BIG_SHA" "an allowed destination is reached through the broker: 3 MB byte for byte"
eq "$(( $(conns files) - n0 ))" "1" "... the host's server got exactly that connection"
B=$(bundle)
eq "$(jq -r '[.requested_policy.allow_net[0], .egress.connections.allowed, .egress.connections.refused,
              .egress.destinations[0].destination, .egress.destinations[0].verdict,
              (.egress.destinations[0].bytes_down >= 3000000), .dimensions.network.effective,
              (.dimensions.network.mechanism | test("the broker tunnels only to the --allow-net destinations")),
              .dimensions.network.evidence.egress_broker_port] | join(" ")' "$B")" \
    "127.0.0.1:$FP 1 0 127.0.0.1:$FP allowed true enforced true 3128" \
    "the Bundle records the allowlist, the tunnel and its bytes; network stays enforced"
check "... and validates against docs/bundle.schema.json" $VALIDATE "$B"

out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- python3 -c "
import hashlib, urllib.request
print(hashlib.sha256(urllib.request.urlopen('http://127.0.0.1:$FP/small').read()).hexdigest())" 2>&1)
eq "$out" "$SMALL_SHA" "plain http to an allowed destination: Python's urllib through http_proxy"
out=$(cd "$W" && HTTPS_PROXY=http://10.9.9.9:1 "$P" run --safe --pass-env HTTPS_PROXY --allow-net "127.0.0.1:$FP" -- \
    sh -c 'echo "$HTTPS_PROXY $https_proxy $HTTP_PROXY [${NO_PROXY:-}]"' 2>&1)
eq "$out" "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 []" \
    "inside, the proxy variables name the broker (over a passed host proxy, unreachable there)"
# Python's urllib reads *_proxy in any case, npm npm_config_* in any
# case: another spelling passed in names the broker too (it won over the
# broker's, as the environment's order had it).
out=$(cd "$W" && Http_proxy=http://10.9.9.9:1 Https_Proxy=http://10.9.9.9:1 NPM_CONFIG_PROXY=http://10.9.9.9:1 \
    "$P" run --safe --pass-env Http_proxy --pass-env Https_Proxy --pass-env NPM_CONFIG_PROXY \
    --allow-net "127.0.0.1:$FP" -- python3 -c '
import os, urllib.request
p = urllib.request.getproxies()
print(p["http"], p["https"], os.environ["NPM_CONFIG_PROXY"])' 2>&1)
eq "$out" "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128" \
    "... and so does a passed proxy variable spelt in another case"
out=$(cd "$W" && "$P" run --safe --network loopback --allow-net "127.0.0.1:$FP" -- sh -c 'echo "$NO_PROXY"' 2>"$T/err")
eq "$out" "localhost,127.0.0.1,::1" "with --network loopback, NO_PROXY keeps the sandbox's own loopback direct"
GET='import sys, urllib.request
try: print(urllib.request.urlopen(sys.argv[1], timeout=20).status)
except OSError: print("failed")'
# ... so a rule for the host's loopback by one of those names is taken only
# by a client that ignores NO_PROXY: Python's urllib (as curl) went direct
# to the sandbox's own loopback, and the run's end said only that it asked
# the broker for nothing
out=$(cd "$W" && "$P" run --safe --network loopback --allow-net "127.0.0.1:$FP" --allow-net "localhost:$FP" \
    --allow-net "127.0.0.2:$FP" -- python3 -c "$GET" "http://127.0.0.1:$FP/small" 2>"$T/err")
eq "$out:$(grep -c "warning: --allow-net 127.0.0.1:$FP, localhost:$FP: with --network loopback, NO_PROXY keeps" "$T/err"):$(jq '[.warnings[] | select(test("NO_PROXY keeps"))] | length' "$(bundle)")" \
    "failed:1:1" "... and such a rule is warned of, on stderr and in the Bundle (127.0.0.2, not in NO_PROXY, is not)"
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- python3 -c "$GET" "http://127.0.0.1:$FP/small" 2>"$T/err")
eq "$out:$(grep -c 'NO_PROXY' "$T/err")" "200:0" "... not without --network loopback, where urllib takes the rule through the broker"
# A client's own config file, read inside too, may name a host proxy (a
# local one, 127.0.0.1:7890, is common) that wins over HTTPS_PROXY; each
# such client has a variable that wins over its files, set to the broker.
# The verdict: the broker saw each client's CONNECT (refused, the hosts
# are not allowed) instead of a direct connect to the dead proxy.
H=$T/proxyhome; mkdir -p "$H/.config/pip" "$W/.cargo"
printf '[http]\n\tproxy = http://127.0.0.1:7890\n' > "$H/.gitconfig"
printf '[global]\nproxy = http://127.0.0.1:7890\n' > "$H/.config/pip/pip.conf"
printf 'proxy=http://127.0.0.1:7890\nhttps-proxy=http://127.0.0.1:7890\n' > "$W/.npmrc"
printf '[http]\nproxy = "http://127.0.0.1:7890"\n' > "$W/.cargo/config.toml"
tools= want=
command -v git >/dev/null && tools="$tools git ls-remote https://git.example/r.git;" want="$want git.example:443"
python3 -m pip --version >/dev/null 2>&1 && want="$want pip.example:443" &&
    tools="$tools python3 -m pip download -q --retries 0 --no-deps -i https://pip.example/simple -d d x;"
command -v npm >/dev/null && tools="$tools npm view --fetch-retries=0 --registry https://npm.example/ x;" &&
    want="$want npm.example:443"
if [ -n "$want" ]; then
    (cd "$W" && HOME=$H "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "$tools" >/dev/null 2>&1)
    eq "$(jq -r '[.egress.destinations[] | select(.verdict == "refused") | .destination] | join(" ")' "$(bundle)")" \
        "${want# }" "a proxy named in git's, pip's, npm's config file yields to the broker:$want"
else
    skip "a proxy in git's, pip's, npm's config file yields to the broker" "none of them here"
fi
if command -v git >/dev/null; then
    out=$(cd "$W" && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=user.name GIT_CONFIG_VALUE_0=kept "$P" run --safe \
        --pass-env GIT_CONFIG_COUNT --pass-env GIT_CONFIG_KEY_0 --pass-env GIT_CONFIG_VALUE_0 --allow-net "127.0.0.1:$FP" -- \
        sh -c 'echo $GIT_CONFIG_COUNT $(git config user.name) $(git config http.proxy)' 2>&1)
    eq "$out" "2 kept http://127.0.0.1:3128" "git's http.proxy comes after the GIT_CONFIG_* entries passed in, which stay"
    # git reads an empty GIT_CONFIG_COUNT as 0, and GIT_CONFIG_PARAMETERS
    # (what `git -c` hands on) after the GIT_CONFIG_* entries: a proxy
    # passed there won over the broker's
    out=$(cd "$W" && GIT_CONFIG_COUNT= GIT_CONFIG_PARAMETERS="'user.name'='kept' 'http.proxy'='http://10.9.9.9:1'" \
        "$P" run --safe --pass-env GIT_CONFIG_COUNT --pass-env GIT_CONFIG_PARAMETERS --allow-net "127.0.0.1:$FP" -- \
        sh -c 'echo $(git config user.name) $(git config http.proxy)' 2>&1)
    eq "$out" "kept http://127.0.0.1:3128" "... also after an empty GIT_CONFIG_COUNT and a passed GIT_CONFIG_PARAMETERS"
fi
# Cargo (often a rustup proxy that needs the real HOME): the workspace's
# .cargo/config.toml names the proxy
if command -v cargo >/dev/null && cargo --version >/dev/null 2>&1; then
    (cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- \
        env CARGO_NET_RETRY=0 cargo search --index sparse+https://cargo.example/ x >/dev/null 2>&1)
    eq "$(jq -r '[.egress.destinations[] | .destination] | join(" ")' "$(bundle)")" "cargo.example:443" \
        "a proxy named in Cargo's config file yields to the broker"
else
    diag "not tested here: a proxy in Cargo's config file (no cargo on this machine)"
fi
rm -rf "$W/.npmrc" "$W/.cargo"
out=$(cd "$W" && HTTPS_PROXY=http://10.9.9.9:1 "$P" run --safe -- sh -c 'echo "[${HTTPS_PROXY:-}]"' 2>&1)
eq "$out" "[]" "without --allow-net there is no proxy variable"
eq "$(jq -r '[.egress // "none", (.requested_policy.allow_net | length)] | join(" ")' "$(bundle)")" "none 0" \
    "... and no egress record"

# --- what is refused, and what reaches nothing --------------------------------
n0=$(conns secret)
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "
    $C get 127.0.0.1:$SP small; $C get localhost:$FP small; $C get '[::1]:$FP' small
    $C get evil.example:443 small; $C raw 'GET http://127.0.0.1:$SP/small HTTP/1.1\r\n\r\n'
    $C raw 'CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n'" 2>"$T/err"); rc=$?
eq "$rc:$(echo $out)" "0:403 - 403 - 403 - 403 - HTTP/1.1 403 Forbidden HTTP/1.1 400 Bad Request" \
    "another port, a name for the allowed address, another address, another host, plain http elsewhere, a bad target: refused"
eq "$(( $(conns secret) - n0 ))" "0" "... the server that was not allowed got no connection"
eq "$(grep -c 'egress broker refused 6 connection' "$T/err")" "1" "... the run's end says what the broker refused"
B=$(bundle)
eq "$(jq -r '[.egress.connections.refused, (.egress.destinations | map(select(.verdict == "refused")) | length),
              (.egress.destinations[] | select(.destination == "evil.example:443") | .reason)] | join("|")' "$B")" \
    "6|5|not in the run's --allow-net list" "the Bundle records each refusal with its reason (by destination: the CONNECT and the plain request to the same port are one)"
rev=$(cd "$W" && "$P" status --review 2>/dev/null)
eq "$(echo "$rev" | grep -c '^Network: .*0 connections through the egress broker, 6 refused'):$(echo "$rev" | grep -c 'refused  evil.example:443: 1 connection: not in')" \
    "1:1" "status --review shows what was refused"
eq "$(cd "$W" && "$P" status 2>/dev/null | grep -c '^Egress: *0 allowed, 6 refused, 0 failed')" "1" \
    "pvisor status says what the broker refused"
eq "$(cd "$W" && "$P" status --review --json 2>/dev/null | jq -r '.egress.connections.refused')" "6" \
    "status --review --json carries the egress record"
# An allowed destination that cannot be reached (here: nothing listens; on
# a real run, a name that does not resolve) is said apart from the
# refusals: behind four of them it was cut off as "..." and counted as
# "refused", so the run's end pointed at --allow-net, not at the cause.
DEAD=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$DEAD" -- sh -c "
    for h in a b c d; do $C get \$h.example:443 small; done; $C get 127.0.0.1:$DEAD small" 2>"$T/err")
eq "$(echo $out)" "403 - 403 - 403 - 403 - 502 -" "four hosts not allowed, then the allowed one that is down"
eq "$(grep -c '^pvisor run: the egress broker refused 4 connection(s): a.example:443 (not in .*) \.\.\.$' "$T/err")" \
    "1" "... the run's end lists the refusals"
eq "$(grep -c "^pvisor run: the egress broker could not complete 1 connection(s): 127.0.0.1:$DEAD (" "$T/err")" "1" \
    "... and, on a line of its own, the allowed destination it could not reach"

# A command that first asks for more other names than the record lists
# does not drop its tunnel from the list: refusals take at most half.
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "
    $C others 300; $C get 127.0.0.1:$FP big" 2>/dev/null)
eq "$(echo $out)" "300 200 $BIG_SHA" "300 other names refused, then a tunnel"
B=$(bundle)
eq "$(jq -r '[(.egress.destinations | map(select(.verdict == "allowed")) | .[0].destination),
              (.egress.bytes_down >= 3000000), (.egress.destinations_dropped > 0)] | join(" ")' "$B")" \
    "127.0.0.1:$FP true true" "... the tunnel is still listed; the record totals its bytes"
rev=$(cd "$W" && "$P" status --review 2>/dev/null)
eq "$(echo "$rev" | grep -c "^  allowed  127.0.0.1:$FP: 1 connection, [0-9]* bytes sent, [0-9]* received")" "1" \
    "... and status --review shows it"
check "... the Bundle validates" $VALIDATE "$B"

# Bypass attempts: the host's servers directly (the control, a run without
# the sandbox, gets through), another loopback port, and binding the
# broker's port.
n0=$(conns files)
out=$(cd "$W" && "$P" run -- $C direct 127.0.0.1 "$FP" 2>&1)
eq "$out" "connected" "control: without the sandbox a direct connection reaches the host's server"
eq "$(( $(conns files) - n0 ))" "1" "... which saw it"
n0=$(conns files)
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "
    $C direct 127.0.0.1 $FP; $C direct ::1 $FP; $C direct 127.0.0.1 $SP
    python3 -c '
import socket
s = socket.socket()
try:
    s.bind((\"127.0.0.1\", 3129)); print(\"bound\")
except OSError as e:
    print(\"bind\", e.errno)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b\"x\", (\"10.0.0.1\", 53)); print(\"udp sent\")
except OSError as e:
    print(\"udp\", e.errno)
'" 2>&1)
if [ "$(jq -r .sandbox_evidence.landlock.abi "$(bundle)")" -ge 4 ]; then
    eq "$(echo $out)" "EACCES EACCES EACCES bind 13 udp 101" \
        "--safe --allow-net: direct TCP (Landlock: the broker's port only), bind and UDP out (no route) all fail"
else
    # Landlock's TCP rights came with ABI 4 (Linux 6.7): before it a direct
    # connect or a bind is the sandbox's own loopback's affair, where nothing
    # of the host's listens (the network namespace), and the Bundle says so
    eq "$(echo $out):$(jq -r '.dimensions.network.notes[0]' "$(bundle)" | grep -c 'TCP on the sandbox.s own loopback is not refused')" \
        "ECONNREFUSED ECONNREFUSED ECONNREFUSED bound udp 101:1" \
        "--safe --allow-net on Landlock ABI < 4: direct TCP reaches nothing of the host's (its own loopback), UDP out fails (no route)"
fi
eq "$(( $(conns files) - n0 ))" "0" "... and nothing reached the host's server"

# --network loopback keeps its own loopback, and the broker is still the
# only way to the host's
out=$(cd "$W" && "$P" run --safe --network loopback --allow-net "127.0.0.1:$FP" -- sh -c "
    python3 -c '
import socket, threading
s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)
port = s.getsockname()[1]
threading.Thread(target=lambda: s.accept()[0].sendall(b\"inside\"), daemon=True).start()
c = socket.create_connection((\"127.0.0.1\", port)); print(c.recv(10).decode())
'; $C direct 127.0.0.1 $FP; $C get 127.0.0.1:$FP small" 2>&1 | grep -v 'warning: --allow-net 127.0.0.1:.*NO_PROXY')
eq "$(echo $out)" "inside ECONNREFUSED 200 $SMALL_SHA" \
    "--network loopback with --allow-net: the sandbox's own loopback works, the host's is reached only by the broker"

out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "$C raw 'GET /x?token=SECRET1 HTTP/1.1\r\n\r\n'; exit 3" 2>&1)
eq "$(echo "$out" | grep -c 'asked the egress broker for no connection'):$(jq -c .egress "$(bundle)" | grep -c SECRET1):$(jq -r .egress.destinations[0].destination "$(bundle)")" "0:0:GET /x" \
    "a refused request's query string is not recorded (it may hold a secret); a command that used the broker gets no hint"
# ... nor when the target's host is not a host name (an underscore, a port
# out of range) or the request line is not HTTP/1.x: those recorded the
# whole target, query included, and the run's end and the review showed it
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "
    $C raw 'GET http://my_svc.internal/v1?api_key=SECRET2 HTTP/1.1\r\n\r\n'
    $C raw 'GET http://127.0.0.1:99999/x?token=SECRET3 HTTP/1.1\r\n\r\n'
    $C raw 'GET /v1/x?token=SECRET4 HTTP/2.0\r\n\r\n'" 2>&1)
rev=$(cd "$W" && "$P" status --review 2>&1)
eq "$(echo "$out" | grep -c 'HTTP/1.1 400'):$(echo "$out$rev" | grep -c SECRET):$(jq -c .egress "$(bundle)" | grep -c SECRET):$(jq -r '[.egress.destinations[].destination] | join(" ")' "$(bundle)")" \
    "3:0:0:http://my_svc.internal/v1 http://127.0.0.1:99999/x GET?/v1/x" \
    "... nor of a target that is not host:port, nor of a request line that is not HTTP/1.x"
# Python's urllib sends a URL's password to the proxy as given; a host
# name with an underscore does not parse: refused, and recorded without
# the password or the query (the run's end prints the record too).
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- python3 -c "
import urllib.request
for u in ('http://u:SECRET5@127.0.0.1:$FP/small', 'http://my_svc.example/api?key=SECRET6'):
    try:
        urllib.request.urlopen(u)
    except Exception as e:
        print(e.code)" 2>&1)
eq "$(echo $out | grep -o '^400 400'):$(echo "$out" | grep -c SECRET):$(jq -c .egress "$(bundle)" | grep -c SECRET)" \
    "400 400:0:0" "a refused URL's password or query is neither recorded nor printed"
eq "$(jq -r '[.egress.destinations[].destination] | join(" ")' "$(bundle)")" \
    "GET http://127.0.0.1:$FP/small http://my_svc.example/api" "... what is recorded is the rest of it"
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c 'exit 3' 2>&1); rc=$?
eq "$rc:$(echo "$out" | grep -c 'asked the egress broker for no connection')" "3:1" \
    "a command that failed without asking the broker for anything gets a hint (a client that ignores HTTPS_PROXY)"
# ... but only a command that ran: one not found, or not executable, got
# the hint too, as if it were a client that ignored HTTPS_PROXY
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- pvisor-no-such-command 2>&1); rc=$?
out2=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- /etc/passwd 2>&1); rc2=$?
eq "$rc:$rc2:$(echo "$out$out2" | grep -c 'asked the egress broker for no connection'):$(echo "$out" | grep -c 'command not found')" \
    "127:126:0:1" "a command that could not be executed gets no such hint (its status says why)"

# --- a tunnel carries a half-close; many tunnels at once ----------------------
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$EP" -- $C echo "127.0.0.1:$EP" hello 2>&1)
eq "$out" "200 echo:hello" "a tunnel passes the client's half-close (the server answers after EOF)"
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c "
    for i in 1 2 3 4 5 6 7 8; do $C get 127.0.0.1:$FP small & done; wait" 2>&1)
eq "$(echo "$out" | grep -c "^200 $SMALL_SHA\$")" "8" "eight tunnels at once"
eq "$(jq -r '.egress.destinations[0].connections' "$(bundle)")" "8" "... counted under one destination"

# --- the host's resolver ------------------------------------------------------
# In network and mount namespaces of our own, the host's resolver asks our
# DNS server (tests/helpers/egress-dns.py) through the resolv.conf given.
# in_dns_ns RESOLV_CONF DNS_ARGS SCRIPT: runs SCRIPT (sh) there; the
# queries are in $T/dns.log.  In SCRIPT, "remote NAME [MODE]" starts
# tests/helpers/egress-server.py NAME MODE (none: no server) on
# $RADDR (default 1.2.3.7: a public address, outside every range refused to
# a name, reached only here), a host of its own: a network namespace behind
# a veth pair (an address of the broker's own machine is refused to a
# name), S its pid.
in_dns_ns() {
    rm -f "$T/dns.ready"; : > "$T/dns.log"
    T=$T W=$W P=$P C=$C SRCDIR=$SRCDIR RC=$1 DNS=$2 RADDR=${RADDR:-1.2.3.7} unshare --net --mount sh -c '
        ip link set lo up && mount --bind "$RC" /etc/resolv.conf || exit 1
        python3 "$SRCDIR/tests/helpers/egress-dns.py" "$T/dns.ready" "$T/dns.log" $DNS >/dev/null 2>&1 &
        D=$!
        i=0; while [ ! -s "$T/dns.ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
        remote() {
            rm -f "$T/$1.port" "$T/$1.ns" "$T/$1.link"
            unshare --net sh -c "echo \$\$ > \"$T/$1.ns\"; while [ ! -e \"$T/$1.link\" ]; do sleep 0.05; done
                ip link set lo up; ip link set v1 up; ip addr add $RADDR/24 dev v1
                if [ -n \"$2\" ]; then
                    EGRESS_SERVER_ADDR=$RADDR exec python3 \"$SRCDIR/tests/helpers/egress-server.py\" \"$T/$1.port\" \"$T/$1.log\" $2
                fi
                exec sleep 120" >/dev/null 2>&1 &
            S=$!
            i=0; while [ ! -s "$T/$1.ns" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
            ip link add v0 type veth peer name v1 netns "$(cat "$T/$1.ns")" && ip link set v0 up &&
                ip addr add "${RADDR%.*}.1/24" dev v0
            : > "$T/$1.link"
            i=0; while [ -n "$2" ] && [ ! -s "$T/$1.port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
        }
        '"$3"'
        kill $D'
}
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && unshare --net --mount true 2>/dev/null; then
    # A server that never answers (30 s a name with these options): the
    # run must still end when its command does (once its three clients
    # have sent their requests, and 2 s for the broker to read them; a
    # fixed 3 s from the start was too short under load, python's start
    # slow), not when the lookups give up.  The Bundle's reason says the
    # run ended first.
    printf 'nameserver 127.0.0.1\noptions timeout:30 attempts:1\n' > "$T/resolv.slow"
    took=$(in_dns_ns "$T/resolv.slow" silent '
        s=$(date +%s)
        cd "$W" && "$P" run --safe --allow-net "*.pvisor-test.example" -- sh -c "
            for n in 1 2 3; do
                $C raw \"CONNECT slow\$n.pvisor-test.example:443 HTTP/1.1\\r\\n\\r\\n\" sent\$n &
            done
            i=0; while [ ! -e sent1 ] || [ ! -e sent2 ] || [ ! -e sent3 ]; do
                [ \$i -lt 600 ] || break; sleep 0.05; i=\$((i + 1))
            done; sleep 2" >/dev/null 2>&1
        echo $(($(date +%s) - s))' 2>/dev/null)
    eq "$([ "${took:-99}" -lt 20 ] && echo prompt || echo "${took:-?} s")" "prompt" \
        "three name lookups still under way when the command ends do not hold the run up (30 s each)"
    eq "$(jq -r '[.egress.connections.failed,
                  ([.egress.destinations[].reason | gsub("slow[0-9]"; "slowN")] | unique | join(","))] | join(" ")' \
        "$(bundle)")" "3 resolving slowN.pvisor-test.example: the run ended first" \
        "... the Bundle says they were cut short"

    # A search domain: a name under an allowed wildcard that does not
    # exist must not lead to NAME.SEARCH-DOMAIN, a host no rule names
    # (served here on an address of our namespace's loopback).
    printf 'nameserver 127.0.0.1\nsearch corp.pvisor-test.example\n' > "$T/resolv.search"
    out=$(in_dns_ns "$T/resolv.search" "answer corp.pvisor-test.example 1.2.3.7" '
        remote corp echo
        cd "$W" && "$P" run --safe --allow-net "*.pvisor-test.example:$(cat "$T/corp.port")" -- sh -c "
            $C echo nx.pvisor-test.example:$(cat "$T/corp.port") hi
            $C echo a.corp.pvisor-test.example:$(cat "$T/corp.port") hi" 2>/dev/null
        kill $S' 2>/dev/null)
    eq "$(echo $out)" "502 200 echo:hi" \
        "a name under an allowed wildcard is not tried below the host's search domain (a name that is, works)"
    eq "$(grep -c '^nx.pvisor-test.example.corp' "$T/dns.log")" "0" "... the resolver was not asked for it"

    # A resolver that is slow but answers: the connect's 10 s were counted
    # from before the lookup, so a name that took 10 s to resolve got "504
    # Gateway Timeout" from a server that was up.
    printf 'nameserver 127.0.0.1\noptions timeout:20 attempts:1\n' > "$T/resolv.delay"
    out=$(in_dns_ns "$T/resolv.delay" "answer pvisor-test.example 1.2.3.7 10.5" '
        remote slowdns echo
        SP=$(cat "$T/slowdns.port")
        cd "$W" && "$P" run --safe --allow-net "slow.pvisor-test.example:$SP" -- $C echo slow.pvisor-test.example:$SP hi 2>/dev/null
        kill $S' 2>/dev/null)
    eq "$out" "200 echo:hi" "a name the resolver took over 10 s to answer still gets its 10 s to connect"

    # A name with a public address that cannot be reached and a private
    # one: the broker tried what it may and failed; it said "403
    # Forbidden", a refusal (pointing at --allow-net), with the failure's
    # reason, because the private address came last.
    printf 'nameserver 127.0.0.1\n' > "$T/resolv.mixed"
    out=$(in_dns_ns "$T/resolv.mixed" "answer pvisor-test.example 1.2.3.7,10.0.0.5" '
        remote mixed
        cd "$W" && "$P" run --safe --allow-net "mixed.pvisor-test.example:9" -- $C get mixed.pvisor-test.example:9 x 2>/dev/null
        kill $S' 2>/dev/null)
    eq "$out:$(jq -r '.egress.destinations[] | [.verdict, .reason] | join(" ")' "$(bundle)")" \
        "502 -:failed connecting to 1.2.3.7 port 9: Connection refused" \
        "a name whose public address cannot be reached and whose other one is private: failed (502), not refused"

    # A name whose DNS points at an address of the broker's own machine,
    # one no range rules out (a public IPv4 address on its interface, a
    # global IPv6 one; the command can learn it from what an allowed
    # server sees): the machine's own services, those listening on every
    # address included, were reached.  Here 1.2.4.9 on the
    # namespace's loopback and a server on 0.0.0.0 (names that lead to a
    # remote host's address get through: above).
    printf 'nameserver 127.0.0.1\n' > "$T/resolv.own"; : > "$T/own.log"
    out=$(in_dns_ns "$T/resolv.own" "answer own.pvisor-test.example 1.2.4.9" '
        ip addr add 1.2.4.9/32 dev lo
        EGRESS_SERVER_ADDR=0.0.0.0 python3 "$SRCDIR/tests/helpers/egress-server.py" "$T/own.port" "$T/own.log" echo \
            >/dev/null 2>&1 & O=$!
        i=0; while [ ! -s "$T/own.port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
        OP=$(cat "$T/own.port")
        cd "$W" && "$P" run --safe --allow-net "*.pvisor-test.example:$OP" -- $C echo db.own.pvisor-test.example:$OP hi 2>/dev/null
        kill $O' 2>/dev/null)
    eq "$out:$(grep -c conn "$T/own.log"):$(jq -r '.egress.destinations[] | [.verdict, .reason] | join(" ")' "$(bundle)")" \
        "403:0:refused db.own.pvisor-test.example resolves to 1.2.4.9, an address of this machine" \
        "a name that resolves to an address of the broker's own machine is refused; its service got nothing"

    # The documentation ranges (TEST-NET-1, -2, -3) are never routed on the
    # Internet: a name that led there reached a network that took one for
    # its own, as 2001:db8::/32 was already refused.  Here a host at
    # 192.0.2.7 with a server; the control is the same run with the address
    # as the rule (the user named it).
    out=$(RADDR=192.0.2.7 in_dns_ns "$T/resolv.own" "answer doc.pvisor-test.example 192.0.2.7" '
        remote doc echo
        DP=$(cat "$T/doc.port")
        cd "$W" && "$P" run --safe --allow-net "*.pvisor-test.example:$DP" -- $C echo www.doc.pvisor-test.example:$DP hi 2>/dev/null
        cd "$W" && "$P" run --safe --allow-net "192.0.2.7:$DP" -- $C echo 192.0.2.7:$DP hi 2>/dev/null
        kill $S' 2>/dev/null)
    eq "$(echo $out):$(grep -c conn "$T/doc.log")" "403 200 echo:hi:1" \
        "a name that resolves to a documentation address (192.0.2.7) is refused; the address as the rule gets through"
else
    skip "name lookups under way at the run's end" "needs root, ip and unshare (a DNS server of the test's own)"
    skip "search domains" "needs root, ip and unshare (a DNS server of the test's own)"
fi

# --- --strict and an ordinary user -------------------------------------------
out=$(cd "$W" && "$P" run --safe --strict --allow-net "127.0.0.1:$FP" -- $C get "127.0.0.1:$FP" small 2>&1)
eq "$out" "200 $SMALL_SHA" "--strict runs with --allow-net (network is enforced)"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    U=$T/u; mkdir -p "$U/ws"; cp "$W/client.py" "$U/ws/"; chown -R 65534:65534 "$U"
    out=$(cd "$U/ws" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$U" XDG_STATE_HOME="$U/state" \
        "$P" run --safe --allow-net "127.0.0.1:$FP" -- sh -c \
        "python3 client.py get 127.0.0.1:$FP small; python3 client.py get 127.0.0.1:$SP small" 2>/dev/null)
    eq "$(echo $out)" "200 $SMALL_SHA 403 -" "as an ordinary user: the same broker, the same refusals"
else
    skip "--allow-net as an ordinary user" "needs root and setpriv to switch users"
fi
# --- the run's name server ------------------------------------------------------
# Without --network loopback the sandbox's resolv.conf names a server on its
# own 127.0.0.1:53, in the supervisor, which answers every name "no such
# name" (NXDOMAIN: a client gives up at once, where a name server out of
# reach left musl waiting 5 s a name) and records it: the run's end says
# which names to --allow-net.
lookup='import socket, sys
for h in sys.argv[1:]:
    try:
        socket.getaddrinfo(h, 443)
        print(h, "resolved")
    except socket.gaierror as e:
        print(h, "EAI_NONAME" if e.errno == socket.EAI_NONAME else "errno %d" % e.errno)'
out=$(cd "$W" && "$P" run --safe -- sh -c "grep '^nameserver' /etc/resolv.conf; python3 -c '$lookup' api.pvisor-test.example Other.Pvisor-Test.example" 2>"$T/dns.err")
eq "$(echo $out)" "nameserver 127.0.0.1 api.pvisor-test.example EAI_NONAME Other.Pvisor-Test.example EAI_NONAME" \
    "--safe: resolv.conf names the run's server, which answers 'no such name' (EAI_NONAME, not 'try again')"
eq "$(jq -c '[.dns.answer, ([.dns.names[].name] | sort), (.dns.queries >= 2)]' "$(bundle)"):$(grep -c "^pvisor run: the command looked up 2 host name(s), which this run answers 'no such name' (no network under --safe): api.pvisor-test.example, other.pvisor-test.example; to let it reach a host through pvisor's egress broker: --allow-net HOST$" "$T/dns.err")" \
    '["NXDOMAIN",["api.pvisor-test.example","other.pvisor-test.example"],true]:1' \
    "  the Bundle records the names (lowercased), and the run's end names them and --allow-net"
# ... and so does the review, beside what the run changed
rv=$(cd "$W" && "$P" status --review 2>&1)
eq "$(printf '%s\n' "$rv" | sed -n '/^Looked up: /,/^$/p' | tr '\n' '|'):$(cd "$W" && "$P" status --review --json | jq -c '[.dns.names[].name] | sort')" \
    "Looked up:   2 host names, each answered 'no such name' (to let the command reach a host through pvisor's egress broker: --allow-net HOST):|  api.pvisor-test.example|  other.pvisor-test.example||:[\"api.pvisor-test.example\",\"other.pvisor-test.example\"]" \
    "  status --review lists them under 'Looked up:', its --json has the Bundle's dns"
# Names are the command's bytes: a control byte (ESC) is \xHH in the Bundle
# and on the terminal alike, once; escaped a second time for the terminal
# (\x5cx1b, 7 bytes where the check counted 4) a long one ran past the end
# of the message's buffer, and the supervisor crashed at the run's end.
odd='import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i in range(5):
    name = b"".join(bytes([49]) + bytes([27 + i]) * 49 for _ in range(3)) + b"\0"
    s.sendto(struct.pack(">6H", i, 0x100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1), ("127.0.0.1", 53))
    s.recv(512)
print("asked")'
out=$(cd "$W" && "$P" run --safe -- python3 -c "$odd" 2>"$T/dns.err"; echo "rc=$?")
first=$(python3 -c 'print(".".join(["\\x1b" * 49] * 3))')
eq "$(echo $out):$(grep -cF "looked up 5 host name(s), which this run answers 'no such name' (no network under --safe): $first, ...; to" "$T/dns.err"):$(grep -c "$(printf '\033')" "$T/dns.err")" \
    "asked rc=0:1:0" "  names of control bytes: the run ends as the command did, the end shows them escaped once, no raw escape"
eq "$(jq -r '.dns.names[0].name' "$(bundle)")" "$first" "  ... as the Bundle does"
# ... and so are a label's spaces, dots and NULs: they were shown as they
# were, so a label "com; to let it reach a host through pvisor's egress
# broker:" wrote pvisor's own advice onto the terminal, and a NUL cut the
# name short ("api.openai.com\0.evil.example" recorded as api.openai.com)
spoof='import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i, labels in enumerate([[b"api", b"openai", b"com; to let it reach a host:", b"--allow-net *", b"evil", b"example"],
                            [b"api", b"openai", b"com\0", b"evil", b"example"]]):
    s.sendto(struct.pack(">6H", i, 0x100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l for l in labels) + b"\0\0\1\0\1", ("127.0.0.1", 53))
    s.recv(512)'
(cd "$W" && "$P" run --safe -- python3 -c "$spoof" 2>"$T/dns.err")
eq "$(grep -c 'to let it reach a host:' "$T/dns.err"):$(grep -cF 'api.openai.com\x3b\x20to\x20let\x20it\x20reach\x20a\x20host\x3a.--allow-net\x20\x2a.evil.example, api.openai.com\x00.evil.example; to' "$T/dns.err")" \
    "0:1" "  a label's spaces and punctuation are \\xHH on the terminal, a NUL does not cut the name short"
eq "$(jq -r '.dns.names[1].name' "$(bundle)")" 'api.openai.com\x00.evil.example' "  ... as in the Bundle"
# Past 64 names the server only counts: the end says so, also when the 64
# recorded were reverse lookups, which it does not show (it said nothing:
# the host looked up after them went unmentioned).
rev='import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i, n in enumerate(["%d.0.0.10.in-addr.arpa" % i for i in range(64)] + ["api.past.example"]):
    s.sendto(struct.pack(">6H", i, 0x100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l for l in n.encode().split(b".")) + b"\0\0\1\0\1", ("127.0.0.1", 53))
    s.recv(512)'
(cd "$W" && "$P" run --safe -- python3 -c "$rev" 2>"$T/dns.err")
eq "$(jq -c '[(.dns.names | length), .dns.unrecorded_queries]' "$(bundle)"):$(grep -c "looked up 0 host name(s) and names past the 64 recorded (1 queries)" "$T/dns.err")" \
    "[64,1]:1" "  names past the 64 recorded: the end says so, after 64 reverse lookups too"
out=$(cd "$W" && "$P" run --safe -- python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.bind(("127.0.0.1", 53)); print("BOUND")
except OSError as e:
    print("refused", e.errno)
s2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s2.bind(("127.0.0.2", 53)); print("BOUND")
except OSError as e:
    print("refused", e.errno)' 2>/dev/null)
eq "$(echo "$out" | grep -c BOUND)" 0 "  the command cannot take port 53 (no capability; the server's socket holds 127.0.0.1:53)"
out=$(cd "$W" && "$P" run --safe --allow-net "127.0.0.1:$FP" -- python3 -c "$lookup" direct.pvisor-test.example 2>&1 >/dev/null)
eq "$(echo "$out" | grep -c "looked up 1 host name(s).*direct.pvisor-test.example; a client that resolves names itself instead of using HTTPS_PROXY (the egress broker) reaches none")" 1 \
    "  with --allow-net the end says a client that resolves names itself gets none"
out=$(cd "$W" && "$P" run --safe --network loopback -- sh -c 'cmp -s /etc/resolv.conf /proc/1/root/etc/resolv.conf 2>/dev/null; grep -c "pvisor run --safe" /etc/resolv.conf' 2>/dev/null)
eq "$out:$(jq -r '.dns // "none"' "$(bundle)")" "0:none" \
    "  not with --network loopback (the command may serve port 53 itself): the host's resolv.conf, no record"
"$P" run -- true
eq "$(jq -r '.dns // "none"' "$(bundle)")" none "  nor without the sandbox"

check "every Bundle of this file validates" sh -c "$VALIDATE $XDG_STATE_HOME/pvisor/runs/*/bundle.json"
