/* run_checkpoint.c: `checkpoint [NAME]` on the agent socket of a live run.
 *
 * The agent asks; the supervisor (trusted, outside the sandbox) takes the
 * checkpoint exactly as `pvisor checkpoint` does for a sealed stage
 * (lifecycle/checkpoint.c), with the FUSE overlay held at a quiescent point
 * for the copy:
 *
 *   1. validate the name; refuse what is known without the stage (the
 *      per-run cap, a spent budget) or with one lookup (the name taken);
 *      pause as in 2 and check the limits (below), nothing written: a
 *      refusal costs no temp directory and no copy, and a spent budget
 *      is seen without a system call (within_limits);
 *   2. create the temp directory; overlay_quiesce: wait until no
 *      operation that changes upper/, the journal or the origin map is in
 *      flight, hold new ones back; check the limits again, on what the
 *      copy will see (from here the attempt counts toward the cap,
 *      committed or not);
 *   3. copy upper/, journal, origin, meta.json (page cache reads: data
 *      written through the agent's open descriptors went through the
 *      server into the upper files before its write returned, since the
 *      mount has no writeback cache; no fsync is needed to see it);
 *   4. overlay_resume;
 *   5. commit: syncfs of the stage's file system, checkpoint.json, rename.
 *      Only then does the agent get "ok checkpoint NAME".
 *
 * Deadlock freedom: this runs on the agent socket's thread, which holds no
 * overlay lock except in the pause of 1 and between 2 and 4, and touches
 * the stage only through the stage's own directory fd, opened before the
 * overlay was mounted (the stage is never below the workspace:
 * run_check_stage_location), so it never calls into the FUSE mount it has
 * quiesced.  The owner stops this
 * thread (agent_socket_stop) before it stops the overlay or seals.
 *
 * Limits (the agent is untrusted, and the supervisor runs outside every
 * limit of the run, so a refusal must cost it little however often the
 * agent asks): names as lc_checkpoint_name_valid (no '/', no leading '.',
 * at most 64 bytes); at most RUN_LIVE_CHECKPOINTS_MAX per run, counting
 * every attempt that got to step 2; with --stage-max-bytes B the
 * checkpoints of one run copy at most B bytes together (each counted as
 * the larger of the upper's allocation while quiesced and what the copy
 * wrote), and with --stage-max-inodes N at most N inodes together (each
 * counted as the upper's inodes while quiesced, plus the few files of a
 * checkpoint: before, 16 checkpoints of a full upper took 17 times the
 * quota, found by a red-team pass); a checkpoint is refused unless the stage's file system keeps 5%
 * of its size (and of its inodes) free after a full (non-reflink) copy;
 * and the copy itself stops with ENOSPC before it writes more file data
 * than either bound leaves (holes stay holes, so a sparse file costs what
 * it holds).
 */
#include "cli/run_checkpoint.h"
#include "cli/cli.h"
#include "lifecycle/lifecycle.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

static int64_t ms_between(const struct timespec *a, const struct timespec *b) {
    return (int64_t)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

/* Bytes a full copy would take: the upper's allocation plus the journal
 * and origin map. */
static uint64_t copy_estimate(struct run_checkpoints *cp) {
    struct overlay_stats stats;
    overlay_get_stats(cp->ov, &stats);
    uint64_t est = stats.upper_bytes, logs = 0;
    static const char *const files[] = {"journal", "origin", "meta.json"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        struct stat st;
        if (fstatat(stage_dir_fd(cp->stage), files[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
            est += (uint64_t)st.st_size;
            if (i < 2)
                logs += (uint64_t)st.st_size;
        }
    }
    cp->log_bytes = logs;
    return est;
}

static void budget_refusal(const struct run_checkpoints *cp, char *reply, size_t size) {
    snprintf(reply, size,
             "error limit: the checkpoints of this run would copy more than --stage-max-bytes (%llu bytes)",
             (unsigned long long)cp->max_bytes);
}

/* The inodes a checkpoint takes beyond the upper's: its directory, the
 * journal, origin map, meta.json and checkpoint.json copies. */
#define CHECKPOINT_OWN_INODES 6

static void inode_refusal(const struct run_checkpoints *cp, char *reply, size_t size) {
    snprintf(reply, size,
             "error limit: the checkpoints of this run would take more than --stage-max-inodes (%llu inodes)",
             (unsigned long long)cp->max_inodes);
}

/* Whether the stage has a checkpoint (or anything else) named name: one
 * lookup in the stage's own directory, never the FUSE mount. */
static bool checkpoint_exists(const struct run_checkpoints *cp, const char *name) {
    char path[96];
    struct stat st;
    snprintf(path, sizeof path, "checkpoints/%s", name);
    return fstatat(stage_dir_fd(cp->stage), path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The limits (see the top of the file), checked while the overlay is
 * quiesced: nothing can grow the upper between this and the copy.  Returns
 * false with the reply written; else *ret_est (what the copy will take)
 * and *ret_limit (what it may write). */
static bool within_limits(struct run_checkpoints *cp, uint64_t *ret_est, uint64_t *ret_limit, char *reply,
                          size_t size) {
    /* est: what a plain copy takes (allocation, so holes are free; a
     * reflinked copy takes less at first but keeps the old extents once
     * the agent rewrites them, so the budget counts it in full).  limit:
     * what the copy may write, whatever the estimate said. */
    if (cp->max_bytes) {
        /* first without a system call: the upper's allocation now plus
         * the journal and origin map as last seen (appended to only, so
         * no larger than they are now) is at most est below; a refusal
         * repeated as fast as the agent can ask costs two lock cycles */
        struct overlay_stats stats;
        overlay_get_stats(cp->ov, &stats);
        if (cp->bytes >= cp->max_bytes || stats.upper_bytes + cp->log_bytes > cp->max_bytes - cp->bytes) {
            budget_refusal(cp, reply, size);
            return false;
        }
    }
    if (cp->max_inodes) {
        struct overlay_stats stats;
        overlay_get_stats(cp->ov, &stats);
        if (cp->inodes >= cp->max_inodes || stats.upper_inodes + CHECKPOINT_OWN_INODES > cp->max_inodes - cp->inodes) {
            inode_refusal(cp, reply, size);
            return false;
        }
    }
    uint64_t est = copy_estimate(cp), limit = UINT64_MAX;
    if (cp->max_bytes) {
        if (cp->bytes >= cp->max_bytes || est > cp->max_bytes - cp->bytes) {
            budget_refusal(cp, reply, size);
            return false;
        }
        limit = cp->max_bytes - cp->bytes;
    }
    struct statvfs sv;
    if (fstatvfs(stage_dir_fd(cp->stage), &sv) == 0) {
        uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
        uint64_t reserve = (uint64_t)sv.f_blocks * sv.f_frsize / 20;
        if (avail < reserve || est > avail - reserve) {
            snprintf(reply, size, "error no space: a copy of the stage (%llu bytes) would leave less than 5%% free",
                     (unsigned long long)est);
            return false;
        }
        if (avail - reserve < limit)
            limit = avail - reserve;
        /* inodes likewise (file systems without a fixed count report 0) */
        struct overlay_stats stats;
        overlay_get_stats(cp->ov, &stats);
        uint64_t ifree = sv.f_favail, ireserve = sv.f_files / 20;
        if (sv.f_files && (ifree < ireserve || stats.upper_inodes > ifree - ireserve)) {
            snprintf(reply, size,
                     "error no space: a copy of the stage (%llu inodes) would leave less than 5%% of the inodes free",
                     (unsigned long long)stats.upper_inodes);
            return false;
        }
    }
    *ret_est = est;
    *ret_limit = limit;
    return true;
}

/* name: NULL for the default */
static void take(struct run_checkpoints *cp, const char *name, char *reply, size_t size) {
    /* What can be known without touching the stage or pausing the overlay
     * comes first (each stays true for the rest of the run): the agent can
     * ask as often as it likes, and a refusal costs the supervisor, outside
     * every limit of the run. */
    if (name && !lc_checkpoint_name_valid(name)) {
        snprintf(reply, size, "error invalid name: 1-64 bytes of [A-Za-z0-9._-], not starting with '.' or '-'");
        return;
    }
    if (cp->copies >= RUN_LIVE_CHECKPOINTS_MAX) {
        snprintf(reply, size, "error limit: at most %d checkpoints per run", RUN_LIVE_CHECKPOINTS_MAX);
        return;
    }
    if (atomic_load(&cp->cancel)) {
        snprintf(reply, size, "error cancelled: the run is ending");
        return;
    }
    if (cp->max_inodes && cp->inodes >= cp->max_inodes) {
        inode_refusal(cp, reply, size);
        return;
    }
    if (cp->max_bytes && cp->bytes >= cp->max_bytes) {
        budget_refusal(cp, reply, size);
        return;
    }
    char gen[LC_CLI_CHECKPOINT_NAME_MAX];
    if (!name) {
        /* cp-<ms>, made unique: a second request within the millisecond
         * (or a checkpoint of that name from an earlier run) gets -2, -3, ... */
        lc_cli_checkpoint_default_name(stage_dir_fd(cp->stage), RUN_LIVE_CHECKPOINTS_MAX + 1, gen);
        name = gen;
    }
    if (checkpoint_exists(cp, name)) {
        snprintf(reply, size, "error exists: the stage already has a checkpoint named %s", name);
        return;
    }
    /* The limits, on what a copy would see now: a brief pause, nothing
     * written.  Checked again in the pause of the copy (the agent can grow
     * the upper in between). */
    struct timespec t0, t1;
    uint64_t est = 0, limit = 0, inodes = 0;
    int64_t paused_ms = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    overlay_quiesce(cp->ov);
    bool refused = !within_limits(cp, &est, &limit, reply, size);
    overlay_resume(cp->ov);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (refused)
        return;
    paused_ms = ms_between(&t0, &t1);
    struct lc_checkpoint_tx *tx = NULL;
    int r = lc_checkpoint_begin(stage_dir_fd(cp->stage), name, &tx);
    if (r == -EEXIST) {
        snprintf(reply, size, "error exists: the stage already has a checkpoint named %s", name);
        return;
    }
    /* From here a refusal or failure has cost a temporary directory and
     * maybe a copy: it counts toward RUN_LIVE_CHECKPOINTS_MAX like a
     * committed checkpoint, so an agent cannot make the supervisor repeat
     * that work without bound (a copy that fails for a lifecycle bound
     * fails again). */
    if (r == 0) {
        cp->copies++;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        overlay_quiesce(cp->ov);
        refused = !within_limits(cp, &est, &limit, reply, size);
        struct overlay_stats stats;
        overlay_get_stats(cp->ov, &stats);
        inodes = stats.upper_inodes + CHECKPOINT_OWN_INODES; /* quiesced: what the copy sees */
        if (!refused)
            r = lc_checkpoint_copy(tx, false, limit, &cp->cancel);
        overlay_resume(cp->ov);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        paused_ms += ms_between(&t0, &t1);
    }
    uint64_t bytes = 0;
    if (r == 0 && !refused)
        r = lc_checkpoint_commit(tx, cp->run_id, &bytes);
    lc_checkpoint_tx_free(tx);
    if (refused)
        return;
    if (r == -ENOSPC) {
        snprintf(reply, size, "error no space: the copy would exceed the space left for checkpoints");
        return;
    }
    if (r == -ECANCELED) {
        snprintf(reply, size, "error cancelled: the run is ending");
        return;
    }
    if (r < 0) {
        snprintf(reply, size, "error checkpoint failed: %s", strerror(-r));
        return;
    }
    cp->taken++;
    cp->bytes += bytes > est ? bytes : est;
    cp->inodes += inodes;
    if (!cp->taken_json)
        cp->taken_json = json_array();
    json_array_append_new(cp->taken_json, json_pack("{s:s, s:I, s:I}", "name", name, "bytes", (json_int_t)bytes,
                                                    "paused_ms", (json_int_t)paused_ms));
    snprintf(reply, size, "ok checkpoint %s", name);
}

void run_checkpoint_hook(void *userdata, const char *name, char *reply, size_t size) {
    struct run_checkpoints *cp = userdata;
    reply[0] = '\0';
    if (!cp->ov || !cp->stage)
        snprintf(reply, size, "error unsupported: the overlay is not running");
    else
        take(cp, name, reply, size);
    if (strncmp(reply, "ok", 2) != 0)
        cp->refused++;
}

void run_checkpoints_record(struct run_checkpoints *cp, json_t *bundle) {
    json_t *a = json_object_get(bundle, "agent_socket");
    if (!json_is_object(a)) {
        a = json_object();
        json_object_set_new(bundle, "agent_socket", a);
    }
    json_object_set_new(a, "checkpoints", cp->taken_json ? cp->taken_json : json_array());
    json_object_set_new(a, "checkpoints_refused", json_integer(cp->refused));
    cp->taken_json = NULL;
}
