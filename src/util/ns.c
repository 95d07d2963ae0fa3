/* ns.c: user namespaces, sysctls and process liveness (see util.h). */
#include "util/util.h"
#include "util/cleanup.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

bool userns_is_initial(void) {
    _cleanup_free_ char *map = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 4096, &map, NULL) < 0)
        return true; /* no /proc: as before there was a user namespace */
    unsigned long inner, outer, count;
    return sscanf(map, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 && count == 4294967295UL;
}

bool userns_ids_are_host(void) {
    _cleanup_free_ char *map = NULL;
    if (read_file_at(AT_FDCWD, "/proc/self/uid_map", 4096, &map, NULL) < 0)
        return false;
    unsigned long inner, outer, count;
    return sscanf(map, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 && count >= 4294967294UL;
}

/* A sysctl as a long; -1 when absent or unreadable.  Read in one call:
 * procfs sysctl handlers return EOF for any read at a non-zero offset, so a
 * growing-buffer reader would see only the first byte. */
long sysctl_long(const char *path) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[64];
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || end == buf || v < 0)
        return -1;
    return v;
}

const struct ns_kind ns_kinds[NS_KINDS] = {
    {CLONE_NEWNS, "CLONE_NEWNS", "mnt", "mount", NULL},
    {CLONE_NEWPID, "CLONE_NEWPID", "pid", "PID", "CONFIG_PID_NS"},
    {CLONE_NEWNET, "CLONE_NEWNET", "net", "network", "CONFIG_NET_NS"},
    {CLONE_NEWIPC, "CLONE_NEWIPC", "ipc", "IPC", "CONFIG_IPC_NS"},
    {CLONE_NEWUTS, "CLONE_NEWUTS", "uts", "UTS", "CONFIG_UTS_NS"},
};

const char *ns_limit_remedy(const char *step, int err, char *buf, size_t size) {
    const struct ns_kind *ns = ns_kinds;
    if (err != ENOSPC || !step)
        return NULL;
    for (size_t i = 0; i < NS_KINDS; i++) {
        char flag[32]; /* "CLONE_NEWNS)": not the start of another flag's name */
        snprintf(flag, sizeof flag, "%s)", ns[i].flag);
        if (!strstr(step, flag))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/sys/user/max_%s_namespaces", ns[i].sysctl);
        if (sysctl_long(path) == 0)
            snprintf(buf, size, "%s namespaces are disabled: sysctl user.max_%s_namespaces=15000", ns[i].what,
                     ns[i].sysctl);
        else
            /* the limit of a user namespace above ours (the one pvisor
             * started in, when the refusal came in the run's) is not
             * readable from here: 0 there reads as 15000 here */
            snprintf(buf, size,
                     "the limit on %s namespaces is 0 or used up (user.max_%s_namespaces, in the user namespace "
                     "pvisor runs in or one above it): sysctl user.max_%s_namespaces=15000, or end other "
                     "sandboxes or containers",
                     ns[i].what, ns[i].sysctl, ns[i].sysctl);
        return buf;
    }
    /* A detached mount (open_tree's clone, fsmount's) lives in an
     * anonymous mount namespace of its own, counted against
     * user.max_mnt_namespaces until it is attached: a launcher step that
     * clones or makes a mount fails ENOSPC when that limit is low, not 0
     * (a run clones a few dozen at once), or at fs.mount-max. */
    static const char *const mount_words[] = {"mount", "open_tree", "covering", "tmpfs"};
    for (size_t i = 0; i < ARRAY_SIZE(mount_words); i++)
        if (strstr(step, mount_words[i])) {
            snprintf(buf, size,
                     "the limit on mount namespaces is too low (user.max_mnt_namespaces, here or in a user namespace "
                     "above: each mount made for the sandbox's root counts as one while it is made) or the one on "
                     "mounts (fs.mount-max): sysctl user.max_mnt_namespaces=15000");
            return buf;
        }
    return NULL;
}

/* The holder of a user namespace made by userns_with_maps: it only sleeps
 * until the SIGKILL that ends it (every other signal is blocked), or dies
 * with its parent (a copy of whose descriptors it holds), if that is killed
 * in the microseconds before it kills the holder.  It shares its parent's
 * memory (CLONE_VM), so it touches nothing: raw system calls that cannot
 * fail (no errno), no libc state. */
static int userns_holder(void *arg) {
    syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (syscall(SYS_getppid) != (long)(intptr_t)arg) /* the parent is gone already */
        syscall(SYS_exit, 0);
    for (;;)
        syscall(SYS_pause);
    return 0;
}

int userns_with_maps(const char *uid_map, const char *gid_map, bool deny_setgroups) {
    const size_t stack_size = 64 * 1024;
    void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the child starts with all blocked */
    pid_t pid = clone(userns_holder, (char *)stack + stack_size, CLONE_VM | CLONE_NEWUSER | SIGCHLD,
                      (void *)(intptr_t)getpid());
    int r = pid < 0 ? -errno : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    int nsfd = -1;
    if (r == 0) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
        _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 || (r = write_string_at(d, "uid_map", uid_map)) < 0 ||
            (deny_setgroups && (r = write_string_at(d, "setgroups", "deny")) < 0) ||
            (r = write_string_at(d, "gid_map", gid_map)) < 0)
            r = r < 0 ? r : -errno;
        else if ((nsfd = openat(d, "ns/user", O_RDONLY | O_CLOEXEC)) < 0)
            r = -errno;
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    munmap(stack, stack_size);
    return r < 0 ? r : nsfd;
}

int userns_enter(int flags, uid_t inner_uid, gid_t inner_gid, const char **ret_step) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    /* Root mapping root: every id as it is (but -1, so that the namespace
     * is not the initial one: userns_is_initial), so that the files of
     * other users keep their owners inside instead of becoming unmapped
     * ones, which the kernel lets nobody write, remove or rename.  A map
     * of more than one id needs CAP_SETUID and CAP_SETGID where the
     * namespace was made, which a process that unshared it no longer has:
     * the namespace is made by a child (userns_with_maps, no fork of our
     * memory), its maps written by us from here, then entered. */
    if (uid == 0 && gid == 0 && inner_uid == 0 && inner_gid == 0) {
        static const char map[] = "0 0 4294967294\n";
        _cleanup_close_ int ns = userns_with_maps(map, map, false);
        if (ns >= 0) {
            *ret_step = "setns(CLONE_NEWUSER)";
            if (setns(ns, CLONE_NEWUSER) < 0)
                return -errno;
            *ret_step = "unshare(CLONE_NEWNS)";
            return flags && unshare(flags) < 0 ? -errno : 0;
        }
        /* none made: one that maps root alone, as for any user, below */
    }
    /* the user namespace alone first: one unshare of both blamed the user
     * namespace for the mount namespace's ENOSPC (user.max_mnt_namespaces
     * reached), and said to raise user.max_user_namespaces */
    *ret_step = "unshare(CLONE_NEWUSER)";
    if (unshare(CLONE_NEWUSER) < 0)
        return -errno;
    *ret_step = "writing the user namespace id maps";
    int r = write_string_at(AT_FDCWD, "/proc/self/setgroups", "deny");
    if (r < 0 && r != -ENOENT)
        return r;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)inner_uid, (unsigned)uid);
    if ((r = write_string_at(AT_FDCWD, "/proc/self/uid_map", map)) < 0)
        return r;
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)inner_gid, (unsigned)gid);
    if ((r = write_string_at(AT_FDCWD, "/proc/self/gid_map", map)) < 0)
        return r;
    *ret_step = "unshare(CLONE_NEWNS)";
    return flags && unshare(flags) < 0 ? -errno : 0;
}

/* Is the task at dir (/proc/PID or /proc/PID/task/TID) gone or going? */
static bool task_dying(const char *dir) {
    char path[96], buf[2048];
    snprintf(path, sizeof path, "%s/stat", dir);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return true; /* reaped meanwhile */
    buf[n] = '\0';
    const char *e = strrchr(buf, ')'); /* "PID (COMM) STATE PPID PGRP SID TTY TPGID FLAGS": COMM may hold ')' */
    char state;
    unsigned flags;
    if (!e || sscanf(e + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) != 2)
        return false;
    if (state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */))
        return true;
    snprintf(path, sizeof path, "%s/status", dir);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    unsigned long long mask;
    while (f && fgets(buf, sizeof buf, f))
        if ((sscanf(buf, "SigPnd: %llx", &mask) == 1 || sscanf(buf, "ShdPnd: %llx", &mask) == 1) &&
            (mask & (1ULL << (SIGKILL - 1))))
            return true;
    return false;
}

bool pid_dying(pid_t pid) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    if (!task_dying(dir))
        return false;
    /* A leader whose own thread exited (SYS_exit, pthread_exit) shows as
     * a zombie while its other threads go on: the process is alive as
     * long as one of them is. */
    char tasks[80];
    snprintf(tasks, sizeof tasks, "%s/task", dir);
    _cleanup_closedir_ DIR *d = opendir(tasks);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        unsigned long tid = strtoul(de->d_name, &end, 10);
        if (*end || tid == 0 || tid == (unsigned long)pid || tid > INT_MAX)
            continue;
        char t[96];
        snprintf(t, sizeof t, "%s/%lu", tasks, tid);
        if (!task_dying(t))
            return false;
    }
    return true;
}

size_t pids_still_alive(pid_t *pids, size_t n) {
    for (long ms = 2; n > 0 && ms <= 8; ms *= 2) {
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!pid_dying(pids[i]))
                pids[k++] = pids[i];
        n = k;
    }
    return n;
}
