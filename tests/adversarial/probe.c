/* probe: escape attempts for the adversarial suite (tests/adversarial/).
 *
 * Usage: probe ATTEMPT [ARGS...].  Each attempt tries one way out and
 * prints one line: "ESCAPED <detail>" when the attempt succeeded (exit 0)
 * or "BLOCKED <errno name or reason>" when it did not (exit 1).  A probe
 * never decides the verdict alone: the test script checks the host side
 * (bytes, servers, processes) too.  Static, raw syscalls where it matters.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/netlink.h>
#include <linux/vm_sockets.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <termios.h>
#include <unistd.h>

struct dirent64_hdr { /* linux_dirent64, before its name */
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
};

static int escaped(const char *fmt, const char *detail) {
    printf("ESCAPED %s%s\n", fmt, detail ? detail : "");
    return 0;
}

static int blocked(const char *what) {
    printf("BLOCKED %s (%s)\n", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    return 1;
}

static void *pauser(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A connection to $PVISOR_AGENT_SOCKET, or -1 (the reason printed). */
static int connect_agent(void) {
    const char *path = getenv("PVISOR_AGENT_SOCKET");
    if (!path) {
        errno = ENOENT;
        return blocked("PVISOR_AGENT_SOCKET unset"), -1;
    }
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
        return blocked("connect to the agent socket"), -1;
    return s;
}

/* recvmsg on s: up to max descriptors into fds (returns how many; -errno
 * on failure), the bytes into buf (if any) */
static int recv_fds(int s, int *fds, int max, char *buf, size_t len) {
    char one;
    struct iovec iov = {.iov_base = buf ? buf : &one, .iov_len = buf ? len : 1};
    char cbuf[CMSG_SPACE(8 * sizeof(int))];
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) < 0)
        return -errno;
    int n = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k && n < max; i++)
            memcpy(&fds[n++], CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
    }
    return n;
}

static int do_read(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return blocked("open");
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return blocked("read");
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    return escaped("read: ", buf);
}

static int do_write(const char *path, const char *data) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return blocked("open for write");
    ssize_t n = write(fd, data, strlen(data));
    int e = errno;
    close(fd);
    errno = e;
    if (n != (ssize_t)strlen(data))
        return blocked("write");
    return escaped("wrote ", path);
}

static int do_connect_unix(const char *path, int abstract) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return blocked("socket");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof a.sun_path - 1)
        return blocked("path too long");
    socklen_t alen;
    if (abstract) {
        a.sun_path[0] = '\0';
        memcpy(a.sun_path + 1, path, len);
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    } else {
        memcpy(a.sun_path, path, len);
        alen = sizeof a;
    }
    if (connect(s, (struct sockaddr *)&a, alen) < 0)
        return blocked("connect");
    (void)!write(s, "PROBE-WAS-HERE\n", 15);
    close(s);
    return escaped("connected to ", path);
}

static int do_connect_tcp(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return blocked("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return blocked("connect");
    (void)!write(s, "PROBE-WAS-HERE\n", 15);
    close(s);
    return escaped("connected to tcp ", ip);
}

/* proc-roots: PATH (a host path) through every way /proc offers into another
 * root: /proc/self/root, /proc/thread-self/root, /proc/N/root and
 * /proc/N/cwd of every process this /proc lists (the PID namespace's init
 * among them), each as a path and as a descriptor (openat of PATH relative
 * to it, and of "../../../../PATH": '..' walked from there).  Read it, or
 * write DATA to it (created).  ESCAPED names every way that worked. */
static int try_proc_root(const char *base, const char *path, const char *data, char *out, size_t outsz) {
    char full[4096], rel[4096];
    int flags = data ? O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC : O_RDONLY | O_CLOEXEC;
    snprintf(full, sizeof full, "%s%s", base, path);
    int bfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (int way = 0; way < 3; way++) {
        int fd;
        if (way == 0) {
            fd = open(full, flags, 0644);
        } else {
            if (bfd < 0)
                break;
            snprintf(rel, sizeof rel, "%s%s", way == 1 ? "" : "../../../..", way == 1 ? path + 1 : path);
            fd = openat(bfd, rel, flags, 0644);
        }
        if (fd < 0)
            continue;
        ssize_t n;
        char buf[128] = "";
        if (data) {
            n = write(fd, data, strlen(data));
        } else {
            n = read(fd, buf, sizeof buf - 1);
            buf[n > 0 ? n : 0] = '\0';
            char *nl = strchr(buf, '\n');
            if (nl)
                *nl = '\0';
        }
        close(fd);
        if (n > 0) {
            size_t l = strlen(out);
            snprintf(out + l, outsz - l, " %s%s%s%s",
                     way == 2   ? "../ from "
                     : way == 1 ? "openat "
                                : "",
                     base, data ? "" : ": ", buf);
            if (bfd >= 0)
                close(bfd);
            return 1;
        }
    }
    if (bfd >= 0)
        close(bfd);
    return 0;
}

static int do_proc_roots(const char *path, const char *data) {
    char out[8192] = "";
    int tried = 0, got = 0;
    const char *fixed[] = {"/proc/self/root", "/proc/thread-self/root"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++, tried++)
        got += try_proc_root(fixed[i], path, data, out, sizeof out);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char base[300];
        for (int k = 0; k < 2; k++, tried++) {
            snprintf(base, sizeof base, "/proc/%s/%s", e->d_name, k ? "cwd" : "root");
            got += try_proc_root(base, path, data, out, sizeof out);
        }
    }
    if (d)
        closedir(d);
    if (got)
        return escaped("via", out);
    char why[64];
    snprintf(why, sizeof why, "%d ways through /proc", tried);
    errno = ENOENT;
    return blocked(why);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: probe ATTEMPT [ARGS...]\n");
        return 64;
    }
    const char *a = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (!strcmp(a, "read") && argc == 3)
        return do_read(argv[2]);
    if (!strcmp(a, "write") && argc == 4)
        return do_write(argv[2], argv[3]);
    if (!strcmp(a, "symlink-read") && argc == 4) { /* LINK TARGET: make LINK -> TARGET, read via it */
        if (symlink(argv[3], argv[2]) < 0 && errno != EEXIST)
            return blocked("symlink");
        return do_read(argv[2]);
    }
    if (!strcmp(a, "symlink-write") && argc == 5) {
        if (symlink(argv[3], argv[2]) < 0 && errno != EEXIST)
            return blocked("symlink");
        return do_write(argv[2], argv[4]);
    }
    if (!strcmp(a, "hardlink-write") && argc == 5) { /* TARGET LINK DATA */
        if (link(argv[2], argv[3]) < 0)
            return blocked("link");
        return do_write(argv[3], argv[4]);
    }
    if (!strcmp(a, "proc-roots") && (argc == 3 || argc == 4)) /* PATH [DATA]: through /proc's roots and cwds */
        return do_proc_roots(argv[2], argc == 4 ? argv[3] : NULL);
    if (!strcmp(a, "fd-read") && argc == 4) { /* FD NAME: openat on an inherited fd */
        int fd = atoi(argv[2]);
        int f = openat(fd, argv[3], O_RDONLY | O_CLOEXEC);
        if (f < 0)
            return blocked("openat on inherited fd");
        char buf[128];
        ssize_t n = read(f, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = '\0';
        return escaped("read via inherited fd: ", buf);
    }
    if (!strcmp(a, "open") && argc == 3) { /* PATH: open read-write (a device node) */
        int fd = open(argv[2], O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return blocked("open read-write");
        close(fd);
        return escaped("opened ", argv[2]);
    }
    if (!strcmp(a, "shm") && argc == 3) { /* ID: attach a System V shared memory segment */
        void *m = shmat(atoi(argv[2]), NULL, SHM_RDONLY);
        if (m == (void *)-1)
            return blocked("shmat");
        shmdt(m);
        return escaped("attached shared memory segment ", argv[2]);
    }
    if (!strcmp(a, "mknod") && argc == 3) {
        if (mknod(argv[2], S_IFCHR | 0666, makedev(1, 3)) < 0)
            return blocked("mknod");
        return escaped("created device ", argv[2]);
    }
    if (!strcmp(a, "ptrace") && argc == 3) {
        pid_t pid = atoi(argv[2]);
        if (ptrace(PTRACE_ATTACH, pid, 0, 0) < 0)
            return blocked("ptrace attach");
        /* Wait for the attach stop, then detach without a signal so the
         * tracee runs on (else it stays stopped after we exit). */
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, 0, 0);
        return escaped("attached to ", argv[2]);
    }
    if (!strcmp(a, "vm-read") && argc == 4) { /* PID ADDR(hex) */
        pid_t pid = atoi(argv[2]);
        char buf[16];
        struct iovec l = {buf, sizeof buf}, r = {(void *)strtoul(argv[3], NULL, 16), sizeof buf};
        if (process_vm_readv(pid, &l, 1, &r, 1, 0) < 0)
            return blocked("process_vm_readv");
        return escaped("read memory of ", argv[2]);
    }
    if (!strcmp(a, "mem") && argc == 4) { /* PID ADDR(hex): pread /proc/PID/mem */
        char path[64];
        snprintf(path, sizeof path, "/proc/%s/mem", argv[2]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return blocked("open /proc/<pid>/mem");
        char buf[16];
        if (pread(fd, buf, sizeof buf, (off_t)strtoul(argv[3], NULL, 16)) != (ssize_t)sizeof buf)
            return blocked("pread /proc/<pid>/mem");
        return escaped("read the memory of ", argv[2]);
    }
    if (!strcmp(a, "prlimit") && argc == 3) { /* another process may open no file */
        struct rlimit lim = {0, 0};
        if (prlimit(atoi(argv[2]), RLIMIT_NOFILE, &lim, NULL) < 0)
            return blocked("prlimit");
        return escaped("lowered the open-file limit of ", argv[2]);
    }
    if (!strcmp(a, "kill") && argc == 3) {
        if (kill(atoi(argv[2]), SIGTERM) < 0)
            return blocked("kill");
        return escaped("signalled ", argv[2]);
    }
    if (!strcmp(a, "tiocsti") && argc == 2) {
        char c = 'x';
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (ioctl(fd, TIOCSTI, &c) < 0 && errno == EPERM)
            return blocked("TIOCSTI filtered");
        return escaped("TIOCSTI reached the tty layer", NULL);
    }
    if (!strcmp(a, "tioclinux") && argc == 2) { /* TIOCLINUX: a virtual console's selection, keyboard reporting */
        char sub = 7;                           /* TIOCL_GETSHIFTSTATE: reads only */
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (ioctl(fd, TIOCLINUX, &sub) < 0 && errno == EPERM)
            return blocked("TIOCLINUX filtered");
        return escaped("TIOCLINUX reached the tty layer", NULL);
    }
    if (!strcmp(a, "unix") && argc == 3)
        return do_connect_unix(argv[2], 0);
    if (!strcmp(a, "abstract") && argc == 3)
        return do_connect_unix(argv[2], 1);
    if (!strcmp(a, "tcp") && argc == 4)
        return do_connect_tcp(argv[2], atoi(argv[3]));
    if (!strcmp(a, "io_uring") && argc == 2) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        long fd = syscall(__NR_io_uring_setup, 4, &p);
        if (fd < 0)
            return blocked("io_uring_setup");
        return escaped("io_uring instance created", NULL);
    }
    if (!strcmp(a, "aio") && argc == 2) { /* a Linux AIO context: fs.aio-max-nr is the host's */
        unsigned long ctx = 0;
        if (syscall(__NR_io_setup, 1, &ctx) < 0)
            return blocked("io_setup");
        return escaped("AIO context created", NULL);
    }
    if (!strcmp(a, "ptys") && argc == 3) { /* N: open N ptys (kernel.pty.max counts the host's) */
        int n = atoi(argv[2]);
        for (int i = 0; i < n; i++)
            if (posix_openpt(O_RDWR | O_NOCTTY) < 0) {
                fprintf(stderr, "opened %d\n", i);
                return blocked("posix_openpt");
            }
        return escaped("opened every pty asked for", NULL);
    }
    if (!strcmp(a, "inotify") && argc == 3) { /* N: make N inotify instances (a per-user limit) */
        int n = atoi(argv[2]);
        for (int i = 0; i < n; i++)
            if (inotify_init1(IN_CLOEXEC) < 0) {
                fprintf(stderr, "made %d\n", i);
                return blocked("inotify_init1");
            }
        return escaped("made every inotify instance asked for", NULL);
    }
    if (!strcmp(a, "mkfiles") && argc == 4) { /* DIR N: N empty files with 250-byte names */
        int n = atoi(argv[3]);
        if (mkdir(argv[2], 0755) < 0 && errno != EEXIST)
            return blocked("mkdir");
        int d = open(argv[2], O_RDONLY | O_DIRECTORY);
        char name[256];
        for (int i = 0; d >= 0 && i < n; i++) {
            snprintf(name, sizeof name, "%0250d", i);
            int fd = openat(d, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0)
                return blocked("openat");
            close(fd);
        }
        return d < 0 ? blocked("open") : escaped("made every file asked for", NULL);
    }
    if (!strcmp(a, "dirhold") && argc == 5) {
        /* DIR N SECONDS: N handles of DIR, each read once, held; then each
         * read to its end: the fewest and most names one listed */
        int n = atoi(argv[3]);
        int *fds = calloc((size_t)n, sizeof(int));
        char buf[4096];
        for (int i = 0; fds && i < n; i++) {
            fds[i] = open(argv[2], O_RDONLY | O_DIRECTORY);
            /* a seek past the kernel's cached listing: the server lists
             * (after cookie 5 + i: from its first name on) */
            if (fds[i] < 0 || lseek(fds[i], 5 + i, SEEK_SET) < 0 ||
                syscall(SYS_getdents64, fds[i], buf, sizeof buf) < 0) {
                fprintf(stderr, "held %d\n", i);
                return blocked("open/getdents64");
            }
        }
        printf("HELD %d\n", n);
        fflush(stdout);
        sleep((unsigned)atoi(argv[4]));
        long lo = -1, hi = -1;
        for (int i = 0; i < n; i++) {
            long names = 0, r;
            lseek(fds[i], 5 + i, SEEK_SET);
            while ((r = syscall(SYS_getdents64, fds[i], buf, sizeof buf)) > 0)
                for (long o = 0; o < r; o += ((struct dirent64_hdr *)(buf + o))->reclen)
                    names++;
            if (r < 0)
                return blocked("getdents64");
            lo = lo < 0 || names < lo ? names : lo;
            hi = names > hi ? names : hi;
        }
        printf("LISTED %ld %ld\n", lo, hi);
        return 0;
    }
    if (!strcmp(a, "dirseek") && argc == 4) {
        /* DIR N: N rounds of open, a seek past the kernel's cached listing
         * (so the server lists), one getdents64, close */
        int n = atoi(argv[3]);
        char buf[4096];
        for (int i = 0; i < n; i++) {
            int fd = open(argv[2], O_RDONLY | O_DIRECTORY);
            if (fd < 0 || lseek(fd, 5 + i, SEEK_SET) < 0 || syscall(SYS_getdents64, fd, buf, sizeof buf) <= 0)
                return blocked("open/lseek/getdents64");
            close(fd);
        }
        printf("LISTED %d\n", n);
        return 0;
    }
    if (!strcmp(a, "userns") && argc == 2) {
        if (unshare(CLONE_NEWUSER) < 0)
            return blocked("unshare(CLONE_NEWUSER)");
        return escaped("new user namespace", NULL);
    }
    if (!strcmp(a, "clone-userns") && argc == 2) {
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid < 0)
            return blocked("clone(CLONE_NEWUSER)");
        if (pid == 0)
            _exit(0);
        waitpid((pid_t)pid, NULL, 0);
        return escaped("cloned into a new user namespace", NULL);
    }
    if (!strcmp(a, "mount") && argc == 3) {
        if (mount("tmpfs", argv[2], "tmpfs", 0, NULL) < 0)
            return blocked("mount");
        return escaped("mounted tmpfs on ", argv[2]);
    }
    if (!strcmp(a, "remount-rw") && argc == 3) {
        if (mount(NULL, argv[2], NULL, MS_REMOUNT | MS_BIND, NULL) < 0)
            return blocked("remount");
        return escaped("remounted ", argv[2]);
    }
    if (!strcmp(a, "jit-unshare") && argc == 2) {
#if defined(__x86_64__)
        /* Generated code making a raw syscall: unshare(CLONE_NEWUSER). */
        static const unsigned char code[] = {
            0xb8, 0x10, 0x01, 0x00, 0x00, /* mov eax, 272 (unshare) */
            0xbf, 0x00, 0x00, 0x00, 0x10, /* mov edi, CLONE_NEWUSER */
            0x0f, 0x05,                   /* syscall */
            0xc3,                         /* ret */
        };
        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return blocked("mmap of executable memory");
        memcpy(m, code, sizeof code);
        long r = ((long (*)(void))m)();
        if (r < 0) {
            errno = (int)-r;
            return blocked("unshare from generated code");
        }
        return escaped("generated code created a user namespace", NULL);
#else
        return blocked("not x86_64");
#endif
    }
    if (!strcmp(a, "x32") && argc == 2) {
        /* getpid through the x32 ABI: a non-native ABI must kill us. */
        long r = syscall(0x40000000 | 39);
        if (r < 0)
            return blocked("x32 syscall returned an error");
        return escaped("x32 syscall ran", NULL);
    }
    /* Syscalls newer than libseccomp 2.5.4's table, by number: a filter
     * that denied them by name did not deny them at all. */
    if (!strcmp(a, "open-tree-attr") && (argc == 3 || argc == 4)) { /* PATH [clone] */
        /* open_tree_attr (467, Linux 6.15): open_tree that also sets
         * attributes; with OPEN_TREE_CLONE, a detached copy of PATH's mount
         * made writable (MOUNT_ATTR_RDONLY cleared) */
        struct {
            unsigned long long set, clr, propagation, userns_fd;
        } attr = {.clr = 0x1 /* MOUNT_ATTR_RDONLY */};
        int clone = argc == 4;
        long fd = syscall(467, AT_FDCWD, argv[2], (long)(O_CLOEXEC | (clone ? 1 /* OPEN_TREE_CLONE */ : 0)),
                          clone ? &attr : NULL, clone ? sizeof attr : 0UL);
        if (fd < 0)
            return blocked("open_tree_attr");
        return escaped(clone ? "open_tree_attr cloned, writable, the mount tree of " : "open_tree_attr opened ",
                       argv[2]);
    }
    if (!strcmp(a, "listmount") && argc == 2) { /* 458, Linux 6.8: the mount namespace's mounts */
        unsigned long long req[3] = {24 /* MNT_ID_REQ_SIZE_VER0 */, ~0ULL /* LSMT_ROOT */, 0}, ids[256];
        long n = syscall(458, req, ids, 256L, 0L);
        if (n < 0)
            return blocked("listmount");
        char num[32];
        snprintf(num, sizeof num, "%ld", n);
        return escaped("listmount listed mounts: ", num);
    }
    if (!strcmp(a, "statmount") && argc == 3) { /* PATH: 457, Linux 6.8: its mount's details */
        struct statx stx;
        if (statx(AT_FDCWD, argv[2], 0, 0x4000 /* STATX_MNT_ID_UNIQUE */, &stx) < 0)
            return blocked("statx");
        unsigned long long req[3] = {24, stx.stx_mnt_id, 0x1 /* STATMOUNT_SB_BASIC */}, buf[64];
        if (syscall(457, req, buf, sizeof buf, 0L) < 0)
            return blocked("statmount");
        return escaped("statmount described the mount of ", argv[2]);
    }
    if (!strcmp(a, "raw") && argc >= 3) { /* NR...: what each raw syscall (arguments -1) gives */
        for (int i = 2; i < argc; i++) {
            long nr = strtol(argv[i], NULL, 0);
            fflush(stdout);
            pid_t c = fork();
            if (c == 0) {
                long r = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
                printf("%s%ld %s", i > 2 ? " " : "", nr, r < 0 ? strerrorname_np(errno) : "ran");
                fflush(stdout);
                _exit(0);
            }
            int st = 0;
            if (c < 0 || waitpid(c, &st, 0) < 0)
                return blocked("fork");
            if (WIFSIGNALED(st))
                printf("%s%ld SIG%s", i > 2 ? " " : "", nr, sigabbrev_np(WTERMSIG(st)));
        }
        printf("\n");
        return 0;
    }
    if (!strcmp(a, "quotactl-fd") && argc == 3) { /* DIR: quotactl_fd (443, Linux 5.14), Q_SYNC */
        int fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return blocked("open");
        if (syscall(443, fd, (0x800001L /* Q_SYNC */ << 8) | 0 /* USRQUOTA */, 0L, NULL) < 0)
            return blocked("quotactl_fd");
        return escaped("quotactl_fd reached the quota code of ", argv[2]);
    }
    if (!strcmp(a, "i386") && argc == 2) {
#if defined(__x86_64__)
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* i386 getpid */
        if (r < 0) {
            errno = (int)-r;
            return blocked("int 0x80");
        }
        return escaped("i386 syscall ran", NULL);
#else
        return blocked("not x86_64");
#endif
    }
    if (!strcmp(a, "daemon") && argc == 3) { /* MARKER: leave a setsid sleeper behind */
        pid_t c = fork();
        if (c == 0) {
            setsid();
            if (fork() == 0) {
                char *args[] = {argv[2], "300", NULL}; /* argv[0] is the marker */
                execv("/bin/sleep", args);
                _exit(1);
            }
            _exit(0);
        }
        waitpid(c, NULL, 0);
        return escaped("daemon started", NULL);
    }
    if (!strcmp(a, "headless") && argc == 2) { /* leave a process behind whose leader thread exited */
        int p[2];
        if (pipe(p) < 0)
            return blocked("pipe");
        pid_t c = fork();
        if (c == 0) {
            setsid();
            pthread_t t;
            if (pthread_create(&t, NULL, pauser, NULL) != 0)
                _exit(1);
            close(p[1]);          /* the thread runs: say so */
            syscall(SYS_exit, 0); /* this thread only: /proc shows the process as a zombie */
        }
        close(p[1]);
        char b;
        (void)!read(p[0], &b, 1);
        usleep(100000);
        return escaped("headless process started", NULL);
    }
    if (!strcmp(a, "env") && argc == 3) {
        const char *v = getenv(argv[2]);
        if (!v) {
            errno = ENOENT;
            return blocked("variable absent");
        }
        return escaped("variable present: ", v);
    }
    if (!strcmp(a, "add-key") && argc == 3) { /* DESC: a key in the user keyring (5 min), its id printed */
        long id = syscall(SYS_add_key, "user", argv[2], "KEYPAYLOAD", (size_t)10, -4 /* KEY_SPEC_USER_KEYRING */);
        if (id < 0 || syscall(SYS_keyctl, 15 /* KEYCTL_SET_TIMEOUT */, id, 300) < 0)
            return blocked("add_key");
        printf("%ld\n", id);
        return 0;
    }
    if (!strcmp(a, "drop-key") && argc == 3) /* ID */
        return syscall(SYS_keyctl, 21 /* KEYCTL_INVALIDATE */, atol(argv[2])) < 0 ? blocked("keyctl") : 0;
    if (!strcmp(a, "key-listed") && argc == 3) { /* DESC: is it in /proc/keys? */
        FILE *f = fopen("/proc/keys", "re");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, argv[2]))
                return escaped("listed: ", strtok(line, "\n"));
        errno = f ? ENOENT : errno;
        return blocked("/proc/keys");
    }
    if (!strcmp(a, "lease") && argc == 3) { /* PATH: a read lease on a host file, held against its writers */
        int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
        sigset_t io;
        sigemptyset(&io);
        sigaddset(&io, SIGIO);
        sigprocmask(SIG_BLOCK, &io, NULL);
        if (fd < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
            return blocked("F_SETLEASE");
        printf("ESCAPED read lease held\n");
        fflush(stdout);
        /* the host's open for writing waits until the lease goes: 2 s */
        struct timespec ten = {.tv_sec = 10};
        if (sigtimedwait(&io, NULL, &ten) == SIGIO)
            printf("ESCAPED the host opened it for writing\n");
        fflush(stdout);
        sleep(2);
        return 0;
    }
    if (!strcmp(a, "agent") && argc == 3) { /* REQUEST: one line to $PVISOR_AGENT_SOCKET, print the reply */
        int s = connect_agent();
        if (s < 0)
            return 1;
        size_t len = strlen(argv[2]);
        if (strcmp(argv[2], "LONG") == 0) { /* an over-long line: expect to be dropped */
            static char big[8192];
            memset(big, 'x', sizeof big);
            (void)!write(s, big, sizeof big);
        } else {
            (void)!write(s, argv[2], len);
            (void)!write(s, "\n", 1);
        }
        char buf[4096];
        size_t got = 0;
        while (got < sizeof buf - 1 && (got == 0 || buf[got - 1] != '\n')) {
            ssize_t n = read(s, buf + got, sizeof buf - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got == 0) {
            printf("DISCONNECTED\n");
            return 1;
        }
        buf[got] = '\0';
        fputs(buf, stdout);
        return 0;
    }
    if (!strcmp(a, "fd-recv") && argc == 3) { /* PATH: a host service hands out descriptors */
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strncpy(sa.sun_path, argv[2], sizeof sa.sun_path - 1);
        if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
            return blocked("connect to the descriptor service");
        int fds[8];
        int n = recv_fds(s, fds, 8, NULL, 0);
        if (n <= 0) {
            errno = n < 0 ? -n : ENOENT;
            return blocked("receive a descriptor");
        }
        char buf[64] = {0};
        if (pread(fds[0], buf, sizeof buf - 1, 0) < 0)
            return blocked("read the received descriptor");
        buf[strcspn(buf, "\n")] = '\0';
        return escaped("read through a passed host descriptor: ", buf);
    }
    if (!strcmp(a, "agent-fds") && argc == 2) {
        /* send descriptors to the agent socket with a request; print the
         * reply and how many descriptors came back (the socket must never
         * hand one in) */
        int s = connect_agent();
        if (s < 0)
            return 1;
        int mine[4] = {0, 1, 2, open("/", O_PATH | O_CLOEXEC)};
        char cbuf[CMSG_SPACE(sizeof mine)] = {0};
        struct iovec iov = {.iov_base = "ping\n", .iov_len = 5};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof mine);
        memcpy(CMSG_DATA(c), mine, sizeof mine);
        if (sendmsg(s, &mh, 0) < 0)
            return blocked("sendmsg with SCM_RIGHTS");
        int fds[8];
        char reply[256] = {0};
        int n = recv_fds(s, fds, 8, reply, sizeof reply - 1);
        reply[strcspn(reply, "\n")] = '\0';
        printf("%s fds=%d\n", reply, n < 0 ? 0 : n);
        return 0;
    }
    if (!strcmp(a, "peer-pidfd") && (argc == 2 || argc == 3)) {
        /* [PATH]: a pidfd of the process serving PATH (the agent socket when
         * not given: the supervisor), by SO_PEERPIDFD (Linux 6.5), and what
         * it gives: a signal, its details (PIDFD_GET_INFO, 6.13), its
         * network namespace (PIDFD_GET_NET_NAMESPACE, 6.11) */
        int s = argc == 3 ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : connect_agent();
        if (argc == 3) {
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            strncpy(sa.sun_path, argv[2], sizeof sa.sun_path - 1);
            if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
                return blocked("connect");
        }
        if (s < 0)
            return 1;
        int pidfd = -1;
        socklen_t len = sizeof pidfd;
        if (getsockopt(s, SOL_SOCKET, 77 /* SO_PEERPIDFD */, &pidfd, &len) < 0)
            return blocked("SO_PEERPIDFD");
        struct {
            unsigned long long mask, cgroupid;
            unsigned pid, tgid, ppid, ids[9];
            int exit_code;
            unsigned coredump_mask, pad;
        } info = {.mask = 1 /* PIDFD_INFO_PID */};
        if (ioctl(pidfd, _IOWR(0xFF, 11, info), &info) == 0 && info.pid > 0)
            return escaped("PIDFD_GET_INFO names the peer's pid", NULL);
        int ns = ioctl(pidfd, _IO(0xFF, 4) /* PIDFD_GET_NET_NAMESPACE */);
        if (ns >= 0)
            return escaped("the peer's network namespace", NULL);
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0)
            return escaped("signal 0 to the peer", NULL);
        return blocked("signal to the peer by its pidfd");
    }
    if (!strcmp(a, "socketpair") && argc == 2) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
            return blocked("socketpair");
        char c = 0;
        if (write(sv[0], "y", 1) != 1 || read(sv[1], &c, 1) != 1 || c != 'y')
            return blocked("socketpair io");
        return escaped("socketpair works", NULL);
    }
    if (!strcmp(a, "vsock") && argc == 3) { /* PORT: a host listener holds it */
        /* the family number with high bits set, too: the kernel reads an int */
        long fam[] = {AF_VSOCK, (long)(0x100000000L | AF_VSOCK)};
        for (size_t i = 0; i < 2; i++) {
            long s = syscall(SYS_socket, fam[i], (long)SOCK_STREAM, 0L);
            if (s < 0)
                continue;
            struct sockaddr_vm sa = {
                .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = (unsigned)atoi(argv[2])};
            if (bind((int)s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno == EADDRINUSE)
                return escaped("vsock: the host's port is in use here (one port table): ", argv[2]);
            return escaped("vsock socket created", NULL);
        }
        return blocked("socket(AF_VSOCK)");
    }
    if (!strcmp(a, "families") && argc == 2) { /* every family but unix, inet, inet6, netlink */
        char got[512] = "";
        for (int f = 0; f < 64; f++) {
            if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
                continue;
            static const int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_RAW};
            for (size_t t = 0; t < 4; t++) {
                int s = socket(f, types[t] | SOCK_CLOEXEC, 0);
                if (s >= 0) {
                    close(s);
                    snprintf(got + strlen(got), sizeof got - strlen(got), " %d", f);
                    break;
                }
            }
        }
        if (!got[0])
            return blocked("socket() of every other family");
        return escaped("sockets of families:", got);
    }
    if (!strcmp(a, "netlink") && argc == 2) { /* every netlink protocol but route and sock_diag */
        char got[512] = "";
        for (long p = 0; p < 34; p++) {
            /* 32: uevents again, with high bits the kernel ignores (an int) */
            long proto = p == 32 ? (long)(0x100000000L | NETLINK_KOBJECT_UEVENT) : p == 33 ? 255 : p;
            if (proto == NETLINK_ROUTE || proto == NETLINK_SOCK_DIAG)
                continue;
            long s = syscall(SYS_socket, (long)AF_NETLINK, (long)(SOCK_RAW | SOCK_CLOEXEC), proto);
            if (s < 0)
                continue;
            /* the host's device events: a listener of their group */
            struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1};
            int listens = (int)proto == NETLINK_KOBJECT_UEVENT && bind((int)s, (struct sockaddr *)&sa, sizeof sa) == 0;
            close((int)s);
            if (p == 32)
                snprintf(got + strlen(got), sizeof got - strlen(got), " 0x10000000f%s", listens ? "(uevents)" : "");
            else
                snprintf(got + strlen(got), sizeof got - strlen(got), " %ld%s", proto, listens ? "(uevents)" : "");
        }
        if (!got[0])
            return blocked("socket(AF_NETLINK) of every protocol but route and sock_diag");
        return escaped("netlink protocols:", got);
    }
    if (!strcmp(a, "netlink-allowed") && argc == 2) { /* the run's own interfaces and sockets */
        static const int protos[] = {NETLINK_ROUTE, NETLINK_SOCK_DIAG};
        for (size_t i = 0; i < 2; i++) {
            int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protos[i]);
            if (s < 0)
                return blocked(i ? "socket(NETLINK_SOCK_DIAG)" : "socket(NETLINK_ROUTE)");
            close(s);
        }
        printf("ALLOWED route sock_diag\n");
        return 0;
    }
    if (!strcmp(a, "modify-ldt") && argc == 2) { /* read the LDT: 0 bytes natively, no entry needed */
#ifdef SYS_modify_ldt
        char ldt[16];
        if (syscall(SYS_modify_ldt, 0, ldt, sizeof ldt) >= 0)
            return escaped("modify_ldt reached the LDT code", NULL);
#else
        errno = ENOSYS;
#endif
        return blocked("modify_ldt");
    }
    if (!strcmp(a, "ldisc") && argc == 2) { /* set a pty's line discipline (N_TTY: no module needed) */
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
            return blocked("a pty to set the line discipline of");
        int sl = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC), ld = 0 /* N_TTY */;
        if (sl >= 0 && ioctl(sl, TIOCSETD, &ld) == 0)
            return escaped("TIOCSETD reached the line disciplines (a missing one is loaded as a module)", NULL);
        return blocked("ioctl(TIOCSETD)");
    }
    if (!strcmp(a, "inet-protos") && argc == 2) { /* which (type, protocol) pairs socket() takes or says why not */
        static const struct {
            int family, type, proto;
            const char *name;
        } cases[] = {
            {AF_INET, SOCK_STREAM, 0, "tcp0"},         {AF_INET, SOCK_STREAM, IPPROTO_TCP, "tcp"},
            {AF_INET, SOCK_DGRAM, IPPROTO_UDP, "udp"}, {AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE, "udplite"},
            {AF_INET6, SOCK_STREAM, 0, "tcp6"},        {AF_INET, SOCK_STREAM, 132, "sctp"},
            {AF_INET6, SOCK_SEQPACKET, 132, "sctp6"},  {AF_INET, SOCK_DCCP, 33, "dccp"},
            {AF_INET, SOCK_DGRAM, 115, "l2tp"},        {AF_INET, SOCK_STREAM, 256, "smc"},
            {AF_INET, SOCK_RAW, 132, "raw132"},        {AF_INET, SOCK_STREAM, 255, "255"},
            {AF_INET, SOCK_STREAM, 262, "mptcp"},      {AF_INET6, SOCK_STREAM, 262, "mptcp6"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            long fd =
                syscall(SYS_socket, (long)cases[i].family, (long)(cases[i].type | SOCK_CLOEXEC), (long)cases[i].proto);
            const char *e = fd < 0 ? strerrorname_np(errno) : NULL;
            printf("%s%s=%s", i ? " " : "", cases[i].name, fd >= 0 ? "ok" : e ? e : "?");
            if (fd >= 0)
                close((int)fd);
        }
        /* high bits of the protocol, which the kernel ignores (an int) */
        long fd = syscall(SYS_socket, (long)AF_INET, (long)(SOCK_STREAM | SOCK_CLOEXEC), 0x100000000L | IPPROTO_TCP);
        printf(" tcp+high=%s\n", fd >= 0 ? "ok" : strerrorname_np(errno));
        if (fd >= 0)
            close((int)fd);
        return 0;
    }
    fprintf(stderr, "probe: unknown attempt '%s'\n", a);
    return 64;
}
