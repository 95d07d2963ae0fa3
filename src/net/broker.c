/* broker.c: see broker.h.
 *
 * Threads: one accepts, one per connection serves it, and a detached one
 * per name lookup (struct lookup) that holds nothing of the broker.
 * b->lock protects the connection list, the counters and the
 * destinations; the connection threads take it only to record, to close
 * their descriptors and to mark themselves done, the accept thread to add
 * and to join the done ones.
 * broker_stop() shuts every live connection's sockets down under the
 * lock (a thread blocked in send() or connect() returns), wakes the
 * threads through stop_fd and joins them all.  No lock is held across a
 * blocking call.
 */
#include "net/broker.h"
#include "util/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_BUF (64u << 10)
#define WHAT_MAX (EGRESS_HOST_MAX + 16)
#define REASON_MAX 300 /* a refusal's or failure's reason, with its NUL */

enum verdict { V_ALLOWED, V_REFUSED, V_FAILED };
static const char *const verdict_names[] = {"allowed", "refused", "failed"};

struct dest {
    char what[WHAT_MAX]; /* the destination as asked (normalised when it parsed) */
    enum verdict verdict;
    char reason[REASON_MAX]; /* the first refusal's or failure's */
    unsigned connections;
    uint64_t bytes_up, bytes_down;
};

struct conn {
    struct broker *b;
    int client, upstream; /* -1 once closed (under b->lock) */
    pthread_t thread;
    bool done; /* the thread has finished with everything but its join */
    struct conn *next;
};

struct broker {
    int listen_fd;
    int stop_fd; /* eventfd: readable once the broker stops */
    struct egress_rule *rules;
    size_t n_rules;
    pthread_t accept_thread;
    bool started, stopped; /* the owner's */
    pthread_mutex_t lock;
    bool stopping; /* under lock: no new connection threads */
    struct conn *conns;
    unsigned live;
    unsigned counts[3];
    struct dest dests[BROKER_MAX_DESTINATIONS];
    size_t n_dests, n_dests_not_allowed;
    unsigned dests_dropped;
    uint64_t bytes_up, bytes_down; /* every tunnel's, listed or not */
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* what, made printable (a hostile request's bytes go into the Bundle and
 * onto the user's terminal). */
static void printable(char *dst, size_t size, const char *src, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < size; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[o++] = c >= 0x21 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
    }
    dst[o] = '\0';
}

/* A refused request's bytes (a request line or a target), made printable
 * for the record (printable) without what may hold a secret: a query or
 * fragment (all from the first '?' or '#') and a URL's userinfo
 * ("user:password@", which Python's urllib sends to a proxy as given).
 * The authority is taken as URL parsers take it: after "SCHEME:" and any
 * run of '/' and '\\', or at the word's start (authority form). */
static void printable_redacted(char *dst, size_t size, const char *src, size_t len) {
    char buf[BROKER_HEAD_MAX];
    size_t o = 0;
    for (size_t k = 0; k < len; k++)
        if (src[k] == '?' || src[k] == '#')
            len = k;
    for (size_t i = 0; i < len && o < sizeof buf;) {
        size_t end = i, a = i, at = 0;
        while (end < len && src[end] != ' ')
            end++;
        for (size_t k = i; k + 1 < end && !strchr("/\\?#@", src[k]); k++)
            if (src[k] == ':' && (src[k + 1] == '/' || src[k + 1] == '\\')) {
                for (a = k + 1; a < end && (src[a] == '/' || src[a] == '\\'); a++)
                    ;
                break;
            }
        for (size_t k = a; k < end && !strchr("/\\?#", src[k]); k++)
            if (src[k] == '@')
                at = k + 1;
        for (size_t k = i; k < end && o < sizeof buf; k++) {
            if (at && k == a)
                k = at;
            if (k >= end)
                break;
            buf[o++] = src[k];
        }
        if (end < len && o < sizeof buf)
            buf[o++] = ' ';
        i = end + 1;
    }
    printable(dst, size, buf, o);
}

static void record(struct broker *b, const char *what, enum verdict v, const char *reason, uint64_t up, uint64_t down) {
    pthread_mutex_lock(&b->lock);
    b->counts[v]++;
    b->bytes_up += up;
    b->bytes_down += down;
    struct dest *d = NULL;
    for (size_t i = 0; i < b->n_dests && !d; i++)
        if (b->dests[i].verdict == v && strcmp(b->dests[i].what, what) == 0)
            d = &b->dests[i];
    /* Refusals and failures take at most half of the table: the rest stays
     * for the tunnels, what may have left the machine (a command that
     * asked for 256 other names first must not drop its tunnel from the
     * list). */
    if (!d && b->n_dests < BROKER_MAX_DESTINATIONS &&
        (v == V_ALLOWED || b->n_dests_not_allowed < BROKER_MAX_DESTINATIONS / 2)) {
        b->n_dests_not_allowed += v != V_ALLOWED;
        d = &b->dests[b->n_dests++];
        snprintf(d->what, sizeof d->what, "%s", what);
        d->verdict = v;
        snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
    }
    if (d) {
        d->connections++;
        d->bytes_up += up;
        d->bytes_down += down;
    } else
        b->dests_dropped++;
    pthread_mutex_unlock(&b->lock);
}

/* Send all of buf (the socket is blocking; broker_stop's shutdown ends a
 * send that waits).  *sent (NULL: not counted) gains what the socket
 * took, also when it fails later: bytes it took go out (a chunk cut
 * short by the run's end still reached the destination, and went
 * uncounted). */
static int send_all(int fd, const char *buf, size_t len, uint64_t *sent) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -errno;
        if (sent)
            *sent += (uint64_t)n;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A status line and reason (at most REASON_MAX) the client can show.  The
 * reason is there twice: buf holds two of the longest and the rest. */
static void respond(int fd, const char *status, const char *reason) {
    char buf[2 * REASON_MAX + 256];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %s\r\nX-Pvisor-Egress: %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\npvisor egress broker: %s\n",
                     status, reason, strlen(reason) + 23, reason);
    if (n > 0 && (size_t)n < sizeof buf)
        (void)send_all(fd, buf, (size_t)n, NULL);
}

/* Wait for fd (events) or the stop, until deadline (ms, 0: none).
 * 1 ready, 0 timed out, -ECANCELED stopped. */
static int wait_fd(struct broker *b, int fd, short events, int64_t deadline) {
    for (;;) {
        int timeout = -1;
        if (deadline) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return 0;
            timeout = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = b->stop_fd, .events = POLLIN}};
        int r = poll(p, 2, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (p[1].revents)
            return -ECANCELED;
        if (r > 0)
            return 1;
    }
}

/* Read the request head into buf (NUL-terminated); *ret_len bytes were
 * read, *ret_head_len of them are the head (through its blank line). */
static int read_head(struct broker *b, int fd, char *buf, size_t size, size_t *ret_len, size_t *ret_head_len) {
    int64_t deadline = now_ms() + BROKER_HEAD_TIMEOUT_MS;
    size_t len = 0;
    for (;;) {
        int r = wait_fd(b, fd, POLLIN, deadline);
        if (r <= 0)
            return r == 0 ? -ETIMEDOUT : r;
        ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ECONNRESET;
        len += (size_t)n;
        buf[len] = '\0';
        /* the first blank line, CRLF or bare LF: a later one is in the
         * body (a bare-LF head whose body held a CRLF blank line had its
         * body's first lines taken for headers, and those without a colon
         * dropped) */
        char *end = strstr(buf, "\r\n\r\n"), *lf = strstr(buf, "\n\n");
        size_t skip = 4;
        if (lf && (!end || lf < end)) {
            end = lf;
            skip = 2;
        }
        if (end) {
            *ret_len = len;
            *ret_head_len = (size_t)(end - buf) + skip;
            return 0;
        }
        if (memchr(buf, '\0', len))
            return -EINVAL;
        if (len >= size - 1)
            return -E2BIG;
    }
}

/* Connect to one address within the deadline; the socket or -errno. */
static int connect_one(struct broker *b, const struct sockaddr *sa, socklen_t salen, int64_t deadline) {
    _cleanup_close_ int s = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    if (connect(s, sa, salen) < 0) {
        if (errno != EINPROGRESS)
            return -errno;
        int r = wait_fd(b, s, POLLOUT, deadline);
        if (r <= 0)
            return r == 0 ? -ETIMEDOUT : r;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            return -errno;
        if (err)
            return -err;
    }
    int fl = fcntl(s, F_GETFL);
    if (fl < 0 || fcntl(s, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return -errno;
    return TAKE_FD(s);
}

/* A name lookup in a thread of its own.  getaddrinfo() cannot be
 * interrupted, and with a DNS server that does not answer it takes the
 * resolver's timeouts, per name and search domain (10 s with the
 * defaults, minutes with "options timeout:30 attempts:5"): broker_stop()
 * must not wait for that, nor keep the run from ending.  The connection
 * thread waits for the lookup or the stop; the lookup holds nothing of
 * the broker, and whichever of the two threads lets go last frees it. */
struct lookup {
    atomic_int refs;
    int done_fd;      /* eventfd: readable once done */
    atomic_bool done; /* gai and res are set (release; the reader acquires) */
    char host[EGRESS_HOST_MAX + 1], port[8];
    int flags;
    int gai;
    struct addrinfo *res;
};

static void lookup_unref(struct lookup *l) {
    if (atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    if (l->res)
        freeaddrinfo(l->res);
    close(l->done_fd);
    free(l);
}

static void *lookup_thread(void *arg) {
    struct lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = l->flags};
    /* The name as asked, never NAME.SEARCH-DOMAIN: the host's resolver
     * tries a name with dots that does not resolve again below each
     * "search" domain of resolv.conf, and "x.allowed.example" would lead
     * to x.allowed.example.corp.example, a host no rule names.  The
     * resolver state is the thread's own (a single label is left to the
     * search domains: the user named it so).  Unsure: no lookup. */
    if (strchr(l->host, '.') && res_init() < 0)
        l->gai = EAI_FAIL;
    else {
        if (strchr(l->host, '.'))
            _res.options &= ~(unsigned long)(RES_DNSRCH | RES_DEFNAMES);
        l->gai = getaddrinfo(l->host, l->port, &hints, &l->res);
    }
    atomic_store_explicit(&l->done, true, memory_order_release);
    (void)!write(l->done_fd, &(uint64_t){1}, sizeof(uint64_t));
    lookup_unref(l);
    return NULL;
}

/* getaddrinfo(req) unless the broker stops first: 0 with *ret_gai (and
 * *ret_res when that is 0), or -ECANCELED, -errno. */
static int resolve(struct broker *b, const struct egress_rule *req, int flags, int *ret_gai,
                   struct addrinfo **ret_res) {
    if (req->address) { /* a numeric host: no lookup, nothing to wait for */
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = flags};
        char port[8];
        snprintf(port, sizeof port, "%u", (unsigned)req->port);
        *ret_gai = getaddrinfo(req->host, port, &hints, ret_res);
        return 0;
    }
    struct lookup *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->done_fd = eventfd(0, EFD_CLOEXEC);
    if (l->done_fd < 0) {
        int r = -errno;
        free(l);
        return r;
    }
    snprintf(l->host, sizeof l->host, "%s", req->host);
    snprintf(l->port, sizeof l->port, "%u", (unsigned)req->port);
    l->flags = flags;
    atomic_init(&l->refs, 2);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256u << 10);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int r = -pthread_create(&t, &attr, lookup_thread, l);
    pthread_attr_destroy(&attr);
    if (r < 0) {
        close(l->done_fd);
        free(l);
        return r;
    }
    r = wait_fd(b, l->done_fd, POLLIN, 0);
    if (r > 0 && atomic_load_explicit(&l->done, memory_order_acquire)) {
        *ret_gai = l->gai;
        *ret_res = TAKE_PTR(l->res);
        r = 0;
    }
    lookup_unref(l);
    return r;
}

/* The IPv4 address inside an IPv4-mapped IPv6 one (or sa's own), for
 * comparing. */
static bool v4_of(const struct sockaddr *sa, unsigned char out[4]) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    const unsigned char *a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
    if (memcmp(a, mapped, 12) != 0)
        return false;
    memcpy(out, a + 12, 4);
    return true;
}

/* sa is an address of one of this machine's interfaces (ifs: getifaddrs).
 * A connection to it reaches the machine's own services, those that
 * listen on every address (0.0.0.0, ::) included: a name rule must not
 * lead there whatever kind of address it is (a public IPv4 address on
 * the interface, a global IPv6 one: the ranges of egress.c do not say). */
static bool machine_address(const struct ifaddrs *ifs, const struct sockaddr *sa) {
    unsigned char v4[4], own4[4];
    bool is_v4 = v4_of(sa, v4);
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        const struct sockaddr *own = i->ifa_addr;
        if (!own || (own->sa_family != AF_INET && own->sa_family != AF_INET6))
            continue;
        if (is_v4 ? v4_of(own, own4) && memcmp(v4, own4, 4) == 0
                  : own->sa_family == AF_INET6 &&
                        memcmp(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                               &((const struct sockaddr_in6 *)(const void *)own)->sin6_addr, 16) == 0)
            return true;
    }
    return false;
}

/* Resolve and connect for an admitted request.  The socket, or -errno
 * with *ret_why saying why (a refused address: -EACCES). */
static int open_upstream(struct broker *b, const struct egress_rule *rule, const struct egress_rule *req, char *why,
                         size_t why_size) {
    struct addrinfo *res = NULL;
    int g = 0, r = resolve(b, req, AI_NUMERICSERV | (req->address ? AI_NUMERICHOST : 0), &g, &res);
    /* from here: a slow lookup (the resolver's own timeouts) must not eat
     * the connect's time */
    int64_t deadline = now_ms() + BROKER_CONNECT_TIMEOUT_MS;
    if (r < 0) {
        snprintf(why, why_size, "resolving %s: %s", req->host, r == -ECANCELED ? "the run ended first" : strerror(-r));
        return r;
    }
    if (g != 0) {
        snprintf(why, why_size, "cannot resolve %s: %s", req->host, gai_strerror(g));
        return -EHOSTUNREACH;
    }
    r = -EHOSTUNREACH;
    snprintf(why, why_size, "no address for %s", req->host);
    /* a name rule's addresses must not be this machine's own (see
     * machine_address); "localhost" leads to loopback ones only, which
     * egress_address_refused sees to.  No list of them: refuse all. */
    struct ifaddrs *ifs = NULL;
    bool own_checked = rule->address || strcmp(rule->host, "localhost") == 0;
    if (!own_checked && getifaddrs(&ifs) < 0) {
        snprintf(why, why_size, "cannot list this machine's addresses to rule them out: %s", strerror(errno));
        freeaddrinfo(res);
        return -EACCES;
    }
    bool refused_only = true;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        char addr[INET6_ADDRSTRLEN] = "?";
        const void *ap = ai->ai_family == AF_INET
                             ? (const void *)&((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr
                             : (const void *)&((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr;
        inet_ntop(ai->ai_family, ap, addr, sizeof addr);
        const char *no = egress_address_refused(rule, ai->ai_addr);
        if (!no && !own_checked && machine_address(ifs, ai->ai_addr))
            no = "an address of this machine";
        if (no) {
            /* a refusal only while no address was tried: once one
             * was, its failure is the verdict (502, "failed") */
            if (refused_only) {
                snprintf(why, why_size, "%s resolves to %s, %s", req->host, addr, no);
                r = -EACCES;
            }
            continue;
        }
        refused_only = false;
        r = connect_one(b, ai->ai_addr, ai->ai_addrlen, deadline);
        if (r >= 0)
            break;
        snprintf(why, why_size, "connecting to %s port %u: %s", addr, (unsigned)req->port, strerror(-r));
        if (r == -ECANCELED || r == -ETIMEDOUT)
            break;
    }
    freeaddrinfo(res);
    if (ifs)
        freeifaddrs(ifs);
    return r;
}

/* Relay until both directions are done.  pending: client bytes that came
 * with the head. */
static void relay(struct broker *b, int client, int upstream, const char *pending, size_t n_pending, uint64_t *up,
                  uint64_t *down) {
    _cleanup_free_ char *buf = malloc(RELAY_BUF);
    if (!buf)
        return;
    if (n_pending && send_all(upstream, pending, n_pending, up) < 0)
        return;
    bool client_open = true, upstream_open = true;
    while (client_open || upstream_open) {
        struct pollfd p[3] = {{.fd = client_open ? client : -1, .events = POLLIN},
                              {.fd = upstream_open ? upstream : -1, .events = POLLIN},
                              {.fd = b->stop_fd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (p[2].revents)
            return;
        for (int i = 0; i < 2; i++) {
            if (!p[i].revents)
                continue;
            int from = i == 0 ? client : upstream, to = i == 0 ? upstream : client;
            ssize_t n = recv(from, buf, RELAY_BUF, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                if (n < 0)
                    return; /* a reset: end both */
                shutdown(to, SHUT_WR);
                if (i == 0)
                    client_open = false;
                else
                    upstream_open = false;
                continue;
            }
            if (send_all(to, buf, (size_t)n, i == 0 ? up : down) < 0)
                return;
        }
    }
}

static void close_conn_fds(struct conn *c) {
    pthread_mutex_lock(&c->b->lock);
    if (c->client >= 0)
        close(c->client);
    if (c->upstream >= 0)
        close(c->upstream);
    c->client = c->upstream = -1;
    c->done = true;
    pthread_mutex_unlock(&c->b->lock);
}

/* A request method: 1-16 upper-case letters. */
static bool method_ok(const char *m) {
    size_t n = strlen(m);
    if (n == 0 || n > 16)
        return false;
    for (; *m; m++)
        if (*m < 'A' || *m > 'Z')
            return false;
    return true;
}

/* "http://AUTHORITY[/PATH]": AUTHORITY (with ":80" when it has no port)
 * into auth, *ret_path at the path ("" for none).  No userinfo. */
static int split_http_url(const char *url, char *auth, size_t size, const char **ret_path) {
    if (strncasecmp(url, "http://", 7) != 0)
        return -EINVAL;
    const char *a = url + 7, *end = strpbrk(a, "/?#");
    size_t al = end ? (size_t)(end - a) : strlen(a);
    if (al == 0 || al + 4 >= size || memchr(a, '@', al))
        return -EINVAL;
    memcpy(auth, a, al);
    auth[al] = '\0';
    const char *close = strrchr(auth, ']');
    if (!strchr(close ? close : auth, ':'))
        strcat(auth, ":80");
    *ret_path = end ? end : "";
    return 0;
}

/* Header name h (up to its colon) is one of the hop-by-hop ones a proxy
 * must not pass on. */
static bool hop_by_hop(const char *h, size_t len) {
    static const char *const names[] = {
        "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
        "te",         "trailer",          "upgrade"};
    const char *colon = memchr(h, ':', len);
    if (!colon)
        return true; /* not a header: dropped */
    size_t nl = (size_t)(colon - h);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == nl && strncasecmp(h, names[i], nl) == 0)
            return true;
    return false;
}

/* The request line in origin form and the header lines of [hdr, end)
 * less the hop-by-hop ones, with "Connection: close", into out; its
 * length, 0 when it does not fit. */
static size_t origin_form(const char *method, const char *path, const char *version, const char *hdr, const char *end,
                          char *out, size_t size) {
    int n = snprintf(out, size, "%s %s%s %s\r\n", method, path[0] == '/' ? "" : "/", path, version);
    if (n < 0 || (size_t)n >= size)
        return 0;
    size_t o = (size_t)n;
    while (hdr < end) {
        const char *nl = memchr(hdr, '\n', (size_t)(end - hdr));
        size_t ll = nl ? (size_t)(nl - hdr) : (size_t)(end - hdr);
        size_t content = ll > 0 && hdr[ll - 1] == '\r' ? ll - 1 : ll;
        if (content > 0 && !hop_by_hop(hdr, content)) {
            if (o + content + 2 >= size)
                return 0;
            memcpy(out + o, hdr, content);
            memcpy(out + o + content, "\r\n", 2);
            o += content + 2;
        }
        hdr += ll + (nl ? 1 : 0);
    }
    static const char tail[] = "Connection: close\r\n\r\n";
    if (o + sizeof tail > size)
        return 0;
    memcpy(out + o, tail, sizeof tail - 1);
    return o + sizeof tail - 1;
}

static void *serve(void *arg) {
    struct conn *c = arg;
    struct broker *b = c->b;
    char head[BROKER_HEAD_MAX + 1];
    size_t len = 0, head_len = 0;
    int r = read_head(b, c->client, head, sizeof head, &len, &head_len);
    if (r < 0) {
        if (r == -E2BIG || r == -EINVAL) {
            respond(c->client, "400 Bad Request", "the request head is too long or holds a NUL byte");
            record(b, "(malformed request)", V_REFUSED, "the request head is too long or holds a NUL byte", 0, 0);
        } else if (r == -ETIMEDOUT) {
            respond(c->client, "408 Request Timeout", "no complete request head within 10 seconds");
            record(b, "(incomplete request)", V_REFUSED, "no complete request head within 10 seconds", 0, 0);
        }
        close_conn_fds(c);
        return NULL;
    }
    /* "CONNECT authority HTTP/1.x" */
    char *eol = strpbrk(head, "\r\n");
    *eol = '\0';
    char what[WHAT_MAX];
    char *sp1 = strchr(head, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ') ||
        (strcmp(sp2 + 1, "HTTP/1.1") != 0 && strcmp(sp2 + 1, "HTTP/1.0") != 0)) {
        printable_redacted(what, 65, head, strlen(head)); /* its first 64 characters */
        respond(c->client, "400 Bad Request", "not an HTTP/1.x request line");
        record(b, what, V_REFUSED, "not an HTTP/1.x request line", 0, 0);
        close_conn_fds(c);
        return NULL;
    }
    *sp1 = *sp2 = '\0';
    const char *method = head, *target = sp1 + 1;
    bool tunnel = strcmp(method, "CONNECT") == 0;
    char auth[WHAT_MAX];
    const char *path = NULL;
    struct egress_rule req;
    if (!tunnel && (!method_ok(method) || split_http_url(target, auth, sizeof auth, &path) < 0)) {
        char m[24], t[WHAT_MAX - 32];
        printable(m, sizeof m, method, strlen(method));
        printable_redacted(t, sizeof t, target, strlen(target));
        snprintf(what, sizeof what, "%s %s", m, t);
        respond(c->client, "400 Bad Request", "not a CONNECT host:port or a request for an absolute http:// URL");
        record(b, what, V_REFUSED, "not a CONNECT host:port or a request for an absolute http:// URL", 0, 0);
        close_conn_fds(c);
        return NULL;
    }
    if (egress_parse_authority(tunnel ? target : auth, &req) < 0) {
        printable_redacted(what, sizeof what, target, strlen(target));
        respond(c->client, "400 Bad Request", "the target is not host:port");
        record(b, what, V_REFUSED, "the target is not host:port", 0, 0);
        close_conn_fds(c);
        return NULL;
    }
    egress_rule_format(&req, what, sizeof what);
    const struct egress_rule *rule = egress_match(b->rules, b->n_rules, &req);
    if (!rule) {
        respond(c->client, "403 Forbidden", "not in the run's --allow-net list");
        record(b, what, V_REFUSED, "not in the run's --allow-net list", 0, 0);
        close_conn_fds(c);
        return NULL;
    }
    char why[REASON_MAX];
    int up_fd = open_upstream(b, rule, &req, why, sizeof why);
    if (up_fd < 0) {
        bool refused = up_fd == -EACCES;
        respond(c->client,
                refused               ? "403 Forbidden"
                : up_fd == -ETIMEDOUT ? "504 Gateway Timeout"
                                      : "502 Bad Gateway",
                why);
        record(b, what, refused ? V_REFUSED : V_FAILED, why, 0, 0);
        close_conn_fds(c);
        return NULL;
    }
    pthread_mutex_lock(&b->lock);
    c->upstream = up_fd;
    bool stopping = b->stopping;
    pthread_mutex_unlock(&b->lock);
    uint64_t up = 0, down = 0;
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (tunnel) {
        if (!stopping && send_all(c->client, ok, sizeof ok - 1, NULL) == 0)
            relay(b, c->client, up_fd, head + head_len, len - head_len, &up, &down);
    } else {
        /* the request in origin form, its hop-by-hop headers replaced by
         * "Connection: close": the next request on this connection, if
         * the client sends one, goes to the same destination, never
         * another.  Room for twice the head: a line that ends in a bare
         * LF gains a CR (at most half again as long: "a:\n"), the request
         * line at most 3 bytes; too small a buffer sent nothing on a
         * connection opened and recorded as allowed, and the client got
         * no answer at all. */
        char out[2 * BROKER_HEAD_MAX + 128];
        size_t ol = origin_form(method, path, sp2 + 1, eol + 1, head + head_len, out, sizeof out);
        if (!stopping && ol && send_all(up_fd, out, ol, &up) == 0)
            relay(b, c->client, up_fd, head + head_len, len - head_len, &up, &down);
    }
    record(b, what, V_ALLOWED, NULL, up, down);
    close_conn_fds(c);
    return NULL;
}

/* Join the connection threads that are done (the accept thread, or the
 * owner once the accept thread is gone). */
static void reap(struct broker *b, bool all) {
    for (;;) {
        struct conn *found = NULL;
        pthread_mutex_lock(&b->lock);
        for (struct conn **pp = &b->conns; *pp; pp = &(*pp)->next)
            if (all || (*pp)->done) {
                found = *pp;
                *pp = found->next;
                b->live--;
                break;
            }
        pthread_mutex_unlock(&b->lock);
        if (!found)
            return;
        pthread_join(found->thread, NULL);
        free(found);
    }
}

static void *accept_loop(void *arg) {
    struct broker *b = arg;
    for (;;) {
        if (wait_fd(b, b->listen_fd, POLLIN, 0) < 0)
            return NULL;
        reap(b, false);
        int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                usleep(10000); /* let connections end */
                continue;
            }
            return NULL;
        }
        pthread_mutex_lock(&b->lock);
        bool full = b->live >= BROKER_MAX_CONNS || b->stopping;
        pthread_mutex_unlock(&b->lock);
        struct conn *c = full ? NULL : calloc(1, sizeof *c);
        if (!c) {
            /* a client that does not read must not hold the loop up */
            struct timeval tv = {.tv_usec = 100000};
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            respond(fd, "503 Service Unavailable", "too many connections at once (64)");
            record(b, "(over the connection limit)", V_REFUSED, "too many connections at once", 0, 0);
            close(fd);
            continue;
        }
        *c = (struct conn){.b = b, .client = fd, .upstream = -1};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 512u << 10); /* getaddrinfo and NSS modules run on it */
        pthread_mutex_lock(&b->lock);
        int r = pthread_create(&c->thread, &attr, serve, c);
        if (r == 0) {
            c->next = b->conns;
            b->conns = c;
            b->live++;
        }
        pthread_mutex_unlock(&b->lock);
        pthread_attr_destroy(&attr);
        if (r != 0) {
            respond(fd, "503 Service Unavailable", "cannot start a connection thread");
            record(b, "(over the connection limit)", V_REFUSED, "cannot start a connection thread", 0, 0);
            close(fd);
            free(c);
        }
    }
}

int broker_start(int listen_fd, const struct egress_rule *rules, size_t n_rules, struct broker **ret) {
    struct broker *b = calloc(1, sizeof *b);
    if (!b) {
        close(listen_fd);
        return -ENOMEM;
    }
    b->listen_fd = listen_fd;
    int fl = fcntl(listen_fd, F_GETFL); /* accept() must not wait for a client that left */
    if (fl >= 0)
        fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK);
    b->stop_fd = eventfd(0, EFD_CLOEXEC);
    pthread_mutex_init(&b->lock, NULL);
    b->rules = n_rules ? calloc(n_rules, sizeof *b->rules) : NULL;
    int r = 0;
    if (b->stop_fd < 0)
        r = -errno;
    else if (n_rules && !b->rules)
        r = -ENOMEM;
    if (r == 0) {
        if (n_rules)
            memcpy(b->rules, rules, n_rules * sizeof *rules);
        b->n_rules = n_rules;
        r = -pthread_create(&b->accept_thread, NULL, accept_loop, b);
    }
    if (r < 0) {
        broker_free(b);
        return r;
    }
    b->started = true;
    *ret = b;
    return 0;
}

void broker_stop(struct broker *b) {
    if (!b || b->stopped)
        return;
    b->stopped = true;
    pthread_mutex_lock(&b->lock);
    b->stopping = true;
    for (struct conn *c = b->conns; c; c = c->next) {
        if (c->client >= 0)
            shutdown(c->client, SHUT_RDWR);
        if (c->upstream >= 0)
            shutdown(c->upstream, SHUT_RDWR);
    }
    pthread_mutex_unlock(&b->lock);
    if (b->stop_fd >= 0)
        (void)!write(b->stop_fd, &(uint64_t){1}, sizeof(uint64_t));
    if (b->started)
        pthread_join(b->accept_thread, NULL);
    reap(b, true);
}

json_t *broker_report(struct broker *b) {
    json_t *allow = json_array(), *dests = json_array();
    for (size_t i = 0; allow && i < b->n_rules; i++) {
        char s[WHAT_MAX];
        egress_rule_format(&b->rules[i], s, sizeof s);
        json_array_append_new(allow, json_string(s));
    }
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; dests && i < b->n_dests; i++) {
        const struct dest *d = &b->dests[i];
        json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I}", "destination", d->what, "verdict", verdict_names[d->verdict],
                              "connections", (json_int_t)d->connections, "bytes_up", (json_int_t)d->bytes_up,
                              "bytes_down", (json_int_t)d->bytes_down);
        if (o && d->reason[0])
            json_object_set_new(o, "reason", json_string(d->reason));
        json_array_append_new(dests, o);
    }
    char proxy[40];
    egress_proxy_url(EGRESS_PROXY_PORT, proxy, sizeof proxy);
    json_t *j = json_pack("{s:s, s:o, s:{s:I, s:I, s:I}, s:o, s:I, s:I, s:I}", "proxy", proxy, "allow", allow,
                          "connections", "allowed", (json_int_t)b->counts[V_ALLOWED], "refused",
                          (json_int_t)b->counts[V_REFUSED], "failed", (json_int_t)b->counts[V_FAILED], "destinations",
                          dests, "destinations_dropped", (json_int_t)b->dests_dropped, "bytes_up",
                          (json_int_t)b->bytes_up, "bytes_down", (json_int_t)b->bytes_down);
    pthread_mutex_unlock(&b->lock);
    return j;
}

void broker_free(struct broker *b) {
    if (!b)
        return;
    broker_stop(b);
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    if (b->stop_fd >= 0)
        close(b->stop_fd);
    pthread_mutex_destroy(&b->lock);
    free(b->rules);
    free(b);
}
