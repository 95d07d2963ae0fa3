/* changeset.c: read a stage into a changeset (see lifecycle.h).
 *
 * The upper is walked with one directory fd per level (single-component,
 * no-follow opens), in parallel with the lower directory of the same path
 * when there is one.  Each difference becomes an entry, joined with the
 * journal preimage of its path; the entry's conflict says whether the
 * current lower still is what the agent saw (type, mode, SHA-256 of the
 * content or of the symlink target).  Rename detection (review only,
 * changeset-annotate.c) uses the origin map (changeset-origin.c): an added
 * object whose upper inode was copied up from the lower inode of a
 * recorded path that is now deleted was renamed.
 *
 * Bounds: paths (LC_MAX_PATH), depth (LC_MAX_DEPTH), objects visited and
 * entries (LC_MAX_ENTRIES), journal size and line length.  What the review
 * warns of is warnings.c's.
 */
#include "lifecycle/lc-internal.h"
#include "lifecycle/apply-plan.h"
#include "stage/stage.h"
#include "util/sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

const char *lc_kind_name(enum lc_kind k) {
    static const char *const names[] = {"added", "deleted", "modified", "type_changed"};
    return (unsigned)k < ARRAY_SIZE(names) ? names[k] : "unknown";
}

/* ---- stage ---- */

void lc_stage_free(struct lc_stage *st) {
    if (!st)
        return;
    if (st->dir_fd >= 0)
        close(st->dir_fd);
    if (st->upper_fd >= 0)
        close(st->upper_fd);
    if (st->ws_fd >= 0)
        close(st->ws_fd);
    free(st->path);
    free(st->workspace);
    free(st->stopped_at);
    free(st);
}

int lc_stage_open(const char *path, struct lc_stage **ret_stage) {
    struct lc_stage *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    st->dir_fd = st->upper_fd = st->ws_fd = -1;
    /* Before the first goto: the cleanup must never see them uninitialised. */
    _cleanup_free_ char *ver = NULL, *meta = NULL;
    int r;
    st->path = strdup(path);
    if (!st->path) {
        r = -ENOMEM;
        goto fail;
    }
    st->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->dir_fd < 0) {
        r = -errno;
        goto fail;
    }
    r = read_file_at(st->dir_fd, "version", 256, &ver, NULL);
    if (r < 0) {
        r = r == -ENOENT ? -EINVAL : r;
        goto fail;
    }
    if (strcmp(ver, "pvisor-stage 1\n") != 0) {
        r = strncmp(ver, "pvisor-stage ", 13) == 0 ? -EPROTO : -EINVAL;
        goto fail;
    }
    r = read_file_at(st->dir_fd, "meta.json", 1 << 20, &meta, NULL);
    if (r < 0) {
        r = r == -ENOENT ? -EINVAL : r;
        goto fail;
    }
    json_t *m = json_loads(meta, 0, NULL);
    const char *ws = json_string_value(json_object_get(m, "workspace"));
    if (!ws || ws[0] != '/' || strlen(ws) > LC_MAX_PATH) {
        json_decref(m);
        r = -EINVAL;
        goto fail;
    }
    st->workspace = strdup(ws);
    json_decref(m);
    if (!st->workspace) {
        r = -ENOMEM;
        goto fail;
    }
    st->upper_fd = openat(st->dir_fd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->upper_fd < 0 && errno != ENOENT) { /* a dropped stage has no upper */
        r = -errno;
        goto fail;
    }
    st->ws_fd = open(st->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->ws_fd < 0) {
        r = -errno;
        goto fail;
    }
    struct stat sst;
    if (fstatat(st->dir_fd, "sealed", &sst, AT_SYMLINK_NOFOLLOW) == 0) {
        st->sealed = true;
        st->seal_ino = (uint64_t)sst.st_ino;
        st->seal_ctime = sst.st_ctim;
    }
    *ret_stage = st;
    return 0;
fail:
    lc_stage_free(st);
    return r;
}

/* ---- walk ---- */

struct walk {
    struct lc_changeset *cs;
    int ws_fd;
    int stage_fd;     /* the stage directory */
    bool keep_owners; /* apply run by us gives what it writes the stage's owners (root, apply.c give_owner) */
    size_t visited;
    const struct lc_ino_pair *orig; /* origin map, sorted by upper inode */
    size_t n_orig;
    bool origin_usable; /* the map belongs to this upper (its file system and directory) */
    bool origin_legacy; /* ... and began as a version 1 map (origin_load) */
    char **ours;        /* directories created by earlier --path applies, sorted */
    size_t n_ours;
    char path[LC_MAX_PATH + 2];
    char stopped[LC_MAX_PATH + 2]; /* where a bound stopped the walk (lc_stage.stopped_at) */
    bool stopped_deleted;          /* lc_stage.stopped_deleted */
    unsigned in_deleted;           /* > 0: walking lower objects the stage deletes */
    dev_t ws_dev;                  /* the workspace's file system (its root's st_dev) */
    uint64_t index_budget;         /* of LC_GIT_INDEX_READ_TOTAL, the bytes of git indexes left to read */
};

/* A bound stops the walk at w->path: remember where, for the message. */
static int stop_at_bound(struct walk *w, int err) {
    if (!w->stopped[0]) {
        memcpy(w->stopped, w->path, strlen(w->path) + 1);
        w->stopped_deleted = w->in_deleted > 0;
    }
    return err;
}

void lc_changeset_free(struct lc_changeset *cs) {
    if (!cs)
        return;
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        free(e->path);
        free(e->old_target);
        free(e->new_target);
        free(e->renamed_from);
        for (size_t k = 0; k < e->n_index_hides_names; k++)
            free(e->index_hides_names[k]);
        free(e->index_hides_names);
    }
    free(cs->entries);
    lc_preimages_free(cs->pre, cs->n_pre);
    free(cs->stage_path);
    free(cs->workspace);
    free(cs);
}

static struct lc_entry *add_entry(struct walk *w, enum lc_kind kind) {
    struct lc_changeset *cs = w->cs;
    if (cs->n >= LC_MAX_ENTRIES)
        return NULL;
    if (cs->n % 1024 == 0) {
        struct lc_entry *nv = realloc(cs->entries, (cs->n + 1024) * sizeof *nv);
        if (!nv)
            return NULL;
        cs->entries = nv;
    }
    struct lc_entry *e = &cs->entries[cs->n];
    *e = (struct lc_entry){0};
    e->path = strdup(w->path);
    if (!e->path)
        return NULL;
    e->kind = kind;
    cs->n++;
    return e;
}

/* Append "/name" (or "name" at the root) to w->path; returns the old length. */
static int path_push(struct walk *w, const char *name, size_t *ret_old) {
    size_t len = strlen(w->path), nl = strlen(name);
    if (nl == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strchr(name, '/'))
        return -EINVAL;
    if (len + 1 + nl > LC_MAX_PATH)
        return stop_at_bound(w, -ENAMETOOLONG);
    if (len)
        w->path[len++] = '/';
    memcpy(w->path + len, name, nl + 1);
    *ret_old = len ? len - 1 : 0;
    return 0;
}

static int lc_cmp_strp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int sorted_names(int dirfd, char ***ret, size_t *ret_n) {
    DIR *d = NULL;
    int rd = dup_opendir(dirfd, &d);
    if (rd < 0)
        return rd;
    size_t n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    int r = 0;
    while ((de = readdir_no_dots(d))) {
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            if (cap > LC_MAX_ENTRIES) {
                r = -E2BIG;
                break;
            }
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return r;
    }
    if (n)
        qsort(v, n, sizeof *v, lc_cmp_strp);
    *ret = v;
    *ret_n = n;
    return 0;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Why the user xattrs of the workspace's dirfd/name are a conflict: they
 * differ from those the preimage recorded (pv_user_xattrs_sha256), or
 * they cannot be read, which counts as a conflict too (apply would
 * replace them unseen) but is not said to be a change; NULL when they are
 * the recorded ones. */
static const char *xattrs_conflict(int dirfd, const char *name, const unsigned char want[32]) {
    _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    unsigned char got[32];
    int r = fd < 0 ? -errno : pv_user_xattrs_sha256(fd, got);
    if (r > 0)
        return memcmp(got, want, 32) != 0 ? "extended attributes (user.*) changed in the workspace since the run"
                                          : NULL;
    if (r == 0)
        return "extended attributes (user.*) not kept by the workspace's file system now (it kept them at the run): "
               "apply cannot tell whether they changed; apply the rest with --path";
    if (r == -EACCES || r == -EPERM)
        return "extended attributes (user.*) could not be read in the workspace (permission denied), so whether they "
               "changed since the run is unknown: make the file readable to you, then try again";
    if (r == -EIO)
        return "extended attributes (user.*) could not be read in the workspace (Input/output error), so whether "
               "they changed since the run is unknown: check the file system (dmesg, 'getfattr -d' the path), then "
               "try again";
    return "extended attributes (user.*) could not be read in the workspace, so whether they changed since the run "
           "is unknown: check the path ('getfattr -d' it), then try again";
}

static int hash_lower(int dirfd, const char *name, const struct stat *st, unsigned char sha[32]) {
    if (S_ISREG(st->st_mode)) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
            return -errno;
        int r = lc_sha256_fd(fd, sha);
        close(fd);
        return r;
    }
    if (S_ISLNK(st->st_mode)) {
        _cleanup_free_ char *t = NULL;
        int r = lc_readlink_at(dirfd, name, &t);
        if (r < 0)
            return r;
        return lc_sha256_buf(t, strlen(t), sha);
    }
    return -EINVAL;
}

/* Why apply cannot carry out e in the workspace, whatever the stage holds,
 * or NULL.  name is the workspace object in lower_dirfd (exists: there is
 * one; lower_dirfd -1: its directory is one apply creates).  The view lets
 * the agent change what the kernel keeps the user from changing (its
 * writes go to the stage, as kernel overlayfs's go to its upper), so the
 * kernel would refuse the change only when apply makes it, after apply
 * has deleted and replaced other paths: EBUSY for a mount point it
 * removes or renames over (a tmpfs node_modules the agent deleted),
 * EPERM for an immutable or append-only object or directory (chattr +i,
 * +a), EROFS on a read-only mount (a read-only bind mount of vendored
 * code).  The resume of such an apply fails the same way, for good.  A
 * conflict instead: review names it, and apply refuses before it writes. */
static const char *unappliable(int lower_dirfd, const char *name, const struct lc_entry *e, bool exists) {
    if (e->kind != LC_DELETED && lc_type_special(e->new_type))
        return NULL; /* never applied: what is there stays */
    /* a directory's mode and xattrs change in place; everything else
     * adds, removes or renames a name in the directory that holds it */
    bool in_place = exists && e->kind == LC_MODIFIED && e->new_type == LC_DIR;
    bool mount_root = false;
    struct statx sx;
    if (exists && statx(lower_dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &sx) == 0) {
        uint64_t a = sx.stx_attributes & sx.stx_attributes_mask;
        if (a & STATX_ATTR_IMMUTABLE)
            return "immutable in the workspace (chattr +i): apply cannot change, replace or delete it; 'chattr -i' "
                   "it, or apply the rest with --path";
        if (a & STATX_ATTR_APPEND)
            return "append-only in the workspace (chattr +a): apply cannot change, replace or delete it; 'chattr "
                   "-a' it, or apply the rest with --path";
        mount_root = a & STATX_ATTR_MOUNT_ROOT;
        if (mount_root && !in_place)
            return "a mount point in the workspace (another file system is mounted here): apply cannot delete or "
                   "replace it; unmount it, or apply the rest with --path";
    }
    if (lower_dirfd < 0)
        return NULL;
    struct statvfs sv;
    if (mount_root) { /* in place, on the file system mounted here */
        _cleanup_close_ int fd = openat(lower_dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY))
            return "on a read-only mount in the workspace: apply cannot change it; remount it read-write, or "
                   "apply the rest with --path";
        return NULL;
    }
    if (fstatvfs(lower_dirfd, &sv) == 0 && (sv.f_flag & ST_RDONLY))
        return "on a read-only mount in the workspace: apply cannot write there; remount it read-write, or apply "
               "the rest with --path";
    if (in_place || statx(lower_dirfd, "", AT_EMPTY_PATH, 0, &sx) != 0)
        return NULL;
    uint64_t a = sx.stx_attributes & sx.stx_attributes_mask;
    if (a & STATX_ATTR_IMMUTABLE)
        return "in an immutable directory of the workspace (chattr +i): apply cannot add, replace or delete "
               "anything there; 'chattr -i' the directory, or apply the rest with --path";
    /* apply writes every non-directory to a temp name and renames it into
     * place, which takes a name out of the directory, as a deletion does */
    if ((a & STATX_ATTR_APPEND) && !(e->kind == LC_ADDED && e->new_type == LC_DIR))
        return "in an append-only directory of the workspace (chattr +a): apply cannot replace or delete "
               "anything there, nor rename a new file into place; 'chattr -a' the directory, or apply the rest "
               "with --path";
    return NULL;
}

/* Fill the old_* side and the conflict of e from the lower object.
 * lower_sha: the lower file's SHA-256 when the caller already read it
 * (NULL: read it here when a preimage needs it). */
static int set_old(struct walk *w, struct lc_entry *e, int lower_dirfd, const char *name, const struct stat *lst,
                   const unsigned char *lower_sha) {
    e->pre = lc_preimage_find(w->cs->pre, w->cs->n_pre, e->path);
    if (lst) {
        e->old_type = lc_type_of(lst->st_mode);
        e->old_mode = lst->st_mode & 07777;
        e->old_size = (uint64_t)lst->st_size;
        e->old_ino = (uint64_t)lst->st_ino;
        e->old_ctime = lst->st_ctim;
        e->old_mtime = lst->st_mtim;
        e->old_nlink = (uint64_t)lst->st_nlink;
        if (S_ISLNK(lst->st_mode)) {
            int r = lc_readlink_at(lower_dirfd, name, &e->old_target);
            if (r < 0)
                return r;
        }
        if (e->pre && lower_sha && S_ISREG(lst->st_mode)) {
            memcpy(e->old_sha, lower_sha, 32);
            e->old_sha_known = true;
        } else if (e->pre && (S_ISREG(lst->st_mode) || S_ISLNK(lst->st_mode))) {
            int r = hash_lower(lower_dirfd, name, lst, e->old_sha);
            if (r < 0)
                return r;
            e->old_sha_known = true;
        }
    }
    const struct lc_preimage *p = e->pre;
    /* a host edit the command's change (a write, a delete) may have undone:
     * its preimage, taken at that change, holds the edit */
    if (p && p->changed_during_run && e->kind != LC_ADDED) {
        e->warnings |= LC_W_CHANGED_DURING_RUN;
        w->cs->warnings |= LC_W_CHANGED_DURING_RUN;
    }
    if (e->old_type == LC_NONE)
        e->conflict = p && p->type != LC_NONE ? "deleted in the workspace since the run" : NULL;
    else if (p && p->type == LC_NONE) { /* an earlier apply --path deleted it */
        free(e->old_target);
        e->old_target = NULL;
        e->conflict = "exists in the workspace, where an earlier 'pvisor apply --path' of this stage deleted it "
                      "(created after that apply)";
    } else if (!p) {
        free(e->old_target); /* never shown (review, diff): the agent never saw it */
        e->old_target = NULL;
        e->conflict = "exists in the workspace but the agent never saw it (created or replaced after the run, or "
                      "hidden from it: a credential location or an --access deny: path)";
    } else if (p->type != e->old_type)
        e->conflict = "type changed in the workspace since the run";
    else if ((e->old_type == LC_REG || e->old_type == LC_LNK) && (!p->has_sha || memcmp(p->sha, e->old_sha, 32) != 0) &&
             !(e->old_type == LC_REG && p->has_sha && e->old_sha_known &&
               (e->index_refreshed =
                    lc_git_index_refreshed(w->stage_fd, lower_dirfd, name, e->path, p->sha, e->old_sha))))
        e->conflict = e->old_type == LC_LNK ? "symlink target changed in the workspace since the run"
                                            : "content changed in the workspace since the run";
    else if (p->mode != e->old_mode && e->old_type != LC_LNK)
        e->conflict = "mode changed in the workspace since the run";
    /* root's apply gives what it writes the stage object's owner: a chown
     * or chgrp the user made since the agent's first change (after the
     * review, say, to take a group's write access away) was undone
     * unseen (found by a red-team pass) */
    else if (w->keep_owners && p->has_owner && e->old_type != LC_DIR && /* apply gives a directory no owner */
             (p->uid != lst->st_uid || p->gid != lst->st_gid))
        e->conflict = "owner or group changed in the workspace since the run";
    else if (p->has_xattr_sha && (e->old_type == LC_REG || e->old_type == LC_DIR))
        e->conflict = xattrs_conflict(lower_dirfd, name, p->xattr_sha);
    if (!e->conflict)
        e->conflict = unappliable(lower_dirfd, name, e, lst != NULL);
    if (e->conflict)
        w->cs->n_conflicts++;
    if (e->old_type == LC_REG && (e->kind == LC_DELETED || e->kind == LC_TYPE_CHANGED || (e->changes & LC_CH_CONTENT)))
        w->cs->bytes_old += e->old_size;
    return 0;
}

/* Is path (relative) a linked worktree's administrative directory,
 * .git/worktrees/NAME, of any .git in the tree?  The sandbox does not show
 * a worktree outside the workspace, so git worktree prune (or gc) there
 * deletes it, and apply would break that worktree. */
static bool is_worktree_admin(const char *p) {
    static const char admin[] = ".git/worktrees";
    const size_t al = sizeof admin - 1;
    const char *last = strrchr(p, '/'); /* before NAME */
    if (!last || !last[1] || (size_t)(last - p) < al)
        return false;
    const char *d = last - al; /* where .git/worktrees would start */
    return memcmp(d, admin, al) == 0 && (d == p || d[-1] == '/');
}

/* Every lower object at w->path (and below, for a directory) is deleted. */
static int lower_deleted_rec(struct walk *w, int lower_dirfd, const char *name, const struct stat *lst, int depth);
static int walk_lower_deleted(struct walk *w, int lower_dirfd, const char *name, const struct stat *lst, int depth) {
    w->in_deleted++;
    int r = lower_deleted_rec(w, lower_dirfd, name, lst, depth);
    w->in_deleted--;
    return r;
}

static int lower_deleted_rec(struct walk *w, int lower_dirfd, const char *name, const struct stat *lst, int depth) {
    if (++w->visited > LC_MAX_ENTRIES)
        return -E2BIG;
    if (depth > LC_MAX_DEPTH)
        return stop_at_bound(w, -ELOOP);
    struct lc_entry *e = add_entry(w, LC_DELETED);
    if (!e)
        return w->cs->n >= LC_MAX_ENTRIES ? -E2BIG : -ENOMEM;
    int r = set_old(w, e, lower_dirfd, name, lst, NULL);
    if (r >= 0 && S_ISDIR(lst->st_mode) && is_worktree_admin(e->path)) {
        e->warnings |= LC_W_GIT_WORKTREE;
        w->cs->warnings |= LC_W_GIT_WORKTREE;
    }
    if (r >= 0 && !S_ISDIR(lst->st_mode) && lc_path_is_git_ref(e->path)) {
        e->warnings |= LC_W_GIT_REFS;
        w->cs->warnings |= LC_W_GIT_REFS;
    }
    if (r < 0 || !S_ISDIR(lst->st_mode))
        return r;
    _cleanup_close_ int sub = lc_open_beneath(lower_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (sub < 0)
        return sub;
    char **names = NULL;
    size_t n = 0;
    r = sorted_names(sub, &names, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r >= 0; i++) {
        struct stat cst;
        if (fstatat(sub, names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            r = -errno;
            break;
        }
        size_t old;
        r = path_push(w, names[i], &old);
        if (r < 0)
            break;
        r = lower_deleted_rec(w, sub, names[i], &cst, depth + 1);
        w->path[old] = '\0';
    }
    free_names(names, n);
    return r;
}

/* Is there a symlink in dirfd (-1: none) whose target names name in the
 * same directory (name, ./name) or ends in /name?  A hook that is such a
 * link runs what its *.sample holds. */
static bool dir_links_to(int dirfd, const char *name) {
    if (dirfd < 0)
        return false;
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return true; /* unknown: keep the warnings */
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return true;
    }
    bool found = false;
    size_t nl = strlen(name);
    for (struct dirent *de; !found && (de = readdir(d));) {
        if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
            continue;
        char t[PATH_MAX];
        ssize_t n = readlinkat(dirfd, de->d_name, t, sizeof t - 1);
        if (n < 0)
            continue;
        t[n] = '\0';
        found = (size_t)n >= nl && strcmp(t + n - nl, name) == 0 && ((size_t)n == nl || t[n - nl - 1] == '/');
    }
    closedir(d);
    return found;
}

static int walk_upper(struct walk *w, int upper_dirfd, int lower_dirfd, bool opaque, int depth);

/* Do the user xattrs of the open upper object u and lower object l differ? */
static int xattrs_differ_fd(int u, int l, bool *ret) {
    *ret = false;
    struct lc_xattrs xu, xl;
    int r = lc_xattrs_read(u, true, &xu);
    if (r < 0)
        return r;
    r = lc_xattrs_read(l, false, &xl);
    if (r < 0) {
        lc_xattrs_free(&xu);
        return r;
    }
    *ret = !lc_xattrs_equal(&xu, &xl);
    lc_xattrs_free(&xu);
    lc_xattrs_free(&xl);
    return 0;
}

static int xattrs_differ(int ufd_dir, const char *name, int lower_dirfd, bool *ret) {
    *ret = false;
    _cleanup_close_ int u = openat(ufd_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    _cleanup_close_ int l = openat(lower_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (u < 0 || l < 0)
        return 0; /* symlinks, sockets: no user xattrs */
    return xattrs_differ_fd(u, l, ret);
}

/* Is the upper directory opaque (hiding the workspace's children)?  An
 * error reading the marker is one: taken for "not opaque", the review
 * left out and apply kept every workspace child the stage deletes. */
static int dir_is_opaque(int dirfd, bool *ret) {
    char v[4];
    ssize_t n = fgetxattr(dirfd, "user.overlay.opaque", v, sizeof v);
    *ret = n == 1 && v[0] == 'y';
    return n < 0 && errno != ENODATA && errno != ENOTSUP && errno != ERANGE ? -errno : 0;
}

/* Does the regular file name in dirfd hold text with NUL bytes in it?
 * diff (as git) calls a file with a NUL in its first LC_BINARY_PROBE bytes
 * binary and shows none of it; a NUL in a comment does not stop sh, bash,
 * a C compiler, node or git's config parser, so a script or a config with
 * one NUL would have its change hidden.  Text: no other C0 control but
 * tab, newline, vertical tab, form feed, carriage return and escape, no
 * DEL (images, archives and executables have such bytes in their first
 * few; a UTF-16 text file has none, and is text diff does not show).
 * *ret_nul: whether those bytes hold a NUL at all (diff shows it binary);
 * *ret_script (optional): whether they start with "#!" (a script the
 * kernel runs with the interpreter it names). */
static bool nul_text_at(int dirfd, const char *name, bool *ret_nul, bool *ret_script) {
    *ret_nul = false;
    if (ret_script)
        *ret_script = false;
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    unsigned char buf[LC_BINARY_PROBE];
    ssize_t n;
    do
        n = pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    *ret_nul = n > 0 && memchr(buf, 0, (size_t)n) != NULL;
    if (ret_script)
        *ret_script = n >= 2 && buf[0] == '#' && buf[1] == '!';
    for (ssize_t i = 0; i < n; i++) {
        unsigned char c = buf[i];
        if (c != 0 &&
            ((c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r' && c != 0x1b) || c == 0x7f))
            return false;
    }
    return *ret_nul;
}

/* Is the change of a regular file one diff does not show?  Text with NUL
 * bytes (nul_text_at); a script ("#!") diff shows as binary, whatever
 * other bytes it holds, added or changed (a NUL and a few control bytes in
 * a comment defeat the text test, and sh runs what follows); or a
 * workspace file diff showed as text (an empty one too) whose new content
 * it shows as binary, whatever other bytes that holds.  *ret_binary: diff
 * shows the new content as binary.  *ret_old_hides: the other way round,
 * new content diff would show as text (no NUL, at most LC_DIFF_MAX bytes)
 * over a workspace file it shows as binary or large: diff prints one line
 * for the pair, and the new text goes unseen (a compiled helper replaced
 * by a script). */
static bool hides_from_diff(int upper_dirfd, int lower_dirfd, const char *name, enum lc_kind kind, uint64_t new_size,
                            bool *ret_binary, bool *ret_old_hides) {
    bool nul, script;
    bool text = nul_text_at(upper_dirfd, name, &nul, &script);
    *ret_binary = nul;
    *ret_old_hides = false;
    if (text || (nul && script))
        return true;
    bool old_nul;
    struct stat lst;
    if (kind != LC_MODIFIED || lower_dirfd < 0 || fstatat(lower_dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(lst.st_mode))
        return false;
    bool old_text = nul_text_at(lower_dirfd, name, &old_nul, NULL);
    *ret_old_hides = !nul && new_size <= LC_DIFF_MAX && ((uint64_t)lst.st_size > LC_DIFF_MAX || old_nul);
    return nul && !old_text && !old_nul;
}

/* Is e, named name in upper_dirfd, a .git file or link, or a commondir,
 * that points into a .git of the workspace (lc_git_pointer_into_git)? */
static bool git_pointer_into_git(const struct walk *w, int upper_dirfd, const char *name, const struct lc_entry *e) {
    bool dotgit = strcmp(name, ".git") == 0;
    if (e->kind == LC_DELETED || (!dotgit && strcmp(name, "commondir") != 0))
        return false;
    if (e->new_type == LC_LNK)
        return dotgit && e->new_target && lc_git_pointer_into_git(w->cs->workspace, e->path, e->new_target);
    if (e->new_type != LC_REG)
        return false;
    char buf[LC_MAX_PATH + 16];
    _cleanup_close_ int fd = openat(upper_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (memchr(buf, '\0', (size_t)n))
        return false;
    buf[strcspn(buf, "\r\n")] = '\0';
    const char *ptr = buf;
    if (dotgit && strncmp(buf, "gitdir: ", 8) != 0)
        return false;
    ptr += dotgit ? 8 : 0;
    /* a commondir is relative to its git directory, where it lies */
    return ptr[0] && lc_git_pointer_into_git(w->cs->workspace, e->path, ptr);
}

/* A git index the stage adds or changes, whose entries newly carry the
 * skip-worktree or assume-unchanged bit: git status and git diff skip
 * those files after the apply (their changes, the agent's or later ones,
 * never show), as .git/info/exclude hides new ones (LC_W_GIT_HIDES).
 * Read by lc_git_index_hides, never by git (the stage's config can make
 * it run commands).  An index too large to read is warned of. */
static int index_hides(struct walk *w, struct lc_entry *e, int upper_dirfd, int lower_dirfd, const char *name) {
    int r = lc_git_index_hides(upper_dirfd, lower_dirfd, name, &w->index_budget, &e->index_hides, &e->index_hides_names,
                               &e->n_index_hides_names);
    if (r == -EFBIG)
        e->index_hides_unread = true;
    else if (r == -ENOMEM)
        return r;
    /* unreadable (the agent's mode 0): what the walk reads elsewhere
     * fails on it too, or the override reads it */
    if (e->index_hides || e->index_hides_unread) {
        e->warnings |= LC_W_GIT_HIDES;
        w->cs->warnings |= LC_W_GIT_HIDES;
    }
    return 0;
}

/* One upper object name in upper_dirfd (lower_dirfd: the lower directory of
 * the same path, or -1). */
static int visit(struct walk *w, int upper_dirfd, int lower_dirfd, bool parent_opaque, const char *name, int depth) {
    if (++w->visited > LC_MAX_ENTRIES)
        return -E2BIG;
    struct stat ust, lst;
    if (fstatat(upper_dirfd, name, &ust, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    bool have_lower = false;
    if (lower_dirfd >= 0) {
        if (fstatat(lower_dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
            have_lower = true;
        else if (errno != ENOENT)
            return -errno;
    }
    if (stage_is_whiteout(&ust))
        return have_lower ? walk_lower_deleted(w, lower_dirfd, name, &lst, depth) : 0;

    enum lc_type nt = lc_type_of(ust.st_mode);
    enum lc_type ot = have_lower ? lc_type_of(lst.st_mode) : LC_NONE;
    unsigned ch = 0;
    _cleanup_free_ char *target = NULL;
    if (nt == LC_LNK) {
        int r = lc_readlink_at(upper_dirfd, name, &target);
        if (r < 0)
            return r;
    }
    _cleanup_close_ int usub = -1;
    bool opaque = false;
    if (nt == LC_DIR) {
        usub = lc_open_beneath(upper_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (usub < 0)
            return usub;
        int r = dir_is_opaque(usub, &opaque);
        if (r < 0)
            return r;
    }
    enum lc_kind kind;
    unsigned char lower_sha[32];
    bool lower_sha_known = false;
    if (ot == LC_NONE) {
        kind = LC_ADDED;
    } else if (ot != nt) {
        kind = LC_TYPE_CHANGED;
    } else {
        kind = LC_MODIFIED;
        bool recorded = lc_preimage_find(w->cs->pre, w->cs->n_pre, w->path) != NULL;
        if ((ust.st_mode & 07777) != (lst.st_mode & 07777) && nt != LC_LNK && (nt != LC_DIR || recorded))
            ch |= LC_CH_MODE;
        if (nt == LC_REG) {
            /* Each side is opened and read once: xattrs, then the content
             * compared and, when the journal has a preimage (set_old's
             * conflict check needs it), the workspace file hashed in the
             * same pass. */
            bool same_size = ust.st_size == lst.st_size;
            _cleanup_close_ int a =
                openat(upper_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
            int a_errno = errno;
            _cleanup_close_ int b =
                openat(lower_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
            int b_errno = errno;
            /* an unreadable side has no comparable xattrs (as for
             * symlinks); its content is needed only to compare equal
             * sizes or to hash a workspace file that has a preimage */
            if ((same_size && a < 0) || ((same_size || recorded) && b < 0))
                return -(a < 0 ? a_errno : b_errno);
            if (a >= 0 && b >= 0) {
                bool differ = false;
                int r = xattrs_differ_fd(a, b, &differ);
                if (r < 0)
                    return r;
                if (differ)
                    ch |= LC_CH_XATTR;
            }
            bool equal = false;
            if (same_size || recorded) {
                int r = lc_hash_compare_fd(b, same_size ? a : -1, recorded ? lower_sha : NULL, &equal);
                if (r < 0)
                    return r;
            }
            if (!equal)
                ch |= LC_CH_CONTENT;
            lower_sha_known = recorded;
        } else if (nt == LC_LNK) {
            _cleanup_free_ char *lt = NULL;
            int r = lc_readlink_at(lower_dirfd, name, &lt);
            if (r < 0)
                return r;
            if (strcmp(lt, target) != 0)
                ch |= LC_CH_TARGET;
        }
        if (nt == LC_DIR && recorded) {
            bool differ = false;
            int r = xattrs_differ(upper_dirfd, name, lower_dirfd, &differ);
            if (r < 0)
                return r;
            if (differ)
                ch |= LC_CH_XATTR;
        }
        /* run by root, apply gives what it rewrites the stage object's
         * owner (a chown of the command's, a tar x as root): said, with
         * the change that makes apply rewrite it */
        if (ch && nt != LC_DIR && w->keep_owners && (ust.st_uid != lst.st_uid || ust.st_gid != lst.st_gid))
            ch |= LC_CH_OWNER;
    }
    /* A directory over a lower directory with no preimage is normally a
     * parent copied up to hold a new child: the origin map says it was
     * copied from the lower.  If the agent created it instead (no origin,
     * or opaque), the lower directory appeared after the run:
     * a path the agent created exists in the workspace now, a conflict --
     * unless an earlier `apply --path` of this stage created it.  A map
     * begun by an older pvisor (legacy) has no line for a copy-up whose
     * lower number another copy-up had (it recorded one origin per number,
     * across the file systems mounted in the workspace): there no origin
     * where the lower's number is another copy-up's origin is the
     * overlay's, not the agent's, but only on another file system than
     * the workspace's, where numbers repeat.  On the workspace's own, a
     * number is one object's, and a directory the user made after the run
     * may well have the number of a file the agent copied up and the user
     * then deleted (tested: the conflict stays). */
    bool created_twice = false;
    if (kind == LC_MODIFIED && nt == LC_DIR && w->origin_usable &&
        !lc_preimage_find(w->cs->pre, w->cs->n_pre, w->path) &&
        (opaque || (lc_origin_lookup(w->orig, w->n_orig, (uint64_t)ust.st_ino, false) == 0 &&
                    !(w->origin_legacy && lst.st_dev != w->ws_dev &&
                      lc_origin_lower_taken(w->orig, w->n_orig, (uint64_t)lst.st_ino)))) &&
        !(w->n_ours && bsearch(&(const char *){w->path}, w->ours, w->n_ours, sizeof *w->ours, lc_cmp_strp))) {
        created_twice = true;
        kind = LC_ADDED;
    }
    if (kind != LC_MODIFIED || ch || created_twice) {
        struct lc_entry *e = add_entry(w, kind);
        if (!e)
            return w->cs->n >= LC_MAX_ENTRIES ? -E2BIG : -ENOMEM;
        e->changes = ch;
        e->new_type = nt;
        e->new_mode = ust.st_mode & 07777;
        e->new_uid = (uint32_t)ust.st_uid;
        e->new_gid = (uint32_t)ust.st_gid;
        e->old_uid = have_lower ? (uint32_t)lst.st_uid : 0;
        e->old_gid = have_lower ? (uint32_t)lst.st_gid : 0;
        e->new_size = (uint64_t)ust.st_size;
        e->new_target = TAKE_PTR(target);
        e->new_atime = ust.st_atim;
        e->new_mtime = ust.st_mtim;
        e->new_ctime = ust.st_ctim;
        e->upper_ino = (uint64_t)ust.st_ino;
        if (nt == LC_REG && (kind != LC_MODIFIED || (ch & LC_CH_CONTENT)))
            w->cs->bytes_new += e->new_size;
        int r = set_old(w, e, lower_dirfd, name, have_lower ? &lst : NULL, lower_sha_known ? lower_sha : NULL);
        if (r < 0)
            return r;
        /* git never runs a *.sample by its name, but a hook that is a link
         * to one runs it, and git never changes an existing sample: only a
         * new one (git init's) that no hook there links to goes unwarned */
        size_t nl = strlen(name);
        bool sample_ok = kind == LC_ADDED && nt == LC_REG && nl > 7 && strcmp(name + nl - 7, ".sample") == 0 &&
                         !dir_links_to(upper_dirfd, name) && !dir_links_to(lower_dirfd, name);
        lc_entry_set_warnings(w->cs, e, &ust, sample_ok, git_pointer_into_git(w, upper_dirfd, name, e));
        if (nt == LC_REG && (kind != LC_MODIFIED || (ch & LC_CH_CONTENT)) && path_is_git_index(w->path)) {
            r = index_hides(w, e, upper_dirfd, have_lower && ot == LC_REG ? lower_dirfd : -1, name);
            if (r < 0)
                return r;
        }
        /* a sandbox's views hide a directory that holds a stage's version
         * file (overlay.h, hide_stages): one the agent wrote makes its
         * directory vanish from later runs' commands */
        if (nt == LC_REG && strcmp(name, "version") == 0 && stage_version_magic_at(upper_dirfd, name) == 1) {
            e->warnings |= LC_W_STAGE_MARKER;
            w->cs->warnings |= LC_W_STAGE_MARKER;
        }
        bool binary = false, old_hides = false;
        if (nt == LC_REG && (kind != LC_MODIFIED || (ch & LC_CH_CONTENT)) &&
            hides_from_diff(upper_dirfd, lower_dirfd, name, kind, e->new_size, &binary, &old_hides)) {
            e->warnings |= LC_W_NUL_TEXT;
            w->cs->warnings |= LC_W_NUL_TEXT;
        }
        if (old_hides) {
            e->warnings |= LC_W_DIFF_HIDDEN;
            w->cs->warnings |= LC_W_DIFF_HIDDEN;
        }
        e->binary = binary;
        w->cs->n_binary += binary;
        /* A directory the agent saw in the workspace (copied up there to
         * change what is in it: the origin map has it; no journal record
         * moved it) that the workspace no longer has: the user removed or
         * moved it since the run.  Creating it again would bring back a
         * directory the user removed, holding only the agent's additions. */
        uint64_t lino =
            kind == LC_ADDED && nt == LC_DIR && !opaque && !parent_opaque && !e->conflict && w->origin_usable
                ? lc_origin_lookup(w->orig, w->n_orig, (uint64_t)ust.st_ino, false)
                : 0;
        bool moved = false;
        for (size_t k = 0; lino && k < w->cs->n_pre && !moved; k++)
            moved = w->cs->pre[k].ino == lino;
        if (lino && !moved) {
            e->conflict = "removed from the workspace since the run (the agent saw this directory and changed what "
                          "is in it)";
            w->cs->n_conflicts++;
        }
    }
    /* a lower directory replaced by a non-directory: its whole subtree goes */
    if (kind == LC_TYPE_CHANGED && ot == LC_DIR) {
        _cleanup_close_ int lsub = lc_open_beneath(lower_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (lsub < 0)
            return lsub;
        char **names = NULL;
        size_t n = 0;
        int r = sorted_names(lsub, &names, &n);
        if (r < 0)
            return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
            struct stat cst;
            if (fstatat(lsub, names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            size_t old;
            w->in_deleted++;
            r = path_push(w, names[i], &old);
            w->in_deleted--;
            if (r < 0)
                break;
            r = walk_lower_deleted(w, lsub, names[i], &cst, depth + 1);
            w->path[old] = '\0';
        }
        free_names(names, n);
        if (r < 0)
            return r;
    }
    if (nt == LC_DIR) {
        _cleanup_close_ int lsub = -1;
        if (ot == LC_DIR) {
            lsub = lc_open_beneath(lower_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
            if (lsub < 0)
                return lsub;
        }
        /* below an opaque directory nothing of the lower is visible, even
         * under upper subdirectories that are not marked opaque themselves */
        return walk_upper(w, usub, lsub, opaque || parent_opaque, depth + 1);
    }
    return 0;
}

/* The workspace root's own mode and user xattrs, as the entry "." (the
 * name the journal gives the root).  upper/ is the root's copy: the
 * overlay gave it the root's owner, mode, times and xattrs when the stage
 * was made (init_root), and the command's chmod, setfattr or touch of the
 * workspace root journals the root's preimage, as for any directory it
 * changes.  So it is compared as a copied-up subdirectory is (visit):
 * only with a preimage (a plain run that only writes inside changes the
 * root's times, never its mode), mode and user xattrs, no times, no
 * owner; and its conflict is a subdirectory's (the root's mode or xattrs
 * changed in the workspace since the run).  Before, neither review nor
 * apply looked at the root, and the command's change of it was lost. */
static int visit_root(struct walk *w, int upper_fd, int ws_fd) {
    if (!lc_preimage_find(w->cs->pre, w->cs->n_pre, "."))
        return 0;
    struct stat ust, lst;
    if (fstat(upper_fd, &ust) < 0 || fstat(ws_fd, &lst) < 0)
        return -errno;
    if (!S_ISDIR(ust.st_mode) || !S_ISDIR(lst.st_mode))
        return 0;
    unsigned ch = 0;
    if ((ust.st_mode & 07777) != (lst.st_mode & 07777))
        ch |= LC_CH_MODE;
    bool differ = false;
    int r = xattrs_differ_fd(upper_fd, ws_fd, &differ);
    if (r < 0)
        return r;
    if (differ)
        ch |= LC_CH_XATTR;
    if (!ch)
        return 0;
    memcpy(w->path, ".", 2);
    struct lc_entry *e = add_entry(w, LC_MODIFIED);
    w->path[0] = '\0';
    if (!e)
        return w->cs->n >= LC_MAX_ENTRIES ? -E2BIG : -ENOMEM;
    e->changes = ch;
    e->new_type = LC_DIR;
    e->new_mode = ust.st_mode & 07777;
    e->new_uid = (uint32_t)ust.st_uid;
    e->new_gid = (uint32_t)ust.st_gid;
    e->old_uid = (uint32_t)lst.st_uid;
    e->old_gid = (uint32_t)lst.st_gid;
    e->new_size = (uint64_t)ust.st_size;
    e->new_atime = ust.st_atim;
    e->new_mtime = ust.st_mtim;
    e->new_ctime = ust.st_ctim;
    e->upper_ino = (uint64_t)ust.st_ino;
    r = set_old(w, e, ws_fd, ".", &lst, NULL);
    if (r < 0)
        return r;
    lc_entry_set_warnings(w->cs, e, &ust, false, false);
    return 0;
}

static int walk_upper(struct walk *w, int upper_dirfd, int lower_dirfd, bool opaque, int depth) {
    if (depth > LC_MAX_DEPTH)
        return stop_at_bound(w, -ELOOP);
    char **names = NULL;
    size_t n = 0;
    int r = sorted_names(upper_dirfd, &names, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r >= 0; i++) {
        size_t old;
        r = path_push(w, names[i], &old);
        if (r < 0)
            break;
        r = visit(w, upper_dirfd, lower_dirfd, opaque, names[i], depth);
        w->path[old] = '\0';
    }
    /* opaque over a lower directory: lower names absent from the upper are deleted */
    if (r >= 0 && opaque && lower_dirfd >= 0) {
        char **lnames = NULL;
        size_t ln = 0;
        r = sorted_names(lower_dirfd, &lnames, &ln);
        for (size_t i = 0; i < ln && r >= 0; i++) {
            if (n && bsearch(&lnames[i], names, n, sizeof *names, lc_cmp_strp))
                continue;
            struct stat cst;
            if (fstatat(lower_dirfd, lnames[i], &cst, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            size_t old;
            w->in_deleted++;
            r = path_push(w, lnames[i], &old);
            w->in_deleted--;
            if (r < 0)
                break;
            r = walk_lower_deleted(w, lower_dirfd, lnames[i], &cst, depth);
            w->path[old] = '\0';
        }
        if (r >= 0 || lnames)
            free_names(lnames, ln);
    }
    free_names(names, n);
    return r;
}

static int ours_add(char ***v, size_t *n, size_t *cap, const char *path) {
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        char **nv = realloc(*v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = nc;
    }
    if (!((*v)[*n] = strdup(path)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

/* STAGE/apply-created: directories earlier `apply --path` runs created
 * (one path per line), so a later apply does not take them for directories
 * the user created.  With them, those an interrupted apply created
 * (STAGE/apply-intent: new directories), which the resume completes:
 * review and diff took them for the user's ("exists in the workspace but
 * the agent never saw it", a conflict), though the resume does not. */
static int load_ours(int stage_dir_fd, char ***ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = read_file_at(stage_dir_fd, LC_APPLY_CREATED, 64u << 20, &buf, &len);
    if (r < 0 && r != -ENOENT)
        return r;
    size_t n = 0, cap = 0;
    char **v = NULL;
    /* NUL-terminated paths; an older file, without a NUL, has one per line */
    char sep = buf && memchr(buf, '\0', len) ? '\0' : '\n';
    for (size_t off = 0; buf && off < len;) {
        char *line = buf + off;
        char *end = memchr(line, sep, len - off);
        if (!end)
            break; /* cut short: the file is written whole (rename), so never */
        *end = '\0';
        off = (size_t)(end - buf) + 1;
        if (lc_path_valid(line) && ours_add(&v, &n, &cap, line) < 0) {
            free_names(v, n);
            return -ENOMEM;
        }
    }
    /* an intent cut short or invalid: the resume says so; none of it here */
    struct plan intent = {0};
    if (lc_intent_load(stage_dir_fd, &intent) == 0) {
        for (size_t i = 0; i < intent.n; i++)
            if (intent.v[i].old_type == LC_NONE && intent.v[i].new_type == LC_DIR &&
                ours_add(&v, &n, &cap, intent.v[i].path) < 0) {
                lc_plan_free(&intent);
                free_names(v, n);
                return -ENOMEM;
            }
        lc_plan_free(&intent);
    }
    if (n)
        qsort(v, n, sizeof *v, lc_cmp_strp);
    *ret = v;
    *ret_n = n;
    return 0;
}

int lc_changeset_load(struct lc_stage *st, struct lc_changeset **ret_cs) {
    if (st->upper_fd < 0)
        return -ENOENT;
    struct lc_changeset *cs = calloc(1, sizeof *cs);
    if (!cs)
        return -ENOMEM;
    struct walk *w = calloc(1, sizeof *w);
    struct lc_ino_pair *orig = NULL;
    size_t n_orig = 0;
    int r = -ENOMEM;
    if (!w)
        goto fail;
    cs->stage_path = strdup(st->path);
    cs->workspace = strdup(st->workspace);
    if (!cs->stage_path || !cs->workspace)
        goto fail;
    r = lc_journal_load(st->dir_fd, &cs->pre, &cs->n_pre);
    if (r < 0)
        goto fail;
    w->cs = cs;
    w->ws_fd = st->ws_fd;
    struct stat wst;
    w->ws_dev = fstat(st->ws_fd, &wst) == 0 ? wst.st_dev : 0;
    w->stage_fd = st->dir_fd;
    w->keep_owners = geteuid() == 0 && userns_is_initial();
    cs->keep_owners = w->keep_owners;
    w->index_budget = LC_GIT_INDEX_READ_TOTAL;
    w->path[0] = '\0';
    r = lc_origin_load(st->dir_fd, st->upper_fd, &orig, &n_orig, &w->origin_usable, &w->origin_legacy);
    if (r < 0)
        goto fail;
    w->orig = orig;
    w->n_orig = n_orig;
    r = load_ours(st->dir_fd, &w->ours, &w->n_ours);
    if (r < 0)
        goto fail;
    /* the root: upper/ is never opaque over the workspace itself */
    r = walk_upper(w, st->upper_fd, st->ws_fd, false, 0);
    if (r >= 0)
        r = visit_root(w, st->upper_fd, st->ws_fd);
    if (r < 0)
        goto fail;
    lc_changeset_annotate(cs, orig, n_orig, st->upper_fd, st->ws_fd);
    free(orig);
    free_names(w->ours, w->n_ours);
    free(w);
    *ret_cs = cs;
    return 0;
fail:
    free(orig);
    free(st->stopped_at);
    st->stopped_at = NULL;
    st->stopped_deleted = false;
    if (w && w->stopped[0] && (r == -ELOOP || r == -ENAMETOOLONG)) {
        st->stopped_at = strdup(w->stopped);
        st->stopped_deleted = w->stopped_deleted;
    }
    if (w)
        free_names(w->ours, w->n_ours);
    free(w);
    lc_changeset_free(cs);
    return r;
}
