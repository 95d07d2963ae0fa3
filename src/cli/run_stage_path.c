/* run_stage_path.c: where the stage of a run lives, and where it may not. */
#include "cli/run.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Is a inside b (or equal)?  Both absolute and symlink-free. */
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
    /* Resolve the parent (it must exist); keep the last component as given. */
    _cleanup_free_ char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    size_t l = strlen(copy);
    while (l > 1 && copy[l - 1] == '/')
        copy[--l] = '\0';
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    const char *parent = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash)
        *slash = '\0';
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == '\0')
        return -EINVAL;
    _cleanup_free_ char *rp = realpath(parent, NULL);
    if (!rp)
        return -errno;
    char *p = path_join(rp, base);
    if (!p)
        return -ENOMEM;
    *ret_path = p;
    return 0;
}

int run_check_stage_location(const struct run_context *ctx, char **ret_error) {
    _cleanup_free_ char *sp = NULL;
    int r = run_stage_path(ctx, &sp);
    if (r < 0) {
        if (asprintf(ret_error, "--stage '%s': %s", ctx->opts->stage, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    if (path_within(sp, ctx->workspace) || path_within(ctx->workspace, sp)) {
        if (asprintf(ret_error,
                     "the stage %s and the workspace %s must not contain each other; "
                     "choose --stage outside the workspace (or set XDG_STATE_HOME outside it for --stage auto)",
                     sp, ctx->workspace) < 0)
            *ret_error = NULL;
        return -EINVAL;
    }
    return 0;
}
