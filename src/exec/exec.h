/* exec.h: run the command as the supervisor's child and see its whole tree
 * gone before returning.
 *
 * Contract of exec_run():
 *  - the child gets its own process group; when stdin is a terminal in our
 *    foreground, that group is made the terminal's foreground group so the
 *    tty, job-control keys and Ctrl-C reach the command directly;
 *  - when the command stops (Ctrl-Z on the terminal it holds), pvisor stops
 *    itself too, the terminal back in its own group, so the shell sees the
 *    job stopped; continued, it hands the terminal back and continues the
 *    command;
 *  - SIGINT/SIGTERM/SIGHUP/SIGQUIT delivered to pvisor are forwarded to the
 *    command's process group; a second SIGINT/SIGTERM/SIGHUP, or
 *    kill_grace_ms after the first, SIGKILLs the group (the run always ends);
 *    on a successful return they stay blocked (the caller seals the stage
 *    and writes the Bundle, which no late signal may cut short; pending
 *    ones are dropped at exit);
 *  - pvisor is a child subreaper: when the command exits, its process group
 *    and then every remaining descendant (double-forked, setsid'd daemons
 *    included, since they are reparented to us) are SIGKILLed and reaped
 *    (when end_ready said the end first: by exec_reap(), which the caller
 *    calls later);
 *  - the child dies with SIGKILL if the supervisor dies (PR_SET_PDEATHSIG),
 *    so fork only from the main thread;
 *  - the child does not exec until after_fork() (run in the parent) returned
 *    success, so mounts it installs are in place; the child chdir()s to cwd
 *    only then.  Unless early_exec: then the child execs at once, while
 *    after_fork() runs, and the program it execs gets the read end of the
 *    go pipe as fd 3 + n_pass_fds: one byte ('g') arrives there once
 *    after_fork() succeeded, EOF when it failed (the child is then killed).
 *    That program must wait for the byte before it relies on anything
 *    after_fork() sets up, or forks (the parent may still be moving it into
 *    a cgroup).
 * Must be called while no other thread forks; the caller may be
 * multi-threaded (after_fork may start threads).
 */
#ifndef PVISOR_EXEC_EXEC_H
#define PVISOR_EXEC_EXEC_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct exec_spec {
    char **argv;                                    /* NULL-terminated; argv[0] looked up on PATH */
    char **envp;                                    /* NULL: inherit environ */
    const char *cwd;                                /* chdir target in the child; NULL: inherit */
    int (*after_fork)(pid_t child, void *userdata); /* may be NULL */
    void *userdata;
    int kill_grace_ms;   /* after a forwarded SIGINT/SIGTERM/SIGHUP */
    uint64_t timeout_ms; /* 0: none; else SIGTERM at the deadline, SIGKILL after the grace */
    /* Descriptors handed to the command as fd 3, 4, ... (not close-on-exec
     * there); every other descriptor above 2 is close-on-exec already. */
    const int *pass_fds;
    int n_pass_fds;
    /* Descriptors the command inherits at their own numbers (16 and up,
     * clear of the passed ones): close-on-exec is cleared in the child. */
    const int *keep_fds;
    int n_keep_fds;
    bool early_exec; /* see above; cwd must be NULL */
    /* Called in the parent once the command was exec'd successfully
     * (before waiting for it); may block briefly, e.g. to read a report. */
    void (*after_exec)(pid_t child, void *userdata);
    /* Called in the parent once the command has ended, or could not be
     * exec'd, before every remaining descendant is killed: the caller
     * collects children of its own there.  May be NULL. */
    void (*before_reap)(void *userdata);
    /* If set, the child restores this RLIMIT_NOFILE before exec (the
     * supervisor may have raised its own for the FUSE server). */
    const struct rlimit *child_nofile;
    /* If set, called (in the parent, after the exec) when its deadline
     * passes: returns milliseconds until the next call, -1 for no more
     * calls, or 0 when a limit was reached and the command's tree must be
     * killed now (SIGKILL to its group; the callback kills the rest). */
    int64_t (*watch)(void *watch_userdata);
    void *watch_userdata;
    /* If set, called (in the parent, with userdata) once, when pvisor
     * starts ending the run before the command ended: a forwarded
     * SIGINT/SIGTERM/SIGHUP, the timeout, a limit.  The caller stops what
     * could hold the command up meanwhile (a live checkpoint pauses the
     * overlay, and a process in a FUSE request dies only once it is
     * answered). */
    void (*on_terminate)(void *userdata);
    /* The signal mask the command starts with; NULL: pvisor's when
     * exec_run was called (the caller may hold signals back meanwhile). */
    const sigset_t *child_sigmask;
    /* If end_ready is set: end_fd becomes readable when the command's end
     * may be known before the child's own (a sandbox's launcher says so
     * once nothing of the run is left but itself, then tears down its
     * namespaces).  end_ready (in the parent, with userdata) reads it and
     * returns true with the wait status the child ends with; exec_run then
     * returns without waiting for the child (ret->reap_pending): the
     * caller must call exec_reap() before it exits. */
    int end_fd;
    bool (*end_ready)(void *userdata, int *ret_wait_status);
};

struct exec_result {
    int wait_status;        /* as from waitpid(2); valid when exec_errno == 0 */
    int exec_errno;         /* > 0: the command could not be executed (errno) */
    int chdir_errno;        /* > 0: chdir(cwd) failed in the child */
    int killed_descendants; /* leftover processes killed after the command exited */
    bool escalated;         /* a termination request was escalated to SIGKILL */
    bool timed_out;         /* the timeout expired and the command was terminated */
    int interrupted_by;     /* the first SIGINT, SIGTERM or SIGHUP forwarded to the command (0: none) */
    bool limit_killed;      /* watch() reported a limit reached; the command was killed */
    int watch_errno;        /* > 0: waiting for the command failed (errno); it was killed */
    pid_t child;            /* the child exec_run started */
    bool reap_pending;      /* end_ready() said the end: exec_reap() must follow */
};

/* Returns 0 when the command was started (or failed to exec, see
 * ret->exec_errno), -errno when pvisor itself failed before the exec. */
int exec_run(const struct exec_spec *s, struct exec_result *ret);

/* After exec_run returned with ret->reap_pending: kill and reap the child,
 * then every remaining descendant, counted in ret->killed_descendants. */
void exec_reap(struct exec_result *ret);

/* Map a result to the exit status pvisor reports (see cli.h). */
int exec_exit_status(const struct exec_result *r);

#endif
