/* alias.c: hard-linked lower files ("alias groups").
 *
 * A lower regular file with st_nlink > 1 has several names in the
 * workspace.  When one of them is first mutated (copy-up, or an unlink /
 * rename that the overlay turns into a copy-up first), every other name of
 * the same lower inode that is still lower-only in the merged view is hard
 * linked to the new upper copy in the same step, and journaled.  So the
 * names stay one file: appending through one is seen through the others,
 * st_nlink and st_ino stay right, and the sealed upper (plain hard links)
 * shows the same under kernel overlayfs.
 *
 * The names of each multiply-linked lower inode are found by one walk of the
 * lower, made lazily at the first such copy-up and cached for the run; each
 * candidate is re-checked (same st_dev/st_ino) before use, so a host edit
 * can only make us miss a name, never link a wrong one.  Names outside the
 * workspace cannot be seen and are not linked.
 *
 * Caller holds the ns write lock (it protects ov->aliases).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#define ALIAS_MAX (1u << 20)

static int alias_push(struct ov *ov, uint64_t ino, const char *path) {
    if (ov->n_aliases == ALIAS_MAX)
        return -E2BIG;
    if (ov->n_aliases == ov->cap_aliases) {
        size_t nc = ov->cap_aliases ? ov->cap_aliases * 2 : 64;
        struct ov_alias *na = realloc(ov->aliases, nc * sizeof(*na));
        if (!na)
            return -ENOMEM;
        ov->aliases = na;
        ov->cap_aliases = nc;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    ov->aliases[ov->n_aliases++] = (struct ov_alias){.ino = ino, .path = p};
    return 0;
}

static int walk_lower(struct ov *ov, int dfd, const char *prefix, unsigned depth) {
    if (depth > 4096)
        return 0;
    _cleanup_closedir_ DIR *d = NULL;
    if (opendir_at(dfd, ".", &d) < 0)
        return 0; /* unreadable lower directory: no aliases to find there */
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        if (de->d_type != DT_DIR && de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) < 0)
            return -ENOMEM;
        if (ov_masked(ov, path) || ov_masked_id(ov, &st) || ov_masked_link(ov, &st) ||
            ov_lower_stage(ov, dirfd(d), de->d_name, st.st_mode & S_IFMT))
            continue; /* not part of the view */
        int r = 0;
        if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
            r = alias_push(ov, st.st_ino, path);
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                r = walk_lower(ov, sub, path, depth + 1);
                close(sub);
            }
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int cmp_alias(const void *a, const void *b) {
    uint64_t x = ((const struct ov_alias *)a)->ino, y = ((const struct ov_alias *)b)->ino;
    return x < y ? -1 : x > y;
}

static int aliases_build(struct ov *ov) {
    if (ov->aliases_built)
        return 0;
    int r = walk_lower(ov, ov->lower_fd, "", 0);
    if (r < 0)
        return r;
    if (ov->n_aliases)
        qsort(ov->aliases, ov->n_aliases, sizeof(*ov->aliases), cmp_alias);
    ov->aliases_built = true;
    return 0;
}

void ov_aliases_free(struct ov *ov) {
    for (size_t i = 0; i < ov->n_aliases; i++)
        free(ov->aliases[i].path);
    free(ov->aliases);
    ov->aliases = NULL;
    ov->n_aliases = ov->cap_aliases = 0;
}

/* Does the merged view show relpath as a lower-only object?  (No upper
 * object or whiteout at it, no whiteout / non-directory / opaque directory
 * on the way.) */
static bool lower_only_visible(struct ov *ov, const char *relpath) {
    _cleanup_free_ char *copy = strdup(relpath);
    if (!copy)
        return false;
    _cleanup_close_ int cur = openat(ov->upper_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        bool last = save == NULL || *save == '\0';
        if (cur < 0)
            return true;
        struct stat st;
        if (fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return false;
            close(cur);
            cur = -1;
            continue;
        }
        if (last || stage_is_whiteout(&st) || !S_ISDIR(st.st_mode))
            return false;
        if (ov_is_opaque(cur, c) != 0)
            return false;
        int next = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            return false;
        close(cur);
        cur = next;
    }
    return true;
}

/* O_PATH fd of the upper directory for merged path dirpath, copying up the
 * missing (lower) directories on the way. */
static int ensure_upper_dir(struct ov *ov, const char *dirpath, int *ret_fd) {
    _cleanup_free_ char *copy = strdup(dirpath);
    _cleanup_free_ char *sofar = calloc(1, strlen(dirpath) + 2);
    if (!copy || !sofar)
        return -ENOMEM;
    int cur = openat(ov->upper_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -errno;
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (sofar[0])
            strcat(sofar, "/");
        strcat(sofar, c);
        int next = -1;
        struct stat st;
        if (fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            next = S_ISDIR(st.st_mode) ? openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (next < 0) {
                close(cur);
                return -ENOTDIR;
            }
        } else {
            int r = errno == ENOENT ? ov_copy_up_entry(ov, cur, sofar, c, NULL, &next) : -errno;
            if (r < 0) {
                close(cur);
                return r;
            }
        }
        close(cur);
        cur = next;
    }
    *ret_fd = cur;
    return 0;
}

int ov_alias_link_group(struct ov *ov, const char *relpath, const struct stat *lst, const char *sha, const char *op,
                        const char *tmp) {
    int r = aliases_build(ov);
    if (r < 0)
        return r;
    struct ov_alias key = {.ino = lst->st_ino};
    struct ov_alias *hit = ov->n_aliases ? bsearch(&key, ov->aliases, ov->n_aliases, sizeof(key), cmp_alias) : NULL;
    if (!hit)
        return 0;
    while (hit > ov->aliases && hit[-1].ino == lst->st_ino)
        hit--;
    for (; hit < ov->aliases + ov->n_aliases && hit->ino == lst->st_ino; hit++) {
        if (strcmp(hit->path, relpath) == 0)
            continue;
        _cleanup_close_ int lfd = ov_lower_open(ov, hit->path, O_PATH);
        struct stat ast;
        if (lfd < 0 || fstatat(lfd, "", &ast, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 || ast.st_ino != lst->st_ino ||
            ast.st_dev != lst->st_dev)
            continue;
        if (!lower_only_visible(ov, hit->path))
            continue;
        struct stage_preimage rec = {
            .path = hit->path,
            .type = "reg",
            .mode = lst->st_mode & 07777,
            .size = (uint64_t)lst->st_size,
            .sha256 = sha,
            .ino = lst->st_ino,
            .op = op ? op : "link",
        };
        if ((r = stage_journal_append(ov->stage, &rec)) < 0)
            return r;
        const char *slash = strrchr(hit->path, '/');
        _cleanup_free_ char *dir = slash ? strndup(hit->path, (size_t)(slash - hit->path)) : strdup("");
        if (!dir)
            return -ENOMEM;
        _cleanup_close_ int pfd = -1;
        if ((r = ensure_upper_dir(ov, dir, &pfd)) < 0)
            return r;
        struct timespec pmtime = ov_dir_mtime(pfd); /* a name the view showed already */
        struct ov_mark pm = ov_mark(pfd);           /* the name may grow the directory */
        r = linkat(ov->work_fd, tmp, pfd, slash ? slash + 1 : hit->path, 0) < 0 ? -errno : 0;
        ov_account_mark(ov, &pm);
        ov_dir_mtime_restore(pfd, pmtime);
        ov_dir_changed(ov, pfd, slash ? slash + 1 : hit->path);
        if (r < 0)
            return r;
        if (ov->undo)
            ov_undo_created(ov, pfd, slash ? slash + 1 : hit->path, hit->path, true, false);
    }
    return 0;
}
