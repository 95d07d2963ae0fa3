/* fsutil.c: fd-relative, no-follow file helpers for the lifecycle module.
 *
 * Every path handed to these helpers is relative and resolved beneath a
 * directory fd with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 * RESOLVE_NO_MAGICLINKS): a symlink anywhere on the way (including the
 * final component) makes the open fail with ELOOP, ".." cannot climb out.
 */
#include "lifecycle/lc-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sha256.h"

/* Without openat2 (old kernels, valgrind, a seccomp filter that denies it):
 * the same guarantees by walking a validated path one component at a time,
 * each opened with O_NOFOLLOW relative to the previous directory fd.  A
 * validated path has no "..", "." or empty component and is relative, so
 * it cannot leave dirfd; O_NOFOLLOW makes every symlink fail with ELOOP. */
static int open_beneath_walk(int dirfd, const char *path, int flags, mode_t mode) {
    if (path[0] == '\0' || lc_path_is_root(path)) {
        int fd = openat(dirfd, ".", flags | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
    }
    if (!lc_path_valid(path))
        return -EXDEV; /* what RESOLVE_BENEATH says for an escape */
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash) {
            int fd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            int e = errno;
            close(cur);
            return fd < 0 ? -e : fd;
        }
        char comp[256];
        size_t n = (size_t)(slash - p);
        memcpy(comp, p, n);
        comp[n] = '\0';
        int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(cur);
        if (next < 0)
            return -e;
        cur = next;
        p = slash + 1;
    }
}

int lc_open_beneath(int dirfd, const char *path, int flags, mode_t mode) {
    static int no_openat2; /* set once openat2 answered ENOSYS (benign race) */
    if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long fd;
        do
            fd = syscall(SYS_openat2, dirfd, path[0] ? path : ".", &how, sizeof how);
        while (fd < 0 && errno == EAGAIN);
        if (fd >= 0)
            return (int)fd;
        if (errno != ENOSYS && errno != EPERM)
            return -errno;
        __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
    }
    return open_beneath_walk(dirfd, path, flags, mode);
}

int lc_open_parent(int dirfd, const char *path, const char **ret_name) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return -errno;
        *ret_name = path;
        return fd;
    }
    size_t n = (size_t)(slash - path);
    if (n == 0 || n > LC_MAX_PATH)
        return -EINVAL;
    char buf[LC_MAX_PATH + 1];
    memcpy(buf, path, n);
    buf[n] = '\0';
    int fd = lc_open_beneath(dirfd, buf, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    *ret_name = slash + 1;
    return fd;
}

bool lc_path_is_root(const char *path) {
    return strcmp(path, ".") == 0;
}

bool lc_path_valid(const char *path) {
    size_t len = strnlen(path, LC_MAX_PATH + 1);
    if (len == 0 || len > LC_MAX_PATH || path[0] == '/')
        return false;
    const char *p = path;
    while (*p) {
        const char *e = strchrnul(p, '/');
        size_t n = (size_t)(e - p);
        if (n == 0 || n > 255 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (*e == '\0')
            break;
        p = e + 1;
        if (*p == '\0')
            return false; /* trailing '/' */
    }
    return true;
}

int lc_sha256_fd(int fd, unsigned char ret_sha[32]) {
    return lc_hash_compare_fd(fd, -1, ret_sha, NULL);
}

int lc_sha256_buf(const void *data, size_t len, unsigned char ret_sha[32]) {
    return pv_sha256_buf(data, len, ret_sha);
}

void lc_hex(const unsigned char *sha, char ret_hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        ret_hex[2 * i] = digits[sha[i] >> 4];
        ret_hex[2 * i + 1] = digits[sha[i] & 15];
    }
    ret_hex[64] = '\0';
}

int lc_unhex(const char *hex, unsigned char *out, size_t out_len) {
    if (strlen(hex) != 2 * out_len)
        return -EINVAL;
    for (size_t i = 0; i < out_len; i++) {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            char c = hex[2 * i + (size_t)k];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0)
                return -EINVAL;
            v = v * 16 + d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

int lc_readlink_at(int dirfd, const char *name, char **ret_target) {
    char buf[LC_MAX_PATH + 2];
    ssize_t n = readlinkat(dirfd, name, buf, sizeof buf);
    if (n < 0)
        return -errno;
    if ((size_t)n > LC_MAX_PATH)
        return -ENAMETOOLONG;
    buf[n] = '\0';
    char *t = strdup(buf);
    if (!t)
        return -ENOMEM;
    *ret_target = t;
    return 0;
}

enum lc_type lc_type_of(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return LC_REG;
    case S_IFDIR: return LC_DIR;
    case S_IFLNK: return LC_LNK;
    case S_IFIFO: return LC_FIFO;
    case S_IFSOCK: return LC_SOCK;
    case S_IFCHR: return LC_CHR;
    case S_IFBLK: return LC_BLK;
    }
    return LC_NONE;
}

const char *lc_type_name(enum lc_type t) {
    static const char *const names[] = {"none", "reg", "dir", "lnk", "fifo", "sock", "chr", "blk"};
    return (unsigned)t < ARRAY_SIZE(names) ? names[t] : "none";
}

enum lc_type lc_type_parse(const char *s) {
    for (int t = LC_REG; t <= LC_BLK; t++)
        if (s && strcmp(s, lc_type_name((enum lc_type)t)) == 0)
            return (enum lc_type)t;
    return LC_NONE;
}

/* User xattrs of an open fd as the agent saw them: stage metadata
 * (user.overlay.* other than the escaped user.overlay.overlay.*) dropped,
 * escaped names unescaped.  The list is "name\0value-len\0value" records
 * in a malloc'd buffer; compared byte for byte after sorting names. */
void lc_xattrs_free(struct lc_xattrs *x) {
    for (size_t i = 0; i < x->n; i++) {
        free(x->names[i]);
        free(x->values[i]);
    }
    free(x->names);
    free(x->values);
    free(x->lens);
    *x = (struct lc_xattrs){0};
}

int lc_xattrs_read(int fd, bool from_upper, struct lc_xattrs *ret) {
    *ret = (struct lc_xattrs){0};
    char list[65536];
    ssize_t len = flistxattr(fd, list, sizeof list);
    if (len < 0)
        return errno == ENOTSUP || errno == EBADF ? 0 : -errno;
    size_t cap = 0;
    for (ssize_t off = 0; off < len;) {
        const char *name = list + off;
        off += (ssize_t)strlen(name) + 1;
        if (strncmp(name, "user.", 5) != 0)
            continue;
        const char *shown = name;
        char esc[300];
        if (from_upper && strncmp(name, "user.overlay.", 13) == 0) {
            if (strncmp(name, "user.overlay.overlay.", 21) != 0)
                continue; /* stage metadata (opaque, ...) */
            int m = snprintf(esc, sizeof esc, "user.overlay.%s", name + 21);
            if (m < 0 || (size_t)m >= sizeof esc)
                continue;
            shown = esc;
        } else if (!from_upper && strncmp(name, "user.overlay.", 13) == 0) {
            /* fine: a lower user.overlay.X is what the agent saw */
        }
        char val[65536];
        ssize_t vl = fgetxattr(fd, name, val, sizeof val);
        if (vl < 0) {
            /* removed since the listing; any other error is one: taken
             * for an absent attribute, apply wrote the file without it */
            if (errno == ENODATA)
                continue;
            int r = -errno;
            lc_xattrs_free(ret);
            return r;
        }
        if (ret->n == cap) {
            cap = cap ? 2 * cap : 8;
            if (cap > 4096) {
                lc_xattrs_free(ret);
                return -E2BIG;
            }
            char **nn = realloc(ret->names, cap * sizeof *nn);
            if (nn)
                ret->names = nn;
            char **nv = realloc(ret->values, cap * sizeof *nv);
            if (nv)
                ret->values = nv;
            size_t *nl = realloc(ret->lens, cap * sizeof *nl);
            if (nl)
                ret->lens = nl;
            if (!nn || !nv || !nl) {
                lc_xattrs_free(ret);
                return -ENOMEM;
            }
        }
        ret->names[ret->n] = strdup(shown);
        ret->values[ret->n] = malloc((size_t)vl + 1);
        if (!ret->names[ret->n] || !ret->values[ret->n]) {
            free(ret->names[ret->n]);
            free(ret->values[ret->n]);
            lc_xattrs_free(ret);
            return -ENOMEM;
        }
        memcpy(ret->values[ret->n], val, (size_t)vl);
        ret->lens[ret->n] = (size_t)vl;
        ret->n++;
    }
    /* sort by name (values follow their names) */
    for (size_t i = 1; i < ret->n; i++)
        for (size_t j = i; j > 0 && strcmp(ret->names[j - 1], ret->names[j]) > 0; j--) {
            char *t = ret->names[j];
            ret->names[j] = ret->names[j - 1];
            ret->names[j - 1] = t;
            char *v = ret->values[j];
            ret->values[j] = ret->values[j - 1];
            ret->values[j - 1] = v;
            size_t l = ret->lens[j];
            ret->lens[j] = ret->lens[j - 1];
            ret->lens[j - 1] = l;
        }
    return 0;
}

bool lc_xattrs_equal(const struct lc_xattrs *a, const struct lc_xattrs *b) {
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->names[i], b->names[i]) || a->lens[i] != b->lens[i] ||
            memcmp(a->values[i], b->values[i], a->lens[i]))
            return false;
    return true;
}

/* Set x on a file this process just created (O_EXCL): it has no user
 * xattrs yet, so there is nothing to list or remove first. */
int lc_xattrs_set_new(int fd, const struct lc_xattrs *x) {
    for (size_t j = 0; j < x->n; j++)
        if (fsetxattr(fd, x->names[j], x->values[j], x->lens[j], 0) < 0)
            return -errno;
    return 0;
}

/* Make fd's user xattrs exactly x (removing others). */
int lc_xattrs_apply(int fd, const struct lc_xattrs *x) {
    struct lc_xattrs cur;
    int r = lc_xattrs_read(fd, false, &cur);
    if (r < 0)
        return r;
    for (size_t i = 0; i < cur.n; i++) {
        bool keep = false;
        for (size_t j = 0; j < x->n && !keep; j++)
            keep = strcmp(cur.names[i], x->names[j]) == 0;
        if (!keep && fremovexattr(fd, cur.names[i]) < 0 && errno != ENODATA) {
            r = -errno;
            break;
        }
    }
    lc_xattrs_free(&cur);
    if (r < 0)
        return r;
    for (size_t j = 0; j < x->n; j++)
        if (fsetxattr(fd, x->names[j], x->values[j], x->lens[j], 0) < 0)
            return -errno;
    return 0;
}

/* Copy [off, off + len) of in to the same offsets of out (copy_file_range,
 * falling back to read/write); *use_cfr is cleared when the kernel cannot.
 * Stops early at EOF.  Adds the bytes copied to *total. */
static int copy_range(int in, int out, off_t off, uint64_t len, bool *use_cfr, const atomic_bool *cancel,
                      uint64_t *total) {
    off_t ioff = off, ooff = off;
    uint64_t done_all = 0;
    /* Cancellable copies go in pieces small enough to stop soon. */
    uint64_t piece = cancel ? (64u << 20) : (1u << 30);
    /* The buffer of the read/write fallback, on the heap: a static
     * __thread one is zeroed in every thread any pvisor process starts
     * (the FUSE workers too), whether it copies or not. */
    _cleanup_free_ char *buf = NULL;
    const size_t buf_size = 1 << 17;
    while (done_all < len) {
        if (cancel && atomic_load(cancel)) {
            *total += done_all;
            return -ECANCELED;
        }
        size_t want = len - done_all > piece ? (size_t)piece : (size_t)(len - done_all);
        ssize_t n;
        if (*use_cfr) {
            n = copy_file_range(in, &ioff, out, &ooff, want, 0);
            if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
                *use_cfr = false;
                continue;
            }
        } else {
            if (!buf && !(buf = malloc(buf_size)))
                return -ENOMEM;
            n = pread(in, buf, want < buf_size ? want : buf_size, ioff);
            for (ssize_t done = 0; n > 0 && done < n;) {
                ssize_t w = pwrite(out, buf + done, (size_t)(n - done), ooff);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w < 0)
                    return -errno;
                done += w;
                ooff += w;
            }
            if (n > 0)
                ioff += n;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        done_all += (uint64_t)n;
    }
    *total += done_all;
    return 0;
}

int lc_copy_fd(int in, int out, uint64_t size, uint64_t budget, uint64_t *ret_bytes) {
    return lc_copy_fd_cancel(in, out, size, budget, NULL, ret_bytes);
}

int lc_copy_fd_cancel(int in, int out, uint64_t size, uint64_t budget, const atomic_bool *cancel, uint64_t *ret_bytes) {
    if (size == UINT64_MAX) {
        struct stat st;
        if (fstat(in, &st) < 0)
            return -errno;
        size = (uint64_t)st.st_size;
    }
    uint64_t total = 0;
    bool use_cfr = true, seek_ok = true, shrank = false;
    int r = 0;
    for (off_t off = 0; (uint64_t)off < size;) {
        off_t data = off, hole = (off_t)size;
        if (seek_ok) {
            data = lseek(in, off, SEEK_DATA);
            if (data < 0 && errno == ENXIO)
                break; /* only a hole is left */
            if (data < 0) {
                if (errno != EINVAL && errno != EOPNOTSUPP) {
                    r = -errno;
                    break;
                }
                seek_ok = false; /* no SEEK_DATA here: all of it is data */
                data = off;
            } else if ((hole = lseek(in, data, SEEK_HOLE)) < 0) {
                r = -errno;
                break;
            }
        }
        if ((uint64_t)data >= size)
            break;
        if ((uint64_t)hole > size)
            hole = (off_t)size;
        uint64_t len = (uint64_t)(hole - data);
        if (len > budget - total) {
            r = -ENOSPC;
            break;
        }
        uint64_t before = total;
        if ((r = copy_range(in, out, data, len, &use_cfr, cancel, &total)) < 0)
            break;
        if (total - before < len) {
            shrank = true; /* in ended early: copy no more, extend nothing */
            break;
        }
        off = hole;
    }
    if (ret_bytes)
        *ret_bytes = total;
    if (r < 0)
        return r;
    /* a trailing hole: out gets in's size without data */
    struct stat ost;
    if (!shrank && (fstat(out, &ost) < 0 || ((uint64_t)ost.st_size < size && ftruncate(out, (off_t)size) < 0)))
        return -errno;
    return 0;
}

/* One pass over fd: its SHA-256 (when ret_sha) and whether its bytes equal
 * other's (when other >= 0; ret_equal).  Each file is read once, in the
 * same chunks; comparing stops at the first difference, hashing goes on to
 * the end.  This is the changeset's content comparison and the conflict
 * check's hash of the workspace file in one read (they used to read the
 * workspace file twice). */
int lc_hash_compare_fd(int fd, int other, unsigned char ret_sha[32], bool *ret_equal) {
    bool equal = other >= 0;
    off_t other_size = 0;
    if (equal) {
        struct stat sa, sb;
        if (fstat(fd, &sa) < 0 || fstat(other, &sb) < 0)
            return -errno;
        equal = sa.st_size == sb.st_size;
        other_size = sb.st_size;
    }
    if (!ret_sha && !equal) {
        if (ret_equal)
            *ret_equal = false;
        return 0;
    }
    /* on the heap, for the reason copy_range gives */
    const size_t buf_size = 1 << 17;
    _cleanup_free_ unsigned char *buf = malloc(buf_size);
    _cleanup_free_ unsigned char *obuf = equal ? malloc(buf_size) : NULL;
    if (!buf || (equal && !obuf))
        return -ENOMEM;
    struct pv_sha256 *ctx = NULL;
    if (ret_sha) {
        int r = pv_sha256_begin(&ctx);
        if (r < 0)
            return r;
    }
    off_t off = 0;
    int r = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, buf_size, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (n == 0) {
            if (equal && off != other_size)
                equal = false;
            break;
        }
        if (equal) {
            ssize_t m = 0;
            while (m < n) {
                ssize_t k = pread(other, obuf + m, (size_t)(n - m), off + m);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0) {
                    r = -errno;
                    break;
                }
                if (k == 0)
                    break;
                m += k;
            }
            if (r < 0)
                break;
            if (m != n || memcmp(buf, obuf, (size_t)n) != 0)
                equal = false;
        }
        off += n;
        if (ctx && (r = pv_sha256_update(ctx, buf, (size_t)n)) < 0)
            break;
        if (!ctx && !equal)
            break;
    }
    if (r == 0 && ctx)
        r = pv_sha256_end(ctx, ret_sha);
    pv_sha256_free(ctx);
    if (r == 0 && ret_equal)
        *ret_equal = equal;
    return r;
}

/* Are the contents of two fds equal?  1 yes, 0 no, -errno. */
int lc_fd_equal(int a, int b) {
    bool equal = false;
    int r = lc_hash_compare_fd(a, b, NULL, &equal);
    return r < 0 ? r : equal;
}

char *lc_display_name(const char *s) {
    char *e = term_escape(s);
    size_t n = e ? strlen(e) : 0;
    if (!n || !(e[0] == ' ' || e[n - 1] == ' ' || strstr(e, "  ")))
        return e;
    char *o = malloc(4 * n + 1), *w = o;
    for (const char *p = e; o && *p; p++)
        w = *p == ' ' ? stpcpy(w, "\\x20") : (*w = *p, w + 1);
    if (o)
        *w = '\0';
    free(e);
    return o;
}

bool lc_utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0)
            return false;
        uint32_t cp = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* no overlong forms, surrogates or code points past U+10FFFF */
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += n + 1;
    }
    return true;
}
