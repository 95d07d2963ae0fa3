/* journal.c: the preimage journal and the inode-origin side file.
 *
 * journal: JSON lines, one object per lower object, written at the first
 * mutation of that object through the overlay.  The in-memory set of
 * recorded paths makes the record idempotent, including across runs (it is
 * loaded when the stage is reopened).
 *
 * origin: text lines "U L" (upper inode U was copied up from lower inode L,
 * and the view shows it as L), "U L +" (a copy of L that the view shows by
 * its own number: a live copy shows L already) or "U -" (upper inode U is
 * gone; forget the mapping), after a header naming upper/ (its inode
 * number) and its file system by an identity that survives a remount
 * (version 2; docs/stage-format.md).  A map whose header names another
 * directory or file system (the stage was copied or moved elsewhere) is
 * discarded on reopen: inode numbers then change, but never alias.  A
 * version 1 map ("pvisor-origin 1 dev=N", the upper's st_dev alone) of
 * this upper is rewritten as version 2, marked legacy: it lacks the
 * lines "U L +" (such copies were not recorded).
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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/fs.h>

#ifndef FS_IOC_GETFSUUID /* Linux 6.5; older headers */
struct fsuuid2 {
    uint8_t len;
    uint8_t uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

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

/* Remove k (linear probing: the entries after it in its run move back to
 * where a lookup from their home slot still finds them). */
static void str_set_del(struct str_set *set, const char *k) {
    if (set->cap == 0)
        return;
    size_t mask = set->cap - 1, i = hash_str(k) & mask;
    for (;; i = (i + 1) & mask) {
        if (!set->slots[i])
            return;
        if (strcmp(set->slots[i], k) == 0)
            break;
    }
    free(set->slots[i]);
    set->slots[i] = NULL;
    set->n--;
    for (size_t j = (i + 1) & mask; set->slots[j]; j = (j + 1) & mask) {
        size_t h = hash_str(set->slots[j]) & mask;
        if (((j - h) & mask) >= ((j - i) & mask)) {
            set->slots[i] = set->slots[j];
            set->slots[j] = NULL;
            i = j;
        }
    }
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
    free(s->hidden.keys);
    free(s->hidden.vals);
    free(s->lowers.keys);
    free(s->lowers.vals);
    free(s->tx_keys);
    s->tx_keys = NULL;
    s->n_tx = s->cap_tx = 0;
    s->recorded = (struct str_set){0};
    s->origins = (struct ino_map){0};
    s->hidden = (struct ino_map){0};
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
    if (rec->has_owner) {
        bad |= json_object_set_new(o, "uid", json_integer(rec->uid));
        bad |= json_object_set_new(o, "gid", json_integer(rec->gid));
    }
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
    if (s->tx) {
        if (s->n_tx == s->cap_tx) {
            size_t nc = s->cap_tx ? s->cap_tx * 2 : 64;
            char **nk = realloc(s->tx_keys, nc * sizeof(*nk));
            if (nk) {
                s->tx_keys = nk;
                s->cap_tx = nc;
            }
        }
        if (s->n_tx < s->cap_tx)
            s->tx_keys[s->n_tx++] = key;
        else
            s->tx_broken = true; /* kept: it cannot be taken back */
    }
    key = NULL;
    r = 1;
out:
    pthread_mutex_unlock(&s->lock);
    return r;
}

static void tx_end_locked(struct stage *s) {
    free(s->tx_keys);
    s->tx_keys = NULL;
    s->n_tx = s->cap_tx = 0;
    s->tx = s->tx_broken = false;
}

int stage_journal_begin(struct stage *s) {
    struct stat st;
    if (fstat(s->journal_fd, &st) < 0)
        return -errno;
    pthread_mutex_lock(&s->lock);
    tx_end_locked(s);
    s->tx = true;
    s->tx_off = st.st_size;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void stage_journal_commit(struct stage *s) {
    pthread_mutex_lock(&s->lock);
    tx_end_locked(s);
    pthread_mutex_unlock(&s->lock);
}

int stage_journal_rollback(struct stage *s) {
    pthread_mutex_lock(&s->lock);
    int r = 0;
    if (!s->tx || s->tx_broken)
        r = -ENOMEM;
    else if (s->n_tx && ftruncate(s->journal_fd, s->tx_off) < 0)
        r = -errno;
    if (r == 0) {
        /* cut (a failed sync below leaves it cut in the page cache): the
         * paths are no longer recorded */
        for (size_t i = s->n_tx; i-- > 0;)
            str_set_del(&s->recorded, s->tx_keys[i]);
        if (s->n_tx && s->durability == STAGE_DURABILITY_STRICT && fdatasync(s->journal_fd) < 0)
            r = -errno;
    }
    tx_end_locked(s);
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* ---- origin map ---- */

/* What names upper/ and its file system in a map's header.  st_dev alone
 * is no identity: a btrfs gets new ones at each mount, a loop image or a
 * disk another with its device.  f_fsid is the file system's own (btrfs:
 * its UUID and the subvolume; ext4: its UUID) except where it repeats the
 * device number (xfs, f2fs, fat): then the UUID the kernel knows for the
 * file system (FS_IOC_GETFSUUID, Linux 6.5), where it has one. */
struct origin_fs {
    uint64_t upper; /* upper/'s st_ino: a copy of the stage has another */
    uint64_t type;  /* f_type */
    uint64_t dev;   /* st_dev */
    uint64_t fsid;  /* f_fsid; 0: none, or only the device number again */
    char uuid[33];  /* hex; "": none */
};

static int origin_fs_of(int upper_fd, struct origin_fs *ret) {
    struct stat st;
    struct statfs sf;
    if (fstat(upper_fd, &st) < 0 || fstatfs(upper_fd, &sf) < 0)
        return -errno;
    struct origin_fs o = {
        .upper = (uint64_t)st.st_ino, .type = (uint64_t)(unsigned long)sf.f_type, .dev = (uint64_t)st.st_dev};
    uint64_t fsid = (uint64_t)(uint32_t)sf.f_fsid.__val[0] | (uint64_t)(uint32_t)sf.f_fsid.__val[1] << 32;
    if (fsid != o.dev)
        o.fsid = fsid;
    struct fsuuid2 u = {0};
    if (ioctl(upper_fd, FS_IOC_GETFSUUID, &u) == 0 && u.len > 0 && u.len <= sizeof u.uuid) {
        bool zero = true;
        for (size_t i = 0; i < u.len; i++) {
            zero = zero && u.uuid[i] == 0;
            snprintf(o.uuid + 2 * i, 3, "%02x", u.uuid[i]);
        }
        if (zero)
            o.uuid[0] = '\0';
    }
    *ret = o;
    return 0;
}

int stage_origin_header(int upper_fd, bool legacy, char *buf, size_t size) {
    struct origin_fs o;
    int r = origin_fs_of(upper_fd, &o);
    if (r < 0)
        return r;
    char fsid[32] = "";
    if (o.fsid)
        snprintf(fsid, sizeof fsid, " fsid=%016" PRIx64, o.fsid);
    int m = snprintf(buf, size, "pvisor-origin 2 upper=%" PRIu64 " type=%" PRIx64 " dev=%" PRIu64 "%s%s%s%s\n", o.upper,
                     o.type, o.dev, fsid, o.uuid[0] ? " uuid=" : "", o.uuid, legacy ? " legacy" : "");
    if (m < 0 || (size_t)m >= size)
        return -EOVERFLOW;
    return m;
}

/* s (n bytes) is a number in base 10 or 16, digits only. */
static bool parse_num(const char *s, size_t n, int base, uint64_t *ret) {
    if (n == 0 || n > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d;
        if (s[i] >= '0' && s[i] <= '9')
            d = (unsigned)(s[i] - '0');
        else if (base == 16 && s[i] >= 'a' && s[i] <= 'f')
            d = (unsigned)(s[i] - 'a' + 10);
        else
            return false;
        if (v > (UINT64_MAX - d) / (unsigned)base)
            return false;
        v = v * (unsigned)base + d;
    }
    *ret = v;
    return true;
}

/* A version 2 header: "pvisor-origin 2" and the tokens stage_origin_header
 * writes, each once, in any order; anything else makes it malformed (a
 * token this version does not know may be a condition it cannot check). */
static bool origin_fs_parse(const char *line, size_t len, struct origin_fs *ret, bool *ret_legacy) {
    static const char magic[] = "pvisor-origin 2";
    if (len < sizeof magic - 1 || memcmp(line, magic, sizeof magic - 1) != 0)
        return false;
    struct origin_fs o = {0};
    unsigned seen = 0;
    bool legacy = false;
    size_t i = sizeof magic - 1;
    while (i < len) {
        if (line[i] != ' ')
            return false;
        const char *t = line + ++i;
        const char *sp = memchr(t, ' ', len - i);
        size_t tl = sp ? (size_t)(sp - t) : len - i;
        i += tl;
        const char *eq = memchr(t, '=', tl);
        size_t kl = eq ? (size_t)(eq - t) : tl;
        const char *v = eq ? eq + 1 : NULL;
        size_t vl = eq ? tl - kl - 1 : 0;
        static const char *const keys[] = {"upper", "type", "dev", "fsid", "uuid", "legacy"};
        size_t k = 0;
        while (k < ARRAY_SIZE(keys) && !(strlen(keys[k]) == kl && memcmp(t, keys[k], kl) == 0))
            k++;
        if (k == ARRAY_SIZE(keys) || (seen & (1u << k)) || (k == 5) != !v)
            return false;
        seen |= 1u << k;
        bool good = true;
        switch (k) {
        case 0: good = parse_num(v, vl, 10, &o.upper); break;
        case 1: good = parse_num(v, vl, 16, &o.type); break;
        case 2: good = parse_num(v, vl, 10, &o.dev); break;
        case 3: good = vl <= 16 && parse_num(v, vl, 16, &o.fsid) && o.fsid != 0; break;
        case 4: {
            uint64_t dummy;
            good = vl >= 2 && vl < sizeof o.uuid && vl % 2 == 0;
            for (size_t j = 0; good && j < vl; j += 16)
                good = parse_num(v + j, vl - j < 16 ? vl - j : 16, 16, &dummy);
            if (good)
                memcpy(o.uuid, v, vl);
            break;
        }
        default: legacy = true;
        }
        if (!good)
            return false;
    }
    if ((seen & 7u) != 7u)
        return false;
    *ret = o;
    *ret_legacy = legacy;
    return true;
}

int stage_origin_header_check(int upper_fd, const char *line, size_t len, bool *ret_legacy) {
    struct origin_fs cur;
    int r = origin_fs_of(upper_fd, &cur);
    if (r < 0)
        return r;
    static const char v1[] = "pvisor-origin 1 dev=";
    uint64_t dev;
    if (len > sizeof v1 - 1 && memcmp(line, v1, sizeof v1 - 1) == 0) {
        /* version 1: st_dev was all it named */
        if (!parse_num(line + sizeof v1 - 1, len - (sizeof v1 - 1), 10, &dev) || dev != cur.dev)
            return 0;
        *ret_legacy = true;
        return 1;
    }
    struct origin_fs o;
    bool legacy;
    if (!origin_fs_parse(line, len, &o, &legacy) || o.upper != cur.upper || o.type != cur.type)
        return 0;
    /* the strongest identity both name decides */
    bool same = o.fsid && cur.fsid         ? o.fsid == cur.fsid
                : o.uuid[0] && cur.uuid[0] ? strcmp(o.uuid, cur.uuid) == 0
                                           : o.dev == cur.dev;
    if (!same)
        return 0;
    *ret_legacy = legacy;
    return 1;
}

int stage_origin_parse_line(const char *line, size_t len, uint64_t *ret_upper, uint64_t *ret_lower) {
    const char *sp = memchr(line, ' ', len);
    uint64_t u, l = 0;
    if (!sp || !parse_num(line, (size_t)(sp - line), 10, &u) || u == 0)
        return -EINVAL;
    const char *rest = sp + 1;
    size_t rl = len - (size_t)(rest - line);
    if (rl == 1 && rest[0] == '-') {
        *ret_upper = u;
        *ret_lower = 0;
        return STAGE_ORIGIN_FORGET;
    }
    int kind = STAGE_ORIGIN_SHOWN;
    if (rl > 2 && memcmp(rest + rl - 2, " +", 2) == 0) {
        kind = STAGE_ORIGIN_HIDDEN;
        rl -= 2;
    }
    if (!parse_num(rest, rl, 10, &l) || l == 0)
        return -EINVAL;
    *ret_upper = u;
    *ret_lower = l;
    return kind;
}

/* Map upper inode u to lower inode l (0: forget u), shown or hidden,
 * keeping s->lowers (how many live upper inodes show each lower inode) in
 * step.  Under s->lock, or before the FUSE threads start. */
static int origin_put(struct stage *s, uint64_t u, uint64_t l, bool hidden) {
    uint64_t old = 0, oldh = 0, cnt = 0;
    bool had = ino_map_get(&s->origins, u, &old), had_hidden = ino_map_get(&s->hidden, u, &oldh);
    if (l != 0 && !hidden && had && old == l)
        return 0;
    if (l != 0 && hidden && !had && had_hidden && oldh == l)
        return 0;
    int r;
    if (l != 0 && !hidden) {
        (void)ino_map_get(&s->lowers, l, &cnt);
        if ((r = ino_map_put(&s->lowers, l, cnt + 1)) < 0)
            return r;
    }
    if (l != 0 && (r = ino_map_put(hidden ? &s->hidden : &s->origins, u, l)) < 0)
        return r;
    /* the old mapping of u, where the new one did not replace it (0:
     * tombstones) */
    if (had && (l == 0 || hidden))
        (void)ino_map_put(&s->origins, u, 0);
    if (had && ino_map_get(&s->lowers, old, &cnt))
        (void)ino_map_put(&s->lowers, old, cnt - 1);
    if (had_hidden && (l == 0 || !hidden))
        (void)ino_map_put(&s->hidden, u, 0);
    return 0;
}

/* Rewrite the map as a version 2 map from what was loaded (a version 1
 * map of this upper: its numbers hold).  In place, as a discarded map is
 * started again: the stage is not sealed while a run has it open, so a
 * crash before the seal leaves it interrupted, never applied. */
static int origin_rewrite(struct stage *s) {
    char hdr[STAGE_ORIGIN_HEADER_MAX];
    int m = stage_origin_header(s->upper_fd, true, hdr, sizeof hdr);
    if (m < 0)
        return m;
    if (ftruncate(s->origin_fd, 0) < 0)
        return -errno;
    _cleanup_free_ char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f)
        return -ENOMEM;
    fputs(hdr, f);
    for (size_t i = 0; i < s->origins.cap; i++)
        if (s->origins.keys[i] && s->origins.vals[i])
            fprintf(f, "%" PRIu64 " %" PRIu64 "\n", s->origins.keys[i], s->origins.vals[i]);
    for (size_t i = 0; i < s->hidden.cap; i++)
        if (s->hidden.keys[i] && s->hidden.vals[i])
            fprintf(f, "%" PRIu64 " %" PRIu64 " +\n", s->hidden.keys[i], s->hidden.vals[i]);
    if (fclose(f) != 0)
        return -ENOMEM;
    return write_full(s->origin_fd, buf, blen);
}

int stage_origin_load(struct stage *s) {
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
    bool legacy = false;
    int valid = 0;
    if (n > 0 && line[n - 1] == '\n') {
        valid = stage_origin_header_check(s->upper_fd, line, (size_t)n - 1, &legacy);
        if (valid < 0)
            return valid;
    }
    if (!valid) {
        /* New file, or a stage that moved to another file system (or was
         * copied): start a fresh map (the old inode numbers mean nothing
         * here). */
        char hdr[STAGE_ORIGIN_HEADER_MAX];
        int m = stage_origin_header(s->upper_fd, false, hdr, sizeof hdr);
        if (m < 0)
            return m;
        if (ftruncate(fd, 0) < 0)
            return -errno;
        return write_full(fd, hdr, (size_t)m);
    }
    bool v1 = strncmp(line, "pvisor-origin 1 ", 16) == 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            continue;
        uint64_t u, l;
        int k = stage_origin_parse_line(line, (size_t)n - 1, &u, &l);
        if (k < 0)
            continue;
        int r = origin_put(s, u, l, k == STAGE_ORIGIN_HIDDEN);
        if (r < 0 && r != -EINVAL)
            return r;
    }
    return v1 ? origin_rewrite(s) : 0;
}

static int origin_write(struct stage *s, uint64_t u, uint64_t l, bool forget) {
    char buf[64];
    pthread_mutex_lock(&s->lock);
    /* another live copy shows l already: this one is recorded, not shown
     * (two different files must not share a number in the view) */
    uint64_t cur = 0, cnt = 0;
    bool hidden =
        !forget && ino_map_get(&s->lowers, l, &cnt) && cnt > 0 && !(ino_map_get(&s->origins, u, &cur) && cur == l);
    int m = forget   ? snprintf(buf, sizeof buf, "%" PRIu64 " -\n", u)
            : hidden ? snprintf(buf, sizeof buf, "%" PRIu64 " %" PRIu64 " +\n", u, l)
                     : snprintf(buf, sizeof buf, "%" PRIu64 " %" PRIu64 "\n", u, l);
    int r = m < 0 || (size_t)m >= sizeof buf ? -EOVERFLOW : origin_put(s, u, forget ? 0 : l, hidden);
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
    pthread_mutex_lock(&s->lock);
    bool known = ino_map_get(&s->origins, upper_ino, &dummy) || ino_map_get(&s->hidden, upper_ino, &dummy);
    pthread_mutex_unlock(&s->lock);
    if (!known)
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
