/* dirops: directory listings while the directory changes.
 *
 * Usage:
 *   dirops fill DIR N            create DIR/f000000 .. N-1 (empty files)
 *   dirops thrash DIR ROUNDS     ROUNDS times: one 512-byte getdents64 on a
 *                                handle of DIR kept open (rewound at its
 *                                end), then create and unlink DIR/zz; prints
 *                                "thrash ROUNDS user+sys-seconds" (its own)
 *   dirops verify SEED NOPS A B [LOWER]
 *                                the same pseudo-random changes (seeded) to
 *                                the directories A and B, which start out
 *                                identical (A a view, B a plain copy), with
 *                                listings between them (below)
 *   dirops collide DIR           two names whose d_off cookies collided
 *                                (the unkeyed FNV-1a of dir.c): a handle
 *                                that read one of them, which is then
 *                                removed (or the other made), must go on
 *                                to return the other exactly once; prints
 *                                "collide ok" or the failure, exit 0 or 1
 *   dirops holdfds DIR N         opens DIR/f* (made by fill) until N are
 *                                open or an open fails; prints "held K ERRNO"
 *                                and keeps them open until its input ends
 *
 * verify: every operation's result (errno) must be the same in A and B.
 * After each operation, each tree's open directory handles go on one small
 * getdents64 each, and from time to time a new handle (or a rewound one)
 * lists a directory in full: that listing must hold the same names and
 * types in A as in B, each once, with d_ino == st_ino (lstat) in A.  A
 * handle that read to its end must have returned each name once, and every
 * name that was in the directory at its first read and still is at its
 * end, and was never removed in between (POSIX leaves the others open).
 * The changes: create, mkfifo, mkdir, symlink, link, unlink, rmdir, rename
 * (in a directory, across, over an existing object, RENAME_EXCHANGE), a
 * write to an existing file (a copy-up in a view), chmod; the names come
 * from a small set so that they collide, over lower files (whiteouts,
 * opaque directories where a removed directory is made again).  With
 * LOWER (A's lower directory, reached where the view does not cover it),
 * now and then a host edit of the lower (h0..h2 made, removed, renamed in
 * directories the changes keep merged) goes to LOWER and to B.  Exit 0
 * when A and B agreed throughout, else 1 with the first difference.
 *
 * Built standalone: cc -std=c17 -D_GNU_SOURCE -O2 [-static].
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

struct ld64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static long getdents(int fd, char *buf, size_t size) {
    return syscall(SYS_getdents64, fd, buf, size);
}

static double cpu_self(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int do_fill(const char *dir, long n) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        perror(dir);
        return 1;
    }
    for (long i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%06ld", i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            perror(name);
            return 1;
        }
        close(fd);
    }
    close(dfd);
    return 0;
}

static int do_thrash(const char *dir, long rounds) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        perror(dir);
        return 1;
    }
    char buf[512];
    for (long i = 0; i < rounds; i++) {
        long n = getdents(dfd, buf, sizeof buf);
        if (n < 0) {
            perror("getdents64");
            return 1;
        }
        if (n == 0)
            lseek(dfd, 0, SEEK_SET);
        int fd = openat(dfd, "zz", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || close(fd) < 0 || unlinkat(dfd, "zz", 0) < 0) {
            perror("zz");
            return 1;
        }
    }
    printf("thrash %ld %.2f\n", rounds, cpu_self());
    return 0;
}

static int do_holdfds(const char *dir, long n) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        perror(dir);
        return 1;
    }
    long k = 0;
    int err = 0;
    for (; k < n; k++) {
        char name[32];
        snprintf(name, sizeof name, "f%06ld", k);
        if (openat(dfd, name, O_RDONLY | O_CLOEXEC) < 0) {
            err = errno;
            break;
        }
    }
    printf("held %ld %s\n", k, err ? strerrorname_np(err) : "0");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) /* holds them until its input ends */
        ;
    return 0;
}

/* ---- collide ---- */

/* Read one entry of fd (the buffer holds one); "" at the end. */
static bool read_one(int fd, char *name, size_t size) {
    char buf[40];
    long n = getdents(fd, buf, sizeof buf);
    if (n <= 0) {
        name[0] = '\0';
        return false;
    }
    snprintf(name, size, "%s", ((struct ld64 *)buf)->d_name);
    return true;
}

/* Handle h read until it returned one of a and b: which (0, 1), or -1. */
static int read_until(int h, const char *a, const char *b) {
    char name[256];
    while (read_one(h, name, sizeof name))
        if (strcmp(name, a) == 0 || strcmp(name, b) == 0)
            return strcmp(name, a) == 0 ? 0 : 1;
    return -1;
}

/* How many times the rest of h's stream returns name. */
static int count_rest(int h, const char *name) {
    char got[256];
    int c = 0;
    while (read_one(h, got, sizeof got))
        c += strcmp(got, name) == 0;
    return c;
}

static void list_new(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char buf[4096];
    while (fd >= 0 && getdents(fd, buf, sizeof buf) > 0)
        ;
    if (fd >= 0)
        close(fd);
}

static int do_collide(const char *dir) {
    /* FNV-1a with dir.c's final mix gave both 2979388178175329981 */
    const char *pair[2] = {"c4620W6DPuxA", "cb-HfjZd__DB"};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        perror(dir);
        return 1;
    }
    int bad = 0;
    /* both there; a handle read one, which goes: the other must come */
    for (int k = 0; k < 2; k++) {
        close(openat(dfd, pair[k], O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    }
    int h = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int first = read_until(h, pair[0], pair[1]);
    if (first < 0) {
        printf("collide: a new handle returned neither %s nor %s\n", pair[0], pair[1]);
        return 1;
    }
    unlinkat(dfd, pair[first], 0);
    list_new(dir); /* a new open notices the change: the kernel's cache is reset */
    int c = count_rest(h, pair[!first]);
    close(h);
    if (c != 1) {
        printf("collide: %s, there throughout, returned %d times after %s was read and removed\n", pair[!first], c,
               pair[first]);
        bad = 1;
    }
    /* one there, read; the other made: the first must not come again */
    for (int k = 0; k < 2; k++) {
        unlinkat(dfd, pair[0], 0);
        unlinkat(dfd, pair[1], 0);
        close(openat(dfd, pair[k], O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        list_new(dir);
        h = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (read_until(h, pair[0], pair[1]) != k) {
            printf("collide: a new handle did not return %s\n", pair[k]);
            return 1;
        }
        close(openat(dfd, pair[!k], O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        list_new(dir);
        c = count_rest(h, pair[k]);
        close(h);
        if (c != 0) {
            printf("collide: %s returned again (%d) by a handle that had read it, after %s was made\n", pair[k], c,
                   pair[!k]);
            bad = 1;
        }
    }
    unlinkat(dfd, pair[0], 0);
    unlinkat(dfd, pair[1], 0);
    close(dfd);
    if (!bad)
        printf("collide ok\n");
    return bad;
}

/* ---- verify ---- */

static uint64_t rng_state, g_seed;
static long g_op;

static uint64_t rnd(uint64_t n) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return n ? z % n : 0;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
    printf("dirops: MISMATCH at op %ld: ", g_op);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\ndirops: FAILED seed=%" PRIu64 "\n", g_seed);
    fflush(stdout);
    exit(1);
}

/* the directories listed and changed, relative to the roots */
static const char *const dirs[] = {".", "d0", "d1", "d0/d2", "big"};
#define NDIRS (sizeof dirs / sizeof dirs[0])
static const char *const leaves[] = {"f0", "f1", "f2", "f3", "d2", "l0", "x"};
#define NLEAVES (sizeof leaves / sizeof leaves[0])

#define MAXNAMES 4096
struct nameset {
    char *v[MAXNAMES];
    size_t n;
};

static void set_free(struct nameset *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

/* The names are kept sorted: a directory of thousands of names is listed
 * again and again, and a linear search per name made each listing
 * quadratic (most of the differential suite's CPU). */
static size_t set_pos(const struct nameset *s, const char *name, bool *found) {
    size_t lo = 0, hi = s->n;
    *found = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->v[mid], name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool set_has(const struct nameset *s, const char *name) {
    bool found;
    set_pos(s, name, &found);
    return found;
}

static void set_add(struct nameset *s, const char *name) {
    bool found;
    size_t at = set_pos(s, name, &found);
    if (s->n < MAXNAMES) {
        memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof s->v[0]);
        s->v[at] = strdup(name);
        s->n++;
    }
}

static void set_del(struct nameset *s, const char *name) {
    bool found;
    size_t at = set_pos(s, name, &found);
    if (found) {
        free(s->v[at]);
        memmove(&s->v[at], &s->v[at + 1], (s->n - at - 1) * sizeof s->v[0]);
        s->n--;
    }
}

/* A directory handle of one tree: what its stream returned so far, and the
 * names it must return (there at its first read, not removed since). */
struct held {
    int fd;
    dev_t dev; /* its directory */
    ino_t ino;
    bool started;
    struct nameset got, must;
};

struct tree {
    const char *root;
    int rfd;
    struct held h[NDIRS];
};

static struct tree ta, tb;

/* The names in the directory at (at, dir), from a new handle; in a view,
 * d_ino must equal the lstat st_ino. */
static void list_full(struct tree *t, int at, const char *dir, struct nameset *s, bool check_ino) {
    int fd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    s->n = 0;
    if (fd < 0)
        return;
    char buf[4096];
    long n;
    while ((n = getdents(fd, buf, sizeof buf)) > 0) {
        for (long p = 0; p < n;) {
            struct ld64 *d = (struct ld64 *)(buf + p);
            p += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
                continue;
            if (set_has(s, d->d_name))
                fail("%s: %s listed twice by a new handle", t->root, d->d_name);
            if (check_ino && d->d_name[0] != 'h') { /* host names: the kernel may cache a lookup */
                struct stat st;
                if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    fail("%s: %s listed but lstat fails", t->root, d->d_name);
                if (st.st_ino != d->d_ino)
                    fail("%s: %s: d_ino is not st_ino", t->root, d->d_name);
            }
            set_add(s, d->d_name);
        }
    }
    close(fd);
}

static void compare_full(const char *dir) {
    struct nameset a = {0}, b = {0};
    list_full(&ta, ta.rfd, dir, &a, true);
    list_full(&tb, tb.rfd, dir, &b, false);
    char la[8192] = "", lb[8192] = "";
    for (size_t i = 0; i < a.n && strlen(la) < sizeof la - 300; i++)
        snprintf(la + strlen(la), sizeof la - strlen(la), "%s ", a.v[i]);
    for (size_t i = 0; i < b.n && strlen(lb) < sizeof lb - 300; i++)
        snprintf(lb + strlen(lb), sizeof lb - strlen(lb), "%s ", b.v[i]);
    if (strcmp(la, lb) != 0) {
        fail("listing of %s differs:\n  view:  %s\n  plain: %s", dir, la, lb);
    }
    set_free(&a);
    set_free(&b);
}

/* Handle i of tree t reads on one small step (opening it first, or again
 * after its end); a stream's end checks what it returned. */
static void held_step(struct tree *t, size_t i) {
    struct held *h = &t->h[i];
    if (h->fd < 0) {
        h->fd = openat(t->rfd, dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (h->fd < 0)
            return;
        fstat(h->fd, &st);
        h->dev = st.st_dev;
        h->ino = st.st_ino;
    }
    if (!h->started) {
        list_full(t, h->fd, ".", &h->must, false);
        h->started = true;
    }
    char buf[200]; /* a few entries at a time */
    long n = getdents(h->fd, buf, 80 + rnd(120));
    if (n < 0) {
        if (errno == EINVAL)
            return;
        close(h->fd); /* the directory went away */
        h->fd = -1;
        set_free(&h->got);
        set_free(&h->must);
        h->started = false;
        return;
    }
    for (long p = 0; p < n;) {
        struct ld64 *d = (struct ld64 *)(buf + p);
        p += d->d_reclen;
        if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
            continue;
        if (set_has(&h->got, d->d_name))
            fail("%s: an open handle returned %s twice", t->root, d->d_name);
        set_add(&h->got, d->d_name);
    }
    if (n == 0) {
        for (size_t k = 0; k < h->must.n; k++)
            if (!set_has(&h->got, h->must.v[k]))
                fail("%s: an open handle's stream left out %s (there throughout)", t->root, h->must.v[k]);
        set_free(&h->got);
        set_free(&h->must);
        h->started = false;
        lseek(h->fd, 0, SEEK_SET);
    }
}

static void path_split(const char *path, char *dir, const char **leaf) {
    const char *s = strrchr(path, '/');
    if (!s) {
        strcpy(dir, ".");
        *leaf = path;
    } else {
        memcpy(dir, path, (size_t)(s - path));
        dir[s - path] = '\0';
        *leaf = s + 1;
    }
}

/* What an operation on path may take away from the handles of t: the name
 * from its parent's, everything from its own (a directory removed). */
struct gone {
    bool parent, self;
    dev_t pdev, sdev;
    ino_t pino, sino;
    char leaf[128];
};

static void gone_take(struct tree *t, const char *path, struct gone *g) {
    char dir[128];
    const char *leaf;
    struct stat st;
    path_split(path, dir, &leaf);
    snprintf(g->leaf, sizeof g->leaf, "%s", leaf);
    g->parent = fstatat(t->rfd, dir, &st, 0) == 0;
    g->pdev = st.st_dev;
    g->pino = st.st_ino;
    g->self = fstatat(t->rfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    g->sdev = st.st_dev;
    g->sino = st.st_ino;
}

static void gone_apply(struct tree *t, const struct gone *g) {
    for (size_t i = 0; i < NDIRS; i++) {
        struct held *h = &t->h[i];
        if (h->fd < 0)
            continue;
        if (g->self && h->dev == g->sdev && h->ino == g->sino)
            set_free(&h->must);
        if (g->parent && h->dev == g->pdev && h->ino == g->pino) {
            set_del(&h->must, g->leaf);
        }
    }
}

static void rand_path(char *out, size_t size) {
    const char *d = dirs[rnd(NDIRS)];
    const char *l = leaves[rnd(NLEAVES)];
    if (strcmp(d, "big") == 0 && rnd(2))
        l = rnd(2) ? "f000007" : "f000123";
    if (strcmp(d, ".") == 0)
        snprintf(out, size, "%s", l);
    else
        snprintf(out, size, "%s/%s", d, l);
}

static int one(struct tree *t, int op, const char *p, const char *q) {
    int r = 0, fd;
    switch (op) {
    case 0:
        fd = openat(t->rfd, p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
        r = fd < 0 ? -1 : close(fd);
        break;
    case 1: r = mkfifoat(t->rfd, p, 0644); break;
    case 2: r = mkdirat(t->rfd, p, 0755); break;
    case 3: r = symlinkat("f0", t->rfd, p); break;
    case 4: r = linkat(t->rfd, p, t->rfd, q, 0); break;
    case 5: r = unlinkat(t->rfd, p, 0); break;
    case 6: r = unlinkat(t->rfd, p, AT_REMOVEDIR); break;
    case 7: r = renameat(t->rfd, p, t->rfd, q); break;
    case 8: r = renameat2(t->rfd, p, t->rfd, q, RENAME_EXCHANGE); break;
    case 9:
        fd = openat(t->rfd, p, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        r = fd < 0 ? -1 : (write(fd, "w", 1) < 0 ? -1 : close(fd));
        break;
    case 10: r = fchmodat(t->rfd, p, 0600, 0); break;
    }
    return r < 0 ? errno : 0;
}

/* A host edit of the lower (lfd) and the same change to tree b (hfd): names
 * h0..h2 in directories the command never removes, renames or makes
 * opaque, so the view shows them as the plain copy does. */
static const char *const hdirs[] = {".", "d0", "d1", "big"};

static void host_op(int lfd, int hfd, const char *p, const char *q) {
    int op = (int)rnd(5);
    int fds[2] = {lfd, hfd};
    for (int k = 0; k < 2; k++) {
        int at = fds[k], fd;
        switch (op) {
        case 0:
            fd = openat(at, p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0)
                close(fd);
            break;
        case 1: unlinkat(at, p, 0); break;
        case 2: mkdirat(at, p, 0755); break;
        case 3: unlinkat(at, p, AT_REMOVEDIR); break;
        case 4: renameat(at, p, at, q); break;
        }
    }
}

static const char *const opnames[] = {"create", "mkfifo", "mkdir",    "symlink", "link", "unlink",
                                      "rmdir",  "rename", "exchange", "write",   "chmod"};

static int do_verify(uint64_t seed, long nops, const char *a, const char *b, const char *lower) {
    int lfd = lower ? open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (lower && lfd < 0) {
        perror(lower);
        return 1;
    }
    g_seed = rng_state = seed;
    ta.root = a;
    tb.root = b;
    ta.rfd = open(a, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    tb.rfd = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ta.rfd < 0 || tb.rfd < 0) {
        perror("open");
        return 1;
    }
    for (size_t i = 0; i < NDIRS; i++)
        ta.h[i].fd = tb.h[i].fd = -1;
    long done[11] = {0};
    for (g_op = 0; g_op < nops; g_op++) {
        if (lfd >= 0 && rnd(6) == 0) {
            /* a host edit: the handles may or may not see its names */
            char hp[64], hq[64];
            const char *d = hdirs[rnd(4)];
            snprintf(hp, sizeof hp, "%s/h%d", d, (int)rnd(3));
            snprintf(hq, sizeof hq, "%s/h%d", d, (int)rnd(3));
            struct gone hg[4];
            gone_take(&ta, hp, &hg[0]);
            gone_take(&ta, hq, &hg[1]);
            gone_take(&tb, hp, &hg[2]);
            gone_take(&tb, hq, &hg[3]);
            host_op(lfd, tb.rfd, hp, hq);
            gone_apply(&ta, &hg[0]);
            gone_apply(&ta, &hg[1]);
            gone_apply(&tb, &hg[2]);
            gone_apply(&tb, &hg[3]);
        }
        int op = (int)rnd(11);
        char p[128], q[128];
        rand_path(p, sizeof p);
        rand_path(q, sizeof q);
        struct gone g[4];
        gone_take(&ta, p, &g[0]);
        gone_take(&ta, q, &g[1]);
        gone_take(&tb, p, &g[2]);
        gone_take(&tb, q, &g[3]);
        int ea = one(&ta, op, p, q), eb = one(&tb, op, p, q);
        if (ea != eb) {
            char ra[512], rb[64];
            snprintf(ra, sizeof ra, "%s %s %s: %s", opnames[op], p, q, strerrorname_np(ea) ? strerrorname_np(ea) : "0");
            snprintf(rb, sizeof rb, "%s", strerrorname_np(eb) ? strerrorname_np(eb) : "0");
            fail("%s in the view, %s in the plain copy", ra, rb);
        }
        if (ea == 0)
            done[op]++;
        if (ea == 0 && (op == 5 || op == 6 || op == 7 || op == 8)) {
            gone_apply(&ta, &g[0]);
            gone_apply(&ta, &g[1]);
            gone_apply(&tb, &g[2]);
            gone_apply(&tb, &g[3]);
        }
        /* the handles go on; now and then a listing in full */
        for (size_t i = 0; i < NDIRS; i++) {
            if (rnd(3) == 0)
                continue;
            held_step(&ta, i);
            held_step(&tb, i);
        }
        if (rnd(4) == 0)
            compare_full(dirs[rnd(NDIRS)]);
    }
    for (size_t i = 0; i < NDIRS; i++)
        compare_full(dirs[i]);
    printf("dirops: %ld operations, the listings agreed; done:", nops);
    for (int i = 0; i < 11; i++)
        printf(" %s %ld", opnames[i], done[i]);
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "fill") == 0)
        return do_fill(argv[2], strtol(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "thrash") == 0)
        return do_thrash(argv[2], strtol(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "holdfds") == 0)
        return do_holdfds(argv[2], strtol(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "collide") == 0)
        return do_collide(argv[2]);
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "verify") == 0)
        return do_verify(strtoull(argv[2], NULL, 10), strtol(argv[3], NULL, 10), argv[4], argv[5],
                         argc == 7 ? argv[6] : NULL);
    fprintf(stderr, "usage: dirops fill|thrash|holdfds DIR N | collide DIR | verify SEED NOPS A B\n");
    return 64;
}
