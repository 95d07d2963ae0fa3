/* broker.h: pvisor's egress broker, the one way out of a `--safe` run's
 * network namespace when `--allow-net` gives an allowlist (egress.h).
 *
 * An HTTP CONNECT proxy that runs in the supervisor, outside the sandbox:
 * the launcher's init creates the listening socket on the sandbox's own
 * 127.0.0.1:EGRESS_PROXY_PORT and hands it over (launch.h), so connections
 * from inside arrive here while nothing of the broker runs in the
 * sandbox.  For each connection (a thread, at most BROKER_MAX_CONNS at
 * once): read the request head (at most BROKER_HEAD_MAX bytes, within
 * BROKER_HEAD_TIMEOUT_MS), accept "CONNECT host:port HTTP/1.x" or a plain
 * http request for an absolute "http://host[:port]/..." URL, match the
 * allowlist, resolve a name here (the sandbox has no DNS), refuse
 * addresses the rule must not lead to (egress_address_refused, and for a
 * name rule every address of this machine's interfaces), connect (BROKER_CONNECT_TIMEOUT_MS)
 * and relay bytes both ways until both sides are done (a plain request is
 * sent on in origin form first, its hop-by-hop headers and proxy
 * credentials dropped, "Connection: close" added).  Refusals get a
 * status line the client can show (403, 400, 408, 502, 503, 504) and
 * "X-Pvisor-Egress: REASON".
 *
 * Every request is counted by destination and verdict for the Run Bundle
 * (broker_report): what the command reached, how much it sent and got,
 * and what it tried that was refused.  The broker never reads the tunneled
 * bytes (TLS, usually) beyond counting them.
 */
#ifndef PVISOR_NET_BROKER_H
#define PVISOR_NET_BROKER_H

#include <jansson.h>
#include <stddef.h>

#include "net/egress.h"

#define BROKER_MAX_CONNS 64
#define BROKER_HEAD_MAX 8192
#define BROKER_HEAD_TIMEOUT_MS 10000
#define BROKER_CONNECT_TIMEOUT_MS 10000
#define BROKER_MAX_DESTINATIONS 256

struct broker;

/* Start serving listen_fd (a listening TCP socket; the broker owns it from
 * here, also on failure).  The rules are copied. */
int broker_start(int listen_fd, const struct egress_rule *rules, size_t n_rules, struct broker **ret);

/* End every tunnel, stop accepting and join the threads.  Idempotent. */
void broker_stop(struct broker *b);

/* The evidence: {"proxy", "allow": [...], "connections": {"allowed",
 * "refused", "failed"}, "destinations": [...], "destinations_dropped",
 * "bytes_up", "bytes_down"}: at most BROKER_MAX_DESTINATIONS destinations,
 * half of them kept for allowed ones; the bytes are every tunnel's, listed
 * or not.  After broker_stop. */
json_t *broker_report(struct broker *b);

void broker_free(struct broker *b); /* stops it first; NULL is fine */

#endif
