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

/* The same, with every "dev=@" replaced by "dev=<dev>" (an origin map's
 * header names the upper's st_dev, which no input can guess). */
static inline void fuzz_put_dev(int dirfd, const char *name, const uint8_t *p, size_t n, uint64_t dev) {
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", (unsigned long long)dev);
    char *out = malloc(n * (size_t)nl + 1), *o = out;
    if (!out)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (i + 5 <= n && memcmp(p + i, "dev=@", 5) == 0) {
            memcpy(o, "dev=", 4);
            memcpy(o + 4, num, (size_t)nl);
            o += 4 + nl;
            i += 4;
            continue;
        }
        *o++ = (char)p[i];
    }
    fuzz_put(dirfd, name, out, (size_t)(o - out));
    free(out);
}

#endif
