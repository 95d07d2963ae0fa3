/* dns.c: see dns.h.  The parser reads only the header and the question
 * (RFC 1035 4.1.1-4.1.2), with every length checked against the datagram:
 * the bytes come from the sandboxed command. */
#include "net/dns.h"
#include "util/cleanup.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum { RCODE_FORMERR = 1, RCODE_NXDOMAIN = 3, RCODE_NOTIMP = 4 };

/* Header only (no question), code rcode, for the query's id and opcode. */
static int header_answer(const uint8_t *q, uint8_t *out, size_t *ret_len, int rcode) {
    memset(out, 0, 12);
    out[0] = q[0];
    out[1] = q[1];
    out[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, the opcode and RD as asked */
    out[3] = (uint8_t)(0x80 | rcode);         /* RA */
    *ret_len = 12;
    return rcode;
}

int dns_answer(const uint8_t *q, size_t qlen, uint8_t *out, size_t *ret_len, char name[static DNS_NAME_MAX]) {
    name[0] = '\0';
    *ret_len = 0;
    if (qlen < 12 || (q[2] & 0x80))
        return -1; /* not even a header, or a response: never answered (no loops) */
    if (((q[2] >> 3) & 0x0f) != 0)
        return header_answer(q, out, ret_len, RCODE_NOTIMP);
    if (q[4] != 0 || q[5] != 1)
        return header_answer(q, out, ret_len, RCODE_FORMERR);
    size_t pos = 12, nl = 0;
    for (;;) {
        if (pos >= qlen)
            goto formerr;
        size_t len = q[pos];
        if (len == 0) {
            pos++;
            break;
        }
        /* no compression in a question, labels of at most 63 bytes, a
         * name of at most 255 on the wire, its final zero included */
        if (len > 63 || pos + 1 + len > qlen || pos + 1 + len - 12 + 1 > 255)
            goto formerr;
        if (nl)
            name[nl++] = '.';
        for (size_t i = 0; i < len; i++) {
            uint8_t c = q[pos + 1 + i];
            if (c >= 'A' && c <= 'Z')
                c = (uint8_t)(c - 'A' + 'a');
            if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
                name[nl++] = (char)c;
            else
                nl += (size_t)snprintf(name + nl, DNS_NAME_MAX - nl, "\\x%02x", c);
        }
        pos += 1 + len;
    }
    if (pos + 4 > qlen)
        goto formerr;
    name[nl] = '\0';
    header_answer(q, out, ret_len, RCODE_NXDOMAIN);
    out[5] = 1; /* the question, echoed */
    memcpy(out + 12, q + 12, pos + 4 - 12);
    *ret_len = pos + 4;
    return RCODE_NXDOMAIN;

formerr:
    /* nothing recorded: the labels read so far are in name, unterminated
     * (what followed them there was the previous query's name) */
    name[0] = '\0';
    return header_answer(q, out, ret_len, RCODE_FORMERR);
}

/* ---- the server ---------------------------------------------------------- */

struct dns_name {
    char name[DNS_NAME_MAX];
    uint64_t count;
};

struct dns_stub {
    int fd;
    int stop_fd; /* eventfd: readable once the server stops */
    pthread_t thread;
    bool running;
    /* written by the thread alone, read after it is joined */
    uint64_t queries, unrecorded;
    struct dns_name names[DNS_MAX_NAMES];
    size_t n_names;
};

static void record(struct dns_stub *s, const char *name) {
    s->queries++;
    if (!name[0])
        return;
    for (size_t i = 0; i < s->n_names; i++)
        if (strcmp(s->names[i].name, name) == 0) {
            s->names[i].count++;
            return;
        }
    if (s->n_names == DNS_MAX_NAMES) {
        s->unrecorded++;
        return;
    }
    memcpy(s->names[s->n_names].name, name, strlen(name) + 1);
    s->names[s->n_names++].count = 1;
}

static void *serve(void *arg) {
    struct dns_stub *s = arg;
    uint8_t q[DNS_MAX_QUERY], out[DNS_MAX_QUERY];
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->fd, q, sizeof q, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (n < 0)
            continue; /* EAGAIN, or an error queued by an earlier send */
        /* truncated: the question may be cut; answered from what came */
        size_t len = (size_t)n < sizeof q ? (size_t)n : sizeof q, olen;
        char name[DNS_NAME_MAX];
        if (dns_answer(q, len, out, &olen, name) < 0)
            continue;
        record(s, name);
        (void)sendto(s->fd, out, olen, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

int dns_stub_start(int fd, struct dns_stub **ret) {
    *ret = NULL;
    struct dns_stub *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    s->fd = fd;
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->stop_fd < 0) {
        int r = -errno;
        dns_stub_free(s);
        return r;
    }
    int r = -pthread_create(&s->thread, NULL, serve, s);
    if (r < 0) {
        dns_stub_free(s);
        return r;
    }
    s->running = true;
    *ret = s;
    return 0;
}

void dns_stub_stop(struct dns_stub *s) {
    if (!s || !s->running)
        return;
    uint64_t one = 1;
    (void)!write(s->stop_fd, &one, sizeof one);
    pthread_join(s->thread, NULL);
    s->running = false;
}

json_t *dns_stub_report(struct dns_stub *s) {
    json_t *names = json_array();
    for (size_t i = 0; names && i < s->n_names; i++) /* escaped by dns_answer: ASCII */
        json_array_append_new(
            names, json_pack("{s:s, s:I}", "name", s->names[i].name, "count", (json_int_t)s->names[i].count));
    return json_pack("{s:s, s:s, s:I, s:o, s:I}", "address", "127.0.0.1:53", "answer", "NXDOMAIN", "queries",
                     (json_int_t)s->queries, "names", names ? names : json_array(), "unrecorded_queries",
                     (json_int_t)s->unrecorded);
}

void dns_stub_free(struct dns_stub *s) {
    if (!s)
        return;
    dns_stub_stop(s);
    if (s->fd >= 0)
        close(s->fd);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    free(s);
}

bool dns_name_is_host(const char *n) {
    size_t l = n ? strlen(n) : 0;
    return l && !(l >= 13 && strcmp(n + l - 13, ".in-addr.arpa") == 0) &&
           !(l >= 9 && strcmp(n + l - 9, ".ip6.arpa") == 0) && strcmp(n, "localhost") != 0 &&
           !(l >= 10 && strcmp(n + l - 10, ".localhost") == 0);
}
