/* pathmemo.c: realpath_memo and the path resolution built on it (see
 * util.h).  The memo is the one piece of global state in util: one per
 * process, for a single-threaded pass between realpath_memo_begin and _end. */
#include "util/util.h"
#include "util/cleanup.h"

#include <fcntl.h>
#include <search.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/fs.h>
#include <linux/magic.h>

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
