/* run_home_discard.c: what the command wrote in HOME's copy-on-write view,
 * which the run discards at its end (the view's throwaway stage is
 * removed): counted before the removal, said on stderr once the run ends,
 * recorded in the Bundle (home_discarded).
 *
 * The count reads the stage's upper/ (docs/stage-format.md) beside HOME
 * itself (the view's lower) through directory descriptors, never following
 * a symlink (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW: every name in upper/ is the
 * command's).  What it counts:
 *   files        non-directories in upper/ other than whiteouts: files the
 *                command created or changed (a copy-up), symlinks, fifos;
 *   directories  directories in upper/ that HOME has no directory for (a
 *                copied-up parent of a write is not one);
 *   deleted      names of HOME the view no longer shows: a whiteout over a
 *                name HOME has, and the names of a HOME directory that an
 *                opaque directory hides (rm -rf d; mkdir d) and upper/
 *                does not give again (a directory counts once);
 *   bytes        the sizes of the regular files among files.
 * Stage metadata (user.overlay.* xattrs) is not an entry.  Each entry goes
 * to a group named by its first one or two components (~/notes.md,
 * ~/.config/agent); a directory the command made at the top of HOME is one
 * group.  The walk is bounded (HOME_DISCARD_MAX_ENTRIES entries read,
 * HOME_DISCARD_MAX_DEPTH levels, HOME_DISCARD_MAX_GROUPS groups): past a
 * bound, or at a directory it cannot read, the numbers are lower bounds
 * (at_least).
 *
 * home_discard_count runs on the HOME view's teardown thread with the view
 * unmounted (nothing writes the stage any more) and touches nothing but the
 * struct it fills; sandbox_note_home_discarded, on the run's thread, waits
 * for it (sb->home_counted) before it reads the struct.
 */
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "evidence/bundle.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define HOME_DISCARD_MAX_ENTRIES 100000
#define HOME_DISCARD_MAX_DEPTH 64 /* two descriptors a level */
#define HOME_DISCARD_BUNDLE_PATHS 20
#define HOME_DISCARD_NOTE_PATHS 4

struct walk {
    struct home_discard *d;
    uint64_t read; /* entries read (upper/ and hidden HOME names) */
    /* the view's masks (credential locations, relative to HOME), which
     * the command never saw: a HOME name among them that an opaque
     * directory hides was not deleted by it (rm -rf ~/.config; mkdir
     * ~/.config named ~/.config/gcloud as deleted) */
    const char *const *masks;
    size_t n_masks;
    char rel[PATH_MAX]; /* the directory walked, relative to HOME ("" its top) */
};

enum what { W_FILE, W_DIR, W_DELETED };

/* a + b, at most INT64_MAX (the Bundle's integers are signed: two sparse
 * files of 8 EiB made it negative) */
static uint64_t add_bytes(uint64_t a, uint64_t b) {
    return b > INT64_MAX || a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* The group of key (made on first use, *idx < 0 until then); the counts
 * go to the totals too.  A full table leaves the entry to the totals. */
static void add(struct walk *w, const char *key, int *idx, enum what what, uint64_t bytes) {
    struct home_discard *d = w->d;
    if (*idx < 0 && !d->groups_truncated) {
        if (d->n_groups >= HOME_DISCARD_MAX_GROUPS) {
            d->groups_truncated = true;
        } else {
            if (!d->groups && !(d->groups = calloc(HOME_DISCARD_MAX_GROUPS, sizeof *d->groups))) {
                d->groups_truncated = d->at_least = true;
            } else if ((d->groups[d->n_groups].path = strdup(key))) {
                *idx = (int)d->n_groups++;
            } else {
                d->groups_truncated = true;
            }
        }
    }
    struct home_discard_group *g = *idx >= 0 ? &d->groups[*idx] : NULL;
    switch (what) {
    case W_FILE:
        d->files++;
        d->bytes = add_bytes(d->bytes, bytes);
        if (g)
            g->files++, g->bytes = add_bytes(g->bytes, bytes);
        break;
    case W_DIR:
        d->dirs++;
        if (g)
            g->dirs++;
        break;
    case W_DELETED:
        d->deleted++;
        if (g)
            g->deleted++;
        break;
    }
}

/* Is name, in the directory walked, one of the view's masks? */
static bool masked(const struct walk *w, const char *name) {
    size_t rl = strlen(w->rel), nl = strlen(name);
    for (size_t i = 0; i < w->n_masks; i++) {
        const char *m = w->masks[i];
        if ((rl == 0 || (strncmp(m, w->rel, rl) == 0 && m[rl] == '/')) &&
            strncmp(m + (rl ? rl + 1 : 0), name, nl) == 0 && m[(rl ? rl + 1 : 0) + nl] == '\0')
            return true;
    }
    return false;
}

static bool is_whiteout(const struct stat *st) {
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int fd) {
    char v[2];
    ssize_t n = fgetxattr(fd, "user.overlay.opaque", v, sizeof v);
    return n == 1 && v[0] == 'y';
}

/* Where HOME has a directory name below lower (-1: none or no lower); a
 * directory it may not read is opened O_PATH (*ret_unreadable), which
 * still answers fstatat. */
static int open_lower(int lower, const char *name, bool *ret_unreadable) {
    *ret_unreadable = false;
    if (lower < 0)
        return -1;
    int fd = openat(lower, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        fd = openat(lower, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *ret_unreadable = fd >= 0;
    }
    return fd;
}

/* The group key of name in a directory at depth (0: HOME's top), top the
 * name of its top-level ancestor, group the key fixed for the whole
 * directory (NULL at depth 0, and at depth 1 below a directory HOME has). */
static void key_of(char *buf, size_t size, unsigned depth, const char *top, const char *group, const char *name) {
    if (group)
        snprintf(buf, size, "%s", group);
    else if (depth == 0)
        snprintf(buf, size, "%s", name);
    else
        snprintf(buf, size, "%s/%s", top, name);
}

/* The names of HOME's directory lower that the opaque directory upper
 * (or one below it) hides and does not give again: deleted. */
static void count_hidden(struct walk *w, int upper, int lower, unsigned depth, const char *top, const char *group,
                         int *group_idx) {
    _cleanup_closedir_ DIR *dir = NULL;
    if (dup_opendir(lower, &dir) < 0) {
        w->d->at_least = true;
        return;
    }
    struct dirent *e;
    while ((e = readdir_no_dots(dir))) {
        if (++w->read > HOME_DISCARD_MAX_ENTRIES) {
            w->d->at_least = true;
            return;
        }
        struct stat st;
        if (fstatat(upper, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !is_whiteout(&st))
            continue; /* given again (counted in upper/'s walk) */
        if (masked(w, e->d_name))
            continue;
        char key[2 * NAME_MAX + 2];
        key_of(key, sizeof key, depth, top, group, e->d_name);
        int own = -1;
        add(w, key, group ? group_idx : &own, W_DELETED, 0);
    }
    if (errno)
        w->d->at_least = true;
}

/* upper: a directory of upper/ at depth; lower: HOME's directory of the
 * same name, or -1; hidden: upper is opaque or lies in an opaque one (the
 * view shows nothing of lower below it). */
static void walk(struct walk *w, int upper, int lower, bool lower_unreadable, bool hidden, unsigned depth,
                 const char *top, const char *group, int *group_idx) {
    _cleanup_closedir_ DIR *dir = NULL;
    if (dup_opendir(upper, &dir) < 0) {
        w->d->at_least = true;
        return;
    }
    struct dirent *e;
    errno = 0;
    while ((e = readdir_no_dots(dir))) {
        if (++w->read > HOME_DISCARD_MAX_ENTRIES) {
            w->d->at_least = true;
            return;
        }
        const char *name = e->d_name;
        char key[2 * NAME_MAX + 2];
        key_of(key, sizeof key, depth, top, group, name);
        int own = -1, *idx = group ? group_idx : &own;
        struct stat st, lst;
        if (fstatat(upper, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            w->d->at_least = true;
            continue;
        }
        if (is_whiteout(&st)) {
            /* under an opaque directory, count_hidden counts HOME's name */
            if (!hidden && lower >= 0 && masked(w, name))
                continue; /* the view's own whiteout, should its server keep one here */
            if (!hidden && lower >= 0 && fstatat(lower, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
                add(w, key, idx, W_DELETED, 0);
            else if (!hidden && lower >= 0 && errno != ENOENT)
                w->d->at_least = true;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            add(w, key, idx, W_FILE, S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
            continue;
        }
        bool sub_unreadable = false;
        /* a directory the command made where the view masks one (mkdir
         * ~/.config/gcloud): its own, nothing of HOME's below it shown, so
         * nothing there deleted (HOME's masked files were counted so) */
        _cleanup_close_ int sub_lower = lower >= 0 && masked(w, name) ? -1 : open_lower(lower, name, &sub_unreadable);
        if (sub_lower < 0)
            add(w, key, idx, W_DIR, 0);
        if (depth + 1 >= HOME_DISCARD_MAX_DEPTH) {
            w->d->at_least = true;
            continue;
        }
        _cleanup_close_ int sub = openat(upper, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            w->d->at_least = true;
            continue;
        }
        /* below depth 0, or below a directory the command made at the top,
         * every entry belongs to the group of this name */
        bool keyed = group || depth >= 1 || sub_lower < 0;
        size_t rl = strlen(w->rel);
        int k = snprintf(w->rel + rl, sizeof w->rel - rl, "%s%s", rl ? "/" : "", name);
        if (k < 0 || (size_t)k >= sizeof w->rel - rl) {
            w->rel[rl] = '\0';
            w->d->at_least = true;
            continue;
        }
        walk(w, sub, sub_lower, sub_unreadable, hidden || is_opaque(sub), depth + 1, depth == 0 ? name : top,
             keyed ? key : NULL, idx);
        w->rel[rl] = '\0';
        errno = 0;
    }
    if (errno)
        w->d->at_least = true;
    if (hidden && lower >= 0) {
        if (lower_unreadable)
            w->d->at_least = true;
        else
            count_hidden(w, upper, lower, depth, top, group, group_idx);
    }
}

/* The cache directory's groups (~/.cache/...: what programs make again)
 * after the others; by name within each. */
static bool is_cache(const char *p) {
    return strncmp(p, ".cache", 6) == 0 && (p[6] == '\0' || p[6] == '/');
}

static int group_cmp(const void *a, const void *b) {
    const struct home_discard_group *x = a, *y = b;
    bool cx = is_cache(x->path), cy = is_cache(y->path);
    if (cx != cy)
        return cx ? 1 : -1;
    return strcmp(x->path, y->path);
}

void home_discard_count(int upper_fd, int lower_fd, const char *const *masks, size_t n_masks,
                        struct home_discard *ret) {
    struct walk w = {.d = ret, .masks = masks, .n_masks = n_masks};
    int none = -1;
    walk(&w, upper_fd, lower_fd, false, false, 0, NULL, NULL, &none);
    /* groups of directories copied up for nothing below them counted */
    size_t n = 0;
    for (size_t i = 0; i < ret->n_groups; i++) {
        struct home_discard_group *g = &ret->groups[i];
        if (g->files || g->dirs || g->deleted)
            ret->groups[n++] = *g;
        else
            free(g->path);
    }
    ret->n_groups = n;
    if (n)
        qsort(ret->groups, n, sizeof *ret->groups, group_cmp);
    ret->counted = true;
}

void home_discard_free(struct home_discard *d) {
    for (size_t i = 0; i < d->n_groups; i++)
        free(d->groups[i].path);
    free(d->groups);
    *d = (struct home_discard){0};
}

/* 3.4 MB (SI units, as du --si) */
static void size_text(uint64_t b, char *buf, size_t size) {
    static const char *const unit[] = {"kB", "MB", "GB", "TB", "PB"};
    if (b < 1000) {
        snprintf(buf, size, "%" PRIu64 " B", b);
        return;
    }
    double v = (double)b / 1000;
    size_t u = 0;
    while (v >= 999.95 && u + 1 < ARRAY_SIZE(unit))
        v /= 1000, u++;
    snprintf(buf, size, "%.1f %s", v, unit[u]);
}

/* A group's path as the Bundle's JSON carries it: path, or path_hex for
 * a name that is not UTF-8. */
static json_t *group_json(const struct home_discard_group *g) {
    json_t *o = json_pack("{s:I, s:I, s:I, s:I}", "files", (json_int_t)g->files, "directories", (json_int_t)g->dirs,
                          "deleted", (json_int_t)g->deleted, "bytes", (json_int_t)g->bytes);
    json_t *p = json_string(g->path);
    if (o && p) {
        json_object_set_new(o, "path", p);
    } else if (o) {
        _cleanup_free_ char *hex = hex_encode(g->path);
        json_object_set_new(o, "path_hex", json_string(hex ? hex : ""));
    }
    return o;
}

static json_t *discard_json(const struct home_discard *d) {
    json_t *paths = json_array();
    for (size_t i = 0; paths && i < d->n_groups && i < HOME_DISCARD_BUNDLE_PATHS; i++)
        json_array_append_new(paths, group_json(&d->groups[i]));
    return json_pack("{s:I, s:I, s:I, s:I, s:b, s:o*, s:b}", "files", (json_int_t)d->files, "directories",
                     (json_int_t)d->dirs, "deleted", (json_int_t)d->deleted, "bytes", (json_int_t)d->bytes, "at_least",
                     d->at_least, "paths", paths, "paths_truncated",
                     d->groups_truncated || d->n_groups > HOME_DISCARD_BUNDLE_PATHS);
}

/* "wrote 2 files", "made at least 1 directory" */
static void counted(char *buf, size_t size, const char *verb, bool at_least, uint64_t n, const char *one,
                    const char *many) {
    snprintf(buf, size, "%s %s%" PRIu64 " %s", verb, at_least ? "at least " : "", n, n == 1 ? one : many);
}

static void say(const struct home_discard *d) {
    char parts[3][160];
    size_t n = 0;
    if (d->files) {
        char size[32], files[96];
        size_text(d->bytes, size, sizeof size);
        counted(files, sizeof files, "wrote", d->at_least, d->files, "file", "files");
        snprintf(parts[n++], sizeof parts[0], "%s (%s)", files, size);
    }
    if (d->dirs)
        counted(parts[n++], sizeof parts[0], "made", d->at_least, d->dirs, "directory", "directories");
    if (d->deleted)
        counted(parts[n++], sizeof parts[0], "deleted", d->at_least, d->deleted, "name", "names");
    char what[3 * 160 + 8];
    snprintf(what, sizeof what, "%s%s%s%s%s", parts[0],
             n == 2   ? " and "
             : n == 3 ? ", "
                      : "",
             n > 1 ? parts[1] : "", n == 3 ? " and " : "", n == 3 ? parts[2] : "");
    char list[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < d->n_groups && i < HOME_DISCARD_NOTE_PATHS; i++) {
        /* the command's names: escaped for the terminal */
        _cleanup_free_ char *e = term_escape(d->groups[i].path);
        int k = snprintf(list + len, sizeof list - len, "%s~/%.200s", i ? ", " : "", e ? e : "?");
        len += k > 0 && (size_t)k < sizeof list - len ? (size_t)k : 0;
    }
    size_t more = d->n_groups > HOME_DISCARD_NOTE_PATHS ? d->n_groups - HOME_DISCARD_NOTE_PATHS : 0;
    if (more || d->groups_truncated)
        snprintf(list + len, sizeof list - len, "%sand %s%zu more", len ? ", " : "", d->groups_truncated ? "over " : "",
                 more);
    fprintf(stderr,
            "pvisor run: the command %s in HOME's view, discarded at exit: %s (--allow-write PATH keeps a path's "
            "writes)\n",
            what, list);
}

void sandbox_note_home_discarded(struct sandbox *sb) {
    if (!sb->home_thread_started || !sb->home_counted_ready || sb->home_count_waited)
        return;
    while (sem_wait(&sb->home_counted) < 0 && errno == EINTR)
        ;
    sb->home_count_waited = true;
    const struct home_discard *d = &sb->home_discard;
    if (!d->counted || !sb->ctx)
        return;
    json_t *j = discard_json(d);
    if (j)
        bundle_set_json(sb->ctx->bundle, "home_discarded", j);
    if (d->files || d->dirs || d->deleted)
        say(d);
}
