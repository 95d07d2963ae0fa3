/* cleanup.h: scope-bound ownership for locals (systemd style).
 *
 * An owning local is declared with one of the _cleanup_*_ attributes and is
 * released when it leaves scope; TAKE_PTR/TAKE_FD hand ownership on and leave
 * the local empty so the destructor becomes a no-op.  Every destructor here
 * accepts the "empty" value (NULL / -1).
 */
#ifndef PVISOR_UTIL_CLEANUP_H
#define PVISOR_UTIL_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p) {
    free(*(void **)p);
}
static inline void closep(int *fd) {
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
static inline void fclosep(FILE **f) {
    if (*f)
        fclose(*f);
}
static inline void closedirp(DIR **d) {
    if (*d)
        closedir(*d);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

#define TAKE_PTR(p)                                                                                                    \
    ({                                                                                                                 \
        __typeof__(p) _tp = (p);                                                                                       \
        (p) = NULL;                                                                                                    \
        _tp;                                                                                                           \
    })
#define TAKE_FD(fd)                                                                                                    \
    ({                                                                                                                 \
        int _tf = (fd);                                                                                                \
        (fd) = -1;                                                                                                     \
        _tf;                                                                                                           \
    })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
