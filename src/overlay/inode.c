

/* inode.c: node table, path resolution in lower and upper, merged attributes.
 *
 * Invariants (see ov-internal.h for the model and lock order):
 *  - A hashed node's (parent, name) names it in the merged view; a detached
 *    node (unlinked or replaced) has parent == NULL and is usable only
 *    through its cached upper fd or an open handle.
 *  - Lower paths are resolved from ov->lower_fd with openat2
 *    RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, so neither the
 *    agent (who cannot write the lower) nor the user editing it concurrently
 *    can redirect us outside the workspace.
 *  - Upper objects are reached from the parent's upper O_PATH fd by a single
 *    name with O_NOFOLLOW; whiteouts are never returned as objects.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/util.h"
#include "util/cleanup.h"

#define OV_MAX_DEPTH 4096

struct ov *ov_from_req(fuse_req_t req) {
    return fuse_req_userdata(req);
}

struct ov_node *ov_node_of(struct ov *ov, fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID)
        return ov->root;
    return (struct ov_node *)(uintptr_t)ino;
}

int ov_proc_path(int fd, char buf[static 40]) {
    int m = snprintf(buf, 40, "/proc/self/fd/%d", fd);
    return (m < 0 || m >= 40) ? -EOVERFLOW : 0;
}

int ov_check_name(const char *name) {
    size_t l = strlen(name);
    if (l == 0 || l > 255 || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return -EINVAL;
    return 0;
}

/* 1 if dir_fd/name carries user.overlay.opaque="y", 0 if not, -errno. */
int ov_is_opaque(int dir_fd, const char *name) {
    _cleanup_close_ int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char p[40], v[8];
    if (ov_proc_path(fd, p) < 0)
        return -EOVERFLOW;
    ssize_t n = getxattr(p, OV_XATTR_OPAQUE, v, sizeof v);
    if (n < 0)
        return (errno == ENODATA || errno == ENOTSUP) ? 0 : -errno;
    return n == 1 && v[0] == 'y';
}

/* ---- paths ---- */

static int path_build(struct ov *ov, struct ov_node *n, const char *extra, char **ret) {
    const char *parts[OV_MAX_DEPTH];
    size_t np = 0, len = 0;
    pthread_mutex_lock(&ov->tree_lock);
    for (struct ov_node *c = n; c != ov->root; c = c->parent) {
        if (!c || !c->hashed || np == OV_MAX_DEPTH) {
            pthread_mutex_unlock(&ov->tree_lock);
            /* a detached node (replaced or removed by a rename or unlink
             * since the kernel looked it up) has no path: ENOENT, not the
             * depth limit's ENAMETOOLONG */
            return c && c->hashed ? -ENAMETOOLONG : -ENOENT;
        }
        parts[np++] = c->name;
        len += strlen(c->name) + 1;
    }
    if (extra)
        len += strlen(extra) + 1;
    char *s = malloc(len + 2);
    if (!s) {
        pthread_mutex_unlock(&ov->tree_lock);
        return -ENOMEM;
    }
    char *p = s;
    for (size_t i = np; i-- > 0;) {
        size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
        *p++ = '/';
    }
    pthread_mutex_unlock(&ov->tree_lock);
    if (extra) {
        size_t l = strlen(extra);
        memcpy(p, extra, l);
        p += l;
    } else if (p > s) {
        p--; /* drop trailing '/' */
    }
    *p = '\0';
    *ret = s;
    return 0;
}

int ov_node_path(struct ov *ov, struct ov_node *n, char **ret_path) {
    return path_build(ov, n, NULL, ret_path);
}

int ov_child_path(struct ov *ov, struct ov_node *parent, const char *name, char **ret_path) {
    return path_build(ov, parent, name, ret_path);
}

bool ov_masked(const struct ov *ov, const char *relpath) {
    for (size_t i = 0; i < ov->n_mask; i++) {
        size_t ml = strlen(ov->mask[i]);
        if (strncmp(relpath, ov->mask[i], ml) == 0 && (relpath[ml] == '\0' || relpath[ml] == '/'))
            return true;
    }
    return false;
}

int ov_mask_ids_init(struct ov *ov) {
    if (!ov->n_mask)
        return 0;
    ov->mask_ids = calloc(ov->n_mask, sizeof *ov->mask_ids);
    if (!ov->mask_ids)
        return -ENOMEM;
    for (size_t i = 0; i < ov->n_mask; i++) {
        struct stat st;
        if (fstatat(ov->lower_fd, ov->mask[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT || errno == ENOTDIR)
                continue; /* nothing there to be reached under another name */
            return -errno;
        }
        ov->mask_ids[ov->n_mask_ids++] = (struct ov_mask_id){st.st_dev, st.st_ino};
    }
    return 0;
}

bool ov_masked_id(const struct ov *ov, const struct stat *st) {
    for (size_t i = 0; i < ov->n_mask_ids; i++)
        if (ov->mask_ids[i].ino == st->st_ino && ov->mask_ids[i].dev == st->st_dev)
            return true;
    return false;
}

#define OV_MLINK_BUDGET 200000 /* entries of the masked directories looked at, at most */

static int mlink_push(struct ov *ov, const struct stat *st) {
    if (ov->n_mlinks == ov->cap_mlinks) {
        size_t cap = ov->cap_mlinks ? 2 * ov->cap_mlinks : 16;
        struct ov_mask_id *m = realloc(ov->mlinks, cap * sizeof *m);
        if (!m)
            return -ENOMEM;
        ov->mlinks = m;
        ov->cap_mlinks = cap;
    }
    ov->mlinks[ov->n_mlinks++] = (struct ov_mask_id){st->st_dev, st->st_ino};
    return 0;
}

static int cmp_id(const void *a, const void *b) {
    const struct ov_mask_id *x = a, *y = b;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* Does the directory dirfd/name hold a stage's version file (what stage.c
 * writes last, making the directory a stage)?  Unreadable to the server,
 * it is taken for one. */
static bool stage_dir_at(int dirfd, const char *name) {
    char path[NAME_MAX + 16];
    snprintf(path, sizeof path, "%s/version", name);
    struct stat st;
    if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_size < 13 /* shorter than "pvisor-stage " */)
        return false;
    return stage_version_magic_at(dirfd, path) != 0;
}

/* The caches of the browsers whose profiles are masked (Chromium's and
 * Firefox's names; Electron apps' too): a profile in daily use can hold
 * hundreds of thousands of entries, most of them there, past the walk's
 * budget, and
 * then every file with other names in the views was hidden (a local git
 * clone in the workspace failed).  What they hold is what the browser
 * fetched, not what the user keeps: a link from there to a name outside
 * the masks is not looked for (docs/security-model.md). */
static bool browser_cache_dir(const char *name) {
    static const char *const caches[] = {
        "Cache",
        "Code Cache",
        "GPUCache",
        "CacheStorage",
        "ScriptCache",
        "GrShaderCache",
        "GraphiteDawnCache",
        "ShaderCache",
        "DawnCache",
        "DawnGraphiteCache",
        "DawnWebGPUCache",
        "cache2",
        "startupCache",
        "component_crx_cache",
        "extensions_crx_cache",
    };
    for (size_t i = 0; i < ARRAY_SIZE(caches); i++)
        if (strcmp(name, caches[i]) == 0)
            return true;
    return false;
}

/* The regular files with other names in directory dfd (on device dev) and
 * below, into ov->mlinks.  Not looked through: a directory of another
 * file system (a mount point: no hard link crosses one, and an automount
 * is not triggered); a browser's cache (browser_cache_dir); a pvisor
 * stage (what agents wrote, not credentials,
 * and possibly large: one kept with `--stage DIR` in a masked directory;
 * pvisor's state directory, masked in HOME by default, is not a root of
 * the walk at all: overlay_params.no_walk); a directory the server may
 * not list (an ordinary user's run, another user's directory in a masked
 * one: its files are not the user's to reach by that path either).  The walk starts from the
 * lower directory the run opened before it made its mount namespace, so
 * it meets none of the run's own mounts (its views): only the host's. */
static int mlink_walk(struct ov *ov, int dfd, dev_t dev, unsigned depth, size_t *budget) {
    if (depth > 256)
        return -ELOOP;
    _cleanup_closedir_ DIR *d = NULL;
    int r = dup_opendir(dfd, &d);
    if (r < 0)
        return r;
    struct dirent *de;
    errno = 0;
    while ((de = readdir_no_dots(d))) {
        if (!*budget)
            return -E2BIG;
        --*budget;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) < 0) {
            if (errno != ENOENT) /* not gone meanwhile */
                return -errno;
        } else if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
            if ((r = mlink_push(ov, &st)) < 0)
                return r;
        } else if (S_ISDIR(st.st_mode) && st.st_dev == dev && !browser_cache_dir(de->d_name) &&
                   !stage_dir_at(dirfd(d), de->d_name)) {
            _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0 && errno != ENOENT && errno != EACCES) /* gone, or not the user's to list */
                return -errno;
            if (sub >= 0 && (r = mlink_walk(ov, sub, dev, depth + 1, budget)) < 0)
                return r;
        }
        errno = 0;
    }
    return errno ? -errno : 0;
}

/* Add dirfd/name (a masked location; at, its lstat) to the roots to look
 * through: a directory (not a stage), opened O_PATH now; a regular file
 * with other names, recorded now.  Anything else: nothing. */
static int walk_root_add(struct ov *ov, int dirfd, const char *name, const struct stat *at) {
    if (S_ISREG(at->st_mode) && at->st_nlink > 1) {
        ov->walk = true;
        return mlink_push(ov, at);
    }
    if (!S_ISDIR(at->st_mode) || stage_dir_at(dirfd, name))
        return 0;
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno; /* gone meanwhile */
    int *v = realloc(ov->walk_fd, (ov->n_walk_fd + 1) * sizeof *v);
    if (!v) {
        close(fd);
        return -ENOMEM;
    }
    ov->walk_fd = v;
    ov->walk_fd[ov->n_walk_fd++] = fd;
    ov->walk = true;
    return 0;
}

int ov_walk_roots_init(struct ov *ov, const struct overlay_params *p) {
    int r = 0;
    /* a file among the view's own masks is ov_masked_id's, under any name */
    for (size_t i = 0; i < ov->n_mask && r >= 0; i++) {
        struct stat st;
        if (p->no_walk && strcmp(ov->mask[i], p->no_walk) == 0)
            continue;
        if (fstatat(ov->lower_fd, ov->mask[i], &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) == 0)
            r = S_ISDIR(st.st_mode) ? walk_root_add(ov, ov->lower_fd, ov->mask[i], &st) : 0;
        else if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
            r = -errno;
    }
    for (size_t i = 0; i < p->n_link_mask && r >= 0; i++) {
        struct stat st;
        if (p->no_walk && strcmp(p->link_mask[i], p->no_walk) == 0)
            continue;
        if (fstatat(p->link_fd, p->link_mask[i], &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) == 0)
            r = walk_root_add(ov, p->link_fd, p->link_mask[i], &st);
        else if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
            r = -errno;
    }
    return r;
}

/* Look through the roots once (the first caller; the others wait for
 * it): ov->mlinks sorted, or ov->mlinks_state < 0. */
static int mlinks_state(struct ov *ov) {
    int s = atomic_load_explicit(&ov->mlinks_state, memory_order_acquire);
    if (s)
        return s;
    pthread_mutex_lock(&ov->mlink_lock);
    if (!(s = atomic_load_explicit(&ov->mlinks_state, memory_order_relaxed))) {
        size_t budget = OV_MLINK_BUDGET;
        const char *t = getenv("PVISOR_TEST_MLINK_BUDGET"); /* tests: the fail-closed path */
        if (t && *t)
            budget = strtoul(t, NULL, 10);
        int r = 0;
        for (size_t i = 0; i < ov->n_walk_fd && r >= 0; i++) {
            /* not the user's to list: its files are not the user's to
             * reach by that path either */
            _cleanup_close_ int fd = openat(ov->walk_fd[i], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            struct stat st;
            if (fd < 0)
                r = errno == EACCES ? 0 : -errno;
            else if (fstat(fd, &st) < 0)
                r = -errno;
            else
                r = mlink_walk(ov, fd, st.st_dev, 0, &budget);
        }
        if (r >= 0 && ov->n_mlinks)
            qsort(ov->mlinks, ov->n_mlinks, sizeof *ov->mlinks, cmp_id);
        s = r < 0 ? r : 1;
        atomic_store_explicit(&ov->mlinks_state, s, memory_order_release);
    }
    pthread_mutex_unlock(&ov->mlink_lock);
    return s;
}

bool ov_masked_link(struct ov *ov, const struct stat *st) {
    if (!S_ISREG(st->st_mode) || st->st_nlink < 2 || !ov->walk)
        return false;
    if (mlinks_state(ov) < 0)
        return true; /* could not be told: fail closed */
    struct ov_mask_id key = {st->st_dev, st->st_ino};
    return ov->n_mlinks && bsearch(&key, ov->mlinks, ov->n_mlinks, sizeof key, cmp_id) != NULL;
}

bool ov_masked_link_ino(struct ov *ov, ino_t ino) {
    if (!ov->walk)
        return false;
    if (mlinks_state(ov) < 0)
        return true;
    size_t lo = 0, hi = ov->n_mlinks; /* the first of ino's, by (ino, dev) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ov->mlinks[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ov->n_mlinks && ov->mlinks[lo].ino == ino;
}

bool ov_lower_stage(const struct ov *ov, int dirfd, const char *name, mode_t type) {
    if (!ov->hide_stages || (type && type != S_IFDIR))
        return false;
    return stage_dir_at(dirfd, name);
}

bool ov_masked_child(struct ov *ov, struct ov_node *parent, const char *name) {
    if (!ov->n_mask)
        return false;
    bool maybe = false; /* only a mask's last component can name one */
    for (size_t i = 0; i < ov->n_mask && !maybe; i++)
        maybe = strcmp(ov->mask_base[i], name) == 0;
    if (!maybe)
        return false;
    _cleanup_free_ char *path = NULL;
    if (ov_child_path(ov, parent, name, &path) < 0)
        return true;
    return ov_masked(ov, path);
}

/* Is a sealed path at or below parent/name (at_or_below), or strictly
 * below it (!at_or_below)?  Fails closed. */
static bool sealed_relation(struct ov *ov, struct ov_node *parent, const char *name, bool at_or_below) {
    if (!ov->n_sealed)
        return false;
    _cleanup_free_ char *path = NULL;
    if (ov_child_path(ov, parent, name, &path) < 0)
        return true;
    for (size_t i = 0; i < ov->n_mask; i++) {
        if (!ov->mask_sealed[i])
            continue;
        /* at or below a seal: the seal is a prefix of path; a seal below
         * path: path is a proper prefix of the seal */
        const char *shorter = at_or_below ? ov->mask[i] : path, *longer = at_or_below ? path : ov->mask[i];
        size_t l = strlen(shorter);
        if (strncmp(longer, shorter, l) == 0 && (longer[l] == '/' || (at_or_below && longer[l] == '\0')))
            return true;
    }
    return false;
}

bool ov_sealed_child(struct ov *ov, struct ov_node *parent, const char *name) {
    return sealed_relation(ov, parent, name, true);
}

bool ov_seals_below(struct ov *ov, struct ov_node *parent, const char *name) {
    return sealed_relation(ov, parent, name, false);
}

bool ov_sealed_lower_below(struct ov *ov, struct ov_node *parent, const char *name, bool direct) {
    if (!ov->n_sealed)
        return false;
    _cleanup_free_ char *path = NULL;
    if (ov_child_path(ov, parent, name, &path) < 0)
        return true;
    size_t pl = strlen(path);
    for (size_t i = 0; i < ov->n_mask; i++) {
        const char *m = ov->mask[i];
        struct stat st;
        if (ov->mask_sealed[i] && strncmp(m, path, pl) == 0 && m[pl] == '/' && (!direct || !strchr(m + pl + 1, '/')) &&
            fstatat(ov->lower_fd, m, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return true;
    }
    return false;
}

int ov_lower_open(struct ov *ov, const char *relpath, int flags) {
    if (ov->n_mask && ov_masked(ov, relpath))
        return -ENOENT;
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    const char *rest = relpath[0] ? relpath : ".";
    _cleanup_close_ int dfd = -1;
    /* A path of PATH_MAX bytes or more, which the kernel refuses whole
     * (ENAMETOOLONG, where a plain file system lets the command go on
     * below it with descriptors): its directories a piece shorter than
     * PATH_MAX at a time, each resolved beneath the one before. */
    while (strlen(rest) >= PATH_MAX) {
        const char *cut = rest + PATH_MAX - 1;
        while (cut > rest && *cut != '/')
            cut--;
        if (cut == rest)
            return -ENAMETOOLONG;
        char piece[PATH_MAX];
        memcpy(piece, rest, (size_t)(cut - rest));
        piece[cut - rest] = '\0';
        struct open_how dhow = {
            .flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
            .resolve = how.resolve,
        };
        long nfd = syscall(SYS_openat2, dfd >= 0 ? dfd : ov->lower_fd, piece, &dhow, sizeof dhow);
        if (nfd < 0)
            return -errno;
        if (dfd >= 0)
            close(dfd);
        dfd = (int)nfd;
        rest = cut + 1;
    }
    long fd = syscall(SYS_openat2, dfd >= 0 ? dfd : ov->lower_fd, rest, &how, sizeof how);
    if (fd < 0)
        return -errno;
    return (int)fd;
}

/* Open the object fd (O_PATH) refers to anew, with flags: O_PATH, or
 * reading a regular file or a directory (nothing that could block). */
static int reopen_kept(int fd, int flags) {
    struct stat st;
    if (!(flags & O_PATH) && (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))))
        return -EIO;
    char pp[40];
    if (ov_proc_path(fd, pp) < 0)
        return -EOVERFLOW;
    int r = open(pp, (flags & ~O_NOFOLLOW) | O_CLOEXEC);
    return r < 0 ? -errno : r;
}

int ov_node_lower_open(struct ov *ov, struct ov_node *n, int flags) {
    if (!n->lower) {
        int kfd = ov_node_kept_lower(ov, n);
        return kfd >= 0 ? reopen_kept(kfd, flags) : -ENOENT;
    }
    _cleanup_free_ char *path = NULL;
    int r = ov_node_path(ov, n, &path);
    if (r < 0)
        return r;
    int fd = ov_lower_open(ov, path, flags);
    /* The host may rename a masked object onto a name the command looked
     * up (mv -f ~/.netrc ~/notes/x, a credential directory onto a
     * directory it is in): the kernel keeps that name's inode for a while
     * and the parent's path leads into the masked object.  What is
     * opened is checked, whatever the name. */
    struct stat st;
    if (fd >= 0 && (ov->n_mask_ids || ov->walk) && fstat(fd, &st) == 0 &&
        (ov_masked_id(ov, &st) || ov_masked_link(ov, &st))) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

_Thread_local size_t ov_n_deferred;
static _Thread_local int *deferred;
static _Thread_local size_t deferred_cap;

/* Keep fd open until this thread drops the namespace lock.  False if the
 * list cannot grow (the caller caches fd then, over the budget). */
static bool defer_close(int fd) {
    if (ov_n_deferred == deferred_cap) {
        size_t nc = deferred_cap ? deferred_cap * 2 : 16;
        int *nd = realloc(deferred, nc * sizeof(*nd));
        if (!nd)
            return false;
        deferred = nd;
        deferred_cap = nc;
    }
    deferred[ov_n_deferred++] = fd;
    return true;
}

void ov_close_deferred(void) {
    for (size_t i = 0; i < ov_n_deferred; i++)
        close(deferred[i]);
    ov_n_deferred = 0;
    /* freed each time: a thread's list must not outlive the thread */
    free(deferred);
    deferred = NULL;
    deferred_cap = 0;
}

void ov_evict_upper_fds(struct ov *ov) {
    pthread_mutex_lock(&ov->tree_lock);
    long kept = 0;
    for (struct ov_node *n = ov->all; n; n = n->all_next) {
        if (n->kept_lower_fd >= 0)
            kept++; /* detached too (ov_node_keep_lower) */
        if (n->upper_fd < 0)
            continue;
        if (!n->hashed) {
            kept++; /* detached: nothing could reopen it (ov_node_keep_upper) */
            continue;
        }
        close(n->upper_fd);
        n->upper_fd = -1;
    }
    atomic_store(&ov->n_upper_fds, kept);
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_set_upper(struct ov *ov, struct ov_node *n, int fd) {
    pthread_mutex_lock(&ov->tree_lock);
    int old = n->upper_fd;
    n->upper_fd = fd;
    n->owner_state = 0; /* another object, maybe */
    atomic_fetch_add(&ov->n_upper_fds, (fd >= 0) - (old >= 0));
    pthread_mutex_unlock(&ov->tree_lock);
    if (old >= 0 && old != fd)
        close(old);
}

bool ov_fd_room(struct ov *ov) {
    int fd = fcntl(ov->upper_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return false;
    close(fd);
    return ov_fd_below_reserve(ov, fd);
}

/* Borrowed O_PATH fd of n's upper object, or -ENOENT. */
int ov_node_upper(struct ov *ov, struct ov_node *n) {
    if (n == ov->root)
        return ov->upper_fd;
    pthread_mutex_lock(&ov->tree_lock);
    int fd = n->upper_fd;
    struct ov_node *parent = n->hashed ? n->parent : NULL;
    pthread_mutex_unlock(&ov->tree_lock);
    if (fd >= 0)
        return fd;
    if (!parent)
        return -ENOENT;
    int pfd = ov_node_upper(ov, parent);
    if (pfd < 0)
        return pfd;
    /* n->name is stable: renames hold the ns write lock, we hold it read. */
    fd = openat(pfd, n->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstatat(fd, "", &st, AT_EMPTY_PATH) < 0 || stage_is_whiteout(&st) || (st.st_mode & S_IFMT) != n->type) {
        close(fd);
        return -ENOENT;
    }
    pthread_mutex_lock(&ov->tree_lock);
    if (n->upper_fd >= 0) {
        close(fd);
        fd = n->upper_fd;
    } else if (atomic_load(&ov->n_upper_fds) < ov->upper_fd_budget || !defer_close(fd)) {
        n->upper_fd = fd;
        atomic_fetch_add(&ov->n_upper_fds, 1);
    }
    pthread_mutex_unlock(&ov->tree_lock);
    return fd;
}

uint64_t ov_upper_ino(struct ov *ov, uint64_t upper_st_ino) {
    uint64_t l;
    if (stage_origin_get(ov->stage, upper_st_ino, &l))
        return l;
    return upper_st_ino | OV_UPPER_INO_BIT;
}

uint64_t ov_lower_ino(struct ov *ov, uint64_t lower_st_ino) {
    if (stage_origin_lower_mapped(ov->stage, lower_st_ino))
        return lower_st_ino | OV_TAKEN_INO_BIT;
    return lower_st_ino;
}

/* ---- owners a copy-up could not give ---- */

/* Can the upper object of mode m hold the owner's record?  The kernel
 * keeps user.* xattrs for regular files and directories alone (a write
 * elsewhere is EPERM, a read ENODATA); symlinks are never given one. */
static bool holds_owner_record(mode_t m) {
    return S_ISREG(m) || S_ISDIR(m);
}

int ov_owner_keep(int fd, const struct stat *st, uid_t uid, gid_t gid) {
    if (st->st_uid == uid && st->st_gid == gid)
        return 0;
    if (!holds_owner_record(st->st_mode))
        return 0; /* a FIFO, a socket: its copy is shown as its own owner's (docs/stage-format.md) */
    char pp[40], v[32];
    int m = snprintf(v, sizeof v, "%u:%u", (unsigned)uid, (unsigned)gid);
    if (ov_proc_path(fd, pp) < 0 || m < 0 || (size_t)m >= sizeof v)
        return -EOVERFLOW;
    return setxattr(pp, OV_XATTR_OWNER, v, (size_t)m, 0) < 0 ? -errno : 0;
}

void ov_owner_shown(struct ov *ov, struct ov_node *n, int ufd, struct stat *st) {
    /* only a copy owned by us may hold one (a run that can chown makes
     * none); symlinks take no user xattrs */
    if (ov->can_chown || st->st_uid != ov->self_uid || S_ISLNK(st->st_mode))
        return;
    pthread_mutex_lock(&ov->tree_lock);
    unsigned char state = n->owner_state;
    uid_t uid = n->owner_uid;
    gid_t gid = n->owner_gid;
    pthread_mutex_unlock(&ov->tree_lock);
    if (!state) {
        char pp[40], v[32];
        ssize_t len = ov_proc_path(ufd, pp) < 0 ? -1 : getxattr(pp, OV_XATTR_OWNER, v, sizeof v - 1);
        unsigned u, g;
        state = 1;
        if (len > 0) {
            v[len] = '\0';
            if (sscanf(v, "%u:%u", &u, &g) == 2) {
                state = 2;
                uid = u;
                gid = g;
            }
        } else if (len < 0 && errno != ENODATA) {
            return; /* not known: read again next time */
        }
        pthread_mutex_lock(&ov->tree_lock);
        n->owner_state = state;
        n->owner_uid = uid;
        n->owner_gid = gid;
        pthread_mutex_unlock(&ov->tree_lock);
    }
    if (state == 2) {
        st->st_uid = uid;
        st->st_gid = gid;
    }
}

int ov_owner_changed(struct ov *ov, struct ov_node *n, int ufd, const struct stat *shown, uid_t uid, gid_t gid) {
    struct stat st;
    if (ov->can_chown || S_ISLNK(shown->st_mode) || fstatat(ufd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    uid_t want_uid = uid == (uid_t)-1 ? shown->st_uid : uid;
    gid_t want_gid = gid == (gid_t)-1 ? shown->st_gid : gid;
    char pp[40];
    if (ov_proc_path(ufd, pp) < 0)
        return -EOVERFLOW;
    int r = 0;
    if (!holds_owner_record(st.st_mode)) {
        if (st.st_uid != want_uid || st.st_gid != want_gid)
            r = -EPERM; /* not an owner this copy can be given or shown */
    } else if (st.st_uid == want_uid && st.st_gid == want_gid) {
        if (removexattr(pp, OV_XATTR_OWNER) < 0 && errno != ENODATA)
            r = -errno;
    } else {
        r = ov_owner_keep(ufd, &st, want_uid, want_gid);
    }
    pthread_mutex_lock(&ov->tree_lock);
    n->owner_state = 0; /* read again */
    pthread_mutex_unlock(&ov->tree_lock);
    return r;
}

int ov_node_stat(struct ov *ov, struct ov_node *n, struct stat *ret_st) {
    struct stat st;
    int ufd = ov_node_upper(ov, n), kfd;
    if (ufd >= 0) {
        if (fstatat(ufd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        st.st_ino = ov_upper_ino(ov, st.st_ino);
        ov_owner_shown(ov, n, ufd, &st);
        /* A merged directory's link count is unknown without listing both
         * layers; report 1 ("unknown", as kernel overlayfs and btrfs do). */
        if (S_ISDIR(st.st_mode) && n->lower)
            st.st_nlink = 1;
    } else if (ufd != -ENOENT) {
        return ufd;
    } else if ((kfd = ov_node_kept_lower(ov, n)) >= 0) {
        /* removed from the view while the kernel held it: gone, as
         * natively (the lower object keeps its names on the host) */
        if (fstatat(kfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        st.st_nlink = 0;
        st.st_ino = ov_lower_ino(ov, st.st_ino);
    } else {
        _cleanup_close_ int lfd = ov_node_lower_open(ov, n, O_PATH);
        if (lfd < 0)
            return lfd == -ENOENT ? -ESTALE : lfd;
        if (fstatat(lfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        if ((st.st_mode & S_IFMT) != n->type)
            return -ESTALE; /* replaced on the host by another type */
        st.st_ino = ov_lower_ino(ov, st.st_ino);
    }
    /* a removed object keeps the number it had (st_ino does not change
     * under an open descriptor) */
    pthread_mutex_lock(&ov->tree_lock);
    if (!n->hashed && n->gone_ino)
        st.st_ino = n->gone_ino;
    pthread_mutex_unlock(&ov->tree_lock);
    *ret_st = st;
    return 0;
}

int ov_resolve(struct ov *ov, struct ov_node *parent, const char *name, struct ov_entry *ret) {
    return ov_resolve_in(ov, parent, -1, name, ret);
}

int ov_resolve_in(struct ov *ov, struct ov_node *parent, int lower_pfd, const char *name, struct ov_entry *ret) {
    struct ov_entry e = {0};
    int pfd = ov_node_upper(ov, parent);
    if (pfd >= 0) {
        if (fstatat(pfd, name, &e.ust, AT_SYMLINK_NOFOLLOW) == 0) {
            if (stage_is_whiteout(&e.ust))
                e.whiteout = true;
            else
                e.upper = true;
        } else if (errno != ENOENT) {
            return -errno;
        }
    } else if (pfd != -ENOENT) {
        return pfd;
    }
    if (parent->lower && !ov_masked_child(ov, parent, name)) {
        _cleanup_close_ int own = lower_pfd < 0 ? ov_node_lower_open(ov, parent, O_PATH | O_DIRECTORY) : -1;
        int lp = lower_pfd < 0 ? own : lower_pfd;
        if (lp >= 0) {
            /* a stage, or anything in one: the command may hold the
             * directory (its cwd) from before it became a stage */
            if (fstatat(lp, name, &e.lst, AT_SYMLINK_NOFOLLOW) == 0)
                e.lower_present = !ov_masked_id(ov, &e.lst) && !ov_masked_link(ov, &e.lst) &&
                                  !ov_lower_stage(ov, lp, name, e.lst.st_mode & S_IFMT) &&
                                  !ov_lower_stage(ov, lp, ".", S_IFDIR);
            else if (errno != ENOENT && errno != ENOTDIR)
                return -errno;
        } else if (lp != -ENOENT && lp != -ENOTDIR) {
            return lp;
        }
    }
    if (e.lower_present && !e.whiteout) {
        if (!e.upper) {
            e.lower = true;
        } else if (S_ISDIR(e.ust.st_mode) && S_ISDIR(e.lst.st_mode)) {
            int o = ov_is_opaque(pfd, name);
            if (o < 0)
                return o;
            e.lower = !o;
        }
    }
    *ret = e;
    return 0;
}

/* ---- node table ---- */

static size_t node_hash(const struct ov_node *parent, const char *name) {
    uint64_t h = (uint64_t)(uintptr_t)parent * 0x9E3779B97F4A7C15ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

static int table_grow(struct ov *ov) {
    size_t ncap = ov->hcap ? ov->hcap * 2 : 1024;
    struct ov_node **nt = calloc(ncap, sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    for (size_t i = 0; i < ov->hcap; i++) {
        struct ov_node *n = ov->htab[i], *next;
        for (; n; n = next) {
            next = n->hnext;
            size_t b = node_hash(n->parent, n->name) & (ncap - 1);
            n->hnext = nt[b];
            nt[b] = n;
        }
    }
    free(ov->htab);
    ov->htab = nt;
    ov->hcap = ncap;
    return 0;
}

/* tree_lock held */
static struct ov_node *table_find(struct ov *ov, struct ov_node *parent, const char *name) {
    if (!ov->hcap)
        return NULL;
    for (struct ov_node *n = ov->htab[node_hash(parent, name) & (ov->hcap - 1)]; n; n = n->hnext)
        if (n->parent == parent && strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

/* tree_lock held */
static int table_insert(struct ov *ov, struct ov_node *n) {
    if ((ov->hn + 1) * 2 > ov->hcap) {
        int r = table_grow(ov);
        if (r < 0)
            return r;
    }
    size_t b = node_hash(n->parent, n->name) & (ov->hcap - 1);
    n->hnext = ov->htab[b];
    ov->htab[b] = n;
    ov->hn++;
    n->hashed = true;
    n->parent->nref++;
    return 0;
}

/* tree_lock held; leaves n->parent set (caller drops the ref). */
static void table_remove(struct ov *ov, struct ov_node *n) {
    if (!n->hashed)
        return;
    size_t b = node_hash(n->parent, n->name) & (ov->hcap - 1);
    for (struct ov_node **pp = &ov->htab[b]; *pp; pp = &(*pp)->hnext) {
        if (*pp == n) {
            *pp = n->hnext;
            break;
        }
    }
    n->hashed = false;
    n->hnext = NULL;
    ov->hn--;
}

static void node_free(struct ov *ov, struct ov_node *n) {
    if (n->all_prev)
        n->all_prev->all_next = n->all_next;
    else if (ov->all == n)
        ov->all = n->all_next;
    if (n->all_next)
        n->all_next->all_prev = n->all_prev;
    if (n->upper_fd >= 0) {
        close(n->upper_fd);
        atomic_fetch_sub(&ov->n_upper_fds, 1);
    }
    if (n->kept_lower_fd >= 0) {
        close(n->kept_lower_fd);
        atomic_fetch_sub(&ov->n_upper_fds, 1);
    }
    free(n->name);
    free(n);
}

/* tree_lock held: free n and then ancestors that became unreferenced. */
static void try_free(struct ov *ov, struct ov_node *n) {
    while (n && n != ov->root && n->nlookup == 0 && n->nref == 0) {
        struct ov_node *p = NULL;
        if (n->hashed) {
            table_remove(ov, n);
            p = n->parent;
            p->nref--;
        }
        node_free(ov, n);
        n = p;
    }
}

struct ov_node *ov_node_get(struct ov *ov, struct ov_node *parent, const char *name, const struct ov_entry *e,
                            int *ret_err) {
    mode_t type = (e->upper ? e->ust.st_mode : e->lst.st_mode) & S_IFMT;
    pthread_mutex_lock(&ov->tree_lock);
    struct ov_node *n = table_find(ov, parent, name);
    if (n && n->type == type) {
        if (n->lower != e->lower)
            n->lower = e->lower;
        n->nlookup++;
        pthread_mutex_unlock(&ov->tree_lock);
        return n;
    }
    if (n) {
        /* The object at this name changed type behind the kernel's back
         * (host edit): give the new object a new node. */
        table_remove(ov, n);
        struct ov_node *p = n->parent;
        n->parent = NULL;
        p->nref--;
        try_free(ov, n);
    }
    n = calloc(1, sizeof(*n));
    char *nm = strdup(name);
    if (!n || !nm) {
        pthread_mutex_unlock(&ov->tree_lock);
        free(n);
        free(nm);
        *ret_err = -ENOMEM;
        return NULL;
    }
    n->name = nm;
    n->parent = parent;
    n->upper_fd = -1;
    n->kept_lower_fd = -1;
    n->lower = e->lower;
    n->type = type;
    n->nlookup = 1;
    n->all_next = ov->all;
    if (ov->all)
        ov->all->all_prev = n;
    ov->all = n;
    int r = table_insert(ov, n);
    pthread_mutex_unlock(&ov->tree_lock);
    if (r < 0) {
        pthread_mutex_lock(&ov->tree_lock);
        node_free(ov, n);
        pthread_mutex_unlock(&ov->tree_lock);
        *ret_err = r;
        return NULL;
    }
    return n;
}

void ov_node_ref_kernel(struct ov *ov, struct ov_node *n) {
    pthread_mutex_lock(&ov->tree_lock);
    n->nlookup++;
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_forget(struct ov *ov, struct ov_node *n, uint64_t nlookup) {
    if (n == ov->root)
        return;
    pthread_mutex_lock(&ov->tree_lock);
    n->nlookup = nlookup > n->nlookup ? 0 : n->nlookup - nlookup;
    try_free(ov, n);
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_detach_at(struct ov *ov, struct ov_node *parent, const char *name) {
    pthread_mutex_lock(&ov->tree_lock);
    struct ov_node *n = table_find(ov, parent, name);
    if (n) {
        table_remove(ov, n);
        n->parent = NULL;
        parent->nref--;
        n->lower = false;
        try_free(ov, parent);
        try_free(ov, n);
    }
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_detach(struct ov *ov, struct ov_node *n) {
    if (!n || n == ov->root)
        return;
    pthread_mutex_lock(&ov->tree_lock);
    if (n->hashed) {
        table_remove(ov, n);
        struct ov_node *p = n->parent;
        n->parent = NULL;
        p->nref--;
        n->lower = false;
        try_free(ov, p);
        try_free(ov, n);
    }
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_keep_upper(struct ov *ov, struct ov_node *parent, int pfd, const char *name) {
    pthread_mutex_lock(&ov->tree_lock);
    struct ov_node *n = table_find(ov, parent, name);
    if (n && n->upper_fd < 0) {
        int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        /* not into the reserve: a command holding many removed files
         * through O_PATH descriptors (no OPEN) would take it */
        if (ov_fd_below_reserve(ov, fd) && fstat(fd, &st) == 0 && !stage_is_whiteout(&st) &&
            (st.st_mode & S_IFMT) == n->type) {
            n->upper_fd = fd;
            atomic_fetch_add(&ov->n_upper_fds, 1);
        } else if (fd >= 0) {
            close(fd);
        }
    }
    struct stat st;
    if (n && n->upper_fd >= 0 && fstat(n->upper_fd, &st) == 0)
        n->gone_ino = ov_upper_ino(ov, st.st_ino); /* before its origin is forgotten */
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_node_keep_lower(struct ov *ov, struct ov_node *parent, const char *name, const char *relpath) {
    /* the lower is as it was: only the view lost the name */
    int fd = ov_lower_open(ov, relpath, O_PATH);
    struct stat st;
    if (fd < 0)
        return;
    if (!ov_fd_below_reserve(ov, fd) || fstat(fd, &st) < 0) { /* as ov_node_keep_upper */
        close(fd);
        return;
    }
    uint64_t ino = ov_lower_ino(ov, st.st_ino);
    pthread_mutex_lock(&ov->tree_lock);
    struct ov_node *n = table_find(ov, parent, name);
    if (n && n->upper_fd < 0 && n->kept_lower_fd < 0 && (st.st_mode & S_IFMT) == n->type) {
        n->kept_lower_fd = fd;
        n->gone_ino = ino;
        atomic_fetch_add(&ov->n_upper_fds, 1);
        fd = -1;
    }
    pthread_mutex_unlock(&ov->tree_lock);
    if (fd >= 0)
        close(fd);
}

void ov_node_drop_kept_lower(struct ov *ov, struct ov_node *n) {
    pthread_mutex_lock(&ov->tree_lock);
    int fd = n->kept_lower_fd;
    n->kept_lower_fd = -1;
    if (fd >= 0)
        atomic_fetch_sub(&ov->n_upper_fds, 1);
    pthread_mutex_unlock(&ov->tree_lock);
    if (fd >= 0)
        close(fd);
}

int ov_node_kept_lower(struct ov *ov, struct ov_node *n) {
    if (n == ov->root)
        return -1;
    pthread_mutex_lock(&ov->tree_lock);
    int fd = n->hashed ? -1 : n->kept_lower_fd;
    pthread_mutex_unlock(&ov->tree_lock);
    return fd;
}

int ov_node_move(struct ov *ov, struct ov_node *n, struct ov_node *newparent, const char *newname) {
    char *nm = strdup(newname);
    if (!nm)
        return -ENOMEM;
    pthread_mutex_lock(&ov->tree_lock);
    if (!n->hashed) {
        pthread_mutex_unlock(&ov->tree_lock);
        free(nm);
        return 0;
    }
    struct ov_node *old = table_find(ov, newparent, newname);
    if (old && old != n) {
        table_remove(ov, old);
        old->parent->nref--;
        old->parent = NULL;
        try_free(ov, old);
    }
    table_remove(ov, n);
    struct ov_node *op = n->parent;
    op->nref--;
    free(n->name);
    n->name = nm;
    n->parent = newparent;
    int r = table_insert(ov, n); /* takes a ref on newparent first ... */
    if (r < 0) {
        n->parent = NULL;
        n->hashed = false;
    }
    try_free(ov, op);
    pthread_mutex_unlock(&ov->tree_lock);
    return r;
}

void ov_nodes_clear_lower_below(struct ov *ov, struct ov_node *top) {
    pthread_mutex_lock(&ov->tree_lock);
    top->lower = false;
    for (size_t i = 0; i < ov->hcap; i++) {
        for (struct ov_node *n = ov->htab[i]; n; n = n->hnext) {
            for (struct ov_node *a = n->parent; a; a = a->parent) {
                if (a == top) {
                    n->lower = false;
                    break;
                }
                if (a == ov->root)
                    break;
            }
        }
    }
    pthread_mutex_unlock(&ov->tree_lock);
}

/* The set of files that had several names (ov->shared_ino): open
 * addressing, grown at half full, at most OV_SHARED_MAX entries.  Past
 * that, or when it cannot grow, every regular file's attributes go
 * uncached (shared_overflow): slower, never stale, and an agent that makes
 * and drops links in a loop cannot grow the supervisor without bound. */
#define OV_SHARED_MAX (1u << 20)

static size_t shared_slot(const struct ov *ov, uint64_t ino) {
    size_t j = (size_t)(ino * 0x9e3779b97f4a7c15ULL) & (ov->cap_shared - 1);
    while (ov->shared_ino[j] && ov->shared_ino[j] != ino)
        j = (j + 1) & (ov->cap_shared - 1);
    return j;
}

static bool shared_grow(struct ov *ov) {
    size_t nc = ov->cap_shared ? ov->cap_shared * 2 : 64;
    uint64_t *old = ov->shared_ino, *nt = calloc(nc, sizeof(*nt));
    if (!nt)
        return false;
    size_t oc = ov->cap_shared;
    ov->shared_ino = nt;
    ov->cap_shared = nc;
    for (size_t i = 0; i < oc; i++)
        if (old[i])
            nt[shared_slot(ov, old[i])] = old[i];
    free(old);
    return true;
}

static bool shared_find(struct ov *ov, uint64_t ino, bool add) {
    if (atomic_load(&ov->shared_overflow))
        return true;
    if (!add && atomic_load(&ov->n_shared) == 0)
        return false; /* the common case: no lock */
    bool found = false;
    pthread_mutex_lock(&ov->shared_lock);
    if (ov->cap_shared)
        found = ov->shared_ino[shared_slot(ov, ino)] == ino;
    if (!found && add && ino) {
        size_t n = atomic_load(&ov->n_shared);
        if (n >= OV_SHARED_MAX || ((n + 1) * 2 > ov->cap_shared && !shared_grow(ov))) {
            atomic_store(&ov->shared_overflow, true);
        } else {
            ov->shared_ino[shared_slot(ov, ino)] = ino;
            atomic_store(&ov->n_shared, n + 1);
        }
    }
    pthread_mutex_unlock(&ov->shared_lock);
    return found || atomic_load(&ov->shared_overflow);
}

void ov_shared_add(struct ov *ov, uint64_t ino) {
    shared_find(ov, ino, true);
}

double ov_attr_timeout(struct ov *ov, struct ov_node *n, const struct stat *st) {
    /* Several names of one file are different kernel inodes (one node per
     * name): a change made through one name must show through the others
     * at once, so their attributes are not cached.  Once it had several
     * names, never: a name that went away may still be open (a write
     * through it must show in stat(2) of the one left, and the reverse). */
    if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
        ov_shared_add(ov, (uint64_t)st->st_ino);
        return 0.0;
    }
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1)
        return 0.0;
    if (S_ISREG(st->st_mode) && shared_find(ov, (uint64_t)st->st_ino, false))
        return 0.0;
    /* Objects still backed by the lower may be edited on the host at any
     * time: cached only for the configured (short) time.  Upper-only
     * objects change only through us. */
    return n->lower ? ov->lower_timeout : 1.0;
}

void ov_present_attr(const struct ov *ov, struct stat *st) {
    if (ov->own_group && st->st_uid == ov->self_uid)
        st->st_gid = ov->self_gid;
}

static void fill_entry_ids(struct ov *ov, struct ov_node *n, struct fuse_entry_param *e) {
    ov_present_attr(ov, &e->attr);
    e->ino = n == ov->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
    e->attr_timeout = ov_attr_timeout(ov, n, &e->attr);
    e->entry_timeout = n->lower ? ov->lower_timeout : 1.0;
}

int ov_fill_entry(struct ov *ov, struct ov_node *n, struct fuse_entry_param *e) {
    memset(e, 0, sizeof(*e));
    int r = ov_node_stat(ov, n, &e->attr);
    if (r < 0)
        return r;
    fill_entry_ids(ov, n, e);
    return 0;
}

/* As ov_fill_entry, with the attributes of the entry that ov_resolve just
 * returned for n under the same namespace lock hold (the upper changes only
 * under the write lock): no second walk of the lower path. */
int ov_fill_entry_resolved(struct ov *ov, struct ov_node *n, const struct ov_entry *res, struct fuse_entry_param *e) {
    memset(e, 0, sizeof(*e));
    if (res->upper) {
        e->attr = res->ust;
        e->attr.st_ino = ov_upper_ino(ov, e->attr.st_ino);
        if (!ov->can_chown && e->attr.st_uid == ov->self_uid) {
            int ufd = ov_node_upper(ov, n);
            if (ufd >= 0)
                ov_owner_shown(ov, n, ufd, &e->attr);
        }
        /* as ov_node_stat: a merged directory's link count is unknown */
        if (S_ISDIR(e->attr.st_mode) && n->lower)
            e->attr.st_nlink = 1;
    } else if (res->lower) {
        e->attr = res->lst;
        e->attr.st_ino = ov_lower_ino(ov, e->attr.st_ino);
    } else {
        return -ENOENT;
    }
    fill_entry_ids(ov, n, e);
    return 0;
}

void ov_table_free(struct ov *ov) {
    while (ov->all)
        node_free(ov, ov->all);
    free(ov->htab);
    ov->htab = NULL;
    ov->hcap = ov->hn = 0;
}
