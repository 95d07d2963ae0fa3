/* stage-internal.h: struct stage, shared by stage.c (lifecycle) and
 * journal.c (journal and origin map).  Not part of the public API.
 *
 * Locking: 'lock' (a leaf mutex) protects the journal fd writes, the path
 * set and the origin map; every other field is set at open and read-only
 * while FUSE threads run.
 */
#ifndef PVISOR_STAGE_INTERNAL_H
#define PVISOR_STAGE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "stage/stage.h"

#define STAGE_VERSION_LINE "pvisor-stage 1\n"
#define STAGE_MAX_LINE (64 * 1024) /* journal/origin line bound */

struct str_set { /* open-addressing set of owned strings */
    char **slots;
    size_t cap, n;
};

struct ino_map { /* open-addressing map uint64 -> uint64, key 0 = empty */
    uint64_t *keys, *vals;
    size_t cap, n;
};

struct stage {
    int dir_fd;                       /* STAGE/ (immutable) */
    int upper_fd;                     /* STAGE/upper (immutable) */
    int work_fd;                      /* STAGE/work (immutable) */
    int lock_fd;                      /* STAGE/lock, flock(LOCK_EX) held (immutable) */
    enum stage_durability durability; /* immutable */
    bool layout_unsynced;             /* created without a flush (checkpoint durability): the seal flushes it */
    pthread_mutex_t lock;
    int journal_fd;          /* O_APPEND; writes under lock */
    int origin_fd;           /* O_APPEND; writes under lock */
    struct str_set recorded; /* under lock */
    struct ino_map origins;  /* under lock: upper inode -> lower inode it shows (its copy-up's origin) */
    struct ino_map hidden;   /* under lock: upper inode -> lower inode it is a copy of, not shown (taken) */
    struct ino_map lowers;   /* under lock: lower inode -> how many live upper inodes origins maps to it */
    /* under lock: appends that stage_journal_rollback may take back
     * (stage_journal_begin); tx_keys borrow the set's strings */
    bool tx, tx_broken;
    off_t tx_off;
    char **tx_keys;
    size_t n_tx, cap_tx;
};

int stage_journal_load(struct stage *s);
/* Load the origin map of s->upper_fd (a map of another file system or
 * directory is discarded; a version 1 map is rewritten as version 2) and
 * keep it open for appending (s->origin_fd). */
int stage_origin_load(struct stage *s);
void stage_maps_free(struct stage *s);

#endif
