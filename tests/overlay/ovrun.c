/* ovrun: test driver for the WorkspaceOverlay.
 *
 *   ovrun [--max-bytes N] [--max-inodes N] [--strict] [--run-id ID] [--stats]
 *         [--lower-cache-ms N|-1]
 *         LOWER STAGE -- CMD [ARGS...]
 *   ovrun --probe STAGE        (prints the stage state)
 *
 * Enters a private mount namespace (root: CLONE_NEWNS; otherwise
 * CLONE_NEWUSER|CLONE_NEWNS with a one-ID uid/gid map), makes / rprivate,
 * opens LOWER, opens/creates STAGE for a run, mounts the overlay on LOWER's
 * own path, runs CMD with cwd = LOWER (chdir after the mount), then unmounts,
 * seals the stage and exits with CMD's status (128+signal if killed).
 * Exit 125 means ovrun itself failed (message on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "overlay/overlay.h"
#include "stage/stage.h"

#define FAIL 125

static int write_file(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, s, strlen(s));
    int r = (n == (ssize_t)strlen(s)) ? 0 : -errno;
    close(fd);
    return r;
}

static int enter_namespace(void) {
    if (geteuid() == 0) {
        if (unshare(CLONE_NEWNS) < 0)
            return -errno;
    } else {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            return -errno;
        char map[64];
        int r = write_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT)
            return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if ((r = write_file("/proc/self/uid_map", map)) < 0)
            return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if ((r = write_file("/proc/self/gid_map", map)) < 0)
            return r;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    return 0;
}

static int parse_u64(const char *s, uint64_t *ret) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -EINVAL;
    *ret = v;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: ovrun [--max-bytes N] [--max-inodes N] [--strict] [--run-id ID] [--stats] "
                    "[--lower-cache-ms N|-1] LOWER STAGE -- CMD [ARGS...]\n");
}

int main(int argc, char **argv) {
    uint64_t max_bytes = 0, max_inodes = 0;
    enum stage_durability dur = STAGE_DURABILITY_CHECKPOINT;
    const char *run_id = "ovrun";
    bool stats = false;
    int lower_cache_ms = 0;
    if (argc == 3 && !strcmp(argv[1], "--probe")) {
        enum stage_state state;
        int pr = stage_probe_state(argv[2], &state);
        if (pr < 0) {
            fprintf(stderr, "ovrun: probe %s: %s\n", argv[2], strerror(-pr));
            return FAIL;
        }
        printf("%s\n", stage_state_name(state));
        return 0;
    }
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0 && argv[i][2]; i++) {
        if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
            if (parse_u64(argv[++i], &max_bytes) < 0)
                return usage(), FAIL;
        } else if (!strcmp(argv[i], "--max-inodes") && i + 1 < argc) {
            if (parse_u64(argv[++i], &max_inodes) < 0)
                return usage(), FAIL;
        } else if (!strcmp(argv[i], "--lower-cache-ms") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < -1 || v > 3600000)
                return usage(), FAIL;
            lower_cache_ms = (int)v;
        } else if (!strcmp(argv[i], "--strict")) {
            dur = STAGE_DURABILITY_STRICT;
        } else if (!strcmp(argv[i], "--run-id") && i + 1 < argc) {
            run_id = argv[++i];
        } else if (!strcmp(argv[i], "--stats")) {
            stats = true;
        } else {
            usage();
            return FAIL;
        }
    }
    if (argc - i < 4 || strcmp(argv[i + 2], "--") != 0) {
        usage();
        return FAIL;
    }
    const char *lower_arg = argv[i], *stage_path = argv[i + 1];
    char **cmd = &argv[i + 3];

    char lower[PATH_MAX];
    if (!realpath(lower_arg, lower)) {
        fprintf(stderr, "ovrun: %s: %s\n", lower_arg, strerror(errno));
        return FAIL;
    }
    int r = enter_namespace();
    if (r < 0) {
        fprintf(stderr, "ovrun: namespace setup: %s\n", strerror(-r));
        return FAIL;
    }
    /* Open the workspace before mounting over it. */
    int lower_fd = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lower_fd < 0) {
        fprintf(stderr, "ovrun: open %s: %s\n", lower, strerror(errno));
        return FAIL;
    }
    struct stage *st = NULL;
    r = stage_open_for_run(stage_path, lower, run_id, dur, &st);
    if (r < 0) {
        fprintf(stderr, "ovrun: stage %s: %s\n", stage_path, strerror(-r));
        return FAIL;
    }
    struct overlay_params p = {
        .lower_fd = lower_fd,
        .stage = st,
        .mountpoint = lower,
        .max_bytes = max_bytes,
        .max_inodes = max_inodes,
        .lower_cache_ms = lower_cache_ms,
    };
    struct overlay *ov = NULL;
    r = overlay_start(&p, &ov);
    if (r < 0) {
        fprintf(stderr, "ovrun: overlay: %s\n", strerror(-r));
        stage_free(st);
        return FAIL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "ovrun: fork: %s\n", strerror(errno));
        overlay_stop(ov);
        stage_free(st);
        return FAIL;
    }
    if (pid == 0) {
        /* threaded parent: only async-signal-safe calls until exec */
        if (chdir(lower) < 0)
            _exit(FAIL);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = FAIL << 8;
            break;
        }
    }
    struct overlay_stats s;
    r = overlay_stop_stats(ov, &s);
    if (stats)
        fprintf(stderr,
                "ovrun: copy_ups=%" PRIu64 " whiteouts=%" PRIu64 " upper_bytes=%" PRIu64 " upper_inodes=%" PRIu64 "\n",
                s.copy_ups, s.whiteouts, s.upper_bytes, s.upper_inodes);
    if (r < 0)
        fprintf(stderr, "ovrun: unmount: %s\n", strerror(-r));
    r = stage_seal(st, true);
    stage_free(st);
    close(lower_fd);
    if (r < 0) {
        fprintf(stderr, "ovrun: seal: %s\n", strerror(-r));
        return FAIL;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return FAIL;
}
