/* changeset-json.c: a changeset as JSON (lc_changeset_to_json; the
 * review's and apply's --json, docs/lifecycle.md), split from changeset.c,
 * whose walk makes the changeset. */
#include "lifecycle/lc-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A name as JSON: the string when it is UTF-8, else null and KEY_hex. */
static void set_name(json_t *o, const char *key, const char *v) {
    if (!v) {
        json_object_set_new(o, key, json_null());
        return;
    }
    if (lc_utf8_valid(v)) {
        json_object_set_new(o, key, json_string(v));
        return;
    }
    char *hex = hex_encode(v);
    if (hex) {
        char k[32];
        snprintf(k, sizeof k, "%s_hex", key);
        json_object_set_new(o, k, json_string(hex));
        free(hex);
    }
    json_object_set_new(o, key, json_null());
}

static json_t *side_json(enum lc_type t, uint32_t mode, uint64_t size, const char *target) {
    if (t == LC_NONE)
        return json_null();
    char m[8];
    snprintf(m, sizeof m, "%04o", mode);
    json_t *o = json_pack("{s:s, s:s}", "type", lc_type_name(t), "mode", m);
    if (t == LC_REG)
        json_object_set_new(o, "size", json_integer((json_int_t)size));
    if (t == LC_LNK && target)
        set_name(o, "target", target);
    return o;
}

json_t *lc_changeset_to_json(const struct lc_changeset *cs) {
    json_t *changes = json_array();
    json_t *warnings = json_array();
    size_t renamed = 0, mode_changed = 0, symlink_changed = 0;
    for (size_t i = 0; i < cs->n; i++) {
        const struct lc_entry *e = &cs->entries[i];
        json_t *chl = json_array();
        static const char *const chn[] = {"content", "mode", "target", "xattr", "owner"};
        for (unsigned b = 0; b < ARRAY_SIZE(chn); b++)
            if (e->changes & (1u << b))
                json_array_append_new(chl, json_string(chn[b]));
        json_t *wl = json_array();
        for (unsigned b = 0; b < LC_W__COUNT; b++)
            if (e->warnings & (1u << b)) {
                json_array_append_new(wl, json_string(lc_warning_name(b)));
                json_t *wo = json_object();
                set_name(wo, "path", e->path);
                json_object_update_new(
                    wo, json_pack("{s:s, s:s}", "warning", lc_warning_name(b), "message", lc_warning_message(b)));
                /* a name that may pass for another: its code points */
                if ((1u << b) == LC_W_LOOKALIKE_NAME) {
                    char *cp = lc_name_codepoints(e->path);
                    json_object_set_new(wo, "path_codepoints", cp ? json_string(cp) : json_null());
                    free(cp);
                }
                /* the index's hidden entries, their first names */
                if ((1u << b) == LC_W_GIT_HIDES && (e->index_hides || e->index_hides_unread)) {
                    json_t *hp = json_array();
                    for (size_t k = 0; k < e->n_index_hides_names; k++) {
                        json_t *one = json_object(); /* {"path"}, or {"path_hex"} as elsewhere */
                        set_name(one, "path", e->index_hides_names[k]);
                        json_array_append_new(hp, one);
                    }
                    json_object_set_new(wo, "index_hides",
                                        json_pack("{s:I, s:o, s:b}", "count", (json_int_t)e->index_hides, "paths", hp,
                                                  "unread", e->index_hides_unread));
                }
                json_array_append_new(warnings, wo);
            }
        if (e->renamed_from)
            renamed++;
        if (e->changes & LC_CH_MODE)
            mode_changed++;
        if (e->changes & LC_CH_TARGET)
            symlink_changed++;
        json_t *co = json_object();
        set_name(co, "path", e->path);
        json_object_update_new(
            co, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "kind", lc_kind_name(e->kind), "changes", chl, "old",
                          side_json(e->old_type, e->old_mode, e->old_size, e->old_target), "new",
                          e->kind == LC_DELETED ? json_null()
                                                : side_json(e->new_type, e->new_mode, e->new_size, e->new_target),
                          "warnings", wl, "conflict", e->conflict ? json_string(e->conflict) : json_null()));
        set_name(co, "renamed_from", e->renamed_from);
        if (e->binary) /* diff shows it as "Binary files ... differ": its content is not in the diff */
            json_object_set_new(json_object_get(co, "new"), "binary", json_true());
        if (e->changes & LC_CH_OWNER) {
            json_object_set_new(json_object_get(co, "old"), "owner",
                                json_pack("[I, I]", (json_int_t)e->old_uid, (json_int_t)e->old_gid));
            json_object_set_new(json_object_get(co, "new"), "owner",
                                json_pack("[I, I]", (json_int_t)e->new_uid, (json_int_t)e->new_gid));
        }
        json_array_append_new(changes, co);
    }
    json_t *summary =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "added", (json_int_t)cs->count[LC_ADDED],
                  "deleted", (json_int_t)cs->count[LC_DELETED], "modified", (json_int_t)cs->count[LC_MODIFIED],
                  "type_changed", (json_int_t)cs->count[LC_TYPE_CHANGED], "renamed", (json_int_t)renamed,
                  "mode_changed", (json_int_t)mode_changed, "symlink_changed", (json_int_t)symlink_changed, "conflicts",
                  (json_int_t)cs->n_conflicts, "bytes_new", (json_int_t)cs->bytes_new, "bytes_old",
                  (json_int_t)cs->bytes_old, "binary", (json_int_t)cs->n_binary);
    return json_pack("{s:o, s:o, s:o}", "summary", summary, "changes", changes, "warnings", warnings);
}

/* An xattr value as JSON into o: a string when it is UTF-8 without NUL,
 * else null and KEY_hex. */
static void set_value(json_t *o, const char *key, const char *v, size_t len) {
    if (!v) {
        json_object_set_new(o, key, json_null());
        return;
    }
    _cleanup_free_ char *z = malloc(len + 1);
    if (!z)
        return;
    memcpy(z, v, len);
    z[len] = '\0';
    if (!memchr(v, '\0', len) && lc_utf8_valid(z)) {
        json_object_set_new(o, key, json_stringn(z, len));
        return;
    }
    _cleanup_free_ char *hex = malloc(2 * len + 1);
    if (hex) {
        for (size_t i = 0; i < len; i++)
            snprintf(hex + 2 * i, 3, "%02x", (unsigned char)v[i]);
        hex[2 * len] = '\0';
        char k[32];
        snprintf(k, sizeof k, "%s_hex", key);
        json_object_set_new(o, k, json_string(hex));
    }
    json_object_set_new(o, key, json_null());
}

/* The user xattrs of path beneath dirfd (from_upper: as the agent saw
 * them, lc_xattrs_read), of a regular file or directory. */
static int xattrs_at(int dirfd, const char *path, enum lc_type t, bool from_upper, struct lc_xattrs *ret) {
    *ret = (struct lc_xattrs){0};
    int fd = lc_open_beneath(dirfd, path,
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | (t == LC_DIR ? O_DIRECTORY : 0), 0);
    if (fd < 0)
        return fd;
    int r = lc_xattrs_read(fd, from_upper, ret);
    close(fd);
    return r;
}

json_t *lc_entry_xattrs_json(const struct lc_stage *st, const struct lc_entry *e, int *ret_err) {
    *ret_err = 0;
    json_t *out = json_array();
    if (!out) {
        *ret_err = -ENOMEM;
        return NULL;
    }
    bool new_side = e->kind != LC_DELETED && (e->new_type == LC_REG || e->new_type == LC_DIR);
    bool old_side = e->kind == LC_MODIFIED && (e->old_type == LC_REG || e->old_type == LC_DIR);
    if (!new_side || (e->kind == LC_MODIFIED && !(e->changes & LC_CH_XATTR)))
        return out;
    struct lc_xattrs xn = {0}, xo = {0};
    int r = xattrs_at(st->upper_fd, e->path, e->new_type, true, &xn);
    if (r >= 0 && old_side)
        r = xattrs_at(st->ws_fd, e->path, e->old_type, false, &xo);
    /* both sorted by name: a merge */
    for (size_t i = 0, j = 0; r >= 0 && (i < xo.n || j < xn.n);) {
        int c = i == xo.n ? 1 : j == xn.n ? -1 : strcmp(xo.names[i], xn.names[j]);
        const char *name = c <= 0 ? xo.names[i] : xn.names[j];
        const char *ov = c <= 0 ? xo.values[i] : NULL, *nv = c >= 0 ? xn.values[j] : NULL;
        size_t ol = c <= 0 ? xo.lens[i] : 0, nl = c >= 0 ? xn.lens[j] : 0;
        i += c <= 0;
        j += c >= 0;
        if (ov && nv && ol == nl && memcmp(ov, nv, ol) == 0)
            continue;
        json_t *o = json_object();
        set_name(o, "name", name);
        set_value(o, "old", ov, ol);
        set_value(o, "new", nv, nl);
        json_array_append_new(out, o);
    }
    lc_xattrs_free(&xn);
    lc_xattrs_free(&xo);
    if (r < 0) {
        json_decref(out);
        *ret_err = r;
        return NULL;
    }
    return out;
}

/* The widest xattr value lc_xattr_change_text shows (the JSON has it
 * whole): its start and its end. */
#define XATTR_VALUE_MAX 120

/* One side of lc_xattr_change_text into f. */
static void xattr_value_text(FILE *f, const json_t *x, const char *key) {
    char hk[16];
    snprintf(hk, sizeof hk, "%s_hex", key);
    const json_t *jv = json_object_get(x, key);
    const char *v = json_string_value(jv), *hex = json_string_value(json_object_get(x, hk));
    if (!v && !hex) {
        fputs("none", f);
        return;
    }
    size_t len = v ? json_string_length(jv) : strlen(hex) / 2, l = v ? len : strlen(hex);
    _cleanup_free_ char *cut = strdup(v ? v : hex);
    if (!cut)
        return;
    if (l > XATTR_VALUE_MAX) {
        /* the start and the end (a cut UTF-8 sequence shows as \xNN) */
        memcpy(cut + XATTR_VALUE_MAX / 2, "...", 3);
        memmove(cut + XATTR_VALUE_MAX / 2 + 3, cut + l - XATTR_VALUE_MAX / 2, XATTR_VALUE_MAX / 2 + 1);
    }
    _cleanup_free_ char *d = lc_display_name(cut);
    fprintf(f, v ? "\"%s\" (%zu byte%s)" : "hex %s (%zu byte%s)", d ? d : "?", len, len == 1 ? "" : "s");
}

char *lc_xattr_change_text(const json_t *x) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    const char *name = json_string_value(json_object_get(x, "name"));
    _cleanup_free_ char *dn = lc_display_name(name ? name : json_string_value(json_object_get(x, "name_hex")));
    fprintf(f, "xattr %s: ", dn ? dn : "?");
    xattr_value_text(f, x, "old");
    fputs(" -> ", f);
    xattr_value_text(f, x, "new");
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
