/* dns.h: the name server a `--safe` run's command finds, which answers
 * every query "no such name" and records what was asked.
 *
 * A run without `--network loopback` has a network namespace of its own,
 * with a loopback only: the host's name server is unreachable from it.
 * glibc then fails a lookup at once, but musl (statically linked agent
 * CLIs: codex) ignores the send error and waits out its timeout, 5 s a
 * name, every time.  And nothing told the user which hosts the command
 * wanted, the one thing `--allow-net` needs.  So the launcher's init binds
 * a UDP socket on the sandbox's 127.0.0.1:53, shows an /etc/resolv.conf
 * naming it (launch.h), and hands the socket to the supervisor, where this
 * server answers: nothing of it runs in the sandbox, and no query leaves
 * the host (nothing is forwarded, whatever `--allow-net` allows: the
 * egress broker resolves allowed names itself).
 *
 * Answers: a standard query with one question gets NXDOMAIN (name error:
 * clients give up at once, where SERVFAIL or REFUSED make some retry or
 * wait), the question echoed; another opcode NOTIMP; anything malformed
 * FORMERR, or nothing when not even the header is there.  The question
 * names are recorded (dns_report) for the Run Bundle and the run's end. */
#ifndef PVISOR_NET_DNS_H
#define PVISOR_NET_DNS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_STUB_PORT 53
#define DNS_MAX_NAMES 64   /* distinct names recorded; more are only counted */
#define DNS_MAX_QUERY 4096 /* read of a datagram; past it, answered from its first bytes */
#define DNS_NAME_MAX 1024  /* a question's name as dns_answer writes it (255 bytes, each at most 4) */

/* The answer to the query q (qlen bytes) in out (room for max(qlen, 12)
 * bytes: an answer is never longer than its query), its length in
 * *ret_len (0: none, drop it).  name gets the question's name, lowercased,
 * its labels joined by dots, without the final one, "" when there is
 * none; a byte of a label that is not a letter, a digit, '-' or '_' is
 * written "\xHH" (a space, a NUL, a '.' inside a label, a backslash: the
 * command chose them, and the name goes to a terminal and into JSON as it
 * is).  Returns the response code (0-15), or -1 when nothing is to be
 * sent. */
int dns_answer(const uint8_t *q, size_t qlen, uint8_t *out, size_t *ret_len, char name[static DNS_NAME_MAX]);

struct dns_stub;

/* Serve fd (a bound UDP socket; the server owns it from here, also on
 * failure) on a thread of its own. */
int dns_stub_start(int fd, struct dns_stub **ret);

/* Stop serving and join the thread.  Idempotent. */
void dns_stub_stop(struct dns_stub *s);

/* {"address": "127.0.0.1:53", "answer": "NXDOMAIN", "queries": N,
 * "names": [{"name", "count"}] (first asked first), "unrecorded_queries":
 * M}.  After dns_stub_stop. */
json_t *dns_stub_report(struct dns_stub *s);

void dns_stub_free(struct dns_stub *s); /* stops it first; NULL is fine */

/* Is n (a recorded name) a host one could --allow-net?  Not a reverse
 * lookup (in-addr.arpa, ip6.arpa), localhost or the root. */
bool dns_name_is_host(const char *n);

#endif
