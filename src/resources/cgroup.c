/* cgroup.c: see cgroup.h.  Every file of the hierarchy is reached relative
 * to a directory descriptor of C or of the leaf; names we create are fixed
 * and made only of the run id. */
#include "resources/cgroup.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define CG_FILE_LIMIT (64u << 10)
#define CG_DRAIN_MS 5000 /* how long the end waits for the killed leaf to empty */
/* A leaf younger than this is never taken for a dead run's: a pvisor that
 * does not lock its leaf (before this file did) leaves it empty between
 * creating it and moving its launcher in. */
#define CG_STALE_AFTER_S 60
/* When the leaf's CPU usage cannot be read, it is read again this soon
 * (ms), not when the whole budget could have been spent. */
#define CG_CPU_RETRY_MS 100

struct cgroup_run {
    int parent_fd; /* C */
    int leaf_fd;   /* C/<leaf> */
    /* C/<leaf>/cpu.stat (with a CPU budget) and C/<leaf>/cgroup.kill (when
     * the kernel has it), opened when the leaf was made, or -1.  Kept
     * open: the command can use up the supervisor's descriptors (one per
     * file it holds open in the views), and the budget's check and the
     * kill must not then need a new one (opened anew each time, both
     * failed at EMFILE: the budget was never enforced nor the tree
     * killed). */
    int cpu_stat_fd, kill_fd;
    char leaf[96];          /* "pvisor-<run>" */
    char sup[112];          /* "pvisor-<run>-supervisor", "" when not moved */
    char enabled[32];       /* controllers we enabled in C ("memory pids"), "" none */
    char path[PATH_MAX];    /* the leaf's directory, for the evidence */
    bool is_root;           /* C is the hierarchy's root */
    uint64_t cpu_budget_us; /* 0: none */
    long ncpu;
    bool killed_by_budget;
};

/* snprintf for messages, where truncation is acceptable. */
__attribute__((format(printf, 3, 4))) static void say(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* ---- pure parsers -------------------------------------------------------- */

bool cgroup_list_has(const char *list, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " \t\n");
        size_t n = strcspn(p, " \t\n");
        if (n == wl && strncmp(p, word, wl) == 0)
            return true;
        p += n;
    }
    return false;
}

static int copy_str(char *dst, size_t size, const char *src, size_t len) {
    if (len >= size)
        return -ENAMETOOLONG;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

int cgroup_parse_self(const char *text, char *ret, size_t size) {
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > 3 && strncmp(line, "0::", 3) == 0 && line[3] == '/')
            return copy_str(ret, size, line + 3, len - 3);
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int cgroup_parse_self_v1(const char *text, const char *controller, char *ret, size_t size) {
    size_t cl = strlen(controller);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - (c1 + 1))) : NULL;
        /* "N:a,b,c:/path": controller among the comma-separated names */
        for (const char *p = c1 ? c1 + 1 : NULL; c2 && p < c2 && c2[1] == '/';) {
            const char *comma = memchr(p, ',', (size_t)(c2 - p));
            const char *e = comma ? comma : c2;
            if ((size_t)(e - p) == cl && strncmp(p, controller, cl) == 0)
                return copy_str(ret, size, c2 + 1, (size_t)(end - (c2 + 1)));
            p = e + 1;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int cgroup_parse_mountinfo(const char *text, const char *path, char *ret_mount, size_t mount_size, char *ret_root,
                           size_t root_size) {
    /* "id parent major:minor root mountpoint options [optional...] - fstype
     * source super-options"; fields never hold a raw space (escaped). */
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *end = line + len;
        const char *f[5];
        size_t fl[5];
        const char *p = line;
        int n = 0;
        for (; n < 5 && p < end; n++) {
            f[n] = p;
            const char *sp = memchr(p, ' ', (size_t)(end - p));
            fl[n] = sp ? (size_t)(sp - p) : (size_t)(end - p);
            p = sp ? sp + 1 : end;
        }
        /* The separator: the first " - " after the fixed fields. */
        const char *sep = NULL;
        for (const char *q = p - 1; n == 5 && q + 3 <= end; q++)
            if (q[0] == ' ' && q[1] == '-' && q[2] == ' ') {
                sep = q;
                break;
            }
        if (sep && (size_t)(end - (sep + 3)) >= 8 && strncmp(sep + 3, "cgroup2 ", 8) == 0) {
            char root[PATH_MAX];
            if (mountinfo_unescape(f[3], fl[3], root, sizeof root) == 0 && path_within(path, root)) {
                int r = mountinfo_unescape(f[4], fl[4], ret_mount, mount_size);
                return r < 0 ? r : copy_str(ret_root, root_size, root, strlen(root));
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int cgroup_keyed_value(const char *text, const char *key, int64_t *ret) {
    size_t kl = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            const char *v = line + kl + 1;
            if (strncmp(v, "max", 3) == 0 && (v[3] == '\n' || v[3] == '\0')) {
                *ret = INT64_MAX;
                return 0;
            }
            char *e;
            errno = 0;
            long long x = strtoll(v, &e, 10);
            if (errno || e == v || x < 0 || (*e != '\n' && *e != '\0'))
                return -EINVAL;
            *ret = x;
            return 0;
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

/* ---- files of the hierarchy ----------------------------------------------- */

static int cg_write(int dirfd, const char *name, const char *text) {
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

static int cg_read_value(int dirfd, const char *name, const char *key, int64_t *ret) {
    _cleanup_free_ char *buf = NULL;
    int r = read_file_at(dirfd, name, CG_FILE_LIMIT, &buf, NULL);
    if (r < 0)
        return r;
    if (!key) { /* a single-value file (memory.peak) */
        char *e;
        errno = 0;
        long long x = strtoll(buf, &e, 10);
        if (errno || e == buf || x < 0)
            return -EINVAL;
        *ret = x;
        return 0;
    }
    return cgroup_keyed_value(buf, key, ret);
}

static bool writable_at(int dirfd, const char *name) {
    return faccessat(dirfd, name, W_OK, AT_EACCESS) == 0;
}

int cgroup_locate(struct cgroup_where *ret) {
    struct cgroup_where w = {0};
    _cleanup_free_ char *self = NULL, *mi = NULL;
    char root[PATH_MAX];
    int r = read_file_at(AT_FDCWD, "/proc/self/cgroup", CG_FILE_LIMIT, &self, NULL);
    if (r >= 0)
        r = cgroup_parse_self(self, w.path, sizeof w.path);
    if (r < 0) {
        say(w.reason, sizeof w.reason, "not in a cgroup v2 hierarchy (no \"0::\" line in /proc/self/cgroup)");
        *ret = w;
        return -ENOENT;
    }
    r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4u << 20, &mi, NULL);
    if (r >= 0)
        r = cgroup_parse_mountinfo(mi, w.path, w.mount, sizeof w.mount, root, sizeof root);
    if (r < 0) {
        say(w.reason, sizeof w.reason, "no cgroup2 mount holding %s in /proc/self/mountinfo", w.path);
        *ret = w;
        return -ENOENT;
    }
    const char *rel = w.path + (strcmp(root, "/") == 0 ? 0 : strlen(root));
    w.is_root = rel[0] == '\0' || strcmp(rel, "/") == 0;
    int n = snprintf(w.dir, sizeof w.dir, "%s%s", w.mount, w.is_root ? "" : rel);
    if (n < 0 || (size_t)n >= sizeof w.dir) {
        say(w.reason, sizeof w.reason, "cgroup path too long");
        *ret = w;
        return -ENAMETOOLONG;
    }
    _cleanup_close_ int dfd = open(w.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_free_ char *ctl = NULL;
    if (dfd < 0 || read_file_at(dfd, "cgroup.controllers", CG_FILE_LIMIT, &ctl, NULL) < 0) {
        say(w.reason, sizeof w.reason, "%s is not readable", w.dir);
        *ret = w;
        return -EACCES;
    }
    w.memory = cgroup_list_has(ctl, "memory");
    w.pids = cgroup_list_has(ctl, "pids");
    w.cpu = cgroup_list_has(ctl, "cpu");
    w.writable =
        writable_at(dfd, ".") && writable_at(dfd, "cgroup.procs") && writable_at(dfd, "cgroup.subtree_control");
    if (!w.writable) {
        /* on a hybrid host (memory and pids bound to cgroup v1) the
         * hierarchy's root has neither: delegating it would not help, and
         * saying "not delegated" alone sends the user to try (as doctor) */
        _cleanup_close_ int mfd = open(w.mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *top = NULL;
        bool hybrid = !w.memory && !w.pids && mfd >= 0 &&
                      read_file_at(mfd, "cgroup.controllers", CG_FILE_LIMIT, &top, NULL) >= 0 &&
                      (!cgroup_list_has(top, "memory") || !cgroup_list_has(top, "pids"));
        say(w.reason, sizeof w.reason,
            hybrid ? "%s is not delegated to uid %u, and its hierarchy has no memory or pids controller (bound to "
                     "cgroup v1): delegation would not give them to the run"
                   : "%s is not delegated to uid %u (it or its cgroup.procs/subtree_control "
                     "is not writable)",
            w.dir, (unsigned)geteuid());
        *ret = w;
        return -EACCES;
    }
    *ret = w;
    return 0;
}

/* ---- the memory this process may use ------------------------------------ */

/* Lower *min to the limits in file of mount+path and of each directory
 * above it up to mount itself ("max", a missing or unreadable file: no
 * limit there).  Where a container sees only its own subtree (a cgroup
 * namespace, or a bind of its cgroup at the mount point) mount+path may
 * not exist: the directories above it and mount itself are read. */
static void lower_to_limits(const char *mount, const char *path, const char *file, uint64_t *min) {
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof dir, "%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return;
    size_t top = strlen(mount);
    for (;;) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        if (fd >= 0 && read_file_at(fd, file, CG_FILE_LIMIT, &buf, NULL) >= 0 && strncmp(buf, "max", 3) != 0) {
            char *e;
            errno = 0;
            unsigned long long v = strtoull(buf, &e, 10);
            if (errno == 0 && e != buf && (*e == '\n' || *e == '\0') && v > 0 && v < *min)
                *min = v;
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= top || !slash || (size_t)(slash - dir) < top)
            return;
        *slash = '\0';
    }
}

uint64_t cgroup_memory_limit(void) {
    uint64_t min = UINT64_MAX;
    _cleanup_free_ char *self = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/cgroup", CG_FILE_LIMIT, &self, NULL) < 0)
        return min;
    char path[PATH_MAX];
    struct statfs sf;
    if (cgroup_parse_self(self, path, sizeof path) == 0 && statfs("/sys/fs/cgroup", &sf) == 0 &&
        sf.f_type == CGROUP2_SUPER_MAGIC)
        lower_to_limits("/sys/fs/cgroup", path, "memory.max", &min);
    if (cgroup_parse_self_v1(self, "memory", path, sizeof path) == 0 && statfs("/sys/fs/cgroup/memory", &sf) == 0 &&
        sf.f_type == CGROUP_SUPER_MAGIC)
        lower_to_limits("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", &min);
    return min;
}

/* ---- the run's leaf ----------------------------------------------------- */

static int move_pid(int dirfd, const char *cg, pid_t pid) {
    char path[160], num[24];
    snprintf(path, sizeof path, "%s/cgroup.procs", cg);
    snprintf(num, sizeof num, "%d", (int)pid);
    return cg_write(dirfd, path, num);
}

/* Does C have a child cgroup besides ours?  Empty leaves that other pvisor
 * supervisors left behind are removed on the way (rmdir refuses a
 * populated one, so a live run's leaf stays). */
static bool other_children(struct cgroup_run *run) {
    _cleanup_closedir_ DIR *d = NULL;
    if (dup_opendir(run->parent_fd, &d) < 0)
        return true;
    bool others = false;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        if (de->d_type != DT_DIR || strcmp(de->d_name, run->sup) == 0 || strcmp(de->d_name, run->leaf) == 0)
            continue;
        size_t n = strlen(de->d_name);
        bool stale =
            strncmp(de->d_name, "pvisor-", 7) == 0 && n > 11 && strcmp(de->d_name + n - 11, "-supervisor") == 0;
        if (stale && unlinkat(run->parent_fd, de->d_name, AT_REMOVEDIR) == 0)
            continue;
        others = true;
    }
    return others;
}

/* Remove the leaves that supervisors killed before their end (kill -9,
 * the OOM killer) left in C: a run's leaf is flock'ed by its supervisor
 * for as long as it lives (cgroup_run_create), so one that is unlocked is
 * a dead run's, and rmdir refuses it while a process is still in it.
 * Only our names ("pvisor-<run>", and "-supervisor" siblings, which hold
 * a live supervisor), and only those not changed for CG_STALE_AFTER_S
 * (see there). */
int cgroup_stale_leaf_open(int parent_fd, const struct dirent *de) {
    if (de->d_type != DT_DIR || strncmp(de->d_name, "pvisor-", 7) != 0)
        return -1;
    _cleanup_close_ int fd = openat(parent_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (fd < 0 || fstat(fd, &st) < 0 || now.tv_sec - st.st_mtim.tv_sec < CG_STALE_AFTER_S)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        return -1; /* a live run's */
    return TAKE_FD(fd);
}

static void remove_stale_leaves(int parent_fd) {
    _cleanup_closedir_ DIR *d = NULL;
    if (dup_opendir(parent_fd, &d) < 0)
        return;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        _cleanup_close_ int fd = cgroup_stale_leaf_open(parent_fd, de);
        if (fd >= 0)
            (void)unlinkat(parent_fd, de->d_name, AT_REMOVEDIR);
    }
}

/* Undo the supervisor's move and the controllers we enabled (reverse
 * order).  Controllers stay enabled while another child of C may use them
 * (a concurrent run), and always in the hierarchy's root (disabling there
 * would strip other cgroups' limits); the supervisor then stays in its
 * leaf, which the last run out (or the delegating scope's end) removes. */
static void undo_parent(struct cgroup_run *run) {
    if (run->enabled[0] && (run->is_root || other_children(run)))
        run->enabled[0] = '\0';
    if (run->enabled[0]) {
        char buf[40] = "";
        char copy[32];
        snprintf(copy, sizeof copy, "%s", run->enabled);
        for (char *save = NULL, *c = strtok_r(copy, " ", &save); c; c = strtok_r(NULL, " ", &save)) {
            strcat(buf, buf[0] ? " -" : "-");
            strcat(buf, c);
        }
        if (cg_write(run->parent_fd, "cgroup.subtree_control", buf) < 0)
            return; /* cannot go back into C while it distributes controllers */
        run->enabled[0] = '\0';
    }
    if (run->sup[0] && !run->is_root) {
        _cleanup_free_ char *sub = NULL;
        bool distributing = read_file_at(run->parent_fd, "cgroup.subtree_control", CG_FILE_LIMIT, &sub, NULL) < 0 ||
                            strspn(sub, " \n") != strlen(sub);
        if (distributing)
            return;
        if (move_pid(run->parent_fd, ".", getpid()) == 0)
            (void)unlinkat(run->parent_fd, run->sup, AT_REMOVEDIR);
        run->sup[0] = '\0';
    }
}

/* Is the supervisor the only process in the cgroup dirfd names? */
static bool only_us(int dirfd) {
    _cleanup_free_ char *procs = NULL;
    if (read_file_at(dirfd, "cgroup.procs", CG_FILE_LIMIT, &procs, NULL) < 0)
        return false;
    for (char *save = NULL, *p = strtok_r(procs, "\n", &save); p; p = strtok_r(NULL, "\n", &save))
        if (strtol(p, NULL, 10) != (long)getpid())
            return false;
    return true;
}

static void run_free(struct cgroup_run *run) {
    if (!run)
        return;
    if (run->cpu_stat_fd >= 0)
        close(run->cpu_stat_fd);
    if (run->kill_fd >= 0)
        close(run->kill_fd);
    if (run->leaf_fd >= 0)
        close(run->leaf_fd);
    if (run->parent_fd >= 0)
        close(run->parent_fd);
    free(run);
}

int cgroup_run_create(const struct cgroup_where *w, const struct run_limits *want, const char *run_id,
                      struct cgroup_run **ret_run, bool ret_ok[_LIMIT_MAX], char *ret_reason, size_t reason_size) {
    for (int k = 0; k < _LIMIT_MAX; k++)
        ret_ok[k] = false;
    *ret_run = NULL;
    ret_reason[0] = '\0';
    if (!w->writable) {
        say(ret_reason, reason_size, "%s", w->reason);
        return 0;
    }
    struct cgroup_run *run = calloc(1, sizeof *run);
    if (!run)
        return -ENOMEM;
    run->leaf_fd = run->cpu_stat_fd = run->kill_fd = -1;
    run->is_root = w->is_root;
    run->parent_fd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (run->parent_fd < 0) {
        say(ret_reason, reason_size, "opening %s: %s", w->dir, strerror(errno));
        run_free(run);
        return 0;
    }
    /* Names: the run id with '.' replaced (a '.' name could read as a
     * controller file). */
    char id[40];
    snprintf(id, sizeof id, "%s", run_id);
    for (char *c = id; *c; c++)
        if (*c == '.')
            *c = '-';
    snprintf(run->leaf, sizeof run->leaf, "pvisor-%s", id);

    remove_stale_leaves(run->parent_fd);

    bool mem = want->mem_bytes && w->memory, pids = want->pids && w->pids;
    char why[200] = "";
    bool no_mem = want->mem_bytes && !w->memory, no_pids = want->pids && !w->pids;
    if (no_mem || no_pids)
        say(why, sizeof why, "the %s controller%s not available in %s (not delegated, or bound to cgroup v1)",
            no_mem && no_pids ? "memory and pids"
            : no_mem          ? "memory"
                              : "pids",
            no_mem && no_pids ? "s are" : " is", w->dir);

    if (mem || pids) {
        _cleanup_free_ char *sub = NULL;
        (void)read_file_at(run->parent_fd, "cgroup.subtree_control", CG_FILE_LIMIT, &sub, NULL);
        char enable[40] = "";
        if (mem && !(sub && cgroup_list_has(sub, "memory"))) {
            strcat(enable, "+memory");
            strcat(run->enabled, "memory");
        }
        if (pids && !(sub && cgroup_list_has(sub, "pids"))) {
            strcat(enable, enable[0] ? " +pids" : "+pids");
            strcat(run->enabled, run->enabled[0] ? " pids" : "pids");
        }
        int r = 0;
        if (enable[0] && !w->is_root && !only_us(run->parent_fd))
            r = -EBUSY; /* the kernel would refuse; do not even make the sibling */
        if (r >= 0 && enable[0] && !w->is_root) {
            /* C must hold no process once it distributes controllers. */
            snprintf(run->sup, sizeof run->sup, "%s-supervisor", run->leaf);
            if (mkdirat(run->parent_fd, run->sup, 0755) < 0) {
                r = -errno;
                run->sup[0] = '\0';
            } else {
                r = move_pid(run->parent_fd, run->sup, getpid());
            }
        }
        if (r >= 0 && enable[0])
            r = cg_write(run->parent_fd, "cgroup.subtree_control", enable);
        if (r < 0) {
            if (r == -EBUSY)
                say(why, sizeof why,
                    "cannot enable %s in %s: other processes share pvisor's cgroup (start pvisor in a scope of its "
                    "own: systemd-run --user --scope -p Delegate=yes pvisor run ...)",
                    run->enabled, w->dir);
            else
                say(why, sizeof why, "cannot enable %s in %s: %s", run->enabled, w->dir, strerror(-r));
            run->enabled[0] = '\0';
            undo_parent(run);
            mem = pids = false;
        }
    }

    bool made = mkdirat(run->parent_fd, run->leaf, 0755) == 0;
    if (!made ||
        (run->leaf_fd = openat(run->parent_fd, run->leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        say(ret_reason, reason_size, "creating %s/%s: %s", w->dir, run->leaf, strerror(errno));
        if (made)
            (void)unlinkat(run->parent_fd, run->leaf, AT_REMOVEDIR);
        undo_parent(run);
        run_free(run);
        return 0;
    }
    /* held until the end (leaf_fd): the leaf is a live run's (see
     * remove_stale_leaves) */
    (void)flock(run->leaf_fd, LOCK_EX | LOCK_NB);
    say(run->path, sizeof run->path, "%s/%s", w->dir, run->leaf);
    run->kill_fd = openat(run->leaf_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC | O_NOFOLLOW); /* -1 before 5.14 */

    char num[32];
    int r = 0;
    const char *step = "";
    if (mem) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)want->mem_bytes);
        step = "memory.max";
        r = cg_write(run->leaf_fd, "memory.max", num);
        /* Without this, the limit would push the tree into swap instead
         * of bounding it; absent when swap accounting is off. */
        if (r >= 0 && faccessat(run->leaf_fd, "memory.swap.max", F_OK, 0) == 0) {
            step = "memory.swap.max";
            r = cg_write(run->leaf_fd, "memory.swap.max", "0");
        }
    }
    if (r >= 0 && pids) {
        /* The launcher and the namespace's init live in the leaf too. */
        snprintf(num, sizeof num, "%llu", (unsigned long long)want->pids + CGROUP_LAUNCHER_TASKS);
        step = "pids.max";
        r = cg_write(run->leaf_fd, "pids.max", num);
    }
    int64_t usage;
    bool cpu = want->cpu_s && cg_read_value(run->leaf_fd, "cpu.stat", "usage_usec", &usage) == 0;
    if (cpu && (run->cpu_stat_fd = openat(run->leaf_fd, "cpu.stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        cpu = false;
    if (want->cpu_s && !cpu && !why[0])
        say(why, sizeof why, "%s/cpu.stat has no usage_usec", run->path);
    if (r < 0) {
        say(ret_reason, reason_size, "writing %s/%s: %s", run->path, step, strerror(-r));
        (void)cgroup_run_finish(run, NULL);
        return 0;
    }
    if (!mem && !pids && !cpu) {
        say(ret_reason, reason_size, "%s", why[0] ? why : "no requested limit can use the cgroup");
        (void)cgroup_run_finish(run, NULL);
        return 0;
    }
    run->cpu_budget_us = cpu ? want->cpu_s * 1000000ULL : 0;
    run->ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (run->ncpu < 1)
        run->ncpu = 1;
    ret_ok[LIMIT_MEM] = mem;
    ret_ok[LIMIT_PIDS] = pids;
    ret_ok[LIMIT_CPU] = cpu;
    say(ret_reason, reason_size, "%s", why);
    *ret_run = run;
    return 0;
}

int cgroup_run_attach(struct cgroup_run *run, pid_t pid) {
    char num[24];
    snprintf(num, sizeof num, "%d", (int)pid);
    return cg_write(run->leaf_fd, "cgroup.procs", num);
}

/* SIGKILL everything in the leaf: cgroup.kill (Linux 5.14+), else each
 * process listed in cgroup.procs (a fork racing this is caught by the
 * caller's retry: the leaf must end empty before it can be removed). */
static void kill_leaf(struct cgroup_run *run) {
    if (run->kill_fd >= 0 && write(run->kill_fd, "1", 1) == 1)
        return;
    if (cg_write(run->leaf_fd, "cgroup.kill", "1") == 0)
        return;
    _cleanup_free_ char *procs = NULL;
    if (read_file_at(run->leaf_fd, "cgroup.procs", CG_FILE_LIMIT, &procs, NULL) < 0)
        return;
    for (char *save = NULL, *p = strtok_r(procs, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
        long pid = strtol(p, NULL, 10);
        if (pid > 1)
            kill((pid_t)pid, SIGKILL);
    }
}

/* The leaf's usage_usec, through the descriptor kept for it. */
static int read_cpu_usage(struct cgroup_run *run, int64_t *ret) {
    if (run->cpu_stat_fd < 0)
        return cg_read_value(run->leaf_fd, "cpu.stat", "usage_usec", ret);
    char buf[4096];
    ssize_t n;
    do
        n = pread(run->cpu_stat_fd, buf, sizeof buf - 1, 0); /* offset 0: the kernel makes the text anew */
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return cgroup_keyed_value(buf, "usage_usec", ret);
}

int64_t cgroup_run_cpu_watch(struct cgroup_run *run) {
    if (!run || !run->cpu_budget_us)
        return -1;
    if (run->killed_by_budget)
        return -1;
    int64_t used;
    if (read_cpu_usage(run, &used) < 0)
        return CG_CPU_RETRY_MS; /* cannot read: check again soon */
    if ((uint64_t)used >= run->cpu_budget_us) {
        run->killed_by_budget = true;
        kill_leaf(run);
        return 0;
    }
    /* The tree cannot use more than ncpu CPU-seconds per second: nothing to
     * do before the rest of the budget could be spent at full speed. */
    int64_t ms = (int64_t)((run->cpu_budget_us - (uint64_t)used) / (uint64_t)run->ncpu / 1000);
    return ms < 10 ? 10 : ms > 60000 ? 60000 : ms;
}

/* Wait (bounded) until cgroup.events says the leaf is empty. */
static bool wait_empty(struct cgroup_run *run) {
    _cleanup_close_ int fd = openat(run->leaf_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    int64_t deadline = monotonic_ms() + CG_DRAIN_MS;
    for (;;) {
        int64_t populated = 1;
        _cleanup_free_ char *buf = NULL;
        if (read_file_at(run->leaf_fd, "cgroup.events", CG_FILE_LIMIT, &buf, NULL) < 0 ||
            cgroup_keyed_value(buf, "populated", &populated) < 0)
            return false;
        if (populated == 0)
            return true;
        kill_leaf(run);
        int64_t left = deadline - monotonic_ms();
        if (left <= 0 || fd < 0)
            return false;
        /* cgroup.events signals a change with POLLPRI (kernfs notify). */
        struct pollfd p = {.fd = fd, .events = POLLPRI};
        (void)poll(&p, 1, left > 100 ? 100 : (int)left);
    }
}

int cgroup_run_finish(struct cgroup_run *run, struct cgroup_stats *ret_stats) {
    if (!run)
        return 0;
    if (run->leaf_fd >= 0 && ret_stats) {
        struct cgroup_stats s = {-1, -1, -1, -1, -1, -1, -1, run->killed_by_budget};
        (void)cg_read_value(run->leaf_fd, "memory.peak", NULL, &s.memory_peak);
        (void)cg_read_value(run->leaf_fd, "memory.events", "max", &s.memory_max_events);
        (void)cg_read_value(run->leaf_fd, "memory.events", "oom", &s.oom_events);
        (void)cg_read_value(run->leaf_fd, "memory.events", "oom_kill", &s.oom_kill_events);
        (void)cg_read_value(run->leaf_fd, "pids.peak", NULL, &s.pids_peak);
        (void)cg_read_value(run->leaf_fd, "pids.events", "max", &s.pids_max_events);
        (void)read_cpu_usage(run, &s.cpu_usage_usec);
        *ret_stats = s;
    }
    int r = 0;
    if (run->leaf_fd >= 0) {
        kill_leaf(run);
        if (!wait_empty(run))
            r = -EBUSY;
        close(run->leaf_fd);
        run->leaf_fd = -1;
    }
    if (run->leaf[0] && unlinkat(run->parent_fd, run->leaf, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
        r = -errno;
    undo_parent(run);
    run_free(run);
    return r;
}

const char *cgroup_run_path(const struct cgroup_run *run) {
    return run ? run->path : NULL;
}
