/* run_exec.c: execute an accepted run and keep its Bundle truthful.
 *
 * The Bundle is written "running" before the command starts and rewritten
 * when it ends, so a supervisor that dies leaves a Bundle that says so
 * (pvisor status reports it as interrupted when the supervisor is gone).
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "evidence/bundle.h"
#include "evidence/probe.h"
#include "exec/exec.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

bool run_stage_supported(void) {
#ifdef PVISOR_HAVE_OVERLAY
    return true;
#else
    return false;
#endif
}

static void record_plain_dimensions(json_t *b) {
    /* Without isolation the command has the invoking user's host access. */
    for (unsigned d = 0; d < _DIM_MAX; d++)
        bundle_set_dimension(b, d, LEVEL_UNENFORCED, "none", NULL, NULL);
    bundle_set_dimension(b, DIM_CHILD_PROCESSES, LEVEL_UNENFORCED, "process group + child subreaper cleanup", NULL,
                         "descendants are killed when the command exits, but may act on the host until then");
    bundle_set_executor(b, "host", "plain fork/exec, no isolation");
}

const char *run_strict_violation(const struct run_context *ctx, char *why, size_t size) {
    json_t *dims = json_object_get(ctx->bundle, "dimensions");
    const char *first = NULL;
    size_t len = 0;
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        if (ctx->policy->requested[d] == LEVEL_NONE)
            continue;
        const json_t *dim = json_object_get(dims, dimension_name(d));
        const char *eff = json_string_value(json_object_get(dim, "effective"));
        if (eff && strcmp(eff, level_name(LEVEL_ENFORCED)) == 0)
            continue;
        if (!first)
            first = dimension_name(d);
        /* every one, with the Bundle's first note (why, and what to do) */
        const char *note = json_string_value(json_array_get(json_object_get(dim, "notes"), 0));
        if (len + 1 >= size)
            continue; /* full: the rest is cut */
        /* a long note is cut where it says so ("...", not mid-word) */
        int cut = note && strlen(note) > 400 ? 397 : 400;
        int n = snprintf(why + len, size - len, "%s%s is %s%s%.*s%s", len ? "; " : "", dimension_name(d),
                         eff ? eff : "not recorded", note ? ": " : "", cut, note ? note : "",
                         note && strlen(note) > 400 ? "..." : "");
        len += n > 0 ? (size_t)n : 0;
    }
    if (size)
        why[len < size ? len : size - 1] = '\0';
    return first;
}

/* The Bundle is as durable as the stage: flushed at every write under
 * --stage-durability strict, else left to the file system's writeback (a
 * power loss may lose its last seconds; docs/bundle.md). */
static bool bundle_durable(const struct run_context *ctx) {
    return ctx->opts->durability == DURABILITY_STRICT;
}

void run_warn(json_t *bundle, const char *fmt, ...) {
    char w[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w, sizeof w, fmt, ap);
    va_end(ap);
    bundle_add_warning(bundle, w);
    fprintf(stderr, "pvisor run: warning: %s\n", w);
}

/* The command never ran: a stage this run made in its own directory
 * ('auto', --safe's default) holds nothing anyone needs (no command wrote
 * to it), and goes with the Bundle's entry, which status and list showed
 * as a sealed stage of a run that never started.  A stage the user named
 * (--stage DIR, maybe reopened with earlier work) stays theirs.  By then
 * it is closed and unmounted (run_stage.c). */
static void drop_unused_auto_stage(struct run_context *ctx) {
    const char *s = ctx->opts->stage;
    if (!policy_wants_stage(ctx->opts) || (s && strcmp(s, "auto") != 0))
        return;
    int r = remove_tree_at(ctx->run_dirfd, "stage", 16);
    if (r == 0 || r == -ENOENT)
        bundle_set_json(ctx->bundle, "stage", json_null());
}

int run_fail_setup(struct run_context *ctx, const char *reason) {
    run_probe_collect(ctx);
    drop_unused_auto_stage(ctx);
    bundle_set_string(ctx->bundle, "state", "setup_failed");
    bundle_add_warning(ctx->bundle, reason);
    int w = run_write_bundle(ctx);
    if (w < 0) {
        /* Not recorded (the state directory's file system full): a run
         * directory without a Bundle made every later verb without a RUN
         * refuse ("its supervisor died while setting it up"), for good.
         * The command never ran, so the directory holds only what this
         * run made (its auto stage, empty): removed, as when the first
         * Bundle cannot be made (cmd_run.c). */
        bool gone = remove_tree_contents(ctx->run_dirfd, 16) == 0 && rmdir(ctx->run_dir) == 0;
        return cli_error(PV_EXIT_SETUP, "run",
                         "%s; the command was not run, and the run could not be recorded in %s: %s%s%s", reason,
                         ctx->run_dir, strerror(-w),
                         w == -ENOSPC || w == -EDQUOT
                             ? " (free space on the state directory's file system, or set XDG_STATE_HOME to another)"
                             : "",
                         gone ? "" : "; remove that directory");
    }
    return cli_error(PV_EXIT_SETUP, "run", "%s; the command was not run (run %s)", reason, ctx->run_id);
}

static const int held[] = {SIGINT, SIGTERM, SIGHUP};

static bool held_signal(int sig) {
    struct sigaction cur;
    /* one pvisor was started ignoring is neither relayed nor queued for
     * it (exec.c): a blocked one is queued even while ignored */
    return sigaction(sig, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN;
}

void run_hold_signals(struct run_context *ctx) {
    sigset_t m;
    sigemptyset(&m);
    for (size_t i = 0; i < ARRAY_SIZE(held); i++)
        if (held_signal(held[i]))
            sigaddset(&m, held[i]);
    ctx->held_signals = sigprocmask(SIG_BLOCK, &m, &ctx->child_sigmask) == 0;
}

int run_pending_interrupt(void) {
    sigset_t p;
    if (sigpending(&p) < 0)
        return 0;
    for (size_t i = 0; i < ARRAY_SIZE(held); i++)
        if (sigismember(&p, held[i]) && held_signal(held[i]))
            return held[i];
    return 0;
}

int run_interrupted(struct run_context *ctx, int sig) {
    char msg[200];
    run_probe_collect(ctx);
    struct timespec ended;
    clock_gettime(CLOCK_REALTIME, &ended);
    snprintf(msg, sizeof msg, "the run was interrupted by SIG%s before the command started; the command was not run",
             sigabbrev_np(sig));
    bundle_set_string(ctx->bundle, "state", "interrupted");
    bundle_add_warning(ctx->bundle, msg);
    drop_unused_auto_stage(ctx);
    bundle_set_exit(ctx->bundle, 0, 128 + sig, &ended);
    json_t *e = json_object_get(ctx->bundle, "exit");
    json_object_set_new(e, "status", json_null()); /* the command has none */
    json_object_set_new(e, "timed_out", json_false());
    json_object_set_new(e, "interrupted_by", json_string(sigabbrev_np(sig)));
    json_object_set_new(e, "leftovers_killed", json_integer(0));
    int w = run_write_bundle(ctx);
    fprintf(stderr, "pvisor run: %s (run %s)\n", msg, ctx->run_id);
    run_warn_bundle_unwritten(w);
    ctx->end_signal = sig;
    return 128 + sig;
}

/* Start the command (after --strict is checked and the Bundle says
 * "running"); fills res. */
static int run_command(struct run_context *ctx, struct exec_spec *spec, struct exec_result *res) {
    /* Interrupted while the run was set up: the command is not started
     * (it would be, and then sent the signal: one that ignores it ran) */
    if ((ctx->start_interrupted = run_pending_interrupt()))
        return -EINTR;
    if (ctx->held_signals)
        spec->child_sigmask = &ctx->child_sigmask;
    /* A sandboxed run is checked by the supervisor when the launcher's
     * evidence arrives, before the command is allowed to exec. */
    if (ctx->opts->strict && !policy_wants_sandbox(ctx->opts)) {
        char why[1024];
        if (run_strict_violation(ctx, why, sizeof why)) {
            fprintf(stderr, "pvisor run: --strict: requested but not enforced here: %s\n", why);
            return -EPERM;
        }
    }
    bundle_set_string(ctx->bundle, "state", "running");
    /* A sandboxed run writes it while the launcher sets up, before the
     * command may go (run_write_running from the after_exec hook). */
    if (!policy_wants_sandbox(ctx->opts)) {
        int r = run_write_running(ctx);
        if (r < 0)
            return r;
    }
    return exec_run(spec, res);
}

int run_write_running(struct run_context *ctx) {
    /* kernel_features is empty here unless the probes ran in the
     * supervisor (--limit): the probe child is collected once the command
     * has started (run_probe_start), and the final Bundle has them. */
    return run_write_bundle(ctx);
}

int run_write_bundle(struct run_context *ctx) {
    return bundle_write(ctx->run_dirfd, ctx->bundle, bundle_durable(ctx));
}

void run_warn_bundle_unwritten(int r) {
    if (r < 0)
        fprintf(stderr, "pvisor run: warning: cannot write the Run Bundle: %s\n", strerror(-r));
}

int run_finish(struct run_context *ctx, int r, const struct exec_result *res) {
    char msg[256];
    if (r == -EINTR && ctx->start_interrupted)
        return run_interrupted(ctx, ctx->start_interrupted);
    run_probe_collect(ctx);
    if (r == -EPERM && ctx->opts->strict)
        return run_fail_setup(ctx, "--strict: a requested dimension cannot be enforced here");
    if (r < 0) {
        snprintf(msg, sizeof msg, "cannot start the command: %s", strerror(-r));
        return run_fail_setup(ctx, msg);
    }

    int status = exec_exit_status(res);
    struct timespec ended;
    clock_gettime(CLOCK_REALTIME, &ended);
    if (res->chdir_errno) {
        snprintf(msg, sizeof msg, "cannot enter the working directory %s: %s", ctx->cwd, strerror(res->chdir_errno));
        return run_fail_setup(ctx, msg);
    }
    if (res->exec_errno) {
        /* the command's name is the caller's bytes: escaped for the terminal */
        _cleanup_free_ char *shown = term_escape(ctx->opts->cmd_argv[0]);
        /* A command the host has where the sandbox shows nothing (a
         * script in /tmp, whose /tmp is the sandbox's own): "command not
         * found" for a file the user can see */
        _cleanup_free_ char *host = res->exec_errno == ENOENT && policy_wants_sandbox(ctx->opts)
                                        ? find_in_path(ctx->opts->cmd_argv[0], ctx->cwd)
                                        : NULL;
        _cleanup_free_ char *real = host && access(host, X_OK) == 0 ? realpath(host, NULL) : NULL;
        /* in the workspace or HOME the sandbox shows it (HOME's view: but
         * for its credential locations): what it did not find is its #!
         * interpreter, warned of before it ran */
        const char *h = getenv("HOME");
        _cleanup_free_ char *home = real && h && h[0] == '/' ? realpath(h, NULL) : NULL;
        bool shown_there = real && ((ctx->workspace && path_within(real, ctx->workspace)) ||
                                    (home && strcmp(home, "/") != 0 && path_within(real, home)));
        _cleanup_free_ char *host_shown = real && !shown_there ? term_escape(host) : NULL;
        if (host_shown)
            fprintf(stderr,
                    "pvisor run: %s: not found in the sandbox, although the host has it (%s): the sandbox does not "
                    "show that directory (it shows the workspace, HOME's view, the system's directories and the "
                    "command's toolchain; /tmp is its own); grant it with '--access ro:%s', or put it in the "
                    "workspace\n",
                    shown ? shown : "?", host_shown, host_shown);
        else
            fprintf(stderr, "pvisor run: %s: %s\n", shown ? shown : "?",
                    res->exec_errno == ENOENT ? "command not found" : strerror(res->exec_errno));
        bundle_set_string(ctx->bundle, "state", "exec_failed");
        snprintf(msg, sizeof msg, "cannot execute %s: %s", ctx->opts->cmd_argv[0], strerror(res->exec_errno));
        bundle_add_warning(ctx->bundle, msg);
    } else {
        bundle_set_string(ctx->bundle, "state", "finished");
    }
    /* A command that exits by itself on --timeout's SIGTERM (many do, some
     * with 0) would pass for one that finished: `pvisor run ... && pvisor
     * apply` applied a run cut short.  124, as timeout(1) exits; killed by
     * the signal, it is 128+N as ever. */
    bool exited_on_timeout = res->timed_out && !res->exec_errno && WIFEXITED(res->wait_status);
    if (exited_on_timeout)
        status = 124;
    if (res->timed_out) {
        if (exited_on_timeout)
            snprintf(msg, sizeof msg,
                     "the run's --timeout of %llu s expired; the command was terminated (it exited with status %d "
                     "on the SIGTERM: pvisor exits 124, as timeout(1) does)",
                     (unsigned long long)(ctx->opts->timeout_ms / 1000), WEXITSTATUS(res->wait_status));
        else
            snprintf(msg, sizeof msg, "the run's --timeout of %llu s expired; the command was terminated",
                     (unsigned long long)(ctx->opts->timeout_ms / 1000));
        bundle_add_warning(ctx->bundle, msg);
        /* otherwise the command just stops, its exit status (143, 137) the
         * only sign of why */
        fprintf(stderr, "pvisor run: %s\n", msg);
    }
    if (res->watch_errno) {
        snprintf(msg, sizeof msg,
                 "pvisor could no longer wait for the command (%s) and ended the run: the command was killed "
                 "unless it had exited",
                 strerror(res->watch_errno));
        bundle_add_warning(ctx->bundle, msg);
        fprintf(stderr, "pvisor run: %s\n", msg);
    }
    /* A SIGINT, SIGTERM or SIGHUP sent to pvisor (Ctrl-C, a CI job's
     * cancel) that the command exited on by itself: the command decides
     * the exit status, 0 included, but the run was cut short, and nothing
     * said so (the Bundle, status and the review showed a run that
     * finished). */
    if (res->interrupted_by && !res->timed_out && !res->exec_errno && WIFEXITED(res->wait_status)) {
        snprintf(msg, sizeof msg,
                 "the run was interrupted: pvisor was sent SIG%s and forwarded it; the command exited with status %d "
                 "on it",
                 sigabbrev_np(res->interrupted_by), WEXITSTATUS(res->wait_status));
        bundle_add_warning(ctx->bundle, msg);
        fprintf(stderr, "pvisor run: %s (pvisor ends by SIG%s: exit status %d)\n", msg,
                sigabbrev_np(res->interrupted_by), 128 + res->interrupted_by);
    }
    /* Whatever the command exited with on it, 0 included, pvisor was asked
     * to stop: it ends by the same signal (cmd_run), so that `pvisor run
     * ... && pvisor apply` or a script's next line does not apply a run
     * cut short. */
    if (res->interrupted_by && !res->exec_errno) {
        ctx->end_signal = res->interrupted_by;
        status = 128 + res->interrupted_by;
    }
    if (res->escalated)
        bundle_add_warning(ctx->bundle, "the command did not stop after a forwarded termination signal and was killed");
    if (res->killed_descendants > 0) {
        snprintf(msg, sizeof msg, "%d leftover process(es) killed after the command exited", res->killed_descendants);
        bundle_add_warning(ctx->bundle, msg);
    }
    bundle_set_exit(ctx->bundle, res->exec_errno ? (status << 8) : res->wait_status, status, &ended);
    json_object_set_new(json_object_get(ctx->bundle, "exit"), "timed_out", json_boolean(res->timed_out));
    json_object_set_new(json_object_get(ctx->bundle, "exit"), "interrupted_by",
                        res->interrupted_by ? json_string(sigabbrev_np(res->interrupted_by)) : json_null());
    json_object_set_new(json_object_get(ctx->bundle, "exit"), "leftovers_killed",
                        json_integer(res->killed_descendants > 0 ? res->killed_descendants : 0));
    PV_MARK("E_bundle0");
    r = run_write_bundle(ctx);
    PV_MARK("E_bundle1");
    run_warn_bundle_unwritten(r);
    return status;
}

int run_kill_grace_ms(void) {
    /* PVISOR_KILL_GRACE_MS exists for tests; bounded, default 10 s. */
    const char *e = getenv("PVISOR_KILL_GRACE_MS");
    uint64_t v;
    if (e && parse_size(e, 0, 600000, &v) == 0)
        return (int)v;
    return 10000;
}

void run_probe_into_bundle(json_t *bundle) {
    struct host_probe p;
    if (host_probe_run(&p) < 0) {
        bundle_add_warning(bundle, "host feature probes failed; kernel_features is empty");
        return;
    }
    json_t *j = probe_to_json(&p);
    if (j)
        bundle_set_json(bundle, "kernel_features", j);
}

/* The probes take a millisecond or two (a child that tries namespaces,
 * PATH lookups): they run in a child of their own while the stage and the
 * sandbox are set up.  The child exits as soon as its result is in the
 * pipe: while it lives, every page the supervisor writes is first copied
 * (fork's copy-on-write), and the planning and the views write many.  The
 * run's wait for its command (exec_run, a subreaper's waitpid(-1)) may
 * reap it first: run_probe_collect then takes a whole JSON document as the
 * sign that it finished. */
void run_probe_start(struct run_context *ctx) {
    int p[2];
    ctx->probe_fd = -1;
    if (pipe2(p, O_CLOEXEC) < 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[0]);
        struct host_probe hp;
        json_t *j = host_probe_run(&hp) == 0 ? probe_to_json(&hp) : NULL;
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        bool ok = s != NULL;
        for (size_t off = 0, len = s ? strlen(s) : 0; off < len;) {
            ssize_t n = write(p[1], s + off, len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                ok = false;
                break;
            }
            off += (size_t)n;
        }
        _exit(ok ? 0 : 1);
    }
    close(p[1]);
    ctx->probe_fd = p[0];
    ctx->probe_pid = pid;
}

void run_probe_in_process(struct run_context *ctx) {
    struct host_probe *p = malloc(sizeof *p);
    if (!p || host_probe_run_in_process(p) < 0) {
        free(p);
        bundle_add_warning(ctx->bundle, "host feature probes failed; kernel_features is empty");
        return;
    }
    json_t *j = probe_to_json(p);
    if (j)
        bundle_set_json(ctx->bundle, "kernel_features", j);
    ctx->probe = p;
}

void run_probe_namespaces_made(struct run_context *ctx, const struct probe_run_namespaces *made) {
    if (!ctx->probe)
        return;
    probe_namespaces_made_by_run(ctx->probe, made);
    json_t *j = probe_to_json(ctx->probe);
    if (j)
        bundle_set_json(ctx->bundle, "kernel_features", j);
}

void run_probe_collect(struct run_context *ctx) {
    if (ctx->probe_fd < 0)
        return;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 16384);
            if (!nb)
                break;
            buf = nb;
        }
        ssize_t n = read(ctx->probe_fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(ctx->probe_fd);
    ctx->probe_fd = -1;
    /* The pipe's end: the child has exited (or been killed).  Reaped
     * already when the run's wait came first (ECHILD): its status is lost,
     * and a whole document (a cut one never parses) says it finished. */
    int st = 0;
    pid_t w;
    while ((w = waitpid(ctx->probe_pid, &st, 0)) < 0 && errno == EINTR)
        ;
    bool exited_ok = w == ctx->probe_pid ? WIFEXITED(st) && WEXITSTATUS(st) == 0 : errno == ECHILD;
    json_error_t e;
    json_t *j = buf && len && exited_ok ? json_loadb(buf, len, 0, &e) : NULL;
    if (j)
        bundle_set_json(ctx->bundle, "kernel_features", j);
    else
        bundle_add_warning(ctx->bundle, "host feature probes failed; kernel_features is empty");
}

/* While the command runs (after_exec), or when it could not be exec'd
 * (before_reap): the probes are in before the end of the run kills what is
 * left of the supervisor's children. */
static void probe_after_exec(pid_t child, void *userdata) {
    (void)child;
    run_probe_collect(userdata);
}

static void probe_before_reap(void *userdata) {
    run_probe_collect(userdata);
}

int run_execute(struct run_context *ctx) {
    record_plain_dimensions(ctx->bundle);
    /* With --limit the supervisor may move itself into a cgroup leaf and
     * enable controllers in the cgroup it leaves, which cgroup v2 refuses
     * while another process (the probe child) is still in it: probe first. */
    if (policy_wants_sandbox(ctx->opts)) {
        run_probe_in_process(ctx);
    } else {
        if (!policy_has_limits(&ctx->opts->limits))
            run_probe_start(ctx);
        if (ctx->probe_fd < 0)
            run_probe_into_bundle(ctx->bundle);
    }

#ifdef PVISOR_HAVE_OVERLAY
    if (policy_wants_stage(ctx->opts))
        return run_execute_staged(ctx, run_command);
#endif
    struct exec_spec spec = {
        .argv = ctx->opts->cmd_argv,
        .kill_grace_ms = run_kill_grace_ms(),
        .timeout_ms = ctx->opts->timeout_ms,
        .after_exec = probe_after_exec,
        .before_reap = probe_before_reap,
        .userdata = ctx,
    };
    struct exec_result res;
    int r = run_command(ctx, &spec, &res);
    return run_finish(ctx, r, &res);
}
