/* agent_written.c: records in the state directory that the next run reads
 * in one go: the directories agents wrote in with no review between
 * (STATE/agent-written), and the stages kept outside the state directory
 * (STATE/stages-elsewhere).
 *
 * A workspace a stage was applied to, and a read-write grant of a sandboxed
 * run (written directly), hold what an agent chose: a link there (an
 * applied '.venv/bin' -> /srv/data) must not widen the next run's sandbox
 * when its PATH names it (run_sandbox_runtime.c, agent_dirs).  Apply and the run
 * record each such directory once in STATE/agent-written (absolute paths,
 * each ending in a NUL; appended, never rewritten), which the next run
 * reads in one go: reading every recorded run's Bundle instead cost a
 * millisecond per ten runs at every start.
 *
 * Invariant: once the record exists, it holds every such directory of the
 * runs recorded in the state directory.  A state directory without it
 * (made before it existed) has it built from its runs' Bundles before
 * anything is appended or read: whoever finds it missing first (an apply,
 * a run with a grant) would otherwise make it with its own directory alone,
 * and every earlier one would be forgotten for good.  The built record
 * takes its name only when there is none (linkat), so two processes that
 * build at once lose nothing: the second appends to the first's.  When the
 * record cannot be made or read (an unwritable state directory), list
 * answers from the Bundles.
 *
 * The stages a user keeps elsewhere (`--stage DIR`, `fork ... DIR`) hold
 * what agents wrote; a later sandboxed run must not show them to its
 * command when its HOME or workspace holds them (run_sandbox_home.c), as it
 * does not show the state directory.  The same record shape and rules.
 */
#include "cli/cli.h"
#include "cli/runs.h"
#include "evidence/runstore.h"
#include "policy/policy.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#define RECORD_MAX (16U << 20)

struct paths;
/* A record: its file in STATE, and what a recorded run's Bundle adds. */
struct record {
    const char *name;
    int (*from_run)(struct paths *p, const json_t *bundle);
};

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

/* A growing NUL-separated list of distinct absolute paths. */
struct paths {
    char *buf; /* owned */
    size_t len, cap;
};

static int paths_add(struct paths *p, const char *d) {
    if (!d || d[0] != '/' || (p->buf && listed(p->buf, p->len, d)))
        return 0;
    size_t n = strlen(d) + 1;
    if (n > RECORD_MAX - p->len)
        return -EFBIG;
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b)
            return -ENOMEM;
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, d, n);
    p->len += n;
    return 0;
}

/* A recorded run's directories: its workspace, when what its command wrote
 * there may have been applied (not while its stage is still to review
 * (sealed), being written or cut short), and its read-write grants,
 * written directly. */
static int add_run(struct paths *p, const json_t *b) {
    const char *ws = json_string_value(json_object_get(b, "workspace"));
    const json_t *stage = json_object_get(b, "stage");
    const char *st = json_is_object(stage) ? runs_stage_state(b) : NULL;
    int r = 0;
    if (ws && st && strcmp(st, "sealed") != 0 && strcmp(st, "created") != 0 && strcmp(st, "running") != 0 &&
        strcmp(st, "interrupted") != 0)
        r = paths_add(p, ws);
    const json_t *rules = json_object_get(
        json_object_get(json_object_get(json_object_get(b, "dimensions"), "host_writes"), "evidence"), "access_rules");
    size_t i;
    const json_t *rule;
    json_array_foreach(rules, i, rule) {
        const char *kind = json_string_value(json_object_get(rule, "kind"));
        if (r >= 0 && kind && strcmp(kind, access_kind_name(ACCESS_RW)) == 0)
            r = paths_add(p, json_string_value(json_object_get(rule, "path")));
    }
    return r;
}

/* A recorded run's stage, when it is not in the state directory. */
/* Is path in the state directory (by its name or where it leads), which
 * is hidden as a whole?  -errno when there is no state directory. */
static int in_state_dir(const char *path) {
    _cleanup_free_ char *sd = NULL;
    int r = state_dir(&sd);
    if (r < 0)
        return r;
    _cleanup_free_ char *real = realpath(sd, NULL);
    return path_within(path, sd) || (real && path_within(path, real));
}

static int add_stage(struct paths *p, const json_t *b) {
    const char *st = json_string_value(json_object_get(json_object_get(b, "stage"), "path"));
    return st && in_state_dir(st) == 0 ? paths_add(p, st) : 0;
}

static const struct record agent_written = {"agent-written", add_run};
static const struct record stages_elsewhere = {"stages-elsewhere", add_stage};

/* The record's entries of every run recorded in the state directory, from
 * their Bundles (none when there is no runs directory). */
static int from_bundles(const struct record *k, struct paths *p) {
    char **ids = NULL;
    size_t n = 0;
    if (runs_list_ids(&ids, &n) < 0)
        return 0;
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i++) {
        json_t *b = NULL;
        if (runs_load_bundle(ids[i], &b) >= 0)
            r = k->from_run(p, b);
        json_decref(b);
    }
    runs_free_ids(ids);
    return r;
}

/* Make the record at d from the Bundles when there is none: written under
 * a temporary name, then linked to its own only if that is still free. */
static int build(const struct record *k, int d) {
    _cleanup_free_ char *buf = NULL;
    struct paths p = {0};
    int r = from_bundles(k, &p);
    buf = p.buf;
    if (r < 0)
        return r;
    char tmp[64];
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    snprintf(tmp, sizeof tmp, ".%s.%08" PRIx32 ".tmp", k->name, rnd);
    _cleanup_close_ int fd = openat(d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    r = write_all(fd, buf, p.len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && linkat(d, tmp, d, k->name, 0) < 0 && errno != EEXIST)
        r = -errno;
    unlinkat(d, tmp, 0);
    return r;
}

/* The state directory (made when create) and the record's bytes, built
 * first when missing. */
static int load(const struct record *k, bool create, int *ret_dir, char **ret_buf, size_t *ret_len) {
    *ret_buf = NULL;
    *ret_len = 0;
    _cleanup_close_ int d = open_state(create);
    if (d < 0)
        return d;
    int r = read_file_at(d, k->name, RECORD_MAX, ret_buf, ret_len);
    if (r == -ENOENT && (r = build(k, d)) >= 0)
        r = read_file_at(d, k->name, RECORD_MAX, ret_buf, ret_len);
    if (r < 0)
        return r;
    *ret_dir = TAKE_FD(d);
    return 0;
}

static int record_add(const struct record *k, const char *path) {
    if (!path || path[0] != '/')
        return -EINVAL;
    _cleanup_close_ int d = -1;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = load(k, true, &d, &buf, &len);
    if (r < 0)
        return r;
    if (listed(buf, len, path))
        return 0;
    _cleanup_close_ int fd = openat(d, k->name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* One write: appends do not interleave.  After a torn one (a full
     * disk), a NUL first ends the cut record, so that this one is whole. */
    bool torn = len > 0 && buf[len - 1] != '\0';
    size_t n = strlen(path) + 1;
    _cleanup_free_ char *rec = malloc(n + 1);
    if (!rec)
        return -ENOMEM;
    rec[0] = '\0';
    memcpy(rec + torn, path, n);
    return write(fd, rec, n + torn) == (ssize_t)(n + torn) ? 0 : -EIO;
}

static int split(const char *buf, size_t len, char ***ret, size_t *ret_n) {
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

static int record_list(const struct record *k, char ***ret, size_t *ret_n) {
    *ret = NULL;
    *ret_n = 0;
    _cleanup_close_ int d = -1;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if (load(k, false, &d, &buf, &len) >= 0)
        return split(buf, len, ret, ret_n);
    /* no record to be had: the Bundles, read now */
    struct paths p = {0};
    int r = from_bundles(k, &p);
    _cleanup_free_ char *built = p.buf;
    return r < 0 && r != -EFBIG ? r : split(built, p.len, ret, ret_n);
}

int agent_written_add(const char *path) {
    return record_add(&agent_written, path);
}

int agent_written_list(char ***ret, size_t *ret_n) {
    return record_list(&agent_written, ret, ret_n);
}

int stages_elsewhere_add(const char *path) {
    int in = path ? in_state_dir(path) : -EINVAL;
    if (in != 0)
        return in < 0 ? in : 0; /* the state directory is hidden as a whole */
    return record_add(&stages_elsewhere, path);
}

int stages_elsewhere_list(char ***ret, size_t *ret_n) {
    return record_list(&stages_elsewhere, ret, ret_n);
}
