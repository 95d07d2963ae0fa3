/* copyup.c: copy-up from lower to upper, whiteouts, opaque dirs, the
 * preimage journal hook and the stage quotas.
 *
 * Copy-up is atomic: the object is built completely in STAGE/work (content,
 * owner, xattrs, mode, times), its preimage record is appended to the journal
 * (durable first under strict durability), its origin inode recorded, and
 * only then is it renamed (RENAME_NOREPLACE) into the upper.  A crash leaves
 * at most garbage in work/, which the next open empties.
 *
 * The SHA-256 of a regular file is computed from the very bytes copied;
 * holes (SEEK_DATA/SEEK_HOLE) are hashed as zeros and stay holes.
 *
 * Xattrs: lower user.overlay.* names are stored escaped as
 * user.overlay.overlay.* (the kernel's escaping) so they round-trip.
 *
 * Caller holds ov->ns_lock for writing for everything in this file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#define COPY_CHUNK (1 << 20)

int ov_tmp_name(struct ov *ov, char buf[static 32]) {
    uint64_t seq = atomic_fetch_add(&ov->tmp_seq, 1);
    int m = snprintf(buf, 32, "cu.%d.%" PRIu64, (int)getpid(), seq);
    return (m < 0 || m >= 32) ? -EOVERFLOW : 0;
}

/* ---- quotas and accounting ---- */

/* Bytes below_reserve let through since the stage's file system was last
 * flushed (every overlay of the process: both views' stages are usually on
 * one file system, and counting the other's only flushes sooner). */
static _Atomic uint64_t unflushed_bytes;

/* Bytes reserved (ov_quota_reserve) and not yet given back
 * (ov_quota_release), by every overlay of the process: below_reserve
 * takes them for used.  Each request was checked against the free space
 * alone, which those let through before it had not taken yet: four
 * fallocates of 975 MiB at once, or a copy-up in each view, took the file
 * system past its reserve to the last block (found by a red-team pass). */
static _Atomic uint64_t pending_bytes;

/* The agent never takes the stage's file system below its reserve (so the
 * user's other programs, the seal and the Bundle still find room): checked
 * against what the file system says is available now.  btrfs counts data
 * only once it is written back (ext4, xfs and tmpfs count it at the write):
 * until then its free space is what it was, and an agent filled it to the
 * last block before the reserve showed (the seal, which needs room on a
 * copy-on-write file system, then failed: the stage was left interrupted,
 * not appliable, and the Bundle unwritten; tested).  So what this lets
 * through is added up, and once that could reach the reserve the file
 * system is flushed (syncfs) and asked again: where the count is current
 * that is once in each half of the room left. */
static bool below_reserve(struct ov *ov, uint64_t bytes, uint64_t inodes, uint64_t pending) {
    if (!ov->reserve_bytes && !ov->reserve_inodes)
        return false;
    struct statvfs sv;
    if (fstatvfs(ov->upper_fd, &sv) < 0)
        return false;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    avail = avail > pending ? avail - pending : 0; /* (pending: as the caller counts it) */
    if (bytes && avail < bytes + ov->reserve_bytes)
        return true;
    if (bytes) {
        uint64_t room = avail - bytes - ov->reserve_bytes;
        if (atomic_fetch_add(&unflushed_bytes, bytes) + bytes > room / 2) {
            atomic_store(&unflushed_bytes, 0);
            if (syncfs(ov->upper_fd) == 0 && fstatvfs(ov->upper_fd, &sv) == 0) {
                avail = (uint64_t)sv.f_bavail * sv.f_frsize;
                avail = avail > pending ? avail - pending : 0;
                if (avail < bytes + ov->reserve_bytes)
                    return true;
            }
            atomic_fetch_add(&unflushed_bytes, bytes);
        }
    }
    return inodes && sv.f_files && (uint64_t)sv.f_favail < inodes + ov->reserve_inodes;
}

int ov_quota_refused(struct ov *ov, int r) {
    atomic_fetch_add(&ov->quota_refusals, 1);
    return r;
}

int ov_quota_inode(struct ov *ov) {
    if (ov->max_inodes && (uint64_t)atomic_load(&ov->upper_inodes) + 1 > ov->max_inodes)
        return ov_quota_refused(ov, -EDQUOT);
    if (below_reserve(ov, 0, 1, 0))
        return ov_quota_refused(ov, -ENOSPC);
    return 0;
}

int ov_quota_reserve(struct ov *ov, uint64_t n) {
    /* absurd (fallocate's len) is refused before it is added anywhere, so
     * no counter can overflow */
    if (n > (uint64_t)INT64_MAX / 4)
        return ov_quota_refused(ov, -ENOSPC);
    if (ov->max_bytes) {
        /* n beyond the quota is refused before it is added */
        if (n > ov->max_bytes)
            return ov_quota_refused(ov, -ENOSPC);
        int64_t now = atomic_fetch_add(&ov->upper_bytes, (int64_t)n) + (int64_t)n;
        if (now > 0 && (uint64_t)now > ov->max_bytes) {
            atomic_fetch_sub(&ov->upper_bytes, (int64_t)n);
            return ov_quota_refused(ov, -ENOSPC);
        }
    }
    /* counted before the check, so that of two requests at once the
     * later sees the earlier */
    uint64_t others = atomic_fetch_add(&pending_bytes, n);
    if (n && below_reserve(ov, n, 0, others)) {
        ov_quota_release(ov, n);
        return ov_quota_refused(ov, -ENOSPC);
    }
    return 0;
}

int ov_quota_floor(struct ov *ov, uint64_t n) {
    return n && below_reserve(ov, n, 0, atomic_load(&pending_bytes)) ? -ENOSPC : 0;
}

void ov_quota_release(struct ov *ov, uint64_t n) {
    atomic_fetch_sub(&pending_bytes, n);
    if (ov->max_bytes && n)
        atomic_fetch_sub(&ov->upper_bytes, (int64_t)n);
}

uint64_t ov_entry_charge(const struct ov *ov, mode_t type, uint64_t target_len) {
    uint64_t b = ov->blksize;
    switch (type & S_IFMT) {
    case S_IFDIR: return 2 * b;
    case S_IFLNK: return b + (target_len / b + 1) * b; /* the target and its NUL */
    }
    return b;
}

struct ov_mark ov_mark(int fd) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return (struct ov_mark){.fd = -1};
    return (struct ov_mark){.fd = fd, .before = (int64_t)st.st_blocks * 512};
}

void ov_account_mark(struct ov *ov, struct ov_mark *m) {
    struct stat st;
    if (m->fd >= 0 && fstat(m->fd, &st) == 0)
        atomic_fetch_add(&ov->upper_bytes, (int64_t)st.st_blocks * 512 - m->before);
    m->fd = -1;
}

void ov_account_added(struct ov *ov, const struct stat *st) {
    atomic_fetch_add(&ov->upper_inodes, 1);
    atomic_fetch_add(&ov->upper_bytes, (int64_t)st->st_blocks * 512);
}

void ov_account_removed(struct ov *ov, const struct stat *st) {
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1)
        return;
    atomic_fetch_sub(&ov->upper_inodes, 1);
    /* still open: its blocks go at the last release (ov_fh_close) */
    if (S_ISREG(st->st_mode) && ov_fh_orphaned(ov, st))
        return;
    atomic_fetch_sub(&ov->upper_bytes, (int64_t)st->st_blocks * 512);
}

/* ---- small helpers ---- */

static const char *type_name(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return "reg";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "lnk";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "sock";
    case S_IFCHR: return "chr";
    case S_IFBLK: return "blk";
    }
    return "unknown";
}

/* ---- protection attributes ---- */

/* The statx attributes of fd (O_PATH) as OV_PROT_*. */
static unsigned fd_prot(int fd) {
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, 0, &stx) < 0)
        return 0;
    return ((stx.stx_attributes & STATX_ATTR_IMMUTABLE) ? OV_PROT_IMMUTABLE : 0) |
           ((stx.stx_attributes & STATX_ATTR_APPEND) ? OV_PROT_APPEND : 0) |
           ((stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? OV_PROT_MOUNT : 0);
}

/* The protattr of the upper object fd (O_PATH, not a symlink). */
static unsigned upper_prot(int fd) {
    char pp[40], v[8];
    if (ov_proc_path(fd, pp) < 0)
        return 0;
    ssize_t n = getxattr(pp, OV_XATTR_PROTATTR, v, sizeof v);
    unsigned p = 0;
    for (ssize_t i = 0; i < n; i++)
        p |= v[i] == 'a' ? OV_PROT_APPEND : v[i] == 'i' ? OV_PROT_IMMUTABLE : 0;
    return p;
}

/* Give the copy being built at fd (O_PATH) its lower object's +a/+i. */
static int set_protattr(int fd, unsigned prot) {
    char pp[40], v[3];
    size_t n = 0;
    if (prot & OV_PROT_APPEND)
        v[n++] = 'a';
    if (prot & OV_PROT_IMMUTABLE)
        v[n++] = 'i';
    if (!n)
        return 0;
    if (ov_proc_path(fd, pp) < 0)
        return -EOVERFLOW;
    return setxattr(pp, OV_XATTR_PROTATTR, v, n, 0) < 0 ? -errno : 0;
}

void ov_node_prot(struct ov *ov, struct ov_node *n, unsigned *ret) {
    *ret = 0;
    if (n == ov->root) {
        *ret = fd_prot(ov->lower_fd) & (OV_PROT_IMMUTABLE | OV_PROT_APPEND);
        return;
    }
    int ufd = ov_node_upper(ov, n), kfd;
    if (ufd >= 0) {
        if (n->type != S_IFLNK)
            *ret = upper_prot(ufd);
    } else if (ufd != -ENOENT) {
        return;
    } else if ((kfd = ov_node_kept_lower(ov, n)) >= 0) {
        *ret = fd_prot(kfd) & (OV_PROT_IMMUTABLE | OV_PROT_APPEND);
    } else {
        _cleanup_close_ int lfd = ov_node_lower_open(ov, n, O_PATH);
        if (lfd >= 0)
            *ret = fd_prot(lfd) & (OV_PROT_IMMUTABLE | OV_PROT_APPEND);
    }
}

void ov_entry_prot(struct ov *ov, struct ov_node *parent, const char *name, const struct ov_entry *e, unsigned *ret) {
    *ret = 0;
    if (e->upper && !S_ISLNK(e->ust.st_mode)) {
        int pfd = ov_node_upper(ov, parent);
        _cleanup_close_ int fd = pfd < 0 ? -1 : openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            *ret = upper_prot(fd);
    }
    if (!e->lower) /* the lower object is not part of it */
        return;
    _cleanup_free_ char *path = NULL;
    if (ov_child_path(ov, parent, name, &path) < 0)
        return;
    _cleanup_close_ int lfd = ov_lower_open(ov, path, O_PATH);
    if (lfd < 0)
        return;
    /* a merged directory: its upper copy has the lower's +a/+i (and a
     * stage of an older pvisor none); a mount root is the lower's */
    unsigned l = fd_prot(lfd);
    *ret |= e->upper ? (l & OV_PROT_MOUNT) : l;
}

int ov_prot_check(struct ov *ov, struct ov_node *n, bool append_ok) {
    unsigned p;
    ov_node_prot(ov, n, &p);
    return (p & OV_PROT_IMMUTABLE) || ((p & OV_PROT_APPEND) && !append_ok) ? -EPERM : 0;
}

static void to_hex(const unsigned char d[32], char out[65]) {
    for (unsigned i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
    out[64] = '\0';
}

/* Finish md (SHA-256) as 64 hex digits in out. */
static int finish_digest(struct pv_sha256 *md, char out[65]) {
    unsigned char d[32];
    int r = pv_sha256_end(md, d);
    if (r < 0)
        return r;
    to_hex(d, out);
    return 0;
}

/* The preimage's user xattrs (regular files and directories, whose xattrs
 * apply writes): their digest in out, "" when not taken (another type, a
 * file system without xattrs, ones the server may not read: then apply
 * does not compare them, as before the journal had them).  Apply refuses
 * the path as a conflict when the workspace file's differ: its copy would
 * put back the ones the copy-up read over the user's change. */
static void xattrs_digest(int lfd, const struct stat *lst, char out[65]) {
    out[0] = '\0';
    unsigned char d[32];
    if ((S_ISREG(lst->st_mode) || S_ISDIR(lst->st_mode)) && pv_user_xattrs_sha256(lfd, d) > 0)
        to_hex(d, out);
}

static int reopen_fd(int opath_fd, int flags) {
    char p[40];
    if (ov_proc_path(opath_fd, p) < 0)
        return -EOVERFLOW;
    /* the magic link resolves to exactly the inode fd refers to */
    int fd = open(p, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Has the process whose request this worker serves (ov_current_req) been
 * killed?  The kernel tells the server of a signal to a process waiting
 * for it (FUSE_INTERRUPT), and then, once that signal is a fatal one,
 * still waits for the answer: the copy stops (-EINTR) for a process that
 * has SIGKILL pending (what every fatal signal becomes), not for one
 * merely signalled (SIGCHLD, SIGWINCH: its chmod must not fail for that).
 * Looked at again at most every 100 ms. */
static bool copy_cancelled(void) {
    /* by the request's serial, not its address: libfuse gives the next
     * request of this thread the freed one's memory */
    static _Thread_local unsigned long seen;
    static _Thread_local int64_t next_ms;
    static _Thread_local bool killed;
    fuse_req_t req = ov_current_req;
    if (!req || !fuse_req_interrupted(req))
        return false;
    int64_t now = monotonic_ms();
    if (ov_current_serial == seen && now < next_ms)
        return killed;
    seen = ov_current_serial;
    next_ms = now + 100;
    killed = false;
    const struct fuse_ctx *c = fuse_req_ctx(req);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", c ? (int)c->pid : 0);
    _cleanup_free_ char *st = NULL;
    if (!c || c->pid <= 0 || read_file_at(AT_FDCWD, path, 8192, &st, NULL) < 0)
        return false;
    for (const char *k = st; (k = strstr(k, "Pnd:\t")); k += 5) { /* SigPnd (the thread's), ShdPnd */
        unsigned long long m = strtoull(k + 5, NULL, 16);
        if (m & (1ULL << (SIGKILL - 1)))
            killed = true;
    }
    return killed;
}

/* Feed n zero bytes to md; *zbuf (size *zlen) is allocated on first use. */
static int hash_zeros(struct pv_sha256 *md, uint64_t n, unsigned char **zbuf, size_t *zlen) {
    if (!*zbuf) {
        *zlen = n > COPY_CHUNK ? COPY_CHUNK : (size_t)n;
        *zbuf = calloc(1, *zlen);
        if (!*zbuf)
            return -ENOMEM;
    }
    while (n > 0) {
        size_t c = n > *zlen ? *zlen : (size_t)n;
        if (pv_sha256_update(md, *zbuf, c) < 0)
            return -EIO;
        n -= c;
        if (copy_cancelled())
            return -EINTR;
    }
    return 0;
}

/* Copy [0,size) of in to out (out may be -1: hash only), keeping holes, and
 * feeding every byte (holes as zeros) to md (may be NULL). */
static int copy_data(int in, int out, off_t size, struct pv_sha256 *md) {
    /* sized to the file: most copy-ups are small, and a 1 MiB buffer per
     * copy-up costs more than the copy (page faults, glibc's memset) */
    size_t bsz = size <= 0 ? 4096 : size < COPY_CHUNK ? (size_t)size : COPY_CHUNK;
    _cleanup_free_ unsigned char *buf = malloc(bsz);
    _cleanup_free_ unsigned char *zbuf = NULL;
    size_t zlen = 0;
    if (!buf)
        return -ENOMEM;
    off_t off = 0;
    bool sparse_ok = true;
    while (off < size) {
        off_t data = off, hole = size;
        if (sparse_ok) {
            data = lseek(in, off, SEEK_DATA);
            if (data < 0) {
                if (errno == ENXIO) {
                    data = size; /* only a hole remains */
                } else {
                    sparse_ok = false;
                    data = off;
                }
            }
            if (sparse_ok && data < size) {
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0)
                    hole = size;
            }
        }
        if (data > size)
            data = size;
        if (hole > size)
            hole = size;
        if (md && data > off) {
            int r = hash_zeros(md, (uint64_t)(data - off), &zbuf, &zlen);
            if (r < 0)
                return r;
        }
        for (off = data; off < hole;) {
            size_t want = (size_t)(hole - off > (off_t)bsz ? (off_t)bsz : hole - off);
            ssize_t n = pread(in, buf, want, off);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            if (n == 0) { /* file shrank under us (host edit): stop here */
                size = off;
                hole = off;
                break;
            }
            if (md && pv_sha256_update(md, buf, (size_t)n) < 0)
                return -EIO;
            if (copy_cancelled())
                return -EINTR;
            for (ssize_t w = 0; out >= 0 && w < n;) {
                ssize_t k = pwrite(out, buf + w, (size_t)(n - w), off + w);
                if (k < 0) {
                    if (errno == EINTR)
                        continue;
                    return -errno;
                }
                w += k;
            }
            off += n;
        }
        off = hole > off ? hole : off;
    }
    if (out >= 0 && ftruncate(out, size) < 0)
        return -errno;
    return 0;
}

int ov_copy_xattrs(int src_fd, int dst_fd, bool escape) {
    char sp[40], dp[40];
    if (ov_proc_path(src_fd, sp) < 0 || ov_proc_path(dst_fd, dp) < 0)
        return -EOVERFLOW;
    ssize_t len = listxattr(sp, NULL, 0);
    if (len < 0)
        return (errno == ENOTSUP || errno == EOPNOTSUPP) ? 0 : -errno;
    if (len == 0)
        return 0;
    _cleanup_free_ char *names = malloc((size_t)len);
    _cleanup_free_ char *val = malloc(OV_MAX_XATTR);
    if (!names || !val)
        return -ENOMEM;
    len = listxattr(sp, names, (size_t)len);
    if (len < 0)
        return -errno;
    for (char *nm = names; nm < names + len; nm += strlen(nm) + 1) {
        ssize_t vl = getxattr(sp, nm, val, OV_MAX_XATTR);
        if (vl < 0) {
            if (errno == ENODATA)
                continue;
            /* file capabilities whose root id the server's user namespace
             * cannot map (an ordinary user's run of a setcap'd file): not
             * copied, as a write natively removes them anyway (apply never
             * writes security.* attributes) */
            if ((errno == EOVERFLOW || errno == EINVAL) && strcmp(nm, "security.capability") == 0)
                continue;
            return -errno;
        }
        char dname[XATTR_NAME_MAX + 32];
        if (escape && strncmp(nm, OV_XATTR_PREFIX, strlen(OV_XATTR_PREFIX)) == 0) {
            int m = snprintf(dname, sizeof dname, "%s%s", OV_XATTR_ESCAPED, nm + strlen(OV_XATTR_PREFIX));
            if (m < 0 || (size_t)m >= sizeof dname)
                return -ERANGE;
        } else {
            snprintf(dname, sizeof dname, "%s", nm);
        }
        if (setxattr(dp, dname, val, (size_t)vl, 0) < 0) {
            bool user = strncmp(dname, "user.", 5) == 0;
            if (!user && (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EACCES))
                continue; /* trusted./security.* need privileges we may lack */
            /* A POSIX ACL naming a user or group that the server's user
             * namespace (--safe) cannot map.  The view shows no ACLs (no
             * FUSE_POSIX_ACL) and apply keeps the workspace file's own
             * (carry_acl): the copy goes without it rather than failing
             * every write to the file with EINVAL. */
            if ((errno == EINVAL || errno == EOVERFLOW) &&
                (strncmp(dname, "system.posix_acl_", 17) == 0 || strcmp(dname, "security.capability") == 0))
                continue;
            return -errno;
        }
    }
    return 0;
}

int ov_set_opaque(struct ov *acct, int dir_fd, const char *name) {
    _cleanup_close_ int fd = -1;
    int target = dir_fd;
    if (name && name[0]) {
        fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        target = fd;
    }
    char p[40];
    if (ov_proc_path(target, p) < 0)
        return -EOVERFLOW;
    /* usually kept in the inode; an xattr block when the inode is full */
    struct ov_mark m = ov_mark(acct ? target : -1);
    int r = setxattr(p, OV_XATTR_OPAQUE, "y", 1, 0) < 0 ? -errno : 0;
    if (acct) {
        ov_account_mark(acct, &m);
        ov_dir_changed(acct, target, NULL); /* no longer merged */
    }
    return r;
}

/* ---- journal ---- */

/* Append the preimage record of the lower object at lst (fd lfd, O_PATH),
 * with a digest if given.  Returns >= 0 or -errno. */
static int journal_record(struct ov *ov, const char *relpath, const struct stat *lst, const char *sha, const char *xsha,
                          const char *op) {
    /* Review and apply read no path longer than a path may be (4095
     * bytes): a longer one would make the journal unreadable to them, so
     * such a lower object can be read (ov_lower_open) but not changed. */
    if (strlen(relpath) >= PATH_MAX)
        return -ENAMETOOLONG;
    struct stage_preimage rec = {
        .path = relpath[0] ? relpath : ".",
        .type = type_name(lst->st_mode),
        .mode = lst->st_mode & 07777,
        .size = (uint64_t)lst->st_size,
        .sha256 = sha,
        .ino = lst->st_ino,
        .op = op,
        .xattrs_sha256 = xsha && xsha[0] ? xsha : NULL,
        .changed_during_run = lst->st_ctim.tv_sec > ov->started.tv_sec ||
                              (lst->st_ctim.tv_sec == ov->started.tv_sec && lst->st_ctim.tv_nsec > ov->started.tv_nsec),
        .has_owner = ov->host_ids,
        .uid = lst->st_uid,
        .gid = lst->st_gid,
    };
    return stage_journal_append(ov->stage, &rec);
}

/* Digest of the lower object lfd (O_PATH): content for regular files,
 * target for symlinks.  Returns 1 with out filled, 0 if no digest applies. */
static int digest_lower(int lfd, const struct stat *lst, char out[static 65]) {
    struct pv_sha256 *md = NULL;
    int r = pv_sha256_begin(&md);
    if (r < 0)
        return r;
    if (S_ISREG(lst->st_mode)) {
        int fd = reopen_fd(lfd, O_RDONLY);
        if (fd < 0) {
            r = fd;
            goto out;
        }
        r = copy_data(fd, -1, lst->st_size, md);
        close(fd);
    } else if (S_ISLNK(lst->st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(lfd, "", target, sizeof target);
        if (n < 0) {
            r = -errno;
            goto out;
        }
        r = pv_sha256_update(md, target, (size_t)n);
    } else {
        goto out; /* r = 0: no digest */
    }
    if (r < 0 || (r = finish_digest(md, out)) < 0)
        goto out;
    r = 1;
out:
    pv_sha256_free(md);
    return r;
}

/* A git index is rewritten by every 'git status' on the host, stat data
 * only: the bytes of its preimage (lfd, digest sha, just journaled) are
 * kept in STAGE/preimages/<sha>, so that apply can tell such a refresh
 * from a change of its entries (lifecycle git.c).  Best effort: without
 * the copy, apply calls any change of it a conflict, as before.  A copy
 * that does not hash to sha (the host changed the file meanwhile) is not
 * kept. */
#define KEEP_INDEX_MAX (64 << 20)
static void keep_git_index(struct ov *ov, const char *relpath, int lfd, const struct stat *lst, const char *sha) {
    if (!S_ISREG(lst->st_mode) || lst->st_size > KEEP_INDEX_MAX || !path_is_git_index(relpath) ||
        stage_durability(ov->stage) == STAGE_DURABILITY_NONE)
        return;
    int sfd = stage_dir_fd(ov->stage);
    if (mkdirat(sfd, "preimages", 0700) < 0 && errno != EEXIST)
        return;
    _cleanup_close_ int dfd = openat(sfd, "preimages", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", sha);
    if (dfd < 0 || faccessat(dfd, sha, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return;
    (void)unlinkat(dfd, tmp, 0);
    _cleanup_close_ int in = reopen_fd(lfd, O_RDONLY);
    _cleanup_close_ int out = in < 0 ? -1 : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    struct pv_sha256 *md = NULL;
    char got[65];
    bool same = out >= 0 && pv_sha256_begin(&md) == 0 && copy_data(in, out, lst->st_size, md) == 0 &&
                finish_digest(md, got) == 0 && strcmp(got, sha) == 0;
    pv_sha256_free(md);
    if (!same || renameat(dfd, tmp, dfd, sha) < 0)
        (void)unlinkat(dfd, tmp, 0);
}

int ov_journal_lower(struct ov *ov, const char *relpath, const char *op) {
    if (stage_journal_contains(ov->stage, relpath[0] ? relpath : "."))
        return 0;
    _cleanup_close_ int lfd = ov_lower_open(ov, relpath, O_PATH);
    if (lfd < 0)
        return lfd;
    struct stat lst;
    if (fstatat(lfd, "", &lst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    char sha[65], xsha[65];
    xattrs_digest(lfd, &lst, xsha);
    int r = digest_lower(lfd, &lst, sha);
    if (r < 0)
        return r;
    bool digest = r > 0;
    r = journal_record(ov, relpath, &lst, digest ? sha : NULL, xsha, op);
    if (r > 0 && digest)
        keep_git_index(ov, relpath, lfd, &lst, sha);
    return r;
}

/* ---- copy-up ---- */

/* A directory's mtime changes when its entries change in the view (create,
 * unlink, rename).  A copy-up also adds names to upper directories: the
 * copied object, the other names of a hard-linked file (alias.c), and it
 * drops the whiteouts of a directory made self-contained; none of these
 * changes what the view lists, so the directory gets its mtime back, as on
 * a plain file system, where a chmod or a write of d/f, or the rename of d,
 * leaves d's mtime alone.  (Adding a name does not change the atime.) */
struct timespec ov_dir_mtime(int dfd) {
    struct stat st;
    if (dfd < 0 || fstatat(dfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return (struct timespec){.tv_sec = 0, .tv_nsec = UTIME_OMIT};
    return st.st_mtim;
}

void ov_dir_mtime_restore(int dfd, struct timespec mtime) {
    char p[40];
    if (mtime.tv_nsec == UTIME_OMIT || ov_proc_path(dfd, p) < 0)
        return;
    struct timespec ts[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT}, mtime};
    (void)utimensat(AT_FDCWD, p, ts, 0); /* best effort: a time, not data */
}

/* Copy the lower object at relpath into upper dir pfd as name.  op != NULL:
 * journal its preimage (first mutation).  Returns an O_PATH fd of the new
 * upper object in *ret_fd. */
int ov_copy_up_entry(struct ov *ov, int pfd, const char *relpath, const char *name, const char *op, int *ret_fd) {
    _cleanup_close_ int lfd = ov_lower_open(ov, relpath, O_PATH);
    if (lfd < 0)
        return lfd;
    struct stat lst;
    if (fstatat(lfd, "", &lst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    int r = ov_quota_inode(ov);
    if (r < 0)
        return r;
    /* a directory or a symlink costs blocks too (chmod of every directory
     * of a large tree copies each up) */
    uint64_t charge = ov_entry_charge(ov, lst.st_mode, (uint64_t)lst.st_size);
    if (S_ISREG(lst.st_mode))
        charge += (uint64_t)lst.st_blocks * 512;
    if ((r = ov_quota_reserve(ov, charge)) < 0)
        return r;

    struct timespec pmtime = ov_dir_mtime(pfd); /* before the aliases' links too */
    const char *jpath = relpath[0] ? relpath : ".";
    bool first = op && !stage_journal_contains(ov->stage, jpath); /* its preimage is journaled */
    bool want_digest = first && (S_ISREG(lst.st_mode) || S_ISLNK(lst.st_mode));
    char tmp[32];
    if ((r = ov_tmp_name(ov, tmp)) < 0) {
        ov_quota_release(ov, charge);
        return r;
    }
    struct pv_sha256 *md = NULL;
    char sha[65];
    bool have_sha = false;
    bool created = false;
    _cleanup_close_ int tfd = -1;

    char xsha[65] = "";
    if (first)
        xattrs_digest(lfd, &lst, xsha);
    if (want_digest) {
        if ((r = pv_sha256_begin(&md)) < 0)
            goto fail;
    }
    switch (lst.st_mode & S_IFMT) {
    case S_IFREG: {
        _cleanup_close_ int in = reopen_fd(lfd, O_RDONLY);
        if (in < 0) {
            r = in;
            goto fail;
        }
        _cleanup_close_ int out = openat(ov->work_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0) {
            r = -errno;
            goto fail;
        }
        created = true;
        r = copy_data(in, out, lst.st_size, md);
        if (r < 0)
            goto fail;
        break;
    }
    case S_IFDIR:
        if (mkdirat(ov->work_fd, tmp, 0700) < 0) {
            r = -errno;
            goto fail;
        }
        created = true;
        break;
    case S_IFLNK: {
        char target[PATH_MAX];
        ssize_t n = readlinkat(lfd, "", target, sizeof target - 1);
        if (n < 0) {
            r = -errno;
            goto fail;
        }
        target[n] = '\0';
        if (md && (r = pv_sha256_update(md, target, (size_t)n)) < 0)
            goto fail;
        if (symlinkat(target, ov->work_fd, tmp) < 0) {
            r = -errno;
            goto fail;
        }
        created = true;
        break;
    }
    default:
        if (stage_is_whiteout(&lst)) {
            /* a 0/0 device in the workspace would turn into a whiteout */
            r = -EPERM;
            goto fail;
        }
        if (mknodat(ov->work_fd, tmp, (lst.st_mode & S_IFMT) | 0600, lst.st_rdev) < 0) {
            r = -errno;
            goto fail;
        }
        created = true;
        break;
    }
    if (md) {
        if ((r = finish_digest(md, sha)) < 0)
            goto fail;
        have_sha = true;
    }

    tfd = openat(ov->work_fd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0) {
        r = -errno;
        goto fail;
    }
    /* Owner first (chown clears set-id bits), when permitted. */
    if (fchownat(tfd, "", lst.st_uid, lst.st_gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM &&
        errno != EINVAL) {
        r = -errno;
        goto fail;
    }
    if (!S_ISLNK(lst.st_mode)) {
        r = ov_copy_xattrs(lfd, tfd, true);
        if (r < 0)
            goto fail;
        /* the copy stays append-only or immutable in the view (a file
         * appended to, a directory moved with its parent) */
        if ((r = set_protattr(tfd, fd_prot(lfd) & (OV_PROT_IMMUTABLE | OV_PROT_APPEND))) < 0)
            goto fail;
        if (fchmodat(ov->work_fd, tmp, lst.st_mode & 07777, 0) < 0) {
            r = -errno;
            goto fail;
        }
    }
    struct timespec ts[2] = {lst.st_atim, lst.st_mtim};
    if (utimensat(ov->work_fd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0) {
        r = -errno;
        goto fail;
    }
    struct stat tst;
    if (fstatat(tfd, "", &tst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        r = -errno;
        goto fail;
    }
    /* the owner the chown above could not give (an ordinary user's run)
     * is shown all the same, and the kernel's checks follow it; then the
     * copy's allocation, with that xattr, is measured again */
    if (!S_ISLNK(lst.st_mode) && (tst.st_uid != lst.st_uid || tst.st_gid != lst.st_gid)) {
        if ((r = ov_owner_keep(tfd, &tst, lst.st_uid, lst.st_gid)) < 0)
            goto fail;
        if (fstatat(tfd, "", &tst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
            r = -errno;
            goto fail;
        }
    }
    if (op) {
        r = journal_record(ov, relpath, &lst, have_sha ? sha : NULL, xsha, op);
        if (r < 0)
            goto fail;
        if (r > 0 && have_sha)
            keep_git_index(ov, relpath, lfd, &lst, sha);
    }
    /* The other names of a hard-linked lower file join this copy (alias.c). */
    if (S_ISREG(lst.st_mode) && lst.st_nlink > 1 &&
        (r = ov_alias_link_group(ov, relpath, &lst, have_sha ? sha : NULL, op, tmp)) < 0)
        goto fail;
    /* An upper copy of this lower inode exists already (a name the host
     * linked to the file after another name was copied up, or one the alias
     * walk missed): this one is another file and keeps its own number
     * (the map records it as not shown: review knows it was copied up). */
    if ((r = stage_origin_add(ov->stage, tst.st_ino, lst.st_ino)) < 0)
        goto fail;
    if (S_ISREG(lst.st_mode) && lst.st_nlink > 1)
        ov_shared_add(ov, ov_upper_ino(ov, tst.st_ino)); /* the copy's number in the view */
    struct ov_mark pm = ov_mark(pfd);
    r = renameat2(ov->work_fd, tmp, pfd, name, RENAME_NOREPLACE) < 0 ? -errno : 0;
    ov_account_mark(ov, &pm);
    if (r < 0) {
        stage_origin_forget(ov->stage, tst.st_ino);
        goto fail;
    }
    ov_dir_mtime_restore(pfd, pmtime);
    ov_dir_changed(ov, pfd, name);
    if (ov->undo)
        ov_undo_created(ov, pfd, name, relpath, true, true);
    pv_sha256_free(md);
    ov_account_added(ov, &tst);
    ov_quota_release(ov, charge);
    atomic_fetch_add(&ov->copy_ups, 1);
    if (S_ISREG(lst.st_mode))
        ov_fh_to_upper(ov, tfd, &lst);
    *ret_fd = TAKE_FD(tfd);
    return 0;

fail:
    pv_sha256_free(md);
    if (created)
        unlinkat(ov->work_fd, tmp, S_ISDIR(lst.st_mode) ? AT_REMOVEDIR : 0);
    ov_quota_release(ov, charge);
    return r;
}

/* Directory n, lower-only, lost its name in the view while the kernel held
 * it (the command's cwd, a descriptor; kfd: the lower directory kept,
 * ov_node_keep_lower).  A change of its mode, owner, times or xattrs, which
 * natively goes to the removed directory and shows through the descriptors
 * still open on it, goes to a copy that has no name either: made in work/,
 * removed there at once, and n's upper object from then on.  The stage does
 * not change: nothing is journaled (its removal was) or counted. */
static int copy_up_removed_dir(struct ov *ov, struct ov_node *n, int kfd) {
    struct stat lst;
    if (fstatat(kfd, "", &lst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    char tmp[32];
    int r = ov_tmp_name(ov, tmp);
    if (r < 0)
        return r;
    if (mkdirat(ov->work_fd, tmp, 0700) < 0)
        return -errno;
    _cleanup_close_ int tfd = openat(ov->work_fd, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0)
        r = -errno;
    /* as ov_copy_up_entry: owner first (chown clears set-id bits) */
    if (r >= 0 && fchownat(tfd, "", lst.st_uid, lst.st_gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 &&
        errno != EPERM && errno != EINVAL)
        r = -errno;
    if (r >= 0)
        r = ov_copy_xattrs(kfd, tfd, true);
    struct stat tst;
    if (r >= 0 && fstatat(tfd, "", &tst, AT_EMPTY_PATH) == 0)
        r = ov_owner_keep(tfd, &tst, lst.st_uid, lst.st_gid);
    if (r >= 0 && fchmodat(ov->work_fd, tmp, lst.st_mode & 07777, 0) < 0)
        r = -errno;
    struct timespec ts[2] = {lst.st_atim, lst.st_mtim};
    if (r >= 0 && utimensat(ov->work_fd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0)
        r = -errno;
    if (unlinkat(ov->work_fd, tmp, AT_REMOVEDIR) < 0 && r >= 0)
        r = -errno;
    if (r < 0)
        return r;
    ov_node_set_upper(ov, n, TAKE_FD(tfd));
    ov_node_drop_kept_lower(ov, n);
    return 0;
}

int ov_copy_up(struct ov *ov, struct ov_node *n, const char *op) {
    int ufd = ov_node_upper(ov, n);
    if (ufd >= 0) {
        /* Already in the upper; a merged directory's lower part may still
         * be mutated for the first time (chmod, utimens, ...). */
        if (op && n->lower) {
            _cleanup_free_ char *path = NULL;
            int r = ov_node_path(ov, n, &path);
            if (r < 0)
                return r;
            r = ov_journal_lower(ov, path, op);
            return r < 0 ? r : 0;
        }
        return 0;
    }
    if (ufd != -ENOENT)
        return ufd;
    if (!n->lower) {
        /* detached: a removed lower-only directory can still be changed
         * (a removed file, kept too, cannot: it would take a copy of its
         * data that the stage's accounting does not provide for) */
        int kfd = ov_node_kept_lower(ov, n);
        return kfd >= 0 && n->type == S_IFDIR ? copy_up_removed_dir(ov, n, kfd) : -ESTALE;
    }
    pthread_mutex_lock(&ov->tree_lock);
    struct ov_node *parent = n->hashed ? n->parent : NULL;
    pthread_mutex_unlock(&ov->tree_lock);
    if (!parent)
        return -ESTALE;
    int r = ov_copy_up(ov, parent, NULL);
    if (r < 0)
        return r;
    int pfd = ov_node_upper(ov, parent);
    if (pfd < 0)
        return pfd;
    _cleanup_free_ char *path = NULL;
    if ((r = ov_node_path(ov, n, &path)) < 0)
        return r;
    int fd;
    r = ov_copy_up_entry(ov, pfd, path, n->name, op, &fd);
    if (r < 0)
        return r;
    ov_node_set_upper(ov, n, fd);
    if (n->type != S_IFDIR)
        n->lower = false;
    return 0;
}

/* Mark the upper dir dfd opaque, then drop the whiteouts it holds: they
 * hide nothing any more, and kernel overlayfs lists whiteouts found in an
 * opaque directory as broken entries.  (Opaque first: a crash in between
 * leaves superfluous whiteouts, never resurrected lower entries.) */
static int make_self_contained(struct ov *ov, int dfd, const char *relpath) {
    if (ov->undo)
        ov_undo_opaque(ov, dfd, relpath);
    int r = ov_set_opaque(ov, dfd, NULL);
    if (r < 0)
        return r;
    _cleanup_closedir_ DIR *d = NULL;
    if ((r = opendir_at(dfd, ".", &d)) < 0)
        return r;
    struct ov_mark m = ov_mark(dfd); /* some file systems shrink directories */
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_type != DT_CHR && de->d_type != DT_UNKNOWN)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !stage_is_whiteout(&st))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
            r = -errno;
            break;
        }
        ov_dir_changed(ov, dfd, de->d_name);
        ov_account_removed(ov, &st);
        if (ov->undo)
            ov_undo_whiteout(ov, relpath, de->d_name);
    }
    ov_account_mark(ov, &m);
    return r;
}

static int copy_tree_children(struct ov *ov, int dfd, const char *relpath, const char *op, unsigned depth);

/* Copy every lower-only descendant of the upper directory dfd (merged path
 * relpath) into the upper and make each directory opaque, so the subtree no
 * longer depends on the lower (used before renaming a lower directory).
 * Each directory keeps its mtime: the view lists the same entries. */
static int copy_tree_rec(struct ov *ov, int dfd, const char *relpath, const char *op, unsigned depth) {
    if (depth > 4096)
        return -ELOOP;
    struct timespec mtime = ov_dir_mtime(dfd);
    int r = copy_tree_children(ov, dfd, relpath, op, depth);
    if (r == 0)
        r = make_self_contained(ov, dfd, relpath);
    ov_dir_mtime_restore(dfd, mtime);
    ov_dir_changed(ov, dfd, NULL);
    return r;
}

static int copy_tree_children(struct ov *ov, int dfd, const char *relpath, const char *op, unsigned depth) {
    int lfd = ov_lower_open(ov, relpath, O_RDONLY | O_DIRECTORY);
    if (lfd < 0)
        return lfd == -ENOENT ? 0 : lfd;
    _cleanup_closedir_ DIR *d = NULL;
    int rd = fd_opendir(lfd, &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        _cleanup_free_ char *cpath = NULL;
        if (asprintf(&cpath, "%s%s%s", relpath, relpath[0] ? "/" : "", de->d_name) < 0)
            return -ENOMEM;
        if (ov_masked(ov, cpath) || ov_lower_stage(ov, lfd, de->d_name, 0))
            continue; /* not part of the view: never copied, never merged */
        /* a masked object under another name (ov_masked_id, ov_masked_link) */
        bool ids = ov->n_mask_ids || ov->walk;
        struct stat lst;
        if (ids && fstatat(lfd, de->d_name, &lst, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            return -errno;
        }
        if (ids && (ov_masked_id(ov, &lst) || ov_masked_link(ov, &lst)))
            continue;
        struct stat ust;
        _cleanup_close_ int cfd = -1;
        if (fstatat(dfd, de->d_name, &ust, AT_SYMLINK_NOFOLLOW) == 0) {
            if (stage_is_whiteout(&ust) || !S_ISDIR(ust.st_mode))
                continue;
            int o = ov_is_opaque(dfd, de->d_name);
            if (o < 0)
                return o;
            if (o)
                continue;
            cfd = openat(dfd, de->d_name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
            if (cfd < 0)
                return -errno;
            /* merged subdirectory: its lower part moves too */
            int r = ov_journal_lower(ov, cpath, op);
            if (r < 0)
                return r;
        } else if (errno == ENOENT) {
            int r = ov_copy_up_entry(ov, dfd, cpath, de->d_name, op, &cfd);
            if (r == -ENOENT)
                continue; /* vanished on the host meanwhile */
            if (r < 0)
                return r;
            struct stat cst;
            if (fstatat(cfd, "", &cst, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
            if (!S_ISDIR(cst.st_mode))
                continue;
        } else {
            return -errno;
        }
        int r = copy_tree_rec(ov, cfd, cpath, op, depth + 1);
        if (r < 0)
            return r;
    }
    return 0;
}

int ov_copy_up_tree(struct ov *ov, struct ov_node *n, const char *op) {
    int r = ov_copy_up(ov, n, op);
    if (r < 0)
        return r;
    if (n->type != S_IFDIR || !n->lower)
        return 0;
    _cleanup_free_ char *path = NULL;
    if ((r = ov_node_path(ov, n, &path)) < 0)
        return r;
    /* n and the nodes below keep their lower part until the caller has
     * moved the copy (ov_nodes_clear_lower_below): a rename that fails
     * after this takes the copy back (undo.c), and they show the lower
     * again */
    return copy_tree_rec(ov, ov_node_upper(ov, n), path, op, 0);
}

/* Put a whiteout at dir_fd/name, atomically replacing whatever upper object
 * is there (an upper directory must already be empty); quota_checked: the
 * caller checked the inode quota for it (or it takes the place of one). */
int ov_make_whiteout(struct ov *ov, int dir_fd, const char *name, bool quota_checked) {
    int r = quota_checked ? 0 : ov_quota_inode(ov);
    if (r < 0)
        return r;
    char tmp[32];
    if ((r = ov_tmp_name(ov, tmp)) < 0)
        return r;
    if (mknodat(ov->work_fd, tmp, S_IFCHR | 0000, makedev(0, 0)) < 0)
        return -errno;
    struct stat old;
    bool had = fstatat(dir_fd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (had && S_ISDIR(old.st_mode)) {
        bool swapped = renameat2(ov->work_fd, tmp, dir_fd, name, RENAME_EXCHANGE) == 0;
        if (swapped)
            ov_dir_changed(ov, dir_fd, name);
        if (!swapped || unlinkat(ov->work_fd, tmp, AT_REMOVEDIR) < 0) {
            r = -errno;
            unlinkat(ov->work_fd, tmp, 0);
            return r;
        }
    } else if (renameat(ov->work_fd, tmp, dir_fd, name) < 0) {
        r = -errno;
        unlinkat(ov->work_fd, tmp, 0);
        return r;
    } else {
        ov_dir_changed(ov, dir_fd, name);
    }
    if (had) {
        if (S_ISDIR(old.st_mode) || old.st_nlink <= 1)
            stage_origin_forget(ov->stage, old.st_ino);
        ov_account_removed(ov, &old);
    }
    struct stat wst = {.st_mode = S_IFCHR, .st_blocks = 0};
    ov_account_added(ov, &wst);
    atomic_fetch_add(&ov->whiteouts, 1);
    return 0;
}
