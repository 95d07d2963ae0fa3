/* session.c: overlay_start/overlay_stop: mount, worker threads, teardown.
 *
 * Mounting: /dev/fuse is opened here (O_CLOEXEC) and mount(2) is called
 * directly ("fuse.pvisor", nosuid,nodev, default_permissions so the kernel
 * checks permissions against the attributes we report, allow_other which
 * the kernel confines to the mounting user namespace); the fd is handed to
 * libfuse as "/dev/fd/N".  No fusermount, no setuid helper.
 *
 * Threads: workers each loop fuse_session_receive_buf/process_buf; one
 * starts with the mount, and the worker that takes a request while no other
 * waits for one starts another, up to n (so an idle view costs one thread
 * and a busy one gets its n without a setting).  overlay_stop wakes those
 * waiting for a request with a signal (their read fails with EINTR), so it
 * can stop them even if the file system lives on (a process holding a file
 * of the lazily unmounted view open, another mount namespace still holding
 * the view); closing /dev/fuse then aborts the connection for those
 * holders (ENOTCONN).
 *
 * All server state hangs off struct ov (fuse_req_userdata); no globals.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#define OV_DEFAULT_THREADS 4
#define OV_MAX_THREADS 64
#define OV_DEFAULT_LOWER_CACHE_MS 1000
/* overlay_stop wakes a worker again after this long */
#define OV_WAKE_AGAIN_MS 2
/* kept free on the stage's file system: 2%, at most 128 MiB and 10,000
 * inodes (room for the seal, the Bundle and the user's other programs) */
#define OV_RESERVE_PERCENT 2
#define OV_RESERVE_MAX_BYTES (128ULL << 20)
#define OV_RESERVE_MAX_INODES 10000ULL

struct overlay {
    struct ov ov;
};

/* The request a worker serves, for the operations that may copy a file up
 * or digest a lower one (copyup.c: copy_cancelled).  A copy of a large
 * file (a sparse one: 100 GiB of holes, a minute of hashing) holds its
 * process in the kernel until the server answers, a killed one too: the
 * run outlived --timeout and Ctrl-C by that long (found by a red-team
 * pass). */
_Thread_local fuse_req_t ov_current_req;
_Thread_local unsigned long ov_current_serial;

#define OV_SERVING(call)                                                                                               \
    do {                                                                                                               \
        ov_current_req = req;                                                                                          \
        ov_current_serial++;                                                                                           \
        call;                                                                                                          \
        ov_current_req = NULL;                                                                                         \
    } while (0)

static void serve_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
    OV_SERVING(ov_op_setattr(req, ino, attr, to_set, fi));
}
static void serve_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
    OV_SERVING(ov_op_unlink(req, parent, name));
}
static void serve_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
    OV_SERVING(ov_op_rmdir(req, parent, name));
}
static void serve_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                         unsigned int flags) {
    OV_SERVING(ov_op_rename(req, parent, name, newparent, newname, flags));
}
static void serve_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
    OV_SERVING(ov_op_link(req, ino, newparent, newname));
}
static void serve_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    OV_SERVING(ov_op_open(req, ino, fi));
}
static void serve_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                           int flags) {
    OV_SERVING(ov_op_setxattr(req, ino, name, value, size, flags));
}
static void serve_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
    OV_SERVING(ov_op_removexattr(req, ino, name));
}
static void serve_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    OV_SERVING(ov_op_create(req, parent, name, mode, fi));
}
static void serve_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    OV_SERVING(ov_op_fallocate(req, ino, mode, off, len, fi));
}

static const struct fuse_lowlevel_ops ov_ops = {
    .init = ov_op_init,
    .lookup = ov_op_lookup,
    .forget = ov_op_forget,
    .forget_multi = ov_op_forget_multi,
    .getattr = ov_op_getattr,
    .setattr = serve_setattr,
    .readlink = ov_op_readlink,
    .mknod = ov_op_mknod,
    .mkdir = ov_op_mkdir,
    .unlink = serve_unlink,
    .rmdir = serve_rmdir,
    .symlink = ov_op_symlink,
    .rename = serve_rename,
    .link = serve_link,
    .open = serve_open,
    .read = ov_op_read,
    .write_buf = ov_op_write_buf,
    /* no .flush: close() of a local file reports nothing, and without the
     * handler the kernel stops sending FLUSH on every close(2) */
    .release = ov_op_release,
    .fsync = ov_op_fsync,
    .opendir = ov_op_opendir,
    .readdir = ov_op_readdir,
    .readdirplus = ov_op_readdirplus,
    .releasedir = ov_op_releasedir,
    .fsyncdir = ov_op_fsyncdir,
    .statfs = ov_op_statfs,
    .setxattr = serve_setxattr,
    .getxattr = ov_op_getxattr,
    .listxattr = ov_op_listxattr,
    .removexattr = serve_removexattr,
    .create = serve_create,
    .fallocate = serve_fallocate,
    .lseek = ov_op_lseek,
};

static void free_buf(void *p) {
    struct fuse_buf *b = p;
    free(b->mem);
    b->mem = NULL;
}

static void *worker(void *arg);

/* The signal that wakes a worker waiting for a request (overlay_stop): its
 * handler does nothing, and restarts nothing.  Not pthread_cancel(): its
 * first call loads libgcc_s (a dlopen), and each cancelled worker unwinds,
 * at the end of every run.  A standard signal, not a real-time one: sent
 * again every OV_WAKE_AGAIN_MS to a worker that does not wake (one in a
 * long write), it stays one pending signal, where real-time ones queue up
 * to the user's RLIMIT_SIGPENDING (seen: timer_create failing with EAGAIN
 * in the user's other programs).  SIGURG: nothing in the supervisor uses
 * it, and it is ignored by default in the programs it starts.
 *
 * Anyone of the user's may send it to pvisor (kill -URG, a storm of them):
 * a process-directed signal goes to any thread that does not block it, and
 * with the handler (which restarts nothing) it would interrupt that
 * thread's wait (the run's poll and waitpid, the launcher's report, the
 * broker's and the agent socket's) with EINTR.  So only the workers take
 * it: overlay_start and overlay_stop block it in the calling thread (and
 * so in every thread that one starts later: the broker's, the agent
 * socket's, the home view's teardown); and the handler is installed only
 * at the first stop, when it is needed: until then the signal, ignored by
 * default, interrupts nothing anywhere. */
static int ov_wake_signal(void) {
    return SIGURG;
}

static void ov_wake(int sig) {
    (void)sig;
}

static void install_wake(void) {
    struct sigaction sa = {.sa_handler = ov_wake};
    sigemptyset(&sa.sa_mask);
    sigaction(ov_wake_signal(), &sa, NULL);
}

/* The wake signal blocked in the calling thread (see ov_wake_signal). */
static void block_wake_here(void) {
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, ov_wake_signal());
    pthread_sigmask(SIG_BLOCK, &wake, NULL);
}

/* Start one more worker unless there are n_threads already or the overlay
 * is stopping.  Returns 0 or -errno. */
static int spawn_worker(struct ov *ov) {
    int r = 0;
    pthread_mutex_lock(&ov->thread_lock);
    if (!ov->stopping && ov->n_started < ov->n_threads) {
        int e = pthread_create(&ov->threads[ov->n_started], NULL, worker, ov);
        if (e == 0)
            ov->n_started++;
        else
            r = -e;
    }
    pthread_mutex_unlock(&ov->thread_lock);
    return r;
}

static void *worker(void *arg) {
    struct ov *ov = arg;
    struct fuse_buf buf = {0};
    /* the wake signal gets through whatever mask the thread inherited
     * (pvisor's parent may have started it with that signal blocked: the
     * stop waited for good wherever the view outlived the unmount) */
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, ov_wake_signal());
    pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
    /* told apart from the supervisor's other threads (ps -L, /proc) */
    pthread_setname_np(pthread_self(), "pvisor-view");
    while (!fuse_session_exited(ov->se)) {
        atomic_fetch_add(&ov->idle_workers, 1);
        int res = fuse_session_receive_buf(ov->se, &buf);
        /* The last idle worker took a request: have another one wait for
         * the next (a failure only means fewer workers). */
        if (atomic_fetch_sub(&ov->idle_workers, 1) == 1 && res > 0)
            (void)spawn_worker(ov);
        if (res == -EINTR || res == -EAGAIN)
            continue;
        if (res <= 0) {
            fuse_session_exit(ov->se);
            break;
        }
        fuse_session_process_buf(ov->se, &buf);
    }
    free_buf(&buf);
    return NULL;
}

/* Count what the upper already holds (reopened stage): every object's
 * st_blocks, as the operations that change them keep it. */
static void account_tree(struct ov *ov, int dir_fd, unsigned depth) {
    if (depth > 4096)
        return;
    DIR *d = NULL;
    if (opendir_at(dir_fd, ".", &d) < 0)
        return;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        atomic_fetch_add(&ov->upper_inodes, 1);
        atomic_fetch_add(&ov->upper_bytes, (int64_t)st.st_blocks * 512);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                account_tree(ov, sub, depth + 1);
                close(sub);
            }
        }
    }
    closedir(d);
}

/* First run on a fresh stage: the upper root takes the workspace root's
 * owner, mode, times and xattrs, and its inode number. */
/* Does /proc/self/MAP map every id as itself (the initial namespace's
 * "0 0 4294967295")? */
static bool maps_every_id(const char *map) {
    _cleanup_fclose_ FILE *f = fopen(map, "re");
    unsigned long in, out, count;
    return f && fscanf(f, "%lu %lu %lu", &in, &out, &count) == 3 && in == 0 && out == 0 && count == 4294967295UL;
}

static int init_root(struct ov *ov) {
    struct stat ust, lst;
    if (fstat(ov->upper_fd, &ust) < 0 || fstat(ov->lower_fd, &lst) < 0)
        return -errno;
    uint64_t dummy;
    if (stage_origin_get(ov->stage, ust.st_ino, &dummy))
        return 0;
    if (fchown(ov->upper_fd, lst.st_uid, lst.st_gid) < 0 && errno != EPERM && errno != EINVAL)
        return -errno;
    /* not permitted (an ordinary user's run): the root shows the workspace
     * root's owner all the same (as root, mode 0755: nothing can be created
     * at the top, as on the host) */
    struct stat now;
    if (fstat(ov->upper_fd, &now) < 0)
        return -errno;
    int r = ov_owner_keep(ov->upper_fd, &now, lst.st_uid, lst.st_gid);
    if (r < 0)
        return r;
    _cleanup_close_ int lp = openat(ov->lower_fd, ".", O_PATH | O_CLOEXEC);
    if (lp < 0)
        return -errno;
    r = ov_copy_xattrs(lp, ov->upper_fd, true);
    if (r < 0)
        return r;
    if (fchmod(ov->upper_fd, lst.st_mode & 07777) < 0)
        return -errno;
    struct timespec ts[2] = {lst.st_atim, lst.st_mtim};
    if (futimens(ov->upper_fd, ts) < 0)
        return -errno;
    return stage_origin_add(ov->stage, ust.st_ino, lst.st_ino);
}

static void ov_release(struct overlay *o, struct overlay_stats *ret_stats) {
    struct ov *ov = &o->ov;
    if (ov->se)
        fuse_session_destroy(ov->se);
    ov_fh_free_all(ov); /* the handles the kernel never released */
    pthread_mutex_lock(&ov->dirh_lock);
    ov_dirhs_free(ov);
    ov_listings_free(ov);
    pthread_mutex_unlock(&ov->dirh_lock);
    if (ret_stats)
        overlay_get_stats(o, ret_stats);
    pthread_mutex_lock(&ov->tree_lock);
    ov_table_free(ov);
    pthread_mutex_unlock(&ov->tree_lock);
    ov_aliases_free(ov);
    for (size_t i = 0; i < ov->n_mask; i++) {
        free(ov->mask[i]);
        free(ov->mask_base[i]);
    }
    free(ov->mask);
    free(ov->mask_base);
    free(ov->mask_sealed);
    free(ov->mask_ids);
    free(ov->mlinks);
    for (size_t i = 0; i < ov->n_walk_fd; i++)
        close(ov->walk_fd[i]);
    free(ov->walk_fd);
    pthread_mutex_destroy(&ov->mlink_lock);
    free(ov->root);
    free(ov->threads);
    free(ov->mountpoint);
    pthread_rwlock_destroy(&ov->ns_lock);
    pthread_rwlock_destroy(&ov->data_lock);
    pthread_mutex_destroy(&ov->tree_lock);
    pthread_mutex_destroy(&ov->fh_lock);
    for (size_t i = 0; i < OV_DATA_STRIPES; i++)
        pthread_mutex_destroy(&ov->data_stripe[i]);
    pthread_mutex_destroy(&ov->shared_lock);
    pthread_mutex_destroy(&ov->dirh_lock);
    free(ov->shared_ino);
    pthread_mutex_destroy(&ov->thread_lock);
    free(o);
}

/* Copy the masks (see overlay_params.mask and .sealed): paths, their last
 * components, and whether each is sealed. */
static int copy_mask(struct ov *ov, const char *const *mask, size_t n_mask, const char *const *sealed,
                     size_t n_sealed) {
    size_t n = n_mask + n_sealed;
    if (!n)
        return 0;
    ov->mask = calloc(n, sizeof *ov->mask);
    ov->mask_base = calloc(n, sizeof *ov->mask_base);
    ov->mask_sealed = calloc(n, sizeof *ov->mask_sealed);
    if (!ov->mask || !ov->mask_base || !ov->mask_sealed)
        return -ENOMEM;
    for (; ov->n_mask < n; ov->n_mask++) {
        bool is_sealed = ov->n_mask >= n_mask;
        const char *m = is_sealed ? sealed[ov->n_mask - n_mask] : mask[ov->n_mask];
        ov->mask_sealed[ov->n_mask] = is_sealed;
        ov->n_sealed += is_sealed;
        if (!m[0] || m[0] == '/' || m[strlen(m) - 1] == '/')
            return -EINVAL;
        const char *base = strrchr(m, '/');
        ov->mask[ov->n_mask] = strdup(m);
        ov->mask_base[ov->n_mask] = strdup(base ? base + 1 : m);
        if (!ov->mask[ov->n_mask] || !ov->mask_base[ov->n_mask]) {
            free(ov->mask[ov->n_mask]);
            free(ov->mask_base[ov->n_mask]);
            return -ENOMEM;
        }
    }
    return 0;
}

int overlay_start(const struct overlay_params *p, struct overlay **ret_ov) {
    if (!p || !p->stage || !p->mountpoint || p->mountpoint[0] != '/' || p->lower_fd < 0 || !ret_ov)
        return -EINVAL;
    block_wake_here(); /* before any worker: see ov_wake_signal */
    struct overlay *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    struct ov *ov = &o->ov;
    pthread_rwlock_init(&ov->ns_lock, NULL);
    /* Writer-preferring, so a quiesce is not starved by a stream of
     * writes; safe because no thread takes it for reading twice. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ov->data_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&ov->tree_lock, NULL);
    pthread_mutex_init(&ov->fh_lock, NULL);
    for (size_t i = 0; i < OV_DATA_STRIPES; i++)
        pthread_mutex_init(&ov->data_stripe[i], NULL);
    pthread_mutex_init(&ov->shared_lock, NULL);
    pthread_mutex_init(&ov->dirh_lock, NULL);
    pthread_mutex_init(&ov->thread_lock, NULL);
    pthread_mutex_init(&ov->mlink_lock, NULL);
    ov->lower_fd = p->lower_fd;
    ov->stage = p->stage;
    ov->upper_fd = stage_upper_fd(p->stage);
    /* half of what is left under our descriptor limit for cached upper
     * fds; open files (one fd each) and everything else use the rest */
    struct rlimit nofile;
    long lim =
        getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY ? (long)nofile.rlim_cur : 1024;
    ov->upper_fd_budget = lim > 256 ? (lim - 128) / 2 : 64;
    ov->fd_limit = lim;
    struct statvfs sv;
    ov->blksize = 4096;
    if (fstatvfs(ov->upper_fd, &sv) == 0) {
        if (sv.f_bsize >= 512 && sv.f_bsize <= (1u << 20))
            ov->blksize = sv.f_bsize;
        ov->reserve_bytes = (uint64_t)sv.f_blocks * sv.f_frsize / 100 * OV_RESERVE_PERCENT;
        if (ov->reserve_bytes > OV_RESERVE_MAX_BYTES)
            ov->reserve_bytes = OV_RESERVE_MAX_BYTES;
        ov->reserve_inodes = (uint64_t)sv.f_files / 100 * OV_RESERVE_PERCENT;
        if (ov->reserve_inodes > OV_RESERVE_MAX_INODES)
            ov->reserve_inodes = OV_RESERVE_MAX_INODES;
    }
    ov->work_fd = stage_work_fd(p->stage);
    ov->max_bytes = p->max_bytes;
    ov->max_inodes = p->max_inodes;
    ov->self_uid = geteuid();
    /* root with every id mapped gives each copy its owner; any other run
     * keeps the owners it cannot give in an xattr (OV_XATTR_OWNER), which
     * its getattr reads */
    ov->can_chown = ov->self_uid == 0 && maps_every_id("/proc/self/uid_map") && maps_every_id("/proc/self/gid_map");
    /* The fine clock: since Linux 6.13 (multigrain timestamps) a ctime may
     * be finer than the coarse clock, which lags it by up to a tick, so a
     * file written a millisecond before the run read as changed during it
     * (a false changed_during_run).  A change in the first tick of the run
     * on a file system stamping coarse times may read as before it. */
    clock_gettime(CLOCK_REALTIME, &ov->started);
    ov->self_gid = getgid();
    ov->host_ids = userns_ids_are_host();
    ov->own_group = p->own_group;
    ov->hide_stages = p->hide_stages;
    ov->lower_timeout = p->lower_cache_ms < 0    ? 0.0
                        : p->lower_cache_ms == 0 ? OV_DEFAULT_LOWER_CACHE_MS / 1000.0
                                                 : p->lower_cache_ms / 1000.0;
    ov->n_threads = p->n_threads ? p->n_threads : OV_DEFAULT_THREADS;
    if (ov->n_threads > OV_MAX_THREADS)
        ov->n_threads = OV_MAX_THREADS;
    ov->mountpoint = strdup(p->mountpoint);
    ov->root = calloc(1, sizeof(*ov->root));
    ov->threads = calloc(ov->n_threads, sizeof(pthread_t));
    int r = 0;
    if (!ov->mountpoint || !ov->root || !ov->threads) {
        r = -ENOMEM;
        goto fail;
    }
    if ((r = copy_mask(ov, p->mask, p->n_mask, p->sealed, p->n_sealed)) < 0 || (r = ov_mask_ids_init(ov)) < 0)
        goto fail;
    if ((r = ov_walk_roots_init(ov, p)) < 0)
        goto fail;
    ov->root->type = S_IFDIR;
    ov->root->lower = true;
    ov->root->upper_fd = -1;
    ov->root->kept_lower_fd = -1;
    ov->root->nlookup = 1;
    ov->root->hashed = true;

    ov_cookie_key_init(ov);
    if ((r = init_root(ov)) < 0)
        goto fail;
    struct stat rst; /* the root directory's blocks count too: they grow with it */
    if (fstat(ov->upper_fd, &rst) == 0)
        atomic_store(&ov->upper_bytes, (int64_t)rst.st_blocks * 512);
    account_tree(ov, ov->upper_fd, 0);

    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    if (fuse_opt_add_arg(&args, "pvisor") < 0 ||
        (getenv("PVISOR_OVERLAY_DEBUG") && fuse_opt_add_arg(&args, "-d") < 0)) {
        fuse_opt_free_args(&args);
        r = -ENOMEM;
        goto fail;
    }
    ov->se = fuse_session_new(&args, &ov_ops, sizeof(ov_ops), ov);
    fuse_opt_free_args(&args);
    if (!ov->se) {
        r = -EIO;
        goto fail;
    }

    int fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fuse_fd < 0) {
        r = -errno;
        goto fail;
    }
    char opts[256], fdpath[32];
    int m = snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=%u,group_id=%u,default_permissions,allow_other",
                     fuse_fd, (unsigned)getuid(), (unsigned)getgid());
    snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", fuse_fd);
    if (m < 0 || (size_t)m >= sizeof opts) {
        close(fuse_fd);
        r = -EOVERFLOW;
        goto fail;
    }
    if (mount("pvisor", ov->mountpoint, "fuse.pvisor", MS_NOSUID | MS_NODEV, opts) < 0) {
        r = -errno;
        close(fuse_fd);
        goto fail;
    }
    if (fuse_session_mount(ov->se, fdpath) != 0) {
        umount2(ov->mountpoint, MNT_DETACH);
        close(fuse_fd);
        r = -EIO;
        goto fail;
    }
    r = spawn_worker(ov);
    /* under the lock: that worker may already be starting another */
    pthread_mutex_lock(&ov->thread_lock);
    unsigned started = ov->n_started;
    pthread_mutex_unlock(&ov->thread_lock);
    if (r < 0 || started == 0) {
        overlay_stop(o);
        return r < 0 ? r : -EAGAIN;
    }
    *ret_ov = o;
    return 0;
fail:
    ov_release(o, NULL);
    return r;
}

int overlay_stop(struct overlay *o) {
    return overlay_stop_stats(o, NULL);
}

int overlay_stop_stats(struct overlay *o, struct overlay_stats *ret_stats) {
    if (!o)
        return 0;
    struct ov *ov = &o->ov;
    int r = 0;
    block_wake_here();
    static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
    pthread_once(&wake_once, install_wake);
    if (umount2(ov->mountpoint, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        r = -errno;
    fuse_session_exit(ov->se);
    pthread_mutex_lock(&ov->thread_lock);
    ov->stopping = true; /* from here on, n_started does not change */
    pthread_mutex_unlock(&ov->thread_lock);
    /* A worker waiting for a request is woken by the signal (its read
     * fails with EINTR) and sees the session exited, or has seen the
     * connection end (ENODEV: the view's last mount went above).  One that
     * got the signal just before its read is sent it again. */
    for (unsigned i = 0; i < ov->n_started; i++)
        pthread_kill(ov->threads[i], ov_wake_signal());
    for (unsigned i = 0; i < ov->n_started; i++) {
        for (;;) {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_nsec += OV_WAKE_AGAIN_MS * 1000000L;
            if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
            }
            if (pthread_timedjoin_np(ov->threads[i], NULL, &deadline) != ETIMEDOUT)
                break;
            pthread_kill(ov->threads[i], ov_wake_signal());
        }
    }
    ov_release(o, ret_stats);
    return r;
}

void overlay_quiesce(struct overlay *o) {
    struct ov *ov = &o->ov;
    ov_wrlock(ov);
    pthread_rwlock_wrlock(&ov->data_lock);
}

void overlay_resume(struct overlay *o) {
    struct ov *ov = &o->ov;
    pthread_rwlock_unlock(&ov->data_lock);
    ov_unlock(ov);
}

int overlay_room(struct overlay *o, uint64_t *ret_room, uint64_t *ret_reserve) {
    struct ov *ov = &o->ov;
    struct statvfs sv;
    if (fstatvfs(ov->upper_fd, &sv) < 0)
        return -errno;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    *ret_room = avail > ov->reserve_bytes ? avail - ov->reserve_bytes : 0;
    *ret_reserve = ov->reserve_bytes;
    return 0;
}

void overlay_get_stats(struct overlay *o, struct overlay_stats *ret_stats) {
    struct ov *ov = &o->ov;
    int64_t b = atomic_load(&ov->upper_bytes), i = atomic_load(&ov->upper_inodes);
    *ret_stats = (struct overlay_stats){
        .copy_ups = atomic_load(&ov->copy_ups),
        .whiteouts = atomic_load(&ov->whiteouts),
        .quota_refusals = atomic_load(&ov->quota_refusals),
        .dir_listings = atomic_load(&ov->dir_listings),
        .upper_bytes = b > 0 ? (uint64_t)b : 0,
        .upper_inodes = i > 0 ? (uint64_t)i : 0,
        .mutated = atomic_load(&ov->mutated),
        .links_unknown = atomic_load(&ov->mlinks_state) < 0 ? atomic_load(&ov->mlinks_state) : 0,
    };
}
