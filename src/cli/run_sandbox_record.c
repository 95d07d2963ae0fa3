/* run_sandbox_record.c: the launcher's self-check evidence, turned into
 * the Run Bundle's per-dimension entries (sandbox_record).  A dimension is
 * recorded `enforced` only when the evidence shows the control was
 * installed (and tests/adversarial shows it holds).  Split from
 * run_sandbox.c, which gathers the host facts and builds the plan. */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "evidence/bundle.h"
#include "launch/launch.h"
#include "policy/plan_build.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *self_ns(const char *name, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    ssize_t n = readlink(path, buf, size - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

/* Does the evidence show the namespace differs from the supervisor's? */
static bool ns_differs(const json_t *ev, const char *name) {
    char buf[64];
    const char *mine = self_ns(name, buf, sizeof buf);
    const char *theirs = json_string_value(json_object_get(json_object_get(ev, "namespaces"), name));
    return mine && theirs && strcmp(mine, theirs) != 0;
}

/* The Bundle's kernel_features: the namespace features the probes left to
 * the run (run_probe_in_process) are those the run made.  The supervisor
 * made a user namespace and a mount namespace in it before the launcher
 * started (enter_private_namespace, else no report), and the launcher made
 * the others in it, and its tmpfs root, before its self-check. */
static void record_namespaces_made(struct run_context *ctx, const json_t *ev, bool mnt, bool pid, bool net, bool ipc) {
    if (!ctx->probe)
        return;
    struct probe_run_namespaces made = {
        .user = true, .mount = mnt, .pid = pid, .net = net, .ipc = ipc, .uts = ns_differs(ev, "uts"), .tmpfs = mnt};
    _cleanup_free_ char *map = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 4096, &map, NULL) == 0) {
        size_t n = 0;
        unsigned inside, outside, count;
        for (const char *line = map; line && sscanf(line, "%u %u %u", &inside, &outside, &count) == 3;) {
            int w = snprintf(made.uid_map + n, sizeof made.uid_map - n, "%s%u %u %u", n ? "; " : "", inside, outside,
                             count);
            if (w < 0 || (size_t)w >= sizeof made.uid_map - n)
                break;
            n += (size_t)w;
            if ((line = strchr(line, '\n')))
                line++;
        }
    }
    run_probe_namespaces_made(ctx, &made);
}

static unsigned long long hexval(const json_t *ev, const char *key) {
    const char *s = json_string_value(json_object_get(ev, key));
    return s ? strtoull(s, NULL, 16) : ~0ULL;
}

/* Does the launcher's rlimit evidence show limit res at soft value v? */
static bool rlimit_is(const json_t *ev, const char *res, uint64_t v) {
    const json_t *soft = json_object_get(json_object_get(json_object_get(ev, "rlimits"), res), "soft");
    return json_is_integer(soft) && (uint64_t)json_integer_value(soft) == v;
}

/* The strings of array a, comma-separated, cut to size. */
static void join_strings(const json_t *a, char *buf, size_t size) {
    size_t l = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(a) && l < size; i++) {
        int n = snprintf(buf + l, size - l, "%s%s", i ? ", " : "", json_string_value(json_array_get(a, i)));
        if (n < 0)
            break;
        l += (size_t)n;
    }
}

static void add_note(json_t *b, const char *note) {
    json_t *dim = json_object_get(json_object_get(b, "dimensions"), dimension_name(DIM_RESOURCES));
    json_array_append_new(json_object_get(dim, "notes"), json_string(note));
}

/* RLIMIT_CORE 1 keeps core dumps from files and from a pipe helper, not
 * from a socket one (core_pattern "@path", Linux 6.16): that is said. */
static void warn_core_socket(json_t *b) {
    _cleanup_free_ char *cp = NULL;
    size_t len = 0;
    if (read_file_at(AT_FDCWD, "/proc/sys/kernel/core_pattern", 4096, &cp, &len) < 0 || len == 0 || cp[0] != '@')
        return;
    cp[strcspn(cp, "\n")] = '\0';
    run_warn(b,
             "kernel.core_pattern sends core dumps to a host socket (%.300s): the sandbox's core limit cannot stop "
             "that, so a crash inside hands the crashed process's memory to that socket's listener",
             cp);
}

/* The resources dimension: per limit, the mechanism the supervisor chose,
 * checked against what the command's process reported from inside (its
 * rlimits, its cgroup).  A mechanism the evidence does not confirm makes
 * that limit unavailable. */
static void record_resources(struct run_context *ctx, const struct sandbox *sb, const json_t *ev, bool user_ns) {
    json_t *b = ctx->bundle;
    const struct run_limits *req = &ctx->opts->limits;
    warn_core_socket(b);
    json_t *evidence =
        json_pack("{s:b, s:O?}", "user_namespace_differs", user_ns, "rlimits_inside", json_object_get(ev, "rlimits"));
    if (!policy_has_limits(req)) {
        bundle_set_dimension(b, DIM_RESOURCES, LEVEL_UNENFORCED,
                             "rlimits (core 1: no core dump, to a file or a pipe helper; nofile, fsize = stage quota)",
                             evidence, "no memory, CPU or process-count limit was requested (--limit)");
        return;
    }
    const char *in_cg = json_string_value(json_object_get(ev, "cgroup"));
    bool in_leaf = sb->cg && in_cg && strcmp(in_cg, sb->cg_hierarchy) == 0;
    json_t *per = json_object();
    bool all_tree = true, missing = false, any_cg = false, any_rl = false;
    for (int k = 0; k < _LIMIT_MAX; k++) {
        uint64_t v = limits_value(req, (enum limit_kind)k);
        if (!v)
            continue;
        enum limit_mechanism m = sb->limits.mech[k];
        bool confirmed = m == LIMIT_MECH_CGROUP        ? in_leaf
                         : m == LIMIT_MECH_UNAVAILABLE ? false
                         : k == LIMIT_MEM              ? rlimit_is(ev, "as", v)
                         : k == LIMIT_CPU              ? rlimit_is(ev, "cpu", v)
                                                       : rlimit_is(ev, "nproc", v);
        if (!confirmed)
            m = LIMIT_MECH_UNAVAILABLE;
        any_cg = any_cg || m == LIMIT_MECH_CGROUP;
        any_rl = any_rl || m == LIMIT_MECH_RLIMIT_PROCESS || m == LIMIT_MECH_RLIMIT_USERNS;
        all_tree = all_tree && limit_mechanism_tree_wide(m);
        missing = missing || m == LIMIT_MECH_UNAVAILABLE;
        json_object_set_new(per, limit_name((enum limit_kind)k),
                            json_pack("{s:I, s:s, s:b}", "requested", (json_int_t)v, "mechanism",
                                      limit_mechanism_name(m), "tree_wide", limit_mechanism_tree_wide(m)));
    }
    json_object_set_new(evidence, "limits", per);
    json_object_set_new(evidence, "cgroup",
                        json_pack("{s:s?, s:s?, s:b, s:s?}", "leaf", sb->cg ? sb->cg_path : NULL, "command_cgroup",
                                  in_cg, "command_in_leaf", in_leaf, "not_used_because",
                                  sb->cg_reason[0] ? sb->cg_reason : NULL));
    enum level lvl = missing ? LEVEL_UNAVAILABLE : all_tree ? LEVEL_ENFORCED : LEVEL_PARTIAL;
    const char *mech = any_cg && any_rl ? "cgroup v2 leaf + rlimits"
                       : any_cg         ? "cgroup v2 leaf (memory.max, pids.max; CPU time from cpu.stat)"
                       : any_rl         ? "rlimits"
                                        : "none";
    bundle_set_dimension(b, DIM_RESOURCES, lvl, mech, evidence, NULL);
    if (sb->limits.mech[LIMIT_MEM] == LIMIT_MECH_RLIMIT_PROCESS ||
        sb->limits.mech[LIMIT_CPU] == LIMIT_MECH_RLIMIT_PROCESS)
        add_note(b, "per-process rlimits bound each process on its own (N processes may use N times the limit); "
                    "limits over the whole tree need a delegated cgroup v2 hierarchy (see 'pvisor doctor')");
    if (sb->limits.mech[LIMIT_MEM] == LIMIT_MECH_RLIMIT_PROCESS)
        add_note(b, "mem as RLIMIT_AS bounds each process's address space, not its resident memory: runtimes that "
                    "reserve large virtual ranges (Go, Java, V8) may fail to start under it");
    if (sb->limits.mech[LIMIT_CPU] == LIMIT_MECH_RLIMIT_PROCESS)
        add_note(b, "cpu as RLIMIT_CPU: a process gets SIGXCPU after that much CPU time and SIGKILL one second later");
    if (sb->limits.mech[LIMIT_PIDS] == LIMIT_MECH_RLIMIT_USERNS)
        add_note(b, "pids as RLIMIT_NPROC, counted by the kernel in the command's own user namespace: the run's "
                    "processes and threads together");
    if (sb->limits.mech[LIMIT_PIDS] == LIMIT_MECH_UNAVAILABLE)
        add_note(b, "pids: no cgroup here, and RLIMIT_NPROC does not apply to processes of host uid 0");
    if (sb->limits.mech[LIMIT_CPU] == LIMIT_MECH_CGROUP)
        add_note(b, "cpu: the supervisor reads the leaf's cpu.stat and kills the whole leaf (cgroup.kill) when "
                    "the tree's CPU time reaches the budget");
    if (lvl != LEVEL_ENFORCED) {
        char w[512];
        snprintf(w, sizeof w, "--limit: resources are %s, not enforced over the whole process tree%s%s",
                 level_name(lvl), sb->cg_reason[0] ? ": " : "", sb->cg_reason);
        bundle_add_warning(b, w);
        if (!ctx->opts->strict && lvl == LEVEL_PARTIAL) /* unavailable: refused, with its own message */
            fprintf(stderr, "pvisor run: warning: %s (see the Run Bundle)\n", w);
    }
}

static size_t moved_count(const struct sandbox *sb) {
    size_t n = 0;
    while (sb->cred_moved && sb->cred_moved[n])
        n++;
    return n;
}

/* Is real where the credential location home/rel leads through a link,
 * not the location itself? */
static bool leads_elsewhere(const char *home, const char *rel, const char *real) {
    if (!home || !real)
        return false;
    _cleanup_free_ char *own = path_join(home, rel);
    return own && strcmp(own, real) != 0;
}

/* How many places a credential location's link leads to outside its home
 * the launcher covers (plan_build: where a projection shows them); not a
 * location covered by its own name (in a grant). */
static int link_target_covers(const struct sandbox *sb) {
    int n = 0;
    for (size_t i = 0; i < sb->plan.n_mounts; i++) {
        const struct plan_mount *m = &sb->plan.mounts[i];
        bool hit = false;
        for (size_t c = 0; !hit && sb->cred_real && plan_credential_paths[c]; c++)
            hit = sb->cred_real[c] && strcmp(sb->cred_real[c], m->path) == 0 &&
                  leads_elsewhere(sb->home_path, plan_credential_paths[c], sb->cred_real[c]);
        for (size_t k = 0; !hit && k < PLAN_OTHER_HOMES; k++)
            for (size_t c = 0; !hit && sb->pw_cred_real[k] && plan_credential_paths[c]; c++)
                hit = sb->pw_cred_real[k][c] && strcmp(sb->pw_cred_real[k][c], m->path) == 0 &&
                      leads_elsewhere(sb->pw_home[k], plan_credential_paths[c], sb->pw_cred_real[k][c]);
        n += m->kind == PLAN_HIDE && hit;
    }
    return n;
}

void sandbox_record(struct run_context *ctx, const struct sandbox *sb) {
    json_t *b = ctx->bundle;
    json_t *ev = json_object_get(sb->report, "evidence");
    /* RLIMIT_AS is set after the rest of the self-check (launch.c). */
    json_t *as = json_object_get(sb->report, "rlimit_as");
    if (as && json_is_object(json_object_get(ev, "rlimits")))
        json_object_set(json_object_get(ev, "rlimits"), "as", as);
    const json_t *ll = json_object_get(ev, "landlock");
    int abi = (int)json_integer_value(json_object_get(ll, "abi"));
    bool nnp = json_string_value(json_object_get(ev, "NoNewPrivs")) &&
               strcmp(json_string_value(json_object_get(ev, "NoNewPrivs")), "1") == 0;
    bool seccomp = json_string_value(json_object_get(ev, "Seccomp")) &&
                   strcmp(json_string_value(json_object_get(ev, "Seccomp")), "2") == 0;
    bool no_caps = hexval(ev, "CapEff") == 0 && hexval(ev, "CapPrm") == 0 && hexval(ev, "CapBnd") == 0 &&
                   hexval(ev, "CapAmb") == 0 && hexval(ev, "CapInh") == 0;
    bool mnt = ns_differs(ev, "mnt"), pid = ns_differs(ev, "pid"), net = ns_differs(ev, "net");
    bool ipc = ns_differs(ev, "ipc");
    /* the user namespace: against the one pvisor started in, not the
     * supervisor's own, which it made for the run and in which a root
     * run's command stays (it read "false" on every --safe run of root) */
    const char *cmd_user = json_string_value(json_object_get(json_object_get(ev, "namespaces"), "user"));
    bool user = cmd_user && sb->host_userns[0] && strcmp(cmd_user, sb->host_userns) != 0;
    bool fs_ok = mnt && abi >= 1 && nnp && no_caps;
    record_namespaces_made(ctx, ev, mnt, pid, net, ipc);

    bundle_set_json(b, "sandbox_evidence", json_deep_copy(ev));
    const char *fsmech = "synthetic root (tmpfs + read-only projections, pivot_root) + Landlock + no capabilities";
#define EVID(...) json_pack(__VA_ARGS__)
    char wnote[512];
    snprintf(wnote, sizeof wnote, "%s%s",
             sb->home_system ? "writable: the staged workspace and a private /tmp (discarded at exit); HOME, a system "
                               "directory, is read-only"
             : sb->home_in_ws
                 ? "writable: the staged workspace, HOME included (it lies in the workspace: its writes are "
                   "staged with the workspace's, not discarded), and a private /tmp (discarded at exit)"
             : sb->home_fd >= 0
                 ? "writable: the staged workspace, a private /tmp and the view of HOME (both discarded at exit)"
                 : "writable: the staged workspace, a private /tmp and an empty HOME (both discarded at exit)",
             sb->n_rw ? "; and, written on the host directly, the read-write grants of --access/--allow-write "
                        "(evidence access_rules)"
                      : "");
    bundle_set_dimension(b, DIM_HOST_WRITES, fs_ok ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE, fsmech,
                         EVID("{s:b, s:i, s:b, s:b, s:o}", "mount_namespace_differs", mnt, "landlock_abi", abi,
                              "no_new_privs", nnp, "capabilities_empty", no_caps, "access_rules",
                              sb->rules ? json_incref(sb->rules) : json_array()),
                         wnote);
    /* As root the command is uid 0 without capabilities: only idmapped
     * projections keep root-only files (/etc/shadow) from it (idmap.c). */
    char idnote[512] = "";
    if (sb->as_root && sb->idmap_failed)
        snprintf(idnote, sizeof idnote,
                 "; as root, %d projection%s could not be idmapped (%s%s): files only root may read there are "
                 "readable by the command; run pvisor as an ordinary user",
                 sb->idmap_failed, sb->idmap_failed == 1 ? "" : "s",
                 sb->idmap_failed == 1 ? "" : "the first: ", sb->idmap_why);
    else if (sb->as_root)
        snprintf(idnote, sizeof idnote,
                 "; as root, the projections outside HOME are idmapped (root's files show as uid 65534): "
                 "the command reads there only what any user may");
    char reads_note[768];
    snprintf(reads_note, sizeof reads_note,
             "readable: the workspace view, /usr /bin /sbin /lib* /etc, the command's toolchain directories, %s%s",
             sb->home_fd >= 0  ? "HOME as a copy-on-write view without its credential locations"
             : sb->home_in_ws  ? "HOME through the workspace view, without its credential locations"
             : sb->home_system ? "HOME as projected, read-only, its credential locations covered"
                               : "allowlisted HOME config files",
             idnote);
    bundle_set_dimension(b, DIM_READS,
                         !fs_ok                            ? LEVEL_UNAVAILABLE
                         : sb->as_root && sb->idmap_failed ? LEVEL_PARTIAL
                                                           : LEVEL_ENFORCED,
                         fsmech,
                         EVID("{s:b, s:i, s:b, s:i, s:i}", "mount_namespace_differs", mnt, "landlock_abi", abi,
                              "as_root", sb->as_root, "idmapped_projections", sb->n_keep, "plain_projections_as_root",
                              sb->as_root ? sb->idmap_failed : 0),
                         reads_note);
    if (sb->as_root && sb->idmap_failed) {
        bundle_add_warning(b, idnote + 2);
        if (!ctx->opts->strict) /* --strict refuses the run: its one message says why */
            fprintf(stderr, "pvisor run: warning: %s\n", idnote + 2);
    }
    bundle_set_dimension(b, DIM_SENSITIVE_PATHS, fs_ok ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE,
                         "credential locations are not projected; inside the workspace they are covered",
                         EVID("{s:b}", "mount_namespace_differs", mnt), NULL);
    bool view = sb->home_fd >= 0;
    bundle_set_dimension(
        b, DIM_HOME_CREDENTIALS,
        !fs_ok                          ? LEVEL_UNAVAILABLE
        : sb->n_grant_missing_creds > 0 ? LEVEL_PARTIAL
                                        : LEVEL_ENFORCED,
        view              ? "copy-on-write view of HOME with every credential location absent (masked by its "
                            "server; mounts below symlinked parents); environment reduced to an allowlist"
        : sb->home_in_ws  ? "HOME lies in the workspace: the workspace view serves it, with every credential location "
                            "absent and sealed (masked by its server); environment reduced to an allowlist"
        : sb->home_system ? "HOME is a system directory: shown read-only as projected, its credential locations "
                            "covered; environment reduced to an allowlist"
                          : "empty private HOME + allowlisted config files; environment reduced to an allowlist",
        EVID("{s:b, s:b, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:O*}", "mount_namespace_differs", mnt, "home_view", view,
             "home_in_workspace", sb->home_in_ws, "credential_masks", (int)sb->n_home_mask, "credential_mounts",
             (int)sb->n_home_hide + sb->n_home_sys_hides, "link_target_covers", link_target_covers(sb),
             "moved_credential_locations", (int)moved_count(sb), "other_homes_in_view", sb->n_home_other,
             "missing_in_grants", sb->n_grant_missing_creds, "environment_dropped", sb->env_dropped),
        sb->home_system && !view ? "HOME is read-only; --pass-env hands chosen variables over"
        : sb->home_in_ws         ? "HOME lies in the workspace: its writes are staged with the workspace's (review "
                                   "them before apply), not discarded; --pass-env hands chosen variables over"
        : sb->n_rw_home          ? "HOME writes are discarded at exit, except under the read-write grants of --access/"
                                   "--allow-write in or around HOME (credential locations stay covered there); --pass-env "
                                   "hands chosen variables over"
                                 : "HOME writes are discarded at exit; --pass-env hands chosen "
                                   "variables over");
    if (sb->n_grant_missing_creds > 0) {
        char missing[700];
        snprintf(
            missing, sizeof missing,
            "a grant of --access/--allow-write holds %d credential location(s) that did not exist at start (%s%s): "
            "those are not covered (one the host creates during the run is readable there; in a read-write "
            "grant, one the command creates is the host's); grant narrower directories, or use --strict to "
            "refuse such runs",
            sb->n_grant_missing_creds, sb->grant_missing_first, sb->n_grant_missing_creds > 1 ? ", ..." : "");
        json_array_append_new(
            json_object_get(json_object_get(json_object_get(b, "dimensions"), "home_credentials"), "notes"),
            json_string(missing));
        bundle_add_warning(b, missing);
        if (!ctx->opts->strict)
            fprintf(stderr, "pvisor run: warning: %s\n", missing);
    }
    /* Landlock's TCP rights exist from ABI 4: before it, --network none
     * refuses no TCP on the run's own loopback (the host's network is out
     * of reach all the same: the namespace) */
    json_int_t handled_net = json_integer_value(json_object_get(ll, "handled_net"));
    if (sb->plan.unshare_net) {
        /* the namespace confines unix, inet, inet6 and netlink only: the
         * other families (vsock: the VM host's ports) are seccomp's */
        char mech[400];
        snprintf(mech, sizeof mech,
                 "private network namespace (%s)%s; no socket families beyond unix, inet, inet6, "
                 "netlink (seccomp)",
                 sb->plan.loopback_tcp ? "its own loopback only, TCP allowed there: --network loopback"
                 : handled_net ? (sb->plan.proxy_port ? "loopback only; TCP only to pvisor's egress broker, Landlock"
                                                      : "loopback only; no TCP, Landlock")
                               : "loopback only",
                 sb->plan.proxy_port ? "; the broker tunnels only to the --allow-net destinations" : "");
        bundle_set_dimension(
            b, DIM_NETWORK, net && seccomp ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE, mech,
            EVID("{s:b, s:I, s:b, s:o}", "net_namespace_differs", net, "landlock_handled_net", handled_net,
                 "socket_families_filtered", seccomp, "egress_broker_port",
                 sb->plan.proxy_port ? json_integer(sb->plan.proxy_port) : json_null()),
            !sb->plan.loopback_tcp && !handled_net
                ? "TCP on the sandbox's own loopback is not refused: this kernel's Landlock has no TCP rights (ABI < 4)"
                : NULL);
    }
    /* --network loopback sets NO_PROXY=localhost,127.0.0.1,::1 (plan_build.c):
     * a rule for the host's loopback by one of those names is then reached
     * only by a client that ignores NO_PROXY; curl, Python, git and npm
     * connect to the sandbox's own loopback instead, and the run's end said
     * only that the command asked the broker for nothing */
    if (sb->plan.loopback_tcp && sb->plan.proxy_port) {
        char rules[300] = "";
        size_t len = 0;
        for (int i = 0; i < ctx->opts->n_allow_net; i++) {
            const struct egress_rule *r = &ctx->opts->allow_net[i];
            if (r->wildcard ||
                (strcmp(r->host, "localhost") != 0 && strcmp(r->host, "127.0.0.1") != 0 && strcmp(r->host, "::1") != 0))
                continue;
            char f[EGRESS_HOST_MAX + 16];
            egress_rule_format(r, f, sizeof f);
            if (len < sizeof rules)
                len += (size_t)snprintf(rules + len, sizeof rules - len, "%s%s", len ? ", " : "", f);
        }
        if (len) {
            char w[700];
            snprintf(w, sizeof w,
                     "--allow-net %s: with --network loopback, NO_PROXY keeps localhost, 127.0.0.1 and ::1 direct, "
                     "on the sandbox's own loopback: clients that honour it (curl, Python, git, npm) do not reach "
                     "the host's there through the broker; without --network loopback they do",
                     rules);
            bundle_add_warning(b, w);
            fprintf(stderr, "pvisor run: warning: %s\n", w);
        }
    }
    bundle_set_dimension(
        b, DIM_CHILD_PROCESSES, pid ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE,
        "PID namespace with pvisor's init as PID 1; every process dies with the run",
        EVID("{s:b, s:I}", "pid_namespace_differs", pid, "pid_inside", json_integer_value(json_object_get(ev, "pid"))),
        NULL);
    const json_t *prog = json_object_get(ev, "seccomp_filter");
    bundle_set_dimension(b, DIM_SYSCALLS, seccomp ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE,
                         "seccomp filter (libseccomp, compiled at build time)",
                         EVID("{s:b, s:s?, s:s?, s:I}", "seccomp_filter_mode", seccomp, "filters",
                              json_string_value(json_object_get(ev, "Seccomp_filters")), "program_sha256",
                              json_string_value(json_object_get(prog, "sha256")), "program_instructions",
                              json_integer_value(json_object_get(prog, "instructions"))),
                         "deny list: ptrace, process_vm_*, mount/namespace calls, bpf, perf, userfaultfd, keyrings, "
                         "io_uring, kernel modules, handle opens, TIOCSTI/TIOCLINUX, socket families beyond unix, "
                         "inet, inet6, netlink (EPERM); statmount, listmount and syscall numbers this build did "
                         "not review, newer calls included, ENOSYS; non-native ABIs kill");
    bool pty = sb->plan.tty && json_is_true(json_object_get(ev, "controlling_tty"));
    bundle_set_dimension(b, DIM_DEVICES, fs_ok ? LEVEL_ENFORCED : LEVEL_UNAVAILABLE,
                         "exact device nodes (null zero full random urandom tty) and a private devpts; no /sys",
                         EVID("{s:b, s:b}", "mount_namespace_differs", mnt, "private_pty", pty),
                         pty ? "the command's terminal is a pty of its own, relayed to yours; it holds no descriptor "
                               "of your terminal"
                             : NULL);
    bool scoped = json_integer_value(json_object_get(ll, "scoped")) != 0;
    bool ipc_ok = ipc && pid && (scoped || net);
    /* Host unix sockets in projected toolchains and --access trees: those
     * there at start are covered (the launcher's scan); one made there
     * while the run goes would be reachable (a read-only mount does not
     * stop a connect; Landlock before ABI 9 has no right for it).  A grant
     * that held sockets, or that could not be scanned whole, is where they
     * live: partial. */
    json_t *hs = json_object_get(ev, "host_unix_sockets");
    const json_t *scanned = json_object_get(hs, "grants_scanned"),
                 *incomplete = json_object_get(hs, "grants_incomplete");
    const json_t *tools_cut = json_object_get(hs, "toolchains_incomplete"),
                 *handed = json_object_get(hs, "sockets_handed_over");
    json_int_t covered = json_integer_value(json_object_get(hs, "covered"));
    json_int_t in_grants = json_integer_value(json_object_get(hs, "covered_in_grants"));
    char ipc_note[1536] = "", trees[512] = "", given[512] = "";
    join_strings(scanned, trees, sizeof trees);
    join_strings(handed, given, sizeof given);
    bool sockets_partial = in_grants > 0 || json_array_size(incomplete) > 0 || json_array_size(handed) > 0;
    if (json_array_size(scanned) || covered || json_array_size(tools_cut) || given[0])
        snprintf(ipc_note, sizeof ipc_note,
                 "host unix sockets in projected toolchains%s%s were covered at start (%lld%s); one a host program "
                 "makes there while the run goes, or makes anew after the cover (a restarted service), is "
                 "reachable: a read-only mount does not stop a connect, and Landlock (ABI %lld here) has no right "
                 "for it%s%s%s%s",
                 trees[0] ? " and the --access trees " : "", trees, (long long)covered,
                 in_grants ? ", so the grants hold sockets" : "",
                 (long long)json_integer_value(json_object_get(ll, "abi")),
                 json_array_size(incomplete) ? "; a grant could not be scanned whole (too large, too deep, or a "
                                               "directory the sandbox may not list): sockets there may be reachable"
                                             : "",
                 json_array_size(tools_cut) ? "; toolchains are scanned two levels deep, 2,000 entries: deeper "
                                              "ones were not"
                                            : "",
                 given[0] ? "; the --access rw: grants handed these sockets over as asked: " : "", given);
    /* Landlock's scopes exist from ABI 6 (Linux 6.12): before it, only a
     * network namespace of the run's own keeps the host's abstract unix
     * sockets out of reach (signals: the PID namespace), and the
     * mechanism names what was installed, not what this kernel lacks. */
    char ipc_mech[320];
    snprintf(ipc_mech, sizeof ipc_mech,
             "IPC + PID namespaces; no host sockets projected (those in projected trees covered); %s",
             scoped ? "Landlock scopes (abstract unix, signals)"
             : net  ? "abstract unix sockets: the run's own network namespace (no Landlock scopes here: ABI < 6)"
                    : "no Landlock scopes here (ABI < 6) and the host's network namespace: the host's abstract unix "
                      "sockets are reachable");
    if (!scoped && !net && ipc && pid)
        snprintf(ipc_note + strlen(ipc_note), sizeof ipc_note - strlen(ipc_note),
                 "%sthis kernel's Landlock (ABI %lld) has no scopes (ABI 6, Linux 6.12), and the command stays in the "
                 "host's network namespace, where it could connect to the host's abstract unix sockets: --safe "
                 "gives it a network namespace of its own",
                 ipc_note[0] ? "; " : "", (long long)json_integer_value(json_object_get(ll, "abi")));
    bundle_set_dimension(b, DIM_IPC,
                         !ipc_ok           ? LEVEL_UNAVAILABLE
                         : sockets_partial ? LEVEL_PARTIAL
                                           : LEVEL_ENFORCED,
                         ipc_mech,
                         EVID("{s:b, s:b, s:b, s:O?}", "ipc_namespace_differs", ipc, "landlock_scoped", scoped,
                              "net_namespace_differs", net, "host_unix_sockets", hs),
                         ipc_note[0] ? ipc_note : NULL);
    record_resources(ctx, sb, ev, user);
#undef EVID
    bundle_set_executor(b, "host",
                        "FUSE overlay + user/mount/pid/ipc/uts(/net) namespaces + synthetic root + "
                        "Landlock + seccomp");
}
