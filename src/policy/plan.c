/* plan.c: see plan.h.  Pure: no system calls. */
#include "policy/plan.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *const plan_dev_nodes[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                      "/dev/urandom", "/dev/tty",  NULL};

static const char *const kind_names[] = {
    [PLAN_BIND_RO] = "ro",
    [PLAN_BIND_RW] = "rw",
    [PLAN_TMPFS] = "tmpfs",
    [PLAN_HIDE] = "hide",
};

const char *plan_mount_kind_name(enum plan_mount_kind k) {
    return (unsigned)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "invalid";
}

bool plan_path_ok(const char *path) {
    if (!path || path[0] != '/' || strlen(path) >= 4096)
        return false;
    if (strcmp(path, "/") == 0)
        return true;
    const char *p = path + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

int plan_add_mount(struct launch_plan *p, enum plan_mount_kind kind, const char *path, uint64_t size) {
    if (!plan_path_ok(path) || (unsigned)kind > PLAN_HIDE)
        return -EINVAL;
    if (p->n_mounts >= PLAN_MAX_MOUNTS)
        return -E2BIG;
    struct plan_mount *m = realloc(p->mounts, (p->n_mounts + 1) * sizeof *m);
    if (!m)
        return -ENOMEM;
    p->mounts = m;
    char *c = strdup(path);
    if (!c)
        return -ENOMEM;
    m[p->n_mounts++] = (struct plan_mount){.kind = kind, .path = c, .size = size, .fd = -1};
    return 0;
}

int plan_add_mount_from(struct launch_plan *p, enum plan_mount_kind kind, const char *source, const char *path) {
    if (!plan_path_ok(source) || (kind != PLAN_BIND_RO && kind != PLAN_BIND_RW))
        return -EINVAL;
    int r = plan_add_mount(p, kind, path, 0);
    if (r < 0)
        return r;
    if (!(p->mounts[p->n_mounts - 1].source = strdup(source)))
        return -ENOMEM;
    return 0;
}

/* A string of the host (an argument, an environment entry, a path) as
 * JSON: the string when it is UTF-8, else {"hex": its bytes}, as JSON
 * cannot carry them and json_string() refuses them: nothing is lost or
 * dropped on the way to the launcher.  NULL only when out of memory. */
static json_t *bytes_json(const char *s) {
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    _cleanup_free_ char *hex = hex_encode(s);
    return hex ? json_pack("{s:s}", "hex", hex) : NULL;
}

/* The other way: a malloc'd copy of what bytes_json() made of a string. */
static int bytes_from_json(const json_t *j, char **ret) {
    if (json_is_string(j)) {
        *ret = strdup(json_string_value(j));
        return *ret ? 0 : -ENOMEM;
    }
    const char *hex = json_string_value(json_object_get(j, "hex"));
    if (!hex || json_object_size(j) != 1)
        return -EINVAL;
    return hex_decode(hex, ret);
}

static json_t *strv_to_json(char **v) {
    json_t *a = json_array();
    for (; a && v && *v; v++)
        if (json_array_append_new(a, bytes_json(*v)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *plan_to_json(const struct launch_plan *p) {
    json_t *mounts = json_array();
    for (size_t i = 0; mounts && i < p->n_mounts; i++)
        if (json_array_append_new(mounts,
                                  json_pack("{s:s, s:o, s:o, s:I, s:i, s:b, s:b}", "kind",
                                            plan_mount_kind_name(p->mounts[i].kind), "path",
                                            bytes_json(p->mounts[i].path), "source", bytes_json(p->mounts[i].source),
                                            "size", (json_int_t)p->mounts[i].size, "fd", p->mounts[i].fd, "optional",
                                            p->mounts[i].optional, "scan_sockets", p->mounts[i].scan_sockets)) < 0) {
            json_decref(mounts);
            return NULL;
        }
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:s, s:I, s:I, s:b, s:b, s:I, s:b, s:b, s:b, s:b, s:b, s:I, s:I, s:{s:I, s:I, s:I, s:I, "
        "s:I}, s:o}",
        "argv", strv_to_json(p->argv), "exec_path", bytes_json(p->exec_path), "env", strv_to_json(p->envp), "cwd",
        bytes_json(p->cwd), "hostname", p->hostname, "uid", (json_int_t)p->uid, "gid", (json_int_t)p->gid,
        "unshare_net", p->unshare_net, "loopback_tcp", p->loopback_tcp, "proxy_port", (json_int_t)p->proxy_port,
        "dns_stub", p->dns_stub, "landlock", p->landlock, "seccomp", p->seccomp, "tty", p->tty, "tty_input",
        p->tty_input, "tmp_size", (json_int_t)p->tmp_size, "shm_size", (json_int_t)p->shm_size, "rlimits", "nofile",
        (json_int_t)p->rlimit_nofile, "fsize", (json_int_t)p->rlimit_fsize, "nproc", (json_int_t)p->rlimit_nproc, "as",
        (json_int_t)p->rlimit_as, "cpu", (json_int_t)p->rlimit_cpu, "mounts", mounts);
}

static int strv_from_json(const json_t *a, size_t max, bool need_one, char ***ret) {
    if (!json_is_array(a) || json_array_size(a) > max || (need_one && json_array_size(a) == 0))
        return -EINVAL;
    char **v = calloc(json_array_size(a) + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        int r = bytes_from_json(e, &v[i]);
        if (r < 0) {
            for (size_t k = 0; k < i; k++)
                free(v[k]);
            free(v);
            return r;
        }
    }
    *ret = v;
    return 0;
}

static void strv_free(char **v) {
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

void plan_free(struct launch_plan *p) {
    if (!p)
        return;
    strv_free(p->argv);
    strv_free(p->envp);
    free(p->exec_path);
    free(p->cwd);
    free(p->hostname);
    for (size_t i = 0; i < p->n_mounts; i++) {
        free(p->mounts[i].path);
        free(p->mounts[i].source);
    }
    free(p->mounts);
    memset(p, 0, sizeof *p);
}

static int get_u64(const json_t *o, const char *k, uint64_t *ret) {
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -EINVAL;
    *ret = (uint64_t)json_integer_value(v);
    return 0;
}

int plan_from_json(const json_t *j, struct launch_plan *ret_plan) {
    struct launch_plan p = {0};
    int r = -EINVAL;
    uint64_t uid, gid;
    const json_t *rl = json_object_get(j, "rlimits");
    if (!json_is_object(j) || !json_is_object(rl))
        return -EINVAL;
    if ((r = strv_from_json(json_object_get(j, "argv"), PLAN_MAX_ARGS, true, &p.argv)) < 0)
        goto fail;
    if ((r = strv_from_json(json_object_get(j, "env"), PLAN_MAX_ENV, false, &p.envp)) < 0)
        goto fail;
    if ((r = bytes_from_json(json_object_get(j, "cwd"), &p.cwd)) < 0)
        goto fail;
    r = -EINVAL;
    const char *hn = json_string_value(json_object_get(j, "hostname"));
    if (!plan_path_ok(p.cwd) || !hn || strlen(hn) > 64)
        goto fail;
    if (get_u64(j, "uid", &uid) < 0 || get_u64(j, "gid", &gid) < 0 || uid > UINT32_MAX - 1 || gid > UINT32_MAX - 1)
        goto fail;
    p.uid = (uint32_t)uid;
    p.gid = (uint32_t)gid;
    if (!json_is_boolean(json_object_get(j, "unshare_net")) || !json_is_boolean(json_object_get(j, "landlock")) ||
        !json_is_boolean(json_object_get(j, "seccomp")) || !json_is_boolean(json_object_get(j, "tty")) ||
        !json_is_boolean(json_object_get(j, "tty_input")))
        goto fail;
    p.tty = json_is_true(json_object_get(j, "tty"));
    p.tty_input = json_is_true(json_object_get(j, "tty_input"));
    p.unshare_net = json_is_true(json_object_get(j, "unshare_net"));
    p.loopback_tcp = json_is_true(json_object_get(j, "loopback_tcp"));
    uint64_t proxy_port;
    if (get_u64(j, "proxy_port", &proxy_port) < 0 || proxy_port > UINT16_MAX || (proxy_port && !p.unshare_net))
        goto fail;
    p.proxy_port = (uint16_t)proxy_port;
    if (!json_is_boolean(json_object_get(j, "dns_stub")))
        goto fail;
    p.dns_stub = json_is_true(json_object_get(j, "dns_stub"));
    if (p.dns_stub && (!p.unshare_net || p.loopback_tcp))
        goto fail;
    p.landlock = json_is_true(json_object_get(j, "landlock"));
    p.seccomp = json_is_true(json_object_get(j, "seccomp"));
    if (get_u64(j, "tmp_size", &p.tmp_size) < 0 || get_u64(j, "shm_size", &p.shm_size) < 0 ||
        get_u64(rl, "nofile", &p.rlimit_nofile) < 0 || get_u64(rl, "fsize", &p.rlimit_fsize) < 0 ||
        get_u64(rl, "nproc", &p.rlimit_nproc) < 0 || get_u64(rl, "as", &p.rlimit_as) < 0 ||
        get_u64(rl, "cpu", &p.rlimit_cpu) < 0)
        goto fail;
    const json_t *ep = json_object_get(j, "exec_path");
    if (ep && !json_is_null(ep)) {
        if ((r = bytes_from_json(ep, &p.exec_path)) < 0)
            goto fail;
        r = -EINVAL;
        if (p.exec_path[0] != '/' || strlen(p.exec_path) >= PATH_MAX)
            goto fail;
    }
    r = -ENOMEM;
    if (!(p.hostname = strdup(hn)))
        goto fail;
    const json_t *mounts = json_object_get(j, "mounts");
    r = -EINVAL;
    if (!json_is_array(mounts) || json_array_size(mounts) > PLAN_MAX_MOUNTS)
        goto fail;
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m) {
        const char *kind = json_string_value(json_object_get(m, "kind"));
        _cleanup_free_ char *path = NULL, *source = NULL;
        if ((r = bytes_from_json(json_object_get(m, "path"), &path)) < 0)
            goto fail;
        uint64_t size;
        int k = -1;
        for (int c = 0; kind && c <= PLAN_HIDE; c++)
            if (strcmp(kind, kind_names[c]) == 0)
                k = c;
        r = -EINVAL;
        if (k < 0 || get_u64(m, "size", &size) < 0)
            goto fail;
        const json_t *src = json_object_get(m, "source");
        if (src && !json_is_null(src)) {
            if ((r = bytes_from_json(src, &source)) < 0 ||
                (r = plan_add_mount_from(&p, (enum plan_mount_kind)k, source, path)) < 0)
                goto fail;
            p.mounts[p.n_mounts - 1].size = size;
        } else if ((r = plan_add_mount(&p, (enum plan_mount_kind)k, path, size)) < 0)
            goto fail;
        p.mounts[p.n_mounts - 1].optional = k == PLAN_BIND_RO && json_is_true(json_object_get(m, "optional"));
        p.mounts[p.n_mounts - 1].scan_sockets =
            (k == PLAN_BIND_RO || k == PLAN_BIND_RW) && json_is_true(json_object_get(m, "scan_sockets"));
        /* an inherited detached mount: read-only projections only, never
         * one of the descriptors the protocol fixes (launch.h) */
        const json_t *fd = json_object_get(m, "fd");
        if (fd && !json_is_null(fd)) {
            json_int_t v = json_integer_value(fd);
            r = -EINVAL;
            if (!json_is_integer(fd) || (v != -1 && (k != PLAN_BIND_RO || v < 16 || v > INT32_MAX)))
                goto fail;
            p.mounts[p.n_mounts - 1].fd = (int)v;
        }
    }
    *ret_plan = p;
    return 0;
fail:
    plan_free(&p);
    return r;
}
