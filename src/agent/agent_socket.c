/* agent_socket.c: see agent_socket.h. */
#include "agent/agent_socket.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Replies waiting to be sent are bounded: once AGENT_OUT_HIGH bytes wait,
 * no further request of that client is served (nor read) until the client
 * has read them.  Sending them in one piece matters too: a unix socket
 * charges every send its own buffer (several hundred bytes however short
 * the reply), so replying line by line filled the socket's send buffer
 * after some 280 pipelined pings, and a client that was reading was
 * dropped with its replies lost. */
#define AGENT_OUT_HIGH 16384

/* After an accept that failed for want of resources (EMFILE: the command
 * can exhaust the supervisor's descriptors through the overlay), the
 * listening socket is left alone this long: it stays readable while the
 * connection waits, so polling it again at once spins a CPU outside every
 * limit of the run.  There is no event for a descriptor becoming free. */
#define AGENT_ACCEPT_BACKOFF_MS 100

struct client {
    int fd;
    size_t len;
    char buf[AGENT_LINE_MAX];
    char *out; /* replies not yet sent: out_len bytes from out_off */
    size_t out_off, out_len, out_cap;
};

struct agent_socket {
    int listen_fd;
    int stop_fd; /* eventfd: written once to stop the thread */
    char *path;
    char *status_json;        /* immutable after open */
    struct agent_hooks hooks; /* immutable after open */
    pthread_t thread;
    bool started;         /* the owner thread only */
    bool bound;           /* we created the socket file (and so remove it) */
    atomic_bool stopping; /* set before stop_fd: requests read but not yet served are not */
    atomic_uint requests;
    /* only the thread touches these; NULL: a free slot.  Each is allocated
     * when a client connects: the 16 slots' line buffers in the structure
     * itself were 64 KB zeroed at every run's start, 16 page faults. */
    struct client *clients[AGENT_MAX_CLIENTS];
};

enum agent_request agent_request_parse(const char *line, const char **ret_arg) {
    *ret_arg = NULL;
    if (strcmp(line, "ping") == 0)
        return AGENT_REQ_PING;
    if (strcmp(line, "status") == 0)
        return AGENT_REQ_STATUS;
    if (strcmp(line, "checkpoint") == 0)
        return AGENT_REQ_CHECKPOINT;
    if (strncmp(line, "checkpoint ", 11) == 0) {
        const char *arg = line + 11;
        if (!*arg || strchr(arg, ' '))
            return AGENT_REQ_BAD_ARGS;
        *ret_arg = arg;
        return AGENT_REQ_CHECKPOINT;
    }
    const char *sp = strchr(line, ' ');
    if (sp &&
        ((sp - line == 4 && strncmp(line, "ping", 4) == 0) || (sp - line == 6 && strncmp(line, "status", 6) == 0)))
        return AGENT_REQ_BAD_ARGS;
    return AGENT_REQ_UNKNOWN;
}

const char *agent_socket_reply(const char *line, const char *status_json) {
    const char *arg;
    switch (agent_request_parse(line, &arg)) {
    case AGENT_REQ_PING: return "pong";
    case AGENT_REQ_STATUS: return status_json;
    case AGENT_REQ_CHECKPOINT: return "error unsupported: this run cannot take live checkpoints";
    case AGENT_REQ_BAD_ARGS: return "error bad arguments (try: ping, status, checkpoint [NAME])";
    case AGENT_REQ_UNKNOWN: break;
    }
    return "error unknown request (try: ping, status, checkpoint [NAME])";
}

/* The address the socket is bound at: its name under a descriptor of its
 * directory, "/proc/self/fd/N/agent.sock", so that a run directory of any
 * length gets a socket (an address holds 108 bytes); a client reading it
 * with getpeername(2) gets that, not a host path.  Without /proc, the path
 * itself (ret_dir_fd -1), if it fits. */
static int socket_address(const char *path, struct sockaddr_un *sa, int *ret_dir_fd) {
    *ret_dir_fd = -1;
    const char *slash = strrchr(path, '/');
    if (slash && slash[1] && access("/proc/self/fd", X_OK) == 0) {
        _cleanup_free_ char *dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir)
            return -ENOMEM;
        int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int n = snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d/%s", fd, slash + 1);
        if (n > 0 && (size_t)n < sizeof sa->sun_path) {
            *ret_dir_fd = fd;
            return 0;
        }
        close(fd);
    }
    if (strlen(path) >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    strcpy(sa->sun_path, path);
    return 0;
}

int agent_socket_open(const char *path, const char *status_json, const struct agent_hooks *hooks,
                      struct agent_socket **ret) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int dir_fd = -1;
    int r = socket_address(path, &sa, &dir_fd);
    if (r < 0)
        return r;
    struct agent_socket *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->listen_fd = a->stop_fd = -1;
    if (hooks)
        a->hooks = *hooks;
    r = -ENOMEM;
    if (!(a->path = strdup(path)) || !(a->status_json = strdup(status_json)))
        goto fail;
    a->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    a->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (a->listen_fd < 0 || a->stop_fd < 0) {
        r = -errno;
        goto fail;
    }
    mode_t old = umask(0177); /* 0600: only the invoking user */
    int b = bind(a->listen_fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (b < 0) {
        r = -errno;
        goto fail;
    }
    a->bound = true;
    if (listen(a->listen_fd, 8) < 0) {
        r = -errno;
        goto fail;
    }
    *ret = a;
    return 0;
fail:
    agent_socket_close(a);
    return r;
}

static void drop_client(struct client *c) {
    close(c->fd);
    free(c->out);
    *c = (struct client){.fd = -1};
}

/* Queue one reply line after those waiting.  Returns false when out of
 * memory. */
static bool queue_reply(struct client *c, const char *reply, size_t len) {
    if (c->out_len + len + 1 > c->out_cap) {
        size_t cap = c->out_len + len + 1 > 2 * c->out_cap ? c->out_len + len + 1 : 2 * c->out_cap;
        char *n = realloc(c->out, cap);
        if (!n)
            return false;
        c->out = n;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, reply, len);
    c->out[c->out_len + len] = '\n';
    c->out_len += len + 1;
    return true;
}

/* Send what the socket takes now.  Returns false when the client is gone. */
static bool flush_client(struct client *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0)
            return false;
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    return true;
}

static size_t pending(const struct client *c) {
    return c->out_len - c->out_off;
}

/* Answer the complete lines read so far, while fewer than AGENT_OUT_HIGH
 * bytes of replies wait.  Returns false when the client is to be dropped. */
static bool answer_lines(struct agent_socket *a, struct client *c) {
    char *nl;
    while (!atomic_load(&a->stopping) && pending(c) < AGENT_OUT_HIGH && (nl = memchr(c->buf, '\n', c->len))) {
        /* A NUL inside the line would cut what the parser sees: such a
         * request is answered as unknown, never acted on. */
        bool has_nul = memchr(c->buf, '\0', (size_t)(nl - c->buf)) != NULL;
        *nl = '\0';
        if (nl > c->buf && nl[-1] == '\r')
            nl[-1] = '\0';
        char out[AGENT_LINE_MAX + 1];
        const char *arg, *reply = out;
        if (has_nul) {
            reply = agent_socket_reply("", a->status_json);
        } else if (agent_request_parse(c->buf, &arg) == AGENT_REQ_CHECKPOINT && a->hooks.checkpoint) {
            if (!flush_client(c)) /* the replies before it do not wait for the copy */
                return false;
            out[0] = '\0';
            a->hooks.checkpoint(a->hooks.userdata, arg, out, sizeof out);
            out[AGENT_LINE_MAX] = '\0';
        } else {
            reply = agent_socket_reply(c->buf, a->status_json); /* the status may be longer than a line */
        }
        atomic_fetch_add(&a->requests, 1);
        size_t used = (size_t)(nl - c->buf) + 1;
        memmove(c->buf, nl + 1, c->len - used);
        c->len -= used;
        /* one line, whatever the hook wrote */
        if (!queue_reply(c, reply, strcspn(reply, "\n")))
            return false;
    }
    /* an over-long line (a full buffer of answered-later lines is not) */
    return !(c->len == sizeof c->buf && !memchr(c->buf, '\n', c->len));
}

/* The client's socket is ready (revents): send what waits, read more only
 * when nothing does; answer what was read, in rounds of at most
 * AGENT_OUT_HIGH bytes of replies, while the socket takes them. */
static void serve_client(struct agent_socket *a, struct client *c, short revents) {
    if (!pending(c) && (revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) { /* no reply waits, no complete line is left */
            drop_client(c);
            return;
        }
        c->len += (size_t)n;
    }
    for (;;) {
        if (!flush_client(c) || (!pending(c) && (!answer_lines(a, c) || !flush_client(c)))) {
            drop_client(c);
            return;
        }
        if (pending(c) || atomic_load(&a->stopping) || !memchr(c->buf, '\n', c->len))
            return;
    }
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *serve(void *arg) {
    struct agent_socket *a = arg;
    int64_t accept_after = 0; /* AGENT_ACCEPT_BACKOFF_MS: no accept before */
    for (;;) {
        struct pollfd p[2 + AGENT_MAX_CLIENTS];
        int map[2 + AGENT_MAX_CLIENTS];
        nfds_t n = 0;
        int timeout = -1;
        if (accept_after) {
            int64_t left = accept_after - now_ms();
            if (left > 0)
                timeout = (int)left;
            else
                accept_after = 0;
        }
        p[n++] = (struct pollfd){.fd = a->stop_fd, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = accept_after ? -1 : a->listen_fd, .events = POLLIN};
        for (int i = 0; i < AGENT_MAX_CLIENTS; i++)
            if (a->clients[i]) {
                map[n] = i;
                /* replies waiting: nothing more is read until they are sent */
                p[n++] = (struct pollfd){.fd = a->clients[i]->fd, .events = pending(a->clients[i]) ? POLLOUT : POLLIN};
            }
        if (poll(p, n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break;
        if (p[1].revents & POLLIN) {
            int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0) {
                int slot = -1;
                for (int i = 0; i < AGENT_MAX_CLIENTS && slot < 0; i++)
                    if (!a->clients[i])
                        slot = i;
                if (slot < 0 || !(a->clients[slot] = calloc(1, sizeof *a->clients[slot])))
                    close(fd); /* too many clients, or no memory for one more */
                else
                    a->clients[slot]->fd = fd;
            } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                accept_after = now_ms() + AGENT_ACCEPT_BACKOFF_MS; /* EMFILE, ENFILE, ENOBUFS, ENOMEM */
            }
        }
        for (nfds_t k = 2; k < n && !atomic_load(&a->stopping); k++)
            if (p[k].revents) {
                struct client **c = &a->clients[map[k]];
                serve_client(a, *c, p[k].revents);
                if ((*c)->fd < 0) { /* dropped */
                    free(*c);
                    *c = NULL;
                }
            }
    }
    return NULL;
}

int agent_socket_start(struct agent_socket *a) {
    int r = pthread_create(&a->thread, NULL, serve, a);
    if (r)
        return -r;
    a->started = true;
    return 0;
}

unsigned agent_socket_requests(struct agent_socket *a) {
    return a ? atomic_load(&a->requests) : 0;
}

void agent_socket_request_stop(struct agent_socket *a) {
    if (!a || !a->started || atomic_exchange(&a->stopping, true))
        return;
    uint64_t one = 1;
    (void)!write(a->stop_fd, &one, sizeof one);
}

void agent_socket_stop(struct agent_socket *a) {
    if (!a || !a->started)
        return;
    agent_socket_request_stop(a);
    pthread_join(a->thread, NULL);
    a->started = false;
}

void agent_socket_close(struct agent_socket *a) {
    if (!a)
        return;
    agent_socket_stop(a);
    for (int i = 0; i < AGENT_MAX_CLIENTS; i++)
        if (a->clients[i]) {
            if (a->clients[i]->fd >= 0)
                drop_client(a->clients[i]);
            free(a->clients[i]);
        }
    if (a->listen_fd >= 0)
        close(a->listen_fd);
    if (a->bound)
        unlink(a->path);
    if (a->stop_fd >= 0)
        close(a->stop_fd);
    free(a->path);
    free(a->status_json);
    free(a);
}
