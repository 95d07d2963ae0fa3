/* fuzz_xattr: user xattrs of an upper object as review and apply read
 * them back (lc_xattrs_read from the upper and as a workspace object,
 * pv_user_xattrs_sha256, the opaque marker).  Input: NAME=VALUE records
 * separated by NUL bytes, set as user.NAME on a scratch file (what the
 * kernel accepts of them). */
#include "fuzz-common.h"

#include <sys/xattr.h>

#include "lifecycle/lc-internal.h"
#include "util/sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int dir_fd = -1;
    if (dir_fd < 0 && (dir_fd = open(fuzz_scratch(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        abort();
    unlinkat(dir_fd, "x", 0);
    int fd = openat(dir_fd, "x", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    const uint8_t *p = data, *end = data + size;
    while (p < end) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        size_t len = z ? (size_t)(z - p) : (size_t)(end - p);
        const uint8_t *eq = memchr(p, '=', len);
        if (eq && eq > p && (size_t)(eq - p) < 200) {
            char name[256];
            int m = snprintf(name, sizeof name, "user.%.*s", (int)(eq - p), (const char *)p);
            if (m > 0 && (size_t)m < sizeof name)
                (void)fsetxattr(fd, name, eq + 1, len - (size_t)(eq - p) - 1, 0);
        }
        p += len + 1;
    }
    struct lc_xattrs a, b;
    if (lc_xattrs_read(fd, true, &a) == 0) {
        if (lc_xattrs_read(fd, false, &b) == 0) {
            (void)lc_xattrs_equal(&a, &b);
            lc_xattrs_free(&b);
        }
        lc_xattrs_free(&a);
    }
    unsigned char sha[32];
    (void)pv_user_xattrs_sha256(fd, sha);
    close(fd);
    return 0;
}
