/* cmd_restore.c: `pvisor restore NAME [RUN|--stage DIR]`: replace a stopped
 * stage's content with one of its checkpoints (lifecycle/checkpoint.c). */
#include "cli/cli.h"
#include "cli/runs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The inode of the stage's 'sealed' marker (0: none).  A restore makes
 * its new marker before it removes the old one, so another inode after a
 * failed restore says it published its own: the stage holds the
 * checkpoint. */
static uint64_t sealed_ino(const char *stage) {
    _cleanup_close_ int d = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    return d >= 0 && fstatat(d, "sealed", &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_ino : 0;
}

int cmd_restore(int argc, char **argv) {
    const char *run = NULL, *stage_dir = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return cli_print_help(cli_find_command("restore"));
        if (strcmp(a, "--stage") == 0) {
            int rc = cli_take_value("restore", argc, argv, &i, &stage_dir);
            if (rc)
                return rc;
        } else if (a[0] == '-') {
            return cli_usage_error("restore", "unknown option '%s'", a);
        } else if (!name) {
            name = a;
        } else if (!run) {
            run = a;
        } else {
            return cli_usage_error("restore", "takes a checkpoint NAME and at most one RUN");
        }
    }
    if (!name)
        return cli_usage_error("restore", "which checkpoint? (see 'pvisor checkpoint --list')");
    if (run && stage_dir)
        return cli_usage_error("restore", "give a RUN or --stage DIR, not both");
    /* a usage error before the stage is looked up: it was reported after
     * the lookup's notes, or not at all when that failed (exit 1) */
    if (!lc_checkpoint_name_valid(name))
        return cli_usage_error("restore", "bad checkpoint name '%s' (letters, digits, '.', '_', '-'; at most 64)",
                               name);
    if (run && lc_cli_arg_is_stage(run)) {
        stage_dir = run;
        run = NULL;
    }
    _cleanup_free_ char *stage = NULL, *id = NULL;
    int rc = lc_cli_target("restore", run, stage_dir, &stage, &id, NULL);
    if (rc != 0)
        return rc;
    /* the stage must be ours to write: otherwise EACCES would read as an
     * unreadable checkpoint (below) */
    if (access(stage, W_OK | X_OK) < 0)
        return cli_error(PV_EXIT_FAILURE, "restore", "cannot write the stage %s: %s", stage, strerror(errno));
    uint64_t ino_before = sealed_ino(stage);
    int r = lc_restore(stage, name);
    if (lc_cli_own_files_override(r))
        r = lc_restore(stage, name); /* a failed restore left the stage as it was */
    switch (r) {
    case 0:
        printf("Restored stage %s from checkpoint %s; it is sealed\n", stage, name);
        return cli_report_written("restore", "the stage %s was restored from checkpoint %s", stage, name);
    case -ENOENT:
        return cli_error(PV_EXIT_FAILURE, "restore",
                         "the stage %s has no checkpoint '%s' (see 'pvisor checkpoint --list')", stage, name);
    case -EBUSY: return runs_stage_busy_error("restore", stage, "stop the run first");
    case -EALREADY:
        return cli_error(PV_EXIT_FAILURE, "restore", "refused: the stage %s was already %s", stage,
                         stage_done_phrase(stage));
    case -EINPROGRESS:
        return cli_error(PV_EXIT_FAILURE, "restore",
                         "refused: an interrupted apply of %s must be completed first ('pvisor apply')", stage);
    case -EACCES:
        return cli_error(PV_EXIT_FAILURE, "restore",
                         "failed: the checkpoint holds a file or directory without read permission (the agent's "
                         "modes; a live checkpoint is copied with the run's privileges); the stage is unchanged. "
                         "To restore it anyway: chmod -R u+rwX '%s/checkpoints/%s/upper' (the modes this leaves "
                         "are restored), or run restore as root",
                         stage, name);
    default: {
        /* which of the two: "run restore again" also where the stage was
         * left as it was (a copy that failed for want of space: the retry
         * fails the same way until room is made); an interrupted stage (a
         * swap cut short, or a run's) keeps the name of the restore */
        /* an error after the swap, in the flush of the published marker
         * or of the cleanup: the stage is the checkpoint's, and was said
         * to be "unchanged" (a user then applied, or dropped, what they
         * believed was the work done after the checkpoint) */
        uint64_t ino_after = sealed_ino(stage);
        if (ino_after && ino_after != ino_before)
            return cli_error(PV_EXIT_FAILURE, "restore",
                             "the stage %s was restored from checkpoint %s, but making that durable failed: %s "
                             "(after a crash it may read 'interrupted': 'pvisor restore %s --stage %s' completes it)",
                             stage, name, strerror(-r), name, stage);
        _cleanup_free_ char *cp = NULL;
        if (lc_restore_interrupted(stage, &cp))
            return cli_error(PV_EXIT_FAILURE, "restore",
                             "failed: %s; the stage reads 'interrupted' until 'pvisor restore %s --stage %s' "
                             "completes it (do not drop it: that discards its checkpoints too)",
                             strerror(-r), cp ? cp : name, stage);
        return cli_error(PV_EXIT_FAILURE, "restore", "failed: %s; the stage %s is unchanged", strerror(-r), stage);
    }
    }
}
