/* cmd_apply.c: `pvisor apply [RUN|--stage DIR] [--path P]... [--dry-run]
 * [--keep-special-modes] [--expect ID]`: write a sealed stage into its workspace
 * (lifecycle/apply.c does the work; docs/lifecycle.md documents it). */
#include "cli/cli.h"
#include "cli/runs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_MIN_OPS 100
#define APPLY_INTENT "apply-intent" /* lifecycle.h: LC_APPLY_INTENT */

/* A SIGINT, SIGTERM or SIGHUP while apply writes: say what it left, then
 * die of the signal as before (its exit status is the shell's 130/143).
 * The intent exists from before the first write until the apply is
 * complete (apply.c), so it alone tells "half done: apply again completes
 * it" from "nothing written" or "complete"; a progress step (counted
 * after the intent is written) tells those two apart.  The messages are
 * made before the handler is installed: it only reads, stats and writes. */
static struct {
    int stage_fd;
    volatile sig_atomic_t wrote;    /* a step of the plan was taken */
    volatile sig_atomic_t mid_line; /* a progress line without its \n */
    char *pending, *done, *nothing; /* the messages */
} intr = {.stage_fd = -1};

/* util's write_all: write(2) only, async-signal-safe */
static void say(const char *s) {
    (void)write_all(STDERR_FILENO, s, strlen(s));
}

static void on_interrupt(int sig) {
    int saved = errno;
    struct stat st;
    bool intent = intr.stage_fd >= 0 && fstatat(intr.stage_fd, APPLY_INTENT, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (intr.mid_line)
        say("\n");
    say(intent ? intr.pending : intr.wrote ? intr.done : intr.nothing);
    errno = saved;
    raise(sig); /* SA_RESETHAND | SA_NODEFER: the default action, now */
}

static const int intr_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* Install on_interrupt for the apply of stage (its display name: shown)
 * into the workspace ws (display name); false when it could not be (the
 * apply goes on without it). */
static bool interrupt_arm(const char *stage, const char *shown_stage, const char *shown_ws) {
    intr.pending =
        str_printf("pvisor apply: interrupted: the apply of the stage %s into %s is half done (the workspace "
                   "holds part of it); 'pvisor apply --stage %s' completes it, or 'pvisor drop --force --stage "
                   "%s' keeps what it wrote and discards the rest\n",
                   shown_stage, shown_ws, shown_stage, shown_stage);
    intr.done = str_printf("pvisor apply: interrupted, but only after the apply had completed: the stage %s is written "
                           "into %s\n",
                           shown_stage, shown_ws);
    intr.nothing =
        str_printf("pvisor apply: interrupted before anything was written: nothing was written into %s\n", shown_ws);
    intr.stage_fd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!intr.pending || !intr.done || !intr.nothing || intr.stage_fd < 0)
        return false;
    struct sigaction sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESETHAND | SA_NODEFER};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < ARRAY_SIZE(intr_signals); i++) {
        struct sigaction old;
        /* one ignored (nohup, a background job's SIGINT) stays ignored */
        if (sigaction(intr_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(intr_signals[i], &sa, NULL);
    }
    return true;
}

static void interrupt_disarm(void) {
    for (size_t i = 0; i < ARRAY_SIZE(intr_signals); i++) {
        struct sigaction old;
        if (sigaction(intr_signals[i], NULL, &old) == 0 && old.sa_handler == on_interrupt)
            signal(intr_signals[i], SIG_DFL);
    }
    if (intr.stage_fd >= 0)
        close(intr.stage_fd);
    intr.stage_fd = -1;
    free(intr.pending);
    free(intr.done);
    free(intr.nothing);
    intr.pending = intr.done = intr.nothing = NULL;
}

struct progress {
    bool tty;
    struct timespec last;
    bool listed; /* the dry run's header is out */
};

static void on_progress(size_t done, size_t total, void *ud) {
    struct progress *p = ud;
    if (done > 0)
        intr.wrote = 1;
    if (!p->tty || total < PROGRESS_MIN_OPS)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - p->last.tv_sec) * 1000 + (now.tv_nsec - p->last.tv_nsec) / 1000000;
    if (done != total && ms < 100)
        return;
    p->last = now;
    intr.mid_line = 0;
    fprintf(stderr, "\rpvisor apply: %zu/%zu operations%s", done, total, done == total ? "\n" : "");
    intr.mid_line = done != total;
}

static void on_op(const char *action, const char *path, void *ud) {
    struct progress *p = ud;
    /* with the first operation: a dry run refused before it has none */
    if (!p->listed)
        printf("Would apply to the workspace (dry run, nothing written):\n");
    p->listed = true;
    _cleanup_free_ char *d = lc_display_name(path); /* agent-chosen bytes */
    printf("  %-8s %s\n", action, d ? d : "?");
}

/* "./a/b/" -> "a/b"; "/ws/a" -> "a" (inside the workspace only). */
static int normalize_path(const char *in, const char *ws, char **ret) {
    const char *p = in;
    size_t wl = strlen(ws);
    if (p[0] == '/') {
        if (strncmp(p, ws, wl) != 0 || (p[wl] != '/' && p[wl] != '\0'))
            return -EXDEV;
        p += wl;
    }
    while (p[0] == '/' || (p[0] == '.' && p[1] == '/'))
        p += p[0] == '/' ? 1 : 2;
    char *s = strdup(p);
    if (!s)
        return -ENOMEM;
    size_t l = strlen(s);
    while (l > 0 && s[l - 1] == '/')
        s[--l] = '\0';
    if (!lc_path_valid(s)) {
        free(s);
        return -EINVAL;
    }
    *ret = s;
    return 0;
}

/* lc_stage_open() failed with r: is it the workspace that fails to open
 * that way, while the stage directory itself opens? */
static bool workspace_fails(const char *stage, const char *ws, int r) {
    _cleanup_close_ int sd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sd < 0)
        return false;
    _cleanup_close_ int wd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return wd < 0 && errno == -r;
}

int cmd_apply(int argc, char **argv) {
    const char *run = NULL, *stage_dir = NULL;
    char *expect = NULL;
    bool dry_run = false, keep_special = false;
    const char **raw_paths = calloc((size_t)argc + 1, sizeof *raw_paths);
    if (!raw_paths)
        return cli_error(PV_EXIT_FAILURE, "apply", "out of memory");
    size_t n_paths = 0;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            rc = cli_print_help(cli_find_command("apply"));
        else if (strcmp(a, "--dry-run") == 0 || strcmp(a, "-n") == 0)
            dry_run = true;
        else if (strcmp(a, "--keep-special-modes") == 0)
            keep_special = true;
        else if (strcmp(a, "--stage") == 0) {
            int t = cli_take_value("apply", argc, argv, &i, &stage_dir);
            if (t)
                rc = t;
        } else if (strcmp(a, "--expect") == 0) {
            /* the whole ID, never a prefix: one a stage could be made to
             * share with another is no binding (docs/lifecycle.md) */
            if (i + 1 >= argc)
                rc = cli_usage_error("apply", "%s needs a value", a);
            else if (expect)
                rc = cli_usage_error("apply", "--expect is given once");
            else if (!lc_changeset_id_valid(argv[i + 1]))
                rc = cli_usage_error("apply",
                                     "--expect '%s' is not a changeset ID (" LC_CHANGESET_ID_LEN_TEXT
                                     " hex digits, as 'pvisor status --review' prints it)",
                                     argv[i + 1]);
            else
                expect = argv[++i];
        } else if (strcmp(a, "--path") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0')
                rc = cli_usage_error("apply", "%s needs a value", a);
            else
                raw_paths[n_paths++] = argv[++i];
        } else if (a[0] == '-')
            rc = cli_usage_error("apply", "unknown option '%s'", a);
        else if (run)
            rc = cli_usage_error("apply", "takes at most one RUN");
        else
            run = a;
    }
    if (rc < 0 && run && stage_dir)
        rc = cli_usage_error("apply", "give a RUN or --stage DIR, not both");
    if (rc >= 0) {
        free(raw_paths);
        return rc;
    }
    if (run && lc_cli_arg_is_stage(run)) {
        stage_dir = run;
        run = NULL;
    }

    _cleanup_free_ char *stage = NULL, *id = NULL;
    json_t *bundle = NULL;
    rc = lc_cli_target("apply", run, stage_dir, &stage, &id, &bundle);
    if (rc != 0) {
        free(raw_paths);
        return rc;
    }
    /* The stage names its workspace (meta.json); the run's Bundle must agree. */
    rc = -1;
    _cleanup_free_ char *ws_path = NULL, *ws_raw = NULL;
    {
        struct lc_stage *st = NULL;
        int r = lc_stage_open(stage, &st);
        if (r == 0) {
            ws_path = lc_display_name(st->workspace);
            ws_raw = strdup(st->workspace);
        }
        const char *bws = json_string_value(json_object_get(bundle, "workspace"));
        _cleanup_free_ char *cwd = r == 0 && !bundle ? getcwd(NULL, 0) : NULL;
        if (r == 0 && !bundle && path_overlaps(stage, st->workspace))
            /* A stage inside the workspace it names (or holding it): pvisor
             * never makes one (run refuses such a --stage); an agent's
             * forged stage names an ancestor of its own workspace, or /,
             * which holds the current directory too. */
            rc = cli_error(PV_EXIT_FAILURE, "apply",
                           "refused: the stage %s and the workspace %s it names contain each other, and no run's "
                           "Bundle names the stage (a directory an agent may have made)",
                           stage, st->workspace);
        else if (r == 0 && !bundle && (!cwd || !path_within(cwd, st->workspace)))
            /* Only the stage's own meta.json names the workspace: a stage
             * made by fork, or a directory the agent forged. */
            rc = cli_error(PV_EXIT_FAILURE, "apply",
                           "refused: no run's Bundle names the stage %s (made by fork, or not by pvisor), "
                           "so only the stage itself says that its workspace is %s; to apply it there, run apply "
                           "from inside that workspace",
                           stage, st->workspace);
        else if (r == 0 && bws && strcmp(bws, st->workspace) != 0)
            rc = cli_error(PV_EXIT_FAILURE, "apply",
                           "refused: the stage %s names the workspace %s but its run %s ran in %s", stage,
                           st->workspace, id, bws);
        else if (r == -ENOENT && bws && access(stage, F_OK) == 0) {
            /* the stage is there: its workspace is what is gone */
            _cleanup_free_ char *e = lc_display_name(bws);
            rc = cli_error(PV_EXIT_FAILURE, "apply",
                           "the workspace %s of the stage %s is gone (moved or removed since the run?); nothing was "
                           "written: put it back at that path to apply the stage",
                           e ? e : "?", stage);
        } else if (r < 0 && r != -ENOENT && bws && workspace_fails(stage, bws, r)) {
            /* the stage opens: its workspace is what failed (a file put
             * at its path, a directory made unreadable), which read as
             * "cannot open the stage S: Not a directory" */
            _cleanup_free_ char *e = lc_display_name(bws);
            rc = cli_error(PV_EXIT_FAILURE, "apply",
                           "cannot open the workspace %s of the stage %s: %s%s; nothing was written", e ? e : "?",
                           stage, strerror(-r), r == -ENOTDIR ? " (replaced by a file since the run?)" : "");
        } else if (r < 0 && r != -ENOENT)
            rc = cli_error(PV_EXIT_FAILURE, "apply", "cannot open the stage %s: %s", stage,
                           r == -EINVAL ? "not a pvisor stage" : strerror(-r));
        else if (r == -ENOENT)
            rc = cli_error(PV_EXIT_FAILURE, "apply", "cannot open the stage %s or its workspace: %s", stage,
                           strerror(-r));
        lc_stage_free(st);
        json_decref(bundle);
        if (rc >= 0) {
            free(raw_paths);
            return rc;
        }
    }
    /* --path values are workspace-relative (or absolute inside it) */
    char **paths = NULL;
    if (n_paths) {
        struct lc_stage *st = NULL;
        int r = lc_stage_open(stage, &st);
        if (r < 0) {
            free(raw_paths);
            return cli_error(PV_EXIT_FAILURE, "apply", "cannot open the stage %s: %s", stage, strerror(-r));
        }
        paths = calloc(n_paths + 1, sizeof *paths);
        rc = -1;
        for (size_t i = 0; paths && i < n_paths && rc < 0; i++) {
            r = normalize_path(raw_paths[i], st->workspace, &paths[i]);
            if (r == -EXDEV)
                rc = cli_usage_error("apply", "--path %s is outside the workspace %s", raw_paths[i], st->workspace);
            else if (r < 0)
                rc = cli_usage_error("apply", "--path '%s' is not a path inside the workspace", raw_paths[i]);
        }
        lc_stage_free(st);
        if (!paths)
            rc = cli_error(PV_EXIT_FAILURE, "apply", "out of memory");
        if (rc >= 0) {
            for (size_t i = 0; paths && i < n_paths; i++)
                free(paths[i]);
            free(paths);
            free(raw_paths);
            return rc;
        }
    }
    free(raw_paths);

    struct progress prog = {.tty = isatty(STDERR_FILENO) == 1};
    clock_gettime(CLOCK_MONOTONIC, &prog.last);
    const char *delay = getenv("PVISOR_TEST_APPLY_DELAY_US");
    uint64_t delay_us = 0;
    if (delay && parse_size(delay, 0, 10000000, &delay_us) < 0)
        delay_us = 0;
    struct lc_apply_opts o = {
        .paths = (const char *const *)paths,
        .dry_run = dry_run,
        .keep_special_modes = keep_special,
        .progress = on_progress,
        .on_op = dry_run ? on_op : NULL,
        .userdata = &prog,
        .expect_id = expect,
        .test_delay_us = (unsigned)delay_us,
        .test_named_temps = getenv("PVISOR_TEST_APPLY_NAMED_TEMPS") != NULL,
    };
    /* Another apply into this workspace (or one around or inside it) going
     * on now: both would pass their conflict checks, then write over each
     * other; and one cut short must be completed first (pending_apply.c). */
    _cleanup_(ws_lock_release) struct ws_lock lock = {0};
    if (!dry_run && ws_raw && ws_lock_apply(ws_raw, &lock) == -EWOULDBLOCK) {
        for (size_t i = 0; paths && i < n_paths; i++)
            free(paths[i]);
        free(paths);
        return cli_error(PV_EXIT_FAILURE, "apply",
                         "refused: another 'pvisor apply' is writing into %s (or a directory that holds it, or one "
                         "inside it); run this apply again when it has finished. Nothing was written",
                         ws_raw);
    }
    _cleanup_free_ char *other = NULL, *other_ws = NULL;
    if (ws_raw && pending_apply_find(ws_raw, stage, &other, &other_ws) > 0) {
        for (size_t i = 0; paths && i < n_paths; i++)
            free(paths[i]);
        free(paths);
        return cli_error(PV_EXIT_FAILURE, "apply",
                         "refused: an apply of the stage %s into %s was interrupted, and that workspace is "
                         "half-written; finish it with 'pvisor apply --stage %s' first, or keep what it wrote and "
                         "discard the rest with 'pvisor drop --force --stage %s'. Nothing was written",
                         other, other_ws, other, other);
    }
    _cleanup_free_ char *shown_stage = lc_display_name(stage);
    if (!dry_run && ws_raw)
        (void)interrupt_arm(stage, shown_stage ? shown_stage : "?", ws_path ? ws_path : "?");
    if (!dry_run && ws_raw) {
        (void)pending_apply_record(stage, ws_raw);
        (void)agent_written_add(ws_raw); /* its links are the agent's from now on */
    }
    struct lc_apply_report rep;
    bool was_pending = lc_apply_pending(stage);
    int r = lc_apply(stage, &o, &rep);
    if (lc_cli_own_files_override(r)) { /* resumes what the first try wrote */
        /* what the first try completed (deletions, directories, renamed
         * files) is in its final state for the second, which does not
         * count it again: the summary adds both */
        size_t n_written = rep.n_written, n_deleted = rep.n_deleted, n_dirs = rep.n_dirs;
        uint64_t bytes_written = rep.bytes_written;
        lc_apply_report_clear(&rep);
        r = lc_apply(stage, &o, &rep);
        rep.resumed = rep.resumed && was_pending;
        rep.n_written += n_written;
        rep.n_deleted += n_deleted;
        rep.n_dirs += n_dirs;
        rep.bytes_written += bytes_written;
    }
    if (!dry_run)
        pending_apply_clear(stage);
    interrupt_disarm();
    for (size_t i = 0; paths && i < n_paths; i++)
        free(paths[i]);
    free(paths);
    cli_flush_stdout();

    if (r == -EEXIST || r == -ENOENT) {
        if (r == -ENOENT)
            fprintf(stderr, "pvisor apply: refused: --path matches no staged change; nothing was written:\n");
        else
            fprintf(stderr,
                    "pvisor apply: refused: %zu conflict%s between the stage and the workspace; nothing was written:\n",
                    rep.n_conflicts, rep.n_conflicts == 1 ? "" : "s");
        for (size_t i = 0; i < rep.n_conflicts; i++) {
            _cleanup_free_ char *d = lc_display_name(rep.conflict_paths[i]);
            fprintf(stderr, "  %s: %s\n", d ? d : "?", rep.conflict_why[i]);
        }
        /* from a subdirectory, a --path relative to it (as git takes one)
         * names another path */
        _cleanup_free_ char *sub = r == -ENOENT && ws_raw ? lc_cli_cwd_below(ws_raw) : NULL;
        _cleanup_free_ char *ew = sub ? lc_display_name(ws_raw) : NULL, *es = sub ? lc_display_name(sub) : NULL;
        if (sub)
            fprintf(stderr,
                    "--path is relative to the top of the workspace, %s, not to this directory: from here, "
                    "write %s/PATH\n",
                    ew ? ew : "?", es ? es : "?");
        /* completing an interrupted apply: its intent decides the paths
         * (--path is not taken) and a plain drop refuses a pending one */
        if (r == -EEXIST && rep.reviewed && rep.reviewed_id[0] && rep.changeset_id[0] &&
            strcmp(rep.reviewed_id, rep.changeset_id) != 0)
            fprintf(stderr,
                    "The stage's changes are also not the changeset %s its last review showed (they are %s now): "
                    "review them again once the conflicts are resolved.\n",
                    rep.reviewed_id, rep.changeset_id);
        if (r == -EEXIST && rep.resumed)
            fprintf(stderr, "Put each of those paths back to its version before the apply or to the stage's "
                            "(compare with 'pvisor diff') and run 'pvisor apply' again to complete it, or keep "
                            "what it wrote and discard the rest with 'pvisor drop --force'.\n");
        else if (r == -EEXIST)
            fprintf(stderr, "Restore those paths (compare with 'pvisor diff'), apply a subset with --path, "
                            "or discard the stage with 'pvisor drop'.\n");
        lc_apply_report_clear(&rep);
        return PV_EXIT_FAILURE;
    }
    if (r < 0) {
        int st = PV_EXIT_FAILURE;
        switch (r) {
        case -EKEYREJECTED:
            if (!rep.changeset_id[0]) {
                /* lc_changeset_id's check: a file changed while it was
                 * read, under the lock: not pvisor's doing */
                cli_error(st, "apply",
                          "refused: a file of the stage %s changed while apply read it to check --expect "
                          "(something other than pvisor writes the stage); nothing was written",
                          stage);
                break;
            }
            cli_error(st, "apply",
                      "refused: the changes of the stage %s are not the changeset %s that --expect names: they "
                      "are changeset %s now (the stage was written since that review: a run on it, a restore; or "
                      "the workspace changed under a staged path; or the review was not run by the user who "
                      "applies: root's ID also covers the owners root's apply gives). Nothing was written. Review "
                      "them again ('pvisor status --review', 'pvisor diff') and apply the ID that review prints",
                      stage, expect, rep.changeset_id);
            break;
        case -EKEYREVOKED:
            if (rep.reviewed_other_user)
                cli_error(st, "apply",
                          "refused: the last review of the stage %s was run by %s, whose changeset ID %s the "
                          "owners root's apply gives, so it does not vouch for this apply. Nothing was written. "
                          "Review it again as the user who applies ('pvisor status --review'), then apply",
                          stage, geteuid() == 0 ? "another user than root" : "root",
                          geteuid() == 0 ? "leaves out" : "covers");
            else if (!rep.reviewed_id[0])
                cli_error(st, "apply",
                          "refused: the last review of the stage %s could not name its changeset (the stage "
                          "changed while it was read, or a file of it could not be read), or its record "
                          "%s/" LC_REVIEWED_NAME " is unreadable. Nothing was written. Review it again ('pvisor "
                          "status --review', 'pvisor diff'), then apply, or apply with --expect ID the changeset "
                          "a review showed",
                          stage, stage);
            else if (!rep.changeset_id[0])
                cli_error(st, "apply",
                          "refused: a file of the stage %s changed while apply read it to compare it with its last "
                          "review (something other than pvisor writes the stage); nothing was written",
                          stage);
            else
                cli_error(st, "apply",
                          "refused: the stage %s changed since its last review, which showed changeset %s: it is "
                          "changeset %s now (a run on the stage or a restore since that review, or the workspace "
                          "changed under a staged path). Nothing was written. Review it again ('pvisor status "
                          "--review', or 'pvisor diff' on a terminal or with --stat: into a pipe it shows no ID, "
                          "and records none), then apply; or apply it as it is now with 'pvisor apply "
                          "--stage %s --expect %s'",
                          stage, rep.reviewed_id, rep.changeset_id, stage, rep.changeset_id);
            break;
        case -EINPROGRESS:
            cli_error(st, "apply",
                      "refused: an interrupted apply of the stage %s is pending; completing it writes what that "
                      "apply recorded, for which --expect cannot vouch. Nothing was written. Complete it with "
                      "'pvisor apply --stage %s' (without --expect), or keep what it wrote and discard the rest "
                      "with 'pvisor drop --force --stage %s'",
                      stage, stage, stage);
            break;
        case -EBUSY:
            /* the stage's lock; an EBUSY at a path is the workspace's (a
             * mount point the changeset's check did not see, mounted
             * since the review) */
            if (rep.failed_path)
                goto failed;
            /* what holds it: "its run is still going, or another apply
             * holds it" was said of a checkpoint, a restore, a fork too */
            st = runs_stage_busy_error("apply", stage, "wait for the run to end, then review the stage and apply it");
            break;
        case -ESTALE: {
            _cleanup_free_ char *cp = NULL;
            if (lc_restore_interrupted(stage, &cp))
                cli_error(st, "apply",
                          "refused: a 'pvisor restore' of the stage %s was interrupted, so it is not sealed; "
                          "'pvisor restore %s %s' completes it, then apply it (do not drop it: that "
                          "discards its checkpoints too)",
                          stage, cp ? cp : "NAME", stage);
            else
                cli_error(st, "apply",
                          "refused: the stage %s was interrupted before it was sealed (its run died); "
                          "it cannot be applied. Inspect it with 'pvisor status --review', then "
                          "'pvisor drop' it",
                          stage);
            break;
        }
        case -EALREADY:
            cli_error(st, "apply", "refused: the stage %s was already %s", stage, stage_done_phrase(stage));
            break;
        case -ECANCELED:
            cli_error(st, "apply",
                      "stopped: a file in the workspace changed while apply was writing. "
                      "Run 'pvisor apply' again: it completes the apply or names the conflict");
            break;
        case -ENODATA: cli_error(st, "apply", "the stage %s holds no changes (no run sealed it)", stage); break;
        case -EPERM:
            cli_error(st, "apply",
                      "refused: the stage %s is another user's, or others may write in it: they could change it "
                      "after your review; nothing was written (apply a stage of your own)",
                      stage);
            break;
        case -ELOOP:
        case -ENAMETOOLONG:
            if (rep.beyond_bounds) {
                cli_error(st, "apply", "cannot read the stage %s: %s. Nothing was written to the workspace", stage,
                          lc_cli_bound_reason(r, rep.failed_path));
                lc_cli_bound_hint("apply", rep.failed_path, rep.beyond_bounds_deleted, stage);
                break;
            }
            goto failed;
        case -ENOTEMPTY: {
            _cleanup_free_ char *d = rep.failed_path ? lc_display_name(rep.failed_path) : NULL;
            cli_error(st, "apply",
                      "stopped: the directory %s, which the stage deletes, has new files in the "
                      "workspace; move them away and run 'pvisor apply' again to complete the apply",
                      d ? d : "?");
            break;
        }
        case -ENOSPC:
            /* check_room() fills both when it checked, also when the plan
             * fits: a later ENOSPC (the stage's own file system full when
             * apply writes its intent there) was told as the workspace's
             * too small, "need 3 MB, 81 GB available" */
            if (rep.room_need > rep.room_avail && !lc_apply_pending(stage)) {
                cli_error(st, "apply",
                          "refused: the staged files need %llu bytes (beyond what apply deletes or replaces), "
                          "the workspace's file system has %llu available (hard-linked files are written once "
                          "per name); nothing was written. Free "
                          "space, apply a subset with --path, or 'pvisor drop' the stage",
                          (unsigned long long)rep.room_need, (unsigned long long)rep.room_avail);
                break;
            }
            {
                /* the workspace's file system filled while apply wrote, or
                 * the stage's, where apply records its intent first: say
                 * what each has left, not only strerror */
                bool pending = !dry_run && lc_apply_pending(stage);
                struct statvfs ssv, wsv;
                if (ws_raw && statvfs(stage, &ssv) == 0 && statvfs(ws_raw, &wsv) == 0) {
                    if (rep.failed_path) {
                        _cleanup_free_ char *d = lc_display_name(rep.failed_path);
                        fprintf(stderr, "pvisor apply: at %s:\n", d ? d : "?");
                    }
                    cli_error(st, "apply",
                              "failed: no space left: the workspace's file system has %llu bytes available, the "
                              "stage's (%s, where apply records its progress before it writes) %llu. %s: free space "
                              "and run 'pvisor apply' again%s",
                              (unsigned long long)wsv.f_bavail * wsv.f_frsize, shown_stage ? shown_stage : "?",
                              (unsigned long long)ssv.f_bavail * ssv.f_frsize,
                              pending ? "Part of it may be written" : "Nothing was written to the workspace",
                              pending ? ", it resumes the interrupted apply" : "");
                    break;
                }
            }
            __attribute__((fallthrough));
        default:
        failed:
            if (rep.failed_path) {
                _cleanup_free_ char *d = lc_display_name(rep.failed_path);
                fprintf(stderr, "pvisor apply: at %s:\n", d ? d : "?");
            }
            /* the intent exists from before the first write on (apply.c):
             * without one, nothing reached the workspace */
            cli_error(st, "apply", "failed: %s. %s", strerror(-r),
                      !dry_run && lc_apply_pending(stage)
                          ? "Part of it may be written: run 'pvisor apply' again, it resumes the interrupted apply"
                          : "Nothing was written to the workspace");
            lc_cli_unreadable_hint(r, stage, !dry_run);
        }
        lc_apply_report_clear(&rep);
        return st;
    }
    if (dry_run) {
        printf("%s", rep.resumed ? "(an interrupted apply would be resumed)\n" : "");
        if (expect)
            printf("Changeset %s: the one --expect named.\n", rep.changeset_id);
    } else {
        printf("Applied stage %s to %s%s: %zu written (%llu bytes), %zu deleted, %zu directories created.\n", stage,
               ws_path ? ws_path : "the workspace", rep.resumed ? " (resumed an interrupted apply)" : "", rep.n_written,
               (unsigned long long)rep.bytes_written, rep.n_deleted, rep.n_dirs);
        if (expect)
            printf("Changeset %s: the one --expect named.\n", rep.changeset_id);
    }
    if (rep.n_setid_dropped)
        fprintf(stderr, "pvisor apply: %s setuid/setgid bits on %zu file%s (--keep-special-modes keeps them)\n",
                dry_run ? "would drop" : "dropped", rep.n_setid_dropped, rep.n_setid_dropped == 1 ? "" : "s");
    if (rep.n_skipped_special)
        fprintf(stderr, "pvisor apply: %s %zu device node%s or socket%s (never applied)\n",
                dry_run ? "would skip" : "skipped", rep.n_skipped_special, rep.n_skipped_special == 1 ? "" : "s",
                rep.n_skipped_special == 1 ? "" : "s");
    lc_apply_report_clear(&rep);
    if (dry_run)
        return PV_EXIT_OK; /* its output lost: exit 1 (main) */
    return cli_report_written("apply", "the stage %s was applied to %s", stage, ws_path ? ws_path : "the workspace");
}
