/* changeset-json.c: a changeset as JSON (lc_changeset_to_json; the
 * review's and apply's --json, docs/lifecycle.md), split from changeset.c,
 * whose walk makes the changeset. */
#include "lifecycle/lc-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

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
