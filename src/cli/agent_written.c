/* agent_written.c: the directories agents wrote in with no review between.
 *
 * A workspace a stage was applied to, and a read-write grant of a sandboxed
 * run (written directly), hold what an agent chose: a link there (an
 * applied '.venv/bin' -> /srv/data) must not widen the next run's sandbox
 * when its PATH names it (run_sandbox.c, agent_dirs).  Apply and the run
 * record each such directory once in STATE/agent-written (absolute paths,
 * each ending in a NUL; appended, never rewritten), which the next run
 * reads in one go: reading every recorded run's Bundle instead cost a
 * millisecond per ten runs at every start.  A state directory without the
 * file (made before it existed) has it built from its runs' Bundles once.
 */
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_WRITTEN "agent-written"
#define AGENT_WRITTEN_MAX (16U << 20)

static int open_state(bool create) {
    _cleanup_free_ char *sd = NULL;
    int r = state_dir(&sd);
    if (r < 0)
        return r;
    if (create && (r = mkdir_p(sd, 0700)) < 0)
        return r;
    int fd = open(sd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Is path among the records of buf? */
static bool listed(const char *buf, size_t len, const char *path) {
    for (size_t off = 0; off < len;) {
        const char *e = memchr(buf + off, '\0', len - off);
        if (!e)
            break;
        if (strcmp(buf + off, path) == 0)
            return true;
        off = (size_t)(e - buf) + 1;
    }
    return false;
}

/* The record's bytes (*ret_buf NULL when there is none yet) and, when
 * ret_dir is given, the state directory (made when create). */
static int load(bool create, int *ret_dir, char **ret_buf, size_t *ret_len) {
    *ret_buf = NULL;
    *ret_len = 0;
    int d = open_state(create);
    if (d < 0)
        return d;
    int r = read_file_at(d, AGENT_WRITTEN, AGENT_WRITTEN_MAX, ret_buf, ret_len);
    if (r < 0 && r != -ENOENT) {
        close(d);
        return r;
    }
    if (ret_dir)
        *ret_dir = d;
    else
        close(d);
    return 0;
}

int agent_written_add(const char *path) {
    if (path && path[0] != '/')
        return -EINVAL;
    _cleanup_close_ int d = -1;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = load(true, &d, &buf, &len);
    if (r < 0)
        return r;
    if (buf && (!path || listed(buf, len, path)))
        return 0;
    _cleanup_close_ int fd = openat(d, AGENT_WRITTEN, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    size_t n = path ? strlen(path) + 1 : 0; /* one write: appends do not interleave */
    return !n || write(fd, path, n) == (ssize_t)n ? 0 : -EIO;
}

int agent_written_list(char ***ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = load(false, NULL, &buf, &len);
    if (r < 0 || !buf)
        return r < 0 ? r : -ENOENT;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\0';
    char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (size_t off = 0; off < len && k < n;) {
        const char *e = memchr(buf + off, '\0', len - off);
        if (!e)
            break;
        if (buf[off] == '/' && !(v[k++] = strdup(buf + off))) {
            for (size_t i = 0; i < k - 1; i++)
                free(v[i]);
            free(v);
            return -ENOMEM;
        }
        off = (size_t)(e - buf) + 1;
    }
    *ret = v;
    *ret_n = k;
    return 0;
}
