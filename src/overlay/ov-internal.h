/* ov-internal.h: shared state of the WorkspaceOverlay FUSE server.
 *
 * Model.  One ov_node per merged object the kernel knows about, keyed by
 * (parent node, name) in one hash table; the FUSE nodeid is the node's
 * address (the root is FUSE_ROOT_ID).  nlookup equals the kernel's lookup
 * references; a node is freed when nlookup and nref (hashed children) are
 * both zero; the root is pinned.  A node never caches a lower fd: the lower
 * object is re-resolved by path (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS
 * from the workspace fd) on every use, so edits made by the user on the host
 * stay visible until the agent first mutates the object (a node detached
 * when its lower-only object was removed from the view keeps one, as it
 * has no path left: ov_node_keep_lower).  Once an object has an upper
 * copy, the node caches an O_PATH fd to it (upper objects change only
 * through us).
 *
 * Inode numbers (st_ino and d_ino agree): an object with an upper copy
 * reports the origin lower st_ino recorded in the stage's origin map, or
 * (upper st_ino | OV_UPPER_INO_BIT) for objects born in the upper; a
 * lower-only object reports its lower st_ino.  Copy-up therefore keeps
 * st_ino, across reopening the stage too.
 *
 * Locks, in order (never take an earlier one while holding a later one):
 *   1. ov->ns_lock (rwlock): write-held by every operation that changes the
 *      merged namespace or copies up (create, unlink, rename, setattr,
 *      setxattr, open-for-write...); read-held by lookups, getattr, readdir,
 *      read-only opens.  Data reads on open handles take no lock.
 *   1b. ov->data_lock (rwlock, writer-preferring): read-held by the data
 *      paths that change an upper file through an open handle without the
 *      ns_lock (write_buf, fallocate).  Write-held, after the ns_lock, by
 *      overlay_quiesce: with both held no operation that changes upper/,
 *      the journal or the origin map is in flight or can start; and by
 *      (remove|set)xattr of a file, to measure what the xattr allocates.
 *   2. dir handle mutex (ov_dirh.lock).
 *   2a. ov->dirh_lock (mutex, leaf): the directories' listings (dir.c,
 *      struct ov_listing): those kept for reuse (ov->ltab, ov->utab)
 *      and the names changed since (ov_dir_changed), the LRU list of
 *      those holding entries and the bytes they take, their holders.
 *   2b. ov->data_stripe[] (mutexes, one chosen by the upper file's st_ino,
 *      ov_data_stripe): held around the "measure, change, measure again"
 *      of an upper file's data (write_buf, fallocate, truncate), so that
 *      two changes of one file through different kernel inodes (its hard
 *      links' names, which the kernel does not serialize) are not each
 *      accounted with the other's allocation.  Never two at once.
 *   3. ov->tree_lock (mutex): the node hash table, parent/name links,
 *      nlookup/nref, and first caching of node->upper_fd.
 *   4. the stage's internal mutex (leaf, inside stage_journal_* etc.).
 *   4b. ov->fh_lock (mutex, leaf): the list of open descriptors of
 *      lower files (ov_fh_track_lower, ov_fh_untrack, ov_fh_to_upper);
 *      nothing under it takes another lock or calls into the mount.
 *   4c. ov->shared_lock (mutex, leaf): the inode numbers of files that
 *      have or had several names (ov_attr_timeout, ov_shared_add).
 * Statistics are atomics.  Every lock is dropped before fuse_reply_*.
 */
#ifndef PVISOR_OVERLAY_INTERNAL_H
#define PVISOR_OVERLAY_INTERNAL_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "overlay/overlay.h"
#include "stage/stage.h"

#define OV_UPPER_INO_BIT (1ULL << 63)
/* a lower object whose st_ino an upper copy reports already (ov_lower_ino) */
#define OV_TAKEN_INO_BIT (1ULL << 62)
#define OV_XATTR_PREFIX "user.overlay."
#define OV_XATTR_ESCAPED "user.overlay.overlay."
#define OV_XATTR_OPAQUE "user.overlay.opaque"
/* The lower object's chattr +a/+i, kept on its upper copy (kernel
 * overlayfs's protattr: 'a' append-only, 'i' immutable, in that order) */
#define OV_XATTR_PROTATTR "user.overlay.protattr"
/* "UID:GID": the owner of the lower object that a copy-up, without the
 * right to chown (an ordinary user's run), could not give its copy: the
 * view shows it, as it showed the lower object, and the kernel's
 * permission checks (default_permissions) follow it */
#define OV_XATTR_OWNER "user.overlay.owner"
#define OV_MAX_XATTR (64 * 1024)

struct ov_node {
    struct ov_node *parent;              /* tree_lock (changed also under ns write); NULL: root or detached */
    char *name;                          /* tree_lock (as parent) */
    struct ov_node *hnext;               /* tree_lock */
    bool hashed;                         /* tree_lock: in the table (not detached) */
    uint64_t nlookup;                    /* tree_lock: kernel references */
    uint64_t nref;                       /* tree_lock: hashed children pointing here */
    int upper_fd;                        /* O_PATH fd of the upper object or -1: first set under tree_lock,
                               replaced/cleared only under ns write lock */
    atomic_bool lower;                   /* ns_lock: the lower object at this node's path is part of it
                               (lower-only object, or merged non-opaque directory); atomic: LOOKUP and
                               READDIRPLUS refresh it under the read lock (and tree_lock) */
    mode_t type;                         /* ns_lock: S_IFMT */
    struct ov_node *all_prev, *all_next; /* tree_lock: list of every live node */
    struct ov_stamp { /* tree_lock: a backing object as of the node's last open (ov_pcache_open, opendir) */
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
        bool present;
    } stamp[2];   /* a file: [0]; a directory: [0] upper, [1] lower */
    bool stamped; /* tree_lock: stamp[] holds a recorded state */
    /* the object of that open (stamp[0]), for reads without the tree_lock */
    _Atomic uint64_t pc_dev, pc_ino;
    atomic_bool pc_foreign_read; /* read since that open through a descriptor of another object */
    /* ns write lock (and tree_lock): the object lost its name in the view
     * while the kernel held the node (unlink, rmdir, renamed over), and the
     * node was detached (ov_node_keep_upper, ov_node_keep_lower):
     * kept_lower_fd, an O_PATH fd of the lower object of a lower-only node
     * (nothing else reaches it then; closed when a copy takes over, see
     * ov_copy_up, or with the node), else -1; gone_ino, the st_ino the view
     * showed for it then (0: none), which a detached node keeps reporting
     * (its upper copy's origin is forgotten with its name) */
    int kept_lower_fd;
    uint64_t gone_ino;
    /* tree_lock: the owner shown for the upper object (reset when it
     * changes: ov_node_set_upper): 0 not read yet, 1 the upper's own, 2
     * owner_uid:owner_gid, its lower object's, which the copy-up could not
     * give it (OV_XATTR_OWNER) */
    unsigned char owner_state;
    uid_t owner_uid;
    gid_t owner_gid;
};

struct ov_alias {
    uint64_t ino; /* lower st_ino of a regular file with st_nlink > 1 */
    char *path;   /* one of its names, relative to the workspace */
};

#define OV_DATA_STRIPES 64 /* ov->data_stripe */
#define OV_LTAB_BITS 10    /* ov->ltab: buckets of kept directory listings */
#define OV_FH_BUCKET_BITS 8
#define OV_FH_BUCKETS (1u << OV_FH_BUCKET_BITS)

struct ov {
    int lower_fd; /* immutable, borrowed */
    char **mask;  /* immutable: lower paths never shown (overlay_params.mask) */
    size_t n_mask;
    char **mask_base;  /* immutable: their last components */
    bool *mask_sealed; /* immutable: nothing may be created at or below it (overlay_params.sealed) */
    size_t n_sealed;   /* immutable: how many are */
    struct ov_mask_id {
        dev_t dev;
        ino_t ino;
    } * mask_ids;                   /* immutable: what the masks named in the lower at the start (ov_masked_id) */
    size_t n_mask_ids;              /* immutable */
    int *walk_fd;                   /* immutable: O_PATH fds of the directories to look through, opened at the start */
    size_t n_walk_fd;               /* immutable */
    bool walk;                      /* immutable: anything to look through or found at the start */
    pthread_mutex_t mlink_lock;     /* held by the one looking for the rest of these (ov_masked_link) */
    atomic_int mlinks_state;        /* 0: not looked for yet, 1: found, -errno: could not be */
    struct ov_mask_id *mlinks;      /* regular files with other names inside masked directories, sorted; */
    size_t n_mlinks, cap_mlinks;    /* immutable once mlinks_state is not 0 */
    int upper_fd;                   /* immutable, borrowed from stage */
    int work_fd;                    /* immutable, borrowed from stage */
    struct stage *stage;            /* immutable, borrowed */
    char *mountpoint;               /* immutable */
    uint64_t max_bytes, max_inodes; /* immutable */
    uint64_t reserve_bytes, reserve_inodes; /* immutable: kept free on the stage's file system */
    uint64_t blksize;                       /* immutable: the upper's block size (byte quota estimates) */
    double lower_timeout;                   /* immutable: kernel attr/entry cache (s) for lower-backed objects */
    struct timespec started;                /* immutable: CLOCK_REALTIME when the overlay started */
    uid_t self_uid;                         /* immutable: our euid (file owner when not root) */
    gid_t self_gid;                         /* immutable: our gid, as the clients' namespace maps it */
    bool host_ids;                          /* immutable: our user namespace maps every id as the host's */
    bool own_group;                         /* immutable: overlay_params.own_group */
    bool hide_stages;                       /* immutable: overlay_params.hide_stages */
    bool can_chown;                         /* immutable: CAP_CHOWN in our namespace */

    pthread_rwlock_t ns_lock;
    pthread_rwlock_t data_lock; /* see the lock order above */
    pthread_mutex_t tree_lock;
    pthread_mutex_t fh_lock; /* lower_fhs; taken under the ns lock, never the reverse */
    /* fh_lock: open descriptors of lower regular files (ov_fh_to_upper),
     * hashed by the file's (dev, ino): a copy-up visits its own only. */
    struct ov_fh *lower_fhs[OV_FH_BUCKETS];
    struct ov_fh *open_fhs; /* fh_lock: every handle not released yet (struct ov_fh) */
    struct ov_node *root;   /* pinned */
    struct ov_node *all;    /* tree_lock: every live non-root node (for teardown) */
    struct ov_node **htab;  /* tree_lock */
    size_t hcap, hn;        /* tree_lock */

    /* see the lock order above */
    pthread_mutex_t data_stripe[OV_DATA_STRIPES];

    /* shared_lock (leaf): the view's st_ino of every regular file that has
     * or had several names (ov_attr_timeout); open addressing, 0 = free */
    pthread_mutex_t shared_lock;
    uint64_t *shared_ino;
    size_t cap_shared;
    _Atomic size_t n_shared;     /* read without the lock: 0 skips it */
    atomic_bool shared_overflow; /* the set is full: every regular file is uncached */

    /* dirh_lock: the listings holding entries, most recently read first,
     * and what they take (dir.c, OV_DIRH_BUDGET); the latest listings of
     * directories, kept for their next opens, by node (OV_LTAB_WAYS a
     * bucket) */
    /* dir_cookie's key (dir.c): random, kept in the stage from the first
     * listing on (cookie_key_kept), so every run lists a directory alike */
    unsigned char cookie_key[16];
    atomic_bool cookie_key_kept;
    pthread_mutex_t dirh_lock;
    struct ov_dirh *open_dirhs; /* every directory handle not released yet */
    struct ov_listing *dirh_head, *dirh_tail;
    size_t dirh_bytes;
    struct ov_listing *ltab[1u << OV_LTAB_BITS];
    struct ov_listing *utab[1u << OV_LTAB_BITS]; /* the same, by upper directory (ov_dir_changed) */
    atomic_uint_fast64_t dir_listings;           /* listings read from the directories (not reused) */

    struct ov_undo *undo;          /* ns write lock: the log of the operation under way, or NULL (undo.c) */
    struct ov_alias *aliases;      /* ns write lock: sorted by ino once built */
    size_t n_aliases, cap_aliases; /* ns write lock */
    bool aliases_built;            /* ns write lock */

    atomic_uint_fast64_t copy_ups, whiteouts, tmp_seq;
    atomic_uint_fast64_t quota_refusals; /* operations refused ENOSPC/EDQUOT by the quota or the reserve */
    atomic_bool mutated;                 /* a stage-changing operation ran (ov_wrlock, data writes) */
    atomic_long n_upper_fds;             /* node->upper_fd and ->kept_lower_fd values (root excluded) */
    long upper_fd_budget;                /* immutable: how many may be cached */
    long fd_limit;                       /* immutable: our RLIMIT_NOFILE when the overlay started */
    /* upper_bytes: st_blocks * 512 summed over upper/ (its root too), plus
     * the reservations of operations under way (ov_quota_reserve) */
    atomic_int_fast64_t upper_bytes, upper_inodes;

    struct fuse_session *se;
    /* Workers: one at the start; a worker that takes a request when no
     * other is waiting for one starts another, up to n_threads. */
    pthread_mutex_t thread_lock;
    pthread_t *threads;       /* thread_lock */
    unsigned n_threads;       /* immutable: the most there may be */
    unsigned n_started;       /* thread_lock */
    bool stopping;            /* thread_lock: no new workers */
    atomic_uint idle_workers; /* waiting for a request */
};

struct ov_fh {                     /* one per open file; freed at release */
    int fd;                        /* a read-only one of the lower file is switched to the upper at copy-up */
    bool upper;                    /* fd was opened on the upper copy (writable if its flags say so) */
    int flags;                     /* open flags of fd */
    _Atomic uint64_t dev, ino;     /* of fd's object (ov_pcache_open, ov_fh_to_upper) */
    bool listed;                   /* fh_lock: on ov->lower_fhs */
    struct ov_fh *lnext, **lpprev; /* fh_lock */
    dev_t lower_dev;               /* the lower object fd was opened on (set before listing) */
    ino_t lower_ino;
    bool switched; /* fd was switched to the upper copy (ov_fh_to_upper) */
    /* fh_lock: fd's upper file lost its last name while open (unlink, a
     * rename over it): its blocks were not given back then (they stay
     * allocated, and writes through fd still add to them) but at the
     * release of the last such handle (ov_fh_close) */
    bool orphan;
    /* fh_lock: on ov->open_fhs from open/create to release, so that the
     * handles the kernel never released (a file still open, or an exec'd
     * one whose last reference goes after the unmount) are freed at the end */
    struct ov_fh *onext, **opprev;
};

/* ops.c: fh, just opened on n's lower file (under the ns read lock), is
 * switched to the upper copy when n is copied up; at release, forget it. */
void ov_fh_track_lower(struct ov *ov, struct ov_fh *fh);
void ov_fh_untrack(struct ov *ov, struct ov_fh *fh);
/* fh (fh->fd set) is being handed to the kernel (open, create), under the
 * ns lock that opened it: records fd's object (fh->dev, fh->ino) and lists
 * it until ov_fh_close. */
void ov_fh_opened(struct ov *ov, struct ov_fh *fh);
/* The kernel released fh (or never got it): unlist it, give back the
 * blocks of an orphan whose last handle this was, close fd, free fh. */
void ov_fh_close(struct ov *ov, struct ov_fh *fh);
/* The regular file st (its last name just removed, ns write lock held) is
 * still open through handles: they are marked orphan and true returned;
 * its accounting then waits for the last one's release. */
bool ov_fh_orphaned(struct ov *ov, const struct stat *st);
static inline pthread_mutex_t *ov_data_stripe(struct ov *ov, uint64_t upper_ino) {
    return &ov->data_stripe[(upper_ino * UINT64_C(0x9e3779b97f4a7c15)) >> 58];
}
/* At the end: close and free every handle the kernel did not release. */
void ov_fh_free_all(struct ov *ov);
/* The regular file lower was just copied up to ufd, by whatever path
 * (ns write lock held): every descriptor still open on that lower object,
 * through any of its names, now refers to the copy, as every descriptor
 * of one file sees its writes.  One opened on an object the host has
 * since replaced keeps it. */
void ov_fh_to_upper(struct ov *ov, int ufd, const struct stat *lower);
/* The undo of a copy-up (undo.c): the descriptors ov_fh_to_upper switched
 * to copy (its attributes) are switched back to the lower file at relpath
 * when it is still the one they were opened on; one that cannot be keeps
 * the copy, which then has no name (an orphan, ov_account_removed). */
void ov_fh_to_lower(struct ov *ov, const struct stat *copy, const char *relpath);

/* ops.c: may the kernel keep its page cache of regular file node n, now
 * opened as fh (fh->fd and fh->upper set; fills fh->dev and fh->ino)?
 * *ret_stale: the file changed behind the kernel's back. */
bool ov_pcache_open(struct ov *ov, struct ov_node *n, struct ov_fh *fh, bool *ret_stale);
/* the state of fd for a stamp (present = false when fd < 0 or fstat fails) */
void ov_stamp_take(int fd, struct ov_stamp *ret);
bool ov_stamp_eq(const struct ov_stamp *a, const struct ov_stamp *b);
/* n's file changed through n itself (write, fallocate: the kernel's page
 * cache of n holds the change), from before to after. */
void ov_pcache_follow(struct ov *ov, struct ov_node *n, const struct stat *before, const struct stat *after);
/* n's file changed in a way its page cache may not show: drop it at the next open */
void ov_pcache_forget(struct ov *ov, struct ov_node *n);

/* inode.c */
struct ov *ov_from_req(fuse_req_t req);
struct ov_node *ov_node_of(struct ov *ov, fuse_ino_t ino);
int ov_node_path(struct ov *ov, struct ov_node *n, char **ret_path);
int ov_child_path(struct ov *ov, struct ov_node *parent, const char *name, char **ret_path);
/* Is the lower object at relpath masked (one of ov->mask, or below one)? */
bool ov_masked(const struct ov *ov, const char *relpath);
/* Is the lower object at parent/name masked?  True also when that cannot
 * be worked out (no memory): fail closed. */
bool ov_masked_child(struct ov *ov, struct ov_node *parent, const char *name);
/* Is the lower object st (its lstat) one a mask named at the start, under
 * another name here: a hard link of a masked file, a bind mount of a
 * masked directory, another spelling of a masked name in a directory that
 * folds case? */
bool ov_masked_id(const struct ov *ov, const struct stat *st);
/* Record what each mask names in the lower now (for ov_masked_id). */
int ov_mask_ids_init(struct ov *ov);
/* Open, now, the masked directories (and p->link_mask's, but p->no_walk)
 * that ov_masked_link looks through later, and record p->link_mask's
 * files with other names: a directory the host renames after the start
 * is looked through all the same.  Nothing of p is kept. */
int ov_walk_roots_init(struct ov *ov, const struct overlay_params *p);
/* Is the lower object st (its lstat) a regular file with other names
 * (st_nlink > 1) of which one is inside a masked directory (~/.ssh/id_rsa
 * linked as ~/key), or is, or is inside, one of link_mask (HOME's, seen
 * from the workspace's view)?  The masked directories are looked through once, at
 * the first such file or listing (mlink_walk says what is left out); when
 * they could not be (an error, or more than OV_MLINK_BUDGET entries), every
 * such file is taken for one. */
bool ov_masked_link(struct ov *ov, const struct stat *st);
/* Might a lower entry with inode number ino be one (a listing's check,
 * before an lstat tells)?  Looks through the masked directories as
 * ov_masked_link does. */
bool ov_masked_link_ino(struct ov *ov, ino_t ino);
/* Is the lower object dirfd/name a directory that is a pvisor stage, to be
 * hidden (ov->hide_stages)?  type: its S_IFMT when known, else 0. */
bool ov_lower_stage(const struct ov *ov, int dirfd, const char *name, mode_t type);
/* May nothing be created at parent/name (a sealed mask, or below one)?
 * True also when that cannot be worked out: fail closed. */
bool ov_sealed_child(struct ov *ov, struct ov_node *parent, const char *name);
/* Is a sealed path strictly below parent/name?  A directory moved there,
 * or a symlink made there, would put something at it.  Fails closed. */
bool ov_seals_below(struct ov *ov, struct ov_node *parent, const char *name);
/* Does the lower hold a sealed path below parent/name (direct: as a
 * child of it)?  The host's directory is then not empty, whatever the view
 * shows: it cannot be removed, nor moved as a whole.  Fails closed. */
bool ov_sealed_lower_below(struct ov *ov, struct ov_node *parent, const char *name, bool direct);
int ov_node_upper(struct ov *ov, struct ov_node *n);
int ov_lower_open(struct ov *ov, const char *relpath, int flags);
int ov_node_lower_open(struct ov *ov, struct ov_node *n, int flags);
uint64_t ov_upper_ino(struct ov *ov, uint64_t upper_st_ino);
/* The view's st_ino of a lower object of inode number lower_st_ino: that
 * number, unless an upper copy already reports it (the origin map has a
 * live copy of that lower inode: a name the host linked to or moved from a
 * file after the command changed it, or a lower name the alias walk did not
 * link); then lower_st_ino | OV_TAKEN_INO_BIT, so that two different files
 * never share a number. */
uint64_t ov_lower_ino(struct ov *ov, uint64_t lower_st_ino);
int ov_node_stat(struct ov *ov, struct ov_node *n, struct stat *ret_st);
/* The copy being built at fd (O_PATH, not a symlink; st: its attributes
 * now) of a lower object owned by uid:gid: when it is owned by another,
 * record that owner (OV_XATTR_OWNER). */
int ov_owner_keep(int fd, const struct stat *st, uid_t uid, gid_t gid);
/* st, the attributes of n's upper object ufd: the owner shown (ufd's, or
 * the one recorded, OV_XATTR_OWNER). */
void ov_owner_shown(struct ov *ov, struct ov_node *n, int ufd, struct stat *st);
/* n's upper object ufd was given the owner uid:gid ((uid_t)-1, (gid_t)-1:
 * unchanged) from shown (as ov_owner_shown): keep the record in step. */
int ov_owner_changed(struct ov *ov, struct ov_node *n, int ufd, const struct stat *shown, uid_t uid, gid_t gid);
int ov_is_opaque(int dir_fd, const char *name);
int ov_check_name(const char *name);

struct ov_entry {
    bool upper;         /* upper object present (not a whiteout) */
    bool whiteout;      /* upper has a whiteout at this name */
    bool lower;         /* lower object visible in the merged view */
    bool lower_present; /* lower has an object at this path (visible or hidden) */
    struct stat ust, lst;
};
int ov_resolve(struct ov *ov, struct ov_node *parent, const char *name, struct ov_entry *ret);
/* as ov_resolve, with parent's lower directory already open as lower_pfd (or -1) */
int ov_resolve_in(struct ov *ov, struct ov_node *parent, int lower_pfd, const char *name, struct ov_entry *ret);
static inline bool ov_entry_exists(const struct ov_entry *e) {
    return e->upper || e->lower;
}

struct ov_node *ov_node_get(struct ov *ov, struct ov_node *parent, const char *name, const struct ov_entry *e,
                            int *ret_err);
void ov_node_ref_kernel(struct ov *ov, struct ov_node *n);
void ov_node_forget(struct ov *ov, struct ov_node *n, uint64_t nlookup);
void ov_node_detach(struct ov *ov, struct ov_node *n);
void ov_node_detach_at(struct ov *ov, struct ov_node *parent, const char *name);
int ov_node_move(struct ov *ov, struct ov_node *n, struct ov_node *newparent, const char *newname);
void ov_nodes_clear_lower_below(struct ov *ov, struct ov_node *top);
void ov_node_set_upper(struct ov *ov, struct ov_node *n, int fd);
double ov_attr_timeout(struct ov *ov, struct ov_node *n, const struct stat *st);
/* Attributes as the clients are shown them (overlay_params.own_group). */
void ov_present_attr(const struct ov *ov, struct stat *st);
/* The regular file of view inode number ino has several names (a lower
 * file's copy-up, link()): its attributes are never cached again. */
void ov_shared_add(struct ov *ov, uint64_t ino);
int ov_fill_entry(struct ov *ov, struct ov_node *n, struct fuse_entry_param *e);
int ov_fill_entry_resolved(struct ov *ov, struct ov_node *n, const struct ov_entry *res, struct fuse_entry_param *e);
void ov_table_free(struct ov *ov);
int ov_proc_path(int fd, char buf[static 40]);

/* copyup.c */
/* Protection attributes of a view object: the host's chattr +i and +a
 * (which the view enforces, as kernel overlayfs does: the kernel does not
 * know them for a FUSE inode), and a lower mount root (rmdir and rename
 * fail EBUSY). */
#define OV_PROT_IMMUTABLE 1u
#define OV_PROT_APPEND 2u
#define OV_PROT_MOUNT 4u
/* Node n's: its upper copy's protattr (taken from the lower at copy-up),
 * else the lower object's statx attributes; the root's are the workspace
 * root's.  *ret 0 when they cannot be read (the operation's own error
 * follows). */
void ov_node_prot(struct ov *ov, struct ov_node *n, unsigned *ret);
/* The same for the object e that ov_resolve found at parent/name. */
void ov_entry_prot(struct ov *ov, struct ov_node *parent, const char *name, const struct ov_entry *e, unsigned *ret);
/* -EPERM if node n may not be changed: immutable, or append-only and the
 * change is not an append (append_ok: an O_APPEND open, a utimes to the
 * current time); else 0. */
int ov_prot_check(struct ov *ov, struct ov_node *n, bool append_ok);
int ov_copy_up(struct ov *ov, struct ov_node *n, const char *op);
/* Copy n up with every lower object below it, each directory made opaque
 * (before a rename of n).  The nodes keep their lower flags: the caller
 * clears them (ov_nodes_clear_lower_below) once the copy has moved. */
int ov_copy_up_tree(struct ov *ov, struct ov_node *n, const char *op);
int ov_journal_lower(struct ov *ov, const char *relpath, const char *op);
/* The caller reserves the whiteout's byte charge (a new name) and accounts
 * dir_fd's growth (ov_mark), as it may change dir_fd in the same step. */
int ov_make_whiteout(struct ov *ov, int dir_fd, const char *name, bool quota_checked);
/* acct: the object is already accounted: count what the xattr allocates */
int ov_set_opaque(struct ov *acct, int dir_fd, const char *name);
int ov_tmp_name(struct ov *ov, char buf[static 32]);
int ov_quota_inode(struct ov *ov);

/* Byte quota.  ov->upper_bytes is what upper/ allocates (st_blocks * 512 of
 * every object: file data, directories, symlinks, xattr blocks), kept by
 * measuring each object and each directory an operation changes before and
 * after (ov_mark; ov_account_*).  Before it allocates, an operation
 * reserves its estimate: the check and the charge are one atomic step, so
 * threads cannot each take the same last room; it gives the reservation
 * back once what it allocated is accounted.  -ENOSPC past max_bytes (or
 * into the file system's reserve).  n = 0 fails only once the stage is
 * already past its quota. */
int ov_quota_reserve(struct ov *ov, uint64_t n);
void ov_quota_release(struct ov *ov, uint64_t n);
/* -ENOSPC when allocating n more bytes would take the stage's file system
 * into its reserve (no quota charge): for what a write may allocate inside
 * the file, in holes, which its reservation (growth beyond EOF) misses. */
int ov_quota_floor(struct ov *ov, uint64_t n);
/* Count an operation the quota or the reserve refused (for the Bundle):
 * ov_quota_inode and ov_quota_reserve count their own refusals; a caller
 * of ov_quota_floor calls it when that refusal is final.  Returns r. */
int ov_quota_refused(struct ov *ov, int r);
/* The reservation for one new name in an upper directory: a block for its
 * entry (the directory may grow), plus for type S_IFDIR a block, for
 * S_IFLNK its target (length target_len) rounded up to blocks (type 0, or
 * any other: the name alone).  File data is reserved where it is written
 * or copied. */
uint64_t ov_entry_charge(const struct ov *ov, mode_t type, uint64_t target_len);
/* An upper object's allocation before a change; ov_account_mark adds the
 * change since (once: it disarms m).  Exact when nothing else changes the
 * object meanwhile: the ns write lock keeps directories and symlinks to
 * the caller, a file also needs data_lock (write).  fd < 0 or an fstat
 * error: nothing counted. */
struct ov_mark {
    int fd;
    int64_t before;
};
struct ov_mark ov_mark(int fd);
void ov_account_mark(struct ov *ov, struct ov_mark *m);
void ov_account_removed(struct ov *ov, const struct stat *st);
void ov_account_added(struct ov *ov, const struct stat *st);
int ov_copy_xattrs(int src_fd, int dst_fd, bool escape);
int ov_copy_up_entry(struct ov *ov, int pfd, const char *relpath, const char *name, const char *op, int *ret_fd);
/* The mtime of the upper directory dfd ({0, UTIME_OMIT} if unknown), and
 * putting it back after a copy-up added names the view already showed. */
struct timespec ov_dir_mtime(int dfd);
void ov_dir_mtime_restore(int dfd, struct timespec mtime);

/* alias.c */
int ov_alias_link_group(struct ov *ov, const char *relpath, const struct stat *lst, const char *sha, const char *op,
                        const char *tmp);
void ov_aliases_free(struct ov *ov);

/* dir.c */
struct ov_dirent {
    const char *name; /* in the listing's struct ov_names */
    uint64_t ino;
    uint64_t hash; /* the name's cookie (dir.c); a listing is in (hash, name) order */
    uint64_t off;  /* d_off: hash, or past the previous entry's on a collision; increasing */
    mode_t type;
    bool upper; /* an upper entry (ino: the upper st_ino), else a lower one (the lower st_ino) */
};
/* The server changed the entry name (NULL: any entry, or how the
 * directory merges with its lower) of the upper directory dfd: the
 * directory's kept listing is patched for it at its next reading, or read
 * again (dir.c).  Called after the change, by every path that changes an
 * upper directory's entries, under the ns write lock. */
void ov_dir_changed(struct ov *ov, int dfd, const char *name);
/* The server changed the upper directory dfd's attributes (mode, owner,
 * times, xattrs), not its entries: its kept listing still stands. */
void ov_dir_touched(struct ov *ov, int dfd);
/* At the end: free every listing (the handles the kernel never released
 * hold some). */
/* The directory handles the kernel never released, then the listings
 * (dirh_lock held; the session stopped). */
void ov_dirhs_free(struct ov *ov);
void ov_listings_free(struct ov *ov);
/* ov->cookie_key from the stage, or a new one (dir.c). */
void ov_cookie_key_init(struct ov *ov);
int ov_dir_is_empty(struct ov *ov, struct ov_node *n);
/* Remove the whiteouts of the upper directory dir_fd/name (-ENOTEMPTY if
 * it holds anything else); relpath: its path, for the undo log (NULL: not
 * logged) */
int ov_upper_clear_whiteouts(struct ov *ov, int dir_fd, const char *name, const char *relpath);
void ov_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ov_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ov_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ov_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ov_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* ops.c */
void ov_op_init(void *userdata, struct fuse_conn_info *conn);
void ov_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ov_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ov_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void ov_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* The request this worker serves, while an operation that may copy up
 * runs (session.c); NULL otherwise. */
extern _Thread_local fuse_req_t ov_current_req;
extern _Thread_local unsigned long ov_current_serial; /* a new one for each request served */

void ov_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);
void ov_op_readlink(fuse_req_t req, fuse_ino_t ino);
void ov_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ov_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ov_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi);
void ov_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ov_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void ov_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi);
void ov_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void ov_op_statfs(fuse_req_t req, fuse_ino_t ino);

/* undo.c: what an operation's copy-up did to upper/, taken back when the
 * operation fails before it moved anything (ns write lock held
 * throughout).  Between begin and rollback/commit, ov->undo logs what
 * ov_copy_up_entry, ov_alias_link_group, the tree copy's opaque marks and
 * ov_upper_clear_whiteouts do. */
struct ov_undo_step;
struct ov_undo_gone {
    dev_t dev;
    ino_t ino;
};
struct ov_undo {
    struct ov_undo_step *steps;
    size_t n, cap;
    bool broken;               /* a step could not be logged: nothing is taken back */
    struct ov_undo_gone *gone; /* rollback: the objects removed */
    size_t n_gone;
};
void ov_undo_begin(struct ov *ov, struct ov_undo *u);
/* dfd/name, at path (relative to upper/), was just made; lower_reg: a copy
 * or a name of the lower regular file at path, whose descriptors may have
 * been switched to it (ov_fh_to_upper); copy_up: a copy-up counted in
 * copy_ups (an undone one is taken off the count) */
void ov_undo_created(struct ov *ov, int dfd, const char *name, const char *path, bool lower_reg, bool copy_up);
/* the upper directory dir_fd, at path, is about to be made opaque */
void ov_undo_opaque(struct ov *ov, int dir_fd, const char *path);
/* the whiteout dir_path/name was just removed */
void ov_undo_whiteout(struct ov *ov, const char *dir_path, const char *name);
/* Take back every logged step, newest first, then the journal records
 * appended since begin.  0, or -errno: what could not be taken back stays,
 * and so do the records. */
int ov_undo_rollback(struct ov *ov, struct ov_undo *u);
void ov_undo_commit(struct ov *ov, struct ov_undo *u);

/* nsops.c */
void ov_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi);
void ov_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ov_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ov_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void ov_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void ov_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ov_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ov_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                  unsigned int flags);

/* xattr.c */
void ov_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags);
void ov_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ov_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ov_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* The supervisor's descriptors kept from the command (ov_fd_room): its
 * own work (checkpoints, the egress broker's connects, the launcher's
 * exec in the view, cgroup files, this server's lookups and listings)
 * needs some while the command holds every file it can open. */
#define OV_FD_RESERVE 64
/* May the command's OPEN, CREATE or OPENDIR take a descriptor of ours?
 * Not when fewer than OV_FD_RESERVE would be left: every open file of the
 * command in a view holds one of the supervisor's, and the command's
 * processes together could otherwise take them all (EMFILE for the
 * supervisor's own work).  Descriptors are allocated lowest first: the
 * lowest free one, k, says that k are in use at least. */
bool ov_fd_room(struct ov *ov);
/* Is fd, just opened to be kept for a node the command holds, below the
 * reserve?  (Else it is not kept.) */
static inline bool ov_fd_below_reserve(const struct ov *ov, int fd) {
    return fd >= 0 && (long)fd + OV_FD_RESERVE < ov->fd_limit;
}

/* Cached upper fds are bounded (ov->upper_fd_budget, from RLIMIT_NOFILE):
 * past the budget ov_node_upper hands out an fd that is closed when this
 * thread next drops the namespace lock, and the next write-lock holder
 * closes every cached one (no other thread can be using them then). */
extern _Thread_local size_t ov_n_deferred;
void ov_close_deferred(void);
void ov_evict_upper_fds(struct ov *ov);
/* The upper object at parent/name (pfd: parent's upper directory) is about
 * to lose that name (unlink, rename over it; ns write lock held): its node,
 * if the kernel has one, caches an O_PATH fd to it whatever the budget, and
 * eviction spares it, since once detached the node has no path to reopen
 * (fstat, fchmod, ftruncate, xattrs of the file still open); and the
 * st_ino the view shows for it (gone_ino). */
void ov_node_keep_upper(struct ov *ov, struct ov_node *parent, int pfd, const char *name);
/* The lower-only object at parent/name (relpath: its path) has just lost
 * that name (a whiteout hides it, or a rename put another object there; ns
 * write lock held) and its node, if the kernel has one, is detached next:
 * the node keeps an O_PATH fd to the lower object, so that the command's
 * descriptors of it (its cwd) still answer fstat (st_nlink 0), listings
 * (empty), xattr reads and reopening for reading, as natively. */
void ov_node_keep_lower(struct ov *ov, struct ov_node *parent, const char *name, const char *relpath);
/* The O_PATH fd kept for detached node n (ov_node_keep_lower), or -1;
 * closing it (ns write lock held), when an upper copy took over. */
int ov_node_kept_lower(struct ov *ov, struct ov_node *n);
void ov_node_drop_kept_lower(struct ov *ov, struct ov_node *n);

#define ov_rdlock(ov) pthread_rwlock_rdlock(&(ov)->ns_lock)
/* Every operation that may change the stage takes the write lock (or,
 * for file data, data_lock shared), so taking it marks the run mutated. */
static inline void ov_wrlock(struct ov *ov) {
    pthread_rwlock_wrlock(&ov->ns_lock);
    atomic_store_explicit(&ov->mutated, true, memory_order_relaxed);
    if (atomic_load_explicit(&ov->n_upper_fds, memory_order_relaxed) > ov->upper_fd_budget)
        ov_evict_upper_fds(ov);
}
static inline void ov_unlock(struct ov *ov) {
    pthread_rwlock_unlock(&ov->ns_lock);
    if (ov_n_deferred)
        ov_close_deferred();
}

#endif
