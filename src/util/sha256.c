/* sha256.c: see sha256.h. */
#include "util/sha256.h"

/* SHA256_Init/Update/Final are deprecated in OpenSSL 3 in favour of EVP,
 * but every 3.x libcrypto exports them (Debian's is built with the
 * deprecated API) and they run the same assembly.  They cost nothing to
 * set up, where EVP_MD_fetch() starts the default provider: about 0.5 ms,
 * a tenth of a small apply.  Nothing else of libcrypto is used, so it is
 * not initialized at all (no configuration, no atexit handler). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dlfcn.h>
#include <errno.h>
#include <openssl/opensslv.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* The soname loaded must be the one these declarations describe. */
_Static_assert(OPENSSL_VERSION_MAJOR == 3, "pvisor loads libcrypto.so.3 by name");
#define LIBCRYPTO_SONAME "libcrypto.so.3"

static struct {
    __typeof__(&SHA256_Init) init;
    __typeof__(&SHA256_Update) update;
    __typeof__(&SHA256_Final) final;
    bool ready;
    char error[256];
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

#define LOAD(h, field, name)                                                                                           \
    do {                                                                                                               \
        lib.field = (__typeof__(lib.field))dlsym(h, name);                                                             \
        if (!lib.field) {                                                                                              \
            snprintf(lib.error, sizeof lib.error, "%s has no %s", LIBCRYPTO_SONAME, name);                             \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

static void lib_load(void) {
    /* never closed: the process keeps it, as if it were linked */
    void *h = dlopen(LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib.error, sizeof lib.error, "%s", e ? e : "cannot load " LIBCRYPTO_SONAME);
        return;
    }
    LOAD(h, init, "SHA256_Init");
    LOAD(h, update, "SHA256_Update");
    LOAD(h, final, "SHA256_Final");
    lib.ready = true;
}

static int lib_ready(void) {
    pthread_once(&lib_once, lib_load);
    return lib.ready ? 0 : -ENOSYS;
}

struct pv_sha256 {
    SHA256_CTX ctx;
};

int pv_sha256_begin(struct pv_sha256 **ret) {
    int r = lib_ready();
    if (r < 0)
        return r;
    struct pv_sha256 *h = malloc(sizeof *h);
    if (!h)
        return -ENOMEM;
    if (lib.init(&h->ctx) != 1) {
        free(h);
        return -EIO;
    }
    *ret = h;
    return 0;
}

int pv_sha256_update(struct pv_sha256 *h, const void *data, size_t len) {
    return lib.update(&h->ctx, data, len) == 1 ? 0 : -EIO;
}

int pv_sha256_end(struct pv_sha256 *h, unsigned char ret[32]) {
    return lib.final(ret, &h->ctx) == 1 ? 0 : -EIO;
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

const char *pv_sha256_error(void) {
    return lib.error;
}
