/* rmtree.c: removing a tree without following symlinks or crossing mounts (see util.h). */
#include "util/util.h"
#include "util/cleanup.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

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
