/* Unit tests: the stage's origin map (docs/stage-format.md, "origin"):
 * its header's identity of upper/ and its file system, its lines, the
 * copies recorded but not shown, and a version 1 map read and rewritten
 * as version 2 by a run that reopens the stage. */
#include "stage/stage.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/pvisor-test-origin-XXXXXX";

static void put(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
}

/* The whole of dir/name into buf (NUL-terminated). */
static void get(const char *name, char *buf, size_t size) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    buf[0] = '\0';
    FILE *f = fopen(p, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* s with its newlines shown as '|' (one TAP line) */
static const char *oneline(const char *s) {
    static char out[4096];
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof out; i++)
        out[i] = s[i] == '\n' ? '|' : s[i];
    out[i] = '\0';
    return out;
}

static int check(int upper_fd, const char *line, bool *legacy) {
    *legacy = false;
    return stage_origin_header_check(upper_fd, line, strlen(line), legacy);
}

/* line with the value of key= replaced by val */
static void with_token(const char *line, const char *key, const char *val, char *out, size_t size) {
    const char *k = strstr(line, key);
    if (!k) {
        snprintf(out, size, "%s", line);
        return;
    }
    const char *end = strchr(k, ' ');
    snprintf(out, size, "%.*s%s%s%s", (int)(k - line), line, key, val, end ? end : "");
}

static void headers(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/hdr-upper", dir);
    mkdir(p, 0700);
    int ufd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    snprintf(p, sizeof p, "%s/hdr-other", dir);
    mkdir(p, 0700);
    int ofd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    ok(ufd >= 0 && ofd >= 0 && fstat(ufd, &st) == 0, "two directories");

    char h[STAGE_ORIGIN_HEADER_MAX], line[STAGE_ORIGIN_HEADER_MAX], t[STAGE_ORIGIN_HEADER_MAX + 64];
    int n = stage_origin_header(ufd, false, h, sizeof h);
    ok(n > 0 && h[n - 1] == '\n' && strncmp(h, "pvisor-origin 2 upper=", 22) == 0, "a version 2 header: %.*s",
       n > 0 ? n - 1 : 0, h);
    snprintf(line, sizeof line, "%.*s", n > 0 ? n - 1 : 0, h);
    bool legacy = true;
    ok(check(ufd, line, &legacy) == 1 && !legacy, "it names its upper");
    ok(check(ofd, line, &legacy) == 0, "not another directory of the same file system (a copy of the stage)");
    char hl[STAGE_ORIGIN_HEADER_MAX];
    int nl = stage_origin_header(ufd, true, hl, sizeof hl);
    ok(nl > 8 && strcmp(hl + nl - 8, " legacy\n") == 0, "legacy marked");
    hl[nl > 0 ? nl - 1 : 0] = '\0';
    ok(check(ufd, hl, &legacy) == 1 && legacy, "and read back as legacy");
    ok(stage_origin_header(ufd, false, h, 16) == -EOVERFLOW, "a buffer too small: -EOVERFLOW");

    /* another st_dev, the same file system (a remount, another loop
     * device): the identity that is not st_dev decides */
    char dev[32];
    snprintf(dev, sizeof dev, "%" PRIu64, (uint64_t)st.st_dev + 1);
    with_token(line, "dev=", dev, t, sizeof t);
    bool named = strstr(line, " fsid=") || strstr(line, " uuid=");
    ok(check(ufd, t, &legacy) == (named ? 1 : 0), "another st_dev: %s (%s)", named ? "the same file system" : "another",
       t);
    if (strstr(line, " fsid=")) {
        with_token(line, "fsid=", "0123456789abcdef", t, sizeof t);
        ok(check(ufd, t, &legacy) == 0, "another f_fsid: another file system");
    } else if (strstr(line, " uuid=")) {
        with_token(line, "uuid=", "0123456789abcdef0123456789abcdef", t, sizeof t);
        ok(check(ufd, t, &legacy) == 0, "another UUID: another file system");
    } else {
        ok(1, "# SKIP this file system has neither an f_fsid of its own nor a UUID");
    }
    with_token(line, "type=", "1234", t, sizeof t);
    ok(check(ufd, t, &legacy) == 0, "another file system type");

    /* malformed or unknown: never a map of this upper */
    static const char *const bad[] = {" extra=1", " legacy legacy", " ",          "  legacy", " fsid=0",
                                      " uuid=",   " uuid=abc",      " uuid=ABCD", " dev=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(t, sizeof t, "%s%s", line, bad[i]);
        ok(check(ufd, t, &legacy) == 0, "refused: '...%s'", bad[i]);
    }
    snprintf(t, sizeof t, "pvisor-origin 3%s", line + 15);
    ok(check(ufd, t, &legacy) == 0, "refused: another version");
    char *up = strstr(line, " type=");
    snprintf(t, sizeof t, "pvisor-origin 2%s", up ? up : "");
    ok(check(ufd, t, &legacy) == 0, "refused: no upper=");

    /* version 1: st_dev alone, legacy */
    snprintf(t, sizeof t, "pvisor-origin 1 dev=%" PRIu64, (uint64_t)st.st_dev);
    ok(check(ufd, t, &legacy) == 1 && legacy, "version 1 of this st_dev: usable, legacy");
    snprintf(t, sizeof t, "pvisor-origin 1 dev=%" PRIu64, (uint64_t)st.st_dev + 1);
    ok(check(ufd, t, &legacy) == 0, "version 1 of another st_dev: not usable");
    snprintf(t, sizeof t, "pvisor-origin 1 dev=%" PRIu64 "x", (uint64_t)st.st_dev);
    ok(check(ufd, t, &legacy) == 0, "version 1 malformed: not usable");
    close(ufd);
    close(ofd);
}

static void lines(void) {
    static const struct {
        const char *line;
        int kind;
        uint64_t u, l;
    } cases[] = {
        {"12 34", STAGE_ORIGIN_SHOWN, 12, 34},
        {"12 34 +", STAGE_ORIGIN_HIDDEN, 12, 34},
        {"12 -", STAGE_ORIGIN_FORGET, 12, 0},
        {"18446744073709551615 9223372036854775808", STAGE_ORIGIN_SHOWN, UINT64_MAX, 1ULL << 63},
        {"", -EINVAL, 0, 0},
        {"12", -EINVAL, 0, 0},
        {"12 ", -EINVAL, 0, 0},
        {"0 3", -EINVAL, 0, 0},
        {"12 0", -EINVAL, 0, 0},
        {"-1 3", -EINVAL, 0, 0},
        {"12 34 x", -EINVAL, 0, 0},
        {"12  34", -EINVAL, 0, 0},
        {"12 34 + ", -EINVAL, 0, 0},
        {"12 34 ++", -EINVAL, 0, 0},
        {"12 +", -EINVAL, 0, 0},
        {"12 - +", -EINVAL, 0, 0},
        {"18446744073709551616 1", -EINVAL, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t u = 0, l = 0;
        int k = stage_origin_parse_line(cases[i].line, strlen(cases[i].line), &u, &l);
        ok(k == cases[i].kind && (k < 0 || (u == cases[i].u && l == cases[i].l)), "line '%s': %d", cases[i].line, k);
    }
}

/* A fresh stage's map: a second copy of a lower number the first shows is
 * recorded, not shown; forgetting it is recorded; the map is read back
 * when a run reopens the stage. */
static void stage_map(void) {
    char sp[512], buf[4096];
    snprintf(sp, sizeof sp, "%s/st", dir);
    struct stage *s = NULL;
    int r = stage_open_for_run(sp, "/ws", "run-1", STAGE_DURABILITY_NONE, &s);
    ok(r == 0, "a new stage (r=%d)", r);
    if (r < 0)
        return;
    uint64_t l = 0;
    ok(stage_origin_add(s, 101, 7) == 0 && stage_origin_add(s, 102, 7) == 0 && stage_origin_add(s, 103, 8) == 0,
       "three copy-ups, two of lower 7");
    ok(stage_origin_get(s, 101, &l) && l == 7, "the first shows 7");
    ok(!stage_origin_get(s, 102, &l), "the second is not shown");
    ok(stage_origin_lower_mapped(s, 7) && stage_origin_lower_mapped(s, 8), "7 and 8 taken");
    ok(stage_origin_forget(s, 102) == 0 && stage_origin_forget(s, 103) == 0 && stage_origin_forget(s, 999) == 0,
       "forget the second and the third (and one never recorded)");
    ok(!stage_origin_lower_mapped(s, 8) && stage_origin_lower_mapped(s, 7), "8 free again, 7 still shown");
    ok(stage_origin_add(s, 104, 7) == 0 && !stage_origin_get(s, 104, &l), "another copy of 7: not shown");
    ok(stage_origin_add(s, 101, 7) == 0 && stage_origin_get(s, 101, &l) && l == 7, "the first again: still shown");
    ok(stage_seal(s, true) == 0, "sealed");
    stage_free(s);
    snprintf(sp, sizeof sp, "st/origin");
    get(sp, buf, sizeof buf);
    char *body = strchr(buf, '\n');
    ok(strncmp(buf, "pvisor-origin 2 ", 16) == 0 && body &&
           strcmp(body + 1, "101 7\n102 7 +\n103 8\n102 -\n103 -\n104 7 +\n101 7\n") == 0,
       "the map's lines: '%s'", oneline(body ? body + 1 : buf));

    snprintf(sp, sizeof sp, "%s/st", dir);
    s = NULL;
    r = stage_open_for_run(sp, "/ws", "run-2", STAGE_DURABILITY_NONE, &s);
    ok(r == 0, "reopened (r=%d)", r);
    if (r < 0)
        return;
    ok(stage_origin_get(s, 101, &l) && l == 7 && !stage_origin_get(s, 102, &l) && !stage_origin_get(s, 104, &l) &&
           !stage_origin_lower_mapped(s, 8),
       "read back as it was");
    ok(stage_origin_forget(s, 104) == 0, "the copy not shown is known: its forgetting recorded");
    ok(stage_seal(s, true) == 0, "sealed");
    stage_free(s);
    get("st/origin", buf, sizeof buf);
    size_t bl = strlen(buf);
    ok(bl > 6 && strcmp(buf + bl - 6, "104 -\n") == 0, "'104 -' appended");
}

/* A version 1 map (an older pvisor's) of this upper: read, and rewritten
 * as version 2, legacy; one of another st_dev: discarded, as before. */
static void version1(void) {
    char sp[512], buf[4096], p[600];
    snprintf(sp, sizeof sp, "%s/st", dir);
    snprintf(p, sizeof p, "%s/upper", sp);
    struct stat ust;
    if (stat(p, &ust) < 0)
        abort();
    char v1[256];
    snprintf(v1, sizeof v1, "pvisor-origin 1 dev=%" PRIu64 "\n5 7\n6 8\n6 -\n9 10\n11", (uint64_t)ust.st_dev);
    put("st/origin", v1);
    struct stage *s = NULL;
    int r = stage_open_for_run(sp, "/ws", "run-3", STAGE_DURABILITY_NONE, &s);
    ok(r == 0, "a stage with a version 1 map reopened (r=%d)", r);
    if (r < 0)
        return;
    uint64_t l = 0;
    ok(stage_origin_get(s, 5, &l) && l == 7 && stage_origin_get(s, 9, &l) && l == 10 && !stage_origin_get(s, 6, &l) &&
           !stage_origin_get(s, 11, &l),
       "its mappings read (the forgotten one and a torn last line not)");
    ok(stage_seal(s, true) == 0, "sealed");
    stage_free(s);
    get("st/origin", buf, sizeof buf);
    char *body = strchr(buf, '\n');
    bool legacy = false;
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok(body && strncmp(buf, "pvisor-origin 2 ", 16) == 0 &&
           stage_origin_header_check(fd, buf, (size_t)(body - buf), &legacy) == 1 && legacy,
       "rewritten as version 2 of this upper, legacy");
    close(fd);
    ok(body && (strcmp(body + 1, "5 7\n9 10\n") == 0 || strcmp(body + 1, "9 10\n5 7\n") == 0),
       "with its live mappings: '%s'", oneline(body ? body + 1 : buf));

    snprintf(v1, sizeof v1, "pvisor-origin 1 dev=%" PRIu64 "\n5 7\n", (uint64_t)ust.st_dev + 1);
    put("st/origin", v1);
    s = NULL;
    r = stage_open_for_run(sp, "/ws", "run-4", STAGE_DURABILITY_NONE, &s);
    ok(r == 0 && !stage_origin_get(s, 5, &l), "a version 1 map of another st_dev is discarded (r=%d)", r);
    if (r == 0)
        (void)stage_seal(s, true);
    stage_free(s);
    get("st/origin", buf, sizeof buf);
    body = strchr(buf, '\n');
    ok(body && strncmp(buf, "pvisor-origin 2 ", 16) == 0 && !strstr(buf, "legacy") && body[1] == '\0',
       "started again, not legacy: '%s'", oneline(buf));
}

int main(void) {
    if (!mkdtemp(dir))
        return 1;
    headers();
    lines();
    stage_map();
    version1();
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    (void)!system(rm);
    return tap_done();
}
