/* statedir.c: where pvisor keeps its runs, and whether the directories
 * above it are safe to trust (see util.h). */
#include "util/util.h"
#include "util/cleanup.h"

#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>

int state_dir(char **ret_path) {
    const char *x = getenv("XDG_STATE_HOME");
    char *r;
    if (x && x[0] == '/') {
        r = path_join(x, "pvisor");
        /* where it is, symlinks and '..' resolved (WS/../state: the
         * sandbox's plan takes normalised paths only) */
        char *res = NULL;
        if (r && path_resolve(r, &res) > 0) {
            free(r);
            r = res;
        }
    } else {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/') {
            struct passwd *pw = getpwuid(getuid());
            if (!pw || !pw->pw_dir || pw->pw_dir[0] != '/')
                return -ENOENT;
            home = pw->pw_dir;
        }
        if (asprintf(&r, "%s/.local/state/pvisor", strcmp(home, "/") == 0 ? "" : home) < 0)
            r = NULL;
    }
    if (!r)
        return -ENOMEM;
    *ret_path = r;
    return 0;
}

/* Is path, where it is a directory, ours, and no one else may write in
 * it?  0, or -EPERM. */
static int ours_alone(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) /* absent, or a parent is no directory: the caller's error then */
        return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return 0; /* likewise (runs a file: "Not a directory" when read or made) */
    return st.st_uid == geteuid() && !(st.st_mode & 022) ? 0 : -EPERM;
}

/* May a group's members other than us write in a directory of that
 * group?  Not when it is our own primary group and lists no one else (a
 * user's private group, umask 002's directories). */
static bool group_shared(gid_t gid) {
    if (gid != getegid())
        return true;
    struct group *gr = getgrgid(gid);
    struct passwd *pw = getpwuid(geteuid());
    if (!gr || !pw)
        return true;
    for (char **m = gr->gr_mem; *m; m++)
        if (strcmp(*m, pw->pw_name) != 0)
            return true;
    return false;
}

int path_parent_unsafe(const char *path, char **ret_bad) {
    _cleanup_free_ char *res = NULL;
    int r = path_resolve(path, &res);
    if (r < 0)
        return r;
    const char *p = r > 0 ? res : path;
    if (p[0] != '/')
        return 0;
    uid_t me = geteuid();
    /* each directory above it: "/", "/a", "/a/b" for /a/b/c */
    for (size_t i = 0; p[i]; i++) {
        if (p[i] != '/' || !p[i + 1])
            continue;
        _cleanup_free_ char *dir = strndup(p, i ? i : 1);
        if (!dir)
            return -ENOMEM;
        struct stat st;
        if (stat(dir, &st) < 0)
            return 0; /* absent (made ours), or not to be looked at: the caller's own error then */
        bool others_write = (st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && group_shared(st.st_gid));
        /* its owner, or anyone who may write in it without the sticky
         * bit (/tmp's), may rename what is below it away and put their
         * own in its place */
        /* in a user namespace (unshare -Ur, a rootless container), root's
         * directories show the overflow uid: whoever owns it is outside
         * the namespace, taken for root's */
        bool owner_ok = st.st_uid == 0 || st.st_uid == me ||
                        (st.st_uid == (uid_t)sysctl_long("/proc/sys/kernel/overflowuid") && !userns_is_initial());
        if (!owner_ok || (others_write && !(st.st_mode & S_ISVTX))) {
            if (ret_bad)
                *ret_bad = TAKE_PTR(dir);
            return 1;
        }
    }
    return 0;
}

int runs_dir(bool create, char **ret_path) {
    _cleanup_free_ char *sd = NULL;
    int r = state_dir(&sd);
    if (r < 0)
        return r;
    char *p = path_join(sd, "runs");
    if (!p)
        return -ENOMEM;
    /* another user's state directory (made first in a shared XDG_STATE_HOME)
     * would let them replace the runs, their Bundles and stages, and the
     * agent-written record (found by a red-team pass), as would one others
     * may write in: refused, as ssh refuses such a ~/.ssh */
    if ((r = ours_alone(sd)) < 0 || (r = ours_alone(p)) < 0 || (r = path_parent_unsafe(sd, NULL)) != 0) {
        if (r > 0)
            r = -EPERM; /* a directory above it: as much theirs */
        free(p);
        return r;
    }
    if (create) {
        r = mkdir_p(p, 0700);
        if (r < 0) {
            free(p);
            return r;
        }
    }
    *ret_path = p;
    return 0;
}
