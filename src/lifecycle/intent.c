/* intent.c: the plan of an apply, and its intent journal STAGE/apply-intent
 * (docs/lifecycle.md, "Crash safety"): what apply means to do, durable
 * before the workspace changes, so that an interrupted apply is rolled
 * forward by the next one. */
#include "lifecycle/apply-plan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#define INTENT_MAX (1u << 30)
#define INTENT_TMP_PREFIX "." LC_APPLY_INTENT "."

void lc_plan_free(struct plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].path);
        free(p->v[i].new_target);
    }
    free(p->v);
    p->v = NULL;
    p->n = 0;
    for (size_t i = 0; i < p->n_unlocked; i++)
        free(p->unlocked[i].path);
    free(p->unlocked);
    p->unlocked = NULL;
    p->n_unlocked = 0;
}

/* Is st the directory u recorded (by identity, when known)? */
static bool same_dir(const struct stat *st, const struct plan_unlocked *u) {
    return S_ISDIR(st->st_mode) && (!u->ino || ((uint64_t)st->st_dev == u->dev && (uint64_t)st->st_ino == u->ino));
}

/* Is st's mode one that u's directory has while apply runs: its own
 * (before the unlock) or with u+wx (after it)?  Another mode is not ours
 * to change (the user's chmod since, or an intent written by another
 * program than pvisor naming a mode the directory never had). */
static bool mode_ours(const struct stat *st, const struct plan_unlocked *u) {
    uint32_t m = st->st_mode & 07777;
    return m == u->mode || m == (u->mode | 0300);
}

int lc_plan_set_unlocked(int ws_fd, const struct plan *p, bool unlock, const char **ret_failed) {
    for (size_t i = 0; i < p->n_unlocked; i++) {
        const struct plan_unlocked *u = &p->unlocked[i];
        mode_t m = unlock ? (u->mode | 0300) : u->mode;
        int r;
        struct stat st;
        if (!u->path[0]) {
            r = fstat(ws_fd, &st) < 0                     ? -errno
                : !same_dir(&st, u) || !mode_ours(&st, u) ? 0
                : fchmod(ws_fd, m) < 0                    ? -errno
                                                          : 0;
        } else {
            const char *name;
            _cleanup_close_ int parent = lc_open_parent(ws_fd, u->path, &name);
            if (parent == -ENOENT || parent == -ENOTDIR || parent == -ELOOP)
                continue; /* gone with what held it */
            if (parent >= 0 &&
                (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !same_dir(&st, u) || !mode_ours(&st, u)))
                continue; /* deleted, no longer a directory, another one, or another mode */
            r = parent < 0 ? parent : chmod_nofollow_at(parent, name, m);
        }
        if (r < 0 && r != -ENOENT) {
            *ret_failed = u->path[0] ? u->path : ".";
            return r;
        }
    }
    return 0;
}

void lc_plan_tmp_name(const struct plan *p, size_t i, char buf[64]) {
    snprintf(buf, 64, ".pvisor-apply-%s-%zu", p->id, i);
}

/* ---- intent journal ---- */

/* "key":"value" (JSON-escaped), or "key":null,"key_hex":"..." for a name
 * that is not UTF-8 (as the journal does). */
static void put_name(FILE *f, const char *key, const char *v) {
    const unsigned char *u = (const unsigned char *)v;
    if (!lc_utf8_valid(v)) {
        fprintf(f, "\"%s\":null,\"%s_hex\":\"", key, key);
        for (; *u; u++)
            fprintf(f, "%02x", *u);
        fputc('"', f);
        return;
    }
    fprintf(f, "\"%s\":\"", key);
    for (; *u; u++) {
        if (*u == '"' || *u == '\\')
            fprintf(f, "\\%c", *u);
        else if (*u < 0x20)
            fprintf(f, "\\u%04x", *u);
        else
            fputc(*u, f);
    }
    fputc('"', f);
}

/* Publish the intent: temp file, rename.  When durable (the stage is not on
 * the workspace's file system), the file and the stage directory are
 * fsynced here; otherwise the intent is made durable, bytes and name, by
 * one syncfs() before the first name appears in the workspace (see
 * ensure_intent_durable).  A crash before that leaves no name in the
 * workspace, and an intent that is absent, a lost temp file
 * (remove_lost_intents), or cut short (discarded by the next apply). */
static int intent_publish(int stage_dir_fd, const char *txt, size_t len, bool durable) {
    /* its temp file is INTENT_TMP_PREFIX "XXXXXXXX.tmp" */
    return write_file_atomic_as(stage_dir_fd, LC_APPLY_INTENT, txt, len, 0600,
                                durable ? WRITE_SYNC_FILE_AND_DIR : WRITE_NO_SYNC);
}

/* The intent document (docs/lifecycle.md), written directly: one entry
 * per plan path, every path and target included whatever its bytes. */
int lc_intent_write(int stage_dir_fd, const struct plan *p, bool durable) {
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    if (!f)
        return -ENOMEM;
    fprintf(f, "{\"format\":1,\"apply_id\":\"%s\",\"subset\":%s,\"entries\":[", p->id, p->subset ? "true" : "false");
    for (size_t i = 0; i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        fputs(i ? ",{" : "{", f);
        put_name(f, "path", e->path);
        fputs(",\"old\":", f);
        if (e->old_type == LC_NONE) {
            fputs("null", f);
        } else {
            fprintf(f, "{\"type\":\"%s\",\"mode\":%u", lc_type_name(e->old_type), (unsigned)e->old_mode);
            if (e->old_has_sha) {
                char hex[65];
                lc_hex(e->old_sha, hex);
                fprintf(f, ",\"sha256\":\"%s\"", hex);
            }
            if (e->old_has_xsha) {
                char hex[65];
                lc_hex(e->old_xsha, hex);
                fprintf(f, ",\"xattrs_sha256\":\"%s\"", hex);
            }
            fputc('}', f);
        }
        fputs(",\"new\":", f);
        if (e->new_type == LC_NONE) {
            fputs("null", f);
        } else {
            fprintf(f, "{\"type\":\"%s\",\"mode\":%u,\"atime\":[%lld,%ld],\"mtime\":[%lld,%ld]",
                    lc_type_name(e->new_type), (unsigned)e->new_mode, (long long)e->atime.tv_sec, e->atime.tv_nsec,
                    (long long)e->mtime.tv_sec, e->mtime.tv_nsec);
            if (e->new_target) {
                fputc(',', f);
                put_name(f, "target", e->new_target);
            }
            fputc('}', f);
        }
        fputc('}', f);
    }
    fputs("]", f);
    if (p->n_unlocked) {
        fputs(",\"unlocked\":[", f);
        for (size_t i = 0; i < p->n_unlocked; i++) {
            fputs(i ? ",{" : "{", f);
            put_name(f, "path", p->unlocked[i].path[0] ? p->unlocked[i].path : ".");
            /* as signed 64-bit numbers: jansson reads no larger integer
             * (an inode number can use all 64 bits) */
            fprintf(f, ",\"mode\":%u,\"dev\":%lld,\"ino\":%lld}", (unsigned)p->unlocked[i].mode,
                    (long long)p->unlocked[i].dev, (long long)p->unlocked[i].ino);
        }
        fputc(']', f);
    }
    fputc('}', f);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed || !txt) {
        free(txt);
        return -ENOMEM;
    }
    int r = intent_publish(stage_dir_fd, txt, len, durable);
    free(txt);
    return r;
}

/* After a subset apply: what it left at each path of the plan, in the
 * journal's format ("type":"none" where it deleted), appended to
 * STAGE/apply-written, whose records replace the journal's preimages in
 * the next changeset (lc_journal_load): without them, a later run over
 * the same stage that changed such a path again made the full apply
 * refuse it, as changed in the workspace since the run, by the subset's
 * own write.  With the digest of the user xattrs the path has in ws_fd
 * now (what apply wrote, files and directories): without it the record
 * replaced the journal's, and a later apply wrote the stage's xattrs over
 * a change the user made after the subset, unseen. */
int lc_applied_record(int stage_dir_fd, int upper_fd, int ws_fd, const struct plan *p) {
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    if (!f)
        return -ENOMEM;
    int r = 0;
    _cleanup_free_ char *old = NULL;
    size_t old_len = 0;
    int rr = read_file_at(stage_dir_fd, LC_APPLY_WRITTEN, 64u << 20, &old, &old_len);
    if (rr < 0 && rr != -ENOENT)
        r = rr;
    if (r == 0 && old_len)
        fwrite(old, 1, old_len, f);
    for (size_t i = 0; r == 0 && i < p->n; i++) {
        const struct plan_ent *e = &p->v[i];
        unsigned char sha[32];
        bool has_sha = false;
        if (e->new_type == LC_REG) {
            _cleanup_close_ int fd = lc_open_beneath(upper_fd, e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
            r = fd < 0 ? fd : lc_sha256_fd(fd, sha);
            has_sha = r == 0;
        } else if (e->new_type == LC_LNK && e->new_target) {
            r = lc_sha256_buf(e->new_target, strlen(e->new_target), sha);
            has_sha = r == 0;
        }
        if (r < 0)
            break;
        unsigned char xsha[32];
        bool has_xsha = false;
        if (e->new_type == LC_REG || e->new_type == LC_DIR) {
            _cleanup_close_ int fd = lc_open_beneath(ws_fd, e->path, O_PATH | O_NOFOLLOW, 0);
            has_xsha = fd >= 0 && pv_user_xattrs_sha256(fd, xsha) > 0;
        }
        fputc('{', f);
        put_name(f, "path", e->path);
        fprintf(f, ",\"type\":\"%s\",\"mode\":%u", lc_type_name(e->new_type),
                e->new_type == LC_NONE ? 0u : (unsigned)e->new_mode);
        if (has_sha) {
            char hex[65];
            lc_hex(sha, hex);
            fprintf(f, ",\"sha256\":\"%s\"", hex);
        }
        if (has_xsha) {
            char hex[65];
            lc_hex(xsha, hex);
            fprintf(f, ",\"xattrs_sha256\":\"%s\"", hex);
        }
        fputs("}\n", f);
    }
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed || !txt) {
        free(txt);
        return r < 0 ? r : -ENOMEM;
    }
    if (r == 0)
        r = write_file_atomic(stage_dir_fd, LC_APPLY_WRITTEN, txt, len, 0600);
    free(txt);
    return r;
}

/* A name written by put_name: malloc'd, NULL if absent or invalid. */
static char *get_name(const json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    if (v)
        return strlen(v) <= LC_MAX_PATH ? strdup(v) : NULL;
    char k[32];
    snprintf(k, sizeof k, "%s_hex", key);
    const char *h = json_string_value(json_object_get(o, k));
    size_t n = h ? strlen(h) : 0;
    if (!h || n % 2 || n / 2 > LC_MAX_PATH)
        return NULL;
    char *out = malloc(n / 2 + 1);
    if (!out || lc_unhex(h, (unsigned char *)out, n / 2) < 0 || memchr(out, 0, n / 2)) {
        free(out);
        return NULL;
    }
    out[n / 2] = '\0';
    return out;
}

static int ts_parse(const json_t *a, struct timespec *t) {
    if (!json_is_array(a) || json_array_size(a) != 2)
        return -EBADMSG;
    t->tv_sec = (time_t)json_integer_value(json_array_get(a, 0));
    t->tv_nsec = (long)json_integer_value(json_array_get(a, 1));
    if (t->tv_nsec < 0 || t->tv_nsec > 999999999)
        return -EBADMSG;
    return 0;
}

/* Is dir ("" the workspace) the directory of one of the plan's entries,
 * and mode one that find_locked records (without u+w or u+x)? */
static bool unlocked_plausible(const struct plan *p, const char *dir, uint32_t mode) {
    if ((mode & 0300) == 0300)
        return false;
    size_t dl = strlen(dir);
    for (size_t i = 0; i < p->n; i++) {
        const char *slash = strrchr(p->v[i].path, '/');
        size_t len = slash ? (size_t)(slash - p->v[i].path) : 0;
        if (len == dl && strncmp(p->v[i].path, dir, dl) == 0)
            return true;
    }
    return false;
}

/* Load and validate the intent (it lives in the stage: untrusted input). */
static int intent_load_at(int stage_dir_fd, const char *name, struct plan *p) {
    _cleanup_free_ char *txt = NULL;
    size_t len = 0;
    int r = read_file_at(stage_dir_fd, name, INTENT_MAX, &txt, &len);
    if (r < 0)
        return r;
    json_error_t err;
    json_t *doc = json_loadb(txt, len, 0, &err);
    if (!doc) {
        /* cut short (see intent_publish): empty, a prefix, or blocks that
         * never reached the disk (zeros; the text written has no NUL) */
        if (len == 0 || json_error_code(&err) == json_error_premature_end_of_input || memchr(txt, '\0', len))
            return -ENODATA;
        return json_error_code(&err) == json_error_out_of_memory ? -ENOMEM : -EBADMSG;
    }
    const char *id = json_string_value(json_object_get(doc, "apply_id"));
    json_t *ents = json_object_get(doc, "entries");
    r = -EBADMSG;
    if (!id || strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16 || !json_is_array(ents) ||
        json_array_size(ents) > LC_MAX_ENTRIES)
        goto out;
    memcpy(p->id, id, 17);
    p->subset = json_is_true(json_object_get(doc, "subset"));
    p->v = calloc(json_array_size(ents) + 1, sizeof *p->v);
    if (!p->v) {
        r = -ENOMEM;
        goto out;
    }
    size_t i;
    json_t *je;
    json_array_foreach(ents, i, je) {
        struct plan_ent *e = &p->v[p->n];
        char *path = get_name(je, "path");
        if (!path || !(lc_path_valid(path) || lc_path_is_root(path))) {
            free(path);
            goto out;
        }
        e->path = path;
        p->n++;
        json_t *old = json_object_get(je, "old"), *nw = json_object_get(je, "new");
        if (json_is_object(old)) {
            e->old_type = lc_type_parse(json_string_value(json_object_get(old, "type")));
            e->old_mode = (uint32_t)json_integer_value(json_object_get(old, "mode")) & 07777;
            const char *sha = json_string_value(json_object_get(old, "sha256"));
            const char *xsha = json_string_value(json_object_get(old, "xattrs_sha256"));
            if (e->old_type == LC_NONE || (sha && lc_unhex(sha, e->old_sha, 32) < 0) ||
                (xsha && lc_unhex(xsha, e->old_xsha, 32) < 0))
                goto out;
            e->old_has_sha = sha != NULL;
            e->old_has_xsha = xsha != NULL;
        }
        if (json_is_object(nw)) {
            e->new_type = lc_type_parse(json_string_value(json_object_get(nw, "type")));
            e->new_mode = (uint32_t)json_integer_value(json_object_get(nw, "mode")) & 07777;
            if (e->new_type == LC_NONE || lc_type_special(e->new_type) ||
                ts_parse(json_object_get(nw, "atime"), &e->atime) < 0 ||
                ts_parse(json_object_get(nw, "mtime"), &e->mtime) < 0)
                goto out;
            if (e->new_type == LC_LNK && !(e->new_target = get_name(nw, "target")))
                goto out;
        }
        /* the workspace root: only its mode and xattrs, in place */
        if (lc_path_is_root(e->path) && (e->old_type != LC_DIR || e->new_type != LC_DIR))
            goto out;
    }
    json_t *unl = json_object_get(doc, "unlocked");
    if (unl && (!json_is_array(unl) || json_array_size(unl) > json_array_size(ents) + 1))
        goto out;
    if (json_array_size(unl) && !(p->unlocked = calloc(json_array_size(unl), sizeof *p->unlocked))) {
        r = -ENOMEM;
        goto out;
    }
    json_array_foreach(unl, i, je) {
        char *path = get_name(je, "path");
        json_t *m = json_object_get(je, "mode");
        if (path && strcmp(path, ".") == 0)
            path[0] = '\0';
        if (!path || (path[0] && !lc_path_valid(path)) || !json_is_integer(m) || json_integer_value(m) < 0 ||
            json_integer_value(m) > 07777) {
            free(path);
            goto out;
        }
        /* what find_locked records: a directory the plan changes
         * something in, that its owner could not write or search.  Any
         * other (the workspace itself with mode 0777, a directory no
         * entry is in) is not one apply made writable: the intent lies in
         * the stage, which a program other than pvisor may have written,
         * and the resume would give that directory its mode.  Ignored. */
        if (!unlocked_plausible(p, path, (uint32_t)json_integer_value(m))) {
            free(path);
            continue;
        }
        json_t *dv = json_object_get(je, "dev"), *in = json_object_get(je, "ino");
        p->unlocked[p->n_unlocked] = (struct plan_unlocked){path, (uint32_t)json_integer_value(m),
                                                            json_is_integer(dv) ? (uint64_t)json_integer_value(dv) : 0,
                                                            json_is_integer(in) ? (uint64_t)json_integer_value(in) : 0};
        p->n_unlocked++;
    }
    r = 0;
out:
    json_decref(doc);
    if (r < 0)
        lc_plan_free(p);
    return r;
}

int lc_intent_load(int stage_dir_fd, struct plan *p) {
    return intent_load_at(stage_dir_fd, LC_APPLY_INTENT, p);
}

/* Remove the temp files an intent names (its apply id, each entry's index). */
void lc_intent_remove_temps(int ws_fd, const struct plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        const char *name;
        int parent = lc_open_parent(ws_fd, p->v[i].path, &name);
        if (parent < 0)
            continue;
        char tmp[64];
        lc_plan_tmp_name(p, i, tmp);
        unlinkat(parent, tmp, 0);
        close(parent);
    }
}

/* An apply whose intent rename was lost in a crash (possible only before
 * its first syncfs, so before any workspace name changed) may have left
 * temp files in the workspace; the intent's complete temp file names them.
 * Remove both.  Best effort: an unreadable leftover is only removed. */
void lc_intent_remove_lost(int stage_dir_fd, int ws_fd) {
    int d = dup(stage_dir_fd);
    DIR *dir = d >= 0 ? fdopendir(d) : NULL;
    if (!dir) {
        if (d >= 0)
            close(d);
        return;
    }
    rewinddir(dir); /* the offset is shared with stage_dir_fd, which another listing may have moved */
    struct dirent *de;
    size_t pl = strlen(INTENT_TMP_PREFIX);
    while ((de = readdir(dir))) {
        size_t l = strlen(de->d_name);
        if (l <= pl + 4 || strncmp(de->d_name, INTENT_TMP_PREFIX, pl) != 0 || strcmp(de->d_name + l - 4, ".tmp") != 0)
            continue;
        struct plan p = {0};
        if (intent_load_at(stage_dir_fd, de->d_name, &p) == 0) {
            lc_intent_remove_temps(ws_fd, &p);
            lc_plan_free(&p);
        }
        unlinkat(stage_dir_fd, de->d_name, 0);
    }
    closedir(dir);
}

int lc_apply_remove_temps(int stage_dir_fd, int ws_fd, int upper_fd) {
    struct plan p = {0};
    int r = lc_intent_load(stage_dir_fd, &p);
    lc_intent_remove_lost(stage_dir_fd, ws_fd);
    if (r < 0)
        return r;
    lc_apply_remove_temps_checked(ws_fd, upper_fd, &p);
    /* the read-only directories the interrupted apply made writable */
    (void)lc_plan_set_unlocked(ws_fd, &p, false, &(const char *){NULL});
    lc_plan_free(&p);
    return 0;
}
