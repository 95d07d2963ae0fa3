/* sysdeny: run a command with some system calls failing, to force
 * pvisor's degraded paths in tests (the shim STYLE.md asks for).
 *
 * Usage: sysdeny ERRNO SYSCALL[,SYSCALL...] -- COMMAND [ARGS...]
 * Installs a seccomp filter (inherited by every descendant) that makes the
 * named system calls fail with ERRNO (a number, e.g. 38 for ENOSYS), then
 * execs COMMAND.  SYSCALL@N fails that call only when its first argument
 * is N (seccomp@2: SECCOMP_GET_ACTION_AVAIL, as on a kernel before 4.14). */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: sysdeny ERRNO SYSCALL[,SYSCALL...] -- COMMAND [ARGS...]\n");
        return 64;
    }
    int err = atoi(argv[1]);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return 70;
    char *list = strdup(argv[2]);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        char *at = strchr(name, '@');
        if (at)
            *at++ = '\0';
        int nr = seccomp_syscall_resolve_name(name);
        int r = nr == __NR_SCMP_ERROR ? -EINVAL
                : at                  ? seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)err), nr, 1,
                                                         SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)strtoull(at, NULL, 0), 0))
                                      : seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)err), nr, 0);
        if (r < 0) {
            fprintf(stderr, "sysdeny: cannot filter '%s'\n", name);
            return 70;
        }
    }
    free(list);
    if (seccomp_load(ctx) < 0) {
        fprintf(stderr, "sysdeny: seccomp_load failed\n");
        return 70;
    }
    seccomp_release(ctx);
    execvp(argv[4], argv + 4);
    perror("sysdeny: exec");
    return 127;
}
