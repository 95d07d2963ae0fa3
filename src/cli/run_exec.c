/* run_exec.c: execute an accepted run and keep its Bundle truthful.
 *
 * The Bundle is written "running" before the command starts and rewritten
 * when it ends, so a supervisor that dies leaves a Bundle that says so
 * (pvisor status reports it as interrupted when the supervisor is gone).
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "evidence/bundle.h"
#include "exec/exec.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

bool run_stage_supported(void) {
    return false;
}

static void record_plain_dimensions(json_t *b) {
    /* Plain run: the command has the invoking user's full host access. */
    for (unsigned d = 0; d < _DIM_MAX; d++)
        bundle_set_dimension(b, d, LEVEL_UNENFORCED, "none", NULL, NULL);
    bundle_set_dimension(b, DIM_CHILD_PROCESSES, LEVEL_UNENFORCED,
                         "process group + child subreaper cleanup", NULL,
                         "descendants are killed when the command exits, but may act on the host until then");
    bundle_set_executor(b, "host", "plain fork/exec, no isolation");
}

/* Any requested dimension that is not effectively enforced fails --strict. */
static const char *strict_violation(const struct run_context *ctx) {
    json_t *dims = json_object_get(ctx->bundle, "dimensions");
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        if (ctx->policy->requested[d] == LEVEL_NONE)
            continue;
        const char *eff = json_string_value(json_object_get(json_object_get(dims, dimension_name(d)), "effective"));
        if (!eff || strcmp(eff, level_name(LEVEL_ENFORCED)) != 0)
            return dimension_name(d);
    }
    return NULL;
}

static int fail_setup(struct run_context *ctx, const char *reason) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    bundle_set_string(ctx->bundle, "state", "setup_failed");
    bundle_add_warning(ctx->bundle, reason);
    json_object_set_new(ctx->bundle, "ended_at", json_null());
    bundle_write(ctx->run_dirfd, ctx->bundle);
    return cli_error(PV_EXIT_SETUP, "run", "%s; the command was not run (run %s)", reason, ctx->run_id);
}

int run_execute(struct run_context *ctx) {
    record_plain_dimensions(ctx->bundle);
    // PROBE

    if (ctx->opts->strict) {
        const char *dim = strict_violation(ctx);
        if (dim) {
            char msg[160];
            snprintf(msg, sizeof msg, "--strict: dimension '%s' was requested but cannot be enforced here", dim);
            return fail_setup(ctx, msg);
        }
    }

    bundle_set_string(ctx->bundle, "state", "running");
    int r = bundle_write(ctx->run_dirfd, ctx->bundle);
    if (r < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot write the Run Bundle in %s: %s", ctx->run_dir, strerror(-r));
        return cli_error(PV_EXIT_SETUP, "run", "%s; the command was not run", msg);
    }

    struct exec_spec spec = {
        .argv = ctx->opts->cmd_argv,
        .cwd = NULL,
    };
    struct exec_result res;
    r = exec_run(&spec, &res);
    if (r < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot start the command: %s", strerror(-r));
        return fail_setup(ctx, msg);
    }

    int status = exec_exit_status(&res);
    struct timespec ended;
    clock_gettime(CLOCK_REALTIME, &ended);
    if (res.exec_errno) {
        fprintf(stderr, "pvisor run: %s: %s\n", ctx->opts->cmd_argv[0],
                res.exec_errno == ENOENT ? "command not found" : strerror(res.exec_errno));
        bundle_set_string(ctx->bundle, "state", "exec_failed");
        char msg[200];
        snprintf(msg, sizeof msg, "cannot execute %s: %s", ctx->opts->cmd_argv[0], strerror(res.exec_errno));
        bundle_add_warning(ctx->bundle, msg);
    } else {
        bundle_set_string(ctx->bundle, "state", "finished");
    }
    if (res.killed_descendants > 0) {
        char msg[120];
        snprintf(msg, sizeof msg, "%d leftover process(es) killed after the command exited", res.killed_descendants);
        bundle_add_warning(ctx->bundle, msg);
    }
    bundle_set_exit(ctx->bundle, res.exec_errno ? (status << 8) : res.wait_status, status, &ended);
    r = bundle_write(ctx->run_dirfd, ctx->bundle);
    if (r < 0)
        fprintf(stderr, "pvisor run: warning: cannot write the Run Bundle: %s\n", strerror(-r));
    return status;
}
