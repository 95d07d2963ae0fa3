/* pending_apply.c: the workspaces an interrupted apply left half-written.
 *
 * An apply cut short (killed, a crash) leaves its workspace part old, part
 * new until 'pvisor apply' of the same stage resumes it (docs/lifecycle.md,
 * "apply").  A run on that workspace in the meantime would build on the
 * half-written tree, and an apply of another stage would write over it;
 * the resume would then meet files that are neither the old nor the new
 * version, and could not finish.  So apply records itself in
 * STATE/applying/ before it writes (one file per stage directory:
 * "STAGE\nWORKSPACE\n") and removes the record once nothing of that stage
 * is pending; run, and apply of another stage, refuse a workspace that
 * overlaps one whose record names a stage with an apply intent.  A record
 * whose stage holds no intent (the apply never began writing, or it was
 * completed or dropped since) is stale, and removed where met.  The record
 * is not flushed: a power loss may lose it (the intent itself is durable),
 * and then only this check, not the resume, is lost.
 *
 * Applies that run at the same time are serialized by flock(2) on the
 * workspace's directories, whoever runs them and whatever their state
 * directory: an apply holds its workspace exclusively and every ancestor
 * shared, so two applies into one workspace, or into one and a directory
 * inside it, cannot both pass their conflict checks and then write over
 * each other.  A record found while its workspace is held names an apply
 * still going, not an interrupted one.
 */
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define APPLYING_DIR "applying"
#define APPLY_INTENT "apply-intent" /* lifecycle.h: LC_APPLY_INTENT */

bool pending_apply_intent(const char *stage) {
    _cleanup_close_ int d = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    return d >= 0 && fstatat(d, APPLY_INTENT, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Is the record of this stage (without an intent) stale: the stage gone,
 * applied or dropped?  Not when it cannot be told (EACCES, EIO...). */
static bool stage_done(const char *stage) {
    _cleanup_close_ int d = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return errno == ENOENT || errno == ENOTDIR;
    struct stat st;
    return fstatat(d, "applied", &st, AT_SYMLINK_NOFOLLOW) == 0 || fstatat(d, "dropped", &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The record's name: the stage directory's identity. */
static int record_name(const char *stage, char name[64]) {
    struct stat st;
    if (stat(stage, &st) < 0)
        return -errno;
    snprintf(name, 64, "%llx-%llx", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    return 0;
}

static int open_applying(bool create) {
    _cleanup_free_ char *sd = NULL, *dir = NULL;
    int r = state_dir(&sd);
    if (r < 0)
        return r;
    if (!(dir = path_join(sd, APPLYING_DIR)))
        return -ENOMEM;
    if (create && (r = mkdir_p(dir, 0700)) < 0)
        return r;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int pending_apply_record(const char *stage, const char *workspace) {
    char name[64];
    int r = record_name(stage, name);
    if (r < 0)
        return r;
    _cleanup_close_ int d = open_applying(true);
    if (d < 0)
        return d;
    _cleanup_free_ char *text = NULL;
    size_t sl = strlen(stage), wl = strlen(workspace);
    if (!(text = malloc(sl + wl + 2)))
        return -ENOMEM;
    memcpy(text, stage, sl + 1);
    memcpy(text + sl + 1, workspace, wl + 1);
    return write_file_atomic_as(d, name, text, sl + wl + 2, 0600, WRITE_NO_SYNC);
}

void pending_apply_clear(const char *stage) {
    char name[64];
    if (pending_apply_intent(stage) || record_name(stage, name) < 0)
        return;
    _cleanup_close_ int d = open_applying(false);
    if (d >= 0)
        (void)unlinkat(d, name, 0);
}

int pending_apply_find(const char *workspace, const char *except_stage, char **ret_stage, char **ret_workspace) {
    *ret_stage = *ret_workspace = NULL;
    char self[64] = "";
    if (except_stage && record_name(except_stage, self) < 0)
        self[0] = '\0';
    int d = open_applying(false);
    if (d == -ENOENT)
        return 0;
    if (d < 0)
        return d;
    DIR *dir = fdopendir(d);
    if (!dir) {
        int e = errno;
        close(d);
        return -e;
    }
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(dir))) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, self) == 0)
            continue;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (read_file_at(dirfd(dir), de->d_name, 2 * PATH_MAX + 4, &text, &len) < 0)
            continue;
        /* "STAGE\0WORKSPACE\0" */
        char *ws = memchr(text, '\0', len);
        ws = ws && ws + 1 < text + len ? ws + 1 : NULL;
        if (!ws || !memchr(ws, '\0', len - (size_t)(ws - text)) || text[0] != '/' || ws[0] != '/')
            continue; /* not ours to judge: left alone */
        /* another stage now at that path (the recorded one was removed):
         * its intent is not this record's */
        char now[64];
        int rn = record_name(text, now);
        if ((rn == 0 && strcmp(now, de->d_name) != 0) || rn == -ENOENT || rn == -ENOTDIR) {
            (void)unlinkat(dirfd(dir), de->d_name, 0);
            continue;
        }
        if (!pending_apply_intent(text)) {
            if (stage_done(text)) /* completed, dropped, or gone */
                (void)unlinkat(dirfd(dir), de->d_name, 0);
            continue;
        }
        if (!path_overlaps(ws, workspace))
            continue;
        *ret_stage = strdup(text);
        *ret_workspace = strdup(ws);
        found = *ret_stage && *ret_workspace ? 1 : -ENOMEM;
    }
    closedir(dir);
    if (found < 0) {
        free(*ret_stage);
        free(*ret_workspace);
        *ret_stage = *ret_workspace = NULL;
    }
    return found;
}

void ws_lock_release(struct ws_lock *l) {
    for (size_t i = 0; i < l->n; i++)
        close(l->fd[i]);
    free(l->fd);
    *l = (struct ws_lock){0};
}

/* Lock the directory at path (shared or exclusive) into l: 0, -EWOULDBLOCK
 * when another open description holds it, or 0 without a lock where there
 * is none to take (unreadable, a file system without flock).  An exclusive
 * lock is tried for a few milliseconds: a run's probe (ws_apply_running)
 * holds a shared one for an instant. */
static int lock_dir(struct ws_lock *l, const char *path, bool exclusive) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    for (int tries = exclusive ? 10 : 1;; tries--) {
        if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
            break;
        int e = errno;
        if (e == EWOULDBLOCK && tries > 1) {
            nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
            continue;
        }
        close(fd);
        return e == EWOULDBLOCK ? -EWOULDBLOCK : 0;
    }
    l->fd[l->n++] = fd;
    return 0;
}

/* The workspace (exclusive when own_exclusive) and every directory above
 * it (shared), into l. */
static int lock_levels(const char *workspace, bool own_exclusive, struct ws_lock *l) {
    *l = (struct ws_lock){0};
    _cleanup_free_ char *p = realpath(workspace, NULL);
    if (!p)
        return 0; /* apply names the missing workspace itself */
    size_t depth = 1;
    for (const char *c = p; *c; c++)
        depth += *c == '/';
    if (!(l->fd = calloc(depth, sizeof *l->fd)))
        return -ENOMEM;
    for (bool own = true;; own = false) {
        int r = lock_dir(l, p, own && own_exclusive);
        if (r < 0) {
            ws_lock_release(l);
            return r;
        }
        char *s = strrchr(p, '/');
        if (!s || s[1] == '\0')
            return 0; /* "/" done */
        s[s == p] = '\0';
    }
}

int ws_lock_apply(const char *workspace, struct ws_lock *l) {
    return lock_levels(workspace, true, l);
}

bool ws_apply_running(const char *workspace) {
    struct ws_lock l;
    int r = lock_levels(workspace, false, &l);
    ws_lock_release(&l);
    return r == -EWOULDBLOCK;
}
