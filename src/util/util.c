/* util.c: see util.h.  No global state; every function is thread-safe. */
#include "util/util.h"
#include "util/cleanup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <grp.h>
#include <pwd.h>
#include <search.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/fs.h>
#include <linux/magic.h>

char *path_join(const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    char *r;
    if (asprintf(&r, "%.*s%s%s", (int)la, a, (la == 1 && a[0] == '/') ? "" : "/", b) < 0)
        return NULL;
    return r;
}

char *find_in_path(const char *cmd, const char *cwd) {
    if (strchr(cmd, '/'))
        return cmd[0] == '/' ? strdup(cmd) : path_join(cwd, cmd);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue;
        char *f = path_join(d, cmd);
        if (f && access(f, X_OK) == 0)
            return f;
        free(f);
    }
    return NULL;
}

char *str_vprintf(const char *fmt, va_list ap) {
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

int usage_error(char **ret_error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = str_vprintf(fmt, ap);
    va_end(ap);
    *ret_error = m;
    return m ? -EINVAL : -ENOMEM;
}

char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = str_vprintf(fmt, ap);
    va_end(ap);
    return s;
}

bool path_within(const char *path, const char *dir) {
    if (strcmp(dir, "/") == 0)
        return path[0] == '/';
    size_t l = strlen(dir);
    return strncmp(path, dir, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

bool path_overlaps(const char *a, const char *b) {
    return path_within(a, b) || path_within(b, a);
}

bool path_is_git_index(const char *relpath) {
    const char *base = strrchr(relpath, '/');
    if (!base || strcmp(base + 1, "index") != 0)
        return false;
    for (const char *c = relpath; c < base; c = strchr(c, '/') + 1)
        if (strncmp(c, ".git/", 5) == 0)
            return true;
    return false;
}

int path_split_last(char *path, const char **ret_parent, const char **ret_base) {
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        path[--l] = '\0';
    char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == '\0')
        return -EINVAL;
    *ret_parent = slash ? (slash == path ? "/" : path) : ".";
    if (slash)
        *slash = '\0';
    *ret_base = base;
    return 0;
}

/* ---- realpath with remembered directories ------------------------------ */

/* Between realpath_memo_begin and _end: the canonical paths found to exist
 * and not be symlinks (1), or to be directories (2), in a table of glibc's
 * (hsearch_r; keys owned by keys[], their values in vals[]).  Only positive
 * facts are kept.  The table starts small and is made again twice as large
 * when half full: one sized for the most at once (8,192 slots, 196 KB) had
 * every lookup touch another page of it, some 50 page faults a run for a
 * few hundred paths. */
#define RP_MEMO_MAX 4096
#define RP_MEMO_FIRST 256
#define RP_ABSENT 3 /* a value: the path does not exist (ENOENT), nor anything below it */
/* realpath_memo_list_dirs: directories below which a run's planning looks
 * up many names that mostly do not exist (HOME's hundred-odd credential
 * locations): at the RP_LIST_AFTER-th lookup below one, it is listed once (one getdents of at
 * most RP_LIST_BYTES), and a name its listing does not hold is absent
 * without a system call.  A name it holds is read as before (a symlink or
 * not).  Only where a name's bytes are the lookup's key (rp_listable): not
 * a casefolded directory, not a file system that folds case or makes
 * entries up on lookup. */
#define RP_DIRS_MAX 32
#define RP_LIST_AFTER 4
#define RP_LIST_BYTES 32768
struct rp_dir {
    char *path;
    unsigned lookups;
    bool listed, unlistable;
    char *names;   /* the listing's names, each NUL-terminated */
    char **sorted; /* into names[], by strcmp */
    size_t n;
};
static struct {
    bool on;
    struct hsearch_data tab;
    char **keys;
    unsigned char *vals;
    size_t n, cap; /* keys held; keys[] and vals[] room, the table's slots twice that */
    bool listing;  /* realpath_memo_list_dirs: absent paths remembered, directories listed */
    struct rp_dir dirs[RP_DIRS_MAX];
    size_t n_dirs;
} rp_memo;

/* The table made anew with room for cap keys, the held ones entered again.
 * false (the old table kept) when out of memory. */
static bool memo_resize(size_t cap) {
    char **keys = realloc(rp_memo.keys, cap * sizeof *keys);
    if (!keys)
        return false;
    rp_memo.keys = keys;
    /* not realloc: the old table points into the old values until the new
     * one replaces it */
    unsigned char *vals = malloc(cap);
    struct hsearch_data tab;
    memset(&tab, 0, sizeof tab);
    if (!vals || !hcreate_r(cap * 2, &tab)) {
        free(vals);
        return false;
    }
    if (rp_memo.n)
        memcpy(vals, rp_memo.vals, rp_memo.n);
    for (size_t i = 0; i < rp_memo.n; i++) {
        ENTRY e = {.key = keys[i], .data = &vals[i]}, *found;
        if (!hsearch_r(e, ENTER, &found, &tab)) {
            hdestroy_r(&tab);
            free(vals);
            return false;
        }
    }
    if (rp_memo.cap)
        hdestroy_r(&rp_memo.tab);
    free(rp_memo.vals);
    rp_memo.vals = vals;
    rp_memo.tab = tab;
    rp_memo.cap = cap;
    return true;
}

void realpath_memo_begin(void) {
    if (rp_memo.on)
        return;
    rp_memo.n = rp_memo.cap = 0;
    rp_memo.keys = NULL;
    rp_memo.vals = NULL;
    if (!memo_resize(RP_MEMO_FIRST)) {
        free(rp_memo.keys);
        free(rp_memo.vals);
        rp_memo.keys = NULL;
        rp_memo.vals = NULL;
        return;
    }
    rp_memo.on = true;
}

void realpath_memo_list_dirs(void) {
    rp_memo.listing = rp_memo.on;
}

void realpath_memo_end(void) {
    if (!rp_memo.on)
        return;
    for (size_t i = 0; i < rp_memo.n_dirs; i++) {
        free(rp_memo.dirs[i].path);
        free(rp_memo.dirs[i].names);
        free(rp_memo.dirs[i].sorted);
    }
    memset(rp_memo.dirs, 0, sizeof rp_memo.dirs);
    rp_memo.n_dirs = 0;
    rp_memo.listing = false;
    hdestroy_r(&rp_memo.tab);
    for (size_t i = 0; i < rp_memo.n; i++)
        free(rp_memo.keys[i]);
    free(rp_memo.keys);
    free(rp_memo.vals);
    rp_memo.keys = NULL;
    rp_memo.vals = NULL;
    rp_memo.n = rp_memo.cap = 0;
    rp_memo.on = false;
}

/* The value of a key is its byte in vals[] (the entry's data points there:
 * vals[] moves when it grows, and the table is made again then). */
static int memo_get(const char *path) {
    ENTRY e = {.key = (char *)path}, *found;
    return hsearch_r(e, FIND, &found, &rp_memo.tab) ? *(unsigned char *)found->data : 0;
}

/* what: 1 (exists, not a symlink), 2 (a directory), RP_ABSENT.  The first
 * fact of a path is kept, but for 1 made 2. */
static void memo_put(const char *path, int what) {
    ENTRY e = {.key = (char *)path}, *found;
    if (hsearch_r(e, FIND, &found, &rp_memo.tab)) {
        unsigned char *v = found->data;
        if (*v == 1 && what == 2)
            *v = (unsigned char)what;
        return;
    }
    if (rp_memo.n >= RP_MEMO_MAX)
        return;
    if (rp_memo.n >= rp_memo.cap && !memo_resize(rp_memo.cap * 2))
        return;
    if (!(e.key = strdup(path)))
        return;
    rp_memo.vals[rp_memo.n] = (unsigned char)what;
    e.data = &rp_memo.vals[rp_memo.n];
    if (!hsearch_r(e, ENTER, &found, &rp_memo.tab)) {
        free(e.key);
        return;
    }
    rp_memo.keys[rp_memo.n++] = e.key;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is a directory's listing the set of names a lookup finds in it?  On the
 * local file systems that keep names as given, unless the directory folds
 * case (ext4, f2fs and tmpfs can: FS_CASEFOLD_FL). */
static bool rp_listable(int fd) {
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return false;
    switch ((unsigned long)sf.f_type) {
    case EXT4_SUPER_MAGIC: /* ext2 and ext3 too */
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
    case F2FS_SUPER_MAGIC: break;
    default: return false;
    }
    int flags = 0;
    return ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_CASEFOLD_FL);
}

/* List d whole, or mark it unlistable. */
static void rp_list(struct rp_dir *d) {
    d->unlistable = true;
    /* and searchable: else a readlink below it fails with EACCES, not
     * ENOENT */
    if (faccessat(AT_FDCWD, d->path, X_OK, AT_EACCESS) < 0)
        return;
    _cleanup_close_ int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !rp_listable(fd))
        return;
    _cleanup_free_ char *buf = malloc(RP_LIST_BYTES);
    if (!buf)
        return;
    ssize_t len = getdents64(fd, buf, RP_LIST_BYTES);
    char more[512]; /* all of it in one: the next read is the end */
    if (len <= 0 || getdents64(fd, more, sizeof more) != 0)
        return;
    size_t n = 0;
    for (ssize_t off = 0; off < len; off += ((struct dirent64 *)(buf + off))->d_reclen)
        n++;
    _cleanup_free_ char **sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return;
    n = 0;
    for (ssize_t off = 0; off < len; off += ((struct dirent64 *)(buf + off))->d_reclen)
        sorted[n++] = ((struct dirent64 *)(buf + off))->d_name;
    qsort(sorted, n, sizeof *sorted, cmp_name);
    d->names = TAKE_PTR(buf);
    d->sorted = TAKE_PTR(sorted);
    d->n = n;
    d->listed = true;
    d->unlistable = false;
}

/* Is name known absent from the directory parent (parent_len bytes of
 * parent: "" is "/")?  Counts a lookup below parent, and lists it at the
 * RP_LIST_AFTER-th. */
static bool rp_known_absent(const char *parent, size_t parent_len, const char *name) {
    const char *dir = parent_len ? parent : "/";
    size_t dlen = parent_len ? parent_len : 1;
    struct rp_dir *d = NULL;
    for (size_t i = 0; i < rp_memo.n_dirs && !d; i++)
        if (strlen(rp_memo.dirs[i].path) == dlen && memcmp(rp_memo.dirs[i].path, dir, dlen) == 0)
            d = &rp_memo.dirs[i];
    if (!d) {
        if (rp_memo.n_dirs == RP_DIRS_MAX)
            return false;
        d = &rp_memo.dirs[rp_memo.n_dirs];
        if (!(d->path = strndup(dir, dlen)))
            return false;
        rp_memo.n_dirs++;
    }
    if (!d->listed && !d->unlistable && ++d->lookups >= RP_LIST_AFTER)
        rp_list(d);
    return d->listed && !bsearch(&name, d->sorted, d->n, sizeof *d->sorted, cmp_name);
}

bool realpath_memo_absent(const char *path) {
    if (!rp_memo.listing || !path || path[0] != '/')
        return false;
    int known = memo_get(path);
    if (known)
        return known == RP_ABSENT;
    const char *slash = strrchr(path, '/');
    if (!slash[1] || !rp_known_absent(path, (size_t)(slash - path), slash + 1))
        return false;
    memo_put(path, RP_ABSENT);
    return true;
}

/* path (resolved so far) must be a directory: what follows it is "." or
 * ".." or a trailing slash (realpath says ENOTDIR otherwise). */
static bool memo_is_dir(const char *path) {
    if (memo_get(path) == 2)
        return true;
    struct stat st;
    if (stat(path, &st) < 0)
        return false;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return false;
    }
    memo_put(path, 2);
    return true;
}

char *realpath_memo(const char *path) {
    if (!rp_memo.on || !path || path[0] != '/')
        return realpath(path, NULL);
    char out[PATH_MAX] = ""; /* resolved so far; "" is "/" */
    size_t olen = 0;
    char rest[2 * PATH_MAX], link[PATH_MAX], tmp[2 * PATH_MAX];
    if (snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    char *p = rest;
    int links = 0;
    for (;;) {
        bool slashed = false;
        while (*p == '/') {
            p++;
            slashed = true;
        }
        if (!*p) {
            if (slashed && olen > 0 && !memo_is_dir(out))
                return NULL;
            break;
        }
        size_t n = strcspn(p, "/");
        char *next = p + n;
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            if (olen > 0 && !memo_is_dir(out))
                return NULL;
            if (n == 2) {
                while (olen > 0 && out[olen - 1] != '/')
                    olen--;
                if (olen > 0)
                    olen--;
                out[olen] = '\0';
            }
            p = next;
            continue;
        }
        if (olen + 1 + n >= sizeof out) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        out[olen] = '/';
        memcpy(out + olen + 1, p, n);
        out[olen + 1 + n] = '\0';
        int known = memo_get(out);
        if (known == RP_ABSENT) {
            errno = ENOENT;
            return NULL;
        }
        if (!known && rp_memo.listing && rp_known_absent(out, olen, out + olen + 1)) {
            memo_put(out, RP_ABSENT);
            errno = ENOENT;
            return NULL;
        }
        if (!known) {
            ssize_t l = readlink(out, link, sizeof link - 1);
            if (l >= 0) { /* a symlink: its target, then what followed it */
                if (++links > 40) {
                    errno = ELOOP;
                    return NULL;
                }
                link[l] = '\0';
                if (snprintf(tmp, sizeof tmp, "%s%s", link, next) >= (int)sizeof tmp || strlen(tmp) >= sizeof rest) {
                    errno = ENAMETOOLONG;
                    return NULL;
                }
                memcpy(rest, tmp, strlen(tmp) + 1);
                p = rest;
                if (link[0] == '/')
                    olen = 0;
                out[olen] = '\0';
                continue;
            }
            if (errno != EINVAL) {
                int e = errno;
                if (e == ENOENT && rp_memo.listing)
                    memo_put(out, RP_ABSENT);
                errno = e;
                return NULL;
            }
            memo_put(out, 1);
        }
        olen += 1 + n;
        p = next;
    }
    return strdup(olen ? out : "/");
}

int path_abs_parent(const char *path, char **ret_path) {
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    const char *parent, *base;
    int r = path_split_last(copy, &parent, &base);
    if (r < 0)
        return r;
    _cleanup_free_ char *rp = realpath_memo(parent);
    if (!rp)
        return -errno;
    char *p = path_join(rp, base);
    if (!p)
        return -ENOMEM;
    *ret_path = p;
    return 0;
}

int path_resolve(const char *path, char **ret) {
    if (path[0] != '/')
        return 0;
    if ((*ret = realpath_memo(path)))
        return 1;
    _cleanup_free_ char *head = strdup(path);
    if (!head)
        return -ENOMEM;
    for (;;) {
        size_t l = strlen(head);
        while (l > 1 && head[l - 1] == '/')
            head[--l] = '\0';
        char *slash = strrchr(head, '/');
        if (!slash)
            return 0;
        const char *rest = path + (slash - head);
        if (slash == head)
            head[1] = '\0';
        else
            *slash = '\0';
        char *real = realpath_memo(head);
        if (!real)
            continue;
        char *p = real; /* rest ("/a//b/", below real): plain names, joined one by one */
        for (const char *q = rest; p && *q;) {
            while (*q == '/')
                q++;
            size_t n = strcspn(q, "/");
            if ((n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.')) {
                free(p);
                return 0;
            }
            if (n) {
                _cleanup_free_ char *name = strndup(q, n);
                char *next = name ? path_join(p, name) : NULL;
                free(p);
                p = next;
            }
            q += n;
        }
        if (!p)
            return -ENOMEM;
        *ret = p;
        return 1;
    }
}

int mkdir_p(const char *path, mode_t mode) {
    if (path[0] != '/')
        return -EINVAL;
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
            *s = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int state_dir(char **ret_path) {
    const char *x = getenv("XDG_STATE_HOME");
    char *r;
    if (x && x[0] == '/') {
        r = path_join(x, "pvisor");
        /* where it is, symlinks and '..' resolved (WS/../state: the
         * sandbox's plan takes normalised paths only) */
        char *res = NULL;
        if (r && path_resolve(r, &res) > 0) {
            free(r);
            r = res;
        }
    } else {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/') {
            struct passwd *pw = getpwuid(getuid());
            if (!pw || !pw->pw_dir || pw->pw_dir[0] != '/')
                return -ENOENT;
            home = pw->pw_dir;
        }
        if (asprintf(&r, "%s/.local/state/pvisor", strcmp(home, "/") == 0 ? "" : home) < 0)
            r = NULL;
    }
    if (!r)
        return -ENOMEM;
    *ret_path = r;
    return 0;
}

/* Is path, where it is a directory, ours, and no one else may write in
 * it?  0, or -EPERM. */
static int ours_alone(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) /* absent, or a parent is no directory: the caller's error then */
        return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return 0; /* likewise (runs a file: "Not a directory" when read or made) */
    return st.st_uid == geteuid() && !(st.st_mode & 022) ? 0 : -EPERM;
}

/* May a group's members other than us write in a directory of that
 * group?  Not when it is our own primary group and lists no one else (a
 * user's private group, umask 002's directories). */
static bool group_shared(gid_t gid) {
    if (gid != getegid())
        return true;
    struct group *gr = getgrgid(gid);
    struct passwd *pw = getpwuid(geteuid());
    if (!gr || !pw)
        return true;
    for (char **m = gr->gr_mem; *m; m++)
        if (strcmp(*m, pw->pw_name) != 0)
            return true;
    return false;
}

int path_parent_unsafe(const char *path, char **ret_bad) {
    _cleanup_free_ char *res = NULL;
    int r = path_resolve(path, &res);
    if (r < 0)
        return r;
    const char *p = r > 0 ? res : path;
    if (p[0] != '/')
        return 0;
    uid_t me = geteuid();
    /* each directory above it: "/", "/a", "/a/b" for /a/b/c */
    for (size_t i = 0; p[i]; i++) {
        if (p[i] != '/' || !p[i + 1])
            continue;
        _cleanup_free_ char *dir = strndup(p, i ? i : 1);
        if (!dir)
            return -ENOMEM;
        struct stat st;
        if (stat(dir, &st) < 0)
            return 0; /* absent (made ours), or not to be looked at: the caller's own error then */
        bool others_write = (st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && group_shared(st.st_gid));
        /* its owner, or anyone who may write in it without the sticky
         * bit (/tmp's), may rename what is below it away and put their
         * own in its place */
        /* in a user namespace (unshare -Ur, a rootless container), root's
         * directories show the overflow uid: whoever owns it is outside
         * the namespace, taken for root's */
        bool owner_ok = st.st_uid == 0 || st.st_uid == me ||
                        (st.st_uid == (uid_t)sysctl_long("/proc/sys/kernel/overflowuid") && !userns_is_initial());
        if (!owner_ok || (others_write && !(st.st_mode & S_ISVTX))) {
            if (ret_bad)
                *ret_bad = TAKE_PTR(dir);
            return 1;
        }
    }
    return 0;
}

int runs_dir(bool create, char **ret_path) {
    _cleanup_free_ char *sd = NULL;
    int r = state_dir(&sd);
    if (r < 0)
        return r;
    char *p = path_join(sd, "runs");
    if (!p)
        return -ENOMEM;
    /* another user's state directory (made first in a shared XDG_STATE_HOME)
     * would let them replace the runs, their Bundles and stages, and the
     * agent-written record (found by a red-team pass), as would one others
     * may write in: refused, as ssh refuses such a ~/.ssh */
    if ((r = ours_alone(sd)) < 0 || (r = ours_alone(p)) < 0 || (r = path_parent_unsafe(sd, NULL)) != 0) {
        if (r > 0)
            r = -EPERM; /* a directory above it: as much theirs */
        free(p);
        return r;
    }
    if (create) {
        r = mkdir_p(p, 0700);
        if (r < 0) {
            free(p);
            return r;
        }
    }
    *ret_path = p;
    return 0;
}

/* ts in UTC with milliseconds: 20261129T133758.420Z (compact) or
 * 2026-11-29T13:37:58.420Z */
static void format_utc_ms(const struct timespec *ts, bool compact, char *ret_buf, size_t size) {
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    char t[24];
    size_t n = strftime(t, sizeof t, compact ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ret_buf, size, "%.*s.%03dZ", (int)n, t, (int)((ts->tv_nsec / 1000000) % 1000));
}

void format_stamp_utc(const struct timespec *ts, char ret_buf[static 24]) {
    format_utc_ms(ts, true, ret_buf, 24);
}

int make_run_id(char ret_id[static 32]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    char t[24];
    format_stamp_utc(&ts, t);
    int n = snprintf(ret_id, 32, "%s-%08" PRIx32, t, rnd);
    return (n > 0 && n < 32) ? 0 : -EOVERFLOW;
}

void format_time_utc(const struct timespec *ts, char ret_buf[static 32]) {
    format_utc_ms(ts, false, ret_buf, 32);
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *ret_value) {
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    default: return -EINVAL;
    }
    if (*end == 'i' && shift)
        end++;
    if (*end == 'B' && shift)
        end++;
    if (*end != '\0')
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    uint64_t r = (uint64_t)v << shift;
    if (r < min || r > max)
        return -ERANGE;
    *ret_value = r;
    return 0;
}

int write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode) {
    return write_file_atomic_as(dirfd, name, data, len, mode, WRITE_SYNC_FILE_AND_DIR);
}

int write_file_atomic_as(int dirfd, const char *name, const void *data, size_t len, mode_t mode, enum write_sync sync) {
    char tmp[NAME_MAX + 1];
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    int n = snprintf(tmp, sizeof tmp, ".%s.%08" PRIx32 ".tmp", name, rnd);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, data, len);
    if (r == 0 && sync != WRITE_NO_SYNC && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dirfd, tmp, 0);
        return r;
    }
    if (sync == WRITE_SYNC_FILE_AND_DIR && fsync(dirfd) < 0 && errno != EINVAL && errno != EBADF)
        return -errno;
    return 0;
}

int read_file_at(int dirfd, const char *name, size_t limit, char **ret_buf, size_t *ret_len) {
    /* Not blocking: a FIFO by that name (an applied '.git' the run reads
     * before the sandbox exists) would wait for a writer that never comes;
     * only a regular file is read. */
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_size >= limit)
        return -EFBIG;
    /* procfs/sysfs files report size 0 and may only answer the first read
     * (at offset 0): start with a page so one read() gets them whole. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    if (cap < 4096)
        cap = 4096 < limit ? 4096 : limit;
    _cleanup_free_ char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= limit)
                return -EFBIG;
            cap = cap * 2 > limit ? limit : cap * 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                return -ENOMEM;
            buf = nb;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (ret_len)
        *ret_len = len;
    *ret_buf = TAKE_PTR(buf);
    return 0;
}

int fd_move_above_stdio(int fd) {
    if (fd > 2)
        return fd;
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0)
        return -errno;
    close(fd);
    return n;
}

int close_all_fds_except(int lowfd, const int *keep, size_t n_keep) {
    /* Walk the gaps between kept fds and close each range with close_range(). */
    int lo = lowfd;
    for (;;) {
        int next = INT_MAX;
        for (size_t i = 0; i < n_keep; i++)
            if (keep[i] >= lo && keep[i] < next)
                next = keep[i];
        if (next > lo) {
            unsigned hi = next == INT_MAX ? ~0U : (unsigned)next - 1;
            if (syscall(SYS_close_range, (unsigned)lo, hi, 0) < 0)
                return -errno;
        }
        if (next == INT_MAX)
            return 0;
        lo = next + 1;
    }
}

int fd_opendir(int fd, DIR **ret_dir) {
    if (fd < 0)
        return -EBADF;
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret_dir = d;
    return 0;
}

struct dirent *readdir_no_dots(DIR *d) {
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            return de;
    return NULL;
}

int dup_opendir(int dir_fd, DIR **ret_dir) {
    int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return -errno;
    int r = fd_opendir(fd, ret_dir);
    if (r >= 0)
        rewinddir(*ret_dir);
    return r;
}

int opendir_at(int dir_fd, const char *name, DIR **ret_dir) {
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    return fd_opendir(fd, ret_dir);
}

int write_string_at(int dirfd, const char *path, const char *text) {
    _cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int write_byte_no_sigpipe(int fd, char c) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int r = write(fd, &c, 1) == 1 ? 0 : -errno;
    if (r == -EPIPE) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int read_full(int fd, void *buf, size_t len, size_t *ret_got) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    *ret_got = got;
    return 0;
}

/* One directory of a tree being removed: the subdirectories still to
 * remove (taken from the end), its identity, its name in its parent. */
struct rm_level {
    char **subdirs;
    size_t n, cap;
    dev_t dev;
    ino_t ino;
    char *name;
};

static void rm_level_free(struct rm_level *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->subdirs[i]);
    free(l->subdirs);
    free(l->name);
}

/* Unlink every non-directory in fd (made writable by its owner when it
 * is not); the subdirectories go into l. */
static int rm_scan(int fd, struct rm_level *l) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    _cleanup_closedir_ DIR *d = NULL;
    int r = dup_opendir(fd, &d);
    if (r < 0)
        return r;
    bool chmodded = false;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        int u = unlinkat(fd, de->d_name, 0);
        if (u < 0 && errno == EACCES && !chmodded) { /* a directory without write permission */
            chmodded = true;
            if (fchmod(fd, 0700) == 0)
                u = unlinkat(fd, de->d_name, 0);
        }
        if (u == 0 || errno == ENOENT)
            continue;
        if (errno != EISDIR && errno != EPERM)
            return -errno;
        if (l->n == l->cap) {
            size_t nc = l->cap ? 2 * l->cap : 8;
            char **nv = realloc(l->subdirs, nc * sizeof *nv);
            if (!nv)
                return -ENOMEM;
            l->subdirs = nv;
            l->cap = nc;
        }
        if (!(l->subdirs[l->n] = strdup(de->d_name)))
            return -ENOMEM;
        l->n++;
    }
    return 0;
}

int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int chmod_nofollow_at(int dirfd, const char *name, mode_t mode) {
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
    /* fchmodat2 (Linux 6.6) refuses a symlink itself (EOPNOTSUPP); glibc's
     * emulation needs /proc, which a caller may lack: without the call, a
     * check that name is no symlink first (callers hold the lock that
     * keeps others from swapping it meanwhile) */
    if (syscall(SYS_fchmodat2, dirfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    /* a seccomp profile older than the call may answer EPERM for it */
    if (errno != ENOSYS && errno != EPERM)
        return -errno;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (S_ISLNK(st.st_mode)) {
        errno = EOPNOTSUPP;
        return -EOPNOTSUPP;
    }
    return fchmodat(dirfd, name, mode, 0) < 0 ? -errno : 0;
}

int chmod_fd(int fd, mode_t mode) {
    if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOSYS && errno != EPERM && errno != EINVAL)
        return -errno;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return fchmodat(AT_FDCWD, proc, mode, 0) < 0 ? -errno : 0;
}

/* The mount a descriptor is on (statx STATX_MNT_ID, Linux 5.8), or 0. */
static uint64_t mount_id(int fd) {
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
        return 0;
    return sx.stx_mnt_id;
}

static int rm_open_sub(int fd, const char *name, uint64_t mnt) {
    int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* never through a symlink swapped in meanwhile */
    if (sub < 0 && errno == EACCES && chmod_nofollow_at(fd, name, 0700) == 0)
        sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return -errno;
    if (mount_id(sub) != mnt) { /* a mount point (a bind mount too): not ours to empty */
        close(sub);
        return -EXDEV;
    }
    return sub;
}

/* Depth first, with the levels on the heap and one directory open at a
 * time: a tree of any depth (an agent can make one deeper than PATH_MAX
 * allows to name) is removed without running out of stack or
 * descriptors.  The way up is "..", checked against the identity recorded
 * on the way down (-ESTALE if the tree was moved meanwhile).  A file
 * system mounted in the tree is not entered (-EXDEV). */
int remove_tree_contents(int dir_fd, unsigned max_depth) {
    struct rm_level *lv = NULL;
    size_t n_lv = 0, cap_lv = 0;
    int cur = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
    int r = cur < 0 ? -errno : 0;
    if (r == 0 && (lv = calloc(cap_lv = 16, sizeof *lv)) == NULL)
        r = -ENOMEM;
    uint64_t mnt = r == 0 ? mount_id(cur) : 0;
    if (r == 0 && mnt == 0)
        r = -ENOTSUP; /* no mount ids: a mount point could not be told apart */
    if (r == 0) {
        n_lv = 1;
        r = rm_scan(cur, &lv[0]);
    }
    while (r == 0 && n_lv > 0) {
        struct rm_level *l = &lv[n_lv - 1];
        if (l->n > 0) {
            char *name = l->subdirs[--l->n];
            if (n_lv > max_depth) {
                free(name);
                r = -ELOOP;
                break;
            }
            int sub = rm_open_sub(cur, name, mnt);
            if (sub == -ENOENT) {
                free(name);
                continue;
            }
            if (sub < 0) {
                free(name);
                r = sub;
                break;
            }
            if (n_lv == cap_lv) {
                struct rm_level *nl = realloc(lv, 2 * cap_lv * sizeof *nl);
                if (!nl) {
                    free(name);
                    close(sub);
                    r = -ENOMEM;
                    break;
                }
                lv = nl;
                cap_lv *= 2;
            }
            close(cur);
            cur = sub;
            lv[n_lv++] = (struct rm_level){.name = name};
            r = rm_scan(cur, &lv[n_lv - 1]);
            continue;
        }
        if (n_lv == 1) {
            rm_level_free(&lv[0]);
            n_lv = 0;
            break;
        }
        /* this directory is empty: up, and remove it there */
        int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (up < 0 || fstat(up, &st) < 0) {
            r = -errno;
            if (up >= 0)
                close(up);
            break;
        }
        close(cur);
        cur = up;
        if (st.st_dev != lv[n_lv - 2].dev || st.st_ino != lv[n_lv - 2].ino) {
            r = -ESTALE;
            break;
        }
        int u = unlinkat(cur, l->name, AT_REMOVEDIR);
        if (u < 0 && errno == EACCES && fchmod(cur, 0700) == 0)
            u = unlinkat(cur, l->name, AT_REMOVEDIR);
        if (u < 0 && errno != ENOENT)
            r = -errno;
        rm_level_free(l);
        n_lv--;
    }
    for (size_t i = 0; i < n_lv; i++)
        rm_level_free(&lv[i]);
    free(lv);
    if (cur >= 0)
        close(cur);
    return r;
}

int remove_tree_at(int dir_fd, const char *name, unsigned max_depth) {
    if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    _cleanup_close_ int sub = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return -errno;
    int r = remove_tree_contents(sub, max_depth);
    if (r < 0)
        return r;
    return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

size_t term_char(const unsigned char *p, size_t n, bool *ret_unsafe) {
    unsigned c = p[0];
    if (c < 0x80) {
        *ret_unsafe = c < 0x20 || c == 0x7f;
        return 1;
    }
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : (c & 0xf0) == 0xe0 ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    *ret_unsafe = true; /* not UTF-8: one byte (a lone C1 byte acts on an 8-bit terminal) */
    if (len == 0 || len > n)
        return 1;
    uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 1;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 1;
    /* C1 controls; Unicode's default-ignorable code points (the soft
     * hyphen, the combining grapheme joiner, the Arabic letter mark, the
     * Hangul, Khmer and Mongolian fillers, variation selectors and vowel
     * separator, zero-width characters and the directional marks,
     * embeddings, overrides and isolates, the invisible operators and
     * deprecated format characters, the byte order mark, shorthand format
     * controls, musical symbol format controls, tags); line and paragraph
     * separators, interlinear annotations; and the spaces other than
     * U+0020 (no-break, ogham, en to hair, narrow, medium, ideographic,
     * braille blank): what shows nothing, moves text, or passes for
     * something else on a terminal */
    *ret_unsafe = cp <= 0xa0 || cp == 0xad || cp == 0x34f || cp == 0x61c || cp == 0x115f || cp == 0x1160 ||
                  cp == 0x1680 || (cp >= 0x17b4 && cp <= 0x17b5) || (cp >= 0x180b && cp <= 0x180f) ||
                  (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) ||
                  cp == 0x2800 || cp == 0x3000 || cp == 0x3164 || (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff ||
                  cp == 0xffa0 || (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x1bca0 && cp <= 0x1bca3) ||
                  (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff);
    return len;
}

char *term_escape(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        bool unsafe;
        size_t l = term_char(p + i, n - i, &unsafe);
        for (size_t k = 0; k < l; k++, i++) {
            if (unsafe || p[i] == '\\')
                o += sprintf(o, "\\x%02x", p[i]);
            else
                *o++ = (char)p[i];
        }
    }
    *o = '\0';
    return out;
}

char *hex_encode(const char *s) {
    static const char digits[] = "0123456789abcdef";
    size_t n = strlen(s);
    char *out = malloc(2 * n + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = digits[(unsigned char)s[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hex_decode(const char *hex, char **ret) {
    size_t n = strlen(hex);
    if (n % 2)
        return -EINVAL;
    char *out = malloc(n / 2 + 1);
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0 || (hi | lo) == 0) {
            free(out);
            return -EINVAL;
        }
        out[i / 2] = (char)(hi << 4 | lo);
    }
    out[n / 2] = '\0';
    *ret = out;
    return 0;
}

bool userns_is_initial(void) {
    _cleanup_free_ char *map = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 4096, &map, NULL) < 0)
        return true; /* no /proc: as before there was a user namespace */
    unsigned long inner, outer, count;
    return sscanf(map, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 && count == 4294967295UL;
}

bool userns_ids_are_host(void) {
    _cleanup_free_ char *map = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 4096, &map, NULL) < 0)
        return false;
    unsigned long inner, outer, count;
    return sscanf(map, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 && count >= 4294967294UL;
}

/* A sysctl as a long; -1 when absent or unreadable.  Read in one call:
 * procfs sysctl handlers return EOF for any read at a non-zero offset, so a
 * growing-buffer reader would see only the first byte. */
long sysctl_long(const char *path) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[64];
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || end == buf || v < 0)
        return -1;
    return v;
}

const struct ns_kind ns_kinds[NS_KINDS] = {
    {CLONE_NEWNS, "CLONE_NEWNS", "mnt", "mount", NULL},
    {CLONE_NEWPID, "CLONE_NEWPID", "pid", "PID", "CONFIG_PID_NS"},
    {CLONE_NEWNET, "CLONE_NEWNET", "net", "network", "CONFIG_NET_NS"},
    {CLONE_NEWIPC, "CLONE_NEWIPC", "ipc", "IPC", "CONFIG_IPC_NS"},
    {CLONE_NEWUTS, "CLONE_NEWUTS", "uts", "UTS", "CONFIG_UTS_NS"},
};

const char *ns_limit_remedy(const char *step, int err, char *buf, size_t size) {
    const struct ns_kind *ns = ns_kinds;
    if (err != ENOSPC || !step)
        return NULL;
    for (size_t i = 0; i < NS_KINDS; i++) {
        char flag[32]; /* "CLONE_NEWNS)": not the start of another flag's name */
        snprintf(flag, sizeof flag, "%s)", ns[i].flag);
        if (!strstr(step, flag))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/sys/user/max_%s_namespaces", ns[i].sysctl);
        if (sysctl_long(path) == 0)
            snprintf(buf, size, "%s namespaces are disabled: sysctl user.max_%s_namespaces=15000", ns[i].what,
                     ns[i].sysctl);
        else
            /* the limit of a user namespace above ours (the one pvisor
             * started in, when the refusal came in the run's) is not
             * readable from here: 0 there reads as 15000 here */
            snprintf(buf, size,
                     "the limit on %s namespaces is 0 or used up (user.max_%s_namespaces, in the user namespace "
                     "pvisor runs in or one above it): sysctl user.max_%s_namespaces=15000, or end other "
                     "sandboxes or containers",
                     ns[i].what, ns[i].sysctl, ns[i].sysctl);
        return buf;
    }
    /* A detached mount (open_tree's clone, fsmount's) lives in an
     * anonymous mount namespace of its own, counted against
     * user.max_mnt_namespaces until it is attached: a launcher step that
     * clones or makes a mount fails ENOSPC when that limit is low, not 0
     * (a run clones a few dozen at once), or at fs.mount-max. */
    static const char *const mount_words[] = {"mount", "open_tree", "covering", "tmpfs"};
    for (size_t i = 0; i < ARRAY_SIZE(mount_words); i++)
        if (strstr(step, mount_words[i])) {
            snprintf(buf, size,
                     "the limit on mount namespaces is too low (user.max_mnt_namespaces, here or in a user namespace "
                     "above: each mount made for the sandbox's root counts as one while it is made) or the one on "
                     "mounts (fs.mount-max): sysctl user.max_mnt_namespaces=15000");
            return buf;
        }
    return NULL;
}

/* The holder of a user namespace made by userns_with_maps: it only sleeps
 * until the SIGKILL that ends it (every other signal is blocked), or dies
 * with its parent (a copy of whose descriptors it holds), if that is killed
 * in the microseconds before it kills the holder.  It shares its parent's
 * memory (CLONE_VM), so it touches nothing: raw system calls that cannot
 * fail (no errno), no libc state. */
static int userns_holder(void *arg) {
    syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (syscall(SYS_getppid) != (long)(intptr_t)arg) /* the parent is gone already */
        syscall(SYS_exit, 0);
    for (;;)
        syscall(SYS_pause);
    return 0;
}

int userns_with_maps(const char *uid_map, const char *gid_map, bool deny_setgroups) {
    const size_t stack_size = 64 * 1024;
    void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the child starts with all blocked */
    pid_t pid = clone(userns_holder, (char *)stack + stack_size, CLONE_VM | CLONE_NEWUSER | SIGCHLD,
                      (void *)(intptr_t)getpid());
    int r = pid < 0 ? -errno : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    int nsfd = -1;
    if (r == 0) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
        _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 || (r = write_string_at(d, "uid_map", uid_map)) < 0 ||
            (deny_setgroups && (r = write_string_at(d, "setgroups", "deny")) < 0) ||
            (r = write_string_at(d, "gid_map", gid_map)) < 0)
            r = r < 0 ? r : -errno;
        else if ((nsfd = openat(d, "ns/user", O_RDONLY | O_CLOEXEC)) < 0)
            r = -errno;
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    munmap(stack, stack_size);
    return r < 0 ? r : nsfd;
}

int userns_enter(int flags, uid_t inner_uid, gid_t inner_gid, const char **ret_step) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    /* Root mapping root: every id as it is (but -1, so that the namespace
     * is not the initial one: userns_is_initial), so that the files of
     * other users keep their owners inside instead of becoming unmapped
     * ones, which the kernel lets nobody write, remove or rename.  A map
     * of more than one id needs CAP_SETUID and CAP_SETGID where the
     * namespace was made, which a process that unshared it no longer has:
     * the namespace is made by a child (userns_with_maps, no fork of our
     * memory), its maps written by us from here, then entered. */
    if (uid == 0 && gid == 0 && inner_uid == 0 && inner_gid == 0) {
        static const char map[] = "0 0 4294967294\n";
        _cleanup_close_ int ns = userns_with_maps(map, map, false);
        if (ns >= 0) {
            *ret_step = "setns(CLONE_NEWUSER)";
            if (setns(ns, CLONE_NEWUSER) < 0)
                return -errno;
            *ret_step = "unshare(CLONE_NEWNS)";
            return flags && unshare(flags) < 0 ? -errno : 0;
        }
        /* none made: one that maps root alone, as for any user, below */
    }
    /* the user namespace alone first: one unshare of both blamed the user
     * namespace for the mount namespace's ENOSPC (user.max_mnt_namespaces
     * reached), and said to raise user.max_user_namespaces */
    *ret_step = "unshare(CLONE_NEWUSER)";
    if (unshare(CLONE_NEWUSER) < 0)
        return -errno;
    *ret_step = "writing the user namespace id maps";
    int r = write_string_at(AT_FDCWD, "/proc/self/setgroups", "deny");
    if (r < 0 && r != -ENOENT)
        return r;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)inner_uid, (unsigned)uid);
    if ((r = write_string_at(AT_FDCWD, "/proc/self/uid_map", map)) < 0)
        return r;
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)inner_gid, (unsigned)gid);
    if ((r = write_string_at(AT_FDCWD, "/proc/self/gid_map", map)) < 0)
        return r;
    *ret_step = "unshare(CLONE_NEWNS)";
    return flags && unshare(flags) < 0 ? -errno : 0;
}

/* Is the task at dir (/proc/PID or /proc/PID/task/TID) gone or going? */
static bool task_dying(const char *dir) {
    char path[96], buf[2048];
    snprintf(path, sizeof path, "%s/stat", dir);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return true; /* reaped meanwhile */
    buf[n] = '\0';
    const char *e = strrchr(buf, ')'); /* "PID (COMM) STATE PPID PGRP SID TTY TPGID FLAGS": COMM may hold ')' */
    char state;
    unsigned flags;
    if (!e || sscanf(e + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) != 2)
        return false;
    if (state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */))
        return true;
    snprintf(path, sizeof path, "%s/status", dir);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    unsigned long long mask;
    while (f && fgets(buf, sizeof buf, f))
        if ((sscanf(buf, "SigPnd: %llx", &mask) == 1 || sscanf(buf, "ShdPnd: %llx", &mask) == 1) &&
            (mask & (1ULL << (SIGKILL - 1))))
            return true;
    return false;
}

bool pid_dying(pid_t pid) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    if (!task_dying(dir))
        return false;
    /* A leader whose own thread exited (SYS_exit, pthread_exit) shows as
     * a zombie while its other threads go on: the process is alive as
     * long as one of them is. */
    char tasks[80];
    snprintf(tasks, sizeof tasks, "%s/task", dir);
    _cleanup_closedir_ DIR *d = opendir(tasks);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        unsigned long tid = strtoul(de->d_name, &end, 10);
        if (*end || tid == 0 || tid == (unsigned long)pid || tid > INT_MAX)
            continue;
        char t[96];
        snprintf(t, sizeof t, "%s/%lu", tasks, tid);
        if (!task_dying(t))
            return false;
    }
    return true;
}

size_t pids_still_alive(pid_t *pids, size_t n) {
    for (long ms = 2; n > 0 && ms <= 8; ms *= 2) {
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!pid_dying(pids[i]))
                pids[k++] = pids[i];
        n = k;
    }
    return n;
}

/* Decode mountinfo's octal escapes (\040 for a space) of field [s, s+len). */
int mountinfo_unescape(const char *s, size_t len, char *ret, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
            s[i + 3] >= '0' && s[i + 3] <= '7') {
            c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        }
        if (o + 1 >= size)
            return -ENAMETOOLONG;
        ret[o++] = c;
    }
    ret[o] = '\0';
    return 0;
}

#ifdef PVISOR_STARTUP_MARKS
void pv_mark(const char *name) {
    int e = errno;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[128];
    int n = snprintf(line, sizeof line, "MARK %lld %s\n", (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000, name);
    if (n > 0 && (size_t)n < sizeof line)
        (void)!write(STDERR_FILENO, line, (size_t)n);
    errno = e;
}
#endif
