/* sha256.c: see sha256.h. */
#include "util/sha256.h"

/* SHA256_Init/Update/Final are deprecated in OpenSSL 3 in favour of EVP,
 * but every 3.x libcrypto has them (Debian's is built with the deprecated
 * API) and they run the same assembly.  They cost nothing to set up, where
 * EVP_MD_fetch() starts the default provider: about 0.5 ms, a tenth of a
 * small apply, and would pull most of libcrypto.a into the binary.
 * Nothing else of libcrypto is used, so it is not initialized at all (no
 * configuration, no atexit handler). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

struct pv_sha256 {
    SHA256_CTX ctx;
};

int pv_sha256_begin(struct pv_sha256 **ret) {
    struct pv_sha256 *h = malloc(sizeof *h);
    if (!h)
        return -ENOMEM;
    if (SHA256_Init(&h->ctx) != 1) {
        free(h);
        return -EIO;
    }
    *ret = h;
    return 0;
}

int pv_sha256_update(struct pv_sha256 *h, const void *data, size_t len) {
    return SHA256_Update(&h->ctx, data, len) == 1 ? 0 : -EIO;
}

int pv_sha256_end(struct pv_sha256 *h, unsigned char ret[32]) {
    return SHA256_Final(ret, &h->ctx) == 1 ? 0 : -EIO;
}

void pv_sha256_free(struct pv_sha256 *h) {
    free(h);
}

uint64_t pv_sha256_keyed64(const unsigned char key[16], const void *data, size_t len) {
    SHA256_CTX ctx;
    unsigned char d[32];
    uint64_t v = 0;
    /* (libcrypto's SHA-256 cannot fail on a context on the stack) */
    if (SHA256_Init(&ctx) == 1 && SHA256_Update(&ctx, key, 16) == 1 && SHA256_Update(&ctx, data, len) == 1 &&
        SHA256_Final(d, &ctx) == 1)
        memcpy(&v, d, sizeof v);
    return v;
}

int pv_sha256_buf(const void *data, size_t len, unsigned char ret[32]) {
    struct pv_sha256 *h = NULL;
    int r = pv_sha256_begin(&h);
    if (r == 0)
        r = pv_sha256_update(h, data, len);
    if (r == 0)
        r = pv_sha256_end(h, ret);
    pv_sha256_free(h);
    return r;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int pv_user_xattrs_sha256(int fd, unsigned char ret[32]) {
    char p[40];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t len = listxattr(p, NULL, 0);
    if (len < 0)
        return errno == ENOTSUP ? 0 : -errno;
    char *list = malloc((size_t)len + 1);
    const char **names = NULL;
    char *val = NULL;
    struct pv_sha256 *h = NULL;
    int r = list ? pv_sha256_begin(&h) : -ENOMEM;
    if (r < 0)
        goto out;
    /* the list may have grown since it was measured: ERANGE, then none
     * is taken for a smaller one */
    len = listxattr(p, list, (size_t)len);
    if (len < 0) {
        r = -errno;
        goto out;
    }
    size_t n = 0;
    for (ssize_t off = 0; off < len; off += (ssize_t)strlen(list + off) + 1)
        n++;
    if (n > 4096) {
        r = -E2BIG;
        goto out;
    }
    names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        r = -ENOMEM;
        goto out;
    }
    size_t k = 0;
    for (ssize_t off = 0; off < len; off += (ssize_t)strlen(list + off) + 1)
        if (strncmp(list + off, "user.", 5) == 0)
            names[k++] = list + off;
    qsort(names, k, sizeof *names, cmp_names);
    if (k && !(val = malloc(65536))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < k && r >= 0; i++) {
        ssize_t vl = getxattr(p, names[i], val, 65536);
        if (vl < 0) {
            if (errno == ENODATA)
                continue; /* removed meanwhile */
            r = -errno;
            break;
        }
        char num[24];
        int m = snprintf(num, sizeof num, "%zd", vl);
        if ((r = pv_sha256_update(h, names[i], strlen(names[i]) + 1)) < 0 ||
            (r = pv_sha256_update(h, num, (size_t)m + 1)) < 0 || (r = pv_sha256_update(h, val, (size_t)vl)) < 0)
            break;
    }
    if (r >= 0)
        r = pv_sha256_end(h, ret) < 0 ? -EIO : 1;
out:
    pv_sha256_free(h);
    free(names);
    free(list);
    free(val);
    return r;
}
