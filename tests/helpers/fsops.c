/* fsops: seeded randomized differential file-system tester.
 *
 * Usage: fsops SEED NOPS DIR_A DIR_B [BATCH]
 *
 * Applies the same pseudo-random sequence of NOPS file operations (splitmix64
 * PRNG seeded with SEED, so a run is reproducible) to the trees DIR_A and
 * DIR_B, which are expected to start out identical.  Every operation's result
 * (return value and errno, and the bytes of reads) must be identical in both
 * trees; after every BATCH operations (default 200) and at the end the two
 * trees are compared in full: names, types, modes, owners, sizes, contents,
 * symlink targets, st_nlink (a directory may report 1, "unknown", as kernel
 * overlayfs does for merged directories), hard-link groups and user.* xattrs.
 *
 * On the first mismatch it prints the op index, the operation, its paths and
 * both results, then "fsops: FAILED seed=SEED" and exits 1.  Exit 0 when both
 * trees behaved identically throughout, 64 on a usage error.
 *
 * Operations: create (O_CREAT, sometimes O_EXCL / O_TRUNC), write at random
 * offsets (also beyond EOF, making holes; sometimes O_APPEND), truncate
 * (grow and shrink), fallocate, rename of files and directories (over
 * existing objects, into other directories, RENAME_NOREPLACE and
 * RENAME_EXCHANGE), link, unlink, mkdir, rmdir, mkfifo, chmod, symlink,
 * setxattr / removexattr / getxattr of user.*, read back, lstat, readdir.
 *
 * Paths come from a small name space (directories d0..d2 nested up to two
 * levels, leaves f0..f4, d0..d2, l0, l1) so that operations collide often;
 * symlink targets are relative names without "..", so nothing resolves
 * outside the tree.  The starting trees must keep to that too: a symlink
 * with ".." or an absolute target could be moved or followed to a file
 * outside both trees, which A and B would then share.  Every open uses
 * O_NONBLOCK (fifos never block).
 *
 * NOPS 0 only compares the two trees (e.g. a kernel overlayfs mount of a
 * sealed stage against the reference copy).
 *
 * Environment: FSOPS_SKIP, a comma-separated list of checks to leave out, to
 * triage one bug at a time: "nlink" (all st_nlink), "dirnlink" (st_nlink of
 * directories),
 * "ovxattr" (xattr names under user.overlay.), "exchange" (RENAME_EXCHANGE),
 * "fifo" (mkfifo), "inodes" (hard-link groups by st_ino and d_ino == st_ino),
 * "nofollow" (O_NOFOLLOW on some reads and writes), "enotempty" (no rmdir or
 * rename whose target is a non-empty directory in B).
 * FSOPS_VERBOSE=1 prints every operation and its result.
 *
 * Built standalone (the test suite compiles it like pvagent).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define MAXPATH 4096
#define MAXFILE (1 << 20) /* files never grow beyond ~1 MiB */

static uint64_t rng_state;
static uint64_t g_seed;
static long g_op;
static bool g_verbose;
static bool skip_nlink, skip_dirnlink, skip_ovxattr, skip_exchange, skip_fifo, skip_inodes, skip_nofollow,
    skip_enotempty;
static const char *root_a, *root_b;

static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t rnd(uint64_t n) {
    return n ? splitmix64() % n : 0;
}
static bool chance(unsigned pct) {
    return rnd(100) < pct;
}

static void fail_exit(void) {
    printf("fsops: FAILED seed=%" PRIu64 " (reproduce: fsops %" PRIu64 " ...)\n", g_seed, g_seed);
    fflush(stdout);
    exit(1);
}

/* ---- results ---- */

struct res {
    long ret; /* -1 on failure */
    int err;  /* errno when ret == -1, else 0 */
};

static struct res mk(long ret) {
    struct res r = {ret, ret < 0 ? errno : 0};
    if (ret < 0)
        r.ret = -1;
    return r;
}

static const char *errname(int e) {
    static char buf[64];
    const char *n = strerrorname_np(e);
    if (n)
        return n;
    snprintf(buf, sizeof buf, "errno%d", e);
    return buf;
}

static void fmt_res(char *buf, size_t len, struct res r) {
    if (r.ret < 0)
        snprintf(buf, len, "-1 %s", errname(r.err));
    else
        snprintf(buf, len, "%ld", r.ret);
}

static bool same_res(struct res a, struct res b) {
    return a.ret == b.ret && a.err == b.err;
}

static void report(const char *op, const char *p1, const char *p2, struct res a, struct res b, const char *extra) {
    char ba[96], bb[96];
    fmt_res(ba, sizeof ba, a);
    fmt_res(bb, sizeof bb, b);
    printf("fsops: MISMATCH op #%ld %s %s%s%s: A(overlay)=%s B(plain)=%s%s%s\n", g_op, op, p1, p2 ? " " : "",
           p2 ? p2 : "", ba, bb, extra ? " " : "", extra ? extra : "");
}

static void verbose(const char *op, const char *p1, const char *p2, struct res a, struct res b) {
    if (!g_verbose)
        return;
    char ba[96], bb[96];
    fmt_res(ba, sizeof ba, a);
    fmt_res(bb, sizeof bb, b);
    printf("# op #%ld %s %s%s%s -> A=%s B=%s\n", g_op, op, p1, p2 ? " " : "", p2 ? p2 : "", ba, bb);
}

static void expect_same(const char *op, const char *p1, const char *p2, struct res a, struct res b) {
    verbose(op, p1, p2, a, b);
    if (!same_res(a, b)) {
        report(op, p1, p2, a, b, NULL);
        fail_exit();
    }
}

/* ---- paths ---- */

static void pick_existing(char *buf, size_t len, bool dirs_only, bool *found);

static const char *dirnames[] = {"d0", "d1", "d2"};
static const char *leafnames[] = {"f0", "f1", "f2", "f3", "f4", "d0", "d1", "d2", "l0", "l1"};

static void rand_rel(char *buf, size_t len) {
    bool found = false;
    if (chance(50))
        pick_existing(buf, len, false, &found);
    if (found)
        return;
    int depth = (int)rnd(3);
    buf[0] = '\0';
    size_t off = 0;
    for (int i = 0; i < depth; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s/", dirnames[rnd(3)]);
    snprintf(buf + off, len - off, "%s", leafnames[rnd(sizeof leafnames / sizeof *leafnames)]);
}

static void rand_dirrel(char *buf, size_t len) {
    /* a directory-ish name: an existing directory, or dN components */
    bool found = false;
    if (chance(50))
        pick_existing(buf, len, true, &found);
    if (found)
        return;
    int depth = 1 + (int)rnd(2);
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < depth; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "/" : "", dirnames[rnd(3)]);
}

static void full(char *buf, const char *root, const char *rel) {
    snprintf(buf, MAXPATH, "%s/%s", root, rel);
}

static void fill(unsigned char *buf, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix64();
        size_t k = n - i < 8 ? n - i : 8;
        memcpy(buf + i, &v, k);
    }
}

/* ---- operations: each returns its result on one tree ---- */

static struct res do_create(const char *p, int flags, mode_t mode, const void *data, size_t n) {
    int fd = open(p, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | flags, mode);
    if (fd < 0)
        return mk(-1);
    ssize_t w = n ? write(fd, data, n) : 0;
    struct res r = mk(w);
    if (close(fd) < 0 && r.ret >= 0)
        r = mk(-1);
    return r;
}

static struct res do_pwrite(const char *p, bool append, bool nofollow, off_t off, const void *data, size_t n) {
    int fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0) | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0)
        return mk(-1);
    ssize_t w = append ? write(fd, data, n) : pwrite(fd, data, n, off);
    struct res r = mk(w);
    if (r.ret >= 0) {
        struct stat st;
        if (fstat(fd, &st) < 0)
            r = mk(-1);
        else
            r.ret = (long)st.st_size; /* the resulting size is part of the result */
    }
    close(fd);
    return r;
}

static struct res do_ftruncate(const char *p, off_t size) {
    int fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mk(-1);
    struct res r = mk(ftruncate(fd, size));
    close(fd);
    return r;
}

static struct res do_fallocate(const char *p, off_t off, off_t len) {
    int fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mk(-1);
    struct res r = mk(fallocate(fd, 0, off, len));
    if (r.ret >= 0) {
        struct stat st;
        r = fstat(fd, &st) < 0 ? mk(-1) : mk((long)st.st_size);
    }
    close(fd);
    return r;
}

static struct res do_pread(const char *p, bool nofollow, off_t off, size_t n, unsigned char *buf) {
    int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0)
        return mk(-1);
    struct res r = mk(pread(fd, buf, n, off));
    close(fd);
    return r;
}

/* lstat, reduced to what must agree */
static struct res do_lstat(const char *p, char *desc, size_t len) {
    struct stat st;
    struct res r = mk(lstat(p, &st));
    desc[0] = '\0';
    if (r.ret == 0) {
        bool dir = S_ISDIR(st.st_mode);
        snprintf(desc, len, "mode=%o uid=%u gid=%u size=%lld nlink=%lu", (unsigned)st.st_mode, (unsigned)st.st_uid,
                 (unsigned)st.st_gid, dir ? -1LL : (long long)st.st_size,
                 dir || skip_nlink ? 0UL : (unsigned long)st.st_nlink); /* dirs: see compare_trees */
    }
    return r;
}

static int cmpstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a directory, joined by '/'. */
static struct res do_readdir(const char *p, char *out, size_t len) {
    out[0] = '\0';
    DIR *d = opendir(p);
    if (!d)
        return mk(-1);
    char *names[512];
    size_t n = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) && n < 512) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        names[n++] = strdup(de->d_name);
    }
    struct res r = mk(errno ? -1 : (long)n);
    closedir(d);
    qsort(names, n, sizeof *names, cmpstr);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (off < len)
            off += (size_t)snprintf(out + off, len - off, "%s/", names[i]);
        free(names[i]);
    }
    return r;
}

static const char *xattr_name(void) {
    /* user.overlay.* is overlay metadata in the stage's upper layer: an agent
     * setting it must still see a plain file system (round trip untouched) */
    unsigned k = (unsigned)rnd(100);
    if (k < 30)
        return "user.a";
    if (k < 60)
        return "user.b";
    if (k < 93 || skip_ovxattr)
        return "user.comment";
    return "user.overlay.x";
}

/* ---- full tree comparison ---- */

struct ent {
    char *rel;
    struct stat st;
};

struct tree {
    struct ent *v;
    size_t n, cap;
};

static void tree_add(struct tree *t, const char *rel, const struct stat *st) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        if (!t->v)
            abort();
    }
    t->v[t->n].rel = strdup(rel);
    t->v[t->n].st = *st;
    t->n++;
}

static int walk(const char *root, const char *rel, ino_t d_ino, struct tree *t, char *why, size_t wlen) {
    char p[MAXPATH];
    if (rel[0])
        full(p, root, rel);
    else
        snprintf(p, sizeof p, "%s", root);
    struct stat st;
    if (lstat(p, &st) < 0) {
        snprintf(why, wlen, "lstat %s: %s", p, strerror(errno));
        return -1;
    }
    if (d_ino && d_ino != st.st_ino) {
        snprintf(why, wlen, "readdir gives %s d_ino %llu but lstat st_ino %llu", p, (unsigned long long)d_ino,
                 (unsigned long long)st.st_ino);
        return -1;
    }
    tree_add(t, rel[0] ? rel : ".", &st);
    if (!S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(p);
    if (!d) {
        snprintf(why, wlen, "opendir %s: %s", p, strerror(errno));
        return -1;
    }
    char *names[1024];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 1024) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        /* a merged readdir must report d_ino == st_ino (checked after lstat);
         * the ino rides behind the name's terminating NUL */
        size_t l = strlen(de->d_name);
        names[n] = malloc(l + 1 + sizeof(ino_t));
        memcpy(names[n], de->d_name, l + 1);
        memcpy(names[n] + l + 1, &de->d_ino, sizeof(ino_t));
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmpstr);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !strcmp(names[i], names[i - 1])) {
            snprintf(why, wlen, "readdir of %s lists '%s' twice", p, names[i]);
            return -1;
        }
    }
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        char sub[MAXPATH];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
        ino_t di;
        memcpy(&di, names[i] + strlen(names[i]) + 1, sizeof di);
        if (r == 0)
            r = walk(root, sub, skip_inodes ? 0 : di, t, why, wlen);
        free(names[i]);
    }
    return r;
}

static void tree_free(struct tree *t) {
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].rel);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

static unsigned char *slurp(const char *p, size_t *ret_n) {
    /* lstat said regular file (single-threaded, nothing else changes the
     * trees); O_NOFOLLOW is exercised by the random reads and writes */
    int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *ret_n = n;
    return buf;
}

/* user.* xattrs of p as a sorted "name=hexvalue;" string */
static int xattr_dump(const char *p, char *out, size_t len) {
    char list[4096];
    out[0] = '\0';
    ssize_t n = llistxattr(p, list, sizeof list);
    if (n < 0)
        return errno == ENOTSUP ? 0 : -1;
    char *names[64];
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < 64; i += (ssize_t)strlen(list + i) + 1)
        if (!strncmp(list + i, "user.", 5))
            names[k++] = list + i;
    qsort(names, k, sizeof *names, cmpstr);
    size_t off = 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char v[256];
        ssize_t vl = lgetxattr(p, names[i], v, sizeof v);
        if (vl < 0)
            return -1;
        off += (size_t)snprintf(out + off, len > off ? len - off : 0, "%s=", names[i]);
        for (ssize_t j = 0; j < vl; j++)
            off += (size_t)snprintf(out + off, len > off ? len - off : 0, "%02x", v[j]);
        off += (size_t)snprintf(out + off, len > off ? len - off : 0, ";");
    }
    return 0;
}

static bool compare_trees(const char *when) {
    struct tree ta = {0}, tb = {0};
    char why[MAXPATH + 128] = "";
    bool ok = true;
    if (walk(root_a, "", 0, &ta, why, sizeof why) < 0) {
        printf("fsops: MISMATCH %s: walking A (overlay): %s\n", when, why);
        ok = false;
        goto out;
    }
    if (walk(root_b, "", 0, &tb, why, sizeof why) < 0) {
        printf("fsops: MISMATCH %s: walking B (plain): %s\n", when, why);
        ok = false;
        goto out;
    }
    for (size_t i = 0, j = 0; i < ta.n || j < tb.n;) {
        int c = i == ta.n ? 1 : j == tb.n ? -1 : strcmp(ta.v[i].rel, tb.v[j].rel);
        if (c < 0) {
            printf("fsops: MISMATCH %s: %s exists only in A (overlay)\n", when, ta.v[i].rel);
            ok = false;
            i++;
            continue;
        }
        if (c > 0) {
            printf("fsops: MISMATCH %s: %s exists only in B (plain)\n", when, tb.v[j].rel);
            ok = false;
            j++;
            continue;
        }
        const char *rel = ta.v[i].rel;
        struct stat *a = &ta.v[i].st, *b = &tb.v[j].st;
        bool dir = S_ISDIR(b->st_mode);
        if (a->st_mode != b->st_mode || a->st_uid != b->st_uid || a->st_gid != b->st_gid) {
            printf("fsops: MISMATCH %s: %s mode/owner A=%o %u:%u B=%o %u:%u\n", when, rel, (unsigned)a->st_mode,
                   (unsigned)a->st_uid, (unsigned)a->st_gid, (unsigned)b->st_mode, (unsigned)b->st_uid,
                   (unsigned)b->st_gid);
            ok = false;
        }
        /* a merged directory may report st_nlink 1 ("unknown", as kernel
         * overlayfs does); any other directory count must be exact */
        if (!skip_nlink && (!dir || !skip_dirnlink) && a->st_nlink != b->st_nlink && !(dir && a->st_nlink == 1)) {
            printf("fsops: MISMATCH %s: %s st_nlink A=%lu B=%lu\n", when, rel, (unsigned long)a->st_nlink,
                   (unsigned long)b->st_nlink);
            ok = false;
        }
        if (!dir && a->st_size != b->st_size) {
            printf("fsops: MISMATCH %s: %s size A=%lld B=%lld\n", when, rel, (long long)a->st_size,
                   (long long)b->st_size);
            ok = false;
        }
        char pa[MAXPATH], pb[MAXPATH];
        full(pa, root_a, rel);
        full(pb, root_b, rel);
        if (!strcmp(rel, ".")) {
            snprintf(pa, sizeof pa, "%s", root_a);
            snprintf(pb, sizeof pb, "%s", root_b);
        }
        if (S_ISREG(a->st_mode) && S_ISREG(b->st_mode)) {
            size_t na = 0, nb = 0;
            unsigned char *ca = slurp(pa, &na), *cb = slurp(pb, &nb);
            if (!ca || !cb) {
                printf("fsops: MISMATCH %s: %s cannot be read: A %s, B %s\n", when, rel, ca ? "ok" : "failed",
                       cb ? "ok" : "failed");
                ok = false;
            } else if (na != nb || memcmp(ca, cb, na) != 0) {
                size_t k = 0;
                while (k < na && k < nb && ca[k] == cb[k])
                    k++;
                printf("fsops: MISMATCH %s: %s content differs (A %zu bytes, B %zu bytes, first difference at "
                       "byte %zu)\n",
                       when, rel, na, nb, k);
                ok = false;
            }
            free(ca);
            free(cb);
        }
        if (S_ISLNK(a->st_mode) && S_ISLNK(b->st_mode)) {
            char la[MAXPATH] = "", lb[MAXPATH] = "";
            ssize_t x = readlink(pa, la, sizeof la - 1), y = readlink(pb, lb, sizeof lb - 1);
            if (x >= 0)
                la[x] = '\0';
            if (y >= 0)
                lb[y] = '\0';
            if (x < 0 || y < 0 || strcmp(la, lb)) {
                printf("fsops: MISMATCH %s: %s symlink target A='%s' B='%s'\n", when, rel, la, lb);
                ok = false;
            }
        }
        char xa[8192], xb[8192];
        int ra = xattr_dump(pa, xa, sizeof xa), rb = xattr_dump(pb, xb, sizeof xb);
        if (ra != rb || strcmp(xa, xb)) {
            printf("fsops: MISMATCH %s: %s user xattrs A='%s'%s B='%s'%s\n", when, rel, xa, ra ? " (error)" : "", xb,
                   rb ? " (error)" : "");
            ok = false;
        }
        i++;
        j++;
    }
    /* hard-link groups: paths sharing an inode in B must share one in A */
    if (ok && !skip_inodes) {
        for (size_t i = 0; i < tb.n; i++) {
            if (S_ISDIR(tb.v[i].st.st_mode))
                continue;
            for (size_t k = i + 1; k < tb.n; k++) {
                if (S_ISDIR(tb.v[k].st.st_mode))
                    continue;
                bool lb = tb.v[i].st.st_ino == tb.v[k].st.st_ino && tb.v[i].st.st_dev == tb.v[k].st.st_dev;
                bool la = ta.v[i].st.st_ino == ta.v[k].st.st_ino && ta.v[i].st.st_dev == ta.v[k].st.st_dev;
                if (la != lb) {
                    printf("fsops: MISMATCH %s: %s and %s are %s in B (plain) but %s in A (overlay) "
                           "(A inos %llu, %llu)\n",
                           when, tb.v[i].rel, tb.v[k].rel, lb ? "one inode" : "distinct inodes",
                           la ? "one inode" : "distinct inodes", (unsigned long long)ta.v[i].st.st_ino,
                           (unsigned long long)ta.v[k].st.st_ino);
                    ok = false;
                }
            }
        }
    }
out:
    tree_free(&ta);
    tree_free(&tb);
    return ok;
}

/* An existing object of the reference tree B (sorted walk, so the choice
 * depends only on the seed and the trees' contents). */
static void pick_existing(char *buf, size_t len, bool dirs_only, bool *found) {
    struct tree t = {0};
    char why[64];
    *found = false;
    walk(root_b, "", 0, &t, why, sizeof why);
    size_t n = 0;
    for (size_t i = 1; i < t.n; i++) /* [0] is the root */
        if (!dirs_only || S_ISDIR(t.v[i].st.st_mode))
            n++;
    if (n > 0) {
        size_t k = (size_t)rnd(n);
        for (size_t i = 1; i < t.n; i++) {
            if (dirs_only && !S_ISDIR(t.v[i].st.st_mode))
                continue;
            if (k-- == 0) {
                snprintf(buf, len, "%s", t.v[i].rel);
                *found = strlen(t.v[i].rel) < len;
                break;
            }
        }
    }
    tree_free(&t);
}

/* Is p (in the plain tree B) a non-empty directory? */
static bool nonempty_dir(const char *p) {
    DIR *d = opendir(p);
    if (!d)
        return false;
    struct dirent *de;
    bool any = false;
    while (!any && (de = readdir(d)))
        any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return any;
}

/* ---- one random operation ---- */

static void one_op(void) {
    char r1[256], r2[256], a1[MAXPATH], b1[MAXPATH], a2[MAXPATH], b2[MAXPATH];
    static unsigned char data[65536], ra[65536], rb[65536];
    struct res x, y;
    unsigned k = (unsigned)rnd(100);
    rand_rel(r1, sizeof r1);
    full(a1, root_a, r1);
    full(b1, root_b, r1);

    if (k < 12) { /* create */
        int flags = 0;
        if (chance(25))
            flags |= O_EXCL;
        if (chance(30))
            flags |= O_TRUNC;
        static const mode_t modes[] = {0644, 0600, 0755, 0444, 0640};
        mode_t mode = modes[rnd(5)];
        size_t n = (size_t)rnd(4) == 0 ? 0 : (size_t)rnd(6000);
        fill(data, n);
        x = do_create(a1, flags, mode, data, n);
        y = do_create(b1, flags, mode, data, n);
        char op[64];
        snprintf(op, sizeof op, "create%s%s mode=%o len=%zu", flags & O_EXCL ? "+EXCL" : "",
                 flags & O_TRUNC ? "+TRUNC" : "", (unsigned)mode, n);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 27) { /* write at an offset (holes beyond EOF) or append */
        bool append = chance(20);
        bool nf = !skip_nofollow && chance(20);
        off_t off = (off_t)rnd(chance(20) ? 600000 : 70000);
        size_t n = 1 + (size_t)rnd(chance(10) ? 65536 : 5000);
        fill(data, n);
        x = do_pwrite(a1, append, nf, off, data, n);
        y = do_pwrite(b1, append, nf, off, data, n);
        char op[96];
        snprintf(op, sizeof op, "%s%s off=%lld len=%zu (result: size after)", append ? "append" : "pwrite",
                 nf ? "(O_NOFOLLOW)" : "", (long long)off, n);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 34) { /* truncate, grow or shrink */
        off_t size = (off_t)rnd(chance(30) ? 800000 : 9000);
        x = do_ftruncate(a1, size);
        y = do_ftruncate(b1, size);
        char op[64];
        snprintf(op, sizeof op, "ftruncate size=%lld", (long long)size);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 36) { /* fallocate */
        off_t off = (off_t)rnd(200000), len = 1 + (off_t)rnd(100000);
        x = do_fallocate(a1, off, len);
        y = do_fallocate(b1, off, len);
        char op[64];
        snprintf(op, sizeof op, "fallocate off=%lld len=%lld", (long long)off, (long long)len);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 48) { /* rename */
        if (chance(30))
            rand_dirrel(r2, sizeof r2);
        else
            rand_rel(r2, sizeof r2);
        if (chance(25)) { /* rename a directory-ish name */
            rand_dirrel(r1, sizeof r1);
            full(a1, root_a, r1);
            full(b1, root_b, r1);
        }
        full(a2, root_a, r2);
        full(b2, root_b, r2);
        if (skip_enotempty && nonempty_dir(b2))
            return;
        unsigned flags = 0;
        unsigned f = (unsigned)rnd(10);
        if (f == 0)
            flags = RENAME_NOREPLACE;
        else if (f == 1 && !skip_exchange)
            flags = RENAME_EXCHANGE;
        x = mk(renameat2(AT_FDCWD, a1, AT_FDCWD, a2, flags));
        y = mk(renameat2(AT_FDCWD, b1, AT_FDCWD, b2, flags));
        expect_same(flags == RENAME_NOREPLACE  ? "rename(NOREPLACE)"
                    : flags == RENAME_EXCHANGE ? "rename(EXCHANGE)"
                                               : "rename",
                    r1, r2, x, y);
    } else if (k < 53) { /* link */
        rand_rel(r2, sizeof r2);
        full(a2, root_a, r2);
        full(b2, root_b, r2);
        x = mk(link(a1, a2));
        y = mk(link(b1, b2));
        expect_same("link", r1, r2, x, y);
    } else if (k < 59) { /* unlink */
        x = mk(unlink(a1));
        y = mk(unlink(b1));
        expect_same("unlink", r1, NULL, x, y);
    } else if (k < 66) { /* mkdir */
        if (chance(60)) {
            rand_dirrel(r1, sizeof r1);
            full(a1, root_a, r1);
            full(b1, root_b, r1);
        }
        mode_t mode = chance(80) ? 0755 : 0700;
        x = mk(mkdir(a1, mode));
        y = mk(mkdir(b1, mode));
        expect_same("mkdir", r1, NULL, x, y);
    } else if (k < 70) { /* rmdir (ENOTEMPTY must agree) */
        if (chance(60)) {
            rand_dirrel(r1, sizeof r1);
            full(a1, root_a, r1);
            full(b1, root_b, r1);
        }
        if (skip_enotempty && nonempty_dir(b1))
            return;
        x = mk(rmdir(a1));
        y = mk(rmdir(b1));
        expect_same("rmdir", r1, NULL, x, y);
    } else if (k < 74) { /* chmod (follows symlinks) */
        static const mode_t modes[] = {0644, 0600, 0755, 0700, 0444, 0711, 01777, 0640};
        mode_t mode = modes[rnd(8)];
        x = mk(chmod(a1, mode));
        y = mk(chmod(b1, mode));
        char op[32];
        snprintf(op, sizeof op, "chmod %o", (unsigned)mode);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 78) { /* symlink; relative target without .. */
        rand_rel(r2, sizeof r2);
        x = mk(symlink(r2, a1));
        y = mk(symlink(r2, b1));
        char op[300];
        snprintf(op, sizeof op, "symlink ->%s", r2);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 79) { /* mkfifo */
        if (skip_fifo)
            return;
        x = mk(mkfifo(a1, 0644));
        y = mk(mkfifo(b1, 0644));
        expect_same("mkfifo", r1, NULL, x, y);
    } else if (k < 84) { /* setxattr */
        const char *name = xattr_name();
        size_t n = 1 + (size_t)rnd(64);
        fill(data, n);
        int flags = chance(15) ? XATTR_CREATE : chance(15) ? XATTR_REPLACE : 0;
        x = mk(lsetxattr(a1, name, data, n, flags));
        y = mk(lsetxattr(b1, name, data, n, flags));
        char op[96];
        snprintf(op, sizeof op, "lsetxattr %s len=%zu flags=%d", name, n, flags);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 87) { /* removexattr */
        const char *name = xattr_name();
        x = mk(lremovexattr(a1, name));
        y = mk(lremovexattr(b1, name));
        char op[64];
        snprintf(op, sizeof op, "lremovexattr %s", name);
        expect_same(op, r1, NULL, x, y);
    } else if (k < 89) { /* getxattr */
        const char *name = xattr_name();
        x = mk(lgetxattr(a1, name, ra, 256));
        y = mk(lgetxattr(b1, name, rb, 256));
        char op[64];
        snprintf(op, sizeof op, "lgetxattr %s", name);
        expect_same(op, r1, NULL, x, y);
        if (x.ret > 0 && memcmp(ra, rb, (size_t)x.ret)) {
            report(op, r1, NULL, x, y, "(values differ)");
            fail_exit();
        }
    } else if (k < 95) { /* read back */
        off_t off = (off_t)rnd(chance(20) ? 600000 : 70000);
        size_t n = 1 + (size_t)rnd(65536);
        bool nf = !skip_nofollow && chance(30);
        x = do_pread(a1, nf, off, n, ra);
        y = do_pread(b1, nf, off, n, rb);
        char op[64];
        snprintf(op, sizeof op, "pread%s off=%lld len=%zu", nf ? "(O_NOFOLLOW)" : "", (long long)off, n);
        expect_same(op, r1, NULL, x, y);
        if (x.ret > 0 && memcmp(ra, rb, (size_t)x.ret)) {
            size_t d = 0;
            while (ra[d] == rb[d])
                d++;
            char extra[96];
            snprintf(extra, sizeof extra, "(bytes differ from offset %lld)", (long long)off + (long long)d);
            report(op, r1, NULL, x, y, extra);
            fail_exit();
        }
    } else if (k < 98) { /* lstat */
        char da[256], db[256];
        x = do_lstat(a1, da, sizeof da);
        y = do_lstat(b1, db, sizeof db);
        expect_same("lstat", r1, NULL, x, y);
        if (strcmp(da, db)) {
            char extra[600];
            snprintf(extra, sizeof extra, "(A: %s; B: %s)", da, db);
            report("lstat", r1, NULL, x, y, extra);
            fail_exit();
        }
    } else { /* readdir */
        static char la[8192], lb[8192];
        if (chance(50)) {
            rand_dirrel(r1, sizeof r1);
            full(a1, root_a, r1);
            full(b1, root_b, r1);
        }
        x = do_readdir(a1, la, sizeof la);
        y = do_readdir(b1, lb, sizeof lb);
        expect_same("readdir", r1, NULL, x, y);
        if (strcmp(la, lb)) {
            char extra[600];
            snprintf(extra, sizeof extra, "(A: %.250s; B: %.250s)", la, lb);
            report("readdir", r1, NULL, x, y, extra);
            fail_exit();
        }
    }
}

static bool has_word(const char *list, const char *w) {
    size_t l = strlen(w);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == l && !strncmp(p, w, l))
            return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: fsops SEED NOPS DIR_A DIR_B [BATCH]\n");
        return 64;
    }
    char *end;
    g_seed = strtoull(argv[1], &end, 0);
    long nops = strtol(argv[2], NULL, 10);
    root_a = argv[3];
    root_b = argv[4];
    long batch = argc == 6 ? strtol(argv[5], NULL, 10) : 200;
    if (*end || nops < 0 || batch <= 0) {
        fprintf(stderr, "fsops: bad SEED, NOPS or BATCH\n");
        return 64;
    }
    const char *skip = getenv("FSOPS_SKIP");
    skip_nlink = has_word(skip, "nlink");
    skip_dirnlink = skip_nlink || has_word(skip, "dirnlink");
    skip_ovxattr = has_word(skip, "ovxattr");
    skip_exchange = has_word(skip, "exchange");
    skip_fifo = has_word(skip, "fifo");
    skip_inodes = has_word(skip, "inodes");
    skip_nofollow = has_word(skip, "nofollow");
    skip_enotempty = has_word(skip, "enotempty");
    g_verbose = getenv("FSOPS_VERBOSE") && !strcmp(getenv("FSOPS_VERBOSE"), "1");
    setvbuf(stdout, NULL, _IOLBF, 0);
    umask(022);
    rng_state = g_seed;

    if (!compare_trees("before op #0"))
        fail_exit();
    for (g_op = 0; g_op < nops; g_op++) {
        one_op();
        if ((g_op + 1) % batch == 0 || g_op + 1 == nops) {
            char when[64];
            snprintf(when, sizeof when, "after op #%ld", g_op);
            if (!compare_trees(when))
                fail_exit();
        }
    }
    printf("fsops: ok seed=%" PRIu64 " ops=%ld\n", g_seed, nops);
    return 0;
}
