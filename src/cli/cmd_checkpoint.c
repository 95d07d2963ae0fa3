/* cmd_checkpoint.c: `pvisor checkpoint [--name N] [--list] [RUN|--stage DIR]`:
 * a durable, self-contained copy of a sealed stage (lifecycle/checkpoint.c). */
#include "cli/cli.h"
#include "cli/runs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default names a sealed stage's checkpoint tries (no run's cap). */
#define CHECKPOINT_DEFAULT_TRIES 100

void lc_cli_checkpoint_default_name(int stage_dir_fd, unsigned tries, char buf[static LC_CLI_CHECKPOINT_NAME_MAX]) {
    char base[64];
    lc_checkpoint_default_name(base);
    snprintf(buf, LC_CLI_CHECKPOINT_NAME_MAX, "%s", base);
    for (unsigned k = 2; k <= tries; k++) {
        /* one lookup in the stage's own directory (never a FUSE mount) */
        char path[LC_CLI_CHECKPOINT_NAME_MAX + 16];
        struct stat st;
        snprintf(path, sizeof path, "checkpoints/%s", buf);
        if (fstatat(stage_dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return;
        snprintf(buf, LC_CLI_CHECKPOINT_NAME_MAX, "%s-%u", base, k);
    }
}

/* lc_checkpoint of the stage; a checkpoint not named gets a default name
 * made unique as a live one's is (lc_cli_checkpoint_default_name), once
 * more if another pvisor took that name between the look and its copy
 * (two in one millisecond).  *tried: the name made, or the last tried. */
static int make_checkpoint(const char *stage, const char *name, char **ret_made,
                           char tried[static LC_CLI_CHECKPOINT_NAME_MAX]) {
    int r = -EEXIST;
    for (int attempt = 0; r == -EEXIST && attempt < (name ? 1 : 3); attempt++) {
        if (name) {
            snprintf(tried, LC_CLI_CHECKPOINT_NAME_MAX, "%s", name);
        } else {
            _cleanup_close_ int dir = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dir < 0)
                return -errno;
            lc_cli_checkpoint_default_name(dir, CHECKPOINT_DEFAULT_TRIES, tried);
        }
        r = lc_checkpoint(stage, tried, ret_made);
    }
    return r;
}

/* Was checkpoint name of the stage published (lc_checkpoint_commit: its
 * 'checkpoint.json' is written before the rename that names it)?  Asked
 * after a failure: one after the rename, in the flush of the directories
 * that name it, left it there, complete (the stage lock keeps any other
 * checkpoint from making that name meanwhile). */
static bool checkpoint_published(const char *stage, const char *name) {
    _cleanup_close_ int d = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char path[LC_CLI_CHECKPOINT_NAME_MAX + 40];
    struct stat st;
    snprintf(path, sizeof path, "checkpoints/%s/checkpoint.json", name);
    return d >= 0 && fstatat(d, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int cmd_checkpoint(int argc, char **argv) {
    const char *run = NULL, *stage_dir = NULL, *name = NULL;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return cli_print_help(cli_find_command("checkpoint"));
        if (strcmp(a, "--list") == 0) {
            list = true;
        } else if (strcmp(a, "--stage") == 0 || strcmp(a, "--name") == 0) {
            int rc = cli_take_value("checkpoint", argc, argv, &i, a[2] == 's' ? &stage_dir : &name);
            if (rc)
                return rc;
        } else if (a[0] == '-') {
            return cli_usage_error("checkpoint", "unknown option '%s'", a);
        } else if (run) {
            return cli_usage_error("checkpoint", "takes at most one RUN");
        } else {
            run = a;
        }
    }
    if (run && stage_dir)
        return cli_usage_error("checkpoint", "give a RUN or --stage DIR, not both");
    if (list && name)
        return cli_usage_error("checkpoint", "--list takes no --name");
    /* a usage error before the stage is looked up: it was reported after
     * the lookup's notes, or not at all when that failed (exit 1) */
    if (name && !lc_checkpoint_name_valid(name))
        return cli_usage_error("checkpoint", "bad --name '%s' (letters, digits, '.', '_', '-'; at most 64)", name);
    if (run && lc_cli_arg_is_stage(run)) {
        stage_dir = run;
        run = NULL;
    }
    _cleanup_free_ char *stage = NULL, *id = NULL;
    int rc = lc_cli_target("checkpoint", run, stage_dir, &stage, &id, NULL);
    if (rc != 0)
        return rc;
    if (list) {
        /* a checkpoints directory that cannot be read lists as none:
         * said, rather than "has no checkpoints" (exit 0) */
        _cleanup_free_ char *cps = path_join(stage, "checkpoints");
        _cleanup_close_ int cfd = cps ? open(cps, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (cps && cfd < 0 && errno != ENOENT)
            return cli_error(PV_EXIT_FAILURE, "checkpoint", "cannot list the checkpoints: cannot read %s: %s", cps,
                             strerror(errno));
        json_t *arr = lc_checkpoints_json(stage);
        size_t i;
        json_t *v;
        /* one the command made on its agent socket says so: its name is
         * the command's choice, and could read as one of the user's own */
        json_array_foreach(arr, i, v) {
            int live = json_is_true(json_object_get(v, "live"));
            const char *by = json_string_value(json_object_get(v, "run"));
            printf("%-32s %s  %lld bytes (%s)", json_string_value(json_object_get(v, "name")),
                   json_string_value(json_object_get(v, "created")),
                   (long long)json_integer_value(json_object_get(v, "bytes")),
                   json_string_value(json_object_get(v, "copy")));
            if (live)
                printf("  made by the command of run %s (agent socket)", by ? by : "?");
            putchar('\n');
        }
        /* an empty listing said nothing at all: said on stderr (the
         * listing, on stdout, stays empty for scripts) */
        if (json_array_size(arr) == 0)
            fprintf(stderr,
                    "pvisor checkpoint: the stage %s has no checkpoints (make one with 'pvisor checkpoint "
                    "[--name N]' once its run ended, or from inside a --safe run on its agent socket)\n",
                    stage);
        json_decref(arr);
        return PV_EXIT_OK;
    }
    _cleanup_free_ char *made = NULL;
    char tried[LC_CLI_CHECKPOINT_NAME_MAX];
    int r = make_checkpoint(stage, name, &made, tried);
    if (lc_cli_own_files_override(r)) { /* a failed copy left nothing */
        free(made);
        made = NULL;
        r = make_checkpoint(stage, name, &made, tried);
    }
    switch (r) {
    case 0:
        printf("Checkpoint %s of stage %s (restore with 'pvisor restore %s --stage %s')\n", made, stage, made, stage);
        return cli_report_written("checkpoint", "checkpoint %s of stage %s was made", made, stage);
    case -EBUSY:
        return runs_stage_busy_error("checkpoint", stage,
                                     "checkpoint it after the run ends, or from inside a --safe run with "
                                     "'checkpoint [NAME]' on its agent socket");
    case -ESTALE: {
        _cleanup_free_ char *cp = NULL;
        if (lc_restore_interrupted(stage, &cp))
            return cli_error(PV_EXIT_FAILURE, "checkpoint",
                             "refused: a 'pvisor restore' of the stage %s was interrupted; 'pvisor restore %s %s' "
                             "completes it (do not drop it: that discards its checkpoints too)",
                             stage, cp ? cp : "NAME", stage);
        return cli_error(PV_EXIT_FAILURE, "checkpoint",
                         "refused: the stage %s is not sealed (interrupted); restore a checkpoint or drop it", stage);
    }
    case -EEXIST:
        return cli_error(PV_EXIT_FAILURE, "checkpoint", "a checkpoint named '%s' exists; choose another --name", tried);
    case -EALREADY:
        return cli_error(PV_EXIT_FAILURE, "checkpoint", "refused: the stage %s was already %s", stage,
                         stage_done_phrase(stage));
    case -EINPROGRESS:
        return cli_error(PV_EXIT_FAILURE, "checkpoint",
                         "refused: an interrupted apply of %s must be completed first ('pvisor apply')", stage);
    default:
        /* the checkpoint exists, complete, and was said to have "failed"
         * (a user then made another, or did without one) */
        if (checkpoint_published(stage, tried))
            return cli_error(PV_EXIT_FAILURE, "checkpoint",
                             "checkpoint %s of stage %s was made, complete (restore with 'pvisor restore %s --stage "
                             "%s'), but making its name durable failed: %s (after a crash it may be gone: make it "
                             "again then)",
                             tried, stage, tried, stage, strerror(-r));
        cli_error(PV_EXIT_FAILURE, "checkpoint", "failed: %s", strerror(-r));
        lc_cli_unreadable_hint(r, stage, false);
        return PV_EXIT_FAILURE;
    }
}
