/* run_checkpoint.h: live checkpoints of a staged run, asked for over the
 * Run-scoped agent socket (docs/agent-socket.md, docs/lifecycle.md). */
#ifndef PVISOR_CLI_RUN_CHECKPOINT_H
#define PVISOR_CLI_RUN_CHECKPOINT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "overlay/overlay.h"
#include "stage/stage.h"

#define RUN_LIVE_CHECKPOINTS_MAX 16 /* live checkpoints per run (committed or failed once begun) */

struct run_checkpoints {
    /* Set before the agent socket's thread starts, then read-only. */
    struct overlay *ov;
    struct stage *stage;
    const char *run_id;
    uint64_t max_bytes;  /* --stage-max-bytes (0: none): also the budget of this run's checkpoint copies */
    uint64_t max_inodes; /* --stage-max-inodes (0: none): likewise, in inodes */
    /* Set by the owner when the run ends (before agent_socket_stop): a
     * copy under way stops, and no new checkpoint starts. */
    atomic_bool cancel;
    /* The agent socket's thread only (read by the owner after it stopped). */
    unsigned taken, refused;
    unsigned copies;    /* checkpoints that got as far as a temporary directory (the per-run cap) */
    uint64_t bytes;     /* what the committed ones took (the --stage-max-bytes budget) */
    uint64_t inodes;    /* the inodes they took (the --stage-max-inodes budget) */
    uint64_t log_bytes; /* the journal and origin map at the last check (they only grow during a run) */
    json_t *taken_json; /* [{"name","bytes","copy","paused_ms"}] */
};

/* The agent socket's checkpoint hook (struct agent_hooks); userdata is a
 * struct run_checkpoints. */
void run_checkpoint_hook(void *userdata, const char *name, char *reply, size_t size);

/* Add what happened to the Bundle's agent_socket object (created if
 * absent) and release the record.  Call once the socket's thread has
 * stopped. */
void run_checkpoints_record(struct run_checkpoints *cp, json_t *bundle);

#endif
