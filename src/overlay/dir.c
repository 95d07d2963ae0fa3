/* dir.c: merged directory listing, emptiness checks, dir handles.
 *
 * A listing is a snapshot taken at a handle's first READDIR (and again on
 * rewind to offset 0): upper entries (whiteouts hidden, but they also hide
 * the lower name), then, unless the upper directory is opaque, lower
 * entries not present in the upper; free of duplicates; "." and ".." come
 * first.  d_ino equals the st_ino that lookup/getattr report for the same
 * entry (ov_upper_ino / lower st_ino).
 *
 * Offsets (d_off) are not positions in one snapshot but a cookie derived
 * from the entry's name (dir_cookie), and a listing is ordered by cookie,
 * so it is deterministic.  "Continue after cookie k" means the same thing
 * in every snapshot: the kernel's listing cache (FOPEN_CACHE_DIR) is shared
 * by every open handle of the directory and may be refilled from a newer
 * snapshot, or fall back to a handle that never listed, in the middle of a
 * stream; with positions, an entry that was there all along would then be
 * skipped or repeated (e.g. `rm -r` removing entries while it lists).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#define OV_MAX_DIR_ENTRIES (1u << 24)
/* What the listings held by open directory handles may take together
 * (ov->dirh_bytes).  Each handle keeps its own snapshot, so without a
 * bound a command that opened one large directory many times (a listing
 * per handle, 65,536 handles a process) made the supervisor, which no
 * limit of the sandbox's counts, take memory without end.  Past it, the
 * least recently read snapshots of other handles are dropped: a handle
 * whose snapshot was dropped takes a new one at its next READDIR and goes
 * on after the cookie it got, which means the same in every snapshot. */
#define OV_DIRH_BUDGET (64u << 20)

struct ov_dirh {
    pthread_mutex_t lock; /* protects ents, n and loaded */
    struct ov_dirent *ents;
    size_t n;
    bool loaded;
    size_t bytes; /* dirh_lock: what ents takes (counted in ov->dirh_bytes) */
    /* dirh_lock: on ov's list of handles holding a snapshot, most recently
     * read first */
    bool listed;
    struct ov_dirh *prev, *next;
};

void ov_dirents_free(struct ov_dirent *d, size_t n) {
    if (!d)
        return;
    for (size_t i = 0; i < n; i++)
        free(d[i].name);
    free(d);
}

static size_t dirents_bytes(const struct ov_dirent *d, size_t n) {
    size_t b = n * sizeof(*d);
    for (size_t i = 0; i < n; i++)
        b += strlen(d[i].name) + 1 + 2 * sizeof(void *); /* the allocator's overhead */
    return b;
}

/* Take h off the list of snapshots (dirh_lock held). */
static void dirh_unlist(struct ov *ov, struct ov_dirh *h) {
    if (!h->listed)
        return;
    if (h->prev)
        h->prev->next = h->next;
    else
        ov->dirh_head = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        ov->dirh_tail = h->prev;
    h->prev = h->next = NULL;
    h->listed = false;
    ov->dirh_bytes -= h->bytes;
    h->bytes = 0;
}

/* h (its lock held) was just read: put it first on the list, counting its
 * snapshot if it is new, and drop other handles' snapshots, least recently
 * read first, while they take more than OV_DIRH_BUDGET together.  A handle
 * being read now (its lock taken) keeps its own. */
static void dirh_touch(struct ov *ov, struct ov_dirh *h) {
    pthread_mutex_lock(&ov->dirh_lock);
    if (!h->listed) {
        h->bytes = dirents_bytes(h->ents, h->n);
        ov->dirh_bytes += h->bytes;
    } else if (ov->dirh_head == h) {
        pthread_mutex_unlock(&ov->dirh_lock);
        return;
    } else {
        size_t b = h->bytes;
        dirh_unlist(ov, h);
        h->bytes = b;
        ov->dirh_bytes += b;
    }
    h->listed = true;
    h->prev = NULL;
    h->next = ov->dirh_head;
    if (ov->dirh_head)
        ov->dirh_head->prev = h;
    ov->dirh_head = h;
    if (!ov->dirh_tail)
        ov->dirh_tail = h;
    for (struct ov_dirh *v = ov->dirh_tail, *prev; v && v != h && ov->dirh_bytes > OV_DIRH_BUDGET; v = prev) {
        prev = v->prev;
        if (pthread_mutex_trylock(&v->lock) != 0)
            continue;
        dirh_unlist(ov, v);
        ov_dirents_free(v->ents, v->n);
        v->ents = NULL;
        v->n = 0;
        v->loaded = false;
        pthread_mutex_unlock(&v->lock);
    }
    pthread_mutex_unlock(&ov->dirh_lock);
}

struct dvec {
    struct ov_dirent *v;
    size_t n, cap;
    bool *hidden; /* parallel: whiteout marker (upper pass) */
};

static int dvec_push(struct dvec *dv, const char *name, uint64_t ino, mode_t type, bool hidden) {
    if (dv->n == dv->cap) {
        size_t nc = dv->cap ? dv->cap * 2 : 64;
        if (nc > OV_MAX_DIR_ENTRIES)
            return -EFBIG;
        struct ov_dirent *nv = realloc(dv->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        dv->v = nv;
        bool *nh = realloc(dv->hidden, nc * sizeof(bool));
        if (!nh)
            return -ENOMEM;
        dv->hidden = nh;
        dv->cap = nc;
    }
    char *nm = strdup(name);
    if (!nm)
        return -ENOMEM;
    dv->v[dv->n] = (struct ov_dirent){.name = nm, .ino = ino, .type = type};
    dv->hidden[dv->n] = hidden;
    dv->n++;
    return 0;
}

static int cmp_dirent(const void *a, const void *b) {
    return strcmp(((const struct ov_dirent *)a)->name, ((const struct ov_dirent *)b)->name);
}

static int cmp_dirent_off(const void *a, const void *b) {
    const struct ov_dirent *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The d_off cookie of a name: FNV-1a with a final mix, in [3, 2^62 + 2]
 * (0, 1 and 2 are the positions before ".", ".." and the first entry).
 * Names colliding in one listing are moved apart (ov_dir_list). */
static uint64_t dir_cookie(const char *name) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (h >> 2) + 3;
}

static mode_t dtype_to_mode(unsigned char t) {
    switch (t) {
    case DT_REG: return S_IFREG;
    case DT_DIR: return S_IFDIR;
    case DT_LNK: return S_IFLNK;
    case DT_FIFO: return S_IFIFO;
    case DT_SOCK: return S_IFSOCK;
    case DT_CHR: return S_IFCHR;
    case DT_BLK: return S_IFBLK;
    }
    return 0;
}

static int read_dir(int dir_fd, bool upper, struct ov *ov, struct dvec *dv) {
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(dir_fd, ".", &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    errno = 0;
    while ((de = readdir_no_dots(d))) {
        mode_t type = dtype_to_mode(de->d_type);
        uint64_t ino = de->d_ino;
        bool hidden = false;
        if (type == 0 || type == S_IFCHR) {
            struct stat st;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                    continue;
                return -errno;
            }
            type = st.st_mode & S_IFMT;
            hidden = upper && ov_is_whiteout(&st);
        }
        ino = upper ? ov_upper_ino(ov, ino) : ov_lower_ino(ov, ino);
        int r = dvec_push(dv, de->d_name, ino, type, hidden);
        if (r < 0)
            return r;
        errno = 0;
    }
    return errno ? -errno : 0;
}

/* Merged listing of directory node n, without "." and "..". */
int ov_dir_list(struct ov *ov, struct ov_node *n, struct ov_dirent **ret, size_t *ret_n) {
    struct dvec up = {0}, lo = {0}, out = {0};
    int r = 0;
    int ufd = ov_node_upper(ov, n);
    if (ufd >= 0) {
        r = read_dir(ufd, true, ov, &up);
        if (r < 0)
            goto done;
    } else if (ufd != -ENOENT) {
        r = ufd;
        goto done;
    }
    if (n->lower) {
        _cleanup_close_ int lfd = ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY);
        if (lfd >= 0) {
            r = read_dir(lfd, false, ov, &lo);
            if (r < 0)
                goto done;
            /* masked lower entries are not there (ov->mask), nor stages,
             * nor anything of a directory that became one while the
             * command held it */
            size_t w = 0;
            bool in_stage = ov_lower_stage(ov, lfd, ".", S_IFDIR);
            for (size_t k = 0; k < lo.n; k++) {
                if (in_stage) {
                    free(lo.v[k].name);
                    continue;
                }
                if (ov_masked_child(ov, n, lo.v[k].name) || ov_lower_stage(ov, lfd, lo.v[k].name, lo.v[k].type)) {
                    free(lo.v[k].name);
                    continue;
                }
                lo.v[w] = lo.v[k];
                lo.hidden[w++] = lo.hidden[k];
            }
            lo.n = w;
        } else if (ufd < 0) {
            r = lfd == -ENOENT ? -ESTALE : lfd;
            goto done;
        }
    }
    /* sort both (keeping the hidden flags aligned: sort indices) */
    for (size_t i = 0; i < up.n; i++)
        if (up.hidden[i])
            up.v[i].type |= 0x80000000u; /* temporarily tag whiteouts */
    if (up.n)
        qsort(up.v, up.n, sizeof(*up.v), cmp_dirent);
    if (lo.n)
        qsort(lo.v, lo.n, sizeof(*lo.v), cmp_dirent);
    size_t i = 0, j = 0;
    while (i < up.n || j < lo.n) {
        int c = i >= up.n ? 1 : j >= lo.n ? -1 : strcmp(up.v[i].name, lo.v[j].name);
        struct ov_dirent *pick = NULL;
        if (c <= 0) {
            if (!(up.v[i].type & 0x80000000u))
                pick = &up.v[i];
            i++;
            if (c == 0)
                j++;
        } else {
            pick = &lo.v[j++];
        }
        if (pick) {
            r = dvec_push(&out, pick->name, pick->ino, pick->type, false);
            if (r < 0)
                goto done;
        }
    }
    /* cookie order; the rare colliding names get the next free cookies
     * (at most 2^24 entries: no overflow of off_t) */
    for (size_t k = 0; k < out.n; k++)
        out.v[k].off = dir_cookie(out.v[k].name);
    if (out.n)
        qsort(out.v, out.n, sizeof(*out.v), cmp_dirent_off);
    for (size_t k = 1; k < out.n; k++)
        if (out.v[k].off <= out.v[k - 1].off)
            out.v[k].off = out.v[k - 1].off + 1;
    *ret = TAKE_PTR(out.v);
    *ret_n = out.n;
done:
    ov_dirents_free(up.v, up.n);
    ov_dirents_free(lo.v, lo.n);
    ov_dirents_free(out.v, out.n);
    free(up.hidden);
    free(lo.hidden);
    free(out.hidden);
    return r;
}

int ov_dir_is_empty(struct ov *ov, struct ov_node *n) {
    struct ov_dirent *d = NULL;
    size_t cnt = 0;
    int r = ov_dir_list(ov, n, &d, &cnt);
    if (r < 0)
        return r;
    ov_dirents_free(d, cnt);
    return cnt == 0;
}

/* Remove the whiteouts in the upper dir dir_fd/name; -ENOTEMPTY if it holds
 * anything else. */
int ov_upper_clear_whiteouts(struct ov *ov, int dir_fd, const char *name) {
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(dir_fd, name, &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        if (!ov_is_whiteout(&st))
            return -ENOTEMPTY;
        if (unlinkat(dirfd(d), de->d_name, 0) < 0)
            return -errno;
        ov_account_removed(ov, &st);
    }
    return 0;
}

/* ---- FUSE handlers ---- */

/* The kernel may cache a directory's listing (FOPEN_CACHE_DIR); it drops
 * the cache itself on every entry operation it sends us.  What it cannot
 * see are host edits of the lower directory, so the cache is kept
 * (FOPEN_KEEP_CACHE) only when both layers' directories are the objects
 * they were, unchanged (mtime, ctime), at the node's previous opendir. */
void ov_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    struct ov_dirh *h = calloc(1, sizeof(*h));
    if (!h) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_mutex_init(&h->lock, NULL);
    struct ov_stamp now[2];
    ov_rdlock(ov);
    ov_stamp_take(ov_node_upper(ov, n), &now[0]);
    _cleanup_close_ int lfd = n->lower ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -1;
    ov_stamp_take(lfd, &now[1]);
    ov_unlock(ov);
    pthread_mutex_lock(&ov->tree_lock);
    bool keep = n->stamped && ov_stamp_eq(&n->stamp[0], &now[0]) && ov_stamp_eq(&n->stamp[1], &now[1]);
    n->stamp[0] = now[0];
    n->stamp[1] = now[1];
    n->stamped = true;
    pthread_mutex_unlock(&ov->tree_lock);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->cache_readdir = 1;
    fi->keep_cache = keep;
    fuse_reply_open(req, fi);
}

/* One directory entry in plus mode: looked up like LOOKUP would (the kernel
 * then holds a reference to the node), or without attributes (nodeid 0:
 * the kernel instantiates nothing) for "." and "..", and for a name gone
 * since the snapshot.  Returns the bytes used, or more than left (not
 * added, reference dropped). */
static size_t add_plus(struct ov *ov, fuse_req_t req, char *buf, size_t left, struct ov_node *dir, int lower_dfd,
                       const char *name, const struct stat *st, off_t next) {
    struct fuse_entry_param fe = {.attr = *st};
    struct ov_node *child = NULL;
    if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
        struct ov_entry e;
        int r = ov_resolve_in(ov, dir, lower_dfd, name, &e);
        if (r >= 0 && ov_entry_exists(&e))
            child = ov_node_get(ov, dir, name, &e, &r);
        if (child && ov_fill_entry_resolved(ov, child, &e, &fe) < 0) {
            ov_node_forget(ov, child, 1);
            child = NULL;
            fe = (struct fuse_entry_param){.attr = *st};
        }
    }
    size_t need = fuse_add_direntry_plus(req, buf, left, name, &fe, next);
    if (need > left && child)
        ov_node_forget(ov, child, 1);
    return need;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi,
                           bool plus) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    struct ov_dirh *h = (struct ov_dirh *)(uintptr_t)fi->fh;
    if (size > 1 << 20)
        size = 1 << 20;
    _cleanup_free_ char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int r = 0;
    size_t used = 0;
    ov_rdlock(ov);
    pthread_mutex_lock(&h->lock);
    if (off == 0 || !h->loaded) {
        pthread_mutex_lock(&ov->dirh_lock);
        dirh_unlist(ov, h);
        pthread_mutex_unlock(&ov->dirh_lock);
        ov_dirents_free(h->ents, h->n);
        h->ents = NULL;
        h->n = 0;
        h->loaded = false;
        r = ov_dir_list(ov, n, &h->ents, &h->n);
        if (r >= 0)
            h->loaded = true;
    }
    if (r >= 0)
        dirh_touch(ov, h);
    struct stat self = {0}, par = {0};
    if (r >= 0 && off < 2) {
        r = ov_node_stat(ov, n, &self);
        pthread_mutex_lock(&ov->tree_lock);
        struct ov_node *p = (n != ov->root && n->parent) ? n->parent : n;
        pthread_mutex_unlock(&ov->tree_lock);
        if (r >= 0 && ov_node_stat(ov, p, &par) < 0)
            par = self;
    }
    /* plus mode resolves every name: open the lower directory once */
    _cleanup_close_ int lower_dfd = plus && r >= 0 ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -1;
    /* where to go on: 0, 1, 2 are the positions before ".", ".." and the
     * first entry; any other offset is the cookie of the last entry the
     * reader got, which need not be in this snapshot */
    size_t start = off >= 0 && off <= 2 ? (size_t)off : 2;
    if (r >= 0 && off > 2) {
        size_t lo = 0, hi = h->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->ents[mid].off <= (uint64_t)off)
                lo = mid + 1;
            else
                hi = mid;
        }
        start = 2 + lo;
    }
    for (size_t i = start; r >= 0 && i < h->n + 2; i++) {
        struct stat st = {0};
        const char *name;
        if (i == 0) {
            name = ".";
            st.st_ino = self.st_ino;
            st.st_mode = S_IFDIR;
        } else if (i == 1) {
            name = "..";
            st.st_ino = par.st_ino;
            st.st_mode = S_IFDIR;
        } else {
            struct ov_dirent *e = &h->ents[i - 2];
            name = e->name;
            st.st_ino = e->ino;
            st.st_mode = e->type;
        }
        off_t next = i < 2 ? (off_t)i + 1 : (off_t)h->ents[i - 2].off;
        size_t need = plus ? add_plus(ov, req, buf + used, size - used, n, lower_dfd, name, &st, next)
                           : fuse_add_direntry(req, buf + used, size - used, name, &st, next);
        if (need > size - used)
            break;
        used += need;
    }
    pthread_mutex_unlock(&h->lock);
    ov_unlock(ov);
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_buf(req, buf, used);
}

void ov_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    readdir_common(req, ino, size, off, fi, false);
}

/* READDIRPLUS: names with their attributes, so `ls -l`, `find` and `git
 * status` need no LOOKUP per entry (the kernel asks for it on a first
 * listing, and later when lookups in the directory suggest it). */
void ov_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    readdir_common(req, ino, size, off, fi, true);
}

void ov_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct ov_dirh *h = (struct ov_dirh *)(uintptr_t)fi->fh;
    if (h) {
        struct ov *ov = ov_from_req(req);
        pthread_mutex_lock(&ov->dirh_lock);
        dirh_unlist(ov, h);
        pthread_mutex_unlock(&ov->dirh_lock);
        ov_dirents_free(h->ents, h->n);
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
    fuse_reply_err(req, 0);
}

void ov_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    int r = 0;
    ov_rdlock(ov);
    int ufd = ov_node_upper(ov, n);
    if (ufd >= 0) {
        int fd = openat(ufd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            r = -errno;
        else {
            if ((datasync ? fdatasync(fd) : fsync(fd)) < 0)
                r = -errno;
            close(fd);
        }
    }
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}
