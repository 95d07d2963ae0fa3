/* ops.c: FUSE handlers for lookup, attributes and file data.
 *
 * Files opened for writing (or with O_TRUNC) are copied up first and then
 * served from the upper copy.  A read-only open of a lower-only file reads
 * the lower file directly; such an fd keeps reading the lower object even
 * after another fd copies the file up (what the page cache already holds may
 * show newer data: like kernel overlayfs, the two are not kept coherent).
 *
 * Accounting: after each write/truncate/fallocate the upper file's
 * allocation change (st_blocks) is added to the stage size; a write first
 * reserves what it writes beyond EOF (ov_quota_reserve; a gap it leaves
 * before that stays a hole, as after a truncate up), a fallocate
 * its length; a write into a hole is held to the file system's reserve
 * (ov_quota_floor) but not to the byte quota, which it may overshoot by
 * its own length.  Concurrent changes of one file through different
 * kernel inodes (its names) are measured one at a time (ov_data_stripe).
 * A file whose last name goes while it is open keeps its blocks counted,
 * and its writes, until the last handle is released (ov_fh_close).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"

void ov_op_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    /* Writeback caching would let the kernel hold dirty data we cannot see
     * for quota and journal ordering; killpriv must stay with the kernel
     * because we write as a privileged user.  The page cache is validated
     * at open instead of on every attribute refresh (ov_pcache_open): with
     * FUSE_CAP_AUTO_INVAL_DATA the kernel drops the cache after each of the
     * command's own writes, since the next getattr shows a new mtime. */
    conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_AUTO_INVAL_DATA);
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
}

static void stamp_of(const struct stat *st, struct ov_stamp *ret) {
    *ret = (struct ov_stamp){.dev = st->st_dev,
                             .ino = st->st_ino,
                             .size = st->st_size,
                             .mtime = st->st_mtim,
                             .ctime = st->st_ctim,
                             .present = true};
}

void ov_stamp_take(int fd, struct ov_stamp *ret) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        *ret = (struct ov_stamp){.present = false};
    else
        stamp_of(&st, ret);
}

bool ov_stamp_eq(const struct ov_stamp *a, const struct ov_stamp *b) {
    if (!a->present || !b->present)
        return a->present == b->present;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
           a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Close-to-open validation of the kernel's page cache.  The cache of a
 * node is kept (FOPEN_KEEP_CACHE) when the file behind it is the same
 * object, with the same size, mtime and ctime, as the node's stamp: taken
 * at its previous open and moved forward by the node's own writes
 * (ov_pcache_follow: the kernel wrote those bytes through this node's page
 * cache) only when nothing else changed the file in between.  Anything else
 * (a host edit of a lower file, a write through another name of a hard
 * link, a copy-up, a first open) drops it.  Files with several names are
 * several kernel inodes here (one node per name), so their cache is never
 * kept.  A descriptor opened earlier may refer to another object (a lower
 * file the host has replaced since; one on the lower file before a copy-up
 * is switched to the copy, ov_fh_to_upper):
 * its reads fill the node's one page cache with that object's bytes
 * (ov_op_read flags them), so the next open drops it. */
bool ov_pcache_open(struct ov *ov, struct ov_node *n, struct ov_fh *fh, bool *ret_stale) {
    struct ov_stamp now;
    struct stat st;
    *ret_stale = false;
    if (fstat(fh->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        atomic_store_explicit(&fh->dev, 0, memory_order_relaxed);
        atomic_store_explicit(&fh->ino, 0, memory_order_relaxed);
        return false;
    }
    stamp_of(&st, &now);
    atomic_store_explicit(&fh->dev, (uint64_t)st.st_dev, memory_order_relaxed);
    atomic_store_explicit(&fh->ino, (uint64_t)st.st_ino, memory_order_relaxed);
    bool foreign = atomic_exchange(&n->pc_foreign_read, false);
    pthread_mutex_lock(&ov->tree_lock);
    bool keep = st.st_nlink == 1 && n->stamped && ov_stamp_eq(&n->stamp[0], &now) && !foreign;
    *ret_stale = n->stamped && !keep;
    n->stamp[0] = now;
    n->stamped = true;
    atomic_store(&n->pc_dev, (uint64_t)st.st_dev);
    atomic_store(&n->pc_ino, (uint64_t)st.st_ino);
    pthread_mutex_unlock(&ov->tree_lock);
    return keep;
}

void ov_pcache_follow(struct ov *ov, struct ov_node *n, const struct stat *before, const struct stat *after) {
    struct ov_stamp b, a;
    stamp_of(before, &b);
    stamp_of(after, &a);
    pthread_mutex_lock(&ov->tree_lock);
    if (n->stamped && after->st_nlink == 1 && ov_stamp_eq(&n->stamp[0], &b))
        n->stamp[0] = a;
    else
        n->stamped = false;
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_pcache_forget(struct ov *ov, struct ov_node *n) {
    pthread_mutex_lock(&ov->tree_lock);
    n->stamped = false;
    pthread_mutex_unlock(&ov->tree_lock);
}

void ov_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *p = ov_node_of(ov, parent);
    struct fuse_entry_param fe;
    if (strlen(name) > 255) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    ov_rdlock(ov);
    struct ov_entry e;
    int r = ov_resolve(ov, p, name, &e);
    if (r >= 0 && !ov_entry_exists(&e))
        r = -ENOENT;
    struct ov_node *n = NULL;
    if (r >= 0)
        n = ov_node_get(ov, p, name, &e, &r);
    if (n) {
        r = ov_fill_entry_resolved(ov, n, &e, &fe);
        if (r < 0)
            ov_node_forget(ov, n, 1);
    }
    ov_unlock(ov);
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_entry(req, &fe);
}

void ov_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    struct ov *ov = ov_from_req(req);
    ov_node_forget(ov, ov_node_of(ov, ino), nlookup);
    fuse_reply_none(req);
}

void ov_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
    struct ov *ov = ov_from_req(req);
    for (size_t i = 0; i < count; i++)
        ov_node_forget(ov, ov_node_of(ov, forgets[i].ino), forgets[i].nlookup);
    fuse_reply_none(req);
}

static struct ov_fh **fh_bucket(struct ov *ov, uint64_t dev, uint64_t ino);

/* A descriptor still open on the object node n last opened (its pc_dev,
 * pc_ino): one on that lower object (0), or one switched to the object's
 * upper copy when another of its names copied it up (1: the copy's link
 * count is the view's).  -ENOENT if there is none. */
static int open_fh_stat(struct ov *ov, struct ov_node *n, struct stat *ret_st) {
    uint64_t dev = atomic_load(&n->pc_dev), ino = atomic_load(&n->pc_ino);
    int r = -ENOENT;
    if (!dev && !ino)
        return r;
    pthread_mutex_lock(&ov->fh_lock);
    for (struct ov_fh *fh = *fh_bucket(ov, dev, ino); fh; fh = fh->lnext)
        if ((uint64_t)fh->lower_dev == dev && (uint64_t)fh->lower_ino == ino && fstat(fh->fd, ret_st) == 0) {
            r = 0;
            break;
        }
    for (struct ov_fh *fh = ov->open_fhs; r < 0 && fh; fh = fh->onext)
        if (fh->switched && (uint64_t)fh->lower_dev == dev && (uint64_t)fh->lower_ino == ino &&
            fstat(fh->fd, ret_st) == 0)
            r = 1;
    pthread_mutex_unlock(&ov->fh_lock);
    return r;
}

void ov_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    struct stat st;
    ov_rdlock(ov);
    int r = ov_node_stat(ov, n, &st);
    if (r < 0 && fi) {
        /* unlinked but open: answer from the handle */
        struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
        if (fstat(fh->fd, &st) == 0) {
            st.st_ino = fh->upper || fh->switched ? ov_upper_ino(ov, st.st_ino) : ov_lower_ino(ov, st.st_ino);
            r = 0;
        }
    } else if (r < 0 && n->type == S_IFREG && !n->lower) {
        /* fstat(2) of a lower file unlinked (or renamed over) while open
         * comes without a handle (the kernel's getattr passes none): answer
         * from a descriptor still open on that lower object, less the name
         * the merged view no longer has; or from one switched to its upper
         * copy (a hard-linked file copied up through another name) */
        int o = open_fh_stat(ov, n, &st);
        if (o == 0) {
            st.st_ino = ov_lower_ino(ov, st.st_ino);
            if (st.st_nlink > 0)
                st.st_nlink--;
        } else if (o == 1)
            st.st_ino = ov_upper_ino(ov, st.st_ino);
        if (o >= 0)
            r = 0;
    }
    double t = r == 0 ? ov_attr_timeout(ov, n, &st) : 0;
    ov_unlock(ov);
    if (r < 0) {
        fuse_reply_err(req, -r);
    } else {
        ov_present_attr(ov, &st);
        fuse_reply_attr(req, &st, t);
    }
}

/* Account the allocation change of fd since before; *ret_after (optional)
 * gets fd's state now.  Returns false if that could not be read. */
static bool account_delta_after(struct ov *ov, const struct stat *before, int fd, struct stat *ret_after) {
    struct stat after;
    if (fstat(fd, &after) < 0)
        return false;
    atomic_fetch_add(&ov->upper_bytes, ((int64_t)after.st_blocks - (int64_t)before->st_blocks) * 512);
    if (ret_after)
        *ret_after = after;
    return true;
}

/* A write's allocation change, as account_delta_after, held to what a
 * write of len bytes can allocate: nothing at least, and at most its own
 * blocks, the two it straddles and OV_WRITE_META_SLACK of extent tree.
 * ext4 moves a delayed allocation's blocks from the inode's reservation
 * to its i_blocks at writeback in two steps that a stat can fall between
 * (the reservation dropped, the blocks not yet added: st_blocks briefly
 * short by what writeback converts), so a measure taken then was off by
 * that much (seen: 3.9 MB counted over 62.5 MB written through four
 * names at once, while the kernel wrote back).  An after below before is
 * such a moment: measured again, a few times. */
#define OV_WRITE_META_SLACK (64 * 1024)
static bool account_write_after(struct ov *ov, const struct stat *before, int fd, size_t len, struct stat *ret_after) {
    struct stat after;
    if (fstat(fd, &after) < 0)
        return false;
    for (int i = 0; i < 3 && after.st_blocks < before->st_blocks; i++) {
        sched_yield();
        if (fstat(fd, &after) < 0)
            return false;
    }
    int64_t d = ((int64_t)after.st_blocks - (int64_t)before->st_blocks) * 512;
    int64_t most = (int64_t)len + 2 * (int64_t)ov->blksize + OV_WRITE_META_SLACK;
    atomic_fetch_add(&ov->upper_bytes, d < 0 ? 0 : d > most ? most : d);
    *ret_after = after;
    return true;
}

static void account_delta(struct ov *ov, const struct stat *before, int fd) {
    account_delta_after(ov, before, fd, NULL);
}

void ov_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    const char *op = (to_set & FUSE_SET_ATTR_SIZE)                        ? "truncate"
                     : (to_set & FUSE_SET_ATTR_MODE)                      ? "chmod"
                     : (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) ? "chown"
                                                                          : "utimens";
    struct stat st;
    double t = 0;
    /* As the host's kernel would (notify_change, do_truncate): a file
     * immutable there takes no change, an append-only one only a utimes
     * to the current time. */
    bool set_times = ((to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW)) ||
                     ((to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW));
    bool append_ok =
        !(to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && !set_times;
    ov_wrlock(ov);
    int r = ov_prot_check(ov, n, append_ok);
    if (r >= 0)
        r = ov_copy_up(ov, n, op);
    int ufd = r < 0 ? r : ov_node_upper(ov, n);
    char pp[40];
    if (ufd < 0) {
        r = ufd;
        goto out;
    }
    if ((r = ov_proc_path(ufd, pp)) < 0)
        goto out;
    if (to_set & FUSE_SET_ATTR_MODE) {
        if (n->type == S_IFLNK) {
            r = -EOPNOTSUPP;
            goto out;
        }
        if (chmod(pp, attr->st_mode & 07777) < 0) {
            r = -errno;
            goto out;
        }
    }
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        uid_t u = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
        gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
        struct stat shown;
        if (fstatat(ufd, "", &shown, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
            r = -errno;
            goto out;
        }
        ov_owner_shown(ov, n, ufd, &shown);
        if (fchownat(ufd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ||
            (r = ov_owner_changed(ov, n, ufd, &shown, u, g)) < 0) {
            r = r < 0 ? r : -errno;
            goto out;
        }
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        struct ov_fh *fh = fi ? (struct ov_fh *)(uintptr_t)fi->fh : NULL;
        _cleanup_close_ int tfd = -1;
        int fd;
        if (fh && fh->upper) {
            fd = fh->fd;
        } else {
            tfd = open(pp, O_WRONLY | O_CLOEXEC);
            if (tfd < 0) {
                r = -errno;
                goto out;
            }
            fd = tfd;
        }
        struct stat before;
        if (fstat(fd, &before) < 0) {
            r = -errno;
            goto out;
        }
        pthread_mutex_t *stripe = ov_data_stripe(ov, (uint64_t)before.st_ino);
        pthread_mutex_lock(stripe);
        if (fstat(fd, &before) < 0 || ftruncate(fd, attr->st_size) < 0)
            r = -errno;
        else
            account_delta(ov, &before, fd);
        pthread_mutex_unlock(stripe);
        if (r < 0)
            goto out;
    }
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
        if (to_set & FUSE_SET_ATTR_ATIME_NOW)
            ts[0].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_ATIME)
            ts[0] = attr->st_atim;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            ts[1].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_MTIME)
            ts[1] = attr->st_mtim;
        int ur;
        if (n->type == S_IFLNK) {
            pthread_mutex_lock(&ov->tree_lock);
            struct ov_node *p = n->hashed ? n->parent : NULL;
            pthread_mutex_unlock(&ov->tree_lock);
            int pfd = p ? ov_node_upper(ov, p) : -ESTALE;
            ur = pfd < 0 ? (errno = -pfd, -1) : utimensat(pfd, n->name, ts, AT_SYMLINK_NOFOLLOW);
        } else {
            ur = utimensat(AT_FDCWD, pp, ts, 0);
        }
        if (ur < 0) {
            r = -errno;
            goto out;
        }
    }
    ov_pcache_forget(ov, n);
    r = ov_node_stat(ov, n, &st);
    t = r == 0 ? ov_attr_timeout(ov, n, &st) : 0;
out:
    if (ufd >= 0 && n->type == S_IFDIR)
        ov_dir_touched(ov, ufd);
    ov_unlock(ov);
    if (r < 0) {
        fuse_reply_err(req, -r);
    } else {
        ov_present_attr(ov, &st);
        fuse_reply_attr(req, &st, t);
    }
}

void ov_op_readlink(fuse_req_t req, fuse_ino_t ino) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    char buf[PATH_MAX + 1];
    ssize_t len = -1;
    int r = 0;
    ov_rdlock(ov);
    int ufd = ov_node_upper(ov, n);
    if (ufd >= 0) {
        len = readlinkat(ufd, "", buf, sizeof buf - 1);
        if (len < 0)
            r = -errno;
    } else {
        int lfd = ov_node_lower_open(ov, n, O_PATH);
        if (lfd < 0) {
            r = lfd;
        } else {
            len = readlinkat(lfd, "", buf, sizeof buf - 1);
            if (len < 0)
                r = -errno;
            close(lfd);
        }
    }
    ov_unlock(ov);
    if (r < 0) {
        fuse_reply_err(req, -r);
        return;
    }
    buf[len] = '\0';
    fuse_reply_readlink(req, buf);
}

/* Open the upper regular file ufd (O_PATH) refers to.  Only regular files
 * are opened through the mount (the kernel opens fifos and devices
 * itself), but a copy-up copies what the lower path holds when it runs,
 * and the host may have put a fifo there: opening that would wait for a
 * peer under the overlay's locks.  An inode's type never changes, and the
 * magic link reopens that very inode: anything but a regular file is
 * -EIO, checked before the open. */
static int open_upper(int ufd, int flags) {
    struct stat st;
    if (fstat(ufd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EIO;
    char pp[40];
    if (ov_proc_path(ufd, pp) < 0)
        return -EOVERFLOW;
    int fd = open(pp, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

void ov_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    /* O_NOFOLLOW: the kernel already resolved the name; our reopen goes
     * through the /proc magic link, which O_NOFOLLOW would refuse. */
    int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT | O_NOFOLLOW);
    /* The kernel passes internal bits (e.g. __FMODE_EXEC, 0x20, for execve)
     * that openat2() rejects with EINVAL: keep only real open(2) flags. */
    flags &= O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_NOATIME | O_LARGEFILE | O_TRUNC | O_DIRECTORY;
    bool wr = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
    struct ov_fh *fh = calloc(1, sizeof(*fh));
    if (!fh) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int r, fd = -1;
    fh->fd = -1;
    fh->flags = flags; /* before the handle is listed (ov_fh_track_lower) */
    if (!ov_fd_room(ov)) {
        free(fh);
        fuse_reply_err(req, EMFILE);
        return;
    }
    if (wr) {
        ov_wrlock(ov);
        /* an append-only file opens for appending only (may_open) */
        r = ov_prot_check(ov, n, (flags & O_APPEND) && !(flags & O_TRUNC));
        if (r >= 0)
            r = ov_copy_up(ov, n, (flags & O_TRUNC) ? "truncate" : "open");
        int ufd = r < 0 ? r : ov_node_upper(ov, n);
        if (ufd < 0) {
            r = ufd;
        } else {
            struct stat before;
            r = fstatat(ufd, "", &before, AT_EMPTY_PATH) < 0 ? -errno : 0;
            /* a truncation measured alone (see ov_data_stripe) */
            pthread_mutex_t *stripe = r >= 0 && (flags & O_TRUNC) ? ov_data_stripe(ov, (uint64_t)before.st_ino) : NULL;
            if (stripe) {
                pthread_mutex_lock(stripe);
                r = fstatat(ufd, "", &before, AT_EMPTY_PATH) < 0 ? -errno : 0;
            }
            if (r >= 0)
                r = fh->fd = fd = open_upper(ufd, flags);
            if (fd >= 0 && (flags & O_TRUNC))
                account_delta(ov, &before, fd);
            if (stripe)
                pthread_mutex_unlock(stripe);
            fh->upper = true;
            if (fd >= 0)
                ov_fh_opened(ov, fh);
        }
        ov_unlock(ov);
    } else {
        ov_rdlock(ov);
        int ufd = ov_node_upper(ov, n);
        if (ufd >= 0) {
            r = fh->fd = fd = open_upper(ufd, flags);
            fh->upper = true;
        } else if (ufd == -ENOENT) {
            _cleanup_free_ char *path = NULL;
            r = ov_node_path(ov, n, &path);
            if (r >= 0 && n->lower)
                r = fd = ov_lower_open(ov, path, flags & ~O_APPEND);
            else if (r == -ENOENT && ov_node_kept_lower(ov, n) >= 0)
                r = fd = ov_node_lower_open(ov, n, flags & ~O_APPEND); /* removed, open (/proc/PID/fd) */
            else if (r >= 0 || r == -ENOENT)
                r = -ESTALE; /* detached since the lookup: the kernel looks the name up again */
            if (fd >= 0) {
                /* still under the read lock: no copy-up can come between */
                fh->fd = fd;
                ov_fh_track_lower(ov, fh);
            }
        } else {
            r = ufd;
        }
        if (fd >= 0)
            ov_fh_opened(ov, fh);
        ov_unlock(ov);
    }
    if (r < 0) {
        free(fh);
        fuse_reply_err(req, -r);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)fh;
    bool stale;
    fi->keep_cache = ov_pcache_open(ov, n, fh, &stale);
    /* The kernel may also hold the old size: refresh attributes now rather
     * than when they time out (attributes only: no page locks taken). */
    if (stale)
        fuse_lowlevel_notify_inval_inode(ov->se, ino, -1, 0);
    fi->direct_io = 0;
    if (fuse_reply_open(req, fi) == -ENOENT)
        ov_fh_close(ov, fh); /* interrupted: the kernel will not release it */
}

void ov_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    /* bytes of another object than the node's latest open: see
     * ov_pcache_open (loads first, so the usual read stores nothing) */
    struct ov_node *n = ov_node_of(ov_from_req(req), ino);
    if ((atomic_load_explicit(&fh->ino, memory_order_relaxed) !=
             atomic_load_explicit(&n->pc_ino, memory_order_relaxed) ||
         atomic_load_explicit(&fh->dev, memory_order_relaxed) !=
             atomic_load_explicit(&n->pc_dev, memory_order_relaxed)) &&
        !atomic_load_explicit(&n->pc_foreign_read, memory_order_relaxed))
        atomic_store(&n->pc_foreign_read, true);
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = fh->fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void ov_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    if (!fh->upper) {
        fuse_reply_err(req, EBADF);
        return;
    }
    size_t len = fuse_buf_size(in);
    struct stat before;
    ssize_t res;
    pthread_rwlock_rdlock(&ov->data_lock);
    pthread_mutex_t *stripe = ov_data_stripe(ov, atomic_load_explicit(&fh->ino, memory_order_relaxed));
    pthread_mutex_lock(stripe);
    atomic_store_explicit(&ov->mutated, true, memory_order_relaxed);
    if (fstat(fh->fd, &before) < 0) {
        res = -errno;
        goto out;
    }
    uint64_t end = (fi->flags & O_APPEND) ? (uint64_t)before.st_size + len : (uint64_t)off + len;
    /* What the write can allocate beyond EOF: its own bytes there and the
     * blocks they straddle, not the gap before them, which stays a hole
     * (a file system without holes cannot hold a stage: no xattrs).  A
     * 1-byte pwrite 100 GiB past the end, the usual way to make a sparse
     * file, was refused with ENOSPC as if it needed 100 GiB. */
    uint64_t from =
        (fi->flags & O_APPEND) || (uint64_t)off < (uint64_t)before.st_size ? (uint64_t)before.st_size : (uint64_t)off;
    uint64_t growth = end > from ? end - from + (from > (uint64_t)before.st_size ? 2 * ov->blksize : 0) : 0;
    res = ov_quota_reserve(ov, growth);
    if (res < 0)
        goto out;
    /* A write inside the file allocates too where it fills a hole (a
     * sparse file costs nothing until then): it must not take the file
     * system into its reserve either.  Checked first against the whole
     * in-file range, and only when that would not fit, whether the range
     * holds a hole at all (SEEK_HOLE; an unwritten extent counts as one). */
    uint64_t in_end = end < (uint64_t)before.st_size ? end : (uint64_t)before.st_size;
    if (!(fi->flags & O_APPEND) && (uint64_t)off < in_end && ov_quota_floor(ov, in_end - (uint64_t)off) < 0) {
        off_t hole = lseek(fh->fd, off, SEEK_HOLE);
        if (hole < 0 || (uint64_t)hole < in_end) {
            uint64_t fill = hole < 0 ? in_end - (uint64_t)off : in_end - (uint64_t)hole;
            if ((res = ov_quota_floor(ov, fill)) < 0) { /* (growth: reserved, counted already) */
                ov_quota_refused(ov, (int)res);
                ov_quota_release(ov, growth);
                goto out;
            }
        }
    }
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(len);
    out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    out.buf[0].fd = fh->fd;
    out.buf[0].pos = off;
    res = fuse_buf_copy(&out, in, 0);
    struct stat after;
    if (account_write_after(ov, &before, fh->fd, res > 0 ? (size_t)res : 0, &after))
        ov_pcache_follow(ov, ov_node_of(ov, ino), &before, &after);
    else
        ov_pcache_forget(ov, ov_node_of(ov, ino));
    ov_quota_release(ov, growth);
out:
    pthread_mutex_unlock(stripe);
    pthread_rwlock_unlock(&ov->data_lock);
    if (res < 0)
        fuse_reply_err(req, (int)-res);
    else
        fuse_reply_write(req, (size_t)res);
}

void ov_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    if (fh)
        ov_fh_close(ov_from_req(req), fh);
    fuse_reply_err(req, 0);
}

static struct ov_fh **fh_bucket(struct ov *ov, uint64_t dev, uint64_t ino) {
    uint64_t h = (ino ^ (dev << 32 | dev >> 32)) * UINT64_C(0x9e3779b97f4a7c15);
    return &ov->lower_fhs[h >> (64 - OV_FH_BUCKET_BITS)];
}

void ov_fh_track_lower(struct ov *ov, struct ov_fh *fh) {
    struct stat st;
    if (fstat(fh->fd, &st) < 0 || !S_ISREG(st.st_mode))
        return; /* never switched */
    fh->lower_dev = st.st_dev;
    fh->lower_ino = st.st_ino;
    pthread_mutex_lock(&ov->fh_lock);
    struct ov_fh **head = fh_bucket(ov, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
    fh->listed = true;
    fh->lnext = *head;
    if (fh->lnext)
        fh->lnext->lpprev = &fh->lnext;
    fh->lpprev = head;
    *head = fh;
    pthread_mutex_unlock(&ov->fh_lock);
}

/* fh_lock held */
static void fh_untrack_locked(struct ov *ov, struct ov_fh *fh) {
    if (fh->listed) {
        *fh->lpprev = fh->lnext;
        if (fh->lnext)
            fh->lnext->lpprev = fh->lpprev;
        fh->listed = false;
    }
    if (fh->opprev) {
        *fh->opprev = fh->onext;
        if (fh->onext)
            fh->onext->opprev = fh->opprev;
        fh->opprev = NULL;
    }
}

void ov_fh_untrack(struct ov *ov, struct ov_fh *fh) {
    pthread_mutex_lock(&ov->fh_lock);
    fh_untrack_locked(ov, fh);
    pthread_mutex_unlock(&ov->fh_lock);
}

void ov_fh_opened(struct ov *ov, struct ov_fh *fh) {
    struct stat st;
    bool nameless = false;
    if (fstat(fh->fd, &st) == 0) {
        atomic_store_explicit(&fh->dev, (uint64_t)st.st_dev, memory_order_relaxed);
        atomic_store_explicit(&fh->ino, (uint64_t)st.st_ino, memory_order_relaxed);
        nameless = fh->upper && S_ISREG(st.st_mode) && st.st_nlink == 0;
    }
    pthread_mutex_lock(&ov->fh_lock);
    /* Opened on a file with no name left (through /proc/PID/fd/N, or on a
     * node removed or renamed over between the kernel's lookup and this
     * open): a holder like the others.  If none is open, its blocks were
     * given back (at the removal, or at the last holder's release): they
     * count again until this one's release, with what it writes. */
    bool pending = false;
    for (struct ov_fh *o = nameless ? ov->open_fhs : NULL; o && !pending; o = o->onext)
        pending = o->orphan && atomic_load_explicit(&o->dev, memory_order_relaxed) == (uint64_t)st.st_dev &&
                  atomic_load_explicit(&o->ino, memory_order_relaxed) == (uint64_t)st.st_ino;
    if (nameless && !pending && fstat(fh->fd, &st) == 0)
        atomic_fetch_add(&ov->upper_bytes, (int64_t)st.st_blocks * 512);
    fh->orphan = nameless;
    fh->onext = ov->open_fhs;
    if (fh->onext)
        fh->onext->opprev = &fh->onext;
    fh->opprev = &ov->open_fhs;
    ov->open_fhs = fh;
    pthread_mutex_unlock(&ov->fh_lock);
}

void ov_fh_close(struct ov *ov, struct ov_fh *fh) {
    bool last = false;
    /* unlisted before close (fh->fd must not be reused while listed), and
     * in the same hold as the look for another holder: of two handles of
     * an orphan released at once, exactly one finds itself the last */
    pthread_mutex_lock(&ov->fh_lock);
    fh_untrack_locked(ov, fh);
    if (fh->orphan) {
        uint64_t dev = atomic_load_explicit(&fh->dev, memory_order_relaxed),
                 ino = atomic_load_explicit(&fh->ino, memory_order_relaxed);
        last = true;
        for (struct ov_fh *o = ov->open_fhs; o && last; o = o->onext)
            last = !(o->orphan && atomic_load_explicit(&o->dev, memory_order_relaxed) == dev &&
                     atomic_load_explicit(&o->ino, memory_order_relaxed) == ino);
    }
    pthread_mutex_unlock(&ov->fh_lock);
    struct stat st;
    /* the last handle of a file with no name left: its blocks go now */
    if (last && fstat(fh->fd, &st) == 0 && st.st_nlink == 0)
        atomic_fetch_sub(&ov->upper_bytes, (int64_t)st.st_blocks * 512);
    close(fh->fd);
    free(fh);
}

bool ov_fh_orphaned(struct ov *ov, const struct stat *st) {
    bool held = false;
    pthread_mutex_lock(&ov->fh_lock);
    for (struct ov_fh *fh = ov->open_fhs; fh; fh = fh->onext) {
        if (atomic_load_explicit(&fh->dev, memory_order_relaxed) == (uint64_t)st->st_dev &&
            atomic_load_explicit(&fh->ino, memory_order_relaxed) == (uint64_t)st->st_ino) {
            fh->orphan = true;
            held = true;
        }
    }
    pthread_mutex_unlock(&ov->fh_lock);
    return held;
}

void ov_fh_free_all(struct ov *ov) {
    for (;;) {
        pthread_mutex_lock(&ov->fh_lock);
        struct ov_fh *fh = ov->open_fhs;
        pthread_mutex_unlock(&ov->fh_lock);
        if (!fh)
            break;
        ov_fh_close(ov, fh); /* an orphan's blocks go (the final statistics) */
    }
}

/* dup3() replaces the file behind fh->fd in one step: a read already
 * under way finishes on the lower file, every later one reads the copy
 * (which the writer that caused the copy-up is about to change). */
void ov_fh_to_upper(struct ov *ov, int ufd, const struct stat *lower) {
    pthread_mutex_lock(&ov->fh_lock);
    struct ov_fh **pp = fh_bucket(ov, (uint64_t)lower->st_dev, (uint64_t)lower->st_ino);
    while (*pp) {
        struct ov_fh *fh = *pp;
        if (fh->lower_dev != lower->st_dev || fh->lower_ino != lower->st_ino) {
            pp = &fh->lnext; /* another file, or one the host replaced since: kept */
            continue;
        }
        *pp = fh->lnext;
        if (fh->lnext)
            fh->lnext->lpprev = pp;
        fh->listed = false;
        int nfd = open_upper(ufd, fh->flags & ~(O_NOATIME | O_APPEND | O_TRUNC));
        struct stat st;
        if (nfd >= 0 && fstat(nfd, &st) == 0 && dup3(nfd, fh->fd, O_CLOEXEC) >= 0) {
            atomic_store_explicit(&fh->dev, (uint64_t)st.st_dev, memory_order_relaxed);
            atomic_store_explicit(&fh->ino, (uint64_t)st.st_ino, memory_order_relaxed);
            fh->switched = true;
        } /* else it keeps reading the lower file, as before this existed */
        if (nfd >= 0)
            close(nfd);
    }
    pthread_mutex_unlock(&ov->fh_lock);
}

void ov_fh_to_lower(struct ov *ov, const struct stat *copy, const char *relpath) {
    _cleanup_close_ int lfd = ov_lower_open(ov, relpath, O_PATH);
    struct stat lst;
    if (lfd < 0 || fstat(lfd, &lst) < 0 || !S_ISREG(lst.st_mode))
        return;
    pthread_mutex_lock(&ov->fh_lock);
    for (struct ov_fh *fh = ov->open_fhs; fh; fh = fh->onext) {
        if (!fh->switched || fh->upper || atomic_load_explicit(&fh->dev, memory_order_relaxed) != copy->st_dev ||
            atomic_load_explicit(&fh->ino, memory_order_relaxed) != copy->st_ino)
            continue;
        if (fh->lower_dev != lst.st_dev || fh->lower_ino != lst.st_ino)
            continue; /* the host replaced it since: it keeps the copy */
        int nfd = open_upper(lfd, fh->flags & ~(O_NOATIME | O_APPEND | O_TRUNC | O_CREAT | O_EXCL));
        if (nfd >= 0 && dup3(nfd, fh->fd, O_CLOEXEC) >= 0) {
            atomic_store_explicit(&fh->dev, (uint64_t)lst.st_dev, memory_order_relaxed);
            atomic_store_explicit(&fh->ino, (uint64_t)lst.st_ino, memory_order_relaxed);
            fh->switched = false;
            if (!fh->listed) {
                struct ov_fh **head = fh_bucket(ov, (uint64_t)lst.st_dev, (uint64_t)lst.st_ino);
                fh->listed = true;
                fh->lnext = *head;
                if (fh->lnext)
                    fh->lnext->lpprev = &fh->lnext;
                fh->lpprev = head;
                *head = fh;
            }
        }
        if (nfd >= 0)
            close(nfd);
    }
    pthread_mutex_unlock(&ov->fh_lock);
}

void ov_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    int r = (datasync ? fdatasync(fh->fd) : fsync(fh->fd)) < 0 ? errno : 0;
    if (r == EINVAL || r == EBADF)
        r = 0; /* read-only lower fd: nothing of ours to sync */
    fuse_reply_err(req, r);
}

void ov_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    if (!fh->upper) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (off < 0 || len <= 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct stat before;
    int r = 0;
    pthread_rwlock_rdlock(&ov->data_lock);
    pthread_mutex_t *stripe = ov_data_stripe(ov, atomic_load_explicit(&fh->ino, memory_order_relaxed));
    pthread_mutex_lock(stripe);
    atomic_store_explicit(&ov->mutated, true, memory_order_relaxed);
    bool have_before = fstat(fh->fd, &before) == 0;
    if (!have_before)
        r = -errno;
    uint64_t charge = 0;
    if (r >= 0 && !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)) &&
        (r = ov_quota_reserve(ov, (uint64_t)len)) >= 0)
        charge = (uint64_t)len;
    if (r >= 0 && fallocate(fh->fd, mode, off, len) < 0)
        r = -errno;
    struct stat after;
    if (have_before && account_delta_after(ov, &before, fh->fd, &after))
        ov_pcache_follow(ov, ov_node_of(ov, ino), &before, &after);
    else
        ov_pcache_forget(ov, ov_node_of(ov, ino));
    ov_quota_release(ov, charge);
    pthread_mutex_unlock(stripe);
    pthread_rwlock_unlock(&ov->data_lock);
    fuse_reply_err(req, -r);
}

void ov_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi) {
    struct ov_fh *fh = (struct ov_fh *)(uintptr_t)fi->fh;
    off_t r = lseek(fh->fd, off, whence);
    if (r < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_lseek(req, r);
}

void ov_op_statfs(fuse_req_t req, fuse_ino_t ino) {
    struct ov *ov = ov_from_req(req);
    struct statvfs sv;
    if (fstatvfs(ov->upper_fd, &sv) < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    if (ov->max_bytes && sv.f_frsize) {
        int64_t used = atomic_load(&ov->upper_bytes);
        uint64_t u = used > 0 ? (uint64_t)used : 0;
        uint64_t total = ov->max_bytes / sv.f_frsize;
        uint64_t avail = u >= ov->max_bytes ? 0 : (ov->max_bytes - u) / sv.f_frsize;
        sv.f_blocks = total;
        if (sv.f_bfree > avail)
            sv.f_bfree = avail;
        if (sv.f_bavail > avail)
            sv.f_bavail = avail;
    }
    /* what the agent may use: the reserve is not for it */
    uint64_t rb = sv.f_frsize ? (ov->reserve_bytes + sv.f_frsize - 1) / sv.f_frsize : 0;
    sv.f_bavail = sv.f_bavail > rb ? sv.f_bavail - rb : 0;
    sv.f_bfree = sv.f_bfree > rb ? sv.f_bfree - rb : 0;
    if (sv.f_files) {
        sv.f_favail = sv.f_favail > ov->reserve_inodes ? sv.f_favail - ov->reserve_inodes : 0;
        sv.f_ffree = sv.f_ffree > ov->reserve_inodes ? sv.f_ffree - ov->reserve_inodes : 0;
    }
    if (ov->max_inodes) {
        int64_t used = atomic_load(&ov->upper_inodes);
        uint64_t u = used > 0 ? (uint64_t)used : 0;
        uint64_t avail = u >= ov->max_inodes ? 0 : ov->max_inodes - u;
        sv.f_files = ov->max_inodes;
        if (sv.f_ffree > avail)
            sv.f_ffree = avail;
        if (sv.f_favail > avail)
            sv.f_favail = avail;
    }
    fuse_reply_statfs(req, &sv);
}
