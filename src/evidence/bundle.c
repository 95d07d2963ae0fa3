/* bundle.c: see bundle.h and docs/bundle.md for the schema. */
#include "evidence/bundle.h"
#include "config.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUNDLE_MAX_BYTES (16u << 20)

static json_t *json_string_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

static json_t *time_json(const struct timespec *ts) {
    char buf[32];
    format_time_utc(ts, buf);
    return json_string(buf);
}

/* s as a JSON string, or null and its bytes in hex in *hex when it is not
 * UTF-8 (JSON cannot carry it): never dropped.  NULL when out of memory. */
static json_t *string_or_hex(const char *s, json_t **hex) {
    json_t *j = json_string(s);
    if (j)
        return j;
    char *h = hex_encode(s);
    *hex = h ? json_string(h) : NULL;
    free(h);
    return *hex ? json_null() : NULL;
}

json_t *bundle_new(const char *run_id, const struct run_options *o, const struct policy *p, const char *cwd,
                   const char *workspace, const struct timespec *started) {
    /* An argument that is not UTF-8 is null in command, and its bytes are
     * in command_hex at the same index (given only then). */
    json_t *cmd = json_array(), *cmd_hex = NULL;
    bool any_hex = false;
    for (int i = 0; cmd && i < o->cmd_argc; i++) {
        json_t *hex = NULL, *v = string_or_hex(o->cmd_argv[i], &hex);
        if (hex && !any_hex) {
            any_hex = true;
            cmd_hex = json_array();
            for (int k = 0; cmd_hex && k < i; k++)
                json_array_append_new(cmd_hex, json_null());
        }
        if (json_array_append_new(cmd, v) < 0 ||
            (any_hex && json_array_append_new(cmd_hex, hex ? hex : json_null()) < 0)) {
            json_decref(cmd);
            json_decref(cmd_hex);
            return NULL;
        }
    }
    json_t *cwd_hex = NULL, *cwd_j = cwd ? string_or_hex(cwd, &cwd_hex) : json_null();
    /* only a plain run's may be other than UTF-8 (cmd_run.c): null, its
     * bytes in cwd_hex (the current directory, which it is) */
    json_t *ws_j = workspace ? json_string(workspace) : NULL;
    if (!ws_j)
        ws_j = json_null();

    const struct run_limits *l = &o->limits;
    json_t *limits = policy_has_limits(l) || policy_has_tmpfs_sizes(l)
                         ? json_pack("{s:o, s:o, s:o, s:o, s:o}", "mem_bytes",
                                     l->mem_bytes ? json_integer((json_int_t)l->mem_bytes) : json_null(), "pids",
                                     l->pids ? json_integer((json_int_t)l->pids) : json_null(), "cpu_seconds",
                                     l->cpu_s ? json_integer((json_int_t)l->cpu_s) : json_null(), "tmp_bytes",
                                     l->tmp_bytes ? json_integer((json_int_t)l->tmp_bytes) : json_null(), "shm_bytes",
                                     l->shm_bytes ? json_integer((json_int_t)l->shm_bytes) : json_null())
                         : json_null();
    json_t *access = json_array(), *pass_env = json_array(), *allow_net = json_array();
    for (int i = 0; allow_net && i < o->n_allow_net; i++) {
        char r[EGRESS_HOST_MAX + 16];
        egress_rule_format(&o->allow_net[i], r, sizeof r);
        json_array_append_new(allow_net, json_string(r));
    }
    for (int i = 0; access && i < o->n_access; i++)
        json_array_append_new(
            access, json_pack("{s:s, s:s}", "kind", access_kind_name(o->access[i].kind), "path", o->access[i].path));
    for (int i = 0; pass_env && i < o->n_pass_env; i++)
        json_array_append_new(pass_env, json_string(o->pass_env[i]));
    json_t *req = json_pack(
        "{s:b, s:b, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "safe", o->safe, "strict", o->strict,
        "filesystem", filesystem_name(o->filesystem), "executor", executor_name(o->executor), "stage",
        json_string_or_null(o->stage), "stage_durability", durability_name(o->durability), "stage_max_bytes",
        o->stage_max_bytes ? json_integer((json_int_t)o->stage_max_bytes) : json_null(), "stage_max_inodes",
        o->stage_max_inodes ? json_integer((json_int_t)o->stage_max_inodes) : json_null(), "timeout_seconds",
        o->timeout_ms ? json_integer((json_int_t)(o->timeout_ms / 1000)) : json_null(), "limits", limits, "access",
        access, "pass_env", pass_env, "network",
        o->safe ? json_string(o->network_loopback ? "loopback" : "none") : json_null(), "allow_net", allow_net);

    json_t *dims = json_object();
    for (unsigned d = 0; dims && d < _DIM_MAX; d++)
        json_object_set_new(dims, dimension_name(d),
                            json_pack("{s:s, s:s, s:s, s:{}, s:[]}", "requested", level_name(p->requested[d]),
                                      "effective", level_name(LEVEL_UNENFORCED), "mechanism", "none", "evidence",
                                      "notes"));

    json_t *b = json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:{s:i, s:i, s:i}, s:o, s:{s:s, s:s, s:s}, s:o, s:o, s:[], s:o, "
        "s:o, s:o, s:o}",
        "schema", BUNDLE_SCHEMA, "pvisor_version", PVISOR_VERSION, "run_id", run_id, "state", "starting", "command",
        cmd, "cwd", cwd_j, "workspace", ws_j, "user", "uid", (int)getuid(), "gid", (int)getgid(), "supervisor_pid",
        (int)getpid(), "requested_policy", req, "executor", "requested", executor_name(o->executor), "effective",
        "host", "mechanism", "none", "dimensions", dims, "kernel_features", json_object(), "warnings", "started_at",
        time_json(started), "ended_at", json_null(), "exit", json_null(), "stage", json_null());
    if (!b) {
        json_decref(cmd_hex);
        json_decref(cwd_hex);
        return NULL;
    }
    /* json_object_set_new() takes the value also when it fails */
    int bad = cmd_hex ? json_object_set_new(b, "command_hex", cmd_hex) : 0;
    bad |= cwd_hex ? json_object_set_new(b, "cwd_hex", cwd_hex) : 0;
    if (bad) {
        json_decref(b);
        return NULL;
    }
    return b;
}

int bundle_set_dimension(json_t *b, enum dimension d, enum level effective, const char *mechanism, json_t *evidence,
                         const char *note) {
    json_t *dim = json_object_get(json_object_get(b, "dimensions"), dimension_name(d));
    if (!dim) {
        json_decref(evidence);
        return -EINVAL;
    }
    int r = 0;
    r |= json_object_set_new(dim, "effective", json_string(level_name(effective)));
    r |= json_object_set_new(dim, "mechanism", json_string(mechanism));
    if (evidence)
        r |= json_object_set_new(dim, "evidence", evidence);
    /* A new mechanism replaces the old one's notes. */
    r |= json_object_set_new(dim, "notes", note ? json_pack("[s]", note) : json_array());
    return r ? -ENOMEM : 0;
}

int bundle_set_executor(json_t *b, const char *effective, const char *mechanism) {
    json_t *e = json_object_get(b, "executor");
    if (json_object_set_new(e, "effective", json_string(effective)) < 0 ||
        json_object_set_new(e, "mechanism", json_string(mechanism)) < 0)
        return -ENOMEM;
    return 0;
}

int bundle_set_string(json_t *b, const char *key, const char *value) {
    return json_object_set_new(b, key, json_string_or_null(value)) < 0 ? -ENOMEM : 0;
}

int bundle_set_json(json_t *b, const char *key, json_t *value) {
    return json_object_set_new(b, key, value) < 0 ? -ENOMEM : 0;
}

int bundle_add_warning(json_t *b, const char *msg) {
    json_t *s = json_string(msg);
    if (!s && msg) { /* not UTF-8 (a name's bytes), which JSON cannot carry: escaped, never dropped */
        char *e = term_escape(msg);
        s = e ? json_string(e) : NULL;
        free(e);
    }
    return json_array_append_new(json_object_get(b, "warnings"), s) < 0 ? -ENOMEM : 0;
}

int bundle_set_exit(json_t *b, int wait_status, int pvisor_status, const struct timespec *ended) {
    json_t *e;
    if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        const char *abbrev = sigabbrev_np(sig);
        e = json_pack("{s:n, s:i, s:s, s:b, s:i}", "status", "signal", sig, "signal_name", abbrev ? abbrev : "?",
                      "core_dumped", WCOREDUMP(wait_status) ? 1 : 0, "pvisor_exit_status", pvisor_status);
    } else {
        e = json_pack("{s:i, s:n, s:n, s:b, s:i}", "status", WEXITSTATUS(wait_status), "signal", "signal_name",
                      "core_dumped", 0, "pvisor_exit_status", pvisor_status);
    }
    if (!e)
        return -ENOMEM;
    if (json_object_set_new(b, "exit", e) < 0 || json_object_set_new(b, "ended_at", time_json(ended)) < 0)
        return -ENOMEM;
    return 0;
}

/* The Bundle that says how the run ended takes room when the run ends (a
 * new file, renamed over the old), and other programs may have filled the
 * state directory's file system by then: the stage was sealed (its marker
 * has room kept for it: stage.c) but the Bundle stayed "running", so
 * status and list showed a sealed stage of an interrupted run, and the
 * review lost how the command ended and the writes the stage refused
 * (tested).  So while a run's Bundle says it has not ended, BUNDLE_ROOM
 * holds that Bundle's size and BUNDLE_ROOM_EXTRA more (what the end adds:
 * the exit, the evidence, the DNS names and egress destinations, each
 * bounded); the Bundle of the run's end is written, and should that fail
 * for room, written again once BUNDLE_ROOM is removed, which it is once
 * that Bundle is in place.  Best effort: without it the Bundle is written
 * as any file. */
#define BUNDLE_ROOM "bundle.room"
#define BUNDLE_ROOM_EXTRA (256u << 10)

static bool bundle_ended(const json_t *b) {
    const char *state = json_string_value(json_object_get(b, "state"));
    return !state || (strcmp(state, "starting") != 0 && strcmp(state, "running") != 0);
}

static void keep_room(int run_dirfd, size_t len) {
    _cleanup_close_ int fd =
        openat(run_dirfd, BUNDLE_ROOM, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0)
        return; /* kept already, or no room for it either */
    if (posix_fallocate(fd, 0, (off_t)(len + BUNDLE_ROOM_EXTRA)) != 0)
        (void)unlinkat(run_dirfd, BUNDLE_ROOM, 0);
}

int bundle_write(int run_dirfd, const json_t *b, bool durable) {
    _cleanup_free_ char *s = json_dumps(b, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (!s)
        return -ENOMEM;
    size_t len = strlen(s);
    s[len] = '\0';
    _cleanup_free_ char *withnl = malloc(len + 2);
    if (!withnl)
        return -ENOMEM;
    memcpy(withnl, s, len);
    withnl[len] = '\n';
    withnl[len + 1] = '\0';
    enum write_sync sync = durable ? WRITE_SYNC_FILE_AND_DIR : WRITE_NO_SYNC;
    int r = write_file_atomic_as(run_dirfd, BUNDLE_FILE, withnl, len + 1, 0600, sync);
    if (!bundle_ended(b)) {
        if (r == 0)
            keep_room(run_dirfd, len + 1);
        return r;
    }
    if ((r == -ENOSPC || r == -EDQUOT) && unlinkat(run_dirfd, BUNDLE_ROOM, 0) == 0)
        r = write_file_atomic_as(run_dirfd, BUNDLE_FILE, withnl, len + 1, 0600, sync);
    if (r == 0)
        (void)unlinkat(run_dirfd, BUNDLE_ROOM, 0);
    return r;
}

int bundle_read(int run_dirfd, json_t **ret_bundle) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_file_at(run_dirfd, BUNDLE_FILE, BUNDLE_MAX_BYTES, &buf, &len);
    if (r < 0)
        return r;
    json_error_t err;
    json_t *b = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!b)
        return -EPROTO;
    const char *schema = json_string_value(json_object_get(b, "schema"));
    if (!json_is_object(b) || !schema || strcmp(schema, BUNDLE_SCHEMA) != 0) {
        json_decref(b);
        return -EPROTO;
    }
    *ret_bundle = b;
    return 0;
}
