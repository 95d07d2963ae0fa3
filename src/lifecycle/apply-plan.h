/* apply-plan.h: the plan of an apply and its intent journal
 * (STAGE/apply-intent), shared by apply.c and intent.c (not a public API;
 * docs/lifecycle.md, "Crash safety"). */
#ifndef PVISOR_LIFECYCLE_APPLY_PLAN_H
#define PVISOR_LIFECYCLE_APPLY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lifecycle/lc-internal.h"

struct plan_ent {
    char *path;
    enum lc_type old_type;
    uint32_t old_mode;
    bool old_has_sha;
    unsigned char old_sha[32];
    /* the digest of its user xattrs (pv_user_xattrs_sha256) that the
     * conflict check verified: the journal's (files and directories) */
    bool old_has_xsha;
    unsigned char old_xsha[32];
    enum lc_type new_type;
    uint32_t new_mode;
    char *new_target;
    struct timespec atime, mtime;
    /* runtime */
    enum { ST_OLD, ST_FINAL, ST_ABSENT } state;
    uint64_t seen_ino; /* identity when classified (0: unknown) */
    struct timespec seen_ctime, seen_mtime;
    uint64_t seen_nlink, seen_size;
    int tmp_fd;         /* the written O_TMPFILE content, not yet named (-1; set up by execute) */
    uint64_t tmp_bytes; /* bytes of its temp file, counted as written once it is renamed */
};

/* A directory of the workspace that its owner, the user applying, may
 * not write or search (a read-only tree): apply adds u+wx for its own
 * changes there and puts the mode back before the directories' own
 * modes are set.  Recorded in the intent, so that a resumed apply puts it
 * back too.  path "" is the workspace itself ("." in the intent). */
struct plan_unlocked {
    char *path;
    uint32_t mode;
    uint64_t dev, ino; /* the directory's identity: only it gets the mode back (0: unknown) */
};

struct plan {
    struct plan_ent *v;
    size_t n;
    struct plan_unlocked *unlocked;
    size_t n_unlocked;
    char id[17];
    bool subset; /* a --path subset: success does not mark the stage applied */
};

void lc_plan_free(struct plan *p);
/* The plan of applying cs (o->paths: a subset), or -EEXIST with each
 * conflict in rep (apply-plan.c). */
int lc_plan_from_changeset(const struct lc_changeset *cs, const struct lc_apply_opts *o, struct plan *p,
                           struct lc_apply_report *rep);
/* -EEXIST, each entry a conflict in rep, when the plan changes something
 * on a read-only file system the review's check does not see (a
 * read-only btrfs subvolume) (apply-plan.c). */
int lc_plan_check_writable(int ws_fd, const struct plan *p, struct lc_apply_report *rep);
/* Each operation of the plan to o->on_op (a dry run's listing). */
void lc_plan_announce(const struct plan *p, const struct lc_apply_opts *o);
/* Add a conflict (path, why: a static string) to rep. */
int lc_apply_report_conflict(struct lc_apply_report *r, const char *path, const char *why);
/* Give the plan's read-only directories u+wx (unlock) or their modes
 * back, each only while it is still a directory (the plan may have
 * replaced it by a file or a symlink, or deleted it).  On failure
 * *ret_failed names the directory. */
int lc_plan_set_unlocked(int ws_fd, const struct plan *p, bool unlock, const char **ret_failed);
/* The temp name of entry i in its directory: ".pvisor-apply-<id>-<i>". */
void lc_plan_tmp_name(const struct plan *p, size_t i, char buf[64]);

/* Append what a subset apply left at each of its paths to
 * STAGE/apply-written (intent.c). */
int lc_applied_record(int stage_dir_fd, int upper_fd, int ws_fd, const struct plan *p);
/* Publish the intent (see intent.c for what is durable when). */
int lc_intent_write(int stage_dir_fd, const struct plan *p, bool durable);
/* Load and validate STAGE/apply-intent: -ENODATA when it is cut short (not
 * a complete document), -EBADMSG when it is complete but invalid. */
int lc_intent_load(int stage_dir_fd, struct plan *p);
/* Remove the temp files an intent names (its apply id, each entry's index). */
void lc_intent_remove_temps(int ws_fd, const struct plan *p);
/* Remove the temp files of an interrupted apply before its resume (or a
 * drop --force), but a version of the user's that a crash left at one
 * (apply.c), which goes back to its path (upper_fd: the stage's upper/). */
void lc_apply_remove_temps_checked(int ws_fd, int upper_fd, const struct plan *p);
/* A type change between a directory and a non-directory passes through
 * "absent" (delete, then create). */
bool lc_plan_passes_absent(const struct plan_ent *e);
/* Does the plan fit in what the workspace's file system has available
 * (apply writes in batches of pending_bytes, by this many writers)?  0,
 * or -ENOSPC with *ret_need and *ret_avail (apply-plan.c). */
int lc_plan_check_room(int ws_fd, int upper_fd, bool same_fs, const struct plan *p, uint64_t pending_bytes,
                       unsigned writers, uint64_t *ret_need, uint64_t *ret_avail);
/* apply-resume.c: the resume classifies every entry of the intent p in
 * the workspace (old, final, or absent mid-way); conflicts are reported
 * in rep, nothing is written. */
int lc_apply_classify(int ws_fd, int upper_fd, struct plan *p, struct lc_apply_report *rep);
/* Is the workspace directory fd of entry e (a directory the stage keeps
 * one) still the one the conflict check (or the resume) verified: the
 * same inode, its mode and user xattrs its old or final ones?  1/0/-errno
 * (apply-resume.c). */
int lc_apply_dir_unchanged(int upper_fd, int fd, const struct plan_ent *e);
/* apply-records.c: after an apply, the directories it created appended to
 * STAGE/apply-created; the intent renamed to the 'applied' marker, made
 * durable (on failure put back); without --expect, a reviewed stage
 * compared with the review's ID (0: never reviewed or the one reviewed,
 * *ret_checked then; -EKEYREVOKED: another); after a subset of a reviewed
 * changeset, what is left recorded as reviewed (best effort). */
int lc_apply_record_created_dirs(int dir_fd, const struct plan *p);
int lc_apply_mark_applied(int dir_fd);
int lc_apply_check_reviewed(const struct lc_stage *st, const struct lc_changeset *cs, struct lc_apply_report *rep,
                            bool *ret_checked);
void lc_apply_record_rest_reviewed(struct lc_stage *st);
/* Remove intents whose rename a crash lost, and the temp files they name. */
void lc_intent_remove_lost(int stage_dir_fd, int ws_fd);

#endif
