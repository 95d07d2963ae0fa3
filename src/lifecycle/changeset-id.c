/* changeset-id.c: the changeset ID (lc_changeset_id, lc_stage_changeset_id;
 * docs/lifecycle.md, "The changeset ID"), split from changeset.c, whose
 * walk makes the changeset it digests. */
#include "lifecycle/lc-internal.h"
#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The record of an entry is fed to SHA-256 as fixed-width little-endian
 * numbers and NUL-terminated strings (a path or a target holds no NUL),
 * so no two records read the same. */
struct idh {
    struct pv_sha256 *h;
    int r; /* the first error */
};

static void id_put(struct idh *x, const void *p, size_t n) {
    if (x->r == 0)
        x->r = pv_sha256_update(x->h, p, n);
}

static void id_u8(struct idh *x, unsigned v) {
    unsigned char b = (unsigned char)v;
    id_put(x, &b, 1);
}

static void id_u64(struct idh *x, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    id_put(x, b, 8);
}

static void id_str(struct idh *x, const char *s) {
    id_put(x, s, strlen(s) + 1);
}

static bool same_time(struct timespec a, struct timespec b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Is the open upper object fd still the one the walk read for e (inode,
 * type, ctime: any write, chmod, chown or xattr change moves it; a
 * regular file's size)? */
static int id_same_object(int fd, const struct lc_entry *e, struct stat *ret_st) {
    if (fstat(fd, ret_st) < 0)
        return -errno;
    const struct stat *st = ret_st;
    if ((uint64_t)st->st_ino != e->upper_ino || lc_type_of(st->st_mode) != e->new_type ||
        !same_time(st->st_ctim, e->new_ctime) || (e->new_type == LC_REG && (uint64_t)st->st_size != e->new_size))
        return -ESTALE;
    return 0;
}

/* The user xattrs apply gives the object (lc_xattrs_read: as the agent saw
 * them, sorted by name): count, then name, length and value of each. */
static int id_xattrs(struct idh *x, int fd) {
    struct lc_xattrs xa;
    int r = lc_xattrs_read(fd, true, &xa);
    if (r < 0)
        return r;
    id_u64(x, xa.n);
    for (size_t i = 0; i < xa.n; i++) {
        id_str(x, xa.names[i]);
        id_u64(x, xa.lens[i]);
        id_put(x, xa.values[i], xa.lens[i]);
    }
    lc_xattrs_free(&xa);
    return 0;
}

/* The content of the regular file fd (size bytes): its size, then its
 * data segments, each as offset, length and bytes, then UINT64_MAX.  A
 * hole is not read (apply copies none either: a sparse file of any size
 * costs the agent nothing, and must not cost the review a read of it); it
 * reads as zeros, so a record still names one content.  The size first:
 * a hole at the end is no segment, and without it a file reviewed at 4096
 * bytes and one truncated to 100 MB after the review (the same data
 * segment, zeros after it) had the same ID.  A file with as many blocks
 * as bytes has no hole: one segment, without an lseek. */
static int id_content(struct idh *x, int fd, const struct stat *st, unsigned char *buf, size_t buf_size) {
    uint64_t size = (uint64_t)st->st_size;
    id_u64(x, size);
    bool dense = (uint64_t)st->st_blocks * 512 >= size;
    for (uint64_t off = 0; off < size;) {
        uint64_t end = size;
        if (!dense) {
            off_t d = lseek(fd, (off_t)off, SEEK_DATA);
            if (d < 0 && errno == ENXIO)
                break; /* a hole to the end */
            if (d < 0 && errno != EINVAL)
                return -errno;
            if (d >= 0) {
                off_t h = lseek(fd, d, SEEK_HOLE);
                if (h < 0)
                    return -errno;
                off = (uint64_t)d;
                end = (uint64_t)h < size ? (uint64_t)h : size;
            } else {
                dense = true; /* no SEEK_DATA here: all of it */
            }
        }
        if (off >= end)
            break;
        id_u64(x, off);
        id_u64(x, end - off);
        while (off < end) {
            size_t want = end - off < buf_size ? (size_t)(end - off) : buf_size;
            ssize_t n = pread(fd, buf, want, (off_t)off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            if (n == 0)
                return -ESTALE; /* it shrank */
            id_put(x, buf, (size_t)n);
            off += (uint64_t)n;
        }
    }
    id_u64(x, UINT64_MAX);
    return x->r;
}

/* The new object of e (not deleted): type, mode, owner, and what apply
 * takes from the upper object, read from it after checking that it is the
 * one the walk saw, and checked again after. */
static int id_new_side(struct idh *x, const struct lc_entry *e, bool keep_owners, int upper_fd, unsigned char *buf,
                       size_t buf_size) {
    id_u8(x, e->new_type);
    id_u64(x, e->new_mode);
    /* the owner where apply gives it: run by root (not in the user
     * namespace of the verbs' second try, whose ids are not the files'
     * own, and where apply gives none) */
    if (keep_owners) {
        id_u64(x, e->new_uid);
        id_u64(x, e->new_gid);
    }
    int flags = e->new_type == LC_REG   ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY
                : e->new_type == LC_DIR ? O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                                        : O_PATH | O_NOFOLLOW; /* never opens a fifo or a device */
    _cleanup_close_ int fd = lc_open_beneath(upper_fd, e->path, flags, 0);
    if (fd < 0)
        return fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR ? -ESTALE : fd;
    struct stat st;
    int r = id_same_object(fd, e, &st);
    if (r < 0)
        return r;
    if (e->new_type == LC_LNK) {
        /* read by the walk; a symlink's target never changes in place */
        id_str(x, e->new_target ? e->new_target : "");
    } else if (e->new_type == LC_REG) {
        r = id_xattrs(x, fd);
        if (r == 0) {
            struct pv_sha256 *ch = NULL;
            r = pv_sha256_begin(&ch);
            struct idh cx = {ch, r};
            if (r == 0)
                r = id_content(&cx, fd, &st, buf, buf_size);
            unsigned char sha[32];
            if (r == 0)
                r = pv_sha256_end(ch, sha);
            pv_sha256_free(ch);
            if (r == 0)
                id_put(x, sha, 32);
        }
    } else if (e->new_type == LC_DIR) {
        r = id_xattrs(x, fd);
    }
    if (r < 0)
        return r;
    return id_same_object(fd, e, &st); /* nothing written while it was read */
}

/* The record of entry e. */
static void id_entry(struct idh *x, const struct lc_entry *e, bool keep_owners, int upper_fd, unsigned char *buf,
                     size_t buf_size) {
    id_str(x, e->path);
    id_u8(x, e->kind);
    id_u8(x, e->old_type);
    /* the old state apply checks the workspace against, and replaces */
    const struct lc_preimage *p = e->pre;
    id_u8(x, p != NULL);
    if (p) {
        id_u8(x, p->type);
        id_u64(x, p->mode);
        id_u8(x, p->has_sha);
        if (p->has_sha)
            id_put(x, p->sha, 32);
        id_u8(x, p->has_xattr_sha);
        if (p->has_xattr_sha)
            id_put(x, p->xattr_sha, 32);
    }
    if (e->kind != LC_DELETED) {
        int r = id_new_side(x, e, keep_owners, upper_fd, buf, buf_size);
        if (r < 0 && x->r == 0)
            x->r = r;
    }
}

/* The entries are hashed in chunks of ID_CHUNK, each to a digest of its
 * own, and the ID is the digest of those: the same whatever the number of
 * threads that read them (one per online CPU, up to ID_THREADS: most of
 * the cost is the system calls of opening and reading each file). */
#define ID_CHUNK 256
#define ID_THREADS 8

struct id_work {
    const struct lc_changeset *cs;
    int upper_fd;
    unsigned char (*digests)[32];
    size_t n_chunks;
    size_t next; /* atomic: the next chunk to take */
    int err;     /* atomic: the first error, which stops every thread */
};

static void *id_worker(void *arg) {
    struct id_work *w = arg;
    const size_t buf_size = 1 << 17;
    _cleanup_free_ unsigned char *buf = malloc(buf_size);
    if (!buf) {
        int zero = 0;
        __atomic_compare_exchange_n(&w->err, &zero, -ENOMEM, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        return NULL;
    }
    while (__atomic_load_n(&w->err, __ATOMIC_RELAXED) == 0) {
        size_t k = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (k >= w->n_chunks)
            break;
        struct idh x = {NULL, 0};
        x.r = pv_sha256_begin(&x.h);
        size_t end = (k + 1) * ID_CHUNK < w->cs->n ? (k + 1) * ID_CHUNK : w->cs->n;
        for (size_t i = k * ID_CHUNK; i < end && x.r == 0; i++)
            id_entry(&x, &w->cs->entries[i], w->cs->keep_owners, w->upper_fd, buf, buf_size);
        if (x.r == 0)
            x.r = pv_sha256_end(x.h, w->digests[k]);
        pv_sha256_free(x.h);
        if (x.r < 0) {
            int zero = 0;
            __atomic_compare_exchange_n(&w->err, &zero, x.r, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int lc_changeset_id(const struct lc_changeset *cs, int upper_fd, char ret_id[LC_CHANGESET_ID_LEN + 1]) {
    struct id_work w = {.cs = cs, .upper_fd = upper_fd, .n_chunks = (cs->n + ID_CHUNK - 1) / ID_CHUNK};
    _cleanup_free_ unsigned char(*digests)[32] = calloc(w.n_chunks + 1, 32);
    if (!digests)
        return -ENOMEM;
    w.digests = digests;
    pthread_t th[ID_THREADS - 1];
    size_t n_th = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (; n_th < ARRAY_SIZE(th) && cpus > 0 && n_th + 1 < (size_t)cpus && n_th + 1 < w.n_chunks; n_th++)
        if (pthread_create(&th[n_th], NULL, id_worker, &w) != 0)
            break;
    id_worker(&w);
    for (size_t t = 0; t < n_th; t++)
        pthread_join(th[t], NULL);
    if (w.err < 0)
        return w.err;
    struct idh x = {NULL, 0};
    x.r = pv_sha256_begin(&x.h);
    id_str(&x, "pvisor-changeset 1");
    id_str(&x, cs->workspace);
    id_u8(&x, cs->keep_owners);
    id_u64(&x, cs->n);
    id_put(&x, digests, w.n_chunks * 32);
    unsigned char sha[32];
    if (x.r == 0)
        x.r = pv_sha256_end(x.h, sha);
    pv_sha256_free(x.h);
    if (x.r < 0)
        return x.r;
    char hex[65];
    lc_hex(sha, hex);
    memcpy(ret_id, hex, LC_CHANGESET_ID_LEN);
    ret_id[LC_CHANGESET_ID_LEN] = '\0';
    return 0;
}

/* STAGE/reviewed: "pvisor-reviewed 1 ID OWNERS\n", ID the 32 hex digits
 * or "unknown", OWNERS 1 when the ID covers owners (cs->keep_owners). */
#define REVIEWED_MAGIC "pvisor-reviewed 1 "

int lc_review_record_write(int dir_fd, const char *id, bool keep_owners) {
    char buf[96];
    int n = snprintf(buf, sizeof buf, REVIEWED_MAGIC "%s %d\n", id && id[0] ? id : "unknown", keep_owners ? 1 : 0);
    if (n < 0 || (size_t)n >= sizeof buf)
        return -EINVAL;
    /* 0644 in the stage's 0700 directory: an apply by another user than
     * the reviewer's (root's review, the user's apply) reads it, and is
     * refused, rather than taking an unreadable record for none; its own
     * bytes first, then its name: a record lost to a crash would let a
     * plain apply through unchecked */
    return write_file_atomic_as(dir_fd, LC_REVIEWED, buf, (size_t)n, 0644, WRITE_SYNC_FILE_AND_DIR);
}

int lc_review_record_read(int dir_fd, char ret_id[LC_CHANGESET_ID_LEN + 1], bool *ret_keep_owners) {
    ret_id[0] = '\0';
    *ret_keep_owners = false;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = read_file_at(dir_fd, LC_REVIEWED, 128, &buf, &len);
    if (r < 0)
        return r == -EINVAL || r == -EFBIG ? -EBADMSG : r;
    const size_t m = strlen(REVIEWED_MAGIC);
    if (len < m || memcmp(buf, REVIEWED_MAGIC, m) != 0)
        return -EBADMSG;
    char *id = buf + m, *sp = strchr(id, ' ');
    if (!sp || (strcmp(sp, " 0\n") != 0 && strcmp(sp, " 1\n") != 0))
        return -EBADMSG;
    *ret_keep_owners = sp[1] == '1';
    *sp = '\0';
    if (strcmp(id, "unknown") == 0)
        return 0;
    if (strlen(id) != LC_CHANGESET_ID_LEN || !lc_changeset_id_valid(id))
        return -EBADMSG;
    memcpy(ret_id, id, LC_CHANGESET_ID_LEN + 1);
    return 0;
}

static int stage_changeset_id(const struct lc_stage *st, const struct lc_changeset *cs,
                              char ret_id[LC_CHANGESET_ID_LEN + 1]) {
    if (!st->sealed)
        return -ENOMEDIUM;
    int r = lc_changeset_id(cs, st->upper_fd, ret_id);
    if (r < 0)
        return r;
    /* A run that reopens the stage removes the marker first, and seals it
     * with a new one; so does a restore.  The same marker now as at the
     * open: no run changed the stage while it was read, and the files the
     * ID read were checked one by one besides. */
    struct stat sst;
    if (fstatat(st->dir_fd, "sealed", &sst, AT_SYMLINK_NOFOLLOW) < 0 || (uint64_t)sst.st_ino != st->seal_ino ||
        !same_time(sst.st_ctim, st->seal_ctime))
        return -ESTALE;
    return 0;
}

int lc_stage_changeset_id(struct lc_stage *st, const struct lc_changeset *cs, char ret_id[LC_CHANGESET_ID_LEN + 1]) {
    st->review_record_error = 0;
    int r = stage_changeset_id(st, cs, ret_id);
    /* What review and diff show is what a plain apply must find: the ID,
     * or, when there is none (the stage changed while it was read: a
     * review that showed a mix of two states; a file of it could not be
     * read), "unknown", which apply refuses until a review names one, or
     * --expect.  Recording nothing left a stage never reviewed before
     * unchecked: a run on it after this review, and a plain apply wrote
     * what no review showed.  (A file the agent made unreadable: the
     * caller tries again with the user's override, which records the ID.)
     * Not of a stage that is not sealed: nothing to vouch for. */
    if (r != -ENOMEDIUM)
        st->review_record_error = lc_review_record_write(st->dir_fd, r == 0 ? ret_id : NULL, cs->keep_owners);
    return r;
}

bool lc_changeset_id_valid(char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (c >= 'A' && c <= 'F')
            s[n] = (char)(c - 'A' + 'a');
        else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return n == LC_CHANGESET_ID_LEN;
}
