/* run.h: the body of `pvisor run` once the request has been accepted and
 * its run directory exists (cli/run_exec.c).  Shared by the plain and the
 * staged paths so the Bundle is written the same way for both. */
#ifndef PVISOR_CLI_RUN_H
#define PVISOR_CLI_RUN_H

#include <jansson.h>
#include <stdbool.h>

#include "policy/policy.h"

struct run_context {
    const struct run_options *opts;
    const struct policy *policy;
    const char *run_id;
    const char *run_dir;
    int run_dirfd;
    const char *workspace; /* absolute, resolved */
    const char *cwd;       /* absolute */
    json_t *bundle;        /* borrowed; updated and rewritten as the run goes */
};

/* Runs the command and returns pvisor's exit status. */
int run_execute(struct run_context *ctx);

/* Whether this build can stage a workspace (--stage). */
bool run_stage_supported(void);

#endif
