/* sha256.h: SHA-256 from OpenSSL's libcrypto, loaded when first needed.
 *
 * Most pvisor processes never hash (the launcher, `run` without writes,
 * `status`, `list`...), and linking libcrypto costs every one of them its
 * relocation at start (about 0.6 ms here).  So the library is opened with
 * dlopen() on the first use, once per process (thread-safe), and only its
 * SHA-256 functions are used (see sha256.c for why not EVP).
 *
 * Errors are negative errno: -ENOSYS when libcrypto cannot be loaded
 * (pv_sha256_error() says why), -EIO when it fails, -ENOMEM. */
#ifndef PVISOR_UTIL_SHA256_H
#define PVISOR_UTIL_SHA256_H

#include <stddef.h>

struct pv_sha256;

int pv_sha256_begin(struct pv_sha256 **ret);
int pv_sha256_update(struct pv_sha256 *h, const void *data, size_t len);
/* Finish: 32 bytes into ret (h is then only good for pv_sha256_free). */
int pv_sha256_end(struct pv_sha256 *h, unsigned char ret[32]);
void pv_sha256_free(struct pv_sha256 *h); /* NULL is fine */

/* One buffer. */
int pv_sha256_buf(const void *data, size_t len, unsigned char ret[32]);

/* Why libcrypto could not be loaded ("" if it was, or was not tried). */
const char *pv_sha256_error(void);

#endif
