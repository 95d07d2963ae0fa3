/* changeset-origin.c: the origin map of a stage's upper, as the changeset
 * reads it (see changeset.c): which lower inode each copied-up upper
 * object came from.  The walk uses it to tell a directory replaced from
 * one copied up; the review's rename detection (changeset-annotate.c) to
 * find what an added object was renamed from.  The stage writes the map
 * (stage_origin_*); only lines of this upper's map are taken.
 */
#include "lifecycle/lc-internal.h"
#include "stage/stage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/util.h"

#define ORIGIN_MAX (256u << 20)

static int cmp_pair_seq(const void *a, const void *b) {
    const struct lc_ino_pair *x = a, *y = b;
    if (x->upper != y->upper)
        return x->upper < y->upper ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_pair(const void *a, const void *b) {
    const struct lc_ino_pair *x = a, *y = b;
    return x->upper < y->upper ? -1 : x->upper > y->upper;
}

/* The map of this upper (stage_origin_header_check: the file system and
 * upper/ it names are these), sorted by upper inode, the last line of
 * each upper inode kept.  *ret_usable false: no map of this upper;
 * *ret_legacy: a map begun by an older pvisor (version 1), which has no
 * line for a copy-up whose lower number another copy-up had taken. */
int lc_origin_load(int stage_dir_fd, int upper_fd, struct lc_ino_pair **ret, size_t *ret_n, bool *ret_usable,
                   bool *ret_legacy) {
    *ret = NULL;
    *ret_n = 0;
    *ret_usable = false;
    *ret_legacy = false;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = read_file_at(stage_dir_fd, "origin", ORIGIN_MAX, &buf, &len);
    if (r < 0)
        return r == -ENOENT || r == -EFBIG ? 0 : r;
    char *nl = memchr(buf, '\n', len);
    if (!nl)
        return 0;
    bool legacy = false;
    r = stage_origin_header_check(upper_fd, buf, (size_t)(nl - buf), &legacy);
    if (r <= 0)
        return r;
    *ret_usable = true;
    *ret_legacy = legacy;
    /* a last line without its newline was cut by a crash: not taken (as
     * the stage's own loader does), a number in it may be cut short */
    size_t n = 0, cap = 0;
    struct lc_ino_pair *v = NULL;
    for (char *line = nl + 1; line < buf + len;) {
        char *end = memchr(line, '\n', (size_t)(buf + len - line));
        if (!end)
            break;
        uint64_t u, l;
        int k = stage_origin_parse_line(line, (size_t)(end - line), &u, &l);
        line = end + 1;
        if (k < 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            if (cap > LC_MAX_ENTRIES)
                break;
            struct lc_ino_pair *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        v[n] = (struct lc_ino_pair){u, l, n, k == STAGE_ORIGIN_HIDDEN};
        n++;
    }
    /* later lines win: sort by (upper ino, line number), keep the last */
    if (n > 0) /* qsort's base must not be NULL, even for no elements */
        qsort(v, n, sizeof *v, cmp_pair_seq);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && v[w - 1].upper == v[i].upper) {
            v[w - 1] = v[i];
            continue;
        }
        v[w++] = v[i];
    }
    /* drop forgotten mappings */
    size_t k = 0;
    for (size_t i = 0; i < w; i++)
        if (v[i].lower)
            v[k++] = v[i];
    *ret = v;
    *ret_n = k;
    return 0;
}

/* The lower inode upper was copied up from, 0: none.  shown_only: only
 * a copy the view showed as that number (one number, one object: what
 * the journal's inode numbers can be matched with). */
uint64_t lc_origin_lookup(const struct lc_ino_pair *v, size_t n, uint64_t upper, bool shown_only) {
    struct lc_ino_pair key = {upper, 0, 0, false};
    const struct lc_ino_pair *p = n ? bsearch(&key, v, n, sizeof *v, cmp_pair) : NULL;
    return p && !(shown_only && p->hidden) ? p->lower : 0;
}

/* Is lower the origin of some upper object?  Only for a map begun by an
 * older pvisor (legacy): its overlay recorded a copy-up's origin only when
 * no other copy-up took that number (copyup.c): where two file systems are
 * mounted in the workspace (two tmpfs, both with root inode 1), the
 * second directory copied up got none. */
bool lc_origin_lower_taken(const struct lc_ino_pair *v, size_t n, uint64_t lower) {
    for (size_t i = 0; i < n; i++)
        if (v[i].lower == lower)
            return true;
    return false;
}
