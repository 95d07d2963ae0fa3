/* mounts.c: build the synthetic root and enter it (pivot_root).
 *
 * Runs in the launcher's init process: uid 0 of the run's user namespace,
 * in a fresh mount namespace (copied from the supervisor's, which has the
 * FUSE overlay on the workspace path).  Nothing here touches the host
 * file system: every source is first cloned as a detached mount
 * (open_tree(OPEN_TREE_CLONE)) while its path still resolves, then a tmpfs
 * becomes the new root and the clones are attached under it.  Holding the
 * sources as descriptors means mounting the tmpfs cannot hide a source
 * (e.g. a workspace under /tmp) and later path games cannot swap one.
 *
 * Read-only projections are made read-only, nosuid and nodev recursively
 * with mount_setattr(AT_RECURSIVE) before they are attached.
 */
#include "launch/launch.h"
#include "policy/plan.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

/* A tmpfs of the command's holds one inode per this many bytes of its
 * size at most (/dev/shm's 64 MiB: 32768). */
#define TMPFS_BYTES_PER_INODE 2048

int launch_tmpfs_fd[LAUNCH_TMPFS_N] = {-1, -1};
const char *const launch_tmpfs_path[LAUNCH_TMPFS_N] = {"/tmp", "/dev/shm"};

/* Keep the root of the tmpfs just mounted at target as launch_tmpfs_fd[k]
 * (see launch.h).  Not a control: when it cannot be opened, the run goes
 * on and its Bundle has no numbers for it. */
static void keep_tmpfs(int k, const char *target) {
    if (launch_tmpfs_fd[k] < 0)
        launch_tmpfs_fd[k] = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Where the new root is assembled (inside our private mount namespace). */
#define NEWROOT "/tmp"

static int sys_open_tree(int dfd, const char *path, unsigned flags) {
    return (int)syscall(SYS_open_tree, dfd, path, flags);
}
static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags) {
    return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}
static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr) {
    return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof *attr);
}

/* A new proc instance for our PID namespace, as a detached mount (nosuid,
 * nodev, noexec, and read-only when read_only): its descriptor, or -errno. */
static int fresh_proc(bool read_only) {
    _cleanup_close_ int fs = (int)syscall(SYS_fsopen, "proc", FSOPEN_CLOEXEC);
    if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "proc", 0) < 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return -errno;
    int m =
        (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC | (read_only ? MOUNT_ATTR_RDONLY : 0));
    return m < 0 ? -errno : m;
}

/* mkdir -p of path below root (root-relative, path absolute). */
static int mkdirs_below(const char *root, const char *path, mode_t mode) {
    _cleanup_free_ char *full = path_join(root, path);
    if (!full)
        return -ENOMEM;
    return mkdir_p(full, mode);
}

/* Create an empty file (bind target for a file source). */
static int touch_below(const char *root, const char *path) {
    _cleanup_free_ char *full = path_join(root, path);
    if (!full)
        return -ENOMEM;
    _cleanup_free_ char *parent = strdup(full);
    if (!parent)
        return -ENOMEM;
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        int r = mkdir_p(parent, 0755);
        if (r < 0)
            return r;
    }
    /* A file already there is the mount point: one of a read-only
     * projection (--access ro:/etc/hosts, rw:/etc/app.conf inside /etc),
     * where creating it would fail EROFS.  Not a symlink: a bind onto it
     * would follow it outside the new root. */
    struct stat st;
    if (lstat(full, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
        return 0;
    int fd = open(full, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

struct source {
    int fd;        /* detached clone, or -1 */
    char *symlink; /* replicate a symlink instead of binding */
    bool is_dir;
    bool missing; /* optional source that does not exist on this host */
};

/* Clone one bind source now, while its host path still resolves. */
static int grab_source(const struct plan_mount *m, struct source *s, const char **ret_step) {
    const char *src = m->source ? m->source : m->path;
    struct stat st;
    if (m->fd >= 0) { /* the supervisor's idmapped clone (idmap.c), flags set */
        if (fstat(m->fd, &st) < 0) {
            *ret_step = "stat of an idmapped projection";
            return -errno;
        }
        s->is_dir = S_ISDIR(st.st_mode);
        s->fd = m->fd;
        return 0;
    }
    if (lstat(src, &st) < 0) {
        /* runtime directories this host lacks, or, found by the
         * supervisor, that the launcher may not reach (it has no DAC
         * override on the host): best effort */
        if ((errno == ENOENT || (errno == EACCES && m->optional)) && m->kind == PLAN_BIND_RO) {
            s->missing = true;
            return 0;
        }
        *ret_step = "stat of a path to project";
        return -errno;
    }
    if (S_ISLNK(st.st_mode) && m->kind == PLAN_BIND_RO) {
        char buf[4096];
        ssize_t n = readlink(src, buf, sizeof buf - 1);
        if (n < 0 && errno == EACCES && m->optional) {
            s->missing = true;
            return 0;
        }
        if (n < 0) {
            *ret_step = "readlink of a projected symlink";
            return -errno;
        }
        buf[n] = '\0';
        s->symlink = strdup(buf);
        return s->symlink ? 0 : -ENOMEM;
    }
    s->is_dir = S_ISDIR(st.st_mode);
    s->fd = sys_open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW | O_CLOEXEC);
    if (s->fd < 0) {
        *ret_step = "open_tree(OPEN_TREE_CLONE) of a path to project";
        return -errno;
    }
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    };
    /* A socket (the agent socket, an rw: grant of one) is connected to
     * through a read-only mount as well; read-write, its owner (the
     * command, as root and as the user) changed the host inode's mode
     * and times (chmod 0777 of the agent socket in the run directory). */
    if (m->kind == PLAN_BIND_RO || S_ISSOCK(st.st_mode))
        attr.attr_set |= MOUNT_ATTR_RDONLY;
    /* Device nodes must stay usable: no nodev on /dev sources. */
    if (strncmp(src, "/dev/", 5) == 0)
        attr.attr_set &= ~(uint64_t)MOUNT_ATTR_NODEV;
    if (sys_mount_setattr(s->fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0) {
        *ret_step = "mount_setattr(read-only, nosuid, nodev) of a projection";
        return -errno;
    }
    return 0;
}

/* The first cover of each kind, still attached: later ones are clones of
 * it (open_tree: no new file or tmpfs, and the read-only flags come with
 * the clone), about half of a cover's cost; /proc alone takes two dozen as
 * root.  The clones of the directory cover share its empty read-only
 * tmpfs.  Init builds the root once, single-threaded; launch_build_root
 * closes them. */
static int cover_tpl[2] = {-1, -1}; /* [0] a file's, [1] a directory's */

/* Attach a cover onto the object tfd names: a directory gets an empty
 * read-only tmpfs, anything else the empty read-only file root/.pvisor-empty. */
static int cover_at_fd(int tfd, bool dir, const char *root) {
    int *tpl = &cover_tpl[dir];
    if (*tpl >= 0) {
        _cleanup_close_ int clone = sys_open_tree(*tpl, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | O_CLOEXEC);
        if (clone < 0 || sys_move_mount(clone, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            return -errno;
        return 0;
    }
    _cleanup_close_ int cover = -1;
    if (!dir) {
        _cleanup_free_ char *empty = path_join(root, "/.pvisor-empty");
        if (!empty)
            return -ENOMEM;
        int fd = open(empty, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
            return -errno;
        close(fd);
        cover = sys_open_tree(AT_FDCWD, empty, OPEN_TREE_CLONE | AT_SYMLINK_NOFOLLOW | O_CLOEXEC);
    } else {
        int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
        if (fs >= 0 && syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0555", 0) == 0 &&
            syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4096", 0) == 0 &&
            syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
            cover = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0);
        int e = errno;
        if (fs >= 0)
            close(fs);
        errno = e;
    }
    if (cover < 0)
        return -errno;
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
    if (sys_mount_setattr(cover, "", AT_EMPTY_PATH, &ro) < 0 ||
        sys_move_mount(cover, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return -errno;
    *tpl = TAKE_FD(cover);
    return 0;
}

/* ---- host unix sockets in projected trees ----
 * connect(2) to a pathname socket needs only write permission on the
 * socket's inode, which a read-only mount does not take away, and Landlock
 * before ABI 9 has no right for it: a host service's socket in a projected
 * toolchain or --access tree (a D-Bus or Docker socket in a granted
 * runtime directory) would be reachable.  Each such socket found at start
 * is covered by an empty read-only file; so is an ro: grant that is a
 * socket (an rw: one hands it over, as asked).  One made there later is
 * not (the supervisor says so).  An --access tree is scanned to SCAN_DEPTH
 * levels and SCAN_ENTRIES entries; a toolchain (large trees of files, no
 * services) to TOOL_DEPTH and TOOL_ENTRIES, at every start.  pvisor's own
 * views (FUSE: a connect there is refused anyway) are not entered; another
 * FUSE file system is. */
#define SCAN_ENTRIES 20000
#define SCAN_DEPTH 8
#define TOOL_ENTRIES 2000
#define TOOL_DEPTH 2
#define FUSE_MAGIC 0x65735546
struct launch_socket_scan launch_socket_scan;

struct scan {
    const char *root;
    const dev_t *views; /* devices of pvisor's own FUSE views in the new root */
    size_t n_views;
    unsigned budget, max_depth, covered;
    bool cut;
    int err;
    bool list_failed; /* err is a directory listing's */
};

static bool own_view(const struct scan *sc, int dfd) {
    struct statfs sfs;
    struct stat st;
    if (fstatfs(dfd, &sfs) < 0 || sfs.f_type != FUSE_MAGIC || fstat(dfd, &st) < 0)
        return false;
    for (size_t i = 0; i < sc->n_views; i++)
        if (sc->views[i] == st.st_dev)
            return true;
    return false;
}

static void cover_one(struct scan *sc, int dfd, const char *name) {
    int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int r = fd < 0 ? -errno : cover_at_fd(fd, false, sc->root);
    if (fd >= 0)
        close(fd);
    if (r == 0)
        sc->covered++;
    else if (r != -ENOENT)
        sc->err = r;
}

static void scan_sockets_at(struct scan *sc, int dfd, unsigned depth) {
    if (own_view(sc, dfd))
        return;
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        sc->cut = true;
        return;
    }
    struct dirent *de = NULL;
    while (sc->err == 0 && (de = readdir_no_dots(d))) {
        if (sc->budget == 0) {
            sc->cut = true;
            break;
        }
        sc->budget--;
        unsigned char t = de->d_type;
        struct stat st;
        if (t == DT_UNKNOWN)
            t = fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? IFTODT(st.st_mode) : DT_UNKNOWN;
        if (t == DT_SOCK) {
            cover_one(sc, dfd, de->d_name);
        } else if (t == DT_DIR) {
            int sub =
                depth < sc->max_depth ? openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (sub < 0) {
                sc->cut = true; /* too deep, or unreadable (perhaps still searchable) */
                continue;
            }
            scan_sockets_at(sc, sub, depth + 1);
            close(sub);
        }
    }
    /* a listing that failed part way is not the end of the directory: a
     * socket past that point would stay reachable, not covered */
    if (!de && errno != 0 && sc->err == 0) {
        sc->err = -errno;
        sc->list_failed = true;
    }
    closedir(d);
}

static void note_tree(char **list, unsigned *n, const char *path) {
    if (*n < LAUNCH_SCAN_LIST)
        list[(*n)++] = strdup(path);
}

/* A projection whose unix sockets are covered (a toolchain, an --access
 * grant) that this host has as a file or tree (not a replicated symlink). */
static bool to_scan(const struct plan_mount *m, const struct source *s) {
    return m->scan_sockets && !s->missing && !s->symlink;
}

static int cover_sockets(const struct launch_plan *p, const struct source *src, const char *root,
                         const char **ret_step) {
    struct launch_socket_scan *ls = &launch_socket_scan;
    /* the views: the read-write bind projections not scanned that are FUSE
     * mounts (the workspace's and HOME's).  Not a read-only one: /etc or
     * /usr on a FUSE file system (a rootless container's fuse-overlayfs
     * root) has the device of every grant on that file system, whose
     * sockets would then go unscanned while ipc said enforced. */
    bool any = false;
    for (size_t i = 0; i < p->n_mounts; i++)
        any |= to_scan(&p->mounts[i], &src[i]);
    if (!any) /* nothing to scan: the views' statfs (a round trip to their FUSE server each) is not needed */
        return 0;
    _cleanup_free_ dev_t *views = calloc(p->n_mounts ? p->n_mounts : 1, sizeof *views);
    size_t n_views = 0;
    if (!views)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_mounts; i++) {
        const struct plan_mount *m = &p->mounts[i];
        _cleanup_free_ char *target = path_join(root, m->path);
        struct statfs sfs;
        struct stat st;
        if (m->kind == PLAN_BIND_RW && !m->scan_sockets && target && statfs(target, &sfs) == 0 &&
            sfs.f_type == FUSE_MAGIC && stat(target, &st) == 0)
            views[n_views++] = st.st_dev;
    }
    for (size_t i = 0; i < p->n_mounts; i++) {
        const struct plan_mount *m = &p->mounts[i];
        if (!to_scan(m, &src[i]))
            continue;
        _cleanup_free_ char *target = path_join(root, m->path);
        if (!target)
            return -ENOMEM;
        bool tool = m->optional; /* found by the supervisor, not granted by the user */
        struct scan sc = {.root = root,
                          .views = views,
                          .n_views = n_views,
                          .budget = tool ? TOOL_ENTRIES : SCAN_ENTRIES,
                          .max_depth = tool ? TOOL_DEPTH : SCAN_DEPTH};
        struct stat st;
        if (!src[i].is_dir) {
            /* a grant of one file: a socket is covered (ro:) or handed over (rw:) */
            if (lstat(target, &st) < 0 || !S_ISSOCK(st.st_mode))
                continue;
            if (m->kind == PLAN_BIND_RW) {
                note_tree(ls->handed_over, &ls->n_handed_over, m->path);
                continue;
            }
            _cleanup_free_ char *parent = strdup(target);
            if (!parent)
                return -ENOMEM;
            *strrchr(parent, '/') = '\0';
            _cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (pfd < 0)
                return *ret_step = "opening the directory of a socket grant", -errno;
            cover_one(&sc, pfd, strrchr(target, '/') + 1);
        } else {
            _cleanup_close_ int fd = open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                sc.cut = true;
            else
                scan_sockets_at(&sc, fd, 1);
        }
        if (sc.err < 0)
            return *ret_step = sc.list_failed ? "listing a projected tree for unix sockets"
                                              : "covering a unix socket in a projected tree",
                   sc.err;
        ls->covered += sc.covered;
        if (tool) {
            if (sc.cut)
                note_tree(ls->tools_incomplete, &ls->n_tools_incomplete, m->path);
            continue;
        }
        ls->covered_in_grants += sc.covered;
        note_tree(ls->scanned, &ls->n_scanned, m->path);
        if (sc.cut)
            note_tree(ls->incomplete, &ls->n_incomplete, m->path);
    }
    return 0;
}

static int attach(const char *root, const struct plan_mount *m, struct source *s, const char **ret_step) {
    int r;
    _cleanup_free_ char *target = path_join(root, m->path);
    if (!target)
        return -ENOMEM;
    switch (m->kind) {
    case PLAN_BIND_RO:
    case PLAN_BIND_RW:
        if (s->missing)
            return 0;
        if (s->symlink) {
            _cleanup_free_ char *parent = strdup(target);
            if (!parent)
                return -ENOMEM;
            *strrchr(parent, '/') = '\0';
            if (parent[0] && (r = mkdir_p(parent, 0755)) < 0)
                return *ret_step = "creating a projection's parent directory", r;
            if (symlink(s->symlink, target) < 0 && errno != EEXIST)
                return *ret_step = "replicating a projected symlink", -errno;
            return 0;
        }
        r = s->is_dir ? mkdirs_below(root, m->path, 0755) : touch_below(root, m->path);
        if (r < 0)
            return *ret_step = "creating a projection's mount point", r;
        if (sys_move_mount(s->fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return *ret_step = "move_mount of a projection into the new root", -errno;
        return 0;
    case PLAN_HIDE: {
        /* Cover what the sandbox would show at this path: a directory with
         * an empty read-only tmpfs, a file with an empty read-only file.
         * Nothing there: nothing to hide.  The path is resolved inside the
         * new root (RESOLVE_IN_ROOT: an absolute symlink on the way leads
         * where it will lead for the command, not into the host's tree),
         * following a final symlink to what it names, and the cover is
         * attached to that exact object (move_mount onto the fd). */
        _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
            return *ret_step = "opening the new root", -errno;
        struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
        _cleanup_close_ int tfd = (int)syscall(SYS_openat2, rootfd, m->path[1] ? m->path + 1 : ".", &how, sizeof how);
        if (tfd < 0)
            /* EACCES: a directory on the way that we may not search (as
             * root, an idmapped one of root's): the command, with fewer
             * rights, cannot reach it either */
            return errno == ENOENT || errno == ENOTDIR || errno == EACCES
                       ? 0
                       : (*ret_step = "resolving a path to hide", -errno);
        struct stat st;
        if (fstat(tfd, &st) < 0)
            return *ret_step = "stat of a path to hide", -errno;
        if ((r = cover_at_fd(tfd, S_ISDIR(st.st_mode), root)) < 0)
            return *ret_step = "covering a hidden path", r;
        return 0;
    }
    case PLAN_TMPFS: {
        if ((r = mkdirs_below(root, m->path, 0755)) < 0)
            return *ret_step = "creating a tmpfs mount point", r;
        /* inodes bounded too, one per 2 KiB of the size: a tmpfs inode and
         * its name take kernel memory no byte count sees (300,000 empty
         * files in /tmp took 250 MB of slab while df said 0 used) */
        char opts[96];
        unsigned long long size = m->size ? m->size : 64ULL << 20;
        snprintf(opts, sizeof opts, "mode=%s,size=%llu,nr_inodes=%llu", strcmp(m->path, "/tmp") == 0 ? "1777" : "0700",
                 size, size / TMPFS_BYTES_PER_INODE);
        unsigned long flags = MS_NOSUID | MS_NODEV;
        if (mount("tmpfs", target, "tmpfs", flags, opts) < 0)
            return *ret_step = "mounting a tmpfs", -errno;
        if (strcmp(m->path, launch_tmpfs_path[LAUNCH_TMPFS_TMP]) == 0)
            keep_tmpfs(LAUNCH_TMPFS_TMP, target);
        return 0;
    }
    }
    return -EINVAL;
}

/* Cover dirfd/rel (never through a symlink there), if it exists. */
static int cover_rel(int dirfd, const char *rel, bool dir, const char *root) {
    _cleanup_close_ int t = openat(dirfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (t < 0)
        return errno == ENOENT ? 0 : -errno;
    return cover_at_fd(t, dir, root);
}

/* Run by root, the command is uid 0 and owns the fresh /proc's root-only
 * files: slabinfo, pagetypeinfo, vmallocinfo, timer_list (kernel heap
 * layout and timers an exploit wants), a few sysctls (the usermode
 * helper's capability sets, cad_pid, the ASLR entropy).  Each is covered
 * with an empty read-only file, as container runtimes mask them.  The
 * top level is read as the kernel has it; /proc/sys by a fixed list (with
 * the network sysctls that hold secrets, which are the host's when the
 * network is not unshared).
 *
 * The fresh /proc is looked through (scan_root_only_proc) on a thread of
 * init's while it attaches the projections (each entry's first lookup in
 * a new proc instance makes its dentry: ~110 of them, most of the step),
 * through the new mount before it is attached; what is to be covered is
 * covered once it is (cover_root_only_proc). */
struct proc_scan {
    int pfd; /* the fresh /proc's root */
    bool own_net;
    struct {
        char *rel;
        bool dir;
    } * found;
    size_t n, cap;
    int r;
    const char *step;
};

__attribute__((format(printf, 3, 4))) static int note_cover(struct proc_scan *s, bool dir, const char *fmt, ...) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 32;
        void *f = realloc(s->found, cap * sizeof *s->found);
        if (!f)
            return -ENOMEM;
        s->found = f;
        s->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vasprintf(&s->found[s->n].rel, fmt, ap);
    va_end(ap);
    if (m < 0)
        return -ENOMEM;
    s->found[s->n++].dir = dir;
    return 0;
}

static int scan_root_only_proc(struct proc_scan *s) {
    static const char *const sys[] = {"sys/kernel/cad_pid",
                                      "sys/kernel/usermodehelper/bset",
                                      "sys/kernel/usermodehelper/inheritable",
                                      "sys/vm/mmap_rnd_bits",
                                      "sys/vm/mmap_rnd_compat_bits",
                                      "sys/vm/stat_refresh",
                                      "sys/net/ipv4/tcp_fastopen_key",
                                      "sys/net/core/bpf_jit_harden",
                                      "sys/net/core/bpf_jit_kallsyms",
                                      "sys/net/core/bpf_jit_limit"};
    int pfd = s->pfd;
    _cleanup_closedir_ DIR *d = NULL;
    int r = dup_opendir(pfd, &d);
    if (r < 0)
        return s->step = "reading /proc", r;
    struct dirent *de;
    s->step = "looking through /proc for root-only files";
    /* Every entry is looked at: one that could not be (an error other than
     * ENOENT, an entry that went away) would stay uncovered while the
     * Bundle says otherwise, so that ends the setup. */
    while ((de = readdir_no_dots(d))) {
        struct stat st;
        if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
            continue; /* processes */
        if (fstatat(pfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            return -errno;
        }
        if (S_ISREG(st.st_mode) && (st.st_mode & S_IRUSR) && !(st.st_mode & S_IROTH) &&
            (r = note_cover(s, false, "%s", de->d_name)) < 0)
            return r;
        /* a directory, or one below it, that others may not enter
         * (tty/driver: the serial ports' counters) */
        if (!S_ISDIR(st.st_mode) || strcmp(de->d_name, "sys") == 0)
            continue;
        if (!(st.st_mode & S_IXOTH)) {
            if ((r = note_cover(s, true, "%s", de->d_name)) < 0)
                return r;
            continue;
        }
        _cleanup_close_ int sub = openat(pfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *sd = NULL;
        struct dirent *se;
        if (sub < 0 && errno == ENOENT)
            continue;
        if (sub < 0)
            return -errno;
        if ((r = dup_opendir(sub, &sd)) < 0)
            return r;
        while ((se = readdir_no_dots(sd))) {
            if (fstatat(sub, se->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                    continue;
                return -errno;
            }
            if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH) &&
                (r = note_cover(s, true, "%s/%s", de->d_name, se->d_name)) < 0)
                return r;
        }
        if (errno != 0)
            return s->step = "reading /proc", -errno;
    }
    if (errno != 0)
        return s->step = "reading /proc", -errno;
    for (size_t i = 0; i < ARRAY_SIZE(sys); i++) {
        struct stat st;
        if (fstatat(pfd, sys[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* not in this kernel */
            return -errno;
        }
        if (S_ISREG(st.st_mode) && !(st.st_mode & S_IROTH) && (r = note_cover(s, false, "%s", sys[i])) < 0)
            return r;
    }
    /* each interface's IPv6 address-generation secret; on the host's
     * network, where interfaces come and go, the whole directory */
    if (!s->own_net)
        return note_cover(s, true, "sys/net/ipv6/conf");
    _cleanup_close_ int conf = openat(pfd, "sys/net/ipv6/conf", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_closedir_ DIR *cd = NULL;
    if (conf < 0)
        return errno == ENOENT ? 0 : -errno; /* no IPv6 */
    if ((r = dup_opendir(conf, &cd)) < 0)
        return r;
    while ((de = readdir_no_dots(cd))) {
        char rel[300];
        struct stat st;
        snprintf(rel, sizeof rel, "%s/stable_secret", de->d_name);
        if (fstatat(conf, rel, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT || errno == ENOTDIR)
                continue; /* an interface gone, or an entry that is not one */
            return -errno;
        }
        if (S_ISREG(st.st_mode) && !(st.st_mode & S_IROTH) &&
            (r = note_cover(s, false, "sys/net/ipv6/conf/%s", rel)) < 0)
            return r;
    }
    return errno != 0 ? (s->step = "reading /proc", -errno) : 0;
}

static void *scan_thread(void *arg) {
    struct proc_scan *s = arg;
    s->r = scan_root_only_proc(s);
    return NULL;
}

/* What the scan found, covered in the attached /proc (pfd, its root). */
static int cover_root_only_proc(int pfd, const char *root, const struct proc_scan *s, const char **ret_step) {
    *ret_step = "covering a root-only file of /proc";
    for (size_t i = 0; i < s->n; i++) {
        int r = cover_rel(pfd, s->found[i].rel, s->found[i].dir, root);
        if (r < 0)
            return r;
    }
    return 0;
}

/* /proc/keys lists every key the caller may view, whatever its keyring:
 * the user's own keys on the host (an "aws:prod-deploy-token" added to the
 * user keyring in a host shell) with their types and sizes, and
 * /proc/key-users every host user's key counts.  The keyctl calls are
 * denied (seccomp), so nothing in the sandbox needs these: both are
 * covered with an empty read-only file, as container runtimes mask them. */
static int cover_proc_keys(int pfd, const char *root, const char **ret_step) {
    static const char *const files[] = {"keys", "key-users"};
    *ret_step = "covering /proc's key lists";
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        int r = cover_rel(pfd, files[i], false, root);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Run by root, the command is uid 0: the kernel lets the owner write a
 * sysctl by its mode bits alone (no capability is asked for most of
 * them: kernel.core_pattern would run a host program as root) and
 * /proc/sysrq-trigger (crash or reboot the host), /proc/irq (the host's
 * interrupt affinities).  Landlock's read-only /proc refuses those
 * writes; these read-only mounts are the second layer, as container
 * runtimes make them, for a kernel or a policy where Landlock is not
 * there (the run then says partial, and may still be run). */
static int proc_read_only(int pfd, const char **ret_step) {
    static const char *const ro_paths[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
    *ret_step = "making /proc's host-wide settings read-only";
    for (size_t i = 0; i < ARRAY_SIZE(ro_paths); i++) {
        _cleanup_close_ int t =
            sys_open_tree(pfd, ro_paths[i], OPEN_TREE_CLONE | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW | O_CLOEXEC);
        if (t < 0 && errno == ENOENT)
            continue; /* not in this kernel's /proc */
        struct mount_attr ro = {.attr_set =
                                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        if (t < 0 || sys_mount_setattr(t, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro) < 0 ||
            sys_move_mount(t, "", pfd, ro_paths[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return -errno;
    }
    return 0;
}

static int setup_dev(const struct launch_plan *p, const char *root, const char **ret_step) {
    _cleanup_free_ char *pts = path_join(root, "/dev/pts");
    _cleanup_free_ char *shm = path_join(root, "/dev/shm");
    _cleanup_free_ char *dev = path_join(root, "/dev");
    if (!pts || !shm || !dev)
        return -ENOMEM;
    int r;
    if ((r = mkdir_p(pts, 0755)) < 0 || (r = mkdir_p(shm, 01777)) < 0)
        return *ret_step = "creating /dev", r;
    /* max: ptys come from kernel.pty.max, one count for the host (4096 by
     * default, of which kernel.pty.reserve, 1024, only the host's own
     * devpts may use): a command that opened them all left every other
     * devpts, another sandbox's or a container's, without a pty. */
    if (mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620,max=256") < 0)
        return *ret_step = "mounting a private devpts", -errno;
    char opts[96];
    unsigned long long size = p->shm_size ? p->shm_size : 64ULL << 20;
    snprintf(opts, sizeof opts, "mode=1777,size=%llu,nr_inodes=%llu", size, size / TMPFS_BYTES_PER_INODE);
    if (mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        return *ret_step = "mounting /dev/shm", -errno;
    keep_tmpfs(LAUNCH_TMPFS_SHM, shm);
    static const char *const links[][2] = {
        {"pts/ptmx", "ptmx"},          {"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
        {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
    };
    int dfd = open(dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return *ret_step = "opening /dev", -errno;
    for (size_t i = 0; i < ARRAY_SIZE(links); i++)
        if (symlinkat(links[i][0], dfd, links[i][1]) < 0 && errno != EEXIST) {
            r = -errno;
            close(dfd);
            return *ret_step = "creating /dev symlinks", r;
        }
    close(dfd);
    return 0;
}

/* Show content (len bytes) at rel (a regular file of the new root) instead:
 * a read-only file of the root's tmpfs mounted over it.  Nothing when rel
 * is missing or not a regular file (a symlink into /run, not shown there,
 * leads nowhere).  hold: the name of the file in the root's tmpfs. */
static int shadow_file(int rootfd, const char *rel, const char *hold, const char *content, size_t len) {
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int tfd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
    struct stat st;
    if (tfd < 0)
        return 0;
    if (fstat(tfd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return 0;
    _cleanup_close_ int fd = openat(rootfd, hold, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, content, len);
    if (r < 0)
        return r;
    _cleanup_close_ int src = sys_open_tree(rootfd, hold, OPEN_TREE_CLONE | O_CLOEXEC);
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
    if (src < 0 || sys_mount_setattr(src, "", AT_EMPTY_PATH, &ro) < 0 ||
        sys_move_mount(src, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return -errno;
    return 0;
}

/* Under --network none the command's /etc/resolv.conf names the run's
 * name server (net/dns.h) on its own loopback; resolvers ask 127.0.0.1
 * anyway when there is none to show it in.  Only convenience is at stake
 * (the host's name server is out of the namespace's reach either way). */
static int shadow_resolv_conf(int rootfd, const char **ret_step) {
    static const char conf[] = "# pvisor run --safe: this sandbox has no network of its own.  Its name\n"
                               "# server answers every name 'no such name' and records it (the run's\n"
                               "# Bundle: dns); 'pvisor run --allow-net HOST' lets the command reach HOST\n"
                               "# through pvisor's egress broker (HTTPS_PROXY).\n"
                               "nameserver 127.0.0.1\n";
    *ret_step = "showing the run's name server in /etc/resolv.conf";
    return shadow_file(rootfd, "etc/resolv.conf", ".pvisor-resolv.conf", conf, sizeof conf - 1);
}

/* The sandbox's own host name resolves, as a host's does: the host's
 * /etc/hosts with a line for it (127.0.1.1, Debian's way, and ::1).  It
 * did not (the name server answers none): Java's getLocalHost() threw,
 * `hostname -f` failed, and git's lookup of it made the run advise
 * --allow-net for the sandbox's own name (found by a review). */
static int shadow_hosts(int rootfd, const char *hostname, const char **ret_step) {
    *ret_step = "showing the sandbox's host name in /etc/hosts";
    /* what /etc/hosts leads to in the new root, as its resolvers read it;
     * nothing there (or not a file, or over 1 MiB): left as it is */
    struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int fd = (int)syscall(SYS_openat2, rootfd, "etc/hosts", &how, sizeof how);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20))
        return 0;
    _cleanup_free_ char *host = malloc((size_t)st.st_size + 1);
    if (!host)
        return -ENOMEM;
    ssize_t n = pread(fd, host, (size_t)st.st_size, 0);
    if (n < 0)
        return 0;
    _cleanup_free_ char *all = NULL;
    int len = asprintf(&all, "%.*s%s# pvisor: the sandbox's host name\n127.0.1.1\t%s\n::1\t%s\n", (int)n, host,
                       n && host[n - 1] != '\n' ? "\n" : "", hostname, hostname);
    if (len < 0)
        return -ENOMEM;
    return shadow_file(rootfd, "etc/hosts", ".pvisor-hosts", all, (size_t)len);
}

int launch_build_root(const struct launch_plan *p, const char **ret_step) {
    int r = 0;
    struct source *src = calloc(p->n_mounts ? p->n_mounts : 1, sizeof *src);
    if (!src)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_mounts; i++)
        src[i].fd = -1;

    /* 0. A fresh /proc for our PID namespace, attached in step 4; as root,
     * looked through for what to cover on a thread meanwhile. */
    struct proc_scan scan = {.pfd = -1, .own_net = p->unshare_net};
    pthread_t scan_tid;
    bool scanning = false;
    /* Read-only as root: proc keeps a chmod of one of its own entries
     * (/proc/loadavg, /proc/meminfo: root's, which the command is) in the
     * entry, shared by every proc instance of the host, until a reboot
     * (Landlock has no right for a chmod).  An ordinary user's command
     * may not chmod them, and writes the nested user namespace's id maps
     * through this /proc. */
    int proc_mnt = fresh_proc(p->uid == 0);
    if (proc_mnt < 0) {
        *ret_step = "mounting a fresh /proc";
        r = proc_mnt;
        goto out;
    }
    if (p->uid == 0) {
        /* (fsmount's descriptor is an O_PATH one: not one to list) */
        if ((scan.pfd = openat(proc_mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            *ret_step = "opening the fresh /proc";
            r = -errno;
            goto out;
        }
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) == 0) {
            scanning = pthread_attr_setstacksize(&attr, 256 * 1024) == 0 &&
                       pthread_create(&scan_tid, &attr, scan_thread, &scan) == 0;
            pthread_attr_destroy(&attr);
        }
        if (!scanning) /* here, then */
            scan_thread(&scan);
    }

    /* 1. Grab every bind source while host paths still resolve. */
    for (size_t i = 0; i < p->n_mounts && r >= 0; i++)
        if (p->mounts[i].kind == PLAN_BIND_RO || p->mounts[i].kind == PLAN_BIND_RW)
            r = grab_source(&p->mounts[i], &src[i], ret_step);
    if (r < 0)
        goto out;

    PV_MARK("I_grabbed");
    /* 2. The new root: a tmpfs (private to this mount namespace). */
    if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16777216") < 0) {
        *ret_step = "mounting the tmpfs root";
        r = -errno;
        goto out;
    }

    /* 3. Projections, tmpfs, deny rules: in plan order (parents first). */
    for (size_t i = 0; i < p->n_mounts && r >= 0; i++)
        r = attach(NEWROOT, &p->mounts[i], &src[i], ret_step);
    if (r < 0)
        goto out;

    PV_MARK("I_attached");
    /* 3b. Host unix sockets in projected toolchains and grants. */
    if ((r = cover_sockets(p, src, NEWROOT, ret_step)) < 0)
        goto out;

    {
        _cleanup_close_ int rootfd = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0) {
            *ret_step = "opening the new root";
            r = -errno;
            goto out;
        }
        if ((p->dns_stub && (r = shadow_resolv_conf(rootfd, ret_step)) < 0) ||
            (p->hostname && (r = shadow_hosts(rootfd, p->hostname, ret_step)) < 0))
            goto out;
    }

    PV_MARK("I_sockets");
    /* 4. /dev extras, a fresh /proc for our PID namespace, /tmp. */
    if ((r = setup_dev(p, NEWROOT, ret_step)) < 0)
        goto out;
    if ((r = mkdir_p(NEWROOT "/proc", 0555)) < 0) {
        *ret_step = "creating /proc";
        goto out;
    }
    if (sys_move_mount(proc_mnt, "", AT_FDCWD, NEWROOT "/proc", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
        *ret_step = "mounting a fresh /proc";
        r = -errno;
        goto out;
    }
    PV_MARK("I_proc");
    /* proc_mnt names the attached /proc's root from here on */
    if ((r = cover_proc_keys(proc_mnt, NEWROOT, ret_step)) < 0)
        goto out;
    if (scanning) {
        pthread_join(scan_tid, NULL);
        scanning = false;
    }
    if (p->uid == 0 && scan.r < 0) {
        *ret_step = scan.step;
        r = scan.r;
        goto out;
    }
    if (p->uid == 0 && ((r = cover_root_only_proc(proc_mnt, NEWROOT, &scan, ret_step)) < 0 ||
                        (r = proc_read_only(proc_mnt, ret_step)) < 0))
        goto out;

    PV_MARK("I_covers");
    /* 5. Enter it: pivot_root(".", ".") stacks the old root under the new
     * one; detaching it leaves nothing of the host tree reachable. */
    if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0) {
        *ret_step = "pivot_root into the synthetic root";
        r = -errno;
        goto out;
    }
    if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
        *ret_step = "detaching the old root";
        r = -errno;
        goto out;
    }
    /* The root tmpfs itself becomes read-only: no new top-level entries. */
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (sys_mount_setattr(AT_FDCWD, "/", 0, &ro) < 0) {
        *ret_step = "making the synthetic root read-only";
        r = -errno;
        goto out;
    }
out:
    if (scanning) /* a step before /proc's failed */
        pthread_join(scan_tid, NULL);
    for (size_t i = 0; i < scan.n; i++)
        free(scan.found[i].rel);
    free(scan.found);
    if (scan.pfd >= 0)
        close(scan.pfd);
    if (proc_mnt >= 0)
        close(proc_mnt);
    for (size_t i = 0; i < ARRAY_SIZE(cover_tpl); i++)
        if (cover_tpl[i] >= 0) {
            close(cover_tpl[i]);
            cover_tpl[i] = -1;
        }
    for (size_t i = 0; i < p->n_mounts; i++) {
        if (src[i].fd >= 0)
            close(src[i].fd);
        free(src[i].symlink);
    }
    free(src);
    return r;
}
