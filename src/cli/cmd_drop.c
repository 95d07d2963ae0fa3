/* cmd_drop.c: `pvisor drop [RUN|--stage DIR]`: discard a stage's changes
 * (lifecycle/drop.c; the stage keeps a 'dropped' marker). */
#include "cli/cli.h"
#include "cli/runs.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* "its 2 checkpoints (a, b)", or "" when it has none: what a drop takes
 * with it (a later 'pvisor restore NAME' is refused).  Names are
 * [A-Za-z0-9._-] (lc_checkpoint_name_valid): printed as they are. */
#define NAMES_SHOWN 5
static void describe_checkpoints(json_t *cps, char *buf, size_t size) {
    size_t n = json_array_size(cps);
    buf[0] = '\0';
    if (n == 0)
        return;
    size_t len = (size_t)snprintf(buf, size, "its %zu checkpoint%s (", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i < NAMES_SHOWN && len < size; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(cps, i), "name"));
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", name ? name : "?");
    }
    if (len < size)
        snprintf(buf + len, size - len, "%s)", n > NAMES_SHOWN ? ", ..." : "");
}

int cmd_drop(int argc, char **argv) {
    const char *run = NULL, *stage_dir = NULL;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return cli_print_help(cli_find_command("drop"));
        if (strcmp(a, "--force") == 0) {
            force = true;
        } else if (strcmp(a, "--stage") == 0) {
            int rc = cli_take_value("drop", argc, argv, &i, &stage_dir);
            if (rc)
                return rc;
        } else if (a[0] == '-') {
            return cli_usage_error("drop", "unknown option '%s'", a);
        } else if (run) {
            return cli_usage_error("drop", "takes at most one RUN");
        } else {
            run = a;
        }
    }
    if (run && stage_dir)
        return cli_usage_error("drop", "give a RUN or --stage DIR, not both");
    if (run && lc_cli_arg_is_stage(run)) {
        stage_dir = run;
        run = NULL;
    }
    _cleanup_free_ char *stage = NULL, *id = NULL;
    int rc = lc_cli_target("drop", run, stage_dir, &stage, &id, NULL);
    if (rc != 0)
        return rc;
    bool pending = force && lc_apply_pending(stage);
    /* A drop again (of a dropped stage, or of an applied one an earlier
     * drop emptied) discards nothing: it only removes what a drop cut short
     * left behind, and says so rather than report a drop again. */
    enum stage_state before;
    bool was_dropped = stage_probe_state(stage, &before) == 0 && before == STAGE_DROPPED;
    _cleanup_free_ char *upper = path_join(stage, "upper");
    struct stat ust;
    bool was_emptied = upper && lstat(upper, &ust) < 0 && errno == ENOENT;
    /* counted before: the drop removes them (a refused drop prints none) */
    char cps[512];
    json_t *cp_list = lc_checkpoints_json(stage);
    describe_checkpoints(cp_list, cps, sizeof cps);
    size_t n_cps = json_array_size(cp_list);
    json_decref(cp_list);
    int r = lc_drop(stage, force);
    if (r == -EBUSY)
        return runs_stage_busy_error("drop", stage, "stop the run first");
    if (r == -EINPROGRESS)
        return cli_error(PV_EXIT_FAILURE, "drop",
                         "refused: an apply of %s was interrupted, so the workspace holds part of it; complete it "
                         "with 'pvisor apply', or drop anyway with --force (the applied part stays)",
                         stage);
    /* an error after the 'dropped' marker is published (the flush of the
     * stage directory, a removal): the stage reads dropped, and was said
     * not to be (a user then took its changes for still there) */
    enum stage_state after;
    if (r < 0 && !was_dropped && stage_probe_state(stage, &after) == 0 && after == STAGE_DROPPED)
        return cli_error(PV_EXIT_FAILURE, "drop",
                         "the stage %s was dropped (it reads 'dropped': its changes can no longer be applied), but "
                         "the drop did not complete: %s. Run 'pvisor drop' again: it removes what is left",
                         stage, strerror(-r));
    if (r < 0)
        return cli_error(PV_EXIT_FAILURE, "drop", "cannot drop the stage %s: %s", stage, strerror(-r));
    runs_remove_leftovers(id);
    if (r == 1 && was_emptied) {
        printf("Stage %s was applied, and an earlier drop already removed its copy of the changes; nothing "
               "more to remove.\n",
               stage);
        return PV_EXIT_OK; /* nothing done: its output lost is exit 1 (main) */
    }
    if (r == 1) {
        printf("Stage %s was applied: its copy of the changes%s%s %s removed; the workspace keeps what apply "
               "wrote, and the stage still reads 'applied'.\n",
               stage, n_cps ? " and " : "", cps, n_cps ? "are" : "is");
        return cli_report_written("drop", "the applied stage %s's copy of the changes was removed", stage);
    }
    if (was_dropped) {
        printf("Stage %s was already dropped; nothing was discarded now.\n", stage);
        return PV_EXIT_OK;
    }
    printf("Dropped stage %s: its changes are discarded%s%s%s; %s.\n"
           "The directory keeps a 'dropped' marker (pvisor status --review shows it); it can be removed.\n",
           stage, n_cps ? ", and " : "", cps, n_cps ? " with them" : "",
           pending ? "what the interrupted apply had written stays in the workspace (its temp files were removed, "
                     "the modes of read-only directories it had opened put back)"
                   : "drop changes nothing in the workspace (what an earlier 'apply --path' wrote there stays)");
    return cli_report_written("drop", "the stage %s was dropped", stage);
}
