/* egress.c: see egress.h. */
#include "net/egress.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A DNS name in the letters-digits-hyphen form (RFC 1123), lower-cased in
 * place: labels of 1-63 characters, no hyphen at either end, at most
 * EGRESS_HOST_MAX in all, and a last label that does not start with a
 * digit (no top-level domain does; "10.0.0" or "0x7f.1" would be taken as
 * an address by a resolver). */
static bool dns_name_ok(char *s) {
    size_t len = strlen(s);
    if (len == 0 || len > EGRESS_HOST_MAX)
        return false;
    const char *label = s;
    for (char *c = s;; c++) {
        if (*c == '.' || *c == '\0') {
            size_t l = (size_t)(c - label);
            if (l == 0 || l > 63 || label[0] == '-' || c[-1] == '-')
                return false;
            if (*c == '\0')
                return !(label[0] >= '0' && label[0] <= '9');
            label = c + 1;
            continue;
        }
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
        else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            return false;
    }
}

static int parse_port(const char *s, uint16_t *ret) {
    if (!*s || strlen(s) > 5)
        return -EINVAL;
    unsigned v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return -EINVAL;
        v = v * 10 + (unsigned)(*c - '0');
    }
    if (v == 0 || v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

/* host (NUL-terminated, may be modified) into r: an address (IPv6 only
 * when bracketed says so) or a DNS name. */
static int parse_host(char *host, bool bracketed, struct egress_rule *r) {
    if (bracketed) {
        if (inet_pton(AF_INET6, host, r->addr) != 1)
            return -EINVAL;
        r->address = true;
        r->family = AF_INET6;
    } else if (inet_pton(AF_INET, host, r->addr) == 1) {
        r->address = true;
        r->family = AF_INET;
    } else if (!dns_name_ok(host))
        return -EINVAL;
    if (r->address) {
        if (!inet_ntop(r->family, r->addr, r->host, sizeof r->host))
            return -EINVAL;
    } else
        strcpy(r->host, host); /* dns_name_ok bounded it */
    return 0;
}

/* Split "host", "host:port", "[v6]" or "[v6]:port" (a copy in buf). */
static int split_authority(const char *s, char *buf, size_t size, char **ret_host, char **ret_port,
                           bool *ret_bracketed) {
    if (strlen(s) >= size)
        return -EINVAL;
    strcpy(buf, s);
    *ret_port = NULL;
    *ret_bracketed = buf[0] == '[';
    if (*ret_bracketed) {
        char *close = strchr(buf, ']');
        if (!close || (close[1] != '\0' && close[1] != ':'))
            return -EINVAL;
        *close = '\0';
        if (close[1] == ':')
            *ret_port = close + 2;
        *ret_host = buf + 1;
        return 0;
    }
    char *colon = strchr(buf, ':');
    if (colon) {
        if (strchr(colon + 1, ':'))
            return -EINVAL; /* an IPv6 address without brackets */
        *colon = '\0';
        *ret_port = colon + 1;
    }
    *ret_host = buf;
    return 0;
}

int egress_rule_parse(const char *spec, struct egress_rule *ret, char **ret_error) {
    struct egress_rule r = {.port = EGRESS_DEFAULT_PORT};
    char buf[EGRESS_HOST_MAX + 16], *host, *port;
    bool bracketed;
    if (!spec || !*spec)
        return usage_error(ret_error, "--allow-net needs HOST[:PORT] (a name like api.example.com, *.example.com, an "
                                      "IPv4 address or [an IPv6 address])");
    const char *scheme = strstr(spec, "://");
    if (scheme && scheme > spec &&
        strspn(spec, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") == (size_t)(scheme - spec))
        return usage_error(ret_error,
                           "--allow-net '%s': a URL; give the server as HOST[:PORT] (for https://api.example.com/v1: "
                           "api.example.com, port 443 by default)",
                           spec);
    if (split_authority(spec, buf, sizeof buf, &host, &port, &bracketed) < 0)
        return usage_error(
            ret_error, "--allow-net '%s': not HOST[:PORT] (an IPv6 address goes in brackets: [2001:db8::1]:443)", spec);
    if (port && parse_port(port, &r.port) < 0)
        return usage_error(ret_error, "--allow-net '%s': the port must be a number from 1 to 65535", spec);
    if (!bracketed && strncmp(host, "*.", 2) == 0) {
        r.wildcard = true;
        host += 2;
    }
    size_t hl = strlen(host);
    if (!bracketed && hl > 1 && host[hl - 1] == '.')
        host[--hl] = '\0'; /* the root's dot: "example.com." is "example.com" */
    if (parse_host(host, bracketed, &r) < 0 || (r.wildcard && r.address))
        return usage_error(
            ret_error,
            "--allow-net '%s': '%s' is not a host name (letters, digits, hyphens and dots; a wildcard only "
            "as a leading '*.'), an IPv4 address or a bracketed IPv6 address",
            spec, host);
    /* 0.0.0.0 and [::] name no server: the broker's connect to them
     * reaches this machine's own services (as 127.0.0.1 would, which the
     * user can name if that is what is meant); so does 0.0.0.0 written as
     * an IPv4-mapped address, [::ffff:0.0.0.0], which the broker's IPv6
     * socket connects to as 0.0.0.0 */
    static const unsigned char zero[16], mapped_zero[16] = {[10] = 0xff, [11] = 0xff};
    if (r.address && (memcmp(r.addr, zero, r.family == AF_INET ? 4 : 16) == 0 ||
                      (r.family == AF_INET6 && memcmp(r.addr, mapped_zero, 16) == 0)))
        return usage_error(ret_error,
                           "--allow-net '%s': the unspecified address %s names no server (a connection to it reaches "
                           "this machine's own services); give the server's name or address",
                           spec, r.host);
    if (r.wildcard && !strchr(r.host, '.'))
        return usage_error(ret_error,
                           "--allow-net '%s': a wildcard needs a domain with a dot ('*.example.com'), not a "
                           "top-level domain",
                           spec);
    *ret = r;
    return 0;
}

void egress_proxy_url(uint16_t port, char *buf, size_t size) {
    snprintf(buf, size, "http://127.0.0.1:%u", (unsigned)port);
}

void egress_rule_format(const struct egress_rule *r, char *buf, size_t size) {
    if (r->address && r->family == AF_INET6)
        snprintf(buf, size, "[%s]:%u", r->host, (unsigned)r->port);
    else
        snprintf(buf, size, "%s%s:%u", r->wildcard ? "*." : "", r->host, (unsigned)r->port);
}

int egress_parse_authority(const char *authority, struct egress_rule *ret) {
    struct egress_rule r = {0};
    char buf[EGRESS_HOST_MAX + 16], *host, *port;
    bool bracketed;
    if (split_authority(authority, buf, sizeof buf, &host, &port, &bracketed) < 0 || !port ||
        parse_port(port, &r.port) < 0)
        return -EINVAL;
    size_t hl = strlen(host);
    if (!bracketed && hl > 1 && host[hl - 1] == '.')
        host[--hl] = '\0';
    if (parse_host(host, bracketed, &r) < 0)
        return -EINVAL;
    *ret = r;
    return 0;
}

const struct egress_rule *egress_match(const struct egress_rule *rules, size_t n, const struct egress_rule *req) {
    for (size_t i = 0; i < n; i++) {
        const struct egress_rule *r = &rules[i];
        if (r->port != req->port || r->address != req->address)
            continue;
        if (r->address) {
            if (r->family == req->family && memcmp(r->addr, req->addr, r->family == AF_INET ? 4 : 16) == 0)
                return r;
            continue;
        }
        if (!r->wildcard) {
            if (strcmp(r->host, req->host) == 0)
                return r;
            continue;
        }
        size_t rl = strlen(r->host), ql = strlen(req->host);
        if (ql > rl + 1 && req->host[ql - rl - 1] == '.' && strcmp(req->host + ql - rl, r->host) == 0)
            return r;
    }
    return NULL;
}

/* What kind of IPv4 address a (network order bytes) is, for a name rule:
 * NULL for a public one. */
static const char *v4_special(const unsigned char *a) {
    if (a[0] == 127)
        return "a loopback address";
    if (a[0] == 0)
        return "an unspecified (\"this network\") address";
    if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168))
        return "a private address";
    if (a[0] == 169 && a[1] == 254)
        return "a link-local address (where clouds serve instance metadata and credentials)";
    if (a[0] == 100 && (a[1] & 0xc0) == 64)
        return "a carrier-grade NAT address";
    if (a[0] == 192 && a[1] == 0 && a[2] == 0)
        return "an IETF protocol address";
    if (a[0] == 198 && (a[1] & 0xfe) == 18)
        return "a benchmarking address";
    /* TEST-NET-1, -2 and -3 (RFC 5737): never routed on the Internet, so
     * a name that leads there leads into a network that took them for its
     * own (as 2001:db8::/32 below) */
    if ((a[0] == 192 && a[1] == 0 && a[2] == 2) || (a[0] == 198 && a[1] == 51 && a[2] == 100) ||
        (a[0] == 203 && a[1] == 0 && a[2] == 113))
        return "a documentation address";
    if (a[0] == 192 && a[1] == 88 && a[2] == 99)
        return "a deprecated 6to4 relay anycast address";
    if (a[0] >= 224)
        return "a multicast, reserved or broadcast address";
    return NULL;
}

static const char *v6_special(const unsigned char *a) {
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    static const unsigned char v4translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
    static const unsigned char zero[16] = {0};
    if (memcmp(a, v4mapped, 12) == 0 || memcmp(a, nat64, 12) == 0 || memcmp(a, v4translated, 12) == 0)
        return v4_special(a + 12); /* the IPv4 address inside */
    if (a[0] == 0x20 && a[1] == 0x02)
        return v4_special(a + 2); /* 6to4: a host with a sit tunnel reaches the IPv4 address inside */
    if (a[0] == 0 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1)
        return "a local-use NAT64 address";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
        return "a site-local (deprecated, private) address";
    if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0)
        return "a Teredo address (a tunnel to an IPv4 address)";
    if ((a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8) ||
        (a[0] == 0x3f && a[1] == 0xff && (a[2] & 0xf0) == 0))
        return "a documentation address"; /* 2001:db8::/32, 3fff::/20 (RFC 9637) */
    if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0x02 && a[4] == 0 && a[5] == 0)
        return "a benchmarking address"; /* 2001:2::/48 */
    if (a[0] == 0x5f && a[1] == 0)
        return "a segment routing (SRv6) address"; /* 5f00::/16 (RFC 9602) */
    if (a[0] == 0x01 && a[1] == 0 && memcmp(a + 2, zero + 2, 5) == 0 && a[7] == 1)
        return "a dummy-prefix address"; /* 100:0:0:1::/64 (RFC 9780) */
    if (a[0] == 0x01 && a[1] == 0 && memcmp(a + 2, zero + 2, 6) == 0)
        return "a discard-only address";
    if (memcmp(a, zero, 15) == 0)
        return a[15] == 1 ? "a loopback address" : "an unspecified address";
    if ((a[0] & 0xfe) == 0xfc)
        return "a unique local (private) address";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return "a link-local address";
    if (a[0] == 0xff)
        return "a multicast address";
    if (memcmp(a, zero, 12) == 0)
        return "an IPv4-compatible (deprecated) address";
    /* every public unicast address is in 2000::/3; the rest is reserved
     * (a network may use it as its own, as the ranges above) */
    if ((a[0] & 0xe0) != 0x20)
        return "a reserved address (outside 2000::/3)";
    return NULL;
}

const char *egress_address_refused(const struct egress_rule *rule, const struct sockaddr *sa) {
    if (rule->address)
        return NULL; /* the user named this address */
    const unsigned char *a;
    const char *kind;
    if (sa->sa_family == AF_INET) {
        a = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        kind = v4_special(a);
    } else if (sa->sa_family == AF_INET6) {
        a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        kind = v6_special(a);
    } else
        return "not an IPv4 or IPv6 address";
    bool loopback = kind && strcmp(kind, "a loopback address") == 0;
    if (strcmp(rule->host, "localhost") == 0)
        return loopback ? NULL : "not a loopback address (the rule names localhost)";
    return kind;
}
