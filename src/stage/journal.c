/* journal.c: the preimage journal and the inode-origin side file.
 *
 * journal: JSON lines, one object per lower object, written at the first
 * mutation of that object through the overlay.  The in-memory set of
 * recorded paths makes the record idempotent, including across runs (it is
 * loaded when the stage is reopened).
 *
 * origin: text lines "U L" (upper inode U was copied up from lower inode L)
 * or "U -" (upper inode U is gone; forget the mapping), after a header line
 * "pvisor-origin 1 dev=N" naming the upper file system's st_dev.  If the
 * device differs on reopen (stage copied elsewhere) the map is discarded:
 * inode numbers then change, but never alias.
 *
 * Invariant: a record is complete on disk (strict) or in the page cache
 * (checkpoint) before stage_journal_append returns > 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "stage/stage-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

/* ---- small hash containers ---- */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static bool str_set_has(const struct str_set *set, const char *k) {
    if (set->cap == 0)
        return false;
    for (size_t i = hash_str(k) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
        if (!set->slots[i])
            return false;
        if (strcmp(set->slots[i], k) == 0)
            return true;
    }
}

/* Takes ownership of k on success. */
static int str_set_add(struct str_set *set, char *k) {
    if ((set->n + 1) * 2 > set->cap) {
        size_t ncap = set->cap ? set->cap * 2 : 64;
        char **ns = calloc(ncap, sizeof(char *));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < set->cap; i++) {
            char *e = set->slots[i];
            if (!e)
                continue;
            size_t j = hash_str(e) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = e;
        }
        free(set->slots);
        set->slots = ns;
        set->cap = ncap;
    }
    size_t j = hash_str(k) & (set->cap - 1);
    while (set->slots[j])
        j = (j + 1) & (set->cap - 1);
    set->slots[j] = k;
    set->n++;
    return 0;
}

static int ino_map_put(struct ino_map *m, uint64_t k, uint64_t v) {
    if (k == 0)
        return -EINVAL;
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        uint64_t *nk = calloc(ncap, sizeof(uint64_t)), *nv = calloc(ncap, sizeof(uint64_t));
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i] || !m->vals[i])
                continue; /* drop tombstones */
            size_t j = hash_u64(m->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
        m->n = 0;
        for (size_t i = 0; i < ncap; i++)
            m->n += nk[i] != 0;
    }
    size_t j = hash_u64(k) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j])
        m->n++;
    m->keys[j] = k;
    m->vals[j] = v; /* v == 0: tombstone */
    return 0;
}

static bool ino_map_get(const struct ino_map *m, uint64_t k, uint64_t *ret) {
    if (m->cap == 0 || k == 0)
        return false;
    for (size_t j = hash_u64(k) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (!m->keys[j])
            return false;
        if (m->keys[j] == k) {
            if (!m->vals[j])
                return false;
            *ret = m->vals[j];
            return true;
        }
    }
}

void stage_maps_free(struct stage *s) {
    for (size_t i = 0; i < s->recorded.cap; i++)
        free(s->recorded.slots[i]);
    free(s->recorded.slots);
    free(s->origins.keys);
    free(s->origins.vals);
    free(s->lowers.keys);
    free(s->lowers.vals);
    s->recorded = (struct str_set){0};
    s->origins = (struct ino_map){0};
    s->lowers = (struct ino_map){0};
}

static int write_full(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- journal ---- */

/* Read the whole journal and remember each recorded path.  A final line
 * without its newline (torn append of a crashed run) is ignored. */
int stage_journal_load(struct stage *s) {
    /* O_NONBLOCK and a regular file only: a FIFO here is not waited on */
    int fd = openat(s->dir_fd, "journal", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct stat st;
    int sr = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
    if (sr < 0) {
        close(fd);
        return sr;
    }
    _cleanup_fclose_ FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return -errno;
    }
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n' || n > STAGE_MAX_LINE)
            continue;
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)n, 0, &jerr);
        if (!o)
            return -EBADMSG;
        const char *p = json_string_value(json_object_get(o, "path"));
        const char *ph = json_string_value(json_object_get(o, "path_hex"));
        _cleanup_free_ char *decoded = NULL;
        if (!p && ph) {
            size_t hl = strlen(ph);
            decoded = calloc(hl / 2 + 1, 1);
            if (!decoded) {
                json_decref(o);
                return -ENOMEM;
            }
            for (size_t i = 0; i + 1 < hl; i += 2) {
                unsigned v;
                if (sscanf(ph + i, "%2x", &v) != 1)
                    break;
                decoded[i / 2] = (char)v;
            }
            p = decoded;
        }
        int r = 0;
        if (p && !str_set_has(&s->recorded, p)) {
            char *d = strdup(p);
            r = d ? str_set_add(&s->recorded, d) : -ENOMEM;
            if (r < 0)
                free(d);
        }
        json_decref(o);
        if (r < 0)
            return r;
    }
    return 0;
}

bool stage_journal_contains(struct stage *s, const char *path) {
    pthread_mutex_lock(&s->lock);
    bool r = str_set_has(&s->recorded, path);
    pthread_mutex_unlock(&s->lock);
    return r;
}

int stage_journal_append(struct stage *s, const struct stage_preimage *rec) {
    if (!rec || !rec->path || !rec->type || !rec->op)
        return -EINVAL;
    json_t *o = json_object();
    if (!o)
        return -ENOMEM;
    int bad = 0;
    json_t *jp = json_string(rec->path);
    if (jp) {
        bad |= json_object_set_new(o, "path", jp);
    } else {
        /* Not UTF-8: JSON cannot carry it, record the bytes in hex. */
        _cleanup_free_ char *hex = hex_encode(rec->path);
        if (!hex) {
            json_decref(o);
            return -ENOMEM;
        }
        bad |= json_object_set_new(o, "path_hex", json_string(hex));
    }
    bad |= json_object_set_new(o, "type", json_string(rec->type));
    bad |= json_object_set_new(o, "mode", json_integer(rec->mode));
    bad |= json_object_set_new(o, "size", json_integer((json_int_t)rec->size));
    if (rec->sha256)
        bad |= json_object_set_new(o, "sha256", json_string(rec->sha256));
    bad |= json_object_set_new(o, "ino", json_integer((json_int_t)rec->ino));
    bad |= json_object_set_new(o, "op", json_string(rec->op));
    if (rec->xattrs_sha256)
        bad |= json_object_set_new(o, "xattrs_sha256", json_string(rec->xattrs_sha256));
    if (rec->changed_during_run)
        bad |= json_object_set_new(o, "changed_during_run", json_true());
    if (bad) {
        json_decref(o);
        return -ENOMEM;
    }
    _cleanup_free_ char *txt = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!txt)
        return -ENOMEM;
    size_t len = strlen(txt);
    txt[len] = '\0';

    _cleanup_free_ char *key = strdup(rec->path);
    _cleanup_free_ char *line = malloc(len + 2);
    if (!key || !line)
        return -ENOMEM;
    pthread_mutex_lock(&s->lock);
    int r;
    if (str_set_has(&s->recorded, rec->path)) {
        r = 0;
        goto out;
    }
    memcpy(line, txt, len);
    line[len] = '\n';
    r = write_full(s->journal_fd, line, len + 1);
    if (r < 0)
        goto out;
    if (s->durability == STAGE_DURABILITY_STRICT && fdatasync(s->journal_fd) < 0) {
        r = -errno;
        goto out;
    }
    r = str_set_add(&s->recorded, key);
    if (r < 0)
        goto out;
    key = NULL;
    r = 1;
out:
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* ---- origin map ---- */

/* Map upper inode u to lower inode l (0: forget u), keeping s->lowers (how
 * many live upper inodes each lower inode is the origin of) in step.
 * Under s->lock, or before the FUSE threads start. */
static int origin_put(struct stage *s, uint64_t u, uint64_t l) {
    uint64_t old = 0, cnt = 0;
    if (ino_map_get(&s->origins, u, &old) && old == l)
        return 0;
    if (l != 0) {
        (void)ino_map_get(&s->lowers, l, &cnt);
        int r = ino_map_put(&s->lowers, l, cnt + 1);
        if (r < 0)
            return r;
    }
    int r = ino_map_put(&s->origins, u, l);
    if (r < 0)
        return r;
    if (old != 0 && ino_map_get(&s->lowers, old, &cnt))
        (void)ino_map_put(&s->lowers, old, cnt - 1); /* 0: tombstone, never fails */
    return 0;
}

int stage_origin_load(struct stage *s, uint64_t upper_dev) {
    int fd = openat(s->dir_fd, "origin", O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd < 0)
        return -errno;
    s->origin_fd = fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL; /* a FIFO: reading it would wait forever */
    if (st.st_nlink > 1)
        return -EMLINK; /* a hard link (pvisor makes none): truncated and written, so was a file outside the stage */
    int rfd = openat(s->dir_fd, "origin", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (rfd < 0)
        return -errno;
    _cleanup_fclose_ FILE *f = fdopen(rfd, "r");
    if (!f) {
        close(rfd);
        return -errno;
    }
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    bool valid = false;
    if (n > 0) {
        uint64_t dev;
        if (sscanf(line, "pvisor-origin 1 dev=%" SCNu64, &dev) == 1 && dev == upper_dev)
            valid = true;
    }
    if (!valid) {
        /* New file, or a stage that moved to another file system: start a
         * fresh map (the old inode numbers mean nothing here). */
        if (ftruncate(fd, 0) < 0)
            return -errno;
        char hdr[64];
        int m = snprintf(hdr, sizeof hdr, "pvisor-origin 1 dev=%" PRIu64 "\n", upper_dev);
        if (m < 0 || (size_t)m >= sizeof hdr)
            return -EOVERFLOW;
        return write_full(fd, hdr, (size_t)m);
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            continue;
        uint64_t u, l;
        char dash;
        int r = 0;
        if (sscanf(line, "%" SCNu64 " %" SCNu64, &u, &l) == 2)
            r = origin_put(s, u, l);
        else if (sscanf(line, "%" SCNu64 " %c", &u, &dash) == 2 && dash == '-')
            r = origin_put(s, u, 0);
        if (r < 0 && r != -EINVAL)
            return r;
    }
    return 0;
}

static int origin_write(struct stage *s, uint64_t u, uint64_t l, bool forget) {
    char buf[64];
    int m = forget ? snprintf(buf, sizeof buf, "%" PRIu64 " -\n", u)
                   : snprintf(buf, sizeof buf, "%" PRIu64 " %" PRIu64 "\n", u, l);
    if (m < 0 || (size_t)m >= sizeof buf)
        return -EOVERFLOW;
    pthread_mutex_lock(&s->lock);
    int r = origin_put(s, u, forget ? 0 : l);
    if (r >= 0)
        r = write_full(s->origin_fd, buf, (size_t)m);
    if (r >= 0 && s->durability == STAGE_DURABILITY_STRICT && fdatasync(s->origin_fd) < 0)
        r = -errno;
    pthread_mutex_unlock(&s->lock);
    return r;
}

int stage_origin_add(struct stage *s, uint64_t upper_ino, uint64_t lower_ino) {
    if (upper_ino == 0 || lower_ino == 0)
        return -EINVAL;
    return origin_write(s, upper_ino, lower_ino, false);
}

int stage_origin_forget(struct stage *s, uint64_t upper_ino) {
    uint64_t dummy;
    if (!stage_origin_get(s, upper_ino, &dummy))
        return 0;
    return origin_write(s, upper_ino, 0, true);
}

bool stage_origin_get(struct stage *s, uint64_t upper_ino, uint64_t *ret_lower_ino) {
    uint64_t v;
    pthread_mutex_lock(&s->lock);
    bool r = ino_map_get(&s->origins, upper_ino, &v);
    pthread_mutex_unlock(&s->lock);
    if (r)
        *ret_lower_ino = v;
    return r;
}

bool stage_origin_lower_mapped(struct stage *s, uint64_t lower_ino) {
    uint64_t v;
    pthread_mutex_lock(&s->lock);
    bool r = ino_map_get(&s->lowers, lower_ino, &v);
    pthread_mutex_unlock(&s->lock);
    return r;
}
