/* run_sandbox_report.c: what the supervisor hears from the launcher of a
 * --filesystem sandbox / --safe run (launch.h has the protocol): its
 * report and self-check on the sync pipe, which decide the go-ahead
 * (refusals of what is not enforced, --strict), init's sockets for the
 * run's name server and egress broker, the end messages on LAUNCH_END_FD;
 * the user's terminal while the command holds a pty of its own; the
 * egress broker's and name server's records once the run has ended.
 * Split from run_sandbox.c, which plans the sandbox.
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "launch/launch.h"
#include "policy/plan_build.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

/* Read one newline-terminated line (bounded) from the sync pipe into a
 * malloc'd string, in chunks; bytes after the newline are kept in sb for
 * the next call.  NULL at EOF without data. */
static char *read_line(struct sandbox *sb) {
    for (;;) {
        char *nl = sb->rlen ? memchr(sb->rbuf, '\n', sb->rlen) : NULL;
        if (nl || sb->rlen == sizeof sb->rbuf || sb->reof) {
            size_t len = nl ? (size_t)(nl - sb->rbuf) : sb->rlen;
            if (len == 0 && !nl)
                return NULL;
            char *line = strndup(sb->rbuf, len);
            size_t used = nl ? len + 1 : len;
            memmove(sb->rbuf, sb->rbuf + used, sb->rlen - used);
            sb->rlen -= used;
            return line;
        }
        ssize_t n = read(sb->sync_r, sb->rbuf + sb->rlen, sizeof sb->rbuf - sb->rlen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            sb->reof = true;
        else
            sb->rlen += (size_t)n;
    }
}

/* A --limit that nothing here installs is never dropped silently: the run
 * is refused, with or without --strict (per-process fallbacks are only
 * warned about).  Fills why with the message. */
static bool limits_unavailable(const struct sandbox *sb, char *why, size_t size) {
    const json_t *per = json_object_get(
        json_object_get(json_object_get(json_object_get(sb->ctx->bundle, "dimensions"), dimension_name(DIM_RESOURCES)),
                        "evidence"),
        "limits");
    char names[64] = "";
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)per, key, v) {
        const char *m = json_string_value(json_object_get(v, "mechanism"));
        if (m && strcmp(m, limit_mechanism_name(LIMIT_MECH_UNAVAILABLE)) == 0 &&
            strlen(names) + strlen(key) + 3 < sizeof names) {
            strcat(names, names[0] ? ", " : "");
            strcat(names, key);
        }
    }
    if (!names[0])
        return false;
    snprintf(why, size,
             "--limit %s cannot be installed here (%s); drop it, or see 'pvisor doctor' for a delegated cgroup v2",
             names,
             sb->limits.mech[LIMIT_PIDS] == LIMIT_MECH_UNAVAILABLE && getuid() == 0
                 ? "no cgroup with the pids controller, and RLIMIT_NPROC does not apply to root"
             : sb->cg_reason[0] ? sb->cg_reason
                                : "the launcher's evidence does not show it installed");
    return true;
}

/* A requested dimension the Bundle records unavailable after the launcher
 * reported every step done: its self-check does not show the control
 * (the capability sets not empty, a namespace not the sandbox's own, no
 * seccomp filter).  Not run, with or without --strict, as an unavailable
 * --limit: --safe asked for it, and it would have been a silent
 * downgrade.  Fills names with them (comma-separated); the first, or
 * NULL. */
static const char *dimension_unavailable(const struct sandbox *sb, char *names, size_t size) {
    json_t *dims = json_object_get(sb->ctx->bundle, "dimensions");
    const char *first = NULL;
    size_t len = 0;
    names[0] = '\0';
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        if (sb->ctx->policy->requested[d] == LEVEL_NONE)
            continue;
        const char *eff = json_string_value(json_object_get(json_object_get(dims, dimension_name(d)), "effective"));
        if (!eff || strcmp(eff, level_name(LEVEL_UNAVAILABLE)) != 0)
            continue;
        if (!first)
            first = dimension_name(d);
        int n = snprintf(names + len, size - len, "%s%s", len ? ", " : "", dimension_name(d));
        if (n < 0 || (size_t)n >= size - len)
            break;
        len += (size_t)n;
    }
    return first;
}

/* Is ipc unavailable only for want of Landlock's scopes (ABI 6), the
 * command being in the host's network namespace (--filesystem sandbox)?
 * Foreseeable on such a kernel, not a self-check surprise: returns the
 * Landlock ABI then, to say so, and -1 otherwise. */
static int ipc_lacks_scopes(const struct sandbox *sb) {
    const json_t *dims = json_object_get(sb->ctx->bundle, "dimensions");
    const json_t *ipc = json_object_get(dims, dimension_name(DIM_IPC));
    const json_t *ev = json_object_get(ipc, "evidence");
    const char *eff = json_string_value(json_object_get(ipc, "effective"));
    const char *pid =
        json_string_value(json_object_get(json_object_get(dims, dimension_name(DIM_CHILD_PROCESSES)), "effective"));
    if (!eff || strcmp(eff, level_name(LEVEL_UNAVAILABLE)) != 0 || !pid ||
        strcmp(pid, level_name(LEVEL_ENFORCED)) != 0 || !json_is_true(json_object_get(ev, "ipc_namespace_differs")) ||
        !json_is_false(json_object_get(ev, "landlock_scoped")) ||
        !json_is_false(json_object_get(ev, "net_namespace_differs")))
        return -1;
    const json_t *ll = json_object_get(json_object_get(sb->report, "evidence"), "landlock");
    return (int)json_integer_value(json_object_get(ll, "abi"));
}

/* The guardian of the user's terminal: a child that waits on a socket from
 * us; at EOF without our 'd' (we were killed: SIGKILL, the OOM killer,
 * where nothing of ours runs) it puts the saved modes back, so the shell
 * the user returns to is not left raw (no echo, no line editing).  Forked
 * from a threaded process: only async-signal-safe calls in it. */
static void tty_guard_start(struct sandbox *sb) {
    int p[2];
    sb->tty_guard = 0;
    sb->tty_guard_fd = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        /* only our end, or a SIGKILL to it alone, ends it: a process
         * group of its own (set on both sides of the fork, as a shell
         * does), so that a signal to the job's group (kill -9 %1) does not
         * take it with us; and other signals, which pvisor handles and
         * then restores the modes itself, ignored */
        (void)setpgid(0, 0);
        /* named for ps(1), and so that 'pkill -x pvisor' leaves it */
        (void)prctl(PR_SET_NAME, "pvisor-tty", 0, 0, 0);
        struct sigaction ign = {.sa_handler = SIG_IGN};
        int sigs[] = {SIGTTOU /* we restore from the background */, SIGINT, SIGQUIT, SIGTSTP, SIGTERM, SIGHUP};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
            sigaction(sigs[i], &ign, NULL);
        /* nothing of the run's (the FUSE servers' /dev/fuse, the
         * launcher's pipes) may live on in it */
        if (dup2(p[0], 3) < 0)
            _exit(1);
        if (syscall(436 /* SYS_close_range */, 4U, ~0U, 0U) < 0)
            for (int fd = 4; fd < 4096; fd++)
                close(fd);
        char c;
        ssize_t n;
        while ((n = read(3, &c, 1)) < 0 && errno == EINTR)
            ;
        if (n == 0)
            (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &sb->tty_saved);
        _exit(0);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return;
    }
    (void)setpgid(pid, pid);
    sb->tty_guard = pid;
    sb->tty_guard_fd = p[1];
}

/* We restored the terminal (or never made it raw): the guardian goes,
 * reaped here, before the run's end would take it for a leftover. */
static void tty_guard_stop(struct sandbox *sb) {
    if (sb->tty_guard <= 0)
        return;
    (void)!send(sb->tty_guard_fd, "d", 1, MSG_NOSIGNAL);
    close(sb->tty_guard_fd);
    while (waitpid(sb->tty_guard, NULL, 0) < 0 && errno == EINTR)
        ;
    sb->tty_guard = 0;
    sb->tty_guard_fd = -1;
}

/* The user's terminal in raw mode (no echo, no line editing, no signals
 * from keys, no output processing): every key goes through init's relay to
 * the command's pty, whose own modes do the rest.  The launcher's process
 * group is the terminal's foreground now, hence SIGTTOU ignored. */
static void tty_raw(struct sandbox *sb) {
    if (!sb->plan.tty_input || tcgetattr(STDIN_FILENO, &sb->tty_saved) < 0)
        return;
    struct termios raw = sb->tty_saved;
    cfmakeraw(&raw);
    tty_guard_start(sb);
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    sb->tty_raw = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
    signal(SIGTTOU, old);
    if (!sb->tty_raw)
        tty_guard_stop(sb);
}

/* Restored with what the terminal received and nobody read discarded
 * (TCSAFLUSH): keys typed after the command ended, and the terminal's
 * answers to queries the agent wrote last (a cursor or title report, which
 * may hold text the agent chose), which the shell would read as typed. */
void sandbox_restore_tty(struct sandbox *sb) {
    if (!sb->tty_raw)
        return;
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &sb->tty_saved);
    signal(SIGTTOU, old);
    sb->tty_raw = false;
    tty_guard_stop(sb);
}

ssize_t sandbox_receive_end(struct sandbox *sb, char *data, size_t size, int *ret_fd) {
    struct iovec iov = {.iov_base = data, .iov_len = size - 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    *ret_fd = -1;
    ssize_t n = recvmsg(sb->end_r, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0)
        return -errno;
    data[n] = '\0';
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(ret_fd, CMSG_DATA(c), sizeof *ret_fd);
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        if (*ret_fd >= 0)
            close(*ret_fd);
        *ret_fd = -1;
        return -EPROTO;
    }
    return n;
}

/* One of init's messages on LAUNCH_END_FD (sent before the command was
 * forked, so before the report): tag and a socket of the given type,
 * listening or not, which only init could make in the sandbox's network
 * namespace.  Returns the descriptor or -errno (-EPROTO: not that). */
static int receive_socket(struct sandbox *sb, const char *tag, int type, bool listening) {
    char data[17];
    int fd;
    ssize_t n = sandbox_receive_end(sb, data, sizeof data, &fd);
    if (n < 0)
        return (int)n;
    int got = 0, acc = 0;
    socklen_t tl = sizeof got, al = sizeof acc;
    if ((size_t)n != strlen(tag) || memcmp(data, tag, (size_t)n) != 0 || fd < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &got, &tl) < 0 || got != type ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc != !listening) {
        if (fd >= 0)
            close(fd);
        return -EPROTO;
    }
    return fd;
}

/* init's "proxy" message: the broker's listening socket. */
static int receive_proxy_socket(struct sandbox *sb) {
    int fd = receive_socket(sb, "proxy\n", SOCK_STREAM, true);
    if (fd < 0)
        return fd;
    return broker_start(fd, sb->ctx->opts->allow_net, (size_t)sb->ctx->opts->n_allow_net, &sb->broker);
}

/* One line for the requests of one verdict ("refused": not admitted;
 * "failed": admitted, but the destination could not be reached), the first
 * three destinations as the review shows them. */
static void say_egress(const json_t *report, const char *verdict, const char *head) {
    json_int_t count = json_integer_value(json_object_get(json_object_get(report, "connections"), verdict));
    if (count <= 0)
        return;
    fprintf(stderr, "pvisor run: %s %lld connection(s):", head, (long long)count);
    size_t shown = 0;
    const json_t *d;
    size_t i;
    json_array_foreach(json_object_get(report, "destinations"), i, d) {
        const char *v = json_string_value(json_object_get(d, "verdict"));
        if (!v || strcmp(v, verdict) != 0)
            continue;
        if (shown++ == 3) {
            fprintf(stderr, " ...");
            break;
        }
        const char *what = json_string_value(json_object_get(d, "destination"));
        const char *why = json_string_value(json_object_get(d, "reason"));
        fprintf(stderr, "%s %s (%s)", shown > 1 ? ";" : "", what ? what : "?", why ? why : "?");
    }
    fprintf(stderr, "\n");
}

/* Names the command looked up itself: said, a few (reverse lookups and
 * localhost are not hosts to allow), the Bundle has them all up to
 * DNS_MAX_NAMES. */
static void finish_dns(struct sandbox *sb, bool ran) {
    if (!sb->dns)
        return;
    dns_stub_stop(sb->dns);
    json_t *j = dns_stub_report(sb->dns);
    if (!j)
        return;
    const json_t *d;
    size_t i, said = 0, hosts = 0;
    char list[600] = "";
    json_array_foreach(json_object_get(j, "names"), i, d) {
        const char *n = json_string_value(json_object_get(d, "name"));
        if (!dns_name_is_host(n))
            continue;
        size_t l = strlen(n);
        hosts++;
        /* n is shown as it is, safe for a terminal: dns_answer wrote
         * every label byte but a letter, digit, '-' and '_' as \xHH.
         * (term_escape made each of those backslashes \x5c again: longer
         * than l, past the end of list, and not what the Bundle says.) */
        if (said < 5 && strlen(list) + l + 3 < sizeof list) {
            strcat(list, said++ ? ", " : "");
            strcat(list, n);
        }
    }
    /* past DNS_MAX_NAMES names are only counted: said too, also when
     * every name recorded was one not shown (64 reverse lookups first) */
    json_int_t more = json_integer_value(json_object_get(j, "unrecorded_queries"));
    char past[128] = "";
    if (more > 0)
        snprintf(past, sizeof past, " and names past the %d recorded (%lld queries)", DNS_MAX_NAMES, (long long)more);
    if (ran && (hosts > 0 || more > 0))
        fprintf(stderr,
                "pvisor run: the command looked up %zu host name(s)%s, which this run answers 'no such name' (no "
                "network under --safe): %s%s; %s\n",
                hosts, past, list,
                !said          ? "..."
                : hosts > said ? ", ..."
                               : "",
                sb->broker ? "a client that resolves names itself instead of using HTTPS_PROXY (the egress broker) "
                             "reaches none, --allow-net or not"
                           : "to let it reach a host through pvisor's egress broker: --allow-net HOST");
    bundle_set_json(sb->ctx->bundle, "dns", j);
}

void sandbox_finish_egress(struct sandbox *sb, bool command_failed) {
    finish_dns(sb, sandbox_report_ok(sb) && !sb->refused && !sb->exec_failed);
    if (!sb->broker)
        return;
    broker_stop(sb->broker);
    json_t *j = broker_report(sb->broker);
    if (!j)
        return;
    /* a command that failed without asking the broker for anything may be
     * a client that ignores the proxy variables (it found no network) */
    const json_t *c = json_object_get(j, "connections");
    /* only of a command that ran: not one refused before it (--strict),
     * nor one that could not be executed (its status says why) */
    bool ran = sandbox_report_ok(sb) && !sb->refused && !sb->exec_failed;
    if (command_failed && ran &&
        json_integer_value(json_object_get(c, "allowed")) + json_integer_value(json_object_get(c, "refused")) +
                json_integer_value(json_object_get(c, "failed")) ==
            0)
        fprintf(stderr, "pvisor run: note: the command asked the egress broker for no connection: a client that "
                        "ignores HTTPS_PROXY (Node 20's fetch, Java, ssh) has no network under --safe\n");
    /* apart: a destination the command was allowed to reach but could
     * not (a name that does not resolve, a refused connection) is not one
     * for --allow-net, and it must not hide behind refusals listed first */
    say_egress(j, "refused", "the egress broker refused");
    say_egress(j, "failed", "the egress broker could not complete");
    bundle_set_json(sb->ctx->bundle, "egress", j);
}

/* Parent side, once the launcher was exec'd: read its report, record the
 * evidence, decide (--strict) and let the command go or not; then wait for
 * EOF (exec) or an exec failure report. */
void sandbox_read_report(pid_t child, void *userdata) {
    struct sandbox *sb = userdata;
    if (sb->sync_w >= 0) {
        close(sb->sync_w); /* our copies; the launcher chain holds the rest */
        sb->sync_w = -1;
    }
    if (sb->end_w >= 0) {
        close(sb->end_w);
        sb->end_w = -1;
    }
    if (sb->go_r >= 0) {
        close(sb->go_r);
        sb->go_r = -1;
    }
    /* The "running" Bundle is written while the launcher sets up; the
     * command cannot start without it. */
    int wr = run_write_running(sb->ctx);
    if (wr < 0) {
        snprintf(sb->refused_why, sizeof sb->refused_why, "cannot write the Run Bundle: %s", strerror(-wr));
        sb->refused = "bundle";
    }
    json_error_t e;
    char *line = read_line(sb);
    sb->report = line ? json_loads(line, 0, &e) : NULL;
    free(line);
    bool go = false;
    if (sandbox_report_ok(sb) && !sb->refused && sb->plan.dns_stub) {
        int fd = receive_socket(sb, "dns\n", SOCK_DGRAM, false);
        int dr = fd < 0 ? fd : dns_stub_start(fd, &sb->dns);
        if (dr < 0) {
            snprintf(sb->refused_why, sizeof sb->refused_why, "cannot start the run's name server: %s",
                     dr == -EPROTO ? "the sandbox's init did not hand over its socket" : strerror(-dr));
            sb->refused = dimension_name(DIM_NETWORK);
        }
    }
    if (sandbox_report_ok(sb) && !sb->refused && sb->plan.proxy_port) {
        int pr = receive_proxy_socket(sb);
        if (pr < 0) {
            snprintf(sb->refused_why, sizeof sb->refused_why, "cannot start the egress broker for --allow-net: %s",
                     pr == -EPROTO ? "the sandbox's init did not hand over its listening socket" : strerror(-pr));
            sb->refused = dimension_name(DIM_NETWORK);
        }
    }
    if (sandbox_report_ok(sb) && !sb->refused)
        sandbox_receive_tmpfs(sb);
    if (sandbox_report_ok(sb) && !sb->refused) {
        sandbox_record(sb->ctx, sb);
        char why[sizeof sb->refused_why - 64];
        const char *dim = sb->ctx->opts->strict ? run_strict_violation(sb->ctx, why, sizeof why) : NULL;
        char names[256];
        const char *gone = NULL;
        if (limits_unavailable(sb, sb->refused_why, sizeof sb->refused_why))
            sb->refused = dimension_name(DIM_RESOURCES);
        else if ((gone = dimension_unavailable(sb, names, sizeof names))) {
            sb->refused = gone;
            int abi = strcmp(names, dimension_name(DIM_IPC)) == 0 ? ipc_lacks_scopes(sb) : -1;
            if (abi >= 0)
                snprintf(sb->refused_why, sizeof sb->refused_why,
                         "ipc is unavailable on this kernel: its Landlock (ABI %d) has no scopes for abstract unix "
                         "sockets and signals (ABI 6, Linux 6.12), and --filesystem sandbox keeps the host's network "
                         "namespace, where the command could connect to the host's abstract unix sockets; use --safe "
                         "(a network namespace of its own; --allow-net HOST for what the command must reach)",
                         abi);
            else
                snprintf(sb->refused_why, sizeof sb->refused_why,
                         "the sandbox's self-check does not show %s enforced (the Bundle records them unavailable), "
                         "though every setup step reported success; see the Bundle's sandbox_evidence",
                         names);
        } else if (dim) {
            sb->refused = dim;
            /* say why and what to do: the dimension's name alone does not */
            if (strcmp(dim, dimension_name(DIM_HOME_CREDENTIALS)) == 0 && sb->n_grant_missing_creds > 0)
                snprintf(sb->refused_why, sizeof sb->refused_why,
                         "--strict: home_credentials is partial: a grant of --access/--allow-write holds %d "
                         "credential location(s) that did not exist at start (%.200s%s), which nothing covers; "
                         "grant narrower directories",
                         sb->n_grant_missing_creds, sb->grant_missing_first,
                         sb->n_grant_missing_creds > 1 ? ", ..." : "");
            else
                snprintf(sb->refused_why, sizeof sb->refused_why, "--strict: requested but not enforced here: %s", why);
        } else
            go = true;
    }
    /* A SIGINT, SIGTERM or SIGHUP came while the sandbox was set up (held
     * back: run_hold_signals): the command is not let go, only to be sent
     * it (one that ignores it would run) */
    if (go && (sb->interrupted = run_pending_interrupt()))
        go = false;
    if (go)
        tty_raw(sb);
    /* init's sockets are in: from now on the messages come with their
     * senders' credentials (the launcher's "end", sandbox_end_ready) */
    int on = 1;
    sb->end_creds = go && setsockopt(sb->end_r, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) == 0;
    PV_MARK("S_go_cmd");
    int gr = go ? write_byte_no_sigpipe(sb->go_w, 'g') : 0;
    sb->go_given = go && gr == 0;
    if (gr < 0) {
        /* the launcher ends (125) without the go-ahead: the command never
         * ran, which the run must say, not record as its exit status */
        snprintf(sb->refused_why, sizeof sb->refused_why, "cannot give the sandbox the go-ahead: %s", strerror(-gr));
        sb->refused = "launch";
        go = false;
        sandbox_restore_tty(sb);
    }
    close(sb->go_w);
    sb->go_w = -1;
    if (!go)
        return;
    line = read_line(sb);
    json_t *x = line ? json_loads(line, 0, &e) : NULL;
    free(line);
    if (x) {
        json_decref(sb->report);
        sb->report = x;
        sb->exec_failed = true;
        return;
    }
    /* The command runs: the "running" Bundle, written before the evidence
     * came, said "host, no other isolation" and every dimension
     * unenforced, which `pvisor status` showed all run long (and for good
     * once the supervisor was killed).  Now it says what is installed; a
     * failure leaves the earlier one (the final Bundle is written anyway). */
    (void)run_write_running(sb->ctx);
}

/* The messages waiting on LAUNCH_END_FD after the command ran: init's
 * "leftovers N" is kept; true when the launcher's "end S" came (S into
 * *ret_wait_status), taken only from the process launcher (its
 * credentials: neither init nor the command, whose PID namespace it
 * ends, may say it).  Descriptors sent along are closed. */
bool sandbox_end_ready(struct sandbox *sb, pid_t launcher, int *ret_wait_status) {
    while (sb->end_r >= 0) {
        char buf[64];
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf - 1};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
        } ctl;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(sb->end_r, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false; /* none (yet), or all of them: init and the launcher are gone */
        buf[n] = '\0';
        pid_t from = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET)
                continue;
            if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
                struct ucred u;
                memcpy(&u, CMSG_DATA(c), sizeof u);
                from = u.pid;
            } else if (c->cmsg_type == SCM_RIGHTS) {
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                    close(fd);
                }
            }
        }
        unsigned v;
        int st, lfd, lerr;
        if (!sb->stdio_lost_fd && sscanf(buf, "stdio %d %d\n", &lfd, &lerr) == 2 && (lfd == 1 || lfd == 2) &&
            lerr > 0) {
            sb->stdio_lost_fd = lfd;
            sb->stdio_lost_errno = lerr;
        } else if (sb->leftovers < 0 && sscanf(buf, "leftovers %u\n", &v) == 1 && v <= INT_MAX)
            sb->leftovers = (int)v;
        else if (sb->leftovers < 0 && strcmp(buf, LAUNCH_LEFTOVERS_UNKNOWN) == 0) {
            sb->leftovers = 0;
            sb->leftovers_uncounted = true;
        } else if (sb->end_creds && from == launcher && launcher > 0 && !(m.msg_flags & MSG_CTRUNC) &&
                   sscanf(buf, "end %d\n", &st) == 1) {
            *ret_wait_status = st;
            return true;
        }
    }
    return false;
}

int sandbox_read_leftovers(struct sandbox *sb) {
    int st;
    if (sb->leftovers < 0)
        (void)sandbox_end_ready(sb, 0, &st);
    return sb->leftovers > 0 ? sb->leftovers : 0; /* none: init was killed before it counted, or never ran */
}

bool sandbox_report_ok(const struct sandbox *sb) {
    return sb->report && json_is_true(json_object_get(sb->report, "ok"));
}

const char *sandbox_report_error(const struct sandbox *sb, int exec_errno, int wait_status, char *buf, size_t size) {
    if (!sb->report) {
        /* how it ended says what to look at: its own exec (pvisor's
         * binary replaced or removed, a noexec mount, a seccomp or LSM
         * policy of the host), a signal (the OOM killer, a host's kill) */
        if (exec_errno)
            snprintf(buf, size, "cannot execute the sandbox launcher (pvisor's own binary, /proc/self/exe): %s",
                     strerror(exec_errno));
        else if (WIFSIGNALED(wait_status))
            snprintf(buf, size, "the sandbox launcher was killed by SIG%s before its report",
                     sigabbrev_np(WTERMSIG(wait_status)) ? sigabbrev_np(WTERMSIG(wait_status)) : "?");
        else if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0)
            snprintf(buf, size, "the sandbox launcher ended without a report (exit status %d)",
                     WEXITSTATUS(wait_status));
        else
            snprintf(buf, size, "the sandbox launcher ended without a report");
        return buf;
    }
    const char *step = json_string_value(json_object_get(sb->report, "step"));
    const char *msg = json_string_value(json_object_get(sb->report, "message"));
    int err = (int)json_integer_value(json_object_get(sb->report, "errno"));
    char rb[512];
    const char *remedy = ns_limit_remedy(step, err, rb, sizeof rb);
    snprintf(buf, size, "sandbox setup failed at '%s': %s%s%s", step ? step : "?", msg ? msg : "?", remedy ? ": " : "",
             remedy ? remedy : "");
    return buf;
}
