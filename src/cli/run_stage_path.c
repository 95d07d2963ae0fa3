/* run_stage_path.c: where the stage of a run lives, and where it may not. */
#include "cli/run.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Absolute path of the stage directory, without creating it. */
int run_stage_path(const struct run_context *ctx, char **ret_path) {
    const char *s = ctx->opts->stage;
    if (!s || strcmp(s, "auto") == 0) {
        char *p = path_join(ctx->run_dir, "stage");
        if (!p)
            return -ENOMEM;
        *ret_path = p;
        return 0;
    }
    /* the parent resolved (it must exist), the last component as given */
    return path_abs_parent(s, ret_path);
}

bool run_path_recordable(const char *path) {
    json_t *j = json_string(path);
    json_decref(j);
    return j != NULL;
}

int run_check_stage_location(const struct run_context *ctx, char **ret_error) {
    _cleanup_free_ char *sp = NULL;
    int r = run_stage_path(ctx, &sp);
    if (r < 0) {
        if (asprintf(ret_error, "--stage '%s': %s", ctx->opts->stage, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    if (!run_path_recordable(sp)) {
        _cleanup_free_ char *d = term_escape(sp);
        if (asprintf(ret_error,
                     "the stage path %s is not valid UTF-8, which its Bundle and meta.json cannot record; choose "
                     "--stage elsewhere (or set XDG_STATE_HOME for --stage auto)",
                     d ? d : "?") < 0)
            *ret_error = NULL;
        return -EINVAL;
    }
    /* where it is, its spelling aside (a state directory named
     * WS/../state is not in WS: it was refused, found by a review) */
    _cleanup_free_ char *sp_real = NULL;
    if (path_resolve(sp, &sp_real) < 0)
        return -ENOMEM;
    if (path_overlaps(sp_real ? sp_real : sp, ctx->workspace)) {
        if (asprintf(ret_error,
                     "the stage %s and the workspace %s must not contain each other; "
                     "choose --stage outside the workspace (or set XDG_STATE_HOME outside it for --stage auto)",
                     sp, ctx->workspace) < 0)
            *ret_error = NULL;
        return -EINVAL;
    }
    /* A read-write grant that holds the stage (or lies in it) hands the
     * agent its own stage's upper/, meta.json and origin map, outside the
     * FUSE server: files it never wrote through the view, a meta.json
     * naming another workspace (and no run), which apply then writes.
     * pvisor's state directory (a --stage auto, or one put there) is
     * covered in a grant as a credential location. */
    _cleanup_free_ char *state = strdup(ctx->run_dir); /* STATE/pvisor/runs/ID: STATE/pvisor */
    for (int k = 0; state && k < 2; k++) {
        char *slash = strrchr(state, '/');
        if (slash && slash != state)
            *slash = '\0';
    }
    _cleanup_free_ char *state_real = state ? realpath(state, NULL) : NULL;
    bool in_state = (state && path_within(sp, state)) || (state_real && path_within(sp, state_real));
    for (int i = 0; i < ctx->opts->n_access && !in_state; i++) {
        if (ctx->opts->access[i].kind != ACCESS_RW)
            continue;
        _cleanup_free_ char *rp = realpath(ctx->opts->access[i].path, NULL);
        if (rp && path_overlaps(sp, rp)) {
            if (asprintf(ret_error,
                         "--allow-write/--access rw:%s and the stage %s must not contain each other: the command "
                         "would write the stage itself, around the view; choose --stage elsewhere",
                         ctx->opts->access[i].path, sp) < 0)
                *ret_error = NULL;
            return -EINVAL;
        }
    }
    return 0;
}
