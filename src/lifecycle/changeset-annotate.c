/* changeset-annotate.c: once a changeset's walk is done (changeset.c),
 * its entries in path order, and what the review tells of them beyond
 * each entry's own change: renames (the origin map joined with the
 * journal's preimages), renamed files whose content or mode is not what
 * they were renamed from, and the files that make a directory git takes
 * for a repository by itself.  Review only: nothing here changes what
 * apply does, and an allocation failure leaves an annotation out.
 */
#include "lifecycle/lc-internal.h"
#include "stage/stage.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/util.h"

/* Order: component-wise, so a directory precedes everything below it;
 * the workspace root (".") precedes everything. */
static int cmp_path(const char *a, const char *b) {
    bool ra = strcmp(a, ".") == 0, rb = strcmp(b, ".") == 0;
    if (ra || rb)
        return (int)rb - (int)ra;
    for (;; a++, b++) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == '/')
            ca = 1;
        if (cb == '/')
            cb = 1;
        if (ca != cb || !ca)
            return (int)ca - (int)cb;
    }
}

static int cmp_entry(const void *a, const void *b) {
    return cmp_path(((const struct lc_entry *)a)->path, ((const struct lc_entry *)b)->path);
}

static struct lc_entry *find_entry(struct lc_changeset *cs, const char *path) {
    size_t lo = 0, hi = cs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_path(cs->entries[mid].path, path);
        if (c == 0)
            return &cs->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int cmp_pre_ino(const void *a, const void *b) {
    uint64_t x = (*(const struct lc_preimage *const *)a)->ino, y = (*(const struct lc_preimage *const *)b)->ino;
    return x < y ? -1 : x > y;
}

/* Do the regular files at path a below adir and b below bdir differ in
 * content?  (Unreadable: not said to.) */
static bool content_differs(int adir, const char *a, int bdir, const char *b) {
    _cleanup_close_ int fa = lc_open_beneath(adir, a, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    _cleanup_close_ int fb = lc_open_beneath(bdir, b, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    struct stat sa, sb;
    if (fa < 0 || fb < 0 || fstat(fa, &sa) < 0 || fstat(fb, &sb) < 0 || !S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode))
        return false;
    if (sa.st_size != sb.st_size)
        return true;
    bool equal = false;
    return lc_hash_compare_fd(fb, fa, NULL, &equal) == 0 && !equal;
}

/* A renamed file, or one in a renamed directory, whose content is not the
 * content of the workspace file it was renamed from: the review marks it
 * (renamed_changed), since "R new (from old)" reads as a move and the diff
 * shows the whole file as new, the change inside it buried.  Also, in a
 * renamed directory, a file or symlink that was not in the directory it
 * was renamed from (a new file among the moved ones: "A lib/new.c" under
 * "R lib/ (from src)" read as moved, its content one added file among
 * hundreds), a file whose mode, or a symlink whose target, is not the one
 * it had there (a 0600 file made 0644 as it moved), or whose type is not
 * (a file made a symlink). */
static void mark_renamed_changed(struct lc_changeset *cs, int upper_fd, int ws_fd) {
    if (upper_fd < 0 || ws_fd < 0)
        return;
    char prefix[LC_MAX_PATH + 1], old[2 * LC_MAX_PATH + 2];
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        if (e->kind != LC_ADDED || (e->new_type != LC_REG && e->new_type != LC_LNK))
            continue;
        /* the entry itself, or its nearest ancestor, renamed */
        const struct lc_entry *r = e->renamed_from ? e : NULL;
        size_t pl = strlen(e->path);
        if (pl > LC_MAX_PATH)
            continue;
        memcpy(prefix, e->path, pl + 1);
        while (!r) {
            char *slash = strrchr(prefix, '/');
            if (!slash)
                break;
            *slash = '\0';
            const struct lc_entry *p = find_entry(cs, prefix);
            if (p && p->renamed_from)
                r = p;
        }
        if (!r)
            continue;
        int n = snprintf(old, sizeof old, "%s%s", r->renamed_from, e->path + strlen(r->path));
        if (n < 0 || (size_t)n >= sizeof old)
            continue;
        const struct lc_entry *o = find_entry(cs, old);
        bool differs;
        if (!o)
            differs = r != e; /* not in the directory renamed: new there */
        else if (o->kind != LC_DELETED)
            continue;
        else if (o->old_type != e->new_type)
            differs = true; /* a file made a symlink as it moved, or one made a file */
        else if (e->new_type == LC_LNK)
            differs = !o->old_target || !e->new_target || strcmp(o->old_target, e->new_target) != 0;
        else
            differs = o->old_mode != e->new_mode || content_differs(upper_fd, e->path, ws_fd, old);
        if (differs) {
            e->warnings |= LC_W_RENAMED_CHANGED;
            cs->warnings |= LC_W_RENAMED_CHANGED;
        }
    }
}

/* The type (S_IFMT) of dir/name in the workspace as the stage makes it
 * (the upper over the workspace; a whiteout hides), or 0 when absent. */
static mode_t merged_type(int upper_fd, int ws_fd, const char *dir, const char *name) {
    char path[LC_MAX_PATH + 2];
    int n = snprintf(path, sizeof path, "%s%s%s", dir, dir[0] ? "/" : "", name);
    if (n < 0 || (size_t)n >= sizeof path)
        return 0;
    struct stat st;
    const char *base;
    _cleanup_close_ int up = lc_open_parent(upper_fd, path, &base);
    if (up >= 0 && fstatat(up, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return stage_is_whiteout(&st) ? 0 : st.st_mode & S_IFMT;
    _cleanup_close_ int lp = lc_open_parent(ws_fd, path, &base);
    return lp >= 0 && fstatat(lp, base, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & S_IFMT : 0;
}

/* git looks at objects and refs with access(X_OK), which follows
 * symlinks and takes an executable file too: 'objects -> .' and
 * 'refs -> .', or two files made executable, make a repository as well
 * as two directories do (found by a red-team pass and its review), so
 * anything of those names counts (the review does not follow links). */
static bool present(mode_t t) {
    return t != 0;
}

/* A directory not named .git that git takes for a repository by itself
 * (as a bare one, is_git_directory()): a HEAD, and objects/ and refs/ or
 * a commondir.  git run in it or below it (a shell prompt that shows the
 * branch runs it at each cd) reads its config (core.fsmonitor runs a
 * command at 'git status') and runs its hooks, where no .git names it. */
static bool git_dir_like(int upper_fd, int ws_fd, const char *dir) {
    mode_t head = merged_type(upper_fd, ws_fd, dir, "HEAD");
    if (head != S_IFREG && head != S_IFLNK)
        return false;
    mode_t common = merged_type(upper_fd, ws_fd, dir, "commondir");
    return (present(merged_type(upper_fd, ws_fd, dir, "objects")) &&
            present(merged_type(upper_fd, ws_fd, dir, "refs"))) ||
           common == S_IFREG || common == S_IFLNK;
}

/* The files of such a directory that make it one or say what git runs:
 * its HEAD and commondir (git_redirect), config (git_config), hooks
 * (git_hook; a new *.sample as in a .git).  Those inside a .git are
 * warned of by their paths (lc_entry_set_warnings). */
static void mark_git_dir_like(struct lc_changeset *cs, int upper_fd, int ws_fd) {
    if (upper_fd < 0 || ws_fd < 0)
        return;
    char dir[LC_MAX_PATH + 1];
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        size_t pl = strlen(e->path);
        if (e->kind == LC_DELETED || e->new_type == LC_DIR || pl > LC_MAX_PATH)
            continue;
        if (strcmp(e->path, ".git") == 0 || strncmp(e->path, ".git/", 5) == 0 || strstr(e->path, "/.git/"))
            continue;
        memcpy(dir, e->path, pl + 1);
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : dir;
        unsigned bit = 0;
        if (strcmp(base, "HEAD") == 0 || strcmp(base, "commondir") == 0)
            bit = LC_W_GIT_REDIRECT;
        else if (strcmp(base, "config") == 0 || strcmp(base, "config.worktree") == 0)
            bit = LC_W_GIT_CONFIG;
        else if (strcmp(base, "hooks") == 0) /* DIR/hooks itself made a symlink (a file: nothing runs) */
            bit = e->new_type == LC_LNK ? LC_W_GIT_HOOK : 0;
        if (bit) {
            if (slash)
                *slash = '\0';
            else
                dir[0] = '\0';
        } else {
            /* DIR/hooks/NAME */
            size_t bl = strlen(base);
            if (!slash ||
                (e->kind == LC_ADDED && e->new_type == LC_REG && bl > 7 && strcmp(base + bl - 7, ".sample") == 0))
                continue;
            *slash = '\0';
            char *up = strrchr(dir, '/');
            if (strcmp(up ? up + 1 : dir, "hooks") != 0)
                continue;
            if (up)
                *up = '\0';
            else
                dir[0] = '\0';
            bit = LC_W_GIT_HOOK;
        }
        if (git_dir_like(upper_fd, ws_fd, dir)) {
            e->warnings |= bit;
            cs->warnings |= bit;
        }
    }
}

static void detect_renames(struct lc_changeset *cs, const struct lc_ino_pair *orig, size_t n_orig) {
    if (n_orig == 0 || cs->n_pre == 0)
        return;
    const struct lc_preimage **by_ino = malloc(cs->n_pre * sizeof *by_ino);
    if (!by_ino)
        return; /* review only: no rename annotations */
    for (size_t k = 0; k < cs->n_pre; k++)
        by_ino[k] = &cs->pre[k];
    qsort(by_ino, cs->n_pre, sizeof *by_ino, cmp_pre_ino);
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        if (e->kind != LC_ADDED || !e->upper_ino)
            continue;
        uint64_t lino = lc_origin_lookup(orig, n_orig, e->upper_ino, true);
        if (!lino)
            continue;
        struct lc_preimage key = {.ino = lino};
        const struct lc_preimage *kp = &key;
        const struct lc_preimage **hit = bsearch(&kp, by_ino, cs->n_pre, sizeof *by_ino, cmp_pre_ino);
        if (!hit || strcmp((*hit)->path, e->path) == 0)
            continue;
        /* the old path must be deleted in this changeset */
        const struct lc_entry *old = find_entry(cs, (*hit)->path);
        if (old && old->kind == LC_DELETED)
            e->renamed_from = strdup((*hit)->path);
    }
    free(by_ino);
    /* inside a renamed directory only the directory itself is reported */
    char parent[LC_MAX_PATH + 1];
    for (size_t i = cs->n; i-- > 0;) {
        struct lc_entry *e = &cs->entries[i];
        const char *slash = strrchr(e->path, '/');
        if (!e->renamed_from || !slash)
            continue;
        size_t pl = (size_t)(slash - e->path);
        memcpy(parent, e->path, pl);
        parent[pl] = '\0';
        const struct lc_entry *p = find_entry(cs, parent);
        size_t fl = p && p->renamed_from ? strlen(p->renamed_from) : 0;
        if (fl && strncmp(e->renamed_from, p->renamed_from, fl) == 0 && e->renamed_from[fl] == '/' &&
            strcmp(e->renamed_from + fl + 1, slash + 1) == 0) {
            free(e->renamed_from);
            e->renamed_from = NULL;
        }
    }
}

void lc_changeset_annotate(struct lc_changeset *cs, const struct lc_ino_pair *orig, size_t n_orig, int upper_fd,
                           int ws_fd) {
    if (cs->n)
        qsort(cs->entries, cs->n, sizeof *cs->entries, cmp_entry);
    for (size_t i = 0; i < cs->n; i++)
        cs->count[cs->entries[i].kind]++;
    detect_renames(cs, orig, n_orig);
    mark_renamed_changed(cs, upper_fd, ws_fd);
    mark_git_dir_like(cs, upper_fd, ws_fd);
}

size_t lc_changeset_find(const struct lc_changeset *cs, const char *path) {
    const struct lc_entry *e = find_entry((struct lc_changeset *)cs, path);
    return e ? (size_t)(e - cs->entries) : SIZE_MAX;
}
