/* cmd_fork.c: `pvisor fork [CHECKPOINT] NEW_STAGE [--run RUN|--stage DIR]`:
 * a new sealed stage from a checkpoint or from a sealed stage
 * (lifecycle/checkpoint.c); the source is not changed. */
#include "cli/cli.h"
#include "cli/runs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Does dir hold what an unfinished fork leaves (lc_fork: 'lock' first,
 * 'version' last), with no fork holding its lock now? */
static bool fork_cut_short(const char *dir) {
    _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (d < 0 || fstatat(d, "version", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
        return false;
    _cleanup_close_ int lock = openat(d, "lock", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (lock < 0 || fstat(lock, &st) < 0 || !S_ISREG(st.st_mode) || flock(lock, LOCK_SH | LOCK_NB) < 0)
        return false;
    return true;
}

/* Was the fork published at dir (lc_fork renames the built stage, with
 * its 'version', over an absent or empty directory)?  Asked after a
 * failure: one after the rename, in the flush of its parent, left it
 * there, complete. */
static bool fork_published(const char *dir) {
    _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    return d >= 0 && fstatat(d, "version", &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int cmd_fork(int argc, char **argv) {
    const char *run = NULL, *stage_dir = NULL, *pos[3] = {0};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return cli_print_help(cli_find_command("fork"));
        if (strcmp(a, "--stage") == 0 || strcmp(a, "--run") == 0) {
            int rc = cli_take_value("fork", argc, argv, &i, a[2] == 's' ? &stage_dir : &run);
            if (rc)
                return rc;
        } else if (a[0] == '-') {
            return cli_usage_error("fork", "unknown option '%s'", a);
        } else if (npos == 2) {
            return cli_usage_error("fork", "takes [CHECKPOINT] NEW_STAGE");
        } else {
            pos[npos++] = a;
        }
    }
    if (npos == 0)
        return cli_usage_error("fork", "where should the new stage go? (NEW_STAGE)");
    if (!*pos[npos - 1])
        return cli_usage_error("fork", "an empty NEW_STAGE names no directory");
    if (run && stage_dir)
        return cli_usage_error("fork", "give --run RUN or --stage DIR, not both");
    const char *checkpoint = npos == 2 ? pos[0] : NULL, *new_stage = pos[npos - 1];
    /* a usage error before the stage is looked up: it was reported after
     * the lookup's notes, or not at all when that failed (exit 1) */
    if (checkpoint && !lc_checkpoint_name_valid(checkpoint))
        return cli_usage_error("fork", "bad checkpoint name '%s' (letters, digits, '.', '_', '-'; at most 64)",
                               checkpoint);
    _cleanup_free_ char *stage = NULL, *id = NULL;
    int rc = lc_cli_target("fork", run, stage_dir, &stage, &id, NULL);
    if (rc != 0)
        return rc;
    /* Never inside the workspace (or holding it), as run refuses such a
     * --stage: apply takes a stage that no Bundle names, such as a fork,
     * only from a place an agent cannot have made (cmd_apply.c). */
    _cleanup_free_ char *dest = NULL;
    struct lc_stage *src = NULL;
    int r = path_abs_parent(new_stage, &dest);
    if (r < 0)
        return cli_error(PV_EXIT_FAILURE, "fork", "cannot use %s: %s", new_stage,
                         r == -EINVAL ? "name a directory" : strerror(-r));
    /* where it goes must be ours to write: otherwise EACCES would read as
     * an unreadable checkpoint (below) */
    _cleanup_free_ char *dest_parent = strdup(dest);
    if (!dest_parent)
        return cli_error(PV_EXIT_FAILURE, "fork", "out of memory");
    *strrchr(dest_parent, '/') = '\0';
    /* the parent, also when the new stage's directory exists: the fork
     * is built beside it and renamed over it (lc_fork) */
    const char *need = dest_parent[0] ? dest_parent : "/";
    if (access(need, W_OK | X_OK) < 0)
        return cli_error(PV_EXIT_FAILURE, "fork", "cannot create the new stage %s: %s", dest, strerror(errno));
    /* nor inside the stage it copies: in its upper/ the new directory was
     * an agent's change of that stage (review listed it, apply made it;
     * the copy of a tree into itself failed, and left it there) */
    _cleanup_free_ char *stage_real = realpath(stage, NULL);
    if (stage_real && path_within(dest, stage_real))
        return cli_error(PV_EXIT_FAILURE, "fork",
                         "refused: the new stage %s lies inside the stage %s it copies; choose a place outside it",
                         dest, stage_real);
    if (lc_stage_open(stage, &src) == 0 && path_overlaps(dest, src->workspace)) {
        rc = cli_error(PV_EXIT_FAILURE, "fork",
                       "refused: the new stage %s and the workspace %s must not contain each other; choose a "
                       "place outside the workspace",
                       dest, src->workspace);
        lc_stage_free(src);
        return rc;
    }
    lc_stage_free(src);
    /* hidden from later sandboxed runs (run_sandbox_home.c) before it exists:
     * recorded after the copy, a fork killed between the two was a stage
     * no record named (a path that never becomes a stage is passed over) */
    (void)stages_elsewhere_add(dest);
    r = lc_fork(stage, checkpoint, dest);
    if (lc_cli_own_files_override(r))
        r = lc_fork(stage, checkpoint, dest); /* a failed fork left nothing at dest */
    switch (r) {
    case 0:
        printf("Forked %s%s%s into the new sealed stage %s (use it with 'pvisor run --stage %s')\n", stage,
               checkpoint ? " at checkpoint " : "", checkpoint ? checkpoint : "", new_stage, new_stage);
        return cli_report_written("fork", "the new stage %s was made", new_stage);
    case -ENOENT:
        return cli_error(PV_EXIT_FAILURE, "fork", "no checkpoint '%s' in %s (see 'pvisor checkpoint --list')",
                         checkpoint ? checkpoint : "", stage);
    case -ENOTEMPTY:
    case -EEXIST:
        /* a fork cut short (killed, a power loss) left its directory
         * without 'version' (written last): the retry was refused, and
         * drop and review call it "not a pvisor stage directory", with no
         * word of what it is or what to do */
        if (fork_cut_short(new_stage))
            return cli_error(PV_EXIT_FAILURE, "fork",
                             "refused: %s holds a fork that was cut short (it has no 'version', which a fork writes "
                             "last; no fork is writing it now): it is no stage and nothing uses it. Remove it "
                             "(rm -rf '%s') and fork again",
                             new_stage, new_stage);
        return cli_error(PV_EXIT_FAILURE, "fork", "refused: %s exists and is not an empty directory", new_stage);
    case -EXDEV:
        return cli_error(PV_EXIT_FAILURE, "fork",
                         "failed: the new stage could not be put in place at %s (a mount point?); choose another "
                         "place",
                         new_stage);
    case -EBUSY:
        return runs_stage_busy_error("fork", stage,
                                     "stop the run first, or fork one of its checkpoints once the run has ended");
    case -ESTALE:
        return cli_error(PV_EXIT_FAILURE, "fork", "refused: the stage %s is not sealed; fork one of its checkpoints",
                         stage);
    case -EALREADY:
        return cli_error(PV_EXIT_FAILURE, "fork", "refused: the stage %s was already %s", stage,
                         stage_done_phrase(stage));
    case -EINPROGRESS:
        return cli_error(PV_EXIT_FAILURE, "fork",
                         "refused: an interrupted apply of %s must be completed first ('pvisor apply')", stage);
    case -EACCES:
        return cli_error(
            PV_EXIT_FAILURE, "fork",
            "failed: the %s holds a file or directory without read permission (the agent's modes; a "
            "live checkpoint is copied with the run's privileges); nothing was made at %s. To fork it anyway: "
            "chmod -R u+rwX '%s%s%s/upper' (the modes this leaves are copied), or fork as root",
            checkpoint ? "checkpoint" : "stage", new_stage, stage, checkpoint ? "/checkpoints/" : "",
            checkpoint ? checkpoint : "");
    default:
        /* the new stage exists, complete, and was said to have "failed" */
        if (fork_published(dest))
            return cli_error(PV_EXIT_FAILURE, "fork",
                             "forked %s%s%s into the new sealed stage %s, but making its name durable failed: %s "
                             "(after a crash it may be gone: fork again then)",
                             stage, checkpoint ? " at checkpoint " : "", checkpoint ? checkpoint : "", new_stage,
                             strerror(-r));
        return cli_error(PV_EXIT_FAILURE, "fork", "failed: %s", strerror(-r));
    }
}
