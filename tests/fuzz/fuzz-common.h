/* fuzz-common.h: what the stage-reader harnesses share (tests/fuzz/README.md).
 * Each harness writes its input as files of a scratch stage directory
 * (made once per process under $TMPDIR) and calls the reader on it, as
 * pvisor reads a stage from disk. */
#ifndef PVISOR_FUZZ_COMMON_H
#define PVISOR_FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage/stage.h"

/* The input's parts, split at FUZZ_SEP (seeds: tests/fuzz/seeds.sh). */
#define FUZZ_SEP "\n--8<--\n"
#define FUZZ_MAX_PARTS 8

struct fuzz_part {
    const uint8_t *p;
    size_t n;
};

static inline size_t fuzz_split(const uint8_t *data, size_t size, struct fuzz_part *parts, size_t max) {
    const size_t sl = strlen(FUZZ_SEP);
    size_t n = 0;
    for (size_t i = 0; i < max; i++)
        parts[i] = (struct fuzz_part){(const uint8_t *)"", 0};
    while (n < max) {
        const uint8_t *s = n + 1 < max ? memmem(data, size, FUZZ_SEP, sl) : NULL;
        size_t len = s ? (size_t)(s - data) : size;
        parts[n++] = (struct fuzz_part){data, len};
        if (!s)
            break;
        size -= len + sl;
        data = s + sl;
    }
    return n;
}

/* A fresh scratch directory, the same for the whole process. */
static inline const char *fuzz_scratch(void) {
    static char path[256];
    if (path[0])
        return path;
    const char *t = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/pvisor-fuzz-XXXXXX", t && t[0] ? t : "/tmp");
    if (!mkdtemp(path))
        abort();
    return path;
}

/* Write (or, with p NULL, remove) dirfd/name. */
static inline void fuzz_put(int dirfd, const char *name, const void *p, size_t n) {
    unlinkat(dirfd, name, 0);
    if (!p)
        return;
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w <= 0)
            abort();
        b += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* The same, an origin map: "dev=@" becomes "dev=<st_dev>" of upper_fd (a
 * version 1 header names it), and "@V2@" and "@V2L@" its version 2 header
 * (the latter marked legacy), without the newline: the header names upper/
 * and its file system, which no input can guess. */
static inline void fuzz_put_origin(int dirfd, const char *name, const uint8_t *p, size_t n, int upper_fd) {
    struct stat st;
    char num[32], v2[STAGE_ORIGIN_HEADER_MAX], v2l[STAGE_ORIGIN_HEADER_MAX];
    int h2 = stage_origin_header(upper_fd, false, v2, sizeof v2);
    int h2l = stage_origin_header(upper_fd, true, v2l, sizeof v2l);
    if (fstat(upper_fd, &st) < 0 || h2 <= 0 || h2l <= 0)
        abort();
    int nl = snprintf(num, sizeof num, "%llu", (unsigned long long)st.st_dev);
    static const char *const keys[] = {"dev=@", "@V2@", "@V2L@"};
    const char *vals[] = {num, v2, v2l};
    size_t vlen[] = {(size_t)nl, (size_t)h2 - 1, (size_t)h2l - 1};
    char *out = malloc(n * STAGE_ORIGIN_HEADER_MAX + 1), *o = out;
    if (!out)
        abort();
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < 3 && !(i + strlen(keys[k]) <= n && memcmp(p + i, keys[k], strlen(keys[k])) == 0))
            k++;
        if (k == 3) {
            *o++ = (char)p[i];
            continue;
        }
        if (k == 0) {
            memcpy(o, "dev=", 4);
            o += 4;
        }
        memcpy(o, vals[k], vlen[k]);
        o += vlen[k];
        i += strlen(keys[k]) - 1;
    }
    fuzz_put(dirfd, name, out, (size_t)(o - out));
    free(out);
}

#endif
