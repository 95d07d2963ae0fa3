/* run_stage.c: the staged path of `pvisor run` (--stage DIR|auto).
 *
 * Order (each step's reason):
 *  1. open the workspace as a directory fd, BEFORE anything is mounted over
 *     it: the FUSE server reads the lower only through this fd;
 *  2. for a sandbox, plan it (HOME view's stage, cgroup leaf, launch plan);
 *  3. unshare a private mount namespace (plus a user namespace with a
 *     one-ID map when not root) while still single-threaded, and make every
 *     mount private so nothing propagates back to the host;
 *  3b. open/create the stage and take its run lock (a second run on the
 *     same stage is refused instead of corrupting it): for a sandbox after
 *     the fork, while the launcher is exec'd;
 *  4. fork the command (exec_run), which waits; start the FUSE server on the
 *     workspace path; only then let the command chdir and exec, so it can
 *     only ever see the merged view at that path;
 *  5. after the command's whole tree is gone: stop the agent socket's
 *     thread (a live checkpoint in progress completes first; none may run
 *     while the overlay goes away), unmount, stop the server, seal the
 *     stage (synced data, then the completion marker).
 * If pvisor is killed, the mount namespace dies with it (no mount is left
 * on the host) and the stage stays unsealed: 'interrupted'.
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#ifdef PVISOR_HAVE_LIFECYCLE
#include "cli/run_checkpoint.h"
#include "lifecycle/lifecycle.h"
#endif
#include "launch/launch.h"
#include "evidence/bundle.h"
#include "exec/exec.h"
#include "overlay/overlay.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct staged {
    struct sandbox *sb; /* NULL unless --filesystem sandbox / --safe */
    int lower_fd;
    struct stage *stage;
    struct overlay *ov;
    struct run_context *ctx;
    int start_error;
#ifdef PVISOR_HAVE_LIFECYCLE
    struct run_checkpoints cps; /* live checkpoints over the agent socket */
#endif
    int cgroup_error; /* moving the launcher into the run's cgroup leaf failed */
    const char *stage_path;
    enum stage_durability durability;
    int stage_error;        /* opening the stage failed (stage_open_for_run) */
    char sealed_clash[512]; /* a sealed path the stage's upper already holds, or "" (start_error is then set) */
    int home_error;         /* the HOME view could not be prepared or mounted */
    pid_t launcher;         /* a sandbox's launcher, exec_run's child */
};

/* A private mount namespace; as non-root, or for a sandbox, inside a new
 * user namespace that maps only our own uid and gid (no /etc/subuid, no
 * setuid helper).  For a sandbox our uid maps to 0 inside, so the launcher
 * we exec keeps its capabilities within this namespace (and only there)
 * until it drops them; the command itself gets the invoking ids back in a
 * nested namespace. */
static int enter_private_namespace(bool sandbox, const char **ret_what) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (uid == 0 && !sandbox) {
        *ret_what = "unshare(CLONE_NEWNS)";
        if (unshare(CLONE_NEWNS) < 0)
            return -errno;
    } else {
        int r = userns_enter(CLONE_NEWNS, sandbox ? 0 : uid, sandbox ? 0 : gid, ret_what);
        if (r < 0)
            return r;
    }
    /* Slaves, not private: the host's unmounts reach this namespace, which
     * held every file system mounted when the run started for the whole
     * run (a USB disk or a loop image the user unmounted stayed in use);
     * nothing mounted here reaches the host.  The launcher makes its own
     * copy private (launch.c) before it builds the sandbox's root. */
    *ret_what = "making mounts slaves of the host's";
    if (mount("none", "/", "none", MS_REC | MS_SLAVE, NULL) < 0)
        return -errno;
    return 0;
}

/* What to do when the private namespaces (step what, error err) could not
 * be made, by the sysctl that refused them: the run said to set
 * kernel.unprivileged_userns_clone (Debian's) also where
 * user.max_user_namespaces=0 had disabled them, and for a mount
 * namespace's ENOSPC (user.max_mnt_namespaces), and root's plain --stage,
 * which makes no user namespace.  NULL: nothing more to say than 'pvisor
 * doctor' does. */
static const char *namespace_remedy(const char *what, int err, char *buf, size_t size) {
    const char *limit = ns_limit_remedy(what, err, buf, size);
    if (limit)
        return limit;
    if (strncmp(what, "unshare(CLONE_NEWUSER", 21) == 0) {
        if (getuid() != 0 && sysctl_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
            return "user namespaces are disabled: sysctl kernel.unprivileged_userns_clone=1";
        if (err == ENOSPC || sysctl_long("/proc/sys/user/max_user_namespaces") == 0)
            return "user namespaces are disabled or used up: sysctl user.max_user_namespaces=15000";
        if (sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
            return "AppArmor restricts unprivileged user namespaces: sysctl "
                   "kernel.apparmor_restrict_unprivileged_userns=0";
        return "user namespaces must be enabled: sysctl kernel.unprivileged_userns_clone=1";
    }
    return NULL;
}

static void read_launch_report(pid_t child, void *userdata) {
    struct staged *st = userdata;
    if (st->sb)
        sandbox_read_report(child, st->sb);
    /* while the command runs, before the run's end reaps our children (a
     * no-op when the running Bundle took them in already) */
    run_probe_collect(st->ctx);
}

/* The command could not be exec'd (no after_exec): the probe child is
 * collected before the run's end kills the supervisor's children. */
static void collect_before_reap(void *userdata) {
    struct staged *st = userdata;
    run_probe_collect(st->ctx);
    if (st->sb) /* and the terminal's guardian goes (sandbox_restore_tty) */
        sandbox_restore_tty(st->sb);
}

/* Open (or create) the stage and take its run lock; on success the
 * workspace-writes dimension is recorded. */
static int open_stage(struct staged *st) {
    const struct run_context *ctx = st->ctx;
    int r = stage_open_for_run(st->stage_path, ctx->workspace, ctx->run_id, st->durability, &st->stage);
    if (r < 0) {
        st->stage_error = r;
        return r;
    }
#ifdef PVISOR_HAVE_LIFECYCLE
    st->cps.stage = st->stage; /* before the agent socket's thread starts */
#endif
    /* a stage outside the state directory: hidden from later sandboxed
     * runs as that directory is (run_sandbox_home.c, mask_stages_elsewhere) */
    (void)stages_elsewhere_add(st->stage_path);
    bool sandbox = st->sb != NULL;
    /* Without the sandbox the command keeps other ways to the real
     * workspace: a bind mount or another path to it, a descriptor it
     * inherited, another process's /proc/PID/cwd (tested): the overlay
     * holds only while the command writes through the workspace's path,
     * which is what cooperative means (--strict refuses it). */
    bundle_set_dimension(ctx->bundle, DIM_WORKSPACE_WRITES, sandbox ? LEVEL_ENFORCED : LEVEL_COOPERATIVE,
                         "FUSE copy-on-write overlay",
                         json_pack("{s:s, s:s, s:b}", "stage", st->stage_path, "mountpoint", ctx->workspace,
                                   "user_namespace", getuid() != 0),
                         sandbox ? "every write to the workspace lands in the stage; the real workspace is not "
                                   "reachable from inside the sandbox"
                                 : "writes through the workspace path land in the stage; other paths to the same "
                                   "files (aliases, another process's /proc/PID/cwd, an inherited descriptor) are not "
                                   "covered without --filesystem sandbox");
    return 0;
}

/* Does the stage's upper already hold something at a path the workspace
 * view seals, or a symlink at a parent of one (made by an earlier run of
 * the stage without that rule)?  The view would show it. */
static const char *find_sealed_clash(int upper_fd, char *const *sealed, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s", sealed[i]) >= (int)sizeof path)
            return sealed[i];
        for (char *slash = path;; *slash++ = '/') {
            slash = strchr(slash, '/');
            if (slash)
                *slash = '\0';
            struct stat st;
            bool found = fstatat(upper_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
            bool whiteout = found && stage_is_whiteout(&st);
            if (found && (slash ? S_ISLNK(st.st_mode) : !whiteout))
                return sealed[i];
            if (!slash)
                break;
        }
    }
    return NULL;
}

static void *start_home_thread(void *arg) {
    struct sandbox *sb = arg;
    PV_MARK("H0");
    sb->home_start_r = sandbox_start_home(sb);
    PV_MARK("H_done");
    return NULL;
}

static int start_overlay(pid_t child, void *userdata) {
    struct staged *st = userdata;
    PV_MARK("S_fork");
    st->launcher = child;
    const struct run_options *o = st->ctx->opts;
    /* The launcher is not running yet: every process of the run starts
     * inside the leaf. */
    int cr = st->sb ? sandbox_attach_cgroup(st->sb, child) : 0;
    if (cr < 0) {
        st->cgroup_error = cr;
        return cr;
    }
    /* The HOME view (its throwaway stage, then its mount) is made by a
     * thread of its own, while a sandbox's launcher is being exec'd
     * (early_exec) and the workspace's stage is opened (fsyncs) and
     * mounted here. */
    pthread_t home_thread;
    bool home_started = st->sb && pthread_create(&home_thread, NULL, start_home_thread, st->sb) == 0;
    PV_MARK("S_thread_started");
    int r = st->stage ? 0 : open_stage(st);
    PV_MARK("S_stage_opened");
    const char *clash =
        r >= 0 && st->sb ? find_sealed_clash(stage_upper_fd(st->stage), st->sb->ws_sealed, st->sb->n_ws_sealed) : NULL;
    if (clash) { /* copied: the sandbox's list is freed before the message is made */
        snprintf(st->sealed_clash, sizeof st->sealed_clash, "%s", clash);
        st->start_error = r = -EEXIST;
    }
    if (r >= 0) {
        struct overlay_params p = {
            .lower_fd = st->lower_fd,
            .stage = st->stage,
            .mountpoint = st->ctx->workspace,
            .max_bytes = o->stage_max_bytes,
            .max_inodes = o->stage_max_inodes,
            .mask = st->sb ? (const char *const *)st->sb->ws_mask : NULL,
            .n_mask = st->sb ? st->sb->n_ws_mask : 0,
            .sealed = st->sb ? (const char *const *)st->sb->ws_sealed : NULL,
            .n_sealed = st->sb ? st->sb->n_ws_sealed : 0,
            /* the overlay's user namespace maps our uid and gid alone: a
             * sandbox's (but root's, which maps every id), and the one a
             * plain run enters without root */
            .own_group = st->sb ? !st->sb->as_root : getuid() != 0,
            .hide_stages = st->sb != NULL,
            /* HOME's credential locations (its view's masks): a hard link
             * of one of their files in the workspace is hidden too */
            .link_fd = st->sb ? st->sb->home_fd : -1,
            .link_mask = st->sb && st->sb->home_fd >= 0 ? st->sb->home_mask : NULL,
            .n_link_mask = st->sb && st->sb->home_fd >= 0 ? st->sb->n_home_mask : 0,
            .no_walk = st->sb ? st->sb->home_state : NULL,
        };
        r = overlay_start(&p, &st->ov);
        PV_MARK("S_wsview");
        if (r < 0)
            st->start_error = r;
    }
    int hr = 0;
    if (home_started)
        pthread_join(home_thread, NULL);
    PV_MARK("S_homeview");
    if (st->sb && r >= 0)
        hr = home_started ? st->sb->home_start_r : sandbox_start_home(st->sb);
    if (r >= 0 && hr < 0)
        st->home_error = r = hr;
    uint64_t room, reserve;
    if (r >= 0 && overlay_room(st->ov, &room, &reserve) == 0 && room < (64ULL << 20)) {
        char w[256];
        snprintf(w, sizeof w,
                 "the stage's file system has %llu MiB left for the command (%llu MiB are kept free): "
                 "writes beyond that fail with ENOSPC",
                 (unsigned long long)(room >> 20), (unsigned long long)(reserve >> 20));
        fprintf(stderr, "pvisor: warning: %s\n", w);
        bundle_add_warning(st->ctx->bundle, w);
    }
#ifdef PVISOR_HAVE_LIFECYCLE
    st->cps.ov = st->ov; /* before the socket's thread starts */
#endif
    /* Threads start only now, after the fork (see exec.h). */
    if (r >= 0 && st->sb && st->sb->agent && (r = agent_socket_start(st->sb->agent)) < 0)
        st->start_error = r;
    return r;
}

/* The launcher said the end: the command's tree is gone, its PID
 * namespace empty; the launcher is still exiting (exec_reap). */
static bool launcher_said_end(void *userdata, int *ret_wait_status) {
    struct staged *st = userdata;
    return st->sb && sandbox_end_ready(st->sb, st->launcher, ret_wait_status);
}

/* pvisor starts ending the run (a signal, the timeout, a limit): a live
 * checkpoint under way stops now, not once the command has ended, which a
 * command waiting for the paused overlay cannot do before the copy ends. */
static void cancel_checkpoints(void *userdata) {
#ifdef PVISOR_HAVE_LIFECYCLE
    struct staged *st = userdata;
    atomic_store(&st->cps.cancel, true);
#else
    (void)userdata;
#endif
}

/* For tests only: PVISOR_TEST_SEAL_WAIT=PATH makes the run create PATH
 * once the command's tree is gone and the overlay stopped, just before the
 * seal, and wait there until PATH is removed (a test signals pvisor in
 * that window, then lets it go on). */
static void test_seal_wait(void) {
    const char *p = getenv("PVISOR_TEST_SEAL_WAIT");
    if (!p || !*p)
        return;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    close(fd);
    struct stat sb;
    while (lstat(p, &sb) == 0)
        usleep(10000);
}

static const char *stage_open_hint(int r, const char *stage) {
#ifdef PVISOR_HAVE_LIFECYCLE
    _cleanup_free_ char *cp = NULL;
    if (r == -ESTALE && lc_restore_interrupted(stage, &cp))
        return "a 'pvisor restore' of the stage was interrupted; run that restore again to complete it "
               "(do not drop the stage: that discards its checkpoints too)";
#else
    (void)stage;
#endif
    switch (r) {
    case -EBUSY: return "another pvisor run is using this stage";
    case -ESTALE: return "the stage was interrupted (its run did not finish); it cannot be continued or applied";
    case -EALREADY: {
        static char done[96];
        snprintf(done, sizeof done, "the stage was already %s", stage_done_phrase(stage));
        return done;
    }
    case -EINPROGRESS: return "an apply of this stage was interrupted; finish it with 'pvisor apply' first";
    case -EXDEV: return "the stage belongs to another workspace";
    case -EINVAL: return "the directory is not empty and is not a pvisor stage";
    case -EPERM: /* stage_open_for_run: its mode could not be made 0700 */
        return "the directory is another user's: a stage holds the command's files, set-id programs among them, and "
               "must be yours alone (0700), or its owner could change it after your review; use a directory of "
               "your own";
    case -EPROTO: return "the stage has a format version this pvisor does not know";
    case -ENOTDIR: return "the stage path is not a directory";
    case -EMLINK: /* stage_open_for_run: a copy made with cp -l or cp -al */
        return "the stage's journal or origin map has another name (a hard link, as 'cp -al' makes), which a run "
               "would write through; copy a stage with 'pvisor fork'";
    default: return strerror(-r);
    }
}

/* The command worked on the directory the run opened (lower_fd), wherever
 * the user moved it meanwhile, while review, diff and apply take the
 * workspace by its path: after a `mv` of the workspace (or of a directory
 * above it) during the run they compared the stage with whatever was at
 * the old path then, or said only that it was gone, and nothing told the
 * user why (tested).  Said at the run's end, on stderr and in the Bundle. */
static void warn_workspace_moved(struct run_context *ctx, int lower_fd) {
    struct stat was, now;
    if (fstat(lower_fd, &was) < 0)
        return;
    int r = stat(ctx->workspace, &now) < 0 ? -errno : 0;
    if (r == 0 && now.st_dev == was.st_dev && now.st_ino == was.st_ino)
        return;
    char w[1400];
    snprintf(w, sizeof w,
             "the workspace %s was moved or replaced during the run (%s): the command worked on the directory that "
             "was there when it started, and review, diff and apply compare the stage with what is at %s; put the "
             "workspace back there before you review and apply the stage",
             ctx->workspace, r < 0 ? strerror(-r) : "another directory is there now", ctx->workspace);
    bundle_add_warning(ctx->bundle, w);
    _cleanup_free_ char *e = term_escape(w);
    fprintf(stderr, "pvisor run: warning: %s\n", e ? e : w);
}

/* A failure before the stage was opened: the Bundle names none (its
 * "running" stage, set for the agent socket's status, was never made or
 * never used: status and list showed a running stage). */
static int fail_before_stage(struct run_context *ctx, const char *msg) {
    bundle_set_json(ctx->bundle, "stage", json_null());
    return run_fail_setup(ctx, msg);
}

int run_execute_staged(struct run_context *ctx,
                       int (*run_command)(struct run_context *, struct exec_spec *, struct exec_result *)) {
    char msg[1100];
    _cleanup_free_ char *sp = NULL;
    int r = run_stage_path(ctx, &sp);
    if (r < 0) {
        snprintf(msg, sizeof msg, "cannot resolve the stage path: %s", strerror(-r));
        return run_fail_setup(ctx, msg);
    }

    struct staged st = {.lower_fd = -1, .ctx = ctx};
    st.lower_fd = open(ctx->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st.lower_fd < 0) {
        snprintf(msg, sizeof msg, "cannot open the workspace %s: %s", ctx->workspace, strerror(errno));
        return run_fail_setup(ctx, msg);
    }
    /* The agent socket's status names the stage (see sandbox_prepare). */
    bundle_set_json(ctx->bundle, "stage",
                    json_pack("{s:s, s:s, s:s}", "path", sp, "state", "running", "durability",
                              durability_name(ctx->opts->durability)));

    /* The sandbox is planned first (its cgroup leaf while we are still
     * single-threaded and outside any new namespace), then the namespaces. */
    bool sandbox = policy_wants_sandbox(ctx->opts);
    _cleanup_(sandbox_deletep) struct sandbox *sb = sandbox_new(ctx);
    if (!sb) {
        close(st.lower_fd);
        return fail_before_stage(ctx, "cannot prepare the run: out of memory");
    }
    if (sandbox) {
        _cleanup_free_ char *perr = NULL;
        const struct agent_hooks *hooks = NULL;
#ifdef PVISOR_HAVE_LIFECYCLE
        st.cps = (struct run_checkpoints){
            .run_id = ctx->run_id, .max_bytes = ctx->opts->stage_max_bytes, .max_inodes = ctx->opts->stage_max_inodes};
        hooks = &(struct agent_hooks){.checkpoint = run_checkpoint_hook, .userdata = &st.cps};
#endif
        PV_MARK("P_prep0");
        r = sandbox_prepare(ctx, hooks, sb, &perr);
        PV_MARK("P_prep");
        if (r < 0) {
            close(st.lower_fd);
            snprintf(msg, sizeof msg, "cannot plan the sandbox: %s", perr ? perr : strerror(-r));
            return fail_before_stage(ctx, msg);
        }
        st.sb = sb;
    }

    const char *what = "";
    r = enter_private_namespace(sandbox, &what);
    PV_MARK("P_ns");
    if (r < 0) {
        close(st.lower_fd);
        sandbox_release(sb);
        char rb[512];
        const char *remedy = namespace_remedy(what, -r, rb, sizeof rb);
        snprintf(msg, sizeof msg, "cannot create a private mount namespace (%s: %s); check 'pvisor doctor'%s%s%s", what,
                 strerror(-r), remedy ? " (" : "", remedy ? remedy : "", remedy ? ")" : "");
        return fail_before_stage(ctx, msg);
    }
    /* Without a sandbox the stage is opened now; with one, after the fork
     * (start_overlay), while the launcher is exec'd. */
    st.stage_path = sp;
    st.durability = ctx->opts->durability == DURABILITY_STRICT ? STAGE_DURABILITY_STRICT : STAGE_DURABILITY_CHECKPOINT;
    if (!sandbox && open_stage(&st) < 0) {
        close(st.lower_fd);
        snprintf(msg, sizeof msg, "cannot use the stage %s: %s", sp, stage_open_hint(st.stage_error, sp));
        return fail_before_stage(ctx, msg);
    }
    bundle_set_executor(ctx->bundle, "host", "private mount namespace + FUSE overlay, no other isolation");

    /* The FUSE server keeps a descriptor per inode it serves: raise our
     * soft limit to the hard one; the command gets the original back. */
    struct rlimit nofile_orig;
    bool nofile_raised = false;
    if (getrlimit(RLIMIT_NOFILE, &nofile_orig) == 0 && nofile_orig.rlim_cur < nofile_orig.rlim_max) {
        struct rlimit raised = {nofile_orig.rlim_max, nofile_orig.rlim_max};
        nofile_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
    }

    char *launcher_argv[] = {"/proc/self/exe", LAUNCH_VERB, NULL};
    struct exec_spec spec = {
        .argv = sandbox ? launcher_argv : ctx->opts->cmd_argv,
        .cwd = sandbox ? NULL : ctx->cwd,
        .after_fork = start_overlay,
        .after_exec = read_launch_report,
        .before_reap = collect_before_reap,
        .kill_grace_ms = run_kill_grace_ms(),
        .timeout_ms = ctx->opts->timeout_ms,
        .early_exec = sandbox, /* the launcher execs while the views are mounted */
        .pass_fds = sandbox ? sb->pass : NULL,
        .n_pass_fds = sandbox ? (int)ARRAY_SIZE(sb->pass) : 0,
        .keep_fds = sandbox ? sb->keep : NULL,
        .n_keep_fds = sandbox ? sb->n_keep : 0,
        .child_nofile = nofile_raised ? &nofile_orig : NULL,
        .userdata = &st,
        .watch = sandbox && sb->cg ? sandbox_cpu_watch : NULL,
        .watch_userdata = sb,
        .on_terminate = sandbox ? cancel_checkpoints : NULL,
        .end_fd = sandbox ? sb->end_r : -1,
        .end_ready = sandbox ? launcher_said_end : NULL,
    };
    struct exec_result res = {0};
    r = run_command(ctx, &spec, &res);
    PV_MARK("E_ran");
    if (sandbox)
        sandbox_restore_tty(sb); /* before anything is printed */
    if (sandbox && r >= 0)       /* what the end of its PID namespace killed */
        res.killed_descendants += sandbox_read_leftovers(sb);
    if (sandbox && r >= 0 && sb->stdio_lost_fd)
        run_warn(ctx->bundle,
                 "the command's %s could not be written (%s): what it wrote from then on is lost (init relays a "
                 "file given as fd 1 or 2; the command saw EPIPE at its next write)",
                 sb->stdio_lost_fd == 1 ? "stdout" : "stderr", strerror(sb->stdio_lost_errno));
    if (sandbox && r >= 0 && sb->leftovers_uncounted)
        bundle_add_warning(ctx->bundle, "the sandbox's init could not list its /proc to count the processes the "
                                        "command left behind: exit.leftovers_killed counts none of them (each was "
                                        "killed with the run's PID namespace)");
    /* The agent is gone: no request it left is served, and a checkpoint
     * under way stops. */
    if (sandbox)
        agent_socket_request_stop(sb->agent);
#ifdef PVISOR_HAVE_LIFECYCLE
    atomic_store(&st.cps.cancel, true);
#endif
    if (sandbox) {
        if (sb->cg) /* the launcher leaves the run's cgroup as it exits */
            exec_reap(&res);
        sandbox_finish_resources(sb, r >= 0 && !res.exec_errno && !res.chdir_errno ? res.wait_status : 0);
        sandbox_finish_egress(sb, r < 0 || exec_exit_status(&res) != 0);
        sandbox_finish_tmpfs(sb);
        sandbox_release_home_async(sb); /* meanwhile, the workspace is sealed */
    }

    /* No request may be served while the overlay and the stage go away. */
    if (st.sb && sb->agent) {
        agent_socket_stop(sb->agent);
#ifdef PVISOR_HAVE_LIFECYCLE
        run_checkpoints_record(&st.cps, ctx->bundle);
#endif
    }
    PV_MARK("E_released_async");
    struct overlay_stats stats = {0};
    /* after the stop: releases of the command's last files count */
    int stop_r = overlay_stop_stats(st.ov, &stats);
    PV_MARK("E_ovstop");
    test_seal_wait();
    int seal_r = 0;
    if (st.stage) {
        /* Also when the command never started (pvisor failed before):
         * nothing of it is left, and a stage it reopened keeps the earlier
         * runs' work appliable (left unsealed, it was interrupted for
         * good, with a second message that its seal "failed"). */
        seal_r = stage_seal(st.stage, stats.mutated);
        stage_free(st.stage);
        json_t *stage_j = json_object_get(ctx->bundle, "stage");
        json_object_set_new(stage_j, "state", json_string(seal_r >= 0 ? "sealed" : "interrupted"));
        json_object_set_new(stage_j, "copy_ups", json_integer((json_int_t)stats.copy_ups));
        json_object_set_new(stage_j, "whiteouts", json_integer((json_int_t)stats.whiteouts));
        json_object_set_new(stage_j, "upper_bytes", json_integer((json_int_t)stats.upper_bytes));
        json_object_set_new(stage_j, "upper_inodes", json_integer((json_int_t)stats.upper_inodes));
        json_object_set_new(stage_j, "quota_refusals", json_integer((json_int_t)stats.quota_refusals));
        json_object_set_new(stage_j, "dir_listings", json_integer((json_int_t)stats.dir_listings));
        if (stats.links_unknown)
            run_warn(ctx->bundle, "%s", sandbox_links_unknown_warning(stats.links_unknown));
        /* A write the quota refused may have left a file cut short, which
         * the review shows as an ordinary change (the command may have
         * gone on and exited 0): said here and by status --review. */
        if (stats.quota_refusals)
            run_warn(ctx->bundle,
                     "the stage refused %llu write%s (ENOSPC/EDQUOT: %s): files the command was writing may be "
                     "cut short",
                     (unsigned long long)stats.quota_refusals, stats.quota_refusals == 1 ? "" : "s",
                     ctx->opts->stage_max_bytes || ctx->opts->stage_max_inodes
                         ? "--stage-max-bytes/--stage-max-inodes, or the file system's reserve"
                         : "the stage's file system reached the reserve the overlay keeps free");
    } else {
        bundle_set_json(ctx->bundle, "stage", json_null()); /* never opened */
    }
    PV_MARK("E_sealed");
    /* The launcher, exiting since it said the end, is gone before pvisor
     * records the run as ended (and before pvisor exits). */
    exec_reap(&res);
    PV_MARK("E_reaped");
    if (st.stage)
        warn_workspace_moved(ctx, st.lower_fd);
    close(st.lower_fd);
    if (stop_r < 0) {
        snprintf(msg, sizeof msg, "stopping the overlay failed: %s", strerror(-stop_r));
        bundle_add_warning(ctx->bundle, msg);
    }
    if (seal_r < 0) {
        snprintf(msg, sizeof msg, "the stage could not be sealed (%s); it is interrupted and cannot be applied",
                 strerror(-seal_r));
        bundle_add_warning(ctx->bundle, msg);
        fprintf(stderr, "pvisor run: %s\n", msg);
    }
    if (st.stage_error) {
        sandbox_release(sb);
        snprintf(msg, sizeof msg, "cannot use the stage %s: %s", sp, stage_open_hint(st.stage_error, sp));
        return run_fail_setup(ctx, msg);
    }
    if (st.home_error) {
        sandbox_release(sb);
        snprintf(msg, sizeof msg, "cannot prepare the copy-on-write view of HOME: %s", strerror(-st.home_error));
        return run_fail_setup(ctx, msg);
    }
    if (sandbox && r >= 0 && !st.start_error) {
        /* Ended by a SIGINT, SIGTERM or SIGHUP before the command was let
         * go: pvisor's own (the go-ahead then not given), or the
         * launcher's, which a Ctrl-C at the terminal reaches (its process
         * group is the foreground one): not a setup failure ("ended
         * without a report (see 'pvisor doctor')", "cannot give the
         * sandbox the go-ahead: Broken pipe", 125). */
        int isig = sb->interrupted;
        if (!isig && !sb->go_given && WIFSIGNALED(res.wait_status) &&
            (WTERMSIG(res.wait_status) == SIGINT || WTERMSIG(res.wait_status) == SIGTERM ||
             WTERMSIG(res.wait_status) == SIGHUP))
            isig = WTERMSIG(res.wait_status);
        if (isig) {
            sandbox_release(sb);
            return run_interrupted(ctx, isig);
        }
        if (sb->refused) {
            snprintf(msg, sizeof msg, "%s", sb->refused_why);
            sandbox_release(sb);
            return run_fail_setup(ctx, msg);
        } else if (sandbox_report_ok(sb)) {
            /* recorded by sandbox_read_report() before the command ran */
        } else if (!sb->exec_failed) {
            char why[768];
            sandbox_report_error(sb, res.exec_errno, res.wait_status, why, sizeof why);
            /* the directory pvisor was started in is not in the sandbox's
             * view (a /tmp/x outside the workspace: the sandbox's /tmp is
             * its own); nothing 'pvisor doctor' could help with */
            const char *step = json_string_value(json_object_get(sb->report, "step"));
            int e = (int)json_integer_value(json_object_get(sb->report, "errno"));
            bool cwd_unseen = step && strcmp(step, "chdir to the working directory") == 0 &&
                              (e == ENOENT || e == ENOTDIR) && !path_within(ctx->cwd, ctx->workspace);
            sandbox_release(sb); /* frees the report */
            if (cwd_unseen) {
                _cleanup_free_ char *c = term_escape(ctx->cwd), *w = term_escape(ctx->workspace);
                snprintf(msg, sizeof msg,
                         "the current directory %.300s is not in the sandbox (it shows the workspace, HOME, the "
                         "system directories and a /tmp of its own): run pvisor from the workspace %.300s or a "
                         "directory in it",
                         c ? c : "?", w ? w : "?");
            } else {
                snprintf(msg, sizeof msg, "%s (see 'pvisor doctor')", why);
            }
            return run_fail_setup(ctx, msg);
        } else {
            /* Controls were installed; only exec of the command failed. */
            int e = (int)json_integer_value(json_object_get(sb->report, "errno"));
            res.exec_errno = e ? e : ENOENT;
        }
    }
    /* A HOME view still being removed is waited for after the last Bundle
     * is written (below): the two at once.  Not on a failure here, whose
     * Bundle is the last. */
    bool home_later = sandbox && r >= 0 && !st.cgroup_error && !st.sealed_clash[0] && !st.start_error;
    if (home_later)
        sandbox_release_but_home(sb);
    else
        sandbox_release(sb);
    if (st.cgroup_error) {
        snprintf(msg, sizeof msg, "cannot move the command into its cgroup %.300s: %s", sb->cg_path,
                 strerror(-st.cgroup_error));
        return run_fail_setup(ctx, msg);
    }
    if (st.sealed_clash[0]) {
        /* the path is the user's own rule or HOME's, not the agent's */
        snprintf(msg, sizeof msg,
                 "the stage already holds %.300s (or a symlink at a parent of it), which this run hides from the "
                 "command (a credential location or an --access deny: path); use a new stage",
                 st.sealed_clash);
        return run_fail_setup(ctx, msg);
    }
    if (st.start_error) {
        snprintf(msg, sizeof msg,
                 "cannot mount the staged workspace on %s: %s (see 'pvisor doctor': /dev/fuse "
                 "must be usable)",
                 ctx->workspace, strerror(-st.start_error));
        return run_fail_setup(ctx, msg);
    }
    if (home_later)
        sandbox_note_home_discarded(sb); /* the count before the Bundle; the removal goes on */
    int status = run_finish(ctx, r, &res);
    /* its removal failed: the Bundle says so too */
    if (home_later && sandbox_end_home(sb))
        run_warn_bundle_unwritten(run_write_bundle(ctx));
    return status;
}
