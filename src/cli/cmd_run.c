/* cmd_run.c: `pvisor run`.
 *
 * Order matters: every check that can reject the request (usage, refused
 * policy) happens before anything is written; then the run directory and
 * its Bundle are created; then the command starts.  A failure after that
 * point is recorded in the Bundle as "setup_failed" and exits 125 without
 * the command having run.
 */
#include "cli/cli.h"
#include "cli/run.h"
#ifdef PVISOR_HAVE_OVERLAY
#include "cli/run_sandbox.h"
#endif
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "evidence/runstore.h"
#include "exec/exec.h"
#include "policy/plan_build.h"
#include "policy/policy.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Requests this build cannot honour: refuse before anything happens,
 * never fall back to a weaker mode. */
static int refuse_unavailable(const struct run_options *o) {
    if (policy_wants_sandbox(o) && !run_stage_supported())
        return cli_error(PV_EXIT_SETUP, "run",
                         "--safe / --filesystem sandbox need the staged workspace, which this build lacks "
                         "(built without the overlay); nothing was run");
    if (o->executor == EXECUTOR_OCI || o->executor == EXECUTOR_VM)
        return cli_error(PV_EXIT_SETUP, "run",
                         "--executor %s is not available in this build (use --executor host); nothing was run",
                         executor_name(o->executor));
    if (o->stage && !run_stage_supported())
        return cli_error(PV_EXIT_SETUP, "run", "--stage is not available in this build; nothing was run");
    return 0;
}

/* Resolve the workspace to an absolute, symlink-free directory path. */
static int resolve_workspace(const struct run_options *o, char **ret_path) {
    const char *w = o->workspace ? o->workspace : ".";
    char *real = realpath(w, NULL);
    if (!real)
        return cli_usage_error("run", "--workspace '%s': %s", w, strerror(errno));
    struct stat st;
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(real);
        return cli_usage_error("run", "--workspace '%s' is not a directory", w);
    }
    /* Every stage would lie in it ("choose --stage outside the workspace",
     * which nothing is) */
    if (policy_wants_stage(o) && strcmp(real, "/") == 0) {
        free(real);
        return cli_usage_error("run",
                               "the workspace is / (%s), which cannot be staged: run pvisor in your project's "
                               "directory, or give it with --workspace DIR",
                               o->workspace ? "--workspace" : "the current directory");
    }
    /* The sandbox has a /dev, /proc and /sys of its own, over which no
     * projection can show: a workspace there would not be found inside
     * (it failed at "chdir to the working directory") */
    static const char *const own[] = {"/dev", "/proc", "/sys"};
    for (size_t i = 0; policy_wants_sandbox(o) && i < ARRAY_SIZE(own); i++)
        if (path_within(real, own[i])) {
            _cleanup_free_ char *e = term_escape(real);
            free(real);
            return cli_usage_error("run",
                                   "the workspace %s is under %s, which the sandbox replaces with its own: use a "
                                   "workspace elsewhere (a copy under /tmp, /var/tmp or your home)",
                                   e ? e : "?", own[i]);
        }
    /* A staged run's workspace is looked up by name (the Bundle, the
     * stage's meta.json); a plain run's is the current directory, never
     * looked up, which its Bundle gives as cwd_hex (workspace null). */
    if (policy_wants_stage(o) && !run_path_recordable(real)) {
        _cleanup_free_ char *d = term_escape(real);
        free(real);
        return cli_usage_error("run",
                               "the workspace %s is not valid UTF-8, which the Bundle and the stage cannot record; "
                               "rename it, or give --workspace a directory above it",
                               d ? d : "?");
    }
    *ret_path = real;
    return 0;
}

/* A stage path must be absent, an empty/stage directory, or 'auto'. */
static int check_stage_arg(const struct run_options *o) {
    if (!o->stage || strcmp(o->stage, "auto") == 0)
        return 0;
    /* the stage is made or opened by its name in its parent: '/', '.',
     * '..' (with trailing slashes or not) have none ("Invalid argument") */
    size_t l = strlen(o->stage);
    while (l > 1 && o->stage[l - 1] == '/')
        l--;
    size_t b = l;
    while (b > 0 && o->stage[b - 1] != '/')
        b--;
    const char *base = o->stage + b;
    size_t bl = l - b;
    if (bl == 0 || (bl == 1 && base[0] == '.') || (bl == 2 && strncmp(base, "..", 2) == 0))
        return cli_usage_error("run",
                               "--stage '%s' names no directory of its own; give the stage's path by its name "
                               "(such as ../NAME), or --stage auto",
                               o->stage);
    /* a link, also with a trailing '/' (which lstat follows) */
    _cleanup_free_ char *name = strndup(o->stage, l);
    if (!name)
        return cli_error(PV_EXIT_SETUP, "run", "out of memory");
    struct stat st;
    if (lstat(name, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return cli_usage_error("run", "--stage '%s': %s", o->stage, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return cli_usage_error("run",
                               "--stage '%s' is a symbolic link, which a stage is never opened through (pvisor "
                               "apply, diff, drop refuse it); give the directory it leads to, or a new path",
                               o->stage);
    if (!S_ISDIR(st.st_mode))
        return cli_usage_error(
            "run", "--stage '%s' exists and is not a directory; choose a new path or an existing stage", o->stage);
    return 0;
}

/* --access / --allow-write rule i's path must exist, and a read-write grant
 * must not overlap the workspace (its writes are staged; a grant would
 * bypass the stage).  Usage errors: checked before anything is written.
 * seen: the resolved paths of the rules before i; *ret_real: rule i's. */
static int check_access_rule(const struct run_options *o, int i, const char *workspace, char *const *seen,
                             char **ret_real) {
    _cleanup_free_ char *rp = realpath(o->access[i].path, NULL);
    if (!rp)
        return cli_usage_error("run", "--access/--allow-write '%s': %s", o->access[i].path, strerror(errno));
    if (!run_path_recordable(o->access[i].path) || !run_path_recordable(rp)) {
        _cleanup_free_ char *d = term_escape(o->access[i].path);
        return cli_usage_error("run", "--access/--allow-write %s is not valid UTF-8, which the Bundle cannot record",
                               d ? d : "?");
    }
    /* Two rules of different kinds for one path (by its name or
     * another: a symlink, a relative path): the mounts stack, so
     * rw: won over ro: and deny: over both, whatever their order,
     * silently; which one the user meant, pvisor cannot tell. */
    for (int j = 0; j < i; j++)
        if (o->access[j].kind != o->access[i].kind && strcmp(seen[j], rp) == 0)
            return cli_usage_error("run",
                                   "--access %s:%s and --access %s:%s name the same path %s; give one rule for it",
                                   access_kind_name(o->access[j].kind), o->access[j].path,
                                   access_kind_name(o->access[i].kind), o->access[i].path, rp);
    if (strcmp(rp, "/") == 0)
        return cli_usage_error("run", "--access %s:%s names the whole file system; name what to %s",
                               access_kind_name(o->access[i].kind), o->access[i].path,
                               o->access[i].kind == ACCESS_DENY ? "hide" : "grant");
    /* the sandbox has a /proc of its own and no /sys: a rule there
     * would be hidden by the first, or expose the host's devices */
    if (path_within(rp, "/proc") || path_within(rp, "/sys"))
        return cli_usage_error("run", "--access %s:%s: the sandbox has a /proc of its own and no /sys",
                               access_kind_name(o->access[i].kind), o->access[i].path);
    bool inside = path_within(rp, workspace);
    bool covers = path_within(workspace, rp) && strcmp(workspace, rp) != 0;
    if (o->access[i].kind == ACCESS_RW && (inside || covers))
        return cli_usage_error("run",
                               "--allow-write/--access rw:%s overlaps the workspace %s, whose writes are "
                               "staged; grant a path outside it",
                               o->access[i].path, workspace);
    /* a cover over a directory that holds the workspace (or over /dev,
     * which the sandbox builds inside it) leaves the command nothing to
     * start in: its setup failed */
    if (o->access[i].kind == ACCESS_DENY && covers)
        return cli_usage_error("run", "--access deny:%s would hide the workspace %s, which it holds", o->access[i].path,
                               workspace);
    /* /dev itself: the sandbox has one of its own (a few device nodes).
     * The host's read-write: the command could create, replace or
     * delete the host's device nodes (as root, its own), and write any
     * device its owner may; read-only, it shows every disk and
     * partition to read raw (as root, and to a disk group's member):
     * every file of the host, every credential the sandbox keeps from
     * the command.  A grant of one device node stays. */
    if (strcmp(rp, "/dev") == 0) {
        switch (o->access[i].kind) {
        case ACCESS_RW:
            return cli_usage_error("run",
                                   "--access rw:%s would hand the command the host's /dev read-write: it could "
                                   "create or delete the host's device nodes, and write any device you may; the "
                                   "sandbox has a /dev of its own (a few device nodes): grant the devices it "
                                   "needs one by one (such as rw:/dev/kvm)",
                                   o->access[i].path);
        case ACCESS_RO:
            return cli_usage_error("run",
                                   "--access ro:%s would show the command the host's disks to read raw (every "
                                   "file on them, credentials included); the sandbox has a /dev of its own: "
                                   "grant the devices it needs one by one (such as ro:/dev/dri)",
                                   o->access[i].path);
        case ACCESS_DENY:
            return cli_usage_error("run",
                                   "--access deny:%s: the sandbox has a /dev of its own (a few device nodes); "
                                   "deny one of them instead",
                                   o->access[i].path);
        }
    }
    /* the sandbox's private /tmp and /dev/shm, which --limit tmp=/shm=
     * size, are under a rule for that path: the size would size nothing */
    bool tmp = strcmp(rp, "/tmp") == 0, shm = strcmp(rp, "/dev/shm") == 0;
    if ((tmp && o->limits.tmp_bytes) || (shm && o->limits.shm_bytes))
        return cli_usage_error("run",
                               "--limit %s= sizes the sandbox's private %s, which --access %s:%s %s; give one of "
                               "them",
                               tmp ? "tmp" : "shm", rp, access_kind_name(o->access[i].kind), o->access[i].path,
                               o->access[i].kind == ACCESS_DENY ? "hides" : "replaces with the host's");
    /* the agent socket is projected at PLAN_AGENT_SOCKET_PATH, on top
     * of the grants: its mount point cannot be made in a read-only
     * projection of the host's /run (the setup failed), and in a
     * read-write one it was made in the host's /run */
    if (o->access[i].kind != ACCESS_DENY && path_within(PLAN_AGENT_SOCKET_PATH, rp))
        return cli_usage_error(
            "run",
            "--access %s:%s would hold the sandbox's agent socket, %s, whose mount point %s; grant the directories "
            "in %s the command needs instead (such as %s:/run/postgresql)",
            access_kind_name(o->access[i].kind), o->access[i].path, PLAN_AGENT_SOCKET_PATH,
            o->access[i].kind == ACCESS_RO ? "cannot be made in a read-only projection"
                                           : "would be made on the host through a read-write projection",
            rp, access_kind_name(o->access[i].kind));
    if (o->access[i].kind == ACCESS_RO && (covers || strcmp(workspace, rp) == 0))
        return cli_usage_error("run", "--access ro:%s would expose the real workspace around the stage",
                               o->access[i].path);
    *ret_real = TAKE_PTR(rp);
    return 0;
}

static int check_access_rules(const struct run_options *o, const char *workspace) {
    char *seen[POLICY_MAX_ACCESS] = {NULL}; /* the rules' resolved paths so far */
    int r = 0;
    for (int i = 0; i < o->n_access && r == 0; i++)
        r = check_access_rule(o, i, workspace, seen, &seen[i]);
    for (int i = 0; i < o->n_access; i++)
        free(seen[i]);
    return r;
}

#ifdef PVISOR_HAVE_OVERLAY
static void creds_freep(struct sandbox_creds **c) {
    sandbox_creds_free(*c);
}
#endif

#ifdef PVISOR_HAVE_OVERLAY
/* --limit tmp=/shm=: a tmpfs's files are kept in memory (or swap), so at
 * most half of this host's memory, the kernel's default for a tmpfs, or
 * of the memory limit of pvisor's cgroup (a container's) or of --limit
 * mem= when that is less: the tmpfs's pages count against it.  (Without
 * tmp=, /tmp is 1 GiB or that half when less: plan_build.c.) */
static int check_tmpfs_sizes(const struct run_options *o) {
    if (!o->limits.tmp_bytes && !o->limits.shm_bytes)
        return 0;
    enum tmpfs_bound by;
    uint64_t max = policy_tmpfs_max(cgroup_memory_limit(), o->limits.mem_bytes, &by);
    const struct {
        uint64_t v;
        const char *key, *path;
    } t[] = {{o->limits.tmp_bytes, "tmp", "/tmp"}, {o->limits.shm_bytes, "shm", "/dev/shm"}};
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        if (max && t[i].v > max && max < POLICY_TMPFS_MIN) /* "give at most tmp=0M" cannot be given */
            return cli_usage_error("run",
                                   "--limit %s: a size needs at least 2 MiB of %s (%llu MiB): the sandbox's %s "
                                   "is a tmpfs, whose files are kept in memory, of at most half of it; leave %s= out "
                                   "(a %llu KiB %s)",
                                   t[i].key, policy_tmpfs_bound_name(by), (unsigned long long)(max * 2 >> 20),
                                   t[i].path, t[i].key, (unsigned long long)(max >> 10), t[i].path);
        else if (max && t[i].v > max)
            return cli_usage_error("run",
                                   "--limit %s: %llu MiB is more than half of %s (%llu MiB): the "
                                   "sandbox's %s is a tmpfs, whose files are kept in memory; give at most %s=%lluM",
                                   t[i].key, (unsigned long long)(t[i].v >> 20), policy_tmpfs_bound_name(by),
                                   (unsigned long long)(max * 2 >> 20), t[i].path, t[i].key,
                                   (unsigned long long)(max >> 20));
    return 0;
}
#endif

int cmd_run(int argc, char **argv) {
    struct run_options o;
    _cleanup_free_ char *err = NULL;
    int r = policy_parse_run(argc, argv, &o, &err);
    if (r < 0)
        return err ? cli_usage_error("run", "%s", err) : cli_error(PV_EXIT_SETUP, "run", "out of memory");
    if (o.help)
        return cli_print_help(cli_find_command("run"));

    /* Usage errors first (exit 2), then requests this build refuses (125). */
    _cleanup_free_ char *workspace = NULL;
    r = resolve_workspace(&o, &workspace);
    if (r)
        return r;
    r = check_stage_arg(&o);
    if (r)
        return r;
    r = check_access_rules(&o, workspace);
    if (r)
        return r;
    r = refuse_unavailable(&o);
    if (r)
        return r;
#ifdef PVISOR_HAVE_OVERLAY
    r = check_tmpfs_sizes(&o);
    if (r)
        return r;
#endif

    struct policy pol;
    policy_build(&o, &pol);
    PV_MARK("P_parsed");

    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return cli_error(PV_EXIT_SETUP, "run", "cannot read the current directory: %s", strerror(errno));

    char run_id[32];
    _cleanup_free_ char *runs = NULL;
    r = make_run_id(run_id);
    if (r >= 0)
        r = runs_dir(false, &runs);
    if (r == -EPERM)
        return runs_dir_error("run", r);
    if (r < 0)
        return cli_error(PV_EXIT_SETUP, "run",
                         "cannot locate the pvisor state directory: %s "
                         "(set HOME or XDG_STATE_HOME)",
                         strerror(-r));
    _cleanup_free_ char *run_dir = path_join(runs, run_id);
    if (!run_dir)
        return cli_error(PV_EXIT_SETUP, "run", "out of memory");

    struct run_context ctx = {
        .opts = &o,
        .policy = &pol,
        .run_id = run_id,
        .run_dir = run_dir,
        .run_dirfd = -1,
        .probe_fd = -1,
        .workspace = workspace,
        .cwd = cwd,
    };
    /* pvisor's own state inside a sandboxed run's workspace (XDG_STATE_HOME
     * there, or HOME the workspace): the command would read other runs'
     * Bundles and stages through the view and could stage a forged run
     * that apply writes into the real state; and the agent socket, in the
     * run directory, would be reached through the view (not a socket
     * there).  Refused before anything is written, and before the stage's
     * location: a --stage auto there is inside the workspace too, which
     * said to "choose --stage outside the workspace" to a --safe run that
     * gave none, where HOME is the workspace. */
    if (policy_wants_sandbox(&o)) {
        _cleanup_free_ char *real = NULL;
        if (path_resolve(runs, &real) < 0)
            return cli_error(PV_EXIT_SETUP, "run", "out of memory");
        /* a relative XDG_STATE_HOME is ignored (XDG): say so, or the
         * advice reads as wrong to one who set it */
        const char *x = getenv("XDG_STATE_HOME");
        bool x_ignored = x && x[0] && x[0] != '/';
        /* where it is (WS/../state is not in WS: refused, found by a
         * review), its spelling aside */
        if (path_within(real ? real : runs, workspace))
            return cli_usage_error("run",
                                   "pvisor's state directory %s is inside the workspace %s: the sandboxed command "
                                   "would see other runs' Bundles and stages there; set XDG_STATE_HOME to a "
                                   "directory outside the workspace%s%s%s",
                                   real ? real : runs, workspace,
                                   x_ignored ? " (an absolute path: XDG_STATE_HOME=" : "", x_ignored ? x : "",
                                   x_ignored ? " is relative, which is ignored)" : "");
    }

    if (policy_wants_stage(&o)) {
        _cleanup_free_ char *msg = NULL;
        if (run_check_stage_location(&ctx, &msg) < 0)
            return cli_usage_error("run", "%s", msg ? msg : "invalid stage location");
    }
#ifdef PVISOR_HAVE_OVERLAY
    /* A grant that reaches a credential location, a workspace in one: the
     * planning refuses them, which needs HOME's credential locations
     * resolved; a usage error, so before anything is written. */
    _cleanup_(creds_freep) struct sandbox_creds *creds = NULL;
    if (policy_wants_sandbox(&o)) {
        _cleanup_free_ char *msg = NULL;
        if (sandbox_check_credentials(&o, workspace, cwd, &creds, &msg) < 0)
            return cli_usage_error("run", "%s", msg);
        ctx.creds = creds;
    }
#endif
    PV_MARK("P_creds");

    /* An apply into this workspace cut short: the command would work on a
     * half-written tree, and the resume could not finish after it
     * (pending_apply.c). */
    _cleanup_free_ char *pend = NULL, *pend_ws = NULL;
    if (ws_apply_running(workspace))
        return cli_error(PV_EXIT_SETUP, "run",
                         "refused: a 'pvisor apply' is writing into %s or a directory that holds it now; run "
                         "again when that apply has finished; nothing was run",
                         workspace);
    if (pending_apply_find(workspace, NULL, &pend, &pend_ws) > 0 && ws_apply_running(pend_ws))
        return cli_error(PV_EXIT_SETUP, "run",
                         "refused: the stage %s is being applied to %s now; run again when that apply has "
                         "finished; nothing was run",
                         pend, pend_ws);
    if (pend)
        return cli_error(PV_EXIT_SETUP, "run",
                         "refused: an apply of the stage %s into %s was interrupted, and the workspace is "
                         "half-written; finish it with 'pvisor apply --stage %s', or keep what it wrote and discard "
                         "the rest with 'pvisor drop --force --stage %s'; nothing was run",
                         pend, pend_ws, pend, pend);

    /* From here on, things are written: the run directory and its Bundle.
     * A SIGINT, SIGTERM or SIGHUP meanwhile waits for the run to record it
     * (run_interrupted, or relayed to the command): its default action
     * killed pvisor half-way, which left a run directory without a Bundle
     * (every bare verb then refused: "the newest run has no readable
     * Bundle") and the run's agent socket. */
    run_hold_signals(&ctx);
    _cleanup_free_ char *runs_created = NULL;
    r = runs_dir(true, &runs_created);
    if (r < 0)
        return cli_error(PV_EXIT_SETUP, "run",
                         "cannot create the pvisor state directory %s: %s "
                         "(set XDG_STATE_HOME to a writable directory)",
                         runs, strerror(-r));
    if (mkdir(run_dir, 0700) < 0)
        return cli_error(PV_EXIT_SETUP, "run", "cannot create %s: %s", run_dir, strerror(errno));
    _cleanup_close_ int run_dirfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (run_dirfd < 0)
        return cli_error(PV_EXIT_SETUP, "run", "cannot open %s: %s", run_dir, strerror(errno));
    /* until the first Bundle is written, this says the run is starting
     * (not one whose supervisor died): runstore.h */
    (void)runs_hold(run_dirfd);

    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    json_t *bundle = bundle_new(run_id, &o, &pol, cwd, workspace, &started);
    if (!bundle) {
        /* nothing recorded: no run directory without a Bundle is left to
         * block the verbs that look for the newest run */
        rmdir(run_dir);
        return cli_error(PV_EXIT_SETUP, "run", "out of memory");
    }
    ctx.run_dirfd = run_dirfd;
    ctx.bundle = bundle;
    PV_MARK("P_bundle");
    int status = run_execute(&ctx);
    free(ctx.probe);
    json_decref(bundle);
    return ctx.end_signal ? -ctx.end_signal : status;
}
