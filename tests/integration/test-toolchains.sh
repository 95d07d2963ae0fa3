#!/bin/sh
# This host's real toolchains under `pvisor run --safe`, as an agent uses
# them, offline: a Python venv and `pip install --no-index` of a wheel,
# pyenv's shims and `pyenv` itself, cargo (a path dependency, a proc
# macro, a build script) and a rustup home the environment names, npm
# (`npm pack`, an install of the tarball and of a directory), javac and
# java, `make -j2` of a C project, and git (commit, branch, rebase, gc) in
# a repository of the host.  Each case checks the command's own result,
# that the stage holds what it made, that `pvisor apply` writes exactly the
# stage's bytes into the workspace (and the result runs on the host), and
# that what the tools wrote in HOME (cargo's, npm's, pip's caches) was
# discarded: the host's HOME is unchanged.  Then again as the unprivileged
# user pvu (uid 4173) with the toolchains in /usr/bin and a pyenv of its
# own, and with an --allow-write grant that keeps npm's cache.
#
# A toolchain this host lacks is a skip, in CI too: it is not a kernel
# feature.  Needs $PVISOR and a working --safe.  TAP.
. "$(dirname "$0")/../lib.sh"
cd "$T"
LC_ALL=C; export LC_ALL
P=$PVISOR
[ -z "${PVISOR_TEST_KEEP:-}" ] || at_exit "cp -a '$T' '$PVISOR_TEST_KEEP'"
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ]; then
    chmod 0666 /dev/fuse # as distributions set it up (see scripts/test.sh)
fi

# absent DESCRIPTION REASON: a toolchain this host does not have, a skip
# in CI too (lib.sh's skip fails there: it is for missing kernel features)
absent() { _n=$((_n + 1)); echo "ok $_n - $1 # SKIP $2"; }
have() { command -v "$1" >/dev/null 2>&1; }
# out: a run's output, less the one warning another test's moment of a
# socket kernel.core_pattern (test-adversarial, run beside this one) adds
# the command's output, without pvisor's notes that do not concern it (core_pattern; HOME's discarded writes)
out() { grep -v "^pvisor run: warning: kernel.core_pattern \|^pvisor run: the command wrote .* in HOME's view, discarded at exit" "$T/out"; }
show_out() { sed 's/^/# /' "$T/out" | tail -n 15; }

mkdir -p "$T/probe"
if ! (cd "$T/probe" && "$P" run --safe -- true) >/dev/null 2>&1; then
    skip "toolchains under --safe" "--safe runs do not work here (see pvisor doctor)"
    exit 0
fi

# stage_of: the newest run's stage, in the state dir ($XDG_STATE_HOME)
stage_of() { echo "$XDG_STATE_HOME/pvisor/runs/$(latest_run)/stage"; }
# tree DIR LIST FILES: type, mode, size (not a directory's) and link
# target of the paths in LIST, and the content digest of those in FILES
# (relative, one a line) under DIR
tree() {
    (cd "$1" && xargs -d '\n' stat -c '%F %a %s %N' < "$2" | sed 's/^\(directory [0-7]*\) [0-9]*/\1/' &&
     xargs -r -d '\n' sha256sum < "$3")
}
# upper_lists STAGE: the paths its upper holds, and the regular files
upper_lists() {
    (cd "$1/upper" && find . -mindepth 1 | sort > "$T/upper.list" && find . -type f | sort > "$T/upper.files")
}
# applied WORKSPACE DESC: apply the newest run's stage (as $AS, in the
# state dir $ST) and check the workspace holds exactly what its upper held
# (every path it made)
AS=; ST=$XDG_STATE_HOME
applied() {
    S=$(XDG_STATE_HOME=$ST; stage_of)
    upper_lists "$S"
    tree "$S/upper" "$T/upper.list" "$T/upper.files" > "$T/upper.tree" 2>&1
    (cd "$1" && $AS "$P" apply) > "$T/apply.out" 2>&1
    arc=$?
    tree "$1" "$T/upper.list" "$T/upper.files" > "$T/ws.tree" 2>&1
    if [ $arc -eq 0 ] && [ -s "$T/upper.list" ] && cmp -s "$T/upper.tree" "$T/ws.tree"; then
        ok "$2: apply writes exactly the stage's $(wc -l < "$T/upper.list") paths"
    else
        not_ok "$2: apply writes exactly the stage's paths (apply exit $arc)"
        sed 's/^/# /' "$T/apply.out" | tail -n 5
        diff "$T/upper.tree" "$T/ws.tree" | head -n 10 | sed 's/^/# /'
    fi
}
# reviewed WORKSPACE PATH...: the review lists each PATH as added
reviewed() {
    w=$1; shift
    (cd "$w" && "$P" status --review) > "$T/review" 2>&1
    for p in "$@"; do grep -q "^  A $p\(  (binary)\)\{0,1\}\$" "$T/review" || { diag "review lacks $p"; return 1; }; done
}

# The host's HOME where the tools write (caches, registries, shims): type,
# mode, size and time of each entry, deep in the small ones, two levels in
# the toolchains.  Compared before and after every case.
home_manifest() {
    for hd in .cargo .npm .cache .m2 .config/pip .local/share/virtualenv .rustup .pyenv; do
        if [ -e "$1/$hd" ] || [ -L "$1/$hd" ]; then
            case $hd in
            .rustup|.pyenv) depth=2 ;;
            *) depth=64 ;;
            esac
            find "$1/$hd" -maxdepth $depth -printf '%y %m %s %T@ %l %p\n' | sort
        else
            echo "absent $hd"
        fi
    done
}
home_unchanged() { # HOME BEFORE
    home_manifest "$1" > "$T/home.now"
    cmp -s "$2" "$T/home.now" && return 0
    diff "$2" "$T/home.now" | head -n 10 | sed 's/^/# /'
    return 1
}
ROOTHOME=$HOME
home_manifest "$ROOTHOME" > "$T/home.before"

# --- Python: a venv and pip install --no-index of a wheel built here --------------
mkwheel() { # DIR: hello-0.1-py3-none-any.whl, console script `hello`
    python3 - "$1/hello-0.1-py3-none-any.whl" <<'EOF'
import base64, hashlib, sys, zipfile
files = {
    "hello/__init__.py": b'def main():\n    print("hello from a wheel")\n',
    "hello-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: hello\nVersion: 0.1\n",
    "hello-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "hello-0.1.dist-info/entry_points.txt": b"[console_scripts]\nhello = hello:main\n",
}
rec = "".join("%s,sha256=%s,%d\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode(), len(d))
              for n, d in files.items())
files["hello-0.1.dist-info/RECORD"] = (rec + "hello-0.1.dist-info/RECORD,,\n").encode()
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, d in files.items():
        z.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), d)
EOF
}
PYWORK='python3 -m venv .venv && .venv/bin/pip install -q --no-index --disable-pip-version-check ./hello-0.1-py3-none-any.whl &&
    .venv/bin/hello && .venv/bin/python -c "import hello, sys; print(sys.prefix)" &&
    printf "import unittest\nclass T(unittest.TestCase):\n    def test_a(self): self.assertEqual(2 + 2, 4)\n" > test_a.py &&
    python3 -m unittest -q test_a 2>&1 | tail -n 1'
if have python3 && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    W=$T/py; mkdir -p "$W"; mkwheel "$W"
    (cd "$W" && "$P" run --safe -- sh -c "$PYWORK") > "$T/out" 2>&1
    eq "$?:$(out)" "0:hello from a wheel
$W/.venv
OK" "python ($(command -v python3)): venv, pip install --no-index of a wheel, its script, unittest"
    check "python: the review lists the venv, its script and the test's bytecode" \
        reviewed "$W" ".venv/" ".venv/bin/hello" ".venv/pyvenv.cfg" "__pycache__/"
    applied "$W" "python"
    eq "$("$W/.venv/bin/hello" 2>&1)" "hello from a wheel" "python: the applied venv's script runs on the host"
    check "python: the host's HOME is unchanged" home_unchanged "$ROOTHOME" "$T/home.before"
else
    absent "python: venv and pip install --no-index" "no python3 with venv and ensurepip"
fi

# pyenv: the shim (a bash script running $PYENV_ROOT/libexec/pyenv) with no
# flag, `pyenv local` (a .python-version in the workspace), `pyenv rehash`
# (writes the shims: HOME's view, discarded)
if have pyenv && PYR=$(pyenv root 2>/dev/null) && [ -x "$PYR/libexec/pyenv" ] && [ -d "$PYR/versions" ]; then
    W=$T/pyenv; mkdir -p "$W"
    V=$(cd "$W" && pyenv version-name 2>/dev/null)
    (cd "$W" && "$P" run --safe -- python3 -c 'import sys; print(sys.prefix)') > "$T/out" 2>&1
    eq "$?:$(out)" "0:$(cd "$W" && python3 -c 'import sys; print(sys.prefix)')" \
        "pyenv: python3, its shim, runs with no flag (as on the host)"
    (cd "$W" && "$P" run --safe -- sh -c "pyenv local '$V' && pyenv version-name && pyenv rehash && python3 -c 'print(6 * 7)'") > "$T/out" 2>&1
    eq "$?:$(out)" "0:$V
42" "pyenv: pyenv local, version-name and rehash work inside"
    eq "$(cat "$W/.python-version" 2>/dev/null || echo none)" none "pyenv: .python-version is staged, not in the workspace"
    # the root named by PYENV_ROOT, when HOME is another (an agent harness's
    # fresh HOME): pyenv picked HOME/.pyenv inside, whose versions are none
    mkdir -p "$T/fresh-home"
    (cd "$W" && HOME=$T/fresh-home PYENV_ROOT=$PYR "$P" run --safe -- pyenv version-name) > "$T/out" 2>&1
    eq "$?:$(out)" "0:$V" "pyenv: PYENV_ROOT is handed over: pyenv inside uses the host's root, not HOME/.pyenv"
    check "pyenv: the host's HOME is unchanged (shims, version)" home_unchanged "$ROOTHOME" "$T/home.before"
else
    absent "pyenv shims" "no pyenv on PATH"
fi

# --- Rust: cargo new, a path dependency, a proc macro, a build script ---------------
if have cargo && have rustc && cargo --version >/dev/null 2>&1; then
    W=$T/rs; mkdir -p "$W/mac/src"
    printf '[package]\nname = "mac"\nversion = "0.1.0"\nedition = "2021"\n[lib]\nproc-macro = true\n' > "$W/mac/Cargo.toml"
    printf 'use proc_macro::TokenStream;\n#[proc_macro]\npub fn answer(_i: TokenStream) -> TokenStream { "42".parse().unwrap() }\n' > "$W/mac/src/lib.rs"
    (cd "$W" && "$P" run --safe -- sh -c '
        cargo new -q --vcs none app && cd app &&
        printf "mac = { path = \"../mac\" }\n" >> Cargo.toml &&
        printf "fn main() { std::fs::write(format!(\"{}/gen.rs\", std::env::var(\"OUT_DIR\").unwrap()), \"pub const G: i32 = 7;\").unwrap(); }\n" > build.rs &&
        printf "include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));\nfn main() { println!(\"{} {}\", mac::answer!(), G); }\n#[cfg(test)]\nmod t { #[test] fn g() { assert_eq!(super::G, 7); } }\n" > src/main.rs &&
        cargo build --offline -q -j2 && ./target/debug/app &&
        cargo test --offline -q 2>&1 | grep -c "test result: ok. 1 passed" &&
        test -e "$HOME/.cargo/.global-cache" && echo cargo-wrote-home') > "$T/out" 2>&1
    eq "$?:$(out)" "0:42 7
1
cargo-wrote-home" "cargo: new, build with a path dependency (proc macro) and a build script, test; cargo wrote its HOME"
    check "cargo: the review lists the package and its build" reviewed "$W" "app/Cargo.toml" "app/Cargo.lock" "app/src/main.rs" "app/target/debug/app"
    applied "$W" "cargo"
    eq "$("$W/app/target/debug/app" 2>&1)" "42 7" "cargo: the applied program runs on the host"
    check "cargo: the host's HOME is unchanged (~/.cargo's caches were discarded)" home_unchanged "$ROOTHOME" "$T/home.before"
    # a rustup home the environment names, with HOME another: the proxy
    # found no toolchain inside (RUSTUP_HOME was not handed over)
    RH=$(rustup show home 2>/dev/null)
    if [ -n "$RH" ] && [ -d "$RH/toolchains" ]; then
        mkdir -p "$T/fresh-home" "$T/rh"
        (cd "$T/rh" && HOME=$T/fresh-home RUSTUP_HOME=$RH "$P" run --safe -- rustc --version) > "$T/out" 2>&1
        eq "$?:$(out)" "0:$(rustc --version)" \
            "rustup: RUSTUP_HOME is handed over: its proxy finds the toolchain with HOME another"
    else
        absent "rustup: RUSTUP_HOME handed over" "no rustup home"
    fi
else
    absent "cargo builds" "no cargo"
fi

# --- Node: npm pack, install of the tarball and of a directory -------------------
mkjs() { # DIR
    mkdir -p "$1/localpkg"
    printf '{"name":"localpkg","version":"1.0.0","main":"index.js","bin":{"localpkg":"cli.js"}}\n' > "$1/localpkg/package.json"
    echo 'module.exports = () => 42;' > "$1/localpkg/index.js"
    printf '#!/usr/bin/env node\nconsole.log("cli", require("./index.js")());\n' > "$1/localpkg/cli.js"
    chmod 0755 "$1/localpkg/cli.js"
}
NPMFLAGS="--offline --no-audit --no-fund --no-update-notifier"
JSWORK="npm init -y >/dev/null && (cd localpkg && npm pack -q $NPMFLAGS) &&
    npm install -q $NPMFLAGS ./localpkg/localpkg-1.0.0.tgz >/dev/null &&
    node -e 'console.log(require(\"localpkg\")())' && npx --offline localpkg &&
    test -d \"\$HOME/.npm/_cacache\" && echo npm-wrote-home"
if have node && have npm; then
    W=$T/js; mkjs "$W"
    (cd "$W" && "$P" run --safe -- sh -c "$JSWORK") > "$T/out" 2>&1
    eq "$?:$(grep -v '^pvisor run:' "$T/out")" "0:localpkg-1.0.0.tgz
42
cli 42
npm-wrote-home" "npm ($(command -v npm)): pack, install of the tarball, require and its bin; npm wrote its HOME cache"
    check "npm: the review lists package.json, the lock and node_modules" \
        reviewed "$W" "package.json" "package-lock.json" "node_modules/localpkg/index.js" "localpkg/localpkg-1.0.0.tgz"
    applied "$W" "npm"
    eq "$(cd "$W" && node -e 'console.log(require("localpkg")())' 2>&1)" 42 "npm: the applied node_modules loads on the host"
    check "npm: the host's HOME is unchanged (~/.npm's cache and logs were discarded)" home_unchanged "$ROOTHOME" "$T/home.before"
else
    absent "npm installs" "no node or npm"
fi

# --- Java: javac, jar, java --------------------------------------------------
JAVAWORK='javac -d classes src/hello/Main.java && jar cfe app.jar hello.Main -C classes . && java -jar app.jar && cat out.txt'
mkjava() {
    mkdir -p "$1/src/hello"
    printf 'package hello;\npublic class Main {\n  public static void main(String[] a) throws Exception {\n    java.nio.file.Files.writeString(java.nio.file.Path.of("out.txt"), "java " + (40 + 2) + "\\n");\n    System.out.println("hello from java");\n  }\n}\n' > "$1/src/hello/Main.java"
}
if have javac && have java && have jar; then
    W=$T/java; mkjava "$W"
    (cd "$W" && "$P" run --safe -- sh -c "$JAVAWORK") > "$T/out" 2>&1
    eq "$?:$(out)" "0:hello from java
java 42" "java: javac, jar and java -jar; the program writes a file"
    check "java: the review lists the classes, the jar and the output" reviewed "$W" "classes/hello/Main.class" "app.jar" "out.txt"
    applied "$W" "java"
    eq "$(cd "$W" && rm -f out.txt && java -jar app.jar && cat out.txt)" "hello from java
java 42" "java: the applied jar runs on the host"
    # JAVA_HOME naming another JDK than the java on PATH: Maven inside took
    # PATH's (JAVA_HOME was not handed over)
    JH=; JDEF=$(readlink -f "$(command -v java)")
    for j in /usr/lib/jvm/* /opt/*; do
        [ -x "$j/bin/java" ] && [ "$(readlink -f "$j/bin/java")" != "$JDEF" ] && { JH=$j; break; }
    done
    if [ -n "$JH" ]; then
        if have mvn; then jcmd='mvn -v 2>/dev/null | grep "^Java version"'; else jcmd='"$JAVA_HOME/bin/java" -version 2>&1 | head -n 1'; fi
        (cd "$W" && JAVA_HOME=$JH "$P" run --safe -- sh -c "$jcmd") > "$T/out" 2>&1
        eq "$?:$(out)" "0:$(JAVA_HOME=$JH sh -c "$jcmd")" \
            "java: JAVA_HOME is handed over: $(echo "$jcmd" | cut -d' ' -f1) inside uses $JH, as on the host"
    else
        absent "java: JAVA_HOME handed over" "one JDK only"
    fi
else
    absent "java builds" "no javac, jar or java"
fi

# --- C: make -j2 ---------------------------------------------------------------
mkc() {
    mkdir -p "$1"
    for i in 1 2 3 4 5 6; do printf 'int f%d(void) { return %d; }\n' $i $i > "$1/f$i.c"; done
    printf '#include <stdio.h>\nint f1(void), f2(void), f3(void), f4(void), f5(void), f6(void);\nint main(void) { printf("%%d\\n", f1() + f2() + f3() + f4() + f5() + f6()); return 0; }\n' > "$1/main.c"
    printf 'OBJS = main.o f1.o f2.o f3.o f4.o f5.o f6.o\nall: app libf.a\napp: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\nlibf.a: f1.o f2.o\n\tar rcs $@ f1.o f2.o\n' > "$1/Makefile"
}
if have make && have cc; then
    W=$T/c; mkc "$W"
    (cd "$W" && "$P" run --safe -- sh -c 'make -s -j2 && ./app && make -q && echo up-to-date') > "$T/out" 2>&1
    eq "$?:$(out)" "0:21
up-to-date" "make -j2: builds a program and an archive, then is up to date"
    check "make: the review lists the objects, the archive and the program" reviewed "$W" "main.o" "f6.o" "libf.a" "app"
    applied "$W" "make"
    eq "$("$W/app")" 21 "make: the applied program runs on the host"
else
    absent "make -j2" "no make or cc"
fi

# --- git: a repository of the host: commit, branch, rebase, gc -------------------
GITWORK='set -e; git checkout -q -b feat; echo b >> f; git commit -qam two; git checkout -q main
    echo c > g; git add g; git commit -qm three; git checkout -q feat; git rebase -q main
    git log --format=%s | tr "\n" " "; echo; git gc -q; git fsck --no-progress; git status --porcelain | wc -l'
mkgit() {
    mkdir -p "$1" && (cd "$1" && git init -q -b main && git config user.name t && git config user.email t@t &&
        echo a > f && git add f && git commit -qm one)
}
if have git; then
    W=$T/git; mkgit "$W"
    (cd "$W" && git log --format=%H) > "$T/git.head"
    (cd "$W" && "$P" run --safe -- sh -c "$GITWORK") > "$T/out" 2>&1
    eq "$?:$(out)" "0:two three one 
0" "git: branch, commit, rebase, gc and fsck in the host's repository"
    eq "$(cd "$W" && git log --format=%H)" "$(cat "$T/git.head")" "git: the host's repository has no new commit before apply"
    (cd "$W" && "$P" apply) > "$T/apply.out" 2>&1
    eq "$?:$(cd "$W" && git log --format=%s | tr '\n' ' '; git branch --show-current; git status --porcelain | wc -l; git fsck --no-progress 2>&1 | wc -l)" \
        "0:two three one feat
0
0" "git: after apply the host's repository has the rebased branch, is clean and passes fsck"
else
    absent "git" "no git"
fi

check "the host's HOME is unchanged after every run as root" home_unchanged "$ROOTHOME" "$T/home.before"

# --- the same as an unprivileged user -------------------------------------------
# pvu (uid 4173) if it exists, else nobody: a HOME of its own in $T, the
# toolchains of /usr/bin (root's HOME is 0700), and a pyenv of its own: a
# copy of the host's pyenv scripts whose version is /usr/bin/python3.
if [ "$(id -u)" -ne 0 ] || ! have setpriv; then
    skip "the toolchains as an unprivileged user" "needs root and setpriv to switch users"
    exit 0
fi
U=$(id -u pvu 2>/dev/null || echo 65534); G=$(id -g pvu 2>/dev/null || echo 65534)
UH=$T/uhome; UW=$T/uws
mkdir -p "$UH" "$UW" "$T/ustate"
chown "$U:$G" "$UH" "$UW" "$T/ustate"
UN=$(id -nu "$U"); UPATH=/usr/local/bin:/usr/bin:/bin
AS=asu; ST=$T/ustate
asu() { # run as the user, a clean environment
    setpriv --reuid="$U" --regid="$G" --clear-groups env -i HOME="$UH" PATH="$UPATH" USER="$UN" LOGNAME="$UN" \
        LC_ALL=C XDG_STATE_HOME="$T/ustate" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} \
        ${UBSAN_OPTIONS:+UBSAN_OPTIONS=$UBSAN_OPTIONS} "$@"
}
# uws NAME: a fresh workspace of the user's
uws() { W=$UW/$1; asu mkdir -p "$W"; }
uhome_manifest() { (cd "$UH" && find . -printf '%y %m %s %T@ %l %p\n' | sort); }
urun() { # as the user in $W: pvisor run --safe -- sh -c SCRIPT
    (cd "$W" && asu "$P" run --safe "$@") > "$T/out" 2>&1
}
uhome_manifest > "$T/uhome.before"
uhome_same() {
    uhome_manifest > "$T/uhome.now"
    cmp -s "$T/uhome.before" "$T/uhome.now" && return 0
    diff "$T/uhome.before" "$T/uhome.now" | head -n 10 | sed 's/^/# /'
    return 1
}

if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
    uws py
    mkwheel "$T" && asu cp "$T/hello-0.1-py3-none-any.whl" "$W/"
    # the host's pip into a venv without its own (ensurepip is the root
    # case's: it doubles the file's time)
    urun -- sh -c "python3 -m venv --without-pip .venv && python3 -m pip --python .venv/bin/python install -q --no-index --disable-pip-version-check ./hello-0.1-py3-none-any.whl &&
        .venv/bin/hello && .venv/bin/python -c 'import hello, sys; print(sys.prefix)'"
    eq "$?:$(out)" "0:hello from a wheel
$W/.venv" "as uid $U: python3 (/usr/bin): venv, pip install --no-index into it, its script"
    applied "$W" "as uid $U: python"
    eq "$(asu "$W/.venv/bin/hello" 2>&1)" "hello from a wheel" "as uid $U: the applied venv's script runs on the host"
    # a pyenv in the user's HOME: the host's pyenv scripts, a version that
    # is /usr/bin/python3, shims made by pyenv rehash
    if [ -n "${PYR:-}" ] && [ -x "$PYR/libexec/pyenv" ]; then
        UP=$UH/.pyenv
        mkdir -p "$UP/versions/sys/bin" "$UP/shims"
        cp -r "$PYR/bin" "$PYR/libexec" "$PYR/pyenv.d" "$UP/"
        ln -s /usr/bin/python3 "$UP/versions/sys/bin/python3"
        echo sys > "$UP/version"
        chown -R "$U:$G" "$UP"
        asu env PYENV_ROOT="$UP" "$UP/bin/pyenv" rehash
        uhome_manifest > "$T/uhome.before"
        UPATH=$UP/shims:$UP/bin:/usr/bin:/bin
        uws pyenv
        urun -- python3 -c 'import sys; print(sys.executable); open("made.txt", "w").write("by the shim\n")'
        eq "$?:$(out)" "0:$UP/versions/sys/bin/python3" \
            "as uid $U: python3, a pyenv shim in the user's HOME, runs with no flag"
        applied "$W" "as uid $U: pyenv"
        urun -- sh -c 'pyenv rehash && pyenv version-name && ls "$HOME/.pyenv/shims" | grep -c "^python3\$"'
        eq "$?:$(out)" "0:sys
1" "as uid $U: pyenv rehash and version-name inside"
        check "as uid $U: the user's HOME is unchanged (pyenv's shims)" uhome_same
        UPATH=/usr/local/bin:/usr/bin:/bin
    else
        absent "as uid $U: a pyenv of the user's" "no pyenv on this host to copy"
    fi
else
    absent "as uid $U: python venv" "no /usr/bin/python3 with venv and ensurepip"
fi

if [ -x /usr/bin/node ] && [ -x /usr/bin/npm ]; then
    uws js; mkjs "$T/ujs"; asu cp -r "$T/ujs/localpkg" "$W/"
    uhome_manifest > "$T/uhome.before"
    urun -- sh -c "$JSWORK"
    eq "$?:$(grep -v '^pvisor run:' "$T/out")" "0:localpkg-1.0.0.tgz
42
cli 42
npm-wrote-home" "as uid $U: npm pack, install of the tarball, require and its bin"
    applied "$W" "as uid $U: npm"
    check "as uid $U: the user's HOME is unchanged (~/.npm discarded)" uhome_same
    # with a grant, npm's cache is the host's
    asu mkdir -p "$UH/.npm"
    uws js2; asu cp -r "$T/ujs/localpkg" "$W/"
    urun --allow-write "$UH/.npm" -- sh -c "cd localpkg && npm pack -q $NPMFLAGS >/dev/null && cd .. && npm install -q $NPMFLAGS ./localpkg >/dev/null && node -e 'console.log(require(\"localpkg\")())'"
    eq "$?:$(grep -v '^pvisor run:' "$T/out")" "0:42" "as uid $U: npm install of a directory with --allow-write ~/.npm"
    check "as uid $U: --allow-write ~/.npm keeps npm's cache on the host" test -d "$UH/.npm/_cacache"
    eq "$(readlink "$W/node_modules/localpkg" 2>/dev/null || echo none)" none "as uid $U: node_modules is staged, not in the workspace"
    uhome_manifest > "$T/uhome.before"
else
    absent "as uid $U: npm" "no /usr/bin/node and npm"
fi

if [ -x /usr/bin/javac ] && [ -x /usr/bin/java ] && [ -x /usr/bin/jar ]; then
    uws java; mkjava "$T/ujava"; asu cp -r "$T/ujava/src" "$W/"
    urun -- sh -c "$JAVAWORK"
    eq "$?:$(out)" "0:hello from java
java 42" "as uid $U: javac, jar and java -jar"
    applied "$W" "as uid $U: java"
else
    absent "as uid $U: java" "no /usr/bin/javac, jar and java"
fi

if [ -x /usr/bin/make ] && [ -x /usr/bin/cc ]; then
    uws c; mkc "$T/uc"; asu cp -r "$T/uc/." "$W/"
    urun -- sh -c 'make -s -j2 && ./app'
    eq "$?:$(out)" "0:21" "as uid $U: make -j2"
    applied "$W" "as uid $U: make"
else
    absent "as uid $U: make -j2" "no /usr/bin/make and cc"
fi

if [ -x /usr/bin/git ]; then
    W=$UW/git
    asu sh -c "mkdir -p '$W' && cd '$W' && git init -q -b main && git config user.name t && git config user.email t@t && echo a > f && git add f && git commit -qm one"
    urun -- sh -c "$GITWORK"
    eq "$?:$(out)" "0:two three one 
0" "as uid $U: git branch, commit, rebase, gc, fsck"
    (cd "$W" && asu "$P" apply) > "$T/apply.out" 2>&1
    eq "$?:$(cd "$W" && asu git log --format=%s | tr '\n' ' '; asu git status --porcelain | wc -l)" "0:two three one 0" \
        "as uid $U: after apply the repository has the rebased branch and is clean"
else
    absent "as uid $U: git" "no /usr/bin/git"
fi
check "as uid $U: the user's HOME is unchanged" uhome_same
check "the host's HOME is unchanged at the end" home_unchanged "$ROOTHOME" "$T/home.before"
