/* apply.c: write a sealed stage's changeset into the workspace.
 *
 * Contract (docs/lifecycle.md, "Apply"):
 *  - Only a sealed stage, under its run lock (no run can reopen it while
 *    we apply; a second apply waits for nothing: it is refused).
 *  - Conflict check first, by content: for every path in the plan the
 *    current lower is what the journal preimage says (type, mode, SHA-256),
 *    or absent for objects the agent created.  Any conflict: nothing is
 *    written.
 *  - Before any name in the workspace appears or changes (temp file,
 *    rename, unlink, mkdir), the plan is durable in STAGE/apply-intent:
 *    on the workspace's file system by the syncfs that makes the first
 *    batch of temp files durable (or one just before), elsewhere fsynced
 *    when written (see ensure_intent_durable).  Every plan entry
 *    names the old state (preimage or absent) and the final state (the
 *    upper object or absent).  The upper is immutable under the lock, so an
 *    interrupted apply is rolled forward by the next `pvisor apply`: each
 *    path is re-classified as old, final (or absent in the middle of a type
 *    change) and the remaining operations are redone idempotently; a path
 *    in any other state is a conflict and stops the resume before it
 *    writes.
 *  - Files are written to a temp name in their own directory
 *    (".pvisor-apply-<id>-<n>"; in small applies an O_TMPFILE named only
 *    just before its rename) with mode, xattrs and times set, made durable
 *    by one syncfs per batch, then renamed over the target (exchanged
 *    with it, and what came out checked: replace_checked): each path is
 *    either old or new, never half-written.  One syncfs of the workspace
 *    makes every rename and directory change durable; then the intent is
 *    renamed to the 'applied' marker.
 *  - Hostile stage: every workspace path is validated (no "", ".", ".."
 *    components) and its parent resolved with openat2(RESOLVE_BENEATH|
 *    RESOLVE_NO_SYMLINKS) from the workspace fd right before each
 *    operation; the final component is only used with *at() calls that do
 *    not follow it (renameat, unlinkat, mkdirat, symlinkat, O_EXCL|O_NOFOLLOW).
 *    Device nodes and sockets are never created; setuid/setgid bits are
 *    dropped unless asked to keep them.
 */
#include "lifecycle/lc-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include "lifecycle/apply-plan.h"

void lc_apply_report_clear(struct lc_apply_report *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n_conflicts; i++)
        free(r->conflict_paths[i]);
    free(r->conflict_paths);
    free(r->conflict_why);
    free(r->failed_path);
    *r = (struct lc_apply_report){0};
}

int lc_apply_report_conflict(struct lc_apply_report *r, const char *path, const char *why) {
    if (r->n_conflicts % 64 == 0) {
        char **np = realloc(r->conflict_paths, (r->n_conflicts + 64) * sizeof *np);
        if (!np)
            return -ENOMEM;
        r->conflict_paths = np;
        const char **nw = realloc(r->conflict_why, (r->n_conflicts + 64) * sizeof *nw);
        if (!nw)
            return -ENOMEM;
        r->conflict_why = nw;
    }
    if (!(r->conflict_paths[r->n_conflicts] = strdup(path)))
        return -ENOMEM;
    r->conflict_why[r->n_conflicts++] = why;
    return 0;
}

/* ---- operations ---- */

struct ctx {
    int ws_fd, upper_fd;
    struct plan *p;
    const struct lc_apply_opts *o;
    struct lc_apply_report *rep;
    size_t done, total;
    size_t *pending; /* plan indices whose temp file is still to be written (a batch) */
    size_t n_pending;
    size_t *ready; /* plan indices whose temp file is written, not yet renamed */
    size_t n_ready;
    int stage_fd;
    bool same_fs;                /* the stage is on the workspace's file system: syncfs covers both */
    bool intent_durable;         /* the intent's bytes and name are durable (see ensure_intent_durable) */
    pthread_mutex_t intent_lock; /* intent_durable, from the writer threads */
    bool tmpfile;                /* regular files are written with O_TMPFILE (see write_temp) */
    bool keep_owners;            /* root: what apply writes gets its stage object's owner (give_owner) */
    /* file systems mounted below the workspace that apply wrote in: each
     * gets a syncfs() wherever the workspace's own gets one (note_fs) */
    dev_t ws_dev;
    pthread_mutex_t fs_lock;
    dev_t *other_dev;
    int *other_fd;
    size_t n_other;
};

/* Note the file system of a directory apply is about to change. */
static int note_fs(struct ctx *c, int dir_fd) {
    struct stat st;
    if (fstat(dir_fd, &st) < 0)
        return -errno;
    if (st.st_dev == c->ws_dev)
        return 0;
    int r = 0;
    pthread_mutex_lock(&c->fs_lock);
    size_t i = 0;
    while (i < c->n_other && c->other_dev[i] != st.st_dev)
        i++;
    if (i == c->n_other) {
        dev_t *d = realloc(c->other_dev, (c->n_other + 1) * sizeof *d);
        if (d)
            c->other_dev = d;
        int *f = d ? realloc(c->other_fd, (c->n_other + 1) * sizeof *f) : NULL;
        if (f)
            c->other_fd = f;
        int fd = f ? fcntl(dir_fd, F_DUPFD_CLOEXEC, 3) : -1;
        if (!d || !f)
            r = -ENOMEM;
        else if (fd < 0)
            r = -errno;
        else {
            c->other_dev[c->n_other] = st.st_dev;
            c->other_fd[c->n_other++] = fd;
        }
    }
    pthread_mutex_unlock(&c->fs_lock);
    return r;
}

/* syncfs() of the workspace's file system and of every other one noted. */
static int syncfs_all(struct ctx *c) {
    if (syncfs(c->ws_fd) < 0)
        return -errno;
    for (size_t i = 0; i < c->n_other; i++)
        if (syncfs(c->other_fd[i]) < 0)
            return -errno;
    return 0;
}

static void ctx_release_fs(struct ctx *c) {
    for (size_t i = 0; i < c->n_other; i++)
        close(c->other_fd[i]);
    free(c->other_fd);
    free(c->other_dev);
    c->other_fd = NULL;
    c->other_dev = NULL;
    c->n_other = 0;
}

/* The intent must be durable before any name in the workspace appears or
 * changes: a crash must never leave a changed workspace without the intent
 * that rolls it forward, nor a temp file that no intent names.  On the
 * workspace's file system it is made durable by the syncfs() that makes a
 * batch's content durable (rename_ready), or here, before a deletion, a
 * new directory or a named temp file, by a syncfs() of the stage's file
 * system (its bytes and its name).  Elsewhere it was fsynced when written. */
static int ensure_intent_durable(struct ctx *c) {
    pthread_mutex_lock(&c->intent_lock);
    int r = 0;
    if (!c->intent_durable) {
        if (syncfs(c->stage_fd) < 0)
            r = -errno;
        else
            c->intent_durable = true;
    }
    pthread_mutex_unlock(&c->intent_lock);
    return r;
}

#define PENDING_MAX 4096
#define PENDING_BYTES (256u << 20)

static int fail_at(struct ctx *c, const struct plan_ent *e, int r);

static void step_count(struct ctx *c) {
    c->done++;
    if (c->o->progress)
        c->o->progress(c->done, c->total, c->o->userdata);
}

static void step_delay(struct ctx *c) {
    if (c->o->test_delay_us)
        usleep(c->o->test_delay_us);
}

static void step(struct ctx *c) {
    step_count(c);
    step_delay(c);
}

/* The object we are about to replace or delete must still be the one we
 * checked (same inode, unchanged ctime): a user editing the workspace while
 * apply runs stops it with -ECANCELED (the next apply resumes and reports
 * the conflict). */
static int still_same_st(const struct stat *st, const struct plan_ent *e) {
    if ((uint64_t)st->st_ino != e->seen_ino)
        return -ECANCELED;
    /* a directory's ctime moves when this apply removes its children, a
     * hard-linked file's when this apply replaces or deletes another of
     * its names (leaving it with one link, so both counts are checked) */
    if (!S_ISDIR(st->st_mode) && st->st_nlink == 1 && e->seen_nlink == 1 &&
        (st->st_ctim.tv_sec != e->seen_ctime.tv_sec || st->st_ctim.tv_nsec != e->seen_ctime.tv_nsec))
        return -ECANCELED;
    /* a hard-linked file's ctime is no witness (above), but a write into
     * it, through any of its names, moves its mtime (or its size), which
     * no link or unlink of this apply touches: without this, a user's
     * edit of such a file while apply ran was replaced, and lost */
    if (S_ISREG(st->st_mode) && (st->st_nlink != 1 || e->seen_nlink != 1) &&
        ((uint64_t)st->st_size != e->seen_size || st->st_mtim.tv_sec != e->seen_mtime.tv_sec ||
         st->st_mtim.tv_nsec != e->seen_mtime.tv_nsec))
        return -ECANCELED;
    return 0;
}

static int still_same(int parent, const char *name, const struct plan_ent *e) {
    if (!e->seen_ino)
        return 0;
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? -ECANCELED : -errno;
    return still_same_st(&st, e);
}

/* Delete the non-directory name, checked just before (held: hst).  An
 * editor's save by rename between that check and an unlink was deleted,
 * and apply reported success (the first deletion's check came before the
 * syncfs that makes the intent durable, a window of any length).  The
 * object is renamed to the temp name (RENAME_NOREPLACE) and what moved
 * must be the object checked, not written in place meanwhile either (as
 * in replace_checked); then it is unlinked, else it goes back to its name
 * (unless a newer save took the name, which replaced it anyway) and
 * apply stops.  A crash in between leaves it at the temp name, which the
 * resume puts back when it is not the old state
 * (lc_apply_remove_temps_checked).  A file system without
 * RENAME_NOREPLACE gets the plain unlink after the check. */
static int delete_checked(int parent, const char *tmp, const char *name, int held, const struct stat *hst) {
    if (renameat2(parent, name, parent, tmp, RENAME_NOREPLACE) < 0) {
        if (errno == ENOENT)
            return -ECANCELED; /* the path is gone (moved away by the user) */
        if (errno != EINVAL)
            return -errno;
        return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    }
    struct stat st, now;
    if (fstatat(parent, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == hst->st_ino && st.st_dev == hst->st_dev &&
        fstat(held, &now) == 0 &&
        (!S_ISREG(now.st_mode) || (now.st_size == hst->st_size && now.st_mtim.tv_sec == hst->st_mtim.tv_sec &&
                                   now.st_mtim.tv_nsec == hst->st_mtim.tv_nsec)))
        return unlinkat(parent, tmp, 0) < 0 && errno != ENOENT ? -errno : 0;
    (void)renameat2(parent, tmp, parent, name, RENAME_NOREPLACE);
    return -ECANCELED;
}

static int op_delete(struct ctx *c, struct plan_ent *e) {
    const char *name;
    _cleanup_close_ int parent = lc_open_parent(c->ws_fd, e->path, &name);
    if (parent < 0)
        return parent;
    /* the intent durable first: its syncfs may take long, and the check
     * must be the last thing before the deletion */
    int r = note_fs(c, parent);
    if (r == 0)
        r = ensure_intent_durable(c);
    if (r < 0)
        return r;
    if (e->old_type != LC_DIR && e->seen_ino) {
        _cleanup_close_ int held = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat hst;
        if (held < 0)
            return errno == ENOENT ? -ECANCELED : -errno;
        if (fstat(held, &hst) < 0)
            return -errno;
        r = still_same_st(&hst, e);
        char tmp[64];
        lc_plan_tmp_name(c->p, (size_t)(e - c->p->v), tmp);
        if (r == 0)
            r = delete_checked(parent, tmp, name, held, &hst);
        if (r < 0)
            return r;
    } else {
        r = still_same(parent, name, e);
        if (r < 0)
            return r;
        if (unlinkat(parent, name, e->old_type == LC_DIR ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
            return -errno;
    }
    c->rep->n_deleted++;
    step(c);
    return 0;
}

/* The parent directory of entry idx (resolved beneath the workspace) and
 * the name of its temp file there. */
static int open_pending(struct ctx *c, size_t idx, const char **ret_name, char tmp[64]) {
    int parent = lc_open_parent(c->ws_fd, c->p->v[idx].path, ret_name);
    if (parent >= 0)
        lc_plan_tmp_name(c->p, idx, tmp);
    return parent;
}

/* Put the new version (temp name tmp) at name, in place of the object
 * that was checked there just before (held: hst).  Between that check and
 * a rename over the path, an editor that saves by rename (a new file
 * renamed over the old one) could put the user's new version there, and
 * the rename replaced it (apply reported success; the save was lost).  The
 * two are exchanged instead (RENAME_EXCHANGE), and what came out at tmp
 * must be the object checked, not written in place meanwhile either (a
 * write through a descriptor still open on it after that is lost, as with
 * a rename).  Then it is unlinked (its blocks are freed when the caller
 * closes the held descriptor, outside the directory lock, as before);
 * else the exchange is undone and apply stops (-ECANCELED: the resume
 * names the conflict).  Each path is still old or new at every moment; a
 * crash between an exchange and its unlink leaves the old object at the
 * temp name, which the resume removes with the other temp files.  (The
 * exchange back is not journaled: a crash just before it leaves the
 * user's file at the temp name, ours at the path; the resume puts the
 * user's back, see lc_apply_remove_temps_checked.)
 * *ret_tmp_ours: false when tmp may hold the user's file (not unlinked
 * here: our version left the path and another object took it before the
 * exchange back).  After the exchange back, ours must be what came back
 * to tmp: a second save by rename in the same window is at tmp instead,
 * and goes to the path (below).  A file system without RENAME_EXCHANGE
 * (EINVAL, or EXDEV) gets the plain rename. */
static int replace_checked(int parent, const char *tmp, const char *name, int held, const struct stat *hst,
                           bool *ret_tmp_ours) {
    *ret_tmp_ours = true;
    struct stat ours; /* our version's identity: what must come back to tmp if the exchange is undone */
    if (fstatat(parent, tmp, &ours, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? -ECANCELED : -errno;
    if (renameat2(parent, tmp, parent, name, RENAME_EXCHANGE) < 0) {
        if (errno == ENOENT)
            return -ECANCELED;                 /* the path is gone (moved away by the user) */
        if (errno != EINVAL && errno != EXDEV) /* EXDEV: overlayfs, for a merged directory */
            return -errno;
        return renameat(parent, tmp, parent, name) < 0 ? -errno : 0;
    }
    struct stat st, now;
    /* the same object, and a file not written in place meanwhile (its
     * mtime or size; the exchange moved its ctime) */
    bool have_st = fstatat(parent, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (have_st && st.st_ino == hst->st_ino && st.st_dev == hst->st_dev && fstat(held, &now) == 0 &&
        (!S_ISREG(now.st_mode) || (now.st_size == hst->st_size && now.st_mtim.tv_sec == hst->st_mtim.tv_sec &&
                                   now.st_mtim.tv_nsec == hst->st_mtim.tv_nsec)))
        return unlinkat(parent, tmp, 0) < 0 && errno != ENOENT ? -errno : 0;
    /* the user's: back to its name, ours back to tmp (the caller unlinks it) */
    if (renameat2(parent, tmp, parent, name, RENAME_EXCHANGE) == 0) {
        struct stat back;
        if (fstatat(parent, tmp, &back, AT_SYMLINK_NOFOLLOW) == 0 && back.st_ino == ours.st_ino &&
            back.st_dev == ours.st_dev)
            return -ECANCELED;
        /* Not ours: a second save by rename replaced our version at the
         * path before the exchange back, which took that newer save to
         * tmp and the first one (st) back to the path; the caller's
         * unlink of tmp lost the user's latest version.  The newer one
         * goes to the path, the first one, which that save replaced,
         * comes out (as the save alone would have left it). */
        if (have_st && renameat2(parent, tmp, parent, name, RENAME_EXCHANGE) == 0 &&
            fstatat(parent, tmp, &back, AT_SYMLINK_NOFOLLOW) == 0 && back.st_ino == st.st_ino &&
            back.st_dev == st.st_dev)
            return -ECANCELED;
        *ret_tmp_ours = false;
        return -ECANCELED;
    }
    /* our version left the path meanwhile: the user's goes back if the
     * path is free, else it stays at tmp */
    if (renameat2(parent, tmp, parent, name, RENAME_NOREPLACE) == 0)
        return -ECANCELED;
    *ret_tmp_ours = false;
    return -ECANCELED;
}

/* Rename one written temp file over its target (pending index k). */
static int rename_pending(struct ctx *c, size_t idx) {
    struct plan_ent *e = &c->p->v[idx];
    const char *name;
    char tmp[64];
    _cleanup_close_ int parent = open_pending(c, idx, &name, tmp);
    if (parent < 0)
        return parent;
    int r = 0;
    /* The replaced object is held (O_PATH, never followed) across the
     * rename and checked through that fd.  renameat() drops the target's
     * last reference while it still holds the directory lock, so freeing a
     * replaced file's blocks (see struct renamer) would serialize every
     * rename in the directory; with the reference held the blocks are freed
     * by the close() below, outside the lock, as unlink does on its own. */
    _cleanup_close_ int held = -1;
    struct stat hst;
    if (e->old_type != LC_NONE && e->state == ST_OLD && e->seen_ino) {
        held = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (held < 0)
            r = errno == ENOENT ? -ECANCELED : -errno;
        else if (fstat(held, &hst) < 0)
            r = -errno;
        else
            r = still_same_st(&hst, e);
    }
    if (r == 0 && e->tmp_fd >= 0) {
        /* the content written with O_TMPFILE (durable since the batch's
         * syncfs) gets its temp name, then replaces the target as a named
         * temp file would; a resume removed its leftovers already */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", e->tmp_fd);
        if (c->rep->resumed)
            unlinkat(parent, tmp, 0);
        if (linkat(AT_FDCWD, proc, parent, tmp, AT_SYMLINK_FOLLOW) < 0)
            r = -errno;
        close(e->tmp_fd);
        e->tmp_fd = -1;
    }
    /* where the old state is absent, nothing may be replaced: an object
     * the user made there meanwhile stops apply (the resume reports it) */
    if (r == 0 && (e->old_type == LC_NONE || e->state == ST_ABSENT)) {
        struct stat st;
        if (renameat2(parent, tmp, parent, name, RENAME_NOREPLACE) == 0)
            r = 0;
        else if (errno == EEXIST)
            r = -ECANCELED;
        else if (errno != EINVAL) /* EINVAL: a file system without the flag */
            r = -errno;
        else if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            r = -ECANCELED; /* (not atomic there: best effort) */
        else if (errno != ENOENT)
            r = -errno;
        else if (renameat(parent, tmp, parent, name) < 0)
            r = -errno;
    } else if (r == 0 && held >= 0) {
        bool tmp_ours = true;
        r = replace_checked(parent, tmp, name, held, &hst, &tmp_ours);
        if (!tmp_ours)
            return r; /* the user's file is at tmp: not to be unlinked */
    } else if (r == 0 && renameat(parent, tmp, parent, name) < 0) {
        r = -errno;
    }
    if (r < 0)
        unlinkat(parent, tmp, 0);
    return r;
}

/* The renames of one batch, shared by a few threads.  A rename that drops
 * the last link of a replaced file frees its blocks inside renameat(), and
 * on some file systems that waits for the device (ext4 without a journal
 * and mounted with -o discard issues a synchronous discard per freed
 * extent: about 0.1 ms per file on the development VM, the largest single
 * cost of a big apply).  Those waits overlap when several renames are in
 * flight.  The renames of a batch are independent: every temp file is
 * already durable (syncfs), every parent exists, each rename resolves its
 * parent with openat2 and re-checks the target on its own, and a crash
 * leaves each path old or new whatever the order.  The first error stops
 * the batch (the other threads finish the rename they are doing); the
 * remaining temp files stay for the resume to remove, as before. */
struct renamer {
    struct ctx *c;
    size_t next;          /* next pending slot to take (atomic) */
    int stop;             /* set on the first error (atomic) */
    pthread_mutex_t lock; /* protects err, err_idx, c->rep, c->done */
    int err;
    size_t err_idx;
};

#define RENAME_THREADS 8
#define RENAME_PARALLEL_MIN 32 /* smaller batches rename in the calling thread */

static void *rename_worker(void *arg) {
    struct renamer *rn = arg;
    struct ctx *c = rn->c;
    while (!__atomic_load_n(&rn->stop, __ATOMIC_ACQUIRE)) {
        size_t k = __atomic_fetch_add(&rn->next, 1, __ATOMIC_RELAXED);
        if (k >= c->n_ready)
            break;
        size_t idx = c->ready[k];
        int r = rename_pending(c, idx);
        pthread_mutex_lock(&rn->lock);
        if (r < 0) {
            if (!rn->err) {
                rn->err = r;
                rn->err_idx = idx;
            }
            __atomic_store_n(&rn->stop, 1, __ATOMIC_RELEASE);
        } else {
            c->rep->n_written++;
            c->rep->bytes_written += c->p->v[idx].tmp_bytes;
            step_count(c);
        }
        pthread_mutex_unlock(&rn->lock);
        if (r == 0)
            step_delay(c);
    }
    return NULL;
}

/* Rename the written temp files over their targets.  One syncfs() first
 * makes all their data durable: a name never points at unwritten data,
 * without one fsync (one journal commit) per file.  On the stage's file
 * system it also makes the intent's name durable. */
static int rename_ready(struct ctx *c) {
    if (c->n_ready == 0)
        return 0;
    int sr = syncfs_all(c);
    if (sr < 0)
        return sr;
    if (c->same_fs) {
        pthread_mutex_lock(&c->intent_lock);
        c->intent_durable = true;
        pthread_mutex_unlock(&c->intent_lock);
    } else {
        int r = ensure_intent_durable(c);
        if (r < 0)
            return r;
    }
    struct renamer rn = {.c = c, .lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[RENAME_THREADS - 1];
    size_t n_th = 0;
    /* PVISOR_TEST_APPLY_DELAY_US paces apply one operation at a time, so
     * tests can kill it at any point of its progress: no threads then */
    if (c->n_ready >= RENAME_PARALLEL_MIN && !c->o->test_delay_us)
        for (; n_th < ARRAY_SIZE(th); n_th++)
            if (pthread_create(&th[n_th], NULL, rename_worker, &rn) != 0)
                break; /* fewer threads (or only this one) do the same work */
    rename_worker(&rn);
    for (size_t t = 0; t < n_th; t++)
        pthread_join(th[t], NULL);
    if (rn.err < 0)
        return fail_at(c, &c->p->v[rn.err_idx], rn.err);
    c->n_ready = 0;
    return 0;
}

/* Write the temp file of a regular file entry (content, xattrs, mode,
 * times): named tmp, or, with tmp NULL, an O_TMPFILE whose descriptor goes
 * to *ret_fd (-EOPNOTSUPP when the directory's file system has none). */
/* The POSIX ACL of the workspace file a regular file replaces goes to the
 * replacement: written in place, as the agent's view did, the file keeps
 * it (the stage keeps none: only user.* xattrs are staged).  The mode set
 * afterwards sets the ACL's mask, as chmod would; without the ACL, its
 * mask would become the group's own bits (group write granted where the
 * ACL held the group to read). */
static int carry_acl(struct ctx *c, const struct plan_ent *e, int out) {
    if (e->old_type != LC_REG)
        return 0;
    _cleanup_close_ int old = lc_open_beneath(c->ws_fd, e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (old < 0)
        return 0; /* gone, or unreadable: nothing to carry */
    char acl[65536];
    ssize_t n = fgetxattr(old, "system.posix_acl_access", acl, sizeof acl);
    if (n < 0 && errno != ENODATA && errno != ENOTSUP)
        return -errno; /* not "no ACL": the replacement would drop it */
    if (n <= 0)
        return 0;
    if (fsetxattr(out, "system.posix_acl_access", acl, (size_t)n, 0) < 0 && errno != ENOTSUP)
        return -errno;
    return 0;
}

/* Run by root, an object apply writes takes the owner and group of its
 * stage object: the workspace object's own for one the agent wrote or
 * moved (the overlay's copy-up keeps them), root's for one it made.  A
 * file of another user that the agent renamed, or wrote where its mode let
 * it (0622), or one in a directory it renamed (which the overlay copies
 * whole, 0700 directories and 0600 files included) stays that user's, as
 * a rename or a write in place on the host would leave it; written as
 * root's, the next run's command (uid 0: its owner) could read it, and a
 * setuid file kept by --keep-special-modes would run as root.  The stage's
 * owners are those the overlay gave: the command has no CAP_CHOWN.  A
 * file system that refuses (EPERM) or an id it cannot store (EINVAL) keeps
 * apply's. */
static int give_owner(const struct ctx *c, int fd, const char *name, const struct stat *ust) {
    if (!c->keep_owners || (ust->st_uid == 0 && ust->st_gid == 0))
        return 0;
    int flags = name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH;
    if (fchownat(fd, name ? name : "", ust->st_uid, ust->st_gid, flags) < 0 && errno != EPERM && errno != EINVAL)
        return -errno;
    return 0;
}

/* The group of the workspace file a regular file replaces goes to the
 * replacement, as a write in place (the agent's view) keeps it: created
 * here, it would take the directory's group, or ours, and a team's
 * group-writable file (a supplementary group's, in a directory that is not
 * set-gid) would be lost to the team.  Where we may not (not a member of
 * that group; its id not mapped in the verbs' second try), it stays as
 * created, as the host would have it.  Before the mode: chown clears the
 * set-id bits. */
static void carry_group(const struct plan_ent *e, int parent, int out) {
    if (e->old_type != LC_REG)
        return;
    const char *slash = strrchr(e->path, '/');
    struct stat ost, nst;
    if (fstatat(parent, slash ? slash + 1 : e->path, &ost, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(ost.st_mode) ||
        fstat(out, &nst) < 0 || ost.st_gid == nst.st_gid)
        return;
    (void)!fchown(out, (uid_t)-1, ost.st_gid);
}

/* The inode flags of the workspace file a regular file replaces, which a
 * write in place keeps and a new file would not have (chattr): no
 * copy-on-write (+C: a VM image or database on btrfs), compression (+c,
 * +m), no dump (+d), no atime (+A), synchronous writes (+S); and not
 * those the new file took from its directory where the old one has none
 * (a file older than the directory's +C keeps its checksums).  Set on the
 * new file before its content (btrfs changes +C only on an empty file);
 * where the file system has no such flags, or refuses one, it stays as
 * created (before, every file apply replaced lost them; tested). */
#define CARRIED_FLAGS (FS_NOCOW_FL | FS_COMPR_FL | FS_NOCOMP_FL | FS_NODUMP_FL | FS_NOATIME_FL | FS_SYNC_FL)
static void carry_flags(const struct plan_ent *e, int parent, int out) {
    if (e->old_type != LC_REG)
        return;
    const char *slash = strrchr(e->path, '/');
    _cleanup_close_ int old =
        openat(parent, slash ? slash + 1 : e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    int of = 0, nf = 0;
    if (old < 0 || fstat(old, &st) < 0 || !S_ISREG(st.st_mode) || ioctl(old, FS_IOC_GETFLAGS, &of) < 0 ||
        ioctl(out, FS_IOC_GETFLAGS, &nf) < 0 || (nf & CARRIED_FLAGS) == (of & CARRIED_FLAGS))
        return;
    nf = (nf & ~CARRIED_FLAGS) | (of & CARRIED_FLAGS);
    (void)ioctl(out, FS_IOC_SETFLAGS, &nf);
}

static int write_temp_reg(struct ctx *c, const struct plan_ent *e, int parent, const char *tmp, int *ret_fd,
                          uint64_t *ret_bytes) {
    _cleanup_close_ int in = lc_open_beneath(c->upper_fd, e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (in < 0)
        return in;
    struct stat ist;
    if (fstat(in, &ist) < 0)
        return -errno;
    if (!S_ISREG(ist.st_mode))
        return -EBADMSG; /* the stage changed under the lock: refuse */
    _cleanup_close_ int out = tmp ? openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                                  : openat(parent, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (out < 0)
        return !tmp && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) ? -EOPNOTSUPP : -errno;
    carry_flags(e, parent, out);
    uint64_t bytes = 0;
    int r = lc_copy_fd(in, out, (uint64_t)ist.st_size, UINT64_MAX, &bytes);
    if (r < 0)
        return r;
    struct lc_xattrs x;
    r = lc_xattrs_read(in, true, &x);
    if (r == 0) {
        r = lc_xattrs_set_new(out, &x); /* out is new (O_EXCL): no xattrs to remove */
        lc_xattrs_free(&x);
        if (r == -ENOTSUP || r == -EPERM)
            r = 0;
    }
    if (r == 0)
        r = carry_acl(c, e, out);
    if (r == 0) /* before the mode: a chown clears set-id bits */
        r = give_owner(c, out, NULL, &ist);
    if (r < 0)
        return r;
    /* run by root, the group is the stage object's (give_owner): the
     * workspace file's, which the copy-up kept, or the one the command
     * gave it (a chgrp, which review lists) */
    if (!c->keep_owners)
        carry_group(e, parent, out);
    if (fchmod(out, e->new_mode) < 0)
        return -errno;
    struct timespec ts[2] = {e->atime, e->mtime};
    if (futimens(out, ts) < 0)
        return -errno;
    *ret_bytes = bytes;
    if (!tmp)
        *ret_fd = TAKE_FD(out);
    return 0;
}

/* The owner, mode and times of the symlink or fifo just made at tmp, set
 * through a descriptor of that very object.  The directory may be another
 * user's (root applying into their workspace), who can replace the name
 * between two calls: by name, fchmodat() followed a symlink put there, and
 * gave the fifo's mode to any file (tested: /etc/shadow made 0666).  A
 * name that is no longer what we made (another type, or a hard link to
 * something else) stops apply: the resume redoes it. */
static int temp_meta(const struct ctx *c, const struct plan_ent *e, int parent, const char *tmp) {
    mode_t type = e->new_type == LC_LNK ? S_IFLNK : S_IFIFO;
    _cleanup_close_ int fd = openat(parent, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return errno == ENOENT ? -ECANCELED : -errno;
    if ((st.st_mode & S_IFMT) != type || st.st_nlink != 1)
        return -ECANCELED;
    int r = 0;
    struct stat ust;
    _cleanup_close_ int u = lc_open_beneath(c->upper_fd, e->path, O_PATH | O_NOFOLLOW, 0);
    if (u >= 0 && fstat(u, &ust) == 0 && (ust.st_mode & S_IFMT) == type)
        r = give_owner(c, fd, NULL, &ust);
    /* after the chown, which clears set-id bits; mknod's umask took bits
     * away (a fifo made 0777 by the command) */
    if (r == 0 && type == S_IFIFO)
        r = chmod_fd(fd, e->new_mode & 07777);
    if (r == 0) {
        struct timespec ts[2] = {e->atime, e->mtime};
        (void)utimensat(fd, "", ts, AT_EMPTY_PATH); /* best effort */
    }
    return r;
}

/* Write the temp file of a non-directory entry in its parent directory.
 * A regular file's content goes to an O_TMPFILE, which has no name until
 * its rename (rename_pending): the intent can then be made durable with
 * the content, by one syncfs().  Anything that makes a name (a named temp
 * file, a symlink, a fifo) waits for a durable intent. */
static int write_temp(struct ctx *c, size_t idx, int parent, uint64_t *ret_bytes) {
    struct plan_ent *e = &c->p->v[idx];
    char tmp[64];
    lc_plan_tmp_name(c->p, idx, tmp);
    *ret_bytes = 0;
    if (e->new_type == LC_REG && c->tmpfile) {
        int r = write_temp_reg(c, e, parent, NULL, &e->tmp_fd, ret_bytes);
        if (r != -EOPNOTSUPP)
            return r;
    }
    int dr = ensure_intent_durable(c);
    if (dr < 0)
        return dr;
    /* a fresh apply id names no existing file; a resumed apply removed its
     * leftovers before classifying, this is the second line of defence */
    if (c->rep->resumed && unlinkat(parent, tmp, 0) < 0 && errno != ENOENT)
        return -errno;
    int r;
    if (e->new_type == LC_REG) {
        r = write_temp_reg(c, e, parent, tmp, NULL, ret_bytes);
    } else if (e->new_type == LC_LNK) {
        r = symlinkat(e->new_target, parent, tmp) < 0 ? -errno : 0;
    } else if (e->new_type == LC_FIFO) {
        r = mknodat(parent, tmp, S_IFIFO | (e->new_mode & 0777), 0) < 0 ? -errno : 0;
    } else {
        return -EOPNOTSUPP;
    }
    if (r == 0 && e->new_type != LC_REG)
        r = temp_meta(c, e, parent, tmp);
    if (r < 0)
        unlinkat(parent, tmp, 0);
    return r;
}

static bool same_parent(const char *a, const char *b) {
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
    return la == lb && memcmp(a, b, la) == 0;
}

/* The temp files of a batch, written by a few threads, one directory at a
 * time each.  Creating a file allocates an inode under its directory's
 * lock, and on ext4 without a journal that allocation scans past every
 * inode of the group freed in the last minute (see docs/performance.md):
 * CPU time that overlaps across directories.  Entries of one directory
 * are consecutive in the plan (a run); a thread takes a run, resolves its
 * directory once (openat2, as for a single file) and writes its temp
 * files there.  Nothing is renamed here: a temp file is only a new name
 * in the workspace, removed by the resume if apply stops.  Writing stops
 * once the batch holds PENDING_BYTES; the rest waits for the next batch.
 * The first error stops every thread. */
struct writer {
    struct ctx *c;
    size_t *runs; /* start slot in c->pending of each run, and n_pending at the end */
    size_t n_runs;
    size_t next;          /* next run to take (atomic) */
    int stop;             /* set on the first error (atomic) */
    uint64_t bytes;       /* written in this batch (atomic) */
    bool *written;        /* per pending slot */
    pthread_mutex_t lock; /* protects err, err_idx */
    int err;
    size_t err_idx;
};

#define WRITE_THREADS 8

static void *write_worker(void *arg) {
    struct writer *w = arg;
    struct ctx *c = w->c;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        size_t k = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (k >= w->n_runs)
            break;
        int r = 0;
        size_t bad = c->pending[w->runs[k]];
        const char *name;
        _cleanup_close_ int parent = lc_open_parent(c->ws_fd, c->p->v[bad].path, &name);
        r = parent < 0 ? parent : note_fs(c, parent);
        for (size_t slot = w->runs[k]; r == 0 && slot < w->runs[k + 1]; slot++) {
            if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) ||
                __atomic_load_n(&w->bytes, __ATOMIC_RELAXED) >= PENDING_BYTES)
                break;
            uint64_t bytes = 0;
            bad = c->pending[slot];
            r = write_temp(c, bad, parent, &bytes);
            if (r == 0) {
                w->written[slot] = true;
                c->p->v[bad].tmp_bytes = bytes;
                __atomic_fetch_add(&w->bytes, bytes, __ATOMIC_RELAXED);
            }
        }
        if (r < 0) {
            pthread_mutex_lock(&w->lock);
            if (!w->err) {
                w->err = r;
                w->err_idx = bad;
            }
            pthread_mutex_unlock(&w->lock);
            __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

/* Write the pending temp files (or as many as PENDING_BYTES allows): the
 * written ones move to c->ready, the others stay pending, in order. */
static int write_pending(struct ctx *c) {
    size_t n = c->n_pending;
    _cleanup_free_ size_t *runs = calloc(n + 1, sizeof *runs);
    _cleanup_free_ bool *written = calloc(n + 1, sizeof *written);
    if (!runs || !written)
        return -ENOMEM;
    struct writer w = {.c = c, .runs = runs, .written = written, .lock = PTHREAD_MUTEX_INITIALIZER};
    for (size_t i = 0; i < n; i++)
        if (i == 0 || !same_parent(c->p->v[c->pending[i]].path, c->p->v[c->pending[i - 1]].path))
            runs[w.n_runs++] = i;
    runs[w.n_runs] = n;
    pthread_t th[WRITE_THREADS - 1];
    size_t n_th = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = cpus > 1 ? (size_t)cpus - 1 : 0;
    if (want > w.n_runs - 1)
        want = w.n_runs - 1;
    /* as for the renames: no threads while tests pace apply, none for
     * small batches */
    if (n >= RENAME_PARALLEL_MIN && !c->o->test_delay_us)
        for (; n_th < ARRAY_SIZE(th) && n_th < want; n_th++)
            if (pthread_create(&th[n_th], NULL, write_worker, &w) != 0)
                break;
    write_worker(&w);
    for (size_t t = 0; t < n_th; t++)
        pthread_join(th[t], NULL);
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        if (written[i])
            c->ready[c->n_ready++] = c->pending[i];
        else
            c->pending[keep++] = c->pending[i];
    }
    c->n_pending = keep;
    if (w.err < 0)
        return fail_at(c, &c->p->v[w.err_idx], w.err);
    return 0;
}

/* Write the batch's temp files, make them durable, rename them. */
static int flush_pending(struct ctx *c) {
    while (c->n_pending) {
        int r = write_pending(c);
        if (r < 0)
            return r;
        r = rename_ready(c);
        if (r < 0)
            return r;
    }
    return 0;
}

static int op_put(struct ctx *c, size_t idx) {
    struct plan_ent *e = &c->p->v[idx];
    if (e->state == ST_FINAL)
        return 0;
    if (e->new_type != LC_DIR) {
        /* written with the batch (write_pending), after every directory
         * the plan creates before it */
        c->pending[c->n_pending++] = idx;
        return c->n_pending >= PENDING_MAX ? flush_pending(c) : 0;
    }
    const char *name;
    char tmp[64];
    _cleanup_close_ int parent = open_pending(c, idx, &name, tmp);
    if (parent < 0)
        return parent;
    if (c->rep->resumed && unlinkat(parent, tmp, 0) < 0 && errno != ENOENT)
        return -errno;
    int r = note_fs(c, parent);
    if (r == 0)
        r = ensure_intent_durable(c);
    if (r < 0)
        return r;
    /* 0700 until its metadata (op_dir_meta); but under a setgid parent a
     * directory that is to keep the bit is made with its mode bits: a
     * chmod by a user outside the group clears the bit the mkdir
     * inherited (a team directory: the review showed mode 2755, apply
     * left 0755; found by a red-team pass), and op_dir_meta's chmod is
     * not needed when the umask leaves the mode as the stage has it */
    struct stat pst;
    mode_t mk = 0700;
    if ((e->new_mode & S_ISGID) && fstat(parent, &pst) == 0 && (pst.st_mode & S_ISGID))
        mk = e->new_mode & 0777;
    if (mkdirat(parent, name, mk) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    c->rep->n_dirs++;
    step(c);
    return 0;
}

/* Directory metadata, deepest first (children change a directory's mtime).
 * A directory of the workspace is re-checked first, as a file is before
 * its rename: the conflict check came before every write of this apply,
 * and a chmod or setfattr the user made meanwhile (a directory made
 * private: 0700) was replaced by the stage's, and apply reported success.
 * Its ctime is no witness (this apply's own renames in it move it): its
 * inode, mode and user xattrs are (-ECANCELED: the resume names it). */
static int op_dir_meta(struct ctx *c, struct plan_ent *e) {
    _cleanup_close_ int d = lc_open_beneath(c->ws_fd, e->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (d < 0)
        return d;
    int nr = note_fs(c, d);
    if (nr < 0)
        return nr;
    if (e->old_type == LC_DIR) {
        int ur = lc_apply_dir_unchanged(c->upper_fd, d, e);
        if (ur <= 0)
            return ur < 0 ? ur : -ECANCELED;
    }
    _cleanup_close_ int u = lc_open_beneath(c->upper_fd, e->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    /* only a directory the stage does not hold is passed over: an I/O
     * error there skipped its user xattrs (and, as root, its owner), and
     * apply marked the stage applied and reported success */
    if (u < 0 && u != -ENOENT && u != -ENOTDIR)
        return u;
    if (u >= 0 && e->old_type != LC_DIR) { /* a directory apply made: the stage's owner */
        struct stat ust;
        int r = fstat(u, &ust) < 0 ? -errno : give_owner(c, d, NULL, &ust);
        if (r < 0)
            return r;
    }
    if (u >= 0) {
        struct lc_xattrs x;
        int r = lc_xattrs_read(u, true, &x);
        if (r < 0) /* not an xattr-less directory: apply stops */
            return r;
        r = lc_xattrs_apply(d, &x);
        lc_xattrs_free(&x);
        if (r < 0 && r != -ENOTSUP && r != -EPERM)
            return r;
    }
    /* not when it has that mode already: a chmod by a user outside the
     * directory's group clears its setgid bit, which the mkdir had
     * inherited from a setgid parent (a team directory: the review showed
     * mode 2755, apply left 0755; found by a red-team pass) */
    struct stat dst;
    if ((fstat(d, &dst) < 0 || (dst.st_mode & 07777) != e->new_mode) && fchmod(d, e->new_mode) < 0)
        return -errno;
    if (e->old_type != LC_DIR) {
        struct timespec ts[2] = {e->atime, e->mtime};
        if (futimens(d, ts) < 0)
            return -errno;
    }
    return 0; /* made durable by execute()'s final syncfs */
}

/* The read-only directories the plan changes something in, owned by
 * us (struct plan_unlocked).  Root needs none; uid 0 of a user namespace
 * does (the verbs' second try as an ordinary user: its override does not
 * cover a directory of ours whose group it does not map).  A directory
 * that cannot be reached (below one we may not search) is left out: apply
 * fails there as it would have. */
static int find_locked(int ws_fd, struct plan *p) {
    uid_t me = geteuid();
    if (me == 0 && userns_is_initial())
        return 0;
    const char *last = NULL;
    size_t last_len = 0;
    for (size_t i = 0; i < p->n; i++) {
        const char *path = p->v[i].path, *slash = strrchr(path, '/');
        if (lc_path_is_root(path))
            continue; /* its mode changes in place, nothing in it */
        size_t len = slash ? (size_t)(slash - path) : 0;
        if (last && len == last_len && strncmp(path, last, len) == 0)
            continue; /* pre-order: siblings follow each other */
        last = path;
        last_len = len;
        _cleanup_free_ char *dir = strndup(path, len);
        if (!dir)
            return -ENOMEM;
        _cleanup_close_ int fd = len ? lc_open_beneath(ws_fd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0) : -1;
        struct stat st;
        if ((len && fd < 0) || fstat(len ? fd : ws_fd, &st) < 0 || st.st_uid != me || (st.st_mode & 0300) == 0300)
            continue; /* absent (apply creates it), not ours, or writable */
        bool seen = false;
        for (size_t k = 0; k < p->n_unlocked && !seen; k++)
            seen = strcmp(p->unlocked[k].path, dir) == 0;
        if (seen)
            continue;
        struct plan_unlocked *v = realloc(p->unlocked, (p->n_unlocked + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        p->unlocked = v;
        v[p->n_unlocked] = (struct plan_unlocked){dir, st.st_mode & 07777, (uint64_t)st.st_dev, (uint64_t)st.st_ino};
        p->n_unlocked++;
        dir = NULL;
    }
    return 0;
}

/* Add u+wx to the plan's read-only directories (unlock), or give them
 * their modes back.  One that is gone (apply deleted it) is skipped. */
static int set_unlocked(struct ctx *c, bool unlock) {
    /* the intent names them: durable before the first mode changes */
    int ir = c->p->n_unlocked && unlock ? ensure_intent_durable(c) : 0;
    if (ir < 0)
        return ir;
    const char *failed = NULL;
    int r = lc_plan_set_unlocked(c->ws_fd, c->p, unlock, &failed);
    if (r < 0) {
        free(c->rep->failed_path);
        c->rep->failed_path = strdup(failed);
    }
    return r;
}

static int fail_at(struct ctx *c, const struct plan_ent *e, int r) {
    if (r == -ECANCELED && c->rep->failed_path)
        return r;
    free(c->rep->failed_path);
    c->rep->failed_path = strdup(e->path);
    return r;
}

static int execute_plan(struct ctx *c) {
    struct plan *p = c->p;
    c->total = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        c->total += (e->old_type != LC_NONE && (e->new_type == LC_NONE || lc_plan_passes_absent(e))) +
                    (e->new_type != LC_NONE && !(e->new_type == LC_DIR && e->old_type == LC_DIR));
    }
    /* 0. read-only directories apply writes in: u+wx until step 3 */
    int ur = set_unlocked(c, true);
    if (ur < 0)
        return ur;
    /* 1. deletions, children before parents */
    for (size_t i = p->n; i-- > 0;) {
        struct plan_ent *e = &p->v[i];
        if (e->old_type == LC_NONE || !(e->new_type == LC_NONE || lc_plan_passes_absent(e)) || e->state != ST_OLD)
            continue;
        int r = op_delete(c, e);
        if (r < 0)
            return fail_at(c, e, r);
        e->state = e->new_type == LC_NONE ? ST_FINAL : ST_ABSENT;
        e->seen_ino = 0;
    }
    /* 2. creations and replacements, parents before children */
    for (size_t i = 0; i < p->n; i++) {
        struct plan_ent *e = &p->v[i];
        if (e->new_type == LC_NONE || (e->new_type == LC_DIR && e->old_type == LC_DIR))
            continue;
        int r = op_put(c, i);
        if (r < 0)
            return c->rep->failed_path ? r : fail_at(c, e, r);
    }
    int fr = flush_pending(c);
    if (fr < 0)
        return fr;
    /* their modes back, before those the stage gives directories */
    if ((ur = set_unlocked(c, false)) < 0)
        return ur;
    /* 3. directory metadata, children before parents */
    for (size_t i = p->n; i-- > 0;) {
        struct plan_ent *e = &p->v[i];
        if (e->new_type != LC_DIR)
            continue;
        int r = op_dir_meta(c, e);
        if (r < 0)
            return fail_at(c, e, r);
    }
    /* 4. durability of every name and directory change above: one syncfs
     * of the workspace instead of an fsync per parent directory (the
     * 'applied' marker and the intent's removal come after it) */
    return syncfs_all(c);
}

/* O_TMPFILE saves a small apply one flush (write_temp).  A large one would
 * gain nothing measurable from that and lose much more: on a journaled
 * ext4 each unnamed inode sits on the on-disk orphan list until it is
 * linked, and taking it off walks that list (1,000 files: 56 -> 97 ms in
 * bench/apply.sh).  Each file holds a descriptor until its rename. */
#define TMPFILE_MAX 64
static bool use_tmpfile(const struct plan *p, const struct lc_apply_opts *o) {
    struct rlimit rl;
    if (o->test_named_temps || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < 4 * TMPFILE_MAX ||
        faccessat(AT_FDCWD, "/proc/self/fd", X_OK, 0) < 0)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].new_type == LC_REG && ++n > TMPFILE_MAX)
            return false;
    return true;
}

static int execute(struct ctx *c) {
    for (size_t i = 0; i < c->p->n; i++)
        c->p->v[i].tmp_fd = -1;
    int r = execute_plan(c);
    if (r < 0) /* the read-only directories get their modes back until the resume */
        (void)lc_plan_set_unlocked(c->ws_fd, c->p, false, &(const char *){NULL});
    for (size_t i = 0; i < c->p->n; i++)
        if (c->p->v[i].tmp_fd >= 0)
            close(c->p->v[i].tmp_fd); /* a failed batch: unnamed, freed */
    return r;
}

static bool exists_at(int dirfd, const char *name) {
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int lc_apply(const char *stage_path, const struct lc_apply_opts *o, struct lc_apply_report *rep) {
    *rep = (struct lc_apply_report){0};
    enum stage_state state;
    int r = stage_probe_state(stage_path, &state);
    if (r < 0)
        return r;
    switch (state) {
    case STAGE_RUNNING: return -EBUSY;
    case STAGE_INTERRUPTED: return -ESTALE;
    case STAGE_CREATED: return -ENODATA;
    case STAGE_APPLIED:
        /* both names: only after a crash of an older pvisor, which wrote
         * the marker and then removed the intent */
        if (lc_apply_pending(stage_path)) {
            _cleanup_close_ int d = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            _cleanup_close_ int lk = d >= 0 ? openat(d, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) == 0 && unlinkat(d, LC_APPLY_INTENT, 0) == 0)
                fsync(d);
        }
        return -EALREADY;
    case STAGE_DROPPED: return -EALREADY;
    case STAGE_SEALED: break;
    }
    struct lc_stage *st = NULL;
    r = lc_stage_open(stage_path, &st);
    if (r < 0)
        return r;
    /* A stage another user owns, or may write in (a --stage DIR they made
     * first in /tmp), is theirs to change after the review: root's plain
     * apply wrote their bytes (found by a red-team pass).  Its upper/ is
     * the workspace root's owner's (stage-format.md), reached only
     * through the stage directory. */
    struct stat own;
    if (fstat(st->dir_fd, &own) < 0 || own.st_uid != geteuid() || (own.st_mode & 022)) {
        lc_stage_free(st);
        return -EPERM;
    }
    struct plan p = {0};
    struct lc_changeset *cs = NULL;
    struct ctx c = {.intent_lock = PTHREAD_MUTEX_INITIALIZER, .fs_lock = PTHREAD_MUTEX_INITIALIZER};
    _cleanup_free_ size_t *pending = NULL, *ready = NULL;
    _cleanup_close_ int lock = openat(st->dir_fd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (lock < 0) {
        r = -errno;
        goto out;
    }
    if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
        r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        goto out;
    }
    /* re-check under the lock */
    if (!exists_at(st->dir_fd, "sealed")) {
        r = -ESTALE;
        goto out;
    }
    if (!o->dry_run)
        stage_remove_leftovers(st->dir_fd);
    if (exists_at(st->dir_fd, LC_APPLIED) || exists_at(st->dir_fd, LC_DROPPED)) {
        r = -EALREADY;
        goto out;
    }
    if (st->upper_fd < 0) {
        r = -ENODATA;
        goto out;
    }
    pending = calloc(PENDING_MAX, sizeof *pending);
    ready = calloc(PENDING_MAX, sizeof *ready);
    if (!pending || !ready) {
        r = -ENOMEM;
        goto out;
    }
    struct stat sst, wst;
    if (fstat(st->dir_fd, &sst) < 0 || fstat(st->ws_fd, &wst) < 0) {
        r = -errno;
        goto out;
    }
    c = (struct ctx){.ws_fd = st->ws_fd,
                     .upper_fd = st->upper_fd,
                     .p = &p,
                     .o = o,
                     .rep = rep,
                     .pending = pending,
                     .ready = ready,
                     .stage_fd = st->dir_fd,
                     .same_fs = sst.st_dev == wst.st_dev,
                     .intent_lock = PTHREAD_MUTEX_INITIALIZER,
                     .ws_dev = wst.st_dev,
                     .fs_lock = PTHREAD_MUTEX_INITIALIZER};
    bool full = !o->paths;
    bool resume = exists_at(st->dir_fd, LC_APPLY_INTENT);
    bool review_checked = false; /* the changeset is the one the last review showed */
    bool review_stale = false;   /* it is not, and it has conflicts (said first) */
    /* An ID binds a changeset; a resume writes what its intent recorded,
     * which the changeset no longer says (part of it is written), and
     * which an apply without an ID may have recorded. */
    if (resume && o->expect_id) {
        r = -EINPROGRESS;
        goto out;
    }
    if (resume) {
        r = lc_intent_load(st->dir_fd, &p);
        if (r == -ENODATA) {
            /* an intent cut short: a power loss came before its first
             * flush, so nothing in the workspace was named or changed
             * (ensure_intent_durable): start afresh */
            if (!o->dry_run && unlinkat(st->dir_fd, LC_APPLY_INTENT, 0) < 0) {
                r = -errno;
                goto out;
            }
            resume = false;
        } else if (r < 0) {
            goto out;
        }
    }
    if (resume) {
        rep->resumed = true;
        /* leftovers of the interrupted attempt are ours: remove them first */
        if (!o->dry_run)
            lc_apply_remove_temps_checked(st->ws_fd, st->upper_fd, &p);
        r = lc_apply_classify(st->ws_fd, st->upper_fd, &p, rep);
        if (r == 0 && rep->n_conflicts)
            r = -EEXIST;
        if (r < 0)
            goto out;
        full = !p.subset; /* the intent decides */
        lc_plan_announce(&p, o);
        if (o->dry_run)
            goto out;
    } else {
        r = lc_changeset_load(st, &cs);
        if (r < 0 && st->stopped_at) {
            rep->beyond_bounds = true;
            rep->beyond_bounds_deleted = st->stopped_deleted;
            free(rep->failed_path);
            rep->failed_path = strdup(st->stopped_at);
        }
        if (r < 0)
            goto out;
        /* The changeset the plan is made of must be the one reviewed:
         * read under the lock, so no run can change the stage between this
         * and the last write (docs/lifecycle.md, "The changeset ID").
         * Before the conflicts: they are this changeset's, maybe not the
         * reviewed one's. */
        if (o->expect_id) {
            r = lc_changeset_id(cs, st->upper_fd, rep->changeset_id);
            if (r < 0) {
                rep->changeset_id[0] = '\0';
                if (r == -ESTALE) /* written meanwhile, past the lock */
                    r = -EKEYREJECTED;
                goto out;
            }
            if (strcmp(rep->changeset_id, o->expect_id) != 0) {
                r = -EKEYREJECTED;
                goto out;
            }
        } else {
            r = lc_apply_check_reviewed(st, cs, rep, &review_checked);
            /* another changeset than the one reviewed, with conflicts:
             * the workspace changed under staged paths (a file replaced
             * by a directory, one added in a deleted directory), which
             * the conflicts say; refused all the same, before any write */
            if (r == -EKEYREVOKED && rep->changeset_id[0] && cs->n_conflicts) {
                review_stale = true;
                r = 0;
            }
            if (r < 0)
                goto out;
        }
        r = lc_plan_from_changeset(cs, o, &p, rep);
        if (r == 0 && review_stale)
            r = -EKEYREVOKED;
        if (r == 0)
            r = lc_plan_check_writable(st->ws_fd, &p, rep);
        if (r < 0)
            goto out;
        lc_plan_announce(&p, o);
        r = lc_plan_check_room(st->ws_fd, st->upper_fd, c.same_fs, &p, PENDING_BYTES, WRITE_THREADS, &rep->room_need,
                               &rep->room_avail);
        if (r < 0 || o->dry_run)
            goto out;
        uint64_t rnd;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) {
            r = -EIO;
            goto out;
        }
        snprintf(p.id, sizeof p.id, "%016llx", (unsigned long long)rnd);
        p.subset = !full;
        r = find_locked(st->ws_fd, &p);
        if (r < 0)
            goto out;
        /* the stage directory's fsync is left to the first batch's syncfs
         * when that covers the stage (ensure_intent_durable) */
        lc_intent_remove_lost(st->dir_fd, st->ws_fd);
        r = lc_intent_write(st->dir_fd, &p, !c.same_fs);
        c.intent_durable = !c.same_fs;
        if (r < 0)
            goto out;
    }
    c.tmpfile = use_tmpfile(&p, o);
    c.keep_owners = geteuid() == 0 && userns_is_initial();
    r = execute(&c);
    if (r < 0)
        goto out; /* the intent stays: the next apply resumes */
    /* also after a full apply: else the review of the applied stage took
     * each directory it created for one the user made after the run ("1
     * added", a conflict).  Before the marker: a crash between the two
     * resumes from the intent, which records them again (harmless). */
    r = lc_apply_record_created_dirs(st->dir_fd, &p);
    if (r < 0)
        goto out;
    /* a subset: what it wrote is the workspace's state for a later run
     * over this stage (before the intent goes: a crash between the two
     * resumes, and records the same again) */
    if (!full && (r = lc_applied_record(st->dir_fd, st->upper_fd, st->ws_fd, &p)) < 0)
        goto out;
    if (full) {
        r = lc_apply_mark_applied(st->dir_fd);
        /* nothing is left to apply: no review to hold it to */
        if (r == 0)
            (void)unlinkat(st->dir_fd, LC_REVIEWED, 0);
        goto out;
    }
    /* After a subset apply the intent's removal is made durable (a lost
     * one would make the next apply roll forward an apply that is already
     * complete, and report any later edit of its paths as a conflict). */
    if (unlinkat(st->dir_fd, LC_APPLY_INTENT, 0) < 0) {
        r = -errno;
        goto out;
    }
    if (fsync(st->dir_fd) < 0) {
        /* the removal is not known to be durable: the intent is written
         * again (as in mark_applied), else the failure read "Nothing was
         * written" after the whole subset was */
        r = -errno;
        (void)lc_intent_write(st->dir_fd, &p, false);
        goto out;
    }
    /* also after the resume of an interrupted subset apply: the apply it
     * completes was held to the record (or to --expect), and nothing can
     * change the stage while its intent is there (a run, a restore, a
     * review's record all wait for it); else the rest, part of what was
     * reviewed, was refused as "changed since its last review" */
    if (review_checked || ((o->expect_id || resume) && exists_at(st->dir_fd, LC_REVIEWED)))
        lc_apply_record_rest_reviewed(st);
out:
    ctx_release_fs(&c);
    lc_plan_free(&p);
    lc_changeset_free(cs);
    lc_stage_free(st);
    return r;
}
