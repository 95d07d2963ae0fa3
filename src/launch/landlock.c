/* landlock.c: the launcher's Landlock ruleset.
 *
 * Negotiates the running kernel's ABI and handles every filesystem right
 * that ABI knows (so nothing is silently left unrestricted), plus, when the
 * network is denied, the ABI 4 TCP rights (no bind; connect only to the
 * egress broker's port with --allow-net, otherwise to none), and
 * the ABI 6 scopes (abstract unix sockets and signals limited to the
 * sandbox's own domain).  Rules grant:
 *   read-only projections  -> execute, read file, read dir
 *   read-write mounts      -> everything but making device nodes
 *   /dev                   -> read dir; read/write/ioctl on the exact nodes
 *                             of plan_dev_nodes and on /dev/pts
 *   /proc                  -> read
 *   /                      -> read dir (the read-only tmpfs root)
 * A rule's path is opened O_PATH inside the synthetic root, after
 * pivot_root, so it names what the command will see.
 */
#include "launch/launch.h"
#include "policy/plan.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's headers stop at ABI 2; later rights are defined here. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define PV_LL_NET_BIND_TCP (1ULL << 0)
#define PV_LL_NET_CONNECT_TCP (1ULL << 1)
#define PV_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define PV_LL_SCOPE_SIGNAL (1ULL << 1)

struct pv_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct pv_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
} __attribute__((packed));
#define PV_LL_RULE_NET_PORT 2

struct pv_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static uint64_t fs_rights_for_abi(int abi) {
    uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

static int add_rule(int ruleset, const char *path, uint64_t access, uint64_t handled) {
    _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* optional projection absent on this host */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    /* Directory-only rights on a file rule are EINVAL: keep file rights. */
    if (!S_ISDIR(st.st_mode))
        access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                  LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
    struct pv_path_beneath_attr pb = {.allowed_access = access & handled, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        return -errno;
    return 0;
}

int launch_landlock(const struct launch_plan *p, int *ret_abi, uint64_t *ret_handled_fs, uint64_t *ret_handled_net,
                    uint64_t *ret_scoped, const char **ret_step) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) {
        *ret_step = "Landlock: not built into this kernel or not in the lsm= boot parameter (add landlock to lsm=)";
        return abi < 0 ? -errno : -EOPNOTSUPP;
    }
    struct pv_ruleset_attr attr = {.handled_access_fs = fs_rights_for_abi((int)abi)};
    size_t attr_size = sizeof attr.handled_access_fs;
    if (abi >= 4) {
        attr_size = offsetof(struct pv_ruleset_attr, scoped);
        if (p->unshare_net && !p->loopback_tcp)
            attr.handled_access_net = PV_LL_NET_BIND_TCP | PV_LL_NET_CONNECT_TCP;
    }
    if (abi >= 6) {
        attr_size = sizeof attr;
        attr.scoped = PV_LL_SCOPE_ABSTRACT_UNIX_SOCKET | PV_LL_SCOPE_SIGNAL;
    }
    _cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rs < 0) {
        *ret_step = "landlock_create_ruleset";
        return -errno;
    }
    const uint64_t h = attr.handled_access_fs;
    const uint64_t ro = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    const uint64_t rw = h & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
    const uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                         LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
    int r = 0;
    *ret_step = "landlock_add_rule";
    for (size_t i = 0; i < p->n_mounts && r >= 0; i++) {
        const struct plan_mount *m = &p->mounts[i];
        switch (m->kind) {
        case PLAN_BIND_RO: r = add_rule(rs, m->path, ro, h); break;
        case PLAN_BIND_RW:
        case PLAN_TMPFS: r = add_rule(rs, m->path, rw, h); break;
        case PLAN_HIDE: break;
        }
    }
    /* /dev: its listing; read, write and ioctl on the exact nodes every
     * sandbox gets and on the private devpts.  Not on /dev as a whole: a
     * rule there also covers a device an --access ro: grant projects below
     * it, which a read-only mount does not stop from being written
     * (mounts.c keeps the nodes of /dev sources usable), so ro: would be
     * rw:.  A grant's own rule gives it what it asked for. */
    if (r >= 0)
        r = add_rule(rs, "/dev", LANDLOCK_ACCESS_FS_READ_DIR, h);
    for (size_t i = 0; plan_dev_nodes[i] && r >= 0; i++)
        r = add_rule(rs, plan_dev_nodes[i], dev, h);
    if (r >= 0)
        r = add_rule(rs, "/dev/pts", dev, h);
    if (r >= 0)
        r = add_rule(rs, "/dev/shm", rw, h);
    if (r >= 0)
        r = add_rule(rs, "/proc", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, h);
    if (r >= 0)
        r = add_rule(rs, "/", LANDLOCK_ACCESS_FS_READ_DIR, h);
    if (r < 0)
        return r;
    if (p->proxy_port && (attr.handled_access_net & PV_LL_NET_CONNECT_TCP)) {
        struct pv_net_port_attr np = {.allowed_access = PV_LL_NET_CONNECT_TCP, .port = p->proxy_port};
        if (syscall(SYS_landlock_add_rule, rs, PV_LL_RULE_NET_PORT, &np, 0) < 0) {
            *ret_step = "landlock_add_rule (TCP connect to the egress broker)";
            return -errno;
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        *ret_step = "PR_SET_NO_NEW_PRIVS";
        return -errno;
    }
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
        *ret_step = "landlock_restrict_self";
        return -errno;
    }
    *ret_abi = (int)abi;
    *ret_handled_fs = attr.handled_access_fs;
    *ret_handled_net = attr.handled_access_net;
    *ret_scoped = attr.scoped;
    return 0;
}
