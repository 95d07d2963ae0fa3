/* idmap.c: as root, the read-only projections are idmapped.
 *
 * Run by root, the command is uid 0 without capabilities: the owner of
 * root's files.  On a plain bind of /etc it could read /etc/shadow, the
 * SSH host keys, /etc/ssl/private: owner permission needs no capability.
 * So while the supervisor is still in the initial user namespace (only
 * there may it idmap a mount of the host's file systems), each read-only
 * projection outside HOME is cloned (open_tree) with an idmapping that
 * shows uid/gid 0 as 65534 and every other id as unmapped: the command
 * reads what any user may read there, nothing that only root may.  The
 * clones go to the launcher as descriptors (plan mount "fd"), attached
 * where the projection goes; the launcher does not clone those itself.
 * HOME's toolchain directories are the user's own and stay plain binds.
 */
#include "launch/launch.h"
#include "policy/plan.h"
#include "policy/plan_build.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif

/* The id that root's files show as (the kernel's overflow id, "nobody"). */
#define IDMAP_ROOT_AS "65534"
/* The idmapping's user namespace: 0 inside is IDMAP_ROOT_AS outside, no other id. */
#define IDMAP_MAP "0 " IDMAP_ROOT_AS " 1\n"

int launch_idmap_projections(struct launch_plan *p, const char *home, int *ret_failed, char *why, size_t why_size) {
    int n = 0, failed = 0;
    int ns = -1, ns_err = 0;
    /* HOME's toolchains are exempt, unless HOME holds the system's own
     * directories (HOME=/, say) */
    bool exempt_home = home && !plan_home_is_system(home);
    why[0] = '\0';
    for (size_t i = 0; i < p->n_mounts; i++) {
        struct plan_mount *m = &p->mounts[i];
        const char *src = m->source ? m->source : m->path;
        struct stat st;
        if (m->kind != PLAN_BIND_RO || m->fd >= 0 || strncmp(src, "/dev/", 5) == 0 ||
            (exempt_home && path_within(src, home)) || lstat(src, &st) < 0 || S_ISLNK(st.st_mode))
            continue; /* the launcher's as before: devices, HOME's, missing, replicated symlinks */
        if (ns < 0 && !ns_err && (ns = userns_with_maps(IDMAP_MAP, IDMAP_MAP, true)) < 0) {
            ns_err = -ns;
            snprintf(why, why_size, "cannot make the idmapping's user namespace: %s", strerror(ns_err));
        }
        int t = -1, r = 0;
        if (ns_err)
            r = -ns_err;
        else if ((t = (int)syscall(SYS_open_tree, AT_FDCWD, src,
                                   OPEN_TREE_CLONE | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW | O_CLOEXEC)) < 0)
            r = -errno;
        struct mount_attr attr = {
            .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_IDMAP,
            .userns_fd = (uint64_t)(ns < 0 ? 0 : ns),
        };
        if (r == 0 && syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
            r = -errno;
        /* above the descriptors exec_run hands over as 3, 4, ... */
        if (r == 0 && (m->fd = fcntl(t, F_DUPFD_CLOEXEC, 16)) < 0)
            r = -errno;
        if (t >= 0)
            close(t);
        if (r < 0) { /* this one stays a plain bind (the launcher's) */
            if (!failed && !why[0])
                snprintf(why, why_size, "%s: %s", src, strerror(-r));
            failed++;
            continue;
        }
        n++;
    }
    if (ns >= 0)
        close(ns);
    *ret_failed = failed;
    return n;
}

void launch_idmap_close(struct launch_plan *p) {
    for (size_t i = 0; i < p->n_mounts; i++)
        if (p->mounts[i].fd >= 0) {
            close(p->mounts[i].fd);
            p->mounts[i].fd = -1;
        }
}
