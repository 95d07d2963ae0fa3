/* journal-load.c: a stage's preimage journal read for the changeset
 * (docs/stage-format.md, "journal"): one record per path, the first of
 * each (the preimage), each replaced by what an earlier 'apply --path'
 * of the stage wrote there (STAGE/apply-written).  Bounded: the file's
 * size and each line's; a torn last line is ignored. */
#include "lifecycle/lc-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/util.h"

#define JOURNAL_MAX (512u << 20)

void lc_preimages_free(struct lc_preimage *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(p[i].path);
    free(p);
}

static int cmp_pre(const void *a, const void *b) {
    const struct lc_preimage *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* the journal's first record of a path wins */
}

const struct lc_preimage *lc_preimage_find(const struct lc_preimage *p, size_t n, const char *path) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(p[mid].path, path);
        if (c == 0)
            return &p[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* One journal line.  allow_none: "type":"none" is accepted (the
 * deletions in STAGE/apply-written; the journal has none). */
static int parse_record(const char *line, struct lc_preimage *rec, bool allow_none) {
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return -EBADMSG;
    }
    int r = -EBADMSG;
    const char *p = json_string_value(json_object_get(o, "path"));
    const char *ph = json_string_value(json_object_get(o, "path_hex"));
    char *path = NULL;
    if (p) {
        path = strdup(p);
    } else if (ph && strlen(ph) % 2 == 0 && strlen(ph) / 2 <= LC_MAX_PATH) {
        size_t n = strlen(ph) / 2;
        path = malloc(n + 1);
        if (path && lc_unhex(ph, (unsigned char *)path, n) == 0 && !memchr(path, 0, n))
            path[n] = '\0';
        else {
            free(path);
            path = NULL;
        }
    }
    if (!path || (strcmp(path, ".") != 0 && !lc_path_valid(path)))
        goto out;
    *rec = (struct lc_preimage){0};
    rec->type = lc_type_parse(json_string_value(json_object_get(o, "type")));
    json_t *mode = json_object_get(o, "mode");
    const char *type = json_string_value(json_object_get(o, "type"));
    bool none = allow_none && type && strcmp(type, "none") == 0;
    if ((rec->type == LC_NONE && !none) || !json_is_integer(mode))
        goto out;
    rec->mode = (uint32_t)json_integer_value(mode) & 07777;
    rec->size = (uint64_t)json_integer_value(json_object_get(o, "size"));
    rec->ino = (uint64_t)json_integer_value(json_object_get(o, "ino"));
    const char *sha = json_string_value(json_object_get(o, "sha256"));
    if (sha) {
        if (lc_unhex(sha, rec->sha, 32) < 0)
            goto out;
        rec->has_sha = true;
    }
    const char *xsha = json_string_value(json_object_get(o, "xattrs_sha256"));
    if (xsha) {
        if (lc_unhex(xsha, rec->xattr_sha, 32) < 0)
            goto out;
        rec->has_xattr_sha = true;
    }
    const char *op = json_string_value(json_object_get(o, "op"));
    snprintf(rec->op, sizeof rec->op, "%s", op ? op : "");
    rec->changed_during_run = json_is_true(json_object_get(o, "changed_during_run"));
    json_t *uid = json_object_get(o, "uid"), *gid = json_object_get(o, "gid");
    if (json_is_integer(uid) && json_is_integer(gid)) {
        rec->has_owner = true;
        rec->uid = (uint32_t)json_integer_value(uid);
        rec->gid = (uint32_t)json_integer_value(gid);
    }
    rec->path = path;
    path = NULL;
    r = 0;
out:
    free(path);
    json_decref(o);
    return r;
}

/* Records of the journal-format file name, sorted by path, one per path:
 * the first of a path (the journal's preimage), or with last, the last
 * (STAGE/apply-written, where a later apply overrides an earlier one). */
static int records_load(int stage_dir_fd, const char *name, bool last, struct lc_preimage **ret, size_t *ret_n) {
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = read_file_at(stage_dir_fd, name, JOURNAL_MAX, &buf, &len);
    if (r == -ENOENT) {
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    if (r < 0)
        return r == -EFBIG ? -E2BIG : r;
    size_t n = 0, cap = 0;
    struct lc_preimage *v = NULL;
    char *p = buf, *end = buf + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break; /* torn final append: ignored */
        *nl = '\0';
        if (nl - p > 65536 || memchr(p, 0, (size_t)(nl - p))) {
            lc_preimages_free(v, n);
            return -EBADMSG;
        }
        if (nl > p) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                if (cap > LC_MAX_ENTRIES) {
                    lc_preimages_free(v, n);
                    return -E2BIG;
                }
                struct lc_preimage *nv = realloc(v, cap * sizeof *nv);
                if (!nv) {
                    lc_preimages_free(v, n);
                    return -ENOMEM;
                }
                v = nv;
            }
            r = parse_record(p, &v[n], last);
            if (r < 0) {
                lc_preimages_free(v, n);
                return r;
            }
            v[n].seq = n;
            n++;
        }
        p = nl + 1;
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_pre);
    /* keep the first record of each path (with last: the last) */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && strcmp(v[w - 1].path, v[i].path) == 0) {
            if (last) {
                free(v[w - 1].path);
                v[w - 1] = v[i];
            } else {
                free(v[i].path);
            }
            continue;
        }
        v[w++] = v[i];
    }
    *ret = v;
    *ret_n = w;
    return 0;
}

/* The journal's preimages, each replaced by what an earlier `apply
 * --path` of this stage wrote at its path (STAGE/apply-written): the
 * workspace has held that since, so a later run over the same stage
 * (--stage DIR) that changes the path again is compared with it, not with
 * what the workspace held before the first run (a conflict with pvisor's
 * own write).  A path that apply deleted gets type LC_NONE (its journal
 * inode kept for rename detection); one the agent created and apply wrote
 * gets a record of its own (inode 0). */
int lc_journal_load(int stage_dir_fd, struct lc_preimage **ret, size_t *ret_n) {
    struct lc_preimage *v = NULL, *a = NULL;
    size_t n = 0, na = 0;
    int r = records_load(stage_dir_fd, "journal", false, &v, &n);
    if (r < 0)
        return r;
    r = records_load(stage_dir_fd, LC_APPLY_WRITTEN, true, &a, &na);
    if (r == -ENOENT || (r == 0 && na == 0)) {
        *ret = v;
        *ret_n = n;
        return 0;
    }
    if (r < 0) {
        lc_preimages_free(v, n);
        return r;
    }
    size_t added = 0;
    for (size_t i = 0; i < na; i++)
        added += lc_preimage_find(v, n, a[i].path) == NULL;
    struct lc_preimage *nv = added ? realloc(v, (n + added) * sizeof *nv) : v;
    if (!nv) {
        lc_preimages_free(v, n);
        lc_preimages_free(a, na);
        return -ENOMEM;
    }
    v = nv;
    size_t m = n;
    for (size_t i = 0; i < na; i++) {
        struct lc_preimage *p = (struct lc_preimage *)lc_preimage_find(v, n, a[i].path);
        if (!p) {
            v[m] = a[i];
            v[m].ino = 0;
            v[m++].seq = 0;
            a[i].path = NULL;
            continue;
        }
        p->type = a[i].type;
        p->mode = a[i].mode;
        p->size = a[i].size;
        p->has_sha = a[i].has_sha;
        memcpy(p->sha, a[i].sha, sizeof p->sha);
        p->has_xattr_sha = a[i].has_xattr_sha;
        memcpy(p->xattr_sha, a[i].xattr_sha, sizeof p->xattr_sha);
        p->has_owner = a[i].has_owner; /* apply-written records none */
        p->uid = a[i].uid;
        p->gid = a[i].gid;
        p->changed_during_run = false; /* what apply wrote, not the host's */
    }
    lc_preimages_free(a, na);
    if (m > n)
        qsort(v, m, sizeof *v, cmp_pre);
    *ret = v;
    *ret_n = m;
    return 0;
}
