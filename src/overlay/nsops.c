/* nsops.c: namespace-changing FUSE handlers: create, mknod, mkdir, symlink,
 * link, unlink, rmdir, rename.  All run under the ns write lock.
 *
 * Rules (kernel-overlayfs compatible upper):
 *  - A name created where the upper holds a whiteout replaces the whiteout
 *    atomically (built in work/, then renamed over it; a directory made this
 *    way is opaque, so none of the old lower entries show through).
 *  - Removing a name that has a lower object leaves a whiteout; removing an
 *    upper-only name just removes it.
 *  - Renaming an object that involves the lower first copies it up (a lower
 *    directory with its whole subtree, each directory then made opaque), then
 *    renames inside the upper and whiteouts the old name if the lower has one
 *    there.  The agent never sees EXDEV.  A directory moved into a directory
 *    that has a lower part is made opaque.
 *  - Hard links: link() copies the source up and links inside the upper; the
 *    reply reuses the source node, so both names share one kernel inode.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"

struct mk {
    int pfd;       /* parent upper dir (borrowed) */
    bool whiteout; /* replacing a whiteout */
    int dir_fd;    /* where the object is being built (pfd or work) */
    char tmp[32];
    const char *bname; /* name under dir_fd */
    const char *name;  /* the new name in pfd */
    uint64_t charge;   /* bytes reserved (ov_quota_reserve) */
    struct ov_mark pm; /* pfd's allocation before the name was added (mk_mark) */
};

/* Validate and prepare creation of parent/name, reserving charge bytes
 * (ov_entry_charge) of the quota.  On success the caller ends with mk_end. */
static int mk_prepare(struct ov *ov, struct ov_node *parent, const char *name, uint64_t charge, struct mk *mk) {
    int r = ov_check_name(name);
    if (r < 0)
        return r == -EINVAL && strlen(name) > 255 ? -ENAMETOOLONG : r;
    if (ov_sealed_child(ov, parent, name))
        return -EACCES;
    struct ov_entry e;
    if ((r = ov_resolve(ov, parent, name, &e)) < 0)
        return r;
    if (ov_entry_exists(&e))
        return -EEXIST;
    if (parent->type != S_IFDIR)
        return -ENOTDIR;
    /* nothing is added to a directory immutable on the host (may_create) */
    if ((r = ov_prot_check(ov, parent, true)) < 0)
        return r;
    if ((r = ov_copy_up(ov, parent, NULL)) < 0)
        return r;
    if ((r = ov_quota_inode(ov)) < 0)
        return r;
    mk->pfd = ov_node_upper(ov, parent);
    if (mk->pfd < 0)
        return mk->pfd;
    mk->name = name;
    mk->whiteout = e.whiteout;
    if (mk->whiteout) {
        if ((r = ov_tmp_name(ov, mk->tmp)) < 0)
            return r;
        mk->dir_fd = ov->work_fd;
        mk->bname = mk->tmp;
    } else {
        mk->dir_fd = mk->pfd;
        mk->bname = name;
    }
    mk->pm = (struct ov_mark){.fd = -1};
    /* last: nothing above has to give it back */
    if ((r = ov_quota_reserve(ov, charge)) < 0)
        return r;
    mk->charge = charge;
    return 0;
}

/* Just before the new name goes into pfd (after any copy-up into pfd,
 * which accounts itself). */
static void mk_mark(struct mk *mk) {
    mk->pm = ov_mark(mk->pfd);
}

/* Account pfd's growth, tell its listing, and give the reservation back,
 * whatever the outcome (after mk_finish, which accounts the object
 * itself). */
static void mk_end(struct ov *ov, struct mk *mk) {
    ov_account_mark(ov, &mk->pm);
    ov_dir_changed(ov, mk->pfd, mk->name);
    ov_quota_release(ov, mk->charge);
}

/* Owner = requester (group from a set-gid parent), then exact mode. */
static int mk_attrs(struct ov *ov, fuse_req_t req, struct mk *mk, mode_t mode, bool is_lnk) {
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct stat pst;
    gid_t gid = ctx->gid;
    if (fstatat(mk->pfd, "", &pst, AT_EMPTY_PATH) == 0 && (pst.st_mode & S_ISGID)) {
        gid = pst.st_gid;
        /* a directory inherits the set-gid bit too (inode_init_owner): the
         * kernel's mode for mkdir leaves it to the file system, and the
         * exact chmod below would drop what mkdirat() gave it */
        if (S_ISDIR(mode))
            mode |= S_ISGID;
    }
    if (fchownat(mk->dir_fd, mk->bname, ctx->uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM && errno != EINVAL)
        return -errno;
    if (!is_lnk && fchmodat(mk->dir_fd, mk->bname, mode & 07777, 0) < 0)
        return -errno;
    return 0;
}

/* Move a whiteout-replacing object into place; remove the leftovers. */
static int mk_commit(struct ov *ov, struct mk *mk, const char *name, bool is_dir) {
    if (!mk->whiteout)
        return 0;
    if (is_dir) {
        int r = ov_set_opaque(NULL, ov->work_fd, mk->tmp); /* counted with the object (mk_finish) */
        if (r < 0)
            return r;
        if (renameat2(ov->work_fd, mk->tmp, mk->pfd, name, RENAME_EXCHANGE) < 0)
            return -errno;
        unlinkat(ov->work_fd, mk->tmp, 0); /* the old whiteout */
    } else if (renameat(ov->work_fd, mk->tmp, mk->pfd, name) < 0) {
        return -errno;
    }
    struct stat wst = {.st_mode = S_IFCHR};
    ov_account_removed(ov, &wst);
    return 0;
}

static void mk_abort(struct ov *ov, struct mk *mk, bool is_dir) {
    unlinkat(mk->dir_fd, mk->bname, is_dir ? AT_REMOVEDIR : 0);
}

/* Register the new upper object parent/name as a node and fill the entry. */
static int mk_finish(struct ov *ov, struct ov_node *parent, const char *name, int pfd, struct fuse_entry_param *fe) {
    int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct ov_entry e = {.upper = true};
    if (fstatat(fd, "", &e.ust, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    ov_account_added(ov, &e.ust);
    int r = 0;
    struct ov_node *n = ov_node_get(ov, parent, name, &e, &r);
    if (!n) {
        close(fd);
        return r;
    }
    ov_node_set_upper(ov, n, fd);
    n->lower = false;
    pthread_mutex_lock(&ov->tree_lock);
    n->owner_state = 1; /* new: it holds no OV_XATTR_OWNER (no read for it) */
    pthread_mutex_unlock(&ov->tree_lock);
    r = ov_fill_entry(ov, n, fe);
    if (r < 0)
        ov_node_forget(ov, n, 1);
    return r;
}

/* The object made at mk's temp name: attributes, the journal, its name,
 * the reply's entry; undone on failure. */
static int mk_complete(struct ov *ov, fuse_req_t req, struct mk *mk, struct ov_node *parent, const char *name,
                       mode_t mode, bool is_lnk, bool is_dir, struct fuse_entry_param *fe) {
    int r = mk_attrs(ov, req, mk, mode, is_lnk);
    if (r >= 0)
        r = mk_commit(ov, mk, name, is_dir);
    if (r < 0) {
        mk_abort(ov, mk, is_dir);
        return r;
    }
    return mk_finish(ov, parent, name, mk->pfd, fe);
}

static void reply_entry_or_err(fuse_req_t req, int r, struct fuse_entry_param *fe) {
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_entry(req, fe);
}

static int do_mknod_like(struct ov *ov, fuse_req_t req, struct ov_node *p, const char *name, mode_t mode, dev_t rdev,
                         const char *link, struct fuse_entry_param *fe) {
    struct mk mk;
    if (link && ov_seals_below(ov, p, name))
        return -EACCES; /* a symlink there would lead the sealed path elsewhere */
    int r = mk_prepare(ov, p, name, ov_entry_charge(ov, mode, link ? strlen(link) : 0), &mk);
    if (r < 0)
        return r;
    bool is_dir = S_ISDIR(mode), is_lnk = link != NULL;
    mk_mark(&mk);
    if (is_lnk)
        r = symlinkat(link, mk.dir_fd, mk.bname);
    else if (is_dir)
        r = mkdirat(mk.dir_fd, mk.bname, 0700);
    else
        r = mknodat(mk.dir_fd, mk.bname, (mode & S_IFMT) | 0600, rdev);
    if (r < 0) {
        r = -errno;
    } else {
        r = mk_complete(ov, req, &mk, p, name, mode, is_lnk, is_dir, fe);
    }
    mk_end(ov, &mk);
    return r;
}

void ov_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
    struct ov *ov = ov_from_req(req);
    struct fuse_entry_param fe;
    if (S_ISDIR(mode) || S_ISLNK(mode)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    /* Device nodes would be real devices in the stage directory on the
     * host (the view itself is nodev) and could be applied later: refused. */
    if (S_ISCHR(mode) || S_ISBLK(mode)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode))
        mode |= S_IFREG;
    ov_wrlock(ov);
    int r = do_mknod_like(ov, req, ov_node_of(ov, parent), name, mode, rdev, NULL, &fe);
    ov_unlock(ov);
    reply_entry_or_err(req, r, &fe);
}

void ov_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    struct ov *ov = ov_from_req(req);
    struct fuse_entry_param fe;
    ov_wrlock(ov);
    int r = do_mknod_like(ov, req, ov_node_of(ov, parent), name, S_IFDIR | (mode & 07777), 0, NULL, &fe);
    ov_unlock(ov);
    reply_entry_or_err(req, r, &fe);
}

void ov_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
    struct ov *ov = ov_from_req(req);
    struct fuse_entry_param fe;
    ov_wrlock(ov);
    int r = do_mknod_like(ov, req, ov_node_of(ov, parent), name, S_IFLNK | 0777, 0, link, &fe);
    ov_unlock(ov);
    reply_entry_or_err(req, r, &fe);
}

void ov_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *p = ov_node_of(ov, parent);
    struct fuse_entry_param fe;
    struct ov_fh *fh = calloc(1, sizeof(*fh));
    if (!fh || !ov_fd_room(ov)) { /* before anything is created */
        free(fh);
        fuse_reply_err(req, fh ? EMFILE : ENOMEM);
        return;
    }
    int flags = (fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT)) | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
    struct mk mk;
    int fd = -1;
    ov_wrlock(ov);
    int r = mk_prepare(ov, p, name, ov_entry_charge(ov, S_IFREG, 0), &mk);
    bool prepared = r >= 0;
    if (r >= 0) {
        mk_mark(&mk);
        fd = openat(mk.dir_fd, mk.bname, flags, 0600);
        if (fd < 0)
            r = -errno;
    }
    if (r >= 0) {
        r = mk_complete(ov, req, &mk, p, name, mode, false, false, &fe);
    }
    if (r >= 0) {
        fh->fd = fd;
        fh->upper = true;
        ov_fh_opened(ov, fh);
    }
    if (prepared)
        mk_end(ov, &mk);
    ov_unlock(ov);
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        free(fh);
        fuse_reply_err(req, -r);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)fh;
    bool stale; /* a new kernel inode: nothing cached yet; record the file */
    ov_pcache_open(ov, ov_node_of(ov, fe.ino), fh, &stale);
    fi->keep_cache = 0;
    if (fuse_reply_create(req, &fe, fi) == -ENOENT)
        ov_fh_close(ov, fh);
}

void ov_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino), *np = ov_node_of(ov, newparent);
    struct fuse_entry_param fe;
    struct mk mk;
    ov_wrlock(ov);
    int r = n->type == S_IFDIR ? -EPERM : 0;
    /* link() of a symlink makes another symlink: not at a sealed path's parent */
    if (r >= 0 && n->type == S_IFLNK && ov_seals_below(ov, np, newname))
        r = -EACCES;
    bool prepared = false;
    if (r >= 0)
        prepared = (r = mk_prepare(ov, np, newname, ov_entry_charge(ov, S_IFREG, 0), &mk)) >= 0;
    /* may_linkat: not to an immutable or append-only file */
    if (r >= 0)
        r = ov_prot_check(ov, n, false);
    if (r >= 0)
        r = ov_copy_up(ov, n, "link");
    int ufd = r < 0 ? r : ov_node_upper(ov, n);
    if (r >= 0 && ufd < 0)
        r = ufd;
    if (r >= 0) {
        char pp[40];
        ov_proc_path(ufd, pp);
        mk_mark(&mk);
        if (linkat(AT_FDCWD, pp, mk.dir_fd, mk.bname, AT_SYMLINK_FOLLOW) < 0)
            r = -errno;
        else if ((r = mk_commit(ov, &mk, newname, false)) < 0)
            mk_abort(ov, &mk, false);
    }
    if (r >= 0) {
        /* the file now has another name, which a later lookup may give
         * its own node and kernel inode (ov_pcache_open) */
        ov_pcache_forget(ov, n);
        ov_node_ref_kernel(ov, n);
        r = ov_fill_entry(ov, n, &fe);
        if (r < 0)
            ov_node_forget(ov, n, 1);
    }
    if (prepared)
        mk_end(ov, &mk);
    ov_unlock(ov);
    reply_entry_or_err(req, r, &fe);
}

/* Remove the upper object pfd/name for good (no lower behind it). */
static int remove_upper(struct ov *ov, int pfd, const char *name, bool dir) {
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (unlinkat(pfd, name, dir ? AT_REMOVEDIR : 0) < 0)
        return -errno;
    ov_dir_changed(ov, pfd, name);
    if (dir || st.st_nlink <= 1)
        stage_origin_forget(ov->stage, st.st_ino);
    ov_account_removed(ov, &st);
    return 0;
}

/* may_delete, for the host's attributes the kernel does not see in the
 * view: the name e at parent/name may not go (unlink, rmdir, a rename from
 * or over it) when parent is immutable or append-only, or the object itself
 * is (-EPERM, before the type checks, as natively); nor when it is a mount
 * root in the workspace (-EBUSY; the caller checks that after the types). */
static int may_delete(struct ov *ov, struct ov_node *parent, const char *name, const struct ov_entry *e,
                      unsigned *ret_prot) {
    unsigned pp;
    ov_node_prot(ov, parent, &pp);
    ov_entry_prot(ov, parent, name, e, ret_prot);
    if (pp || (*ret_prot & (OV_PROT_IMMUTABLE | OV_PROT_APPEND)))
        return -EPERM;
    return 0;
}

static int do_remove(struct ov *ov, struct ov_node *p, const char *name, bool dir) {
    struct ov_entry e;
    int r = ov_resolve(ov, p, name, &e);
    if (r < 0)
        return r;
    if (!ov_entry_exists(&e))
        return -ENOENT;
    unsigned prot;
    if ((r = may_delete(ov, p, name, &e, &prot)) < 0)
        return r;
    mode_t m = e.upper ? e.ust.st_mode : e.lst.st_mode;
    if (dir && !S_ISDIR(m))
        return -ENOTDIR;
    if (!dir && S_ISDIR(m))
        return -EISDIR;
    if (prot & OV_PROT_MOUNT)
        return -EBUSY; /* a file system is mounted on it */
    struct ov_node *n = NULL;
    _cleanup_free_ char *path = NULL;
    uint64_t charge = 0; /* reserved */
    if (dir && ov_sealed_lower_below(ov, p, name, true))
        return -ENOTEMPTY; /* it holds what the view seals */
    if (dir) {
        /* a node (temporary reference) to list the merged directory */
        n = ov_node_get(ov, p, name, &e, &r);
        if (!n)
            return r;
        r = ov_dir_is_empty(ov, n);
        if (r == 0)
            r = -ENOTEMPTY;
        if (r < 0)
            goto out;
    }
    if ((r = ov_child_path(ov, p, name, &path)) < 0)
        goto out;
    if (!dir && e.lower && S_ISREG(e.lst.st_mode) && e.lst.st_nlink > 1) {
        /* one name of a hard-linked lower file goes away: the others must
         * become one upper file first (alias.c), then this name is removed */
        struct ov_node *an = ov_node_get(ov, p, name, &e, &r);
        if (!an)
            goto out;
        r = ov_copy_up(ov, an, "unlink");
        ov_node_forget(ov, an, 1);
        if (r < 0 || (r = ov_resolve(ov, p, name, &e)) < 0)
            goto out;
    }
    /* A whiteout for a lower-only name is a new name in the upper: past
     * the quota that fails with ENOSPC, before anything is journaled. */
    if (e.lower_present && !e.upper) {
        uint64_t want = ov_entry_charge(ov, S_IFCHR, 0);
        if ((r = ov_quota_reserve(ov, want)) < 0)
            goto out;
        charge = want;
    }
    if (e.lower_present && (r = ov_journal_lower(ov, path, dir ? "rmdir" : "unlink")) < 0)
        goto out;
    if ((r = ov_copy_up(ov, p, NULL)) < 0)
        goto out;
    int pfd = ov_node_upper(ov, p);
    if (pfd < 0) {
        r = pfd;
        goto out;
    }
    if (e.upper && dir && (r = ov_upper_clear_whiteouts(ov, pfd, name, NULL)) < 0)
        goto out;
    if (e.upper)
        ov_node_keep_upper(ov, p, pfd, name);
    struct ov_mark pm = ov_mark(pfd);
    if (e.lower_present)
        r = ov_make_whiteout(ov, pfd, name, false);
    else
        r = remove_upper(ov, pfd, name, dir);
    ov_account_mark(ov, &pm);
    if (r >= 0 && !e.upper)
        ov_node_keep_lower(ov, p, name, path);
    if (r >= 0)
        ov_node_detach_at(ov, p, name);
out:
    ov_quota_release(ov, charge);
    if (n)
        ov_node_forget(ov, n, 1);
    return r < 0 ? r : 0;
}

void ov_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct ov *ov = ov_from_req(req);
    ov_wrlock(ov);
    int r = do_remove(ov, ov_node_of(ov, parent), name, false);
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}

void ov_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct ov *ov = ov_from_req(req);
    ov_wrlock(ov);
    int r = do_remove(ov, ov_node_of(ov, parent), name, true);
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}

/* ov_set_opaque of the upper directory pfd/name (of parent node p), logged
 * for the undo */
static int set_opaque_logged(struct ov *ov, struct ov_node *p, int pfd, const char *name) {
    _cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    _cleanup_free_ char *path = NULL;
    int r = ov_child_path(ov, p, name, &path);
    if (r < 0)
        return r;
    ov_undo_opaque(ov, fd, path);
    return ov_set_opaque(ov, fd, NULL);
}

static int do_rename(struct ov *ov, struct ov_node *p, const char *name, struct ov_node *np, const char *newname,
                     unsigned flags) {
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
        return -EINVAL;
    if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
        return -EINVAL;
    int r = ov_check_name(newname);
    if (r < 0)
        return strlen(newname) > 255 ? -ENAMETOOLONG : r;
    if (ov_sealed_child(ov, np, newname))
        return -EACCES;
    bool exch = flags & RENAME_EXCHANGE;
    struct ov_entry se, de;
    if ((r = ov_resolve(ov, p, name, &se)) < 0 || (r = ov_resolve(ov, np, newname, &de)) < 0)
        return r;
    if (!ov_entry_exists(&se))
        return -ENOENT;
    bool dexists = ov_entry_exists(&de);
    if (exch && !dexists)
        return -ENOENT;
    if ((flags & RENAME_NOREPLACE) && dexists)
        return -EEXIST;
    if (p == np && strcmp(name, newname) == 0)
        return 0;
    /* vfs_rename: the source goes from its directory, the destination's
     * name is created or, when it exists, goes too (both, exchanging) */
    unsigned sprot, dprot = 0, npprot;
    if ((r = may_delete(ov, p, name, &se, &sprot)) < 0)
        return r;
    if (dexists && (r = may_delete(ov, np, newname, &de, &dprot)) < 0)
        return r;
    ov_node_prot(ov, np, &npprot);
    if (npprot & OV_PROT_IMMUTABLE)
        return -EPERM;
    mode_t sm = se.upper ? se.ust.st_mode : se.lst.st_mode;
    mode_t dm = de.upper ? de.ust.st_mode : de.lst.st_mode;
    /* Nothing may reach a sealed path: not as what is moved there, nor
     * inside a directory or through a symlink moved to a parent of it. */
    if (((S_ISDIR(sm) || S_ISLNK(sm)) && ov_seals_below(ov, np, newname)) ||
        (exch && (ov_sealed_child(ov, p, name) || ((S_ISDIR(dm) || S_ISLNK(dm)) && ov_seals_below(ov, p, name)))))
        return -EACCES;
    /* A directory holding what the view seals is not empty, and does not
     * move as a whole (EXDEV: mv copies what it sees instead). */
    if (dexists && !exch && S_ISDIR(dm) && ov_sealed_lower_below(ov, np, newname, true))
        return -ENOTEMPTY;
    if ((S_ISDIR(sm) && ov_sealed_lower_below(ov, p, name, false)) ||
        (exch && S_ISDIR(dm) && ov_sealed_lower_below(ov, np, newname, false)))
        return -EXDEV;
    if (dexists && !exch) {
        if (S_ISDIR(sm) && !S_ISDIR(dm))
            return -ENOTDIR;
        if (!S_ISDIR(sm) && S_ISDIR(dm))
            return -EISDIR;
        /* two names of one inode: POSIX says do nothing */
        if (se.upper && de.upper && se.ust.st_ino == de.ust.st_ino && se.ust.st_dev == de.ust.st_dev)
            return 0;
        if (!se.upper && !de.upper && se.lower && de.lower && se.lst.st_ino == de.lst.st_ino &&
            se.lst.st_dev == de.lst.st_dev)
            return 0;
    }
    if ((sprot | dprot) & OV_PROT_MOUNT)
        return -EBUSY; /* a file system is mounted on one of them */
    _cleanup_free_ char *dpath = NULL;
    uint64_t charge = 0; /* reserved */
    struct ov_mark spm = {.fd = -1}, dpm = {.fd = -1};
    int spfd = -1, dpfd = -1; /* the upper parents, once renaming in them */
    struct ov_node *sn = ov_node_get(ov, p, name, &se, &r), *dn = NULL;
    if (!sn)
        return r;
    /* From the first change of upper/ on (a copy-up) until something has
     * moved, a failure takes back what the copy-up did (undo.c). */
    struct ov_undo undo;
    bool logged = false, moved = false;
    if (dexists && !(dn = ov_node_get(ov, np, newname, &de, &r)))
        goto out;
    if (dn && !exch && S_ISDIR(dm)) {
        r = ov_dir_is_empty(ov, dn);
        if (r == 0)
            r = -ENOTEMPTY;
        if (r < 0)
            goto out;
    }
    if ((r = ov_child_path(ov, np, newname, &dpath)) < 0)
        goto out;
    ov_undo_begin(ov, &undo);
    logged = true;
    if (dn && !exch && de.lower && !de.upper && S_ISREG(dm) && de.lst.st_nlink > 1) {
        /* the rename removes one name of a hard-linked lower file: as for
         * unlink, its names become one upper file first (alias.c), so the
         * others keep the right link count */
        if ((r = ov_copy_up(ov, dn, "rename")) < 0 || (r = ov_resolve(ov, np, newname, &de)) < 0)
            goto out;
    }
    /* Room for the names the upper gains (a new name at the destination,
     * a whiteout at the source), reserved before the first step: once the
     * object has moved, the whiteout must not fail for want of it. */
    uint64_t want = 0;
    if (!exch && !de.upper && !de.whiteout)
        want += ov_entry_charge(ov, 0, 0);
    if (!exch && se.lower_present)
        want += ov_entry_charge(ov, S_IFCHR, 0);
    if (want && (r = ov_quota_reserve(ov, want)) < 0)
        goto out;
    charge = want;
    /* Copy up everything that moves; journal what the rename destroys. */
    if ((r = S_ISDIR(sm) ? ov_copy_up_tree(ov, sn, "rename") : ov_copy_up(ov, sn, "rename")) < 0)
        goto out;
    if (exch && (r = S_ISDIR(dm) ? ov_copy_up_tree(ov, dn, "rename") : ov_copy_up(ov, dn, "rename")) < 0)
        goto out;
    if (!exch && de.lower_present && (r = ov_journal_lower(ov, dpath, "rename")) < 0)
        goto out;
    if ((r = ov_copy_up(ov, np, NULL)) < 0)
        goto out;
    int sfd = ov_node_upper(ov, p), dfd = ov_node_upper(ov, np);
    if (sfd < 0 || dfd < 0) {
        r = sfd < 0 ? sfd : dfd;
        goto out;
    }
    spfd = sfd;
    dpfd = dfd;
    if (dn && !exch && de.upper && S_ISDIR(dm) && (r = ov_upper_clear_whiteouts(ov, dpfd, newname, dpath)) < 0)
        goto out;
    /* A directory landing where the lower may have an entry must not merge
     * with it. */
    if (S_ISDIR(sm) && np->lower && (r = set_opaque_logged(ov, p, spfd, name)) < 0)
        goto out;
    if (exch && S_ISDIR(dm) && p->lower && (r = set_opaque_logged(ov, np, dpfd, newname)) < 0)
        goto out;
    /* both directories' growth or shrinkage, counted once when they are one */
    struct stat sps, dps;
    spm = ov_mark(spfd);
    if (fstat(spfd, &sps) < 0 || fstat(dpfd, &dps) < 0 || sps.st_ino != dps.st_ino || sps.st_dev != dps.st_dev)
        dpm = ov_mark(dpfd);
    struct stat old;
    bool replaced = !exch && de.upper && fstatat(dpfd, newname, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (replaced)
        ov_node_keep_upper(ov, np, dpfd, newname);
    bool need_wo = !exch && se.lower_present;
    /* the whiteout left at a lower name is one inode more, unless one goes
     * (a whiteout or an upper object's last name, replaced): within
     * --stage-max-inodes, checked before anything moves (RENAME_WHITEOUT
     * made it unchecked, past the quota) */
    bool frees = de.whiteout || (replaced && (S_ISDIR(old.st_mode) || old.st_nlink <= 1));
    if (need_wo && !frees && (r = ov_quota_inode(ov)) < 0)
        goto out;
    struct stat wst = {.st_mode = S_IFCHR};
    if (exch) {
        if (renameat2(spfd, name, dpfd, newname, RENAME_EXCHANGE) < 0) {
            r = -errno;
            goto out;
        }
        moved = true;
    } else if (de.whiteout && S_ISDIR(sm)) {
        /* a directory cannot replace the whiteout (a char device): swap
         * them, then keep the whiteout at the old name only if needed */
        if (renameat2(spfd, name, dpfd, newname, RENAME_EXCHANGE) < 0) {
            r = -errno;
            goto out;
        }
        moved = true;
        if (!need_wo) {
            if (unlinkat(spfd, name, 0) < 0) {
                r = -errno;
                goto out;
            }
            ov_account_removed(ov, &wst);
        }
    } else if (need_wo) {
        if (renameat2(spfd, name, dpfd, newname, RENAME_WHITEOUT) == 0) {
            moved = true;
            ov_account_added(ov, &wst);
            atomic_fetch_add(&ov->whiteouts, 1);
        } else if (errno == EINVAL || errno == EPERM || errno == EOPNOTSUPP) {
            /* No RENAME_WHITEOUT here (unprivileged): two steps; a crash in
             * between lets the lower object reappear at the old name. */
            if (renameat(spfd, name, dpfd, newname) < 0) {
                r = -errno;
                goto out;
            }
            moved = true;
            /* its inode checked above (or one goes): not again here, where
             * what the rename replaced is still counted */
            if ((r = ov_make_whiteout(ov, spfd, name, true)) < 0)
                goto out;
        } else {
            r = -errno;
            goto out;
        }
    } else if (renameat(spfd, name, dpfd, newname) < 0) {
        r = -errno;
        goto out;
    } else {
        moved = true;
    }
    if (de.whiteout && !exch && !S_ISDIR(sm))
        ov_account_removed(ov, &wst); /* the whiteout it replaced */
    if (replaced) {
        if (S_ISDIR(old.st_mode) || old.st_nlink <= 1)
            stage_origin_forget(ov->stage, old.st_ino);
        ov_account_removed(ov, &old);
    }
    if (exch) {
        /* swap the two nodes' names: park dn, move sn, move dn */
        char park[32];
        if ((r = ov_tmp_name(ov, park)) >= 0 && (r = ov_node_move(ov, dn, ov->root, park)) >= 0 &&
            (r = ov_node_move(ov, sn, np, newname)) >= 0)
            r = ov_node_move(ov, dn, p, name);
        ov_nodes_clear_lower_below(ov, dn);
    } else {
        if (dn && !de.upper)
            ov_node_keep_lower(ov, np, newname, dpath);
        if (dn)
            ov_node_detach(ov, dn);
        r = ov_node_move(ov, sn, np, newname);
    }
    ov_nodes_clear_lower_below(ov, sn);
out:
    ov_account_mark(ov, &spm);
    ov_account_mark(ov, &dpm);
    if (spfd >= 0) {
        ov_dir_changed(ov, spfd, name);
        ov_dir_changed(ov, dpfd, newname);
    }
    if (logged && r < 0 && !moved)
        (void)ov_undo_rollback(ov, &undo); /* what it cannot take back stays journaled */
    else if (logged)
        ov_undo_commit(ov, &undo);
    if (moved && r < 0)
        ov_nodes_clear_lower_below(ov, sn); /* moved, then failed: the copy is what moved */
    ov_quota_release(ov, charge);
    if (dn)
        ov_node_forget(ov, dn, 1);
    ov_node_forget(ov, sn, 1);
    return r < 0 ? r : 0;
}

void ov_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                  unsigned int flags) {
    struct ov *ov = ov_from_req(req);
    ov_wrlock(ov);
    int r = do_rename(ov, ov_node_of(ov, parent), name, ov_node_of(ov, newparent), newname, flags);
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}
