/* Unit tests: the launch plan (pure builder, JSON codec, path checks). */
#include "policy/plan.h"
#include "policy/plan_build.h"
#include "policy/plan_gitconfig.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>

static const struct plan_mount *find(const struct launch_plan *p, const char *path) {
    for (size_t i = 0; i < p->n_mounts; i++)
        if (strcmp(p->mounts[i].path, path) == 0)
            return &p->mounts[i];
    return NULL;
}

static const char *env(const struct launch_plan *p, const char *name) {
    size_t l = strlen(name);
    for (char **e = p->envp; e && *e; e++)
        if (strncmp(*e, name, l) == 0 && (*e)[l] == '=')
            return *e + l + 1;
    return NULL;
}

static bool gc_holds(const char *text) {
    return plan_gitconfig_text_holds_credential(text, strlen(text));
}

static void test_gitconfig_credentials(void) {
    ok(gc_holds("[url \"https://x-access-token:T@github.com/\"]\n\tinsteadOf = https://github.com/\n") &&
           gc_holds("[http] extraheader = AUTHORIZATION: basic X\n") && gc_holds("[github]\n\ttoken = abc\n"),
       "gitconfig: a URL with a password, an extraHeader (on its section's line), a token key");
    ok(gc_holds("[remote \"o\"]\n\turl = https://alice:\\\ns3cret@example.com/r\n") &&
           gc_holds("[remote \"o\"]\n\turl = https://alice:\\\n\t\ts3cret@example.com/r\n") &&
           gc_holds("[remote \"o\"]\n\turl = \"https://alice:\\\ns3cret@example.com/r\"\n"),
       "gitconfig: a password continued on the next line (indented or not, quoted or not) is found");
    ok(gc_holds("[url \"https://0123456789abcdef0123456789abcdef01234567@github.com/\"]\n\tinsteadOf = x\n") &&
           gc_holds("[remote \"o\"]\n\turl = https://k4x9mq2p7vz3rt8wn5ybhc6d@dev.azure.com/o/p\n") &&
           gc_holds("[url \"https://ghp_X@github.com/\"]\n\tinsteadOf = x\n"),
       "gitconfig: a URL whose user is a classic 40-hex token, a long random one, a prefixed one");
    ok(!gc_holds("[url \"https://alice@dev.azure.com/\"]\n\tinsteadOf = https://dev.azure.com/\n") &&
           !gc_holds("[url \"ssh://git@github.com/\"]\n\tinsteadOf = https://github.com/\n") &&
           !gc_holds("[remote \"o\"]\n\turl = https://first.last@example.com/r\n\tpushurl = "
                     "https://first.last%40corp.example@host/r\n") &&
           !gc_holds("[remote \"o\"]\n\turl = https://build-agent-2024-prod-eu@host/r\n") &&
           !gc_holds("[remote \"o\"]\n\turl = https://contoso2023enterprise@dev.azure.com/o\n") &&
           !gc_holds("[alias]\n\tlg = log --graph \\\n\t\t--oneline\n# token = not-one \\\n") &&
           !gc_holds("[user]\n\tname = A\n# url = https://alice:pw@host/ \\\n"),
       "gitconfig: user names (alice, git, first.last, an address, long ones with a number), a continued alias, a "
       "token in a comment are none");
}

int main(void) {
    test_gitconfig_credentials();
    ok(plan_home_is_system("/") && plan_home_is_system("/etc") && plan_home_is_system("/etc/security") &&
           plan_home_is_system("/usr/local") && plan_home_is_system(NULL),
       "a HOME that is /, or in a projected system directory, is the system's");
    ok(!plan_home_is_system("/root") && !plan_home_is_system("/home/u") && !plan_home_is_system("/etcetera") &&
           !plan_home_is_system("/var"),
       "a HOME of one's own (or /var, /etcetera) is not");
    ok(plan_path_ok("/a/b") && plan_path_ok("/"), "normalised absolute paths accepted");
    ok(!plan_path_ok("a/b") && !plan_path_ok("/a/../b") && !plan_path_ok("/a//b") && !plan_path_ok("/a/") &&
           !plan_path_ok("/a/./b") && !plan_path_ok(NULL),
       "relative, '..', '.', empty components and trailing slashes refused");

    char *argv[] = {"run", "--safe", "--pass-env", "GH_TOKEN", "--", "make", "-j2", NULL};
    struct run_options o;
    char *err = NULL;
    ok(policy_parse_run(7, argv, &o, &err) == 0, "parse --safe");
    char *environ_[] = {"PATH=/usr/bin:/bin",
                        "HOME=/home/u",
                        "AWS_SECRET_ACCESS_KEY=s3cr3t",
                        "GH_TOKEN=tok",
                        "LC_ALL=C.UTF-8",
                        "LC_SECRET_TOKEN=smuggled",
                        "TERM=xterm",
                        "RUSTUP_HOME=/opt/rustup",
                        "VIRTUAL_ENV=/home/u/ws/.venv",
                        "JAVA_HOME=/usr/lib/jvm/jdk-25",
                        "CARGO_REGISTRY_TOKEN=tok2",
                        NULL};
    const char *rt[] = {"/home/u/.pyenv", "/opt/tool", "/usr/local/bin", "/home/u/ws/bin"};
    const char *hf[] = {".gitconfig", ".ssh/config"};
    struct access_rule acc[] = {{ACCESS_DENY, "/etc/ssl"}, {ACCESS_RW, "/srv/out"}};
    struct plan_inputs in = {
        .opts = &o,
        .environ = environ_,
        .home = "/home/u",
        .workspace = "/home/u/ws",
        .cwd = "/home/u/ws/src",
        .uid = 1000,
        .gid = 1000,
        .runtime_dirs = rt,
        .n_runtime_dirs = 4,
        .home_files = hf,
        .n_home_files = 2,
        .access = acc,
        .n_access = 2,
        .rlimit_as = 1ULL << 30,
        .rlimit_cpu = 600,
        .rlimit_nproc = 64,
    };
    struct launch_plan p;
    ok(plan_build(&in, &p, &err) == 0, "plan_build");
    ok(find(&p, "/usr") && find(&p, "/usr")->kind == PLAN_BIND_RO && find(&p, "/etc")->kind == PLAN_BIND_RO,
       "system hierarchies projected read-only");
    ok(find(&p, "/home/u/ws") && find(&p, "/home/u/ws")->kind == PLAN_BIND_RW, "workspace read-write");
    ok(find(&p, "/home/u") && find(&p, "/home/u")->kind == PLAN_TMPFS, "HOME is a private tmpfs");
    ok(find(&p, "/tmp") && find(&p, "/tmp")->kind == PLAN_TMPFS && find(&p, "/tmp")->size == 1ULL << 30 &&
           p.tmp_size == 1ULL << 30 && p.shm_size == 64ULL << 20,
       "/tmp is a private tmpfs, 1 GiB without --limit tmp= (and /dev/shm 64 MiB)");
    ok(find(&p, "/home/u/.gitconfig") && find(&p, "/home/u/.gitconfig")->kind == PLAN_BIND_RO,
       "allowlisted config projected read-only");
    ok(!find(&p, "/home/u/.ssh/config"), "nothing under ~/.ssh is projected even if listed");
    ok(find(&p, "/home/u/.pyenv") && find(&p, "/opt/tool"), "toolchain directories projected");
    ok(!find(&p, "/usr/local/bin"), "directories under a projected hierarchy are not projected twice");
    ok(!find(&p, "/home/u/ws/bin"), "nothing inside the workspace is projected around the overlay");
    ok(!find(&p, "/home/u/.ssh") && !find(&p, "/home/u/ws/.ssh"), "HOME credentials outside the workspace are absent");
    ok(find(&p, "/etc/ssl") && find(&p, "/etc/ssl")->kind == PLAN_HIDE && find(&p, "/srv/out")->kind == PLAN_BIND_RW,
       "--access rules become mounts");
    int sorted = 1;
    for (size_t i = 1; i < p.n_mounts; i++) {
        bool hx = p.mounts[i - 1].kind == PLAN_HIDE, hy = p.mounts[i].kind == PLAN_HIDE;
        sorted &= hx < hy || (hx == hy && strcmp(p.mounts[i - 1].path, p.mounts[i].path) <= 0);
    }
    ok(sorted, "projections first, then deny rules and covers; each ordered parents before children");
    is_str(env(&p, "GH_TOKEN"), "tok", "--pass-env variable handed over");
    ok(env(&p, "AWS_SECRET_ACCESS_KEY") == NULL, "other variables dropped");
    is_str(env(&p, "LC_ALL"), "C.UTF-8", "locale categories kept");
    ok(env(&p, "LC_SECRET_TOKEN") == NULL, "other LC_* variables dropped (ssh's SendEnv LC_* carries tokens)");
    is_str(env(&p, "PWD"), "/home/u/ws/src", "PWD is the working directory");
    ok(env(&p, "RUSTUP_HOME") && strcmp(env(&p, "RUSTUP_HOME"), "/opt/rustup") == 0 && env(&p, "VIRTUAL_ENV") &&
           strcmp(env(&p, "VIRTUAL_ENV"), "/home/u/ws/.venv") == 0 && env(&p, "JAVA_HOME") &&
           strcmp(env(&p, "JAVA_HOME"), "/usr/lib/jvm/jdk-25") == 0 && env(&p, "CARGO_REGISTRY_TOKEN") == NULL,
       "the variables naming a toolchain's root are handed over (a rustup proxy without RUSTUP_HOME picks "
       "~/.rustup), nothing else of their tools");
    ok(p.unshare_net && p.landlock && p.seccomp && p.uid == 1000, "network denied, Landlock and seccomp required");

    json_t *j = plan_to_json(&p);
    struct launch_plan q;
    ok(j && plan_from_json(j, &q) == 0 && q.n_mounts == p.n_mounts && strcmp(q.cwd, p.cwd) == 0 &&
           strcmp(q.argv[1], "-j2") == 0 && q.rlimit_as == 1ULL << 30 && q.rlimit_cpu == 600 && q.rlimit_nproc == 64,
       "JSON round trip (with the --limit rlimits)");
    ok(q.tmp_size == p.tmp_size && q.shm_size == p.shm_size, "JSON round trip of the /tmp and /dev/shm sizes");
    ok(q.exec_path == NULL && json_is_null(json_object_get(j, "exec_path")),
       "no exec_path unless the supervisor sets one");
    {
        const struct plan_mount *ms = find(&p, "/srv/out"), *mt = find(&p, "/opt/tool"), *mu = find(&p, "/usr");
        const struct plan_mount *mw = find(&p, "/home/u/ws"), *qs = find(&q, "/srv/out"), *qt = find(&q, "/opt/tool");
        ok(ms && ms->scan_sockets && mt && mt->scan_sockets && mu && !mu->scan_sockets && mw && !mw->scan_sockets &&
               qs && qs->scan_sockets && qt && qt->scan_sockets && !find(&q, "/usr")->scan_sockets,
           "grants and toolchains are scanned for host sockets, system directories and the workspace not (and the "
           "JSON keeps it)");
    }
    plan_free(&q);
    p.exec_path = strdup("/usr//bin/make");
    json_t *je = plan_to_json(&p);
    ok(je && plan_from_json(je, &q) == 0 && strcmp(q.exec_path, "/usr//bin/make") == 0, "exec_path round trip");
    plan_free(&q);
    json_object_set_new(je, "exec_path", json_string("bin/make"));
    ok(plan_from_json(je, &q) == -EINVAL, "a relative exec_path is refused");
    json_decref(je);
    /* an argument, a variable and the cwd that are not UTF-8 (JSON cannot
     * carry them) reach the launcher byte for byte, none dropped */
    {
        char *a1 = p.argv[1], *cwd = p.cwd, bad[] = "-j\377\376";
        p.argv[1] = bad;
        p.cwd = "/home/u/ws/\377";
        char **ev = p.envp;
        while (*ev && strncmp(*ev, "PWD=", 4) != 0)
            ev++;
        char *e0 = *ev, badenv[] = "PWD=/home/u/ws/\377";
        *ev = badenv;
        json_t *jb = plan_to_json(&p);
        ok(jb && plan_from_json(jb, &q) == 0 && strcmp(q.argv[1], bad) == 0 && !q.argv[2] &&
               strcmp(q.cwd, p.cwd) == 0 && q.envp[ev - p.envp] && strcmp(q.envp[ev - p.envp], badenv) == 0,
           "arguments, variables and the cwd that are not UTF-8 round trip");
        plan_free(&q);
        json_array_set_new(json_object_get(jb, "argv"), 1, json_pack("{s:s}", "hex", "2d00"));
        ok(plan_from_json(jb, &q) == -EINVAL, "a hex argument with a NUL byte is refused");
        json_array_set_new(json_object_get(jb, "argv"), 1, json_pack("{s:s}", "hex", "2d6"));
        ok(plan_from_json(jb, &q) == -EINVAL, "an odd-length hex argument is refused");
        json_decref(jb);
        p.argv[1] = a1;
        p.cwd = cwd;
        *ev = e0;
    }
    /* an inherited (idmapped) source: read-only projections, fd 16 and up */
    ok(plan_from_json(j, &q) == 0 && q.mounts[0].fd == -1, "no inherited source unless the supervisor sets one");
    plan_free(&q);
    json_t *m0 = json_array_get(json_object_get(j, "mounts"), 0);
    const char *k0 = json_string_value(json_object_get(m0, "kind"));
    json_object_set_new(m0, "fd", json_integer(20));
    ok(plan_from_json(j, &q) == (strcmp(k0, "ro") == 0 ? 0 : -EINVAL) &&
           (strcmp(k0, "ro") != 0 || q.mounts[0].fd == 20),
       "an inherited source round trips on a read-only projection only");
    if (strcmp(k0, "ro") == 0)
        plan_free(&q);
    json_object_set_new(m0, "fd", json_integer(4));
    ok(plan_from_json(j, &q) == -EINVAL, "an inherited source on a protocol descriptor (below 16) is refused");
    json_object_set_new(m0, "fd", json_integer(-1));
    json_array_append_new(json_object_get(j, "mounts"),
                          json_pack("{s:s, s:s, s:i, s:i}", "kind", "rw", "path", "/x", "size", 0, "fd", 20));
    ok(plan_from_json(j, &q) == -EINVAL, "an inherited source on a read-write projection is refused");
    json_array_remove(json_object_get(j, "mounts"), json_array_size(json_object_get(j, "mounts")) - 1);
    json_array_append_new(json_object_get(j, "mounts"),
                          json_pack("{s:s, s:s, s:i}", "kind", "rw", "path", "/home/u/../../etc", "size", 0));
    ok(plan_from_json(j, &q) == -EINVAL, "a plan naming a non-normalised path is refused");
    json_decref(j);
    plan_free(&p);

    /* --limit tmp=8M,shm=16M size the two tmpfs mounts. */
    o.limits.tmp_bytes = 8ULL << 20;
    o.limits.shm_bytes = 16ULL << 20;
    ok(plan_build(&in, &p, &err) == 0 && find(&p, "/tmp") && find(&p, "/tmp")->size == 8ULL << 20 &&
           p.tmp_size == 8ULL << 20 && p.shm_size == 16ULL << 20,
       "--limit tmp=8M,shm=16M: a /tmp of 8 MiB and a /dev/shm of 16 MiB");
    plan_free(&p);
    o.limits.tmp_bytes = o.limits.shm_bytes = 0;

    /* Without tmp=: 1 GiB, or the supervisor's tmpfs_max when less. */
    ok(plan_build(&in, &p, &err) == 0 && p.tmp_size == 1ULL << 30, "without tmp= or tmpfs_max: /tmp is 1 GiB");
    plan_free(&p);
    in.tmpfs_max = 300ULL << 20;
    ok(plan_build(&in, &p, &err) == 0 && p.tmp_size == 300ULL << 20 && find(&p, "/tmp")->size == 300ULL << 20,
       "tmpfs_max 300 MiB (half of a 600 MiB cgroup limit): /tmp is 300 MiB");
    plan_free(&p);
    in.tmpfs_max = 4ULL << 30;
    ok(plan_build(&in, &p, &err) == 0 && p.tmp_size == 1ULL << 30 && p.shm_size == 64ULL << 20,
       "tmpfs_max 4 GiB: /tmp is 1 GiB, /dev/shm 64 MiB");
    plan_free(&p);
    in.tmpfs_max = 32ULL << 20;
    ok(plan_build(&in, &p, &err) == 0 && p.tmp_size == 32ULL << 20 && p.shm_size == 32ULL << 20,
       "tmpfs_max 32 MiB (--limit mem=64M): /tmp and /dev/shm are 32 MiB");
    plan_free(&p);
    in.tmpfs_max = 0;

    /* policy_tmpfs_max: half of the least of the host's memory, the
     * cgroup's limit and mem= (this host has more than 1 GiB) */
    enum tmpfs_bound by = TMPFS_BY_MEM;
    uint64_t host = policy_tmpfs_max(0, 0, &by);
    ok(host >= 512ULL << 20 && by == TMPFS_BY_HOST, "tmpfs max: half of the host's memory without limits");
    ok(policy_tmpfs_max(UINT64_MAX, 0, &by) == host && by == TMPFS_BY_HOST, "tmpfs max: an unlimited cgroup");
    ok(policy_tmpfs_max(600ULL << 20, 0, &by) == 300ULL << 20 && by == TMPFS_BY_CGROUP,
       "tmpfs max: half of a 600 MiB cgroup limit");
    ok(policy_tmpfs_max(600ULL << 20, 200ULL << 20, &by) == 100ULL << 20 && by == TMPFS_BY_MEM,
       "tmpfs max: half of mem=200M in a 600 MiB cgroup");
    ok(policy_tmpfs_max(200ULL << 20, 600ULL << 20, &by) == 100ULL << 20 && by == TMPFS_BY_CGROUP,
       "tmpfs max: half of a 200 MiB cgroup limit under mem=600M");
    ok(policy_tmpfs_max(0, 1ULL << 50, &by) == host && by == TMPFS_BY_HOST, "tmpfs max: mem= above the host's memory");
    ok(strcmp(policy_tmpfs_bound_name(TMPFS_BY_MEM), "--limit mem") == 0, "tmpfs max: named --limit mem");

    /* Workspace == HOME: HOME's credentials are inside it and get covered;
     * the workspace view serves HOME (no tmpfs under it, no config file
     * projected from the lower workspace on top of it). */
    in.workspace = "/home/u";
    in.cwd = "/home/u";
    ok(plan_build(&in, &p, &err) == 0 && find(&p, "/home/u/.ssh") && find(&p, "/home/u/.ssh")->kind == PLAN_HIDE &&
           find(&p, "/home/u/.netrc") && find(&p, "/home/u")->kind == PLAN_BIND_RW,
       "workspace == HOME: credential paths inside it are covered");
    int home_mounts = 0;
    for (size_t i = 0; i < p.n_mounts; i++)
        home_mounts += strcmp(p.mounts[i].path, "/home/u") == 0;
    ok(home_mounts == 1 && !find(&p, "/home/u/.gitconfig"),
       "workspace == HOME: HOME is the workspace view alone (no tmpfs, no config projections)");
    plan_free(&p);
    /* HOME inside the workspace: the same, an empty tmpfs there would hide
     * that part of the workspace. */
    in.workspace = "/home";
    in.cwd = "/home";
    ok(plan_build(&in, &p, &err) == 0 && !find(&p, "/home/u") && find(&p, "/home/u/.ssh") &&
           find(&p, "/home/u/.ssh")->kind == PLAN_HIDE && !find(&p, "/home/u/.gitconfig"),
       "HOME inside the workspace: no tmpfs over it, credential paths covered");
    plan_free(&p);
    in.workspace = "/home/u/ws";
    in.cwd = "/home/u/ws/src";

    /* A HOME view replaces the tmpfs, and credentials inside it are covered. */
    in.home_view = "/state/run/home-view";
    in.agent_socket = "/state/run/agent.sock";
    ok(plan_build(&in, &p, &err) == 0 && find(&p, "/home/u") && find(&p, "/home/u")->kind == PLAN_BIND_RW &&
           strcmp(find(&p, "/home/u")->source, "/state/run/home-view") == 0,
       "HOME view projected at HOME from its mount point");
    ok(!find(&p, "/home/u/.pyenv") && find(&p, "/opt/tool"),
       "HOME view: toolchains in HOME are not projected read-only on top of it; others still are");
    ok(find(&p, "/home/u/.ssh") && find(&p, "/home/u/.ssh")->kind == PLAN_HIDE && find(&p, "/home/u/.aws") &&
           find(&p, "/home/u/.local/state/pvisor") && !find(&p, "/home/u/.gitconfig"),
       "HOME view: credentials and pvisor's state covered; no separate config projections");
    ok(find(&p, PLAN_AGENT_SOCKET_PATH) &&
           strcmp(find(&p, PLAN_AGENT_SOCKET_PATH)->source, "/state/run/agent.sock") == 0 &&
           env(&p, "PVISOR_AGENT_SOCKET") && strcmp(env(&p, "PVISOR_AGENT_SOCKET"), PLAN_AGENT_SOCKET_PATH) == 0,
       "agent socket projected at a fixed path named in the environment");
    json_t *jj = plan_to_json(&p);
    ok(jj && plan_from_json(jj, &q) == 0 && strcmp(find(&q, "/home/u")->source, "/state/run/home-view") == 0,
       "sources survive the JSON round trip");
    json_decref(jj);
    plan_free(&q);
    plan_free(&p);
    /* A view that masks credentials itself (whiteouts): only the listed
     * ones (below a symlinked parent) are still covered by mounts. */
    const char *const hide[] = {".config/gh"};
    in.home_view_masks = true;
    in.home_hide = hide;
    in.n_home_hide = 1;
    ok(plan_build(&in, &p, &err) == 0 && !find(&p, "/home/u/.ssh") && !find(&p, "/home/u/.aws") &&
           !find(&p, "/home/u/.local/state/pvisor") && find(&p, "/home/u/.config/gh") &&
           find(&p, "/home/u/.config/gh")->kind == PLAN_HIDE,
       "masking HOME view: no mounts for masked credentials; one for a credential below a symlinked parent");
    plan_free(&p);
    in.home_view_masks = false;
    in.home_hide = NULL;
    in.n_home_hide = 0;
    in.home_view = NULL;
    in.agent_socket = NULL;

    struct access_rule bad[] = {{ACCESS_RW, "/home/u/ws/out"}};
    in.access = bad;
    in.n_access = 1;
    err = NULL;
    ok(plan_build(&in, &p, &err) == -EINVAL && err && strstr(err, "overlaps the workspace"),
       "a read-write grant inside the workspace is refused");
    free(err);

    char buf[256];
    is_str(plan_home_runtime_root("/home/u", "/home/u/.nvm/versions/node/bin", buf, sizeof buf), "/home/u/.nvm",
           "a tool under HOME projects its top directory");
    ok(plan_home_runtime_root("/home/u", "/home/u/.ssh/bin", buf, sizeof buf) == NULL, "never a credential dir");
    ok(plan_home_runtime_root("/home/u", "/home/u/.local", buf, sizeof buf) == NULL &&
           plan_home_runtime_root("/home/u", "/home/u/.config", buf, sizeof buf) == NULL,
       "never .local or .config whole");
    ok(plan_home_runtime_root("/home/u", "/home/u/.local/share/x/bin", buf, sizeof buf) != NULL &&
           plan_home_runtime_root("/home/u", "/home/u/.local/share", buf, sizeof buf) == NULL,
       "never a directory that holds a credential location (.local/share holds the keyrings)");
    is_str(plan_home_runtime_root("/home/u", "/home/u/.cargo/bin", buf, sizeof buf), "/home/u/.cargo/bin",
           "a tool directory holding a credential (.cargo/credentials.toml) is projected only as far as the entry");
    is_str(plan_home_runtime_root("/home/u", "/home/u/.local/bin", buf, sizeof buf), "/home/u/.local/bin",
           ".local is projected only as far as the PATH entry");
    ok(plan_home_runtime_root("/home/u", "/home/u/.local/state/pvisor/x", buf, sizeof buf) == NULL,
       "pvisor's own state is never projected");
    return tap_done();
}
