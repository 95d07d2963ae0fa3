/* runs.c: see runs.h. */
#include "cli/runs.h"
#include "cli/cli.h"
#include "evidence/bundle.h"
#include "util/cleanup.h"
#include "util/util.h"
#ifdef PVISOR_HAVE_OVERLAY
#include "stage/stage.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int runs_resolve(const char *query, char **ret_id) {
    char **ids = NULL;
    size_t n = 0;
    int r = runs_list_ids(&ids, &n);
    if (r < 0)
        return r;
    if (n == 0) {
        runs_free_ids(ids);
        return -ENOENT;
    }
    const char *match = NULL;
    if (query && !*query) { /* a prefix of every id, but names none */
        runs_free_ids(ids);
        return -ENOENT;
    }
    if (!query || strcmp(query, "latest") == 0) {
        match = ids[0];
    } else {
        size_t ql = strlen(query);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(ids[i], query) == 0) {
                match = ids[i];
                break;
            }
            if (strncmp(ids[i], query, ql) == 0) {
                if (match) {
                    runs_free_ids(ids);
                    return -ENOTUNIQ;
                }
                match = ids[i];
            }
        }
    }
    char *res = match ? strdup(match) : NULL;
    runs_free_ids(ids);
    if (!match)
        return -ENOENT;
    if (!res)
        return -ENOMEM;
    *ret_id = res;
    return 0;
}

char *runs_command_arg_display(const json_t *command, const json_t *command_hex, size_t i) {
    const char *s = json_string_value(json_array_get(command, i));
    if (s)
        return term_escape(s);
    const char *hex = json_string_value(json_array_get(command_hex, i));
    _cleanup_free_ char *raw = NULL;
    if (!hex || hex_decode(hex, &raw) < 0)
        return NULL;
    return term_escape(raw);
}

/* Is the supervisor recorded in the bundle still alive and still pvisor? */
static bool supervisor_alive(const json_t *b) {
    json_int_t pid = json_integer_value(json_object_get(json_object_get(b, "user"), "supervisor_pid"));
    if (pid <= 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/comm", (long long)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char comm[32] = "";
    if (!fgets(comm, sizeof comm, f))
        return false;
    return strncmp(comm, "pvisor", 6) == 0;
}

const char *runs_display_state(const json_t *bundle) {
    const char *s = json_string_value(json_object_get(bundle, "state"));
    if (!s)
        return "unknown";
    if ((strcmp(s, "running") == 0 || strcmp(s, "starting") == 0) && !supervisor_alive(bundle))
        return "interrupted";
    return s;
}

const char *runs_stage_state(const json_t *bundle) {
    const json_t *st = json_object_get(bundle, "stage");
    const char *recorded = json_string_value(json_object_get(st, "state"));
    const char *path = json_string_value(json_object_get(st, "path"));
    if (!path)
        return recorded;
#ifdef PVISOR_HAVE_OVERLAY
    enum stage_state s;
    if (stage_probe_state(path, &s) >= 0)
        return stage_state_name(s);
    return "missing";
#else
    return recorded;
#endif
}

int runs_dir_error(const char *verb, int r) {
    _cleanup_free_ char *dir = NULL;
    (void)runs_dir(false, &dir);
    _cleanup_free_ char *shown = dir ? term_escape(dir) : NULL;
    return cli_error(PV_EXIT_FAILURE, verb, "cannot read the runs directory %s: %s (set XDG_STATE_HOME to yours)",
                     shown ? shown : "?", strerror(-r));
}
