/* dir.c: merged directory listing, emptiness checks, dir handles.
 *
 * A handle reads a snapshot of the listing, taken at its first READDIR
 * (and again on rewind to offset 0, or once its directories changed:
 * readdir_common): upper entries (whiteouts hidden, but they also hide the
 * lower name), then, unless the upper directory is opaque, lower entries
 * not present in the upper; free of duplicates; "." and ".." come first.
 * d_ino equals the st_ino that lookup/getattr report for the same entry
 * (ov_upper_ino / ov_lower_ino).
 *
 * Reading a directory costs the server far more than an open and a seek
 * cost the command (1,000 opens of a directory of 5,000 names: 3.4 s of
 * the supervisor's CPU, which no limit of the sandbox counts, against
 * 0.06 s), so a snapshot is shared (struct ov_listing): the directory's
 * next opens take the same one while neither of its directories changed
 * (listing_fits), as the close-to-open promise allows: a host edit of the
 * lower shows at the next open.  A change the server made itself to the
 * upper directory is patched into a new snapshot, by name, instead of
 * reading the directory again (struct ov_listing, listing_patch).
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
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#define OV_MAX_DIR_ENTRIES (1u << 24)
/* What the listings take together (ov->dirh_bytes).  Without a bound a
 * command that opened one large directory many times, changing it in
 * between, made the supervisor, which no limit of the sandbox's counts,
 * take memory without end (a listing per handle, 65,536 handles a
 * process).  Past it, the least recently read listings are dropped,
 * whoever holds them: a handle whose listing was dropped takes one again
 * at its next READDIR and goes on after the cookie it got, which means
 * the same in every snapshot. */
#define OV_DIRH_BUDGET (64u << 20)
/* How many listings are kept for reuse (ov->ltab): OV_LTAB_WAYS in each
 * of its 1 << OV_LTAB_BITS buckets, chosen by the directory's node. */
#define OV_LTAB_WAYS 4
/* A directory changed less than this long (seconds) before it was read is
 * not taken as unchanged on its timestamps: a later change may have got
 * the same ones (a file system's timestamps are as coarse as a second,
 * its clock as a scheduler tick). */
#define OV_LISTING_QUIET 2
/* The names a kept listing collects (ov_dir_changed) before it is given
 * up instead: this many, or an eighth of its entries; past that, patching
 * costs about what reading the directory again does (and the names kept
 * are bounded by the listing's size). */
#define OV_PEND_MIN 64
/* A patched listing's names are in its own struct ov_names and those of
 * the listings it was patched from; past this many, they are copied into
 * one again (names that left the directory are not kept for long). */
#define OV_NAMES_DEPTH 16

/* Names of listings' entries, shared: a listing patched from another
 * (listing_patch) keeps the other's names and adds its new ones in a
 * struct ov_names of its own, whose parent is the other's. */
struct ov_names {
    struct ov_names *parent; /* a reference */
    atomic_uint refs;        /* listings, and the children */
    unsigned depth;          /* 1 + the parent's */
    size_t chain;            /* what this and its parents take */
    char data[];
};

static void names_put(struct ov_names *a) {
    while (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
        struct ov_names *p = a->parent;
        free(a);
        a = p;
    }
}

/* A new struct ov_names of size bytes, over parent (a reference taken). */
static struct ov_names *names_new(struct ov_names *parent, size_t size) {
    struct ov_names *a = malloc(sizeof(*a) + size);
    if (!a)
        return NULL;
    a->parent = parent;
    atomic_init(&a->refs, 1);
    a->depth = parent ? parent->depth + 1 : 1;
    a->chain = sizeof(*a) + size + 2 * sizeof(void *) + (parent ? parent->chain : 0);
    if (parent)
        atomic_fetch_add_explicit(&parent->refs, 1, memory_order_relaxed);
    return a;
}

/* A snapshot of a directory's merged listing, shared: by every handle
 * reading it and, while it is the directory's latest (cached), by the
 * directory's next opens.  The listing is taken before the masks, the
 * stages and the inode numbers' translation are applied, which the
 * reader applies to what it returns: it depends only on the two
 * directories' contents, which the key pins.
 *
 * The upper directory changes only through this server, which tells the
 * directory's latest listing which names it changed there (ov_dir_changed,
 * under the ns write lock, after the change): the next reader makes a new
 * listing from it by looking up those names only (listing_patch), in O(n)
 * copying, where reading the directories again, merging and sorting cost
 * far more: a command that listed a large directory a few entries at a
 * time, creating and removing a file in between, made the supervisor read
 * all of it at every READDIR.  What the server did not change (a host edit
 * of the lower, a stamp the notes do not account for) is read again. */
struct ov_listing {
    /* immutable: the key (but, under dirh_lock and the ns write lock,
     * stamp[0] and racy[0] move on while cached: ov_dir_touched) */
    const struct ov_node *node; /* whose; only compared (it may be freed) */
    struct ov_stamp stamp[2];   /* upper, lower directory, taken before they were read */
    bool lower;                 /* the node's lower was part of it */
    bool racy[2];               /* that directory had changed within OV_LISTING_QUIET */
    size_t bytes;               /* what it takes while listed */
    /* dirh_lock; ents, names and n are read without it while busy (they
     * are only freed, when dropped, while not busy) */
    struct ov_dirent *ents;
    struct ov_names *names;
    size_t n;
    unsigned refs; /* handles holding it (and ov_dir_is_empty while it reads) */
    unsigned busy; /* readers of ents now: not dropped meanwhile */
    bool cached;   /* in ov->ltab: found by the node's next opens */
    bool listed;   /* holds ents, counted in ov->dirh_bytes, on the LRU list */
    /* dirh_lock, changed under the ns write lock only (so stable for a
     * reader holding the ns lock): while cached, the names the server
     * changed in the upper directory since (ov_dir_changed), and the upper
     * directory's stamp after the last of those changes */
    char **pend;
    size_t npend, cap_pend;
    struct ov_stamp pend_after;
    struct ov_listing *hnext, *unext, *prev, *next;
};

struct ov_dirh {
    pthread_mutex_t lock;  /* protects ls */
    struct ov_listing *ls; /* a reference, or NULL before the first READDIR */
    /* dirh_lock: ov->open_dirhs, every handle not released yet (a
     * RELEASEDIR the kernel sends while the session stops is never read:
     * ov_dirhs_free) */
    struct ov_dirh *hprev, *hnext;
};

static struct ov_listing **ltab_bucket(struct ov *ov, const struct ov_node *n) {
    uint64_t h = (uint64_t)(uintptr_t)n * 0x9E3779B97F4A7C15ULL;
    return &ov->ltab[h >> (64 - OV_LTAB_BITS)];
}

/* ov->utab: the cached listings by their upper directory (dev, ino) */
static struct ov_listing **utab_bucket(struct ov *ov, dev_t dev, ino_t ino) {
    uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 40)) * 0x9E3779B97F4A7C15ULL;
    return &ov->utab[h >> (64 - OV_LTAB_BITS)];
}

/* dirh_lock held: forget l's collected names */
static void listing_pend_clear(struct ov *ov, struct ov_listing *l) {
    size_t b = 0;
    for (size_t i = 0; i < l->npend; i++) {
        b += strlen(l->pend[i]) + 1 + 2 * sizeof(void *) + sizeof(char *);
        free(l->pend[i]);
    }
    free(l->pend);
    l->pend = NULL;
    l->npend = l->cap_pend = 0;
    l->bytes -= b;
    if (l->listed)
        ov->dirh_bytes -= b;
}

/* dirh_lock held: take l out of ov->ltab (it is no longer found). */
static void listing_uncache(struct ov *ov, struct ov_listing *l) {
    if (!l->cached)
        return;
    for (struct ov_listing **pp = ltab_bucket(ov, l->node); *pp; pp = &(*pp)->hnext)
        if (*pp == l) {
            *pp = l->hnext;
            break;
        }
    if (l->stamp[0].present)
        for (struct ov_listing **pp = utab_bucket(ov, l->stamp[0].dev, l->stamp[0].ino); *pp; pp = &(*pp)->unext)
            if (*pp == l) {
                *pp = l->unext;
                break;
            }
    l->hnext = l->unext = NULL;
    l->cached = false;
}

/* dirh_lock held: take l off the LRU list and free its entries. */
static void listing_unlist(struct ov *ov, struct ov_listing *l) {
    listing_pend_clear(ov, l);
    if (!l->listed)
        return;
    if (l->prev)
        l->prev->next = l->next;
    else
        ov->dirh_head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        ov->dirh_tail = l->prev;
    l->prev = l->next = NULL;
    l->listed = false;
    ov->dirh_bytes -= l->bytes;
    free(l->ents);
    names_put(l->names);
    l->ents = NULL;
    l->names = NULL;
    l->n = 0;
}

/* dirh_lock held: l (not busy) is no longer needed by ov->ltab or by the
 * LRU list; free it once nobody holds it. */
static void listing_drop(struct ov *ov, struct ov_listing *l) {
    listing_uncache(ov, l);
    listing_unlist(ov, l);
    if (!l->refs)
        free(l);
}

/* dirh_lock held: a holder lets go of l (not busy for it any more). */
static void listing_put(struct ov *ov, struct ov_listing *l) {
    if (l && --l->refs == 0 && !l->cached)
        listing_drop(ov, l);
}

/* dirh_lock held: l was just read: first on the LRU list (counted, if it
 * is new there); then drop the least recently read others while all take
 * more than OV_DIRH_BUDGET (not those being read now). */
static void listing_touch(struct ov *ov, struct ov_listing *l) {
    if (!l->listed) {
        l->listed = true;
        ov->dirh_bytes += l->bytes;
        l->prev = NULL;
        l->next = ov->dirh_head;
        if (ov->dirh_head)
            ov->dirh_head->prev = l;
        ov->dirh_head = l;
        if (!ov->dirh_tail)
            ov->dirh_tail = l;
    } else if (ov->dirh_head != l) {
        l->prev->next = l->next;
        if (l->next)
            l->next->prev = l->prev;
        else
            ov->dirh_tail = l->prev;
        l->prev = NULL;
        l->next = ov->dirh_head;
        ov->dirh_head->prev = l;
        ov->dirh_head = l;
    }
    for (struct ov_listing *v = ov->dirh_tail, *prev; v && ov->dirh_bytes > OV_DIRH_BUDGET; v = prev) {
        prev = v->prev;
        if (v != l && !v->busy)
            listing_drop(ov, v);
    }
}

static void dirh_link(struct ov *ov, struct ov_dirh *h) {
    pthread_mutex_lock(&ov->dirh_lock);
    h->hprev = NULL;
    h->hnext = ov->open_dirhs;
    if (h->hnext)
        h->hnext->hprev = h;
    ov->open_dirhs = h;
    pthread_mutex_unlock(&ov->dirh_lock);
}

/* dirh_lock held */
static void dirh_unlink(struct ov *ov, struct ov_dirh *h) {
    if (h->hprev)
        h->hprev->hnext = h->hnext;
    else
        ov->open_dirhs = h->hnext;
    if (h->hnext)
        h->hnext->hprev = h->hprev;
    h->hprev = h->hnext = NULL;
}

void ov_dirhs_free(struct ov *ov) {
    while (ov->open_dirhs) {
        struct ov_dirh *h = ov->open_dirhs;
        dirh_unlink(ov, h);
        listing_put(ov, h->ls);
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
}

void ov_listings_free(struct ov *ov) {
    while (ov->dirh_head) {
        struct ov_listing *l = ov->dirh_head;
        l->refs = 0; /* handles the kernel never released */
        listing_drop(ov, l);
    }
}

/* The key of dir_cookie (ov->cookie_key): random, the same for the whole
 * run (a cookie must mean the same in every snapshot) and kept in the
 * stage (STAGE/cookie-key), so that a stage's directories list in the
 * same order in every run, as a file system's do.  A name's cookie was an
 * unkeyed hash (FNV-1a), whose collisions anyone can compute beforehand
 * (two 12-character names: a minute of one CPU): the second of two
 * colliding names gets the cookie after the first's (cookies_assign), so
 * its cookie changed with the other's presence, and a handle that had
 * read up to one of them skipped the other when the first was removed, or
 * returned it twice when the first was made, in the middle of its stream.
 * Keyed (SHA-256 of the key and the name, libcrypto's), a collision is as
 * unlikely as it is for any other 62-bit hash of names the command cannot
 * choose for it (what getdents shows of it, the cookies of names it made,
 * gives the key away no more than SHA-256 does). */
#define OV_COOKIE_KEY "cookie-key"

void ov_cookie_key_init(struct ov *ov) {
    int sfd = ov->stage ? stage_dir_fd(ov->stage) : -1;
    _cleanup_close_ int fd = sfd >= 0 ? openat(sfd, OV_COOKIE_KEY, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd >= 0 && read(fd, ov->cookie_key, sizeof ov->cookie_key) == (ssize_t)sizeof ov->cookie_key) {
        atomic_store(&ov->cookie_key_kept, true);
        return;
    }
    if (getrandom(ov->cookie_key, sizeof ov->cookie_key, 0) != (ssize_t)sizeof ov->cookie_key) {
        /* no getrandom (before 3.17): the time and pid, which the command
         * cannot know to the nanosecond */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t k[2] = {(uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32, (uint64_t)ts.tv_sec};
        memcpy(ov->cookie_key, k, sizeof ov->cookie_key);
    }
}

/* The key into the stage, at the first listing (not at the start: a run
 * that lists nothing writes nothing for it); over a short one a crash
 * left (the run holds the stage's lock: no other view writes it).  A
 * stage that cannot keep it lists in another order next time, nothing
 * worse. */
static void cookie_key_keep(struct ov *ov) {
    if (atomic_load(&ov->cookie_key_kept) || atomic_exchange(&ov->cookie_key_kept, true))
        return;
    int sfd = ov->stage ? stage_dir_fd(ov->stage) : -1;
    _cleanup_close_ int fd =
        sfd >= 0 ? openat(sfd, OV_COOKIE_KEY, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (fd >= 0 && write(fd, ov->cookie_key, sizeof ov->cookie_key) != (ssize_t)sizeof ov->cookie_key)
        (void)unlinkat(sfd, OV_COOKIE_KEY, 0);
}

/* The d_off cookie of a name: its keyed hash (key: ov->cookie_key), in
 * [3, 2^62 + 2] (0, 1 and 2 are the positions before ".", ".." and the
 * first entry).  A listing is ordered by (cookie, name); names colliding
 * in one listing (by chance only) are moved apart (cookies_assign). */
static uint64_t dir_cookie(const unsigned char *key, const char *name) {
    return (pv_sha256_keyed64(key, name, strlen(name)) >> 2) + 3;
}

static int cmp_key(uint64_t ha, const char *a, uint64_t hb, const char *b) {
    if (ha != hb)
        return ha < hb ? -1 : 1;
    return strcmp(a, b);
}

static int cmp_dirent(const void *a, const void *b) {
    const struct ov_dirent *x = a, *y = b;
    return cmp_key(x->hash, x->name, y->hash, y->name);
}

/* The offsets of entries in (cookie, name) order: its cookie, or the one
 * after the previous entry's when that is not below it (the rare
 * collision; at most 2^24 entries: no overflow of off_t).  The same
 * entries get the same offsets however the listing was made. */
static void cookies_assign(struct ov_dirent *v, size_t n) {
    for (size_t k = 0; k < n; k++)
        v[k].off = k && v[k].hash <= v[k - 1].off ? v[k - 1].off + 1 : v[k].hash;
}

/* Entries being read, their names one after another in buf (an entry's
 * name is its offset there, in name_at, until the reading is done). */
struct dvec {
    struct ov_dirent *v;
    size_t *name_at;
    bool *hidden; /* whiteout (upper pass) */
    size_t n, cap;
    char *buf;
    size_t len, bcap;
};

static void dvec_free(struct dvec *dv) {
    free(dv->v);
    free(dv->name_at);
    free(dv->hidden);
    free(dv->buf);
}

static int dvec_push(struct dvec *dv, const char *name, uint64_t ino, mode_t type, bool upper, bool hidden) {
    if (dv->n == dv->cap) {
        size_t nc = dv->cap ? dv->cap * 2 : 64;
        if (nc > OV_MAX_DIR_ENTRIES)
            return -EFBIG;
        struct ov_dirent *nv = realloc(dv->v, nc * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        dv->v = nv;
        size_t *na = realloc(dv->name_at, nc * sizeof(*na));
        if (!na)
            return -ENOMEM;
        dv->name_at = na;
        bool *nh = realloc(dv->hidden, nc * sizeof(*nh));
        if (!nh)
            return -ENOMEM;
        dv->hidden = nh;
        dv->cap = nc;
    }
    size_t len = strlen(name) + 1;
    if (dv->bcap - dv->len < len) {
        size_t nb = dv->bcap ? dv->bcap * 2 : 4096;
        while (nb - dv->len < len)
            nb *= 2;
        char *b = realloc(dv->buf, nb);
        if (!b)
            return -ENOMEM;
        dv->buf = b;
        dv->bcap = nb;
    }
    memcpy(dv->buf + dv->len, name, len);
    dv->name_at[dv->n] = dv->len;
    dv->len += len;
    dv->v[dv->n] = (struct ov_dirent){.ino = ino, .type = type, .upper = upper};
    dv->hidden[dv->n] = hidden;
    dv->n++;
    return 0;
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

/* The entries of dir_fd, with their inode numbers as that layer has them
 * (the view's are worked out as they are returned: ov_upper_ino and
 * ov_lower_ino depend on the origin map, which copy-ups elsewhere change),
 * sorted by (cookie, name). */
static int read_dir(const unsigned char *key, int dir_fd, bool upper, struct dvec *dv) {
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(dir_fd, ".", &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    errno = 0;
    while ((de = readdir_no_dots(d))) {
        mode_t type = dtype_to_mode(de->d_type);
        bool hidden = false;
        if (type == 0 || type == S_IFCHR) {
            struct stat st;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                    continue;
                return -errno;
            }
            type = st.st_mode & S_IFMT;
            hidden = upper && stage_is_whiteout(&st);
        }
        int r = dvec_push(dv, de->d_name, de->d_ino, type, upper, hidden);
        if (r < 0)
            return r;
        errno = 0;
    }
    if (errno)
        return -errno;
    /* the names have their places now; the hidden flags travel in off */
    for (size_t i = 0; i < dv->n; i++) {
        dv->v[i].name = dv->buf + dv->name_at[i];
        dv->v[i].hash = dir_cookie(key, dv->v[i].name);
        dv->v[i].off = dv->hidden[i];
    }
    if (dv->n)
        qsort(dv->v, dv->n, sizeof(*dv->v), cmp_dirent);
    return 0;
}

/* Copy the names of v (n entries) into one new struct ov_names. */
static int names_flatten(struct ov_dirent *v, size_t n, struct ov_names **ret) {
    size_t size = 0;
    for (size_t m = 0; m < n; m++)
        size += strlen(v[m].name) + 1;
    struct ov_names *a = names_new(NULL, size);
    if (!a)
        return -ENOMEM;
    char *p = a->data;
    for (size_t m = 0; m < n; m++) {
        size_t len = strlen(v[m].name) + 1;
        memcpy(p, v[m].name, len);
        v[m].name = p;
        p += len;
    }
    *ret = a;
    return 0;
}

/* Merged listing of directory node n, without "." and "..", from its upper
 * directory ufd (or -ENOENT: none) and, when n->lower, its lower directory
 * lfd (or -errno: not listed, an error only without an upper): upper
 * entries (whiteouts hidden, but they also hide the lower name), then
 * lower entries not in the upper, in (cookie, name) order, with their
 * names in *ret_names.  Masked lower names, lower stages and the lower
 * entries of a directory that is a stage are still there: the reader
 * leaves them out (entry_hidden). */
static int dir_build(const unsigned char *key, struct ov_node *n, int ufd, int lfd, struct ov_dirent **ret,
                     size_t *ret_n, struct ov_names **ret_names) {
    struct dvec up = {0}, lo = {0};
    _cleanup_free_ struct ov_dirent *out = NULL;
    int r = 0;
    if (ufd >= 0) {
        r = read_dir(key, ufd, true, &up);
        if (r < 0)
            goto done;
    } else if (ufd != -ENOENT) {
        r = ufd;
        goto done;
    }
    if (n->lower) {
        if (lfd >= 0) {
            r = read_dir(key, lfd, false, &lo);
            if (r < 0)
                goto done;
        } else if (ufd < 0) {
            r = lfd == -ENOENT ? -ESTALE : lfd;
            goto done;
        }
    }
    /* merge the two by (cookie, name): a name in both is the upper's */
    out = malloc((up.n + lo.n ? up.n + lo.n : 1) * sizeof(*out));
    if (!out) {
        r = -ENOMEM;
        goto done;
    }
    size_t i = 0, j = 0, k = 0;
    while (i < up.n || j < lo.n) {
        int c = i >= up.n ? 1 : j >= lo.n ? -1 : cmp_dirent(&up.v[i], &lo.v[j]);
        const struct ov_dirent *pick = NULL;
        if (c <= 0) {
            if (!up.v[i].off)
                pick = &up.v[i];
            i++;
            if (c == 0)
                j++;
        } else {
            pick = &lo.v[j++];
        }
        if (pick)
            out[k++] = *pick;
    }
    struct ov_names *names = NULL;
    if ((r = names_flatten(out, k, &names)) < 0)
        goto done;
    cookies_assign(out, k);
    *ret = TAKE_PTR(out);
    *ret_n = k;
    *ret_names = names;
done:
    dvec_free(&up);
    dvec_free(&lo);
    return r;
}

/* One name the server changed in the upper directory, as it is now. */
struct patch_ent {
    const char *name;
    uint64_t hash;
    bool present; /* e: its entry; else it has none now */
    struct ov_dirent e;
    size_t at;    /* its place in the base listing */
    bool in_base; /* base has an entry of that name there */
};

static int cmp_patch(const void *a, const void *b) {
    const struct patch_ent *x = a, *y = b;
    return cmp_key(x->hash, x->name, y->hash, y->name);
}

/* The entry of name in node n's directories (upper ufd, lower lfd when
 * lower): what dir_build would list for it. */
static int patch_lookup(int ufd, int lfd, bool lower, struct patch_ent *p) {
    struct stat st;
    p->present = false;
    if (fstatat(ufd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (stage_is_whiteout(&st))
            return 0;
        p->e = (struct ov_dirent){.ino = st.st_ino, .type = st.st_mode & S_IFMT, .upper = true};
    } else if (errno != ENOENT) {
        return -errno;
    } else if (!lower || lfd < 0) {
        return 0;
    } else if (fstatat(lfd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        p->e = (struct ov_dirent){.ino = st.st_ino, .type = st.st_mode & S_IFMT, .upper = false};
    } else {
        return errno == ENOENT ? 0 : -errno;
    }
    p->present = true;
    return 0;
}

/* The listing of node n's directories now, made from base, which was
 * right before the server changed the names base->pend in the upper (ufd;
 * lower: lfd, unchanged since base), by looking up those names: base's
 * entries copied, those names' entries replaced, added or left out.
 * Shares base's names.  ns lock held (base->pend is stable), base busy. */
static int listing_patch(const unsigned char *key, const struct ov_listing *base, int ufd, int lfd,
                         struct ov_dirent **ret, size_t *ret_n, struct ov_names **ret_names) {
    size_t np = base->npend;
    _cleanup_free_ struct patch_ent *pv = calloc(np ? np : 1, sizeof(*pv));
    if (!pv)
        return -ENOMEM;
    for (size_t i = 0; i < np; i++)
        pv[i] = (struct patch_ent){.name = base->pend[i], .hash = dir_cookie(key, base->pend[i])};
    qsort(pv, np, sizeof(*pv), cmp_patch);
    size_t u = 0;
    for (size_t i = 0; i < np; i++)
        if (u == 0 || cmp_patch(&pv[u - 1], &pv[i]) != 0)
            pv[u++] = pv[i];
    np = u;
    /* where each goes in base, and what its entry is now */
    size_t added = 0, size = 0, at = 0;
    for (size_t i = 0; i < np; i++) {
        int r = patch_lookup(ufd, lfd, base->lower, &pv[i]);
        if (r < 0)
            return r;
        size_t lo = at, hi = base->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cmp_key(base->ents[mid].hash, base->ents[mid].name, pv[i].hash, pv[i].name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        at = pv[i].at = lo;
        pv[i].in_base = lo < base->n && strcmp(base->ents[lo].name, pv[i].name) == 0;
        if (pv[i].present && !pv[i].in_base) {
            added++;
            size += strlen(pv[i].name) + 1;
        }
    }
    if (base->n + added > OV_MAX_DIR_ENTRIES)
        return -EFBIG;
    _cleanup_free_ struct ov_dirent *out = malloc((base->n + added ? base->n + added : 1) * sizeof(*out));
    if (!out)
        return -ENOMEM;
    /* the new names in a struct ov_names of this listing's own, over base's */
    struct ov_names *names = base->names;
    if (size) {
        if (!(names = names_new(base->names, size)))
            return -ENOMEM;
    } else {
        atomic_fetch_add_explicit(&names->refs, 1, memory_order_relaxed);
    }
    /* base's runs between the changed names copied as they are */
    char *p = names->data;
    size_t k = 0;
    at = 0;
    for (size_t i = 0; i < np; i++) {
        memcpy(out + k, base->ents + at, (pv[i].at - at) * sizeof(*out));
        k += pv[i].at - at;
        at = pv[i].at;
        const char *name = NULL;
        if (pv[i].in_base)
            name = base->ents[at++].name;
        if (!pv[i].present)
            continue;
        if (!name) {
            size_t len = strlen(pv[i].name) + 1;
            memcpy(p, pv[i].name, len);
            name = p;
            p += len;
        }
        out[k] = pv[i].e;
        out[k].name = name;
        out[k].hash = pv[i].hash;
        k++;
    }
    memcpy(out + k, base->ents + at, (base->n - at) * sizeof(*out));
    k += base->n - at;
    if (names->depth > OV_NAMES_DEPTH) {
        struct ov_names *flat = NULL;
        int r = names_flatten(out, k, &flat);
        names_put(names);
        if (r < 0)
            return r;
        names = flat;
    }
    cookies_assign(out, k);
    *ret = TAKE_PTR(out);
    *ret_n = k;
    *ret_names = names;
    return 0;
}

/* May l, read before, stand for node n's directories, in the state now[]
 * (taken now), with n->lower as lower?  The same directories (objects);
 * the lower unchanged (its stamp: a host edit changes its ctime at least,
 * unless within the tick l was read in, which racy[1] rules out); the
 * upper unchanged too: its stamp, and no change through the server since
 * (l is cached and collected none: every change of upper/ is the
 * server's, and tells the directory's cached listing, ov_dir_changed; a
 * listing no longer cached hears of none, and stands only when it was
 * read once the upper had not changed for OV_LISTING_QUIET). */
static bool listing_fits(const struct ov_listing *l, const struct ov_stamp now[2], bool lower) {
    if (l->lower != lower || !ov_stamp_eq(&l->stamp[0], &now[0]) || !ov_stamp_eq(&l->stamp[1], &now[1]))
        return false;
    return !l->racy[1] && (l->cached ? l->npend == 0 : !l->racy[0]);
}

/* May l be patched (listing_patch) into n's listing now?  As
 * listing_fits, but the upper changed, through the server only: as it
 * was after the last change l heard of. */
static bool listing_patchable(const struct ov_listing *l, const struct ov_stamp now[2], bool lower) {
    return l->cached && l->npend && l->lower == lower && !l->racy[1] && ov_stamp_eq(&l->stamp[1], &now[1]) &&
           l->stamp[0].present && ov_stamp_eq(&l->pend_after, &now[0]);
}

static bool stamp_racy(const struct ov_stamp *s, const struct timespec *t0) {
    if (!s->present)
        return false;
    /* the ctime: every change of a directory's entries sets it, and no
     * one can set it back (the mtime the command may set at will) */
    time_t quiet = t0->tv_sec - OV_LISTING_QUIET;
    return s->ctime.tv_sec > quiet || (s->ctime.tv_sec == quiet && s->ctime.tv_nsec >= t0->tv_nsec);
}

/* The holder of l (from listing_get) has read it, and lets go of it too
 * when release. */
static void listing_done(struct ov *ov, struct ov_listing *l, bool release) {
    pthread_mutex_lock(&ov->dirh_lock);
    l->busy--;
    if (release)
        listing_put(ov, l);
    pthread_mutex_unlock(&ov->dirh_lock);
}

/* A listing of directory node n as it is now, held (a reference, and busy:
 * its entries stay until listing_done): mine (the handle's, held and busy
 * already; or NULL) if it still fits, else the one the node's last listing
 * left if that still fits (listing_fits), else one patched from that one
 * (listing_patchable) or read now, and kept for the next.  ns lock held
 * (read or write). */
static int listing_get(struct ov *ov, struct ov_node *n, struct ov_listing *mine, struct ov_listing **ret) {
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    bool lower = n->lower;
    int ufd = ov_node_upper(ov, n);
    _cleanup_close_ int lfd = lower ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -ENOENT;
    struct ov_stamp now[2];
    ov_stamp_take(ufd, &now[0]);
    ov_stamp_take(lfd, &now[1]);
    struct ov_listing **bucket = ltab_bucket(ov, n), *base = NULL;
    pthread_mutex_lock(&ov->dirh_lock);
    /* mine: also within the lower's tick (not re-read at every READDIR
     * while the host changes a directory; a host edit within a
     * timestamp's granularity of its reading shows at the next open, as a
     * listing's always did) */
    if (mine && mine->lower == lower && ov_stamp_eq(&mine->stamp[0], &now[0]) &&
        ov_stamp_eq(&mine->stamp[1], &now[1]) && (mine->cached ? mine->npend == 0 : !mine->racy[0])) {
        pthread_mutex_unlock(&ov->dirh_lock);
        *ret = mine;
        return 0;
    }
    for (struct ov_listing *l = *bucket; l; l = l->hnext)
        if (l->node == n) {
            if (listing_patchable(l, now, lower)) {
                base = l;
                base->refs++;
                base->busy++;
                break;
            }
            if (!listing_fits(l, now, lower))
                break;
            l->refs++;
            l->busy++;
            listing_touch(ov, l);
            pthread_mutex_unlock(&ov->dirh_lock);
            *ret = l;
            return 0;
        }
    pthread_mutex_unlock(&ov->dirh_lock);

    struct ov_listing *nl = calloc(1, sizeof(*nl));
    if (!nl) {
        if (base)
            listing_done(ov, base, true);
        return -ENOMEM;
    }
    *nl = (struct ov_listing){.node = n, .stamp = {now[0], now[1]}, .lower = lower};
    nl->racy[0] = stamp_racy(&now[0], &t0);
    nl->racy[1] = stamp_racy(&now[1], &t0);
    cookie_key_keep(ov);
    int r = base ? listing_patch(ov->cookie_key, base, ufd, lfd, &nl->ents, &nl->n, &nl->names) : -EAGAIN;
    if (base)
        listing_done(ov, base, true);
    if (r < 0) {
        /* not patched (an error looking a name up): read, which reports it */
        r = dir_build(ov->cookie_key, n, ufd, lfd, &nl->ents, &nl->n, &nl->names);
        if (r < 0) {
            free(nl);
            return r;
        }
        atomic_fetch_add_explicit(&ov->dir_listings, 1, memory_order_relaxed);
    }
    nl->bytes = sizeof(*nl) + nl->n * sizeof(*nl->ents) + nl->names->chain;
    nl->refs = 1;
    nl->busy = 1;
    pthread_mutex_lock(&ov->dirh_lock);
    /* the node's latest, in place of the one before; a bucket keeps the
     * OV_LTAB_WAYS most recently read */
    size_t ways = 0;
    for (struct ov_listing **pp = bucket, *l; (l = *pp);) {
        if (l->node == n || ++ways >= OV_LTAB_WAYS) {
            listing_uncache(ov, l); /* takes it out of the bucket: *pp is the next */
            if (!l->refs)
                listing_drop(ov, l);
        } else {
            pp = &l->hnext;
        }
    }
    nl->hnext = *bucket;
    *bucket = nl;
    if (nl->stamp[0].present) {
        struct ov_listing **ub = utab_bucket(ov, nl->stamp[0].dev, nl->stamp[0].ino);
        nl->unext = *ub;
        *ub = nl;
    }
    nl->cached = true;
    listing_touch(ov, nl);
    pthread_mutex_unlock(&ov->dirh_lock);
    *ret = nl;
    return 0;
}

/* What ov_dir_changed and ov_dir_touched tell dfd's cached listings:
 * name changed (NULL: they are read again), or nothing but the stamp
 * (touched). */
static void dir_note(struct ov *ov, int dfd, const char *name, bool touched) {
    struct ov_stamp after;
    ov_stamp_take(dfd, &after);
    if (!after.present)
        return;
    pthread_mutex_lock(&ov->dirh_lock);
    for (struct ov_listing *l = *utab_bucket(ov, after.dev, after.ino), *next; l; l = next) {
        next = l->unext;
        if (l->stamp[0].dev != after.dev || l->stamp[0].ino != after.ino)
            continue;
        bool keep = touched || (name && l->npend < (l->n / 8 > OV_PEND_MIN ? l->n / 8 : OV_PEND_MIN));
        if (!touched && keep && (l->npend == 0 || strcmp(l->pend[l->npend - 1], name) != 0)) {
            if (l->npend == l->cap_pend) {
                size_t nc = l->cap_pend ? l->cap_pend * 2 : 8;
                char **np = realloc(l->pend, nc * sizeof(*np));
                keep = np != NULL;
                if (np) {
                    l->pend = np;
                    l->cap_pend = nc;
                }
            }
            char *s = keep ? strdup(name) : NULL;
            keep = s != NULL;
            if (s) {
                l->pend[l->npend++] = s;
                size_t b = strlen(s) + 1 + 2 * sizeof(void *) + sizeof(char *);
                l->bytes += b;
                if (l->listed)
                    ov->dirh_bytes += b;
            }
        }
        if (!keep) {
            /* read again next time */
            listing_uncache(ov, l);
            if (!l->refs)
                listing_drop(ov, l);
        } else if (l->npend) {
            l->pend_after = after;
        } else {
            /* its entries as they were: the stamp moves on (should the
             * listing stop being cached, the stamp is a recent one) */
            l->stamp[0] = after;
            l->racy[0] = true;
        }
    }
    pthread_mutex_unlock(&ov->dirh_lock);
}

void ov_dir_changed(struct ov *ov, int dfd, const char *name) {
    dir_note(ov, dfd, name, false);
}

void ov_dir_touched(struct ov *ov, int dfd) {
    dir_note(ov, dfd, NULL, true);
}

/* Is entry e of directory node n's listing left out of the view?  A lower
 * name: when masked (ov->mask), when it is a stage, or when the lower
 * directory is one (lower_hidden); lower_dfd: n's lower directory, or
 * -errno.  The view's inode number of a shown one is put in *ret_ino. */
static bool entry_hidden(struct ov *ov, struct ov_node *n, int lower_dfd, bool lower_hidden, const struct ov_dirent *e,
                         uint64_t *ret_ino) {
    if (e->upper) {
        *ret_ino = ov_upper_ino(ov, e->ino);
        return false;
    }
    if (lower_hidden || ov_masked_child(ov, n, e->name))
        return true;
    /* a masked object under this name (ov_masked_id), or a file with
     * another name inside a masked directory (ov_masked_link): the listing
     * has its inode number, an lstat the rest (a mount point's is its
     * mount's root's); looked at only when the number is one of theirs */
    bool maybe = false;
    for (size_t i = 0; i < ov->n_mask_ids && !maybe; i++)
        maybe = ov->mask_ids[i].ino == e->ino;
    if (!maybe && (e->type == S_IFREG || !e->type))
        maybe = ov_masked_link_ino(ov, e->ino);
    if (maybe) {
        _cleanup_close_ int own = lower_dfd < 0 ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -1;
        struct stat st;
        if (fstatat(lower_dfd >= 0 ? lower_dfd : own, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || ov_masked_id(ov, &st) ||
            ov_masked_link(ov, &st))
            return true; /* or it could not be told: fail closed */
    }
    if (ov->hide_stages && (lower_dfd < 0 || ov_lower_stage(ov, lower_dfd, e->name, e->type)))
        return true;
    *ret_ino = ov_lower_ino(ov, e->ino);
    return false;
}

/* Is n's lower directory lower_dfd (or -errno) a stage: nothing of it is
 * shown, whenever it became one. */
static bool lower_dir_hidden(struct ov *ov, int lower_dfd) {
    return ov->hide_stages && (lower_dfd < 0 || ov_lower_stage(ov, lower_dfd, ".", S_IFDIR));
}

int ov_dir_is_empty(struct ov *ov, struct ov_node *n) {
    struct ov_listing *l = NULL;
    int r = listing_get(ov, n, NULL, &l);
    if (r < 0)
        return r;
    _cleanup_close_ int lfd = ov->hide_stages && n->lower ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -1;
    if (ov->hide_stages && n->lower && lfd < 0 && lfd != -ENOENT) {
        listing_done(ov, l, true);
        return lfd; /* not taken for empty: its lower names could not be checked */
    }
    bool lower_hidden = lower_dir_hidden(ov, lfd);
    bool empty = true;
    uint64_t ino;
    for (size_t i = 0; i < l->n && empty; i++)
        empty = entry_hidden(ov, n, lfd, lower_hidden, &l->ents[i], &ino);
    listing_done(ov, l, true);
    return empty;
}

/* Remove the whiteouts in the upper dir dir_fd/name; -ENOTEMPTY if it holds
 * anything else. */
int ov_upper_clear_whiteouts(struct ov *ov, int dir_fd, const char *name, const char *relpath) {
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(dir_fd, name, &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        if (!stage_is_whiteout(&st))
            return -ENOTEMPTY;
        if (unlinkat(dirfd(d), de->d_name, 0) < 0)
            return -errno;
        ov_dir_changed(ov, dirfd(d), de->d_name);
        ov_account_removed(ov, &st);
        if (relpath)
            ov_undo_whiteout(ov, relpath, de->d_name);
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
    /* a handle holds no descriptor, but each READDIR takes some for a
     * while (ov_fd_room) */
    if (!ov_fd_room(ov)) {
        fuse_reply_err(req, EMFILE);
        return;
    }
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
    dirh_link(ov, h);
    if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted: the kernel will not release it (as ov_op_open) */
        pthread_mutex_lock(&ov->dirh_lock);
        dirh_unlink(ov, h);
        pthread_mutex_unlock(&ov->dirh_lock);
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
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
    /* the handle's listing while it still fits the directories, unless
     * this is its first READDIR, a rewind, or the listing was dropped
     * (OV_DIRH_BUDGET): else the directory's as it is now.  Not an older
     * one: the kernel adds what a handle reads to the directory's listing
     * cache, which later opens keep (ov_op_opendir) while the directories
     * are as they were at the last open; a handle opened before a change
     * that went on from its older listing where a newer open's reading
     * had stopped left that change out of every later listing (the
     * command's own new file too).  Cookies mean the same in every
     * listing, so the handle goes on after its cookie as before. */
    struct ov_listing *l = h->ls, *mine = NULL;
    pthread_mutex_lock(&ov->dirh_lock);
    if (off != 0 && l && l->listed) {
        l->busy++;
        listing_touch(ov, l);
        mine = l;
    } else {
        listing_put(ov, l);
        h->ls = NULL;
    }
    pthread_mutex_unlock(&ov->dirh_lock);
    r = listing_get(ov, n, mine, &l);
    if (mine && (r < 0 || l != mine)) {
        listing_done(ov, mine, true);
        h->ls = NULL;
    }
    if (r >= 0)
        h->ls = l;
    bool held = r >= 0;
    struct stat self = {0}, par = {0};
    if (r >= 0 && off < 2) {
        r = ov_node_stat(ov, n, &self);
        pthread_mutex_lock(&ov->tree_lock);
        struct ov_node *p = (n != ov->root && n->parent) ? n->parent : n;
        pthread_mutex_unlock(&ov->tree_lock);
        if (r >= 0 && ov_node_stat(ov, p, &par) < 0)
            par = self;
    }
    /* plus mode resolves every name, and lower names are checked for
     * stages: open the lower directory once */
    _cleanup_close_ int lower_dfd =
        r >= 0 && (plus || (ov->hide_stages && n->lower)) ? ov_node_lower_open(ov, n, O_PATH | O_DIRECTORY) : -1;
    bool lower_hidden = n->lower && lower_dir_hidden(ov, lower_dfd);
    /* where to go on: 0, 1, 2 are the positions before ".", ".." and the
     * first entry; any other offset is the cookie of the last entry the
     * reader got, which need not be in this snapshot */
    size_t start = off >= 0 && off <= 2 ? (size_t)off : 2;
    if (r >= 0 && off > 2) {
        size_t lo = 0, hi = l->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (l->ents[mid].off <= (uint64_t)off)
                lo = mid + 1;
            else
                hi = mid;
        }
        start = 2 + lo;
    }
    for (size_t i = start; r >= 0 && i < l->n + 2; i++) {
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
            struct ov_dirent *e = &l->ents[i - 2];
            uint64_t d_ino;
            if (entry_hidden(ov, n, lower_dfd, lower_hidden, e, &d_ino))
                continue;
            name = e->name;
            st.st_ino = d_ino;
            st.st_mode = e->type;
        }
        off_t next = i < 2 ? (off_t)i + 1 : (off_t)l->ents[i - 2].off;
        size_t need = plus ? add_plus(ov, req, buf + used, size - used, n, lower_dfd, name, &st, next)
                           : fuse_add_direntry(req, buf + used, size - used, name, &st, next);
        if (need > size - used)
            break;
        used += need;
    }
    if (held)
        listing_done(ov, l, false);
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
        dirh_unlink(ov, h);
        listing_put(ov, h->ls);
        pthread_mutex_unlock(&ov->dirh_lock);
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
