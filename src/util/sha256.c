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
#include <stdlib.h>

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
