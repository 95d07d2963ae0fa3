/* exec.c: see exec.h.
 *
 * Signal handling uses a signalfd with the forwarded signals and SIGCHLD
 * blocked for the whole run, so no async handler touches state.  The child
 * restores the original mask and default dispositions before exec.
 */
#include "exec/exec.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

/* Exit status of a child whose supervisor vanished before it could exec. */
#define PV_CHILD_ORPHANED 125

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/* Child side between fork and exec: only async-signal-safe calls. */
static _Noreturn void child_exec(const struct exec_spec *s, int go_fd, int err_fd, const sigset_t *old_mask,
                                 const sigset_t *relayed, pid_t parent) {
    int e;
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        goto fail_errno;
    /* The parent may have died between fork and prctl. */
    if (getppid() != parent)
        _exit(PV_CHILD_ORPHANED);

    /* What pvisor relays, the command gets with its default action; what
     * pvisor was started ignoring (nohup's SIGHUP, the SIGINT of a job a
     * shell put in the background) it inherits ignored, as it would
     * without pvisor. */
    for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
        if (sigismember(relayed, forwarded[i]))
            signal(forwarded[i], SIG_DFL);
    signal(SIGTTOU, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);

    /* Wait for the parent's go (one byte) before touching the filesystem,
     * or leave that to the program we exec (early_exec). */
    if (!s->early_exec) {
        char c;
        ssize_t n;
        do
            n = read(go_fd, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1)
            _exit(PV_CHILD_ORPHANED);
        close(go_fd);
    }

    if (s->cwd && chdir(s->cwd) < 0) {
        int32_t msg[2] = {2, errno};
        (void)!write(err_fd, msg, sizeof msg);
        _exit(125);
    }
    /* Hand over the passed descriptors as 3, 4, ...: first move them all
     * out of the way so a source cannot be clobbered by an earlier dup2. */
    int moved[8];
    int n_pass = s->n_pass_fds < 7 ? s->n_pass_fds : 7;
    for (int i = 0; i < n_pass; i++) {
        moved[i] = fcntl(s->pass_fds[i], F_DUPFD_CLOEXEC, 64);
        if (moved[i] < 0)
            goto fail_errno;
    }
    if (s->early_exec) {
        moved[n_pass] = fcntl(go_fd, F_DUPFD_CLOEXEC, 64);
        if (moved[n_pass] < 0)
            goto fail_errno;
        n_pass++;
    }
    for (int i = 0; i < n_pass; i++)
        if (dup2(moved[i], 3 + i) < 0)
            goto fail_errno;
    for (int i = 0; i < s->n_keep_fds; i++)
        if (s->keep_fds[i] < 16 || fcntl(s->keep_fds[i], F_SETFD, 0) < 0) {
            errno = s->keep_fds[i] < 16 ? EBADF : errno;
            goto fail_errno;
        }
    if (s->child_nofile && setrlimit(RLIMIT_NOFILE, s->child_nofile) < 0)
        goto fail_errno;
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execvpe(s->argv[0], s->argv, s->envp ? s->envp : environ);
fail_errno:
    e = errno;
    int32_t msg[2] = {1, e};
    (void)!write(err_fd, msg, sizeof msg);
    _exit(e == ENOENT ? 127 : 126);
}

/* early_exec's child: started as posix_spawn starts one, sharing our
 * memory until its exec (clone(CLONE_VM | CLONE_VFORK), we wait meanwhile):
 * no copy of the supervisor's page tables, which the exec would throw
 * away at once, and no copy-on-write fault for every page the supervisor
 * then writes while the child waits for a CPU.  It may only make system
 * calls (child_exec's), on a stack of its own; no handler of ours may run
 * in it: every signal is blocked (by the parent, before the clone) until
 * the exec, and each one that has a handler is first set back to its
 * default (the handlers are the child's own copy, not ours). */
struct spawn_args {
    const struct exec_spec *s;
    int go_fd, err_fd, close_go, close_err;
    const sigset_t *old_mask, *relayed;
    pid_t parent;
};

#define SPAWN_STACK (256 * 1024)

/* (PV_SPAWN_WITH_FORK: AddressSanitizer builds fork instead, util.h) */

static int spawn_child(void *arg) {
    const struct spawn_args *a = arg;
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
            continue;
        if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            sigemptyset(&sa.sa_mask);
            (void)sigaction(sig, &sa, NULL);
        }
    }
    close(a->close_go);
    close(a->close_err);
    child_exec(a->s, a->go_fd, a->err_fd, a->old_mask, a->relayed, a->parent);
}

/* The early_exec child, spawned (see spawn_child); -errno on failure. */
static pid_t spawn_early(struct spawn_args *a) {
    void *stack = mmap(NULL, SPAWN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -errno;
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    pid_t pid = clone(spawn_child, (char *)stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    munmap(stack, SPAWN_STACK); /* the child has exec'd or exited */
    return pid < 0 ? -e : pid;
}

/* pid's children, appended to pids[*n..max). */
static void list_children_of(pid_t pid, pid_t *pids, size_t *n, size_t max) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    _cleanup_closedir_ DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) && *n < max) {
        if (de->d_name[0] == '.')
            continue;
        char cpath[300];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", (int)pid, de->d_name);
        _cleanup_fclose_ FILE *f = fopen(cpath, "re");
        long c;
        while (f && *n < max && fscanf(f, "%ld", &c) == 1)
            pids[(*n)++] = (pid_t)c;
    }
}

/* The children of every thread of this process into pids (up to max). */
static size_t list_children(pid_t *pids, size_t max) {
    size_t n = 0;
    list_children_of(getpid(), pids, &n, max);
    return n;
}

/* The descendants still alive (not dying, pids_still_alive), up to max:
 * our children and, below each one alive, its own (a subshell's job in the
 * command's group, which the group kill takes before it could be
 * reparented to us and seen); not below one dying (a sandbox's init, whose
 * namespace the kernel empties). */
static size_t live_children(pid_t *pids, size_t max) {
    size_t n = list_children(pids, max), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (pid_dying(pids[i]))
            continue;
        pid_t p = pids[i];
        pids[k++] = p;
        if (n < max) /* descendants go after the listed ones, visited in turn */
            list_children_of(p, pids, &n, max);
    }
    return pids_still_alive(pids, k);
}

/* Reap the children that have exited already; -ECHILD when there is no
 * child left at all, 0 when some are still running. */
static int reap_exited(void) {
    pid_t w;
    int st;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0 || (w < 0 && errno == EINTR))
        ;
    return w < 0 ? -errno : 0;
}

static int reap_descendants(const pid_t *known, size_t n_known);

/* The command's end (its child, pid, leads the process group): SIGKILL the
 * group, then kill and reap every other descendant left (reparented to us,
 * the subreaper); how many were alive.  No child at all (the usual end: the
 * command's tree ended with it, or a sandbox's PID namespace took it): with
 * none, nothing can be reparented to us either, and there is nothing to
 * look for in /proc. */
static int kill_leftovers(pid_t pid) {
    if (reap_exited() == -ECHILD) {
        kill(-pid, SIGKILL);
        return 0;
    }
    pid_t left[256];
    size_t n_left = live_children(left, ARRAY_SIZE(left));
    kill(-pid, SIGKILL);
    return (int)n_left + reap_descendants(left, n_left);
}

/* Kill and reap everything still below us.  Returns how many were killed
 * that were alive when seen and are not among known[] (counted already);
 * what is going already (a cgroup kill of the run's tree, the group kill
 * before this) is not counted, nor is a process twice. */
static int reap_descendants(const pid_t *known, size_t n_known) {
    int killed = 0;
    for (;;) {
        pid_t pids[256], unseen[256];
        size_t n = list_children(pids, ARRAY_SIZE(pids)), n_unseen = 0;
        for (size_t i = 0; i < n; i++) {
            bool seen = pid_dying(pids[i]);
            for (size_t k = 0; k < n_known && !seen; k++)
                seen = known[k] == pids[i];
            if (!seen)
                unseen[n_unseen++] = pids[i];
        }
        /* those a signal was ending are not counted either: looked at
         * again before the kill makes them all dying */
        n_unseen = pids_still_alive(unseen, n_unseen);
        for (size_t i = 0; i < n_unseen; i++)
            if (kill(unseen[i], SIGKILL) == 0)
                killed++;
        for (size_t i = 0; i < n; i++) /* the rest (a second SIGKILL changes nothing) */
            kill(pids[i], SIGKILL);
        int st;
        pid_t w = waitpid(-1, &st, n ? 0 : WNOHANG);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) /* ECHILD: nothing left */
            return killed;
        if (w == 0) {
            /* A child exists but /proc did not list it yet: wait for it. */
            w = waitpid(-1, &st, 0);
            if (w < 0 && errno == ECHILD)
                return killed;
        }
    }
}

/* The command, given the terminal, was stopped (Ctrl-Z, SIGSTOP): stop
 * pvisor with it, so that the shell sees the job stopped and gets its
 * terminal back, instead of waiting for pvisor forever.  When the shell
 * continues pvisor (fg, bg), the command gets the terminal back (fg) and
 * continues too. */
static void follow_stop(int tty_fd, pid_t pid) {
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    if (tcgetpgrp(tty_fd) == pid) /* never take the terminal from the shell (after a bg) */
        tcsetpgrp(tty_fd, getpgrp());
    kill(getpid(), SIGSTOP); /* returns once continued */
    if (tcgetpgrp(tty_fd) == getpgrp())
        tcsetpgrp(tty_fd, pid); /* in the foreground again (fg, not bg) */
    signal(SIGTTOU, old);
    kill(-pid, SIGCONT);
}

/* The first step of ending the run before the command ended: the
 * caller's on_terminate, once. */
static void begin_terminating(const struct exec_spec *s, bool *terminating) {
    if (!*terminating && s->on_terminate)
        s->on_terminate(s->userdata);
    *terminating = true;
}

int exec_run(const struct exec_spec *s, struct exec_result *ret) {
    if (s->early_exec && s->cwd)
        return -EINVAL;
    struct exec_result res = {0};
    /* The signals pvisor relays: those it was not started ignoring.  A
     * blocked signal is queued even while ignored, so an ignored one in
     * the signalfd's mask would be relayed: `nohup pvisor run ...` lost
     * its command when the terminal closed. */
    sigset_t mask, old_mask, relayed;
    sigemptyset(&relayed);
    for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++) {
        struct sigaction cur;
        if (sigaction(forwarded[i], NULL, &cur) < 0 || cur.sa_handler != SIG_IGN)
            sigaddset(&relayed, forwarded[i]);
    }
    mask = relayed;
    sigaddset(&mask, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &mask, &old_mask) < 0)
        return -errno;

    int r = 0;
    _cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int go[2] = {-1, -1}, err[2] = {-1, -1};
    bool have_tty = false;
    int tty_fd = STDIN_FILENO;
    pid_t pid = -1;

    if (sfd < 0) {
        r = -errno;
        goto out_mask;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        r = -errno;
        goto out_mask;
    }
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        r = -errno;
        goto out_pipes;
    }

    /* Terminal foreground handoff only when we are in the foreground now. */
    if (isatty(tty_fd) && tcgetpgrp(tty_fd) == getpgrp())
        have_tty = true;

    pid_t parent = getpid();
    if (s->early_exec && !PV_SPAWN_WITH_FORK) {
        struct spawn_args a = {
            .s = s,
            .go_fd = go[0],
            .err_fd = err[1],
            .close_go = go[1],
            .close_err = err[0],
            .old_mask = s->child_sigmask ? s->child_sigmask : &old_mask,
            .relayed = &relayed,
            .parent = parent,
        };
        pid = spawn_early(&a);
        if (pid < 0) {
            r = pid;
            goto out_pipes;
        }
    } else if ((pid = fork()) < 0) {
        r = -errno;
        goto out_pipes;
    }
    if (pid == 0) {
        close(go[1]);
        close(err[0]);
        child_exec(s, go[0], err[1], s->child_sigmask ? s->child_sigmask : &old_mask, &relayed, parent);
    }
    close(go[0]);
    go[0] = -1;
    close(err[1]);
    err[1] = -1;
    setpgid(pid, pid);

    if (s->after_fork) {
        r = s->after_fork(pid, s->userdata);
        if (r < 0) {
            /* Never let the child exec: closing go[] makes it exit. */
            close(go[1]);
            go[1] = -1;
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            goto out_pipes;
        }
    }

    if (have_tty) {
        void (*old)(int) = signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(tty_fd, pid);
        signal(SIGTTOU, old);
    }
    /* early_exec: a child whose exec failed has closed its end already;
     * its report is read from err[] below. */
    PV_MARK("S_go");
    r = write_byte_no_sigpipe(go[1], 'g');
    if (r == -EPIPE && s->early_exec)
        r = 0;
    if (r < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        goto out_tty;
    }
    close(go[1]);
    go[1] = -1;

    int32_t msg[2];
    ssize_t n;
    do
        n = read(err[0], msg, sizeof msg);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof msg) {
        if (msg[0] == 2)
            res.chdir_errno = msg[1];
        else
            res.exec_errno = msg[1];
    }

    if (!res.exec_errno && !res.chdir_errno && s->after_exec)
        s->after_exec(pid, s->userdata);

    /* Main loop: forward signals, wait for the command itself.  A second
     * termination request, or the grace period after the first, escalates
     * to SIGKILL of the group: Ctrl-C / SIGTERM to pvisor always ends the
     * run, even when the command ignores the signal. */
    int64_t kill_deadline_ms = -1;
    int64_t timeout_deadline_ms = s->timeout_ms ? monotonic_ms() + (int64_t)s->timeout_ms : -1;
    int64_t watch_deadline_ms = s->watch && !res.exec_errno && !res.chdir_errno ? monotonic_ms() : -1;
    bool watch_due = watch_deadline_ms >= 0;
    bool terminating = false; /* on_terminate was called */
    bool watch_end = s->end_ready && !res.exec_errno && !res.chdir_errno;
    for (;;) {
        if (watch_due) {
            int64_t w = s->watch(s->watch_userdata);
            if (w == 0) {
                begin_terminating(s, &terminating);
                kill(-pid, SIGKILL);
                res.limit_killed = true;
            }
            watch_deadline_ms = w > 0 ? monotonic_ms() + w : -1;
            watch_due = false;
        }
        int timeout = -1;
        int64_t next = kill_deadline_ms >= 0 ? kill_deadline_ms : timeout_deadline_ms;
        bool next_is_watch = watch_deadline_ms >= 0 && (next < 0 || watch_deadline_ms < next);
        if (next_is_watch)
            next = watch_deadline_ms;
        if (next >= 0) {
            int64_t left = next - monotonic_ms();
            timeout = left > 0 ? (left > INT32_MAX ? INT32_MAX : (int)left) : 0;
        }
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN}, {.fd = s->end_fd, .events = POLLIN}};
        int pr = poll(pfd, watch_end ? 2 : 1, timeout);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr > 0 && watch_end && pfd[1].revents) {
            int st;
            if (s->end_ready(s->userdata, &st)) {
                res.wait_status = st;
                res.reap_pending = true;
                break;
            }
            if (pfd[1].revents & (POLLHUP | POLLERR | POLLNVAL))
                watch_end = false; /* read to its end: the child's exit says the rest */
            if (!(pfd[0].revents & POLLIN))
                continue;
        }
        if (pr == 0 && next_is_watch) {
            watch_due = true; /* the watch's turn, at the top of the loop */
            continue;
        }
        if (pr == 0 && kill_deadline_ms >= 0) {
            kill(-pid, SIGKILL);
            res.escalated = true;
            kill_deadline_ms = -1;
            continue;
        }
        if (pr == 0) { /* the run's timeout: terminate, then kill after the grace */
            begin_terminating(s, &terminating);
            kill(-pid, SIGTERM);
            res.timed_out = true;
            timeout_deadline_ms = -1;
            kill_deadline_ms = monotonic_ms() + s->kill_grace_ms;
            continue;
        }
        struct signalfd_siginfo si;
        ssize_t got = pr < 0 ? -1 : read(sfd, &si, sizeof si);
        if (got < 0 && errno == EINTR)
            continue;
        if (got != (ssize_t)sizeof si) {
            /* pvisor can no longer relay signals or see the command end:
             * it is killed and waited for here.  It was started, so this
             * is its result (killed), not a failure to start it: the
             * caller said "cannot start the command" of a command that
             * had run, and left its stage unsealed. */
            res.watch_errno = got < 0 ? errno : EIO;
            begin_terminating(s, &terminating);
            kill(-pid, SIGKILL);
            int st = SIGKILL; /* as a status: killed by it */
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            res.wait_status = st;
            break;
        } else if (si.ssi_signo != SIGCHLD) {
            if (si.ssi_signo != SIGQUIT)
                begin_terminating(s, &terminating);
            if (kill_deadline_ms >= 0 || res.escalated) {
                kill(-pid, SIGKILL);
                res.escalated = true;
                kill_deadline_ms = -1;
            } else {
                kill(-pid, (int)si.ssi_signo);
                if (si.ssi_signo != SIGQUIT)
                    kill_deadline_ms = monotonic_ms() + s->kill_grace_ms;
            }
            if (si.ssi_signo != SIGQUIT && !res.interrupted_by)
                res.interrupted_by = (int)si.ssi_signo;
            continue;
        }
        int st;
        pid_t w;
        bool done = false;
        while ((w = waitpid(-1, &st, WNOHANG | WUNTRACED)) > 0)
            if (w == pid && WIFSTOPPED(st)) {
                /* job control is the terminal's: without one nobody would
                 * continue a stopped pvisor, and a SIGTERM to it must still
                 * end the run (forwarded, then escalated); a SIGSTOP from
                 * elsewhere is not the user's Ctrl-Z */
                int sig = WSTOPSIG(st);
                if (have_tty && (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU))
                    follow_stop(tty_fd, pid);
            } else if (w == pid) {
                res.wait_status = st;
                done = true;
            }
        if (done)
            break;
    }

    /* the leftovers: what the command left running (reparented to us),
     * not what a kill of the whole tree (a cgroup's) has already doomed */
    if (s->before_reap) /* first: its child is not a leftover */
        s->before_reap(s->userdata);
    res.child = pid;
    if (res.reap_pending) /* the child still ends: exec_reap() */
        goto out_tty;
    res.killed_descendants = kill_leftovers(pid);

out_tty:
    /* the terminal back, unless the shell has it already (the job was
     * put in the background with bg: taking it would leave the shell
     * reading EIO) */
    if (have_tty && tcgetpgrp(tty_fd) == pid) {
        void (*old)(int) = signal(SIGTTOU, SIG_IGN);
        tcsetpgrp(tty_fd, getpgrp());
        signal(SIGTTOU, old);
    }
out_pipes:
    for (int i = 0; i < 2; i++) {
        if (go[i] >= 0)
            close(go[i]);
        if (err[i] >= 0)
            close(err[i]);
    }
out_mask:
    if (r >= 0) {
        /* The run is not over when the command is: the caller still seals
         * the stage and writes the Bundle.  A termination signal that
         * arrives meanwhile (a second SIGHUP as the terminal closes, a
         * process manager's SIGTERM) has no command to go to, and
         * unblocked its default action would kill pvisor half-way: the
         * stage left interrupted (the command's finished work can no
         * longer be applied) and the Bundle still saying "running".  They
         * stay blocked; what is pending is dropped when pvisor exits. */
        for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
            if (sigismember(&relayed, forwarded[i]))
                sigaddset(&old_mask, forwarded[i]);
    }
    /* Unblocked: only what was blocked here, not the whole mask as it was
     * (SIG_SETMASK): what the callbacks blocked meanwhile stays so (the
     * views' wake signal, which overlay_start blocks in this thread: set
     * back, any SIGURG sent to pvisor interrupted the end of the run, the
     * stage's seal and the Bundle's write). */
    sigset_t unblock;
    sigemptyset(&unblock);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&mask, sig) == 1 && !sigismember(&old_mask, sig))
            sigaddset(&unblock, sig);
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);
    if (r >= 0)
        *ret = res;
    return r;
}

void exec_reap(struct exec_result *r) {
    if (!r->reap_pending)
        return;
    r->reap_pending = false;
    /* It said the end and has nothing left to do but exit: killed, it
     * cannot stop on the way (a Ctrl-Z at the terminal, whose foreground
     * group it leads). */
    kill(-r->child, SIGKILL);
    kill(r->child, SIGKILL);
    while (waitpid(r->child, NULL, 0) < 0 && errno == EINTR)
        ;
    r->killed_descendants += kill_leftovers(r->child);
}

int exec_exit_status(const struct exec_result *r) {
    if (r->exec_errno)
        return r->exec_errno == ENOENT ? 127 : 126;
    if (r->chdir_errno)
        return 125; /* pvisor could not enter the working directory */
    if (WIFSIGNALED(r->wait_status))
        return 128 + WTERMSIG(r->wait_status);
    return WEXITSTATUS(r->wait_status);
}
