/* diff_binary.c: a changed binary file as git's binary patch (`git diff
 * --binary`), so that `pvisor diff > P; git apply P` writes it too.
 *
 * The format (git's Documentation/gitformat-diff and apply.c): a full
 * index line with both sides' blob names (SHA-1 of "blob SIZE\0" and the
 * bytes; forty zeros for a side that does not exist, which git apply
 * checks against the file it patches and against its result), then "GIT
 * binary patch" and two "literal" hunks, the new content and the old (for
 * `git apply -R`), each zlib-deflated and cut into lines of at most 52
 * bytes: a length letter (A-Z for 1-26, a-z for 27-52) and the line's
 * bytes in git's base85, five characters for every four bytes (the last
 * group padded with zeros).  No "delta" hunks: they need git's delta
 * algorithm, and a literal is what git itself falls back to.  zlib does
 * the deflating, libcrypto the SHA-1. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "cli/diff_binary.h"
#include "util/cleanup.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* All of fd (at most max bytes: more is -EFBIG) into *ret (malloc'd, not
 * NUL-terminated), its length in *ret_len.  fd -1: empty. */
static int read_all(int fd, size_t max, unsigned char **ret, size_t *ret_len) {
    *ret = NULL;
    *ret_len = 0;
    if (fd < 0)
        return 0;
    size_t cap = 65536, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                free(buf);
                return -EFBIG;
            }
            unsigned char *n = realloc(buf, cap * 2);
            if (!n) {
                free(buf);
                return -ENOMEM;
            }
            buf = n;
            cap *= 2;
        }
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > max) {
        free(buf);
        return -EFBIG;
    }
    *ret = buf;
    *ret_len = len;
    return 0;
}

/* The blob name git gives these bytes, as 40 hex digits; zeros when the
 * side does not exist. */
static void blob_name(bool exists, const unsigned char *data, size_t len, char hex[41]) {
    if (!exists) {
        memset(hex, '0', 40);
        hex[40] = '\0';
        return;
    }
    char head[32];
    int hl = snprintf(head, sizeof head, "blob %zu", len);
    SHA_CTX c;
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1_Init(&c);
    SHA1_Update(&c, head, (size_t)hl + 1); /* with its NUL */
    SHA1_Update(&c, data, len);
    SHA1_Final(md, &c);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static const char base85[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/* data deflated: *ret (malloc'd), its length *ret_len. */
static int deflate_all(const unsigned char *data, size_t len, unsigned char **ret, uLongf *ret_len) {
    uLongf zlen = compressBound((uLong)len);
    unsigned char *z = malloc(zlen);
    if (!z)
        return -ENOMEM;
    if (compress2(z, &zlen, data ? data : (const unsigned char *)"", (uLong)len, Z_BEST_COMPRESSION) != Z_OK) {
        free(z);
        return -ENOMEM; /* zlib fails for want of memory alone */
    }
    *ret = z;
    *ret_len = zlen;
    return 0;
}

/* One "literal N" hunk: N bytes, deflated into z, in lines of base85. */
static void literal_hunk(FILE *out, size_t len, const unsigned char *z, size_t zlen) {
    fprintf(out, "literal %zu\n", len);
    for (size_t at = 0; at < zlen;) {
        size_t n = zlen - at < 52 ? zlen - at : 52;
        fputc(n <= 26 ? 'A' + (int)n - 1 : 'a' + (int)n - 27, out);
        for (size_t g = 0; g < n; g += 4) {
            uint32_t acc = 0;
            for (size_t k = 0; k < 4; k++)
                acc = acc << 8 | (g + k < n ? z[at + g + k] : 0);
            char five[5];
            for (int k = 4; k >= 0; k--) {
                five[k] = base85[acc % 85];
                acc /= 85;
            }
            fwrite(five, 1, sizeof five, out);
        }
        fputc('\n', out);
        at += n;
    }
    fputc('\n', out);
}

int diff_git_binary(FILE *out, int old_fd, int new_fd, size_t max) {
    _cleanup_free_ unsigned char *a = NULL;
    _cleanup_free_ unsigned char *b = NULL;
    _cleanup_free_ unsigned char *za = NULL;
    _cleanup_free_ unsigned char *zb = NULL;
    size_t alen, blen;
    uLongf zalen, zblen;
    int r = read_all(old_fd, max, &a, &alen);
    if (r < 0 || (r = read_all(new_fd, max, &b, &blen)) < 0 || (r = deflate_all(a, alen, &za, &zalen)) < 0 ||
        (r = deflate_all(b, blen, &zb, &zblen)) < 0)
        return r;
    char ha[41], hb[41];
    blob_name(old_fd >= 0, a, alen, ha);
    blob_name(new_fd >= 0, b, blen, hb);
    fprintf(out, "index %s..%s\nGIT binary patch\n", ha, hb);
    literal_hunk(out, blen, zb, zblen);
    literal_hunk(out, alen, za, zalen);
    return ferror(out) ? -EIO : 0;
}
