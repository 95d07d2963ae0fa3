/* xattr.c: extended attributes through the merged view.
 *
 * Name mapping (kernel overlayfs userxattr escaping):
 *   agent "user.overlay.X"  <->  upper "user.overlay.overlay.X"
 *   upper "user.overlay.*" (not escaped) is stage metadata: never shown,
 *   never writable by the agent.
 * A lower-only object shows its lower xattrs verbatim.  Setting or removing
 * an xattr copies the object up first.  Symlinks carry no user.* xattrs
 * (Linux refuses them), so they report none.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"

static bool is_ov_name(const char *n) {
    return strncmp(n, OV_XATTR_PREFIX, strlen(OV_XATTR_PREFIX)) == 0;
}

/* agent name -> upper name */
static int map_name(const char *name, char out[static XATTR_NAME_MAX + 32]) {
    int m;
    if (is_ov_name(name))
        m = snprintf(out, XATTR_NAME_MAX + 32, "%s%s", OV_XATTR_ESCAPED, name + strlen(OV_XATTR_PREFIX));
    else
        m = snprintf(out, XATTR_NAME_MAX + 32, "%s", name);
    if (m < 0 || m > XATTR_NAME_MAX)
        return -ERANGE;
    return 0;
}

/* Resolve n to a /proc path usable by the *xattr calls.  *upper tells
 * which layer; *fd_out must be closed by the caller when >= 0. */
static int target_path(struct ov *ov, struct ov_node *n, char pp[static 40], bool *upper, int *fd_out) {
    *fd_out = -1;
    int ufd = ov_node_upper(ov, n);
    if (ufd >= 0) {
        *upper = true;
        return ov_proc_path(ufd, pp);
    }
    if (ufd != -ENOENT)
        return ufd;
    int lfd = ov_node_lower_open(ov, n, O_PATH);
    if (lfd < 0)
        return lfd == -ENOENT ? -ESTALE : lfd;
    *upper = false;
    *fd_out = lfd;
    return ov_proc_path(lfd, pp);
}

void ov_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    if (size > OV_MAX_XATTR)
        size = OV_MAX_XATTR;
    _cleanup_free_ char *val = size ? malloc(size) : NULL;
    if (size && !val) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    char pp[40], uname[XATTR_NAME_MAX + 32];
    bool upper = false;
    ssize_t len = -1;
    int r = 0;
    _cleanup_close_ int lfd = -1;
    ov_rdlock(ov);
    if (n->type == S_IFLNK) {
        r = -ENODATA;
        goto out;
    }
    r = target_path(ov, n, pp, &upper, &lfd);
    if (r < 0)
        goto out;
    const char *nm = name;
    if (upper) {
        if ((r = map_name(name, uname)) < 0)
            goto out;
        nm = uname;
    }
    len = getxattr(pp, nm, val, size);
    if (len < 0)
        r = -errno;
out:
    ov_unlock(ov);
    if (r < 0)
        fuse_reply_err(req, -r);
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)len);
    else
        fuse_reply_buf(req, val, (size_t)len);
}

void ov_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    struct ov *ov = ov_from_req(req);
    struct ov_node *n = ov_node_of(ov, ino);
    char pp[40];
    bool upper = false;
    int r = 0;
    _cleanup_free_ char *raw = NULL, *out = NULL;
    size_t olen = 0;
    _cleanup_close_ int lfd = -1;
    ov_rdlock(ov);
    if (n->type == S_IFLNK)
        goto out;
    if ((r = target_path(ov, n, pp, &upper, &lfd)) < 0)
        goto out;
    ssize_t len = listxattr(pp, NULL, 0);
    if (len < 0) {
        r = (errno == ENOTSUP || errno == EOPNOTSUPP) ? 0 : -errno;
        goto out;
    }
    raw = malloc((size_t)len + 1);
    out = malloc((size_t)len + 1);
    if (!raw || !out) {
        r = -ENOMEM;
        goto out;
    }
    len = listxattr(pp, raw, (size_t)len);
    if (len < 0) {
        r = -errno;
        goto out;
    }
    for (char *nm = raw; nm < raw + len; nm += strlen(nm) + 1) {
        const char *shown = nm;
        char buf[XATTR_NAME_MAX + 32];
        if (upper && is_ov_name(nm)) {
            if (strncmp(nm, OV_XATTR_ESCAPED, strlen(OV_XATTR_ESCAPED)) != 0)
                continue; /* stage metadata */
            snprintf(buf, sizeof buf, "%s%s", OV_XATTR_PREFIX, nm + strlen(OV_XATTR_ESCAPED));
            shown = buf;
        }
        size_t l = strlen(shown) + 1;
        memcpy(out + olen, shown, l); /* unescaped names are shorter */
        olen += l;
    }
out:
    ov_unlock(ov);
    if (r < 0)
        fuse_reply_err(req, -r);
    else if (size == 0)
        fuse_reply_xattr(req, olen);
    else if (olen > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, out, olen);
}

static int modify_xattr(struct ov *ov, struct ov_node *n, const char *name, const char *value, size_t size, int flags,
                        bool remove) {
    char uname[XATTR_NAME_MAX + 32], pp[40];
    int r = map_name(name, uname);
    if (r < 0)
        return r;
    if (n->type == S_IFLNK)
        return -EPERM;
    /* xattr_permission: not of an immutable or append-only object */
    if ((r = ov_prot_check(ov, n, false)) < 0)
        return r;
    if (remove && ov_node_upper(ov, n) == -ENOENT) {
        /* nothing to remove on a lower-only object: no copy-up */
        char pp2[40];
        _cleanup_close_ int lfd = ov_node_lower_open(ov, n, O_PATH);
        if (lfd < 0)
            return lfd;
        if ((r = ov_proc_path(lfd, pp2)) < 0)
            return r;
        if (getxattr(pp2, name, NULL, 0) < 0)
            return -errno;
    }
    if ((r = ov_copy_up(ov, n, remove ? "removexattr" : "setxattr")) < 0)
        return r;
    int ufd = ov_node_upper(ov, n);
    if (ufd < 0)
        return ufd;
    if ((r = ov_proc_path(ufd, pp)) < 0)
        return r;
    /* An xattr may take a block of its own (ext4: once the inode is full).
     * The object's allocation is measured around the call; for a file,
     * with its data writes held off, which measure it too. */
    uint64_t charge = remove ? 0 : ((strlen(uname) + size) / ov->blksize + 1) * ov->blksize;
    if (charge && (r = ov_quota_reserve(ov, charge)) < 0)
        return r;
    bool file = n->type == S_IFREG;
    if (file)
        pthread_rwlock_wrlock(&ov->data_lock);
    struct ov_mark m = ov_mark(ufd);
    r = (remove ? removexattr(pp, uname) : setxattr(pp, uname, value, size, flags)) < 0 ? -errno : 0;
    ov_account_mark(ov, &m);
    if (n->type == S_IFDIR)
        ov_dir_touched(ov, ufd);
    if (file)
        pthread_rwlock_unlock(&ov->data_lock);
    ov_quota_release(ov, charge);
    return r;
}

void ov_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags) {
    struct ov *ov = ov_from_req(req);
    ov_wrlock(ov);
    int r = modify_xattr(ov, ov_node_of(ov, ino), name, value, size, flags, false);
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}

void ov_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
    struct ov *ov = ov_from_req(req);
    ov_wrlock(ov);
    int r = modify_xattr(ov, ov_node_of(ov, ino), name, NULL, 0, 0, true);
    ov_unlock(ov);
    fuse_reply_err(req, -r);
}
