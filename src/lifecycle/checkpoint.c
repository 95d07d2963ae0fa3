/* checkpoint.c: durable, self-contained copies of a stage (docs/lifecycle.md,
 * "Checkpoints").
 *
 * A checkpoint is STAGE/checkpoints/NAME/ holding a copy of upper/ (raw:
 * whiteouts, opaque and escaped xattrs, symlinks, fifos, hard links within
 * the copy, modes, times), the journal, the origin map (inode numbers
 * translated to the copy's inodes) and meta.json, plus checkpoint.json.
 * Regular files are cloned with FICLONE where the file system can
 * (btrfs, xfs), copied otherwise; never hard-linked to the mutable upper.
 *
 * Every copy is built under a temporary name, made durable (syncfs of the
 * stage's file system, fsync of the new directories) and then published by
 * one rename; a crash leaves only a ".tmp-" directory that the next
 * operation removes.  A published checkpoint (a valid name holding
 * checkpoint.json) is committed: restore and fork accept nothing else.
 * All three verbs take the stage lock and require a stopped stage:
 * checkpoint a sealed one; restore a sealed or interrupted one (the result
 * is sealed); fork a sealed one (or a checkpoint) into a new stage
 * directory.
 *
 * A live checkpoint (the run's agent socket) uses the same steps, split so
 * the supervisor can hold the overlay quiescent for the copy alone:
 * lc_checkpoint_begin (name checks, temp directory), lc_checkpoint_copy
 * (nothing may change the stage meanwhile; no fsync in it), then
 * lc_checkpoint_commit (syncfs, checkpoint.json, rename) while the run
 * goes on.  The run holds the stage lock throughout.
 */
#include "lifecycle/lc-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

struct ino_link {
    uint64_t src, dst;
    char *dst_path; /* for hard links (any non-directory): first copied name, relative to the copy root */
    bool multi;
};

/* The map is in copy order; an inode is entered once (a hard-linked
 * object's later names are linked to the first copy), a lookup answers
 * the last entry of the inode.  The index makes that one hash probe sequence,
 * not a scan: a scan per hard-linked name made the copy quadratic (an
 * agent's stage of many hard links froze its overlay for minutes during a
 * live checkpoint).  Both are bounded by LC_MAX_ENTRIES. */
struct copy {
    int root_dst;         /* the copy root (for linkat of hard links) */
    struct ino_link *map; /* src inode -> dst inode, in copy order */
    size_t n, cap;
    size_t *index;     /* open addressing on map[].src: 1 + the inode's last entry in map, or 0 (empty) */
    size_t index_cap;  /* 0 or a power of two */
    size_t index_used; /* inodes in index, at most index_cap / 2 */
    size_t objects;
    uint64_t bytes;
    bool cloned;               /* at least one FICLONE succeeded */
    uint64_t written;          /* data bytes written by plain copies (not clones) */
    uint64_t max_write;        /* 0, or -ENOSPC once written would exceed it */
    bool no_fsync;             /* live copy: one syncfs at commit instead of an fsync per directory */
    const atomic_bool *cancel; /* NULL, or: stop with -ECANCELED once true */
    char path[LC_MAX_PATH + 2];
};

static void copy_free(struct copy *c) {
    for (size_t i = 0; i < c->n; i++)
        free(c->map[i].dst_path);
    free(c->map);
    free(c->index);
}

static size_t hash_ino(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* The slot of inode src in the index: the one holding it, else the empty
 * one where it goes.  index_cap > 0. */
static size_t index_slot(const struct copy *c, uint64_t src) {
    size_t mask = c->index_cap - 1, j = hash_ino(src) & mask;
    while (c->index[j] && c->map[c->index[j] - 1].src != src)
        j = (j + 1) & mask;
    return j;
}

/* Make map[i] the entry of its inode (the last one wins). */
static void index_put(struct copy *c, size_t i) {
    size_t j = index_slot(c, c->map[i].src);
    c->index_used += !c->index[j];
    c->index[j] = i + 1;
}

/* Room for one more inode in the index: rebuilt twice as large from the
 * map, in map order (so the last entry of each inode wins again). */
static int index_reserve(struct copy *c) {
    if ((c->index_used + 1) * 2 <= c->index_cap)
        return 0;
    size_t cap = c->index_cap ? 2 * c->index_cap : 512;
    size_t *ni = calloc(cap, sizeof *ni);
    if (!ni)
        return -ENOMEM;
    free(c->index);
    c->index = ni;
    c->index_cap = cap;
    c->index_used = 0;
    for (size_t i = 0; i < c->n; i++)
        index_put(c, i);
    return 0;
}

/* The last map entry of src inode, or NULL. */
static struct ino_link *map_find(const struct copy *c, uint64_t src) {
    if (!c->index_cap)
        return NULL;
    size_t i = c->index[index_slot(c, src)];
    return i ? &c->map[i - 1] : NULL;
}

static int map_add(struct copy *c, uint64_t src, uint64_t dst, bool multi) {
    int r = index_reserve(c);
    if (r < 0)
        return r;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        struct ino_link *nm = realloc(c->map, cap * sizeof *nm);
        if (!nm)
            return -ENOMEM;
        c->map = nm;
        c->cap = cap;
    }
    c->map[c->n] = (struct ino_link){src, dst, NULL, multi};
    if (multi && !(c->map[c->n].dst_path = strdup(c->path)))
        return -ENOMEM;
    index_put(c, c->n++);
    return 0;
}

/* Is xattr name one a copy keeps: user.* (the overlay's metadata, the
 * agent's), POSIX ACLs and file capabilities, which a copy-up carries
 * from the workspace and a plain --stage run by root may set; a copy of
 * user.* alone gave a restored stage or a fork a view without them (a
 * file an ACL let another user write, a setcap'd tool).  Other security.*
 * and trusted.* attributes stay out, as in apply. */
static bool xattr_kept(const char *name, bool *ret_user) {
    *ret_user = strncmp(name, "user.", 5) == 0;
    return *ret_user || strcmp(name, "system.posix_acl_access") == 0 || strcmp(name, "system.posix_acl_default") == 0 ||
           strcmp(name, "security.capability") == 0;
}

/* The kept xattrs copied verbatim (no unescaping: this is stage to stage).
 * An ACL or a capability that this process may not read or set (an
 * ordinary user's file capability; an id its user namespace cannot map)
 * is skipped, as a copy-up skips it (ov_copy_xattrs); user.* never is. */
static int copy_xattrs_raw(int src, int dst) {
    char list[65536];
    ssize_t len = flistxattr(src, list, sizeof list);
    if (len < 0)
        return errno == ENOTSUP ? 0 : -errno;
    for (ssize_t off = 0; off < len; off += (ssize_t)strlen(list + off) + 1) {
        const char *name = list + off;
        bool user;
        if (!xattr_kept(name, &user))
            continue;
        char val[65536];
        ssize_t vl = fgetxattr(src, name, val, sizeof val);
        if (vl < 0) {
            if (errno == ENODATA)
                continue; /* removed since the listing */
            if (!user && (errno == EOVERFLOW || errno == EINVAL))
                continue;
            return -errno; /* not skipped: the copy would lack it (an opaque marker, the agent's) */
        }
        if (fsetxattr(dst, name, val, (size_t)vl, 0) < 0) {
            if (!user && (errno == EPERM || errno == EACCES || errno == ENOTSUP || errno == EOPNOTSUPP ||
                          errno == EINVAL || errno == EOVERFLOW))
                continue;
            return -errno;
        }
    }
    return 0;
}

/* The first size bytes of in to out, holes kept (lc_copy_fd): a sparse
 * file within the stage quota must not become a dense copy (a
 * disk-filling lever for the agent, whose live checkpoints this also
 * serves).  Data bytes count against c->max_write. */
static int copy_data_sparse(struct copy *c, int in, int out, off_t size) {
    uint64_t budget = !c->max_write ? UINT64_MAX : c->written < c->max_write ? c->max_write - c->written : 0;
    uint64_t n = 0;
    int r = lc_copy_fd_cancel(in, out, (uint64_t)size, budget, c->cancel, &n);
    c->written += n;
    return r;
}

static int copy_reg(struct copy *c, int sdir, int ddir, const char *name, const struct stat *st) {
    _cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return -errno;
    _cleanup_close_ int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return -errno;
    if (ioctl(out, FICLONE, in) == 0) {
        c->cloned = true;
    } else {
        int r = copy_data_sparse(c, in, out, st->st_size);
        if (r < 0)
            return r;
    }
    c->bytes += (uint64_t)st->st_size;
    /* the owner before the xattrs: a chown drops a file capability */
    if (geteuid() == 0)
        (void)!fchown(out, st->st_uid, st->st_gid);
    int r = copy_xattrs_raw(in, out);
    if (r < 0)
        return r;
    if (fchmod(out, st->st_mode & 07777) < 0)
        return -errno;
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (futimens(out, ts) < 0)
        return -errno;
    struct stat dst;
    if (fstat(out, &dst) < 0)
        return -errno;
    return map_add(c, (uint64_t)st->st_ino, (uint64_t)dst.st_ino, st->st_nlink > 1);
}

static int copy_dir(struct copy *c, int sdir, int ddir, int depth);

/* Another name of an object copied already (l): a hard link to its first
 * copied name.  The copy may be in a directory another user can write
 * (root forking or checkpointing a user's stage), who could swap a
 * directory of it for a symlink: by its whole path from the copy's root,
 * linkat() followed that symlink and linked any file of the file system
 * into the copy.  The first name's directory is resolved beneath the
 * copy's root without symlinks (openat2, as apply resolves the
 * workspace), the link made from it by one name, and what was linked
 * must be the object copied.  A copy changed under us fails: -ELOOP (a
 * symlink on the way), -EBADMSG (a name gone or another object; not
 * -ENOENT, which fork reports as "no checkpoint", nor -ECANCELED, a live
 * checkpoint's "the run is ending"). */
static int link_again(const struct copy *c, const struct ino_link *l, int ddir, const char *name) {
    const char *first;
    _cleanup_close_ int parent = lc_open_parent(c->root_dst, l->dst_path, &first);
    if (parent < 0)
        return parent == -ENOENT || parent == -ENOTDIR || parent == -EXDEV ? -EBADMSG : parent;
    if (linkat(parent, first, ddir, name, 0) < 0)
        return errno == ENOENT ? -EBADMSG : -errno;
    _cleanup_close_ int fd = openat(ddir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return errno == ENOENT ? -EBADMSG : -errno;
    return (uint64_t)st.st_ino == l->dst ? 0 : -EBADMSG;
}

static int copy_entry(struct copy *c, int sdir, int ddir, const char *name, int depth) {
    if (++c->objects > LC_MAX_ENTRIES)
        return -E2BIG;
    struct stat st;
    if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    size_t len = strlen(c->path), nl = strlen(name);
    if (len + nl + 2 > sizeof c->path)
        return -ENAMETOOLONG;
    if (len)
        c->path[len] = '/';
    memcpy(c->path + len + (len ? 1 : 0), name, nl + 1);
    int r = 0;
    uint64_t made_ino = 0; /* a symlink's or special file's inode in the copy */
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
        struct ino_link *l = map_find(c, (uint64_t)st.st_ino);
        if (l && l->dst_path) {
            r = link_again(c, l, ddir, name);
            goto out;
        }
    }
    switch (st.st_mode & S_IFMT) {
    case S_IFDIR: {
        if (mkdirat(ddir, name, 0700) < 0) {
            r = -errno;
            break;
        }
        _cleanup_close_ int s2 = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int d2 = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s2 < 0 || d2 < 0) {
            r = -errno;
            break;
        }
        r = copy_dir(c, s2, d2, depth + 1);
        if (r == 0)
            r = copy_xattrs_raw(s2, d2);
        if (r == 0 && geteuid() == 0)
            (void)!fchown(d2, st.st_uid, st.st_gid);
        if (r == 0 && fchmod(d2, st.st_mode & 07777) < 0)
            r = -errno;
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        if (r == 0 && futimens(d2, ts) < 0)
            r = -errno;
        struct stat dst;
        if (r == 0 && fstat(d2, &dst) == 0)
            r = map_add(c, (uint64_t)st.st_ino, (uint64_t)dst.st_ino, false);
        break;
    }
    case S_IFREG: r = copy_reg(c, sdir, ddir, name, &st); break;
    case S_IFLNK: {
        _cleanup_free_ char *t = NULL;
        r = lc_readlink_at(sdir, name, &t);
        if (r == 0 && symlinkat(t, ddir, name) < 0)
            r = -errno;
        /* its times through a descriptor of what symlinkat made, as below */
        _cleanup_close_ int lfd = r == 0 ? openat(ddir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
        struct stat lst;
        if (r == 0 && (lfd < 0 || fstat(lfd, &lst) < 0))
            r = -errno;
        else if (r == 0 && (!S_ISLNK(lst.st_mode) || lst.st_nlink != 1))
            r = -EBADMSG;
        if (r == 0) {
            struct timespec ts[2] = {st.st_atim, st.st_mtim};
            utimensat(lfd, "", ts, AT_EMPTY_PATH);
            made_ino = (uint64_t)lst.st_ino;
        }
        break;
    }
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
    case S_IFSOCK: {
        /* whiteouts (0/0) are allowed without CAP_MKNOD; other device nodes
         * need it, and a stage should not hold them anyway */
        if (mknodat(ddir, name, st.st_mode, st.st_rdev) < 0) {
            r = -errno;
            break;
        }
        /* changed through a descriptor of what mknod made, never by name
         * (a name there could have been replaced by a symlink meanwhile,
         * which fchmodat() follows: apply.c, temp_meta) */
        _cleanup_close_ int nfd = openat(ddir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat nst;
        if (nfd < 0 || fstat(nfd, &nst) < 0)
            r = -errno;
        else if ((nst.st_mode & S_IFMT) != (st.st_mode & S_IFMT) || nst.st_nlink != 1)
            r = -EBADMSG; /* not -ECANCELED: a live checkpoint's "the run is ending" */
        else
            made_ino = (uint64_t)nst.st_ino;
        /* the umask took bits away (a fifo made 0777 by the command) */
        if (r == 0)
            r = chmod_fd(nfd, st.st_mode & 07777);
        if (r == 0 && geteuid() == 0)
            (void)!fchownat(nfd, "", st.st_uid, st.st_gid, AT_EMPTY_PATH);
        if (r == 0) {
            struct timespec ts[2] = {st.st_atim, st.st_mtim};
            utimensat(nfd, "", ts, AT_EMPTY_PATH);
        }
        break;
    }
    default: r = -EINVAL;
    }
    /* a symlink, fifo or socket with several names stays one inode in the
     * copy, as a regular file does: copied per name, an agent's 65,000
     * hard links of one symlink with a 4 KiB target (a few blocks of
     * directory entries in the upper) made a checkpoint of 256 MiB and
     * 65,000 inodes, past --stage-max-bytes and the free-space floor,
     * which count what the upper allocates */
    if (r == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        r = map_add(c, (uint64_t)st.st_ino, made_ino, st.st_nlink > 1);
out:
    c->path[len] = '\0';
    return r;
}

static int copy_dir(struct copy *c, int sdir, int ddir, int depth) {
    if (depth > LC_MAX_DEPTH)
        return -ELOOP;
    _cleanup_closedir_ DIR *d = NULL;
    int rd = dup_opendir(sdir, &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        if (c->cancel && atomic_load(c->cancel))
            return -ECANCELED;
        int r = copy_entry(c, sdir, ddir, de->d_name, depth);
        if (r < 0)
            return r;
    }
    if (!c->no_fsync && fsync(ddir) < 0 && errno != EINVAL)
        return -errno;
    return 0;
}

/* Copy a small stage file (journal, meta.json, version) if it exists.
 * Made durable by copy_stage_content's syncfs, like the upper copy. */
static int copy_small(int sdir, int ddir, const char *name, bool required) {
    _cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == ENOENT && !required ? 0 : -errno;
    /* O_EXCL: dst is new; a name put there meanwhile (a fifo would block
     * us) is not ours to open */
    _cleanup_close_ int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return -errno;
    return lc_copy_fd(in, out, UINT64_MAX, UINT64_MAX, NULL);
}

/* Write the origin map of a copy: src upper inode numbers translated,
 * under a header naming the copy's upper (dst_upper) and its file system.
 * A source map of another upper (stage_origin_header_check) gives an
 * empty one, as none does. */
static int write_origin(int sdir, int src_upper, int ddir, int dst_upper, const struct copy *c) {
    _cleanup_free_ char *txt = NULL;
    size_t len = 0;
    int r = read_file_at(sdir, "origin", 256u << 20, &txt, &len);
    /* no map (a stage without copy-ups), or one the review does not read
     * either (EFBIG): the copy gets an empty one.  Any other error fails
     * the copy: an I/O error read as "no map" made a checkpoint, a fork
     * or a restored stage without it, reported as done, whose apply then
     * refused every directory the agent added files to ("the agent never
     * saw it") and whose review lost its renames */
    if (r < 0 && r != -ENOENT && r != -EFBIG)
        return r;
    bool same = false, legacy = false;
    char *nl = r == 0 ? memchr(txt, '\n', len) : NULL;
    if (nl) {
        int h = stage_origin_header_check(src_upper, txt, (size_t)(nl - txt), &legacy);
        if (h < 0)
            return h;
        same = h > 0;
    }
    char hdr[STAGE_ORIGIN_HEADER_MAX];
    int m = stage_origin_header(dst_upper, same && legacy, hdr, sizeof hdr);
    if (m < 0)
        return m;
    _cleanup_fclose_ FILE *f = NULL;
    int fd = openat(ddir, "origin", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -errno;
    }
    fputs(hdr, f);
    /* a last line without its newline (a crash's) is not taken */
    for (char *line = nl ? nl + 1 : NULL; same && line < txt + len;) {
        char *end = memchr(line, '\n', (size_t)(txt + len - line));
        if (!end)
            break;
        uint64_t u, l;
        int k = stage_origin_parse_line(line, (size_t)(end - line), &u, &l);
        line = end + 1;
        const struct ino_link *ln = k > 0 ? map_find(c, u) : NULL; /* the index: not a scan per line */
        if (!ln || !ln->dst)
            continue;
        if (k == STAGE_ORIGIN_FORGET)
            fprintf(f, "%llu -\n", (unsigned long long)ln->dst);
        else
            fprintf(f, "%llu %llu%s\n", (unsigned long long)ln->dst, (unsigned long long)l,
                    k == STAGE_ORIGIN_HIDDEN ? " +" : "");
    }
    if (fflush(f) != 0) /* durable with the rest of the copy (syncfs) */
        return -errno;
    return 0;
}

/* Copy the stage content of src (a stage dir or a checkpoint dir) into the
 * empty directory dst: upper/, journal, origin, meta.json (and version).
 * sync: make it durable before returning; otherwise the caller does (one
 * syncfs of the file system, then fsync of dst/upper and dst). */
static int copy_stage_content(int src, int dst, bool with_version, bool sync, uint64_t max_write,
                              const atomic_bool *cancel, uint64_t *ret_bytes, bool *ret_cloned) {
    struct copy c = {.no_fsync = !sync, .max_write = max_write, .cancel = cancel};
    _cleanup_close_ int su = openat(src, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (su < 0)
        return -errno;
    struct stat st;
    if (fstat(su, &st) < 0)
        return -errno;
    if (mkdirat(dst, "upper", 0700) < 0)
        return -errno;
    _cleanup_close_ int du = openat(dst, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (du < 0)
        return -errno;
    c.root_dst = du;
    /* the upper root too: its origin line (the workspace root's) is kept,
     * or the next run would take it for a fresh stage's and give it the
     * workspace root's owner, mode, times and attributes again */
    struct stat dst_st;
    int r = fstat(du, &dst_st) < 0 ? -errno : map_add(&c, (uint64_t)st.st_ino, (uint64_t)dst_st.st_ino, false);
    if (r == 0)
        r = copy_dir(&c, su, du, 0);
    if (r == 0)
        r = copy_xattrs_raw(su, du);
    if (r == 0 && fchmod(du, st.st_mode & 07777) < 0)
        r = -errno;
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (r == 0 && futimens(du, ts) < 0)
        r = -errno;
    if (r == 0)
        r = copy_small(src, dst, "journal", true);
    if (r == 0)
        r = copy_small(src, dst, "meta.json", true);
    if (r == 0 && with_version)
        r = copy_small(src, dst, "version", true);
    if (r == 0)
        r = write_origin(src, su, dst, du, &c);
    if (r == 0 && sync && syncfs(du) < 0)
        r = -errno;
    if (r == 0 && sync && (fsync(du) < 0 || fsync(dst) < 0))
        r = -errno;
    if (ret_bytes)
        *ret_bytes = c.bytes;
    if (ret_cloned)
        *ret_cloned = c.cloned;
    copy_free(&c);
    return r;
}

bool lc_checkpoint_name_valid(const char *n) {
    size_t l = strlen(n);
    if (l == 0 || l > 64 || n[0] == '.' || n[0] == '-')
        return false;
    return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == l;
}

/* Remove dirfd/name and everything below it, at any depth: .restore-old
 * holds the stage's upper as the agent left it, which the overlay lets
 * nest far deeper than the lifecycle's bound (OV_MAX_DEPTH); removed
 * only down to LC_MAX_DEPTH + 8, it stayed, and every later restore,
 * which removes it first, failed with ELOOP. */
static int remove_dir_at(int dirfd, const char *name) {
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int r = remove_tree_contents(fd, UINT_MAX);
    if (r < 0)
        return r;
    return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* Remove every checkpoints/.tmp-* left by a crash (a killed supervisor
 * leaves the partial copy of the live checkpoint it was taking; removing
 * only the one of the name being taken kept it, hundreds of MiB, for the
 * life of the stage, also once applied, when drop is refused).  The
 * caller excludes every other checkpoint: the stage lock, or the run's one
 * checkpoint thread. */
static int remove_stale_tmps(int cps) {
    _cleanup_closedir_ DIR *d = NULL;
    int r = dup_opendir(cps, &d);
    if (r < 0)
        return r;
    struct dirent *de;
    while ((de = readdir_no_dots(d)))
        if (strncmp(de->d_name, ".tmp-", 5) == 0 && (r = remove_dir_at(cps, de->d_name)) < 0)
            return r;
    return 0;
}

/* Lock a stopped stage: returns the stage dir fd and the lock fd. */
static int lock_stage(const char *stage_path, int *ret_dir, int *ret_lock) {
    _cleanup_close_ int dir = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -errno;
    struct stat st;
    if (fstatat(dir, "version", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -EINVAL;
    int lock = openat(dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0)
        return -errno;
    if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(lock);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    if (fstatat(dir, LC_APPLIED, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
        fstatat(dir, LC_DROPPED, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        close(lock);
        return -EALREADY;
    }
    if (fstatat(dir, LC_APPLY_INTENT, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        close(lock);
        return -EINPROGRESS; /* finish the interrupted apply first */
    }
    *ret_dir = TAKE_FD(dir);
    *ret_lock = lock;
    return 0;
}

static bool is_sealed(int dir) {
    struct stat st;
    return fstatat(dir, "sealed", &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A checkpoint being built: checkpoints/.tmp-NAME until committed. */
struct lc_checkpoint_tx {
    int dir; /* the stage directory (borrowed) */
    int cps; /* STAGE/checkpoints */
    int tmp; /* STAGE/checkpoints/.tmp-NAME */
    char name[72];
    char tmp_name[80];
    uint64_t bytes;
    bool cloned, copied, committed;
};

void lc_checkpoint_tx_free(struct lc_checkpoint_tx *tx) {
    if (!tx)
        return;
    if (tx->tmp >= 0)
        close(tx->tmp);
    if (tx->cps >= 0) {
        if (!tx->committed)
            remove_dir_at(tx->cps, tx->tmp_name);
        close(tx->cps);
    }
    free(tx);
}

int lc_checkpoint_begin(int stage_dir_fd, const char *name, struct lc_checkpoint_tx **ret_tx) {
    if (!lc_checkpoint_name_valid(name))
        return -EINVAL;
    struct lc_checkpoint_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return -ENOMEM;
    tx->dir = stage_dir_fd;
    tx->cps = tx->tmp = -1;
    snprintf(tx->name, sizeof tx->name, "%s", name);
    snprintf(tx->tmp_name, sizeof tx->tmp_name, ".tmp-%s", name);
    int r = 0;
    struct stat st;
    if (mkdirat(stage_dir_fd, LC_CHECKPOINTS, 0700) < 0 && errno != EEXIST)
        r = -errno;
    if (r == 0 && (tx->cps = openat(stage_dir_fd, LC_CHECKPOINTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        r = -errno;
    if (r == 0 && fstatat(tx->cps, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        r = -EEXIST;
    if (r == 0)
        r = remove_stale_tmps(tx->cps); /* left by a crash, whatever their name */
    if (r == 0 && mkdirat(tx->cps, tx->tmp_name, 0700) < 0)
        r = -errno;
    if (r == 0 && (tx->tmp = openat(tx->cps, tx->tmp_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        r = -errno;
    if (r < 0) {
        if (r == -EEXIST) /* not ours to remove */
            tx->committed = true;
        lc_checkpoint_tx_free(tx);
        return r;
    }
    *ret_tx = tx;
    return 0;
}

int lc_checkpoint_copy(struct lc_checkpoint_tx *tx, bool sync, uint64_t max_write, const atomic_bool *cancel) {
    if (tx->copied)
        return -EALREADY;
    tx->copied = true;
    return copy_stage_content(tx->dir, tx->tmp, true, sync, max_write, cancel, &tx->bytes, &tx->cloned);
}

int lc_checkpoint_commit(struct lc_checkpoint_tx *tx, const char *run_id, uint64_t *ret_bytes) {
    if (!tx->copied || tx->committed)
        return -EINVAL;
    /* durable before it is published: the data and metadata of the copy
     * (syncfs covers every file and directory written above), then the
     * directories the rename touches */
    if (syncfs(tx->tmp) < 0 || fsync(tx->tmp) < 0)
        return -errno;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char t[32];
    format_time_utc(&now, t);
    json_t *info = json_pack("{s:i, s:s, s:s, s:I, s:s}", "format", 1, "name", tx->name, "created", t, "bytes",
                             (json_int_t)tx->bytes, "copy", tx->cloned ? "reflink" : "copy");
    if (info && run_id) {
        json_object_set_new(info, "live", json_true());
        json_object_set_new(info, "run", json_string(run_id));
    }
    char *txt = info ? json_dumps(info, JSON_COMPACT) : NULL;
    json_decref(info);
    int r = txt ? write_file_atomic(tx->tmp, "checkpoint.json", txt, strlen(txt), 0600) : -ENOMEM;
    free(txt);
    if (r < 0)
        return r;
    /* the name is checked again: a sealed-stage checkpoint cannot have
     * taken it meanwhile (the stage lock), but renameat would replace an
     * empty directory */
    struct stat st;
    if (fstatat(tx->cps, tx->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return -EEXIST;
    if (renameat(tx->cps, tx->tmp_name, tx->cps, tx->name) < 0)
        return -errno;
    tx->committed = true;
    if (fsync(tx->cps) < 0 || fsync(tx->dir) < 0)
        return -errno;
    if (ret_bytes)
        *ret_bytes = tx->bytes;
    return 0;
}

void lc_checkpoint_default_name(char buf[static 64]) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char t[24];
    format_stamp_utc(&now, t);
    snprintf(buf, 64, "cp-%s", t);
}

int lc_checkpoint(const char *stage_path, const char *name, char **ret_name) {
    char gen[64];
    if (!name) {
        lc_checkpoint_default_name(gen);
        name = gen;
    }
    if (!lc_checkpoint_name_valid(name))
        return -EINVAL;
    _cleanup_close_ int dir = -1, lock = -1;
    int r = lock_stage(stage_path, &dir, &lock);
    if (r < 0)
        return r;
    if (!is_sealed(dir))
        return -ESTALE;
    stage_remove_leftovers(dir);
    struct lc_checkpoint_tx *tx = NULL;
    r = lc_checkpoint_begin(dir, name, &tx);
    if (r == 0)
        r = lc_checkpoint_copy(tx, true, 0, NULL);
    if (r == 0)
        r = lc_checkpoint_commit(tx, NULL, NULL);
    lc_checkpoint_tx_free(tx);
    if (r < 0)
        return r;
    if (ret_name && !(*ret_name = strdup(name)))
        return -ENOMEM;
    return 0;
}

/* Open committed checkpoint NAME of the stage (-ENOENT: none by that name,
 * or one that was never committed). */
static int open_checkpoint(int dir, const char *name) {
    _cleanup_close_ int cp = openat(dir, LC_CHECKPOINTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cp < 0)
        return -errno;
    _cleanup_close_ int src = openat(cp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (src < 0)
        return -errno;
    struct stat st;
    if (fstatat(src, "checkpoint.json", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
        return -ENOENT;
    return TAKE_FD(src);
}

/* The new 'sealed' of a restore: made in dir (.restore) before the copy,
 * MARKER_ROOM bytes; written in place with the time (nothing new to
 * allocate) and renamed into the stage once the swap is done, as the
 * seal publishes its reserved marker (stage.c). */
#define MARKER_ROOM 64
static int reserve_marker(int dir) {
    _cleanup_close_ int fd = openat(dir, "sealed", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    char pad[MARKER_ROOM];
    memset(pad, ' ', sizeof pad - 1);
    pad[sizeof pad - 1] = '\n';
    return write_all(fd, pad, sizeof pad);
}

static int publish_marker(int from, int dir) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char t[32], buf[40];
    format_time_utc(&now, t);
    int m = snprintf(buf, sizeof buf, "%s\n", t);
    _cleanup_close_ int fd = openat(from, "sealed", O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    ssize_t w = pwrite(fd, buf, (size_t)m, 0);
    if (w != m)
        return w < 0 ? -errno : -EIO;
    if (ftruncate(fd, m) < 0 || fsync(fd) < 0)
        return -errno;
    if (renameat(from, "sealed", dir, "sealed") < 0 || fsync(dir) < 0)
        return -errno;
    return 0;
}

int lc_restore(const char *stage_path, const char *name) {
    if (!lc_checkpoint_name_valid(name))
        return -EINVAL;
    _cleanup_close_ int dir = -1, lock = -1;
    int r = lock_stage(stage_path, &dir, &lock);
    if (r < 0)
        return r;
    _cleanup_close_ int src = open_checkpoint(dir, name);
    if (src < 0)
        return src;
    {
        _cleanup_close_ int cps = openat(dir, LC_CHECKPOINTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cps >= 0)
            (void)remove_stale_tmps(cps); /* a crash's leftovers; failing to remove them is no reason to refuse */
    }
    /* and a temp file of 'sealed' a killed restore left beside a sealed
     * stage (an interrupted one's leftovers are this restore's to finish) */
    stage_remove_leftovers(dir);
    /* 1. build the new content beside the stage */
    r = remove_dir_at(dir, ".restore");
    if (r == 0)
        r = remove_dir_at(dir, ".restore-old");
    if (r < 0)
        return r;
    if (mkdirat(dir, ".restore", 0700) < 0)
        return -errno;
    _cleanup_close_ int tmp = openat(dir, ".restore", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp < 0)
        return -errno;
    /* which checkpoint: should the swap below be cut short, the stage
     * reads 'interrupted' and the way out is this restore again, not a
     * drop (lc_restore_interrupted); made durable by the copy's syncfs */
    r = write_file_atomic(tmp, "checkpoint", name, strlen(name), 0600);
    /* Whatever the steps after the copy need on disk is made before it:
     * .restore-old and the new 'sealed' (.restore/sealed, with room for
     * the time, published in step 4 by a rename).  Made once 'sealed' was
     * gone, a file system the copy had filled refused them (ENOSPC, or no
     * inode left): the stage was left interrupted, and the retry, which
     * needs room for a whole copy again beside the one swapped in, failed
     * the same way. */
    if (r == 0 && mkdirat(dir, ".restore-old", 0700) < 0)
        r = -errno;
    if (r == 0)
        r = reserve_marker(tmp);
    if (r == 0)
        r = copy_stage_content(src, tmp, false, true, 0, NULL, NULL, NULL);
    if (r < 0) {
        /* the stage is untouched: no partial copy of the checkpoint kept.
         * An interrupted one keeps .restore/checkpoint: it may be a
         * restore cut short in its swap (what it left removed above), and
         * without that name a retry that failed here left the stage
         * reading as a run that did not finish, the drop suggested, and
         * the restore that completes it unnamed. */
        if (is_sealed(dir)) {
            remove_dir_at(dir, ".restore");
        } else {
            static const char *const copied[] = {"journal", "meta.json", "origin", "sealed"};
            (void)remove_dir_at(tmp, "upper");
            for (size_t i = 0; i < ARRAY_SIZE(copied); i++)
                (void)unlinkat(tmp, copied[i], 0);
        }
        remove_dir_at(dir, ".restore-old");
        return r;
    }
    /* Moving a directory to another parent needs write permission on it
     * (its ".." changes): the agent's modes (a workspace root it made
     * 0555) made the swap below fail with EACCES as an ordinary user once
     * 'sealed' was gone, which read as "the stage is unchanged".  The new
     * upper is made 0700 until it is in place, then given its mode; the old
     * one, discarded anyway, is made 0700 first. */
    _cleanup_close_ int nup = openat(tmp, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat nst;
    if (nup < 0 || fstat(nup, &nst) < 0)
        return -errno;
    if (fchmod(nup, 0700) < 0)
        return -errno;
    /* 2. leave 'sealed' durably: a crash from here on reads 'interrupted' */
    if (unlinkat(dir, "sealed", 0) < 0 && errno != ENOENT)
        return -errno;
    if (fsync(dir) < 0)
        return -errno;
    {
        _cleanup_close_ int oup = openat(dir, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (oup >= 0)
            (void)fchmod(oup, 0700);
    }
    /* 3. swap upper/journal/origin (old ones to .restore-old) */
    _cleanup_close_ int old = openat(dir, ".restore-old", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (old < 0)
        return -errno;
    static const char *const parts[] = {"upper", "journal", "origin"};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
        if (renameat(dir, parts[i], old, parts[i]) < 0 && errno != ENOENT)
            return -errno;
        if (renameat(tmp, parts[i], dir, parts[i]) < 0)
            return -errno;
    }
    if (fchmod(nup, nst.st_mode & 07777) < 0)
        return -errno;
    if (fsync(dir) < 0)
        return -errno;
    /* 4. publish 'sealed' (made in step 1), then clean up */
    r = publish_marker(tmp, dir);
    if (r < 0)
        return r;
    remove_dir_at(dir, ".restore-old");
    remove_dir_at(dir, ".restore");
    if (fsync(dir) < 0)
        return -errno;
    return 0;
}

bool lc_restore_interrupted(const char *stage_path, char **ret_name) {
    *ret_name = NULL;
    _cleanup_close_ int dir = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dir < 0 || is_sealed(dir))
        return false;
    if (fstatat(dir, ".restore-old", &st, AT_SYMLINK_NOFOLLOW) < 0 &&
        fstatat(dir, ".restore", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    _cleanup_close_ int tmp = openat(dir, ".restore", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char *txt = NULL;
    if (tmp >= 0 && read_file_at(tmp, "checkpoint", 128, &txt, NULL) == 0 && lc_checkpoint_name_valid(txt))
        *ret_name = txt;
    else
        free(txt);
    return true;
}

/* The new stage is built under a temporary name beside it, then put in
 * place by one rename: built at its own name, a fork killed during the
 * copy (or a power loss) left a half-copied directory there, which every
 * verb then called "not a pvisor stage directory", a retry refused, and a
 * run refused to use; and its name was not made durable (no fsync of the
 * parent), so a power loss after "Forked" could lose the new stage
 * whole.  The temporary name is fixed per new stage (a digest of its
 * name: a retry finds what a killed fork left, and removes it unless a
 * fork holds its lock). */
/* ".pvisor-fork-" and 16 hex digits of a digest of base: what every
 * temporary directory of a fork to that name starts with (ret: 30 bytes). */
static int fork_tmp_prefix(const char *base, char ret[static 32]) {
    unsigned char sha[32];
    char hex[65];
    int r = lc_sha256_buf(base, strlen(base), sha);
    if (r < 0)
        return r;
    lc_hex(sha, hex);
    snprintf(ret, 32, ".pvisor-fork-%.16s", hex);
    return 0;
}

/* A lockless temporary directory younger than this may be a fork's that
 * has made it and not yet its lock. */
#define FORK_TMP_YOUNG_S 60

/* Remove the temporary directories in parent that forks to the same name
 * (prefix) left when they were cut short: each fork builds in one of its
 * own (prefix, its pid, a random number), so two forks at once never
 * share one, and holds its lock until the rename; one whose lock nobody
 * holds is a dead fork's.  One without a lock yet is left alone while it
 * is young (its fork may be between the mkdir and the lock: removed
 * then, its copy would go on into a half-removed directory, renamed into
 * place as a stage with files missing). */
static void remove_stale_forks(int parent, const char *prefix) {
    _cleanup_closedir_ DIR *dir = NULL;
    if (dup_opendir(parent, &dir) < 0)
        return;
    size_t pl = strlen(prefix);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct dirent *de;
    while ((de = readdir_no_dots(dir))) {
        if (strncmp(de->d_name, prefix, pl) != 0 || (de->d_name[pl] != '\0' && de->d_name[pl] != '-'))
            continue;
        _cleanup_close_ int d = openat(parent, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (d < 0 || fstat(d, &st) < 0)
            continue;
        _cleanup_close_ int lock = openat(d, "lock", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (lock < 0 ? now.tv_sec - st.st_mtim.tv_sec < FORK_TMP_YOUNG_S : flock(lock, LOCK_EX | LOCK_NB) < 0)
            continue; /* a live fork's, or maybe one */
        (void)remove_dir_at(parent, de->d_name);
    }
}

/* Build the new stage's content in dst (empty, ours, locked). */
static int fork_build(int src, int dst) {
    int r = copy_stage_content(src, dst, false, true, 0, NULL, NULL, NULL);
    if (r == 0 && mkdirat(dst, "work", 0700) < 0)
        r = -errno;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char t[32], buf[40];
    format_time_utc(&now, t);
    int m = snprintf(buf, sizeof buf, "%s\n", t);
    if (r == 0)
        r = write_file_atomic(dst, "sealed", buf, (size_t)m, 0600);
    /* version last: its presence makes the directory a stage */
    if (r == 0)
        r = write_file_atomic(dst, "version", "pvisor-stage 1\n", 15, 0600);
    if (r == 0 && fsync(dst) < 0)
        r = -errno;
    return r;
}

int lc_fork(const char *stage_path, const char *checkpoint, const char *new_stage) {
    if (checkpoint && !lc_checkpoint_name_valid(checkpoint))
        return -EINVAL;
    _cleanup_close_ int dir = -1, lock = -1;
    int r = lock_stage(stage_path, &dir, &lock);
    if (r < 0)
        return r;
    _cleanup_close_ int src = -1;
    if (checkpoint) {
        if ((src = open_checkpoint(dir, checkpoint)) < 0)
            return src;
    } else {
        if (!is_sealed(dir))
            return -ESTALE;
        src = fcntl(dir, F_DUPFD_CLOEXEC, 3);
    }
    if (src < 0)
        return -errno;
    /* the new stage's parent and last name ("a/b/" is "a" and "b") */
    _cleanup_free_ char *copy = strdup(new_stage);
    if (!copy)
        return -ENOMEM;
    const char *parent_path, *base;
    if ((r = path_split_last(copy, &parent_path, &base)) < 0)
        return r;
    _cleanup_close_ int parent = open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0)
        return -errno;
    /* the new stage: an absent or empty directory (for root, its owner is
     * kept: the rename below replaces it; its mode is not: a stage is 0700,
     * its upper/ holds the command's files, set-id programs among them) */
    struct stat dst_st;
    bool exists = fstatat(parent, base, &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT)
        return -errno;
    if (exists) {
        if (!S_ISDIR(dst_st.st_mode))
            return -EEXIST;
        _cleanup_closedir_ DIR *d = NULL;
        int rd = opendir_at(parent, base, &d);
        if (rd < 0)
            return rd;
        if (readdir_no_dots(d))
            return -ENOTEMPTY;
    }
    char prefix[32], tmp[64];
    uint32_t rnd = 0;
    if ((r = fork_tmp_prefix(base, prefix)) < 0)
        return r;
    remove_stale_forks(parent, prefix);
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    snprintf(tmp, sizeof tmp, "%s-%d-%08x", prefix, (int)getpid(), rnd);
    if (mkdirat(parent, tmp, 0700) < 0)
        return -errno;
    _cleanup_close_ int dst = openat(parent, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dst < 0) {
        r = -errno;
        (void)remove_dir_at(parent, tmp);
        return r;
    }
    /* hold the new stage's lock while it is built (and renamed) */
    _cleanup_close_ int nlock = openat(dst, "lock", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (nlock < 0 || flock(nlock, LOCK_EX | LOCK_NB) < 0)
        r = -errno;
    if (r == 0)
        r = fork_build(src, dst);
    if (r == 0 && exists && geteuid() == 0 && (dst_st.st_uid != 0 || dst_st.st_gid != 0) &&
        fchown(dst, dst_st.st_uid, dst_st.st_gid) < 0)
        r = -errno;
    /* in place: over the empty directory, or where there was none (one
     * made meanwhile, not empty, is not replaced) */
    if (r == 0 && renameat(parent, tmp, parent, base) < 0)
        r = errno == EBUSY ? -EXDEV : errno == ENOTDIR ? -EEXIST : -errno; /* -EBUSY: a stage in use */
    if (r < 0) {
        (void)remove_dir_at(parent, tmp);
        return r;
    }
    if (fsync(parent) < 0)
        return -errno;
    return 0;
}

static int cmp_created(const void *a, const void *b) {
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "created"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "created"));
    int c = strcmp(x ? x : "", y ? y : "");
    if (c)
        return c;
    /* the same millisecond: by name, not in directory order */
    x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
    y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
    return strcmp(x ? x : "", y ? y : "");
}

json_t *lc_checkpoints_json(const char *stage_path) {
    json_t *arr = json_array();
    _cleanup_close_ int dir = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return arr;
    _cleanup_closedir_ DIR *d = NULL;
    if (opendir_at(dir, LC_CHECKPOINTS, &d) < 0)
        return arr;
    /* every one (a fixed 4,096 stopped the listing there, silently; so
     * did drop's count of what it discards) */
    _cleanup_free_ json_t **items = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!lc_checkpoint_name_valid(de->d_name))
            continue;
        _cleanup_close_ int cd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *txt = NULL;
        if (cd < 0 || read_file_at(cd, "checkpoint.json", 65536, &txt, NULL) < 0)
            continue;
        json_t *o = json_loads(txt, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            json_t **ni = realloc(items, nc * sizeof *ni);
            if (!ni) {
                json_decref(o);
                break;
            }
            items = ni;
            cap = nc;
        }
        json_object_set_new(o, "name", json_string(de->d_name));
        json_object_del(o, "format");
        items[n++] = o;
    }
    if (n)
        qsort(items, n, sizeof *items, cmp_created);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, items[i]);
    return arr;
}
