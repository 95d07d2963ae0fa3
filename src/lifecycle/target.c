/* target.c: which stage a lifecycle verb works on (docs/lifecycle.md,
 * "Choosing the stage").  A stage directory given by path, or a run (id,
 * unique prefix, "latest"), or by default the newest run that has a stage;
 * the run's Bundle says where its stage is. */
#include "lifecycle/lc-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "evidence/bundle.h"
#include "evidence/runstore.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

/* A run id as the runs directory names them (e.g. 20261129T133758.420Z-d0d48613):
 * nothing that could name another directory. */
static bool plain_run_id(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              s[i] == '.' || s[i] == '-'))
            return false;
    return true;
}

/* Is the Bundle of run id one of another schema than ours (a newer
 * pvisor recorded the run)?  Its stage may well be there: said as a
 * supervisor that died (runs_load_bundle's -EPROTO), the verbs told the
 * user to remove the run's directory, which holds the stage of a `--stage
 * auto` run. */
static bool bundle_other_schema(const char *id) {
    _cleanup_free_ char *schema = runs_bundle_other_schema(id);
    return schema != NULL;
}

/* Why run id has no Bundle to read: -EPROTONOSUPPORT (another schema:
 * bundle_other_schema), -EINPROGRESS (still starting), else -ENODATA. */
static int no_bundle_reason(const char *id) {
    return bundle_other_schema(id) ? -EPROTONOSUPPORT : runs_starting(id) ? -EINPROGRESS : -ENODATA;
}

static const char *bundle_stage_path(const json_t *b) {
    return json_string_value(json_object_get(json_object_get(b, "stage"), "path"));
}

/* The run ids in the meta.json of the stage open at fd (oldest first:
 * every run appends its own before it starts), or NULL. */
static json_t *stage_meta_runs(int fd) {
    _cleanup_free_ char *meta_txt = NULL;
    json_t *meta = read_file_at(fd, "meta.json", 1 << 20, &meta_txt, NULL) == 0 ? json_loads(meta_txt, 0, NULL) : NULL;
    json_t *runs = json_incref(json_object_get(meta, "runs"));
    json_decref(meta);
    return runs;
}

/* The Bundle of run rid when it names the stage at real (resolved), or
 * NULL.  A stage made by fork names the runs of its source, whose Bundles
 * name another directory. */
static json_t *stage_run_bundle(const char *rid, const char *real) {
    json_t *b = NULL;
    if (!rid || !plain_run_id(rid) || runs_load_bundle(rid, &b) < 0)
        return NULL;
    const char *sp = bundle_stage_path(b);
    _cleanup_free_ char *spr = sp ? realpath(sp, NULL) : NULL;
    if (spr && strcmp(spr, real) == 0)
        return b;
    json_decref(b);
    return NULL;
}

/* A run whose command never ran (refused or failed before it, or not
 * found) on a stage it made itself (the first run its meta.json names; or
 * none is there): that stage is empty.  Passed over when the newest stage
 * is looked for, and in the others said beside it: a failed `--safe` start
 * or a mistyped command made an empty stage the newest, which a bare
 * `pvisor apply` then took (and marked applied) instead of the agent's.
 * One it reopened (`--stage DIR` again, a fork) holds earlier work: a fork
 * is named by no other run's Bundle, so passed over, the bare verbs took
 * the stage it was forked from (the work the fork was made to leave out),
 * and named the fork nowhere. */
static bool command_never_ran(const char *rid, const json_t *b) {
    const char *state = json_string_value(json_object_get(b, "state"));
    if (!state ||
        (strcmp(state, "setup_failed") != 0 && strcmp(state, "exec_failed") != 0 && strcmp(state, "interrupted") != 0))
        return false;
    const char *sp = bundle_stage_path(b);
    _cleanup_close_ int fd = sp ? open(sp, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd < 0)
        return true; /* never made, or gone */
    json_t *runs = stage_meta_runs(fd);
    const char *first = json_string_value(json_array_get(runs, 0));
    bool own = !first || strcmp(first, rid) == 0;
    json_decref(runs);
    return own;
}

json_t *lc_other_open_stages(const char *workspace, const char *stage) {
    _cleanup_free_ char *real = realpath(stage, NULL);
    json_t *out = json_array();
    char **ids = NULL;
    size_t n = 0;
    if (!real || !out || runs_list_ids(&ids, &n) < 0)
        return out;
    json_t *seen = json_object(); /* stage paths listed: a stage of several runs once */
    for (size_t i = 0; i < n && seen; i++) {
        json_t *b = NULL;
        if (runs_load_bundle(ids[i], &b) < 0)
            continue;
        if (command_never_ran(ids[i], b)) {
            json_decref(b);
            continue;
        }
        const char *ws = json_string_value(json_object_get(b, "workspace"));
        const char *sp = bundle_stage_path(b);
        _cleanup_free_ char *spr = sp && ws && strcmp(ws, workspace) == 0 ? realpath(sp, NULL) : NULL;
        enum stage_state state;
        if (spr && strcmp(spr, real) != 0 && !json_object_get(seen, spr) && stage_probe_state(spr, &state) == 0 &&
            (state == STAGE_SEALED || state == STAGE_INTERRUPTED)) {
            json_object_set_new(seen, spr, json_true());
            json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:b}", "run", ids[i], "stage", spr, "state",
                                                 stage_state_name(state), "empty", stage_probe_empty(spr) == 1));
        } else if (spr) {
            json_object_set_new(seen, spr, json_true());
        }
        json_decref(b);
    }
    json_decref(seen);
    runs_free_ids(ids);
    return out;
}

json_t *lc_newer_never_ran(const char *run_id, const char *workspace) {
    char **ids = NULL;
    size_t n = 0;
    json_t *out = NULL;
    if (!run_id || !workspace || runs_list_ids(&ids, &n) < 0)
        return NULL;
    for (size_t i = 0; i < n && !out && strcmp(ids[i], run_id) != 0; i++) {
        json_t *b = NULL;
        if (runs_load_bundle(ids[i], &b) < 0)
            continue;
        const char *ws = json_string_value(json_object_get(b, "workspace"));
        if (command_never_ran(ids[i], b) && (!ws || strcmp(ws, workspace) == 0))
            out = json_pack("{s:s, s:s?}", "run", ids[i], "state", json_string_value(json_object_get(b, "state")));
        json_decref(b);
    }
    runs_free_ids(ids);
    return out;
}

json_t *lc_stage_runs(const char *stage) {
    _cleanup_free_ char *real = realpath(stage, NULL);
    _cleanup_close_ int fd = real ? open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    json_t *out = json_array();
    if (fd < 0 || !out)
        return out;
    json_t *mruns = stage_meta_runs(fd);
    for (size_t k = 0; k < json_array_size(mruns); k++) {
        const char *rid = json_string_value(json_array_get(mruns, k));
        json_t *b = stage_run_bundle(rid, real);
        if (b)
            json_array_append_new(out, json_pack("{s:s, s:o}", "run", rid, "bundle", b));
    }
    json_decref(mruns);
    return out;
}

/* Does the symlink at link (an absolute path) lie where an agent may have
 * made it: in the workspace of a recorded run (an applied workspace holds
 * the agent's links)?  Its directory is compared resolved.  A system link
 * such as /home -> var/home, or the user's own elsewhere, is not. */
static bool agent_link(const char *link) {
    _cleanup_free_ char *dir = strdup(link);
    if (!dir)
        return true;
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    _cleanup_free_ char *rdir = realpath(dir[0] ? dir : "/", NULL);
    _cleanup_free_ char *real = rdir ? path_join(rdir, slash + 1) : NULL;
    if (!real)
        return true;
    char **ids = NULL;
    size_t n = 0;
    bool found = false;
    if (runs_list_ids(&ids, &n) < 0)
        return false;
    for (size_t i = 0; i < n && !found; i++) {
        json_t *b = NULL;
        if (runs_load_bundle(ids[i], &b) < 0)
            continue;
        const char *ws = json_string_value(json_object_get(b, "workspace"));
        found = ws && path_within(real, ws);
        json_decref(b);
    }
    runs_free_ids(ids);
    return found;
}

int lc_resolve_target(const char *run, const char *stage_dir, bool pass_over_starting, char **ret_stage_path,
                      char **ret_run_id, json_t **ret_bundle) {
    char **ids = NULL;
    size_t n = 0;
    int r = 0;
    char *stage = NULL, *id = NULL;
    json_t *bundle = NULL;
    if (stage_dir) {
        /* A stage is named by its own directory, not by a symlink to it:
         * the current directory may be an applied workspace holding a link
         * the agent made ("latest" -> another project's stage).  The last
         * component is checked without its trailing "/" and "/." (which
         * would follow the link); a relative path has no symlink at any
         * component, an absolute one none where the agent may have made it
         * (agent_link). */
        char last[PATH_MAX];
        size_t l = strlen(stage_dir);
        for (;;) {
            while (l > 1 && stage_dir[l - 1] == '/')
                l--;
            if (l < 3 || stage_dir[l - 1] != '.' || stage_dir[l - 2] != '/')
                break;
            l -= 2;
        }
        struct stat lst;
        if (l < sizeof last) {
            memcpy(last, stage_dir, l);
            last[l] = '\0';
            bool absolute = stage_dir[0] == '/';
            for (size_t i = 1; i <= l; i++) {
                if (i < l && last[i] != '/')
                    continue;
                char c = last[i];
                last[i] = '\0';
                bool link = lstat(last, &lst) == 0 && S_ISLNK(lst.st_mode) && (!absolute || i == l || agent_link(last));
                last[i] = c;
                if (link) {
                    r = -ELOOP;
                    goto out;
                }
            }
        }
        char *real = realpath(stage_dir, NULL);
        if (!real) {
            r = -errno;
            goto out;
        }
        _cleanup_close_ int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat stv;
        if (fd < 0 || fstatat(fd, "version", &stv, AT_SYMLINK_NOFOLLOW) < 0) {
            /* no stage there (not a directory, no 'version'): -EINVAL;
             * else what kept it from being read (EIO, EACCES) */
            int e = errno;
            r = e == ENOTDIR || (fd >= 0 && e == ENOENT) ? -EINVAL : -e;
            free(real);
            goto out;
        }
        stage = real;
        /* the run that used this stage last, for its Bundle: every run
         * records its id in the stage's meta.json (newest last) before it
         * starts, so no other Bundle needs reading.  A stage made by
         * fork names the runs of its source, whose Bundles name
         * another directory: it has no Bundle. */
        json_t *mruns = stage_meta_runs(fd);
        for (size_t k = json_array_size(mruns); k-- > 0 && !bundle;) {
            const char *rid = json_string_value(json_array_get(mruns, k));
            if ((bundle = stage_run_bundle(rid, real)))
                id = strdup(rid);
        }
        json_decref(mruns);
        r = 0;
        goto out;
    }
    r = runs_list_ids(&ids, &n);
    if (r < 0)
        goto out;
    if (n == 0) {
        r = -ENOENT;
        goto out;
    }
    const char *match = NULL;
    if (run && !*run) { /* a prefix of every id, but names none */
        r = -ENOENT;
        goto out;
    }
    if (run && strcmp(run, "latest") != 0) {
        size_t ql = strlen(run);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(ids[i], run) == 0) {
                match = ids[i];
                break;
            }
            if (strncmp(ids[i], run, ql) == 0) {
                if (match) {
                    r = -ENOTUNIQ;
                    goto out;
                }
                match = ids[i];
            }
        }
        if (!match) {
            r = -ENOENT;
            goto out;
        }
        r = runs_load_bundle(match, &bundle);
        if (r < 0) { /* a run directory without a Bundle: say which */
            r = no_bundle_reason(match);
            if (ret_run_id && !(*ret_run_id = strdup(match)))
                r = -ENOMEM;
            goto out;
        }
        if (!bundle_stage_path(bundle)) {
            r = -ENOMEDIUM;
            if (ret_bundle) { /* the caller tells why: unstaged, or its command never ran */
                *ret_bundle = bundle;
                bundle = NULL;
            }
            goto out;
        }
    } else if (run) { /* latest: the newest run, which must have a stage */
        match = ids[0];
        r = runs_load_bundle(match, &bundle);
        if (r < 0) { /* a run directory without a Bundle: say which */
            r = no_bundle_reason(match);
            if (ret_run_id && !(*ret_run_id = strdup(match)))
                r = -ENOMEM;
            goto out;
        }
        if (!bundle_stage_path(bundle)) {
            r = -ENOMEDIUM;
            if (ret_bundle) { /* the caller tells why: unstaged, or its command never ran */
                *ret_bundle = bundle;
                bundle = NULL;
            }
            goto out;
        }
    } else {
        /* The newest staged run of the deepest workspace the current
         * directory is in (in a workspace nested in another, its own);
         * without one, the newest staged run of any (the caller tells the
         * user: lc_cli_target). */
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        const char *any = NULL;
        json_t *any_b = NULL;
        size_t best = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *b = NULL;
            if (runs_load_bundle(ids[i], &b) < 0) {
                if (match)
                    continue; /* older than the one found: as if not read */
                /* A run still starting (another agent's, in parallel) has
                 * no Bundle yet (up to ~0.1 s), so which workspace it is in
                 * is unknown: passed over where only read (review, diff);
                 * where files change (apply, drop), its stage may be the
                 * newest of this workspace, not locked yet: refused. */
                bool starting = runs_starting(ids[i]);
                if (starting && pass_over_starting)
                    continue;
                json_decref(any_b);
                /* A newer run whose Bundle is gone (a supervisor that died
                 * setting up, a power loss: Bundles are not flushed) may
                 * have had a stage: never guess past it to an older one. */
                if (ret_run_id && !(*ret_run_id = strdup(ids[i]))) {
                    r = -ENOMEM;
                    goto out;
                }
                r = starting ? -EINPROGRESS : no_bundle_reason(ids[i]);
                goto out;
            }
            if (command_never_ran(ids[i], b)) {
                json_decref(b);
                continue;
            }
            const char *ws = json_string_value(json_object_get(b, "workspace"));
            if (bundle_stage_path(b) && cwd && ws && path_within(cwd, ws) && (!match || strlen(ws) > best)) {
                json_decref(bundle);
                bundle = b;
                match = ids[i];
                best = strlen(ws);
                if (strcmp(ws, cwd) == 0)
                    break; /* none is deeper */
            } else if (bundle_stage_path(b) && !any && !match) {
                any = ids[i];
                any_b = b;
            } else {
                json_decref(b);
            }
        }
        if (match) {
            json_decref(any_b);
        } else if (any) {
            match = any;
            bundle = any_b;
        } else {
            r = -ENOMEDIUM;
            goto out;
        }
    }
    stage = strdup(bundle_stage_path(bundle));
    id = strdup(match);
    r = stage && id ? 0 : -ENOMEM;
out:
    runs_free_ids(ids);
    if (r < 0) {
        free(stage);
        free(id);
        json_decref(bundle);
        return r;
    }
    *ret_stage_path = stage;
    if (ret_run_id)
        *ret_run_id = id;
    else
        free(id);
    if (ret_bundle)
        *ret_bundle = bundle;
    else
        json_decref(bundle);
    return 0;
}
