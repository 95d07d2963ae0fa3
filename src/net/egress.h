/* egress.h: the allowlist of `pvisor run --safe --allow-net HOST[:PORT]`
 * (pure: parsing, matching and address classification; no system calls).
 *
 * A run with an allowlist still has a private network namespace with only
 * its own loopback.  The one way out is pvisor's egress broker (broker.h):
 * an HTTP CONNECT proxy that the command reaches on the sandbox's
 * 127.0.0.1:EGRESS_PROXY_PORT (HTTPS_PROXY names it) and that runs in the
 * supervisor, outside the sandbox.  For each CONNECT it parses the
 * authority (egress_parse_authority), matches it against the rules
 * (egress_match), resolves a name itself and refuses addresses a name
 * must not lead to (egress_address_refused), then connects and relays.
 *
 * Rules: HOST[:PORT], PORT 443 when omitted.  HOST is a DNS name
 * (case-insensitive, a trailing dot ignored), "*.NAME" (any name below
 * NAME, not NAME itself), an IPv4 address, or an IPv6 address in brackets.
 * A request matches a rule only by the same kind: a name by a name rule, an
 * address by an address rule (the same address: "[::ffff:127.0.0.1]" is
 * not "127.0.0.1").
 *
 * A name rule leads only to public addresses: loopback, private,
 * link-local (the clouds' metadata service), CGNAT, multicast and reserved
 * ones are refused, whatever the name resolves to (DNS rebinding: an
 * allowed name that an attacker's DNS points at 127.0.0.1 or 10.0.0.5).
 * Two exceptions, both the user's explicit choice: an address rule, which
 * connects to exactly that address, and the name "localhost", which may
 * lead to loopback addresses only.
 */
#ifndef PVISOR_NET_EGRESS_H
#define PVISOR_NET_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_MAX_RULES 64
#define EGRESS_HOST_MAX 253 /* a DNS name's longest text form */
#define EGRESS_DEFAULT_PORT 443
/* The broker's port on the sandbox's own loopback (its network namespace
 * is private: no host service is in the way). */
#define EGRESS_PROXY_PORT 3128

struct egress_rule {
    char host[EGRESS_HOST_MAX + 1]; /* lower case, no trailing dot; without "*." for a wildcard; an address as
                                     * inet_ntop writes it, without brackets */
    bool wildcard;                  /* "*.host": names below host */
    bool address;                   /* host is an IPv4/IPv6 address */
    int family;                     /* address: AF_INET or AF_INET6 */
    unsigned char addr[16];         /* address: its bytes */
    uint16_t port;
};

/* The broker's URL inside the sandbox, "http://127.0.0.1:PORT". */
void egress_proxy_url(uint16_t port, char *buf, size_t size);

/* Parse one rule.  -EINVAL with a malloc'd one-line message in *ret_error
 * (what is wrong and what to write instead); ret is written on success. */
int egress_rule_parse(const char *spec, struct egress_rule *ret, char **ret_error);

/* The rule as the user reads it: "host:443", "*.host:443", "[::1]:8080". */
void egress_rule_format(const struct egress_rule *r, char *buf, size_t size);

/* Parse a CONNECT request's authority, "host:port" or "[v6]:port" (the
 * port is required there).  The host is normalised as for a rule (the
 * result is an egress_rule with wildcard false).  -EINVAL when malformed. */
int egress_parse_authority(const char *authority, struct egress_rule *ret);

/* The first rule that admits the request (same kind, same port; a name
 * equal to the rule's, or below it for a wildcard), or NULL. */
const struct egress_rule *egress_match(const struct egress_rule *rules, size_t n, const struct egress_rule *req);

/* Why the broker must not connect to sa for a request admitted by rule
 * (see above), or NULL when it may.  sa is AF_INET or AF_INET6. */
const char *egress_address_refused(const struct egress_rule *rule, const struct sockaddr *sa);

#endif
