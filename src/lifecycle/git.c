/* git.c: what the lifecycle asks the workspace's git (docs/lifecycle.md):
 * where its hooks run from (review), and whether a git index the host
 * rewrote since the run holds the same entries (apply's conflict check).
 * git runs as the user, on the workspace's own repository (never the
 * stage's), with a bound on its time: a FIFO for a file it reads, or a
 * file system that does not answer, must not hang a review or an apply. */
#include "lifecycle/lc-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#define GIT_TIMEOUT_MS 5000

int lc_git_run(const char *cwd, const char *const *argv, const char *index_file,
               int (*sink)(void *ctx, const char *buf, size_t n), void *ctx) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd[0]);
        close(fd[1]);
        return -e;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(fd[1], STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0 ||
            dup2(null, STDIN_FILENO) < 0 || (cwd && chdir(cwd) < 0))
            _exit(127);
        /* the workspace's own repository, found from it (or named by
         * argv), whatever the user's shell points git at
         * (GIT_DIR=~/dotfiles.git) */
        static const char *const repo_env[] = {"GIT_DIR",
                                               "GIT_WORK_TREE",
                                               "GIT_COMMON_DIR",
                                               "GIT_INDEX_FILE",
                                               "GIT_OBJECT_DIRECTORY",
                                               "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                                               "GIT_CEILING_DIRECTORIES",
                                               "GIT_NAMESPACE"};
        for (size_t i = 0; i < ARRAY_SIZE(repo_env); i++)
            unsetenv(repo_env[i]);
        if (index_file && setenv("GIT_INDEX_FILE", index_file, 1) < 0)
            _exit(127);
        execvp("git", (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    char buf[8192];
    bool timed_out = false;
    int r = 0;
    int64_t deadline = monotonic_ms() + GIT_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - monotonic_ms();
        struct pollfd pfd = {.fd = fd[0], .events = POLLIN};
        int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t n = read(fd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (r == 0 && (r = sink(ctx, buf, (size_t)n)) < 0)
            break;
    }
    close(fd[0]);
    if (timed_out || r < 0)
        kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    if (timed_out)
        return -ETIMEDOUT;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int sink_digest(void *ctx, const char *buf, size_t n) {
    return pv_sha256_update(ctx, buf, n) < 0 ? -EIO : 0;
}

/* The SHA-256 of 'git ls-files --stage -z' of the git directory git_dir
 * (absolute) read with the index file index (absolute): its entries'
 * modes, object ids, stages and names, without the stat data git
 * refreshes.  0, or -errno (git failed or is missing). */
static int index_entries_digest(const char *git_dir, const char *index, unsigned char ret[32]) {
    _cleanup_free_ char *dir_opt = NULL;
    if (asprintf(&dir_opt, "--git-dir=%s", git_dir) < 0)
        return -ENOMEM;
    /* core.fsmonitor: ls-files refreshes nothing, but git may still start
     * the user's monitor; safe.directory: the workspace may be another
     * user's (root applying into a checkout of theirs) */
    const char *const argv[] = {"git",     dir_opt, "-c", "core.fsmonitor=false", "-c", "safe.directory=*", "ls-files",
                                "--stage", "-z",    NULL};
    struct pv_sha256 *md = NULL;
    int r = pv_sha256_begin(&md);
    if (r < 0)
        return r;
    r = lc_git_run("/", argv, index, sink_digest, md);
    if (r == 0)
        r = pv_sha256_end(md, ret) < 0 ? -EIO : 0;
    else if (r > 0)
        r = -EPROTO;
    pv_sha256_free(md);
    return r;
}

bool lc_git_index_refreshed(const struct lc_changeset *cs, int stage_dir_fd, const char *path,
                            const unsigned char pre_sha[32]) {
    if (!path_is_git_index(path))
        return false;
    char hex[65];
    lc_hex(pre_sha, hex);
    _cleanup_free_ char *rel = path_join(LC_PREIMAGES, hex);
    /* the copy the overlay kept of the index as the run first changed it,
     * checked against the journal's digest (a copy cut short by a crash
     * is not it) */
    _cleanup_close_ int fd = rel ? openat(stage_dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
    unsigned char kept[32], now[32], before[32];
    if (fd < 0 || lc_sha256_fd(fd, kept) < 0 || memcmp(kept, pre_sha, 32) != 0)
        return false;
    _cleanup_free_ char *copy = path_join(cs->stage_path, rel);
    _cleanup_free_ char *cur = path_join(cs->workspace, path);
    _cleanup_free_ char *git_dir = cur ? strdup(cur) : NULL;
    char *slash = git_dir ? strrchr(git_dir, '/') : NULL;
    if (!copy || !slash)
        return false;
    *slash = '\0';
    return index_entries_digest(git_dir, copy, before) == 0 && index_entries_digest(git_dir, cur, now) == 0 &&
           memcmp(before, now, 32) == 0;
}
