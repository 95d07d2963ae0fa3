/* cmd_drop.c: `pvisor drop [RUN|--stage DIR]`: discard a stage's changes
 * (lifecycle/drop.c; the stage keeps a 'dropped' marker). */
#include "cli/cli.h"
#include "lifecycle/lifecycle.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    int r = lc_drop(stage, force);
    if (r == -EBUSY)
        return cli_error(PV_EXIT_FAILURE, "drop",
                         "refused: the stage %s is in use (its run is still going, or an apply holds it); "
                         "stop the run first",
                         stage);
    if (r == -EINPROGRESS)
        return cli_error(PV_EXIT_FAILURE, "drop",
                         "refused: an apply of %s was interrupted, so the workspace holds part of it; complete it "
                         "with 'pvisor apply', or drop anyway with --force (the applied part stays)",
                         stage);
    if (r < 0)
        return cli_error(PV_EXIT_FAILURE, "drop", "cannot drop the stage %s: %s", stage, strerror(-r));
    if (r == 1) {
        printf("Stage %s was applied: its copy of the changes and its checkpoints are removed; the workspace "
               "keeps what apply wrote, and the stage still reads 'applied'.\n",
               stage);
        return PV_EXIT_OK;
    }
    printf("Dropped stage %s: its changes are discarded; %s.\n"
           "The directory keeps a 'dropped' marker (pvisor status --review shows it); it can be removed.\n",
           stage,
           pending ? "what the interrupted apply had written stays in the workspace (its temp files were removed, "
                     "the modes of read-only directories it had opened put back)"
                   : "drop changes nothing in the workspace (what an earlier 'apply --path' wrote there stays)");
    return PV_EXIT_OK;
}
