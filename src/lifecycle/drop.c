/* drop.c: discard a stage.
 *
 * Order: take the run lock (a live run holds it: refused), publish the
 * durable 'dropped' marker, then remove upper/, work/, the journal, the
 * origin map, an apply intent and checkpoints.  version, meta.json, lock and
 * the marker stay, so `pvisor list` / `status --review` show the stage as
 * dropped; removing the directory afterwards is always safe.  A crash in the
 * middle leaves a dropped stage with some leftovers, which the next drop
 * removes.  A stage with an interrupted apply is only dropped when forced
 * (the workspace then keeps the part that was applied; apply's temp files
 * are removed).
 */
#include "lifecycle/lc-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

static int remove_entry(int dir_fd, const char *name) {
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    /* upper/ may hold directories the agent made unreadable or read-only
     * (remove_tree_contents makes them 0700), nested deeper than review
     * and apply go: a drop removes any of it */
    _cleanup_close_ int sub = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 && errno == EACCES && chmod_nofollow_at(dir_fd, name, 0700) == 0)
        sub = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return -errno;
    int r = remove_tree_contents(sub, UINT_MAX);
    if (r < 0)
        return r;
    return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* What a stage holds besides its markers: the agent's content and its
 * copies (checkpoints; .restore and .restore-old, what a failed or
 * interrupted restore left). */
static int remove_content(int dir) {
    static const char *const names[] = {"upper",          "work",           "journal",    "origin",
                                        LC_APPLY_CREATED, LC_APPLY_WRITTEN, LC_PREIMAGES, LC_CHECKPOINTS,
                                        ".restore",       ".restore-old",   "cookie-key"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        int r = remove_entry(dir, names[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

int lc_drop(const char *stage_path, bool force) {
    _cleanup_close_ int dir = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -errno;
    struct stat st;
    if (fstatat(dir, "version", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -EINVAL;
    _cleanup_close_ int lock = openat(dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0)
        return -errno;
    if (flock(lock, LOCK_EX | LOCK_NB) < 0)
        return errno == EWOULDBLOCK ? -EBUSY : -errno;
    if (fstatat(dir, LC_APPLIED, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* Applied: its changes are in the workspace, what is left here is
         * a copy of them (a whole tree, for the life of the stage): that
         * goes; the markers stay, so it still reads 'applied'. */
        int r = remove_content(dir);
        return r < 0 ? r : fsync(dir) < 0 ? -errno : 1;
    }
    if (fstatat(dir, LC_APPLY_INTENT, &st, AT_SYMLINK_NOFOLLOW) == 0 && !force)
        return -EINPROGRESS;
    /* apply's temp files: those of a pending intent (--force), and those of
     * an apply whose intent rename a crash lost (see apply.c) */
    struct lc_stage *lst = NULL;
    if (lc_stage_open(stage_path, &lst) == 0) {
        lc_apply_remove_temps(dir, lst->ws_fd, lst->upper_fd);
        lc_stage_free(lst);
    }
    if (fstatat(dir, LC_DROPPED, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char t[32], buf[40];
        format_time_utc(&now, t);
        int m = snprintf(buf, sizeof buf, "%s\n", t);
        int r = write_file_atomic(dir, LC_DROPPED, buf, (size_t)m, 0600);
        if (r < 0)
            return r;
    }
    static const char *const markers[] = {LC_APPLY_INTENT, "sealed"};
    int r = remove_content(dir);
    for (size_t i = 0; i < ARRAY_SIZE(markers) && r >= 0; i++)
        r = remove_entry(dir, markers[i]);
    if (r < 0)
        return r;
    if (fsync(dir) < 0)
        return -errno;
    return 0;
}
