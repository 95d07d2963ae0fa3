/* sha256.h: SHA-256 from OpenSSL's libcrypto, linked statically.
 *
 * Only libcrypto's SHA-256 functions are used (see sha256.c for why not
 * EVP), and only their objects are linked in from libcrypto.a: no pvisor
 * process loads libcrypto.so, whose relocation cost every process that
 * hashed (the run's probe, the FUSE server's first copy-up, apply,
 * review) about a millisecond.
 *
 * Errors are negative errno: -EIO when libcrypto fails, -ENOMEM. */
#ifndef PVISOR_UTIL_SHA256_H
#define PVISOR_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct pv_sha256;

int pv_sha256_begin(struct pv_sha256 **ret);
int pv_sha256_update(struct pv_sha256 *h, const void *data, size_t len);
/* Finish: 32 bytes into ret (h is then only good for pv_sha256_free). */
int pv_sha256_end(struct pv_sha256 *h, unsigned char ret[32]);
void pv_sha256_free(struct pv_sha256 *h); /* NULL is fine */

/* One buffer. */
int pv_sha256_buf(const void *data, size_t len, unsigned char ret[32]);

/* The first 8 bytes of SHA-256(key || data): a hash of data whose
 * collisions nobody without the key can find (a 16-byte random key), no
 * allocation.  For the overlay's directory cookies. */
uint64_t pv_sha256_keyed64(const unsigned char key[16], const void *data, size_t len);

/* The digest of the user.* extended attributes of the object fd refers to
 * (any fd, O_PATH included: read through /proc/self/fd), as stored: each
 * "name\0<decimal length>\0value", in name order.  A stage's journal
 * records it for a preimage, and apply compares it with the workspace
 * file's own (a change of them since the run is a conflict).  Returns 1,
 * 0 when the file system keeps no xattrs (ENOTSUP), or -errno (-E2BIG
 * past 4096 attributes). */
int pv_user_xattrs_sha256(int fd, unsigned char ret[32]);

#endif
