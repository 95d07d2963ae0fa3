/* runstore.c: the recorded runs on disk ($XDG_STATE_HOME/pvisor/runs/<id>/):
 * listing their ids and loading their Bundles.  Shared by the CLI verbs
 * and the stage lifecycle.  Run ids are validated before use as names. */
#include "evidence/runstore.h"
#include "evidence/bundle.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static int cmp_desc(const void *a, const void *b) {
    return -strcmp(*(char *const *)a, *(char *const *)b);
}

void runs_free_ids(char **ids) {
    if (!ids)
        return;
    for (char **p = ids; *p; p++)
        free(*p);
    free(ids);
}

static bool valid_id(const char *s) {
    size_t n = strlen(s);
    if (n < 10 || n > 31 || s[0] < '0' || s[0] > '9')
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == 'T' || *p == 'Z' || *p == '-' || *p == '.'))
            return false;
    return true;
}

int runs_list_ids(char ***ret_ids, size_t *ret_n) {
    _cleanup_free_ char *dir = NULL;
    int r = runs_dir(false, &dir);
    if (r < 0)
        return r;
    size_t n = 0, cap = 16;
    char **ids = calloc(cap + 1, sizeof *ids);
    if (!ids)
        return -ENOMEM;
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!valid_id(de->d_name))
                continue;
            if (n == cap) {
                char **nids = realloc(ids, (cap * 2 + 1) * sizeof *ids);
                if (!nids) {
                    runs_free_ids(ids);
                    return -ENOMEM;
                }
                ids = nids;
                cap *= 2;
            }
            ids[n] = strdup(de->d_name);
            if (!ids[n]) {
                runs_free_ids(ids);
                return -ENOMEM;
            }
            ids[++n] = NULL;
        }
    } else if (errno != ENOENT) {
        r = -errno;
        runs_free_ids(ids);
        return r;
    }
    qsort(ids, n, sizeof *ids, cmp_desc);
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

int runs_hold(int run_dirfd) {
    /* runs_starting's exclusive probe holds it for an instant */
    for (int i = 0; i < 100; i++) {
        if (flock(run_dirfd, LOCK_SH | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK)
            return -errno;
        usleep(100);
    }
    return -EWOULDBLOCK;
}

bool runs_starting(const char *id) {
    _cleanup_free_ char *dir = NULL;
    if (runs_dir(false, &dir) < 0)
        return false;
    _cleanup_free_ char *p = path_join(dir, id);
    _cleanup_close_ int fd = p ? open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
    return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

int runs_load_bundle(const char *id, json_t **ret_bundle) {
    _cleanup_free_ char *dir = NULL;
    int r = runs_dir(false, &dir);
    if (r < 0)
        return r;
    _cleanup_free_ char *p = path_join(dir, id);
    if (!p)
        return -ENOMEM;
    _cleanup_close_ int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    return bundle_read(fd, ret_bundle);
}

char *runs_bundle_other_schema(const char *id) {
    _cleanup_free_ char *dir = NULL, *txt = NULL;
    if (runs_dir(false, &dir) < 0)
        return NULL;
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int rd = fd >= 0 ? openat(fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (rd < 0 || read_file_at(rd, BUNDLE_FILE, 16u << 20, &txt, NULL) < 0)
        return NULL;
    json_t *b = json_loads(txt, 0, NULL);
    const char *schema = json_string_value(json_object_get(b, "schema"));
    char *out = schema && strncmp(schema, "pvisor.bundle/", 14) == 0 && strcmp(schema, BUNDLE_SCHEMA) != 0
                    ? strdup(schema)
                    : NULL;
    json_decref(b);
    return out;
}
