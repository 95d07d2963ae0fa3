/* probe.c: host feature probes and executor readiness; see probe.h.
 *
 * Every probe does the real thing as the calling uid (unshare, open, the
 * syscall itself) instead of reading a kernel version.  Each records a
 * probe_status; nothing here prints, exits or keeps global state.  The
 * only process-wide effect is a short-lived child (the user namespace probe)
 * which is reaped before host_probe_run() returns.
 */
#include "evidence/probe.h"
#include "config.h"
#include "resources/cgroup.h"
#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>

/* Debian 12's headers predate some of these; the numbers are ABI. Syscalls
 * >= 424 share one number on every architecture. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef SECCOMP_SET_MODE_FILTER
#define SECCOMP_SET_MODE_FILTER 1
#endif
#ifndef SECCOMP_GET_ACTION_AVAIL
#define SECCOMP_GET_ACTION_AVAIL 2
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef SECCOMP_RET_ERRNO
#define SECCOMP_RET_ERRNO 0x00050000U
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif

#define FUSE_MAJOR 10
#define FUSE_MINOR 229
#define SMALL_FILE_LIMIT (64u << 10)

/* ---- status helpers ---------------------------------------------------- */

static void status_ok(struct probe_status *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void status_ok(struct probe_status *s, const char *fmt, ...) {
    s->ok = true;
    s->error = 0;
    s->detail[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(s->detail, sizeof s->detail, fmt, ap);
        va_end(ap);
    }
}

/* err is a negative errno or 0. */
static void status_fail(struct probe_status *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void status_fail(struct probe_status *s, int err, const char *fmt, ...) {
    s->ok = false;
    s->error = err;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(s->detail, sizeof s->detail, fmt, ap);
    va_end(ap);
}

/* Copy into a fixed buffer; -ENAMETOOLONG instead of truncating. */
static int copy_bounded(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Whether word appears as a whole token in list (separators: space, comma,
 * newline). */
static bool list_has_word(const char *list, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t')
            p++;
        size_t n = strcspn(p, " ,\n\t");
        if (n == wl && strncmp(p, word, wl) == 0)
            return true;
        p += n;
    }
    return false;
}

static const char *errno_name(int err) {
    const char *n = err ? strerrorname_np(err < 0 ? -err : err) : NULL;
    return n ? n : "unknown error";
}

/* ---- user namespaces (forked child) ----------------------------------- */

enum userns_step {
    USERNS_STEP_NONE,
    USERNS_STEP_UNSHARE,
    USERNS_STEP_SETGROUPS,
    USERNS_STEP_UID_MAP,
    USERNS_STEP_GID_MAP,
};

/* the namespaces in ns_kinds' order (util.h) */
enum { NS_MOUNT, NS_PID, NS_NET, NS_IPC, NS_UTS, NS_COUNT };
_Static_assert(NS_COUNT == NS_KINDS, "one entry per ns_kinds entry");

/* Fixed-size message from the child; errors are positive errno, 0 ok. */
struct userns_msg {
    uint32_t magic;
    int32_t userns_err;
    int32_t userns_step;
    int32_t ns_err[NS_COUNT];
    int32_t tmpfs_err;
};
#define USERNS_MSG_MAGIC 0x70765553u /* "pvUS" */
#define RUN_NAMESPACES_PENDING "not tried apart: this run makes its own (recorded once its sandbox is set up)"

/* Runs in the forked child only: no return, _exit() at the end. */
static void userns_child(int wfd, uid_t euid, gid_t egid) __attribute__((noreturn));
static void userns_child(int wfd, uid_t euid, gid_t egid) {
    struct userns_msg m = {.magic = USERNS_MSG_MAGIC, .tmpfs_err = ECANCELED};
    for (int i = 0; i < NS_COUNT; i++)
        m.ns_err[i] = ECANCELED;
    char map[64];
    int r;

    if (unshare(CLONE_NEWUSER) < 0) {
        m.userns_err = errno;
        m.userns_step = USERNS_STEP_UNSHARE;
        goto out;
    }
    /* Unprivileged gid_map writes require setgroups to be denied first; the
     * file is missing only on kernels that predate the rule. */
    r = write_string_at(AT_FDCWD, "/proc/self/setgroups", "deny");
    if (r < 0 && r != -ENOENT) {
        m.userns_err = -r;
        m.userns_step = USERNS_STEP_SETGROUPS;
        goto out;
    }
    (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)euid);
    r = write_string_at(AT_FDCWD, "/proc/self/uid_map", map);
    if (r < 0) {
        m.userns_err = -r;
        m.userns_step = USERNS_STEP_UID_MAP;
        goto out;
    }
    (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)egid);
    r = write_string_at(AT_FDCWD, "/proc/self/gid_map", map);
    if (r < 0) {
        m.userns_err = -r;
        m.userns_step = USERNS_STEP_GID_MAP;
        goto out;
    }

    for (int i = 0; i < NS_COUNT; i++) {
        m.ns_err[i] = unshare(ns_kinds[i].clone_flag) < 0 ? errno : 0;
        if (i != NS_MOUNT || m.ns_err[i] != 0)
            continue;
        /* Only inside our own, just-made mount namespace: make it private so
         * nothing propagates out, then stack a tmpfs on /. */
        if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
            m.tmpfs_err = errno;
        else if (mount("pvisor-probe", "/", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16k,mode=0700") < 0)
            m.tmpfs_err = errno;
        else
            m.tmpfs_err = 0;
    }
out:
    (void)write_all(wfd, &m, sizeof m);
    _exit(0);
}

static const char *userns_step_name(int step) {
    switch (step) {
    case USERNS_STEP_UNSHARE: return "unshare(CLONE_NEWUSER)";
    case USERNS_STEP_SETGROUPS: return "writing /proc/self/setgroups";
    case USERNS_STEP_UID_MAP: return "writing uid_map";
    case USERNS_STEP_GID_MAP: return "writing gid_map";
    default: return "user namespace setup";
    }
}

/* Explain a userns failure using the sysctls that usually cause it. */
static void userns_explain(const struct probe_userns *u, uid_t euid, int err, int step, char *buf, size_t size) {
    const char *why = "";
    if (euid != 0 && u->unprivileged_userns_clone == 0)
        why = "; kernel.unprivileged_userns_clone=0";
    else if (u->max_user_namespaces == 0)
        why = "; user.max_user_namespaces=0";
    else if (err == ENOSPC)
        why = "; user.max_user_namespaces limit reached";
    else if (u->apparmor_restrict_unprivileged_userns == 1 && step != USERNS_STEP_UNSHARE)
        why = "; AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)";
    else if (err == EINVAL || err == ENOSYS)
        why = "; kernel built without user namespaces";
    else if (err == EPERM)
        why = "; blocked by a seccomp filter, chroot or LSM";
    (void)snprintf(buf, size, "%s failed: %s (%s)%s", userns_step_name(step), strerror(err), errno_name(err), why);
}

static int probe_userns(struct probe_userns *u, uid_t euid, gid_t egid, bool try_namespaces) {
    u->unprivileged_userns_clone = sysctl_long("/proc/sys/kernel/unprivileged_userns_clone");
    u->max_user_namespaces = sysctl_long("/proc/sys/user/max_user_namespaces");
    u->apparmor_restrict_unprivileged_userns = sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");

    struct probe_status *nss[NS_COUNT] = {&u->mount_ns, &u->pid_ns, &u->net_ns, &u->ipc_ns, &u->uts_ns};
    const char *untried = try_namespaces ? "not tried: no user namespace" : RUN_NAMESPACES_PENDING;
    for (int i = 0; i < NS_COUNT; i++)
        status_fail(nss[i], -ECANCELED, "%s", untried);
    status_fail(&u->tmpfs_mount, -ECANCELED, "%s", untried);
    if (!try_namespaces) {
        status_fail(&u->userns, -ECANCELED, "%s", untried);
        return 0;
    }

    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        int r = -errno;
        status_fail(&u->userns, r, "probe could not run: pipe2: %s", strerror(-r));
        return r;
    }
    _cleanup_close_ int rfd = pfd[0];
    _cleanup_close_ int wfd = pfd[1];

    /* fork() is safe here only because the caller is single-threaded
     * (probe.h); the child never returns into the caller's code. */
    pid_t pid = fork();
    if (pid < 0) {
        int r = -errno;
        status_fail(&u->userns, r, "probe could not run: fork: %s", strerror(-r));
        return r;
    }
    if (pid == 0) {
        closep(&rfd);
        userns_child(wfd, euid, egid);
    }
    closep(&wfd);
    wfd = -1;

    struct userns_msg m;
    size_t got = 0;
    int rr = read_full(rfd, &m, sizeof m, &got);

    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0) {
        if (errno == ECHILD && rr == 0 && got == sizeof m)
            break; /* SIGCHLD ignored by the caller: already reaped, result in hand */
        if (errno != EINTR) {
            int r = -errno;
            status_fail(&u->userns, r, "probe could not run: waitpid: %s", strerror(-r));
            return r;
        }
    }
    if (rr < 0 || got != sizeof m || m.magic != USERNS_MSG_MAGIC) {
        int r = rr < 0 ? rr : -EPROTO;
        if (WIFSIGNALED(wstatus))
            status_fail(&u->userns, r, "probe child killed by signal %d (a seccomp filter?)", WTERMSIG(wstatus));
        else
            status_fail(&u->userns, r, "probe child sent no result");
        return 0; /* the probe ran: the answer is "not usable" */
    }

    if (m.userns_err) {
        char why[PROBE_DETAIL_MAX];
        userns_explain(u, euid, m.userns_err, m.userns_step, why, sizeof why);
        status_fail(&u->userns, -m.userns_err, "%s", why);
        return 0;
    }
    status_ok(&u->userns, "one-ID map: uid %u -> 0, gid %u -> 0", (unsigned)euid, (unsigned)egid);

    for (int i = 0; i < NS_COUNT; i++) {
        int e = m.ns_err[i];
        if (e == 0)
            status_ok(nss[i], NULL);
        else if (u->apparmor_restrict_unprivileged_userns == 1 && e == EPERM)
            status_fail(nss[i], -e, "unshare(%s) in user namespace: %s (AppArmor restrict_unprivileged_userns)",
                        ns_kinds[i].flag, strerror(e));
        else
            status_fail(nss[i], -e, "unshare(%s) in user namespace: %s (%s)", ns_kinds[i].flag, strerror(e),
                        errno_name(e));
    }
    if (m.ns_err[NS_MOUNT])
        status_fail(&u->tmpfs_mount, -ECANCELED, "not tried: no mount namespace");
    else if (m.tmpfs_err)
        status_fail(&u->tmpfs_mount, -m.tmpfs_err, "mount tmpfs in user+mount namespace: %s (%s)",
                    strerror(m.tmpfs_err), errno_name(m.tmpfs_err));
    else
        status_ok(&u->tmpfs_mount, NULL);
    return 0;
}

/* ---- /dev/fuse, /dev/kvm ---------------------------------------------- */

static void probe_fuse(struct probe_fuse *f) {
    struct stat st;
    if (stat("/dev/fuse", &st) < 0) {
        int r = -errno;
        status_fail(&f->usable, r, "/dev/fuse: %s", strerror(-r));
        return;
    }
    f->exists = true;
    f->is_fuse_chardev = S_ISCHR(st.st_mode) && major(st.st_rdev) == FUSE_MAJOR && minor(st.st_rdev) == FUSE_MINOR;
    if (!f->is_fuse_chardev) {
        status_fail(&f->usable, 0, "/dev/fuse is not the character device %d:%d", FUSE_MAJOR, FUSE_MINOR);
        return;
    }
    _cleanup_close_ int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int r = -errno;
        status_fail(&f->usable, r, "open(/dev/fuse, O_RDWR): %s (mode %04o, owner %u)", strerror(-r),
                    (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
        return;
    }
    f->openable = true;
    status_ok(&f->usable, "char %d:%d, opens read-write", FUSE_MAJOR, FUSE_MINOR);
}

static void probe_kvm(struct probe_kvm *k) {
    struct stat st;
    if (stat("/dev/kvm", &st) < 0) {
        int r = -errno;
        status_fail(&k->usable, r, "/dev/kvm: %s", strerror(-r));
        return;
    }
    k->exists = true;
    if (!S_ISCHR(st.st_mode)) {
        status_fail(&k->usable, 0, "/dev/kvm is not a character device");
        return;
    }
    _cleanup_close_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int r = -errno;
        status_fail(&k->usable, r, "open(/dev/kvm, O_RDWR): %s", strerror(-r));
        return;
    }
    status_ok(&k->usable, "opens read-write");
}

/* ---- Landlock ----------------------------------------------------------- */

static void probe_landlock(struct probe_landlock *l) {
    _cleanup_free_ char *lsm = NULL;
    l->lsm_listed = PROBE_UNKNOWN;
    if (read_file_at(AT_FDCWD, "/sys/kernel/security/lsm", SMALL_FILE_LIMIT, &lsm, NULL) >= 0) {
        lsm[strcspn(lsm, "\n")] = '\0';
        l->lsm_listed = list_has_word(lsm, "landlock") ? PROBE_YES : PROBE_NO;
        if (copy_bounded(l->lsm_list, sizeof l->lsm_list, lsm) < 0)
            l->lsm_list[0] = '\0';
    }

    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi >= 1) {
        l->abi = (int)abi;
        status_ok(&l->usable, "ABI %d", l->abi);
        return;
    }
    int e = abi < 0 ? errno : EINVAL;
    l->abi = 0;
    if (e == ENOSYS)
        status_fail(&l->usable, -e, "kernel built without Landlock (ENOSYS)");
    else if (e == EOPNOTSUPP)
        status_fail(&l->usable, -e,
                    "Landlock built but not active (EOPNOTSUPP): add landlock to the lsm= boot parameter");
    else
        status_fail(&l->usable, -e, "landlock_create_ruleset: %s (%s)", strerror(e), errno_name(e));
}

/* ---- seccomp ------------------------------------------------------------ */

static bool seccomp_action_avail(uint32_t action) {
    return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

static void probe_seccomp(struct probe_seccomp *s) {
    int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    s->current_mode = mode < 0 ? -1 : mode;

    /* A NULL program makes the kernel fail copying it in (EFAULT) before it
     * checks anything else, and only if filter mode exists; nothing is
     * installed. */
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, NULL);
    int e = r < 0 ? errno : 0;
    s->action_errno = seccomp_action_avail(SECCOMP_RET_ERRNO);
    s->action_kill_process = seccomp_action_avail(SECCOMP_RET_KILL_PROCESS);
    s->action_user_notif = seccomp_action_avail(SECCOMP_RET_USER_NOTIF);

    if (e != EFAULT) {
        if (e == ENOSYS || e == EINVAL)
            status_fail(&s->filter, -(e ? e : EINVAL), "kernel built without seccomp filters (%s)",
                        errno_name(e ? e : EINVAL));
        else
            status_fail(&s->filter, -(e ? e : EINVAL), "seccomp(SET_MODE_FILTER) probe: %s (%s)", strerror(e),
                        errno_name(e));
        return;
    }
    if (!s->action_errno) {
        status_fail(&s->filter, 0, "SECCOMP_RET_ERRNO not available");
        return;
    }
    status_ok(&s->filter, "filters; actions: errno%s%s; current mode %d",
              s->action_kill_process ? ", kill_process" : "", s->action_user_notif ? ", user_notif" : "",
              s->current_mode);
}

/* ---- SHA-256 (libcrypto's, linked in) ----------------------------------- */

static void probe_sha256(struct probe_status *s) {
    unsigned char d[32];
    int r = pv_sha256_buf("abc", 3, d);
    if (r < 0) {
        status_fail(s, r, "%s", strerror(-r));
        return;
    }
    if (d[0] != 0xba || d[1] != 0x78 || d[31] != 0xad) {
        status_fail(s, 0, "libcrypto's SHA-256 of \"abc\" is wrong");
        return;
    }
    status_ok(s, NULL);
}

/* ---- openat2 ------------------------------------------------------------ */

static void probe_openat2(struct probe_status *s) {
    _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        status_fail(s, -errno, "open(/): %s", strerror(errno));
        return;
    }
    /* An absolute path is always EXDEV under RESOLVE_BENEATH, so resolve "."
     * beneath an fd for "/", then check ".." is refused (the flags are
     * really enforced, not silently ignored). */
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    _cleanup_close_ int fd = (int)syscall(SYS_openat2, root, ".", &how, sizeof how);
    if (fd < 0) {
        int e = errno;
        status_fail(s, -e, "openat2: %s (%s)", strerror(e), errno_name(e));
        return;
    }
    _cleanup_close_ int up = (int)syscall(SYS_openat2, root, "..", &how, sizeof how);
    if (up >= 0 || errno != EXDEV) {
        status_fail(s, 0, "openat2 RESOLVE_BENEATH did not refuse \"..\"");
        return;
    }
    status_ok(s, "RESOLVE_BENEATH|NO_SYMLINKS|NO_MAGICLINKS enforced");
}

/* ---- cgroup v2 ---------------------------------------------------------- */

static void read_controllers(const char *dir, const char *file, bool *mem, bool *pids, bool *cpu) {
    char path[PATH_MAX + 64];
    int n = snprintf(path, sizeof path, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof path)
        return;
    _cleanup_free_ char *buf = NULL;
    if (read_file_at(AT_FDCWD, path, SMALL_FILE_LIMIT, &buf, NULL) < 0)
        return;
    *mem = list_has_word(buf, "memory");
    *pids = list_has_word(buf, "pids");
    *cpu = list_has_word(buf, "cpu");
}

static bool writable(const char *path) {
    return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

/* The same discovery `pvisor run --limit` uses (resources/cgroup.c). */
static void probe_cgroup(struct probe_cgroup *c) {
    _cleanup_free_ struct cgroup_where *w = calloc(1, sizeof *w);
    if (!w) {
        status_fail(&c->v2, -ENOMEM, "out of memory");
        status_fail(&c->delegated, -ECANCELED, "not tried");
        return;
    }
    int r = cgroup_locate(w);
    (void)copy_bounded(c->path, sizeof c->path, w->path);
    (void)copy_bounded(c->mount, sizeof c->mount, w->mount);
    if (!w->mount[0] || !w->dir[0]) {
        status_fail(&c->v2, r, "%s", w->reason);
        status_fail(&c->delegated, -ECANCELED, "not tried: no cgroup v2");
        return;
    }
    c->controller_memory = w->memory;
    c->controller_pids = w->pids;
    c->controller_cpu = w->cpu;
    read_controllers(w->dir, "cgroup.subtree_control", &c->subtree_memory, &c->subtree_pids, &c->subtree_cpu);
    c->dir_writable = writable(w->dir);
    char file[PATH_MAX + 32];
    int n = snprintf(file, sizeof file, "%s/cgroup.procs", w->dir);
    c->procs_writable = n > 0 && (size_t)n < sizeof file && writable(file);
    char *slash = strrchr(w->dir, '/');
    if (!w->is_root && slash && slash > w->dir) {
        *slash = '\0';
        c->parent_writable = writable(w->dir);
        *slash = '/';
    }
    status_ok(&c->v2, "cgroup2 at %s, own cgroup %s%s%s%s", w->mount, w->path,
              w->memory || w->pids || w->cpu ? ";" : "; no memory/pids/cpu controller", w->memory ? " memory" : "",
              w->pids ? " pids" : "");
    /* Delegation hands down only what the hierarchy has: on a hybrid host
     * (memory and pids bound to cgroup v1) its root offers neither, and a
     * delegated scope would not give --limit them either. */
    bool root_memory = false, root_pids = false, root_cpu = false;
    read_controllers(w->mount, "cgroup.controllers", &root_memory, &root_pids, &root_cpu);
    if (r == -EACCES && !w->writable && !w->memory && !w->pids && (!root_memory || !root_pids))
        status_fail(&c->delegated, r,
                    "%s not writable by uid %u; its hierarchy has no %s%s%s (bound to cgroup v1), so delegation "
                    "alone gives --limit mem/pids nothing; remedy: a cgroup-v2-only host and a delegated scope",
                    w->dir, (unsigned)geteuid(), root_memory ? "" : "memory", !root_memory && !root_pids ? " or " : "",
                    root_pids ? "" : "pids");
    else if (r == -EACCES && !w->writable)
        status_fail(&c->delegated, r,
                    "%s not writable by uid %u; remedy: systemd-run --user --scope -p Delegate=yes pvisor run ...",
                    w->dir, (unsigned)geteuid());
    else if (r < 0)
        status_fail(&c->delegated, r, "%s", w->reason);
    else if (!w->memory || !w->pids)
        status_fail(&c->delegated, -ENOENT,
                    "%s lacks %s%s%s (bound to cgroup v1, or not delegated): --limit mem/pids use rlimits%s; remedy: "
                    "a cgroup-v2-only host and a delegated scope",
                    w->dir, w->memory ? "" : "memory", !w->memory && !w->pids ? " and " : "", w->pids ? "" : "pids",
                    geteuid() == 0 && !w->pids ? " (pids: none for root, refused)" : "");
    else
        status_ok(&c->delegated, "%s is writable with memory and pids%s: --limit is tree-wide", w->dir,
                  w->cpu ? " (and cpu)" : "");
}

/* ---- binaries on $PATH -------------------------------------------------- */

static bool is_exec_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

static const char *search_path(void) {
    const char *p = getenv("PATH");
    return p && *p ? p : "/usr/local/bin:/usr/bin:/bin";
}

/* Call fn(dir) for each absolute directory on $PATH, in order, until it
 * returns true.  Empty and relative entries (the current directory) are
 * skipped on purpose. */
static bool for_each_path_dir(bool (*fn)(const char *dir, void *ud), void *ud) {
    const char *p = search_path();
    while (*p) {
        size_t n = strcspn(p, ":");
        if (n > 0 && p[0] == '/' && n < PROBE_PATH_MAX) {
            char dir[PROBE_PATH_MAX];
            memcpy(dir, p, n);
            dir[n] = '\0';
            if (fn(dir, ud))
                return true;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

struct find_ctx {
    const char *name;
    struct probe_binary *out;
};

static bool find_in_dir(const char *dir, void *ud) {
    struct find_ctx *ctx = ud;
    char path[PROBE_PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, ctx->name);
    if (n < 0 || (size_t)n >= sizeof path || !is_exec_file(path))
        return false;
    memcpy(ctx->out->path, path, (size_t)n + 1);
    ctx->out->found = true;
    return true;
}

static void find_binary(const char *name, struct probe_binary *ret) {
    struct find_ctx ctx = {.name = name, .out = ret};
    ret->found = false;
    ret->path[0] = '\0';
    (void)for_each_path_dir(find_in_dir, &ctx);
}

/* QEMU's name for this machine's architecture: a VM executor runs the
 * host's own binaries, so only the native system emulator is of use (no
 * scan of $PATH for any qemu-system-*: that read every directory on it). */
static const char *qemu_target(const char *machine) {
    static const struct {
        const char *prefix, *target;
    } map[] = {
        {"i386", "i386"},          {"i486", "i386"},     {"i586", "i386"},   {"i686", "i386"},     {"armv", "arm"},
        {"aarch64_be", "aarch64"}, {"ppc64le", "ppc64"}, {"parisc", "hppa"}, {"openrisc", "or1k"}, {"sh4", "sh4"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if (strncmp(machine, map[i].prefix, strlen(map[i].prefix)) == 0)
            return map[i].target;
    return machine;
}

static void probe_qemu(struct probe_binary *q, const char *machine) {
    char name[96];
    q->found = false;
    q->path[0] = '\0';
    int n = snprintf(name, sizeof name, "qemu-system-%s", qemu_target(machine));
    if (n > 0 && (size_t)n < sizeof name && machine[0])
        find_binary(name, q);
}

/* ---- small syscalls ----------------------------------------------------- */

static void probe_pidfd_open(struct probe_status *s) {
    long fd = syscall(SYS_pidfd_open, getpid(), 0);
    if (fd < 0) {
        int e = errno;
        status_fail(s, -e, "pidfd_open: %s (%s)", strerror(e), errno_name(e));
        return;
    }
    close((int)fd);
    status_ok(s, NULL);
}

static void probe_close_range(struct probe_status *s) {
    /* Closes the (never open) descriptor ~0U: a no-op where it exists. */
    if (syscall(SYS_close_range, ~0U, ~0U, 0) < 0) {
        int e = errno;
        status_fail(s, -e, "close_range: %s (%s)", strerror(e), errno_name(e));
        return;
    }
    status_ok(s, NULL);
}

/* ---- entry point -------------------------------------------------------- */

static int probe_all(struct host_probe *ret_probe, bool try_namespaces) {
    struct host_probe *p = ret_probe;
    memset(p, 0, sizeof *p);
    p->uid = getuid();
    p->euid = geteuid();

    struct utsname u;
    if (uname(&u) == 0) {
        (void)copy_bounded(p->kernel_release, sizeof p->kernel_release, u.release);
        (void)copy_bounded(p->kernel_machine, sizeof p->kernel_machine, u.machine);
    }

    probe_fuse(&p->fuse);
    probe_landlock(&p->landlock);
    probe_seccomp(&p->seccomp);
    probe_openat2(&p->openat2);
    probe_sha256(&p->sha256);
    probe_cgroup(&p->cgroup);
    find_binary("crun", &p->crun);
    find_binary("runc", &p->runc);
    probe_qemu(&p->qemu, p->kernel_machine);
    probe_kvm(&p->kvm);
    probe_pidfd_open(&p->pidfd_open);
    probe_close_range(&p->close_range);
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    p->no_new_privs = nnp < 0 ? -1 : nnp;

    /* Last: the only probe that can fail as a whole (fork/pipe). */
    return probe_userns(&p->userns, p->euid, getegid(), try_namespaces);
}

int host_probe_run(struct host_probe *ret_probe) {
    return probe_all(ret_probe, true);
}

int host_probe_run_in_process(struct host_probe *ret_probe) {
    return probe_all(ret_probe, false);
}

void probe_namespaces_made_by_run(struct host_probe *p, const struct probe_run_namespaces *made) {
    struct probe_userns *u = &p->userns;
    if (!made->user) /* nothing this run made shows the feature: left "not tried" */
        return;
    status_ok(&u->userns, "made by this run: its supervisor's user namespace (uid_map \"%s\")", made->uid_map);
    const bool ns_made[NS_COUNT] = {made->mount, made->pid, made->net, made->ipc, made->uts};
    struct probe_status *nss[NS_COUNT] = {&u->mount_ns, &u->pid_ns, &u->net_ns, &u->ipc_ns, &u->uts_ns};
    for (int i = 0; i < NS_COUNT; i++) {
        if (ns_made[i])
            status_ok(nss[i], "made by this run inside that user namespace (sandbox_evidence.namespaces)");
        else
            status_fail(nss[i], -ECANCELED, "not tried: this run made none ('pvisor doctor' probes it)");
    }
    if (made->mount && made->tmpfs)
        status_ok(&u->tmpfs_mount,
                  "made by this run: the sandbox's root is a tmpfs mounted inside that user namespace");
    else
        status_fail(&u->tmpfs_mount, -ECANCELED, "not tried: this run mounted none ('pvisor doctor' probes it)");
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *errno_json(int err) {
    if (err == 0)
        return json_null();
    const char *n = strerrorname_np(err < 0 ? -err : err);
    if (n)
        return json_string(n);
    char buf[32];
    (void)snprintf(buf, sizeof buf, "errno %d", err < 0 ? -err : err);
    return json_string(buf);
}

static json_t *tristate_json(int t) {
    return t < 0 ? json_null() : json_boolean(t);
}

static json_t *long_or_null(long v) {
    return v < 0 ? json_null() : json_integer((json_int_t)v);
}

static json_t *string_or_null(const char *s) {
    return s && *s ? json_string(s) : json_null();
}

/* {"ok","error","detail"}; the caller adds more keys. */
static json_t *status_json(const struct probe_status *s) {
    return json_pack("{s:b, s:o, s:s}", "ok", s->ok, "error", errno_json(s->error), "detail", s->detail);
}

static json_t *binary_json(const struct probe_binary *b) {
    return json_pack("{s:b, s:o}", "found", b->found, "path", string_or_null(b->found ? b->path : NULL));
}

/* Set key to v in o unless either is NULL; returns false on failure (and
 * frees v). */
static bool set_new(json_t *o, const char *key, json_t *v) {
    if (!o || !v) {
        json_decref(v);
        return false;
    }
    return json_object_set_new(o, key, v) == 0;
}

json_t *probe_to_json(const struct host_probe *p) {
    json_t *o = json_object();
    bool ok = o != NULL;
    json_t *x;

    ok = ok && set_new(o, "uid", json_integer(p->uid));
    ok = ok && set_new(o, "euid", json_integer(p->euid));
    ok = ok && set_new(o, "kernel_release", json_string(p->kernel_release));
    ok = ok && set_new(o, "machine", json_string(p->kernel_machine));

    x = ok ? status_json(&p->userns.userns) : NULL;
    ok = ok && set_new(o, "user_namespaces", x); /* o owns x; x stays borrowed */
    ok = ok &&
         set_new(x, "sysctls",
                 json_pack("{s:o, s:o, s:o}", "kernel.unprivileged_userns_clone",
                           long_or_null(p->userns.unprivileged_userns_clone), "user.max_user_namespaces",
                           long_or_null(p->userns.max_user_namespaces), "kernel.apparmor_restrict_unprivileged_userns",
                           long_or_null(p->userns.apparmor_restrict_unprivileged_userns)));
    ok = ok && set_new(o, "mount_namespace", status_json(&p->userns.mount_ns));
    ok = ok && set_new(o, "pid_namespace", status_json(&p->userns.pid_ns));
    ok = ok && set_new(o, "net_namespace", status_json(&p->userns.net_ns));
    ok = ok && set_new(o, "ipc_namespace", status_json(&p->userns.ipc_ns));
    ok = ok && set_new(o, "uts_namespace", status_json(&p->userns.uts_ns));
    ok = ok && set_new(o, "tmpfs_in_userns", status_json(&p->userns.tmpfs_mount));

    x = ok ? status_json(&p->fuse.usable) : NULL;
    ok = ok && set_new(o, "fuse", x); /* o owns x; x stays borrowed */
    ok = ok && set_new(x, "exists", json_boolean(p->fuse.exists));
    ok = ok && set_new(x, "char_device", json_boolean(p->fuse.is_fuse_chardev));
    ok = ok && set_new(x, "openable", json_boolean(p->fuse.openable));

    x = ok ? status_json(&p->landlock.usable) : NULL;
    ok = ok && set_new(o, "landlock", x); /* o owns x; x stays borrowed */
    ok = ok && set_new(x, "abi", json_integer(p->landlock.abi));
    ok = ok && set_new(x, "lsm_listed", tristate_json(p->landlock.lsm_listed));
    ok = ok && set_new(x, "lsm_list", string_or_null(p->landlock.lsm_list));

    x = ok ? status_json(&p->seccomp.filter) : NULL;
    ok = ok && set_new(o, "seccomp", x); /* o owns x; x stays borrowed */
    ok = ok &&
         set_new(x, "current_mode", p->seccomp.current_mode < 0 ? json_null() : json_integer(p->seccomp.current_mode));
    ok = ok && set_new(x, "actions",
                       json_pack("{s:b, s:b, s:b}", "errno", p->seccomp.action_errno, "kill_process",
                                 p->seccomp.action_kill_process, "user_notif", p->seccomp.action_user_notif));

    ok = ok && set_new(o, "openat2", status_json(&p->openat2));
    ok = ok && set_new(o, "sha256", status_json(&p->sha256));

    x = ok ? status_json(&p->cgroup.v2) : NULL;
    ok = ok && set_new(o, "cgroup_v2", x); /* o owns x; x stays borrowed */
    ok = ok && set_new(x, "path", string_or_null(p->cgroup.path));
    ok = ok && set_new(x, "mount", string_or_null(p->cgroup.mount));
    ok = ok && set_new(x, "delegated", status_json(&p->cgroup.delegated));
    ok = ok && set_new(x, "dir_writable", json_boolean(p->cgroup.dir_writable));
    ok = ok && set_new(x, "procs_writable", json_boolean(p->cgroup.procs_writable));
    ok = ok && set_new(x, "parent_writable", json_boolean(p->cgroup.parent_writable));
    ok = ok && set_new(x, "controllers",
                       json_pack("{s:b, s:b, s:b}", "memory", p->cgroup.controller_memory, "pids",
                                 p->cgroup.controller_pids, "cpu", p->cgroup.controller_cpu));
    ok = ok && set_new(x, "subtree_control",
                       json_pack("{s:b, s:b, s:b}", "memory", p->cgroup.subtree_memory, "pids", p->cgroup.subtree_pids,
                                 "cpu", p->cgroup.subtree_cpu));

    ok = ok && set_new(o, "crun", binary_json(&p->crun));
    ok = ok && set_new(o, "runc", binary_json(&p->runc));
    ok = ok && set_new(o, "qemu", binary_json(&p->qemu));

    x = ok ? status_json(&p->kvm.usable) : NULL;
    ok = ok && set_new(o, "kvm", x); /* o owns x; x stays borrowed */
    ok = ok && set_new(x, "exists", json_boolean(p->kvm.exists));

    ok = ok && set_new(o, "pidfd_open", status_json(&p->pidfd_open));
    ok = ok && set_new(o, "close_range", status_json(&p->close_range));
    ok = ok && set_new(o, "no_new_privs", tristate_json(p->no_new_privs));

    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- readiness (pure) --------------------------------------------------- */

#define NOT_IMPL(what) what " not implemented in pvisor " PVISOR_VERSION

/* Remediation builder: distinct clauses joined by "; ", capitalised, with a
 * final full stop. */
struct remedy {
    char *buf;
    size_t size;
    size_t len;
};

static void remedy_add(struct remedy *rm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void remedy_add(struct remedy *rm, const char *fmt, ...) {
    char clause[READINESS_REMEDIATION_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(clause, sizeof clause, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if (rm->len > 0) {
        /* Skip a clause we already gave (several namespaces, one cause). */
        for (const char *s = rm->buf; (s = strstr(s, clause)); s++) {
            size_t cl = strlen(clause);
            if ((s == rm->buf || (s >= rm->buf + 2 && s[-2] == ';')) && (s[cl] == ';' || s[cl] == '\0'))
                return;
        }
    }
    size_t need = (rm->len ? 2 : 0) + strlen(clause);
    if (rm->len + need + 2 > rm->size)
        return; /* full: the missing list still names everything */
    if (rm->len) {
        memcpy(rm->buf + rm->len, "; ", 2);
        rm->len += 2;
    }
    memcpy(rm->buf + rm->len, clause, strlen(clause) + 1);
    rm->len += strlen(clause);
}

static void remedy_finish(struct remedy *rm) {
    if (rm->len == 0)
        return;
    rm->buf[0] = (char)toupper((unsigned char)rm->buf[0]);
    if (rm->len + 1 < rm->size && rm->buf[rm->len - 1] != '.') {
        rm->buf[rm->len++] = '.';
        rm->buf[rm->len] = '\0';
    }
}

static void remedy_userns(struct remedy *rm, const struct host_probe *p) {
    const struct probe_userns *u = &p->userns;
    int e = -u->userns.error;
    if (p->euid != 0 && u->unprivileged_userns_clone == 0)
        remedy_add(rm, "run sysctl -w kernel.unprivileged_userns_clone=1");
    else if (u->max_user_namespaces == 0 || e == ENOSPC)
        remedy_add(rm, "run sysctl -w user.max_user_namespaces=15000");
    else if (u->apparmor_restrict_unprivileged_userns == 1)
        remedy_add(rm, "run sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 "
                       "(or load an AppArmor profile that allows userns for pvisor)");
    else if (e == EINVAL || e == ENOSYS)
        remedy_add(rm, "use a kernel built with CONFIG_USER_NS=y");
    else if (e == EPERM)
        remedy_add(rm,
                   "allow unshare(CLONE_NEWUSER) for uid %u: run pvisor outside chroots and "
                   "container seccomp profiles that block it",
                   (unsigned)p->euid);
    else
        remedy_add(rm, "make unshare(CLONE_NEWUSER) with a one-ID uid_map work for uid %u (%s)", (unsigned)p->euid,
                   u->userns.detail);
}

static void remedy_ns(struct remedy *rm, const struct host_probe *p, const struct probe_status *s,
                      const struct ns_kind *k) {
    int e = -s->error;
    if (e == ENOSPC)
        remedy_add(rm, "run sysctl -w user.max_%s_namespaces=15000", k->sysctl);
    else if (e == EINVAL && k->config)
        remedy_add(rm, "use a kernel built with %s=y", k->config);
    else if (p->userns.apparmor_restrict_unprivileged_userns == 1)
        remedy_add(rm, "run sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 "
                       "(or load an AppArmor profile that allows userns for pvisor)");
    else
        remedy_add(rm, "allow unshare(%s) inside user namespaces (an LSM or container seccomp policy blocks it)",
                   k->flag);
}

static void remedy_fuse(struct remedy *rm, const struct host_probe *p) {
    const struct probe_fuse *f = &p->fuse;
    int e = -f->usable.error;
    if (!f->exists)
        remedy_add(rm, "run modprobe fuse (or install the fuse3 package)");
    else if (!f->is_fuse_chardev)
        remedy_add(rm, "recreate the node with rm -f /dev/fuse && mknod -m 0666 /dev/fuse c 10 229");
    else if (e == EACCES)
        remedy_add(rm, "run chmod 0666 /dev/fuse (or install the fuse3 package)");
    else if (e == EPERM)
        remedy_add(rm, "pass /dev/fuse into the container (e.g. --device /dev/fuse)");
    else if (e == ENODEV || e == ENXIO)
        remedy_add(rm, "run modprobe fuse");
    else
        remedy_add(rm, "make /dev/fuse openable read-write for uid %u", (unsigned)p->euid);
}

static void remedy_landlock(struct remedy *rm, const struct host_probe *p) {
    const struct probe_landlock *l = &p->landlock;
    int e = -l->usable.error;
    if (e == ENOSYS)
        remedy_add(rm, "use a kernel built with CONFIG_SECURITY_LANDLOCK=y");
    else if (e == EOPNOTSUPP && l->lsm_listed == PROBE_NO && l->lsm_list[0])
        remedy_add(rm, "boot with lsm=%s,landlock", l->lsm_list);
    else if (e == EOPNOTSUPP)
        remedy_add(rm, "boot with landlock added to the lsm= kernel parameter (keep the LSMs already active)");
    else
        remedy_add(rm, "allow landlock_create_ruleset(2) in the container's seccomp profile");
}

static void remedy_seccomp(struct remedy *rm, const struct host_probe *p) {
    int e = -p->seccomp.filter.error;
    if (e == ENOSYS || e == EINVAL || e == 0)
        remedy_add(rm, "use a kernel built with CONFIG_SECCOMP_FILTER=y");
    else
        remedy_add(rm, "allow seccomp(2) in the container's seccomp profile");
}

static void remedy_openat2(struct remedy *rm, const struct host_probe *p) {
    int e = -p->openat2.error;
    if (e == ENOSYS || e == EPERM)
        remedy_add(rm, "use a kernel that provides openat2(2) and allow it in any container seccomp profile");
    else
        remedy_add(rm, "use a kernel whose openat2(2) enforces RESOLVE_BENEATH");
}

static const char *qemu_package(const char *machine) {
    if (strcmp(machine, "x86_64") == 0 || strcmp(machine, "i686") == 0 || strcmp(machine, "i386") == 0)
        return "qemu-system-x86";
    if (strcmp(machine, "aarch64") == 0 || strncmp(machine, "arm", 3) == 0)
        return "qemu-system-arm";
    return "qemu-system";
}

/* Require: add key to missing and its remedy when ok is false. */
struct need_ctx {
    struct executor_readiness *r;
    struct remedy rm;
    bool plain_ok;
    bool safe_ok;
};

static void missing_add(struct need_ctx *c, const char *key, bool for_plain) {
    if (c->r->n_missing < READINESS_MAX_MISSING)
        c->r->missing[c->r->n_missing++] = key;
    c->safe_ok = false;
    if (for_plain)
        c->plain_ok = false;
}

static void need_userns(struct need_ctx *c, const struct host_probe *p, bool for_plain, bool with_ns) {
    if (!p->userns.userns.ok) {
        /* The nested namespaces were not tried: name only the root cause. */
        missing_add(c, "user_namespaces", for_plain);
        remedy_userns(&c->rm, p);
        return;
    }
    if (!with_ns)
        return;
    /* in ns_kinds' order */
    const struct {
        const char *key;
        const struct probe_status *s;
    } ns[NS_KINDS] = {
        {"mount_namespace", &p->userns.mount_ns}, {"pid_namespace", &p->userns.pid_ns},
        {"net_namespace", &p->userns.net_ns},     {"ipc_namespace", &p->userns.ipc_ns},
        {"uts_namespace", &p->userns.uts_ns},
    };
    for (size_t i = 0; i < NS_KINDS; i++) {
        if (ns[i].s->ok)
            continue;
        missing_add(c, ns[i].key, false);
        remedy_ns(&c->rm, p, ns[i].s, &ns_kinds[i]);
    }
    if (p->userns.mount_ns.ok && !p->userns.tmpfs_mount.ok) {
        missing_add(c, "tmpfs_in_userns", false);
        remedy_add(&c->rm, "allow mount(2) of tmpfs in unprivileged user namespaces "
                           "(an LSM or container seccomp policy blocks it)");
    }
}

static void need_fuse(struct need_ctx *c, const struct host_probe *p) {
    if (p->fuse.usable.ok)
        return;
    missing_add(c, "fuse", false);
    remedy_fuse(&c->rm, p);
}

static void need_seccomp(struct need_ctx *c, const struct host_probe *p) {
    if (p->seccomp.filter.ok)
        return;
    missing_add(c, "seccomp", false);
    remedy_seccomp(&c->rm, p);
}

static void note_add(struct executor_readiness *r, const char *note) {
    if (r->n_notes < READINESS_MAX_NOTES)
        r->notes[r->n_notes++] = note;
}

void executor_readiness_compute(const struct host_probe *p, enum probe_executor kind,
                                struct executor_readiness *ret_readiness) {
    struct executor_readiness *r = ret_readiness;
    memset(r, 0, sizeof *r);
    struct need_ctx c = {
        .r = r,
        .rm = {.buf = r->remediation, .size = sizeof r->remediation},
        .plain_ok = true,
        .safe_ok = true,
    };
    const char *plain_reason = NULL, *safe_reason = NULL;

    switch (kind) {
    case PROBE_EXECUTOR_HOST:
        r->name = "host";
        r->implemented = PVISOR_HOST_PLAIN_IMPLEMENTED;
        r->safe_implemented = PVISOR_HOST_SAFE_IMPLEMENTED;
        plain_reason = NOT_IMPL("the host executor is");
        safe_reason = NOT_IMPL("--safe on the host executor is");
        /* Plain runs need nothing beyond fork/exec. */
        need_userns(&c, p, false, true);
        need_fuse(&c, p);
        if (!p->landlock.usable.ok) {
            missing_add(&c, "landlock", false);
            remedy_landlock(&c.rm, p);
        }
        need_seccomp(&c, p);
        if (!p->openat2.ok) {
            missing_add(&c, "openat2", false);
            remedy_openat2(&c.rm, p);
        }
        if (!p->sha256.ok) {
            missing_add(&c, "sha256", false);
            remedy_add(&c.rm, "this pvisor's SHA-256 (OpenSSL's libcrypto, linked in) does not work: rebuild it "
                              "against a working libssl-dev; staging records and checks content by SHA-256");
        }
        /* as limits_decide() has it: RLIMIT_NPROC does not hold root; cpu=
         * needs no controller, only a leaf (its cpu.stat): tree-wide wherever
         * the own cgroup is writable, as root's on a hybrid host */
        bool cpu_leaf = p->cgroup.dir_writable && p->cgroup.procs_writable;
        if (!p->cgroup.delegated.ok && p->uid == 0)
            note_add(r, cpu_leaf ? "no delegated cgroup v2 with memory and pids: --limit mem falls back to a "
                                   "per-process RLIMIT_AS here, and --limit pids is refused (RLIMIT_NPROC does not "
                                   "apply to root); --limit cpu stays tree-wide (the run's cgroup leaf counts it)"
                                 : "no delegated cgroup v2 with memory and pids: --limit mem falls back to a "
                                   "per-process RLIMIT_AS here, and --limit pids is refused (RLIMIT_NPROC does not "
                                   "apply to root); --limit cpu to a per-process RLIMIT_CPU");
        else if (!p->cgroup.delegated.ok)
            note_add(r, cpu_leaf ? "no delegated cgroup v2 with memory and pids: --limit mem falls back to a "
                                   "per-process RLIMIT_AS here, --limit pids to RLIMIT_NPROC in the run's user "
                                   "namespace; --limit cpu stays tree-wide (the run's cgroup leaf counts it)"
                                 : "no delegated cgroup v2 with memory and pids: --limit mem falls back to a "
                                   "per-process RLIMIT_AS here, --limit pids to RLIMIT_NPROC in the run's user "
                                   "namespace, --limit cpu to a per-process RLIMIT_CPU");
        /* what an older Landlock leaves out, said before a run records it */
        if (p->landlock.usable.ok && p->landlock.abi < 4)
            note_add(r, "Landlock ABI < 4 (Linux 6.7) has no TCP rights: --safe does not refuse TCP on the "
                        "sandbox's own loopback (the host's network stays out of reach: its namespace)");
        if (p->landlock.usable.ok && p->landlock.abi < 6)
            note_add(r, "Landlock ABI < 6 (Linux 6.12) has no scopes: --filesystem sandbox is refused (ipc: in the "
                        "host's network namespace the host's abstract unix sockets would be reachable); --safe is not");
        break;

    case PROBE_EXECUTOR_OCI:
        r->name = "oci";
        r->implemented = PVISOR_OCI_IMPLEMENTED;
        r->safe_implemented = PVISOR_OCI_SAFE_IMPLEMENTED;
        plain_reason = NOT_IMPL("the oci executor is");
        safe_reason = NOT_IMPL("the oci executor is");
        if (!p->crun.found && !p->runc.found) {
            missing_add(&c, "oci_runtime", true);
            remedy_add(&c.rm, "run apt-get install crun");
        }
        /* Rootless crun needs a user namespace; root does not. */
        need_userns(&c, p, p->euid != 0, true);
        need_fuse(&c, p); /* the staged view is a FUSE mount bound into the container */
        need_seccomp(&c, p);
        if (!p->crun.found && p->runc.found)
            note_add(r, "only runc found: pvisor prefers crun");
        break;

    case PROBE_EXECUTOR_VM:
        r->name = "vm";
        r->implemented = PVISOR_VM_IMPLEMENTED;
        r->safe_implemented = PVISOR_VM_SAFE_IMPLEMENTED;
        plain_reason = NOT_IMPL("the vm executor is");
        safe_reason = NOT_IMPL("the vm executor is");
        if (!p->qemu.found) {
            missing_add(&c, "qemu", true);
            remedy_add(&c.rm, "run apt-get install %s", qemu_package(p->kernel_machine));
        }
        need_fuse(&c, p); /* the staged view is served from the host's FUSE overlay */
        if (!p->kvm.usable.ok)
            note_add(r, "no usable /dev/kvm: QEMU would fall back to slow TCG emulation");
        break;

    default:
        r->name = "unknown";
        c.plain_ok = c.safe_ok = false;
        plain_reason = safe_reason = "unknown executor";
        break;
    }

    remedy_finish(&c.rm);
    r->host_features_plain = c.plain_ok;
    r->host_features_ready = c.safe_ok;
    r->ready_plain = r->implemented && r->host_features_plain;
    r->ready_safe = r->safe_implemented && r->host_features_ready;
    /* Staged runs: the FUSE overlay, mounted in a private mount namespace
     * (inside a user namespace unless root). */
    r->ready_stage = kind == PROBE_EXECUTOR_HOST && PVISOR_HOST_SAFE_IMPLEMENTED && p->fuse.usable.ok &&
                     (p->euid == 0 || (p->userns.userns.ok && p->userns.mount_ns.ok));
    if (!r->implemented)
        r->reason = plain_reason;
    else if (!r->safe_implemented)
        r->reason = safe_reason;
}

json_t *executor_readiness_to_json(const struct executor_readiness *r) {
    json_t *missing = json_array();
    json_t *notes = json_array();
    bool ok = missing && notes;
    for (size_t i = 0; ok && i < r->n_missing; i++)
        ok = json_array_append_new(missing, json_string(r->missing[i])) == 0;
    for (size_t i = 0; ok && i < r->n_notes; i++)
        ok = json_array_append_new(notes, json_string(r->notes[i])) == 0;
    if (!ok) {
        json_decref(missing);
        json_decref(notes);
        return NULL;
    }
    /* json_pack steals "o" references even on failure. */
    return json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:o, s:o, s:o, s:o}", "implemented", r->implemented,
                     "ready_stage", r->ready_stage, "safe_implemented", r->safe_implemented, "ready_plain",
                     r->ready_plain, "ready_safe", r->ready_safe, "host_features_plain", r->host_features_plain,
                     "host_features_ready", r->host_features_ready, "reason", string_or_null(r->reason), "missing",
                     missing, "remediation", string_or_null(r->remediation), "notes", notes);
}

json_t *executors_to_json(const struct host_probe *p) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (int k = 0; k < PROBE_EXECUTOR_COUNT; k++) {
        struct executor_readiness r;
        executor_readiness_compute(p, (enum probe_executor)k, &r);
        if (!set_new(o, r.name, executor_readiness_to_json(&r))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
