/* apply-resume.c: an interrupted apply's workspace, as the next apply
 * (or drop --force) finds it (docs/lifecycle.md, "apply"): each path of
 * the intent classified as old, final, or absent in the middle of a type
 * change (anything else is a conflict, and the resume writes nothing),
 * and the temp files it left removed, or put back where one holds a
 * version the user saved while apply ran. */
#include "lifecycle/lc-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#include "lifecycle/apply-plan.h"

/* ---- classification of the current workspace state ---- */

/* A read-only directory the interrupted apply made writable (struct
 * plan_unlocked) shows its old mode plus u+wx. */
static bool unlocked_as(const struct plan *p, const char *path, uint32_t old_mode, uint32_t mode) {
    for (size_t i = 0; i < p->n_unlocked; i++)
        if (strcmp(p->unlocked[i].path, path) == 0)
            return p->unlocked[i].mode == old_mode && (old_mode | 0300) == mode;
    return false;
}

/* Are the user xattrs of the workspace object fd those the interrupted
 * apply's conflict check verified (the intent's old digest)?  1/0/-errno.
 * Without a digest (an intent of an older pvisor, a preimage without
 * one) they are not compared.  Unreadable counts as changed, as in the
 * conflict check. */
static int xattrs_old(int fd, const struct plan_ent *e) {
    if (!e->old_has_xsha)
        return 1;
    unsigned char x[32];
    int r = pv_user_xattrs_sha256(fd, x);
    if (r < 0)
        return r;
    return r > 0 && memcmp(x, e->old_xsha, 32) == 0;
}

/* Are the user xattrs of the workspace directory fd those the stage
 * gives it (op_dir_meta set them, and the crash came before its chmod)?
 * 1/0/-errno. */
static int xattrs_as_upper(int fd, int upper_fd, const char *path) {
    if (upper_fd < 0)
        return 0;
    _cleanup_close_ int u = lc_open_beneath(upper_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (u < 0)
        return u == -ENOENT || u == -ENOTDIR ? 0 : u;
    struct lc_xattrs xu, xw;
    int r = lc_xattrs_read(u, true, &xu);
    if (r < 0)
        return r;
    r = lc_xattrs_read(fd, false, &xw);
    if (r == 0) {
        r = lc_xattrs_equal(&xu, &xw);
        lc_xattrs_free(&xw);
    }
    lc_xattrs_free(&xu);
    return r;
}

/* A directory's user xattrs, for both its old and its final state:
 * those the conflict check verified or, where the stage keeps it a
 * directory, the stage's (apply gives a directory its xattrs and then its
 * mode, op_dir_meta: a crash in between leaves one of each, and a
 * directory's old and final states differ in neither else).  Anything
 * else is the user's change since the crash, which op_dir_meta would
 * replace unseen: before, the resume never compared them. */
static int dir_xattrs_ours_fd(int upper_fd, int fd, const struct plan_ent *e) {
    int r = xattrs_old(fd, e);
    if (r == 0 && e->new_type == LC_DIR)
        r = xattrs_as_upper(fd, upper_fd, e->path);
    return r;
}

static int dir_xattrs_ours(int upper_fd, int parent, const char *name, const struct plan_ent *e) {
    if (!e->old_has_xsha)
        return 1;
    _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return dir_xattrs_ours_fd(upper_fd, fd, e);
}

int lc_apply_dir_unchanged(int upper_fd, int fd, const struct plan_ent *e) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    uint32_t m = st.st_mode & 07777;
    if (!S_ISDIR(st.st_mode) || (e->seen_ino && (uint64_t)st.st_ino != e->seen_ino) ||
        (m != e->old_mode && (m & 01777) != (e->new_mode & 01777)))
        return 0;
    return e->old_has_xsha ? dir_xattrs_ours_fd(upper_fd, fd, e) : 1;
}

/* Is the lower object at e->path in the entry's old state (its user
 * xattrs too: xattrs_old)? 1/0/-errno. */
static int matches_old(const struct plan *p, int upper_fd, int parent, const char *name, const struct stat *st,
                       const struct plan_ent *e) {
    if (e->old_type == LC_NONE)
        return st == NULL;
    if (!st || lc_type_of(st->st_mode) != e->old_type)
        return 0;
    if (e->old_type != LC_LNK && (st->st_mode & 07777) != e->old_mode &&
        !(e->old_type == LC_DIR && unlocked_as(p, e->path, e->old_mode, st->st_mode & 07777)))
        return 0;
    if (e->old_type == LC_REG || e->old_type == LC_LNK) {
        if (!e->old_has_sha)
            return 0;
        unsigned char sha[32];
        int r;
        if (e->old_type == LC_REG) {
            _cleanup_close_ int fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
            if (fd < 0)
                return -errno;
            r = xattrs_old(fd, e);
            if (r <= 0)
                return r;
            r = lc_sha256_fd(fd, sha);
        } else {
            _cleanup_free_ char *t = NULL;
            r = lc_readlink_at(parent, name, &t);
            if (r == 0)
                r = lc_sha256_buf(t, strlen(t), sha);
        }
        if (r < 0)
            return r;
        return memcmp(sha, e->old_sha, 32) == 0;
    }
    if (e->old_type == LC_DIR)
        return dir_xattrs_ours(upper_fd, parent, name, e);
    return 1;
}

/* Is the lower object in the entry's final state?  Its mode too (but the
 * set-id bits, which a chmod may drop by itself): what apply renamed into
 * place has the stage's mode, and a directory of the workspace gets it at
 * the end.  A mode that is neither the old nor the new one is the user's,
 * changed after the crash: a conflict (a directory that was made private
 * meanwhile was given the stage's mode, 0705, again).  A directory apply
 * creates has its mode only at the end (0700 until then): any mode. */
static int matches_final(int upper_fd, int parent, const char *name, const struct stat *st, const struct plan_ent *e) {
    if (e->new_type == LC_NONE)
        return st == NULL;
    if (!st || lc_type_of(st->st_mode) != e->new_type)
        return 0;
    if (e->new_type != LC_LNK && (e->new_type != LC_DIR || e->old_type == LC_DIR) &&
        (st->st_mode & 01777) != (e->new_mode & 01777))
        return 0;
    if (e->new_type == LC_REG) {
        _cleanup_close_ int a = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (a < 0)
            return -errno;
        _cleanup_close_ int b = lc_open_beneath(upper_fd, e->path, O_RDONLY | O_NOFOLLOW, 0);
        if (b < 0)
            return b;
        return lc_fd_equal(a, b);
    }
    if (e->new_type == LC_LNK) {
        _cleanup_free_ char *t = NULL;
        int r = lc_readlink_at(parent, name, &t);
        if (r < 0)
            return r;
        return strcmp(t, e->new_target) == 0;
    }
    if (e->new_type == LC_DIR && e->old_type == LC_DIR)
        return dir_xattrs_ours(upper_fd, parent, name, e);
    return 1;
}

/* lstat the workspace object of path; *ret_exists false when it (or a
 * parent) is absent.  A symlink on the way is an error (-ELOOP). */
static int ws_lstat(int ws_fd, const char *path, int *ret_parent, const char **ret_name, struct stat *st,
                    bool *ret_exists) {
    *ret_exists = false;
    *ret_parent = -1;
    int parent = lc_open_parent(ws_fd, path, ret_name);
    /* no directory there (gone, or replaced by a file or a symlink, e.g. by
     * this apply's own type change): the object is absent.  Writing below
     * it later fails safely (ENOTDIR/ELOOP), it is never followed. */
    if (parent == -ENOENT || parent == -ENOTDIR || parent == -ELOOP)
        return 0;
    if (parent < 0)
        return parent;
    *ret_parent = parent;
    if (fstatat(parent, *ret_name, st, AT_SYMLINK_NOFOLLOW) == 0)
        *ret_exists = true;
    else if (errno != ENOENT)
        return -errno;
    return 0;
}

/* Resume: classify every entry; conflicts are reported, nothing written. */
int lc_apply_classify(int ws_fd, int upper_fd, struct plan *p, struct lc_apply_report *rep) {
    for (size_t i = 0; i < p->n; i++) {
        struct plan_ent *e = &p->v[i];
        int parent = -1;
        const char *name;
        struct stat st;
        bool exists;
        int r = ws_lstat(ws_fd, e->path, &parent, &name, &st, &exists);
        if (r < 0) {
            if (parent >= 0)
                close(parent);
            return r;
        }
        int m = parent >= 0 ? matches_old(p, upper_fd, parent, name, exists ? &st : NULL, e) : e->old_type == LC_NONE;
        if (m == 1)
            e->state = ST_OLD;
        else if (m == 0 && (parent >= 0 ? (m = matches_final(upper_fd, parent, name, exists ? &st : NULL, e))
                                        : (m = e->new_type == LC_NONE)) == 1)
            e->state = ST_FINAL;
        else if (m == 0 && !exists && lc_plan_passes_absent(e))
            e->state = ST_ABSENT;
        else if (m == 0)
            r = lc_apply_report_conflict(rep, e->path,
                                         "changed in the workspace since the interrupted apply "
                                         "(neither the old nor the new version)");
        if (m < 0)
            r = m;
        if (exists) {
            e->seen_ino = (uint64_t)st.st_ino;
            e->seen_ctime = st.st_ctim;
            e->seen_mtime = st.st_mtim;
            e->seen_nlink = (uint64_t)st.st_nlink;
            e->seen_size = (uint64_t)st.st_size;
        }
        if (parent >= 0)
            close(parent);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The temp files of an interrupted apply, removed before it is resumed
 * (or by drop --force).  One may hold the user's version: killed between
 * replace_checked()'s exchange that brought out a version the user saved
 * (by rename) just before it, and the exchange back, an apply left that
 * version at the temp name and its own at the path.  Removed with the
 * other temp files, the save was lost, and the resume said "Applied" (the
 * path was in its final state).  A temp file that is neither the path's
 * old state (what a checked exchange brings out, before its unlink) nor
 * ours, while the path holds ours, is such a version: it goes back to the
 * path, ours comes out and is removed; the resume names the path as a
 * conflict.  Likewise a deleted path's temp file (delete_checked moves
 * the object aside) that is not the old state goes back to the path
 * while that is free.  upper_fd < 0: no replaced path's temp file goes
 * back. */
void lc_apply_remove_temps_checked(int ws_fd, int upper_fd, const struct plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        const char *name;
        _cleanup_close_ int parent = lc_open_parent(ws_fd, e->path, &name);
        if (parent < 0)
            continue;
        char tmp[64];
        lc_plan_tmp_name(p, i, tmp);
        struct stat tst, nst, back;
        if (fstatat(parent, tmp, &tst, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        /* a deletion (delete_checked) moved the user's version aside
         * back to its path, if that is free (else a newer save replaced it) */
        if (e->old_type != LC_NONE && e->old_type != LC_DIR && (e->new_type == LC_NONE || lc_plan_passes_absent(e)) &&
            matches_old(p, upper_fd, parent, tmp, &tst, e) == 0 &&
            renameat2(parent, tmp, parent, name, RENAME_NOREPLACE) == 0)
            continue;
        /* only a replacement (replace_checked) exchanges */
        if (upper_fd >= 0 && e->old_type != LC_NONE && e->new_type != LC_NONE && !lc_plan_passes_absent(e) &&
            fstatat(parent, name, &nst, AT_SYMLINK_NOFOLLOW) == 0 &&
            matches_old(p, upper_fd, parent, tmp, &tst, e) == 0 && matches_final(upper_fd, parent, tmp, &tst, e) == 0 &&
            matches_final(upper_fd, parent, name, &nst, e) == 1 &&
            renameat2(parent, tmp, parent, name, RENAME_EXCHANGE) == 0) {
            if (fstatat(parent, tmp, &back, AT_SYMLINK_NOFOLLOW) == 0 && back.st_ino == nst.st_ino &&
                back.st_dev == nst.st_dev)
                unlinkat(parent, tmp, 0);
            continue;
        }
        unlinkat(parent, tmp, 0);
    }
}
