/* sha256.c: see sha256.h. */
#include "util/sha256.h"

#include <dlfcn.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <pthread.h>
#include <stdio.h>

/* The soname loaded must be the one these declarations describe. */
_Static_assert(OPENSSL_VERSION_MAJOR == 3, "pvisor loads libcrypto.so.3 by name");
#define LIBCRYPTO_SONAME "libcrypto.so.3"

static struct {
    __typeof__(&OPENSSL_init_crypto) init;
    __typeof__(&EVP_MD_fetch) fetch;
    __typeof__(&EVP_MD_CTX_new) ctx_new;
    __typeof__(&EVP_MD_CTX_free) ctx_free;
    __typeof__(&EVP_DigestInit_ex) digest_init;
    __typeof__(&EVP_DigestUpdate) digest_update;
    __typeof__(&EVP_DigestFinal_ex) digest_final;
    EVP_MD *md;
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
    LOAD(h, init, "OPENSSL_init_crypto");
    LOAD(h, fetch, "EVP_MD_fetch");
    LOAD(h, ctx_new, "EVP_MD_CTX_new");
    LOAD(h, ctx_free, "EVP_MD_CTX_free");
    LOAD(h, digest_init, "EVP_DigestInit_ex");
    LOAD(h, digest_update, "EVP_DigestUpdate");
    LOAD(h, digest_final, "EVP_DigestFinal_ex");
    lib.init(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS, NULL);
    lib.md = lib.fetch(NULL, "SHA256", NULL);
    if (!lib.md)
        snprintf(lib.error, sizeof lib.error, "%s has no SHA-256", LIBCRYPTO_SONAME);
}

static int lib_ready(void) {
    pthread_once(&lib_once, lib_load);
    return lib.md ? 0 : -ENOSYS;
}

int pv_sha256_begin(struct pv_sha256 **ret) {
    int r = lib_ready();
    if (r < 0)
        return r;
    EVP_MD_CTX *c = lib.ctx_new();
    if (!c)
        return -ENOMEM;
    if (lib.digest_init(c, lib.md, NULL) != 1) {
        lib.ctx_free(c);
        return -EIO;
    }
    *ret = (struct pv_sha256 *)c;
    return 0;
}

int pv_sha256_update(struct pv_sha256 *h, const void *data, size_t len) {
    return lib.digest_update((EVP_MD_CTX *)h, data, len) == 1 ? 0 : -EIO;
}

int pv_sha256_end(struct pv_sha256 *h, unsigned char ret[32]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (lib.digest_final((EVP_MD_CTX *)h, d, &n) != 1 || n != 32)
        return -EIO;
    for (unsigned i = 0; i < 32; i++)
        ret[i] = d[i];
    return 0;
}

void pv_sha256_free(struct pv_sha256 *h) {
    if (h)
        lib.ctx_free((EVP_MD_CTX *)h);
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
