/* launch.c: `pvisor __launch`, executes a launch plan (see launch.h).
 *
 * Process shape (all inside the run's user namespace, where the launcher
 * starts as uid 0 with a full capability set it will give up):
 *
 *   L  launcher (exec'd by the supervisor): unshares mount, PID, IPC, UTS
 *      (and network) namespaces; forks I (in its process group, where the
 *      supervisor signals: I gets those signals itself); exits as I does
 *   I  init, PID 1 of the new PID namespace: builds the synthetic root and
 *      pivots into it; forks A; relays signals, and A's fd 0-2 that are
 *      host objects (struct stdio_relay); reaps orphans; when A ends, I
 *      exits and the kernel kills everything left in the namespace
 *   A  the command: setsid (no controlling tty to inject into, or, with
 *      plan.tty, a pty of the sandbox's own devpts that I relays), a nested
 *      user namespace that maps the invoking uid/gid (so the command is not
 *      uid 0), rlimits, chdir, close every fd above 2, clear all capability
 *      sets and the bounding set, no_new_privs, Landlock, seccomp, then a
 *      self-check from inside sent to the supervisor, then exec.
 *
 * Security ordering: Landlock and seccomp come last because they would
 * forbid the setup itself (mount, unshare); capabilities are dropped before
 * them so no step after the drop can regain access; descriptors are closed
 * before Landlock since files already open are not re-checked.
 * Only the sync pipe survives to the exec, and it is close-on-exec.
 */
#include "launch/launch.h"
#include "net/dns.h"
#include "policy/plan.h"
#include "resources/cgroup.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Report a failed step to the supervisor and exit 125.  Async-signal-safe
 * enough for our single-threaded processes (snprintf + write). */
static _Noreturn void fail(const char *step, int err) {
    char buf[512];
    if (err < 0)
        err = -err;
    int n = snprintf(buf, sizeof buf, "{\"ok\":false,\"step\":\"%s\",\"errno\":%d,\"message\":\"%s\"}\n", step, err,
                     strerror(err));
    if (n > 0)
        (void)!write(LAUNCH_SYNC_FD, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    _exit(125);
}

static int read_plan(struct launch_plan *ret) {
    _cleanup_free_ char *buf = malloc(PLAN_MAX_BYTES + 1);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    int r = read_full(LAUNCH_PLAN_FD, buf, PLAN_MAX_BYTES + 1, &len);
    if (r < 0)
        return r;
    if (len > PLAN_MAX_BYTES)
        return -E2BIG;
    close(LAUNCH_PLAN_FD);
    json_error_t e;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
    if (!j)
        return -EINVAL;
    r = plan_from_json(j, ret);
    json_decref(j);
    return r;
}

/* Bring up loopback in a fresh network namespace (it starts down). */
static int loopback_up(void) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return -errno;
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return -errno;
    return 0;
}

/* Send s to the supervisor over LAUNCH_END_FD (a SOCK_SEQPACKET socket:
 * one message, tag and the descriptor).  Init keeps no copy. */
static int hand_over(int s, const char *tag) {
    struct iovec iov = {.iov_base = (void *)tag, .iov_len = strlen(tag)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl = {0};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &s, sizeof s);
    if (sendmsg(LAUNCH_END_FD, &m, MSG_NOSIGNAL) < 0)
        return -errno;
    return 0;
}

/* --allow-net: listen on the sandbox's 127.0.0.1:port and hand the socket
 * to the supervisor, whose egress broker serves it (net/broker.h): nothing
 * in the sandbox can accept on it, and the command, which may not bind
 * that port (Landlock), cannot listen there either. */
static int hand_over_proxy(uint16_t port) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 128) < 0)
        return -errno;
    return hand_over(s, "proxy\n");
}

/* plan.dns_stub: a UDP socket on the sandbox's 127.0.0.1:53 for the run's
 * name server in the supervisor (net/dns.h).  Bound while init still has
 * the capabilities of the namespace's owner (port 53 is privileged); the
 * command gets none, so it cannot bind it first or after. */
static int hand_over_dns(void) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(DNS_STUB_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -errno;
    return hand_over(s, "dns\n");
}

/* The private tmpfs roots launch_build_root kept (launch.h): to the
 * supervisor, and closed here (the command gets none).  A failed hand-over
 * costs the run its numbers, nothing else. */
static void hand_over_tmpfs(void) {
    for (int k = 0; k < LAUNCH_TMPFS_N; k++) {
        if (launch_tmpfs_fd[k] < 0)
            continue;
        char tag[32];
        snprintf(tag, sizeof tag, LAUNCH_TMPFS_TAG_PREFIX "%s\n", launch_tmpfs_path[k]);
        (void)hand_over(launch_tmpfs_fd[k], tag);
        close(launch_tmpfs_fd[k]);
        launch_tmpfs_fd[k] = -1;
    }
}

/* The signals L and I relay to their child, plus SIGCHLD. */
static void relayed_signals(sigset_t *ret_mask) {
    sigemptyset(ret_mask);
    sigaddset(ret_mask, SIGINT);
    sigaddset(ret_mask, SIGTERM);
    sigaddset(ret_mask, SIGHUP);
    sigaddset(ret_mask, SIGQUIT);
    sigaddset(ret_mask, SIGCHLD);
}

/* Relay sig to child's process group, as a plain run signals the
 * command's (the command is a group leader, setsid; its background jobs
 * get a termination signal too, and may clean up, before the end of the
 * PID namespace kills them), or to child alone until it leads one. */
static void relay(pid_t child, int sig) {
    if (kill(-child, sig) < 0)
        kill(child, sig);
}

/* The command's terminal (plan.tty): a pty of the sandbox's own devpts,
 * its controlling terminal, in place of those of fd 0-2 that are the
 * user's terminal.  The command holds no descriptor of the user's terminal
 * then: it cannot change its modes or size, and TIOCSTI (refused by
 * seccomp anyway) would reach only its own pty.  init (I) keeps the master
 * and relays: the pty's output to the user's terminal, its size on
 * SIGWINCH, and, when stdin is the terminal and pvisor runs in its
 * foreground (plan.tty_input), the user's keys to the pty (the supervisor
 * put the terminal in raw mode, so Ctrl-C reaches the command's foreground
 * job as the pty's SIGINT).  In a pipeline another member may be the one
 * reading the terminal: pvisor does not take it then. */
struct term {
    int master;      /* -1: no pty (the descriptors stay as they are) */
    int ref;         /* the user's terminal, one of fd 0-2: its modes and size */
    int in;          /* 0 when keys come from fd 0, the user's terminal (plan.tty_input); else -1 */
    int out;         /* where the pty's output goes: fd 1 or 2 when a terminal, else own; -1: dropped */
    int own;         /* /dev/tty opened for out, or -1 */
    bool on[3];      /* fd 0-2 that are the user's terminal (get the pty) */
    bool null_stdin; /* fd 0 was the terminal but no keys come (pvisor in the background): /dev/null */
    int hold;        /* I's own descriptor of the pty until the command ends: the master reads EIO only
                      * once no process holds the pty, never before the command opened it */
};

/* In I, after the root is built: open the pty, start it with the user's
 * terminal's modes and size.  Only when one of fd 0-2 is a terminal;
 * otherwise nothing changes. */
static int open_terminal(struct term *t, bool input) {
    t->master = t->ref = t->in = t->out = t->own = t->hold = -1;
    for (int fd = 2; fd >= 0; fd--)
        if ((t->on[fd] = isatty(fd) == 1))
            t->ref = fd;
    if (t->ref < 0)
        return 0;
    t->in = input && t->on[0] ? 0 : -1;
    /* output (a prompt, the echo of the keys) with stdout and stderr in
     * files: to the terminal, as /dev/tty (the device node projected from
     * the host: for this process, the supervisor's controlling terminal) */
    if (!t->on[1] && !t->on[2] && t->in >= 0)
        t->own = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC);
    t->out = t->on[1] ? 1 : t->on[2] ? 2 : t->own;
    t->null_stdin = t->on[0] && t->in < 0;
    if (t->null_stdin)
        t->on[0] = false; /* a background job may not read the terminal: end of file */
    int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (m < 0)
        return -errno;
    int unlock = 0;
    if (ioctl(m, TIOCSPTLCK, &unlock) < 0) {
        int e = -errno;
        close(m);
        return e;
    }
    struct termios tio;
    struct winsize ws;
    if (tcgetattr(t->ref, &tio) == 0) /* on the master: sets the pty's own */
        (void)tcsetattr(m, TCSANOW, &tio);
    if (ioctl(t->ref, TIOCGWINSZ, &ws) == 0)
        (void)ioctl(m, TIOCSWINSZ, &ws);
    t->master = m;
    t->hold = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    return t->hold < 0 ? -errno : 0;
}

/* In A, after setsid: the pty becomes the controlling terminal and fd 0-2
 * where they were the user's terminal. */
static int attach_terminal(const struct term *t) {
    if (t->master < 0)
        return 0;
    int s = ioctl(t->master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    if (s < 0)
        return -errno;
    int r = ioctl(s, TIOCSCTTY, 0) < 0 ? -errno : 0;
    for (int fd = 0; r == 0 && fd < 3; fd++)
        if (t->on[fd] && dup2(s, fd) < 0)
            r = -errno;
    if (s > 2)
        close(s);
    int null = r == 0 && t->null_stdin ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
    if (r == 0 && t->null_stdin && (null < 0 || dup2(null, 0) < 0))
        r = -errno;
    if (null > 0)
        close(null);
    close(t->master);
    close(t->hold);
    if (t->own >= 0)
        close(t->own);
    return r;
}

/* All of buf to the user's terminal, also when someone made it
 * non-blocking (the descriptor is shared with the user's shell): EAGAIN
 * waits until it takes more.  Gives up when it takes nothing for 10 s. */
static bool write_out(int fd, const char *buf, size_t n) {
    while (fd >= 0 && n) {
        ssize_t w = write(fd, buf, n);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && poll(&pf, 1, 10000) > 0)
            continue;
        return false;
    }
    return true;
}

/* The command's fd 0-2 that are host objects: a file (`> log`, `<
 * prompt`), a directory, a device, a named pipe.  Held as they were, they
 * were the command's to change: their owner's (root's, pvisor run as
 * root), an fchmod made `> log` a setuid-root program on the host, F_SETFL
 * cleared a log's O_APPEND to rewrite it, fchdir left a directory's tree.
 * The command gets a pipe instead, which init relays; /dev/null it gets
 * as the sandbox's own (a read-only mount).  A terminal gets the pty
 * (struct term); a pipe or a unix socket stays (an inode of no file
 * system's tree); an inet socket is relayed too (the host's network).
 * Init holds the host objects; the command cannot reach init. */
struct stdio_relay {
    int give[3]; /* what A gets as fd N; -1: fd N stays as it is */
    int end[3];  /* init's end of fd N's pipe (fd 0: the write end); -1: none, or done */
    char in[4096];
    size_t in_len, in_off; /* host fd 0's bytes read, not yet in the pipe */
    /* fd 0 a regular file: its offset when the command started, what init
     * read of it, and init's own descriptor of the pipe's read end (what
     * the command has not read yet: FIONREAD), so that at the end the
     * offset it shares with the caller moves by what the command read
     * (a `while read f; do pvisor run ...; done < list` lost lines to
     * init's read-ahead; found by a red-team pass) */
    off_t in_start;
    uint64_t in_read;
    int in_peek;
    int lost_fd, lost_errno; /* the first of fd 1-2 whose host object failed a write (0: none) */
};

/* Is fd (0-2) a host object (above)?  *ret_null: it is /dev/null. */
static bool host_object(int fd, bool *ret_null) {
    struct stat st;
    struct statfs sf;
    *ret_null = false;
    if (fstat(fd, &st) < 0)
        return false;         /* closed */
    if (S_ISFIFO(st.st_mode)) /* a pipe(2): on no tree; a named pipe is */
        return fstatfs(fd, &sf) < 0 || sf.f_type != PIPEFS_MAGIC;
    if (S_ISSOCK(st.st_mode)) {
        /* a unix socket stays (a socketpair: Node's, a journal stream);
         * another, an inet socket (inetd, socket activation), is the
         * host's network, which the run's own namespace and Landlock
         * keep from the command: relayed (a UDP one reached the host) */
        int dom = 0;
        socklen_t dl = sizeof dom;
        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0 || dom != AF_UNIX;
    }
    if (S_ISCHR(st.st_mode) && isatty(fd) == 1)
        return false; /* the pty's, or pvisor could not tell it one: the terminal's own checks */
    *ret_null = S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
    return true;
}

/* Are fds a and b one open file (`> log 2>&1`)?  Then one pipe keeps
 * their order.  Without kcmp, one file is taken for one. */
static bool one_open_file(int a, int b) {
    pid_t me = getpid();
    long r = syscall(SYS_kcmp, me, me, KCMP_FILE, a, b);
    if (r >= 0)
        return r == 0;
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* fd, close-on-exec, moved above 2 (fd 0-2 may be closed in init). */
static int above_stdio(int fd) {
    if (fd < 0 || fd > 2)
        return fd;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int e = errno;
    close(fd);
    errno = e;
    return d;
}

/* In I, before A starts: what A gets for its fd 0-2 (t: the pty's). */
static int stdio_relay_open(struct stdio_relay *s, const struct term *t) {
    for (int fd = 0; fd < 3; fd++)
        s->give[fd] = s->end[fd] = -1;
    s->in_len = s->in_off = 0;
    s->in_read = 0;
    s->in_peek = -1;
    s->lost_fd = s->lost_errno = 0;
    for (int fd = 0; fd < 3; fd++) {
        bool null;
        if ((t->master >= 0 && t->on[fd]) || !host_object(fd, &null))
            continue;
        if (null) {
            int fl = fcntl(fd, F_GETFL);
            if (fl < 0 || (s->give[fd] = above_stdio(open("/dev/null", (fl & O_ACCMODE) | O_CLOEXEC))) < 0)
                return -errno;
            continue;
        }
        if (fd == 2 && s->end[1] >= 0 && one_open_file(1, 2)) {
            if ((s->give[2] = fcntl(s->give[1], F_DUPFD_CLOEXEC, 3)) < 0)
                return -errno;
            continue;
        }
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0)
            return -errno;
        pp[0] = above_stdio(pp[0]);
        pp[1] = above_stdio(pp[1]);
        s->give[fd] = pp[fd == 0 ? 0 : 1];
        s->end[fd] = pp[fd == 0 ? 1 : 0];
        if (pp[0] < 0 || pp[1] < 0 || fcntl(s->end[fd], F_SETFL, O_NONBLOCK) < 0)
            return -errno;
        struct stat st;
        if (fd == 0 && fstat(0, &st) == 0 && S_ISREG(st.st_mode) && (s->in_start = lseek(0, 0, SEEK_CUR)) >= 0 &&
            (s->in_peek = fcntl(pp[0], F_DUPFD_CLOEXEC, 3)) < 0)
            return -errno;
    }
    /* a write to a pipe or a named pipe with no reader left: EPIPE, not
     * init's death */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigprocmask(SIG_BLOCK, &pipe, NULL);
    return 0;
}

/* In A: its fd 0-2 as stdio_relay_open chose. */
static int stdio_relay_attach(const struct stdio_relay *s) {
    for (int fd = 0; fd < 3; fd++)
        if (s->give[fd] >= 0 && dup2(s->give[fd], fd) < 0)
            return -errno;
    return 0;
}

/* In I once A has started: A's ends are A's alone. */
static void stdio_relay_started(struct stdio_relay *s) {
    for (int fd = 0; fd < 3; fd++)
        if (s->give[fd] >= 0) {
            close(s->give[fd]);
            s->give[fd] = -1;
        }
}

static bool stdio_relay_active(const struct stdio_relay *s) {
    return s->end[0] >= 0 || s->end[1] >= 0 || s->end[2] >= 0;
}

static void stdio_relay_close(struct stdio_relay *s, int fd) {
    close(s->end[fd]);
    s->end[fd] = -1;
}

/* What to wait for (pf[0..2]: fd 0-2). */
static void stdio_relay_pollfds(const struct stdio_relay *s, struct pollfd pf[3]) {
    bool pending = s->in_len > s->in_off;
    pf[0] = (struct pollfd){.fd = s->end[0] < 0 ? -1 : pending ? s->end[0] : 0, .events = pending ? POLLOUT : POLLIN};
    for (int fd = 1; fd < 3; fd++)
        pf[fd] = (struct pollfd){.fd = s->end[fd], .events = POLLIN};
}

/* The output A wrote into fd's pipe: to the host's fd, one read's worth,
 * or (drain) until the pipe is empty or a full pipe's worth more (what a
 * process left behind keeps writing, `yes &`, must not keep the run
 * alive).  A host fd that takes no more (a named pipe's reader gone)
 * closes the pipe: A's next write fails. */
static void stdio_relay_out(struct stdio_relay *s, int fd, bool drain) {
    static char buf[16384];
    size_t left = (1u << 20) + sizeof buf; /* fs.pipe-max-size's default, and a read */
    do {
        ssize_t n = read(s->end[fd], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        bool written = n > 0 && write_out(fd, buf, (size_t)n);
        if (n > 0 && !written && !s->lost_fd) {
            s->lost_fd = fd;
            s->lost_errno = errno ? errno : EIO;
        }
        if (written) {
            if ((size_t)n >= left)
                return; /* drained as much as it may */
            left -= (size_t)n;
            continue;
        }
        if (n >= 0 || errno != EAGAIN)
            stdio_relay_close(s, fd); /* every writer is gone, or the host's fd failed, or the pipe */
        return;
    } while (drain);
}

static void stdio_relay_io(struct stdio_relay *s, const struct pollfd pf[3]) {
    if (s->end[0] >= 0 && pf[0].revents) {
        if (s->in_len > s->in_off) {
            ssize_t n = write(s->end[0], s->in + s->in_off, s->in_len - s->in_off);
            if (n > 0 && (s->in_off += (size_t)n) == s->in_len)
                s->in_len = s->in_off = 0;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                stdio_relay_close(s, 0); /* A closed its stdin */
        } else {
            ssize_t n = read(0, s->in, sizeof s->in);
            if (n > 0) {
                s->in_len = (size_t)n;
                s->in_read += (uint64_t)n;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                stdio_relay_close(s, 0); /* the end (a directory: EISDIR, none) */
        }
    }
    for (int fd = 1; fd < 3; fd++)
        if (s->end[fd] >= 0 && pf[fd].revents)
            stdio_relay_out(s, fd, false);
}

/* A has ended: what it wrote goes out; what is written after, by what it
 * left behind (killed with the PID namespace), does not. */
static void stdio_relay_end(struct stdio_relay *s) {
    for (int fd = 1; fd < 3; fd++)
        if (s->end[fd] >= 0)
            stdio_relay_out(s, fd, true);
    if (s->in_peek >= 0) {
        int unread = 0;
        uint64_t left = s->in_len - s->in_off;
        if (ioctl(s->in_peek, FIONREAD, &unread) == 0 && unread >= 0 && (left += (uint64_t)unread) <= s->in_read)
            (void)lseek(0, s->in_start + (off_t)(s->in_read - left), SEEK_SET);
        close(s->in_peek);
        s->in_peek = -1;
    }
    for (int fd = 0; fd < 3; fd++)
        if (s->end[fd] >= 0)
            stdio_relay_close(s, fd);
}

/* Wait for child, relaying termination signals to it (see relay) and
 * its standard descriptors (io); returns its wait status.  Other
 * children (orphans re-parented to PID 1) are reaped. */
static int relay_and_wait(pid_t child, struct stdio_relay *io) {
    sigset_t mask;
    relayed_signals(&mask);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0)
        return 125 << 8;
    for (;;) {
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
            if (w == child) {
                stdio_relay_end(io);
                close(sfd);
                return st;
            }
        if (stdio_relay_active(io)) {
            struct pollfd pf[4] = {{.fd = sfd, .events = POLLIN}};
            stdio_relay_pollfds(io, pf + 1);
            if (poll(pf, 4, -1) < 0 && errno != EINTR) {
                close(sfd);
                return 125 << 8;
            }
            stdio_relay_io(io, pf + 1);
            if (!(pf[0].revents & POLLIN))
                continue;
        }
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof si);
        if (n == (ssize_t)sizeof si && si.ssi_signo != SIGCHLD)
            relay(child, (int)si.ssi_signo);
        else if (n < 0 && errno != EINTR) {
            close(sfd);
            return 125 << 8;
        }
    }
}

/* I's loop with a pty: relay_and_wait's work, plus the terminal.  Once the
 * command has ended, what it wrote is relayed until every holder of the
 * pty has closed it (read gives EIO), until the pty has been quiet for
 * 100 ms, or for 1 s at most: something it left behind that keeps writing
 * must not keep the run alive. */
static int relay_terminal_and_wait(pid_t child, const struct term *t, struct stdio_relay *io) {
    sigset_t mask;
    relayed_signals(&mask);
    sigaddset(&mask, SIGWINCH);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return 125 << 8;
    static char in[4096], out[16384];
    size_t in_len = 0, in_off = 0;
    bool in_open = t->in >= 0, master_open = true, done = false;
    int64_t done_at = 0;
    int st = 125 << 8;
    for (;;) {
        int wst;
        pid_t w;
        while ((w = waitpid(-1, &wst, WNOHANG)) > 0)
            if (w == child) {
                st = wst;
                done = true;
                done_at = monotonic_ms();
                close(t->hold); /* from now on EIO says that no one holds the pty */
            }
        if (done && (!master_open || monotonic_ms() - done_at >= 1000))
            break;
        struct pollfd pf[6] = {
            {.fd = sfd, .events = POLLIN},
            {.fd = master_open ? t->master : -1, .events = (short)(POLLIN | (in_len > in_off ? POLLOUT : 0))},
            {.fd = in_open && in_len == in_off && !done ? t->in : -1, .events = POLLIN}};
        stdio_relay_pollfds(io, pf + 3);
        int pr = poll(pf, 6, done ? 100 : -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0 || (pr == 0 && done))
            break;
        struct signalfd_siginfo si;
        while (pf[0].revents && read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGWINCH) {
                struct winsize ws;
                if (ioctl(t->ref, TIOCGWINSZ, &ws) == 0)
                    (void)ioctl(t->master, TIOCSWINSZ, &ws);
            } else if (si.ssi_signo != SIGCHLD) {
                relay(child, (int)si.ssi_signo);
            }
        }
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(t->master, out, sizeof out);
            if (n > 0)
                write_out(t->out, out, (size_t)n);
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                master_open = false; /* EIO: no process holds the pty any more */
        }
        if (master_open && (pf[1].revents & POLLOUT) && in_len > in_off) {
            ssize_t n = write(t->master, in + in_off, in_len - in_off);
            if (n > 0)
                in_off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                in_off = in_len; /* the pty is gone: the keys go nowhere */
        }
        if (pf[2].revents) {
            ssize_t n = read(t->in, in, sizeof in);
            if (n > 0) {
                in_len = (size_t)n;
                in_off = 0;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                in_open = false; /* the user's terminal hung up */
            }
        }
        stdio_relay_io(io, pf + 3);
    }
    stdio_relay_end(io);
    close(sfd);
    return st;
}

/* The wait status the supervisor sees of this process after exit_like(st). */
static int like_status(int st) {
    if (WIFSIGNALED(st))
        return WTERMSIG(st);
    return WIFEXITED(st) ? st & 0xff00 : 125 << 8;
}

/* Die the way the child died, so the supervisor sees the same status. */
static _Noreturn void exit_like(int st) {
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        signal(sig, SIG_DFL);
        sigset_t m;
        sigemptyset(&m);
        sigaddset(&m, sig);
        sigprocmask(SIG_UNBLOCK, &m, NULL);
        prctl(PR_SET_DUMPABLE, 0);
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
}

static int drop_capabilities(void) {
    /* EINVAL is a capability this kernel does not have (headers newer than
     * it): then PR_CAPBSET_READ does not know it either.  Any other failure
     * leaves it in the bounding set: the setup stops. */
    for (int c = 0; c <= CAP_LAST_CAP; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
            int e = errno;
            if (e != EINVAL || prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0 || errno != EINVAL)
                return -e;
        }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    cap_t none = cap_init();
    if (!none)
        return -ENOMEM;
    int r = cap_set_proc(none) < 0 ? -errno : 0;
    cap_free(none);
    return r;
}

static int set_rlimit(int res, uint64_t v) {
    if (!v)
        return 0;
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    struct rlimit old;
    if (getrlimit(res, &old) == 0 && old.rlim_max != RLIM_INFINITY && old.rlim_max < v)
        rl.rlim_cur = rl.rlim_max = old.rlim_max;
    return setrlimit(res, &rl) < 0 ? -errno : 0;
}

/* Read back the rlimits the command will run with (evidence). */
static json_t *rlimits_json(void) {
    static const struct {
        const char *name;
        int res;
    } rl[] = {{"core", RLIMIT_CORE}, {"nofile", RLIMIT_NOFILE}, {"fsize", RLIMIT_FSIZE},
              {"as", RLIMIT_AS},     {"cpu", RLIMIT_CPU},       {"nproc", RLIMIT_NPROC}};
    json_t *j = json_object();
    for (size_t i = 0; j && i < ARRAY_SIZE(rl); i++) {
        struct rlimit v;
        if (getrlimit(rl[i].res, &v) < 0)
            continue;
        json_object_set_new(
            j, rl[i].name,
            json_pack("{s:o, s:o}", "soft",
                      v.rlim_cur == RLIM_INFINITY ? json_null() : json_integer((json_int_t)v.rlim_cur), "hard",
                      v.rlim_max == RLIM_INFINITY ? json_null() : json_integer((json_int_t)v.rlim_max)));
    }
    return j;
}

/* Self-check from inside, after every control is installed. */
static json_t *self_check(int ll_abi, uint64_t ll_fs, uint64_t ll_net, uint64_t ll_scoped, bool seccomp) {
    json_t *j = json_object();
    _cleanup_free_ char *status = NULL;
    int pfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd >= 0 && read_file_at(pfd, "status", 1 << 16, &status, NULL) == 0) {
        static const char *const keys[] = {"NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm",
                                           "CapEff",     "CapBnd",  "CapAmb",          "Uid",    "Gid"};
        for (char *line = strtok(status, "\n"); line; line = strtok(NULL, "\n")) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            *colon = '\0';
            for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (strcmp(line, keys[i]) == 0) {
                    char *v = colon + 1;
                    while (*v == ' ' || *v == '\t')
                        v++;
                    json_object_set_new(j, keys[i], json_string(v));
                }
        }
    }
    _cleanup_free_ char *cg = NULL;
    char cg_path[PATH_MAX];
    if (pfd >= 0 && read_file_at(pfd, "cgroup", 1 << 16, &cg, NULL) == 0 &&
        cgroup_parse_self(cg, cg_path, sizeof cg_path) == 0)
        json_object_set_new(j, "cgroup", json_string(cg_path));
    _cleanup_free_ char *uid_map = NULL;
    if (pfd >= 0 && read_file_at(pfd, "uid_map", 4096, &uid_map, NULL) == 0)
        json_object_set_new(j, "uid_map", json_string(uid_map));
    json_t *ns = json_object();
    static const char *const nss[] = {"mnt", "pid", "net", "ipc", "uts", "user", "cgroup"};
    for (size_t i = 0; i < ARRAY_SIZE(nss); i++) {
        char path[32], buf[64];
        snprintf(path, sizeof path, "ns/%s", nss[i]);
        ssize_t n = pfd >= 0 ? readlinkat(pfd, path, buf, sizeof buf - 1) : -1;
        if (n > 0) {
            buf[n] = '\0';
            json_object_set_new(ns, nss[i], json_string(buf));
        }
    }
    if (pfd >= 0)
        close(pfd);
    json_object_set_new(j, "namespaces", ns);
    json_object_set_new(j, "landlock",
                        json_pack("{s:i, s:I, s:I, s:I}", "abi", ll_abi, "handled_fs", (json_int_t)ll_fs, "handled_net",
                                  (json_int_t)ll_net, "scoped", (json_int_t)ll_scoped));
    /* which program the filter counted in Seccomp_filters is: the kernel
     * shows it to no one without CAP_SYS_ADMIN, so its digest as installed */
    unsigned char d[32];
    unsigned n = seccomp ? launch_seccomp_digest(d) : 0;
    if (n) {
        char hex[65];
        for (size_t i = 0; i < sizeof d; i++)
            snprintf(hex + 2 * i, 3, "%02x", d[i]);
        json_object_set_new(j, "seccomp_filter", json_pack("{s:s, s:I}", "sha256", hex, "instructions", (json_int_t)n));
    }
    json_object_set_new(j, "rlimits", rlimits_json());
    /* a controlling terminal (plan.tty's pty): /dev/tty opens */
    int ctty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    json_object_set_new(j, "controlling_tty", json_boolean(ctty >= 0));
    if (ctty >= 0)
        close(ctty);
    struct launch_socket_scan *ls = &launch_socket_scan;
    json_t *hs = json_pack("{s:I, s:I}", "covered", (json_int_t)ls->covered, "covered_in_grants",
                           (json_int_t)ls->covered_in_grants);
    struct {
        const char *key;
        char **list;
        unsigned n;
    } lists[] = {{"grants_scanned", ls->scanned, ls->n_scanned},
                 {"grants_incomplete", ls->incomplete, ls->n_incomplete},
                 {"toolchains_incomplete", ls->tools_incomplete, ls->n_tools_incomplete},
                 {"sockets_handed_over", ls->handed_over, ls->n_handed_over}};
    for (size_t k = 0; hs && k < sizeof lists / sizeof lists[0]; k++) {
        json_t *a = json_array();
        for (unsigned i = 0; i < lists[k].n; i++)
            json_array_append_new(a, json_string(lists[k].list[i]));
        json_object_set_new(hs, lists[k].key, a);
    }
    json_object_set_new(j, "host_unix_sockets", hs);
    json_object_set_new(j, "pid", json_integer(getpid()));
    json_object_set_new(j, "uid", json_integer(getuid()));
    json_object_set_new(j, "gid", json_integer(getgid()));
    return j;
}

/* Wait for the supervisor's 'g' on fd, then close it; anything else, or
 * EOF, ends this process with 125 (the supervisor reports why). */
static void await_go(int fd) {
    char go = 0;
    ssize_t n;
    do
        n = read(fd, &go, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || go != 'g')
        _exit(125);
    close(fd);
}

/* A: the command's process, from fork to exec. */
static _Noreturn void become_command(const struct launch_plan *p, const struct term *t, const struct stdio_relay *io) {
    int r;
    const char *step = "";
    if (setsid() < 0)
        fail("setsid", errno);
    PV_MARK("C0");
    if ((r = attach_terminal(t)) < 0)
        fail("making the sandbox's pty the command's terminal", r);
    if ((r = stdio_relay_attach(io)) < 0)
        fail("giving the command its standard descriptors", r);

    /* Nested user namespace: the command sees the invoking uid/gid, not 0. */
    if (p->uid != 0 || p->gid != 0) {
        if (unshare(CLONE_NEWUSER) < 0)
            fail("unshare(CLONE_NEWUSER) for the command's ids", errno);
        char map[64];
        if ((r = write_string_at(AT_FDCWD, "/proc/self/setgroups", "deny")) < 0)
            fail("writing setgroups", r);
        snprintf(map, sizeof map, "%u 0 1\n", p->uid);
        if ((r = write_string_at(AT_FDCWD, "/proc/self/uid_map", map)) < 0)
            fail("writing the command's uid_map", r);
        snprintf(map, sizeof map, "%u 0 1\n", p->gid);
        if ((r = write_string_at(AT_FDCWD, "/proc/self/gid_map", map)) < 0)
            fail("writing the command's gid_map", r);
    }
    /* After the nested user namespace exists: the kernel counts
     * RLIMIT_NPROC per (user namespace, uid), so it bounds this run's
     * processes only (never host uid 0's, which it exempts). */
    /* Core dumps: 1 byte, not 0.  A core_pattern that pipes to a host
     * helper (systemd-coredump, apport) ignores the limit, except the
     * value 1, which makes the kernel skip the helper; a file dump needs
     * a page.  seccomp keeps the command from changing it (seccomp.c). */
    struct rlimit core1 = {1, 1};
    if (setrlimit(RLIMIT_CORE, &core1) < 0)
        fail("setrlimit(RLIMIT_CORE)", errno);
    if ((r = set_rlimit(RLIMIT_NOFILE, p->rlimit_nofile)) < 0 || (r = set_rlimit(RLIMIT_FSIZE, p->rlimit_fsize)) < 0 ||
        (r = set_rlimit(RLIMIT_NPROC, p->rlimit_nproc)) < 0)
        fail("setrlimit", r);
    /* CPU time: SIGXCPU at the soft limit (a program may save its work),
     * SIGKILL one second later at the hard one. */
    if (p->rlimit_cpu) {
        struct rlimit cpu = {p->rlimit_cpu, p->rlimit_cpu + 1};
        struct rlimit old;
        if (getrlimit(RLIMIT_CPU, &old) == 0 && old.rlim_max != RLIM_INFINITY && old.rlim_max < cpu.rlim_max)
            cpu.rlim_cur = cpu.rlim_max = old.rlim_max;
        if (setrlimit(RLIMIT_CPU, &cpu) < 0)
            fail("setrlimit(RLIMIT_CPU)", errno);
    }
    if (chdir(p->cwd) < 0)
        fail("chdir to the working directory", errno);

    int keep[] = {LAUNCH_SYNC_FD, LAUNCH_GO_FD};
    if (fcntl(LAUNCH_GO_FD, F_SETFD, FD_CLOEXEC) < 0 || fcntl(LAUNCH_SYNC_FD, F_SETFD, FD_CLOEXEC) < 0)
        fail("marking the sync descriptors close-on-exec", errno);
    if ((r = close_all_fds_except(3, keep, 2)) < 0)
        fail("closing inherited descriptors", r);
    if ((r = drop_capabilities()) < 0)
        fail("dropping capabilities", r);

    PV_MARK("C_caps");
    int abi = 0;
    uint64_t hfs = 0, hnet = 0, scoped = 0;
    if (p->landlock && (r = launch_landlock(p, &abi, &hfs, &hnet, &scoped, &step)) < 0)
        fail(step, r);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        fail("PR_SET_NO_NEW_PRIVS", errno);
    if (p->seccomp && (r = launch_seccomp(&step)) < 0)
        fail(step, r);

    PV_MARK("C_sec");
    json_t *ev = self_check(abi, hfs, hnet, scoped, p->seccomp);
    json_t *msg = json_pack("{s:b, s:o}", "ok", 1, "evidence", ev ? ev : json_object());
    char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    if (!s)
        fail("encoding the self-check", ENOMEM);
    /* RLIMIT_AS (--limit mem without a cgroup) comes last, after the
     * report is encoded: from here to the exec nothing allocates, so a
     * launcher that maps much address space of its own (a sanitizer
     * build) is not its victim.  The report line is finished with what
     * getrlimit says afterwards, or turned into a failure. */
    size_t len = strlen(s);
    if (len < 2 || s[len - 1] != '}')
        fail("encoding the self-check", EINVAL);
    s[--len] = '\0'; /* the report's closing brace, written with the tail */
    if (write(LAUNCH_SYNC_FD, s, len) != (ssize_t)len)
        fail("writing the self-check", errno);
    free(s);
    json_decref(msg);
    char tail[200];
    int tl;
    struct rlimit as;
    if ((r = set_rlimit(RLIMIT_AS, p->rlimit_as)) < 0)
        tl = snprintf(tail, sizeof tail,
                      ",\"ok\":false,\"step\":\"setrlimit(RLIMIT_AS)\",\"errno\":%d,\"message\":\"%s\"}\n", -r,
                      strerror(-r));
    else if (p->rlimit_as && getrlimit(RLIMIT_AS, &as) == 0)
        tl = snprintf(tail, sizeof tail, ",\"rlimit_as\":{\"soft\":%llu,\"hard\":%llu}}\n",
                      (unsigned long long)as.rlim_cur, (unsigned long long)as.rlim_max);
    else
        tl = snprintf(tail, sizeof tail, "}\n");
    if (tl <= 0 || (size_t)tl >= sizeof tail || write(LAUNCH_SYNC_FD, tail, (size_t)tl) != tl || r < 0)
        _exit(125);

    /* The supervisor decides (e.g. --strict) with the evidence in hand. */
    PV_MARK("C_sent");
    await_go(LAUNCH_GO_FD);
    PV_MARK("C_exec");

    environ = p->envp; /* execvp searches the command's PATH, not ours */
    if (p->exec_path)
        execv(p->exec_path, p->argv); /* returns only on failure: then search PATH, as before */
    execvp(p->argv[0], p->argv);
    int e = errno;
    /* The report already said ok: tell the supervisor exec failed. */
    char buf[160];
    int m =
        snprintf(buf, sizeof buf, "{\"ok\":false,\"step\":\"exec\",\"errno\":%d,\"message\":\"%s\"}\n", e, strerror(e));
    (void)!write(LAUNCH_SYNC_FD, buf, (size_t)m);
    _exit(e == ENOENT ? 127 : 126);
}

/* The processes of the PID namespace still alive besides init (the
 * command's leftovers, which init's exit kills): /proc is the namespace's
 * own.  Those dying already are not counted, as for a plain run
 * (pid_dying, pids_still_alive): the zombies, and those a signal is ending
 * (the terminal's hangup when the command, its session leader, ended: a
 * SIGHUP to its foreground jobs, which some were counted alive in, some
 * not).  -1 when /proc could not be listed: not "none". */
static int count_leftovers(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans that ended already */
        ;
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    pid_t *alive = NULL;
    size_t n = 0, cap = 0;
    unsigned uncounted = 0; /* alive, past what could be allocated */
    struct dirent *e;
    int err = 0;
    for (;;) {
        errno = 0;
        if (!(e = readdir(d))) {
            err = errno;
            break;
        }
        char *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid > INT_MAX || pid_dying((pid_t)pid))
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            pid_t *a = realloc(alive, c * sizeof *a);
            if (!a) {
                uncounted++;
                continue;
            }
            alive = a;
            cap = c;
        }
        alive[n++] = (pid_t)pid;
    }
    closedir(d);
    n = pids_still_alive(alive, n);
    free(alive);
    return err ? -1 : (int)(n + uncounted);
}

struct command_args {
    const struct launch_plan *p;
    const struct term *t;
    const struct stdio_relay *io;
    int status_fd;
};

static int command_child(void *arg) {
    const struct command_args *a = arg;
    close(a->status_fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    become_command(a->p, a->t, a->io);
}

#define COMMAND_STACK (256 * 1024)

/* The command's process (A), started as posix_spawn starts one: it shares
 * init's memory until its exec (clone(CLONE_VM | CLONE_VFORK) on a stack
 * of its own), init waiting meanwhile, so neither init's page tables are
 * copied nor each page A then writes (its Landlock rules, its self-check)
 * copied first: some 50 page faults of a run, each of them dear on a
 * paravirtualised VM.  Sound here as it is not in a threaded program: init
 * has one thread by then (the one that looks through /proc while the root
 * is built is joined before launch_build_root returns, whatever it
 * returns) and no signal handler (its signals are blocked and read
 * from a signalfd), and what A allocates stays in init's heap.  Only our
 * code runs in the shared memory: the command's own starts with its exec
 * (a new address space), or A ends.  Its controls (the nested user
 * namespace, capabilities, no_new_privs, Landlock, seccomp) are the task's
 * own, not init's.  A's `environ = envp` (for execvp's PATH search) is
 * init's too: put back.  -1 and errno on failure. */
static pid_t start_command(struct command_args *a) {
#if PV_SPAWN_WITH_FORK
    pid_t pid = fork();
    if (pid == 0)
        command_child(a);
    return pid;
#else
    char **env = environ;
    void *stack = mmap(NULL, COMMAND_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    pid_t pid = clone(command_child, (char *)stack + COMMAND_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
    int e = errno;
    environ = env;
    munmap(stack, COMMAND_STACK); /* A has exec'd or ended */
    errno = e;
    return pid;
#endif
}

/* I: PID 1 of the new PID namespace. */
static _Noreturn void become_init(const struct launch_plan *p, int status_fd) {
    const char *step = "";
    int r;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        fail("PR_SET_PDEATHSIG", errno);
    PV_MARK("I0");
    if ((r = launch_build_root(p, &step)) < 0)
        fail(step, r);
    PV_MARK("I_root");
    if (sethostname(p->hostname, strlen(p->hostname)) < 0)
        fail("sethostname", errno);
    if (p->unshare_net && (r = loopback_up()) < 0)
        fail("bringing up loopback in the private network namespace", r);
    if (p->dns_stub && (r = hand_over_dns()) < 0)
        fail("binding the run's name server on the sandbox's loopback", r);
    if (p->proxy_port && (r = hand_over_proxy(p->proxy_port)) < 0)
        fail("listening for the egress broker on the sandbox's loopback", r);
    hand_over_tmpfs();
    struct term t = {.master = -1};
    if (p->tty && (r = open_terminal(&t, p->tty_input)) < 0)
        fail("opening a pty for the command", r);

    static struct stdio_relay io; /* (static: its buffer) */
    if ((r = stdio_relay_open(&io, &t)) < 0)
        fail("relaying the command's standard descriptors", r);

    PV_MARK("I_start_cmd");
    pid_t a = start_command(&(struct command_args){.p = p, .t = &t, .io = &io, .status_fd = status_fd});
    if (a < 0)
        fail("starting the command's process", errno);
    stdio_relay_started(&io);
    close(LAUNCH_SYNC_FD);
    close(LAUNCH_GO_FD);
    int st = t.master >= 0 ? relay_terminal_and_wait(a, &t, &io) : relay_and_wait(a, &io);
    PV_MARK("I_cmd_gone");
    /* before the status: the launcher exits on it, and the supervisor
     * reads this once the launcher is gone */
    if (io.lost_fd) { /* before the leftovers: the supervisor reads on until those */
        char lost[48];
        int ml = snprintf(lost, sizeof lost, "stdio %d %d\n", io.lost_fd, io.lost_errno);
        (void)!write(LAUNCH_END_FD, lost, (size_t)ml);
    }
    char left[32];
    int nl = count_leftovers();
    int ll = nl < 0 ? snprintf(left, sizeof left, LAUNCH_LEFTOVERS_UNKNOWN)
                    : snprintf(left, sizeof left, "leftovers %d\n", nl);
    (void)!write(LAUNCH_END_FD, left, (size_t)ll); /* one message */
    (void)!write(status_fd, &st, sizeof st);
    _exit(0);
}

/* inotify's limits count per user, for the host as a whole
 * (fs.inotify.max_user_instances, 128 by default, and max_user_watches):
 * the kernel charges the command's instances and watches to every user
 * namespace up to the initial one, so a command that took them all left
 * the user's editor, file watchers and `tail -f` outside without any
 * (EMFILE, ENOSPC) until the run ended.  The run's user namespace gets
 * half of each host limit as its own (the launcher may set it: it holds
 * CAP_SYS_RESOURCE there), so the other half stays the host's.  Never in
 * the initial namespace, where the same file is the host's setting.  A
 * kernel without the per-namespace limits (before 4.9) is left alone. */
static int limit_inotify(void) {
    static const char *const limits[][2] = {
        {"/proc/sys/fs/inotify/max_user_instances", "/proc/sys/user/max_inotify_instances"},
        {"/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"},
    };
    if (userns_is_initial())
        return -EPERM; /* these are the host's settings (or no /proc to tell) */
    for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
        _cleanup_free_ char *buf = NULL;
        int r = read_file_at(AT_FDCWD, limits[i][0], 64, &buf, NULL);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return r;
        long host = strtol(buf, NULL, 10);
        char half[32];
        snprintf(half, sizeof half, "%ld\n", host > 1 ? host / 2 : 1);
        r = write_string_at(AT_FDCWD, limits[i][1], half);
        if (r < 0 && r != -ENOENT)
            return r;
    }
    return 0;
}

/* The run's processes are the OOM killer's first choice over the
 * supervisor, whose death would lose the views (and with them what the
 * command had in flight): oom_score_adj at least PV_OOM_SCORE_ADJ, which
 * every process of the run inherits.  The kernel would let them lower it
 * back to 0 (oom_score_adj_min), but the sandbox's /proc is not theirs to
 * write (Landlock; read-only as root).  A higher one the caller set is
 * kept.  Not a guarantee the run claims: a host where it cannot be
 * written runs without it. */
#define PV_OOM_SCORE_ADJ 500
static int raise_oom_score(void) {
    _cleanup_free_ char *buf = NULL;
    int r = read_file_at(AT_FDCWD, "/proc/self/oom_score_adj", 32, &buf, NULL);
    if (r < 0)
        return r;
    if (strtol(buf, NULL, 10) >= PV_OOM_SCORE_ADJ)
        return 0;
    char v[16];
    snprintf(v, sizeof v, "%d\n", PV_OOM_SCORE_ADJ);
    return write_string_at(AT_FDCWD, "/proc/self/oom_score_adj", v);
}

int launch_main(int argc, char **argv) {
    if (argc != 1)
        return 125;
    struct launch_plan p = {0};
    PV_MARK("L0");
    int r = read_plan(&p);
    if (r < 0)
        fail("reading the launch plan", r);

    /* Signals are relayed through signalfds; block them for the whole
     * chain (A unblocks before exec). */
    sigset_t mask;
    relayed_signals(&mask);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    /* While the supervisor mounts the views: every namespace but the
     * mount namespace, each alone, so that a refusal names the one
     * refused (ENOSPC: its user.max_*_namespaces, ns_limit_remedy). */
    static const struct {
        int flag;
        const char *step;
    } early[] = {
        {CLONE_NEWPID, "unshare(CLONE_NEWPID)"},
        {CLONE_NEWIPC, "unshare(CLONE_NEWIPC)"},
        {CLONE_NEWUTS, "unshare(CLONE_NEWUTS)"},
        {CLONE_NEWNET, "unshare(CLONE_NEWNET)"},
    };
    for (size_t k = 0; k < ARRAY_SIZE(early); k++)
        if ((early[k].flag != CLONE_NEWNET || p.unshare_net) && unshare(early[k].flag) < 0)
            fail(early[k].step, errno);
    if ((r = limit_inotify()) < 0)
        fail("limiting the run's share of the user's inotify instances and watches", r);
    (void)raise_oom_score();

    /* The supervisor's views are mounted (see launch.h): the mount
     * namespace is copied with them in it. */
    await_go(LAUNCH_READY_FD);
    PV_MARK("L_go");
    if (unshare(CLONE_NEWNS) < 0)
        fail("unshare(CLONE_NEWNS)", errno);
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
        fail("making mounts private", errno);
    PV_MARK("L_ns");

    int sp[2];
    if (pipe2(sp, O_CLOEXEC) < 0)
        fail("pipe", errno);
    pid_t i = fork();
    if (i < 0)
        fail("fork of the namespace init", errno);
    if (i == 0) {
        close(sp[0]);
        become_init(&p, sp[1]);
    }
    close(sp[1]);
    /* A signal sent to our process group before I existed (a Ctrl-C at
     * the terminal as the run starts: the group is its foreground one)
     * waits here, blocked, where nothing relays it, and I does not
     * inherit it: the command ran on as if it had not come.  I, which
     * relays to the command (or whose command dies of it before its
     * report: the run was interrupted), gets it. */
    sigset_t pending;
    if (sigpending(&pending) == 0)
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGCHLD && sigismember(&mask, sig) && sigismember(&pending, sig))
                kill(i, sig);
    close(LAUNCH_SYNC_FD);
    close(LAUNCH_GO_FD);
    /* Not relayed: I is in L's process group, where the supervisor sends
     * every signal (--timeout's SIGTERM, a forwarded one), so it gets each
     * once, directly.  Relayed as well, it got them twice and relayed both
     * to the command's group: a background job's TERM trap ran twice. */
    int st;
    bool init_gone = true;
    while (waitpid(i, &st, 0) < 0)
        if (errno != EINTR) {
            st = 125 << 8;
            init_gone = false;
            break;
        }
    int cmd_st;
    if (read(sp[0], &cmd_st, sizeof cmd_st) == (ssize_t)sizeof cmd_st)
        st = cmd_st;
    /* Init is gone, and its end waited for every process of its PID
     * namespace: the supervisor may stop the views and seal the stage now,
     * while the kernel tears down this process's namespaces (launch.h). */
    if (init_gone) {
        char end[32];
        int el = snprintf(end, sizeof end, "end %d\n", like_status(st));
        (void)!send(LAUNCH_END_FD, end, (size_t)el, MSG_NOSIGNAL);
    }
    plan_free(&p);
    exit_like(st);
}
