/* apply-plan.c: what an apply of a changeset will do, in order (the plan
 * apply.c executes and intent.c journals): the selected entries, each
 * path's old and final state; conflicts refuse it. */
#include "lifecycle/apply-plan.h"
#include "util/cleanup.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool selected_by(const char *path, const char *const *paths) {
    for (const char *const *q = paths; *q; q++) {
        size_t l = strlen(*q);
        if (strncmp(path, *q, l) == 0 && (path[l] == '\0' || path[l] == '/'))
            return true;
    }
    return false;
}

/* The entries of a path's ancestors, nearest first: anc holds a copy of
 * the path, cut back at each call; the next ancestor's entry, or SIZE_MAX
 * when no ancestor is left that has one. */
static size_t ancestor_entry(const struct lc_changeset *cs, char *anc) {
    char *slash;
    while ((slash = strrchr(anc, '/'))) {
        *slash = '\0';
        size_t j = lc_changeset_find(cs, anc);
        if (j != SIZE_MAX)
            return j;
    }
    return SIZE_MAX;
}

/* A deletion below a workspace directory that the stage replaces by a
 * device node or socket, which apply never creates: the directory stays,
 * and so does what it holds (as a file replaced so stays whole), rather
 * than an empty directory where the agent left neither. */
static bool below_kept_directory(const struct lc_changeset *cs, const bool *sel, const char *path) {
    char anc[LC_MAX_PATH + 1];
    snprintf(anc, sizeof anc, "%s", path);
    for (size_t j; (j = ancestor_entry(cs, anc)) != SIZE_MAX;) {
        const struct lc_entry *a = &cs->entries[j];
        if (sel[j] && a->kind != LC_DELETED && a->old_type == LC_DIR && lc_type_special(a->new_type))
            return true;
    }
    return false;
}

int lc_plan_from_changeset(const struct lc_changeset *cs, const struct lc_apply_opts *o, struct plan *p,
                           struct lc_apply_report *rep) {
    bool *sel = calloc(cs->n + 1, sizeof *sel);
    if (!sel)
        return -ENOMEM;
    int r = 0;
    for (size_t i = 0; i < cs->n; i++)
        sel[i] = !o->paths || selected_by(cs->entries[i].path, o->paths);
    if (o->paths) {
        /* every --path must match something */
        for (const char *const *q = o->paths; *q && r == 0; q++) {
            bool any = false;
            for (size_t i = 0; i < cs->n && !any; i++)
                any = selected_by(cs->entries[i].path, (const char *const[]){*q, NULL});
            if (!any)
                r = lc_apply_report_conflict(rep, *q, "no staged change at or below this path");
        }
        if (r == 0 && rep->n_conflicts) {
            free(sel);
            return -ENOENT;
        }
        /* a selected entry needs its created parent directories (entries
         * are in path order: ancestors come first, found by bisection) */
        for (size_t i = cs->n; i-- > 0;) {
            if (!sel[i])
                continue;
            char anc[LC_MAX_PATH + 1];
            snprintf(anc, sizeof anc, "%s", cs->entries[i].path);
            for (size_t j; (j = ancestor_entry(cs, anc)) != SIZE_MAX;) {
                const struct lc_entry *a = &cs->entries[j];
                if (a->new_type == LC_DIR && a->kind != LC_DELETED && a->kind != LC_MODIFIED)
                    sel[j] = true;
            }
        }
    }
    p->v = calloc(cs->n + 1, sizeof *p->v);
    if (!p->v) {
        free(sel);
        return -ENOMEM;
    }
    bool kept_dirs = false; /* a directory replaced by a special file was skipped */
    for (size_t i = 0; i < cs->n && r == 0; i++) {
        const struct lc_entry *e = &cs->entries[i];
        if (!sel[i])
            continue;
        /* Written already but for the setuid/setgid bits apply drops (an
         * earlier apply --path; or the agent only added them): the
         * workspace holds what this apply would write, so there is nothing
         * to do, and no conflict. */
        if (!o->keep_special_modes && e->kind == LC_MODIFIED && e->new_type != LC_DIR && e->changes == LC_CH_MODE &&
            (e->new_mode & 06000) && e->old_mode == (e->new_mode & ~(uint32_t)06000))
            continue;
        if (e->conflict) {
            r = lc_apply_report_conflict(rep, e->path, e->conflict);
            continue;
        }
        if (!lc_path_valid(e->path) &&
            !(lc_path_is_root(e->path) && e->kind == LC_MODIFIED && e->old_type == LC_DIR && e->new_type == LC_DIR)) {
            r = lc_apply_report_conflict(rep, e->path, "invalid name in the stage");
            continue;
        }
        if (e->kind != LC_DELETED && lc_type_special(e->new_type)) {
            rep->n_skipped_special++;
            kept_dirs |= e->old_type == LC_DIR;
            continue;
        }
        if (kept_dirs && e->kind == LC_DELETED && below_kept_directory(cs, sel, e->path))
            continue;
        struct plan_ent *pe = &p->v[p->n];
        if (!(pe->path = strdup(e->path))) {
            r = -ENOMEM;
            break;
        }
        p->n++;
        if (e->old_type != LC_NONE) {
            /* conflict-free: the current lower is the preimage */
            pe->old_type = e->pre->type;
            pe->old_mode = e->pre->mode;
            pe->old_has_sha = e->pre->has_sha;
            memcpy(pe->old_sha, e->index_refreshed ? e->old_sha : e->pre->sha, 32);
            pe->old_has_xsha = e->pre->has_xattr_sha && (pe->old_type == LC_REG || pe->old_type == LC_DIR);
            memcpy(pe->old_xsha, e->pre->xattr_sha, 32);
            pe->seen_ino = e->old_ino;
            pe->seen_ctime = e->old_ctime;
            pe->seen_mtime = e->old_mtime;
            pe->seen_nlink = e->old_nlink;
            pe->seen_size = e->old_size;
        }
        if (e->kind != LC_DELETED) {
            pe->new_type = e->new_type;
            pe->new_mode = e->new_mode;
            /* on a directory setgid only passes its group on to what
             * is created in it (a shared project directory): kept */
            if ((pe->new_mode & 06000) && !o->keep_special_modes && pe->new_type != LC_DIR) {
                pe->new_mode &= ~(uint32_t)06000;
                rep->n_setid_dropped++;
            }
            if (e->new_target && !(pe->new_target = strdup(e->new_target))) {
                r = -ENOMEM;
                break;
            }
            pe->atime = e->new_atime;
            pe->mtime = e->new_mtime;
        }
        pe->state = ST_OLD;
    }
    free(sel);
    if (r == 0 && rep->n_conflicts)
        r = -EEXIST;
    return r;
}

void lc_plan_announce(const struct plan *p, const struct lc_apply_opts *o) {
    if (!o->on_op)
        return;
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        const char *a;
        if (e->new_type == LC_NONE)
            a = "delete";
        else if (e->new_type == LC_DIR)
            a = e->old_type == LC_DIR ? "chmod" : "mkdir";
        else if (e->new_type == LC_LNK)
            a = "symlink";
        else if (e->new_type == LC_FIFO)
            a = "mkfifo";
        else
            a = "write";
        o->on_op(a, e->path, o->userdata);
    }
}

static bool is_dirish(enum lc_type t) {
    return t == LC_DIR;
}

bool lc_plan_passes_absent(const struct plan_ent *e) {
    return e->old_type != LC_NONE && e->new_type != LC_NONE && is_dirish(e->old_type) != is_dirish(e->new_type);
}

/* A read-only btrfs subvolume (a snapshot taken with -r) is on a
 * read-write mount: the review's check of read-only mounts (statvfs)
 * passes it, and apply met the file system's EROFS halfway, after deleting
 * and replacing other paths, with a resume that fails the same way for
 * good (tested).  Its directories refuse write access (EROFS) whoever
 * asks, so each directory the plan changes something in (the nearest one
 * there is, for what apply creates) is asked once before anything is
 * written; each such entry is a conflict.  Other refusals (EACCES: a 0555
 * directory apply unlocks) are not this. */
int lc_plan_check_writable(int ws_fd, const struct plan *p, struct lc_apply_report *rep) {
    char last[PATH_MAX] = "", dir[PATH_MAX];
    bool last_rofs = false;
    int r = 0;
    for (size_t i = 0; i < p->n && r == 0; i++) {
        const struct plan_ent *e = &p->v[i];
        /* a directory's mode and xattrs change in place */
        bool in_place = e->old_type == LC_DIR && e->new_type == LC_DIR;
        if (snprintf(dir, sizeof dir, "%s", e->path) >= (int)sizeof dir)
            continue;
        for (bool first = true;; first = false) {
            if (!(first && in_place)) {
                char *slash = strrchr(dir, '/');
                if (slash)
                    *slash = '\0';
                else if (strcmp(dir, ".") == 0)
                    break;
                else
                    strcpy(dir, ".");
            }
            if (strcmp(dir, last) == 0)
                break;
            int a = faccessat(ws_fd, dir, W_OK, AT_EACCESS) == 0 ? 0 : errno;
            if (a != ENOENT && a != ENOTDIR) {
                last_rofs = a == EROFS;
                snprintf(last, sizeof last, "%s", dir);
                break;
            }
        }
        if (strcmp(dir, last) == 0 && last_rofs)
            r = lc_apply_report_conflict(rep, e->path,
                                         "on a read-only file system in the workspace (a read-only btrfs subvolume or "
                                         "snapshot): apply cannot write there; make it writable, or apply the rest "
                                         "with --path");
    }
    if (r == 0 && rep->n_conflicts)
        r = -EEXIST;
    return r;
}

/* Whether the file apply writes at path goes without copy-on-write
 * (btrfs chattr +C): the workspace file it replaces is (apply keeps its
 * flags), or, for a new one, the nearest directory there is (new files
 * and directories inherit it).  Such a file cannot share blocks with the
 * stage (FICLONE refuses copy-on-write and nocow files together). */
static bool dest_nocow(int ws_fd, const char *path, bool replaces) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    bool dir = !replaces;
    for (;;) {
        if (dir) { /* the directory that holds buf */
            char *slash = strrchr(buf, '/');
            if (slash)
                *slash = '\0';
            else
                strcpy(buf, ".");
        }
        _cleanup_close_ int fd = lc_open_beneath(ws_fd, buf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
        struct stat st;
        int flags = 0;
        if (fd >= 0)
            return fstat(fd, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) &&
                   ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_NOCOW_FL);
        if (fd != -ENOENT || strcmp(buf, ".") == 0)
            return false;
        dir = true;
    }
}

/* What the plan's files without copy-on-write need (dest_nocow) where
 * the rest can share blocks with the stage: each file's blocks in the
 * stage, a replaced one's old blocks kept until its rename. */
static uint64_t nocow_need(int ws_fd, int upper_fd, const struct plan *p) {
    uint64_t need = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        struct stat st;
        if (e->new_type != LC_REG || fstatat(upper_fd, e->path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            !dest_nocow(ws_fd, e->path, e->old_type == LC_REG))
            continue;
        need += (uint64_t)st.st_blocks * 512;
    }
    return need;
}

/* Room for the plan: the content it writes (what each staged file
 * allocates, so a sparse file counts what it holds; every name of a file
 * hard-linked in the stage is written as a file of its own, so a small
 * stage can ask for far more) must fit in what the workspace's file
 * system has available, or nothing is written (-ENOSPC, *ret_need and
 * *ret_avail set).  What apply frees counts: the files it deletes go
 * before anything is written (step 1 of execute_plan), and a file it
 * replaces goes at its rename, so only one batch's replacements (temp and
 * old file side by side) need room on top of the growth.  Where the copy
 * can share blocks with the stage (a reflink, same file system: btrfs,
 * xfs), the content costs nothing and only the files that cannot share
 * (nocow_need: before, they were taken to share too, and apply ran out of
 * room halfway; tested) are counted.  (Split from apply.c.) */
int lc_plan_check_room(int ws_fd, int upper_fd, bool same_fs, const struct plan *p, uint64_t pending_bytes,
                       unsigned writers, uint64_t *ret_need, uint64_t *ret_avail) {
    uint64_t growth = 0, overlap = 0, freed = 0;
    const char *largest = NULL;
    uint64_t largest_bytes = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        bool deleted_first = e->old_type != LC_NONE && (e->new_type == LC_NONE || lc_plan_passes_absent(e));
        uint64_t old = 0; /* what the workspace's file there frees (not when it has other names) */
        struct stat st;
        if (e->old_type == LC_REG && fstatat(ws_fd, e->path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_nlink == 1)
            old = (uint64_t)st.st_blocks * 512;
        if (deleted_first)
            freed += old;
        if (e->new_type != LC_REG || fstatat(upper_fd, e->path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        uint64_t b = (uint64_t)st.st_blocks * 512;
        if (e->old_type == LC_REG && !deleted_first) { /* replaced at its rename */
            growth += b > old ? b - old : 0;
            overlap += b < old ? b : old;
        } else {
            growth += b;
        }
        if (b > largest_bytes) {
            largest_bytes = b;
            largest = e->path;
        }
    }
    /* a batch stops taking files past pending_bytes; each of the writers
     * may be in the middle of one more */
    uint64_t batch = pending_bytes + writers * largest_bytes;
    uint64_t need = growth + (overlap < batch ? overlap : batch);
    need = need > freed ? need - freed : 0;
    struct statvfs sv;
    if (fstatvfs(ws_fd, &sv) < 0)
        return 0; /* unknown: the writes find out */
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    *ret_need = need;
    *ret_avail = avail;
    if (need <= avail)
        return 0;
    if (same_fs && largest) {
        _cleanup_close_ int in = lc_open_beneath(upper_fd, largest, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
        _cleanup_close_ int out = in >= 0 ? openat(ws_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) : -1;
        if (out >= 0 && ioctl(out, FICLONE, in) == 0) {
            /* but a file written without copy-on-write shares nothing */
            need = nocow_need(ws_fd, upper_fd, p);
            *ret_need = need;
            if (need <= avail)
                return 0;
        }
    }
    return -ENOSPC;
}
