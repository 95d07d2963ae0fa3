/* fsstress: multi-process stress of one directory tree (the staged view).
 *
 * Usage: fsstress setup DIR          make the starting tree (on the lower)
 *        fsstress run DIR NPROC MS SEED [KILLMS]
 *                                    NPROC workers for MS milliseconds; with
 *                                    KILLMS, one random worker is killed (-9)
 *                                    every KILLMS ms and another started
 *        fsstress verify DIR         the invariants of the tree after a run
 *
 * Workers collide on a small shared tree: first writes to the same lower
 * files (concurrent copy-ups), write/truncate/read, rename storms, hard
 * links made and removed while written through the other name, unlinked
 * open files, mkdir/rmdir/readdir in one directory, fsync, mmap writers,
 * O_TMPFILE + linkat, renameat2 flags, xattrs, chmod/utimens.  Every
 * operation's errno must be one a native file system could give for that
 * race; the bytes read must be ones some writer wrote (or the original).
 * Any other result is printed as "fsstress: BAD ..." and makes the exit 1.
 * A worker stops after 20 of them.  Many small files in many/ take the
 * server past its budget of cached descriptors (run it under a low
 * RLIMIT_NOFILE for that).
 *
 * Environment: FSSTRESS_SKIP, a list: "tmpfile" (O_TMPFILE may fail) and
 * "whiteout" (renameat2 RENAME_WHITEOUT may fail), the view's documented
 * limits; FSSTRESS_ONLY, a list of scenario names (the table at the end)
 * to run alone; FSSTRESS_VERBOSE=1 prints each last worker's operation
 * count.  Built standalone (the test suite compiles it like fsops).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

#define NBIG 24
#define BIGSZ (1 << 20)
#define SLOT 4096 /* a worker's record in a shared file: at wid * SLOT + 64 */
#define MAXW 32
#define NREN 4
#define RENSZ 5000
#define WTSZ (256 * 1024)
#define NMANY 400

static const char *D;
static int wid;
static uint64_t rs;
static int bad_fd = 2;
static unsigned long nbad;
static const char *bad_env;

static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static unsigned rn(unsigned n) {
    return (unsigned)(rnd() % n);
}

__attribute__((format(printf, 1, 2))) static void bad(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(buf, sizeof buf, "fsstress: BAD w%d: ", wid);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (write(bad_fd, buf, (size_t)n) < 0) {
    }
    nbad++;
}

__attribute__((format(printf, 1, 2))) static char *P(const char *fmt, ...) {
    static char bufs[4][512];
    static int i;
    char *b = bufs[i++ & 3];
    int n = snprintf(b, 512, "%s/", D);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + n, 512 - (size_t)n, fmt, ap);
    va_end(ap);
    return b;
}

/* errno allowed? list terminated by 0 */
static bool okerr(int e, const int *allowed) {
    for (; *allowed; allowed++)
        if (e == *allowed)
            return true;
    return false;
}
#define CHK(call, what, ...)                                                                                           \
    ({                                                                                                                 \
        long r_ = (long)(call);                                                                                        \
        if (r_ < 0) {                                                                                                  \
            int e_ = errno;                                                                                            \
            static const int al_[] = {__VA_ARGS__ __VA_OPT__(, ) 0};                                                   \
            if (!okerr(e_, al_))                                                                                       \
                bad("%s: %s", what, strerror(e_));                                                                     \
            errno = e_;                                                                                                \
        }                                                                                                              \
        r_;                                                                                                            \
    })

static uint8_t pat(uint64_t off, unsigned k) {
    uint64_t z = off * 0x9e3779b97f4a7c15ULL + k;
    return (uint8_t)(z >> 56) | 1; /* never 0 */
}

static int write_all(int fd, const void *b, size_t n, off_t off) {
    const char *p = b;
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

static void fill_pat(uint8_t *b, size_t n, uint64_t off, unsigned k) {
    for (size_t i = 0; i < n; i++)
        b[i] = pat(off + i, k);
}

static int mkfile(const char *path, const void *b, size_t n, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    int r = write_all(fd, b, n, 0);
    close(fd);
    return r;
}

/* A record: "W%02d:%012lu\n" padded to 32 bytes: the worker that wrote it,
 * and a counter. */
#define RECSZ 32
static void mkrec(char rec[RECSZ], int w, unsigned long c) {
    memset(rec, '.', RECSZ);
    char tmp[40];
    int n = snprintf(tmp, sizeof tmp, "W%02d:%012lu", w, c);
    memcpy(rec, tmp, (size_t)n);
    rec[RECSZ - 1] = '\n';
}
/* b (RECSZ bytes at a slot of worker w in a file of pattern k at off): the
 * original bytes, zeros (allow_zero), or a record of worker w? */
static bool rec_ok(const uint8_t *b, int w, uint64_t off, unsigned k, bool allow_zero) {
    bool orig = true, zero = true;
    for (int i = 0; i < RECSZ; i++) {
        if (b[i] != pat(off + (uint64_t)i, k))
            orig = false;
        if (b[i])
            zero = false;
    }
    if (orig || (zero && allow_zero))
        return true;
    char want[8];
    snprintf(want, sizeof want, "W%02d:", w);
    if (memcmp(b, want, 4) != 0 || b[RECSZ - 1] != '\n')
        return false;
    for (int i = 4; i < 16; i++)
        if (b[i] < '0' || b[i] > '9')
            return false;
    for (int i = 16; i < RECSZ - 1; i++)
        if (b[i] != '.')
            return false;
    return true;
}

/* ---- setup ---------------------------------------------------------------- */
static int do_setup(void) {
    static uint8_t buf[BIGSZ];
    mkdir(P("big"), 0755);
    for (unsigned k = 0; k < NBIG; k++) {
        fill_pat(buf, BIGSZ, 0, k);
        if (mkfile(P("big/b%u", k), buf, BIGSZ, 0644) < 0)
            return perror("big"), 1;
    }
    mkdir(P("ren"), 0755);
    for (unsigned i = 0; i < NREN; i++) {
        memset(buf, 'A' + (int)i, RENSZ);
        if (mkfile(P("ren/r%u", i), buf, RENSZ, 0644) < 0)
            return 1;
    }
    mkdir(P("hl"), 0755);
    fill_pat(buf, MAXW * SLOT, 0, 100);
    if (mkfile(P("hl/h0"), buf, MAXW * SLOT, 0644) < 0 || link(P("hl/h0"), P("hl/hx")) < 0)
        return 1;
    fill_pat(buf, MAXW * SLOT, 0, 101);
    if (mkfile(P("mm"), buf, MAXW * SLOT, 0644) < 0)
        return 1;
    mkdir(P("md"), 0755);
    mkdir(P("md/x0"), 0755);
    mkdir(P("md/x1"), 0755);
    mkfile(P("md/x1/f"), "in-x1\n", 6, 0644);
    mkdir(P("ul"), 0755);
    for (unsigned i = 0; i < 8; i++) {
        fill_pat(buf, 65536, 0, 200 + i);
        if (mkfile(P("ul/u%u", i), buf, 65536, 0644) < 0)
            return 1;
    }
    mkdir(P("ex"), 0755);
    memset(buf, 'E', 3000);
    mkfile(P("ex/e0"), buf, 3000, 0644);
    memset(buf, 'F', 3000);
    mkfile(P("ex/e1"), buf, 3000, 0644);
    mkdir(P("xa"), 0755);
    mkfile(P("xa/x"), "xattr-file\n", 11, 0644);
    mkfile(P("xa/c"), "chmod-file\n", 11, 0644);
    fill_pat(buf, WTSZ, 0, 300);
    mkfile(P("wt"), buf, WTSZ, 0644);
    mkdir(P("tmp"), 0755);
    mkdir(P("many"), 0755);
    for (unsigned k = 0; k < NMANY; k += 2) {
        mkdir(P("many/d%u", k % 10), 0755);
        if (mkfile(P("many/d%u/f%u", k % 10, k), "", 0, 0644) < 0)
            return 1;
    }
    return 0;
}

/* ---- the scenarios ------------------------------------------------------------ */
static unsigned long ctr;

/* concurrent copy-ups: first write to big/bK from many workers */
static void sc_bigwrite(void) {
    unsigned k = rn(NBIG);
    int fd = CHK(open(P("big/b%u", k), O_WRONLY), "open big for write");
    if (fd < 0)
        return;
    char rec[RECSZ];
    mkrec(rec, wid, ++ctr);
    off_t off = (off_t)k * 8192 + (off_t)wid * SLOT + 64;
    off %= BIGSZ - RECSZ;
    CHK(write_all(fd, rec, RECSZ, off), "pwrite big");
    if (rn(4) == 0)
        CHK(rn(2) ? fsync(fd) : fdatasync(fd), "fsync big");
    close(fd);
}
static void sc_bigread(void) {
    unsigned k = rn(NBIG);
    int fd = CHK(open(P("big/b%u", k), O_RDONLY), "open big");
    if (fd < 0)
        return;
    static uint8_t b[65536];
    off_t off = (off_t)rn(BIGSZ / 65536) * 65536;
    ssize_t n = CHK(pread(fd, b, sizeof b, off), "pread big");
    if (n >= 0 && n != (ssize_t)sizeof b)
        bad("pread big b%u at %lld: short %zd", k, (long long)off, n);
    struct stat st;
    if (CHK(fstat(fd, &st), "fstat big") == 0 && st.st_size != BIGSZ)
        bad("big b%u size %lld", k, (long long)st.st_size);
    close(fd);
}

/* write / truncate / read of wt: every byte read is the pattern or 0 */
static void sc_wt(void) {
    int fd = CHK(open(P("wt"), O_RDWR), "open wt");
    if (fd < 0)
        return;
    static uint8_t b[16384];
    unsigned op = rn(4);
    off_t off = (off_t)rn(WTSZ - (unsigned)sizeof b);
    if (op == 0) {
        fill_pat(b, sizeof b, (uint64_t)off, 300);
        CHK(write_all(fd, b, sizeof b, off), "pwrite wt");
    } else if (op == 1) {
        CHK(ftruncate(fd, (off_t)rn(WTSZ)), "ftruncate wt");
    } else if (op == 2 && rn(3) == 0) {
        CHK(truncate(P("wt"), (off_t)rn(WTSZ)), "truncate wt");
    } else {
        ssize_t n = CHK(pread(fd, b, sizeof b, off), "pread wt");
        for (ssize_t i = 0; i < n; i++)
            if (b[i] != 0 && b[i] != pat((uint64_t)off + (uint64_t)i, 300)) {
                bad("wt: byte at %lld is %#x (neither 0 nor the pattern)", (long long)off + i, b[i]);
                break;
            }
    }
    close(fd);
}

/* rename storm in ren/: contents must be whole */
static void sc_ren(void) {
    unsigned op = rn(6);
    if (op <= 1) {
        unsigned a = rn(NREN), c = rn(NREN);
        CHK(rename(P("ren/r%u", a), P("ren/r%u", c)), "rename r->r", ENOENT);
    } else if (op == 2) {
        /* refill a missing name atomically */
        unsigned a = rn(NREN);
        char *tmp = P("ren/t.%d", wid);
        static char b[RENSZ];
        memset(b, 'A' + (int)a, sizeof b);
        if (CHK(mkfile(tmp, b, sizeof b, 0644), "create ren tmp") == 0)
            CHK(renameat2(AT_FDCWD, tmp, AT_FDCWD, P("ren/r%u", a), RENAME_NOREPLACE), "rename noreplace", EEXIST);
        unlink(tmp);
    } else if (op == 3) {
        unsigned a = rn(NREN);
        struct stat st;
        if (CHK(stat(P("ren/r%u", a), &st), "stat r", ENOENT) == 0 && st.st_size != RENSZ)
            bad("stat ren/r%u: size %lld", a, (long long)st.st_size);
    } else {
        unsigned a = rn(NREN);
        int fd = CHK(open(P("ren/r%u", a), rn(2) ? O_RDONLY : O_RDWR), "open r", ENOENT);
        if (fd < 0)
            return;
        static char b[RENSZ + 10];
        ssize_t n = CHK(pread(fd, b, sizeof b, 0), "read r");
        if (n >= 0 && n != RENSZ)
            bad("read ren/r%u: %zd bytes", a, n);
        for (ssize_t i = 1; i < n; i++)
            if (b[i] != b[0] || b[0] < 'A' || b[0] >= 'A' + NREN) {
                bad("read ren/r%u: mixed content at %zd (%c/%c)", a, i, b[0], b[i]);
                break;
            }
        close(fd);
    }
}

/* hard links: link/unlink hl/h1 (-> h0) while writing through h0/h1/hx */
static void sc_hl(void) {
    unsigned op = rn(6);
    if (op == 0) {
        CHK(link(P("hl/h0"), P("hl/h1")), "link h0 h1", EEXIST, ENOENT);
    } else if (op == 1) {
        CHK(unlink(P("hl/h1")), "unlink h1", ENOENT);
    } else {
        static const char *names[] = {"hl/h0", "hl/h1", "hl/hx"};
        const char *nm = names[rn(3)];
        int fd = CHK(open(P("%s", nm), op == 2 ? O_RDONLY : O_RDWR), "open hl", ENOENT);
        if (fd < 0)
            return;
        off_t off = (off_t)wid * SLOT + 64;
        if (op == 2) {
            int w = (int)rn(MAXW);
            uint8_t b[RECSZ];
            off_t o2 = (off_t)w * SLOT + 64;
            if (CHK(pread(fd, b, RECSZ, o2), "pread hl") == RECSZ && !rec_ok(b, w, (uint64_t)o2, 100, false))
                bad("%s: slot %d holds '%.*s'", nm, w, RECSZ - 1, b);
        } else {
            char rec[RECSZ];
            mkrec(rec, wid, ++ctr);
            CHK(write_all(fd, rec, RECSZ, off), "pwrite hl");
            uint8_t b[RECSZ];
            /* our own write must be visible through every name at once */
            int fd2 = CHK(open(P("hl/hx"), O_RDONLY), "open hx");
            if (fd2 >= 0) {
                if (CHK(pread(fd2, b, RECSZ, off), "pread hx") == RECSZ && !rec_ok(b, wid, (uint64_t)off, 100, false))
                    bad("hl/hx slot %d: '%.*s' after a write through %s", wid, RECSZ - 1, b, nm);
                close(fd2);
            }
        }
        close(fd);
    }
}

/* unlinked open files: private ones and shared lower ones */
static void sc_ul(void) {
    if (rn(2)) {
        char *p = P("tmp/u.%d.%lu", (int)getpid(), ++ctr);
        int fd = CHK(open(p, O_RDWR | O_CREAT | O_EXCL, 0644), "create u");
        if (fd < 0)
            return;
        int fd2 = CHK(open(p, O_RDONLY), "reopen u");
        static uint8_t b[40000], c[40000];
        fill_pat(b, sizeof b, 0, 400);
        CHK(write_all(fd, b, 20000, 0), "write u");
        CHK(unlink(p), "unlink u");
        CHK(write_all(fd, b + 20000, 20000, 20000), "write unlinked u");
        struct stat st;
        if (CHK(fstat(fd, &st), "fstat unlinked") == 0 && (st.st_size != 40000 || st.st_nlink != 0))
            bad("fstat of unlinked u: size %lld nlink %lu", (long long)st.st_size, (unsigned long)st.st_nlink);
        if (rn(2))
            CHK(fsync(fd), "fsync unlinked");
        if (fd2 >= 0) {
            ssize_t n = CHK(pread(fd2, c, sizeof c, 0), "read unlinked u");
            if (n >= 0 && (n != (ssize_t)sizeof c || memcmp(b, c, sizeof c) != 0))
                bad("read of unlinked u through a 2nd fd: %zd bytes, %s", n,
                    n == (ssize_t)sizeof c ? "differ" : "short");
            close(fd2);
        }
        CHK(ftruncate(fd, 100), "ftruncate unlinked");
        if (CHK(fstat(fd, &st), "fstat unlinked 2") == 0 && st.st_size != 100)
            bad("unlinked u size %lld after ftruncate 100", (long long)st.st_size);
        close(fd);
    } else {
        unsigned k = rn(8);
        char *p = P("ul/u%u", k);
        unsigned op = rn(4);
        if (op == 0) {
            CHK(unlink(p), "unlink ul", ENOENT);
            return;
        }
        if (op == 1) {
            static uint8_t b[65536];
            fill_pat(b, sizeof b, 0, 200 + k);
            char *t = P("ul/t.%d", wid);
            if (CHK(mkfile(t, b, sizeof b, 0644), "create ul tmp") == 0)
                CHK(renameat2(AT_FDCWD, t, AT_FDCWD, p, RENAME_NOREPLACE), "rename ul", EEXIST);
            unlink(t);
            return;
        }
        int fd = CHK(open(p, O_RDWR), "open ul", ENOENT);
        if (fd < 0)
            return;
        char rec[RECSZ];
        mkrec(rec, wid, ++ctr);
        off_t off = (off_t)(wid % 16) * SLOT + 64;
        CHK(write_all(fd, rec, RECSZ, off), "pwrite ul");
        if (rn(2))
            CHK(unlink(p), "unlink ul (open)", ENOENT);
        uint8_t b[RECSZ];
        if (CHK(pread(fd, b, RECSZ, off), "pread ul") == RECSZ && memcmp(b, rec, RECSZ) != 0)
            bad("ul/u%u: own record not read back: '%.*s'", k, RECSZ - 1, b);
        /* the rest of the file: the pattern or some worker's record */
        static uint8_t all[65536];
        ssize_t n = CHK(pread(fd, all, sizeof all, 0), "pread ul all");
        if (n >= 0 && n != (ssize_t)sizeof all)
            bad("ul/u%u: read %zd of 65536", k, n);
        for (int w = 0; w < 16 && n == (ssize_t)sizeof all; w++)
            if (!rec_ok(all + w * SLOT + 64, -1, (uint64_t)w * SLOT + 64, 200 + k, false)) {
                const uint8_t *r = all + w * SLOT + 64;
                if (r[0] != 'W' || r[3] != ':' || r[RECSZ - 1] != '\n')
                    bad("ul/u%u: slot %d holds '%.*s'", k, w, RECSZ - 1, r);
            }
        struct stat st;
        if (CHK(fstat(fd, &st), "fstat ul") == 0 && st.st_size != 65536)
            bad("ul/u%u: size %lld", k, (long long)st.st_size);
        if (rn(3) == 0)
            CHK(fdatasync(fd), "fdatasync ul");
        close(fd);
    }
}

/* mkdir / rmdir / readdir storm in md/ */
static void sc_md(void) {
    unsigned op = rn(7), x = rn(6);
    if (op == 0)
        CHK(mkdir(P("md/x%u", x), 0755), "mkdir md", EEXIST, ENOENT);
    else if (op == 1)
        CHK(rmdir(P("md/x%u", x)), "rmdir md", ENOENT, ENOTEMPTY, ENOTDIR);
    else if (op == 2) {
        int fd = CHK(open(P("md/x%u/f", x), O_WRONLY | O_CREAT, 0644), "create md/x/f", ENOENT, ENOTDIR);
        if (fd >= 0)
            close(fd);
    } else if (op == 3)
        CHK(unlink(P("md/x%u/f", x)), "unlink md/x/f", ENOENT, ENOTDIR);
    else if (op == 4)
        CHK(rename(P("md/x%u", x), P("md/x%u", rn(6))), "rename md", ENOENT, ENOTEMPTY, EEXIST, ENOTDIR, EISDIR);
    else {
        DIR *d = opendir(P("md"));
        if (!d) {
            bad("opendir md: %s", strerror(errno));
            return;
        }
        struct dirent *e;
        errno = 0;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if (e->d_name[0] != 'x' || e->d_name[1] < '0' || e->d_name[1] > '9' || e->d_name[2])
                bad("readdir md: unexpected name '%s'", e->d_name);
            struct stat st;
            if (CHK(fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW), "stat md entry", ENOENT) == 0 &&
                !S_ISDIR(st.st_mode))
                bad("md/%s is not a directory", e->d_name);
            if (op == 6) {
                DIR *d2 = opendir(P("md/%s", e->d_name));
                if (!d2 && errno != ENOENT && errno != ENOTDIR)
                    bad("opendir md/%s: %s", e->d_name, strerror(errno));
                if (d2) {
                    struct dirent *e2;
                    while ((e2 = readdir(d2)))
                        if (strcmp(e2->d_name, ".") && strcmp(e2->d_name, "..") && strcmp(e2->d_name, "f"))
                            bad("readdir md/%s: unexpected name '%s'", e->d_name, e2->d_name);
                    closedir(d2);
                }
            }
            errno = 0;
        }
        if (errno)
            bad("readdir md: %s", strerror(errno));
        closedir(d);
    }
}

/* mmap writers and read() readers of mm */
static void sc_mm(void) {
    int fd = CHK(open(P("mm"), O_RDWR), "open mm");
    if (fd < 0)
        return;
    if (rn(2)) {
        uint8_t *m = mmap(NULL, MAXW * SLOT, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            bad("mmap mm: %s", strerror(errno));
            close(fd);
            return;
        }
        char rec[RECSZ];
        mkrec(rec, wid, ++ctr);
        memcpy(m + wid * SLOT + 64, rec, RECSZ);
        if (rn(2))
            CHK(msync(m, MAXW * SLOT, MS_SYNC), "msync mm");
        munmap(m, MAXW * SLOT);
        if (rn(2)) {
            uint8_t b[RECSZ];
            if (CHK(pread(fd, b, RECSZ, wid * SLOT + 64), "pread mm own") == RECSZ && memcmp(b, rec, RECSZ))
                bad("mm: own mmap record not read back: '%.*s'", RECSZ - 1, b);
        }
    } else {
        static uint8_t b[MAXW * SLOT];
        ssize_t n = CHK(pread(fd, b, sizeof b, 0), "pread mm");
        if (n >= 0 && n != (ssize_t)sizeof b)
            bad("pread mm: %zd bytes", n);
        if (rn(2))
            CHK(fsync(fd), "fsync mm");
    }
    close(fd);
}

/* O_TMPFILE + linkat; renameat2 EXCHANGE / WHITEOUT */
static void sc_tmpfile(void) {
    int fd = open(P("tmp"), O_TMPFILE | O_RDWR, 0644);
    if (fd < 0) {
        if (!bad_env || !strstr(bad_env, "tmpfile"))
            bad("O_TMPFILE: %s", strerror(errno));
        return;
    }
    char buf[64], pp[64];
    int n = snprintf(buf, sizeof buf, "tmpfile of w%d #%lu\n", wid, ++ctr);
    CHK(write(fd, buf, (size_t)n), "write tmpfile");
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    char *name = P("tmp/t.%d.%lu", (int)getpid(), ctr);
    if (CHK(linkat(AT_FDCWD, pp, AT_FDCWD, name, AT_SYMLINK_FOLLOW), "linkat tmpfile") == 0) {
        char rb[64];
        int fd2 = CHK(open(name, O_RDONLY), "open linked tmpfile");
        if (fd2 >= 0) {
            ssize_t r = read(fd2, rb, sizeof rb);
            if (r != n || memcmp(rb, buf, (size_t)n))
                bad("linked tmpfile reads %zd bytes, not what was written", r);
            close(fd2);
        }
        CHK(unlink(name), "unlink linked tmpfile");
    }
    close(fd);
}
static void sc_exch(void) {
    unsigned op = rn(8);
    if (op < 3) {
        CHK(renameat2(AT_FDCWD, P("ex/e0"), AT_FDCWD, P("ex/e1"), RENAME_EXCHANGE), "rename exchange");
    } else if (op == 3) {
        if (getuid() != 0)
            return;
        char *src = P("ex/ws.%d", wid), *dst = P("ex/wd.%d", wid);
        /* a worker of this id killed between the rename and its unlink left
         * the whiteout (a 0/0 device: opening it gives ENXIO) where the
         * native self-check runs */
        unlink(src);
        if (CHK(mkfile(src, "w\n", 2, 0644), "create ws") < 0)
            return;
        int r = renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_WHITEOUT);
        if (r < 0 && (!bad_env || !strstr(bad_env, "whiteout")))
            bad("rename whiteout: %s", strerror(errno));
        unlink(src);
        unlink(dst);
    } else {
        unsigned k = rn(2);
        int fd = CHK(open(P("ex/e%u", k), O_RDONLY), "open ex");
        if (fd < 0)
            return;
        char b[3100];
        ssize_t n = CHK(pread(fd, b, sizeof b, 0), "read ex");
        if (n >= 0 && n != 3000)
            bad("ex/e%u: %zd bytes", k, n);
        for (ssize_t i = 1; i < n; i++)
            if (b[i] != b[0] || (b[0] != 'E' && b[0] != 'F')) {
                bad("ex/e%u: mixed content at %zd", k, i);
                break;
            }
        close(fd);
    }
}

/* xattrs; chmod / utimens */
static void sc_xattr(void) {
    unsigned op = rn(5);
    char name[32], val[64];
    int k = (int)rn(4);
    snprintf(name, sizeof name, "user.k%d", k);
    if (op == 0) {
        int n = snprintf(val, sizeof val, "value-%d-of-w%02d", k, wid);
        CHK(setxattr(P("xa/x"), name, val, (size_t)n, 0), "setxattr");
    } else if (op == 1) {
        CHK(removexattr(P("xa/x"), name), "removexattr", ENODATA);
    } else if (op == 2) {
        ssize_t n = CHK(getxattr(P("xa/x"), name, val, sizeof val - 1), "getxattr", ENODATA);
        if (n >= 0) {
            val[n] = 0;
            char pre[32];
            snprintf(pre, sizeof pre, "value-%d-of-w", k);
            if (strncmp(val, pre, strlen(pre)) != 0 || n != (ssize_t)strlen(pre) + 2)
                bad("getxattr %s: '%s'", name, val);
        }
    } else if (op == 3) {
        char list[1024];
        ssize_t n = CHK(listxattr(P("xa/x"), list, sizeof list), "listxattr");
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
            if (strncmp(list + i, "user.k", 6) != 0)
                bad("listxattr: '%s'", list + i);
    } else {
        int fd = CHK(open(P("xa/x"), O_RDONLY), "open xa/x");
        if (fd >= 0) {
            char b[32];
            if (CHK(read(fd, b, sizeof b), "read xa/x") != 11)
                bad("xa/x: wrong size");
            close(fd);
        }
    }
}
static void sc_chmod(void) {
    unsigned op = rn(4);
    if (op == 0) {
        mode_t m = 0600 | (rn(2) ? 0044 : 0) | (rn(2) ? 0100 : 0);
        CHK(chmod(P("xa/c"), m), "chmod");
    } else if (op == 1) {
        struct timespec ts[2] = {{(time_t)rn(1000000000), 0}, {(time_t)rn(1000000000), (long)rn(1000000000)}};
        if (rn(3) == 0)
            ts[0].tv_nsec = UTIME_NOW, ts[1].tv_nsec = UTIME_NOW;
        CHK(utimensat(AT_FDCWD, P("xa/c"), ts, 0), "utimensat");
    } else if (op == 2) {
        int fd = CHK(open(P("xa/c"), O_RDWR), "open xa/c");
        if (fd >= 0) {
            CHK(fchmod(fd, 0600 | (rn(2) ? 0044 : 0)), "fchmod");
            CHK(futimens(fd, NULL), "futimens");
            close(fd);
        }
    } else {
        struct stat st;
        if (CHK(stat(P("xa/c"), &st), "stat xa/c") == 0 && ((st.st_mode & 0600) != 0600 || st.st_size != 11))
            bad("xa/c: mode %o size %lld", st.st_mode, (long long)st.st_size);
    }
}

/* many small files (the server's cache of upper descriptors overflows) */

static void sc_many(void) {
    unsigned k = rn(NMANY), op = rn(5);
    char *p = P("many/d%u/f%u", k % 10, k);
    if (op == 0) {
        CHK(mkdir(P("many/d%u", k % 10), 0755), "mkdir many", EEXIST);
        return;
    }
    if (op == 1) {
        struct stat st;
        CHK(stat(p, &st), "stat many", ENOENT);
        return;
    }
    int fd = CHK(open(p, O_RDWR | (op == 2 ? O_CREAT : 0), 0644), "open many", ENOENT);
    if (fd < 0)
        return;
    char rec[RECSZ];
    mkrec(rec, wid, ++ctr);
    off_t off = (off_t)wid * RECSZ;
    if (op <= 3)
        CHK(write_all(fd, rec, RECSZ, off), "pwrite many");
    uint8_t b[RECSZ * MAXW];
    ssize_t n = CHK(pread(fd, b, sizeof b, 0), "pread many");
    for (ssize_t w = 0; w * RECSZ + RECSZ <= n; w++)
        if (!rec_ok(b + w * RECSZ, (int)w, (uint64_t)w * RECSZ, 999, true))
            bad("many/f%u: slot %zd holds '%.*s'", k, w, RECSZ - 1, b + w * RECSZ);
    if (op <= 3 && n >= off + RECSZ && memcmp(b + off, rec, RECSZ))
        bad("many/f%u: own record not read back", k);
    close(fd);
}

typedef void (*scen_fn)(void);
static const struct {
    const char *name;
    scen_fn fn;
} scens[] = {
    {"bigwrite", sc_bigwrite},
    {"bigread", sc_bigread},
    {"wt", sc_wt},
    {"ren", sc_ren},
    {"hl", sc_hl},
    {"ul", sc_ul},
    {"md", sc_md},
    {"mm", sc_mm},
    {"tmpfile", sc_tmpfile},
    {"exch", sc_exch},
    {"xattr", sc_xattr},
    {"chmod", sc_chmod},
    {"many", sc_many},
};
#define NSCEN (sizeof scens / sizeof scens[0])

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int worker(int w, uint64_t seed, uint64_t until, const char *only) {
    wid = w;
    rs = seed * 1000003 + (uint64_t)w * 7919 + (uint64_t)getpid();
    unsigned long ops = 0;
    while (now_ms() < until && nbad < 20) {
        unsigned s = rn(NSCEN);
        if (only && !strstr(only, scens[s].name))
            continue;
        scens[s].fn();
        ops++;
    }
    const char *v = getenv("FSSTRESS_VERBOSE");
    if (v && *v)
        fprintf(stderr, "fsstress: w%d: %lu operations\n", w, ops);
    return nbad ? 1 : 0;
}

static int do_run(int nproc, int ms, uint64_t seed, int killms) {
    if (nproc > MAXW)
        nproc = MAXW;
    const char *only = getenv("FSSTRESS_ONLY");
    uint64_t until = now_ms() + (uint64_t)ms;
    pid_t pids[MAXW];
    for (int w = 0; w < nproc; w++) {
        pids[w] = fork();
        if (pids[w] == 0)
            _exit(worker(w, seed, until, only));
    }
    rs = seed;
    unsigned kills = 0;
    int fails = 0;
    if (killms > 0) {
        while (now_ms() + (uint64_t)killms < until) {
            usleep((useconds_t)killms * 1000);
            int w = (int)rn((unsigned)nproc);
            kill(pids[w], SIGKILL);
            int st;
            waitpid(pids[w], &st, 0);
            if (WIFEXITED(st) && WEXITSTATUS(st))
                fails++;
            kills++;
            pids[w] = fork();
            if (pids[w] == 0)
                _exit(worker(w, seed + kills, until, only));
        }
    }
    for (int w = 0; w < nproc; w++) {
        int st;
        waitpid(pids[w], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            fails++;
    }
    fprintf(stderr, "fsstress: %d workers, %d ms, %u killed, %d failed\n", nproc, ms, kills, fails);
    return fails ? 1 : 0;
}

/* ---- verify ------------------------------------------------------------------ */
static int do_verify(void) {
    static uint8_t b[BIGSZ];
    wid = -1;
    for (unsigned k = 0; k < NBIG; k++) {
        int fd = open(P("big/b%u", k), O_RDONLY);
        if (fd < 0) {
            bad("verify: big/b%u: %s", k, strerror(errno));
            continue;
        }
        ssize_t n = pread(fd, b, BIGSZ, 0);
        close(fd);
        if (n != BIGSZ) {
            bad("verify: big/b%u: read %zd", k, n);
            continue;
        }
        /* slots: k * 8192 + w * SLOT + 64, w < MAXW */
        static bool isslot[BIGSZ];
        memset(isslot, 0, sizeof isslot);
        for (int w = 0; w < MAXW; w++) {
            off_t off = ((off_t)k * 8192 + (off_t)w * SLOT + 64) % (BIGSZ - RECSZ);
            if (!rec_ok(b + off, w, (uint64_t)off, k, false))
                bad("verify: big/b%u slot of w%d: '%.*s'", k, w, RECSZ - 1, b + off);
            memset(isslot + off, 1, RECSZ);
        }
        for (size_t i = 0; i < BIGSZ; i++)
            if (!isslot[i] && b[i] != pat(i, k)) {
                bad("verify: big/b%u: byte %zu changed", k, i);
                break;
            }
    }
    const char *hn[] = {"hl/h0", "hl/hx"};
    struct stat st0 = {0}, st1 = {0};
    for (int i = 0; i < 2; i++) {
        int fd = open(P("%s", hn[i]), O_RDONLY);
        if (fd < 0) {
            bad("verify: %s: %s", hn[i], strerror(errno));
            continue;
        }
        fstat(fd, i ? &st1 : &st0);
        ssize_t n = pread(fd, b, MAXW * SLOT, 0);
        close(fd);
        if (n != MAXW * SLOT)
            bad("verify: %s: read %zd", hn[i], n);
        for (int w = 0; w < MAXW && n == MAXW * SLOT; w++)
            if (!rec_ok(b + w * SLOT + 64, w, (uint64_t)w * SLOT + 64, 100, false))
                bad("verify: %s slot %d: '%.*s'", hn[i], w, RECSZ - 1, b + w * SLOT + 64);
    }
    if (st0.st_ino != st1.st_ino)
        bad("verify: hl/h0 and hl/hx are not one file any more (ino %lu, %lu)", (unsigned long)st0.st_ino,
            (unsigned long)st1.st_ino);
    int fd = open(P("mm"), O_RDONLY);
    if (fd >= 0) {
        ssize_t n = pread(fd, b, MAXW * SLOT, 0);
        close(fd);
        for (int w = 0; w < MAXW && n == MAXW * SLOT; w++)
            if (!rec_ok(b + w * SLOT + 64, w, (uint64_t)w * SLOT + 64, 101, false))
                bad("verify: mm slot %d: '%.*s'", w, RECSZ - 1, b + w * SLOT + 64);
    } else
        bad("verify: mm: %s", strerror(errno));
    for (int e = 0; e < 2; e++) {
        fd = open(P("ex/e%d", e), O_RDONLY);
        if (fd < 0) {
            bad("verify: ex/e%d: %s", e, strerror(errno));
            continue;
        }
        ssize_t n = read(fd, b, 4000);
        close(fd);
        if (n != 3000 || (b[0] != 'E' && b[0] != 'F'))
            bad("verify: ex/e%d: %zd bytes", e, n);
    }
    fd = open(P("wt"), O_RDONLY);
    if (fd >= 0) {
        ssize_t n = pread(fd, b, BIGSZ, 0);
        close(fd);
        for (ssize_t i = 0; i < n; i++)
            if (b[i] && b[i] != pat((uint64_t)i, 300)) {
                bad("verify: wt byte %zd", i);
                break;
            }
    }
    printf("fsstress: verify: %lu problems\n", nbad);
    return nbad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fsstress setup|run|verify DIR ...\n");
        return 64;
    }
    D = argv[2];
    bad_env = getenv("FSSTRESS_SKIP");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[1], "setup"))
        return do_setup();
    if (!strcmp(argv[1], "verify"))
        return do_verify();
    if (!strcmp(argv[1], "run") && argc >= 6)
        return do_run(atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10), argc > 6 ? atoi(argv[6]) : 0);
    fprintf(stderr, "usage\n");
    return 64;
}
