/* tap.h: minimal TAP producer for unit tests (header-only). */
#ifndef PVISOR_TESTS_TAP_H
#define PVISOR_TESTS_TAP_H
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                                                  \
    do {                                                                                                               \
        tap_n++;                                                                                                       \
        int _c = !!(cond);                                                                                             \
        if (!_c)                                                                                                       \
            tap_failed++;                                                                                              \
        printf("%sok %d - ", _c ? "" : "not ", tap_n);                                                                 \
        printf(__VA_ARGS__);                                                                                           \
        printf("\n");                                                                                                  \
        if (!_c)                                                                                                       \
            printf("#   at %s:%d: %s\n", __FILE__, __LINE__, #cond);                                                   \
    } while (0)

#define is_str(a, b, ...) ok((a) && (b) && strcmp((a), (b)) == 0, __VA_ARGS__)

static inline int tap_done(void) {
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
#endif
